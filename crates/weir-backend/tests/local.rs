//! The local backend with real processes: exit codes, logs, env and working folder, kills of
//! whole process trees, grace periods, adoption after a restart, pid re-use.

mod common;

use std::time::Duration;

use common::*;
use weir_backend::{Adopted, AttemptId, Backend, BackendError, Exit, Launched, Recovered};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_and_signals_are_reported_once_each() {
    let mut f = Fixture::new("codes");
    f.start("codes/zero", "true").await;
    f.start("codes/three", "exit 3").await;
    f.start("codes/nine", "kill -9 $$").await;
    f.start("codes/missing", "/no/such/program").await;
    let exits = f.exits(4).await;
    assert_eq!(exits["codes/zero"].exit, Exit::Code(0));
    assert_eq!(exits["codes/three"].exit, Exit::Code(3));
    assert_eq!(exits["codes/nine"].exit, Exit::Signal(9));
    // The shell's "not found".
    assert_eq!(exits["codes/missing"].exit, Exit::Code(127));
    f.no_more_exits().await;
    assert_eq!(f.backend().watching(), 0);
    assert!(!zombies_of(&f), "exited attempts must be reaped");
}

/// Whether any recorded attempt of this fixture is an unreaped zombie.
fn zombies_of(f: &Fixture) -> bool {
    f.started
        .iter()
        .any(|&(pid, start)| start_ticks(pid) == Some(start) && stat(pid).is_some_and(|s| s.0 == 'Z'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_env_and_workdir_are_applied() {
    let mut f = Fixture::new("logs");
    let mut launch = f.launch(
        "logs/a",
        "echo out-$GREETING; echo err-$WEIR_ATTEMPT >&2; pwd > where; echo \"[${CARGO_PKG_NAME-unset}] $WEIR_CPU_MILLICORES\"",
    );
    launch.env.insert("GREETING".into(), "hello world".into());
    f.start_launch(&launch).await;
    assert_eq!(f.next_exit().await.exit, Exit::Code(0));
    // cargo sets CARGO_PKG_NAME for the test process; the backend must not pass it on.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    assert_eq!(read(&launch.stdout), "out-hello world\n[unset] 1500\n");
    assert_eq!(read(&launch.stderr), "err-logs/a\n");
    let workdir = std::fs::canonicalize(f.work()).unwrap();
    assert_eq!(read(&f.work().join("where")).trim_end(), workdir.to_str().unwrap());

    // A second attempt logging to the same files appends.
    let mut again = f.launch("logs/b", "echo second; echo second-err >&2");
    again.stdout = launch.stdout.clone();
    again.stderr = launch.stdout.clone();
    f.start_launch(&again).await;
    assert_eq!(f.next_exit().await.exit, Exit::Code(0));
    assert_eq!(read(&launch.stdout), "out-hello world\n[unset] 1500\nsecond\nsecond-err\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_launch_is_refused_before_anything_runs() {
    let mut f = Fixture::new("bad");
    let mut launch = f.launch("bad/workdir", "true");
    launch.workdir = f.root.join("no-such-folder").join("run-1");
    let err = f.backend().start(&launch).await.unwrap_err();
    assert!(matches!(err, BackendError::BadLaunch { field: "workdir", .. }), "{err}");
    assert!(err.to_string().contains("no-such-folder"), "{err}");

    let mut launch = f.launch("bad/env", "true");
    launch.env.insert("A=B".into(), "x".into());
    let err = f.backend().start(&launch).await.unwrap_err();
    assert!(matches!(err, BackendError::BadLaunch { field: "env", .. }), "{err}");

    // An attempt id starts once only, also after it ended.
    f.start("bad/twice", "true").await;
    assert_eq!(f.next_exit().await.exit, Exit::Code(0));
    let err = f.backend().start(&f.launch("bad/twice", "true")).await.unwrap_err();
    assert!(matches!(err, BackendError::AlreadyStarted { .. }), "{err}");
    f.no_more_exits().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_ends_the_whole_process_tree() {
    let mut f = Fixture::new("tree");
    let launched = f.start("tree/a", "sleep 300 & sleep 300 & (sleep 300 & wait) & echo started; wait").await;
    let stdout = f.launch("tree/a", "").stdout;
    eventually("the task's children to start", || read(&stdout).contains("started")).await;
    let members = group_members(launched.pid);
    // wrapper, command shell, three sleeps and one subshell
    assert!(members.len() >= 5, "expected the whole tree in the task's group: {members:?}");
    f.backend().kill(&launched, Duration::from_secs(30)).await.unwrap();
    let exit = f.next_exit().await;
    assert_eq!(exit.exit, Exit::Killed);
    // Reported only once everything is gone: nothing of the group is left, not even orphans.
    assert_eq!(group_members(launched.pid), Vec::<i32>::new());
    for pid in members {
        assert!(
            stat(pid).is_none_or(|(state, _, pgrp)| pgrp != launched.pid || state == 'Z'),
            "{pid} survived"
        );
    }
    // Idempotent: killing again, or killing an ended attempt, is fine and reports nothing more.
    f.backend().kill(&launched, Duration::from_secs(1)).await.unwrap();
    f.no_more_exits().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_ignoring_sigterm_gets_sigkill_after_the_grace_period() {
    let mut f = Fixture::new("grace");
    let launched = f.start("grace/a", "trap '' TERM; echo ready; while :; do sleep 1; done").await;
    let stdout = f.launch("grace/a", "").stdout;
    eventually("the task to set its trap", || read(&stdout).contains("ready")).await;
    let grace = Duration::from_secs(2);
    let asked = tokio::time::Instant::now();
    f.backend().kill(&launched, grace).await.unwrap();
    f.backend().kill(&launched, grace).await.unwrap();
    // SIGTERM was ignored: the task is still there a moment later.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!group_members(launched.pid).is_empty(), "the task should outlive SIGTERM");
    let exit = f.next_exit().await;
    assert_eq!(exit.exit, Exit::Killed);
    // Not a speed check: SIGKILL may only come once the grace period is over.
    assert!(asked.elapsed() >= grace, "SIGKILL came after {:?}, before the grace period", asked.elapsed());
    assert_eq!(group_members(launched.pid), Vec::<i32>::new());
    f.no_more_exits().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_stops_on_sigterm_is_reported_killed_without_waiting_for_the_grace() {
    let mut f = Fixture::new("term");
    let launched = f.start("term/a", "echo ready; exec sleep 300").await;
    let stdout = f.launch("term/a", "").stdout;
    eventually("the task to start", || read(&stdout).contains("ready")).await;
    f.backend().kill(&launched, Duration::from_secs(3600)).await.unwrap();
    // Within PATIENCE (60 s), far below the hour of grace.
    assert_eq!(f.next_exit().await.exit, Exit::Killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_after_a_restart_keeps_watching_a_running_task() {
    let mut f = Fixture::new("adopt");
    let launched = f.start("adopt/a", "while [ ! -e go ]; do sleep 0.05; done; exit 7").await;
    let stored = launched.to_json();
    f.restart();
    let launched = Launched::from_json(&stored).unwrap();
    assert_eq!(f.backend().adopt(&launched).await.unwrap(), Adopted::Running);
    // Adopting twice changes nothing.
    assert_eq!(f.backend().adopt(&launched).await.unwrap(), Adopted::Running);
    assert_eq!(f.backend().watching(), 1);
    std::fs::write(f.work().join("go"), "").unwrap();
    let exit = f.next_exit().await;
    assert_eq!((exit.attempt.as_str(), exit.exit), ("adopt/a", Exit::Code(7)));
    f.no_more_exits().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_reads_the_exit_of_a_task_that_ended_while_down() {
    let mut f = Fixture::new("down");
    let launched = f.start("down/a", "while [ ! -e go ]; do sleep 0.05; done; exit 5").await;
    let killed = f.start("down/b", "echo ready; exec sleep 300").await;
    let stdout_b = f.launch("down/b", "").stdout;
    eventually("b to start", || read(&stdout_b).contains("ready")).await;
    f.backend().kill(&killed, Duration::from_secs(30)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, Exit::Killed);
    f.backend = None; // the server is down
    std::fs::write(f.work().join("go"), "").unwrap();
    // Whoever is the parent after a crash (init) reaps the wrapper; here we are, so do it.
    let pid = rustix::process::Pid::from_raw(launched.pid).unwrap();
    rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap();
    f.restart();
    assert_eq!(f.backend().adopt(&launched).await.unwrap(), Adopted::Ended(Exit::Code(5)));
    // The kill marker survives too: ended without a status, and a kill had been asked for.
    assert_eq!(f.backend().adopt(&killed).await.unwrap(), Adopted::Ended(Exit::Killed));
    f.no_more_exits().await;
    // Once the caller recorded the end, the backend's folder for it goes, and empty parents too
    // — also with a file in it that forget does not name (a temporary file a crash left).
    std::fs::write(launched.dir.join("killed.tmp"), "").unwrap();
    f.backend().forget(&launched).await.unwrap();
    f.backend().forget(&killed).await.unwrap();
    assert!(!launched.dir.exists());
    assert!(!f.root.join("state/down").exists());
    assert!(f.root.join("state").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_pid_is_not_adopted_and_not_signalled() {
    let mut f = Fixture::new("reuse");
    // A live process that is not the attempt: the record's start time (or boot) differs.
    let mut other = std::process::Command::new("sleep").arg("300").process_group_0().spawn().unwrap();
    let pid = other.id() as i32;
    let real_start = start_ticks(pid).unwrap();
    let dir = f.root.join("state/reuse/a");
    std::fs::create_dir_all(&dir).unwrap();
    let fake = Launched {
        attempt: AttemptId::new("reuse/a").unwrap(),
        backend: "local".into(),
        pid,
        start_ticks: real_start + 1,
        boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap().trim().into(),
        started_at_ms: 0,
        dir: dir.clone(),
        cgroups: Vec::new(),
        uid: None,
    };
    assert_eq!(f.backend().adopt(&fake).await.unwrap(), Adopted::Ended(Exit::Lost));
    let other_boot = Launched { start_ticks: real_start, boot_id: "another-boot".into(), ..fake.clone() };
    assert_eq!(f.backend().adopt(&other_boot).await.unwrap(), Adopted::Ended(Exit::Lost));
    // A kill of the stale record must not reach the process that now has the pid.
    f.backend().kill(&fake, Duration::from_millis(10)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(other.try_wait().unwrap().is_none(), "the unrelated process was signalled");
    assert_eq!(f.backend().watching(), 0);
    // The same record with the right start time is adopted.
    let real = Launched { start_ticks: real_start, ..fake };
    assert_eq!(f.backend().adopt(&real).await.unwrap(), Adopted::Running);
    f.backend = None;
    other.kill().unwrap();
    other.wait().unwrap();
    // A record from another backend is refused.
    f.restart();
    let foreign = Launched { backend: "slurm".into(), ..real };
    assert!(matches!(f.backend().adopt(&foreign).await, Err(BackendError::WrongBackend { .. })));
}

trait ProcessGroup {
    fn process_group_0(&mut self) -> &mut Self;
}

impl ProcessGroup for std::process::Command {
    fn process_group_0(&mut self) -> &mut Self {
        std::os::unix::process::CommandExt::process_group(self, 0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_finds_an_attempt_whose_record_was_never_stored() {
    let mut f = Fixture::new("recover");
    let launched = f.start("recover/a", "while [ ! -e go ]; do sleep 0.05; done; exit 9").await;
    // A vfork-style start resumes the backend when the child's exec has replaced its memory,
    // a moment before the kernel has set up the new program's arguments; recovery finds the
    // wrapper by its arguments, and a restarted server comes far later than that moment.
    let cmdline = format!("/proc/{}/cmdline", launched.pid);
    eventually("the wrapper's arguments", || std::fs::read(&cmdline).is_ok_and(|a| !a.is_empty())).await;
    // As if the server had crashed between spawning and writing any record.
    std::fs::remove_file(launched.dir.join("launched.json")).unwrap();
    f.restart();
    let id = AttemptId::new("recover/a").unwrap();
    let Recovered::Running(found) = f.backend().recover(&id).await.unwrap() else {
        panic!("not found running")
    };
    assert_eq!((found.pid, found.start_ticks), (launched.pid, launched.start_ticks));
    // Its cgroups (a pooled slot, whose name says nothing of the attempt) are found through
    // the process's `/proc/PID/cgroup`.
    assert_eq!(found.cgroups, launched.cgroups);
    // Now recorded again: a second recover reads the record.
    assert_eq!(f.backend().recover(&id).await.unwrap(), Recovered::Running(found));
    std::fs::write(f.work().join("go"), "").unwrap();
    assert_eq!(f.next_exit().await.exit, Exit::Code(9));
    assert_eq!(f.backend().recover(&id).await.unwrap(), Recovered::Ended(Exit::Code(9)));
    let never = AttemptId::new("recover/never").unwrap();
    assert_eq!(f.backend().recover(&never).await.unwrap(), Recovered::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_finds_a_child_that_had_not_reached_its_exec() {
    // A server killed while a child was between its clone and its exec (joining cgroups):
    // the child still shows the server's arguments, then runs the command all the same. It
    // holds the status file open from the clone on; recovery must find it by that, or the
    // task is started a second time beside it (the kill -9 test saw a run finish twice).
    let mut f = Fixture::new("preexec");
    let launched = f.start("preexec/a", "while [ ! -e go ]; do sleep 0.05; done").await;
    let status = launched.dir.join("status");
    std::fs::remove_file(launched.dir.join("launched.json")).unwrap();
    f.restart();
    // The real wrapper goes (its group with it), leaving the status empty; a stand-in with
    // other arguments holds the status file as the child would.
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(launched.pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    eventually("the wrapper gone", || {
        std::fs::read(format!("/proc/{}/cmdline", launched.pid)).map_or(true, |a| a.is_empty())
    })
    .await;
    let file = std::fs::OpenOptions::new().write(true).open(&status).unwrap();
    let mut child = std::process::Command::new("sleep").arg("30").stdin(file).spawn().unwrap();
    let id = AttemptId::new("preexec/a").unwrap();
    let found = f.backend().recover(&id).await.unwrap();
    let Recovered::Running(found) = found else { panic!("not found running: {found:?}") };
    assert_eq!(found.pid, child.id() as i32);
    child.kill().unwrap();
    let ended = f.next_exit().await;
    assert_eq!(ended.attempt, id);
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_tasks_each_end_exactly_once_and_are_reaped() {
    let mut f = Fixture::new("many");
    let n = 300;
    let mut attempts = Vec::new();
    for i in 0..n {
        let code = i % 5;
        attempts.push(f.start(&format!("many/{i}"), &format!("exit {code}")).await);
    }
    let exits = f.exits(n).await;
    for i in 0..n {
        assert_eq!(exits[&format!("many/{i}")].exit, Exit::Code((i % 5) as i32));
    }
    f.no_more_exits().await;
    assert!(!zombies_of(&f), "every wrapper is reaped");
    assert_eq!(f.backend().watching(), 0);
}

#[test]
fn attempt_ids_are_safe_folder_paths() {
    for good in ["a", "run-1/extract/map/3/1", "x.y_z-1"] {
        assert!(AttemptId::new(good).is_ok(), "{good}");
    }
    for bad in ["", "/abs", "a//b", "a/../b", "..", "a/.", "sp ace", "é", &"x".repeat(241)] {
        let err = AttemptId::new(bad).unwrap_err();
        assert!(err.to_string().contains("not valid"), "{bad}: {err}");
    }
    let json = "{\"attempt\":\"../x\",\"backend\":\"local\",\"pid\":1,\"start_ticks\":1,\"boot_id\":\"b\",\"started_at_ms\":0,\"dir\":\"/d\"}";
    assert!(matches!(Launched::from_json(json), Err(BackendError::BadRecord { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_and_forgets_under_one_parent_folder_do_not_trip_each_other() {
    // `forget` removes parent folders it empties while other attempts are being started there.
    let mut f = Fixture::new("prune");
    let backend = std::sync::Arc::new(f.backend.take().unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Launched>();
    let n = 200;
    let starter = {
        let (backend, launches) =
            (backend.clone(), (0..n).map(|i| f.launch(&format!("prune/{i}"), "true")).collect::<Vec<_>>());
        tokio::spawn(async move {
            for launch in launches {
                tx.send(backend.start(&launch).await.unwrap()).unwrap();
            }
        })
    };
    let mut records = std::collections::HashMap::new();
    let mut ended = 0;
    while ended < n {
        tokio::select! {
            Some(l) = rx.recv() => { f.started.push((l.pid, l.start_ticks)); records.insert(l.attempt.clone(), l); }
            e = f.exits.recv() => {
                let e = e.unwrap();
                assert_eq!(e.exit, Exit::Code(0));
                ended += 1;
                // The record may not have arrived yet; forget what has.
                if let Some(l) = records.remove(&e.attempt) { backend.forget(&l).await.unwrap(); }
            }
        }
    }
    starter.await.unwrap();
    for l in records.values() {
        backend.forget(l).await.unwrap();
    }
    assert!(!f.root.join("state/prune").exists(), "every attempt folder and the emptied parent are gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_after_a_restart_adopts_the_attempt_and_reports_its_end() {
    let mut f = Fixture::new("killadopt");
    let launched = f.start("killadopt/a", "echo ready; exec sleep 300").await;
    let stdout = f.launch("killadopt/a", "").stdout;
    eventually("the task to start", || read(&stdout).contains("ready")).await;
    f.restart();
    assert_eq!(f.backend().watching(), 0);
    f.backend().kill(&launched, Duration::from_secs(30)).await.unwrap();
    let exit = f.next_exit().await;
    assert_eq!((exit.attempt.as_str(), exit.exit), ("killadopt/a", Exit::Killed));
    assert_eq!(group_members(launched.pid), Vec::<i32>::new());
    f.no_more_exits().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_in_the_nested_folders_of_an_earlier_weir_are_recovered_and_not_restarted() {
    // Folders are flat now (`state/old+a`); the first service release nested them by the id's
    // segments (`state/old/a`). An upgrade must neither lose nor re-run such an attempt.
    let mut f = Fixture::new("legacy");
    let launched = f.start("old/a", "exit 4").await;
    assert_eq!(launched.dir.file_name().unwrap(), "old+a", "one flat folder per attempt");
    assert_eq!(f.next_exit().await.exit, Exit::Code(4));
    f.restart();
    let state = launched.dir.parent().unwrap().to_path_buf();
    let legacy = state.join("old").join("a");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::rename(&launched.dir, &legacy).unwrap();
    let record = read(&legacy.join("launched.json")).replace("old+a", "old/a");
    std::fs::write(legacy.join("launched.json"), record).unwrap();
    let id = AttemptId::new("old/a").unwrap();
    assert_eq!(f.backend().recover(&id).await.unwrap(), Recovered::Ended(Exit::Code(4)));
    let again = f.backend().start(&f.launch("old/a", "exit 5")).await;
    assert!(matches!(again, Err(BackendError::AlreadyStarted { .. })), "{again:?}");
    assert!(!state.join("old+a").exists(), "no new folder for a refused start");
}
