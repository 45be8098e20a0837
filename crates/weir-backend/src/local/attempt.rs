//! One attempt on disk and as a process: its folder, the `/bin/sh` wrapper that records the
//! exit status, spawning, and reading how it ended. Everything here blocks (files, clone/exec)
//! and runs on tokio's blocking pool.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::process::{pidfd_open, Pid, PidfdFlags};

use super::cgroup::Placement;
use super::{procfs, spawn};
use crate::{BackendError, Exit, Launched, TaskLaunch};

/// The wrapper every attempt runs under: `/bin/sh -c WRAPPER weir-task COMMAND STATUS_FILE`,
/// with the status file, opened for writing by the backend, as its standard input.
///
/// It runs the command in a subshell (`( eval … )`: a fork of the wrapper, no second `exec` of
/// a shell, which on a virtual machine costs as much as the rest of a start together), then
/// writes `$?` and a newline to the status file and exits with the same status. The status
/// survives the server: the file is read once the wrapper is gone, whoever reaped it. A status
/// is complete only with its newline, and the file is read only after the writer has ended, so
/// a wrapper killed mid-write leaves no status, never a wrong one (no temporary file + `mv`
/// needed, which would cost one more process per task).
///
/// Why the status file comes in as an open file (moved from fd 0 to fd 3, then closed in the
/// command's subshell) rather than by its path: the attempt's folder is in the server's data
/// directory, which a task running as another user cannot open — nor should it, since the
/// backend trusts what that folder says. The command never holds the file; only the wrapper's
/// last line writes it. Passing it as standard input keeps the child's descriptor work to the
/// three standard ones (`spawn.rs` closes everything else). `$2` still names the file, so
/// that recovery can tell the wrapper apart in `/proc`.
///
/// The subshell is the command's own shell: `exit N` and `exec PROGRAM` end or replace it, not
/// the wrapper; it sees no positional parameters (`$#` is 0; `$0` is `weir-task`); `$$` is the
/// wrapper's pid, as POSIX has it in a subshell (still unique among running attempts).
///
/// `trap 'k=1' TERM`: a shell waiting for a foreground command runs its traps only after the
/// command ends, so on the backend's SIGTERM (sent to the whole group) the wrapper outlives the
/// command and still records its status; the subshell and everything it starts get the default
/// action back (a subshell resets caught signals, as `exec` does). `k` also keeps a command
/// that was killed before it started from starting.
pub(crate) const WRAPPER: &str = r#"exec 3>&0 0</dev/null
trap 'k=1' TERM
[ -z "$k" ] && (exec 3>&-; c=$1; set --; eval "$c")
s=$?
printf '%s\n' "$s" >&3
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
    if launch.spark.is_some() {
        return Err(bad_launch(
            launch,
            "spark",
            "the stage is a Spark application: run it on a cluster whose backend is `spark-local` \
             (the local backend runs commands only)"
                .into(),
        ));
    }
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
    let parent = launch.workdir.parent().filter(|p| !p.as_os_str().is_empty());
    if !parent.is_some_and(Path::is_dir) {
        return Err(bad_launch(
            launch,
            "workdir",
            format!("the parent of {} is not a directory", launch.workdir.display()),
        ));
    }
    Ok(())
}

/// Makes the working folder when missing: mode 0700, owned by the task's user. An existing
/// folder is used as it is (the run's earlier attempts made it) — unless it is still the
/// backend's own: a server killed between the `mkdir` and the `chown` below leaves it so, and
/// the next attempt finishes the handover (without that, the task's user could not enter its
/// own folder and the run would fail for good). Only its last component is made, by this
/// (privileged) process, in a folder the task's user cannot write: nothing the task controls
/// is followed.
fn make_workdir(launch: &TaskLaunch) -> Result<(), BackendError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let attempt = launch.attempt.as_str();
    let dir = &launch.workdir;
    let hand_over = |dir: &Path| -> Result<(), BackendError> {
        if let Some(u) = &launch.user {
            std::os::unix::fs::chown(dir, Some(u.uid), Some(u.gid)).map_err(io_err(
                attempt,
                "give the task's user its working folder",
                dir,
            ))?;
        }
        Ok(())
    };
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => hand_over(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let meta =
                fs::symlink_metadata(dir).map_err(io_err(attempt, "inspect the working folder", dir))?;
            if !meta.is_dir() {
                return Err(io_err(attempt, "create the working folder", dir)(e));
            }
            let ours = meta.uid() == rustix::process::geteuid().as_raw();
            match &launch.user {
                Some(u) if ours && meta.uid() != u.uid => hand_over(dir),
                _ => Ok(()),
            }
        }
        Err(e) => Err(io_err(attempt, "create the working folder", dir)(e)),
    }
}

