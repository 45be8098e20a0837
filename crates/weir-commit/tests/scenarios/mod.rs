//! Scenarios every store must pass; `s3.rs` runs them on moto, `local.rs` on a directory.

use std::collections::BTreeSet;
use std::path::Path;

use weir_commit::{CommitError, Committer, JobCommitPlan, JobCommitState, JobPhase};

use crate::common::{data, write_file};

pub const OUT: &str = "sales/dt=2026-11-27/";
const MIB: usize = 1024 * 1024;

fn staging(run: &str, attempt: &str) -> String {
    format!("_weir/staging/{run}/{attempt}/")
}

fn plan(run: &str, attempts: &[&str]) -> JobCommitPlan {
    JobCommitPlan {
        run_id: run.into(),
        output: OUT.into(),
        partitions: vec!["dt=2026-11-27".into()],
        attempts: attempts.iter().map(|a| staging(run, a)).collect(),
    }
}

/// Keys of the objects under the output (what a reader listing it would see).
async fn visible(c: &Committer) -> Vec<String> {
    c.store().list(OUT).await.unwrap().into_iter().map(|o| o.key).collect()
}

async fn open_uploads(c: &Committer) -> usize {
    c.store().list_uploads("").await.unwrap().len()
}

/// Two attempts upload three files (one of three parts); nothing shows until the job commit,
/// then all files and the manifest show, with the bytes written, and no upload is left.
pub async fn commit_shows_everything_at_once(c: &Committer, tmp: &Path) {
    let big = data(1, 2 * weir_commit::MIN_PART_SIZE + 123_457);
    let small = data(2, 1000);
    let other = data(3, 5 * MIB);
    let a1 = staging("run-1", "map.0.a1");
    let a2 = staging("run-1", "map.1.a1");
    let rec = c.put_file(OUT, &a1, "part-0.csv", &write_file(tmp, "big", &big)).await.unwrap();
    assert_eq!(rec.parts.len(), 3, "{rec:?}");
    assert_eq!(rec.size, big.len() as u64);
    c.put_file(OUT, &a1, "region=eu/part-1.csv", &write_file(tmp, "small", &small)).await.unwrap();
    c.put_file(OUT, &a2, "part-2.csv", &write_file(tmp, "other", &other)).await.unwrap();

    assert_eq!(visible(c).await, Vec::<String>::new(), "the task commit shows nothing");
    assert_eq!(open_uploads(c).await, 3);
    let before = c.check_output(OUT).await.unwrap_err();
    assert!(before.to_string().contains("no _weir_manifest.json"), "{before}");

    let mut state = c.prepare_job_commit(&plan("run-1", &["map.0.a1", "map.1.a1"])).await.unwrap();
    // The server stores this before the job commit; it must survive a round trip.
    let stored = serde_json::to_string(&state).unwrap();
    assert_eq!(serde_json::from_str::<JobCommitState>(&stored).unwrap(), state);
    let manifest = c.job_commit(&mut state).await.unwrap();
    assert_eq!(state.phase, JobPhase::Committed);

    let names: Vec<_> = manifest.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["part-0.csv", "part-2.csv", "region=eu/part-1.csv"]);
    assert_eq!(manifest.total_size, (big.len() + small.len() + other.len()) as u64);
    assert_eq!(manifest.partitions, ["dt=2026-11-27"]);
    assert_eq!(manifest.run_id, "run-1");
    assert!(manifest.files[0].etag.ends_with("-3"), "multipart ETag: {:?}", manifest.files[0]);
    assert_eq!(c.check_output(OUT).await.unwrap(), manifest);
    for (name, bytes) in [("part-0.csv", &big), ("region=eu/part-1.csv", &small), ("part-2.csv", &other)] {
        let got = c.store().get(&format!("{OUT}{name}")).await.unwrap().unwrap();
        assert!(got.as_ref() == bytes.as_slice(), "{name}: content differs");
    }
    assert_eq!(
        visible(c).await,
        [
            format!("{OUT}_weir_claim.json"),
            format!("{OUT}_weir_manifest.json"),
            format!("{OUT}part-0.csv"),
            format!("{OUT}part-2.csv"),
            format!("{OUT}region=eu/part-1.csv"),
        ]
    );
    assert_eq!(open_uploads(c).await, 0);
    assert!(c.store().list("_weir/").await.unwrap().is_empty(), "staging records dropped");
    // Committing again with the stored state is a no-op returning the same manifest.
    let mut again: JobCommitState = serde_json::from_str(&stored).unwrap();
    assert_eq!(c.job_commit(&mut again).await.unwrap(), manifest);
}

