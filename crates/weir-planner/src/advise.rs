//! The balancing advisor (reference 000: "periodically analyze the cluster usage and choose
//! candidate workflows to move"): per cluster, the imbalance of CPU against memory use ("vcores
//! wasted while memory is full"), then candidate workflows whose move would even it out, each
//! checked by replaying every cluster without and with the move in the simulator.
//!
//! The history is the simulator's: each [`Site`] runs its own workflows for the window, and
//! every task attempt's resources × time are added up per workflow. A move is advised when it
//! evens the clusters out (the sum of their absolute imbalances falls by a tenth at least)
//! without lowering tier-1 SLO success; the advised moves are then tried together, one by one,
//! each kept only if it still helps.
//!
//! One core for both callers: `weir advise` (files, or a server's replayed runs) and the
//! server's scheduled advisor. Pure: the same sites and settings give the same [`Advice`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use weir_model::{ClusterConfig, Duration, Time, Workflow, Workload};
use weir_sim::{JobRecord, RecordSink, RunRecord, SimConfig, SimError, Simulation, TaskRecord};

/// One cluster with the workflows it runs.
#[derive(Clone, Debug)]
pub struct Site {
    pub name: String,
    pub config: ClusterConfig,
    pub workflows: Vec<Workflow>,
    /// A server's cluster: its jobs run without application masters, and so do their replays.
    pub live: bool,
}

/// How to advise.
#[derive(Clone, Debug)]
pub struct AdviseSettings {
    /// The span each cluster is simulated for (the history).
    pub window: Duration,
    /// Seed of the simulations' random draws (the same for before and after).
    pub seed: u64,
    /// How many candidate moves to try in the simulator (the most promising first).
    pub candidates: usize,
    /// Price of one node-hour, by cluster name.
    pub prices: BTreeMap<String, f64>,
}

/// A simulation of a site could not run. Fix the cluster or its workflows; retrying with the
/// same input does not help.
#[derive(Debug, thiserror::Error)]
#[error("cluster {cluster}: the simulation failed: {source}")]
pub struct AdviseError {
    pub cluster: String,
    #[source]
    pub source: Box<SimError>,
}

/// What a simulation of one cluster showed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
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
    /// Cost per used core-hour, when the cluster has a price (`None` in JSON also when no
    /// core-hour was used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_used_core_hour: Option<f64>,
    /// Per workflow: core-hours and GiB-hours of its task attempts.
    #[serde(skip)]
    pub use_by_workflow: BTreeMap<String, (f64, f64)>,
}

/// A move tried in the simulator.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Move {
    pub workflow: String,
    /// The workflow's tier and the leaf it runs in now (what routes are keyed by).
    #[serde(default)]
    pub tier: u8,
    #[serde(default)]
    pub from_queue: String,
    pub from: String,
    pub to: String,
    /// The leaf it would run in on the target (empty when the target has none).
    pub queue: String,
    pub advised: bool,
    /// Why (or why not), in a sentence.
    pub why: String,
    pub before: Vec<ClusterState>,
    pub after: Vec<ClusterState>,
}

/// The advisor's answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Advice {
    /// The window, for people (`1d`).
    pub window: String,
    pub seed: u64,
    /// Every cluster as it runs now.
    pub before: Vec<ClusterState>,
    /// Every move tried, advised ones first, the best first.
    pub moves: Vec<Move>,
    /// The advised moves kept when applied together (`WORKFLOW: FROM → TO`), in order, and
    /// the state they lead to.
    pub together: Vec<String>,
    pub after: Vec<ClusterState>,
}

impl Advice {
    /// The moves kept together, in their order.
    pub fn kept(&self) -> impl Iterator<Item = &Move> {
        self.moves.iter().filter(|m| {
            m.advised && self.together.iter().any(|t| t.starts_with(&format!("{}: ", m.workflow)))
        })
    }
}

