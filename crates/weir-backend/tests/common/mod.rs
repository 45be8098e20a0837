//! Test fixture: a local backend over a fresh folder, its exit channel, and cleanup that kills
//! every process group the test started that is still the same process.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use weir_backend::{AttemptId, Backend, Launched, LocalBackend, LocalConfig, TaskExit, TaskLaunch};
use weir_model::Resources;

/// Generous: only a broken backend comes near it.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub struct Fixture {
    pub root: PathBuf,
    pub backend: Option<LocalBackend>,
    pub exits: UnboundedReceiver<TaskExit>,
    /// (pid, start ticks) of every attempt started, for cleanup.
    pub started: Vec<(i32, u64)>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

impl Fixture {
    pub fn new(name: &str) -> Fixture {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("weir-backend-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("work")).unwrap();
        let mut f = Fixture { root, backend: None, exits: unbounded_channel().1, started: Vec::new() };
        f.restart();
        f
    }

    /// Drops the backend (as a crashed server loses it) and makes a new one on the same folder.
    pub fn restart(&mut self) {
        self.backend = None;
        let (tx, rx) = unbounded_channel();
        self.backend = Some(LocalBackend::new(LocalConfig::new(self.root.join("state")), tx).unwrap());
        self.exits = rx;
    }

    pub fn backend(&self) -> &LocalBackend {
        self.backend.as_ref().unwrap()
    }

    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    pub fn launch(&self, attempt: &str, command: &str) -> TaskLaunch {
        TaskLaunch {
            attempt: AttemptId::new(attempt).unwrap(),
            command: command.to_string(),
            env: BTreeMap::new(),
            workdir: self.work(),
            resources: Resources::new(1500, 2048, 0),
            stdout: self.root.join("logs").join(attempt).join("stdout"),
            stderr: self.root.join("logs").join(attempt).join("stderr"),
            spark: None,
            user: None,
        }
    }

    /// Starts `command` as `attempt` and remembers it for cleanup.
    pub async fn start(&mut self, attempt: &str, command: &str) -> Launched {
        let launch = self.launch(attempt, command);
        self.start_launch(&launch).await
    }

    pub async fn start_launch(&mut self, launch: &TaskLaunch) -> Launched {
        let launched = self.backend().start(launch).await.unwrap();
        self.started.push((launched.pid, launched.start_ticks));
        launched
    }

    /// The next exit reported, failing the test if none comes within [`PATIENCE`].
    pub async fn next_exit(&mut self) -> TaskExit {
        match tokio::time::timeout(PATIENCE, self.exits.recv()).await {
            Ok(Some(exit)) => exit,
            Ok(None) => panic!("exit channel closed"),
            Err(_) => panic!("no exit reported within {PATIENCE:?}"),
        }
    }

    /// Collects `n` exits, keyed by attempt id; fails on a duplicate.
    pub async fn exits(&mut self, n: usize) -> BTreeMap<String, TaskExit> {
        let mut all = BTreeMap::new();
        for _ in 0..n {
            let e = self.next_exit().await;
            let prev = all.insert(e.attempt.to_string(), e);
            assert!(prev.is_none(), "an attempt's end was reported twice: {prev:?}");
        }
        all
    }

    /// Asserts no further exit arrives in a short while.
    pub async fn no_more_exits(&mut self) {
        if let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(300), self.exits.recv()).await {
            panic!("unexpected extra exit: {e:?}");
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.backend = None;
        for &(pid, start) in &self.started {
            if start_ticks(pid) == Some(start) {
                let _ = kill_group(pid);
            }
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn kill_group(pgid: i32) -> std::io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pgid).ok_or(std::io::ErrorKind::InvalidInput)?;
    rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)?;
    Ok(())
}

/// `/proc/PID/stat` field 22.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// (state, ppid, pgrp) of a process, from `/proc/PID/stat`.
pub fn stat(pid: i32) -> Option<(char, i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

/// Live (not zombie) processes in process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some((state, _, pgrp)) = stat(pid) {
            if pgrp == pgid && state != 'Z' && state != 'X' {
                out.push(pid);
            }
        }
    }
    out
}

/// Waits (polling, up to [`PATIENCE`]) until `cond` holds.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let until = tokio::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(tokio::time::Instant::now() < until, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Whether this test process may do what only root can (switch users, make cgroups). When it
/// may not, the test fails with `what` — unless `WEIR_SKIP_ROOT_TESTS=1` explicitly allows
/// skipping, in which case it says so loudly and the caller returns.
pub fn root_or_skip(what: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    if std::env::var("WEIR_SKIP_ROOT_TESTS").as_deref() == Ok("1") {
        eprintln!("\n*** SKIPPED (not root, WEIR_SKIP_ROOT_TESTS=1): {what} ***\n");
        return false;
    }
    panic!(
        "this test needs root ({what}); run it as root (CI does), or set WEIR_SKIP_ROOT_TESTS=1 to \
         skip it knowingly"
    );
}

/// A local system user for tasks, created when missing (re-runnable, and safe when tests
/// create the same user at once). Root only.
pub fn ensure_user(name: &str) -> weir_backend::TaskUser {
    if let Ok(u) = weir_backend::TaskUser::lookup(name) {
        return u;
    }
    let status = std::process::Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .status()
        .expect("run useradd");
    weir_backend::TaskUser::lookup(name)
        .unwrap_or_else(|e| panic!("cannot create the test user {name} (useradd: {status}): {e}"))
}

/// The cgroup folders of a started attempt, failing the test when the machine gave it none
/// (unless `WEIR_SKIP_CGROUP_TESTS=1`: then `None`, said loudly).
pub fn cgroups_or_skip(launched: &Launched, isolation: &str) -> Option<Vec<PathBuf>> {
    if !launched.cgroups.is_empty() {
        return Some(launched.cgroups.clone());
    }
    if std::env::var("WEIR_SKIP_CGROUP_TESTS").as_deref() == Ok("1") {
        eprintln!("\n*** SKIPPED (no cgroups here, WEIR_SKIP_CGROUP_TESTS=1): {isolation} ***\n");
        return None;
    }
    panic!("the attempt got no cgroup ({isolation}); set WEIR_SKIP_CGROUP_TESTS=1 to skip knowingly");
}
