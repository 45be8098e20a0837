//! The local-process backend (stub: the trait's shape is final, the implementation follows).

use std::path::PathBuf;
use std::time::Duration;

use crate::{Adopted, Backend, BackendError, BoxFuture, ExitSender, Launched, TaskLaunch};

/// Settings of the local backend.
#[derive(Clone, Debug)]
pub struct LocalConfig {
    /// Folder under which each attempt gets a folder (named by its attempt id) holding its exit
    /// status file and kill marker. The server puts it in its data directory.
    pub state_dir: PathBuf,
    /// Variables passed through from the server's environment to every task (before the task's
    /// own `env`). Everything else of the server's environment (tokens!) is not passed on.
    pub inherit_env: Vec<String>,
}

impl LocalConfig {
    pub fn new(state_dir: impl Into<PathBuf>) -> LocalConfig {
        LocalConfig {
            state_dir: state_dir.into(),
            inherit_env: ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// Runs attempts as local processes.
pub struct LocalBackend {
    #[allow(dead_code)]
    config: LocalConfig,
    #[allow(dead_code)]
    exits: ExitSender,
}

impl LocalBackend {
    /// A backend that reports attempt ends on `exits`. Must be called inside a tokio runtime.
    pub fn new(config: LocalConfig, exits: ExitSender) -> Result<LocalBackend, BackendError> {
        Ok(LocalBackend { config, exits })
    }
}

impl Backend for LocalBackend {
    fn kind(&self) -> &str {
        "local"
    }
    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>> {
        Box::pin(async move { Err(BackendError::ShuttingDown { attempt: launch.attempt.to_string() }) })
    }
    fn kill<'a>(&'a self, _task: &'a Launched, _grace: Duration) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move { Ok(()) })
    }
    fn adopt<'a>(&'a self, _task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>> {
        Box::pin(async move { Ok(Adopted::Ended(crate::Exit::Lost)) })
    }
    fn forget<'a>(&'a self, _task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move { Ok(()) })
    }
}