/// Advises on `sites` (at least two make sense; with fewer nothing can move). `progress` is
/// told what is being simulated, for people waiting.
pub fn advise(
    sites: &[Site],
    settings: &AdviseSettings,
    progress: &mut dyn FnMut(&str),
) -> Result<Advice, AdviseError> {
    let sim = |sites: &[Site]| -> Result<Vec<ClusterState>, AdviseError> {
        sites
            .iter()
            .map(|s| simulate(s, settings.window, settings.seed, settings.prices.get(&s.name).copied()))
            .collect()
    };
    progress(&format!("simulating {} clusters for {} (the history)", sites.len(), settings.window.human()));
    let before = sim(sites)?;

    // Candidates, the most promising first: the first-order change of the summed imbalance
    // if the workflow's use simply left one cluster and joined the other.
    let mut candidates: Vec<(f64, usize, usize, String)> = Vec::new();
    for (a, site) in sites.iter().enumerate() {
        for b in (0..sites.len()).filter(|b| *b != a) {
            for wf in &site.workflows {
                let Some(&(core_h, gib_h)) = before[a].use_by_workflow.get(&wf.name) else { continue };
                let gain = first_order_gain(sites, &before, a, b, core_h, gib_h, settings.window);
                if gain > 1e-9 {
                    candidates.push((gain, a, b, wf.name.clone()));
                }
            }
        }
    }
    candidates.sort_by(|x, y| y.0.total_cmp(&x.0).then_with(|| x.3.cmp(&y.3)));
    candidates.truncate(settings.candidates);

    let mut moves = Vec::new();
    for (_, a, b, name) in &candidates {
        let (a, b) = (*a, *b);
        let Some(wf) = sites[a].workflows.iter().find(|w| &w.name == name) else { continue };
        let mut m = Move {
            workflow: name.clone(),
            tier: wf.tier,
            from_queue: wf.queue.to_string(),
            from: sites[a].name.clone(),
            to: sites[b].name.clone(),
            queue: String::new(),
            advised: false,
            why: String::new(),
            before: vec![before[a].clone(), before[b].clone()],
            after: Vec::new(),
        };
        let Some((moved, queue)) = move_workflow(sites, a, b, name) else {
            m.why = format!(
                "{} has no leaf of the same path or tier, or no node its tasks fit on",
                sites[b].name
            );
            moves.push(m);
            continue;
        };
        progress(&format!("trying {name}: {} → {} ({queue})", sites[a].name, sites[b].name));
        let after = sim(&moved)?;
        (m.advised, m.why) = verdict(&before, &after);
        m.queue = queue;
        m.after = vec![after[a].clone(), after[b].clone()];
        moves.push(m);
    }
    moves.sort_by(|x, y| y.advised.cmp(&x.advised).then_with(|| gain_of(x).total_cmp(&gain_of(y)).reverse()));

    // The advised moves together, one by one, each kept only if it still helps.
    let mut current = sites.to_vec();
    let mut state = before.clone();
    let mut together = Vec::new();
    for m in moves.iter().filter(|m| m.advised) {
        let (Some(a), Some(b)) =
            (current.iter().position(|s| s.name == m.from), current.iter().position(|s| s.name == m.to))
        else {
            continue;
        };
        let Some((moved, _)) = move_workflow(&current, a, b, &m.workflow) else { continue };
        let after = if together.is_empty() { after_all(m, &state) } else { sim(&moved)? };
        if verdict(&state, &after).0 {
            current = moved;
            state = after;
            together.push(format!("{}: {} → {}", m.workflow, m.from, m.to));
        }
    }
    Ok(Advice { window: settings.window.human(), seed: settings.seed, before, moves, together, after: state })
}

/// Every site simulated over the window as it runs now (with each workflow's use).
pub fn states(sites: &[Site], settings: &AdviseSettings) -> Result<Vec<ClusterState>, AdviseError> {
    sites
        .iter()
        .map(|s| simulate(s, settings.window, settings.seed, settings.prices.get(&s.name).copied()))
        .collect()
}

/// A workflow's best-fitting cluster by shape: reference 001's resource DB from history.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Fit {
    pub workflow: String,
    /// Where it runs now, and the cluster and leaf that fit it best (`to == from`: it stays).
    pub from: String,
    pub to: String,
    pub queue: String,
    /// GiB per core of its recorded task use, and of the best cluster's capacity.
    pub gib_per_core: f64,
    pub target_gib_per_core: f64,
}

/// For every workflow with recorded use in `before`: the cluster whose memory per core is
/// closest (by ratio) to the workflow's own use, among those with a leaf of its path or tier
/// and a node each of its tasks fits on. Ties keep it where it is, then take the first by name.
pub fn best_fits(sites: &[Site], before: &[ClusterState]) -> Vec<Fit> {
    let shape = |s: &Site| {
        let t = s.config.total_resources();
        (t.cpu > 0).then(|| (t.memory as f64 / 1024.0) / (t.cpu as f64 / 1000.0))
    };
    let mut out = Vec::new();
    for (a, site) in sites.iter().enumerate() {
        for wf in &site.workflows {
            let Some(&(core_h, gib_h)) = before.get(a).and_then(|b| b.use_by_workflow.get(&wf.name)) else {
                continue;
            };
            if core_h <= 0.0 || gib_h <= 0.0 {
                continue;
            }
            let own = gib_h / core_h;
            let mut best: Option<(f64, usize, String)> = None;
            let mut order: Vec<usize> = (0..sites.len()).collect();
            order.sort_by_key(|&b| (b != a, sites[b].name.clone()));
            for b in order {
                let Some(ratio) = shape(&sites[b]).filter(|r| *r > 0.0) else { continue };
                let queue = if b == a {
                    wf.queue.to_string()
                } else {
                    match move_workflow(sites, a, b, &wf.name) {
                        Some((_, q)) => q,
                        None => continue,
                    }
                };
                let score = (own / ratio).ln().abs();
                if best.as_ref().is_none_or(|(s, _, _)| score < *s - 1e-9) {
                    best = Some((score, b, queue));
                }
            }
            if let Some((_, b, queue)) = best {
                out.push(Fit {
                    workflow: wf.name.clone(),
                    from: site.name.clone(),
                    to: sites[b].name.clone(),
                    queue,
                    gib_per_core: own,
                    target_gib_per_core: shape(&sites[b]).unwrap_or(0.0),
                });
            }
        }
    }
    out
}

