//! `weir advise`: which workflows to move between clusters, from their simulated history.
//!
//! Reference 000's balancing: per cluster, the imbalance of CPU against memory use ("vcores
//! wasted while memory is full"), then candidate workflows whose move would even it out, each
//! checked by replaying both clusters without and with the move in the simulator. The history
//! is the simulator's: each cluster runs its own workload for the window, and every task
//! attempt's resources × time are added up per workflow. A move is advised when it evens
//! the clusters out (the sum of their imbalances falls) without lowering tier-1 SLO success;
//! the advised moves are then tried together, one by one, each kept only if it still helps.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use weir_model::{ClusterConfig, Duration, Time, Workflow, Workload};
use weir_sim::{JobRecord, RecordSink, RunRecord, SimConfig, Simulation, TaskRecord};

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

/// One cluster with the workflows it runs.
#[derive(Clone)]
struct Site {
    name: String,
    config: ClusterConfig,
    workflows: Vec<Workflow>,
    /// A server's cluster: its jobs run without application masters, and so do their replays.
    live: bool,
}

/// What a simulation of one cluster showed.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterState {
    pub cluster: String,
    /// Average use over the window, 0..1.
    pub cpu_used: f64,
    pub memory_used: f64,
    /// `cpu_used - memory_used`.
    pub imbalance: f64,
    /// Tier-1 runs with a known SLO outcome, and those that met it.
    pub tier1_runs: u64,
    pub tier1_met: u64,
    /// Cost per used core-hour, when the cluster has a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_used_core_hour: Option<f64>,
    /// Per workflow: core-hours and GiB-hours of its task attempts.
    #[serde(skip)]
    use_by_workflow: BTreeMap<String, (f64, f64)>,
}

/// A move tried in the simulator.
#[derive(Clone, Debug, Serialize)]
pub struct Move {
    pub workflow: String,
    pub from: String,
    pub to: String,
    /// The leaf it would run in on the target.
    pub queue: String,
    pub advised: bool,
    /// Why (or why not), in a sentence.
    pub why: String,
    pub before: Vec<ClusterState>,
    pub after: Vec<ClusterState>,
}

#[derive(Debug, Serialize)]
struct Advice {
    /// Made from a server's recorded runs.
    server: bool,
    window: String,
    seed: u64,
    before: Vec<ClusterState>,
    moves: Vec<Move>,
    /// The advised moves kept when applied together, in order, and the state they lead to.
    together: Vec<String>,
    after: Vec<ClusterState>,
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
    let sim = |sites: &[Site]| -> Result<Vec<ClusterState>> {
        sites.iter().map(|s| simulate(s, args.until, args.seed, prices.get(&s.name).copied())).collect()
    };
    eprintln!("weir advise: simulating {} clusters for {} (the history)", sites.len(), args.until.human());
    let before = sim(&sites)?;

    // Candidates, the most promising first: the first-order change of the summed imbalance
    // if the workflow's use simply left one cluster and joined the other.
    let mut candidates: Vec<(f64, usize, usize, String)> = Vec::new();
    for (a, site) in sites.iter().enumerate() {
        for (b, _) in sites.iter().enumerate().filter(|(b, _)| *b != a) {
            for wf in &site.workflows {
                let Some(&(core_h, gib_h)) = before[a].use_by_workflow.get(&wf.name) else { continue };
                let gain = first_order_gain(&sites, &before, a, b, core_h, gib_h, args.until);
                if gain > 1e-9 {
                    candidates.push((gain, a, b, wf.name.clone()));
                }
            }
        }
    }
    candidates.sort_by(|x, y| y.0.total_cmp(&x.0).then_with(|| x.3.cmp(&y.3)));
    candidates.truncate(args.candidates);

