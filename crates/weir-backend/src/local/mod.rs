//! The local-process backend: each attempt is a process group on this machine.
//!
//! Each attempt runs as `/bin/sh -c WRAPPER` (see [`attempt::WRAPPER`]) in its own process
//! group; the wrapper runs the command in a subshell and records its exit status in the
//! attempt's folder under [`LocalConfig::state_dir`], so the status outlives the server. The
//! attempt's folder (`STATE_DIR/run-1+0+0+0+1` for attempt `run-1/0/0/0/1`: one level, so a
//! start makes one folder) also holds `launched.json` (its [`Launched`] record) and, once a kill
//! was asked for, a `killed` marker.
//!
//! What a start costs, and why it is no more: one vfork-style clone and exec of `/bin/sh`
//! (`spawn.rs`: never a `fork`, whose copy-on-write faults grow with the server — also when the
//! task switches user or joins cgroups),
//! one subshell fork, one folder, one record file, the status file the wrapper writes, and the
//! caller's log files (their folder only when missing). On a virtual machine each `exec` of a
//! dynamically linked program is the dearest part (the loader's CPU-feature probing traps to
//! the hypervisor), hence a single shell.
//!
//! Watching: one pidfd per running attempt, registered with tokio's reactor (epoll), and one
//! small tokio task per attempt waiting on it — no thread per task, no `waitpid(-1)` (which
//! would steal the exit statuses of children other parts of the server wait for), no polling.
//! The pidfd works the same for the server's own children and for processes adopted after a
//! restart (whose parent is now init). Each running attempt holds one file descriptor; the
//! backend raises its soft `RLIMIT_NOFILE` to the hard limit at start.
//!
//! Ending: when the wrapper ends, the rest of its process group (anything the command left
//! behind) gets SIGKILL, then the wrapper is reaped and the end reported. While the wrapper is
//! an unreaped zombie its pid — the group id — cannot be re-used, so that sweep never reaches
//! another process. For an adopted attempt (not our child, reaped by init) the sweep follows
//! the exit by microseconds; the system hands out pids cyclically, so the group id would have
//! to be re-used within that window — accepted.
//!
//! Isolation: an attempt runs as the launch's [`TaskUser`](crate::TaskUser) when it names one
//! (uid and primary gid set between clone and exec, supplementary groups cleared: the backend
//! must then run as root), in a working folder made for it and owned by that user, and in its
//! own cgroups where the machine allows it (`cgroup.rs`: a kill then ends every process it
//! started, `setsid` children included, and `cpu.max`/`memory.max` follow its resources). The
//! state folder and the logs stay the backend's: the wrapper gets its status file and the logs
//! as open files. The task sees its resources as `WEIR_CPU_MILLICORES`, `WEIR_MEMORY_MIB` and
//! `WEIR_GPUS` (and its id as `WEIR_ATTEMPT`).

mod attempt;
mod cgroup;
mod procfs;
mod spawn;
mod watch;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustix::process::{kill_process_group, Pid, Signal};
use tokio::sync::watch as tokio_watch;
use tokio::time::Instant;

use crate::{
    Adopted, AttemptId, Backend, BackendError, BoxFuture, ExitSender, Launched, Recovered, TaskLaunch,
};

pub(crate) const KIND: &str = "local";

/// Settings of the local backend.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// Folder under which each attempt gets a folder (its attempt id as a relative path) holding
    /// its record, exit status file and kill marker. The server puts it in its data directory.
    pub state_dir: PathBuf,
    /// Variables passed through from the server's environment to every task (before the task's
    /// own `env`). Everything else of the server's environment (tokens!) is not passed on.
    pub inherit_env: Vec<String>,
    /// Put each attempt in its own cgroups where the machine allows it (see
    /// [`LocalBackend::isolation`] for what was found). On by default.
    pub cgroups: bool,
}

impl LocalConfig {
    /// Attempts under `state_dir`; `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`, `LC_ALL`,
    /// `TZ` and `TMPDIR` passed through.
    pub fn new(state_dir: impl Into<PathBuf>) -> LocalConfig {
        LocalConfig {
            state_dir: state_dir.into(),
            inherit_env: ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR"]
                .map(String::from)
                .to_vec(),
            cgroups: true,
        }
    }
}