/// Opens a log file for appending; creates its folder only when the file cannot be opened
/// without it (one system call when the folder exists, as it does for every attempt of a run
/// after the first).
fn open_log(attempt: &str, path: &Path) -> Result<File, BackendError> {
    use std::os::unix::fs::OpenOptionsExt;
    // 0600: the server reads logs; the task writes them through the descriptor it is given.
    let open = || OpenOptions::new().create(true).append(true).mode(0o600).open(path);
    match open() {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent).map_err(io_err(attempt, "create the log folder", parent))?;
            }
            open().map_err(io_err(attempt, "open the log file", path))
        }
        Err(e) => Err(io_err(attempt, "open the log file", path)(e)),
    }
}

/// Writes the attempt's record into its new folder. Not through a temporary file: the file is
/// new (`O_EXCL`) and small, so a reader sees it whole or — only after a crash of the machine
/// mid-write — torn, which [`read_record`] treats as no record (the attempt is then found by
/// its process, or counts as never started).
fn write_record(attempt: &str, dir: &Path, record: &Launched) -> Result<(), BackendError> {
    let path = dir.join(RECORD_FILE);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io_err(attempt, "create", &path))?;
    f.write_all(record.to_json().as_bytes()).map_err(io_err(attempt, "write", &path))
}

/// The attempt's own copy of its record, if there is a whole one.
pub(crate) fn read_record(dir: &Path) -> Option<Launched> {
    let text = fs::read_to_string(dir.join(RECORD_FILE)).ok()?;
    Launched::from_json(&text).ok()
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

fn c_string(launch: &TaskLaunch, field: &'static str, s: impl AsRef<OsStr>) -> Result<CString, BackendError> {
    CString::new(s.as_ref().as_bytes())
        .map_err(|_| bad_launch(launch, field, "it contains a NUL byte".into()))
}

/// The task's whole environment: the inherited part of the server's, then `USER`, `LOGNAME`
/// and `HOME` of the task's user, the `WEIR_*` variables, and the launch's own `env` (a later
/// entry wins).
fn environment(launch: &TaskLaunch, inherited: &[(String, OsString)]) -> Result<Vec<CString>, BackendError> {
    let mut env: BTreeMap<&OsStr, OsString> =
        inherited.iter().map(|(k, v)| (OsStr::new(k.as_str()), v.clone())).collect();
    if let Some(u) = &launch.user {
        env.insert(OsStr::new("USER"), u.name.clone().into());
        env.insert(OsStr::new("LOGNAME"), u.name.clone().into());
        env.insert(OsStr::new("HOME"), u.home.clone().into());
    }
    let r = launch.resources;
    env.insert(OsStr::new("WEIR_ATTEMPT"), launch.attempt.as_str().into());
    env.insert(OsStr::new("WEIR_CPU_MILLICORES"), r.cpu.to_string().into());
    env.insert(OsStr::new("WEIR_MEMORY_MIB"), r.memory.to_string().into());
    env.insert(OsStr::new("WEIR_GPUS"), r.gpu.to_string().into());
    for (k, v) in &launch.env {
        env.insert(OsStr::new(k.as_str()), v.into());
    }
    env.into_iter()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).map_err(|_| bad_launch(launch, "env", format!("{k:?} contains a NUL byte")))
        })
        .collect()
}