    let mut moves = Vec::new();
    for (_, a, b, name) in &candidates {
        let (a, b) = (*a, *b);
        let Some((moved, queue)) = move_workflow(&sites, a, b, name) else {
            moves.push(Move {
                workflow: name.clone(),
                from: sites[a].name.clone(),
                to: sites[b].name.clone(),
                queue: String::new(),
                advised: false,
                why: format!(
                    "{} has no leaf of the same path or tier, or no node its tasks fit on",
                    sites[b].name
                ),
                before: vec![before[a].clone(), before[b].clone()],
                after: Vec::new(),
            });
            continue;
        };
        eprintln!("weir advise: trying {name}: {} → {} ({queue})", sites[a].name, sites[b].name);
        let after = sim(&moved)?;
        let (advised, why) = verdict(&before, &after);
        moves.push(Move {
            workflow: name.clone(),
            from: sites[a].name.clone(),
            to: sites[b].name.clone(),
            queue,
            advised,
            why,
            before: vec![before[a].clone(), before[b].clone()],
            after: vec![after[a].clone(), after[b].clone()],
        });
    }
    moves.sort_by(|x, y| y.advised.cmp(&x.advised).then_with(|| gain_of(x).total_cmp(&gain_of(y)).reverse()));

    // The advised moves together, one by one, each kept only if it still helps.
    let mut current = sites.clone();
    let mut state = before.clone();
    let mut together = Vec::new();
    for m in moves.iter().filter(|m| m.advised) {
        let a = current.iter().position(|s| s.name == m.from).expect("a cluster of the advice");
        let b = current.iter().position(|s| s.name == m.to).expect("a cluster of the advice");
        let Some((moved, _)) = move_workflow(&current, a, b, &m.workflow) else { continue };
        let after = if together.is_empty() { m_after_all(m, &state) } else { sim(&moved)? };
        if verdict(&state, &after).0 {
            current = moved;
            state = after;
            together.push(format!("{}: {} → {}", m.workflow, m.from, m.to));
        }
    }

    let advice = Advice {
        server: args.server.is_some(),
        window: args.until.human(),
        seed: args.seed,
        before,
        moves,
        together,
        after: state,
    };
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&advice).context("cannot write the advice as JSON")?;
        std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    emit(&render(&advice, args.json.as_deref()))
}

/// The first advised move's simulated states, for every cluster (those it did not touch are
/// as before).
fn m_after_all(m: &Move, before: &[ClusterState]) -> Vec<ClusterState> {
    before.iter().map(|s| m.after.iter().find(|a| a.cluster == s.cluster).unwrap_or(s).clone()).collect()
}

fn gain_of(m: &Move) -> f64 {
    let sum = |v: &[ClusterState]| v.iter().map(|s| s.imbalance.abs()).sum::<f64>();
    if m.after.is_empty() {
        return f64::NEG_INFINITY;
    }
    sum(&m.before) - sum(&m.after)
}

/// Whether `after` is better than `before`: the summed imbalance falls (by a tenth of itself
/// at least) and tier-1 SLO success (all clusters together) does not.
fn verdict(before: &[ClusterState], after: &[ClusterState]) -> (bool, String) {
    let sum = |v: &[ClusterState]| v.iter().map(|s| s.imbalance.abs()).sum::<f64>();
    let tier1 = |v: &[ClusterState]| {
        let (runs, met) = v.iter().fold((0, 0), |(r, m), s| (r + s.tier1_runs, m + s.tier1_met));
        (runs > 0).then(|| met as f64 / runs as f64)
    };
    let (b, a) = (sum(before), sum(after));
    let (t1b, t1a) = (tier1(before), tier1(after));
    let slo = |t: Option<f64>| t.map_or("no tier-1 SLO runs".to_string(), |t| format!("{:.1}%", t * 100.0));
    let balance = format!("imbalance {:.1} → {:.1} points", b * 100.0, a * 100.0);
    let slo_text = format!("tier-1 SLO success {} → {}", slo(t1b), slo(t1a));
    let slo_ok = match (t1b, t1a) {
        (Some(x), Some(y)) => y + 1e-9 >= x,
        (Some(_), None) => false,
        _ => true,
    };
    // A fall within a tenth of the imbalance (or a tenth of a point) is noise between seeds.
    if a > b - (b * 0.1).max(0.001) {
        (false, format!("does not even the clusters out: {balance}; {slo_text}"))
    } else if !slo_ok {
        (false, format!("evens them out ({balance}) but lowers {slo_text}"))
    } else {
        (true, format!("{balance}; {slo_text}"))
    }
}

