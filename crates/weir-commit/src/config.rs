//! Where outputs go and how to reach the store: the store's settings, the credentials (from a
//! file or the environment), the committer's tunables, and the environment a task attempt gets.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{CommitError, Result};

/// Which object store holds the outputs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoreConfig {
    /// A directory on the local filesystem (the embedded default): objects are files under
    /// `root`, multipart uploads are staged under `root/.weir-uploads` and appear by rename.
    Local { root: PathBuf },
    /// An S3-compatible store.
    S3(S3Config),
}

/// An S3-compatible store: endpoint, region, bucket and credentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Config {
    /// `http(s)://host:port` for S3-compatible servers; none means AWS's own endpoint for the
    /// region. A custom endpoint is addressed path-style (`endpoint/bucket/key`).
    pub endpoint: Option<String>,
    pub region: String,
    pub bucket: String,
    pub credentials: Credentials,
    /// One request's limit; a request that takes longer is a timeout, retried like a 503.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// Retries of 503 SlowDown, other 5xx, 429 and timeouts (by the store client, with
    /// exponential backoff and jitter), bounded in count and in time.
    #[serde(default)]
    pub retry: RetrySettings,
}

fn default_request_timeout_ms() -> u64 {
    30_000
}

/// Bounds of the store client's retries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetrySettings {
    /// Retries of one request at most (0: none).
    pub max_retries: usize,
    /// The first backoff; later ones are drawn at random between this and `base` times the
    /// previous one (decorrelated jitter), never above `max_backoff_ms`.
    pub init_backoff_ms: u64,
    pub max_backoff_ms: u64,
    /// No retry starts after this long since the request's first try.
    pub retry_timeout_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_retries: 8,
            init_backoff_ms: 100,
            max_backoff_ms: 10_000,
            retry_timeout_ms: 120_000,
        }
    }
}

/// Access key, secret and optional session token. `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("session_token", &self.session_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Credentials {
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and optional `AWS_SESSION_TOKEN` from
    /// `env` (the process environment in production, a map in tests).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let need = |name: &str| {
            env(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                CommitError::config(name, name, "", "is not set (the S3 store needs credentials)")
            })
        };
        Ok(Credentials {
            access_key_id: need("AWS_ACCESS_KEY_ID")?,
            secret_access_key: need("AWS_SECRET_ACCESS_KEY")?,
            session_token: env("AWS_SESSION_TOKEN").filter(|v| !v.is_empty()),
        })
    }

    /// A credentials file in the AWS shared-credentials format: `key = value` lines
    /// (`aws_access_key_id`, `aws_secret_access_key`, optional `aws_session_token`), `#`
    /// comments; section headers (`[default]`) are allowed and the first section is used.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| CommitError::Io { path: path.to_path_buf(), source })?;
        Self::parse_file(path, &text)
    }

    fn parse_file(path: &Path, text: &str) -> Result<Self> {
        let origin = path.display().to_string();
        let (mut id, mut secret, mut token) = (None, None, None);
        let mut sections = 0;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') {
                sections += 1;
                if sections > 1 {
                    break;
                }
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(CommitError::config(
                    &origin,
                    format!("line {}", n + 1),
                    line,
                    "expected `key = value`",
                ));
            };
            let value = value.trim().to_string();
            match key.trim() {
                "aws_access_key_id" => id = Some(value),
                "aws_secret_access_key" => secret = Some(value),
                "aws_session_token" => token = Some(value),
                other => {
                    return Err(CommitError::config(
                        &origin,
                        format!("line {}", n + 1),
                        other,
                        "unknown key (expected aws_access_key_id, aws_secret_access_key, \
                         aws_session_token)",
                    ));
                }
            }
        }
        let missing = |field: &str| CommitError::config(&origin, field, "", "is missing");
        Ok(Credentials {
            access_key_id: id.ok_or_else(|| missing("aws_access_key_id"))?,
            secret_access_key: secret.ok_or_else(|| missing("aws_secret_access_key"))?,
            session_token: token,
        })
    }
}

/// The committer's tunables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitConfig {
    /// Bytes per multipart part. S3 needs at least 5 MiB for every part but the last.
    pub part_size: usize,
    /// Parts of one file in flight at once during a task commit (the reference's tunable
    /// part-upload parallelism: raise for throughput, lower to stay under the store's rate
    /// limit).
    pub parallel_parts: usize,
    /// Uploads completed (or aborted) at once during a job commit.
    pub parallel_files: usize,
}

