//! The recorded runs of a window as a workload the simulator can replay (`GET /v1/replay`, and
//! the scheduled planner's validation): every workflow that ran, with a run at each moment one
//! was submitted (`at`, relative to the window's start) and each stage's task durations drawn
//! from the durations its tasks' successful attempts actually took (`empirical`). The
//! workflow's shape comes from its latest run in the window, its queue and tier from there too.
//! Stages without a successful attempt keep the duration the workflow file gave them, or 1 s.

use std::collections::BTreeMap;

use weir_model::{DistributionSpec, Duration, WorkflowSpec, Workload, WorkloadFile};
use weir_store::{AttemptDuration, RunRecordRow};

/// At most this many samples per stage (evenly spaced over the sorted durations, so the
/// distribution's shape is kept).
pub const MAX_SAMPLES: usize = 500;

/// What the replay is built from.
pub struct Recorded<'a> {
    pub since_ms: i64,
    pub runs: &'a [RunRecordRow],
    /// The spec (JSON) of each workflow's latest run, by workflow name.
    pub specs: &'a BTreeMap<String, String>,
    /// How long successful attempts ran.
    pub durations: &'a [AttemptDuration],
    pub cluster: &'a weir_model::ClusterConfig,
}

/// The workload file, and the workflows left out with why.
pub fn workload(rec: &Recorded) -> (WorkloadFile, Vec<String>) {
    let mut skipped = Vec::new();
    let workflow_of: BTreeMap<i64, &RunRecordRow> = rec.runs.iter().map(|r| (r.id, r)).collect();
    // (workflow, job index, stage index) → durations.
    let mut samples: BTreeMap<(&str, u32, u32), Vec<u64>> = BTreeMap::new();
    for d in rec.durations {
        if let Some(r) = workflow_of.get(&d.run) {
            samples.entry((r.workflow.as_str(), d.job, d.stage)).or_default().push(d.ms.max(1) as u64);
        }
    }
    let mut by_workflow: BTreeMap<&str, Vec<&RunRecordRow>> = BTreeMap::new();
    for r in rec.runs {
        by_workflow.entry(r.workflow.as_str()).or_default().push(r);
    }
    let mut workflows = Vec::new();
    for (name, runs) in by_workflow {
        let Some(latest) = runs.iter().max_by_key(|r| r.id) else { continue };
        let Some(text) = rec.specs.get(name) else {
            skipped.push(format!("{name}: its workflow is not stored"));
            continue;
        };
        let mut spec: WorkflowSpec = match serde_json::from_str(text) {
            Ok(s) => s,
            Err(e) => {
                skipped.push(format!("{name}: its stored workflow does not parse: {e}"));
                continue;
            }
        };
        // The validated order of jobs and stages is what the stored indices count in.
        let file = WorkloadFile { version: 1, workflows: vec![spec.clone()] };
        let order: Vec<(String, Vec<String>)> = match Workload::live_from_file("replay", &file, rec.cluster) {
            Ok(w) => w.workflows[0]
                .jobs
                .iter()
                .map(|j| (j.name.clone(), j.stages.iter().map(|s| s.name.clone()).collect()))
                .collect(),
            Err(e) => {
                skipped.push(format!("{name}: no longer valid on the cluster: {e}"));
                continue;
            }
        };
        let mut at: Vec<Duration> =
            runs.iter().map(|r| Duration((r.submitted_ms - rec.since_ms).max(0) as u64)).collect();
        at.sort();
        spec.queue = Some(latest.queue.clone());
        spec.project = None;
        spec.tier = Some(latest.tier);
        spec.start = None;
        spec.every = None;
        spec.arrivals = None;
        spec.at = Some(at);
        for job in &mut spec.jobs {
            let j = order.iter().position(|(n, _)| *n == job.name);
            for stage in &mut job.stages {
                let s = j.and_then(|j| order[j].1.iter().position(|n| *n == stage.name).map(|s| (j, s)));
                let drawn = s.and_then(|(j, s)| samples.get(&(name, j as u32, s as u32)));
                stage.duration = match drawn {
                    Some(v) if !v.is_empty() => Some(DistributionSpec::Empirical(thin(v))),
                    _ => stage.duration.clone().or(Some(DistributionSpec::Fixed(Duration(1000)))),
                };
                stage.command = None;
                stage.spark = None;
                stage.env.clear();
                stage.max_attempts = None;
                stage.failure_probability = None;
            }
        }
        workflows.push(spec);
    }
    (WorkloadFile { version: 1, workflows }, skipped)
}

