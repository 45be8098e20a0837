//! Profiles learned from the simulator's task records, and their file.

mod common;

use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow,
    Workload,
};
use weir_sim::{SimConfig, Simulation};
use weir_slo::{observations, JobProfile, QUANTILE_LEVELS};

const CLUSTER: &str = "
version: 1
nodes:
  - {count: 8, resources: {cpu: 4000, memory: 16g}}
queues:
  - {name: batch}
";

/// Three runs of a job: 100 tasks of 10–20 s (uniform) failing 10% of attempts, then one of 5 s.
fn workflow() -> Workflow {
    let stage = |name: &str, after: Vec<usize>, tasks, duration, failure_probability| Stage {
        name: name.into(),
        after,
        tasks,
        resources: Resources::new(1000, 1024, 0),
        duration,
        failure_probability,
        gang: false,
        walltime: None,
        placement: Default::default(),
        recorded_failure: false,
    };
    Workflow {
        name: "nightly".into(),
        queue: QueuePath::parse("root.batch").expect("path"),
        tier: 1,
        slo: Some(Duration::from_secs(3600)),
        priority: None,
        user: "u".into(),
        arrival: Arrival::At(vec![Time::ZERO, Time(3_600_000), Time(7_200_000)]),
        jobs: vec![JobTemplate {
            name: "etl".into(),
            after: vec![],
            stages: vec![
                stage(
                    "map",
                    vec![],
                    100,
                    Distribution::Uniform { min: Duration::from_secs(10), max: Duration::from_secs(20) },
                    0.1,
                ),
                stage("merge", vec![0], 1, Distribution::Fixed(Duration::from_secs(5)), 0.0),
            ],
            gang: false,
        }],
    }
}

fn learned() -> JobProfile {
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).unwrap_or_else(|e| panic!("{e}"));
    let wf = workflow();
    let config = SimConfig { seed: 3, am: None, max_attempts: 20, ..SimConfig::default() };
    let mut sim = Simulation::new(cluster, Workload { workflows: vec![wf.clone()] }, config)
        .unwrap_or_else(|e| panic!("{e}"));
    sim.keep_task_records();
    let mut records = Vec::new();
    while sim.step().unwrap_or_else(|e| panic!("{e}")) {
        records.extend(sim.take_task_records());
    }
    let out = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    let init: Vec<Duration> =
        out.job_records.iter().filter_map(|j| Some(j.first_start?.since(j.submit))).collect();
    JobProfile::build(&wf.name, &wf.jobs[0], 3, &observations(&records, &wf, 0, 0), &init)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_profile_learns_durations_and_failures_from_task_records() {
    let p = learned();
    assert_eq!((p.workflow.as_str(), p.job.as_str(), p.stages.len()), ("nightly", "etl", 2));
    let map = &p.stages[0];
    assert_eq!((map.tasks, map.after.clone()), (100, vec![]));
    assert_eq!(p.stages[1].after, vec![0]);
    // Uniform on 10–20 s: every quantile inside, the median near 15 s, the mean near 15 s.
    assert!(
        map.duration_ms[0] >= 10_000 && *map.duration_ms.last().expect("max") <= 20_000,
        "{:?}",
        map.duration_ms
    );
    let median = map.duration_ms[QUANTILE_LEVELS.iter().position(|&q| q == 0.5).expect("median")];
    assert!((14_000..=16_000).contains(&median), "median {median}");
    assert!((map.mean_ms - 15_000.0).abs() < 700.0, "mean {}", map.mean_ms);
    // 10% of ~333 attempts fail.
    assert!((0.06..0.14).contains(&map.failure_probability), "{}", map.failure_probability);
    assert_eq!(p.stages[1].duration_ms, vec![5000; QUANTILE_LEVELS.len()]);
    assert_eq!(p.stages[1].failure_probability, 0.0);
    // The cluster is idle: every run's first task starts at submission.
    assert_eq!(p.init_ms, 0);
}

#[test]
fn a_profile_file_round_trips_and_bad_ones_name_the_field() {
    let p = learned();
    let text = p.to_json();
    assert_eq!(JobProfile::from_json("nightly.profile.json", &text).unwrap_or_else(|e| panic!("{e}")), p);
    let cases = [
        (text.replacen("\"version\": 1", "\"version\": 2", 1), "nightly.profile.json: version: 2 is not"),
        (
            text.replacen("\"after\": [\n        0\n      ]", "\"after\": [\n        1\n      ]", 1),
            "stages[1] (merge).after: 1 is not an earlier stage",
        ),
        (
            text.replacen("\"failure_probability\": 0.0\n", "\"failure_probability\": 1.5\n", 1),
            "stages[1] (merge).failure_probability: 1.5 is not in [0, 1)",
        ),
        (text.replacen("\"runs\"", "\"rnus\"", 1), "unknown field `rnus`"),
    ];
    for (bad, says) in cases {
        assert_ne!(bad, text, "the case edits the file: {says}");
        let e = JobProfile::from_json("nightly.profile.json", &bad).expect_err(says).to_string();
        assert!(e.contains(says), "{e}");
    }
}