/// The smallest part S3 accepts for every part but the last.
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

impl Default for CommitConfig {
    fn default() -> Self {
        CommitConfig { part_size: 8 * 1024 * 1024, parallel_parts: 4, parallel_files: 8 }
    }
}

impl CommitConfig {
    /// Checks the values; `origin` names where they came from in the error.
    pub fn validate(&self, origin: &str) -> Result<()> {
        if self.part_size < MIN_PART_SIZE {
            return Err(CommitError::config(
                origin,
                "part_size",
                self.part_size.to_string(),
                format!("must be at least {MIN_PART_SIZE} bytes (S3's minimum part size)"),
            ));
        }
        if self.parallel_parts == 0 || self.parallel_files == 0 {
            return Err(CommitError::config(
                origin,
                if self.parallel_parts == 0 { "parallel_parts" } else { "parallel_files" },
                "0",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// The environment weir gives a task attempt that writes through the committer, and that
/// `weir commit-helper` (or any program following docs/commit.md) reads back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskEnv {
    pub store: StoreConfig,
    /// The output's key prefix (`table/dt=2026-11-27/`), ending with `/`.
    pub output: String,
    /// This attempt's staging prefix, where the task commit records its uploads.
    pub staging: String,
    pub config: CommitConfig,
}

/// The variables of [`TaskEnv`].
pub mod vars {
    pub const STORE: &str = "WEIR_COMMIT_STORE";
    pub const S3_ENDPOINT: &str = "WEIR_COMMIT_S3_ENDPOINT";
    pub const S3_REGION: &str = "WEIR_COMMIT_S3_REGION";
    pub const CREDENTIALS_FILE: &str = "WEIR_COMMIT_CREDENTIALS_FILE";
    pub const OUTPUT: &str = "WEIR_COMMIT_OUTPUT";
    pub const STAGING: &str = "WEIR_COMMIT_STAGING";
    pub const PART_SIZE: &str = "WEIR_COMMIT_PART_SIZE";
    pub const PARALLEL_PARTS: &str = "WEIR_COMMIT_PARALLEL_PARTS";
    /// How many outputs the stage declares (set when it declares more than one).
    pub const OUTPUTS: &str = "WEIR_COMMIT_OUTPUTS";

    /// The name of `var` for the stage's output number `index` (from 0, in the order the stage
    /// declares them): output 0 uses the plain names; output K ≥ 1 has its own `STORE`,
    /// `OUTPUT` and `STAGING`, suffixed `_K` (`WEIR_COMMIT_OUTPUT_1`). The S3 endpoint, region,
    /// credentials and tunables are the same for every output.
    pub fn indexed(var: &str, index: usize) -> String {
        match index {
            0 => var.to_string(),
            k if [STORE, OUTPUT, STAGING].contains(&var) => format!("{var}_{k}"),
            _ => var.to_string(),
        }
    }
}

impl TaskEnv {
    /// Reads the variables of the stage's output number `index` (0: the first, or only, one;
    /// see [`vars::indexed`]) through `env`.
    pub fn from_env_output(env: &dyn Fn(&str) -> Option<String>, index: usize) -> Result<Self> {
        if index > 0 {
            let count = env(vars::OUTPUTS).and_then(|n| n.parse::<usize>().ok()).unwrap_or(1);
            if index >= count {
                return Err(CommitError::config(
                    vars::OUTPUTS,
                    vars::OUTPUTS,
                    count.to_string(),
                    format!("the stage declares {count} output(s): there is no output {index} (outputs count from 0)"),
                ));
            }
        }
        Self::from_env_at(env, index)
    }

    /// The variables of this environment as output number `index` of its stage (the names of
    /// [`vars::indexed`]).
    pub fn to_env_output(&self, index: usize) -> Vec<(String, String)> {
        self.to_env().into_iter().map(|(k, v)| (vars::indexed(&k, index), v)).collect()
    }

    /// Reads the variables through `env` (`std::env::var(..).ok()` in a task).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        Self::from_env_at(env, 0)
    }

    /// [`TaskEnv::from_env`] for output number `index`: its own variables are named as
    /// [`vars::indexed`] says, and so are they in errors.
    fn from_env_at(env: &dyn Fn(&str) -> Option<String>, index: usize) -> Result<Self> {
        let (store_var, output_var, staging_var) = (
            vars::indexed(vars::STORE, index),
            vars::indexed(vars::OUTPUT, index),
            vars::indexed(vars::STAGING, index),
        );
        let need = |name: &str| {
            env(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                CommitError::config(
                    name,
                    name,
                    "",
                    "is not set: weir sets it for tasks of stages that declare outputs",
                )
            })
        };
        let store_url = need(&store_var)?;
        let store = if let Some(path) = store_url.strip_prefix("file://") {
            StoreConfig::Local { root: PathBuf::from(path) }
        } else if let Some(bucket) = store_url.strip_prefix("s3://") {
            let bucket = bucket.trim_end_matches('/');
            if bucket.is_empty() || bucket.contains('/') {
                return Err(CommitError::config(
                    &store_var,
                    &store_var,
                    &store_url,
                    format!("expected s3://BUCKET (the output prefix goes in {output_var})"),
                ));
            }
            let credentials = match env(vars::CREDENTIALS_FILE).filter(|v| !v.is_empty()) {
                Some(file) => Credentials::from_file(Path::new(&file))?,
                None => Credentials::from_env(env)?,
            };
            StoreConfig::S3(S3Config {
                endpoint: env(vars::S3_ENDPOINT).filter(|v| !v.is_empty()),
                region: env(vars::S3_REGION)
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| "us-east-1".to_string()),
                bucket: bucket.to_string(),
                credentials,
                request_timeout_ms: default_request_timeout_ms(),
                retry: RetrySettings::default(),
            })
        } else {
            return Err(CommitError::config(
                &store_var,
                &store_var,
                &store_url,
                "expected file:///DIRECTORY or s3://BUCKET",
            ));
        };
        if let StoreConfig::Local { root } = &store {
            if !root.is_absolute() {
                return Err(CommitError::config(
                    &store_var,
                    &store_var,
                    &store_url,
                    "a file:// store needs an absolute path (file:///srv/weir/outputs)",
                ));
            }
        }
        let output = need(&output_var)?;
        let staging = need(&staging_var)?;
        for (name, value) in [(output_var.as_str(), &output), (staging_var.as_str(), &staging)] {
            crate::keys::check_prefix(value)
                .map_err(|reason| CommitError::config(name, name, value.as_str(), reason))?;
        }
        let mut config = CommitConfig::default();
        let number = |name: &str, default: usize| -> Result<usize> {
            match env(name).filter(|v| !v.is_empty()) {
                None => Ok(default),
                Some(v) => {
                    v.parse().map_err(|_| CommitError::config(name, name, &v, "expected a whole number"))
                }
            }
        };
        config.part_size = number(vars::PART_SIZE, config.part_size)?;
        config.parallel_parts = number(vars::PARALLEL_PARTS, config.parallel_parts)?;
        config.validate("the task's WEIR_COMMIT_* variables")?;
        Ok(TaskEnv { store, output, staging, config })
    }

    /// The variables to give the task (the inverse of [`TaskEnv::from_env`]). Credentials go
    /// as `AWS_*` variables; a server that keeps them in a file may pass
    /// `WEIR_COMMIT_CREDENTIALS_FILE` instead.
    pub fn to_env(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut set = |k: &str, v: String| out.push((k.to_string(), v));
        match &self.store {
            StoreConfig::Local { root } => set(vars::STORE, format!("file://{}", root.display())),
            StoreConfig::S3(s3) => {
                set(vars::STORE, format!("s3://{}", s3.bucket));
                if let Some(endpoint) = &s3.endpoint {
                    set(vars::S3_ENDPOINT, endpoint.clone());
                }
                set(vars::S3_REGION, s3.region.clone());
                set("AWS_ACCESS_KEY_ID", s3.credentials.access_key_id.clone());
                set("AWS_SECRET_ACCESS_KEY", s3.credentials.secret_access_key.clone());
                if let Some(token) = &s3.credentials.session_token {
                    set("AWS_SESSION_TOKEN", token.clone());
                }
            }
        }
        set(vars::OUTPUT, self.output.clone());
        set(vars::STAGING, self.staging.clone());
        set(vars::PART_SIZE, self.config.part_size.to_string());
        set(vars::PARALLEL_PARTS, self.config.parallel_parts.to_string());
        out
    }
}

pub(crate) fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn credentials_file_reads_the_first_section_and_names_bad_lines() {
        let path = Path::new("creds");
        let c = Credentials::parse_file(
            path,
            "# test\n[default]\naws_access_key_id = AK\naws_secret_access_key=SK\n[other]\naws_access_key_id = X\n",
        )
        .unwrap();
        assert_eq!((c.access_key_id.as_str(), c.secret_access_key.as_str()), ("AK", "SK"));
        assert!(!format!("{c:?}").contains("SK"), "Debug must not print the secret");
        let err = Credentials::parse_file(path, "aws_access_key_id = AK\nregion = x\n").unwrap_err();
        assert_eq!(err.to_string().split(':').next(), Some("creds"));
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = Credentials::parse_file(path, "aws_access_key_id = AK\n").unwrap_err();
        assert!(err.to_string().contains("aws_secret_access_key"), "{err}");
    }

