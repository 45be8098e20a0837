//! The SLO controller's decisions (schema 17) on SQLite and (when `WEIR_TEST_POSTGRES_URL` is
//! set) PostgreSQL: written in the worker's fenced batch, read back per run in job then time
//! order with every field exact, refused with nothing written under a stale fence.

use std::sync::Arc;

use weir_store::{Change, JobStore, NewRun, SloDecisionRow, StoreError, Submitted};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    let dir = std::env::temp_dir().join(format!("weir-slo-decisions-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut out =
        vec![weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await.expect("sqlite")];
    match std::env::var("WEIR_TEST_POSTGRES_URL") {
        Ok(url) => {
            let name = format!("weir_slo_decisions_{tag}_{}", std::process::id());
            let db = weir_store::create_postgres_database(&url, &name).await.expect("database");
            out.push(weir_store::open(&db).await.expect("postgres"));
        }
        Err(_) => eprintln!("\n*** SKIPPED on PostgreSQL: WEIR_TEST_POSTGRES_URL is not set ***\n"),
    }
    out
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