/// A second run writing the same output is refused with a reason naming the first; its
/// uploads are aborted; the first run's files are untouched.
pub async fn second_run_is_refused(c: &Committer, tmp: &Path) {
    let first = data(10, 3000);
    c.put_file(OUT, &staging("run-a", "t0"), "part-0.csv", &write_file(tmp, "a", &first)).await.unwrap();
    let mut a = c.prepare_job_commit(&plan("run-a", &["t0"])).await.unwrap();

    let second = data(11, 4000);
    c.put_file(OUT, &staging("run-b", "t0"), "part-0.csv", &write_file(tmp, "b", &second)).await.unwrap();
    let mut b = c.prepare_job_commit(&plan("run-b", &["t0"])).await.unwrap();

    c.job_commit(&mut a).await.unwrap();
    let err = c.job_commit(&mut b).await.unwrap_err();
    assert!(matches!(&err, CommitError::Conflict { other_run, .. } if other_run == "run-a"), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("run-a") && msg.contains("run run-b") && msg.contains(OUT), "{msg}");
    assert_eq!(b.phase, JobPhase::Aborted);
    assert_eq!(open_uploads(c).await, 0, "run-b's upload is aborted");
    let got = c.store().get(&format!("{OUT}part-0.csv")).await.unwrap().unwrap();
    assert!(got.as_ref() == first.as_slice(), "run-a's file is intact");
    assert_eq!(c.check_output(OUT).await.unwrap().run_id, "run-a");
}

/// The same, when the second run reaches the claim before the first writes its manifest: the
/// claim stops it before it completes anything.
pub async fn claim_stops_a_concurrent_writer(c: &Committer, tmp: &Path) {
    let first = data(20, 2000);
    c.put_file(OUT, &staging("run-a", "t0"), "x.csv", &write_file(tmp, "a", &first)).await.unwrap();
    let mut a = c.prepare_job_commit(&plan("run-a", &["t0"])).await.unwrap();
    let second = data(21, 2500);
    c.put_file(OUT, &staging("run-b", "t0"), "x.csv", &write_file(tmp, "b", &second)).await.unwrap();
    let mut b = c.prepare_job_commit(&plan("run-b", &["t0"])).await.unwrap();
    // Both commit at once; exactly one wins, the other is refused, the files are the winner's.
    let (ra, rb) = tokio::join!(c.job_commit(&mut a), c.job_commit(&mut b));
    let (winner, bytes) = match (&ra, &rb) {
        (Ok(m), Err(CommitError::Conflict { .. })) => (m.run_id.clone(), &first),
        (Err(CommitError::Conflict { .. }), Ok(m)) => (m.run_id.clone(), &second),
        other => panic!("expected one commit and one refusal, got {other:?}"),
    };
    let got = c.store().get(&format!("{OUT}x.csv")).await.unwrap().unwrap();
    assert!(got.as_ref() == bytes.as_slice(), "the file is {winner}'s");
    assert_eq!(c.check_output(OUT).await.unwrap().run_id, winner);
    assert_eq!(open_uploads(c).await, 0);
}

/// A failed attempt and a retried one: the failed attempt's uploads are aborted, the retry's
/// are committed; nothing of the failed attempt is ever visible or left behind.
pub async fn failed_attempt_leaves_nothing(c: &Committer, tmp: &Path) {
    let bad = data(30, 6 * MIB);
    let good = data(31, 6 * MIB);
    let first = staging("run-r", "t0.a1");
    c.put_file(OUT, &first, "p.csv", &write_file(tmp, "bad", &bad)).await.unwrap();
    c.put_file(OUT, &first, "q.csv", &write_file(tmp, "bad2", &bad[..100])).await.unwrap();
    assert_eq!(c.abort_attempts(&[first]).await.unwrap(), 2);
    assert_eq!(open_uploads(c).await, 0);
    c.put_file(OUT, &staging("run-r", "t0.a2"), "p.csv", &write_file(tmp, "good", &good)).await.unwrap();
    let mut s = c.prepare_job_commit(&plan("run-r", &["t0.a2"])).await.unwrap();
    let m = c.job_commit(&mut s).await.unwrap();
    assert_eq!(m.files.len(), 1);
    let got = c.store().get(&format!("{OUT}p.csv")).await.unwrap().unwrap();
    assert!(got.as_ref() == good.as_slice());
    assert!(c.store().head(&format!("{OUT}q.csv")).await.unwrap().is_none());
    assert_eq!(open_uploads(c).await, 0);
}

