//! Following attempts: one tokio task per watched attempt waits on its pidfd and on kill
//! deadlines, sweeps its process group, reaps it and reports its end. Also the probes that
//! decide, after a restart, whether a recorded attempt is still the same running process.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{
    pidfd_open, test_kill_process_group, waitid, Pid, PidfdFlags, Signal, WaitId, WaitIdOptions,
};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::watch;
use tokio::time::Instant;

use super::attempt::{self, WrapperEnd};
use super::cgroup::{self, Placement};
use super::{procfs, signal_group, Inner, Watched};
use crate::{AttemptId, BackendError, Exit, Launched, TaskExit};

/// Starts watching `task` through `pidfd`, unless this backend already watches it.
pub(super) fn start_watching(
    inner: &Arc<Inner>,
    task: &Launched,
    pidfd: OwnedFd,
) -> Result<(), BackendError> {
    // SAFETY: an `OwnedFd` is a valid open descriptor, always the same one, and stays open
    // until the `AsyncFd` that owns it is dropped.
    let registered = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) };
    let pidfd = registered.map_err(|e| e.into_parts().1).map_err(|source| BackendError::Syscall {
        attempt: task.attempt.to_string(),
        call: "register the pidfd with the runtime (is I/O enabled?)",
        pid: task.pid,
        source,
    })?;
    let mut watched = inner.watched();
    if watched.contains_key(&task.attempt) {
        return Ok(());
    }
    let (kill, kill_rx) = watch::channel(None);
    // The watcher removes its own entry when done; it cannot get there before this insert,
    // which happens under the same lock.
    let handle = tokio::spawn(follow(
        Arc::clone(inner),
        task.attempt.clone(),
        task.pid,
        task.dir.clone(),
        task.cgroups.clone(),
        pidfd,
        kill_rx,
    ));
    watched.insert(task.attempt.clone(), Watched { kill, task: handle.abort_handle() });
    Ok(())
}