/// The change of the summed |imbalance| if a workflow's use left cluster `a` for `b`, as if
/// nothing else changed (the simulator decides; this only orders the candidates).
fn first_order_gain(
    sites: &[Site],
    before: &[ClusterState],
    a: usize,
    b: usize,
    core_h: f64,
    gib_h: f64,
    window: Duration,
) -> f64 {
    let hours = window.as_millis() as f64 / 3_600_000.0;
    let cap = |s: &Site| {
        let t = s.config.total_resources();
        ((t.cpu as f64 / 1000.0) * hours, (t.memory as f64 / 1024.0) * hours)
    };
    let (ca, ma) = cap(&sites[a]);
    let (cb, mb) = cap(&sites[b]);
    if ca <= 0.0 || ma <= 0.0 || cb <= 0.0 || mb <= 0.0 {
        return 0.0;
    }
    let ia = (before[a].cpu_used - core_h / ca) - (before[a].memory_used - gib_h / ma);
    let ib = (before[b].cpu_used + core_h / cb) - (before[b].memory_used + gib_h / mb);
    // A target pushed past full would only queue the work.
    if before[b].cpu_used + core_h / cb > 0.95 || before[b].memory_used + gib_h / mb > 0.95 {
        return 0.0;
    }
    before[a].imbalance.abs() + before[b].imbalance.abs() - ia.abs() - ib.abs()
}

/// The sites with workflow `name` moved from `a` to `b`, and the leaf it goes to; `None` when
/// `b` has no fitting leaf or none of its nodes holds one of the workflow's tasks.
fn move_workflow(sites: &[Site], a: usize, b: usize, name: &str) -> Option<(Vec<Site>, String)> {
    let wf = sites[a].workflows.iter().find(|w| w.name == name)?;
    let target = &sites[b].config;
    let leaf = target
        .leaves()
        .find(|q| q.path == wf.queue)
        .or_else(|| target.leaves().find(|q| q.tier == Some(wf.tier)))?;
    let fits = wf
        .jobs
        .iter()
        .flat_map(|j| &j.stages)
        .all(|st| target.nodes.iter().any(|n| st.resources.fits_in(&n.resources)));
    if !fits {
        return None;
    }
    let mut moved = wf.clone();
    moved.queue = leaf.path.clone();
    let queue = leaf.path.to_string();
    let mut out = sites.to_vec();
    out[a].workflows.retain(|w| w.name != name);
    out[b].workflows.push(moved);
    Some((out, queue))
}

/// Adds up, per workflow, the resources × time of its task attempts (failed and preempted ones
/// held theirs too), and tier-1 SLO
/// outcomes.
#[derive(Default)]
struct Tally {
    use_by_workflow: BTreeMap<String, (f64, f64)>,
    tier1_runs: u64,
    tier1_met: u64,
}

struct TallySink(Rc<RefCell<Tally>>);

impl RecordSink for TallySink {
    fn run(&mut self, record: &RunRecord, workflow: &Workflow) -> io::Result<()> {
        if workflow.tier == 1 {
            if let Some(met) = record.met {
                let mut t = self.0.borrow_mut();
                t.tier1_runs += 1;
                t.tier1_met += u64::from(met);
            }
        }
        Ok(())
    }

    fn job(&mut self, _record: &JobRecord, _workflow: &Workflow) -> io::Result<()> {
        Ok(())
    }

    fn task(&mut self, record: &TaskRecord, workflow: &Workflow) -> io::Result<()> {
        let Some(stage) =
            workflow.jobs.get(record.template as usize).and_then(|j| j.stages.get(record.stage as usize))
        else {
            return Ok(());
        };
        let hours = record.end.since(record.start).as_millis() as f64 / 3_600_000.0;
        let mut t = self.0.borrow_mut();
        let e = t.use_by_workflow.entry(workflow.name.clone()).or_default();
        e.0 += stage.resources.cpu as f64 / 1000.0 * hours;
        e.1 += stage.resources.memory as f64 / 1024.0 * hours;
        Ok(())
    }
}

