//! The simulation: a discrete-event loop in virtual time that drives the real engine.
//!
//! Each step takes the earliest pending time — the next event or the engine's next wakeup —
//! handles every event due then (run arrivals, task ends, node faults) in the order they were
//! scheduled, calls `schedule` once, and carries out the decisions: a started container runs a
//! task for its sampled duration, a killed one loses its work and is asked for again. The task
//! and workflow model itself is in `execution.rs`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use weir_engine::{ContainerId, Decision, Engine, NodeId, NodeSpec, Selector, SelectorId};
use weir_model::{Arrival, ClusterConfig, Duration, NodeGroup, Resources, Time, Workload};

use crate::config::{SimConfig, MAX_SIMULATED};
use crate::error::SimError;
use crate::execution::{JobRun, RunState, TaskRun};
use crate::metrics::{Metrics, UsageRow};
use crate::sample::{self, Rng};
use crate::summary::{Outcome, RunRecord};

/// Something due at a point of virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Event {
    /// The `index`-th run of a workflow is submitted.
    Arrival {
        workflow: u32,
        index: u32,
    },
    /// A task's attempt ends in its container, done or failed.
    TaskEnd {
        container: ContainerId,
        failed: bool,
    },
    /// A node picked at random fails (if it is up).
    NodeFailure,
    NodeRepair {
        node: u64,
    },
}

/// A workflow with what the loop needs at hand: its leaf and its DAGs read forwards.
#[derive(Debug)]
pub(crate) struct Plan {
    pub leaf: usize,
    /// For each job, the jobs that wait for it.
    pub job_next: Vec<Vec<u32>>,
    /// For each job and stage, the stages that wait for it.
    pub stage_next: Vec<Vec<Vec<u32>>>,
    /// For each job and stage, the engine's selector for its tasks' labels and GPU models.
    pub selectors: Vec<Vec<SelectorId>>,
    pub arrival_rng: Rng,
}

/// Where the simulation stands, for progress displays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub now: Time,
    pub until: Option<Time>,
    pub runs_submitted: u64,
    pub runs_ended: u64,
    /// Runs the workload will submit in all, when it is a finite list (trace replays).
    pub runs_expected: Option<u64>,
    pub events: u64,
}

/// A cluster, a workload and a seed, simulated step by step. See the crate docs.
pub struct Simulation {
    pub(crate) engine: Engine,
    pub(crate) config: SimConfig,
    pub(crate) cluster: ClusterConfig,
    pub(crate) workload: Workload,
    pub(crate) plans: Vec<Plan>,
    events: BinaryHeap<Reverse<(Time, u64, Event)>>,
    seq: u64,
    pub(crate) now: Time,
    pub(crate) jobs: Vec<JobRun>,
    pub(crate) runs: Vec<RunState>,
    /// Running tasks, indexed by `ContainerId::index`.
    pub(crate) tasks: Vec<Option<TaskRun>>,
    pub(crate) metrics: Metrics,
    pub(crate) records: Vec<RunRecord>,
    /// The node groups of the cluster file; node ids number the nodes group after group.
    node_groups: Vec<NodeGroup>,
    node_ends: Vec<u64>,
    node_up: Vec<bool>,
    fault_rng: Rng,
    leaves: Vec<usize>,
    arrivals_pending: u64,
    pub(crate) runs_active: u64,
    runs_expected: Option<u64>,
    finished: bool,
}

/// The tag of an application master's request; stage requests are tagged with their index.
pub(crate) const AM_TAG: u64 = u64::MAX;

