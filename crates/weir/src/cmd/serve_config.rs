//! `weir serve --config server.yaml`: the service's settings and its clusters (each a cluster
//! file and a backend) in one file, checked with errors that name the file and the field path.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use weir_model::{ModelError, Problem};
use weir_server::{BackendSettings, ClusterSource, TlsFiles};

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    version: u32,
    listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    db: Option<String>,
    lease_seconds: Option<u64>,
    kill_grace_seconds: Option<u64>,
    body_limit_bytes: Option<usize>,
    tls: Option<TlsEntry>,
    secure_cookies: Option<bool>,
    header_read_timeout_seconds: Option<u64>,
    body_read_timeout_seconds: Option<u64>,
    idle_timeout_seconds: Option<u64>,
    max_connections: Option<usize>,
    clusters: Vec<ClusterEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsEntry {
    cert: PathBuf,
    key: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterEntry {
    name: String,
    file: PathBuf,
    #[serde(default)]
    backend: BackendEntry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendEntry {
    #[serde(default)]
    kind: BackendKind,
    state_dir: Option<PathBuf>,
    kill_grace_seconds: Option<u64>,
}

/// Backend kinds; `slurm` and `kubernetes` are for later releases.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BackendKind {
    #[default]
    Local,
}

/// The checked file: paths resolved against the file's folder, cluster files read.
#[derive(Debug)]
pub struct ServeConfig {
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub db: Option<String>,
    pub lease: Option<Duration>,
    pub kill_grace: Option<Duration>,
    pub body_limit: Option<usize>,
    pub tls: Option<TlsFiles>,
    pub secure_cookies: Option<bool>,
    pub header_read_timeout: Option<Duration>,
    pub body_read_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub max_connections: Option<usize>,
    pub clusters: Vec<ClusterSource>,
    pub backends: BTreeMap<String, BackendSettings>,
}

/// A cluster name: letters, digits, `-` and `_` (it names a folder and appears in URLs).
pub fn valid_cluster_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Reads and checks `path`; every problem is listed, each with its field path.
pub fn load(path: &Path) -> Result<ServeConfig, ModelError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::Syntax {
        file: file.clone(),
        path: String::new(),
        message: format!("cannot read the file: {e}"),
    })?;
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    parse(&file, &text, &base)
}

/// Checks `text` (the contents of `file`); relative paths are taken from `base`.
pub fn parse(file: &str, text: &str, base: &Path) -> Result<ServeConfig, ModelError> {
    let f: ServerFile = weir_model::parse_yaml(file, text)?;
    let mut problems = Vec::new();
    let mut problem = |path: String, message: String| problems.push(Problem { path, message });
    if f.version != 1 {
        problem(
            "version".into(),
            format!("{} is not a known version (this weir reads version 1)", f.version),
        );
    }
    if f.lease_seconds == Some(0) {
        problem("lease_seconds".into(), "0: a lease must last at least 1 second".into());
    }
    if f.body_limit_bytes == Some(0) {
        problem("body_limit_bytes".into(), "0: no request would fit".into());
    }
    for (field, value) in [
        ("header_read_timeout_seconds", f.header_read_timeout_seconds),
        ("body_read_timeout_seconds", f.body_read_timeout_seconds),
        ("idle_timeout_seconds", f.idle_timeout_seconds),
    ] {
        if value == Some(0) {
            problem(field.into(), "0: a timeout must be at least 1 second".into());
        }
    }
    if f.max_connections == Some(0) {
        problem("max_connections".into(), "0: no client could connect".into());
    }
    if f.clusters.is_empty() {
        problem("clusters".into(), "empty: name at least one cluster (name, file)".into());
    }
    let resolve = |p: &Path| if p.is_absolute() { p.to_path_buf() } else { base.join(p) };
    let mut names = BTreeSet::new();
    let mut state_dirs: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut clusters = Vec::new();
    let mut backends = BTreeMap::new();
    for (i, c) in f.clusters.iter().enumerate() {
        let at = format!("clusters[{i}]");
        if !valid_cluster_name(&c.name) {
            problem(
                format!("{at}.name"),
                format!("`{}`: a cluster name is letters, digits, `-` and `_`", c.name),
            );
        } else if !names.insert(c.name.clone()) {
            problem(format!("{at}.name"), format!("`{}` is named twice", c.name));
        }
        let cluster_file = resolve(&c.file);
        match std::fs::read_to_string(&cluster_file) {
            Ok(yaml) => clusters.push(ClusterSource {
                name: c.name.clone(),
                yaml,
                file: cluster_file.display().to_string(),
            }),
            Err(e) => problem(format!("{at}.file"), format!("cannot read {}: {e}", cluster_file.display())),
        }
        let BackendKind::Local = c.backend.kind;
        let state_dir = c.backend.state_dir.as_deref().map(resolve);
        if let Some(dir) = &state_dir {
            if let Some(other) = state_dirs.insert(dir.clone(), c.name.clone()) {
                problem(
                    format!("{at}.backend.state_dir"),
                    format!("{} is also cluster `{other}`'s: each cluster needs its own", dir.display()),
                );
            }
        }
        let kill_grace = c.backend.kill_grace_seconds.map(Duration::from_secs);
        backends.insert(c.name.clone(), BackendSettings::Local { state_dir, kill_grace });
    }
    if !problems.is_empty() {
        return Err(ModelError::Invalid { file: file.to_string(), problems });
    }
    Ok(ServeConfig {
        listen: f.listen,
        data_dir: f.data_dir.as_deref().map(resolve),
        db: f.db,
        lease: f.lease_seconds.map(Duration::from_secs),
        kill_grace: f.kill_grace_seconds.map(Duration::from_secs),
        body_limit: f.body_limit_bytes,
        tls: f.tls.as_ref().map(|t| TlsFiles { cert: resolve(&t.cert), key: resolve(&t.key) }),
        secure_cookies: f.secure_cookies,
        header_read_timeout: f.header_read_timeout_seconds.map(Duration::from_secs),
        body_read_timeout: f.body_read_timeout_seconds.map(Duration::from_secs),
        idle_timeout: f.idle_timeout_seconds.map(Duration::from_secs),
        max_connections: f.max_connections,
        clusters,
        backends,
    })
}

#[cfg(test)]
#[path = "serve_config_tests.rs"]
mod tests;
