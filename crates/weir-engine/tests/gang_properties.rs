//! Invariants under random workloads of gangs, GPU fractions and model selectors, with and
//! without EASY backfilling, preemption, placeholder timeouts and nodes coming and going: no node
//! or GPU over-committed, no gang partly running (`check_invariants`), every gang started whole
//! in one pass, every container on a node its selector allows, and the same inputs give the
//! same decisions.

use std::collections::BTreeMap;

use proptest::prelude::*;
use weir_engine::{ContainerId, Decision, Engine, JobId, JobSpec, NodeId, NodeSpec, Request, Selector};
use weir_model::{ClusterConfig, Duration, QueuePath, Resources, Time};

const CLUSTER: &str = r#"
version: 1
scheduler:
  gang_timeout: 30s
  queue_max_am_share_default: -1
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 3s}
nodes:
  - {count: 3, resources: {cpu: 8000, memory: 16384, gpu: 4}, gpu_model: A100, label: gpu}
  - {count: 2, resources: {cpu: 8000, memory: 16384, gpu: 2}, gpu_model: T4, label: gpu}
  - {count: 3, resources: {cpu: 4000, memory: 8192}, label: cpu}
queues:
  - {name: hpc, policy: fifo, allow_preemption_from: true, weight: 0.5}
  - {name: ml, allow_preemption_from: true, gang_preemption: protected}
  - {name: prod, fair_share_preemption_timeout: 5s, fair_share_preemption_threshold: 0.9, weight: 2}
"#;

const LEAVES: [&str; 3] = ["hpc", "ml", "prod"];
const NODES: u64 = 8;

#[derive(Clone, Debug)]
enum Op {
    /// A gang of `count` tasks (`gpus` whole GPUs each, or `milli` thousandths of one).
    Gang {
        leaf: usize,
        count: u32,
        cpu: u64,
        gpus: u64,
        milli: u32,
        model: Option<usize>,
        walltime: Option<u64>,
    },
    /// A job of independent tasks.
    Plain {
        leaf: usize,
        count: u32,
        cpu: u64,
        milli: u32,
        model: Option<usize>,
    },
    FinishSome {
        job: usize,
        n: usize,
    },
    FinishJob {
        job: usize,
    },
    Tick {
        secs: u64,
    },
    NodeDown {
        node: u64,
    },
    NodeUp {
        node: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 1u32..8, 1u64..4, 0u64..3, prop_oneof![Just(0u32), 100u32..1000], proptest::option::of(0..2usize), proptest::option::of(5u64..60))
            .prop_map(|(leaf, count, cpu, gpus, milli, model, walltime)| {
                let milli = if gpus > 0 { 0 } else { milli };
                Op::Gang { leaf, count, cpu: cpu * 1000, gpus, milli, model, walltime }
            }),
        3 => (0..3usize, 1u32..10, 1u64..4, prop_oneof![Just(0u32), 100u32..1000], proptest::option::of(0..2usize))
            .prop_map(|(leaf, count, cpu, milli, model)| Op::Plain { leaf, count, cpu: cpu * 500, milli, model }),
        4 => (0usize..20, 1usize..6).prop_map(|(job, n)| Op::FinishSome { job, n }),
        1 => (0usize..20).prop_map(|job| Op::FinishJob { job }),
        3 => (1u64..20).prop_map(|secs| Op::Tick { secs }),
        1 => (0..NODES).prop_map(|node| Op::NodeDown { node }),
        1 => (0..NODES).prop_map(|node| Op::NodeUp { node }),
    ]
}

fn node_spec(cfg: &ClusterConfig, id: u64) -> NodeSpec {
    let mut left = id;
    for g in &cfg.nodes {
        if left < u64::from(g.count) {
            return NodeSpec {
                id: NodeId(id),
                resources: g.resources,
                label: g.label.clone(),
                gpu_model: g.gpu_model.clone(),
            };
        }
        left -= u64::from(g.count);
    }
    unreachable!("node {id} is in the cluster")
}

