//! The evaluation: SLO jobs beside background work, in weir-sim, under five policies.
//!
//! 1. **Learn**: the workload is simulated once as written (a training seed); each SLO job's
//!    profile is built from its task records and its C(p, a) table from job-alone simulations.
//! 2. **Perturb**: every run of an SLO workflow becomes a workflow of its own, and a share of
//!    them is slowed (one stage's durations inflated) and made to fail more — what the model did
//!    not see.
//! 3. **Replay** the perturbed workload (an evaluation seed) under each policy:
//!    - `jockey`: the controller with C(p, a), every control period;
//!    - `static`: the controller's first allocation, never changed (Jockey without adaptation);
//!    - `max`: the job's full parallelism;
//!    - `fair`: no guarantee (plain fair share);
//!    - `amdahl`: the controller with Amdahl's S + P/a.
//!
//! An allocation of a containers is applied as the job's guarantee in the engine
//! (`Simulation::set_job_guarantee`, `Engine::set_job_guarantee`): a of its largest task
//! container plus its application master, placed ahead of fair share and restored by
//! preemption after the leaf's min-share timeout. The job is not capped: past its guarantee it
//! runs more tasks at fair share when there is room (Cosmos's spare tokens). The SLO jobs'
//! queues lose their configured minimum under every policy, so the guarantee is all they get.
//!
//! SLO jobs are the workflows of tier 1 with an SLO, one job and no gangs; the rest is
//! background.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{
    Arrival, ClusterConfig, Distribution, Duration, Limit, Resources, Time, Workflow, Workload,
};
use weir_sim::{JobStatus, SimConfig, Simulation, TaskOutcome as SimOutcome, TaskRecord};

use crate::controller::{ControlConfig, Controller, Decision, Utility};
use crate::error::SloError;
use crate::profile::{observations, JobProfile};
use crate::progress::JobState;
use crate::table::{Predictor, RemainingTable, TableConfig};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    Jockey,
    Static,
    Max,
    Fair,
    Amdahl,
}

impl Policy {
    pub const ALL: [Policy; 5] = [Policy::Jockey, Policy::Static, Policy::Max, Policy::Fair, Policy::Amdahl];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Jockey => "jockey",
            Policy::Static => "static",
            Policy::Max => "max",
            Policy::Fair => "fair",
            Policy::Amdahl => "amdahl",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct EvalConfig {
    /// The simulated window of the replays (and of the training run).
    pub until: Duration,
    pub train_seed: u64,
    pub seed: u64,
    pub control_period: Duration,
    /// Tables: runs per allocation, buckets, indicator; `max_allocation` caps the allocations
    /// simulated (each job's own parallelism caps them too).
    pub table: TableConfig,
    pub control: ControlConfig,
    /// Share of SLO runs slowed, by how much one of their stages' durations is multiplied, and
    /// the failure probability added to every stage of every SLO run.
    pub slow_share: f64,
    pub slow_factor: f64,
    pub extra_failure: f64,
    pub policies: Vec<Policy>,
}

impl Default for EvalConfig {
    fn default() -> EvalConfig {
        EvalConfig {
            until: Duration::from_secs(2 * 86_400),
            train_seed: 1,
            seed: 2,
            control_period: Duration::from_secs(60),
            table: TableConfig { max_allocation: 128, runs: 20, ..TableConfig::default() },
            control: ControlConfig::default(),
            slow_share: 0.3,
            slow_factor: 1.5,
            extra_failure: 0.03,
            policies: Policy::ALL.to_vec(),
        }
    }
}

/// One SLO job run under one policy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalJob {
    pub policy: Policy,
    /// The SLO workflow, and the run's number among its runs.
    pub workflow: String,
    pub run: u32,
    pub slowed: bool,
    pub submit_ms: u64,
    pub deadline_ms: u64,
    /// Completion from submission; `None` if it did not finish within the window.
    pub completion_ms: Option<u64>,
    pub met: bool,
    /// Its completion from submission when it runs alone on a cluster with room for every
    /// task at once (the same seed, so the same task durations and failures, which weir-sim
    /// draws per job): what full parallelism from its first second achieves, the best any
    /// allocation policy can do. `None` if it did not finish in the window. A deadline below
    /// it is one no policy could meet.
    pub alone_ms: Option<u64>,
    /// Container-hours guaranteed (the allocation over time, in task containers; `fair`: none)
    /// and used (task attempts).
    pub allocated_hours: f64,
    pub used_hours: f64,
    /// The controller's decisions (jockey and amdahl).
    pub decisions: Vec<Decision>,
}

