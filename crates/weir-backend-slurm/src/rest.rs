//! slurmrestd over HTTP: which API version it serves, requests with a fresh token, Slurm's
//! `errors` lists read as failures, and the few job and node fields weir needs, read tolerantly
//! so that newer API versions' shapes (state lists, exit codes as objects) parse too.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::jwt::Tokens;
use crate::{SlurmConfig, SlurmError};

/// API versions this weir speaks, newest first. v0.0.38 is Slurm 22.05's (the version Debian
/// ships); v0.0.40 to v0.0.45 share one job description shape (`job_desc_msg`: environment as a
/// list of `K=V`, `time_limit` and `memory_per_node` as `{set, infinite, number}`,
/// `required_nodes`, `tres_per_node`), per the OpenAPI documents those slurmrestd releases
/// serve. v0.0.39 (Slurm 23.02 only) is not spoken.
pub const SUPPORTED: &[&str] = &["v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38"];

/// The version a client speaks before [`Rest::negotiate`] settles it.
const DEFAULT_VERSION: &str = "v0.0.38";

/// Whether `version` takes the v0.0.40+ job description (else v0.0.38's).
pub(crate) fn is_data_parser(version: &str) -> bool {
    version != "v0.0.38"
}

/// Slurm's "Invalid job id specified" (`ESLURM_INVALID_JOB_ID`): the job is unknown, or was
/// forgotten after `MinJobAge`. slurmrestd answers it with HTTP 500.
const INVALID_JOB_ID: i64 = 2017;
/// Slurm's "Job/step already completing or completed" (`ESLURM_ALREADY_DONE`).
const ALREADY_DONE: i64 = 2021;
/// Slurm's "Required node not available (down, drained or reserved)" (`ESLURM_NODE_NOT_AVAIL`
/// in slurm/slurm_errno.h): slurmctld's `select_nodes` (src/slurmctld/node_scheduler.c) answers
/// it when a job's required nodes are outside its available-node bitmap (down, drained, not
/// responding); `job_allocate` keeps such a job pending (`WAIT_NODE_NOT_AVAIL`) and the
/// submission answers with the job id and this error.
const NODE_NOT_AVAIL: i64 = 2068;
/// Slurm's "Invalid node name specified" (`ESLURM_INVALID_NODE_NAME`): a required node that
/// Slurm no longer has.
const INVALID_NODE_NAME: i64 = 2018;

/// How one request failed.
#[derive(Debug)]
pub(crate) enum RestError {
    /// No answer (connection refused, timeout, not JSON from a proxy…): retrying may help.
    Unreachable(String),
    /// The job id is unknown to Slurm.
    UnknownJob,
    /// The job already ended.
    AlreadyDone,
    /// Slurm answered with errors.
    Refused(String),
    /// Slurm answered with errors and still gave a job id (a submission half done): the caller
    /// cancels that job.
    RefusedWithJob(String, u64),
    /// A submission's required node takes no work now, or is unknown to Slurm (Slurm's words,
    /// and the id of the job Slurm kept pending, which the caller cancels).
    NodeNotAvailable(String, Option<u64>),
    /// Credentials could not be read.
    Credentials(SlurmError),
}

impl RestError {
    pub fn message(&self) -> String {
        match self {
            RestError::Unreachable(m) | RestError::Refused(m) => m.clone(),
            RestError::RefusedWithJob(m, id) | RestError::NodeNotAvailable(m, Some(id)) => {
                format!("{m} (job {id} was cancelled)")
            }
            RestError::NodeNotAvailable(m, None) => m.clone(),
            RestError::UnknownJob => "unknown job id".into(),
            RestError::AlreadyDone => "the job already ended".into(),
            RestError::Credentials(e) => e.to_string(),
        }
    }
}

pub(crate) struct Rest {
    http: reqwest::Client,
    root: String,
    /// `ROOT/slurm/VERSION`.
    base: String,
    pub version: String,
    user: String,
    tokens: Mutex<Tokens>,
}

