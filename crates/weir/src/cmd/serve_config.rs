//! `weir serve --config server.yaml`: the service's settings and its clusters (each a cluster
//! file and a backend) in one file, checked with errors that name the file and the field path.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use weir_backend_slurm::{Auth, Placement, SlurmConfig, SlurmQueue};
use weir_backend_spark::{SparkLocalConfig, SparkStandaloneConfig};
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
    object_store: Option<ObjectStoreEntry>,
    /// Routes with several candidates and a policy (docs/serve.md, Load-aware routing).
    #[serde(default)]
    routes: Vec<RouteEntry>,
    /// The balancing advisor's schedule (docs/advise.md).
    advise: Option<AdviseEntry>,
}

/// `advise:` — when the server's balancing advisor runs, over how much history.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdviseEntry {
    /// A span between two advices (`1d`, `6h`); or
    every: Option<String>,
    /// a time of day, UTC (`03:00`).
    at: Option<String>,
    /// The recorded runs replayed, ending now (default 7d).
    window: Option<String>,
    candidates: Option<usize>,
    /// Price of one node-hour, by cluster.
    #[serde(default)]
    prices: BTreeMap<String, f64>,
}

/// `routes[i]`: a route key, its policy and its candidates in order of preference.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteEntry {
    key: String,
    #[serde(default)]
    policy: PolicyEntry,
    /// `spill` only: how long the first candidate may keep a new run waiting.
    spill_after_seconds: Option<u64>,
    candidates: Vec<CandidateEntry>,
}

#[derive(Debug, Default, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum PolicyEntry {
    #[default]
    First,
    LeastLoaded,
    Spill,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CandidateEntry {
    cluster: String,
    queue: String,
}

/// `object_store:` — where stages' declared outputs go (docs/commit.md). One of `local` and
/// `s3`; none: the local store beside the data directory.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectStoreEntry {
    local: Option<LocalStoreEntry>,
    s3: Option<S3Entry>,
    /// S3: the credentials tasks get (AWS shared-credentials format); default: the server's.
    task_credentials_file: Option<PathBuf>,
    sweep_after_seconds: Option<u64>,
    sweep_every_seconds: Option<u64>,
    part_size_bytes: Option<usize>,
    parallel_parts: Option<usize>,
    parallel_files: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LocalStoreEntry {
    root: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct S3Entry {
    endpoint: Option<String>,
    region: Option<String>,
    bucket: String,
    /// AWS shared-credentials format; none: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
    credentials_file: Option<PathBuf>,
    request_timeout_seconds: Option<u64>,
    max_retries: Option<usize>,
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
    /// Policy routes send no new runs here (runs already here go on).
    #[serde(default)]
    drained: bool,
}

/// One cluster's backend. Fields of another kind are refused, by name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendEntry {
    #[serde(default)]
    kind: BackendKind,
    kill_grace_seconds: Option<u64>,
    // local
    state_dir: Option<PathBuf>,
    // slurm
    url: Option<String>,
    user: Option<String>,
    jwt_key: Option<PathBuf>,
    jwt_lifespan_seconds: Option<u64>,
    token_file: Option<PathBuf>,
    token_env: Option<String>,
    placement: Option<PlacementEntry>,
    partition: Option<String>,
    qos: Option<String>,
    #[serde(default)]
    queues: BTreeMap<String, SlurmQueueEntry>,
    poll_interval_ms: Option<u64>,
    default_time_limit_seconds: Option<u64>,
    tag: Option<String>,
    shared_dir: Option<PathBuf>,
    when_unhealthy: Option<WhenUnhealthyEntry>,
    // spark-local (`state_dir` and `kill_grace_seconds` too)
    spark_home: Option<PathBuf>,
    python: Option<PathBuf>,
    #[serde(default)]
    conf: BTreeMap<String, String>,
    // spark-standalone (`python`, `conf`, `state_dir`, `poll_interval_ms` too)
    master_rest_url: Option<String>,
    master_ui_url: Option<String>,
    driver_python: Option<String>,
    // kubernetes (`poll_interval_ms`, `queues`, `kill_grace_seconds` and `shared_dir` too)
    namespace: Option<String>,
    image: Option<String>,
    scheduler: Option<String>,
    default_queue: Option<String>,
    gang: Option<bool>,
    /// Spark stages as SparkApplications: the image (with Spark), Spark's version, and the
    /// driver's service account.
    spark_image: Option<String>,
    spark_version: Option<String>,
    spark_service_account: Option<String>,
    /// `from_backend`: the cluster's nodes are read from the backend at start …
    nodes: Option<NodesEntry>,
    /// … and again every this many seconds while the server runs.
    nodes_refresh_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum NodesEntry {
    FromBackend,
}

/// Backend kinds. `kubernetes` needs a weir built with the `kubernetes` cargo feature.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum BackendKind {
    #[default]
    Local,
    Slurm,
    #[serde(rename = "spark-local")]
    SparkLocal,
    #[serde(rename = "spark-standalone")]
    SparkStandalone,
    Kubernetes,
}

