//! Waiting spells on SQLite and (when `WEIR_TEST_POSTGRES_URL` is set) PostgreSQL: a new
//! spell of a job closes the open one, an end closes it once, a run's end closes every spell
//! still open, and the SLO page's read joins each spell with its run.

mod common;

use std::sync::Arc;

use weir_store::{Change, JobStore, NewRun, Submitted, WaitRow};

fn id(s: &Submitted) -> i64 {
    match s {
        Submitted::Created { id } => *id,
        other => panic!("{other:?}"),
    }
}

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("waits", tag).await
}

fn run(wf: &str, tier: u8, at: i64) -> NewRun {
    NewRun {
        route: None,
        workflow: wf.into(),
        project: "ads".into(),
        tier,
        logical_date: format!("d{at}"),
        cluster: "c".into(),
        queue: "root.ads.tier1".into(),
        spec: "{}".into(),
        params: "{}".into(),
        submitted_by: "admin".into(),
        user: "alice".into(),
        client: None,
        submitted_ms: at,
        slo_ms: Some(60_000),
        idempotency_key: None,
        request_hash: String::new(),
        idempotency_after_ms: 0,
        dry_run: false,
    }
}

/// (job, from, to, reason, queue, limit) of a spell.
type Span<'a> = (u32, i64, Option<i64>, &'a str, &'a str, &'a str);
/// (run, workflow, tier, state, finished, SLO) of a spell's run.
type WithRun<'a> = (i64, &'a str, u8, &'a str, Option<i64>, Option<i64>);

fn began(run: i64, job: u32, from: i64, reason: &str, queue: &str, limit: &str) -> WaitRow {
    WaitRow {
        run_id: run,
        job_idx: job,
        from_ms: from,
        to_ms: None,
        reason: reason.into(),
        queue: queue.into(),
        limit: limit.into(),
        detail: format!("detail of {reason}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spells_open_close_and_end_with_their_run() {
    for store in stores("spells").await {
        let ids: Vec<i64> = store
            .submit(&[run("nightly", 1, 1000), run("backfill", 3, 1500)])
            .await
            .expect("submit")
            .iter()
            .map(id)
            .collect();
        let (a, b) = (ids[0], ids[1]);
        let fence = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        let first = began(a, 0, 1000, "queue_max_running_apps", "root.analytics", "3");
        let second = began(a, 0, 3000, "no_room", "root.analytics.tier1", "");
        let applied = store
            .apply(
                &fence,
                60_000,
                &[
                    Change::WaitBegan(first.clone()),
                    // The reason changed: the first spell closes where the second begins.
                    Change::WaitBegan(second.clone()),
                    Change::WaitEnded { run: a, job: 0, at: 5000 },
                    // Nothing open any more: the second end does nothing.
                    Change::WaitEnded { run: a, job: 0, at: 6000 },
                    Change::WaitBegan(began(a, 1, 5500, "user_max_running_apps", "user alice", "1")),
                    Change::WaitBegan(began(b, 0, 1500, "no_room", "root.ads.tier3", "")),
                ],
            )
            .await
            .expect("apply");
        assert_eq!(applied, [true, true, true, false, true, true]);

        // The run is killed while job 1 waits: that spell ends with it; run b's stays open.
        let applied = store
            .apply(&fence, 60_000, &[Change::RunState { run: a, to: "killed", at: 7000, reason: None }])
            .await
            .expect("apply");
        assert_eq!(applied, [true]);
        let got = store.waits(a).await.expect("waits");
        let spans: Vec<Span> = got
            .iter()
            .map(|w| (w.job_idx, w.from_ms, w.to_ms, w.reason.as_str(), w.queue.as_str(), w.limit.as_str()))
            .collect();
        assert_eq!(
            spans,
            [
                (0, 1000, Some(3000), "queue_max_running_apps", "root.analytics", "3"),
                (0, 3000, Some(5000), "no_room", "root.analytics.tier1", ""),
                (1, 5500, Some(7000), "user_max_running_apps", "user alice", "1"),
            ]
        );
        assert_eq!(got[0].detail, "detail of queue_max_running_apps");
        assert_eq!(store.waits(b).await.expect("waits")[0].to_ms, None, "run b still waits");

        // An end stamped before its spell began (clocks of two owners) never makes it negative.
        store.apply(&fence, 60_000, &[Change::WaitEnded { run: b, job: 0, at: 1200 }]).await.expect("apply");
        assert_eq!(store.waits(b).await.expect("waits")[0].to_ms, Some(1500));

        // The SLO page's read: spells with their runs, newest runs first, within the window.
        let all = store.waits_since(0, 100).await.expect("since");
        let got: Vec<WithRun> = all
            .iter()
            .map(|r| (r.wait.run_id, r.workflow.as_str(), r.tier, r.state.as_str(), r.finished_ms, r.slo_ms))
            .collect();
        assert_eq!(
            got,
            [
                (b, "backfill", 3, "queued", None, Some(60_000)),
                (a, "nightly", 1, "killed", Some(7000), Some(60_000)),
                (a, "nightly", 1, "killed", Some(7000), Some(60_000)),
                (a, "nightly", 1, "killed", Some(7000), Some(60_000)),
            ]
        );
        assert_eq!(store.waits_since(1200, 100).await.expect("since").len(), 1, "only run b is that recent");
        assert_eq!(store.waits_since(0, 2).await.expect("since").len(), 2, "the limit holds");
    }
}

/// A stale owner writes no spell: the batch is refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_owner_records_no_spell() {
    for store in stores("fenced").await {
        let id = id(&store.submit(&[run("nightly", 1, 1000)]).await.expect("submit")[0]);
        let old = store.acquire_lease("c", "old", None, 0, 1000).await.expect("lease").expect("free");
        let _new =
            store.acquire_lease("c", "new", None, 5000, 60_000).await.expect("lease").expect("expired");
        let r = store
            .apply(&old, 70_000, &[Change::WaitBegan(began(id, 0, 1000, "no_room", "root.a", ""))])
            .await;
        assert!(matches!(r, Err(weir_store::StoreError::LeaseLost { .. })), "{r:?}");
        assert!(store.waits(id).await.expect("waits").is_empty());
    }
}
