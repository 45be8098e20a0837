//! One attempt on disk and as a process: its folder, the `/bin/sh` wrapper that records the
//! exit status, spawning, and reading how it ended. Everything here blocks (files, fork/exec)
//! and runs on tokio's blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::process::{pidfd_open, Pid, PidfdFlags};

use super::procfs;
use crate::{BackendError, Exit, Launched, TaskLaunch};

/// The wrapper every attempt runs under: `/bin/sh -c WRAPPER weir-task COMMAND STATUS_FILE`.
///
/// It runs the command in a child shell, then writes `$?` and a newline to the status file and
/// exits with the same status. The status survives the server: the file is read once the
/// wrapper is gone, whoever reaped it. A status is complete only with its newline, and the file
/// is read only after the writer has ended, so a wrapper killed mid-write leaves no status, never
/// a wrong one (no temporary file + `mv` needed, which would cost one more process per task).
///
/// `trap 'k=1' TERM`: a shell waiting for a foreground command runs its traps only after the
/// command ends, so on the backend's SIGTERM (sent to the whole group) the wrapper outlives the
/// command and still records its status; the command itself gets the default action back (a
/// caught signal is reset in children). `k` also keeps a command that was killed before it
/// started from starting.
pub(crate) const WRAPPER: &str = r#"trap 'k=1' TERM
[ -z "$k" ] && /bin/sh -c "$1"
s=$?
printf '%s\n' "$s" > "$2"
exit "$s""#;

/// The `$0` of the wrapper, so `ps` shows what it is.
pub(crate) const WRAPPER_NAME: &str = "weir-task";

pub(crate) const STATUS_FILE: &str = "status";
pub(crate) const KILLED_FILE: &str = "killed";
pub(crate) const RECORD_FILE: &str = "launched.json";

/// A started attempt: its record and a pidfd that becomes readable when the wrapper ends.
pub(crate) struct Spawned {
    pub launched: Launched,
    pub pidfd: OwnedFd,
}

fn io_err(attempt: &str, action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BackendError {
    let (attempt, path) = (attempt.to_string(), path.to_path_buf());
    move |source| BackendError::Io { attempt, action, path, source }
}

fn bad_launch(launch: &TaskLaunch, field: &'static str, reason: String) -> BackendError {
    BackendError::BadLaunch { attempt: launch.attempt.to_string(), field, reason }
}

fn check(launch: &TaskLaunch) -> Result<(), BackendError> {
    if launch.command.contains('\0') {
        return Err(bad_launch(launch, "command", "it contains a NUL byte".into()));
    }
    for (k, v) in &launch.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(bad_launch(
                launch,
                "env",
                format!("variable name {k:?} is empty or contains '=' or NUL"),
            ));
        }
        if v.contains('\0') {
            return Err(bad_launch(launch, "env", format!("the value of {k} contains a NUL byte")));
        }
    }
    if !launch.workdir.is_dir() {
        return Err(bad_launch(
            launch,
            "workdir",
            format!("{} is not a directory", launch.workdir.display()),
        ));
    }
    Ok(())
}

fn open_log(attempt: &str, path: &Path) -> Result<File, BackendError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err(attempt, "create the log folder", parent))?;
    }
    OpenOptions::new().create(true).append(true).open(path).map_err(io_err(
        attempt,
        "open the log file",
        path,
    ))
}

/// Writes `text` to `dir/name` atomically (temporary file, then rename).
pub(crate) fn write_atomic(attempt: &str, dir: &Path, name: &str, text: &str) -> Result<(), BackendError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let mut f = File::create(&tmp).map_err(io_err(attempt, "create", &tmp))?;
    f.write_all(text.as_bytes()).map_err(io_err(attempt, "write", &tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io_err(attempt, "rename into place", &path))
}

