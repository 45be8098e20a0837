//! `spark-standalone`: each attempt is one driver on a Spark standalone cluster, submitted through
//! the master's REST submission gateway (`spark.master.rest.enabled=true`, port 6066 by default)
//! in cluster deploy mode: the master picks a worker, the worker runs the driver, the driver asks
//! the master for executors.
//!
//! - **start**: a folder per attempt under `state_dir` (made with `create_dir`, so an attempt id
//!   starts once only), a record of the request written before it is sent, the
//!   `CreateSubmissionRequest`, and the submission id written into the record as soon as the
//!   answer comes — before `start` returns, so a server killed right after still finds it.
//! - **status**: one poller per backend asks the gateway for each watched driver every
//!   `poll_interval` and copies the driver's new `stdout`/`stderr` bytes from its worker's web UI
//!   (`/log/`) into the attempt's log files; a terminal `driverState` ends the attempt.
//! - **kill**: `POST /v1/submissions/kill/ID` (the master tells the worker to stop the driver);
//!   retried by the poller until the master takes it.
//! - **restarts**: the [`Launched`] record carries the submission id (in `boot_id`; `pid` is 0);
//!   `adopt` asks the gateway about it; `recover` reads the attempt's record, or — when the
//!   answer to the create never came — looks for a driver of the master's that no record claims,
//!   submitted after the request was written.
//!
//! A PySpark application runs as Spark's own `spark-submit` would run it in client mode, but on
//! the worker: main class `org.apache.spark.deploy.PythonRunner` with the file, an empty
//! `--py-files` list and the application's arguments (`spark-submit` itself refuses Python in
//! standalone cluster mode; the gateway does not look at the main class).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use weir_backend::{
    Adopted, AttemptId, Backend, BackendError, BackendHealth, BackendNode, BoxFuture, Exit, ExitSender,
    Launched, Recovered, TaskExit, TaskLaunch,
};

use crate::rest::{Answer, CreateRequest, Rest, RestError};
use crate::SparkError;
use weir_model::SparkSpec;

/// The kind stored in each attempt's record.
pub const STANDALONE_KIND: &str = "spark-standalone";

/// The main class that runs a Python file as a driver (Spark's `SparkSubmit` uses it for
/// `.py` applications).
const PYTHON_RUNNER: &str = "org.apache.spark.deploy.PythonRunner";

/// Settings of [`SparkStandaloneBackend`] (the server file's `backend: {kind: spark-standalone}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparkStandaloneConfig {
    /// The master's REST submission gateway, `http://HOST:PORT` (Spark's default port: 6066).
    pub master_rest_url: String,
    /// The master's web UI, for its `/json/` (the workers' log addresses, capacity);
    /// `None`: the gateway's host, port 8080.
    pub master_ui_url: Option<String>,
    /// The Python the workers run PySpark drivers with (`PYSPARK_PYTHON`,
    /// `PYSPARK_DRIVER_PYTHON`), a path on the workers; `None`: Spark's default (`python3`).
    pub python: Option<String>,
    /// The program the workers run a PySpark driver with (`PYSPARK_DRIVER_PYTHON`), when it
    /// differs from `python`: Spark's kill stops the driver's JVM only (`DriverRunner.kill`:
    /// `Utils.terminateProcess` of the JVM), and the Python process it started runs on; a wrapper such
    /// as `exec setpriv --pdeathsig TERM -- python3 "$@"` ends it with its JVM.
    pub driver_python: Option<String>,
    /// Spark properties for every application, before the stage's own (which win).
    pub conf: BTreeMap<String, String>,
    /// One folder per attempt: the submission record.
    pub state_dir: PathBuf,
    pub poll_interval: Duration,
    /// How long one request to the master or a worker may take.
    pub request_timeout: Duration,
}

impl SparkStandaloneConfig {
    pub fn new(master_rest_url: impl Into<String>, state_dir: impl Into<PathBuf>) -> SparkStandaloneConfig {
        SparkStandaloneConfig {
            master_rest_url: master_rest_url.into(),
            master_ui_url: None,
            python: None,
            driver_python: None,
            conf: BTreeMap::new(),
            state_dir: state_dir.into(),
            poll_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
        }
    }