/// Runs attempts as local process groups. Cheap to share: hold it as `Arc<dyn Backend>`.
/// Dropping it stops the watching, never the processes.
pub struct LocalBackend {
    inner: Arc<Inner>,
}

struct Inner {
    config: LocalConfig,
    inherited: Vec<(String, OsString)>,
    boot_id: String,
    exits: ExitSender,
    cgroups: cgroup::Placement,
    watched: Mutex<HashMap<AttemptId, Watched>>,
}

/// A watched attempt: the kill deadline its watcher follows, and the watcher task.
struct Watched {
    kill: tokio_watch::Sender<Option<Instant>>,
    task: tokio::task::AbortHandle,
}

impl Inner {
    fn watched(&self) -> MutexGuard<'_, HashMap<AttemptId, Watched>> {
        // A panic while holding this lock leaves the map consistent (single inserts/removes).
        self.watched.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The attempt's folder: one level under the state folder, its id's `/` written as `+`
    /// (which ids cannot contain), so a start makes one folder, not one per id segment.
    fn dir(&self, attempt: &AttemptId) -> PathBuf {
        self.config.state_dir.join(attempt.as_str().replace('/', "+"))
    }

    /// Where weir up to 0.1's first service release kept the folder: nested by segments.
    /// `None` when it is the same path (an id without `/`).
    fn legacy_dir(&self, attempt: &AttemptId) -> Option<PathBuf> {
        attempt.as_str().contains('/').then(|| self.config.state_dir.join(attempt.as_str()))
    }
}

impl LocalBackend {
    /// A backend that reports attempt ends on `exits`. Call it inside a tokio runtime with I/O
    /// and time enabled (`Builder::enable_all`).
    pub fn new(config: LocalConfig, exits: ExitSender) -> Result<LocalBackend, BackendError> {
        fs::create_dir_all(&config.state_dir).map_err(|source| BackendError::Setup {
            action: "create the state folder",
            path: config.state_dir.clone(),
            source,
        })?;
        let boot_id = procfs::boot_id().map_err(|source| BackendError::Setup {
            action: "read the boot id",
            path: PathBuf::from("/proc/sys/kernel/random/boot_id"),
            source,
        })?;
        raise_fd_limit();
        let inherited =
            config.inherit_env.iter().filter_map(|k| std::env::var_os(k).map(|v| (k.clone(), v))).collect();
        let watched = Mutex::new(HashMap::new());
        let cgroups = if config.cgroups {
            let state = fs::canonicalize(&config.state_dir).unwrap_or_else(|_| config.state_dir.clone());
            cgroup::Placement::new(cgroup::Hierarchies::get(), &cgroup_tag(&state))
        } else {
            cgroup::Placement::none("cgroups are turned off in the backend's settings")
        };
        let inner = Inner { config, inherited, boot_id, exits, cgroups, watched };
        Ok(LocalBackend { inner: Arc::new(inner) })
    }

    /// What isolates attempts on this machine, in one line for the operator: the cgroups in
    /// use (kill, cpu and memory limits) or why there are none.
    pub fn isolation(&self) -> &str {
        &self.inner.cgroups.note
    }

    /// How many attempts this backend value is watching now.
    pub fn watching(&self) -> usize {
        self.inner.watched().len()
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        for (_, w) in self.inner.watched().drain() {
            w.task.abort();
        }
        self.inner.cgroups.remove_if_unused();
    }
}

