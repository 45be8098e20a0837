//! What a worker's batches of one-task runs cost the store, grouped (`JobStore::apply`) or one
//! change after another (`Store::apply_each`, the statements of before): for counting
//! instructions under callgrind, where the service benchmark's process starts cannot run.
//!
//! ```text
//! cargo run --release -p weir-store --example apply_cost -- grouped|each RUNS PER_PASS
//! valgrind --tool=callgrind target/release/examples/apply_cost grouped 2000 3
//! ```
//!
//! A fresh SQLite store in a temporary folder; `RUNS` one-task runs submitted (64 at a time), then
//! worker passes as the engine actor makes them for `weir bench serve --dispatch`: each pass
//! routes and starts `PER_PASS` new runs, records the launch of the previous pass's and the end
//! of those of the pass before (attempt, task, job and run states), and moves the queue's usage
//! row on. Prints the seconds the passes took.

use weir_store::{
    AttemptKey, Change, JobStore, NewJob, NewRun, NewTask, Store, Submitted, TaskKey, UsageRow,
};

fn new_run(i: usize) -> NewRun {
    NewRun {
        route: None,
        workflow: "bench".into(),
        project: "bench".into(),
        tier: 1,
        logical_date: format!("d{i}"),
        cluster: "c".into(),
        queue: "root.default".into(),
        spec: "{}".into(),
        params: "{}".into(),
        submitted_by: "admin".into(),
        user: "bench".into(),
        client: None,
        submitted_ms: 1,
        slo_ms: None,
        idempotency_key: None,
        request_hash: String::new(),
        idempotency_after_ms: 0,
        dry_run: false,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: apply_cost grouped|each RUNS PER_PASS";
    let grouped = match args.get(1).map(String::as_str) {
        Some("grouped") => true,
        Some("each") => false,
        _ => panic!("{usage}"),
    };
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).expect(usage);
    let per_pass: usize = args.get(3).and_then(|s| s.parse().ok()).filter(|&n| n > 0).expect(usage);
    let dir = std::env::temp_dir().join(format!("weir-apply-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let store = Store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await.expect("store");
    let fence = JobStore::acquire_lease(&store, "c", "me", None, 0, i64::MAX / 2)
        .await
        .expect("lease")
        .expect("free");
    let mut ids = Vec::with_capacity(runs);
    let all: Vec<NewRun> = (0..runs).map(new_run).collect();
    for part in all.chunks(64) {
        for s in JobStore::submit(&store, part).await.expect("submit") {
            let Submitted::Created { id } = s else { panic!("{s:?}") };
            ids.push(id);
        }
    }
    let key = |id: i64| AttemptKey { task: TaskKey { run: id, job: 0, stage: 0, task: 0 }, attempt: 1 };
    let passes: Vec<&[i64]> = ids.chunks(per_pass).collect();
    let t0 = std::time::Instant::now();
    let mut end = 1_000i64;
    for p in 0..passes.len() + 2 {
        let at = 1_000 + p as i64;
        let mut changes = Vec::new();
        if p >= 1 && p - 1 < passes.len() {
            for &id in passes[p - 1] {
                changes.push(Change::AttemptLaunched { key: key(id), launched: "{\"pid\":1}".into(), at });
            }
        }
        if p >= 2 {
            for &id in passes[p - 2] {
                let k = key(id);
                changes.push(Change::AttemptEnded {
                    key: k,
                    to: "succeeded",
                    exit_code: Some(0),
                    at,
                    reason: None,
                });
                changes.push(Change::TaskState { task: k.task, to: "succeeded", at, exit_code: Some(0) });
                changes.push(Change::JobState { run: id, job: 0, to: "succeeded", at });
                changes.push(Change::RunState { run: id, to: "succeeded", at, reason: None });
            }
        }
        if p < passes.len() {
            for &id in passes[p] {
                changes.push(Change::Route {
                    run: id,
                    jobs: vec![NewJob {
                        idx: 0,
                        name: "main".into(),
                        tasks: vec![NewTask { stage_idx: 0, task_idx: 0, stage: "main".into() }],
                    }],
                    at,
                });
                changes.push(Change::AttemptStarting {
                    key: key(id),
                    node: "node-0".into(),
                    stdout: format!("logs/{id}.out"),
                    stderr: format!("logs/{id}.err"),
                    at,
                });
                changes.push(Change::JobState { run: id, job: 0, to: "running", at });
                changes.push(Change::RunState { run: id, to: "running", at, reason: None });
            }
        }
        changes.push(if p == 0 {
            Change::Usage(UsageRow {
                cluster: "c".into(),
                queue: "root.default".into(),
                start_ms: 0,
                end_ms: end,
                cpu: 1_000,
                memory: 1_024,
                gpu: 0,
                running_apps: 1,
            })
        } else {
            let old = end;
            end += 1;
            Change::UsageExtended { queue: "root.default".into(), start_ms: 0, old_end_ms: old, end_ms: end }
        });
        let applied = if grouped {
            JobStore::apply(&store, &fence, i64::MAX / 2, &changes).await
        } else {
            store.apply_each(&fence, i64::MAX / 2, &changes).await
        }
        .expect("apply");
        assert!(applied.iter().all(|&a| a), "pass {p}: a change did not apply: {applied:?}");
    }
    println!(
        "{} {runs} runs, {per_pass} per pass: {:.3} s",
        if grouped { "grouped" } else { "each" },
        t0.elapsed().as_secs_f64()
    );
    if std::env::var_os("APPLY_COST_KEEP").is_some() {
        println!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
