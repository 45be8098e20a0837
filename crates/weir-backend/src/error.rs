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
    /// `start` was called for an attempt this backend is already running. Not retryable: each
    /// attempt needs a new id.
    #[error("attempt {attempt} is already running on this backend")]
    AlreadyRunning { attempt: String },
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
    /// The backend's background work stopped (its runtime is shutting down). Not retryable on
    /// this backend value.
    #[error("attempt {attempt}: the backend is shutting down")]
    ShuttingDown { attempt: String },
}
