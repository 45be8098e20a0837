//! A client of a Spark standalone master: its REST submission gateway (`:6066`, create, status,
//! kill) and the JSON of its web UI (`:8080/json/`, the workers and drivers), and the log endpoint
//! of a worker's web UI (`/log/`).
//!
//! The protocol, as Spark's source defines it (read in `apache/spark`, core,
//! `org.apache.spark.deploy.rest`): `StandaloneRestServer` serves
//! `/v1/submissions/{create,status/ID,kill/ID}`; `CreateSubmissionRequest` carries `appResource`,
//! `mainClass`, `appArgs`, `sparkProperties` (which must hold `spark.app.name`),
//! `environmentVariables` and `clientSparkVersion`; each answer is a JSON object with `action`,
//! `serverSparkVersion`, `success`, `message` and, for status, `driverState`, `workerId`,
//! `workerHostPort`. The master sets `spark.master` itself (`buildDriverDescription`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What went wrong talking to the master or a worker.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// No connection could be made: nothing was sent.
    #[error("{url} cannot be reached: {message}")]
    NotConnected { url: String, message: String },
    /// The request may have been sent, but no answer came (a timeout, a dropped connection).
    #[error("{url} did not answer: {message}")]
    NoAnswer { url: String, message: String },
    /// An answer that is not what the protocol says.
    #[error("{url} answered HTTP {status}: {body}")]
    Status { url: String, status: u16, body: String },
    #[error("{url} answered something that does not parse: {message}")]
    Decode { url: String, message: String },
}

impl RestError {
    /// The request certainly never reached the master.
    pub fn not_sent(&self) -> bool {
        matches!(self, RestError::NotConnected { .. })
    }
}

/// A `CreateSubmissionRequest`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateRequest {
    pub action: &'static str,
    pub app_resource: String,
    pub main_class: String,
    pub app_args: Vec<String>,
    pub client_spark_version: String,
    pub environment_variables: BTreeMap<String, String>,
    pub spark_properties: BTreeMap<String, String>,
}

/// Any answer of the gateway (the fields of `CreateSubmissionResponse`,
/// `SubmissionStatusResponse`, `KillSubmissionResponse` and `ErrorResponse` together).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Answer {
    pub action: String,
    pub server_spark_version: String,
    pub submission_id: Option<String>,
    pub success: bool,
    pub message: Option<String>,
    /// `SUBMITTED`, `RUNNING`, `FINISHED`, `RELAUNCHING`, `UNKNOWN`, `KILLED`, `FAILED`, `ERROR`
    /// (Spark's `DriverState`).
    pub driver_state: Option<String>,
    pub worker_id: Option<String>,
    pub worker_host_port: Option<String>,
}

