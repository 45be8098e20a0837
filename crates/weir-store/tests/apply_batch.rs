//! A worker's batch applied in groups of one kind (a few multi-row statements per batch) says
//! and writes exactly what applying its changes one by one, in order, did: checked on random
//! batches over a few runs, jobs, tasks, attempts, spells and usage rows — so that most
//! compare-and-sets fail somewhere inside a batch, after or before the change they depend on —
//! on a real SQLite file and (when `WEIR_TEST_POSTGRES_URL` is set) a real PostgreSQL.
//!
//! Two stores get the same submissions; one applies each batch with `JobStore::apply` (grouped),
//! the other with `Store::apply_each` (the statements of before, change by change). The reported
//! `applied` vectors and everything readable afterwards (runs, jobs, tasks, attempts, spells,
//! usage rows, preemptions, SLO decisions and models, and whether each (workflow, date) is free
//! again) must be equal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use weir_store::{
    AttemptKey, Change, Fence, JobStore, NewJob, NewRun, NewTask, PreemptionRow, SloDecisionRow, SloModelRow,
    Store, Submitted, TaskKey, UsageRow, WaitRow, Warning,
};

const RUNS: usize = 3;
/// Jobs and tasks (stage 0) a route creates per run; changes name one more of each, which never
/// exists.
const JOBS: u32 = 2;
const TASKS: u32 = 2;

/// One change over indices (run, job, task, attempt, time, …), made concrete per case.
#[derive(Clone, Debug)]
enum Op {
    Route(usize),
    RunState(usize, usize, u8, bool),
    JobState(usize, u32, usize, u8),
    TaskState(usize, u32, u32, usize, u8, Option<i32>),
    Starting(usize, u32, u32, u32, u8),
    Launched(usize, u32, u32, u32),
    Ended(usize, u32, u32, u32, usize, u8, bool),
    Preempting(usize, u32, u32, u32, bool),
    WaitBegan(usize, u32, u8, usize),
    WaitEnded(usize, u32, u8),
    Usage(usize, u8, u8, i64),
    UsageExtended(usize, u8, u8, u8),
    Preempted(usize, u8),
    SloDecision(usize, u32, u8),
    SloModel(usize, u32, usize),
}

const RUN_TO: [&str; 5] = ["waiting", "running", "succeeded", "failed", "killed"];
const TASK_TO: [&str; 4] = ["running", "succeeded", "failed", "killed"];
const ATTEMPT_TO: [&str; 4] = ["succeeded", "failed", "killed", "lost"];

fn op() -> impl Strategy<Value = Op> {
    let run = 0..RUNS;
    let job = 0..=JOBS;
    let task = 0..=TASKS;
    let attempt = 1u32..=3;
    let at = 0u8..6;
    prop_oneof![
        3 => run.clone().prop_map(Op::Route),
        2 => (run.clone(), 0..RUN_TO.len(), at.clone(), any::<bool>()).prop_map(|(r, t, a, w)| Op::RunState(r, t, a, w)),
        2 => (run.clone(), job.clone(), 0..RUN_TO.len(), at.clone()).prop_map(|(r, j, t, a)| Op::JobState(r, j, t, a)),
        2 => (run.clone(), job.clone(), task.clone(), 0..TASK_TO.len(), at.clone(), proptest::option::of(0i32..3))
            .prop_map(|(r, j, k, t, a, e)| Op::TaskState(r, j, k, t, a, e)),
        4 => (run.clone(), job.clone(), task.clone(), attempt.clone(), at.clone())
            .prop_map(|(r, j, k, n, a)| Op::Starting(r, j, k, n, a)),
        3 => (run.clone(), job.clone(), task.clone(), attempt.clone()).prop_map(|(r, j, k, n)| Op::Launched(r, j, k, n)),
        3 => (run.clone(), job.clone(), task.clone(), attempt.clone(), 0..ATTEMPT_TO.len(), at.clone(), any::<bool>())
            .prop_map(|(r, j, k, n, t, a, w)| Op::Ended(r, j, k, n, t, a, w)),
        2 => (run.clone(), job.clone(), task.clone(), attempt, any::<bool>()).prop_map(|(r, j, k, n, w)| Op::Preempting(r, j, k, n, w)),
        2 => (run.clone(), job.clone(), at.clone(), 0usize..2).prop_map(|(r, j, a, w)| Op::WaitBegan(r, j, a, w)),
        2 => (run.clone(), job.clone(), at.clone()).prop_map(|(r, j, a)| Op::WaitEnded(r, j, a)),
        2 => (0usize..2, at.clone(), 1u8..7, 1i64..4).prop_map(|(q, s, e, c)| Op::Usage(q, s, e, c)),
        2 => (0usize..2, at.clone(), 1u8..7, 1u8..8).prop_map(|(q, s, o, e)| Op::UsageExtended(q, s, o, e)),
        1 => (run.clone(), at.clone()).prop_map(|(r, a)| Op::Preempted(r, a)),
        1 => (run.clone(), job.clone(), at).prop_map(|(r, j, a)| Op::SloDecision(r, j, a)),
        1 => (run, job, 0usize..2).prop_map(|(r, j, p)| Op::SloModel(r, j, p)),
    ]
}

