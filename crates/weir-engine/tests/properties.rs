//! Invariants under random workloads: no node over-committed, bookkeeping consistent, shares
//! within their clamps, no victim left below its fair share, and the same inputs always give
//! the same decisions.

use proptest::prelude::*;
use weir_engine::{Decision, Engine, JobId, JobSpec, Request};
use weir_model::{ClusterConfig, QueuePath, Resources, Time};

const CLUSTER: &str = r#"
version: 1
scheduler:
  root_policy: drf
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 3s}
tiers:
  1: {fair_share_preemption_timeout: 2s, fair_share_preemption_threshold: 0.8}
  3: {fair_share_preemption_timeout: 5s}
nodes:
  - {count: 3, resources: {cpu: 8000, memory: 16384}}
  - {count: 2, resources: {cpu: 4000, memory: 4096}}
queues:
  - name: ads
    weight: 2
    max_running_apps: 6
    children:
      - {name: t1, tier: 1, min: {memory: 4096}}
      - {name: t3, tier: 3, max: {memory: 20000}, max_am_share: 0.5}
  - name: search
    policy: drf
    children:
      - {name: t1, tier: 1}
      - {name: t3, tier: 3, max_running_apps: 2}
  - {name: default, tier: 3, policy: fifo, weight: 0.5}
"#;

/// The same leaves in capacity mode (no preemption: not implemented there yet), with user
/// limits, elastic caps and queue priorities in play.
const CAPACITY_CLUSTER: &str = r#"
version: 1
scheduler: {mode: capacity, max_am_percent: 0.5}
nodes:
  - {count: 3, resources: {cpu: 8000, memory: 16384}}
  - {count: 2, resources: {cpu: 4000, memory: 4096}}
queues:
  - name: ads
    capacity: 50
    max_capacity: 80
    max_parallel_apps: 6
    children:
      - {name: t1, tier: 1, capacity: 70, priority: 1, user_limit_factor: 2}
      - {name: t3, tier: 3, capacity: 30, max_capacity: 60, min_user_percent: 50}
  - name: search
    capacity: 40
    children:
      - {name: t1, tier: 1, capacity: 2w, user_weights: {u1: 2}}
      - {name: t3, tier: 3, capacity: 1w, max_parallel_apps: 2, user_limit_factor: 0.5}
  - {name: default, tier: 3, capacity: 10, max_capacity: 30}
"#;

const LEAVES: [&str; 5] = ["ads.t1", "ads.t3", "search.t1", "search.t3", "default"];

#[derive(Clone, Debug)]
enum Op {
    Submit {
        leaf: usize,
        cpu: u64,
        mem: u64,
        count: u32,
        priority: Option<i32>,
    },
    More {
        job: usize,
        count: u32,
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
    /// A container larger than most free room: provokes reservations.
    Large {
        job: usize,
    },
    /// A job's application master ends and is asked for again (as an AM).
    LoseAm {
        job: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..LEAVES.len(), 1u64..4, 1u64..9, 1u32..20, proptest::option::of(0i32..400)).prop_map(
            |(leaf, cpu, mem, count, priority)| Op::Submit { leaf, cpu: cpu * 500, mem: mem * 512, count, priority }
        ),
        2 => (0usize..30, 1u32..10).prop_map(|(job, count)| Op::More { job, count }),
        3 => (0usize..30, 1usize..6).prop_map(|(job, n)| Op::FinishSome { job, n }),
        1 => (0usize..30).prop_map(|job| Op::FinishJob { job }),
        3 => (1u64..8).prop_map(|secs| Op::Tick { secs }),
        1 => (0usize..30).prop_map(|job| Op::Large { job }),
        1 => (0usize..30).prop_map(|job| Op::LoseAm { job }),
    ]
}

/// Run the ops, checking invariants after every step; return the decision log.
fn run(ops: &[Op]) -> Result<Vec<Decision>, TestCaseError> {
    run_on(CLUSTER, ops)
}