/// Waits until the wrapper ends, sending SIGKILL to the group when a kill deadline passes;
/// then sweeps the group, reaps, reports.
async fn follow(
    inner: Arc<Inner>,
    attempt: AttemptId,
    pgid: i32,
    dir: PathBuf,
    cgroups: Vec<PathBuf>,
    pidfd: AsyncFd<OwnedFd>,
    mut kill: watch::Receiver<Option<Instant>>,
) {
    let mut hard_killed = false;
    loop {
        let deadline = *kill.borrow_and_update();
        let due = async {
            match deadline {
                Some(at) if !hard_killed => tokio::time::sleep_until(at).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            ready = pidfd.readable() => match ready {
                Ok(_) => break,
                // The runtime is going away: stop watching; a later backend re-adopts.
                Err(_) => return,
            },
            changed = kill.changed() => if changed.is_err() { return },
            () = due => {
                let _ = signal_group(pgid, Signal::KILL);
                cgroup::signal_all(&cgroups, Signal::KILL);
                hard_killed = true;
            }
        }
    }
    let kill_asked = kill.borrow().is_some();
    // Whatever the command left in its group goes too. If we are the wrapper's parent it is an
    // unreaped zombie now, which keeps its pid (the group id) from being re-used.
    let _ = signal_group(pgid, Signal::KILL);
    let waited = reap(pidfd.get_ref());
    group_gone(pgid).await;
    // And whatever left the group (`setsid`) but not the cgroup: killed there if anything is
    // left (most tasks leave nothing, and looking costs less than a `cgroup.kill`).
    let emptied = cgroups_gone(&cgroups).await;
    let placement = inner.cgroups.clone();
    let id = attempt.to_string();
    let ended = tokio::task::spawn_blocking(move || {
        // An emptied slot waits for the attempt's `forget` to be used again; one that could
        // not be emptied is never used again (and removed once the kernel lets it).
        if emptied {
            placement.release(&id, &cgroups);
        } else {
            placement.forget(&id, &cgroups);
        }
        attempt::final_exit(&dir, waited, kill_asked)
    });
    let Ok(exit) = ended.await else {
        return;
    };
    inner.watched().remove(&attempt);
    // A closed channel means nobody listens any more; nothing to do about it here.
    let _ = inner.exits.send(TaskExit { attempt, exit, ended_at_ms: procfs::now_ms() });
}

/// How long to wait for killed members of a group to disappear before reporting anyway. Only
/// a process stuck in the kernel (uninterruptible I/O) outlives SIGKILL this long.
const GROUP_EXIT_PATIENCE: Duration = Duration::from_secs(10);

/// Waits until no process is left in group `pgid`, so an attempt is reported ended only when
/// nothing of it runs (a retry then never overlaps it). SIGKILL is delivered asynchronously:
/// the members die, become zombies and are reaped by their parents (or init) a moment later.
/// While any member exists the group id cannot be re-used, so re-sending SIGKILL (to a member
/// forked in between) reaches only this attempt's processes.
async fn group_gone(pgid: i32) {
    let Some(pid) = Pid::from_raw(pgid) else { return };
    let until = Instant::now() + GROUP_EXIT_PATIENCE;
    let mut pause = Duration::from_millis(1);
    while test_kill_process_group(pid).is_ok() && Instant::now() < until {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
        let _ = signal_group(pgid, Signal::KILL);
    }
}

/// Kills what is left in the attempt's cgroups and waits until they are empty (as
/// [`group_gone`] for the group); whether they are.
async fn cgroups_gone(dirs: &[PathBuf]) -> bool {
    if dirs.is_empty() {
        return true;
    }
    let until = Instant::now() + GROUP_EXIT_PATIENCE;
    let mut pause = Duration::from_millis(1);
    loop {
        if cgroup::all_empty(dirs) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        cgroup::signal_all(dirs, Signal::KILL);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Reaps the wrapper if it is our child; `None` if it is not (an adopted process).
fn reap(pidfd: &OwnedFd) -> Option<WrapperEnd> {
    let status =
        waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED | WaitIdOptions::NOHANG).ok()??;
    if let Some(code) = status.exit_status() {
        Some(WrapperEnd::Exited(code))
    } else {
        status.terminating_signal().map(WrapperEnd::Signaled)
    }
}

/// Whether a recorded attempt is still the same process.
pub(super) enum Probe {
    Alive(OwnedFd),
    Gone,
}

pub(super) fn probe(task: &Launched, boot_id: &str) -> Probe {
    if task.boot_id != boot_id {
        return Probe::Gone;
    }
    let Some(pid) = Pid::from_raw(task.pid) else { return Probe::Gone };
    // The pidfd first, the start time second: if the start time matches, the pidfd is known
    // to refer to that same process.
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else { return Probe::Gone };
    if procfs::start_ticks(task.pid) != Some(task.start_ticks) {
        return Probe::Gone;
    }
    Probe::Alive(pidfd)
}

/// How an attempt that ended while nobody watched it ended; first kills what it may have
/// left behind in its group, when that group can still be told apart.
pub(super) fn ended_unwatched(task: &Launched, boot_id: &str, placement: &Placement) -> Exit {
    // The group id is the wrapper's pid. If that pid now belongs to another process, the old
    // group emptied long ago (a pid is not re-used while it names a live group) and any group
    // with that id is someone else's. After a reboot there is nothing to sweep.
    if task.boot_id == boot_id && procfs::start_ticks(task.pid).is_none() {
        let _ = signal_group(task.pid, Signal::KILL);
    }
    // Its cgroups are its own whatever became of the pid — unless they are a slot of this
    // backend that another attempt holds now (or a free one): empty them, and remove them
    // when they are not this backend's slot (which `forget` gives back).
    let owner = placement.owner(task.attempt.as_str(), &task.cgroups);
    if task.boot_id == boot_id && !task.cgroups.is_empty() && owner != cgroup::Owner::Other {
        let mut emptied = false;
        for _ in 0..100 {
            if !placement.signal(task.attempt.as_str(), &task.cgroups, Signal::KILL) {
                break;
            }
            if cgroup::all_empty(&task.cgroups) {
                emptied = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if emptied {
            placement.release(task.attempt.as_str(), &task.cgroups);
        } else if owner == cgroup::Owner::Foreign {
            cgroup::remove(&task.cgroups);
        }
    }
    attempt::final_exit(&task.dir, None, false)
}

/// What is known about an attempt id without its stored record.
pub(super) enum Found {
    /// The backend's own copy of the record.
    Record(Launched),
    /// No record, but its wrapper is running (the record is written now).
    Process(Launched, OwnedFd),
    Ended(Exit),
    Nothing,
}

pub(super) fn find_unrecorded(
    id: &AttemptId,
    dir: &Path,
    boot_id: &str,
    cgroups: &Placement,
) -> Result<Found, BackendError> {
    if !dir.is_dir() {
        return Ok(Found::Nothing);
    }
    if let Some(record) = attempt::read_record(dir) {
        return Ok(Found::Record(record));
    }
    // Crashed between spawning and writing the record: look for a wrapper whose status file
    // argument is this attempt's — or for a child that has not reached its `exec` yet (it
    // still shows the server's arguments while it joins its cgroups, which can take tens of
    // milliseconds, and then runs the command all the same): it holds the status file open
    // from the clone on, and nothing but the child and the wrapper ever does.
    let status_path = dir.join(attempt::STATUS_FILE);
    let status = status_path.as_os_str().as_encoded_bytes();
    let status_file = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&status_path).ok().filter(|m| m.len() == 0).map(|m| (m.dev(), m.ino()))
    };
    let pids = procfs::all_pids().map_err(|source| BackendError::Io {
        attempt: id.to_string(),
        action: "list processes in",
        path: PathBuf::from("/proc"),
        source,
    })?;
    let own = std::process::id() as i32;
    for pid in pids {
        let Some(args) = procfs::cmdline(pid) else { continue };
        let is_ours = (args.len() == 6 && args[3] == attempt::WRAPPER_NAME.as_bytes() && args[5] == status)
            || status_file.is_some_and(|f| pid != own && procfs::holds_open(pid, f));
        if !is_ours {
            continue;
        }
        let Some(raw) = Pid::from_raw(pid) else { continue };
        let pidfd = match pidfd_open(raw, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(e) if e == Errno::SRCH => continue,
            Err(e) => {
                return Err(BackendError::Syscall {
                    attempt: id.to_string(),
                    call: "pidfd_open",
                    pid,
                    source: e.into(),
                })
            }
        };
        let Some(start_ticks) = procfs::start_ticks(pid) else { continue };
        let record = Launched {
            attempt: id.clone(),
            backend: super::KIND.to_string(),
            pid,
            start_ticks,
            boot_id: boot_id.to_string(),
            // Not known any more; when it was found is the best bound.
            started_at_ms: procfs::now_ms(),
            dir: dir.to_path_buf(),
            cgroups: cgroups.of_process(pid),
            uid: rustix::process::Pid::from_raw(pid).and_then(|_| proc_uid(pid)),
        };
        attempt::write_atomic(id.as_str(), dir, attempt::RECORD_FILE, &record.to_json())?;
        return Ok(Found::Process(record, pidfd));
    }
    if attempt::has_status(dir) || dir.join(attempt::KILLED_FILE).exists() {
        return Ok(Found::Ended(attempt::final_exit(dir, None, false)));
    }
    Ok(Found::Nothing)
}

/// The real uid of a process (`/proc/PID/status`), if it is still there.
fn proc_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:")?.split_whitespace().next()?.parse().ok())
}
