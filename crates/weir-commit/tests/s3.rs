//! The committer on a real S3-compatible server: moto's, started per test on a loopback port.

mod common;
mod scenarios;

use std::collections::BTreeSet;

use common::{s3_committer, s3_config, small_parts, Fault, FaultProxy, Moto, TempDir};
use weir_commit::{CommitError, Committer, JobCommitPlan, StoreConfig};

async fn moto(bucket: &str) -> Moto {
    let m = Moto::start();
    m.bucket(bucket).await;
    m
}

macro_rules! on_moto {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let m = moto("weir-out").await;
            let tmp = TempDir::new("s3-files");
            let c = s3_committer(&m.endpoint(), "weir-out");
            scenarios::$name(&c, &tmp.0).await;
            // Whatever the scenario did, ListMultipartUploads is empty.
            assert_eq!(c.store().list_uploads("").await.unwrap(), vec![]);
        }
    )*};
}

on_moto!(
    commit_shows_everything_at_once,
    second_run_is_refused,
    claim_stops_a_concurrent_writer,
    failed_attempt_leaves_nothing,
    unfinished_attempt_aborts_the_job,
    abort_after_partial_commit_releases_the_output,
    interrupted_commit_resumes,
    reader_check_names_missing_and_resized_files,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_aborts_orphans_only() {
    let m = moto("weir-out").await;
    let tmp = TempDir::new("s3-files");
    let c = s3_committer(&m.endpoint(), "weir-out");
    // moto 5.2 reports every upload as initiated 2010-11-10T20:48:33Z, so on moto every upload
    // is old; the age limit is tested on the local store.
    let u = c.store().create_upload("x/y").await.unwrap();
    let listed = c.store().list_uploads("x/").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].upload_id, u);
    assert!(c.store().list_uploads("z/").await.unwrap().is_empty(), "the prefix filters");
    c.store().abort("x/y", &u).await.unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    scenarios::sweeper_aborts_orphans_only(&c, &tmp.0, now).await;
}

/// What the committer relies on, checked on this moto: If-None-Match create-only puts,
/// ListMultipartUploads (with more uploads than one page holds), aborts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_honours_create_only_puts_and_lists_uploads() {
    let m = moto("weir-out").await;
    let c = s3_committer(&m.endpoint(), "weir-out");
    assert!(c.store().put_create("k", b"1".to_vec()).await.unwrap());
    assert!(!c.store().put_create("k", b"2".to_vec()).await.unwrap(), "the second create-only put fails");
    assert_eq!(c.store().get("k").await.unwrap().unwrap().as_ref(), b"1");
    let mut ids = BTreeSet::new();
    for i in 0..1005 {
        ids.insert(c.store().create_upload(&format!("p/{i:04}")).await.unwrap());
    }
    let listed = c.store().list_uploads("p/").await.unwrap();
    assert_eq!(listed.iter().map(|u| u.upload_id.clone()).collect::<BTreeSet<_>>(), ids, "every page read");
    let report = c.sweep("p/", 0, i64::MAX / 2, &BTreeSet::new()).await.unwrap();
    assert_eq!(report.aborted.len(), 1005);
    assert!(c.store().list_uploads("").await.unwrap().is_empty());
}

fn plan(run: &str, attempt: &str) -> JobCommitPlan {
    JobCommitPlan {
        run_id: run.into(),
        output: scenarios::OUT.into(),
        partitions: vec![],
        attempts: vec![format!("_weir/staging/{run}/{attempt}/")],
    }
}

fn committer_via(endpoint: &str, max_retries: usize, timeout_ms: u64) -> Committer {
    let mut cfg = s3_config(endpoint, "weir-out");
    cfg.retry.max_retries = max_retries;
    cfg.request_timeout_ms = timeout_ms;
    Committer::new(&StoreConfig::S3(cfg), small_parts()).unwrap()
}