pub(crate) fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl Rest {
    /// A client for `config.url`; the version is settled by [`Rest::negotiate`].
    pub fn new(config: &SlurmConfig) -> Result<Rest, SlurmError> {
        let root = config.url.trim_end_matches('/').to_string();
        if !root.starts_with("http://") {
            return Err(SlurmError::Config {
                field: "url",
                message: format!("`{root}`: only http:// URLs are supported (put a TLS proxy in front)"),
            });
        }
        // reqwest is built without a default crypto provider (the default pulls a C build):
        // install ring unless the process already has one (weir serve installs it at start).
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| SlurmError::Unreachable { url: root.clone(), message: e.to_string() })?;
        Ok(Rest {
            http,
            base: format!("{root}/slurm/{DEFAULT_VERSION}"),
            root,
            version: DEFAULT_VERSION.to_string(),
            user: config.user.clone(),
            tokens: Mutex::new(Tokens::new(config.auth.clone(), config.user.clone())),
        })
    }

    /// Reads which versions slurmrestd serves (`/openapi/v3`, else `/openapi`) and picks the
    /// newest this weir speaks.
    pub async fn negotiate(&mut self) -> Result<String, SlurmError> {
        let mut served = Vec::new();
        let mut last = String::new();
        for doc in ["/openapi/v3", "/openapi"] {
            match self.call(Method::GET, &format!("{}{doc}", self.root), None).await {
                Ok(v) => {
                    if let Some(paths) = v.get("paths").and_then(Value::as_object) {
                        for p in paths.keys() {
                            if let Some(ver) =
                                p.strip_prefix("/slurm/").and_then(|r| r.strip_suffix("/job/submit"))
                            {
                                served.push(ver.to_string());
                            }
                        }
                        break;
                    }
                }
                Err(RestError::Credentials(e)) => return Err(e),
                Err(e) => last = e.message(),
            }
        }
        if served.is_empty() {
            return Err(SlurmError::Unreachable {
                url: self.root.clone(),
                message: format!("cannot read slurmrestd's OpenAPI document: {last}"),
            });
        }
        served.sort();
        served.dedup();
        let Some(v) = pick(&served) else {
            return Err(SlurmError::Version { served, supported: SUPPORTED.join(", ") });
        };
        self.version = v.to_string();
        self.base = format!("{}/slurm/{v}", self.root);
        Ok(self.version.clone())
    }

    fn token(&self) -> Result<String, RestError> {
        let mut t = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        t.token(now_s()).map_err(RestError::Credentials)
    }

    fn invalidate(&self) {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).invalidate();
    }

    /// One request to `url`; a refused token is replaced once.
    async fn call(&self, method: Method, url: &str, body: Option<&Value>) -> Result<Value, RestError> {
        let mut retried = false;
        loop {
            let token = self.token()?;
            let mut req = self
                .http
                .request(method.clone(), url)
                .header("X-SLURM-USER-NAME", &self.user)
                .header("X-SLURM-USER-TOKEN", token);
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.map_err(|e| RestError::Unreachable(describe(&e)))?;
            let status = resp.status();
            let text = resp.text().await.map_err(|e| RestError::Unreachable(describe(&e)))?;
            let auth_failed = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                || text.trim() == "Authentication failure";
            if auth_failed {
                if !retried {
                    retried = true;
                    self.invalidate();
                    continue;
                }
                return Err(RestError::Refused(format!(
                    "authentication failed (HTTP {}) with {}",
                    status.as_u16(),
                    self.tokens.lock().unwrap_or_else(|p| p.into_inner()).describe()
                )));
            }
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                let head: String = text.chars().take(200).collect();
                return Err(RestError::Unreachable(format!("HTTP {}, not JSON: {head:?}", status.as_u16())));
            };
            if let Some(e) = failure_of(status, &v) {
                return Err(e);
            }
            return Ok(v);
        }
    }

    pub async fn get(&self, path: &str) -> Result<Value, RestError> {
        self.call(Method::GET, &format!("{}{path}", self.base), None).await
    }

    pub async fn submit(&self, body: &Value) -> Result<Value, RestError> {
        self.call(Method::POST, &format!("{}/job/submit", self.base), Some(body)).await
    }

    /// `signal`: `None` cancels the job (Slurm's own kill sequence), `Some("SIGTERM")` signals it.
    pub async fn cancel(&self, job: u64, signal: Option<&str>) -> Result<(), RestError> {
        let url = match signal {
            Some(s) => format!("{}/job/{job}?signal={s}", self.base),
            None => format!("{}/job/{job}", self.base),
        };
        match self.call(Method::DELETE, &url, None).await {
            Ok(_) | Err(RestError::AlreadyDone) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// How an answer that parsed as JSON failed, if it did: Slurm's `errors` list (a 200 with
/// errors is a failure) or a status that is not a success.
pub(crate) fn failure_of(status: StatusCode, v: &Value) -> Option<RestError> {
    let errors = errors_of(v);
    if errors.iter().any(|(n, _)| *n == INVALID_JOB_ID) {
        return Some(RestError::UnknownJob);
    }
    if errors.iter().any(|(n, _)| *n == ALREADY_DONE) {
        return Some(RestError::AlreadyDone);
    }
    if errors.iter().any(|(n, _)| matches!(*n, NODE_NOT_AVAIL | INVALID_NODE_NAME)) {
        let m: Vec<String> = errors.into_iter().map(|(_, m)| m).collect();
        return Some(RestError::NodeNotAvailable(m.join("; "), job_id_of(v)));
    }
    if !errors.is_empty() || !status.is_success() {
        let mut m: Vec<String> = errors.into_iter().map(|(_, m)| m).collect();
        if m.is_empty() {
            m.push(format!("HTTP {}", status.as_u16()));
        }
        // A submission that was accepted and then reported an error still has an id.
        return Some(match job_id_of(v) {
            Some(id) => RestError::RefusedWithJob(m.join("; "), id),
            None => RestError::Refused(m.join("; ")),
        });
    }
    None
}

/// The newest version both sides speak.
pub(crate) fn pick(served: &[String]) -> Option<&'static str> {
    SUPPORTED.iter().copied().find(|v| served.iter().any(|s| s == v))
}

fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// `job_id` of an answer, if it carries one (a submission that reported errors).
pub(crate) fn job_id_of(v: &Value) -> Option<u64> {
    v.get("job_id").and_then(Value::as_u64).filter(|&id| id > 0)
}

/// Slurm's `errors` list as (error number, readable text).
fn errors_of(v: &Value) -> Vec<(i64, String)> {
    let Some(list) = v.get("errors").and_then(Value::as_array) else { return Vec::new() };
    list.iter()
        .map(|e| {
            let n =
                e.get("error_number").or_else(|| e.get("error_code")).and_then(Value::as_i64).unwrap_or(0);
            let text = ["error", "description"]
                .iter()
                .filter_map(|k| e.get(*k).and_then(Value::as_str))
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            (n, if text.is_empty() { e.to_string() } else { text })
        })
        .collect()
}

/// The fields of one Slurm job weir reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobInfo {
    pub id: u64,
    pub state: String,
    /// The wait status as Slurm keeps it: exit code `<< 8`, signal in the low 7 bits.
    pub exit_code: i64,
    pub comment: String,
}

