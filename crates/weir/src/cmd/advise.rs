//! `weir advise`: which workflows to move between clusters, from their simulated history.
//!
//! This file reads the clusters and workloads (files, or a server's configuration and replayed
//! runs) and prints the advice; the advisor itself is `weir_planner::advise`, which the
//! server's scheduled advisor runs too.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use weir_model::{ClusterConfig, Duration, Workload};
use weir_planner::{Advice, AdviseSettings, ClusterState, Site};

use crate::cmd::simulate::parse_duration;
use crate::{emit, load_cluster};

#[derive(Debug, Args)]
#[command(
    about = "Which workflows to move between clusters to even out their CPU and memory use",
    long_about = "Which workflows to move between clusters to even out their CPU and memory use \
(reference 000's balancing advisor), from the simulated history of each cluster running its own \
workload.\n\n\
Each cluster (--cluster NAME=FILE) runs its workload (--workload NAME=FILE) in the simulator for \
--until. Per cluster, the imbalance is CPU use minus memory use over the window (positive: memory \
idle while the cores are busy; negative: cores idle while memory is full). Each workflow's use is \
its task attempts' resources × time. Moves that would even the clusters out are tried in \
the simulator: the source without the workflow, the target with it (in the leaf of the same path, \
else the first leaf of the same tier). A move is advised when the sum of the imbalances falls (by a tenth at least) and \
tier-1 SLO success does not; the advised moves are then applied together, one by one, each kept \
only if it still helps, and the end state is shown. Apply a move on a server with `weir routes set \
workflow:NAME --cluster C --queue Q`.",
    after_help = "Examples:\n  \
weir advise --cluster cpu=examples/advise/cpu-rich.yaml --workload cpu=examples/advise/cpu-rich-workload.yaml \\\n    \
--cluster mem=examples/advise/mem-rich.yaml --workload mem=examples/advise/mem-rich-workload.yaml --until 1d\n  \
weir advise ... --price cpu=2.40 --price mem=3.10 --json advice.json"
)]
pub struct AdviseArgs {
    /// A cluster: NAME=FILE (at least two; or --server).
    #[arg(long = "cluster", value_name = "NAME=FILE", value_parser = named_path, required_unless_present = "server")]
    clusters: Vec<(String, PathBuf)>,
    /// The workload each cluster runs now: NAME=FILE, one per cluster.
    #[arg(long = "workload", value_name = "NAME=FILE", value_parser = named_path, required_unless_present = "server")]
    workloads: Vec<(String, PathBuf)>,
    /// Advise on a running server's clusters instead: each one's cluster file in force and the
    /// runs it recorded over the last --until, replayed (GET /v1/replay, as `weir plan --server
    /// --validate` does). The moves are printed as the `weir routes set` commands that make them.
    #[arg(long, value_name = "URL", conflicts_with_all = ["clusters", "workloads"])]
    server: Option<String>,
    /// With --server: the local data directory whose admin.token is used when $WEIR_TOKEN is
    /// unset.
    #[arg(long, value_name = "DIR", default_value = "weir-data", requires = "server")]
    data_dir: PathBuf,
    /// With an https:// --server whose certificate a private CA signed: that CA's certificate.
    #[arg(long, value_name = "FILE", requires = "server")]
    ca_cert: Option<PathBuf>,
    /// The window each cluster is simulated for (the history), e.g. 1d; with --server, the
    /// span of recorded runs replayed, ending now.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1d")]
    until: Duration,
    /// Seed of the simulations' random draws (the same for before and after).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many candidate moves to try in the simulator (the most promising first).
    #[arg(long, default_value_t = 6, value_name = "N")]
    candidates: usize,
    /// Price of one node-hour of a cluster, NAME=PRICE: shows the cost per used core-hour.
    #[arg(long = "price", value_name = "NAME=PRICE", value_parser = named_price)]
    prices: Vec<(String, f64)>,
    /// Also write the advice as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn named_path(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.to_string(), PathBuf::from(p))),
        _ => Err(format!("`{s}`: expected NAME=FILE")),
    }
}

