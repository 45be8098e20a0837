//! What a Slurm backend is built with: where slurmrestd listens, how to authenticate, where
//! jobs go and how often their states are read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How requests to slurmrestd are authenticated. The token itself is never logged, written
/// back or shown in an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// weir mints its own JWTs (HS256, claims `exp`, `iat`, `sun`) with the cluster's
    /// `jwt_hs256.key` (the file slurmctld's `AuthAltParameters=jwt_key=` names) and renews
    /// them well before they expire.
    JwtKey { key_file: PathBuf, lifespan: Duration },
    /// A token the operator made (`scontrol token`), read from a file (re-read when it is
    /// renewed, so it can be rotated in place) …
    TokenFile(PathBuf),
    /// … or from an environment variable of the server.
    TokenEnv(String),
}

/// Who decides the node a task runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// weir admits and orders; Slurm's scheduler picks the node inside the partition (and QOS)
    /// that weir's leaf queue maps to.
    #[default]
    Backend,
    /// weir's engine picks the node and the job is pinned to it. Needs a slurmrestd that can
    /// name nodes on submit (`required_nodes`, v0.0.39 and later); refused on v0.0.38.
    Weir,
}

/// Where one weir leaf queue's jobs go in Slurm.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlurmQueue {
    pub partition: Option<String>,
    pub qos: Option<String>,
}

/// Everything a [`SlurmBackend`](crate::SlurmBackend) is built with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmConfig {
    /// slurmrestd's base URL, e.g. `http://127.0.0.1:6820` (plain HTTP: put a TLS proxy in front
    /// when it crosses machines).
    pub url: String,
    /// The Slurm user jobs are submitted as (`X-SLURM-USER-NAME`, the JWT's `sun`).
    pub user: String,
    pub auth: Auth,
    /// The partition for queues not named in `queues`; `None`: Slurm's default partition.
    pub partition: Option<String>,
    /// The QOS for queues not named in `queues`.
    pub qos: Option<String>,
    /// weir leaf queue path (`root.analytics.tier1`) → its Slurm partition and QOS.
    pub queues: BTreeMap<String, SlurmQueue>,
    pub placement: Placement,
    /// One `/jobs` call per interval reads every watched job's state (with `end_markers`, at
    /// most one per interval, and less often while a listing takes long).
    pub poll_interval: Duration,
    /// Each job's script writes its command's exit status into a marker file beside its stdout;
    /// the poller ends the attempt by it, and lists every job only now and then to check the
    /// markers and find the ends they miss — a listing of every job Slurm keeps costs
    /// slurmctld, slurmrestd and weir time in proportion to that number (MBs of JSON for a few
    /// thousand jobs). `false`:
    /// ends are found by listing alone, every `poll_interval` (kept for comparison: `weir bench
    /// serve --slurm-listing-only`).
    pub end_markers: bool,
    /// Time limit for tasks whose stage gives no walltime; `None`: the partition's default.
    pub default_time_limit: Option<Duration>,
    /// Job names and comments carry this tag beside the attempt id, so two weir installations
    /// sharing one Slurm never adopt each other's jobs.
    pub tag: String,
    /// Each request to slurmrestd gives up after this long.
    pub request_timeout: Duration,
}

impl SlurmConfig {
    pub fn new(url: impl Into<String>, user: impl Into<String>, auth: Auth) -> SlurmConfig {
        SlurmConfig {
            url: url.into(),
            user: user.into(),
            auth,
            partition: None,
            qos: None,
            queues: BTreeMap::new(),
            placement: Placement::Backend,
            poll_interval: Duration::from_secs(1),
            end_markers: true,
            default_time_limit: None,
            tag: "weir".into(),
            request_timeout: Duration::from_secs(30),
        }
    }

    /// The partition and QOS a task of leaf queue `queue` is submitted to.
    pub(crate) fn target(&self, queue: Option<&str>) -> SlurmQueue {
        let mapped = queue.and_then(|q| self.queues.get(q));
        SlurmQueue {
            partition: mapped.and_then(|m| m.partition.clone()).or_else(|| self.partition.clone()),
            qos: mapped.and_then(|m| m.qos.clone()).or_else(|| self.qos.clone()),
        }
    }
}