impl JobInfo {
    pub fn parse(v: &Value) -> Option<JobInfo> {
        let id = v.get("job_id")?.as_u64()?;
        let state = match v.get("job_state")? {
            Value::String(s) => s.clone(),
            // v0.0.40+: a list of flags, the base state first.
            Value::Array(a) => a.first().and_then(Value::as_str).unwrap_or("").to_string(),
            _ => String::new(),
        };
        let exit_code = match v.get("exit_code") {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
            // v0.0.40+: {status, return_code: {number}, signal: {id: {number}}}.
            Some(o @ Value::Object(_)) => {
                let num = |x: Option<&Value>| -> i64 {
                    match x {
                        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
                        Some(Value::Object(m)) => m.get("number").and_then(Value::as_i64).unwrap_or(0),
                        _ => 0,
                    }
                };
                let rc = num(o.get("return_code"));
                let sig = o.get("signal").map(|s| num(s.get("id").or(s.get("signal_id")))).unwrap_or(0);
                (rc << 8) | (sig & 0x7f)
            }
            _ => 0,
        };
        let comment = match v.get("comment") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Object(m)) => m.get("job").and_then(Value::as_str).unwrap_or("").to_string(),
            _ => String::new(),
        };
        Some(JobInfo { id, state, exit_code, comment })
    }

    /// Slurm's states from which a job never runs again (its processes are gone).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.state.as_str(),
            "COMPLETED"
                | "FAILED"
                | "CANCELLED"
                | "TIMEOUT"
                | "NODE_FAIL"
                | "OUT_OF_MEMORY"
                | "BOOT_FAIL"
                | "DEADLINE"
                | "PREEMPTED"
        )
    }
}