fn named_price(s: &str) -> Result<(String, f64), String> {
    let Some((n, p)) = s.split_once('=') else { return Err(format!("`{s}`: expected NAME=PRICE")) };
    match p.parse::<f64>() {
        Ok(v) if v >= 0.0 && v.is_finite() && !n.is_empty() => Ok((n.to_string(), v)),
        _ => Err(format!("`{s}`: the price must be a number ≥ 0 (e.g. cpu=2.40)")),
    }
}

/// The advice as `--json` writes it: weir-planner's, and whether it came from a server.
#[derive(Debug, Serialize)]
struct Written<'a> {
    /// Made from a server's recorded runs.
    server: bool,
    #[serde(flatten)]
    advice: &'a Advice,
}

pub fn run(args: &AdviseArgs) -> Result<()> {
    let sites = match &args.server {
        Some(server) => load_server(args, server)?,
        None => load(args)?,
    };
    let prices: BTreeMap<String, f64> = args.prices.iter().cloned().collect();
    for name in prices.keys() {
        if !sites.iter().any(|s| &s.name == name) {
            bail!("--price {name}=…: no cluster is named `{name}` (--cluster NAME=FILE)");
        }
    }
    let settings =
        AdviseSettings { window: args.until, seed: args.seed, candidates: args.candidates, prices };
    let advice = weir_planner::advise(&sites, &settings, &mut |line| eprintln!("weir advise: {line}"))?;
    let server = args.server.is_some();
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&Written { server, advice: &advice })
            .context("cannot write the advice as JSON")?;
        std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    emit(&render(&advice, server, args.json.as_deref()))
}

fn load(args: &AdviseArgs) -> Result<Vec<Site>> {
    if args.clusters.len() < 2 {
        bail!("give at least two clusters (--cluster NAME=FILE twice): advice moves work between clusters");
    }
    let mut sites: Vec<Site> = Vec::new();
    for (name, path) in &args.clusters {
        if sites.iter().any(|s| &s.name == name) {
            bail!("--cluster {name}=…: the name `{name}` is given twice");
        }
        let config = load_cluster(path)?;
        let Some((_, wpath)) = args.workloads.iter().find(|(n, _)| n == name) else {
            bail!("--cluster {name}={}: no --workload {name}=FILE for it", path.display());
        };
        let workload = load_workload(wpath, &config)?;
        sites.push(Site { name: name.clone(), config, workflows: workload.workflows, live: false });
    }
    for (name, path) in &args.workloads {
        if !sites.iter().any(|s| &s.name == name) {
            bail!("--workload {name}={}: no --cluster is named `{name}`", path.display());
        }
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &sites {
        for w in &s.workflows {
            if let Some(other) = seen.insert(&w.name, &s.name) {
                bail!(
                    "workflow `{}` is in the workloads of both {other} and {}: names must be unique to say which to move",
                    w.name,
                    s.name
                );
            }
        }
    }
    Ok(sites)
}

/// Every cluster of a running server with the runs it recorded over the last `--until`, as the
/// workload the simulator replays. A cluster without recorded runs still counts (it can take
/// work); a workflow that ran on several clusters is in each one's workload.
fn load_server(args: &AdviseArgs, server: &str) -> Result<Vec<Site>> {
    let conn = crate::cmd::client::Connection {
        server: Some(server.to_string()),
        data_dir: args.data_dir.clone(),
        ca_cert: args.ca_cert.clone(),
    };
    server_sites(&conn, args.until)
}

/// Every cluster of the server `conn` names, each with the runs it recorded over the last
/// `window` as its workflows (`weir advise --server`, `weir plan --server --routes-from-history`).
pub fn server_sites(conn: &crate::cmd::client::Connection, window: Duration) -> Result<Vec<Site>> {
    let server = conn.server.clone().unwrap_or_default();
    let client = conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let until = weir_server::now_ms();
    let since = until - window.as_millis().min(i64::MAX as u64 / 2) as i64;
    rt.block_on(async {
        let get = |path: String| {
            let client = &client;
            async move {
                let resp = client.checked(client.request(reqwest::Method::GET, &path)).await?;
                resp.text().await.with_context(|| format!("cannot read the answer to GET {path}"))
            }
        };
        let list: weir_api::ClusterList =
            client.send(client.request(reqwest::Method::GET, "/v1/clusters")).await?;
        if list.clusters.len() < 2 {
            bail!("{server} serves {} cluster(s): advice moves work between clusters", list.clusters.len());
        }
        let mut sites = Vec::new();
        for c in &list.clusters {
            let name = &c.name;
            let text = get(format!("/v1/clusters/{name}/config")).await?;
            let config = ClusterConfig::from_yaml(&format!("cluster `{name}` of {server}"), &text)?;
            let yaml = get(format!("/v1/replay?cluster={name}&since={since}&until={until}")).await?;
            // A cluster that ran nothing in the window still counts: it can take work. (A
            // workload file must have a workflow, so an empty replay is not parsed as one.)
            let listed: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap_or_default();
            let workflows = if listed["workflows"].as_array().is_none_or(Vec::is_empty) {
                eprintln!("weir: cluster {name} recorded no run in the window");
                Vec::new()
            } else {
                Workload::from_yaml(&format!("the runs cluster `{name}` recorded"), &yaml, &config)?.workflows
            };
            sites.push(Site { name: name.clone(), config, workflows, live: true });
        }
        Ok(sites)
    })
}

fn load_workload(path: &Path, cluster: &ClusterConfig) -> Result<Workload> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Workload::from_yaml(&path.display().to_string(), &text, cluster)?)
}

