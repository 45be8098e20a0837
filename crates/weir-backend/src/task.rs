//! What the worker asks a backend to run and what the backend hands back: the attempt id, the
//! launch request, the record of a started attempt, and how an attempt ended.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use weir_model::Resources;

use crate::BackendError;

/// The longest attempt id accepted, in bytes. It becomes a folder name on disk.
pub const MAX_ATTEMPT_ID_LEN: usize = 240;

/// Names one attempt of one task, unique across everything a backend ever runs, e.g.
/// `run-42/extract/map/3/1` (run / job / stage / task index / attempt number).
///
/// It also names a folder under the backend's state folder (the local backend writes its `/` as
/// `+`), so it is restricted to ASCII letters, digits, `.`, `_`, `-` and `/`, with no empty, `.`
/// or `..` segment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AttemptId(String);

impl AttemptId {
    pub fn new(id: impl Into<String>) -> Result<AttemptId, BackendError> {
        let id = id.into();
        let bad = |reason: &'static str| BackendError::BadAttemptId { id: id.clone(), reason };
        if id.is_empty() {
            return Err(bad("it is empty"));
        }
        if id.len() > MAX_ATTEMPT_ID_LEN {
            return Err(bad("it is longer than 240 bytes"));
        }
        if !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/')) {
            return Err(bad("only ASCII letters, digits, '.', '_', '-' and '/' are allowed"));
        }
        if id.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..") {
            return Err(bad("a '/'-separated segment is empty, '.' or '..'"));
        }
        Ok(AttemptId(id))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for AttemptId {
    type Error = BackendError;
    fn try_from(id: String) -> Result<AttemptId, BackendError> {
        AttemptId::new(id)
    }
}

impl From<AttemptId> for String {
    fn from(id: AttemptId) -> String {
        id.0
    }
}

/// Everything a backend needs to start one task attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskLaunch {
    pub attempt: AttemptId,
    /// A shell command line for `/bin/sh`. The local backend evaluates it in a subshell of its
    /// wrapper: as `/bin/sh -c COMMAND` would, but `$$` is the wrapper's pid.
    pub command: String,
    /// Variables set for the command, on top of the few the backend passes through from its own
    /// environment (the local backend: `PATH`, `HOME`, `LANG`, … — see `LocalConfig`).
    pub env: BTreeMap<String, String>,
    /// The command's working directory. Its parent must exist; the folder itself is made when
    /// missing, owned by the task's user with mode 0700 (the local backend: one per run, outside
    /// the server's data directory, so that a task never starts next to the server's files).
    pub workdir: PathBuf,
    /// What the engine granted the task. The local backend enforces cpu and memory through the
    /// attempt's cgroup where the machine allows it (`cpu.max`, `memory.max`), and always
    /// passes them on as `WEIR_CPU_MILLICORES`, `WEIR_MEMORY_MIB`, `WEIR_GPUS`.
    pub resources: Resources,
    /// The Unix user the task runs as; `None`: the backend's own user (one trusted tenant).
    pub user: Option<TaskUser>,
    /// Files the command's standard output and error are appended to (created if missing, their
    /// parent folders too). They may be the same file.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// The stage is a Spark application (`command` is then empty): only a Spark backend runs
    /// it; the others refuse the launch ([`BackendError::BadLaunch`], field `spark`).
    pub spark: Option<weir_model::SparkSpec>,
}

/// The record of a started attempt: enough to find, watch, kill or re-adopt it later, also from
/// another run of the server. It is plain data (serde), meant to be stored as text (JSON via
/// [`Launched::to_json`]) next to the attempt and handed back after a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launched {
    pub attempt: AttemptId,
    /// The backend that started it (`"local"`), so a record is never handed to the wrong kind.
    pub backend: String,
    /// The process id of the attempt's top process; it leads the attempt's own process group,
    /// so it is also the group id.
    pub pid: i32,
    /// The process's start time in clock ticks after boot (`/proc/PID/stat` field 22). A pid is
    /// re-used by the system; pid + start time (+ boot id) is not.
    pub start_ticks: u64,
    /// `/proc/sys/kernel/random/boot_id` when it started: after a reboot no process survives.
    pub boot_id: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// The backend's folder for this attempt (exit status file, kill marker).
    pub dir: PathBuf,
    /// The attempt's cgroups (one per hierarchy it was placed in; empty when the machine
    /// offers none): killing it ends everything in them, including processes that left its
    /// process group (`setsid`). Absent in records of an earlier weir.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<PathBuf>,
    /// The uid it runs as, when the backend switched users for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