impl Simulation {
    /// Check the workload against the cluster and set up the first arrivals.
    pub fn new(
        cluster: ClusterConfig,
        workload: Workload,
        config: SimConfig,
    ) -> Result<Simulation, SimError> {
        if config.max_attempts == 0 {
            return Err(SimError::Setting { setting: "max_attempts", problem: "must be at least 1".into() });
        }
        if config.sample_every.as_millis() == 0 {
            return Err(SimError::Setting { setting: "sample_every", problem: "must be positive".into() });
        }
        if let Some(f) = &config.node_failures {
            if f.mtbf.as_millis() == 0 {
                return Err(SimError::Setting {
                    setting: "node_failures.mtbf",
                    problem: "must be positive".into(),
                });
            }
        }
        if let Some(until) = config.until.filter(|u| u.as_millis() > MAX_SIMULATED.as_millis()) {
            return Err(SimError::Horizon {
                what: "the horizon (--until)".to_string(),
                at_days: until.as_millis() / DAY_MS,
                limit_days: MAX_SIMULATED.as_millis() / DAY_MS,
            });
        }
        check_run_count(&workload, &config)?;
        let mut engine = Engine::new(cluster.clone())?;
        let node_groups = cluster.nodes.clone();
        let mut specs = Vec::new();
        for g in &node_groups {
            for _ in 0..g.count {
                let id = NodeId(specs.len() as u64);
                specs.push(NodeSpec {
                    id,
                    resources: g.resources,
                    label: g.label.clone(),
                    gpu_model: g.gpu_model.clone(),
                });
            }
        }
        let node_count = specs.len();
        engine.on_nodes_added(Time::ZERO, specs)?;
        engine.set_container_limit(config.max_containers);
        let plans = plan(&cluster, &workload, &config, &node_groups, &mut engine)?;
        let leaves: Vec<usize> = (0..cluster.queues.len()).filter(|&q| cluster.queues[q].is_leaf()).collect();
        let runs_expected = expected_runs(&workload, config.until);
        let mut metrics = Metrics::new(cluster.queues.len(), config.sample_every.as_millis());
        if cluster.total_resources().gpu > 0 {
            metrics.gpu_mix = gpu_mix(&workload, &plans);
        }
        let mut sim = Simulation {
            engine,
            fault_rng: sample::stream(config.seed, &[3]),
            config,
            cluster,
            workload,
            plans,
            events: BinaryHeap::new(),
            seq: 0,
            now: Time::ZERO,
            jobs: Vec::new(),
            runs: Vec::new(),
            tasks: Vec::new(),
            metrics,
            records: Vec::new(),
            node_up: vec![true; node_count],
            node_ends: node_groups
                .iter()
                .scan(0u64, |end, g| {
                    *end += u64::from(g.count);
                    Some(*end)
                })
                .collect(),
            node_groups,
            leaves,
            arrivals_pending: 0,
            runs_active: 0,
            runs_expected,
            finished: false,
        };
        for w in 0..sim.workload.workflows.len() {
            sim.schedule_arrival(w as u32, 0);
        }
        if sim.config.node_failures.is_some() && !sim.node_up.is_empty() {
            sim.schedule_node_failure();
        }
        Ok(sim)
    }

