//! The clusters this server knows (validated cluster files from the store) and the routing
//! table (the resource DB): a workflow, or a project at a tier, → cluster and leaf queue.
//! Kept in memory, refreshed from the store every second so that several server processes on
//! one database agree.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use weir_model::ClusterConfig;
use weir_store::{JobStore, RouteRow};

use crate::config::Stop;
use crate::error::ServerError;

/// A cluster to load at start: a name and a cluster file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSource {
    pub name: String,
    pub yaml: String,
    /// Where the text came from, for errors.
    pub file: String,
}

/// A one-node cluster the size of this machine with a `root.default` queue: what `weir serve`
/// runs with when given no cluster file.
pub fn default_cluster_yaml(cpu_millis: u64, memory_mib: u64) -> String {
    format!(
        "# One node the size of this machine; every workflow runs in root.default.\n\
         version: 1\n\
         nodes:\n  - count: 1\n    resources: {{cpu: {cpu_millis}, memory: {memory_mib}}}\n\
         queues:\n  - {{name: default}}\n"
    )
}

pub(crate) fn validate_source(
    c: &ClusterSource,
    users: &crate::isolation::TaskUsers,
) -> Result<ClusterConfig, ServerError> {
    let config = ClusterConfig::from_yaml(&c.file, &c.yaml)?;
    let mut acl = crate::acl::unenforceable(&config);
    acl.extend(users.check(&config));
    if !acl.is_empty() {
        return Err(ServerError::Model(weir_model::ModelError::Invalid {
            file: c.file.clone(),
            problems: acl.into_iter().map(|(path, message)| weir_model::Problem { path, message }).collect(),
        }));
    }
    weir_engine::Engine::new(config.clone())
        .map_err(|source| ServerError::Engine { cluster: c.name.clone(), source })?;
    Ok(config)
}

#[derive(Clone)]
pub struct LoadedCluster {
    pub config: Arc<ClusterConfig>,
    pub version: i64,
}

#[derive(Default)]
struct Tables {
    clusters: BTreeMap<String, LoadedCluster>,
    routes: BTreeMap<String, RouteRow>,
}

/// Clusters and routes, shared by the API and the worker.
#[derive(Default)]
pub struct Registry {
    tables: RwLock<Tables>,
}

/// Where a workflow goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed {
    pub cluster: String,
    /// Set when a route named the queue; otherwise the workflow's own `queue` or `project`
    /// is placed by the cluster's rules.
    pub queue: Option<String>,
    /// The project of the `project:P:TIER` route that matched (the operator placed that
    /// project's work in `queue`).
    pub by_project: Option<String>,
}

impl Registry {
    pub async fn load(store: &dyn JobStore) -> Result<Registry, ServerError> {
        let r = Registry::default();
        r.refresh(store).await?;
        Ok(r)
    }

    /// Re-read clusters (parsing only those whose version moved) and routes.
    pub async fn refresh(&self, store: &dyn JobStore) -> Result<(), ServerError> {
        let rows = store.clusters().await?;
        let routes = store.routes().await?;
        let known: BTreeMap<String, i64> =
            self.read(|t| t.clusters.iter().map(|(k, v)| (k.clone(), v.version)).collect());
        let mut parsed = BTreeMap::new();
        for row in rows {
            if known.get(&row.name) == Some(&row.version) {
                continue;
            }
            match ClusterConfig::from_yaml(&format!("cluster `{}`", row.name), &row.config) {
                Ok(c) => {
                    parsed.insert(row.name, LoadedCluster { config: Arc::new(c), version: row.version });
                }
                Err(e) => eprintln!(
                    "weir serve: stored cluster `{}` does not validate, kept the last good one: {e}",
                    row.name
                ),
            }
        }
        if let Ok(mut t) = self.tables.write() {
            t.clusters.extend(parsed);
            t.routes = routes.into_iter().map(|r| (r.key.clone(), r)).collect();
        }
        Ok(())
    }

    fn read<T>(&self, f: impl FnOnce(&Tables) -> T) -> T {
        match self.tables.read() {
            Ok(t) => f(&t),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    pub fn cluster(&self, name: &str) -> Option<LoadedCluster> {
        self.read(|t| t.clusters.get(name).cloned())
    }

    pub fn cluster_names(&self) -> Vec<String> {
        self.read(|t| t.clusters.keys().cloned().collect())
    }

    pub fn put_cluster(&self, name: &str, config: ClusterConfig, version: i64) {
        if let Ok(mut t) = self.tables.write() {
            t.clusters.insert(name.to_string(), LoadedCluster { config: Arc::new(config), version });
        }
    }

    pub fn put_route(&self, route: RouteRow) {
        if let Ok(mut t) = self.tables.write() {
            t.routes.insert(route.key.clone(), route);
        }
    }

    pub fn delete_route(&self, key: &str) {
        if let Ok(mut t) = self.tables.write() {
            t.routes.remove(key);
        }
    }

    /// Route a workflow: a `workflow:NAME` route, else a `project:P:TIER` route, else the
    /// default cluster (the only one, or the one named `default`), where the cluster file's
    /// placement rules decide.
    pub fn route(&self, workflow: &str, project: Option<&str>, tier: u8) -> Option<Routed> {
        self.read(|t| {
            let by = |key: String, by_project: Option<&str>| {
                t.routes.get(&key).map(|r| Routed {
                    cluster: r.cluster.clone(),
                    queue: Some(r.queue.clone()),
                    by_project: by_project.map(str::to_string),
                })
            };
            by(format!("workflow:{workflow}"), None)
                .or_else(|| project.and_then(|p| by(format!("project:{p}:{tier}"), Some(p))))
                .or_else(|| {
                    let name = if t.clusters.len() == 1 {
                        t.clusters.keys().next().cloned()
                    } else {
                        t.clusters.contains_key("default").then(|| "default".to_string())
                    };
                    name.map(|cluster| Routed { cluster, queue: None, by_project: None })
                })
        })
    }
}

pub(crate) async fn refresh_loop(
    store: Arc<dyn JobStore>,
    registry: Arc<Registry>,
    mut stop: watch::Receiver<Stop>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
        if let Err(e) = registry.refresh(store.as_ref()).await {
            eprintln!("weir serve: cannot refresh clusters and routes: {e}");
        }
    }
}