/// The changes of a case: batches applied one after the other.
fn batches() -> impl Strategy<Value = Vec<Vec<Op>>> {
    proptest::collection::vec(proptest::collection::vec(op(), 0..24), 1..4)
}

fn ms(at: u8) -> i64 {
    1_000 * i64::from(at)
}

fn change(op: &Op, ids: &[i64], cluster: &str) -> Change {
    let key = |r: usize, j: u32, k: u32, n: u32| AttemptKey {
        task: TaskKey { run: ids[r], job: j, stage: 0, task: k },
        attempt: n,
    };
    let queue = |q: usize| format!("root.q{q}");
    match *op {
        Op::Route(r) => Change::Route {
            run: ids[r],
            jobs: (0..JOBS)
                .map(|j| NewJob {
                    idx: j,
                    name: format!("j{j}"),
                    tasks: (0..TASKS)
                        .map(|t| NewTask { stage_idx: 0, task_idx: t, stage: "s".into() })
                        .collect(),
                })
                .collect(),
            at: 0,
        },
        Op::RunState(r, to, at, why) => Change::RunState {
            run: ids[r],
            to: RUN_TO[to],
            at: ms(at),
            reason: why.then(|| format!("because {at}")),
        },
        Op::JobState(r, j, to, at) => Change::JobState { run: ids[r], job: j, to: RUN_TO[to], at: ms(at) },
        Op::TaskState(r, j, k, to, at, exit_code) => {
            Change::TaskState { task: key(r, j, k, 0).task, to: TASK_TO[to], at: ms(at), exit_code }
        }
        Op::Starting(r, j, k, n, at) => Change::AttemptStarting {
            key: key(r, j, k, n),
            node: format!("node-{n}"),
            stdout: format!("out-{n}"),
            stderr: format!("err-{n}"),
            at: ms(at),
        },
        Op::Launched(r, j, k, n) => {
            Change::AttemptLaunched { key: key(r, j, k, n), launched: format!("{{\"pid\":{n}}}"), at: 0 }
        }
        Op::Ended(r, j, k, n, to, at, why) => Change::AttemptEnded {
            key: key(r, j, k, n),
            to: ATTEMPT_TO[to],
            exit_code: (to < 2).then_some(to as i32),
            at: ms(at),
            reason: why.then(|| "lost its node".to_string()),
        },
        Op::Preempting(r, j, k, n, warn) => Change::AttemptPreempting {
            key: key(r, j, k, n),
            warning: warn.then(|| Warning { reason: "for root.hi".into(), kill_at_ms: 9_000 }),
        },
        Op::WaitBegan(r, j, at, why) => Change::WaitBegan(WaitRow {
            run_id: ids[r],
            job_idx: j,
            from_ms: ms(at),
            to_ms: None,
            reason: ["no_room", "queue_max_running_apps"][why].into(),
            queue: queue(why),
            limit: format!("{why}"),
            detail: String::new(),
        }),
        Op::WaitEnded(r, j, at) => Change::WaitEnded { run: ids[r], job: j, at: ms(at) },
        Op::Usage(q, start, end, cpu) => Change::Usage(UsageRow {
            cluster: cluster.into(),
            queue: queue(q),
            start_ms: ms(start),
            end_ms: ms(end),
            cpu: cpu * 1_000,
            memory: cpu * 1_024,
            gpu: cpu - 1,
            running_apps: cpu,
        }),
        Op::UsageExtended(q, start, old, end) => Change::UsageExtended {
            queue: queue(q),
            start_ms: ms(start),
            old_end_ms: ms(old),
            end_ms: ms(end),
        },
        Op::Preempted(r, at) => Change::Preempted(PreemptionRow {
            cluster: cluster.into(),
            at_ms: ms(at),
            run_id: ids[r],
            task: "0.0.0".into(),
            attempt: 1,
            queue: "root.q0".into(),
            for_queue: "root.q1".into(),
            kind: "fair_share".into(),
            reason: format!("at {at}"),
        }),
        Op::SloDecision(r, j, at) => Change::SloDecision(SloDecisionRow {
            run_id: ids[r],
            job_idx: j,
            at_ms: ms(at),
            elapsed_ms: ms(at),
            progress_ppm: 500_000,
            speed_ppm: 1_000_000,
            allocation: u32::from(at),
            target: u32::from(at) + 1,
            predicted_ms: 0,
            deadline_ms: 60_000,
            reason: "behind: raised".into(),
        }),
        Op::SloModel(r, j, p) => Change::SloModel(SloModelRow {
            run_id: ids[r],
            job_idx: j,
            built_ms: 1,
            profile: format!("{{\"v\":{p}}}"),
        }),
    }
}