    pub(crate) fn push(&mut self, at: Time, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, event)));
    }

    /// When the `index`-th run of workflow `w` arrives, if it does before the horizon.
    fn schedule_arrival(&mut self, w: u32, index: u32) {
        let at = match &self.workload.workflows[w as usize].arrival {
            Arrival::At(times) => times.get(index as usize).copied(),
            Arrival::Every { start, every } => {
                Some(start.plus(Duration(every.as_millis().saturating_mul(u64::from(index)))))
            }
            Arrival::Poisson { start, mean_interval } => {
                let from = if index == 0 { *start } else { self.now };
                let gap = sample::exp_gap_ms(
                    mean_interval.as_millis() as f64,
                    &mut self.plans[w as usize].arrival_rng,
                );
                Some(from.plus(Duration(gap)))
            }
        };
        let Some(at) = at else { return };
        if self.config.until.is_some_and(|u| at >= u) {
            return;
        }
        self.arrivals_pending += 1;
        self.push(at.max(self.now), Event::Arrival { workflow: w, index });
    }

    fn schedule_node_failure(&mut self) {
        let Some(f) = self.config.node_failures else { return };
        // One failure process for the whole cluster at N times a node's rate; a draw that hits
        // a node already down does nothing, which leaves every up node its own rate.
        let mean = f.mtbf.as_millis() as f64 / self.node_up.len() as f64;
        let gap = sample::exp_gap_ms(mean, &mut self.fault_rng);
        let at = self.now.plus(Duration(gap));
        self.push(at, Event::NodeFailure);
    }

    /// Simulate one point of time. False once the simulation is over.
    pub fn step(&mut self) -> Result<bool, SimError> {
        if self.finished {
            return Ok(false);
        }
        let next_event = self.events.peek().map(|Reverse((t, _, _))| *t);
        // A timer already due was handled by the last pass; the next look is a millisecond on.
        let wakeup = self.engine.next_wakeup().map(|t| t.max(self.now.plus(Duration(1))));
        let next = match (next_event, wakeup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let work_left = self.runs_active > 0 || self.arrivals_pending > 0;
        let end = match (self.config.until, next) {
            (Some(u), Some(t)) if t >= u => Some(u),
            (Some(u), None) => Some(u),
            (None, None) => Some(self.now),
            (None, Some(_)) if !work_left => Some(self.now),
            _ => None,
        };
        if let Some(end) = end {
            self.metrics.advance(&self.engine, &self.leaves, self.now, end);
            self.now = end;
            self.finished = true;
            return Ok(false);
        }
        let now = next.unwrap_or(self.now);
        if now.as_millis() > MAX_SIMULATED.as_millis() {
            return Err(SimError::Horizon {
                what: self.what_is_due(now),
                at_days: now.as_millis() / DAY_MS,
                limit_days: MAX_SIMULATED.as_millis() / DAY_MS,
            });
        }
        self.metrics.advance(&self.engine, &self.leaves, self.now, now);
        self.now = now;
        while let Some(&Reverse((t, _, event))) = self.events.peek() {
            if t != now {
                break;
            }
            self.events.pop();
            self.metrics.events += 1;
            self.handle(event)?;
        }
        let decisions = self.engine.schedule(now);
        for d in decisions {
            self.metrics.events += 1;
            self.decide(d)?;
        }
        self.metrics.flush(&self.engine, now);
        if self.config.check_invariants {
            self.check()?;
        }
        Ok(true)
    }

    /// Run to the end.
    pub fn run(&mut self) -> Result<(), SimError> {
        while self.step()? {}
        Ok(())
    }

    fn handle(&mut self, event: Event) -> Result<(), SimError> {
        match event {
            Event::Arrival { workflow, index } => {
                self.arrivals_pending -= 1;
                self.start_run(workflow, index)?;
                self.schedule_arrival(workflow, index + 1);
            }
            Event::TaskEnd { container, failed } => self.on_task_end(container, failed)?,
            Event::NodeFailure => {
                let n = sample::unit(&mut self.fault_rng) * self.node_up.len() as f64;
                let node = (n as usize).min(self.node_up.len() - 1);
                if self.node_up[node] {
                    self.fail_node(node)?;
                }
                if self.runs_active > 0 || self.arrivals_pending > 0 || self.config.until.is_some() {
                    self.schedule_node_failure();
                }
            }
            Event::NodeRepair { node } => {
                let spec = node_spec(&self.node_groups, &self.node_ends, node);
                self.engine.on_node_added(self.now, spec).map_err(|e| self.internal(e))?;
                self.node_up[node as usize] = true;
            }
        }
        Ok(())
    }

    fn fail_node(&mut self, node: usize) -> Result<(), SimError> {
        let Some(f) = self.config.node_failures else { return Ok(()) };
        let lost =
            self.engine.on_node_removed(self.now, NodeId(node as u64)).map_err(|e| self.internal(e))?;
        self.node_up[node] = false;
        self.metrics.node_failures += 1;
        for c in lost {
            self.metrics.containers_lost += 1;
            self.on_lost(c, false)?;
        }
        self.push(self.now.plus(f.repair), Event::NodeRepair { node: node as u64 });
        Ok(())
    }

    fn decide(&mut self, d: Decision) -> Result<(), SimError> {
        match d {
            Decision::StartContainer { container, job, resources, tag, .. } => {
                self.on_start(container, job.0 as u32, resources, tag)
            }
            Decision::KillContainer { container, .. } => {
                self.metrics.preemptions += 1;
                self.on_lost(container, true)
            }
            Decision::PreemptContainer { .. } => {
                self.metrics.preemption_warnings += 1;
                Ok(())
            }
            Decision::JobRunnable { job } => {
                let leaf = self.jobs[job.0 as usize].leaf;
                self.metrics.touch(leaf);
                Ok(())
            }
            Decision::JobRejected { job, .. } => self.fail_job(job.0 as u32, false),
        }
    }

    /// What happens at `at`, the next time due, for an error message.
    fn what_is_due(&self, at: Time) -> String {
        let Some(&Reverse((t, _, event))) = self.events.peek().filter(|e| e.0 .0 == at) else {
            return "an engine timer".to_string();
        };
        let workflow = |w: u32| &self.workload.workflows[w as usize];
        match event {
            Event::Arrival { workflow: w, .. } => format!("a run of workflow {}", workflow(w).name),
            Event::TaskEnd { container, .. } => match self.tasks.get(container.index()).copied().flatten() {
                Some(task) => {
                    let job = &self.jobs[task.job as usize];
                    let wf = workflow(job.workflow);
                    let tmpl = &wf.jobs[job.template as usize];
                    let stage =
                        tmpl.stages.get(task.stage as usize).map_or("(application master)", |s| &s.name);
                    format!(
                        "the end of a task of workflow {}, job {}, stage {stage} (running since {})",
                        wf.name, tmpl.name, task.start
                    )
                }
                None => format!("a task end at {t}"),
            },
            Event::NodeFailure | Event::NodeRepair { .. } => "a node failure or repair".to_string(),
        }
    }

    /// An input the engine refused: demand too large to count is the workload's doing (too
    /// many huge jobs at once); anything else is a simulator bug.
    pub(crate) fn refused(&self, e: weir_engine::EngineError) -> SimError {
        match e {
            weir_engine::EngineError::DemandOverflow { .. } => SimError::Engine(e),
            other => self.internal(other),
        }
    }

    pub(crate) fn internal(&self, e: impl std::fmt::Display) -> SimError {
        SimError::Internal { at: self.now, seed: self.config.seed, problem: e.to_string() }
    }

    fn check(&self) -> Result<(), SimError> {
        self.engine.check_invariants().map_err(|e| self.internal(e))?;
        let held: Resources = self
            .tasks
            .iter()
            .flatten()
            .filter(|t| self.jobs[t.job as usize].is_active())
            .fold(Resources::ZERO, |a, t| a + t.resources);
        // A gang's running tasks all started together.
        let mut first: Vec<(u32, Time)> = Vec::new();
        for j in self.jobs.iter().filter(|j| j.is_active() && !j.gang_tasks.is_empty()) {
            first.clear();
            for &(g, c) in &j.gang_tasks {
                let Some(start) = self.tasks.get(c.index()).copied().flatten().map(|t| t.start) else {
                    continue;
                };
                match first.iter().find(|f| f.0 == g) {
                    Some(&(_, at)) if at != start => {
                        return Err(self.internal(format!(
                            "a gang of job-{} started piecemeal: tasks at {at} and at {start}",
                            j.run
                        )));
                    }
                    Some(_) => {}
                    None => first.push((g, start)),
                }
            }
        }
        // The engine's nodes also hold placeholders: room kept for gangs not started yet.
        let running = self.engine.cluster_used() - self.engine.placeholder_room();
        if held != running {
            return Err(self.internal(format!(
                "the simulator's running tasks hold {held} but the engine's nodes hold {running} (and {} in placeholders)",
                self.engine.placeholder_room()
            )));
        }
        Ok(())
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn progress(&self) -> Progress {
        Progress {
            now: self.now,
            until: self.config.until,
            runs_submitted: self.runs.len() as u64,
            runs_ended: self.records.len() as u64,
            runs_expected: self.runs_expected,
            events: self.metrics.events,
        }
    }

    /// The workflow whose run submitted the engine's job `job`, if there is one.
    pub fn workflow_of(&self, job: weir_engine::JobId) -> Option<u32> {
        self.jobs.get(usize::try_from(job.0).ok()?).map(|j| j.workflow)
    }

    /// The engine, for queries (`explain`, queue snapshots) between steps.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn cluster(&self) -> &ClusterConfig {
        &self.cluster
    }

    /// Usage intervals closed since the last call, oldest first: the host streams them to
    /// `usage.csv` instead of holding a long simulation's worth in memory.
    pub fn take_usage_rows(&mut self) -> Vec<UsageRow> {
        std::mem::take(&mut self.metrics.usage_rows)
    }

    /// End the simulation (running it to its end first) and hand over what it measured. Runs
    /// still going at the horizon are recorded as unfinished; the last usage rows are left for
    /// `Outcome::usage_rows`.
    pub fn finish(mut self) -> Result<Outcome, SimError> {
        self.run()?;
        let end = self.now;
        self.metrics.close(end, &self.leaves);
        self.record_unfinished(end);
        Ok(crate::summary::build(self))
    }

    pub(crate) fn leaves(&self) -> &[usize] {
        &self.leaves
    }
}