/// What a submission to a cluster whose backend is unhealthy gets: kept waiting in the store
/// (default) or refused with 503.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum WhenUnhealthyEntry {
    Wait,
    Refuse,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum PlacementEntry {
    Weir,
    Backend,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlurmQueueEntry {
    partition: Option<String>,
    qos: Option<String>,
    /// kubernetes: the Kueue LocalQueue or YuniKorn queue.
    queue: Option<String>,
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
    /// Clusters whose nodes come from their backend (`backend.nodes: from_backend`), with the
    /// field path for errors.
    pub nodes_from_backend: BTreeMap<String, String>,
    /// `object_store:`, checked.
    pub outputs: Option<weir_server::OutputSettings>,
    /// `routes:` and the clusters marked `drained`, checked.
    pub routing: weir_server::RoutingSettings,
    /// `advise:`, checked (default: no schedule).
    pub advisor: weir_server::AdvisorSettings,
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
    let mut nodes_from_backend = BTreeMap::new();
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
        let kill_grace = c.backend.kill_grace_seconds.map(Duration::from_secs);
        if c.backend.kind == BackendKind::SparkStandalone {
            let at = format!("{at}.backend");
            if let Some(dir) = c.backend.state_dir.as_deref().map(resolve) {
                if let Some(other) = state_dirs.insert(dir.clone(), c.name.clone()) {
                    problem(
                        format!("{at}.state_dir"),
                        format!("{} is also cluster `{other}`'s: each cluster needs its own", dir.display()),
                    );
                }
            }
            if let Some((config, nodes_refresh)) =
                standalone_settings(&c.backend, &at, &resolve, &mut problem)
            {
                if nodes_refresh.is_some() {
                    nodes_from_backend.insert(c.name.clone(), format!("{at}.nodes"));
                }
                backends.insert(
                    c.name.clone(),
                    BackendSettings::SparkStandalone { config: Box::new(config), nodes_refresh },
                );
            }
            continue;
        }
        for (field, set) in standalone_fields(&c.backend) {
            if set {
                problem(
                    format!("{at}.backend.{field}"),
                    format!(
                        "is a spark-standalone backend's field (this backend is `kind: {}`)",
                        c.backend.kind.name()
                    ),
                );
            }
        }
        if c.backend.kind != BackendKind::SparkLocal {
            for (field, set) in spark_fields(&c.backend) {
                if set {
                    problem(
                        format!("{at}.backend.{field}"),
                        format!(
                            "is a spark-local backend's field (this backend is `kind: {}`)",
                            c.backend.kind.name()
                        ),
                    );
                }
            }
        }
        if c.backend.kind == BackendKind::Kubernetes {
            let at = format!("{at}.backend");
            if let Some(settings) = kube::settings(&c.backend, &at, &mut problem) {
                #[cfg(feature = "kubernetes")]
                backends.insert(
                    c.name.clone(),
                    BackendSettings::Kubernetes {
                        config: Box::new(settings),
                        kill_grace,
                        shared_dir: c.backend.shared_dir.as_deref().map(resolve),
                    },
                );
                #[cfg(not(feature = "kubernetes"))]
                let () = settings;
            }
            continue;
        }
        for (field, set) in kube::fields(&c.backend) {
            if set {
                problem(
                    format!("{at}.backend.{field}"),
                    format!(
                        "is a kubernetes backend's field (this backend is `kind: {}`)",
                        c.backend.kind.name()
                    ),
                );
            }
        }
        if c.backend.kind == BackendKind::Slurm {
            let at = format!("{at}.backend");
            if c.backend.state_dir.is_some() {
                problem(
                    format!("{at}.state_dir"),
                    "is a local backend's field; a slurm backend keeps no state folder".into(),
                );
            }
            if c.backend.nodes.is_some() {
                nodes_from_backend.insert(c.name.clone(), format!("{at}.nodes"));
            }
            let nodes_refresh = match (c.backend.nodes, c.backend.nodes_refresh_seconds) {
                (None, Some(_)) => {
                    problem(
                        format!("{at}.nodes_refresh_seconds"),
                        "only with `nodes: from_backend` (the cluster file's nodes are never refreshed)"
                            .into(),
                    );
                    None
                }
                (Some(_), Some(0)) => {
                    problem(
                        format!("{at}.nodes_refresh_seconds"),
                        "0: give the seconds between two reads of Slurm's nodes".into(),
                    );
                    None
                }
                (Some(_), secs) => Some(Duration::from_secs(secs.unwrap_or(DEFAULT_NODES_REFRESH_SECONDS))),
                (None, None) => None,
            };
            if matches!(c.backend.placement, Some(PlacementEntry::Weir)) && c.backend.nodes.is_none() {
                problem(
                    format!("{at}.placement"),
                    "`weir` pins each task to the node weir's engine chose, so the engine's nodes must be Slurm's: add `nodes: from_backend`".into(),
                );
            }
            if let Some(source) = clusters.last().filter(|s: &&ClusterSource| s.name == c.name) {
                for (key, problem_text) in
                    unknown_leaves(source, c.backend.queues.keys().filter(|k| k.starts_with("root.")))
                {
                    problem(format!("{at}.queues.{key}"), problem_text);
                }
            }
            if let Some(settings) = slurm_settings(&c.backend, &at, &resolve, &mut problem) {
                backends.insert(
                    c.name.clone(),
                    BackendSettings::Slurm {
                        config: Box::new(settings),
                        kill_grace,
                        shared_dir: c.backend.shared_dir.as_deref().map(resolve),
                        refuse_when_unhealthy: c.backend.when_unhealthy == Some(WhenUnhealthyEntry::Refuse),
                        nodes_refresh,
                    },
                );
            }
            continue;
        }
        for (field, set) in slurm_fields(&c.backend) {
            if set {
                problem(
                    format!("{at}.backend.{field}"),
                    format!("is a slurm backend's field (this backend is `kind: {}`)", c.backend.kind.name()),
                );
            }
        }
        let state_dir = c.backend.state_dir.as_deref().map(resolve);
        if let Some(dir) = &state_dir {
            if let Some(other) = state_dirs.insert(dir.clone(), c.name.clone()) {
                problem(
                    format!("{at}.backend.state_dir"),
                    format!("{} is also cluster `{other}`'s: each cluster needs its own", dir.display()),
                );
            }
        }
        if c.backend.kind == BackendKind::SparkLocal {
            let at = format!("{at}.backend");
            let mut config = SparkLocalConfig::new(state_dir.unwrap_or_default());
            // Absolute: the drivers run `spark-submit` and Python from their run's working folder.
            let absolute = |p: &Path| std::path::absolute(resolve(p)).unwrap_or_else(|_| resolve(p));
            config.spark_home = c.backend.spark_home.as_deref().map(absolute);
            // A bare name (`python3`) is looked up on PATH; a path is taken from the file's folder.
            config.python = c.backend.python.as_deref().map(|p| {
                if p.components().count() > 1 {
                    absolute(p)
                } else {
                    p.to_path_buf()
                }
            });
            check_conf(
                &c.backend.conf,
                &at,
                "`spark-local` runs every application with `--master local[N]`",
                &mut problem,
            );
            config.conf = c.backend.conf.clone();
            backends
                .insert(c.name.clone(), BackendSettings::SparkLocal { config: Box::new(config), kill_grace });
            continue;
        }
        backends.insert(c.name.clone(), BackendSettings::Local { state_dir, kill_grace });
    }
    let outputs = f.object_store.as_ref().and_then(|o| object_store(o, &resolve, &mut problems));
    let routing = weir_server::RoutingSettings {
        routes: routes(&f.routes, &clusters, &mut problems),
        drained: f.clusters.iter().filter(|c| c.drained).map(|c| c.name.clone()).collect(),
    };
    let advisor = f.advise.as_ref().map(|a| advisor(a, &names, &mut problems)).unwrap_or_default();
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
        nodes_from_backend,
        outputs,
        routing,
        advisor,
    })
}