/// Every job of a `/jobs` or `/job/{id}` answer.
pub(crate) fn jobs_of(v: &Value) -> Vec<JobInfo> {
    v.get("jobs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(JobInfo::parse).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One job of a v0.0.41+ `/jobs` answer, in the shapes of `job_info` in SchedMD's OpenAPI
    /// documents for v0.0.41 to v0.0.45 (`job_state` a list of flags, `exit_code` a
    /// `process_exit_code_verbose` whose numbers are `{set, infinite, number}`); the local
    /// slurmrestd serves only v0.0.38, whose shapes `crates/weir-backend-slurm/tests` read live.
    #[test]
    fn a_v0_0_4x_job_listing_is_read() {
        let answer = json!({
            "jobs": [
                {"job_id": 41, "job_state": ["COMPLETED"], "comment": "weir-attempt weir:run-1/0/0/0/1",
                 "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "infinite": false, "number": 0},
                               "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}}},
                {"job_id": 42, "job_state": ["FAILED"], "comment": "c",
                 "exit_code": {"status": ["ERROR"], "return_code": {"set": true, "infinite": false, "number": 3},
                               "signal": {"id": {"set": false, "infinite": false, "number": 0}, "name": ""}}},
                {"job_id": 43, "job_state": ["CANCELLED"], "comment": "c",
                 "exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "infinite": false, "number": 0},
                               "signal": {"id": {"set": true, "infinite": false, "number": 9}, "name": "KILL"}}},
                {"job_id": 44, "job_state": ["RUNNING", "COMPLETING"], "comment": "c"}
            ],
            "last_backfill": {"set": true, "infinite": false, "number": 0},
            "errors": [], "warnings": []
        });
        let jobs = jobs_of(&answer);
        let got: Vec<(u64, &str, i64)> = jobs.iter().map(|j| (j.id, j.state.as_str(), j.exit_code)).collect();
        assert_eq!(
            got,
            [(41, "COMPLETED", 0), (42, "FAILED", 3 << 8), (43, "CANCELLED", 9), (44, "RUNNING", 0)]
        );
        assert_eq!(jobs[0].comment, "weir-attempt weir:run-1/0/0/0/1");
        assert!(jobs[0].is_terminal() && !jobs[3].is_terminal());
    }

    /// What Slurm 22.05's slurmrestd answers a submission pinned (`nodelist`) to a node that is
    /// drained, down or not responding — provoked on the real Slurm of the shared engines by
    /// draining the node: HTTP 200, the id of the job slurmctld keeps pending
    /// (`ReqNodeNotAvail`) and `ESLURM_NODE_NOT_AVAIL` in `errors` (v0.0.38 says `error_code`).
    #[test]
    fn a_pinned_node_that_takes_no_work_is_told_apart_from_other_refusals() {
        let refused = json!({"job_id": 25, "step_id": "BATCH", "job_submit_user_msg": "",
            "errors": [{"error_code": 2068, "error": "Required node not available (down, drained or reserved)"}]});
        match failure_of(StatusCode::OK, &refused) {
            Some(RestError::NodeNotAvailable(m, job)) => {
                assert_eq!(job, Some(25));
                assert_eq!(m, "Required node not available (down, drained or reserved)");
            }
            other => panic!("{other:?}"),
        }
        // A node Slurm does not have (`ESLURM_INVALID_NODE_NAME`), without a job.
        let unknown = json!({"errors": [{"error_number": 2018, "error": "Invalid node name specified"}]});
        assert!(matches!(
            failure_of(StatusCode::INTERNAL_SERVER_ERROR, &unknown),
            Some(RestError::NodeNotAvailable(_, None))
        ));
        // Any other refusal stays a refusal; a clean answer is no failure.
        let partition = json!({"job_id": 0, "errors": [{"error_number": 2000, "error": "Invalid partition name specified"}]});
        assert!(matches!(failure_of(StatusCode::OK, &partition), Some(RestError::Refused(_))));
        let fine = json!({"job_id": 7, "errors": []});
        assert!(failure_of(StatusCode::OK, &fine).is_none());
    }

    #[test]
    fn a_v0_0_4x_submit_answer_gives_its_job_id_and_errors() {
        // `openapi_job_submit_response`: job_id at the top, errors a list.
        let ok =
            json!({"job_id": 7, "step_id": "batch", "job_submit_user_msg": "", "errors": [], "warnings": []});
        assert_eq!(job_id_of(&ok), Some(7));
        assert!(errors_of(&ok).is_empty());
        let refused = json!({"job_id": 0, "errors": [{"description": "Invalid partition name specified",
            "error_number": 2000, "error": "Invalid partition name specified", "source": "slurm_submit_batch_job()"}]});
        assert_eq!(job_id_of(&refused), None);
        assert_eq!(errors_of(&refused)[0].0, 2000);
    }
}