fn new_run(cluster: &str, date: usize) -> NewRun {
    NewRun {
        route: None,
        workflow: format!("w-{cluster}"),
        project: "ads".into(),
        tier: 1,
        logical_date: format!("d{date}"),
        cluster: cluster.into(),
        queue: "root.q0".into(),
        spec: "{}".into(),
        params: "{}".into(),
        submitted_by: "admin".into(),
        user: "alice".into(),
        client: None,
        submitted_ms: 1_000,
        slo_ms: None,
        idempotency_key: None,
        request_hash: String::new(),
        idempotency_after_ms: 0,
        dry_run: false,
    }
}

/// Everything the changes of a case can have written, as text to compare.
async fn dump(store: &dyn JobStore, cluster: &str, ids: &[i64]) -> Vec<String> {
    let mut out = Vec::new();
    for &id in ids {
        out.push(format!("{:?}", store.run(id).await.expect("run")));
        out.push(format!("{:?}", store.jobs(id).await.expect("jobs")));
        out.push(format!("{:?}", store.tasks(id).await.expect("tasks")));
        for job in 0..=JOBS {
            for task in 0..=TASKS {
                out.push(format!("{:?}", store.attempts(id, job, 0, task).await.expect("attempts")));
            }
            out.push(format!("{:?}", store.slo_model(id, job).await.expect("model")));
        }
        out.push(format!("{:?}", store.waits(id).await.expect("waits")));
        out.push(format!("{:?}", store.slo_decisions(id).await.expect("decisions")));
    }
    out.push(format!("{:?}", store.usage(cluster, 0, i64::MAX).await.expect("usage")));
    // Ordered by time only: rows of one time in either order.
    let mut preempted: Vec<String> = store
        .preemptions(Some(cluster), 0, 1_000)
        .await
        .expect("preemptions")
        .iter()
        .map(|p| format!("{p:?}"))
        .collect();
    preempted.sort();
    out.extend(preempted);
    out
}

/// The two stores of one database kind: grouped, and one by one.
struct Pair {
    grouped: Store,
    each: Store,
}