/// `advise:` checked: exactly one of `every` (at least a minute) and `at` (`HH:MM`, UTC), a
/// window, and prices of clusters of this file.
fn advisor(
    a: &AdviseEntry,
    clusters: &BTreeSet<String>,
    problems: &mut Vec<Problem>,
) -> weir_server::AdvisorSettings {
    use weir_server::AdviceSchedule;
    let mut problem =
        |path: &str, message: String| problems.push(Problem { path: format!("advise.{path}"), message });
    let span =
        |text: &str| text.parse::<weir_model::Duration>().map(|d| Duration::from_millis(d.as_millis()));
    let schedule = match (&a.every, &a.at) {
        (Some(_), Some(_)) => {
            problem("at", "give `every` or `at`, not both".into());
            None
        }
        (None, None) => {
            problem(
                "every",
                "missing: give `every: 1d` (a span) or `at: \"03:00\"` (a time of day, UTC)".into(),
            );
            None
        }
        (Some(every), None) => match span(every) {
            Ok(d) if d >= Duration::from_secs(60) => Some(AdviceSchedule::Every(d)),
            Ok(_) => {
                problem("every", format!("`{every}`: advise at most once a minute"));
                None
            }
            Err(e) => {
                problem("every", format!("`{every}`: {e} (e.g. 1d, 6h)"));
                None
            }
        },
        (None, Some(at)) => {
            let hm = at.split_once(':').and_then(|(h, m)| {
                let (h, m) = (h.parse::<u32>().ok()?, m.parse::<u32>().ok()?);
                (h < 24 && m < 60 && at.len() == 5).then_some(h * 60 + m)
            });
            match hm {
                Some(minute) => Some(AdviceSchedule::DailyAt { minute }),
                None => {
                    problem("at", format!("`{at}`: a time of day is HH:MM, UTC (e.g. \"03:00\")"));
                    None
                }
            }
        }
    };
    let mut out = weir_server::AdvisorSettings { schedule, ..weir_server::AdvisorSettings::default() };
    if let Some(w) = &a.window {
        match span(w) {
            Ok(d) if !d.is_zero() => out.window = d,
            Ok(_) => problem("window", "0: the advisor needs recorded runs to replay".into()),
            Err(e) => problem("window", format!("`{w}`: {e} (e.g. 7d)")),
        }
    }
    match a.candidates {
        Some(0) => problem("candidates", "0: at least one move must be tried".into()),
        Some(n) => out.candidates = n,
        None => {}
    }
    for (name, price) in &a.prices {
        if !clusters.contains(name) {
            problem(&format!("prices.{name}"), format!("no cluster of this file is named `{name}`"));
        } else if !price.is_finite() || *price < 0.0 {
            problem(&format!("prices.{name}"), format!("{price}: a node-hour's price is a number ≥ 0"));
        }
    }
    out.prices = a.prices.clone();
    out
}