/// The GPU task kinds of a workload and their shares (by tasks, once per listed run): the mix
/// the FGD fragmentation is measured against. At most [`MIX_KINDS`] kinds, the most common.
fn gpu_mix(workload: &Workload, plans: &[Plan]) -> Option<Vec<(weir_engine::Request, f64)>> {
    type Kind = ([u64; 3], u32, SelectorId);
    let mut kinds: std::collections::BTreeMap<Kind, f64> = std::collections::BTreeMap::new();
    for (w, wf) in workload.workflows.iter().enumerate() {
        let runs = match &wf.arrival {
            Arrival::At(times) => times.len().max(1) as f64,
            _ => 1.0,
        };
        for (j, job) in wf.jobs.iter().enumerate() {
            for (s, stage) in job.stages.iter().enumerate() {
                if stage.resources.gpu == 0 && stage.placement.gpu_milli == 0 {
                    continue;
                }
                let r = stage.resources;
                let key = ([r.cpu, r.memory, r.gpu], stage.placement.gpu_milli, plans[w].selectors[j][s]);
                *kinds.entry(key).or_default() += f64::from(stage.tasks) * runs;
            }
        }
    }
    let mut kinds: Vec<(Kind, f64)> = kinds.into_iter().collect();
    kinds.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    kinds.truncate(MIX_KINDS);
    let total: f64 = kinds.iter().map(|k| k.1).sum();
    (total > 0.0).then(|| {
        kinds
            .into_iter()
            .map(|(([cpu, memory, gpu], milli, sel), n)| {
                let r = Resources::new(cpu, memory, gpu);
                (weir_engine::Request::new(r, 1).with_gpu_milli(milli).on(sel), n / total)
            })
            .collect()
    })
}