fn run(ops: &[Op], easy: bool) -> Result<Vec<Decision>, TestCaseError> {
    let yaml = if easy {
        CLUSTER.replace("gang_timeout: 30s", "gang_timeout: 30s\n  backfill: easy")
    } else {
        CLUSTER.to_string()
    };
    let cfg = ClusterConfig::from_yaml("prop.yaml", &yaml).expect("valid");
    let mut engine = Engine::with_config_nodes(cfg.clone()).expect("engine");
    let models = [
        engine.selector(&Selector { labels: vec![], gpu_models: vec!["A100".into()] }),
        engine.selector(&Selector { labels: vec![], gpu_models: vec!["T4".into()] }),
    ];
    let mut now = Time::ZERO;
    let mut next_id = 0u64;
    let mut live: Vec<u64> = Vec::new();
    let mut running: Vec<(u64, ContainerId, u64)> = Vec::new();
    // (job, gang) → containers still to start; a gang's starts must all come in one pass.
    let mut gang_size: BTreeMap<u64, u64> = BTreeMap::new();
    let mut model_of: BTreeMap<u64, Option<usize>> = BTreeMap::new();
    let mut down: Vec<u64> = Vec::new();
    let mut log = Vec::new();
    for op in ops {
        match *op {
            Op::Gang { leaf, count, cpu, gpus, milli, model, walltime } => {
                next_id += 1;
                let mut r =
                    Request::new(Resources::new(cpu, 1024, gpus), count).in_gang(1).with_gpu_milli(milli);
                if let Some(w) = walltime {
                    r = r.with_walltime(Duration::from_secs(w));
                }
                if let Some(m) = model {
                    r = r.on(models[m]);
                }
                let spec = JobSpec {
                    id: JobId(next_id),
                    queue: QueuePath::parse(LEAVES[leaf]).unwrap(),
                    user: "u".into(),
                    priority: None,
                    submit_time: now,
                    requests: vec![r],
                    has_am: false,
                };
                engine.on_job_submitted(now, spec).unwrap();
                gang_size.insert(next_id, u64::from(count));
                model_of.insert(next_id, model);
                live.push(next_id);
            }
            Op::Plain { leaf, count, cpu, milli, model } => {
                next_id += 1;
                let mut r = Request::new(Resources::new(cpu, 512, 0), count).with_gpu_milli(milli);
                if let Some(m) = model {
                    r = r.on(models[m]);
                }
                let spec = JobSpec {
                    id: JobId(next_id),
                    queue: QueuePath::parse(LEAVES[leaf]).unwrap(),
                    user: "u".into(),
                    priority: None,
                    submit_time: now,
                    requests: vec![r],
                    has_am: false,
                };
                engine.on_job_submitted(now, spec).unwrap();
                model_of.insert(next_id, model);
                live.push(next_id);
            }
            Op::FinishSome { job, n } => {
                let target = live.get(job % live.len().max(1)).copied();
                let mut done = 0;
                running.retain(|&(j, c, _)| {
                    if Some(j) == target && done < n {
                        done += 1;
                        engine.on_container_finished(now, c).unwrap();
                        false
                    } else {
                        true
                    }
                });
            }
            Op::FinishJob { job } => {
                if !live.is_empty() {
                    let id = live.remove(job % live.len());
                    engine.on_job_finished(now, JobId(id)).unwrap();
                    running.retain(|&(j, _, _)| j != id);
                    gang_size.remove(&id);
                }
            }
            Op::Tick { secs } => now = Time(now.0 + secs * 1000),
            Op::NodeDown { node } => {
                if !down.contains(&node) {
                    let lost = engine.on_node_removed(now, NodeId(node)).unwrap();
                    running.retain(|&(_, c, _)| !lost.contains(&c));
                    down.push(node);
                }
            }
            Op::NodeUp { node } => {
                if let Some(pos) = down.iter().position(|&n| n == node) {
                    down.remove(pos);
                    engine.on_node_added(now, node_spec(&cfg, node)).unwrap();
                }
            }
        }
        let decisions = engine.schedule(now);
        let mut starts: BTreeMap<u64, u64> = BTreeMap::new();
        for d in &decisions {
            match d {
                Decision::StartContainer { container, job, node, .. } => {
                    running.push((job.0, *container, node.0));
                    *starts.entry(job.0).or_default() += 1;
                    if let Some(Some(m)) = model_of.get(&job.0) {
                        let ok = if *m == 0 { node.0 < 3 } else { (3..5).contains(&node.0) };
                        prop_assert!(ok, "{job} asked for model {m} and landed on {node}");
                    }
                }
                Decision::KillContainer { container, .. } => running.retain(|&(_, c, _)| c != *container),
                _ => {}
            }
        }
        for (job, n) in starts {
            if let Some(size) = gang_size.remove(&job) {
                prop_assert_eq!(
                    n,
                    size,
                    "gang of job-{} started {} of {} containers in a pass",
                    job,
                    n,
                    size
                );
            }
        }
        log.extend(decisions);
        engine.check_invariants().map_err(TestCaseError::fail)?;
    }
    Ok(log)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_with_gangs_and_gpus(ops in proptest::collection::vec(op(), 1..100), easy in any::<bool>()) {
        run(&ops, easy)?;
    }

    #[test]
    fn same_inputs_same_decisions_with_gangs_and_gpus(ops in proptest::collection::vec(op(), 1..60), easy in any::<bool>()) {
        let a = run(&ops, easy)?;
        let b = run(&ops, easy)?;
        prop_assert_eq!(a, b);
    }
}