    /// `master_ui_url`, else `http://HOST:8080` with the gateway's host.
    pub fn ui_url(&self) -> String {
        if let Some(u) = &self.master_ui_url {
            return u.clone();
        }
        let rest = self.master_rest_url.trim_start_matches("http://");
        let authority = rest.split('/').next().unwrap_or(rest);
        let host = match authority.rsplit_once(':') {
            Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
            _ => authority,
        };
        format!("http://{host}:8080")
    }
}

/// What `start` writes in the attempt's folder: before the request (`submission: None`) and again
/// with the id once the master answered.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    attempt: String,
    submission: Option<String>,
    stdout: PathBuf,
    stderr: PathBuf,
    /// When the request was written, ms since the epoch (the look-up of a lost answer).
    asked_ms: u64,
    main_class: String,
}

const RECORD: &str = "submission.json";

/// One watched driver.
struct Entry {
    attempt: AttemptId,
    submission: String,
    logs: Option<[PathBuf; 2]>,
    offsets: [u64; 2],
    worker_ui: Option<String>,
    kill: Option<bool>,
    /// Consecutive status answers saying the master does not know the driver.
    unknown: u32,
}

struct Inner {
    rest: Rest,
    config: SparkStandaloneConfig,
    version: String,
    exits: ExitSender,
    watched: Mutex<HashMap<String, Entry>>,
    last_error: Mutex<Option<String>>,
}

/// Runs each attempt as a driver on a Spark standalone cluster. See the module documentation.
/// Dropping it stops the watching, never the drivers.
pub struct SparkStandaloneBackend {
    inner: Arc<Inner>,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for SparkStandaloneBackend {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn folder(state_dir: &Path, attempt: &AttemptId) -> PathBuf {
    state_dir.join(attempt.as_str().replace('/', "+"))
}

fn read_record(dir: &Path) -> Option<Record> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(RECORD)).ok()?).ok()
}

fn write_record(dir: &Path, record: &Record) -> std::io::Result<()> {
    let tmp = dir.join(format!("{RECORD}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(serde_json::to_string(record).unwrap_or_default().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(RECORD))?;
    std::fs::File::open(dir)?.sync_all()
}

/// How a driver in a terminal state ended; `None` while it runs. The gateway gives no exit code:
/// Spark's `DriverRunner` says `FINISHED` for exit 0 and `FAILED` for any other, so `FAILED` is
/// exit 1 here until [`user_exit_code`] finds the real one in the driver's log.
fn exit_of(state: &str, kill_asked: bool) -> Option<Exit> {
    Some(match state {
        "FINISHED" => Exit::Code(0),
        "KILLED" | "FAILED" | "ERROR" if kill_asked => Exit::Killed,
        // Killed by someone else (an operator, the master's UI).
        "KILLED" => Exit::Signal(15),
        // FAILED: the driver exited non-zero; ERROR: the worker could not run it.
        "FAILED" | "ERROR" => Exit::Code(1),
        _ => return None,
    })
}

/// The executors of a Spark application with `executors: N`, as weir's engine counts them on a
/// standalone cluster: N containers of `spark.executor.cores` cores (1 unless set; the backend
/// sets it so) and `spark.executor.memory` (Spark's default 1g; a standalone worker counts
/// executor memory without overhead, `Master.scheduleExecutorsOnWorkers`), the stage's `conf`
/// over the backend's. `None` without `executors`.
pub fn executor_gang(
    app: &SparkSpec,
    defaults: &BTreeMap<String, String>,
) -> Option<(u32, weir_model::Resources)> {
    let n = app.executors.filter(|&n| n > 0)?;
    let get = |k: &str| app.conf.get(k).or_else(|| defaults.get(k));
    let cores = get("spark.executor.cores").and_then(|c| c.trim().parse::<u64>().ok()).unwrap_or(1).max(1);
    let memory = get("spark.executor.memory")
        .and_then(|m| weir_model::resources::parse_memory(m).ok())
        .unwrap_or(1024);
    Some((n, weir_model::Resources { cpu: cores.saturating_mul(1000), memory, gpu: 0 }))
}

/// The exit code of a PySpark driver's Python process, from the driver's `stderr` on its worker:
/// `PythonRunner` throws `SparkUserAppException(code)` when Python exits non-zero, the
/// worker's `DriverWrapper` lets it out of `main` (the JVM then exits 1), and the JVM prints
/// `…SparkUserAppException: User application exited with CODE` (Spark's `SparkException.scala`).
/// The last such line wins; `None` when there is none (a JVM application, or a driver that
/// failed another way: exit 1 stays).
fn user_exit_code(stderr: &str) -> Option<i32> {
    const MARK: &str = "SparkUserAppException: User application exited with ";
    let at = stderr.rfind(MARK)? + MARK.len();
    let digits: String = stderr[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    digits.parse().ok().filter(|&c| c != 0)
}

/// The last 256 KiB of a file (lossy text), empty when it cannot be read.
fn tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(256 * 1024)));
    let mut bytes = Vec::new();
    let _ = f.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A `FAILED` driver's exit with the code its copied `stderr` names, and a line in that log
/// saying what the master reported and where the code came from.
fn failed_exit(entry: &Entry, exit: Exit, state: Option<&str>, message: Option<&str>) -> Exit {
    let (Some(logs), Exit::Code(1)) = (&entry.logs, exit) else { return exit };
    let found = (state == Some("FAILED")).then(|| user_exit_code(&tail(&logs[1]))).flatten();
    let how = match found {
        Some(code) => format!("exit code {code}, from the driver's log"),
        None => "its gateway gives no exit code and the driver's log names none; 1 is recorded".into(),
    };
    let note = format!(
        "weir: the Spark master reports driver {} {} ({how}){}\n",
        entry.submission,
        state.unwrap_or("?"),
        message.map(|m| format!(": {m}")).unwrap_or_default()
    );
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&logs[1])
        .and_then(|mut f| f.write_all(note.as_bytes()));
    found.map(Exit::Code).unwrap_or(exit)
}