/// At most [`MAX_SAMPLES`] of the durations, evenly spaced over their sorted order.
fn thin(v: &[u64]) -> Vec<Duration> {
    let mut v = v.to_vec();
    v.sort_unstable();
    if v.len() <= MAX_SAMPLES {
        return v.into_iter().map(Duration).collect();
    }
    (0..MAX_SAMPLES).map(|i| Duration(v[i * (v.len() - 1) / (MAX_SAMPLES - 1)])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = "version: 1\nnodes: [{count: 1, resources: {cpu: 8000, memory: 16g}}]\nqueues:\n  - name: ads\n    children: [{name: tier1, tier: 1}]\n";

    #[test]
    fn recorded_runs_become_arrivals_and_empirical_durations() {
        let cluster = weir_model::ClusterConfig::from_yaml("c", CLUSTER).expect("cluster");
        // Jobs listed out of order: `publish` comes after `extract`, so its index is 1.
        let spec = serde_json::json!({
            "name": "report", "queue": "root.ads.tier1", "slo": "1m",
            "jobs": [
                {"name": "publish", "after": ["extract"], "stages": [{"name": "up", "tasks": 1, "resources": {"cpu": 1000, "memory": 512}, "command": "true"}]},
                {"name": "extract", "stages": [{"name": "q", "tasks": 2, "resources": {"cpu": 1000, "memory": 512}, "command": "sleep 1"}]}
            ]
        })
        .to_string();
        let run = |id, submitted| RunRecordRow {
            id,
            workflow: "report".into(),
            project: "ads".into(),
            tier: 1,
            cluster: "c".into(),
            queue: "root.ads.tier1".into(),
            state: "succeeded".into(),
            submitted_ms: submitted,
            started_ms: None,
            finished_ms: None,
            slo_ms: Some(60_000),
        };
        let runs = [run(1, 10_000), run(2, 70_000)];
        let specs = BTreeMap::from([("report".to_string(), spec)]);
        let d = |run, job, ms| AttemptDuration { run, job, stage: 0, ms };
        let durations = [d(1, 0, 900), d(1, 0, 1100), d(2, 0, 1000), d(2, 1, 50)];
        let (file, skipped) = workload(&Recorded {
            since_ms: 0,
            runs: &runs,
            specs: &specs,
            durations: &durations,
            cluster: &cluster,
        });
        assert!(skipped.is_empty(), "{skipped:?}");
        let wf = &file.workflows[0];
        assert_eq!(wf.at, Some(vec![Duration(10_000), Duration(70_000)]));
        let extract = wf.jobs.iter().find(|j| j.name == "extract").expect("extract");
        assert_eq!(
            extract.stages[0].duration,
            Some(DistributionSpec::Empirical(vec![Duration(900), Duration(1000), Duration(1100)]))
        );
        let publish = wf.jobs.iter().find(|j| j.name == "publish").expect("publish");
        assert_eq!(publish.stages[0].duration, Some(DistributionSpec::Empirical(vec![Duration(50)])));
        assert_eq!(publish.stages[0].command, None);
        // The simulator accepts it.
        let text = serde_json::to_string(&file).expect("json");
        let reread: WorkloadFile = serde_json::from_str(&text).expect("reread");
        Workload::from_file("replay", &reread, &cluster).expect("a valid workload");
    }

    #[test]
    fn thinning_keeps_the_ends() {
        let v: Vec<u64> = (1..=10_000).collect();
        let t = thin(&v);
        assert_eq!(t.len(), MAX_SAMPLES);
        assert_eq!((t[0], t[MAX_SAMPLES - 1]), (Duration(1), Duration(10_000)));
    }
}