/// One policy's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PolicyFigures {
    pub policy: Policy,
    pub slo_runs: usize,
    pub met: usize,
    pub met_ratio: f64,
    /// Completion over deadline: median, 90th percentile, worst.
    pub lateness_p50: f64,
    pub lateness_p90: f64,
    pub lateness_max: f64,
    pub allocated_hours: f64,
    pub used_hours: f64,
    /// Background jobs: completed, and their mean and 90th-percentile response time in s.
    pub background_jobs: usize,
    pub background_response_mean_s: f64,
    pub background_response_p90_s: f64,
    /// Of the runs maximal allocation met (the ones some allocation could meet), how many this
    /// policy met; `None` when `max` did not run.
    pub met_where_max_met: Option<usize>,
    /// Runs whose deadline their completion with room for all their tasks
    /// ([`EvalJob::alone_ms`]) meets, and how many of those this policy met.
    pub feasible_runs: usize,
    pub met_where_feasible: usize,
}

/// An SLO job's deadline against what its model predicts at maximal allocation: how much room
/// the deadline leaves (docs/slo.md, "Deadlines").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SloJobFigures {
    pub workflow: String,
    pub deadline_ms: u64,
    /// Its maximal allocation: its widest stage, at most what its table knows and what the
    /// cluster holds of its containers beside its application master.
    pub max_allocation: u32,
    /// The median and 99th percentile of its predicted duration from submission at that
    /// allocation (C(0, A), initialization latency included).
    pub predicted_p50_ms: u64,
    pub predicted_p99_ms: u64,
    /// The controller's own prediction before the job starts at that allocation: its
    /// quantile of C(0, A) (made monotone over the allocations) times its starting slack —
    /// the completion it plans for when it gives the job everything. The evaluation
    /// workload's deadlines are this, rounded up to the minute (docs/slo.md, "Deadlines").
    pub controller_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    pub slo_jobs: Vec<SloJobFigures>,
    /// Tier-1 workflows with an SLO that the controller does not guard, and why: they are
    /// replayed as background.
    pub unguarded: Vec<String>,
    pub profiles: Vec<JobProfile>,
    pub policies: Vec<PolicyFigures>,
    pub jobs: Vec<EvalJob>,
}

