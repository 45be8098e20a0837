//! The one error type of weir-engine: malformed input. "Cannot place" is never an error.

use crate::ids::{ContainerId, JobId, NodeId};
use weir_model::{ModelError, Time};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The configuration cannot drive this engine. Fix the file; retrying does not help.
    #[error("configuration: {reason}")]
    Config { reason: String },
    /// The configuration file itself is invalid.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An input was stamped earlier than one already handled; host bug, not retryable.
    #[error("time went backwards: {now} is before {last}")]
    TimeWentBackwards { now: Time, last: Time },
    /// A job id was submitted twice.
    #[error("{job} was already submitted")]
    DuplicateJob { job: JobId },
    #[error("{job} is not known to the engine")]
    UnknownJob { job: JobId },
    #[error("{node} was already added")]
    DuplicateNode { node: NodeId },
    #[error("{node} is not known to the engine")]
    UnknownNode { node: NodeId },
    /// The container already ended (or was killed by preemption) or never existed.
    #[error("{container} is not running")]
    UnknownContainer { container: ContainerId },
    /// A request that no node could ever hold is still accepted; a zero-sized one is not.
    #[error("{job} asked for an empty container")]
    EmptyRequest { job: JobId },
    /// A request that cannot mean anything: a GPU fraction of 1000 or more, a fraction beside
    /// whole GPUs, or a selector the engine never registered. Not retryable: fix the request.
    #[error("{job} asked for an invalid container: {problem}")]
    InvalidRequest { job: JobId, problem: &'static str },
    /// The requests, added to what every job already waits for, ask for more of a resource
    /// than 64 bits can count; the engine keeps its sums exact, so it refuses them. Not
    /// retryable: ask for less.
    #[error("{job}'s requests would make the pending demand of all jobs overflow 64 bits")]
    DemandOverflow { job: JobId },
    /// The nodes would make the cluster's total of a resource overflow 64 bits. Not retryable.
    #[error("adding {nodes} node(s) would make the cluster's total overflow 64 bits")]
    ClusterTooLarge { nodes: usize },
}