/// Makes the attempt's folder, opens its logs and starts the wrapper in a new process group.
/// `env` is the part of the server's environment passed through.
pub(crate) fn spawn(
    launch: &TaskLaunch,
    dir: PathBuf,
    inherited: &[(String, std::ffi::OsString)],
    boot_id: &str,
) -> Result<Spawned, BackendError> {
    let attempt = launch.attempt.as_str();
    check(launch)?;
    create_attempt_dir(attempt, &dir)?;
    let stdout = open_log(attempt, &launch.stdout)?;
    let stderr = if launch.stderr == launch.stdout {
        stdout.try_clone().map_err(io_err(attempt, "reuse the log file", &launch.stderr))?
    } else {
        open_log(attempt, &launch.stderr)?
    };

    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(WRAPPER).arg(WRAPPER_NAME).arg(&launch.command).arg(dir.join(STATUS_FILE));
    cmd.env_clear();
    cmd.envs(inherited.iter().map(|(k, v)| (k, v)));
    let r = launch.resources;
    cmd.env("WEIR_ATTEMPT", attempt)
        .env("WEIR_CPU_MILLICORES", r.cpu.to_string())
        .env("WEIR_MEMORY_MIB", r.memory.to_string())
        .env("WEIR_GPUS", r.gpu.to_string());
    cmd.envs(&launch.env);
    cmd.current_dir(&launch.workdir).stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    // Its own process group (not a new session: `setsid` would need a `pre_exec` hook, which
    // makes std fork instead of using the much cheaper posix_spawn). The group is enough: a
    // terminal's Ctrl-C or hang-up signals the server's foreground group, not this one, and
    // killing the group reaches every process the command started.
    cmd.process_group(0);
    let child = cmd.spawn().map_err(|source| BackendError::Spawn {
        attempt: attempt.to_string(),
        command: launch.command.clone(),
        source,
    })?;
    let started_at_ms = procfs::now_ms();
    let raw_pid = child.id() as i32;
    // Dropping a std `Child` neither kills nor reaps it: the watcher reaps it through the pidfd.
    drop(child);
    let pid = Pid::from_raw(raw_pid).ok_or_else(|| BackendError::Syscall {
        attempt: attempt.to_string(),
        call: "spawn (pid 0)",
        pid: raw_pid,
        source: io::Error::from(io::ErrorKind::InvalidData),
    })?;
    // The child is not reaped yet, so neither its pid nor its /proc entry can go away.
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).map_err(|e| BackendError::Syscall {
        attempt: attempt.to_string(),
        call: "pidfd_open",
        pid: raw_pid,
        source: e.into(),
    })?;
    let start_ticks = procfs::start_ticks(raw_pid).unwrap_or(0);
    let launched = Launched {
        attempt: launch.attempt.clone(),
        backend: super::KIND.to_string(),
        pid: raw_pid,
        start_ticks,
        boot_id: boot_id.to_string(),
        started_at_ms,
        dir: dir.clone(),
    };
    // Kept beside the status so a server that crashed before storing the record can find it.
    if let Err(e) = write_atomic(attempt, &dir, RECORD_FILE, &launched.to_json()) {
        // Not recorded, not run: stop it and reap it (it is our child; SIGKILL ends it at once).
        let _ = super::signal_group(raw_pid, rustix::process::Signal::KILL);
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(&pidfd)),
            rustix::process::WaitIdOptions::EXITED,
        );
        return Err(e);
    }
    Ok(Spawned { launched, pidfd })
}

/// A new folder per attempt: if it exists, this attempt was started before (perhaps by a
/// server that crashed before recording it), and starting it again could run it twice.
fn create_attempt_dir(attempt: &str, dir: &Path) -> Result<(), BackendError> {
    let parent = dir.parent().unwrap_or(dir);
    // `forget` removes parent folders it leaves empty; one may vanish between the two calls.
    let mut tries = 0;
    loop {
        match fs::create_dir_all(parent) {
            Ok(()) => {}
            // std reports a folder removed while it was being made as "exists" or "not found".
            Err(e) if is_race(&e) && tries < 100 => {
                tries += 1;
                continue;
            }
            Err(e) => return Err(io_err(attempt, "create the state folder", parent)(e)),
        }
        match fs::create_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(BackendError::AlreadyStarted { attempt: attempt.to_string() })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 100 => tries += 1,
            Err(e) => return Err(io_err(attempt, "create the attempt folder", dir)(e)),
        }
    }
}

fn is_race(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::AlreadyExists | io::ErrorKind::NotFound)
}

/// The status the wrapper wrote, if it finished writing it.
pub(crate) fn read_status(dir: &Path) -> Option<i32> {
    let text = fs::read_to_string(dir.join(STATUS_FILE)).ok()?;
    text.strip_suffix('\n')?.trim().parse().ok()
}

/// A shell's `$?`: 128 + N means the command was ended by signal N.
pub(crate) fn from_shell_status(status: i32) -> Exit {
    match status {
        129..=192 => Exit::Signal(status - 128),
        code => Exit::Code(code),
    }
}

/// How an attempt whose wrapper is gone ended. `waited` is the wrapper's own wait status when
/// this process reaped it. A kill that was asked for wins over whatever status the command
/// left while it was being killed.
pub(crate) fn final_exit(dir: &Path, waited: Option<WrapperEnd>, kill_asked: bool) -> Exit {
    if kill_asked || dir.join(KILLED_FILE).exists() {
        return Exit::Killed;
    }
    match (read_status(dir), waited) {
        (Some(status), _) => from_shell_status(status),
        (None, Some(WrapperEnd::Exited(code))) => from_shell_status(code),
        (None, Some(WrapperEnd::Signaled(sig))) => Exit::Signal(sig),
        (None, None) => Exit::Lost,
    }
}

/// How the wrapper process itself ended, when this process reaped it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WrapperEnd {
    Exited(i32),
    Signaled(i32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_statuses_above_128_are_signals() {
        assert_eq!(from_shell_status(0), Exit::Code(0));
        assert_eq!(from_shell_status(3), Exit::Code(3));
        assert_eq!(from_shell_status(127), Exit::Code(127));
        assert_eq!(from_shell_status(128), Exit::Code(128));
        assert_eq!(from_shell_status(137), Exit::Signal(9));
        assert_eq!(from_shell_status(143), Exit::Signal(15));
        assert_eq!(from_shell_status(255), Exit::Code(255));
    }
}