/// Evaluate the policies on `workload` over `cluster` (see the module docs).
pub fn evaluate(
    cluster: &ClusterConfig,
    workload: &Workload,
    config: &EvalConfig,
) -> Result<EvalReport, SloError> {
    let slo: Vec<usize> = (0..workload.workflows.len()).filter(|&w| is_slo(&workload.workflows[w])).collect();
    if slo.is_empty() {
        return Err(SloError::Setting {
            setting: "workload",
            value: format!("{} workflows", workload.workflows.len()),
            problem: "none is an SLO job (tier 1, an slo, one job, no gangs)",
        });
    }
    let profiles = learn(cluster, workload, &slo, config)?;
    let mut tables = Vec::with_capacity(profiles.len());
    for p in &profiles {
        let table = TableConfig {
            max_allocation: config.table.max_allocation.min(p.max_parallelism()).max(1),
            ..config.table.clone()
        };
        tables.push(RemainingTable::build(p, &table)?);
    }
    let (eval_workload, mut runs) = perturb(workload, &slo, config);
    let alone = alone(cluster, &eval_workload, &runs, &profiles, config)?;
    for (r, a) in runs.iter_mut().zip(alone) {
        if let Some(r) = r {
            r.alone_ms = a;
        }
    }
    let mut jobs = Vec::new();
    let mut policies = Vec::new();
    for &policy in &config.policies {
        let (mut js, background) =
            replay(cluster, &eval_workload, &runs, &profiles, &tables, policy, config)?;
        policies.push(figures(policy, &js, background));
        jobs.append(&mut js);
    }
    let feasible: Vec<(&str, u32)> = jobs
        .iter()
        .filter(|j| j.policy == Policy::Max && j.met)
        .map(|j| (j.workflow.as_str(), j.run))
        .collect();
    if config.policies.contains(&Policy::Max) {
        for f in &mut policies {
            let met = jobs
                .iter()
                .filter(|j| j.policy == f.policy && j.met && feasible.contains(&(j.workflow.as_str(), j.run)))
                .count();
            f.met_where_max_met = Some(met);
        }
    }
    let slo_jobs = profiles
        .iter()
        .zip(&tables)
        .zip(&slo)
        .map(|((p, t), &w)| {
            let unit = workload.workflows[w].jobs[0]
                .stages
                .iter()
                .map(|s| cluster.scheduler.normalize(&s.resources))
                .fold(Resources::ZERO, |a, r| a.component_max(&r));
            let total = cluster.total_resources();
            let fits = [(total.cpu, unit.cpu), (total.memory, unit.memory), (total.gpu, unit.gpu)]
                .iter()
                .filter(|(_, u)| *u > 0)
                .map(|(t, u)| t / u)
                .min()
                .unwrap_or(u64::MAX)
                .saturating_sub(1);
            let a = t.max_allocation().min(u32::try_from(fits).unwrap_or(u32::MAX)).max(1);
            let deadline_ms = workload.workflows[w].slo.map_or(0, |d| d.as_millis());
            let controller = Controller::new(
                Predictor::Table { profile: p.clone(), table: t.clone() },
                Utility::deadline(deadline_ms),
                config.control.clone(),
            );
            SloJobFigures {
                workflow: p.workflow.clone(),
                deadline_ms,
                controller_ms: controller.predicted(0, &JobState::new(p), a),
                max_allocation: a,
                predicted_p50_ms: t.remaining(0.0, a, 0.5),
                predicted_p99_ms: t.remaining(0.0, a, 0.99),
            }
        })
        .collect();
    let unguarded = workload
        .workflows
        .iter()
        .filter(|wf| wf.tier == 1 && wf.slo.is_some())
        .filter_map(|wf| Some(format!("{}: {}", wf.name, unguarded(wf)?)))
        .collect();
    Ok(EvalReport { slo_jobs, unguarded, profiles, policies, jobs })
}

fn is_slo(wf: &Workflow) -> bool {
    wf.tier == 1 && wf.slo.is_some() && unguarded(wf).is_none()
}

/// Why a workflow with an SLO is not one the controller guards (its profile is one job's
/// stage DAG of independent tasks, and its runs are counted by their arrival times).
fn unguarded(wf: &Workflow) -> Option<String> {
    if wf.jobs.len() != 1 {
        return Some(format!("{} jobs; the controller guards workflows of one job", wf.jobs.len()));
    }
    if wf.jobs[0].gang || wf.jobs[0].stages.iter().any(|s| s.gang) {
        return Some("a gang; the controller guards jobs of independent tasks".into());
    }
    if matches!(wf.arrival, Arrival::Poisson { .. }) {
        return Some("random (Poisson) arrivals; the evaluation replays runs at known times".into());
    }
    None
}

fn sim_error(what: &str, source: weir_sim::SimError) -> SloError {
    SloError::Sim { job: what.into(), allocation: 0, source: Box::new(source) }
}