impl SparkStandaloneBackend {
    /// Asks the master's gateway for its version (a status request for a driver that does not
    /// exist) and starts the poller. A master that does not answer is an error naming its URL.
    pub async fn connect(
        config: SparkStandaloneConfig,
        exits: ExitSender,
    ) -> Result<SparkStandaloneBackend, SparkError> {
        let unreachable =
            |message: String| SparkError::Master { url: config.master_rest_url.clone(), message };
        if !config.master_rest_url.starts_with("http://") {
            return Err(unreachable("give the gateway as http://HOST:PORT".into()));
        }
        std::fs::create_dir_all(&config.state_dir).map_err(|e| {
            SparkError::Local(BackendError::Setup {
                action: "create the state folder",
                path: config.state_dir.clone(),
                source: e,
            })
        })?;
        let rest = Rest::new(&config.master_rest_url, &config.ui_url(), config.request_timeout)
            .map_err(|e| unreachable(e.to_string()))?;
        let probe = rest.status("weir-probe").await.map_err(|e| unreachable(e.to_string()))?;
        let inner = Arc::new(Inner {
            rest,
            version: probe.server_spark_version,
            config,
            exits,
            watched: Mutex::new(HashMap::new()),
            last_error: Mutex::new(None),
        });
        let poller = tokio::spawn(poll(Arc::downgrade(&inner)));
        Ok(SparkStandaloneBackend { inner, poller })
    }

    /// Spark's version as the master reports it.
    pub fn version(&self) -> &str {
        &self.inner.version
    }