/// `routes:` checked: keys well formed and each once, candidates on clusters of this file and
/// leaf queues of theirs, each once, and the threshold where (and only where) `spill` needs it.
fn routes(
    entries: &[RouteEntry],
    clusters: &[ClusterSource],
    problems: &mut Vec<Problem>,
) -> Vec<weir_server::PolicyRoute> {
    use weir_server::{Candidate, Policy, PolicyRoute};
    let mut problem = |path: String, message: String| problems.push(Problem { path, message });
    let mut keys = BTreeSet::new();
    let mut out = Vec::new();
    for (i, r) in entries.iter().enumerate() {
        let at = format!("routes[{i}]");
        if !valid_route_key(&r.key) {
            problem(
                format!("{at}.key"),
                format!("`{}`: expected `workflow:NAME` or `project:PROJECT:TIER` (tier 1 to 3)", r.key),
            );
        } else if !keys.insert(r.key.clone()) {
            problem(format!("{at}.key"), format!("`{}` is routed twice", r.key));
        }
        if r.candidates.is_empty() {
            problem(format!("{at}.candidates"), "empty: name at least one (cluster, queue)".into());
        } else if r.policy != PolicyEntry::First && r.candidates.len() < 2 {
            problem(
                format!("{at}.candidates"),
                format!("one candidate: `policy: {}` chooses among at least two", r.policy.name()),
            );
        }
        let policy = match (r.policy, r.spill_after_seconds) {
            (PolicyEntry::Spill, Some(s)) => Some(Policy::Spill { after: Duration::from_secs(s) }),
            (PolicyEntry::Spill, None) => {
                problem(
                    format!("{at}.spill_after_seconds"),
                    "missing: `spill` needs how long the first candidate may keep a new run waiting".into(),
                );
                None
            }
            (other, Some(s)) => {
                problem(
                    format!("{at}.spill_after_seconds"),
                    format!("{s}: only with `policy: spill` (this route is `{}`)", other.name()),
                );
                None
            }
            (PolicyEntry::First, None) => Some(Policy::First),
            (PolicyEntry::LeastLoaded, None) => Some(Policy::LeastLoaded),
        };
        let mut seen = BTreeSet::new();
        for (j, c) in r.candidates.iter().enumerate() {
            let at = format!("{at}.candidates[{j}]");
            let Some(source) = clusters.iter().find(|s| s.name == c.cluster) else {
                problem(
                    format!("{at}.cluster"),
                    format!("`{}` is not a cluster of this file (clusters[].name)", c.cluster),
                );
                continue;
            };
            for (_, text) in unknown_leaves(source, std::iter::once(&c.queue)) {
                problem(format!("{at}.queue"), text);
            }
            if !seen.insert((c.cluster.clone(), c.queue.clone())) {
                problem(at.clone(), format!("{} {} is a candidate twice", c.cluster, c.queue));
            }
        }
        if let Some(policy) = policy {
            let candidates = r
                .candidates
                .iter()
                .map(|c| Candidate { cluster: c.cluster.clone(), queue: c.queue.clone() })
                .collect();
            out.push(PolicyRoute { key: r.key.clone(), policy, candidates });
        }
    }
    out
}

/// `workflow:NAME` or `project:PROJECT:TIER` (tier 1 to 3), as `weir routes set` takes them.
fn valid_route_key(key: &str) -> bool {
    let name_ok = |s: &str| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    if let Some(name) = key.strip_prefix("workflow:") {
        return name_ok(name);
    }
    match key.strip_prefix("project:").and_then(|r| r.rsplit_once(':')) {
        Some((p, tier)) => name_ok(p) && matches!(tier, "1" | "2" | "3"),
        None => false,
    }
}

impl PolicyEntry {
    fn name(self) -> &'static str {
        match self {
            PolicyEntry::First => "first",
            PolicyEntry::LeastLoaded => "least_loaded",
            PolicyEntry::Spill => "spill",
        }
    }
}

/// `object_store:` checked: one store, credentials readable, tunables in range.
fn object_store(
    o: &ObjectStoreEntry,
    resolve: &dyn Fn(&Path) -> PathBuf,
    problems: &mut Vec<Problem>,
) -> Option<weir_server::OutputSettings> {
    use weir_commit::{CommitConfig, Credentials, RetrySettings, S3Config};
    let mut problem = |path: &str, message: String| problems.push(Problem { path: path.into(), message });
    let mut out = weir_server::OutputSettings::default();
    let creds = |path: &Path| Credentials::from_file(&resolve(path)).map_err(|e| e.to_string());
    match (&o.local, &o.s3) {
        (Some(_), Some(_)) => {
            problem("object_store", "give `local` or `s3`, not both".into());
            return None;
        }
        (Some(l), None) => out.store = weir_server::OutputStore::Local { root: Some(resolve(&l.root)) },
        (None, Some(s3)) => {
            let credentials = match &s3.credentials_file {
                Some(path) => creds(path),
                None => Credentials::from_env(&|k| std::env::var(k).ok())
                    .map_err(|e| format!("{e}; or give object_store.s3.credentials_file")),
            };
            let credentials = match credentials {
                Ok(c) => c,
                Err(e) => {
                    problem("object_store.s3.credentials_file", e);
                    return None;
                }
            };
            if let Err(why) = weir_model::parse_object_uri(&format!("s3://{}/x/", s3.bucket)) {
                problem("object_store.s3.bucket", why);
            }
            if let Some(e) =
                s3.endpoint.as_ref().filter(|e| !e.starts_with("http://") && !e.starts_with("https://"))
            {
                problem("object_store.s3.endpoint", format!("`{e}`: expected http(s)://HOST[:PORT]"));
            }
            let mut retry = RetrySettings::default();
            if let Some(n) = s3.max_retries {
                retry.max_retries = n;
            }
            out.store = weir_server::OutputStore::S3(S3Config {
                endpoint: s3.endpoint.clone(),
                region: s3.region.clone().unwrap_or_else(|| "us-east-1".into()),
                bucket: s3.bucket.clone(),
                credentials,
                request_timeout_ms: s3.request_timeout_seconds.unwrap_or(30).max(1) * 1000,
                retry,
            });
        }
        (None, None) => {}
    }
    if let Some(path) = &o.task_credentials_file {
        match (&o.s3, creds(path)) {
            (None, _) => problem(
                "object_store.task_credentials_file",
                "only with `s3` (tasks of the local store need no credentials)".into(),
            ),
            (Some(_), Ok(c)) => out.task_credentials = Some(c),
            (Some(_), Err(e)) => problem("object_store.task_credentials_file", e),
        }
    }
    for (field, value, default) in [
        ("sweep_after_seconds", o.sweep_after_seconds, &mut out.sweep_after),
        ("sweep_every_seconds", o.sweep_every_seconds, &mut out.sweep_every),
    ] {
        match value {
            Some(0) => problem(&format!("object_store.{field}"), "0: give at least 1 second".into()),
            Some(v) => *default = Duration::from_secs(v),
            None => {}
        }
    }
    let d = CommitConfig::default();
    out.commit = CommitConfig {
        part_size: o.part_size_bytes.unwrap_or(d.part_size),
        parallel_parts: o.parallel_parts.unwrap_or(d.parallel_parts),
        parallel_files: o.parallel_files.unwrap_or(d.parallel_files),
    };
    if let Err(e) = out.commit.validate("object_store") {
        problem("object_store", e.to_string());
    }
    Some(out)
}