/// The training run: each SLO workflow's profile from its task records.
fn learn(
    cluster: &ClusterConfig,
    workload: &Workload,
    slo: &[usize],
    config: &EvalConfig,
) -> Result<Vec<JobProfile>, SloError> {
    let sc = SimConfig {
        seed: config.train_seed,
        until: Some(Time(config.until.as_millis())),
        check_invariants: false,
        ..SimConfig::default()
    };
    let mut sim =
        Simulation::new(cluster.clone(), workload.clone(), sc).map_err(|e| sim_error("training run", e))?;
    sim.keep_task_records();
    let mut records = Vec::new();
    while sim.step().map_err(|e| sim_error("training run", e))? {
        records.extend(sim.take_task_records());
    }
    let out = sim.finish().map_err(|e| sim_error("training run", e))?;
    slo.iter()
        .map(|&w| {
            let wf = &workload.workflows[w];
            let init: Vec<Duration> = out
                .job_records
                .iter()
                .filter(|j| j.workflow as usize == w)
                .filter_map(|j| Some(j.first_start?.since(j.submit)))
                .collect();
            let runs = out.runs.iter().filter(|r| r.workflow as usize == w).count() as u32;
            JobProfile::build(&wf.name, &wf.jobs[0], runs, &observations(&records, wf, w as u32, 0), &init)
        })
        .collect()
}

/// One SLO run in the evaluation workload: its SLO workflow (index among the SLO ones), its
/// number, and whether it was slowed.
#[derive(Clone, Debug)]
struct SloRun {
    slo: usize,
    run: u32,
    slowed: bool,
    /// Its completion with room for all its tasks (see [`alone`]).
    alone_ms: Option<u64>,
}

/// The evaluation workload: background as it was, each SLO run its own workflow (perturbed).
/// Returns it with, per workflow index, the SLO run it is (if any).
fn perturb(workload: &Workload, slo: &[usize], config: &EvalConfig) -> (Workload, Vec<Option<SloRun>>) {
    let mut rng = SplitMix(config.seed ^ 0x05ee_d510);
    let until = Time(config.until.as_millis());
    let mut out = Vec::new();
    let mut runs = Vec::new();
    for (w, wf) in workload.workflows.iter().enumerate() {
        let Some(k) = slo.iter().position(|&s| s == w) else {
            out.push(wf.clone());
            runs.push(None);
            continue;
        };
        let times: Vec<Time> = match &wf.arrival {
            Arrival::At(ts) => ts.iter().copied().filter(|&t| t < until).collect(),
            Arrival::Every { start, every } => (0..)
                .map(|i| start.plus(Duration(every.as_millis() * i)))
                .take_while(|&t| t < until)
                .collect(),
            Arrival::Poisson { .. } => Vec::new(),
        };
        for (i, t) in times.into_iter().enumerate() {
            let mut one = wf.clone();
            one.name = format!("{}#{i}", wf.name);
            one.arrival = Arrival::At(vec![t]);
            let slowed = rng.unit() < config.slow_share;
            let stages = &mut one.jobs[0].stages;
            if slowed {
                let s = (rng.next() % stages.len() as u64) as usize;
                stages[s].duration = scale(&stages[s].duration, config.slow_factor);
            }
            for s in stages.iter_mut() {
                s.failure_probability = (s.failure_probability + config.extra_failure).min(0.9);
            }
            out.push(one);
            runs.push(Some(SloRun { slo: k, run: i as u32, slowed, alone_ms: None }));
        }
    }
    (Workload { workflows: out }, runs)
}

fn scale(d: &Distribution, f: f64) -> Distribution {
    let s = |d: Duration| Duration((d.as_millis() as f64 * f).round() as u64);
    match d {
        Distribution::Fixed(d) => Distribution::Fixed(s(*d)),
        Distribution::Uniform { min, max } => Distribution::Uniform { min: s(*min), max: s(*max) },
        Distribution::Exponential { mean } => Distribution::Exponential { mean: s(*mean) },
        Distribution::LogNormal { mu, sigma } => Distribution::LogNormal { mu: mu + f.ln(), sigma: *sigma },
        Distribution::Empirical(v) => Distribution::Empirical(v.iter().map(|&d| s(d)).collect()),
    }
}