    fn request(&self, launch: &TaskLaunch) -> Result<CreateRequest, BackendError> {
        let bad = |field, reason: &str| BackendError::BadLaunch {
            attempt: launch.attempt.to_string(),
            field,
            reason: reason.to_string(),
        };
        let Some(app) = &launch.spark else {
            return Err(bad(
                "command",
                "a spark-standalone cluster runs Spark applications only (a stage with `spark:`); run commands on a local or slurm cluster",
            ));
        };
        let absolute = |p: &str| {
            let p = Path::new(p.trim());
            if p.is_absolute() { p.to_path_buf() } else { launch.workdir.join(p) }.display().to_string()
        };
        let main = app.main.trim();
        let (resource, main_class, mut args) = if main.ends_with(".py") {
            let file = absolute(main);
            (format!("file:{file}"), PYTHON_RUNNER.to_string(), vec![file, String::new()])
        } else {
            let Some(jar) = &app.jar else {
                return Err(bad("spark", "a JVM application needs `jar` (the application's jar)"));
            };
            (format!("file:{}", absolute(jar)), main.to_string(), Vec::new())
        };
        args.extend(app.args.iter().cloned());
        let mut props = self.inner.config.conf.clone();
        props.extend(app.conf.clone());
        // With `executors: N`, N executors of `spark.executor.cores` (1 unless set) each: the gang
        // weir's engine counted (`executor_gang`). Without `spark.executor.cores` a standalone
        // master gives one executor per worker all the cores it may (`spark.cores.max`).
        let cores = match app.executors {
            Some(n) => {
                let per = props
                    .entry("spark.executor.cores".into())
                    .or_insert_with(|| "1".into())
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(1)
                    .max(1);
                u64::from(n) * per
            }
            None => launch.resources.cpu.div_ceil(1000),
        }
        .max(1);
        props.entry("spark.cores.max".into()).or_insert_with(|| cores.to_string());
        props.insert("spark.app.name".into(), format!("weir:{}", launch.attempt));
        props.insert("spark.submit.deployMode".into(), "cluster".into());
        // A retry is weir's decision: the master must never restart a driver.
        props.insert("spark.driver.supervise".into(), "false".into());
        let mut env = launch.env.clone();
        let config = &self.inner.config;
        if let Some(py) = &config.python {
            env.entry("PYSPARK_PYTHON".into()).or_insert_with(|| py.clone());
        }
        if let Some(py) = config.driver_python.as_ref().or(config.python.as_ref()) {
            env.entry("PYSPARK_DRIVER_PYTHON".into()).or_insert_with(|| py.clone());
        }
        Ok(CreateRequest {
            action: "CreateSubmissionRequest",
            app_resource: resource,
            main_class,
            app_args: args,
            client_spark_version: self.inner.version.clone(),
            environment_variables: env,
            spark_properties: props,
        })
    }

    fn launched(&self, attempt: &AttemptId, submission: &str, dir: PathBuf) -> Launched {
        Launched {
            attempt: attempt.clone(),
            backend: STANDALONE_KIND.into(),
            pid: 0,
            start_ticks: 0,
            boot_id: submission.to_string(),
            started_at_ms: now_ms(),
            dir,
            cgroups: Vec::new(),
            uid: None,
        }
    }