/// An attempt killed mid-upload (its record still says `uploading`) cannot be committed; the
/// job aborts and leaves nothing: no object, no upload, no claim.
pub async fn unfinished_attempt_aborts_the_job(c: &Committer, tmp: &Path) {
    let s = staging("run-k", "t0");
    c.put_file(OUT, &s, "done.csv", &write_file(tmp, "d", &data(40, 100))).await.unwrap();
    let rec = c.put_file(OUT, &s, "cut.csv", &write_file(tmp, "c", &data(41, 100))).await.unwrap();
    // What a kill between the upload's creation and its last part leaves: the record in
    // state `uploading`.
    let key = format!("{s}files/cut.csv.upload.json");
    let mut cut = rec.clone();
    cut.state = weir_commit::UploadState::Uploading;
    cut.parts.clear();
    c.store().put(&key, serde_json::to_vec(&cut).unwrap()).await.unwrap();
    let err = c.prepare_job_commit(&plan("run-k", &["t0"])).await.unwrap_err();
    assert!(err.to_string().contains("never finished"), "{err}");
    assert_eq!(c.abort_attempts(&[s]).await.unwrap(), 2);
    assert_eq!(open_uploads(c).await, 0);
    assert_eq!(visible(c).await, Vec::<String>::new());
}

/// An abort after part of the job commit: objects completed are deleted, the claim is
/// released, another run can then commit.
pub async fn abort_after_partial_commit_releases_the_output(c: &Committer, tmp: &Path) {
    for i in 0..4 {
        let s = staging("run-p", &format!("t{i}"));
        c.put_file(OUT, &s, &format!("f{i}.csv"), &write_file(tmp, "f", &data(50 + i, 1000))).await.unwrap();
    }
    let attempts: Vec<String> = (0..4).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = attempts.iter().map(String::as_str).collect();
    let mut s = c.prepare_job_commit(&plan("run-p", &refs)).await.unwrap();
    let stored = serde_json::to_string(&s).unwrap();
    // A server killed during the job commit: the call is dropped when the claim is there.
    let claim = format!("{OUT}_weir_claim.json");
    let cc = c.clone();
    let task = tokio::spawn(async move { cc.job_commit(&mut s).await });
    while c.store().head(&claim).await.unwrap().is_none() && !task.is_finished() {
        tokio::task::yield_now().await;
    }
    task.abort();
    let _ = task.await;
    settle(c).await;
    // The restarted server aborts with the state it stored (phase `prepared`).
    let mut resumed: JobCommitState = serde_json::from_str(&stored).unwrap();
    match c.abort_job(&mut resumed).await {
        Ok(report) => {
            assert!(report.claim_released, "{report:?}");
            assert_eq!(visible(c).await, Vec::<String>::new());
            assert_eq!(open_uploads(c).await, 0);
            // The output is free again.
            c.put_file(OUT, &staging("run-q", "t0"), "g.csv", &write_file(tmp, "g", b"g")).await.unwrap();
            let mut q = c.prepare_job_commit(&plan("run-q", &["t0"])).await.unwrap();
            assert_eq!(c.job_commit(&mut q).await.unwrap().run_id, "run-q");
        }
        // The dropped call got as far as the manifest: then it is committed, whole.
        Err(CommitError::AlreadyCommitted { .. }) => {
            assert_eq!(c.check_output(OUT).await.unwrap().files.len(), 4);
        }
        Err(e) => panic!("{e}"),
    }
}