    #[test]
    fn task_env_round_trips_and_rejects_bad_values() {
        let env = TaskEnv {
            store: StoreConfig::S3(S3Config {
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: "eu-west-1".into(),
                bucket: "out".into(),
                credentials: Credentials {
                    access_key_id: "a".into(),
                    secret_access_key: "s".into(),
                    session_token: None,
                },
                request_timeout_ms: default_request_timeout_ms(),
                retry: RetrySettings::default(),
            }),
            output: "table/dt=2026-11-27/".into(),
            staging: "_weir/staging/r1/a1/".into(),
            config: CommitConfig::default(),
        };
        let vars: HashMap<String, String> = env.to_env().into_iter().collect();
        let back = TaskEnv::from_env(&|k| vars.get(k).cloned()).unwrap();
        assert_eq!(back, env);

        let mut bad = vars.clone();
        bad.insert(vars::PART_SIZE.into(), "1024".into());
        let err = TaskEnv::from_env(&|k| bad.get(k).cloned()).unwrap_err();
        assert!(err.to_string().contains("part_size = \"1024\""), "{err}");
        let mut bad = vars.clone();
        bad.insert(vars::OUTPUT.into(), "table/../x/".into());
        let err = TaskEnv::from_env(&|k| bad.get(k).cloned()).unwrap_err();
        assert!(err.to_string().starts_with("WEIR_COMMIT_OUTPUT"), "{err}");
        let mut bad = vars;
        bad.insert(vars::STORE.into(), "file://relative".into());
        let err = TaskEnv::from_env(&|k| bad.get(k).cloned()).unwrap_err();
        assert!(err.to_string().contains("absolute"), "{err}");
    }

