//! weir-backend: the boundary between the server's worker and the processes that do the work.
//!
//! The worker knows only the [`Backend`] trait: start a task attempt ([`TaskLaunch`] →
//! [`Launched`]), kill it (SIGTERM to everything it started, SIGKILL after a grace period), learn
//! how it ended ([`TaskExit`] on the exit channel the backend was built with), and after a
//! restart re-adopt what the previous server process started ([`Backend::adopt`]). The binary
//! picks the implementation: [`LocalBackend`] runs attempts as local processes; heavier backends
//! (Kubernetes, Slurm, Spark) belong in sibling crates.
//!
//! What this crate never does: hold scheduling policy (which task runs where and when is the
//! engine's), touch the store or contain SQL, retry a task (a failed attempt is reported; the
//! worker decides), or block the async runtime it is driven from (every call that does blocking
//! work — fork/exec, file creation — runs it on tokio's blocking pool).
//!
//! Why async with boxed futures rather than `async fn` in the trait: the server holds one
//! `Arc<dyn Backend>` per cluster, and `async fn` in traits is not object-safe. Why exits arrive
//! on a channel rather than by polling: the worker then waits on one channel for thousands of
//! attempts instead of asking about each one.

mod error;
pub mod local;
mod task;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use error::BackendError;
pub use local::{LocalBackend, LocalConfig};
pub use task::{
    Adopted, AttemptId, Exit, Launched, Recovered, TaskExit, TaskLaunch, TaskUser, MAX_ATTEMPT_ID_LEN,
};

/// A boxed future, so that [`Backend`] stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The sending side of the channel on which a backend reports each watched attempt's end.
/// Build one with `tokio::sync::mpsc::unbounded_channel()` and give the sender to the backend's
/// constructor; several backends may share one channel (attempt ids are unique).
pub type ExitSender = tokio::sync::mpsc::UnboundedSender<TaskExit>;

/// An execution backend. Every method must be awaited inside a tokio runtime; none blocks it.
///
/// Exactly-once reporting: every attempt this backend value watches (started by it, or adopted
/// by it as [`Adopted::Running`]) produces exactly one [`TaskExit`] on the exit channel, sent
/// only once every process of the attempt is gone. Dropping the backend stops the watching but
/// never the processes: a new backend value (or a new server process) re-adopts them.
pub trait Backend: Send + Sync {
    /// A short name stored in [`Launched::backend`] (`"local"`).
    fn kind(&self) -> &str;

    /// Starts one attempt and returns once its process exists. Record the intent to start (the
    /// attempt id) durably *before* calling, and the returned record right after; an attempt id
    /// can be started once only ([`BackendError::AlreadyStarted`] after that, even across
    /// restarts). A server that crashed between the two finds the attempt with
    /// [`Backend::recover`].
    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>>;

    /// Asks an attempt to stop: SIGTERM to every process it started, SIGKILL to whatever is left
    /// after `grace`. Returns once the SIGTERM is sent; the end arrives on the exit channel as
    /// [`Exit::Killed`]. Idempotent: killing an attempt that is already ending or has ended is
    /// not an error. An attempt that this backend value does not watch yet (after a restart) is
    /// adopted first.
    fn kill<'a>(&'a self, task: &'a Launched, grace: Duration) -> BoxFuture<'a, Result<(), BackendError>>;

    /// After a restart: is the recorded attempt still the same running process (then it is
    /// watched from now on and its end will be reported), or did it end while nobody watched
    /// (then how)? A pid now used by another process counts as ended. Adopting an attempt that
    /// is already watched returns [`Adopted::Running`] and changes nothing.
    fn adopt<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>>;

    /// Finds an attempt by id alone, for a start whose [`Launched`] record was never stored: is
    /// it running (then it is watched from now on, as by `adopt`), did it end, or did it never
    /// start? Slower than `adopt` (the local backend may scan `/proc`); meant for recovery only.
    fn recover<'a>(&'a self, attempt: &'a AttemptId) -> BoxFuture<'a, Result<Recovered, BackendError>>;

    /// The caller has durably recorded the attempt's end: the backend may delete what it kept
    /// for it (the local backend: the attempt's status folder; log files are the caller's).
    /// Forgetting an attempt that is still running is a no-op.
    fn forget<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>>;

    /// Whether the target answers, what it runs and how many nodes it reports, for the Clusters
    /// page, `GET /v1/clusters` and `weir backends`. Never an error: a target that cannot be
    /// reached is unhealthy, with the reason. The default, for a backend that runs on this
    /// machine, is healthy with nothing more to say.
    fn health(&self) -> BoxFuture<'_, BackendHealth> {
        Box::pin(async { BackendHealth { healthy: true, version: String::new(), nodes: None, error: None } })
    }

    /// The nodes the target reports now, for a cluster whose node list comes from its backend
    /// (`nodes: from_backend`): the server reads it at start and again every so often, and a
    /// node that is gone or no longer usable is a node failure to the engine. `None`: the
    /// backend has no nodes of its own to report (the default; the local backend). An error is
    /// "cannot tell now", never "no nodes".
    fn nodes(&self) -> BoxFuture<'_, Option<Result<Vec<BackendNode>, String>>> {
        Box::pin(async { None })
    }
}

/// One node as a backend reports it ([`Backend::nodes`]), in weir's units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendNode {
    /// The target's name for it (Slurm's node name); `placement: weir` pins tasks by it.
    pub name: String,
    pub resources: weir_model::Resources,
    /// Whether the target would start work on it now (Slurm: not down, drained, failed or
    /// future).
    pub usable: bool,
    /// The target's word for its state (`idle`, `down+drain`, …), for logs and the API.
    pub state: String,
}

/// A backend's answer to [`Backend::health`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendHealth {
    pub healthy: bool,
    /// The target's version as it reports it (Slurm: `22.05.8 (v0.0.38)`); empty when none.
    pub version: String,
    /// The nodes the target reports; `None` when it has no such notion (the local backend).
    pub nodes: Option<u64>,
    /// Why it is unhealthy, or the last error seen while healthy (cleared by the next success).
    pub error: Option<String>,
}