    fn watch(&self, attempt: &AttemptId, submission: &str, record: Option<&Record>) {
        let logs = record.map(|r| [r.stdout.clone(), r.stderr.clone()]);
        let offsets = logs
            .as_ref()
            .map(|l| l.clone().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)))
            .unwrap_or([0, 0]);
        lock(&self.inner.watched).entry(attempt.to_string()).or_insert(Entry {
            attempt: attempt.clone(),
            submission: submission.to_string(),
            logs,
            offsets,
            worker_ui: None,
            kill: None,
            unknown: 0,
        });
    }

    async fn start_driver(&self, launch: &TaskLaunch) -> Result<Launched, BackendError> {
        let request = self.request(launch)?;
        let attempt = &launch.attempt;
        let dir = folder(&self.inner.config.state_dir, attempt);
        let io = |action, path: &Path, source| BackendError::Io {
            attempt: attempt.to_string(),
            action,
            path: path.to_path_buf(),
            source,
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(BackendError::AlreadyStarted { attempt: attempt.to_string() })
            }
            Err(e) => return Err(io("create the attempt folder", &dir, e)),
        }
        let mut record = Record {
            attempt: attempt.to_string(),
            submission: None,
            stdout: launch.stdout.clone(),
            stderr: launch.stderr.clone(),
            asked_ms: now_ms(),
            main_class: request.main_class.clone(),
        };
        write_record(&dir, &record).map_err(|e| io("write the submission record", &dir, e))?;
        let unreachable = |e: &RestError| BackendError::Unreachable {
            attempt: attempt.to_string(),
            backend: STANDALONE_KIND,
            message: e.to_string(),
        };
        let submission = match self.inner.rest.create(&request).await {
            Ok(Answer { success: true, submission_id: Some(id), .. }) => id,
            Ok(answer) => {
                // Refused: nothing runs. The folder stays (the id is used), the record goes.
                let _ = std::fs::remove_file(dir.join(RECORD));
                return Err(BackendError::Refused {
                    attempt: attempt.to_string(),
                    backend: STANDALONE_KIND,
                    message: answer.message.clone().unwrap_or_else(|| format!("{answer:?}")),
                });
            }
            Err(e) if e.not_sent() => {
                let _ = std::fs::remove_file(dir.join(RECORD));
                return Err(unreachable(&e));
            }
            // Sent, perhaps taken: look for it before saying it did not start.
            Err(e) => match self.find_unclaimed(&record, Duration::from_secs(60)).await {
                Some(id) => id,
                None => return Err(unreachable(&e)),
            },
        };
        record.submission = Some(submission.clone());
        write_record(&dir, &record).map_err(|e| io("write the submission record", &dir, e))?;
        self.watch(attempt, &submission, Some(&record));
        Ok(self.launched(attempt, &submission, dir))
    }

    /// A driver of the master's, submitted (by its start time) no earlier than 5 s before
    /// `record` was written, with its main class, that no record under `state_dir` names: the
    /// one a request whose answer was lost made. Asks until the master answers or `patience`
    /// runs out (`None` then, as when there is none).
    async fn find_unclaimed(&self, record: &Record, patience: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            match self.inner.rest.master_state().await {
                Ok(state) => {
                    let claimed: Vec<String> = std::fs::read_dir(&self.inner.config.state_dir)
                        .map(|d| d.flatten().filter_map(|e| read_record(&e.path())?.submission).collect())
                        .unwrap_or_default();
                    let mut found: Vec<(u64, String)> = state
                        .activedrivers
                        .iter()
                        .chain(&state.completeddrivers)
                        .filter(|d| d.mainclass == record.main_class && !claimed.contains(&d.id))
                        .filter_map(|d| Some((d.starttime.parse::<u64>().ok()?, d.id.clone())))
                        .filter(|(t, _)| *t + 5000 >= record.asked_ms)
                        .collect();
                    found.sort();
                    return found.into_iter().next().map(|(_, id)| id);
                }
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_secs(1)).await
                }
                Err(_) => return None,
            }
        }
    }

    async fn adopt_driver(&self, task: &Launched) -> Result<Adopted, BackendError> {
        if task.backend != STANDALONE_KIND {
            return Err(BackendError::WrongBackend {
                attempt: task.attempt.to_string(),
                expected: STANDALONE_KIND.into(),
                found: task.backend.clone(),
            });
        }
        if lock(&self.inner.watched).contains_key(task.attempt.as_str()) {
            return Ok(Adopted::Running);
        }
        let record = read_record(&task.dir);
        let submission = task.boot_id.as_str();
        match self.inner.rest.status(submission).await {
            Ok(a) if !a.success => Ok(Adopted::Ended(Exit::Lost)),
            Ok(a) => {
                self.watch(&task.attempt, submission, record.as_ref());
                match a.driver_state.as_deref().and_then(|s| exit_of(s, false)) {
                    Some(exit) => {
                        // Its logs first, then it is no longer watched.
                        let entry = lock(&self.inner.watched).remove(task.attempt.as_str());
                        let mut exit = exit;
                        if let Some(mut entry) = entry {
                            entry.worker_ui = worker_ui(&self.inner, a.worker_id.as_deref()).await;
                            copy_logs(&self.inner, &mut entry).await;
                            exit = failed_exit(&entry, exit, a.driver_state.as_deref(), a.message.as_deref());
                        }
                        Ok(Adopted::Ended(exit))
                    }
                    None => Ok(Adopted::Running),
                }
            }
            // The master is away: the driver may run. Watched; the poller reports its end.
            Err(e) => {
                *lock(&self.inner.last_error) = Some(e.to_string());
                self.watch(&task.attempt, submission, record.as_ref());
                Ok(Adopted::Running)
            }
        }
    }

    async fn recover_driver(&self, attempt: &AttemptId) -> Result<Recovered, BackendError> {
        let dir = folder(&self.inner.config.state_dir, attempt);
        let Some(mut record) = read_record(&dir) else { return Ok(Recovered::NotFound) };
        let submission = match record.submission.clone() {
            Some(id) => id,
            None => match self.find_unclaimed(&record, Duration::from_secs(120)).await {
                Some(id) => {
                    record.submission = Some(id.clone());
                    write_record(&dir, &record).map_err(|e| BackendError::Io {
                        attempt: attempt.to_string(),
                        action: "write the submission record",
                        path: dir.clone(),
                        source: e,
                    })?;
                    id
                }
                None => return Ok(Recovered::NotFound),
            },
        };
        let launched = self.launched(attempt, &submission, dir);
        Ok(match self.adopt_driver(&launched).await? {
            Adopted::Running => Recovered::Running(launched),
            Adopted::Ended(exit) => Recovered::Ended(exit),
        })
    }

    async fn kill_driver(&self, task: &Launched) -> Result<(), BackendError> {
        if let Adopted::Ended(_) = self.adopt_driver(task).await? {
            return Ok(());
        }
        let submission = {
            let mut watched = lock(&self.inner.watched);
            let Some(e) = watched.get_mut(task.attempt.as_str()) else { return Ok(()) };
            if e.kill.is_some() {
                return Ok(());
            }
            e.kill = Some(false);
            e.submission.clone()
        };
        // Not taken now: the poller asks again every interval.
        if let Ok(a) = self.inner.rest.kill(&submission).await {
            if let Some(e) = lock(&self.inner.watched).get_mut(task.attempt.as_str()) {
                e.kill = Some(a.success || e.kill == Some(true));
            }
        }
        Ok(())
    }
}

