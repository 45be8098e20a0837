//! `weir advise`: from what a server recorded, how balanced each cluster's cpu and memory use
//! is (the imbalance that leaves cores idle while memory is full, or the reverse), and the
//! workflows whose move to another cluster would balance them best.
//!
//! Each workflow's use is read from the server's replay of its recorded runs (`/v1/replay`: per
//! run, each stage's tasks × resources × recorded duration); a cluster's use is the sum of its
//! workflows'. A move takes a workflow's use off one cluster and onto another; the score is the
//! sum over clusters of |memory utilization − cpu utilization|, lower is better. A move is
//! proposed only where the workflow's widest task fits a node of the target and the target
//! stays within its capacity.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use weir_api::ClusterList;
use weir_model::{Arrival, ClusterConfig, Workload};

use super::client::{Client, Connection};
use crate::emit;

#[derive(Debug, Args)]
#[command(
    about = "Show each cluster's cpu/memory imbalance and the workflows whose move would balance them",
    long_about = "Read the recorded runs of every cluster of a server over a window and show, per \
cluster, its cpu and memory utilization (what its runs' tasks held, over its capacity and the \
window) and the imbalance between them: memory full while cores are idle, or the reverse. Then \
rank the moves of one workflow from its cluster to another by how much they would lower the \
clusters' summed imbalance, with each cluster's utilization after the move. A move is proposed \
only if the workflow's widest task fits a node of the target and the target stays within its \
capacity. With --price, each cluster's cost over the window and per used instance-hour.\n\n\
Moving a workflow is a route change: weir routes set workflow:NAME --cluster C --queue Q \
(or, to check it first, weir submit FILE --dry-run --cluster C).\n\n\
Examples:\n  weir advise\n  weir advise --window 30d --price cpu-rich=0.40 --price mem-rich=0.55\n  \
weir advise --json"
)]
pub struct AdviseArgs {
    /// How far back to read the recorded runs.
    #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = crate::cmd::simulate::parse_duration)]
    window: weir_model::Duration,
    /// A cluster's price per instance (node) hour: CLUSTER=PRICE (repeatable).
    #[arg(long = "price", value_name = "CLUSTER=PRICE")]
    prices: Vec<String>,
    /// Show at most this many moves.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// The advice as JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Connection,
}

/// Millicore-seconds and MiB-seconds (a use), or millicores and MiB (a size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Amount {
    pub cpu: f64,
    pub memory: f64,
}

/// What advising needs of a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub name: String,
    pub nodes: u64,
    /// Every node's resources together.
    pub total: Amount,
    /// The largest node of each resource (what one task can have at most).
    pub largest: Amount,
    /// Per instance-hour, if given.
    pub price: Option<f64>,
}

/// One workflow's recorded use on one cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkflowUse {
    pub workflow: String,
    pub cluster: String,
    pub runs: u64,
    pub used: Amount,
    /// Its widest task.
    pub task: Amount,
}

/// Utilization of one cluster: each resource's use over capacity × window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Utilization {
    pub cpu: f64,
    pub memory: f64,
}

