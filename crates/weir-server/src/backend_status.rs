//! What this process knows of each cluster's backend: written by the worker (its supervisor and
//! the running engine actor's health check), read by `GET /v1/clusters`, the dashboard and
//! `weir backends --server`. A bottom module: it imports nothing that serves requests.
//!
//! Only the process that holds a cluster's lease talks to its backend; another server on the
//! same database says `standby` for that cluster, and a server started without a worker says
//! nothing (the field is absent).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;

use weir_api::BackendInfo;

/// A backend's state as this process last saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendState {
    /// The worker is building the backend (connecting, checking settings).
    Starting,
    Healthy,
    /// It could not be set up, or its last health check failed: the cluster's runs wait in
    /// the store (or are refused, if the operator said so) until it is healthy again.
    Unhealthy,
    /// Another server process holds the cluster's lease and drives its backend.
    Standby,
}

impl BackendState {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendState::Starting => "starting",
            BackendState::Healthy => "healthy",
            BackendState::Unhealthy => "unhealthy",
            BackendState::Standby => "standby",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendStatus {
    /// `local`, `slurm`, … as the server file sets it.
    pub kind: String,
    pub state: BackendState,
    /// Why it is unhealthy or on standby, or the last error seen while healthy.
    pub reason: Option<String>,
    pub version: String,
    pub nodes: Option<u64>,
    /// When this was last checked, milliseconds since the Unix epoch.
    pub checked_ms: i64,
    /// A `nodes: from_backend` cluster: the nodes its engine counts now, by the target's names.
    pub counted: Vec<String>,
    /// … and those it counted before that are gone or unusable now (`name (state)`).
    pub gone: Vec<String>,
    /// The last time this process saw the backend unhealthy, and why: kept after it recovers,
    /// so a run taken up late can say what held it (`worker/actor.rs`, `claim`).
    pub last_unhealthy: Option<(i64, String)>,
}

impl BackendStatus {
    /// A cluster's first status: nothing known yet of its version, nodes or node lists.
    pub fn new(kind: &str, state: BackendState, now_ms: i64) -> BackendStatus {
        BackendStatus {
            kind: kind.to_string(),
            state,
            reason: None,
            version: String::new(),
            nodes: None,
            checked_ms: now_ms,
            counted: Vec::new(),
            gone: Vec::new(),
            last_unhealthy: None,
        }
    }