/// A short stable name for a state folder (FNV-1a of its canonical path): the attempts' cgroups
/// of one backend live under `weir/TAG` below the server's own cgroup, apart from those of other
/// backends on the machine. A tool that looks for a backend's tasks (a test that cleans up
/// after a killed server, whose tasks outlive it by design) reads `/weir/TAG/` in a process's
/// `/proc/PID/cgroup`.
pub fn cgroup_tag(state_dir: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in state_dir.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Each running attempt holds a pidfd; the usual soft limit (1,024) would cap them.
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        // Best effort: without it, fewer attempts can run at once, and `start` says why.
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

/// Sends `signal` to process group `pgid`; a group that no longer exists is not an error.
pub(crate) fn signal_group(pgid: i32, signal: Signal) -> io::Result<()> {
    let Some(pid) = Pid::from_raw(pgid) else { return Ok(()) };
    match kill_process_group(pid, signal) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::SRCH => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn check_kind(task: &Launched) -> Result<(), BackendError> {
    if task.backend != KIND {
        return Err(BackendError::WrongBackend {
            attempt: task.attempt.to_string(),
            expected: KIND.to_string(),
            found: task.backend.clone(),
        });
    }
    Ok(())
}

/// Runs blocking work on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    attempt: &AttemptId,
    work: impl FnOnce() -> Result<T, BackendError> + Send + 'static,
) -> Result<T, BackendError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| BackendError::ShuttingDown { attempt: attempt.to_string() })?
}

impl LocalBackend {
    async fn start_attempt(&self, launch: &TaskLaunch) -> Result<Launched, BackendError> {
        let inner = Arc::clone(&self.inner);
        let launch_owned = launch.clone();
        let spawned = blocking(&launch.attempt, move || {
            let dir = inner.dir(&launch_owned.attempt);
            let legacy = inner.legacy_dir(&launch_owned.attempt);
            attempt::spawn(
                &launch_owned,
                dir,
                legacy.as_deref(),
                &inner.inherited,
                &inner.boot_id,
                &inner.cgroups,
            )
        })
        .await?;
        let launched = spawned.launched.clone();
        watch::start_watching(&self.inner, &launched, spawned.pidfd)?;
        Ok(launched)
    }

    async fn adopt_attempt(&self, task: &Launched) -> Result<Adopted, BackendError> {
        check_kind(task)?;
        if self.inner.watched().contains_key(&task.attempt) {
            return Ok(Adopted::Running);
        }
        let inner = Arc::clone(&self.inner);
        let record = task.clone();
        let probe = blocking(&task.attempt, move || Ok(watch::probe(&record, &inner.boot_id))).await?;
        match probe {
            watch::Probe::Alive(pidfd) => {
                watch::start_watching(&self.inner, task, pidfd)?;
                Ok(Adopted::Running)
            }
            watch::Probe::Gone => {
                let (record, inner) = (task.clone(), Arc::clone(&self.inner));
                let exit = blocking(&task.attempt, move || {
                    Ok(watch::ended_unwatched(&record, &inner.boot_id, &inner.cgroups))
                })
                .await?;
                Ok(Adopted::Ended(exit))
            }
        }
    }

    async fn kill_attempt(&self, task: &Launched, grace: Duration) -> Result<(), BackendError> {
        check_kind(task)?;
        if let Adopted::Ended(_) = self.adopt_attempt(task).await? {
            return Ok(());
        }
        let dir = task.dir.clone();
        let attempt = task.attempt.to_string();
        // The marker lets a later server tell "killed" from "lost" for an attempt that ends
        // without a status while nobody watches. Best effort: the kill matters more.
        let _ =
            blocking(&task.attempt, move || attempt::write_atomic(&attempt, &dir, attempt::KILLED_FILE, ""))
                .await;
        let deadline = Instant::now() + grace;
        let first = {
            let watched = self.inner.watched();
            match watched.get(&task.attempt) {
                // It ended between the adopt above and now: nothing left to kill.
                None => return Ok(()),
                Some(w) => {
                    let mut first = false;
                    w.kill.send_if_modified(|d| match d {
                        Some(old) if *old <= deadline => false,
                        _ => {
                            first = d.is_none();
                            *d = Some(deadline);
                            true
                        }
                    });
                    first
                }
            }
        };
        if first {
            signal_group(task.pid, Signal::TERM).map_err(|source| BackendError::Syscall {
                attempt: task.attempt.to_string(),
                call: "kill(-pgid, SIGTERM)",
                pid: task.pid,
                source,
            })?;
            // Processes that left the group (`setsid`) get the same warning.
            let cgroups = task.cgroups.clone();
            if !cgroups.is_empty() {
                let (placement, attempt) = (self.inner.cgroups.clone(), task.attempt.to_string());
                blocking(&task.attempt, move || {
                    // Unless the slot went to another attempt since (this one ended meanwhile).
                    placement.signal(&attempt, &cgroups, Signal::TERM);
                    Ok(())
                })
                .await?;
            }
        }
        Ok(())
    }