/// The most GPU task kinds the fragmentation measure weighs (the rest are rare).
const MIX_KINDS: usize = 32;

/// Node `i` of the cluster: node ids count the nodes of the file's groups in order, and
/// `ends[g]` is the id after group `g`'s last node.
fn node_spec(groups: &[NodeGroup], ends: &[u64], i: u64) -> NodeSpec {
    let g = ends.partition_point(|&end| end <= i);
    let (resources, label, gpu_model) = groups
        .get(g)
        .map_or((Resources::ZERO, None, None), |g| (g.resources, g.label.clone(), g.gpu_model.clone()));
    NodeSpec { id: NodeId(i), resources, label, gpu_model }
}

/// Resolve every workflow's leaf, reject tasks no node can hold, and read the DAGs forwards.
fn plan(
    cluster: &ClusterConfig,
    workload: &Workload,
    config: &SimConfig,
    nodes: &[NodeGroup],
    engine: &mut Engine,
) -> Result<Vec<Plan>, SimError> {
    let largest = nodes.iter().fold(Resources::ZERO, |a, n| a.component_max(&n.resources));
    let fits_somewhere = |r: &Resources| nodes.iter().any(|n| r.fits_in(&n.resources));
    let placeable = |r: &Resources, p: &weir_model::TaskPlacement| {
        nodes.iter().any(|n| {
            r.fits_in(&n.resources)
                && (p.gpu_milli == 0 || n.resources.gpu > 0)
                && p.allows(n.label.as_deref(), n.gpu_model.as_deref())
        })
    };
    let mut plans = Vec::with_capacity(workload.workflows.len());
    for (w, wf) in workload.workflows.iter().enumerate() {
        let leaf = match cluster.find(&wf.queue) {
            Some(q) if cluster.queues[q].is_leaf() => q,
            found => {
                let hint = match found {
                    Some(_) => " (it has children; jobs go to leaves)".to_string(),
                    None => {
                        let leaves: Vec<&str> = cluster.leaves().take(5).map(|q| q.path.as_str()).collect();
                        format!(" (leaves include {})", leaves.join(", "))
                    }
                };
                return Err(SimError::UnknownQueue {
                    workflow: wf.name.clone(),
                    queue: wf.queue.clone(),
                    hint,
                });
            }
        };
        if config.until.is_none() && !matches!(wf.arrival, Arrival::At(_)) {
            return Err(SimError::Unbounded { workflow: wf.name.clone() });
        }
        let mut job_next = vec![Vec::new(); wf.jobs.len()];
        let mut stage_next = Vec::with_capacity(wf.jobs.len());
        let mut selectors = Vec::with_capacity(wf.jobs.len());
        for (j, job) in wf.jobs.iter().enumerate() {
            for &u in &job.after {
                job_next[u].push(j as u32);
            }
            let mut next = vec![Vec::new(); job.stages.len()];
            for (s, stage) in job.stages.iter().enumerate() {
                for &u in &stage.after {
                    next[u].push(s as u32);
                }
                let needs = cluster.scheduler.normalize(&stage.resources);
                if !placeable(&needs, &stage.placement) {
                    return Err(SimError::TaskTooLarge {
                        workflow: wf.name.clone(),
                        job: job.name.clone(),
                        stage: stage.name.clone(),
                        needs,
                        largest,
                    });
                }
            }
            stage_next.push(next);
            selectors.push(
                job.stages
                    .iter()
                    .map(|s| {
                        engine.selector(&Selector {
                            labels: s.placement.node_labels.clone(),
                            gpu_models: s.placement.gpu_models.clone(),
                        })
                    })
                    .collect(),
            );
        }
        if let Some(am) = config.am.map(|r| cluster.scheduler.normalize(&r)) {
            if !fits_somewhere(&am) {
                return Err(SimError::Setting {
                    setting: "am",
                    problem: format!("an application master of {am} fits on no node (largest {largest})"),
                });
            }
        }
        plans.push(Plan {
            leaf,
            job_next,
            stage_next,
            selectors,
            arrival_rng: sample::stream(config.seed, &[2, w as u64]),
        });
    }
    Ok(plans)
}