/// A worker as weir counts a node.
fn backend_node(w: &crate::rest::WorkerInfo) -> BackendNode {
    BackendNode {
        name: w.id.clone(),
        resources: weir_model::Resources { cpu: w.cores.saturating_mul(1000), memory: w.memory, gpu: 0 },
        usable: w.state == "ALIVE",
        state: w.state.to_ascii_lowercase(),
    }
}

/// The web UI of the worker that runs a driver, from the master's list of workers.
async fn worker_ui(inner: &Inner, worker: Option<&str>) -> Option<String> {
    let worker = worker?;
    let state = inner.rest.master_state().await.ok()?;
    state.workers.into_iter().find(|w| w.id == worker).map(|w| w.webuiaddress).filter(|u| !u.is_empty())
}

/// Appends what is new in the driver's `stdout` and `stderr` on its worker to the attempt's log
/// files. Best effort: a worker that does not answer leaves the files as they are.
async fn copy_logs(inner: &Inner, entry: &mut Entry) {
    let (Some(ui), Some(logs)) = (entry.worker_ui.clone(), entry.logs.clone()) else { return };
    for (i, stream) in ["stdout", "stderr"].into_iter().enumerate() {
        loop {
            let before = entry.offsets[i];
            match inner.rest.driver_log(&ui, &entry.submission, stream, before).await {
                Ok((end, length, text)) => {
                    if !text.is_empty() && end > before {
                        let appended = logs[i]
                            .parent()
                            .map(std::fs::create_dir_all)
                            .unwrap_or(Ok(()))
                            .and_then(|()| {
                                std::fs::OpenOptions::new().create(true).append(true).open(&logs[i])
                            })
                            .and_then(|mut f| f.write_all(text.as_bytes()));
                        if let Err(e) = appended {
                            *lock(&inner.last_error) = Some(format!("{}: {e}", logs[i].display()));
                            break;
                        }
                    }
                    entry.offsets[i] = end.max(before);
                    if end <= before || end >= length {
                        break;
                    }
                }
                Err(e) => {
                    *lock(&inner.last_error) = Some(e.to_string());
                    break;
                }
            }
        }
    }
}