/// Each SLO run's completion (from submission) with room for all its tasks at once: the
/// evaluation workload replayed with the same seed on the cluster's node groups repeated until
/// every SLO job's widest stage (and its application master) fits beside the others, with
/// every queue that holds no SLO run capped at the original cluster's size. The background
/// arrives and runs as before, in its old room; the SLO runs are placed the moment they ask.
/// The workload itself is unchanged, so every run keeps its number and its random streams
/// (weir-sim draws a job's durations and failures from a stream of the workflow and the run):
/// the same task durations and failures as in the replays, up to the order in which a job's
/// retries and fresh tasks draw. Indexed by workflow; `None` for the background or a run
/// that did not finish in the window.
fn alone(
    cluster: &ClusterConfig,
    workload: &Workload,
    runs: &[Option<SloRun>],
    profiles: &[JobProfile],
    config: &EvalConfig,
) -> Result<Vec<Option<u64>>, SloError> {
    let mut cluster = cluster.clone();
    let total = cluster.total_resources();
    let mut need = Resources::ZERO;
    let mut slo_leaves = Vec::new();
    for (wf, r) in workload.workflows.iter().zip(runs) {
        let Some(r) = r else { continue };
        slo_leaves.extend(cluster.find(&wf.queue));
        if r.run > 0 {
            continue;
        }
        let unit = wf.jobs[0]
            .stages
            .iter()
            .map(|s| cluster.scheduler.normalize(&s.resources))
            .fold(Resources::ZERO, |a, r| a.component_max(&r));
        need += unit.times(u64::from(profiles[r.slo].max_parallelism()) + 1);
    }
    let ratio = |n: u64, t: u64| if t == 0 { 0 } else { n.div_ceil(t) };
    let factor = 1 + ratio(need.cpu, total.cpu).max(ratio(need.memory, total.memory)).max(1);
    for g in &mut cluster.nodes {
        g.count = g.count.saturating_mul(u32::try_from(factor).unwrap_or(u32::MAX));
    }
    for (i, q) in cluster.queues.iter_mut().enumerate() {
        if q.children.is_empty() && !slo_leaves.contains(&i) {
            let max = q.max.resolve(&total);
            q.max = Limit::Absolute(Resources {
                cpu: max.cpu.min(total.cpu),
                memory: max.memory.min(total.memory),
                gpu: max.gpu.min(total.gpu),
            });
        }
    }
    let what = "the SLO runs with room for all their tasks";
    let sc = SimConfig {
        seed: config.seed,
        until: Some(Time(config.until.as_millis())),
        check_invariants: false,
        ..SimConfig::default()
    };
    let mut sim = Simulation::new(cluster, workload.clone(), sc).map_err(|e| sim_error(what, e))?;
    while sim.step().map_err(|e| sim_error(what, e))? {}
    let out = sim.finish().map_err(|e| sim_error(what, e))?;
    let mut alone = vec![None; workload.workflows.len()];
    for j in &out.job_records {
        let w = j.workflow as usize;
        if runs.get(w).is_some_and(Option::is_some) && j.status == JobStatus::Completed {
            alone[w] = j.end.map(|e| e.since(j.submit).as_millis());
        }
    }
    Ok(alone)
}

/// A live SLO job in a replay.
struct Live {
    index: usize,
    submit: Time,
    state: JobState,
    controller: Option<Controller>,
    next_control: Time,
    cap: u32,
    last: Time,
    allocated_ms: f64,
    used_ms: u64,
    end: Option<Time>,
}

