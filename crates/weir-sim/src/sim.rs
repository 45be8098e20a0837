//! The simulation: a discrete-event loop in virtual time that drives the real engine.
//!
//! Each step takes the earliest pending time — the next event or the engine's next wakeup —
//! handles every event due then (run arrivals, task ends, node faults) in the order they were
//! scheduled, calls `schedule` once, and carries out the decisions: a started container runs a
//! task for its sampled duration, a killed one loses its work and is asked for again. The task
//! and workflow model itself is in `execution.rs`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use weir_engine::{ContainerId, Decision, Engine, NodeId, NodeSpec};
use weir_model::{Arrival, ClusterConfig, Duration, Resources, Time, Workload};

use crate::config::SimConfig;
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
    node_specs: Vec<NodeSpec>,
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
        let mut engine = Engine::new(cluster.clone())?;
        let mut node_specs = Vec::new();
        for g in &cluster.nodes {
            for _ in 0..g.count {
                let id = NodeId(node_specs.len() as u64);
                node_specs.push(NodeSpec { id, resources: g.resources, label: g.label.clone() });
            }
        }
        engine.on_nodes_added(Time::ZERO, node_specs.clone())?;
        let plans = plan(&cluster, &workload, &config, &node_specs)?;
        let leaves: Vec<usize> = (0..cluster.queues.len()).filter(|&q| cluster.queues[q].is_leaf()).collect();
        let runs_expected = expected_runs(&workload, config.until);
        let metrics = Metrics::new(cluster.queues.len(), config.sample_every.as_millis());
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
            node_up: vec![true; node_specs.len()],
            node_specs,
            leaves,
            arrivals_pending: 0,
            runs_active: 0,
            runs_expected,
            finished: false,
        };
        for w in 0..sim.workload.workflows.len() {
            sim.schedule_arrival(w as u32, 0);
        }
        if sim.config.node_failures.is_some() && !sim.node_specs.is_empty() {
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
        let mean = f.mtbf.as_millis() as f64 / self.node_specs.len() as f64;
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
                let n = sample::unit(&mut self.fault_rng) * self.node_specs.len() as f64;
                let node = (n as usize).min(self.node_specs.len() - 1);
                if self.node_up[node] {
                    self.fail_node(node)?;
                }
                if self.runs_active > 0 || self.arrivals_pending > 0 || self.config.until.is_some() {
                    self.schedule_node_failure();
                }
            }
            Event::NodeRepair { node } => {
                let spec = self.node_specs[node as usize].clone();
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
        if held != self.engine.cluster_used() {
            return Err(self.internal(format!(
                "the simulator's running tasks hold {held} but the engine's nodes hold {}",
                self.engine.cluster_used()
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

/// Resolve every workflow's leaf, reject tasks no node can hold, and read the DAGs forwards.
fn plan(
    cluster: &ClusterConfig,
    workload: &Workload,
    config: &SimConfig,
    nodes: &[NodeSpec],
) -> Result<Vec<Plan>, SimError> {
    let largest = nodes.iter().fold(Resources::ZERO, |a, n| a.component_max(&n.resources));
    let fits_somewhere = |r: &Resources| nodes.iter().any(|n| r.fits_in(&n.resources));
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
                if !fits_somewhere(&needs) {
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
            arrival_rng: sample::stream(config.seed, &[2, w as u64]),
        });
    }
    Ok(plans)
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