/// The poller: every interval, each watched driver's state and new log bytes; a pending kill is
/// asked again; an end is reported once.
async fn poll(inner: std::sync::Weak<Inner>) {
    loop {
        let Some(inner) = inner.upgrade() else { return };
        let interval = inner.config.poll_interval;
        let ids: Vec<String> = lock(&inner.watched).keys().cloned().collect();
        let mut failed = None;
        for id in ids {
            let Some((submission, kill, has_ui)) =
                lock(&inner.watched).get(&id).map(|e| (e.submission.clone(), e.kill, e.worker_ui.is_some()))
            else {
                continue;
            };
            if kill == Some(false) {
                if let Ok(a) = inner.rest.kill(&submission).await {
                    if let Some(e) = lock(&inner.watched).get_mut(&id) {
                        e.kill = Some(a.success);
                    }
                }
            }
            let answer = match inner.rest.status(&submission).await {
                Ok(a) => a,
                Err(e) => {
                    failed = Some(e.to_string());
                    continue;
                }
            };
            let ui = if has_ui { None } else { worker_ui(&inner, answer.worker_id.as_deref()).await };
            let Some(mut entry) = lock(&inner.watched).remove(&id) else { continue };
            if ui.is_some() {
                entry.worker_ui = ui;
            }
            let end = if !answer.success {
                // The master does not know it (restarted without recovery, or it forgot it):
                // outcome unknown, after three answers in a row.
                entry.unknown += 1;
                (entry.unknown >= 3).then_some(Exit::Lost)
            } else {
                entry.unknown = 0;
                answer.driver_state.as_deref().and_then(|s| exit_of(s, entry.kill.is_some()))
            };
            copy_logs(&inner, &mut entry).await;
            match end {
                Some(exit) => {
                    let exit =
                        failed_exit(&entry, exit, answer.driver_state.as_deref(), answer.message.as_deref());
                    let _ =
                        inner.exits.send(TaskExit { attempt: entry.attempt, exit, ended_at_ms: now_ms() });
                }
                None => {
                    lock(&inner.watched).insert(id, entry);
                }
            }
        }
        *lock(&inner.last_error) = failed;
        drop(inner);
        tokio::time::sleep(interval).await;
    }
}

impl Backend for SparkStandaloneBackend {
    fn kind(&self) -> &str {
        STANDALONE_KIND
    }

    fn start<'a>(&'a self, launch: &'a TaskLaunch) -> BoxFuture<'a, Result<Launched, BackendError>> {
        Box::pin(self.start_driver(launch))
    }