fn render(a: &Advice, server: bool, json: Option<&Path>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "clusters over {} (seed {}), as they run now:", a.window, a.seed);
    states(&mut out, &a.before);
    let _ = writeln!(out, "\nmoves tried in the simulator (best first):");
    if a.moves.is_empty() {
        let _ = writeln!(out, "  none: no workflow's move would even the clusters out");
    }
    for m in &a.moves {
        let _ = writeln!(
            out,
            "  {} {} {} → {} ({}): {}",
            if m.advised { "advised    " } else { "not advised" },
            m.workflow,
            m.from,
            m.to,
            if m.queue.is_empty() { "-" } else { &m.queue },
            m.why
        );
        if server && m.advised {
            let _ = writeln!(
                out,
                "              weir routes set workflow:{} --cluster {} --queue {}",
                m.workflow, m.to, m.queue
            );
        }
    }
    if a.together.is_empty() {
        let _ = writeln!(out, "\nno move is advised");
    } else {
        let _ = writeln!(out, "\nthe advised moves together ({}):", a.together.join("; "));
        states(&mut out, &a.after);
        if server {
            let _ = writeln!(out, "to make these moves (each run after it goes to the new cluster):");
            for m in a.kept() {
                let _ = writeln!(
                    out,
                    "  weir routes set workflow:{} --cluster {} --queue {}",
                    m.workflow, m.to, m.queue
                );
            }
        } else {
            let _ = writeln!(
                out,
                "apply one on a server: weir routes set workflow:NAME --cluster CLUSTER --queue QUEUE"
            );
        }
    }
    if let Some(p) = json {
        let _ = writeln!(out, "wrote {}", p.display());
    }
    out
}

fn states(out: &mut String, states: &[ClusterState]) {
    let _ = writeln!(
        out,
        "  {:<12} {:>6} {:>7} {:>10}  {:<22} cost/used core-h",
        "cluster", "cpu", "memory", "imbalance", "tier-1 SLO met"
    );
    for s in states {
        let slo = if s.tier1_runs == 0 {
            "-".to_string()
        } else {
            format!(
                "{}/{} ({:.1}%)",
                s.tier1_met,
                s.tier1_runs,
                100.0 * s.tier1_met as f64 / s.tier1_runs as f64
            )
        };
        let _ = writeln!(
            out,
            "  {:<12} {:>5.1}% {:>6.1}% {:>+9.1}   {:<22} {}",
            s.cluster,
            s.cpu_used * 100.0,
            s.memory_used * 100.0,
            s.imbalance * 100.0,
            slo,
            s.cost_per_used_core_hour.map_or("-".to_string(), |c| format!("{c:.3}"))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prices_are_checked() {
        assert!(named_path("a=x.yaml").is_ok());
        assert!(named_path("x.yaml").unwrap_err().contains("NAME=FILE"));
        assert_eq!(named_price("a=2.5").unwrap(), ("a".to_string(), 2.5));
        assert!(named_price("a=-1").unwrap_err().contains("≥ 0"));
    }
}