    async fn recover_attempt(&self, id: &AttemptId) -> Result<Recovered, BackendError> {
        let dir = match self.inner.legacy_dir(id) {
            // Started by an earlier weir, before folders were flat.
            Some(legacy) if legacy.is_dir() => legacy,
            _ => self.inner.dir(id),
        };
        let inner = Arc::clone(&self.inner);
        let owned = id.clone();
        let found =
            blocking(id, move || watch::find_unrecorded(&owned, &dir, &inner.boot_id, &inner.cgroups))
                .await?;
        match found {
            watch::Found::Record(record) => match self.adopt_attempt(&record).await? {
                Adopted::Running => Ok(Recovered::Running(record)),
                Adopted::Ended(exit) => Ok(Recovered::Ended(exit)),
            },
            watch::Found::Process(record, pidfd) => {
                if !self.inner.watched().contains_key(id) {
                    watch::start_watching(&self.inner, &record, pidfd)?;
                }
                Ok(Recovered::Running(record))
            }
            watch::Found::Ended(exit) => Ok(Recovered::Ended(exit)),
            watch::Found::Nothing => Ok(Recovered::NotFound),
        }
    }

    async fn forget_attempt(&self, task: &Launched) -> Result<(), BackendError> {
        check_kind(task)?;
        if self.inner.watched().contains_key(&task.attempt) {
            return Ok(());
        }
        let dir = task.dir.clone();
        let root = self.inner.config.state_dir.clone();
        let attempt = task.attempt.to_string();
        let cgroups = task.cgroups.clone();
        let placement = self.inner.cgroups.clone();
        blocking(&task.attempt, move || {
            placement.forget(&attempt, &cgroups);
            remove_attempt_dir(&attempt, &dir, &root)
        })
        .await
    }
}

/// Removes an attempt's folder and then every parent folder it leaves empty, up to `root`.
fn remove_attempt_dir(attempt: &str, dir: &Path, root: &Path) -> Result<(), BackendError> {
    // The files an attempt's folder holds are known: removed by name, then the folder, which
    // spares `remove_dir_all`'s open, listing and stat of every entry (2.6% of the CPU of
    // `weir bench serve`'s dispatch went there). Anything else in it (a `killed.tmp` left by
    // a crash) falls back to the listing.
    for file in [attempt::STATUS_FILE, attempt::RECORD_FILE, attempt::KILLED_FILE] {
        let _ = fs::remove_file(dir.join(file));
    }
    let removed = match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => fs::remove_dir_all(dir),
    };
    match removed {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(BackendError::Io {
                attempt: attempt.to_string(),
                action: "remove the attempt folder",
                path: dir.to_path_buf(),
                source,
            })
        }
    }
    let mut parent = dir.parent();
    while let Some(p) = parent {
        if !p.starts_with(root) || p == root || fs::remove_dir(p).is_err() {
            break;
        }
        parent = p.parent();
    }
    Ok(())
}

impl Backend for LocalBackend {
    fn kind(&self) -> &str {
        KIND
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>> {
        Box::pin(self.start_attempt(launch))
    }

    fn kill<'a>(&'a self, task: &'a Launched, grace: Duration) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(self.kill_attempt(task, grace))
    }

    fn adopt<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>> {
        Box::pin(self.adopt_attempt(task))
    }

    fn recover<'a>(&'a self, attempt: &'a AttemptId) -> BoxFuture<'a, Result<Recovered, BackendError>> {
        Box::pin(self.recover_attempt(attempt))
    }

    fn forget<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(self.forget_attempt(task))
    }
}
