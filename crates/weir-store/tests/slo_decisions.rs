//! The SLO controller's decisions (schema 17) on SQLite and (when `WEIR_TEST_POSTGRES_URL` is
//! set) PostgreSQL: written in the worker's fenced batch, read back per run in job then time
//! order with every field exact, refused with nothing written under a stale fence.

mod common;

use std::sync::Arc;

use weir_store::{Change, JobStore, NewRun, SloDecisionRow, StoreError, Submitted};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("slo-decisions", tag).await
}

fn run(date: &str) -> NewRun {
    NewRun {
        route: None,
        workflow: "nightly".into(),
        project: "ads".into(),
        tier: 1,
        logical_date: date.into(),
        cluster: "c".into(),
        queue: "root.ads.tier1".into(),
        spec: "{}".into(),
        params: "{}".into(),
        submitted_by: "admin".into(),
        user: "alice".into(),
        client: None,
        submitted_ms: 1000,
        slo_ms: Some(40_000),
        idempotency_key: None,
        request_hash: String::new(),
        idempotency_after_ms: 0,
        dry_run: false,
    }
}

fn decision(run: i64, job: u32, at: i64, allocation: u32, reason: &str) -> SloDecisionRow {
    SloDecisionRow {
        run_id: run,
        job_idx: job,
        at_ms: at,
        elapsed_ms: at - 1000,
        progress_ppm: 187_500,
        speed_ppm: 1_410_671,
        allocation,
        target: allocation + 1,
        predicted_ms: 25_651,
        deadline_ms: 40_000,
        reason: reason.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_stored_fenced_and_read_in_order() {
    for store in stores("order").await {
        let ids: Vec<i64> = store
            .submit(&[run("d1"), run("d2")])
            .await
            .expect("submit")
            .iter()
            .map(|s| match s {
                Submitted::Created { id } => *id,
                other => panic!("{other:?}"),
            })
            .collect();
        let (a, b) = (ids[0], ids[1]);
        let fence = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        // Written out of order: read back by job, then time.
        let rows = [
            decision(a, 0, 12_000, 2, "behind: raised"),
            decision(a, 1, 3000, 4, "first decision"),
            decision(a, 0, 2000, 1, "first decision"),
            decision(b, 0, 2500, 0, "fallback: 0 earlier successful run(s); the tier's rules apply"),
        ];
        let changes: Vec<Change> = rows.iter().cloned().map(Change::SloDecision).collect();
        let applied = store.apply(&fence, 60_000, &changes).await.expect("apply");
        assert_eq!(applied, vec![true; 4], "{}", store.kind());
        let got = store.slo_decisions(a).await.expect("read");
        assert_eq!(got, vec![rows[2].clone(), rows[0].clone(), rows[1].clone()], "{}", store.kind());
        assert_eq!(store.slo_decisions(b).await.expect("read"), vec![rows[3].clone()], "{}", store.kind());
        // A stale owner writes nothing.
        let newer =
            store.acquire_lease("c", "other", Some("me"), 1, 60_000).await.expect("lease").expect("taken");
        assert_ne!(newer.fence, fence.fence);
        let stale = store.apply(&fence, 60_000, &[Change::SloDecision(decision(a, 0, 20_000, 8, "x"))]).await;
        assert!(matches!(stale, Err(StoreError::LeaseLost { .. })), "{stale:?}");
        assert_eq!(store.slo_decisions(a).await.expect("read").len(), 3, "{}", store.kind());
    }
}

/// Schema 20: the model a guarded run's controller was built from stays with the run — the
/// first one written for a job is kept (a restarted worker reads it back instead of rebuilding
/// from a history that moved on), each job has its own, and a stale owner writes none. The
/// run's succeeded attempts' durations, what re-estimation restarts from, are read back by
/// stage; failed and running attempts are not among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_model_is_kept_from_its_first_build() {
    use weir_store::{AttemptKey, NewJob, NewTask, SloModelRow, TaskKey};
    for store in stores("model").await {
        let id = match &store.submit(&[run("d1")]).await.expect("submit")[0] {
            Submitted::Created { id } => *id,
            other => panic!("{other:?}"),
        };
        let fence = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        assert_eq!(store.slo_model(id, 0).await.expect("read"), None, "{}", store.kind());
        let model = |job: u32, built: i64, profile: &str| SloModelRow {
            run_id: id,
            job_idx: job,
            built_ms: built,
            profile: profile.into(),
        };
        let first = model(0, 5000, r#"{"version":1,"workflow":"nightly","runs":3}"#);
        let applied = store
            .apply(
                &fence,
                60_000,
                &[
                    Change::SloModel(first.clone()),
                    Change::SloModel(model(0, 9000, r#"{"version":1,"workflow":"nightly","runs":4}"#)),
                    Change::SloModel(model(1, 9000, "{}")),
                ],
            )
            .await
            .expect("apply");
        // The second model of job 0 changed nothing (and says so).
        assert_eq!(applied, vec![true, false, true], "{}", store.kind());
        assert_eq!(store.slo_model(id, 0).await.expect("read"), Some(first.clone()), "{}", store.kind());
        assert_eq!(
            store.slo_model(id, 1).await.expect("read"),
            Some(model(1, 9000, "{}")),
            "{}",
            store.kind()
        );
        assert_eq!(store.slo_model(id + 1, 0).await.expect("read"), None, "{}", store.kind());

        // Attempts: two stages; one task failed once before it succeeded, one still runs.
        let task =
            |stage: u32, idx: u32| NewTask { stage_idx: stage, task_idx: idx, stage: format!("s{stage}") };
        let jobs =
            vec![NewJob { idx: 0, name: "work".into(), tasks: vec![task(0, 0), task(0, 1), task(1, 0)] }];
        let mut changes = vec![Change::Route { run: id, jobs, at: 1000 }];
        // (stage, task, attempt, start, end and its state)
        type Span = (u32, u32, u32, i64, Option<(&'static str, i64)>);
        let spans: [Span; 5] = [
            (0, 0, 1, 2000, Some(("failed", 2400))),
            (0, 0, 2, 2500, Some(("succeeded", 3700))),
            (0, 1, 1, 2000, Some(("succeeded", 3000))),
            (1, 0, 1, 3700, Some(("succeeded", 6700))),
            (1, 0, 2, 7000, None),
        ];
        for (stage, t, attempt, at, end) in spans {
            let key = AttemptKey { task: TaskKey { run: id, job: 0, stage, task: t }, attempt };
            changes.push(Change::AttemptStarting {
                key,
                node: "n".into(),
                stdout: String::new(),
                stderr: String::new(),
                at,
            });
            changes.push(Change::AttemptLaunched { key, launched: "{}".into(), at });
            if let Some((to, ended)) = end {
                let exit_code = Some(if to == "succeeded" { 0 } else { 1 });
                changes.push(Change::AttemptEnded { key, to, exit_code, at: ended, reason: None });
            }
        }
        let applied = store.apply(&fence, 60_000, &changes).await.expect("apply");
        assert!(applied.iter().all(|&a| a), "{}: {applied:?}", store.kind());
        assert_eq!(
            store
                .succeeded_attempt_ms(id, 0)
                .await
                .expect("read")
                .iter()
                .map(|m| (m.stage, m.task, m.ms))
                .collect::<Vec<_>>(),
            vec![(0, 0, 1200), (0, 1, 1000), (1, 0, 3000)],
            "{}",
            store.kind()
        );
        assert_eq!(store.succeeded_attempt_ms(id, 1).await.expect("read"), vec![], "{}", store.kind());

        // A stale owner writes nothing.
        let _newer =
            store.acquire_lease("c", "other", Some("me"), 1, 60_000).await.expect("lease").expect("taken");
        let stale = store.apply(&fence, 60_000, &[Change::SloModel(model(2, 1, "{}"))]).await;
        assert!(matches!(stale, Err(StoreError::LeaseLost { .. })), "{stale:?}");
        assert_eq!(store.slo_model(id, 2).await.expect("read"), None, "{}", store.kind());
    }
}