    pub fn to_api(&self) -> BackendInfo {
        BackendInfo {
            kind: self.kind.clone(),
            state: self.state.as_str().into(),
            reason: self.reason.clone(),
            version: self.version.clone(),
            nodes: self.nodes,
            checked_ms: self.checked_ms,
            node_names: self.counted.clone(),
            nodes_gone: self.gone.clone(),
        }
    }
}

/// Every cluster's [`BackendStatus`], by cluster name.
#[derive(Debug, Default)]
pub struct BackendStatuses {
    by_cluster: RwLock<BTreeMap<String, BackendStatus>>,
    /// Clusters whose server file says `when_unhealthy: refuse`.
    refusing: BTreeSet<String>,
    /// Clusters whose backend runs Spark applications (`spark:` stages), and each cluster's
    /// backend kind as the server file sets it (absent: `local`).
    kinds: BTreeMap<String, (&'static str, bool)>,
}

impl BackendStatuses {
    /// `refusing`: the clusters whose submissions are refused while their backend is unhealthy.
    /// `kinds`: each cluster's backend kind from the server file and whether it runs Spark
    /// applications.
    pub fn new(refusing: BTreeSet<String>, kinds: BTreeMap<String, (&'static str, bool)>) -> BackendStatuses {
        BackendStatuses { by_cluster: RwLock::default(), refusing, kinds }
    }

    /// Why `spec` cannot run on `cluster`: a stage that is a Spark application routed to a
    /// cluster whose backend does not run them (it would fail at start; said at submission
    /// instead). `None`: it can.
    pub fn cannot_run(&self, cluster: &str, spec: &weir_model::WorkflowSpec) -> Option<(String, String)> {
        let (kind, spark) = self.kinds.get(cluster).copied().unwrap_or(("local", false));
        if kind == "spark-standalone" {
            // A standalone master runs drivers, not shell commands.
            let stage = spec
                .jobs
                .iter()
                .flat_map(|j| j.stages.iter().map(move |s| (j, s)))
                .find(|(_, s)| s.spark.is_none());
            return stage.map(|(job, stage)| {
                (
                    format!("workflow.jobs.{}.stages.{}.command", job.name, stage.name),
                    format!(
                        "stage `{}.{}` is a command, but cluster `{cluster}` runs Spark applications only (`backend: {{kind: spark-standalone}}`): give the stage `spark:`, or route the workflow to a cluster whose backend runs commands",
                        job.name, stage.name
                    ),
                )
            });
        }
        if spark {
            return None;
        }
        for job in &spec.jobs {
            for stage in &job.stages {
                if stage.spark.is_some() {
                    return Some((
                        format!("workflow.jobs.{}.stages.{}.spark", job.name, stage.name),
                        format!(
                            "stage `{}.{}` is a Spark application, but cluster `{cluster}` runs its tasks on the `{kind}` backend, which does not run Spark; route the workflow to a cluster whose server file says `backend: {{kind: spark-local}}` or `{{kind: spark-standalone}}`",
                            job.name, stage.name
                        ),
                    ));
                }
            }
        }
        None
    }

    /// Why a submission to `cluster` is refused now: its operator asked to refuse while the
    /// backend is unhealthy, and this process saw it unhealthy last. `None`: accept (it waits in
    /// the store until the backend is back, like every submission).
    pub fn refusal(&self, cluster: &str) -> Option<String> {
        if !self.refusing.contains(cluster) {
            return None;
        }
        let status = self.get(cluster)?;
        (status.state == BackendState::Unhealthy).then(|| {
            format!(
                "cluster `{cluster}`'s {} backend is unhealthy ({}); its server file says to refuse submissions meanwhile (`when_unhealthy: refuse`). Try again later",
                status.kind,
                status.reason.as_deref().unwrap_or("no reason given")
            )
        })
    }

    pub fn get(&self, cluster: &str) -> Option<BackendStatus> {
        self.by_cluster.read().unwrap_or_else(|e| e.into_inner()).get(cluster).cloned()
    }

    /// Sets what a health check found, keeping the node lists ([`BackendStatuses::set_nodes`]).
    pub fn set(&self, cluster: &str, mut status: BackendStatus) {
        let mut all = self.by_cluster.write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = all.get_mut(cluster) {
            status.counted = std::mem::take(&mut old.counted);
            status.gone = std::mem::take(&mut old.gone);
            status.last_unhealthy = old.last_unhealthy.take();
        }
        if status.state == BackendState::Unhealthy {
            let why = status.reason.clone().unwrap_or_else(|| "no reason given".into());
            status.last_unhealthy = Some((status.checked_ms, why));
        }
        all.insert(cluster.to_string(), status);
    }

    /// A `nodes: from_backend` cluster's node lists as its engine sees them now.
    pub fn set_nodes(&self, cluster: &str, kind: &str, counted: Vec<String>, gone: Vec<String>, now_ms: i64) {
        let mut all = self.by_cluster.write().unwrap_or_else(|e| e.into_inner());
        let entry = all
            .entry(cluster.to_string())
            .or_insert_with(|| BackendStatus::new(kind, BackendState::Starting, now_ms));
        entry.counted = counted;
        entry.gone = gone;
    }

    /// Sets the state and reason, keeping what was known of the version and nodes.
    pub fn mark(&self, cluster: &str, kind: &str, state: BackendState, reason: Option<String>, now_ms: i64) {
        let mut all = self.by_cluster.write().unwrap_or_else(|e| e.into_inner());
        let entry = all.entry(cluster.to_string()).or_insert_with(|| BackendStatus::new(kind, state, now_ms));
        entry.kind = kind.to_string();
        // Trying again after a failure stays unhealthy, with its reason, until a check passes:
        // a refusal does not flicker while the supervisor retries.
        if state == BackendState::Starting && entry.state == BackendState::Unhealthy {
            entry.checked_ms = now_ms;
            if let Some(seen) = entry.last_unhealthy.as_mut() {
                seen.0 = now_ms;
            }
            return;
        }
        if state == BackendState::Unhealthy {
            entry.last_unhealthy = Some((now_ms, reason.clone().unwrap_or_else(|| "no reason given".into())));
        }
        entry.state = state;
        entry.reason = reason;
        entry.checked_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marking_keeps_what_was_known_of_version_and_nodes() {
        let s = BackendStatuses::default();
        s.set(
            "hpc",
            BackendStatus {
                kind: "slurm".into(),
                state: BackendState::Healthy,
                reason: None,
                version: "22.05.8 (v0.0.38)".into(),
                nodes: Some(4),
                checked_ms: 1,
                counted: Vec::new(),
                gone: Vec::new(),
                last_unhealthy: None,
            },
        );
        assert_eq!(s.get("hpc").unwrap().last_unhealthy, None);
        s.mark("hpc", "slurm", BackendState::Unhealthy, Some("slurmrestd does not answer".into()), 2);
        let got = s.get("hpc").unwrap();
        assert_eq!(got.state, BackendState::Unhealthy);
        assert_eq!(got.reason.as_deref(), Some("slurmrestd does not answer"));
        assert_eq!((got.version.as_str(), got.nodes, got.checked_ms), ("22.05.8 (v0.0.38)", Some(4), 2));
        assert!(s.get("other").is_none());
        assert_eq!(got.to_api().state, "unhealthy");
        // A retry does not make it look healthy or merely starting.
        s.mark("hpc", "slurm", BackendState::Starting, None, 3);
        assert_eq!(s.get("hpc").unwrap().state, BackendState::Unhealthy);
        // The last time it was seen unhealthy, and why, outlive its recovery.
        assert_eq!(s.get("hpc").unwrap().last_unhealthy, Some((3, "slurmrestd does not answer".into())));
        s.set("hpc", BackendStatus::new("slurm", BackendState::Healthy, 4));
        let healthy = s.get("hpc").unwrap();
        assert_eq!(healthy.state, BackendState::Healthy);
        assert_eq!(healthy.last_unhealthy, Some((3, "slurmrestd does not answer".into())));
    }

    #[test]
    fn only_a_refusing_cluster_refuses_and_only_while_unhealthy() {
        let s = BackendStatuses::new(["hpc".to_string()].into(), BTreeMap::new());
        assert_eq!(s.refusal("hpc"), None, "nothing known yet: accepted");
        s.mark("hpc", "slurm", BackendState::Unhealthy, Some("slurmrestd at … cannot be reached".into()), 1);
        s.mark("other", "slurm", BackendState::Unhealthy, Some("down".into()), 1);
        let why = s.refusal("hpc").expect("refused");
        assert!(
            why.contains("`hpc`'s slurm backend is unhealthy (slurmrestd at … cannot be reached)"),
            "{why}"
        );
        assert_eq!(s.refusal("other"), None, "waits: its file does not say refuse");
        s.mark("hpc", "slurm", BackendState::Healthy, None, 2);
        assert_eq!(s.refusal("hpc"), None);
    }
}