    /// A stage with two outputs: each task sees both, output 0 under the plain names and output
    /// 1 under `_1` names, in one environment; asking for an output the stage lacks is refused.
    #[test]
    fn several_outputs_share_one_environment_by_index() {
        let first = TaskEnv {
            store: StoreConfig::Local { root: PathBuf::from("/srv/out/lake") },
            output: "sales/dt=1/".into(),
            staging: "_weir/staging/run-1/0.0.0.1/".into(),
            config: CommitConfig::default(),
        };
        let second = TaskEnv {
            store: StoreConfig::Local { root: PathBuf::from("/srv/out/audit") },
            output: "counts/dt=1/".into(),
            staging: "_weir/staging/run-1/0.0.0.1.o1/".into(),
            config: CommitConfig::default(),
        };
        let mut all: HashMap<String, String> = first.to_env_output(0).into_iter().collect();
        all.extend(second.to_env_output(1));
        all.insert(vars::OUTPUTS.into(), "2".into());
        assert_eq!(all.get("WEIR_COMMIT_OUTPUT_1").map(String::as_str), Some("counts/dt=1/"));
        assert_eq!(TaskEnv::from_env_output(&|k| all.get(k).cloned(), 0).unwrap(), first);
        assert_eq!(TaskEnv::from_env_output(&|k| all.get(k).cloned(), 1).unwrap(), second);
        let err = TaskEnv::from_env_output(&|k| all.get(k).cloned(), 2).unwrap_err();
        assert!(err.to_string().contains("declares 2 output(s): there is no output 2"), "{err}");
        // A bad value of output 1's own variable is named as such.
        all.insert("WEIR_COMMIT_OUTPUT_1".into(), "counts/../x/".into());
        let err = TaskEnv::from_env_output(&|k| all.get(k).cloned(), 1).unwrap_err();
        assert!(err.to_string().starts_with("WEIR_COMMIT_OUTPUT_1"), "{err}");
    }
}
