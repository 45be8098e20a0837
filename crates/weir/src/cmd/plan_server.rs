//! `weir plan --server URL`: fetch what a plan needs from a running server — the cluster file
//! in force (and its version), the recorded usage of the window, what jobs waited for (per
//! leaf and reason), the recorded runs as a workload to replay, and the routes to the cluster — and keep a copy of each in the output
//! directory, so the plan can be reproduced and `weir apply` knows where it came from.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use weir_api::{ClusterList, Route, RouteList};
use weir_model::{ClusterConfig, Workload};
use weir_planner::UsageHistory;

use super::client::{Client, Connection};

/// `source.json`: where a plan came from.
#[derive(Debug, Serialize, Deserialize)]
pub struct Source {
    pub server: String,
    pub cluster: String,
    /// The configuration version the plan was made from; `weir apply` refuses a cluster that
    /// has moved on since.
    pub version: i64,
    pub since_ms: i64,
    pub until_ms: i64,
}

/// `routes.yaml`: the routes to the cluster after the plan (exactly these).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutesFile {
    pub version: u32,
    pub cluster: String,
    #[serde(default)]
    pub routes: Vec<RouteEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteEntry {
    /// `workflow:NAME` or `project:PROJECT:TIER`.
    pub key: String,
    /// A leaf queue of the cluster.
    pub queue: String,
}

impl RoutesFile {
    pub fn to_routes(&self) -> Vec<Route> {
        self.routes
            .iter()
            .map(|r| Route { key: r.key.clone(), cluster: self.cluster.clone(), queue: r.queue.clone() })
            .collect()
    }
}

pub struct Fetched {
    pub source: Source,
    pub cluster: ClusterConfig,
    pub history: UsageHistory,
    pub history_name: String,
    /// The recorded runs to replay (`--validate`), if asked for and any.
    pub workload: Option<Workload>,
    /// What jobs waited for in the window, per leaf and reason (`waits.csv`).
    pub waits: Vec<weir_server::QueueWait>,
}

async fn text(client: &Client, path: &str) -> Result<String> {
    let resp = client.checked(client.request(reqwest::Method::GET, path)).await?;
    resp.text().await.with_context(|| format!("cannot read the answer to GET {path}"))
}

/// Fetch everything for a plan of `name` (or the server's only/default cluster) over
/// `window_ms` ending now, writing the copies into `out`.
pub fn fetch(
    conn: &Connection,
    name: Option<&str>,
    window_ms: u64,
    replay: bool,
    out: &Path,
) -> Result<Fetched> {
    let client = conn.client()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let list: ClusterList = client.send(client.request(reqwest::Method::GET, "/v1/clusters")).await?;
        let cluster = match name {
            Some(n) => list.clusters.iter().find(|c| c.name == n).with_context(|| {
                let names: Vec<&str> = list.clusters.iter().map(|c| c.name.as_str()).collect();
                format!("--server-cluster {n}: the server has no such cluster (it has {})", names.join(", "))
            })?,
            None if list.clusters.len() == 1 => &list.clusters[0],
            None => match list.clusters.iter().find(|c| c.name == "default") {
                Some(c) => c,
                None => bail!("the server has several clusters: name one with --server-cluster"),
            },
        };
        let name = cluster.name.clone();
        let config_text = text(&client, &format!("/v1/clusters/{name}/config")).await?;
        let config = ClusterConfig::from_yaml(&format!("cluster `{name}` of the server"), &config_text)?;
        let until = weir_server::now_ms();
        let since = until - window_ms.min(i64::MAX as u64 / 2) as i64;
        let window = format!("cluster={name}&since={since}&until={until}");
        std::fs::create_dir_all(out).with_context(|| format!("--out: cannot create {}", out.display()))?;
        let write = |file: &str, body: &str| -> Result<()> {
            let path = out.join(file);
            std::fs::write(&path, body).with_context(|| format!("--out: cannot write {}", path.display()))
        };
        write("current.yaml", &config_text)?;
        let usage = text(&client, &format!("/v1/usage?{window}")).await?;
        write("usage.csv", &usage)?;
        if usage.lines().skip(1).all(|l| l.trim().is_empty()) {
            bail!(
                "the server has recorded no queue usage for cluster `{name}` in the window: a plan is made from \
                 what the queues used, so let work run first (a day of it shows the daily peaks) and plan again"
            );
        }
        let history_name = out.join("usage.csv").display().to_string();
        let history =
            UsageHistory::read_csv(usage.as_bytes(), &history_name, super::plan::secret_name_key())?;
        write("runs.csv", &text(&client, &format!("/v1/runs.csv?{window}")).await?)?;
        let waits_text = text(&client, &format!("/v1/waits.csv?{window}")).await?;
        write("waits.csv", &waits_text)?;
        let waits = weir_server::read_waits_csv(&out.join("waits.csv").display().to_string(), &waits_text)
            .map_err(anyhow::Error::msg)?;
        let workload = if replay {
            let yaml = text(&client, &format!("/v1/replay?{window}")).await?;
            write("workload.yaml", &yaml)?;
            let name = out.join("workload.yaml").display().to_string();
            let w = Workload::from_yaml(&name, &yaml, &config)?;
            (!w.workflows.is_empty()).then_some(w)
        } else {
            None
        };
        let routes: RouteList = client.send(client.request(reqwest::Method::GET, "/v1/routes")).await?;
        let file = RoutesFile {
            version: 1,
            cluster: name.clone(),
            routes: routes
                .routes
                .into_iter()
                .filter(|r| r.cluster == name)
                .map(|r| RouteEntry { key: r.key, queue: r.queue })
                .collect(),
        };
        let header = format!(
            "# The routes to cluster `{name}` once this plan is applied: exactly these (routes to it\n\
             # not listed are removed). Edit to move workflows; `weir apply` checks every queue.\n"
        );
        write(
            "routes.yaml",
            &(header + &serde_saphyr::to_string(&file).context("cannot write routes.yaml")?),
        )?;
        let source = Source {
            server: client.url(""),
            cluster: name,
            version: cluster.version,
            since_ms: since,
            until_ms: until,
        };
        write("source.json", &(serde_json::to_string_pretty(&source)? + "\n"))?;
        Ok(Fetched { source, cluster: config, history, history_name, workload, waits })
    })
}