/// `backend.nodes: from_backend`: each such cluster's file gets the nodes its backend reports
/// (usable ones, grouped by size) in place of a `nodes:` list, which it must not have. Read once
/// at start; a backend that cannot be asked is an error naming the field.
pub fn discover_nodes(config: &mut ServeConfig) -> Result<(), ModelError> {
    if config.nodes_from_backend.is_empty() {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| {
        ModelError::Syntax { file: String::new(), path: String::new(), message: e.to_string() }
    })?;
    for source in &mut config.clusters {
        let Some(field) = config.nodes_from_backend.get(&source.name) else { continue };
        let backend = config.backends.get(&source.name);
        if !matches!(backend, Some(BackendSettings::Slurm { .. } | BackendSettings::SparkStandalone { .. })) {
            continue;
        }
        let invalid = |message: String| ModelError::Invalid {
            file: source.file.clone(),
            problems: vec![Problem { path: field.clone(), message }],
        };
        let mut file: weir_model::cluster_file::ClusterFile =
            weir_model::parse_yaml(&source.file, &source.yaml)?;
        if !file.nodes.is_empty() {
            return Err(invalid("from_backend, but the cluster file lists nodes too: remove them".into()));
        }
        let (target, nodes) = rt
            .block_on(async {
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                let backend: Box<dyn weir_backend::Backend> = match backend {
                    Some(BackendSettings::Slurm { config: slurm, .. }) => Box::new(
                        weir_backend_slurm::SlurmBackend::connect((**slurm).clone(), tx)
                            .await
                            .map_err(|e| e.to_string())?,
                    ),
                    Some(BackendSettings::SparkStandalone { config: spark, .. }) => Box::new(
                        weir_backend_spark::SparkStandaloneBackend::connect((**spark).clone(), tx)
                            .await
                            .map_err(|e| e.to_string())?,
                    ),
                    _ => return Err("this backend reports no nodes".to_string()),
                };
                let target = if backend.kind() == "slurm" { "Slurm" } else { "the Spark master" };
                match backend.nodes().await {
                    Some(Ok(nodes)) => Ok((target, nodes)),
                    Some(Err(e)) => Err(e),
                    None => Err("this backend reports no nodes".to_string()),
                }
            })
            .map_err(|e| invalid(format!("from_backend: cannot read the nodes: {e}")))?;
        let mut groups: BTreeMap<(u64, u64, u64), u32> = BTreeMap::new();
        for n in nodes.iter().filter(|n| n.usable) {
            *groups.entry((n.resources.cpu, n.resources.memory, n.resources.gpu)).or_default() += 1;
        }
        if groups.is_empty() {
            return Err(invalid(format!(
                "from_backend: {target} reports no usable node (of {})",
                nodes.len()
            )));
        }
        file.nodes = groups
            .into_iter()
            .map(|((cpu, memory, gpu), count)| weir_model::cluster_file::NodeGroupSpec {
                count,
                resources: weir_model::PartialResources {
                    cpu: Some(cpu),
                    memory: Some(memory),
                    gpu: (gpu > 0).then_some(gpu),
                },
                ..Default::default()
            })
            .collect();
        source.yaml = serde_saphyr::to_string(&file)
            .map_err(|e| invalid(format!("from_backend: cannot write the cluster back: {e}")))?;
    }
    Ok(())
}

/// How often a `nodes: from_backend` cluster's nodes are read again, unless the file says.
const DEFAULT_NODES_REFRESH_SECONDS: u64 = 30;

/// The `queues:` keys of a backend entry that are not leaf queues of the cluster file, each
/// with what is wrong (the leaves it has, so a typo shows). A cluster file that does not parse
/// is left to the cluster's own check, which names its problems.
fn unknown_leaves<'a>(
    source: &ClusterSource,
    keys: impl Iterator<Item = &'a String>,
) -> Vec<(String, String)> {
    let Ok(file) =
        weir_model::parse_yaml::<weir_model::cluster_file::ClusterFile>(&source.file, &source.yaml)
    else {
        return Vec::new();
    };
    fn walk(
        prefix: &str,
        qs: &[weir_model::cluster_file::QueueSpec],
        leaves: &mut Vec<String>,
        parents: &mut Vec<String>,
    ) {
        for q in qs {
            let path = format!("{prefix}.{}", q.name);
            if q.children.is_empty() {
                leaves.push(path);
            } else {
                walk(&path, &q.children, leaves, parents);
                parents.push(path);
            }
        }
    }
    let (mut leaves, mut parents) = (Vec::new(), vec!["root".to_string()]);
    walk("root", &file.queues, &mut leaves, &mut parents);
    keys.filter(|k| !leaves.contains(k))
        .map(|k| {
            let what = if parents.contains(k) {
                format!("`{k}` is a parent queue in {}; tasks run in leaf queues only", source.file)
            } else {
                format!("`{k}` is not a queue of {}", source.file)
            };
            (k.clone(), format!("{what} (its leaves: {})", leaves.join(", ")))
        })
        .collect()
}