fn simulate(site: &Site, until: Duration, seed: u64, price: Option<f64>) -> Result<ClusterState> {
    if site.workflows.is_empty() {
        // Nothing runs there: idle, balanced, no cost figure (no core-hour is used).
        return Ok(ClusterState {
            cluster: site.name.clone(),
            cpu_used: 0.0,
            memory_used: 0.0,
            imbalance: 0.0,
            tier1_runs: 0,
            tier1_met: 0,
            cost_per_used_core_hour: price.map(|_| f64::INFINITY),
            use_by_workflow: BTreeMap::new(),
        });
    }
    let mut config = SimConfig { seed, until: Some(Time(until.as_millis())), ..SimConfig::default() };
    if site.live {
        config.am = None;
    }
    let workload = Workload { workflows: site.workflows.clone() };
    let tally = Rc::new(RefCell::new(Tally::default()));
    let mut sim = Simulation::new(site.config.clone(), workload, config)
        .with_context(|| format!("cluster {}: cannot set up the simulation", site.name))?;
    sim.set_record_sink(Box::new(TallySink(Rc::clone(&tally))));
    sim.run().with_context(|| format!("cluster {}: the simulation failed", site.name))?;
    let outcome = sim.finish().with_context(|| format!("cluster {}: the simulation failed", site.name))?;
    let u = &outcome.summary.utilization;
    let t = tally.borrow();
    let hours = outcome.summary.simulated_seconds / 3600.0;
    let nodes = outcome.summary.nodes as f64;
    let cores = site.config.total_resources().cpu as f64 / 1000.0;
    let cost = price.map(|p| {
        let used = u.cpu * cores * hours;
        if used > 0.0 {
            p * nodes * hours / used
        } else {
            f64::INFINITY
        }
    });
    Ok(ClusterState {
        cluster: site.name.clone(),
        cpu_used: u.cpu,
        memory_used: u.memory,
        imbalance: u.cpu - u.memory,
        tier1_runs: t.tier1_runs,
        tier1_met: t.tier1_met,
        cost_per_used_core_hour: cost,
        use_by_workflow: t.use_by_workflow.clone(),
    })
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
    use crate::cmd::client::Connection;
    let conn = Connection {
        server: Some(server.to_string()),
        data_dir: args.data_dir.clone(),
        ca_cert: args.ca_cert.clone(),
    };
    let client = conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let until = weir_server::now_ms();
    let since = until - args.until.as_millis().min(i64::MAX as u64 / 2) as i64;
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
                eprintln!("weir advise: cluster {name} recorded no run in the window");
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

fn render(a: &Advice, json: Option<&Path>) -> String {
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
        if a.server && m.advised {
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
        if a.server {
            let _ = writeln!(out, "to make these moves (each run after it goes to the new cluster):");
            for m in a
                .moves
                .iter()
                .filter(|m| a.together.iter().any(|t| t.starts_with(&format!("{}: ", m.workflow))))
            {
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

    fn state(cluster: &str, cpu: f64, memory: f64, runs: u64, met: u64) -> ClusterState {
        ClusterState {
            cluster: cluster.into(),
            cpu_used: cpu,
            memory_used: memory,
            imbalance: cpu - memory,
            tier1_runs: runs,
            tier1_met: met,
            cost_per_used_core_hour: None,
            use_by_workflow: BTreeMap::new(),
        }
    }

    #[test]
    fn a_move_is_advised_only_if_it_evens_out_without_costing_tier_1() {
        let before = [state("a", 0.3, 0.9, 10, 6), state("b", 0.8, 0.2, 0, 0)];
        let better = [state("a", 0.4, 0.5, 5, 5), state("b", 0.8, 0.6, 5, 5)];
        assert!(verdict(&before, &better).0, "{}", verdict(&before, &better).1);
        let worse_slo = [state("a", 0.4, 0.5, 5, 2), state("b", 0.8, 0.6, 5, 3)];
        let (ok, why) = verdict(&before, &worse_slo);
        assert!(!ok && why.contains("lowers tier-1 SLO success 60.0% → 50.0%"), "{why}");
        let same = [state("a", 0.3, 0.9, 10, 6), state("b", 0.8, 0.205, 0, 0)];
        let (ok, why) = verdict(&before, &same);
        assert!(!ok && why.starts_with("does not even the clusters out"), "{why}");
    }

    #[test]
    fn names_and_prices_are_checked() {
        assert!(named_path("a=x.yaml").is_ok());
        assert!(named_path("x.yaml").unwrap_err().contains("NAME=FILE"));
        assert_eq!(named_price("a=2.5").unwrap(), ("a".to_string(), 2.5));
        assert!(named_price("a=-1").unwrap_err().contains("≥ 0"));
    }
}