/// 503 SlowDown during a task commit's parts and a job commit: retried with backoff, counted,
/// and the commit succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowdown_is_retried_and_counted() {
    let m = moto("weir-out").await;
    let tmp = TempDir::new("s3-files");
    let bytes = common::data(80, 2 * weir_commit::MIN_PART_SIZE + 10);
    let file = common::write_file(&tmp.0, "f", &bytes);

    let proxy = FaultProxy::start(m.port, Fault::SlowDown, 4).await;
    let task = committer_via(&proxy.endpoint(), 6, 20_000);
    task.put_file(scenarios::OUT, "_weir/staging/r/t0/", "f.csv", &file).await.unwrap();
    assert_eq!(proxy.remaining(), 0);
    let counts = task.store().metrics().snapshot();
    assert_eq!(counts.slowdown, 4, "{counts:?}");
    assert_eq!(counts.retryable_failures(), 4, "{counts:?}");

    let proxy = FaultProxy::start(m.port, Fault::SlowDown, 3).await;
    let job = committer_via(&proxy.endpoint(), 6, 20_000);
    let mut state = job.prepare_job_commit(&plan("r", "t0")).await.unwrap();
    let manifest = job.job_commit(&mut state).await.unwrap();
    assert_eq!(manifest.files[0].size, bytes.len() as u64);
    assert_eq!(job.store().metrics().snapshot().slowdown, 3);
    let got = job.store().get(&format!("{}f.csv", scenarios::OUT)).await.unwrap().unwrap();
    assert!(got.as_ref() == bytes.as_slice());
}

/// Retries are bounded: a store that keeps answering 503 fails the job commit with the store's
/// error (after max_retries + 1 tries of the first request); the stored state then resumes on
/// a healthy path and commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_bounded_and_the_commit_resumes() {
    let m = moto("weir-out").await;
    let tmp = TempDir::new("s3-files");
    let direct = s3_committer(&m.endpoint(), "weir-out");
    direct
        .put_file(scenarios::OUT, "_weir/staging/r/t0/", "f.csv", &common::write_file(&tmp.0, "f", b"abc"))
        .await
        .unwrap();
    let mut state = direct.prepare_job_commit(&plan("r", "t0")).await.unwrap();
    let stored = serde_json::to_string(&state).unwrap();

    let proxy = FaultProxy::start(m.port, Fault::SlowDown, 1_000_000).await;
    let job = committer_via(&proxy.endpoint(), 2, 20_000);
    let err = job.job_commit(&mut state).await.unwrap_err();
    assert!(matches!(err, CommitError::Store { .. }), "{err}");
    assert_eq!(job.store().metrics().snapshot().slowdown, 3, "one try and two retries");
    assert!(direct.store().list(scenarios::OUT).await.unwrap().is_empty(), "nothing visible");

    let mut resumed = serde_json::from_str(&stored).unwrap();
    let manifest = direct.job_commit(&mut resumed).await.unwrap();
    assert_eq!(manifest.files.len(), 1);
    assert!(direct.store().list_uploads("").await.unwrap().is_empty());
}

/// Requests that get no answer time out, are retried, counted, and the commit goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_retried_and_counted() {
    let m = moto("weir-out").await;
    let tmp = TempDir::new("s3-files");
    let direct = s3_committer(&m.endpoint(), "weir-out");
    direct
        .put_file(scenarios::OUT, "_weir/staging/r/t0/", "f.csv", &common::write_file(&tmp.0, "f", b"abc"))
        .await
        .unwrap();
    let proxy = FaultProxy::start(m.port, Fault::Stall, 2).await;
    let job = committer_via(&proxy.endpoint(), 4, 500);
    let mut state = job.prepare_job_commit(&plan("r", "t0")).await.unwrap();
    job.job_commit(&mut state).await.unwrap();
    let counts = job.store().metrics().snapshot();
    assert_eq!(counts.timeouts, 2, "{counts:?}");
    assert_eq!(proxy.remaining(), 0);
    direct.check_output(scenarios::OUT).await.unwrap();
}