/// Which slurm-only fields a backend entry sets.
fn slurm_fields(b: &BackendEntry) -> [(&'static str, bool); 17] {
    [
        ("nodes", b.nodes.is_some()),
        ("nodes_refresh_seconds", b.nodes_refresh_seconds.is_some()),
        ("url", b.url.is_some()),
        ("user", b.user.is_some()),
        ("jwt_key", b.jwt_key.is_some()),
        ("jwt_lifespan_seconds", b.jwt_lifespan_seconds.is_some()),
        ("token_file", b.token_file.is_some()),
        ("token_env", b.token_env.is_some()),
        ("placement", b.placement.is_some()),
        ("partition", b.partition.is_some()),
        ("qos", b.qos.is_some()),
        ("queues", !b.queues.is_empty()),
        ("poll_interval_ms", b.poll_interval_ms.is_some()),
        ("default_time_limit_seconds", b.default_time_limit_seconds.is_some()),
        ("tag", b.tag.is_some()),
        ("shared_dir", b.shared_dir.is_some()),
        ("when_unhealthy", b.when_unhealthy.is_some()),
    ]
}

/// Checks the Spark properties of a `spark-local` or `spark-standalone` entry: `spark.…` names,
/// and not the master or the deploy mode, which the backend sets (`why` says how).
fn check_conf(conf: &BTreeMap<String, String>, at: &str, why: &str, problem: &mut dyn FnMut(String, String)) {
    for (key, value) in conf {
        if !key.starts_with("spark.") || key.contains(['=', '\0']) || key.contains(char::is_whitespace) {
            problem(
                format!("{at}.conf"),
                format!(
                    "`{}` is not a Spark property name (`spark.…`, no `=` or spaces)",
                    key.escape_debug()
                ),
            );
        } else if key == "spark.master" || key == "spark.submit.deployMode" {
            problem(format!("{at}.conf.{key}"), format!("is the backend's own: {why}"));
        } else if value.contains('\0') {
            problem(format!("{at}.conf.{key}"), "must not contain a NUL byte".into());
        }
    }
}

/// The fields only a spark-standalone backend has.
fn standalone_fields(b: &BackendEntry) -> [(&'static str, bool); 3] {
    [
        ("master_rest_url", b.master_rest_url.is_some()),
        ("master_ui_url", b.master_ui_url.is_some()),
        ("driver_python", b.driver_python.is_some()),
    ]
}

/// A `kind: spark-standalone` entry checked into the backend's settings; problems are named
/// under `at`. Nothing is contacted here: a master that does not answer is found at start.
fn standalone_settings(
    b: &BackendEntry,
    at: &str,
    resolve: &dyn Fn(&Path) -> PathBuf,
    problem: &mut dyn FnMut(String, String),
) -> Option<(SparkStandaloneConfig, Option<Duration>)> {
    let mut ok = true;
    let shared = ["poll_interval_ms", "nodes", "nodes_refresh_seconds", "placement"];
    for (field, set) in
        slurm_fields(b).into_iter().filter(|(f, _)| !shared.contains(f)).chain(kube::fields(b)).chain([
            ("spark_home", b.spark_home.is_some()),
            ("kill_grace_seconds", b.kill_grace_seconds.is_some()),
        ])
    {
        if set {
            let why = match field {
                "spark_home" => "the workers run their own Spark; give `python`/`driver_python` for PySpark",
                "kill_grace_seconds" => "Spark's kill has no grace: the master stops the driver at once",
                _ => "a spark-standalone backend talks to the master's REST gateway only",
            };
            problem(format!("{at}.{field}"), format!("is not a spark-standalone backend's field ({why})"));
            ok = false;
        }
    }
    let url_ok = |u: &str| {
        u.strip_prefix("http://").is_some_and(|rest| !rest.is_empty() && !rest.contains(char::is_whitespace))
    };
    let url = match b.master_rest_url.as_deref() {
        Some(u) if url_ok(u) => u.to_string(),
        Some(u) => {
            problem(
                format!("{at}.master_rest_url"),
                format!("`{u}`: the master's REST submission gateway as http://HOST:PORT (Spark's default port: 6066)"),
            );
            return None;
        }
        None => {
            problem(
                format!("{at}.master_rest_url"),
                "missing: the master's REST submission gateway, http://HOST:6066 (the master needs spark.master.rest.enabled=true)".into(),
            );
            return None;
        }
    };
    if let Some(u) = b.master_ui_url.as_deref().filter(|u| !url_ok(u)) {
        problem(format!("{at}.master_ui_url"), format!("`{u}`: the master's web UI as http://HOST:PORT"));
        ok = false;
    }
    if b.poll_interval_ms == Some(0) {
        problem(format!("{at}.poll_interval_ms"), "0: give the interval between two status reads".into());
        ok = false;
    }
    // The master picks the worker of each driver and executor; the REST gateway takes no
    // worker to run a driver on (`CreateSubmissionRequest` has no such field), so weir's engine
    // cannot pin one.
    if matches!(b.placement, Some(PlacementEntry::Weir)) {
        problem(
            format!("{at}.placement"),
            "`weir` is not supported by a Spark standalone master: it places each driver and executor on a worker itself, and its REST gateway takes no worker to run a driver on; leave `placement` out (or `backend`)".into(),
        );
        ok = false;
    }
    let nodes_refresh = match (b.nodes, b.nodes_refresh_seconds) {
        (None, Some(_)) => {
            problem(
                format!("{at}.nodes_refresh_seconds"),
                "only with `nodes: from_backend` (the cluster file's nodes are never refreshed)".into(),
            );
            ok = false;
            None
        }
        (Some(_), Some(0)) => {
            problem(
                format!("{at}.nodes_refresh_seconds"),
                "0: give the seconds between two reads of the master's workers".into(),
            );
            ok = false;
            None
        }
        (Some(_), secs) => Some(Duration::from_secs(secs.unwrap_or(DEFAULT_NODES_REFRESH_SECONDS))),
        (None, None) => None,
    };
    for (field, v) in [
        ("python", b.python.as_deref().map(Path::new)),
        ("driver_python", b.driver_python.as_deref().map(Path::new)),
    ] {
        if v.is_some_and(|p| p.as_os_str().is_empty() || p.to_string_lossy().contains(char::is_whitespace)) {
            problem(
                format!("{at}.{field}"),
                "a program on the workers, one word (no spaces): Spark runs it as given".into(),
            );
            ok = false;
        }
    }
    let mut before = 0;
    check_conf(
        &b.conf,
        at,
        "`spark-standalone` submits every application to its master in cluster mode",
        &mut |p, m| {
            before += 1;
            problem(p, m)
        },
    );
    if !ok || before > 0 {
        return None;
    }
    let mut config = SparkStandaloneConfig::new(url, b.state_dir.as_deref().map(resolve).unwrap_or_default());
    config.master_ui_url = b.master_ui_url.clone();
    // Paths on the workers: taken as written (not from the server file's folder).
    config.python = b.python.as_ref().map(|p| p.display().to_string());
    config.driver_python = b.driver_python.clone();
    config.conf = b.conf.clone();
    if let Some(ms) = b.poll_interval_ms {
        config.poll_interval = Duration::from_millis(ms);
    }
    Some((config, nodes_refresh))
}

/// The fields only a spark-local backend has.
fn spark_fields(b: &BackendEntry) -> [(&'static str, bool); 3] {
    [("spark_home", b.spark_home.is_some()), ("python", b.python.is_some()), ("conf", !b.conf.is_empty())]
}

impl BackendKind {
    fn name(&self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Slurm => "slurm",
            BackendKind::SparkLocal => "spark-local",
            BackendKind::SparkStandalone => "spark-standalone",
            BackendKind::Kubernetes => "kubernetes",
        }
    }
}

/// `kind: kubernetes` entries (the backend itself is behind the `kubernetes` cargo feature).
mod kube {
    use super::BackendEntry;

    /// The fields only a kubernetes backend has.
    pub(super) fn fields(b: &BackendEntry) -> [(&'static str, bool); 8] {
        [
            ("namespace", b.namespace.is_some()),
            ("image", b.image.is_some()),
            ("scheduler", b.scheduler.is_some()),
            ("default_queue", b.default_queue.is_some()),
            ("gang", b.gang.is_some()),
            ("spark_image", b.spark_image.is_some()),
            ("spark_version", b.spark_version.is_some()),
            ("spark_service_account", b.spark_service_account.is_some()),
        ]
    }

    #[cfg(feature = "kubernetes")]
    pub(super) type Settings = weir_backend_kube::KubeConfig;
    #[cfg(not(feature = "kubernetes"))]
    pub(super) type Settings = ();

    /// Checks a `kind: kubernetes` entry; problems are named under `at`. Nothing is contacted
    /// here: an API server that does not answer or a missing namespace is found at start.
    pub(super) fn settings(
        b: &BackendEntry,
        at: &str,
        problem: &mut dyn FnMut(String, String),
    ) -> Option<Settings> {
        let mut ok = true;
        // Slurm's fields, less those both kinds have; and a local backend's state folder.
        let shared = ["queues", "poll_interval_ms", "shared_dir"];
        for (field, set) in super::slurm_fields(b)
            .into_iter()
            .filter(|(f, _)| !shared.contains(f))
            .chain([("state_dir", b.state_dir.is_some())])
        {
            if set {
                problem(format!("{at}.{field}"), "is not a kubernetes backend's field (the client configuration comes from the kubeconfig or the pod's service account)".into());
                ok = false;
            }
        }
        let namespace = required(
            b.namespace.as_deref(),
            &format!("{at}.namespace"),
            "the namespace the Jobs go to",
            problem,
        );
        let image =
            required(b.image.as_deref(), &format!("{at}.image"), "the container image tasks run in", problem);
        let scheduler = b.scheduler.as_deref().unwrap_or("default");
        if !matches!(scheduler, "default" | "kueue" | "yunikorn") {
            problem(format!("{at}.scheduler"), format!("`{scheduler}`: one of default, kueue, yunikorn"));
            ok = false;
        }
        if b.gang == Some(true) && scheduler != "yunikorn" {
            problem(
                format!("{at}.gang"),
                "gangs are reserved through YuniKorn's task groups: needs `scheduler: yunikorn`".into(),
            );
            ok = false;
        }
        if b.poll_interval_ms == Some(0) {
            problem(
                format!("{at}.poll_interval_ms"),
                "0: give the longest wait before a watch that failed is opened again (status comes by watch)"
                    .into(),
            );
            ok = false;
        }
        let mut queues = std::collections::BTreeMap::new();
        for (weir_queue, q) in &b.queues {
            if q.partition.is_some() || q.qos.is_some() {
                problem(
                    format!("{at}.queues.{weir_queue}"),
                    "partition and qos are Slurm's: give `queue` (the Kueue LocalQueue or YuniKorn queue)"
                        .into(),
                );
                ok = false;
            }
            match &q.queue {
                Some(name) => {
                    queues.insert(weir_queue.clone(), name.clone());
                }
                None => {
                    problem(
                        format!("{at}.queues.{weir_queue}.queue"),
                        "missing: the Kueue LocalQueue or YuniKorn queue".into(),
                    );
                    ok = false;
                }
            }
        }
        let (Some(namespace), Some(image), true) = (namespace, image, ok) else { return None };
        build(namespace, image, scheduler, queues, b, at, problem)
    }

    fn required(
        v: Option<&str>,
        at: &str,
        what: &str,
        problem: &mut dyn FnMut(String, String),
    ) -> Option<String> {
        match v {
            Some(s) if !s.trim().is_empty() => Some(s.to_string()),
            _ => {
                problem(at.to_string(), format!("missing: {what}"));
                None
            }
        }
    }

    #[cfg(feature = "kubernetes")]
    fn build(
        namespace: String,
        image: String,
        scheduler: &str,
        queues: std::collections::BTreeMap<String, String>,
        b: &BackendEntry,
        _at: &str,
        _problem: &mut dyn FnMut(String, String),
    ) -> Option<Settings> {
        use weir_backend_kube::Scheduler;
        Some(weir_backend_kube::KubeConfig {
            namespace,
            image,
            scheduler: match scheduler {
                "kueue" => Scheduler::Kueue,
                "yunikorn" => Scheduler::Yunikorn,
                _ => Scheduler::Default,
            },
            queues,
            default_queue: b.default_queue.clone(),
            gang: b.gang.unwrap_or(false),
            poll_ms: b.poll_interval_ms.unwrap_or(2000),
            spark_image: b.spark_image.clone(),
            spark_version: b
                .spark_version
                .clone()
                .unwrap_or_else(weir_backend_kube::config::default_spark_version),
            spark_service_account: b.spark_service_account.clone(),
        })
    }

    #[cfg(not(feature = "kubernetes"))]
    fn build(
        _namespace: String,
        _image: String,
        _scheduler: &str,
        _queues: std::collections::BTreeMap<String, String>,
        _b: &BackendEntry,
        at: &str,
        problem: &mut dyn FnMut(String, String),
    ) -> Option<Settings> {
        problem(
            format!("{at}.kind"),
            "`kubernetes`: this weir was built without the Kubernetes backend; build it with `cargo build --release --features kubernetes`".into(),
        );
        None
    }
}

/// A `kind: slurm` entry checked into the backend's settings; problems are named under `at`.
/// Nothing is contacted here: a Slurm that is down or refuses the key is found at start and
/// reported by the cluster's worker.
fn slurm_settings(
    b: &BackendEntry,
    at: &str,
    resolve: &dyn Fn(&Path) -> PathBuf,
    problem: &mut dyn FnMut(String, String),
) -> Option<SlurmConfig> {
    let mut ok = true;
    let url = match b.url.as_deref() {
        Some(u) if u.starts_with("http://") && u.len() > "http://".len() => u.to_string(),
        Some(u) => {
            problem(format!("{at}.url"), format!("`{u}`: slurmrestd's address as http://HOST:PORT"));
            ok = false;
            String::new()
        }
        None => {
            problem(format!("{at}.url"), "missing: slurmrestd's address (http://HOST:PORT)".into());
            ok = false;
            String::new()
        }
    };
    let user = match b.user.as_deref() {
        Some(u) if !u.is_empty() && !u.contains(char::is_whitespace) => u.to_string(),
        Some(u) => {
            problem(format!("{at}.user"), format!("`{u}` is not a user name"));
            ok = false;
            String::new()
        }
        None => {
            problem(format!("{at}.user"), "missing: the Slurm user jobs are submitted as".into());
            ok = false;
            String::new()
        }
    };
    let sources = [b.jwt_key.is_some(), b.token_file.is_some(), b.token_env.is_some()];
    let auth = match (&b.jwt_key, &b.token_file, &b.token_env) {
        _ if sources.iter().filter(|s| **s).count() > 1 => {
            problem(format!("{at}.jwt_key"), "give one of jwt_key, token_file, token_env".into());
            None
        }
        (Some(key), _, _) => Some(Auth::JwtKey {
            key_file: resolve(key),
            lifespan: Duration::from_secs(b.jwt_lifespan_seconds.unwrap_or(3600)),
        }),
        (_, Some(file), _) => Some(Auth::TokenFile(resolve(file))),
        (_, _, Some(var)) => Some(Auth::TokenEnv(var.clone())),
        _ => {
            problem(
                format!("{at}.jwt_key"),
                "missing: how to authenticate (jwt_key: the cluster's jwt_hs256.key, token_file or token_env)".into(),
            );
            None
        }
    };
    if b.jwt_lifespan_seconds.is_some_and(|s| s < 60) {
        problem(format!("{at}.jwt_lifespan_seconds"), "below 60: tokens would be renewed constantly".into());
        ok = false;
    }
    if b.poll_interval_ms == Some(0) {
        problem(format!("{at}.poll_interval_ms"), "0: give the interval between two job listings".into());
        ok = false;
    }
    let tag = b.tag.clone().unwrap_or_else(|| "weir".into());
    if tag.is_empty() || !tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        problem(format!("{at}.tag"), format!("`{tag}`: letters, digits, `-` and `_`"));
        ok = false;
    }
    let mut queues = BTreeMap::new();
    for (q, e) in &b.queues {
        if !q.starts_with("root.") {
            problem(format!("{at}.queues.{q}"), "name a leaf queue by its full path (root.…)".into());
            ok = false;
        }
        if e.queue.is_some() {
            problem(
                format!("{at}.queues.{q}.queue"),
                "is a kubernetes backend's field: give partition and qos".into(),
            );
            ok = false;
        }
        queues.insert(q.clone(), SlurmQueue { partition: e.partition.clone(), qos: e.qos.clone() });
    }
    let auth = auth?;
    if !ok {
        return None;
    }
    let mut c = SlurmConfig::new(url, user, auth);
    c.partition = b.partition.clone();
    c.qos = b.qos.clone();
    c.queues = queues;
    c.placement = match b.placement {
        Some(PlacementEntry::Weir) => Placement::Weir,
        Some(PlacementEntry::Backend) | None => Placement::Backend,
    };
    if let Some(ms) = b.poll_interval_ms {
        c.poll_interval = Duration::from_millis(ms);
    }
    c.default_time_limit = b.default_time_limit_seconds.map(Duration::from_secs);
    c.tag = tag;
    Some(c)
}

#[cfg(test)]
#[path = "serve_config_tests.rs"]
mod tests;