/// The master's `/json/` (Spark's `JsonProtocol.writeMasterState`), the parts weir reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MasterState {
    pub status: String,
    pub workers: Vec<WorkerInfo>,
    pub activedrivers: Vec<DriverInfo>,
    pub completeddrivers: Vec<DriverInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WorkerInfo {
    pub id: String,
    pub host: String,
    pub webuiaddress: String,
    pub cores: u64,
    pub memory: u64,
    pub state: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct DriverInfo {
    pub id: String,
    /// Milliseconds since the epoch, written as a string.
    pub starttime: String,
    pub state: String,
    pub mainclass: String,
}

pub struct Rest {
    http: reqwest::Client,
    /// `http://HOST:6066`, no trailing `/`.
    pub rest_url: String,
    /// `http://HOST:8080`, no trailing `/`.
    pub ui_url: String,
}

impl Rest {
    pub fn new(rest_url: &str, ui_url: &str, timeout: Duration) -> Result<Rest, RestError> {
        // reqwest is built without a default crypto provider: install ring unless the process
        // has one (the client speaks plain HTTP, but building it needs a provider).
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| RestError::NotConnected { url: rest_url.to_string(), message: e.to_string() })?;
        Ok(Rest {
            http,
            rest_url: rest_url.trim_end_matches('/').to_string(),
            ui_url: ui_url.trim_end_matches('/').to_string(),
        })
    }

    pub async fn create(&self, request: &CreateRequest) -> Result<Answer, RestError> {
        let url = format!("{}/v1/submissions/create", self.rest_url);
        self.answer(&url, self.http.post(&url).json(request)).await
    }

    pub async fn status(&self, submission: &str) -> Result<Answer, RestError> {
        let url = format!("{}/v1/submissions/status/{submission}", self.rest_url);
        self.answer(&url, self.http.get(&url)).await
    }

    pub async fn kill(&self, submission: &str) -> Result<Answer, RestError> {
        let url = format!("{}/v1/submissions/kill/{submission}", self.rest_url);
        self.answer(&url, self.http.post(&url)).await
    }

    pub async fn master_state(&self) -> Result<MasterState, RestError> {
        let url = format!("{}/json/", self.ui_url);
        let body = self.text(&url, self.http.get(&url)).await?;
        serde_json::from_str(&body).map_err(|e| RestError::Decode { url, message: e.to_string() })
    }

    /// Bytes of a driver's `stdout` or `stderr` on its worker from `offset` (at most 64 KiB),
    /// and the log's length then. The worker's `LogPage.renderLog` answers
    /// `==== Bytes A-B of N of PATH ====\n` and the text of bytes A..B.
    pub async fn driver_log(
        &self,
        worker_ui: &str,
        driver: &str,
        stream: &str,
        offset: u64,
    ) -> Result<(u64, u64, String), RestError> {
        let url = format!(
            "{}/log/?driverId={driver}&logType={stream}&offset={offset}&byteLength=65536",
            worker_ui.trim_end_matches('/')
        );
        let body = self.text(&url, self.http.get(&url)).await?;
        parse_log_page(&body).ok_or_else(|| RestError::Decode {
            url,
            message: format!(
                "no `==== Bytes A-B of N` header in {:?}",
                body.chars().take(120).collect::<String>()
            ),
        })
    }

    async fn text(&self, url: &str, request: reqwest::RequestBuilder) -> Result<String, RestError> {
        let response = request.send().await.map_err(|e| transport(url, e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| transport(url, e))?;
        if !status.is_success() {
            return Err(RestError::Status { url: url.to_string(), status: status.as_u16(), body });
        }
        Ok(body)
    }

    /// The gateway answers 400 and 500 with an `ErrorResponse` body: kept as an [`Answer`] with
    /// `success: false` so its message reaches the user.
    async fn answer(&self, url: &str, request: reqwest::RequestBuilder) -> Result<Answer, RestError> {
        let response = request.send().await.map_err(|e| transport(url, e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| transport(url, e))?;
        match serde_json::from_str::<Answer>(&body) {
            Ok(a) if !a.action.is_empty() => Ok(a),
            _ if !status.is_success() => {
                Err(RestError::Status { url: url.to_string(), status: status.as_u16(), body })
            }
            Ok(_) => {
                Err(RestError::Decode { url: url.to_string(), message: format!("no `action` in {body:?}") })
            }
            Err(e) => Err(RestError::Decode { url: url.to_string(), message: e.to_string() }),
        }
    }
}

fn transport(url: &str, e: reqwest::Error) -> RestError {
    if e.is_connect() {
        RestError::NotConnected { url: url.to_string(), message: e.to_string() }
    } else {
        RestError::NoAnswer { url: url.to_string(), message: e.to_string() }
    }
}

/// `(start, end, length, text)` of a worker's log page, less the length: `(end, length, text)`.
fn parse_log_page(body: &str) -> Option<(u64, u64, String)> {
    let (header, text) = body.split_once('\n')?;
    let rest = header.strip_prefix("==== Bytes ")?;
    let (range, rest) = rest.split_once(" of ")?;
    let (_, end) = range.split_once('-')?;
    let length = rest.split_whitespace().next()?;
    Some((end.parse().ok()?, length.parse().ok()?, text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_log_page_gives_the_end_offset_the_length_and_the_text() {
        // As Spark 4.3's worker served it for a word count's driver (stdout, 132 bytes).
        let page = "==== Bytes 0-12 of 132 of /w/driver-1/stdout ====\nthe\t9\nweir\t5\n";
        assert_eq!(parse_log_page(page), Some((12, 132, "the\t9\nweir\t5\n".to_string())));
        assert_eq!(parse_log_page("<html>"), None);
    }

    #[test]
    fn answers_parse_with_the_fields_spark_writes() {
        let a: Answer = serde_json::from_str(
            r#"{"action":"SubmissionStatusResponse","driverState":"RUNNING","serverSparkVersion":"4.3.0",
                "submissionId":"driver-20261127141723-0000","success":true,"workerHostPort":"127.0.0.1:17078",
                "workerId":"worker-20261127141709-127.0.0.1-17078"}"#,
        )
        .unwrap();
        assert_eq!(a.driver_state.as_deref(), Some("RUNNING"));
        assert_eq!(a.worker_id.as_deref(), Some("worker-20261127141709-127.0.0.1-17078"));
        let create = serde_json::to_value(CreateRequest {
            action: "CreateSubmissionRequest",
            app_resource: "file:/a.py".into(),
            main_class: "org.apache.spark.deploy.PythonRunner".into(),
            app_args: vec![],
            client_spark_version: "4.3.0".into(),
            environment_variables: BTreeMap::new(),
            spark_properties: BTreeMap::new(),
        })
        .unwrap();
        for key in [
            "appResource",
            "mainClass",
            "appArgs",
            "clientSparkVersion",
            "environmentVariables",
            "sparkProperties",
        ] {
            assert!(create.get(key).is_some(), "{key} in {create}");
        }
    }
}