/// A job commit interrupted at any point resumes from the stored state and commits whole.
pub async fn interrupted_commit_resumes(c: &Committer, tmp: &Path) {
    let mut want = Vec::new();
    for i in 0..6u64 {
        let s = staging("run-i", &format!("t{i}"));
        let bytes = data(60 + i, 1000 + i as usize);
        c.put_file(OUT, &s, &format!("f{i}.csv"), &write_file(tmp, "f", &bytes)).await.unwrap();
        want.push(bytes);
    }
    let attempts: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = attempts.iter().map(String::as_str).collect();
    let mut s = c.prepare_job_commit(&plan("run-i", &refs)).await.unwrap();
    let stored = serde_json::to_string(&s).unwrap();
    let first = format!("{OUT}f0.csv");
    let cc = c.clone();
    let task = tokio::spawn(async move { cc.job_commit(&mut s).await });
    // Dropped once the first object is complete (or when it finished anyway).
    while c.store().head(&first).await.unwrap().is_none() && !task.is_finished() {
        tokio::task::yield_now().await;
    }
    task.abort();
    let _ = task.await;
    settle(c).await;
    let mut resumed: JobCommitState = serde_json::from_str(&stored).unwrap();
    let m = c.job_commit(&mut resumed).await.unwrap();
    assert_eq!(m.files.len(), 6);
    assert_eq!(m.run_id, "run-i");
    for (i, bytes) in want.iter().enumerate() {
        let got = c.store().get(&format!("{OUT}f{i}.csv")).await.unwrap().unwrap();
        assert!(got.as_ref() == bytes.as_slice(), "f{i}");
    }
    c.check_output(OUT).await.unwrap();
    assert_eq!(open_uploads(c).await, 0);
}

/// The sweeper aborts an orphan upload (created, never recorded: a crash in between) and
/// keeps the upload a live attempt owns.
pub async fn sweeper_aborts_orphans_only(c: &Committer, tmp: &Path, now_ms: i64) {
    let live_attempt = staging("run-s", "t0");
    let rec = c.put_file(OUT, &live_attempt, "live.csv", &write_file(tmp, "l", b"live")).await.unwrap();
    let orphan = c.store().create_upload(&format!("{OUT}orphan.csv")).await.unwrap();
    let live = c.live_uploads(&[live_attempt]).await.unwrap();
    assert_eq!(live, BTreeSet::from([rec.upload_id.clone()]));
    let report = c.sweep("", 0, now_ms, &live).await.unwrap();
    assert_eq!(report.aborted.len(), 1, "{report:?}");
    assert_eq!(report.aborted[0].upload_id, orphan);
    assert_eq!(report.kept_live, 1);
    let left: Vec<_> = c.store().list_uploads("").await.unwrap().into_iter().map(|u| u.upload_id).collect();
    assert_eq!(left, [rec.upload_id]);
    // Nothing live any more: the sweep leaves ListMultipartUploads empty.
    let report = c.sweep("", 0, now_ms, &BTreeSet::new()).await.unwrap();
    assert_eq!(report.aborted.len(), 1);
    assert_eq!(open_uploads(c).await, 0);
}

/// The reader's check names each missing file and each file of the wrong size.
pub async fn reader_check_names_missing_and_resized_files(c: &Committer, tmp: &Path) {
    let s = staging("run-c", "t0");
    for name in ["a.csv", "b.csv", "c.csv"] {
        c.put_file(OUT, &s, name, &write_file(tmp, "x", &data(70, 500))).await.unwrap();
    }
    let mut st = c.prepare_job_commit(&plan("run-c", &["t0"])).await.unwrap();
    c.job_commit(&mut st).await.unwrap();
    c.check_output(OUT).await.unwrap();
    c.store().delete(&format!("{OUT}a.csv")).await.unwrap();
    c.store().put(&format!("{OUT}c.csv"), vec![1, 2, 3]).await.unwrap();
    let err = c.check_output(OUT).await.unwrap_err();
    let CommitError::Incomplete { problems, .. } = &err else { panic!("{err}") };
    assert_eq!(
        problems,
        &["a.csv is missing".to_string(), "c.csv has 3 bytes, the manifest says 500".to_string()]
    );
}

/// After aborting a job commit's task: its future stops, not the blocking work it handed off
/// (the local store joins parts, completes uploads and removes upload folders on blocking
/// threads), which a crashed server's process would not go on doing. Wait until the uploads and
/// objects stop changing, so what runs next is alone, as after a restart (CI failed twice
/// without this: an upload folder left; an object completed after the abort had listed).
async fn settle(c: &Committer) {
    let mut last = (open_uploads(c).await, c.store().list(OUT).await.unwrap().len());
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let now = (open_uploads(c).await, c.store().list(OUT).await.unwrap().len());
        if now == last {
            break;
        }
        last = now;
    }
}
