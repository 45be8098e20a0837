//! The Slurm backend against a real Slurm (slurmctld + slurmd + slurmrestd). `.ci/run` starts
//! one; on a developer's machine start it with the shared engines' `slurm/up.sh`.
//!
//! Settings: `WEIR_TEST_SLURM_URL` (default `http://127.0.0.1:6820`), `WEIR_TEST_SLURM_JWT_KEY`
//! (default Debian's `/var/lib/slurm/slurmctld/jwt_hs256.key`), `WEIR_TEST_SLURM_PARTITION`.
//! A test that cannot reach Slurm fails, unless `WEIR_SKIP_SLURM_TESTS=1` says to skip (loudly).

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use weir_backend::{Adopted, AttemptId, Backend, Exit, Recovered, TaskExit, TaskLaunch};
use weir_backend_slurm::{Auth, SlurmBackend, SlurmConfig};
use weir_model::Resources;

fn config() -> SlurmConfig {
    let url = std::env::var("WEIR_TEST_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into());
    let key = std::env::var("WEIR_TEST_SLURM_JWT_KEY")
        .unwrap_or_else(|_| "/var/lib/slurm/slurmctld/jwt_hs256.key".into());
    let mut c = SlurmConfig::new(
        url,
        "root",
        Auth::JwtKey { key_file: key.into(), lifespan: Duration::from_secs(600) },
    );
    c.partition = std::env::var("WEIR_TEST_SLURM_PARTITION").ok();
    c.poll_interval = Duration::from_millis(200);
    // Each test run has its own tag: attempt ids repeat across runs, jobs must not be confused.
    c.tag = format!("weirtest{}", std::process::id());
    c
}

/// A connected backend, or `None` when Slurm is missing and skipping was asked for.
async fn backend(config: SlurmConfig) -> Option<(SlurmBackend, UnboundedReceiver<TaskExit>)> {
    let (tx, rx) = unbounded_channel();
    match SlurmBackend::connect(config, tx).await {
        Ok(b) => Some((b, rx)),
        Err(e) if std::env::var("WEIR_SKIP_SLURM_TESTS").as_deref() == Ok("1") => {
            eprintln!("*** SKIPPED: no Slurm to test against ({e}); WEIR_SKIP_SLURM_TESTS=1 ***");
            None
        }
        Err(e) => panic!(
            "these tests need a real Slurm with slurmrestd (start one with the shared engines' slurm/up.sh, \
             or set WEIR_SKIP_SLURM_TESTS=1 to skip them): {e}"
        ),
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("weir-slurm-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn launch(dir: &std::path::Path, attempt: &str, command: &str) -> TaskLaunch {
    TaskLaunch {
        attempt: AttemptId::new(attempt).unwrap(),
        command: command.into(),
        env: [("GREETING".to_string(), "hello".to_string())].into(),
        workdir: dir.to_path_buf(),
        resources: Resources { cpu: 500, memory: 16, gpu: 0 },
        stdout: dir.join("out"),
        stderr: dir.join("err"),
        spark: None,
        user: None,
    }
}

async fn next_exit(rx: &mut UnboundedReceiver<TaskExit>) -> TaskExit {
    tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("an end within a minute").unwrap()
}

#[tokio::test]
async fn a_job_runs_with_its_environment_and_reports_its_exit_code() {
    let Some((b, mut rx)) = backend(config()).await else { return };
    let dir = scratch("exit");
    let l = launch(&dir, "exit/1", "echo $GREETING from $WEIR_CPU_MILLICORES; pwd; exit 3");
    let rec = b.start(&l).await.unwrap();
    assert_eq!(rec.backend, "slurm");
    assert!(rec.pid > 0, "the Slurm job id is recorded");
    let end = next_exit(&mut rx).await;
    assert_eq!((end.attempt.as_str(), end.exit), ("exit/1", Exit::Code(3)));
    let out = std::fs::read_to_string(dir.join("out")).unwrap();
    assert_eq!(out, format!("hello from 500\n{}\n", dir.display()));
    assert!(tokio::time::timeout(Duration::from_millis(800), rx.recv()).await.is_err(), "reported once");
}

/// With end markers, an end is found without listing every job or reading it from Slurm: here
/// the listing interval is an hour (one listing when the job is new, the next an hour later),
/// so the end can only come through the marker the job's script left, with its status.
#[tokio::test]
async fn an_end_is_found_by_its_marker_with_its_status_without_a_listing() {
    let mut c = config();
    c.poll_interval = Duration::from_secs(3600);
    assert!(c.end_markers, "markers are the default");
    let Some((b, mut rx)) = backend(c).await else { return };
    let dir = scratch("marker");
    // The job outlives the first listing (a quarter second after the start at most).
    b.start(&launch(&dir, "marker/1", "sleep 2; echo ran; exit 5")).await.unwrap();
    let end = next_exit(&mut rx).await;
    assert_eq!((end.attempt.as_str(), end.exit), ("marker/1", Exit::Code(5)));
    assert_eq!(
        std::fs::read_to_string(dir.join("out.ended")).unwrap(),
        "5\n",
        "the script left its status in the marker beside stdout"
    );
    assert_eq!(std::fs::read_to_string(dir.join("out")).unwrap(), "ran\n");
}

/// A task can write its own marker and go on running: the attempt ends by the marker, and the
/// listings, which must then show the job ended, find it still running after the grace and
/// cancel it — a task cannot leave weir's accounting while it holds Slurm's resources.
#[tokio::test]
async fn a_job_that_wrote_its_own_marker_and_runs_on_is_cancelled() {
    let Some((b, mut rx)) = backend(config()).await else { return };
    let dir = scratch("forged");
    let rec = b
        .start(&launch(&dir, "forged/1", &format!("echo 0 > {}/out.ended; sleep 120", dir.display())))
        .await
        .unwrap();
    let end = next_exit(&mut rx).await;
    assert_eq!((end.attempt.as_str(), end.exit), ("forged/1", Exit::Code(0)), "ended by the marker's word");
    let job = rec.pid.to_string();
    let state = || {
        let out = std::process::Command::new("scontrol").args(["show", "job", "-o", &job]).output();
        let out = out.expect("scontrol (Slurm's client) on PATH");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or("").to_string()
    };
    assert_eq!(state(), "RUNNING", "the job runs on after its forged marker");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = state();
        if s == "CANCELLED" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "job {job} still {s} a minute after its forged marker");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_signal_is_reported_as_a_signal() {
    let Some((b, mut rx)) = backend(config()).await else { return };
    let dir = scratch("signal");
    b.start(&launch(&dir, "signal/1", "kill -9 $$")).await.unwrap();
    assert_eq!(next_exit(&mut rx).await.exit, Exit::Signal(9));
}

#[tokio::test]
async fn kill_ends_a_running_job_as_killed() {
    let Some((b, mut rx)) = backend(config()).await else { return };
    let dir = scratch("kill");
    let rec = b.start(&launch(&dir, "kill/1", "echo started; sleep 120")).await.unwrap();
    wait_for_file(&dir.join("out")).await;
    b.kill(&rec, Duration::from_secs(2)).await.unwrap();
    b.kill(&rec, Duration::from_secs(2)).await.unwrap();
    assert_eq!(next_exit(&mut rx).await.exit, Exit::Killed);
}

#[tokio::test]
async fn a_new_backend_adopts_a_running_job_and_reports_its_end() {
    let Some((first, _rx)) = backend(config()).await else { return };
    let dir = scratch("adopt");
    let rec = first.start(&launch(&dir, "adopt/1", "sleep 3; exit 4")).await.unwrap();
    drop(first);
    let (second, mut rx) = backend(config()).await.unwrap();
    assert_eq!(second.adopt(&rec).await.unwrap(), Adopted::Running);
    assert_eq!(second.adopt(&rec).await.unwrap(), Adopted::Running, "adopting twice changes nothing");
    assert_eq!(next_exit(&mut rx).await.exit, Exit::Code(4));
    let (third, _rx) = backend(config()).await.unwrap();
    assert_eq!(third.adopt(&rec).await.unwrap(), Adopted::Ended(Exit::Code(4)), "an end seen by nobody");
}

#[tokio::test]
async fn an_unrecorded_start_is_recovered_by_its_attempt_id() {
    let Some((first, _rx)) = backend(config()).await else { return };
    let dir = scratch("recover");
    let rec = first.start(&launch(&dir, "recover/1", "sleep 2")).await.unwrap();
    drop(first);
    let (second, mut rx) = backend(config()).await.unwrap();
    match second.recover(&AttemptId::new("recover/1").unwrap()).await.unwrap() {
        Recovered::Running(l) => assert_eq!(l.pid, rec.pid, "the same Slurm job"),
        other => panic!("expected the running job, got {other:?}"),
    }
    assert_eq!(next_exit(&mut rx).await.exit, Exit::Code(0));
    assert_eq!(second.recover(&AttemptId::new("recover/never").unwrap()).await.unwrap(), Recovered::NotFound);
    // Another installation's tag does not see this job.
    let mut other = config();
    other.tag = format!("{}x", other.tag);
    let (third, _rx) = backend(other).await.unwrap();
    assert_eq!(third.recover(&AttemptId::new("recover/1").unwrap()).await.unwrap(), Recovered::NotFound);
}

#[tokio::test]
async fn a_job_that_was_known_and_is_gone_ends_as_lost_never_as_a_success() {
    let Some((b, mut rx)) = backend(config()).await else { return };
    // A recorded job Slurm no longer knows (forgotten after MinJobAge): adopt says it ended, lost.
    let dir = scratch("gone");
    let mut rec = b.start(&launch(&dir, "gone/1", "true")).await.unwrap();
    assert_eq!(next_exit(&mut rx).await.exit, Exit::Code(0));
    rec.pid = 60_000_000;
    assert_eq!(b.adopt(&rec).await.unwrap(), Adopted::Ended(Exit::Lost));
    // A watched job that disappears from the listing: the poller ends it as lost.
    b.watch_unchecked(&AttemptId::new("gone/2").unwrap(), 60_000_001);
    let end = next_exit(&mut rx).await;
    assert_eq!((end.attempt.as_str(), end.exit), ("gone/2", Exit::Lost));
}

#[tokio::test]
async fn bad_settings_are_refused_at_connect_with_the_reason() {
    let (tx, _rx) = unbounded_channel();
    let mut c = config();
    c.partition = Some("no-such-partition".into());
    match SlurmBackend::connect(c, tx.clone()).await {
        Err(e) if e.to_string().contains("no-such-partition") => {}
        Err(e) if std::env::var("WEIR_SKIP_SLURM_TESTS").as_deref() == Ok("1") => {
            eprintln!("*** SKIPPED: {e} ***");
            return;
        }
        other => panic!("expected the unknown partition to be named, got {:?}", other.err()),
    }
    let dir = scratch("badkey");
    std::fs::write(dir.join("key"), [1u8; 32]).unwrap();
    let mut c = config();
    c.auth = Auth::JwtKey { key_file: dir.join("key"), lifespan: Duration::from_secs(600) };
    let e = SlurmBackend::connect(c, tx.clone()).await.err().expect("a wrong key is refused");
    assert!(e.to_string().contains("slurmctld rejected a ping as user `root`"), "{e}");
    let mut c = config();
    c.url = "http://127.0.0.1:9".into();
    let e = SlurmBackend::connect(c, tx.clone()).await.err().expect("nothing listens there");
    assert!(e.to_string().contains("cannot be reached"), "{e}");
    let (b, _rx) = backend(config()).await.unwrap();
    let h = b.health().await;
    assert!(h.healthy && h.nodes >= 1 && h.version.contains("v0.0.38"), "{h:?}");
    let nodes = b.nodes().await.unwrap();
    assert!(nodes.iter().all(|n| n.cpu_millicores >= 1000 && n.memory_mib > 0), "{nodes:?}");
}

async fn wait_for_file(p: &std::path::Path) {
    for _ in 0..300 {
        if std::fs::metadata(p).is_ok_and(|m| m.len() > 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} never appeared", p.display());
}