/// `run` on another cluster file with the same leaves.
fn run_on(cluster: &str, ops: &[Op]) -> Result<Vec<Decision>, TestCaseError> {
    let cfg = ClusterConfig::from_yaml("prop.yaml", cluster).expect("valid");
    let mut engine = Engine::with_config_nodes(cfg).expect("engine");
    let mut now = Time::ZERO;
    let mut next_id = 0u64;
    let mut live: Vec<u64> = Vec::new();
    let mut running: Vec<(u64, weir_engine::ContainerId)> = Vec::new();
    let mut ams: Vec<(u64, weir_engine::ContainerId)> = Vec::new();
    let mut log = Vec::new();
    for op in ops {
        match *op {
            Op::Submit { leaf, cpu, mem, count, priority } => {
                next_id += 1;
                let spec = JobSpec {
                    id: JobId(next_id),
                    queue: QueuePath::parse(LEAVES[leaf]).unwrap(),
                    user: format!("u{}", next_id % 3),
                    priority,
                    submit_time: now,
                    requests: vec![Request::new(Resources::new(cpu, mem, 0), count)],
                    has_am: true,
                };
                engine.on_job_submitted(now, spec).unwrap();
                live.push(next_id);
            }
            Op::More { job, count } => {
                if let Some(&id) = live.get(job % live.len().max(1)) {
                    engine
                        .on_requests_added(
                            now,
                            JobId(id),
                            vec![Request::new(Resources::new(500, 1024, 0), count)],
                        )
                        .unwrap();
                }
            }
            Op::FinishSome { job, n } => {
                let mut done = 0;
                let target = live.get(job % live.len().max(1)).copied();
                let mut ended = Vec::new();
                running.retain(|&(j, c)| {
                    if Some(j) == target && done < n {
                        done += 1;
                        engine.on_container_finished(now, c).unwrap();
                        ended.push(c);
                        false
                    } else {
                        true
                    }
                });
                ams.retain(|(_, c)| !ended.contains(c));
            }
            Op::FinishJob { job } => {
                if !live.is_empty() {
                    let id = live.remove(job % live.len());
                    engine.on_job_finished(now, JobId(id)).unwrap();
                    running.retain(|&(j, _)| j != id);
                    ams.retain(|&(j, _)| j != id);
                }
            }
            Op::Tick { secs } => now = Time(now.0 + secs * 1000),
            Op::Large { job } => {
                if let Some(&id) = live.get(job % live.len().max(1)) {
                    let big = vec![Request::new(Resources::new(4000, 12288, 0), 1)];
                    engine.on_requests_added(now, JobId(id), big).unwrap();
                }
            }
            Op::LoseAm { job } => {
                let target = live.get(job % live.len().max(1)).copied();
                if let Some(pos) = ams.iter().position(|&(j, _)| Some(j) == target) {
                    let (id, c) = ams.remove(pos);
                    engine.on_container_finished(now, c).unwrap();
                    running.retain(|&(_, r)| r != c);
                    let again = vec![Request::new(Resources::new(500, 1024, 0), 1).as_am()];
                    engine.on_requests_added(now, JobId(id), again).unwrap();
                }
            }
        }
        let decisions = engine.schedule(now);
        for d in &decisions {
            match d {
                Decision::StartContainer { container, job, am, .. } => {
                    running.push((job.0, *container));
                    if *am {
                        ams.push((job.0, *container));
                    }
                }
                Decision::KillContainer { container, .. } => {
                    running.retain(|&(_, c)| c != *container);
                    ams.retain(|&(_, c)| c != *container);
                }
                Decision::PreemptContainer { job, .. } => {
                    let e = engine.explain(*job).unwrap();
                    let left = e.usage - e.marked;
                    prop_assert!(
                        left.memory >= e.fair_share.memory || job_in_drf_queue(&e.queue),
                        "victim {job} left with {left} below its fair share {}",
                        e.fair_share
                    );
                }
                _ => {}
            }
        }
        log.extend(decisions);
        engine.check_invariants().map_err(TestCaseError::fail)?;
        for q in engine.queues() {
            prop_assert!(q.steady.fits_in(&q.max), "{}: steady {} above max {}", q.queue, q.steady, q.max);
            prop_assert!(q.usage.fits_in(&q.max), "{}: usage {} above max {}", q.queue, q.usage, q.max);
        }
        for n in engine.nodes() {
            prop_assert!(n.used.fits_in(&n.capacity));
        }
    }
    Ok(log)
}

fn job_in_drf_queue(q: &QueuePath) -> bool {
    q.as_str().starts_with("root.search")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold(ops in proptest::collection::vec(op(), 1..120)) {
        run(&ops)?;
    }

    #[test]
    fn same_inputs_same_decisions(ops in proptest::collection::vec(op(), 1..80)) {
        let a = run(&ops)?;
        let b = run(&ops)?;
        prop_assert_eq!(a, b);
    }

    /// Capacity mode: the engine's invariants, usage never above a queue's max capacity (checked
    /// in `run_on` after every step), and the same inputs give the same decisions.
    #[test]
    fn capacity_mode_invariants_and_determinism(ops in proptest::collection::vec(op(), 1..100)) {
        let a = run_on(CAPACITY_CLUSTER, &ops)?;
        let b = run_on(CAPACITY_CLUSTER, &ops)?;
        prop_assert_eq!(a, b);
    }
}