fn replay(
    cluster: &ClusterConfig,
    workload: &Workload,
    runs: &[Option<SloRun>],
    profiles: &[JobProfile],
    tables: &[RemainingTable],
    policy: Policy,
    config: &EvalConfig,
) -> Result<(Vec<EvalJob>, Vec<u64>), SloError> {
    let what = format!("replay under {}", policy.name());
    // The SLO jobs' queues lose their guaranteed minimum under every policy: what an SLO job is
    // guaranteed is its own allocation, set through the engine's per-job guarantee (none under
    // `fair`). The leaf keeps its min-share preemption timeout, which the guarantee follows.
    let mut cluster = cluster.clone();
    for wf in workload.workflows.iter().zip(runs).filter(|(_, r)| r.is_some()).map(|(w, _)| w) {
        if let Some(q) = cluster.find(&wf.queue) {
            cluster.queues[q].min = Limit::Absolute(Resources::ZERO);
        }
    }
    let sc = SimConfig {
        seed: config.seed,
        until: Some(Time(config.until.as_millis())),
        check_invariants: false,
        ..SimConfig::default()
    };
    // One allocation unit of a workflow's job: its largest task container as the engine
    // rounds it; the guarantee of a containers is a of them plus the application master.
    let am = sc.am.map_or(Resources::ZERO, |r| cluster.scheduler.normalize(&r));
    let unit = |w: usize| -> Resources {
        workload.workflows[w].jobs[0]
            .stages
            .iter()
            .map(|s| cluster.scheduler.normalize(&s.resources))
            .fold(Resources::ZERO, |a, r| a.component_max(&r))
    };
    let guarantee = |w: usize, a: u32| -> Resources {
        if a == 0 {
            Resources::ZERO
        } else {
            unit(w).times(u64::from(a)) + am
        }
    };
    let mut sim = Simulation::new(cluster.clone(), workload.clone(), sc).map_err(|e| sim_error(&what, e))?;
    sim.keep_task_records();
    let controller = |k: usize, deadline: u64| -> Option<Controller> {
        let predictor = match policy {
            Policy::Jockey | Policy::Static => {
                Predictor::Table { profile: profiles[k].clone(), table: tables[k].clone() }
            }
            Policy::Amdahl => Predictor::Amdahl { profile: profiles[k].clone() },
            Policy::Max | Policy::Fair => return None,
        };
        Some(Controller::new(predictor, Utility::deadline(deadline), config.control.clone()))
    };
    let mut live: BTreeMap<u64, Live> = BTreeMap::new();
    let mut decisions: BTreeMap<u64, Vec<Decision>> = BTreeMap::new();
    let mut seen_jobs = 0u64;
    let mut records: Vec<TaskRecord> = Vec::new();
    while sim.step().map_err(|e| sim_error(&what, e))? {
        let now = sim.now();
        for id in seen_jobs..sim.jobs_submitted() {
            let job = weir_engine_job(id);
            let Some(w) = sim.workflow_of(job) else { continue };
            let Some(r) = &runs[w as usize] else { continue };
            let deadline = workload.workflows[w as usize].slo.map_or(0, |d| d.as_millis());
            let c = controller(r.slo, deadline);
            // Every SLO run starts at its policy's first allocation.
            let cap = match (policy, &c) {
                (Policy::Fair, _) => 0,
                (_, Some(c)) => c.initial(),
                (_, None) => profiles[r.slo].max_parallelism(),
            };
            sim.set_job_guarantee(job, guarantee(w as usize, cap)).map_err(|e| sim_error(&what, e))?;
            live.insert(
                id,
                Live {
                    index: w as usize,
                    submit: now,
                    state: JobState::new(&profiles[r.slo]),
                    controller: c.filter(|_| policy != Policy::Static),
                    next_control: now,
                    cap,
                    last: now,
                    allocated_ms: 0.0,
                    used_ms: 0,
                    end: None,
                },
            );
        }
        seen_jobs = sim.jobs_submitted();
        for t in sim.take_task_records() {
            if let Some(l) = live.get_mut(&u64::from(t.job)) {
                l.used_ms += t.end.since(t.start).as_millis();
                l.state.started = true;
                if t.outcome == SimOutcome::Done {
                    l.state.done[t.stage as usize] += 1;
                    l.state.ran_ms[t.stage as usize] += t.end.since(t.start).as_millis();
                }
            }
            records.push(t);
        }
        for (&id, l) in live.iter_mut().filter(|(_, l)| l.end.is_none()) {
            l.allocated_ms += f64::from(l.cap) * now.since(l.last).as_millis() as f64;
            l.last = now;
            let r = runs[l.index].as_ref().expect("an SLO run");
            if l.state.done.iter().zip(&profiles[r.slo].stages).all(|(&d, s)| d >= s.tasks) {
                l.end = Some(now);
                continue;
            }
            if l.state.done.iter().any(|&d| d > 0) {
                l.state.started = true;
            }
            let Some(c) = &mut l.controller else { continue };
            if now < l.next_control {
                continue;
            }
            l.next_control = now.plus(config.control_period);
            let d = c.step(now.since(l.submit).as_millis(), &l.state);
            if d.allocation != l.cap {
                sim.set_job_guarantee(weir_engine_job(id), guarantee(l.index, d.allocation))
                    .map_err(|e| sim_error(&what, e))?;
                l.cap = d.allocation;
            }
            decisions.entry(id).or_default().push(d);
        }
    }
    let out = sim.finish().map_err(|e| sim_error(&what, e))?;
    let mut background = Vec::new();
    for j in &out.job_records {
        if runs[j.workflow as usize].is_none() && j.status == JobStatus::Completed {
            if let Some(end) = j.end {
                background.push(end.since(j.submit).as_millis());
            }
        }
    }
    let mut jobs = Vec::new();
    for (id, l) in live {
        let r = runs[l.index].as_ref().expect("an SLO run");
        let wf = &workload.workflows[l.index];
        let deadline = wf.slo.map_or(0, |d| d.as_millis());
        let record = out.job_records.iter().find(|j| j.job == id);
        let completion = record
            .filter(|j| j.status == JobStatus::Completed)
            .and_then(|j| Some(j.end?.since(j.submit).as_millis()));
        jobs.push(EvalJob {
            policy,
            workflow: profiles[r.slo].workflow.clone(),
            run: r.run,
            slowed: r.slowed,
            submit_ms: l.submit.as_millis(),
            deadline_ms: deadline,
            completion_ms: completion,
            met: completion.is_some_and(|c| c <= deadline),
            alone_ms: r.alone_ms,
            allocated_hours: if policy == Policy::Fair { 0.0 } else { l.allocated_ms / 3.6e6 },
            used_hours: l.used_ms as f64 / 3.6e6,
            decisions: decisions.remove(&id).unwrap_or_default(),
        });
    }
    Ok((jobs, background))
}

