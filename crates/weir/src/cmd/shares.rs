//! `weir shares`: the steady and instantaneous fair share of every queue.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use weir_engine::CapacityShare;
use weir_model::{ClusterConfig, Duration, QueuePath, Resources, Time, Workload};
use weir_sim::{SimConfig, Simulation};

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
weir shares --active all --json\n\nIn capacity mode (scheduler.mode: capacity) the table shows each queue's capacity and max capacity \
as configured, as a share of the cluster and in resources; with --workload, also what each queue \
uses and has pending at --at in a simulation of that workload, and the ideal allocation the \
proportional preemption policy would aim at from there (YARN's idealAssigned), with what it would \
take back (over ideal) and what one round would ask now (after the dead zone and the pace):\n  \
weir shares --cluster examples/cluster-capacity.yaml --workload examples/workload.yaml --at 2h"
)]
pub struct SharesArgs {
    /// The cluster file. Default: the example cluster built into weir.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Leaf queues that have a runnable job, comma-separated (e.g. root.a.x,root.b), or `all`.
    /// Default: none, so every instantaneous share is zero.
    #[arg(long, value_name = "LEAVES", value_delimiter = ',')]
    active: Vec<String>,
    /// Print JSON: {"queues":[{"queue","steady":{cpu,memory,gpu},"instantaneous":{..}}, …]};
    /// in capacity mode each queue also has a `capacity` object.
    #[arg(long)]
    json: bool,
    /// Capacity mode: simulate this workload file (as `weir simulate` does, seed --seed, AMs of
    /// 1000,1g) up to --at and show each queue's used, pending and ideal allocation there.
    #[arg(long, value_name = "FILE", requires = "at")]
    workload: Option<PathBuf>,
    /// With --workload: the simulated time to stop at (e.g. 90m, 2h, 1d).
    #[arg(long, value_name = "DURATION", value_parser = crate::cmd::simulate::parse_duration, requires = "workload")]
    at: Option<Duration>,
    /// With --workload: the simulation's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
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
    /// With --workload: the engine's figures at --at.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<CapacityState>,
    /// Per node label the queue may use: its capacity and max capacity in that partition.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, LabelRow>,
}

/// A queue's share of one node label's partition: as configured (percent of the parent's),
/// as a fraction of the partition, and in the partition's resources.
#[derive(Serialize)]
struct LabelRow {
    capacity: f64,
    max_capacity: f64,
    absolute_capacity: f64,
    absolute_max_capacity: f64,
    guaranteed: Resources,
    max: Resources,
}

/// A capacity-mode queue at a point of a simulation (memory figures of the preemption policy
/// in MiB, as YARN's DefaultResourceCalculator sees them).
#[derive(Serialize)]
struct CapacityState {
    used: Resources,
    pending: Resources,
    ideal_memory: u64,
    over_ideal_memory: u64,
    round_memory: u64,
}

