//! The committer on the local-filesystem store (the embedded default).

mod common;
mod scenarios;

use common::{local_committer, TempDir};

macro_rules! local {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let root = TempDir::new("local-root");
            let tmp = TempDir::new("local-files");
            let c = local_committer(&root.0);
            scenarios::$name(&c, &tmp.0).await;
            // Whatever the scenario did, no upload is left in the upload area.
            let uploads = root.0.join(weir_commit::LOCAL_UPLOADS_DIR);
            let left = std::fs::read_dir(&uploads).map(|d| d.count()).unwrap_or(0);
            assert_eq!(left, 0, "{} still holds uploads", uploads.display());
        }
    )*};
}

local!(
    commit_shows_everything_at_once,
    second_run_is_refused,
    claim_stops_a_concurrent_writer,
    failed_attempt_leaves_nothing,
    unfinished_attempt_aborts_the_job,
    abort_after_partial_commit_releases_the_output,
    interrupted_commit_resumes,
    reader_check_names_missing_and_resized_files,
);

#[tokio::test]
async fn sweeper_aborts_orphans_only() {
    let root = TempDir::new("local-root");
    let tmp = TempDir::new("local-files");
    let c = local_committer(&root.0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    // A limit of an hour keeps the uploads just made: the local store records the real
    // creation time (moto reports a fixed date, so the age test lives here).
    let young = c.store().create_upload("sales/young.csv").await.unwrap();
    let report = c.sweep("", 3_600_000, now, &Default::default()).await.unwrap();
    assert_eq!((report.aborted.len(), report.kept_young), (0, 1));
    c.store().abort("sales/young.csv", &young).await.unwrap();
    // Swept "an hour later": every upload the scenario makes is older than its limit (0).
    scenarios::sweeper_aborts_orphans_only(&c, &tmp.0, now + 3_600_000).await;
}

/// A sweep of a listing aborts only what that listing holds: an upload created after it (a task
/// about to record it) is left alone, however old the store says it is — the race that aborted
/// a retried task's upload in weir serve's sweeper on moto.
#[tokio::test]
async fn a_sweep_of_a_listing_leaves_uploads_created_after_it() {
    let root = TempDir::new("local-root");
    let c = local_committer(&root.0);
    let orphan = c.store().create_upload("sales/orphan.csv").await.unwrap();
    let listed = c.store().list_uploads("").await.unwrap();
    let late = c.store().create_upload("sales/late.csv").await.unwrap();
    // "A day later": both are older than the limit; only the listed one goes.
    let later = i64::MAX / 2;
    let report = c.sweep_listed(listed, 0, later, &Default::default()).await.unwrap();
    assert_eq!(report.aborted.iter().map(|u| u.upload_id.clone()).collect::<Vec<_>>(), [orphan]);
    let left: Vec<String> =
        c.store().list_uploads("").await.unwrap().into_iter().map(|u| u.upload_id).collect();
    assert_eq!(left, std::slice::from_ref(&late));
    c.store().abort("sales/late.csv", &late).await.unwrap();
}

/// A part changed on disk after the task commit recorded its ETag: the job commit finds it,
/// aborts, and nothing is visible.
#[tokio::test]
async fn a_changed_part_aborts_the_job() {
    let root = TempDir::new("local-root");
    let tmp = TempDir::new("local-files");
    let c = local_committer(&root.0);
    let rec = c
        .put_file(scenarios::OUT, "_weir/staging/r/t0/", "x.csv", &common::write_file(&tmp.0, "x", b"hello"))
        .await
        .unwrap();
    let part = root.0.join(weir_commit::LOCAL_UPLOADS_DIR).join(&rec.upload_id).join("part-000001");
    std::fs::write(&part, b"HELLO").unwrap();
    let plan = weir_commit::JobCommitPlan {
        run_id: "r".into(),
        output: scenarios::OUT.into(),
        partitions: vec![],
        attempts: vec!["_weir/staging/r/t0/".into()],
    };
    let mut state = c.prepare_job_commit(&plan).await.unwrap();
    let err = c.job_commit(&mut state).await.unwrap_err();
    assert!(matches!(err, weir_commit::CommitError::Integrity { what: "ETag", .. }), "{err}");
    assert!(err.to_string().contains("x.csv part 1"), "{err}");
    assert_eq!(state.phase, weir_commit::JobPhase::Aborted);
    assert!(c.store().list(scenarios::OUT).await.unwrap().is_empty());
    assert!(c.store().list_uploads("").await.unwrap().is_empty());
}