fn weir_engine_job(id: u64) -> weir_engine::JobId {
    weir_engine::JobId(id)
}

fn figures(policy: Policy, jobs: &[EvalJob], mut background: Vec<u64>) -> PolicyFigures {
    let mut lateness: Vec<f64> = jobs
        .iter()
        .map(|j| j.completion_ms.map_or(f64::INFINITY, |c| c as f64 / j.deadline_ms.max(1) as f64))
        .collect();
    lateness.sort_by(f64::total_cmp);
    let at =
        |v: &[f64], q: f64| v.get(((v.len().max(1) - 1) as f64 * q).round() as usize).copied().unwrap_or(0.0);
    background.sort_unstable();
    let met = jobs.iter().filter(|j| j.met).count();
    PolicyFigures {
        policy,
        slo_runs: jobs.len(),
        met,
        met_ratio: met as f64 / jobs.len().max(1) as f64,
        lateness_p50: at(&lateness, 0.5),
        lateness_p90: at(&lateness, 0.9),
        lateness_max: lateness.last().copied().unwrap_or(0.0),
        allocated_hours: jobs.iter().map(|j| j.allocated_hours).sum(),
        used_hours: jobs.iter().map(|j| j.used_hours).sum(),
        background_jobs: background.len(),
        background_response_mean_s: background.iter().sum::<u64>() as f64
            / background.len().max(1) as f64
            / 1000.0,
        background_response_p90_s: background
            .get(((background.len().max(1) - 1) as f64 * 0.9).round() as usize)
            .map_or(0.0, |&b| b as f64 / 1000.0),
        met_where_max_met: None,
        feasible_runs: jobs.iter().filter(|j| feasible(j)).count(),
        met_where_feasible: jobs.iter().filter(|j| j.met && feasible(j)).count(),
    }
}

fn feasible(j: &EvalJob) -> bool {
    j.alone_ms.is_some_and(|a| a <= j.deadline_ms)
}

/// A small seeded generator (SplitMix64) for the perturbations.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