    fn kill<'a>(&'a self, task: &'a Launched, _grace: Duration) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(self.kill_driver(task))
    }

    fn adopt<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<Adopted, BackendError>> {
        Box::pin(self.adopt_driver(task))
    }

    fn recover<'a>(&'a self, attempt: &'a AttemptId) -> BoxFuture<'a, Result<Recovered, BackendError>> {
        Box::pin(self.recover_driver(attempt))
    }

    fn forget<'a>(&'a self, task: &'a Launched) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            lock(&self.inner.watched).remove(task.attempt.as_str());
            match std::fs::remove_dir_all(&task.dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BackendError::Io {
                    attempt: task.attempt.to_string(),
                    action: "remove the attempt folder",
                    path: task.dir.clone(),
                    source: e,
                }),
                _ => Ok(()),
            }
        })
    }

    /// The master's workers (its web UI's `/json/`, `JsonProtocol.writeWorkerInfo`), for
    /// `nodes: from_backend`: named by worker id (a worker started again registers under a new
    /// id, and the old one stays listed as `DEAD` for a while), each with its cores and memory
    /// (MiB, as Spark counts it), usable while `ALIVE`.
    fn nodes(&self) -> BoxFuture<'_, Option<Result<Vec<BackendNode>, String>>> {
        Box::pin(async move {
            Some(
                self.inner
                    .rest
                    .master_state()
                    .await
                    .map(|state| state.workers.iter().map(backend_node).collect())
                    .map_err(|e| format!("the master's web UI: {e}")),
            )
        })
    }

    /// Healthy while the gateway answers; the version is the master's Spark, the nodes its
    /// alive workers (from its web UI's `/json/`, when that answers).
    fn health(&self) -> BoxFuture<'_, BackendHealth> {
        Box::pin(async move {
            let rest = &self.inner.rest;
            match rest.status("weir-probe").await {
                Ok(a) => {
                    let (nodes, ui_error) = match rest.master_state().await {
                        Ok(s) => (Some(s.workers.iter().filter(|w| w.state == "ALIVE").count() as u64), None),
                        Err(e) => (None, Some(format!("the master's web UI: {e}"))),
                    };
                    BackendHealth {
                        healthy: true,
                        version: format!("Spark {} (standalone)", a.server_spark_version),
                        nodes,
                        error: lock(&self.inner.last_error).clone().or(ui_error),
                    }
                }
                Err(e) => BackendHealth {
                    healthy: false,
                    version: format!("Spark {} (standalone)", self.inner.version),
                    nodes: None,
                    error: Some(format!("the master's REST gateway: {e}")),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ui_defaults_to_the_gateways_host_on_port_8080() {
        let c = SparkStandaloneConfig::new("http://10.1.2.3:6066/", "/s");
        assert_eq!(c.ui_url(), "http://10.1.2.3:8080");
        let c = SparkStandaloneConfig { master_ui_url: Some("http://m:18080".into()), ..c };
        assert_eq!(c.ui_url(), "http://m:18080");
    }

    #[test]
    fn driver_states_map_to_exits() {
        assert_eq!(exit_of("FINISHED", false), Some(Exit::Code(0)));
        assert_eq!(exit_of("FINISHED", true), Some(Exit::Code(0)));
        assert_eq!(exit_of("FAILED", false), Some(Exit::Code(1)));
        assert_eq!(exit_of("KILLED", false), Some(Exit::Signal(15)));
        assert_eq!(exit_of("KILLED", true), Some(Exit::Killed));
        for running in ["SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"] {
            assert_eq!(exit_of(running, false), None, "{running}");
        }
    }

    #[test]
    fn executors_are_a_gang_of_the_executors_cores_and_memory() {
        let app = SparkSpec {
            main: "a.py".into(),
            jar: None,
            args: vec![],
            conf: BTreeMap::from([("spark.executor.memory".into(), "2g".into())]),
            executors: Some(3),
        };
        let defaults = BTreeMap::from([
            ("spark.executor.cores".into(), "2".into()),
            ("spark.executor.memory".into(), "512m".into()),
        ]);
        assert_eq!(
            executor_gang(&app, &defaults),
            Some((3, weir_model::Resources { cpu: 2000, memory: 2048, gpu: 0 })),
            "the stage's conf over the backend's"
        );
        assert_eq!(
            executor_gang(&app, &BTreeMap::new()),
            Some((3, weir_model::Resources { cpu: 1000, memory: 2048, gpu: 0 }))
        );
        assert_eq!(executor_gang(&SparkSpec { executors: None, ..app }, &defaults), None);
    }

    #[test]
    fn workers_are_nodes_usable_while_alive() {
        let state: crate::rest::MasterState = serde_json::from_str(
            r#"{"workers":[{"id":"worker-1-127.0.0.1-7078","host":"127.0.0.1","cores":2,"memory":4096,"state":"ALIVE"},
                           {"id":"worker-0-127.0.0.1-7078","host":"127.0.0.1","cores":2,"memory":4096,"state":"DEAD"}]}"#,
        )
        .unwrap();
        let nodes: Vec<BackendNode> = state.workers.iter().map(backend_node).collect();
        assert_eq!(nodes[0].resources, weir_model::Resources { cpu: 2000, memory: 4096, gpu: 0 });
        assert_eq!((nodes[0].usable, nodes[1].usable, nodes[1].state.as_str()), (true, false, "dead"));
    }

    #[test]
    fn a_pyspark_drivers_exit_code_is_read_from_its_stderr() {
        // As a Spark 4.3 worker wrote a failed PySpark driver's stderr (`sys.exit(3)`).
        let log = "Exception in thread \"main\" java.lang.reflect.InvocationTargetException\n\
                   \tat java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(Unknown Source)\n\
                   Caused by: org.apache.spark.SparkUserAppException: User application exited with 3\n\
                   \t... 6 more\n";
        assert_eq!(user_exit_code(log), Some(3));
        assert_eq!(user_exit_code("Exception in thread \"main\" java.lang.IllegalStateException"), None);
        assert_eq!(user_exit_code(""), None);
    }
}