async fn pairs(tag: &str) -> Vec<Pair> {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("weir-apply-batch-{tag}-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let sqlite = |name: &str| format!("sqlite://{}", dir.join(name).display());
    let mut out = vec![Pair {
        grouped: Store::open(&sqlite("grouped.db")).await.expect("sqlite"),
        each: Store::open(&sqlite("each.db")).await.expect("sqlite"),
    }];
    match std::env::var("WEIR_TEST_POSTGRES_URL") {
        Ok(url) => {
            let a = weir_store::create_postgres_database(&url, &format!("weir_apply_batch_{tag}_g_{pid}"))
                .await
                .expect("database");
            let b = weir_store::create_postgres_database(&url, &format!("weir_apply_batch_{tag}_e_{pid}"))
                .await
                .expect("database");
            out.push(Pair {
                grouped: Store::open(&a).await.expect("postgres"),
                each: Store::open(&b).await.expect("postgres"),
            });
        }
        Err(_) => eprintln!("\n*** SKIPPED on PostgreSQL: WEIR_TEST_POSTGRES_URL is not set ***\n"),
    }
    out
}

/// Submit the case's runs to `store` on a cluster of its own and take its lease.
async fn set_up(store: &Store, cluster: &str) -> (Vec<i64>, Fence) {
    let fence =
        JobStore::acquire_lease(store, cluster, "me", None, 0, 60_000).await.expect("lease").expect("free");
    let runs: Vec<NewRun> = (0..RUNS).map(|d| new_run(cluster, d)).collect();
    let ids = JobStore::submit(store, &runs)
        .await
        .expect("submit")
        .into_iter()
        .map(|s| match s {
            Submitted::Created { id } => id,
            other => panic!("{other:?}"),
        })
        .collect();
    (ids, fence)
}

static CASE: AtomicU64 = AtomicU64::new(0);

async fn check(pair: &Pair, batches: &[Vec<Op>]) -> Result<(), TestCaseError> {
    let cluster = format!("c{}", CASE.fetch_add(1, Ordering::Relaxed));
    let (ids, fence) = set_up(&pair.grouped, &cluster).await;
    let (ids_each, fence_each) = set_up(&pair.each, &cluster).await;
    prop_assert_eq!(&ids, &ids_each, "both stores number the runs alike");
    for (b, ops) in batches.iter().enumerate() {
        let changes: Vec<Change> = ops.iter().map(|o| change(o, &ids, &cluster)).collect();
        let grouped = JobStore::apply(&pair.grouped, &fence, 60_000, &changes).await.expect("grouped");
        let each = pair.each.apply_each(&fence_each, 60_000, &changes).await.expect("one by one");
        prop_assert_eq!(grouped, each, "batch {} applied differently: {:#?}", b, changes);
    }
    let grouped = dump(&pair.grouped, &cluster, &ids).await;
    let each = dump(&pair.each, &cluster, &ids).await;
    for (g, e) in grouped.iter().zip(&each) {
        prop_assert_eq!(g, e);
    }
    prop_assert_eq!(grouped.len(), each.len());
    // A run ended frees its (workflow, date) in both, or in neither.
    let again: Vec<NewRun> = (0..RUNS).map(|d| new_run(&cluster, d)).collect();
    let g = JobStore::submit(&pair.grouped, &again).await.expect("submit");
    let e = JobStore::submit(&pair.each, &again).await.expect("submit");
    prop_assert_eq!(g, e);
    Ok(())
}

#[test]
fn grouped_batches_apply_exactly_as_one_change_after_another() {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let pairs = rt.block_on(pairs("prop"));
    let applied = Arc::new(AtomicU64::new(0));
    for (n, pair) in pairs.iter().enumerate() {
        // PostgreSQL's round trips are slower: fewer cases there.
        let cases = if n == 0 { 160 } else { 60 };
        let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
        let counted = applied.clone();
        runner
            .run(&batches(), |batches| {
                counted.fetch_add(batches.iter().map(Vec::len).sum::<usize>() as u64, Ordering::Relaxed);
                rt.block_on(check(pair, &batches))
            })
            .unwrap_or_else(|e| panic!("store {n}: {e}"));
    }
    assert!(applied.load(Ordering::Relaxed) > 0, "no change was tried");
}

/// A hand-made batch of every kind, with compare-and-sets failing inside it, on each store:
/// the results as one by one, and the rows the grouped statements wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_batch_reports_each_change_as_one_by_one() {
    for pair in pairs("mixed").await {
        let cluster = format!("mixed{}", CASE.fetch_add(1, Ordering::Relaxed));
        let (ids, fence) = set_up(&pair.grouped, &cluster).await;
        let ops = [
            Op::Starting(0, 0, 0, 1, 1), // no task yet: the run is not routed → false
            Op::Route(0),
            Op::Route(1),
            Op::Route(0),                // routed twice → false
            Op::Starting(0, 0, 0, 1, 1), // now it applies
            Op::Starting(0, 0, 1, 1, 1),
            Op::Starting(1, 0, 0, 1, 1),
            Op::Starting(0, 0, 0, 1, 2), // the same attempt again → false
            Op::Launched(0, 0, 0, 1),
            Op::Launched(0, 0, 0, 2), // no such attempt → false
            Op::WaitBegan(2, 0, 1, 0),
            Op::JobState(0, 0, 1, 1),
            Op::RunState(0, 1, 1, false),
            Op::Ended(0, 0, 0, 1, 0, 3, false),
            Op::TaskState(0, 0, 0, 1, 3, Some(0)),
            Op::Ended(0, 0, 0, 1, 1, 4, false), // ended twice → false
            Op::Ended(0, 0, 1, 1, 1, 4, true),  // still starting: ends (failed)
            Op::RunState(2, 4, 5, true),        // killed while queued: closes its spell
            Op::WaitEnded(2, 0, 6),             // already closed → false
            Op::Usage(0, 0, 2, 1),
            Op::UsageExtended(0, 0, 2, 3),
            Op::UsageExtended(0, 0, 2, 4), // the end moved on → false
            Op::Usage(0, 1, 3, 2),         // starts at 3 (the end so far), nothing left → false
            Op::Usage(1, 0, 1, 1),
            Op::RunState(2, 1, 6, false), // already terminal → false
        ];
        let changes: Vec<Change> = ops.iter().map(|o| change(o, &ids, &cluster)).collect();
        let applied = JobStore::apply(&pair.grouped, &fence, 60_000, &changes).await.expect("apply");
        assert_eq!(
            applied,
            vec![
                false, true, true, false, true, true, true, false, true, false, true, true, true, true, true,
                false, true, true, false, true, true, false, false, true, false
            ]
        );
        let store: &dyn JobStore = &pair.grouped;
        let tasks = store.tasks(ids[0]).await.expect("tasks");
        let states: Vec<(&str, u32, Option<i32>)> =
            tasks.iter().map(|t| (t.state.as_str(), t.attempts, t.exit_code)).collect();
        assert_eq!(
            states,
            vec![
                ("succeeded", 1, Some(0)),
                ("starting", 1, None),
                ("pending", 0, None),
                ("pending", 0, None)
            ]
        );
        let a = store.attempts(ids[0], 0, 0, 1).await.expect("attempts");
        assert_eq!(
            (a.len(), a[0].state.as_str(), a[0].reason.as_deref()),
            (1, "failed", Some("lost its node"))
        );
        let a = store.attempts(ids[0], 0, 0, 0).await.expect("attempts");
        assert_eq!(
            (a.len(), a[0].state.as_str(), a[0].launched.as_deref()),
            (1, "succeeded", Some("{\"pid\":1}"))
        );
        let run = store.run(ids[0]).await.expect("run").expect("run");
        assert_eq!((run.state.as_str(), run.started_ms), ("running", Some(1_000)));
        let killed = store.run(ids[2]).await.expect("run").expect("run");
        assert_eq!((killed.state.as_str(), killed.finished_ms), ("killed", Some(5_000)));
        let waits = store.waits(ids[2]).await.expect("waits");
        assert_eq!((waits.len(), waits[0].to_ms), (1, Some(5_000)));
        let usage = store.usage(&cluster, 0, i64::MAX).await.expect("usage");
        let spans: Vec<(&str, i64, i64)> =
            usage.iter().map(|u| (u.queue.as_str(), u.start_ms, u.end_ms)).collect();
        assert_eq!(spans, vec![("root.q0", 0, 3_000), ("root.q1", 0, 1_000)]);
    }
}