/// Makes the attempt's folder, opens its logs and starts the wrapper in a new process group,
/// as the task's user and in the attempt's cgroups when there are any. `inherited` is the
/// part of the server's environment passed through.
pub(crate) fn spawn(
    launch: &TaskLaunch,
    dir: PathBuf,
    legacy: Option<&Path>,
    inherited: &[(String, std::ffi::OsString)],
    boot_id: &str,
    cgroups: &Placement,
) -> Result<Spawned, BackendError> {
    let attempt = launch.attempt.as_str();
    check(launch)?;
    create_attempt_dir(attempt, &dir, legacy)?;
    make_workdir(launch)?;
    let stdout = open_log(attempt, &launch.stdout)?;
    let stderr = if launch.stderr == launch.stdout {
        stdout.try_clone().map_err(io_err(attempt, "reuse the log file", &launch.stderr))?
    } else {
        open_log(attempt, &launch.stderr)?
    };
    let status_path = dir.join(STATUS_FILE);
    let status = OpenOptions::new().write(true).create_new(true).open(&status_path).map_err(io_err(
        attempt,
        "create",
        &status_path,
    ))?;

    let r = launch.resources;
    let program = spawn::Program {
        path: c_string(launch, "command", "/bin/sh")?,
        argv: vec![
            c_string(launch, "command", "/bin/sh")?,
            c_string(launch, "command", "-c")?,
            c_string(launch, "command", WRAPPER)?,
            c_string(launch, "command", WRAPPER_NAME)?,
            c_string(launch, "command", &launch.command)?,
            c_string(launch, "command", status_path.as_os_str())?,
        ],
        env: environment(launch, inherited)?,
        workdir: c_string(launch, "workdir", launch.workdir.as_os_str())?,
        stdio: [status.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()],
        user: launch.user.as_ref().map(|u| (u.uid, u.gid)),
        cgroups: Vec::new(),
    };
    // Its own process group (the child calls `setpgid(0, 0)`; not a new session). The group
    // is what a kill signals when there are no cgroups: a terminal's Ctrl-C or hang-up signals
    // the server's foreground group, not this one, and killing the group reaches every process
    // the command started — except one that calls `setsid` itself, which the attempt's cgroup
    // still holds.
    let (cgroup_dirs, procs) = if cgroups.is_empty() {
        (Vec::new(), Default::default())
    } else {
        cgroups.create(attempt, r).map_err(io_err(
            attempt,
            "create the attempt's cgroup in",
            Path::new("/sys/fs/cgroup"),
        ))?
    };
    let mut program = program;
    program.cgroups = procs.iter().map(AsRawFd::as_raw_fd).collect();
    program.cgroups.sort_unstable();
    let raw_pid = spawn::spawn(&program).map_err(|source| {
        // Nothing runs in the slot: the child, if any, exited and was reaped.
        cgroups.unused(attempt, &cgroup_dirs);
        BackendError::Spawn { attempt: attempt.to_string(), command: launch.command.clone(), source }
    })?;
    drop((status, stdout, stderr));
    drop(procs);
    let started_at_ms = procfs::now_ms();
    // Not reaped here: the watcher reaps it through the pidfd.
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
        cgroups: cgroup_dirs,
        uid: launch.user.as_ref().map(|u| u.uid),
    };
    // Kept beside the status so a server that crashed before storing the record can find it.
    if let Err(e) = write_record(attempt, &dir, &launched) {
        // Not recorded, not run: stop it and reap it (it is our child; SIGKILL ends it at once).
        let _ = super::signal_group(raw_pid, rustix::process::Signal::KILL);
        super::cgroup::signal_all(&launched.cgroups, rustix::process::Signal::KILL);
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(std::os::fd::AsFd::as_fd(&pidfd)),
            rustix::process::WaitIdOptions::EXITED,
        );
        cgroups.forget(attempt, &launched.cgroups);
        return Err(e);
    }
    Ok(Spawned { launched, pidfd })
}

/// A new folder per attempt: if it exists, this attempt was started before (perhaps by a
/// server that crashed before recording it), and starting it again could run it twice.
/// `legacy` is where an earlier weir kept the attempt's folder (nested by the id's segments),
/// checked too so that an upgrade does not forget what was started.
fn create_attempt_dir(attempt: &str, dir: &Path, legacy: Option<&Path>) -> Result<(), BackendError> {
    if legacy.is_some_and(|l| l.symlink_metadata().is_ok()) {
        return Err(BackendError::AlreadyStarted { attempt: attempt.to_string() });
    }
    let mut result = fs::create_dir(dir);
    if matches!(&result, Err(e) if e.kind() == io::ErrorKind::NotFound) {
        // The state folder itself is gone (removed under a running server): make it again.
        let parent = dir.parent().unwrap_or(dir);
        fs::create_dir_all(parent).map_err(io_err(attempt, "create the state folder", parent))?;
        result = fs::create_dir(dir);
    }
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            Err(BackendError::AlreadyStarted { attempt: attempt.to_string() })
        }
        Err(e) => Err(io_err(attempt, "create the attempt folder", dir)(e)),
    }
}

/// Whether the wrapper wrote a status (the file exists from the start, empty).
pub(crate) fn has_status(dir: &Path) -> bool {
    fs::metadata(dir.join(STATUS_FILE)).is_ok_and(|m| m.len() > 0)
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
