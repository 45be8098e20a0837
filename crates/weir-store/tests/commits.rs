//! Job commit rows (migration 14) on SQLite and (when `WEIR_TEST_POSTGRES_URL` is set)
//! PostgreSQL: a put replaces the row of the same run, job and stage; rows come back by job and
//! stage, with their reason.

mod common;

use std::sync::Arc;

use weir_store::{JobCommitRow, JobStore, StoreError};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("commits", tag).await
}

fn row(run: i64, job: u32, stage: u32, phase: &str, reason: Option<&str>) -> JobCommitRow {
    JobCommitRow {
        run_id: run,
        job_idx: job,
        stage_idx: stage,
        output_idx: 0,
        output: format!("s3://lake/t{run}/"),
        phase: phase.into(),
        state: format!("{{\"phase\":\"{phase}\"}}"),
        reason: reason.map(str::to_string),
        updated_ms: 1000 + i64::from(stage),
    }
}

#[tokio::test]
async fn a_put_replaces_the_stage_row_and_rows_come_back_in_order() {
    for store in stores("order").await {
        let f = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        store.put_job_commit(&f, &row(7, 1, 0, "prepared", None)).await.unwrap();
        store.put_job_commit(&f, &row(7, 0, 2, "prepared", None)).await.unwrap();
        store.put_job_commit(&f, &row(8, 0, 0, "prepared", None)).await.unwrap();
        store.put_job_commit(&f, &row(7, 1, 0, "aborted", Some("refused"))).await.unwrap();
        let got = store.job_commits(7).await.unwrap();
        assert_eq!(got, vec![row(7, 0, 2, "prepared", None), row(7, 1, 0, "aborted", Some("refused"))]);
        assert_eq!(store.job_commits(8).await.unwrap().len(), 1, "{}", store.kind());
        assert!(store.job_commits(9).await.unwrap().is_empty());
    }
}

/// Job commit rows are written under the worker's lease, like its other writes: once another
/// worker took the cluster over, the old holder's put is refused and writes nothing.
/// A stage with several outputs has a row per output (migration 18): each replaced on its
/// own, listed by job, stage and output.
#[tokio::test]
async fn each_output_of_a_stage_has_its_own_row() {
    for store in stores("outputs").await {
        let f = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        let out = |k: u32, phase: &str| JobCommitRow { output_idx: k, ..row(7, 0, 1, phase, None) };
        store.put_job_commit(&f, &out(1, "prepared")).await.unwrap();
        store.put_job_commit(&f, &out(0, "prepared")).await.unwrap();
        store.put_job_commit(&f, &out(1, "committed")).await.unwrap();
        assert_eq!(
            store.job_commits(7).await.unwrap(),
            vec![out(0, "prepared"), out(1, "committed")],
            "{}",
            store.kind()
        );
    }
}

#[tokio::test]
async fn a_put_by_a_worker_that_lost_its_lease_writes_nothing() {
    for store in stores("fenced").await {
        let old = store.acquire_lease("c", "a", None, 1_000, 5_000).await.expect("lease").expect("free");
        store.put_job_commit(&old, &row(7, 0, 0, "prepared", None)).await.unwrap();
        // Expired and taken over by b.
        let new = store.acquire_lease("c", "b", None, 7_000, 5_000).await.expect("lease").expect("expired");
        let err = store.put_job_commit(&old, &row(7, 0, 0, "committed", None)).await.unwrap_err();
        assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
        assert_eq!(
            store.job_commits(7).await.unwrap(),
            vec![row(7, 0, 0, "prepared", None)],
            "{}",
            store.kind()
        );
        store.put_job_commit(&new, &row(7, 0, 0, "committed", None)).await.unwrap();
        assert_eq!(store.job_commits(7).await.unwrap()[0].phase, "committed");
    }
}