impl Utilization {
    /// Memory minus cpu: above 0 memory is the tighter resource and cores sit idle.
    pub fn imbalance(&self) -> f64 {
        self.memory - self.cpu
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterAdvice {
    pub cluster: String,
    pub nodes: u64,
    pub utilization: Utilization,
    pub imbalance: f64,
    /// The window's cost (nodes × hours × price), with --price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The cost per instance-hour actually used (by the dominant resource), with --price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_used_instance_hour: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Move {
    pub workflow: String,
    pub from: String,
    pub to: String,
    pub runs: u64,
    /// The clusters' summed |imbalance| now and after the move.
    pub score_before: f64,
    pub score_after: f64,
    pub from_after: Utilization,
    pub to_after: Utilization,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advice {
    pub window_seconds: f64,
    pub clusters: Vec<ClusterAdvice>,
    pub moves: Vec<Move>,
}

fn utilization(shape: &Shape, used: Amount, window_s: f64) -> Utilization {
    let of = |u: f64, cap: f64| if cap <= 0.0 || window_s <= 0.0 { 0.0 } else { u / (cap * window_s) };
    Utilization { cpu: of(used.cpu, shape.total.cpu), memory: of(used.memory, shape.total.memory) }
}

/// The advice for `shapes` given the recorded `uses` over `window_s` seconds. Pure.
pub fn advise(shapes: &[Shape], uses: &[WorkflowUse], window_s: f64) -> Advice {
    let mut used: BTreeMap<&str, Amount> =
        shapes.iter().map(|s| (s.name.as_str(), Amount::default())).collect();
    for u in uses {
        if let Some(a) = used.get_mut(u.cluster.as_str()) {
            a.cpu += u.used.cpu;
            a.memory += u.used.memory;
        }
    }
    let util = |s: &Shape, a: Amount| utilization(s, a, window_s);
    let now: Vec<Utilization> = shapes.iter().map(|s| util(s, used[s.name.as_str()])).collect();
    let score = |us: &[Utilization]| us.iter().map(|u| u.imbalance().abs()).sum::<f64>();
    let before = score(&now);
    let hours = window_s / 3600.0;
    let clusters = shapes
        .iter()
        .zip(&now)
        .map(|(s, u)| {
            let cost = s.price.map(|p| p * s.nodes as f64 * hours);
            let used_hours = u.cpu.max(u.memory) * s.nodes as f64 * hours;
            ClusterAdvice {
                cluster: s.name.clone(),
                nodes: s.nodes,
                utilization: *u,
                imbalance: u.imbalance(),
                cost,
                cost_per_used_instance_hour: cost.filter(|_| used_hours > 0.0).map(|c| c / used_hours),
            }
        })
        .collect();
    let mut moves = Vec::new();
    for u in uses {
        let Some(from) = shapes.iter().position(|s| s.name == u.cluster) else { continue };
        for (to, target) in shapes.iter().enumerate() {
            if to == from || u.task.cpu > target.largest.cpu || u.task.memory > target.largest.memory {
                continue;
            }
            let mut after_used: Vec<Amount> = shapes.iter().map(|s| used[s.name.as_str()]).collect();
            after_used[from].cpu -= u.used.cpu;
            after_used[from].memory -= u.used.memory;
            after_used[to].cpu += u.used.cpu;
            after_used[to].memory += u.used.memory;
            let after: Vec<Utilization> = shapes.iter().zip(&after_used).map(|(s, a)| util(s, *a)).collect();
            if after[to].cpu > 1.0 || after[to].memory > 1.0 {
                continue;
            }
            let score_after = score(&after);
            if score_after < before - 1e-12 {
                moves.push(Move {
                    workflow: u.workflow.clone(),
                    from: u.cluster.clone(),
                    to: target.name.clone(),
                    runs: u.runs,
                    score_before: before,
                    score_after,
                    from_after: after[from],
                    to_after: after[to],
                });
            }
        }
    }
    moves.sort_by(|a, b| a.score_after.total_cmp(&b.score_after).then_with(|| a.workflow.cmp(&b.workflow)));
    Advice { window_seconds: window_s, clusters, moves }
}

/// Each workflow's use in a replay workload: runs × Σ stages tasks × resources × mean duration.
pub fn uses_of(cluster: &str, workload: &Workload) -> Vec<WorkflowUse> {
    workload
        .workflows
        .iter()
        .map(|w| {
            let runs = match &w.arrival {
                Arrival::At(times) => times.len() as u64,
                _ => 1,
            };
            let mut used = Amount::default();
            let mut task = Amount::default();
            for stage in w.jobs.iter().flat_map(|j| &j.stages) {
                let (cpu, mem) = (stage.resources.cpu as f64, stage.resources.memory as f64);
                let work = f64::from(stage.tasks) * stage.duration.mean_secs() * runs as f64;
                used.cpu += cpu * work;
                used.memory += mem * work;
                task.cpu = task.cpu.max(cpu);
                task.memory = task.memory.max(mem);
            }
            WorkflowUse { workflow: w.name.clone(), cluster: cluster.to_string(), runs, used, task }
        })
        .collect()
}

fn shape(name: &str, config: &ClusterConfig, price: Option<f64>) -> Shape {
    let mut s = Shape {
        name: name.to_string(),
        nodes: 0,
        total: Amount::default(),
        largest: Amount::default(),
        price,
    };
    for g in &config.nodes {
        let (cpu, mem) = (g.resources.cpu as f64, g.resources.memory as f64);
        s.nodes += u64::from(g.count);
        s.total.cpu += cpu * f64::from(g.count);
        s.total.memory += mem * f64::from(g.count);
        s.largest.cpu = s.largest.cpu.max(cpu);
        s.largest.memory = s.largest.memory.max(mem);
    }
    s
}

async fn text(client: &Client, path: &str) -> Result<String> {
    let resp = client.checked(client.request(reqwest::Method::GET, path)).await?;
    resp.text().await.with_context(|| format!("cannot read the answer to GET {path}"))
}

pub fn run(args: &AdviseArgs) -> Result<ExitCode> {
    let mut prices = BTreeMap::new();
    for p in &args.prices {
        let (c, v) = p.split_once('=').with_context(|| format!("--price `{p}`: expected CLUSTER=PRICE"))?;
        let v: f64 = v.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).with_context(|| {
            format!("--price `{p}`: `{v}` is not a price (a number ≥ 0 per instance-hour)")
        })?;
        prices.insert(c.to_string(), v);
    }
    let client = args.conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let window_s = args.window.as_secs_f64();
    let advice = rt.block_on(async {
        let list: ClusterList = client.send(client.request(reqwest::Method::GET, "/v1/clusters")).await?;
        for name in prices.keys() {
            if !list.clusters.iter().any(|c| &c.name == name) {
                anyhow::bail!("--price {name}=…: the server has no cluster `{name}`");
            }
        }
        let until = weir_server::now_ms();
        let since = until - (window_s * 1000.0) as i64;
        let (mut shapes, mut uses) = (Vec::new(), Vec::new());
        for c in &list.clusters {
            let config_text = text(&client, &format!("/v1/clusters/{}/config", c.name)).await?;
            let config =
                ClusterConfig::from_yaml(&format!("cluster `{}` of the server", c.name), &config_text)?;
            let yaml =
                text(&client, &format!("/v1/replay?cluster={}&since={since}&until={until}", c.name)).await?;
            let workload =
                Workload::from_yaml(&format!("the recorded runs of cluster `{}`", c.name), &yaml, &config)?;
            uses.extend(uses_of(&c.name, &workload));
            shapes.push(shape(&c.name, &config, prices.get(&c.name).copied()));
        }
        Ok(advise(&shapes, &uses, window_s))
    })?;
    if args.json {
        emit(&format!("{}\n", serde_json::to_string_pretty(&advice)?))?;
        return Ok(ExitCode::SUCCESS);
    }
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let mut out = format!("{:<20} {:>5} {:>9} {:>9}  balance\n", "CLUSTER", "NODES", "CPU", "MEMORY");
    for c in &advice.clusters {
        let balance = if c.imbalance > 0.0 {
            format!("memory-bound: {} more of memory used than of cpu", pct(c.imbalance))
        } else if c.imbalance < 0.0 {
            format!("cpu-bound: {} more of cpu used than of memory", pct(-c.imbalance))
        } else {
            "even".to_string()
        };
        out.push_str(&format!(
            "{:<20} {:>5} {:>9} {:>9}  {balance}\n",
            c.cluster,
            c.nodes,
            pct(c.utilization.cpu),
            pct(c.utilization.memory)
        ));
        if let Some(cost) = c.cost {
            let per = c
                .cost_per_used_instance_hour
                .map_or("nothing used".to_string(), |p| format!("{p:.2} per used instance-hour"));
            out.push_str(&format!("{:<20} cost {cost:.2} over the window, {per}\n", ""));
        }
    }
    if advice.moves.is_empty() {
        out.push_str("\nno move of one workflow would balance the clusters better\n");
    } else {
        out.push_str(
            "\nmoves, best first (summed |memory − cpu| utilization of the clusters, before → after):\n",
        );
        for (i, m) in advice.moves.iter().take(args.top).enumerate() {
            out.push_str(&format!(
                "{:>2}. {} ({} runs): {} → {}  {:.4} → {:.4}; {} after: cpu {} memory {}; {} after: cpu {} memory {}\n",
                i + 1,
                m.workflow,
                m.runs,
                m.from,
                m.to,
                m.score_before,
                m.score_after,
                m.from,
                pct(m.from_after.cpu),
                pct(m.from_after.memory),
                m.to,
                pct(m.to_after.cpu),
                pct(m.to_after.memory)
            ));
        }
        out.push_str("\nmove one with: weir routes set workflow:NAME --cluster TO --queue LEAF\n");
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(name: &str, cpu: f64, memory: f64) -> Shape {
        Shape {
            name: name.into(),
            nodes: 1,
            total: Amount { cpu, memory },
            largest: Amount { cpu, memory },
            price: None,
        }
    }

    fn wf(name: &str, cluster: &str, cpu: f64, memory: f64) -> WorkflowUse {
        // One run holding `cpu` and `memory` for the whole window (1000 s).
        WorkflowUse {
            workflow: name.into(),
            cluster: cluster.into(),
            runs: 1,
            used: Amount { cpu: cpu * 1000.0, memory: memory * 1000.0 },
            task: Amount { cpu, memory },
        }
    }

    #[test]
    fn a_memory_heavy_workflow_on_the_cpu_rich_cluster_is_moved_to_the_memory_rich_one() {
        let shapes = [shape("cpu-rich", 16_000.0, 16_384.0), shape("mem-rich", 8_000.0, 65_536.0)];
        let uses = [
            wf("memhog", "cpu-rich", 1_000.0, 12_000.0),
            wf("cruncher", "mem-rich", 3_500.0, 2_000.0),
            wf("small", "cpu-rich", 500.0, 500.0),
        ];
        let a = advise(&shapes, &uses, 1000.0);
        // cpu-rich: 9% cpu, 76% memory; mem-rich: 44% cpu, 3% memory.
        assert!(a.clusters[0].imbalance > 0.6 && a.clusters[1].imbalance < -0.4, "{a:#?}");
        let first = &a.moves[0];
        assert_eq!(
            (first.workflow.as_str(), first.from.as_str(), first.to.as_str()),
            ("memhog", "cpu-rich", "mem-rich")
        );
        assert!(first.score_after < first.score_before);
        // The cruncher fits the cpu-rich cluster's node: moving it helps too.
        assert!(a.moves.iter().any(|m| m.workflow == "cruncher" && m.to == "cpu-rich"));
        // Moves are ranked best first.
        assert!(a.moves.windows(2).all(|w| w[0].score_after <= w[1].score_after));
    }

    #[test]
    fn a_move_that_does_not_fit_or_would_overfill_the_target_is_not_proposed() {
        let shapes = [shape("a", 8_000.0, 8_192.0), shape("b", 1_000.0, 65_536.0)];
        // The task needs 2 cores: b's node has 1.
        let uses = [wf("wide", "a", 2_000.0, 8_000.0)];
        assert!(advise(&shapes, &uses, 1000.0).moves.is_empty());
        // Fits a node of b, but b would be over its memory.
        let shapes =
            [shape("a", 8_000.0, 65_536.0), shape("b", 8_000.0, 8_192.0), shape("c", 8_000.0, 8_192.0)];
        let uses = [wf("big", "a", 500.0, 60_000.0), wf("filler", "b", 100.0, 8_000.0)];
        assert!(advise(&shapes, &uses, 1000.0).moves.iter().all(|m| !(m.workflow == "big" && m.to == "b")));
    }

    #[test]
    fn balanced_clusters_get_no_moves_and_prices_give_costs() {
        let mut shapes = [shape("a", 8_000.0, 8_000.0), shape("b", 8_000.0, 8_000.0)];
        shapes[0].price = Some(2.0);
        let uses = [wf("x", "a", 4_000.0, 4_000.0), wf("y", "b", 2_000.0, 2_000.0)];
        let a = advise(&shapes, &uses, 7200.0);
        assert!(a.moves.is_empty(), "{a:#?}");
        // 1 node × 2 h × 2.0 = 4.0; used: 4000·1000 of 8000·7200 millicore-seconds, 1/14.4 of
        // the 2 instance-hours.
        assert_eq!(a.clusters[0].cost, Some(4.0));
        let per = a.clusters[0].cost_per_used_instance_hour.expect("per used hour");
        assert!((per - 4.0 / (2.0 / 14.4)).abs() < 1e-9, "{per}");
        assert_eq!(a.clusters[1].cost, None);
    }
}