/// A Unix user to run tasks as, resolved from the system's user database (`/etc/passwd`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskUser {
    pub name: String,
    pub uid: u32,
    /// The user's primary group; supplementary groups are cleared for the task.
    pub gid: u32,
    /// Its home folder (the task's `HOME`).
    pub home: PathBuf,
}

impl TaskUser {
    /// Looks `name` up in `/etc/passwd`. Only local users are seen (no NSS: LDAP or SSSD
    /// users are not found); that keeps this crate free of libc calls that are not
    /// async-signal-safe or thread-safe, and a service account for tasks is local anyway.
    pub fn lookup(name: &str) -> Result<TaskUser, BackendError> {
        let text = std::fs::read_to_string("/etc/passwd").map_err(|e| BackendError::UnknownUser {
            name: name.to_string(),
            reason: format!("cannot read /etc/passwd: {e}"),
        })?;
        TaskUser::lookup_in(&text, name).ok_or_else(|| BackendError::UnknownUser {
            name: name.to_string(),
            reason: "no such user in /etc/passwd".to_string(),
        })
    }

    /// Finds `name` in the text of a passwd file.
    pub fn lookup_in(passwd: &str, name: &str) -> Option<TaskUser> {
        passwd.lines().find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 7 || f[0] != name || name.is_empty() {
                return None;
            }
            Some(TaskUser {
                name: name.to_string(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: PathBuf::from(f[5]),
            })
        })
    }
}

impl Launched {
    /// The stored form: one line of JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain strings and integers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the stored form back.
    pub fn from_json(text: &str) -> Result<Launched, BackendError> {
        serde_json::from_str(text).map_err(|e| BackendError::BadRecord {
            text: text.chars().take(200).collect(),
            message: e.to_string(),
        })
    }
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// The command exited with this status (0 = success).
    Code(i32),
    /// The command was ended by this signal, not at the backend's request. The local backend
    /// learns it from the shell's `$?` (128 + signal number, as POSIX shells report it), so a
    /// command that itself calls `exit 137` is reported as `Signal(9)`.
    Signal(i32),
    /// The backend killed it, as asked through [`Backend::kill`](crate::Backend::kill).
    Killed,
    /// It is gone and no exit status was recorded (for example: the machine rebooted, or the
    /// status file was lost). Retrying the task is the caller's decision.
    Lost,
}

impl Exit {
    pub fn is_success(self) -> bool {
        self == Exit::Code(0)
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Signal(s) => write!(f, "signal {s}"),
            Exit::Killed => f.write_str("killed"),
            Exit::Lost => f.write_str("lost"),
        }
    }
}

/// One attempt's end, sent on the backend's exit channel exactly once per attempt the backend
/// instance watched (started, or adopted as running).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskExit {
    pub attempt: AttemptId,
    pub exit: Exit,
    /// Wall-clock time the backend saw the end, milliseconds since the Unix epoch.
    pub ended_at_ms: u64,
}

/// What [`Backend::adopt`](crate::Backend::adopt) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adopted {
    /// The same process is still running; the backend now watches it and will send its
    /// [`TaskExit`] on the exit channel.
    Running,
    /// It ended while nobody watched (no [`TaskExit`] will be sent for it).
    Ended(Exit),
}

/// What [`Backend::recover`](crate::Backend::recover) found for an attempt id whose start was
/// asked for but whose [`Launched`] record the caller never stored (it crashed in between).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// It is running; the backend now watches it (as after [`Adopted::Running`]). Store the record.
    Running(Launched),
    /// It ran and ended while nobody watched.
    Ended(Exit),
    /// No process of it runs and no end was recorded: it never started, or it left no trace.
    /// Either way nothing of it is running, so a new attempt cannot overlap it.
    NotFound,
}
