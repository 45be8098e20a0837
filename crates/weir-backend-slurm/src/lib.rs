//! weir-backend-slurm: task attempts as Slurm batch jobs, through slurmrestd's REST API.
//!
//! [`SlurmBackend`] implements weir-backend's [`Backend`] trait: `start` submits one batch job
//! per attempt (resources, time limit, working directory, environment, output files), with the
//! attempt id in the job's name and comment; one poller task reads every watched job's state
//! with one `/jobs` call per interval and reports each end exactly once on the exit channel;
//! `kill` signals SIGTERM and cancels after the grace; `adopt` reads a recorded job back by id,
//! `recover` finds a job by the attempt id in its comment, so a restarted server re-adopts
//! jobs it submitted but never recorded. Capacity discovery ([`SlurmBackend::nodes`]) and
//! [`SlurmBackend::health`] read `/nodes` and `/ping`.
//!
//! What it never does: hold scheduling policy (which task runs and when is weir's engine's),
//! retry a task, log or store a token, or report an attempt's end as a success without Slurm
//! saying so — a job that was known and is now gone is `Exit::Lost` ("outcome unknown").
//!
//! The [`Launched`] record of a Slurm attempt keeps the Slurm job id in `pid` (Slurm job ids
//! are below 2^26), `start_ticks` 0, `boot_id` `"slurm"` and `dir` the folder of its output.

mod capacity;
mod config;
mod jwt;
mod rest;
mod watch;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use weir_backend::{
    Adopted, AttemptId, Backend, BackendError, BoxFuture, ExitSender, Launched, Recovered, TaskLaunch,
};

pub use capacity::{Health, SlurmNode};
pub use config::{Auth, Placement, SlurmConfig, SlurmQueue};
pub use jwt::mint as mint_jwt;

use rest::{jobs_of, JobInfo, Rest, RestError};
use watch::{exit_of, lock, Entry, Kill, Watched};

const KIND: &str = "slurm";

/// Why a Slurm backend could not be set up. Each variant says whether retrying can help.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A setting cannot work (`field` names it). Retrying never helps.
    #[error("{field}: {message}")]
    Config { field: &'static str, message: String },
    /// The token or key could not be read. Retrying helps once the file or variable is fixed.
    #[error("cannot read {what}: {message}")]
    Credentials { what: String, message: String },
    /// slurmrestd did not answer. Retrying later may help.
    #[error("slurmrestd at {url} cannot be reached: {message}")]
    Unreachable { url: String, message: String },
    /// slurmrestd answered and refused (a wrong key is refused here). Not retryable as is.
    #[error("slurmrestd at {url} refused: {message}")]
    Refused { url: String, message: String },
    /// slurmrestd serves no API version this weir speaks. Not retryable.
    #[error("slurmrestd serves API versions {served:?}; this weir speaks {supported}")]
    Version { served: Vec<String>, supported: String },
}

struct Inner {
    rest: Arc<Rest>,
    config: SlurmConfig,
    watched: Arc<Mutex<Watched>>,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Watching stops; the jobs run on and a new backend value re-adopts them.
        self.poller.abort();
    }
}

/// Runs attempts as Slurm batch jobs. See the crate documentation.
pub struct SlurmBackend {
    inner: Arc<Inner>,
}

