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

/// `routes-from-history.json`: why routes were added to `routes.yaml`.
#[derive(Debug, Serialize)]
struct HistoryRoutes<'a> {
    cluster: &'a str,
    /// Every workflow's best-fitting cluster by shape.
    fits: &'a [weir_planner::Fit],
    /// The routes added: workflows that ran elsewhere and fit this cluster best.
    added: Vec<&'a weir_planner::Fit>,
    /// Every cluster replayed as it runs now, and with those workflows moved here.
    before: &'a [weir_planner::ClusterState],
    after: &'a [weir_planner::ClusterState],
}

/// `--routes-from-history` (reference 001's resource DB): replays every cluster's recorded runs,
/// finds each workflow's best-fitting cluster by shape, and adds to `out/routes.yaml` a route
/// for each workflow that ran elsewhere and fits `cluster` best, replaying every cluster with
/// those moves to show the effect. Returns what to tell the user.
pub fn routes_from_history(
    conn: &Connection,
    cluster: &str,
    window_ms: u64,
    seed: u64,
    out: &Path,
) -> Result<String> {
    let window = weir_model::Duration(window_ms);
    let sites = super::advise::server_sites(conn, window)?;
    let settings = weir_planner::AdviseSettings { window, seed, candidates: 0, prices: Default::default() };
    let before = weir_planner::advise::states(&sites, &settings)?;
    let fits = weir_planner::best_fits(&sites, &before);
    let added: Vec<&weir_planner::Fit> =
        fits.iter().filter(|f| f.to == cluster && f.from != cluster).collect();
    let moved: Vec<weir_planner::Fit> = added.iter().map(|f| (*f).clone()).collect();
    let after = weir_planner::advise::states(&weir_planner::with_fits(&sites, &moved), &settings)?;
    let path = out.join("routes.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut file: RoutesFile = weir_model::parse_yaml(&path.display().to_string(), &text)?;
    for f in &added {
        let key = format!("workflow:{}", f.workflow);
        file.routes.retain(|r| r.key != key);
        file.routes.push(RouteEntry { key, queue: f.queue.clone() });
    }
    let header = format!(
        "# The routes to cluster `{cluster}` once this plan is applied: exactly these (routes to it\n\
         # not listed are removed). Edit to move workflows; `weir apply` checks every queue.\n\
         # Added from the recorded history (routes-from-history.json): {}\n",
        if added.is_empty() {
            "none".to_string()
        } else {
            added.iter().map(|f| f.workflow.as_str()).collect::<Vec<_>>().join(", ")
        }
    );
    std::fs::write(&path, header + &serde_saphyr::to_string(&file).context("cannot write routes.yaml")?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let report = HistoryRoutes { cluster, fits: &fits, added, before: &before, after: &after };
    let json_path = out.join("routes-from-history.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let mut said =
        String::from("routes from the recorded history (each workflow to the cluster whose memory per core fits its use):\n");
    for f in &fits {
        let what = if f.to == f.from {
            "stays".to_string()
        } else if f.to == cluster {
            format!("route added: {} → {cluster} ({})", f.from, f.queue)
        } else {
            format!("fits {} better (plan that cluster to route it there)", f.to)
        };
        said.push_str(&format!(
            "  {}: {:.1} GiB per core, on {} ({:.1} GiB per core): {what}\n",
            f.workflow, f.gib_per_core, f.to, f.target_gib_per_core
        ));
    }
    if !report.added.is_empty() {
        let imbalance =
            |v: &[weir_planner::ClusterState]| v.iter().map(|s| s.imbalance.abs()).sum::<f64>() * 100.0;
        let tier1 = |v: &[weir_planner::ClusterState]| {
            let (r, m) = v.iter().fold((0, 0), |(r, m), s| (r + s.tier1_runs, m + s.tier1_met));
            if r == 0 {
                "-".to_string()
            } else {
                format!("{m}/{r}")
            }
        };
        said.push_str(&format!(
            "  replayed with the added routes: summed cpu−memory imbalance {:.1} → {:.1} points, tier-1 SLO met {} → {}\n",
            imbalance(&before),
            imbalance(&after),
            tier1(&before),
            tier1(&after)
        ));
    }
    said.push_str(&format!("  wrote {}\n", json_path.display()));
    Ok(said)
}