/// The sites with each fit's workflow moved to its cluster (those that stay, or cannot move,
/// are left where they are).
pub fn with_fits(sites: &[Site], fits: &[Fit]) -> Vec<Site> {
    let mut current = sites.to_vec();
    for f in fits.iter().filter(|f| f.from != f.to) {
        let (Some(a), Some(b)) =
            (current.iter().position(|s| s.name == f.from), current.iter().position(|s| s.name == f.to))
        else {
            continue;
        };
        if let Some((moved, _)) = move_workflow(&current, a, b, &f.workflow) {
            current = moved;
        }
    }
    current
}

/// The first advised move's simulated states, for every cluster (those it did not touch are
/// as before).
fn after_all(m: &Move, before: &[ClusterState]) -> Vec<ClusterState> {
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
pub fn verdict(before: &[ClusterState], after: &[ClusterState]) -> (bool, String) {
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
/// held theirs too), and tier-1 SLO outcomes.
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

fn simulate(
    site: &Site,
    until: Duration,
    seed: u64,
    price: Option<f64>,
) -> Result<ClusterState, AdviseError> {
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
    let failed = |source| AdviseError { cluster: site.name.clone(), source: Box::new(source) };
    let mut config = SimConfig { seed, until: Some(Time(until.as_millis())), ..SimConfig::default() };
    if site.live {
        config.am = None;
    }
    let workload = Workload { workflows: site.workflows.clone() };
    let tally = Rc::new(RefCell::new(Tally::default()));
    let mut sim = Simulation::new(site.config.clone(), workload, config).map_err(failed)?;
    sim.set_record_sink(Box::new(TallySink(Rc::clone(&tally))));
    sim.run().map_err(failed)?;
    let outcome = sim.finish().map_err(failed)?;
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

    fn site(name: &str, cluster: &str, workload: &str) -> Site {
        let config = ClusterConfig::from_yaml(name, cluster).expect("cluster");
        let workflows = Workload::from_yaml(name, workload, &config).expect("workload").workflows;
        Site { name: name.into(), config, workflows, live: false }
    }

    #[test]
    fn each_workflow_fits_the_cluster_whose_memory_per_core_is_closest_to_its_use() {
        let sites = [
            site(
                "cpu",
                include_str!("../../../examples/advise/cpu-rich.yaml"),
                include_str!("../../../examples/advise/cpu-rich-workload.yaml"),
            ),
            site(
                "mem",
                include_str!("../../../examples/advise/mem-rich.yaml"),
                include_str!("../../../examples/advise/mem-rich-workload.yaml"),
            ),
        ];
        let settings =
            AdviseSettings { window: Duration(86_400_000), seed: 1, candidates: 0, prices: BTreeMap::new() };
        let before = states(&sites, &settings).expect("simulate");
        let fits = best_fits(&sites, &before);
        let of = |wf: &str| fits.iter().find(|f| f.workflow == wf).cloned().expect("a fit");
        // 15 GiB per core on a 2-GiB-per-core cluster: the 32-GiB-per-core one fits it.
        let etl = of("sessions-etl");
        assert_eq!(
            (etl.from.as_str(), etl.to.as_str(), etl.queue.as_str()),
            ("cpu", "mem", "root.analytics.tier1")
        );
        assert!((etl.gib_per_core - 15.0).abs() < 1e-9, "{etl:?}");
        // Moving it evens the clusters out.
        let after = states(&with_fits(&sites, &[etl]), &settings).expect("simulate");
        let sum = |v: &[ClusterState]| v.iter().map(|s| s.imbalance.abs()).sum::<f64>();
        assert!(sum(&after) < sum(&before), "{before:?}\n{after:?}");
        // A fit to where it already runs moves nothing.
        let stays: Vec<Fit> = fits.iter().filter(|f| f.from == f.to).cloned().collect();
        assert_eq!(with_fits(&sites, &stays)[0].workflows.len(), sites[0].workflows.len());
    }

    #[test]
    fn advice_reads_back_from_its_json() {
        let mut idle = state("b", 0.0, 0.0, 0, 0);
        // An idle priced cluster's cost is infinite: written as null, read back as none.
        idle.cost_per_used_core_hour = Some(f64::INFINITY);
        let advice = Advice {
            window: "1d".into(),
            seed: 1,
            before: vec![state("a", 0.3, 0.9, 10, 6), idle],
            moves: Vec::new(),
            together: Vec::new(),
            after: Vec::new(),
        };
        let text = serde_json::to_string(&advice).expect("json");
        let back: Advice = serde_json::from_str(&text).expect("read back");
        assert_eq!(back.before[0], advice.before[0]);
        assert_eq!(back.before[1].cost_per_used_core_hour, None);
    }
}