impl SlurmBackend {
    /// Connects: negotiates the API version, checks the credentials with a ping, checks that
    /// every configured partition exists, and starts the poller. Errors say which setting is
    /// wrong or that Slurm is down.
    pub async fn connect(config: SlurmConfig, exits: ExitSender) -> Result<SlurmBackend, SlurmError> {
        let mut rest = Rest::new(&config)?;
        let url = config.url.clone();
        rest.negotiate().await?;
        // The OpenAPI document is served without checking the token; a ping is not. slurmctld
        // answers a bad token with an unspecified error, so the usual causes are named here.
        rest.get("/ping").await.map_err(|e| match e {
            RestError::Unreachable(m) => SlurmError::Unreachable { url: url.clone(), message: m },
            RestError::Credentials(e) => e,
            other => SlurmError::Refused {
                url: url.clone(),
                message: format!(
                    "{}; slurmctld rejected a ping as user `{}`: a wrong jwt_key, an expired or wrong token, or an unknown user are the usual causes",
                    other.message(),
                    config.user
                ),
            },
        })?;
        let answer = rest.get("/partitions").await.map_err(|e| match e {
            RestError::Unreachable(m) => SlurmError::Unreachable { url: url.clone(), message: m },
            RestError::Credentials(e) => e,
            other => SlurmError::Refused { url: url.clone(), message: other.message() },
        })?;
        let known: Vec<String> = answer
            .get("partitions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter().filter_map(|p| p.get("name").and_then(Value::as_str).map(String::from)).collect()
            })
            .unwrap_or_default();
        let wanted =
            config.partition.iter().chain(config.queues.values().filter_map(|q| q.partition.as_ref()));
        for p in wanted {
            if !known.contains(p) {
                return Err(SlurmError::Config {
                    field: "partition",
                    message: format!("`{p}` is not a partition of this Slurm (it has: {})", known.join(", ")),
                });
            }
        }
        let rest = Arc::new(rest);
        let watched = Arc::new(Mutex::new(Watched::default()));
        let poller = tokio::spawn(watch::poll(
            rest.clone(),
            watched.clone(),
            exits,
            config.poll_interval.max(Duration::from_millis(50)),
            config.end_markers,
        ));
        Ok(SlurmBackend { inner: Arc::new(Inner { rest, config, watched, poller }) })
    }

    /// The API version in use (`v0.0.38`).
    pub fn api_version(&self) -> &str {
        &self.inner.rest.version
    }

    /// The comment that names `attempt` on its Slurm job.
    fn comment(&self, attempt: &AttemptId) -> String {
        comment(&self.inner.config, attempt)
    }

    fn watch(&self, attempt: &AttemptId, job: u64, kill: Option<Kill>) {
        self.watch_marked(attempt, job, kill, None);
    }

    /// Watches `job` as `attempt`; `marker`: the file its script leaves when its command ends.
    fn watch_marked(&self, attempt: &AttemptId, job: u64, kill: Option<Kill>, marker: Option<PathBuf>) {
        let mut w = lock(&self.inner.watched);
        let since_gen = w.gen;
        let comment = self.comment(attempt);
        w.entries.insert(
            attempt.to_string(),
            Entry { attempt: attempt.clone(), job, comment, since_gen, kill, marker, next_ask: None },
        );
    }

    /// The end marker of `launch`'s job, when the scripts leave them.
    fn marker(&self, launch: &TaskLaunch) -> Option<PathBuf> {
        self.inner.config.end_markers.then(|| marker_path(&launch.stdout))
    }

    async fn submit(&self, launch: &TaskLaunch) -> Result<Launched, BackendError> {
        let attempt = launch.attempt.to_string();
        if lock(&self.inner.watched).entries.contains_key(&attempt) {
            return Err(BackendError::AlreadyStarted { attempt });
        }
        if launch.spark.is_some() {
            return Err(BackendError::BadLaunch {
                attempt,
                field: "spark",
                reason: "the stage is a Spark application: run it on a cluster whose backend is a Spark one \
                         (the Slurm backend runs commands only)"
                    .into(),
            });
        }
        if launch.command.contains('\0') {
            return Err(BackendError::BadLaunch {
                attempt,
                field: "command",
                reason: "contains a NUL byte".into(),
            });
        }
        // slurmd opens the output files but makes no folders: make them here (on the shared path),
        // and the working folder the job starts in. A marker left by an earlier server's attempt
        // of this id cannot exist (attempt ids are not reused), but one is removed all the same.
        for f in [&launch.stdout, &launch.stderr, &launch.workdir.join("job")] {
            if let Some(dir) = f.parent() {
                tokio::fs::create_dir_all(dir).await.map_err(|source| BackendError::Io {
                    attempt: attempt.clone(),
                    action: "create the folder of",
                    path: f.to_path_buf(),
                    source,
                })?;
            }
        }
        if let Some(m) = self.marker(launch) {
            let _ = tokio::fs::remove_file(&m).await;
        }
        let body = job_body(&self.inner.config, &self.inner.rest.version, launch);
        let answer = match self.inner.rest.submit(&body).await {
            Ok(a) => a,
            // A 200 whose `errors` is not empty is a failure: whatever job came back is
            // cancelled — unless the cancel fails: then that job stays this attempt's (as for
            // a node that takes no work, below), so that it can never run beside a retry.
            Err(RestError::RefusedWithJob(m, job)) => {
                if let Err(e) = self.inner.rest.cancel(job, None).await {
                    eprintln!(
                        "weir slurm backend: {}: Slurm answered with errors ({m}) but kept job {job}, which cannot be cancelled ({}): watching it as the attempt",
                        launch.attempt,
                        e.message()
                    );
                    return Ok(self.keep_as_attempt(launch, job));
                }
                return Err(self.error(&launch.attempt, RestError::RefusedWithJob(m, job)));
            }
            // The pinned node takes no work now: slurmctld kept the job pending on it
            // (`ReqNodeNotAvail`). The job is cancelled — the engine places the task again —
            // unless the cancel fails: then the pending job stays this attempt's, so that it can
            // never run beside a second attempt.
            Err(RestError::NodeNotAvailable(m, job)) => {
                if let Some(job) = job {
                    if let Err(e) = self.inner.rest.cancel(job, None).await {
                        eprintln!(
                            "weir slurm backend: {}: Slurm job {job} is pending on a node that takes no work ({m}) and cannot be cancelled ({}): watching it as the attempt",
                            launch.attempt,
                            e.message()
                        );
                        return Ok(self.keep_as_attempt(launch, job));
                    }
                }
                let message = RestError::NodeNotAvailable(m, job).message();
                return Err(match pinned_node(&self.inner.config, launch) {
                    Some(node) => BackendError::NodeUnavailable {
                        attempt,
                        backend: KIND,
                        node: node.to_string(),
                        message,
                    },
                    None => BackendError::Refused { attempt, backend: KIND, message },
                });
            }
            // The request may have reached Slurm (a timeout after sending): look for the job by
            // its comment before calling the start failed, so a retry cannot run it twice.
            Err(RestError::Unreachable(m)) => match self.find(&launch.attempt).await {
                Ok(Some(info)) => {
                    self.watch_marked(&launch.attempt, info.id, None, self.marker(launch));
                    let mut rec = self.record(&launch.attempt, info.id);
                    rec.dir = launch.stdout.parent().map(|p| p.to_path_buf()).unwrap_or_default();
                    return Ok(rec);
                }
                Ok(None) => return Err(self.error(&launch.attempt, RestError::Unreachable(m))),
                Err(e) => {
                    return Err(self.error(
                        &launch.attempt,
                        RestError::Unreachable(format!(
                            "{m}; then cannot tell whether it was submitted: {}",
                            e.message()
                        )),
                    ))
                }
            },
            Err(e) => return Err(self.error(&launch.attempt, e)),
        };
        let Some(job) = rest::job_id_of(&answer) else {
            return Err(BackendError::Refused {
                attempt,
                backend: KIND,
                message: "slurmrestd's answer carries no job_id".into(),
            });
        };
        let Ok(pid) = i32::try_from(job) else {
            let _ = self.inner.rest.cancel(job, None).await;
            return Err(BackendError::Refused {
                attempt,
                backend: KIND,
                message: format!("job id {job} does not fit weir's record"),
            });
        };
        self.watch_marked(&launch.attempt, job, None, self.marker(launch));
        Ok(Launched {
            attempt: launch.attempt.clone(),
            backend: KIND.into(),
            pid,
            start_ticks: 0,
            boot_id: KIND.into(),
            started_at_ms: watch::now_ms(),
            dir: launch.stdout.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
            // Slurm contains the job (its own cgroups) and runs it as the token's user.
            cgroups: Vec::new(),
            uid: None,
        })
    }

    fn error(&self, attempt: &AttemptId, e: RestError) -> BackendError {
        let attempt = attempt.to_string();
        match e {
            RestError::Unreachable(message) => BackendError::Unreachable { attempt, backend: KIND, message },
            other => BackendError::Refused { attempt, backend: KIND, message: other.message() },
        }
    }

    async fn adopt_record(&self, task: &Launched) -> Result<Adopted, BackendError> {
        if task.backend != KIND {
            return Err(BackendError::WrongBackend {
                attempt: task.attempt.to_string(),
                expected: KIND.into(),
                found: task.backend.clone(),
            });
        }
        if lock(&self.inner.watched).entries.contains_key(task.attempt.as_str()) {
            return Ok(Adopted::Running);
        }
        let job = task.pid as u64;
        match self.inner.rest.get(&format!("/job/{job}")).await {
            Ok(v) => match jobs_of(&v).into_iter().find(|j| j.id == job) {
                Some(info) if info.comment == self.comment(&task.attempt) => {
                    if info.is_terminal() {
                        Ok(Adopted::Ended(exit_of(&info, false)))
                    } else {
                        self.watch(&task.attempt, job, None);
                        Ok(Adopted::Running)
                    }
                }
                // The id names another job now (Slurm's ids restarted): ours is gone.
                _ => Ok(Adopted::Ended(weir_backend::Exit::Lost)),
            },
            Err(RestError::UnknownJob) => {
                eprintln!(
                    "weir slurm backend: {}: Slurm job {job} is no longer known: outcome unknown",
                    task.attempt
                );
                Ok(Adopted::Ended(weir_backend::Exit::Lost))
            }
            // Slurm cannot say now: keep watching; the poller decides once it answers. Never
            // report an end we have not seen, so the task is not started a second time.
            Err(RestError::Unreachable(m)) => {
                eprintln!(
                    "weir slurm backend: {}: adopting job {job} without checking it: {m}",
                    task.attempt
                );
                self.watch(&task.attempt, job, None);
                Ok(Adopted::Running)
            }
            Err(e) => Err(self.error(&task.attempt, e)),
        }
    }

    async fn recover_id(&self, attempt: &AttemptId) -> Result<Recovered, BackendError> {
        if let Some(e) = lock(&self.inner.watched).entries.get(attempt.as_str()) {
            return Ok(Recovered::Running(self.record(attempt, e.job)));
        }
        let found = self.find(attempt).await.map_err(|e| self.error(attempt, e))?;
        let Some(info) = found else { return Ok(Recovered::NotFound) };
        if info.is_terminal() {
            return Ok(Recovered::Ended(exit_of(&info, false)));
        }
        self.watch(attempt, info.id, None);
        Ok(Recovered::Running(self.record(attempt, info.id)))
    }

    /// The newest job whose comment names `attempt`. A Slurm that cannot answer must never read
    /// as "never started" (the job may exist and run): this waits until Slurm answers.
    async fn find(&self, attempt: &AttemptId) -> Result<Option<JobInfo>, RestError> {
        let mut pause = Duration::from_millis(250);
        let mut said = false;
        let listing = loop {
            match self.inner.rest.get("/jobs").await {
                Ok(v) => break v,
                Err(RestError::Unreachable(m)) => {
                    if !said {
                        eprintln!(
                            "weir slurm backend: {attempt}: cannot list jobs to learn whether it was submitted ({m}); waiting for Slurm"
                        );
                        said = true;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        };
        let comment = self.comment(attempt);
        Ok(jobs_of(&listing).into_iter().filter(|j| j.comment == comment).max_by_key(|j| j.id))
    }

    /// A Slurm job that a refused start left behind and that could not be cancelled, taken as
    /// the attempt: it is watched, and its record returned, so that a kill or a retry knows it.
    fn keep_as_attempt(&self, launch: &TaskLaunch, job: u64) -> Launched {
        self.watch(&launch.attempt, job, None);
        let mut rec = self.record(&launch.attempt, job);
        rec.dir = launch.stdout.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        rec
    }

    fn record(&self, attempt: &AttemptId, job: u64) -> Launched {
        Launched {
            attempt: attempt.clone(),
            backend: KIND.into(),
            pid: job as i32,
            start_ticks: 0,
            boot_id: KIND.into(),
            started_at_ms: watch::now_ms(),
            dir: Default::default(),
            cgroups: Vec::new(),
            uid: None,
        }
    }

    async fn kill_job(&self, task: &Launched, grace: Duration) -> Result<(), BackendError> {
        if !lock(&self.inner.watched).entries.contains_key(task.attempt.as_str()) {
            if let Adopted::Ended(_) = self.adopt_record(task).await? {
                return Ok(());
            }
        }
        let job = {
            let mut w = lock(&self.inner.watched);
            let Some(e) = w.entries.get_mut(task.attempt.as_str()) else { return Ok(()) };
            if e.kill.is_some() {
                return Ok(());
            }
            e.kill = Some(Kill { hard_at: tokio::time::Instant::now() + grace, hard_sent: grace.is_zero() });
            e.job
        };
        let signal = if grace.is_zero() { None } else { Some("SIGTERM") };
        match self.inner.rest.cancel(job, signal).await {
            Ok(()) | Err(RestError::UnknownJob) => Ok(()),
            Err(e) => {
                // The poller cancels it at the deadline (now, without a grace) once Slurm answers.
                if let Some(k) = lock(&self.inner.watched)
                    .entries
                    .get_mut(task.attempt.as_str())
                    .and_then(|e| e.kill.as_mut())
                {
                    k.hard_sent = false;
                }
                Err(self.error(&task.attempt, e))
            }
        }
    }

    /// Watches Slurm job `job` as `attempt` without asking Slurm first — what `adopt` does when
    /// slurmrestd cannot answer. Tests use it to watch a job id Slurm never had.
    #[doc(hidden)]
    pub fn watch_unchecked(&self, attempt: &AttemptId, job: u64) {
        self.watch(attempt, job, None);
    }

    /// The nodes Slurm reports (capacity discovery).
    pub async fn nodes(&self) -> Result<Vec<SlurmNode>, SlurmError> {
        capacity::nodes(&self.inner.rest, &self.inner.config.url).await
    }

    /// Whether slurmrestd and slurmctld answer, Slurm's version, the node count and the last
    /// error the poller saw.
    pub async fn health(&self) -> Health {
        let last = lock(&self.inner.watched).last_error.clone();
        capacity::health(&self.inner.rest, last).await
    }
}

/// The comment that names `attempt` on its Slurm job.
fn comment(config: &SlurmConfig, attempt: &AttemptId) -> String {
    format!("weir-attempt {}:{attempt}", config.tag)
}

/// The file a job's script leaves when its command has ended: its stdout's name with `.ended`
/// for `.stdout` (`logs/run-7/0.0.3.1.stdout` → `logs/run-7/0.0.3.1.ended`), holding the
/// command's exit status. The attempt ends by it; the listings check that Slurm agrees
/// (`watch::audit_claims`).
fn marker_path(stdout: &Path) -> PathBuf {
    let name = stdout.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let base = name.strip_suffix(".stdout").unwrap_or(&name);
    stdout.with_file_name(format!("{base}.ended"))
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The node `launch` is pinned to: the engine's choice (`WEIR_NODE`) with `placement: weir`.
fn pinned_node<'a>(config: &SlurmConfig, launch: &'a TaskLaunch) -> Option<&'a str> {
    (config.placement == Placement::Weir).then(|| launch.env.get("WEIR_NODE").map(String::as_str)).flatten()
}

/// The `POST /job/submit` body of one attempt, in the shape API `version` reads.
///
/// v0.0.38 (Slurm 22.05, `v0.0.38_job_properties`): `environment` an object, `nodes` a
/// `[min, max]` pair, `time_limit` and `memory_per_node` plain numbers, GPUs as `gres`, the node
/// of `placement: weir` as `nodelist` (not in that version's OpenAPI document, but its parser
/// takes it: slurmctld then shows the job's `ReqNodeList`; `required_nodes` is refused there as
/// a "Disabled key"). v0.0.40 and later (`job_desc_msg` of SchedMD's OpenAPI documents for
/// v0.0.41 to v0.0.45): `environment` a list of `K=V`, `minimum_nodes`/`maximum_nodes`,
/// `time_limit` and `memory_per_node` as `{set, infinite, number}`, GPUs as `tres_per_node`
/// (`gres` is ignored there), the node as `required_nodes` (a list), the script in the job.
fn job_body(config: &SlurmConfig, version: &str, launch: &TaskLaunch) -> Value {
    let r = launch.resources;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: &str, v: String| match env.iter_mut().find(|(key, _)| key == k) {
        Some(e) => e.1 = v,
        None => env.push((k.to_string(), v)),
    };
    set("PATH", "/usr/local/bin:/usr/bin:/bin".into());
    set("LANG", "C.UTF-8".into());
    set("WEIR_CPU_MILLICORES", r.cpu.to_string());
    set("WEIR_MEMORY_MIB", r.memory.to_string());
    set("WEIR_GPUS", r.gpu.to_string());
    for (k, v) in &launch.env {
        set(k, v.clone());
    }
    let target = config.target(launch.env.get("WEIR_QUEUE").map(String::as_str));
    let cpus = r.cpu.div_ceil(1000).clamp(1, u64::from(u32::MAX));
    let script = match config.end_markers {
        // The command runs in a subshell (an `exit` in it ends only that), then the script writes
        // its status into the marker and exits with it. A job killed or timed out leaves none:
        // the listing finds its end.
        true => format!(
            "#!/bin/sh\n(\n{}\n)\nweir_status=$?\necho $weir_status > {} 2>/dev/null\nexit $weir_status\n",
            launch.command,
            shell_quote(&marker_path(&launch.stdout).to_string_lossy())
        ),
        false => format!("#!/bin/sh\n{}\n", launch.command),
    };
    let walltime = launch
        .env
        .get("WEIR_WALLTIME_SECONDS")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .or(config.default_time_limit)
        .map(|w| w.as_secs().div_ceil(60).max(1));
    let node = pinned_node(config, launch);
    let new = rest::is_data_parser(version);
    let mut job = json!({
        "name": format!("{}:{}", config.tag, launch.attempt),
        "comment": comment(config, &launch.attempt),
        "current_working_directory": launch.workdir.to_string_lossy(),
        "standard_output": launch.stdout.to_string_lossy(),
        "standard_error": launch.stderr.to_string_lossy(),
        "tasks": 1,
        "cpus_per_task": cpus,
        // A retry is weir's decision: Slurm must never run an attempt a second time.
        "requeue": false,
    });
    let number = |n: u64| json!({"set": true, "infinite": false, "number": n});
    if new {
        job["environment"] = json!(env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>());
        job["minimum_nodes"] = json!(1);
        job["maximum_nodes"] = json!(1);
        job["memory_per_node"] = number(r.memory.max(1));
        job["script"] = json!(script);
        if r.gpu > 0 {
            job["tres_per_node"] = json!(format!("gres/gpu:{}", r.gpu));
        }
        if let Some(m) = walltime {
            job["time_limit"] = number(m);
        }
        if let Some(n) = node {
            job["required_nodes"] = json!([n]);
        }
    } else {
        job["environment"] = Value::Object(env.into_iter().map(|(k, v)| (k, json!(v))).collect());
        job["nodes"] = json!([1, 1]);
        job["memory_per_node"] = json!(r.memory.max(1));
        if r.gpu > 0 {
            job["gres"] = json!(format!("gpu:{}", r.gpu));
        }
        if let Some(m) = walltime {
            job["time_limit"] = json!(m);
        }
        if let Some(n) = node {
            job["nodelist"] = json!(n);
        }
    }
    if let Some(p) = target.partition {
        job["partition"] = json!(p);
    }
    if let Some(q) = target.qos {
        job["qos"] = json!(q);
    }
    if new {
        json!({ "job": job })
    } else {
        json!({ "script": script, "job": job })
    }
}

impl Backend for SlurmBackend {
    fn kind(&self) -> &str {
        KIND
    }

    fn health(&self) -> BoxFuture<'_, weir_backend::BackendHealth> {
        Box::pin(async {
            let h = SlurmBackend::health(self).await;
            weir_backend::BackendHealth {
                healthy: h.healthy,
                version: h.version,
                nodes: Some(h.nodes as u64),
                error: h.last_error,
            }
        })
    }

    fn nodes(&self) -> BoxFuture<'_, Option<Result<Vec<weir_backend::BackendNode>, String>>> {
        Box::pin(async {
            Some(SlurmBackend::nodes(self).await.map_err(|e| e.to_string()).map(|nodes| {
                nodes
                    .into_iter()
                    .map(|n| weir_backend::BackendNode {
                        usable: n.is_usable(),
                        resources: weir_model::Resources {
                            cpu: n.cpu_millicores,
                            memory: n.memory_mib,
                            gpu: n.gpus,
                        },
                        name: n.name,
                        state: n.state,
                    })
                    .collect()
            }))
        })
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>> {
        Box::pin(self.submit(launch))
    }

    fn kill<'a>(&'a self, task: &'a Launched, grace: Duration) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(self.kill_job(task, grace))
    }

    fn adopt<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>> {
        Box::pin(self.adopt_record(task))
    }

    fn recover<'a>(&'a self, attempt: &'a AttemptId) -> BoxFuture<'a, Result<Recovered, BackendError>> {
        Box::pin(self.recover_id(attempt))
    }

    fn forget<'a>(&'a self, _task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>> {
        // Slurm keeps nothing of weir's; its own records age out (MinJobAge).
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(cpu: u64, walltime: Option<&str>, queue: &str) -> TaskLaunch {
        let mut env: std::collections::BTreeMap<String, String> =
            [("WEIR_QUEUE".to_string(), queue.to_string())].into();
        if let Some(w) = walltime {
            env.insert("WEIR_WALLTIME_SECONDS".into(), w.into());
        }
        TaskLaunch {
            attempt: AttemptId::new("run-1/0/0/2/1").unwrap(),
            command: "echo hi".into(),
            env,
            workdir: "/shared/work".into(),
            resources: weir_model::Resources { cpu, memory: 300, gpu: 2 },
            stdout: "/shared/logs/a/stdout".into(),
            stderr: "/shared/logs/a/stderr".into(),
            spark: None,
            user: None,
        }
    }

    #[test]
    fn a_job_carries_the_tasks_resources_limits_and_queue_mapping() {
        let mut c = SlurmConfig::new("http://h:1", "u", Auth::TokenEnv("T".into()));
        c.partition = Some("batch".into());
        c.queues.insert(
            "root.a.tier1".into(),
            SlurmQueue { partition: Some("fast".into()), qos: Some("high".into()) },
        );
        c.default_time_limit = Some(Duration::from_secs(600));
        let b = job_body(&c, "v0.0.38", &launch(1500, Some("61"), "root.a.tier1"));
        // The command in a subshell, then its status into the end marker beside its stdout,
        // then the script exits with it.
        assert_eq!(
            b["script"],
            "#!/bin/sh\n(\necho hi\n)\nweir_status=$?\necho $weir_status > '/shared/logs/a/stdout.ended' 2>/dev/null\nexit $weir_status\n"
        );
        let mut plain = c.clone();
        plain.end_markers = false;
        assert_eq!(
            job_body(&plain, "v0.0.38", &launch(1500, None, "root.a"))["script"],
            "#!/bin/sh\necho hi\n"
        );
        let j = &b["job"];
        assert_eq!((j["cpus_per_task"].as_u64(), j["memory_per_node"].as_u64()), (Some(2), Some(300)));
        assert_eq!(j["gres"], "gpu:2");
        assert_eq!((j["partition"].as_str(), j["qos"].as_str()), (Some("fast"), Some("high")));
        assert_eq!(j["time_limit"], 2, "61 s rounds up to 2 minutes");
        assert_eq!(j["requeue"], false, "Slurm never runs an attempt twice");
        assert_eq!(j["comment"], "weir-attempt weir:run-1/0/0/2/1");
        assert_eq!(j["name"], "weir:run-1/0/0/2/1");
        assert_eq!(j["environment"]["WEIR_CPU_MILLICORES"], "1500");
        assert_eq!(j["standard_output"], "/shared/logs/a/stdout");
        assert!(j.get("nodelist").is_none(), "placement: backend names no node");
        let other = job_body(&c, "v0.0.38", &launch(200, None, "root.b.tier3"));
        let j = &other["job"];
        assert_eq!((j["cpus_per_task"].as_u64(), j["partition"].as_str()), (Some(1), Some("batch")));
        assert_eq!(j["time_limit"], 10, "the default time limit");
        assert!(j.get("qos").is_none());
    }

    #[test]
    fn placement_weir_pins_the_job_to_the_engines_node_in_each_versions_field() {
        let mut c = SlurmConfig::new("http://h:1", "u", Auth::TokenEnv("T".into()));
        c.placement = Placement::Weir;
        let mut l = launch(1000, None, "root.a");
        l.env.insert("WEIR_NODE".into(), "cn07".into());
        // v0.0.38: `nodelist` (what Slurm 22.05's parser takes; checked against the real
        // slurmrestd by crates/weir/tests/serve_slurm.rs, which reads the job's ReqNodeList).
        let old = job_body(&c, "v0.0.38", &l);
        assert_eq!(old["job"]["nodelist"], "cn07");
        assert!(old["job"].get("required_nodes").is_none(), "v0.0.38 refuses it as a disabled key");
        // v0.0.40+: `required_nodes`, a csv_string (a list of names) in `job_desc_msg`.
        let new = job_body(&c, "v0.0.41", &l);
        assert_eq!(new["job"]["required_nodes"], json!(["cn07"]));
        assert!(new["job"].get("nodelist").is_none());
    }

    /// The v0.0.40+ body, field by field against `job_desc_msg` of the OpenAPI documents that
    /// slurmrestd v0.0.41 to v0.0.45 serve (SchedMD's generated schema, as kept by
    /// SlinkyProject/slurm-client api/v00NN/slurm-openapi.gen.json): `environment` is a
    /// `string_array`, `time_limit` a `uint32_no_val_struct` in minutes, `memory_per_node` a
    /// `uint64_no_val_struct`, node counts `minimum_nodes`/`maximum_nodes`, GPUs `tres_per_node`
    /// (v0.0.40's parser ignores `gres` with a warning), the script `job.script`.
    #[test]
    fn a_v0_0_4x_body_has_that_versions_shapes() {
        let mut c = SlurmConfig::new("http://h:1", "u", Auth::TokenEnv("T".into()));
        c.partition = Some("batch".into());
        let b = job_body(&c, "v0.0.43", &launch(1500, Some("61"), "root.a.tier1"));
        assert!(b.get("script").is_none(), "the script is in the job");
        let j = &b["job"];
        assert!(j["script"].as_str().is_some_and(|t| t.starts_with("#!/bin/sh\n(\necho hi\n)\n")), "{j}");
        let env: Vec<&str> = j["environment"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(
            env.contains(&"WEIR_QUEUE=root.a.tier1") && env.contains(&"PATH=/usr/local/bin:/usr/bin:/bin"),
            "{env:?}"
        );
        assert_eq!(env.iter().filter(|e| e.starts_with("PATH=")).count(), 1);
        assert_eq!(j["time_limit"], json!({"set": true, "infinite": false, "number": 2}));
        assert_eq!(j["memory_per_node"], json!({"set": true, "infinite": false, "number": 300}));
        assert_eq!((j["minimum_nodes"].as_u64(), j["maximum_nodes"].as_u64()), (Some(1), Some(1)));
        assert_eq!((j["tasks"].as_u64(), j["cpus_per_task"].as_u64()), (Some(1), Some(2)));
        assert_eq!(j["tres_per_node"], "gres/gpu:2");
        assert!(j.get("gres").is_none() && j.get("nodes").is_none());
        assert_eq!(j["requeue"], false);
        assert_eq!(j["partition"], "batch");
        assert_eq!(j["comment"], "weir-attempt weir:run-1/0/0/2/1");
    }

    #[test]
    fn the_end_marker_sits_beside_stdout_and_its_path_is_quoted_for_the_shell() {
        assert_eq!(
            marker_path(Path::new("/d/logs/run-7/0.0.3.1.stdout")),
            Path::new("/d/logs/run-7/0.0.3.1.ended")
        );
        assert_eq!(marker_path(Path::new("/d/out.log")), Path::new("/d/out.log.ended"));
        assert_eq!(shell_quote("/d/it's here"), "'/d/it'\\''s here'");
        // The quoted word is one word to sh, whatever it holds.
        let word = shell_quote("a'b $HOME `x` \"c\"");
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &format!("printf %s {word}")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a'b $HOME `x` \"c\"");
    }

    #[test]
    fn the_newest_version_both_speak_is_picked() {
        let served = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(rest::pick(&served(&["v0.0.38"])), Some("v0.0.38"));
        assert_eq!(rest::pick(&served(&["v0.0.40", "v0.0.41", "v0.0.42"])), Some("v0.0.42"));
        assert_eq!(rest::pick(&served(&["v0.0.39"])), None, "23.02's v0.0.39 alone is not spoken");
        assert_eq!(rest::pick(&served(&["v0.0.39", "v0.0.40"])), Some("v0.0.40"));
    }
}
