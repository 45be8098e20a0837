//! The one error type of weir-backend.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong talking to an execution backend. Each variant says whether
/// retrying can help.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The attempt id cannot be used (it also names a folder). Retrying never helps.
    #[error("attempt id {id:?} is not valid: {reason}")]
    BadAttemptId { id: String, reason: &'static str },
    /// A stored [`Launched`](crate::Launched) record does not parse. Retrying never helps.
    #[error("stored launch record {text:?} does not parse: {message}")]
    BadRecord { text: String, message: String },
    /// A record made by another kind of backend was handed to this one. Retrying never helps.
    #[error("attempt {attempt}: it was started by the {found:?} backend, not by {expected:?}")]
    WrongBackend { attempt: String, expected: String, found: String },
    /// `start` was called for an attempt that was started before (its folder exists), perhaps by
    /// a server that crashed before recording it. Not retryable: use
    /// [`Backend::recover`](crate::Backend::recover) to find it, and a new id for a new attempt.
    #[error("attempt {attempt} was already started; recover it, or start a new attempt id")]
    AlreadyStarted { attempt: String },
    /// The launch request cannot be run as given (`field` names the part: `command`, `env`,
    /// `workdir`). Retrying never helps.
    #[error("attempt {attempt}: {field}: {reason}")]
    BadLaunch { attempt: String, field: &'static str, reason: String },
    /// A file or folder the backend needs could not be made or read (`action` says which, e.g.
    /// "open stdout file"). Retrying helps only if the cause (disk full, permissions) goes away.
    #[error("attempt {attempt}: cannot {action} {path}: {source}")]
    Io { attempt: String, action: &'static str, path: PathBuf, source: io::Error },
    /// The process could not be started (too many processes, no `/bin/sh`, …). Retrying later
    /// may help when the cause is a resource limit.
    #[error("attempt {attempt}: cannot start `/bin/sh -c {command:?}`: {source}")]
    Spawn { attempt: String, command: String, source: io::Error },
    /// A system call on the attempt's process failed in a way that is not "it is already gone"
    /// (`call` names it, e.g. "kill(-pgid, SIGTERM)"). Usually a permission problem: not retryable.
    #[error("attempt {attempt}: {call} on pid {pid} failed: {source}")]
    Syscall { attempt: String, call: &'static str, pid: i32, source: io::Error },
    /// The backend could not be set up (`action` says what failed, e.g. "create the state
    /// folder"). Retrying helps only if the cause (permissions, a missing `/proc`) goes away.
    #[error("local backend: cannot {action} {path}: {source}")]
    Setup { action: &'static str, path: PathBuf, source: io::Error },
    /// A user to run tasks as does not exist on this machine. Retrying helps only once the
    /// user is created.
    #[error("user {name:?}: {reason}")]
    UnknownUser { name: String, reason: String },
    /// The backend's background work stopped (its runtime is shutting down). Not retryable on
    /// this backend value.
    #[error("attempt {attempt}: the backend is shutting down")]
    ShuttingDown { attempt: String },
    /// A remote scheduler (Slurm through slurmrestd, …) could not be reached or did not answer
    /// in time (`message` says what was tried). Retrying later may help.
    #[error("attempt {attempt}: {backend}: cannot reach the scheduler: {message}")]
    Unreachable { attempt: String, backend: &'static str, message: String },
    /// A remote scheduler answered and refused the request (`message` holds its own words, e.g.
    /// Slurm's `errors` list). Retrying the same request does not help.
    #[error("attempt {attempt}: {backend}: the scheduler refused: {message}")]
    Refused { attempt: String, backend: &'static str, message: String },
    /// A remote scheduler refused to start the attempt on the node it was pinned to (weir's
    /// engine chose it, `placement: weir`) because that node takes no work now — down, drained,
    /// not responding, reserved (`message` holds the scheduler's words). The node is at fault,
    /// not the task: nothing runs, and the same request on another node, or on this one once
    /// the scheduler lists it usable again, may succeed.
    #[error("attempt {attempt}: {backend}: node `{node}` takes no work now: {message}")]
    NodeUnavailable { attempt: String, backend: &'static str, node: String, message: String },
}
