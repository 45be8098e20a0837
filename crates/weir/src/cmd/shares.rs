//! `weir shares`: the steady and instantaneous fair share of every queue.

use std::path::PathBuf;

use std::fmt::Write as _;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use weir_model::{ClusterConfig, QueuePath, Resources};

use crate::{emit, load_cluster, EXAMPLE_CLUSTER};

#[derive(Debug, Args)]
#[command(
    about = "Show every queue's steady and instantaneous fair share",
    long_about = "Show every queue's steady fair share (all queues count) and instantaneous fair share \
(only active queues count), depth-first with root first, computed exactly as the engine does.\n\n\
Without --cluster, the example cluster shipped with weir (examples/cluster.yaml: 40 nodes, four \
organizations, 33 leaves) is used.\n\n\
Examples:\n  weir shares --cluster examples/cluster.yaml\n  \
weir shares --cluster examples/cluster.yaml --active root.ads.ranking.tier1,root.default\n  \
weir shares --active all --json"
)]
pub struct SharesArgs {
    /// The cluster file. Default: the example cluster built into weir.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Leaf queues that have a runnable job, comma-separated (e.g. root.a.x,root.b), or `all`.
    /// Default: none, so every instantaneous share is zero.
    #[arg(long, value_name = "LEAVES", value_delimiter = ',')]
    active: Vec<String>,
    /// Print JSON: {"queues":[{"queue","steady":{cpu,memory,gpu},"instantaneous":{..}}, …]}.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Row {
    queue: String,
    steady: Resources,
    instantaneous: Resources,
    /// Capacity mode only.
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<CapacityRow>,
}

/// A capacity-mode queue's guarantee and cap: as configured, as shares of the cluster, and in
/// resources (YARN's capacity, absolute capacity, absolute max capacity).
#[derive(Serialize)]
struct CapacityRow {
    configured: String,
    max_configured: String,
    guaranteed: Resources,
    max: Resources,
}

fn capacity_row(config: &ClusterConfig, queue: &QueuePath) -> Option<CapacityRow> {
    let q = &config.queues[config.find(queue)?];
    let c = q.capacity.as_ref()?;
    let total = config.total_resources();
    let text = |spec: &Option<weir_model::CapacitySpec>, missing: &str| match spec {
        None => missing.to_string(),
        Some(weir_model::CapacitySpec::Percent(p)) => format!("{p}"),
        Some(weir_model::CapacitySpec::Weight(w)) => format!("{w}w"),
        Some(weir_model::CapacitySpec::Absolute(r)) => r.or(0).to_string(),
    };
    Some(CapacityRow {
        configured: text(&c.configured, "100"),
        max_configured: text(&c.configured_max, "100"),
        guaranteed: if q.parent.is_none() { total } else { q.min.resolve(&total) },
        max: q.max.resolve(&total).component_min(&total),
    })
}

#[derive(Serialize)]
struct Output {
    queues: Vec<Row>,
}

pub fn run(args: &SharesArgs) -> Result<()> {
    let (config, source) = match &args.cluster {
        Some(path) => (load_cluster(path)?, path.display().to_string()),
        None => {
            eprintln!("weir: no --cluster given; using the built-in example cluster (examples/cluster.yaml)");
            let source = "built-in examples/cluster.yaml".to_string();
            (ClusterConfig::from_yaml(&source, EXAMPLE_CLUSTER)?, source)
        }
    };
    let mut active = Vec::new();
    if args.active.iter().any(|a| a == "all") {
        active = config.queues.iter().enumerate().filter(|(_, q)| q.is_leaf()).map(|(i, _)| i).collect();
    }
    for name in args.active.iter().filter(|a| *a != "all") {
        let path =
            QueuePath::parse(name).with_context(|| format!("--active: `{name}` is not a queue path"))?;
        let Some(ix) = config.find(&path) else {
            bail!("--active: no queue {path} in {source}");
        };
        if !config.queues[ix].is_leaf() {
            bail!("--active: {path} is not a leaf; name the leaves that have runnable jobs");
        }
        active.push(ix);
    }
    let rows: Vec<Row> = weir_engine::shares_for(&config, &active)
        .into_iter()
        .map(|s| Row {
            capacity: capacity_row(&config, &s.queue),
            queue: s.queue.to_string(),
            steady: s.steady,
            instantaneous: s.instantaneous,
        })
        .collect();
    let mut out = String::new();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&Output { queues: rows })?)?;
        return emit(&out);
    }
    let total = config.total_resources();
    let width = rows.iter().map(|r| r.queue.len()).max().unwrap_or(5).max(5);
    if config.scheduler.mode == weir_model::Mode::Capacity {
        return emit(&capacity_table(&rows, width, &total)?);
    }
    writeln!(
        out,
        "{:<width$}  {:>12} {:>10} {:>7}  {:>12} {:>10} {:>7}",
        "queue", "steady mem", "cpu", "share", "inst mem", "cpu", "share"
    )?;
    let pct =
        |r: &Resources| if total.memory == 0 { 0.0 } else { 100.0 * r.memory as f64 / total.memory as f64 };
    for r in &rows {
        writeln!(
            out,
            "{:<width$}  {:>12} {:>10} {:>6.1}%  {:>12} {:>10} {:>6.1}%",
            r.queue,
            r.steady.memory,
            r.steady.cpu,
            pct(&r.steady),
            r.instantaneous.memory,
            r.instantaneous.cpu,
            pct(&r.instantaneous)
        )?;
    }
    writeln!(out, "memory in MiB, cpu in millicores; share = percent of the cluster's memory")?;
    emit(&out)
}

/// Capacity mode's table: each queue's configured capacity and max capacity, and both as a
/// share of the cluster and in memory and cpu.
fn capacity_table(rows: &[Row], width: usize, total: &Resources) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "{:<width$}  {:>10} {:>7} {:>12} {:>10}  {:>10} {:>7} {:>12} {:>10}",
        "queue", "capacity", "abs", "guar. mem", "cpu", "max cap", "abs", "max mem", "cpu"
    )?;
    let pct =
        |r: &Resources| if total.memory == 0 { 0.0 } else { 100.0 * r.memory as f64 / total.memory as f64 };
    for r in rows {
        let Some(c) = &r.capacity else { continue };
        writeln!(
            out,
            "{:<width$}  {:>10} {:>6.1}% {:>12} {:>10}  {:>10} {:>6.1}% {:>12} {:>10}",
            r.queue,
            c.configured,
            pct(&c.guaranteed),
            c.guaranteed.memory,
            c.guaranteed.cpu,
            c.max_configured,
            pct(&c.max),
            c.max.memory,
            c.max.cpu
        )?;
    }
    writeln!(
        out,
        "capacity mode: capacity and max cap as configured (percent of the parent, weight, or resources); \
         abs = percent of the cluster's memory; memory in MiB, cpu in millicores"
    )?;
    Ok(out)
}