/// The engine's capacity figures at `at` in a simulation of `workload`.
fn simulated(config: &ClusterConfig, workload: &Path, at: Duration, seed: u64) -> Result<Vec<CapacityShare>> {
    let text = fs::read_to_string(workload).with_context(|| format!("cannot read {}", workload.display()))?;
    let w = Workload::from_yaml(&workload.display().to_string(), &text, config)?;
    let sim_config = SimConfig {
        seed,
        until: Some(Time(at.as_millis())),
        max_attempts: 4,
        am: Some(Resources::new(1000, 1024, 0)),
        node_failures: None,
        sample_every: Duration(60_000),
        check_invariants: false,
        max_runs: weir_sim::DEFAULT_MAX_RUNS,
        max_containers: weir_sim::DEFAULT_MAX_CONTAINERS,
    };
    let mut sim = Simulation::new(config.clone(), w, sim_config)?;
    while sim.step()? {}
    Ok(sim.engine().capacity_shares())
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
        state: None,
        labels: c
            .labels
            .iter()
            .map(|(l, share)| {
                let partition = config
                    .nodes
                    .iter()
                    .filter(|g| g.label.as_deref() == Some(l.as_str()))
                    .fold(Resources::ZERO, |a, g| a + g.resources.times(u64::from(g.count)));
                let row = LabelRow {
                    capacity: share.capacity,
                    max_capacity: share.max_capacity,
                    absolute_capacity: share.absolute_capacity,
                    absolute_max_capacity: share.absolute_max_capacity,
                    guaranteed: partition.scale(share.absolute_capacity),
                    max: partition.scale(share.absolute_max_capacity),
                };
                (l.clone(), row)
            })
            .collect(),
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
    let capacity_mode = config.scheduler.mode == weir_model::Mode::Capacity;
    let state = match (&args.workload, args.at) {
        (Some(_), _) if !capacity_mode => bail!(
            "--workload shows used, pending and the preemption policy's ideal allocation of a capacity-mode \
             cluster; {source} is in fair mode (use --active for its instantaneous shares)"
        ),
        (Some(w), Some(at)) => simulated(&config, w, at, args.seed)?,
        _ => Vec::new(),
    };
    let mut rows: Vec<Row> = weir_engine::shares_for(&config, &active)
        .into_iter()
        .map(|s| Row {
            capacity: capacity_row(&config, &s.queue),
            queue: s.queue.to_string(),
            steady: s.steady,
            instantaneous: s.instantaneous,
        })
        .collect();
    for (row, s) in rows.iter_mut().zip(&state) {
        if let Some(c) = &mut row.capacity {
            c.state = Some(CapacityState {
                used: s.used,
                pending: s.pending,
                ideal_memory: s.ideal_memory,
                over_ideal_memory: s.over_ideal_memory,
                round_memory: s.round_memory,
            });
        }
    }
    let mut out = String::new();
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&Output { queues: rows })?)?;
        return emit(&out);
    }
    let total = config.total_resources();
    let width = rows.iter().map(|r| r.queue.len()).max().unwrap_or(5).max(5);
    if capacity_mode {
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
    let with_state = rows.iter().any(|r| r.capacity.as_ref().is_some_and(|c| c.state.is_some()));
    write!(
        out,
        "{:<width$}  {:>10} {:>7} {:>12} {:>10}  {:>10} {:>7} {:>12} {:>10}",
        "queue", "capacity", "abs", "guar. mem", "cpu", "max cap", "abs", "max mem", "cpu"
    )?;
    if with_state {
        write!(
            out,
            "  {:>12} {:>12} {:>12} {:>12} {:>12}",
            "used mem", "pending mem", "ideal mem", "over ideal", "this round"
        )?;
    }
    writeln!(out)?;
    let pct =
        |r: &Resources| if total.memory == 0 { 0.0 } else { 100.0 * r.memory as f64 / total.memory as f64 };
    for r in rows {
        let Some(c) = &r.capacity else { continue };
        write!(
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
        if let Some(s) = &c.state {
            write!(
                out,
                "  {:>12} {:>12} {:>12} {:>12} {:>12}",
                s.used.memory, s.pending.memory, s.ideal_memory, s.over_ideal_memory, s.round_memory
            )?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "capacity mode: capacity and max cap as configured (percent of the parent, weight, or resources); \
         abs = percent of the cluster's memory; memory in MiB, cpu in millicores"
    )?;
    if rows.iter().any(|r| r.capacity.as_ref().is_some_and(|c| !c.labels.is_empty())) {
        writeln!(out)?;
        writeln!(
            out,
            "{:<width$}  {:<12} {:>10} {:>7} {:>12}  {:>10} {:>7} {:>12}",
            "queue", "node label", "capacity", "abs", "guar. mem", "max cap", "abs", "max mem"
        )?;
        for r in rows {
            let Some(c) = &r.capacity else { continue };
            for (l, s) in &c.labels {
                writeln!(
                    out,
                    "{:<width$}  {:<12} {:>10} {:>6.1}% {:>12}  {:>10} {:>6.1}% {:>12}",
                    r.queue,
                    l,
                    s.capacity,
                    100.0 * s.absolute_capacity,
                    s.guaranteed.memory,
                    s.max_capacity,
                    100.0 * s.absolute_max_capacity,
                    s.max.memory
                )?;
            }
        }
        writeln!(
            out,
            "node labels: capacity and max cap in each label's partition as configured (percent of the parent's \
             there); abs = percent of the partition; memory in MiB (the engine enforces the max capacities \
             for requests for the label; the capacities are not yet guarantees)"
        )?;
    }
    if with_state {
        writeln!(
            out,
            "used and pending at --at of the simulated workload; ideal = the allocation the proportional \
             preemption policy aims at from there (water-filling the guarantees among queues that want more, \
             capped by max capacity and demand), over ideal = what it would take back, this round = what one \
             round would ask of a leaf now (after max_ignored_over_capacity, total_preemption_per_round and \
             natural_termination_factor)"
        )?;
    }
    Ok(out)
}