const DAY_MS: u64 = 86_400_000;

/// Refuse a workload that would submit more than `max_runs` runs before the horizon.
fn check_run_count(workload: &Workload, config: &SimConfig) -> Result<(), SimError> {
    let mut total = 0u64;
    let mut largest = (0u64, "");
    for wf in &workload.workflows {
        let span = |start: &Time| config.until.map_or(0, |u| u.as_millis().saturating_sub(start.as_millis()));
        let n = match &wf.arrival {
            Arrival::At(times) => {
                times.iter().filter(|t| config.until.is_none_or(|u| **t < u)).count() as u64
            }
            Arrival::Every { start, every } => span(start).div_ceil(every.as_millis().max(1)),
            Arrival::Poisson { start, mean_interval } => span(start) / mean_interval.as_millis().max(1),
        };
        total = total.saturating_add(n);
        if n > largest.0 {
            largest = (n, &wf.name);
        }
    }
    if total > config.max_runs {
        return Err(SimError::TooManyRuns {
            runs: total,
            limit: config.max_runs,
            workflow: largest.1.to_string(),
            workflow_runs: largest.0,
        });
    }
    Ok(())
}

/// How many runs a workload submits in all, when that is known up front.
fn expected_runs(workload: &Workload, until: Option<Time>) -> Option<u64> {
    let mut n = 0u64;
    for wf in &workload.workflows {
        match &wf.arrival {
            Arrival::At(times) => n += times.iter().filter(|t| until.is_none_or(|u| **t < u)).count() as u64,
            Arrival::Every { start, every } => {
                let u = until?;
                if *start < u && every.as_millis() > 0 {
                    n += (u.as_millis() - start.as_millis()).div_ceil(every.as_millis());
                }
            }
            Arrival::Poisson { .. } => return None,
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_count_through_the_groups() {
        let group = |count, cpu| NodeGroup {
            count,
            resources: Resources::new(cpu, 1, 0),
            label: None,
            gpu_model: None,
        };
        let groups = [group(2, 10), group(1, 20), group(3, 30)];
        let ends = [2, 3, 6];
        let cpu: Vec<u64> = (0..6).map(|i| node_spec(&groups, &ends, i).resources.cpu).collect();
        assert_eq!(cpu, [10, 10, 20, 30, 30, 30]);
        assert_eq!(node_spec(&groups, &ends, 4).id, NodeId(4));
    }
}
