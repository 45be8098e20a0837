//! The one error type of weir-commit.

use std::path::PathBuf;

/// Why a committer operation failed. Each variant says whether retrying can help.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// A setting is wrong (a variable, a file, a field): fix it; retrying cannot help.
    #[error("{origin}: {field} = {value:?}: {reason}")]
    Config {
        /// Where the setting came from: an environment variable's name or a file's path.
        origin: String,
        field: String,
        value: String,
        reason: String,
    },
    /// The object store failed after the store client's bounded retries (503 SlowDown, 5xx,
    /// timeouts are retried there with backoff and jitter): retrying later may help.
    #[error("{op} {key}: {source}")]
    Store {
        op: &'static str,
        key: String,
        #[source]
        source: object_store::Error,
    },
    /// ListMultipartUploads failed or answered something unreadable: retrying later may help.
    #[error("list the multipart uploads under {prefix:?}: {reason}")]
    ListUploads { prefix: String, reason: String },
    /// A local file could not be read or written (the task's output file, the local store's
    /// upload area): retrying cannot help until the file is fixed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another run already claimed or committed this output: the job commit is refused and
    /// this run's uploads are aborted. Never retry; the run fails with this reason.
    #[error(
        "output {prefix:?} is already claimed by run {other_run} ({file} exists): run {run}'s \
         job commit is refused and its uploads are aborted"
    )]
    Conflict { prefix: String, run: String, other_run: String, file: String },
    /// An object's size or ETag is not what the task commit recorded: the output is not
    /// trusted and the job commit aborts. Retrying the same uploads cannot help.
    #[error("{key}: {what} is {found}, the task commit recorded {expected}")]
    Integrity { key: String, what: &'static str, expected: String, found: String },
    /// A staging record (one task attempt's upload) is missing, unfinished or unreadable:
    /// the attempt did not finish its task commit. Retrying cannot help; the job aborts.
    #[error("staging record {key}: {reason}")]
    Record { key: String, reason: String },
    /// A file name given to the task commit is not a relative object name.
    #[error("output file name {name:?}: {reason}")]
    Name { name: String, reason: String },
    /// The job commit already wrote its manifest: the output is committed and cannot be
    /// aborted.
    #[error("output {prefix:?} is already committed by run {run}: abort refused")]
    AlreadyCommitted { prefix: String, run: String },
    /// A reader's check of an output found it incomplete (no manifest, a file missing, a size
    /// that differs): the reader must wait; retrying later helps once the writer commits.
    #[error("output {prefix:?} is not complete: {}", problems.join("; "))]
    Incomplete { prefix: String, problems: Vec<String> },
}

impl CommitError {
    pub(crate) fn store(op: &'static str, key: &str, source: object_store::Error) -> Self {
        CommitError::Store { op, key: key.to_string(), source }
    }

    pub(crate) fn config(
        origin: impl Into<String>,
        field: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        CommitError::Config {
            origin: origin.into(),
            field: field.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = CommitError> = std::result::Result<T, E>;
