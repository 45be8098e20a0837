//! The simulation: a discrete-event loop in virtual time that drives the real engine.
//!
//! Each step takes the earliest pending time — the next event or the engine's next wakeup —
//! handles every event due then (run arrivals, task ends, node faults) in the order they were
//! scheduled, calls `schedule` once, and carries out the decisions: a started container runs a
//! task for its sampled duration, a killed one loses its work and is asked for again. The task
//! and workflow model itself is in `execution.rs`.

use weir_engine::{ContainerId, Decision, Engine, NodeId, NodeSpec, Selector, SelectorId};
use weir_model::{Arrival, ClusterConfig, Duration, NodeGroup, Resources, Time, Workflow, Workload};

use crate::config::{SimConfig, MAX_SIMULATED};
use crate::error::SimError;
use crate::execution::{JobRun, RunState, TaskRun};
use crate::metrics::{Metrics, UsageRow};
use crate::records::{RecordSink, Sink};
use crate::sample::{self, Rng};
use crate::stats::{RunStats, WorkflowSlo};
use crate::summary::Outcome;
use crate::window::Window;

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

/// The workflows the simulation knows now, numbered as they came: a whole workload from the
/// start, or a stream's workflows from their arrival until their last run is over.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub workflows: Window<Workflow>,
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
    /// Runs going now; whether no more will come; whether its SLO record went to its tier.
    pub live_runs: u32,
    pub arrivals_done: bool,
    pub finalized: bool,
    pub slo: WorkflowSlo,
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
    pub(crate) workload: Live,
    pub(crate) plans: Window<Plan>,
    events: crate::queue::EventQueue,
    pub(crate) now: Time,
    pub(crate) jobs: Window<JobRun>,
    pub(crate) runs: Window<RunState>,
    /// Running tasks, indexed by `ContainerId::index`.
    pub(crate) tasks: Vec<Option<TaskRun>>,
    pub(crate) metrics: Metrics,
    /// Where run and job records go as they end, and the figures gathered from them.
    pub(crate) sink: Sink,
    pub(crate) run_stats: RunStats,
    pub(crate) runs_ended: u64,
    /// The node groups of the cluster file; node ids number the nodes group after group.
    node_groups: Vec<NodeGroup>,
    node_ends: Vec<u64>,
    node_up: Vec<bool>,
    fault_rng: Rng,
    leaves: Vec<usize>,
    arrivals_pending: u64,
    pub(crate) runs_active: u64,
    runs_expected: Option<u64>,
    pub(crate) finished: bool,
    /// Task-end events in the queue (stale ones included): while there are none, nothing runs
    /// that will end by itself.
    task_ends_pending: u64,
    /// Nodes down, each with a repair due.
    nodes_down: u64,
    /// Whether the horizon held back an arrival: the workload would have gone on.
    arrivals_cut: bool,
    /// Steps in a row in which nothing started, ended or arrived, while nothing ran and nothing
    /// but timers and node faults were due.
    stalled_steps: u32,
    /// Since when nothing has run while gangs held placeholders (checked with the invariants:
    /// such a state must not outlast one gang timeout).
    held_idle_since: Option<Time>,
    /// When something last started, ended or arrived: where a replay that can make no more
    /// progress ends (`EndReason::NoProgress`), so idle steps do not dilute its figures.
    pub(crate) last_progress: Time,
    /// When the last run that ended did (the makespan's end).
    pub(crate) last_run_end: Time,
    /// The cluster's integrals at `last_progress`.
    progress_integrals: crate::metrics::Integrals,
    /// How the simulation ended, once it has.
    pub(crate) ending: Option<(EndReason, Option<Time>)>,
    /// Workflows still to be read, and the next one, read ahead; `streaming` once there was a
    /// source (its workflows are forgotten when done).
    source: Option<Box<dyn WorkflowSource>>,
    peeked: Option<Workflow>,
    pub(crate) streaming: bool,
    /// Whether the horizon stopped the streamed trace from being read to its end.
    pub(crate) trace_cut: bool,
    /// The GPU task kinds of a streamed trace read so far.
    gpu_kinds: GpuKinds,
    /// Task records kept for `take_task_records`, once asked for (`keep_task_records`).
    pub(crate) task_records: Option<Vec<crate::records::TaskRecord>>,
    /// Caps on the tasks of jobs, set by the host (`limit.rs`).
    pub(crate) limits: crate::limit::Limits,
    /// Every pass's decisions since the host last took them, once it asked
    /// (`keep_decisions`): a decision log a host can digest to show two builds decide alike.
    decision_log: Option<Vec<(Time, Vec<Decision>)>>,
}

/// Workflows that arrive one after another, read as the simulation reaches them: a trace too
/// large to hold in memory.
pub trait WorkflowSource {
    /// The next workflow, a one-off (`Arrival::At`) arriving no earlier than the one before (an
    /// earlier one arrives when it is read); `None` after the last.
    fn next_workflow(&mut self) -> Result<Option<Workflow>, SimError>;
}

/// When a streamed workflow first arrives.
fn first_arrival(wf: &Workflow) -> Time {
    match &wf.arrival {
        Arrival::At(times) => times.first().copied().unwrap_or(Time::ZERO),
        Arrival::Every { start, .. } | Arrival::Poisson { start, .. } => *start,
    }
}

fn has_gang(wf: &Workflow) -> bool {
    wf.jobs.iter().any(|j| j.gang || j.stages.iter().any(|s| s.gang))
}

/// Why a simulation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Every run submitted has ended and no more would come (before or at the horizon).
    Completed,
    /// The horizon (`--until`) was reached with runs still going.
    Horizon,
    /// Runs were left that could never go on: nothing was running, and nothing but the
    /// engine's timers and node faults was due, for [`STALL_STEPS`] steps (or nothing at all
    /// was due) — e.g. every container held by application masters whose tasks find no room,
    /// or jobs in a queue whose `max` is 0.
    NoProgress,
}

impl EndReason {
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Completed => "completed",
            EndReason::Horizon => "horizon",
            EndReason::NoProgress => "no_progress",
        }
    }
}

/// Steps in a row without progress, while nothing runs and no arrival or repair is due, after
/// which a simulation stops as unable to progress. Timers alone (starvation checks, kills of
/// containers that run no task) and node faults change nothing lasting in that state; a
/// thousand such steps cost milliseconds.
pub const STALL_STEPS: u32 = 1000;

/// The tag of an application master's request; stage requests are tagged with their index.
pub(crate) const AM_TAG: u64 = u64::MAX;

impl Simulation {
    /// Check the workload against the cluster and set up the first arrivals.
    pub fn new(
        cluster: ClusterConfig,
        workload: Workload,
        config: SimConfig,
    ) -> Result<Simulation, SimError> {
        Simulation::build(cluster, workload, config, None)
    }

    /// A simulation of workflows read from `source` as it reaches their arrival, each one
    /// forgotten once its last run is over: memory follows the work in flight, not the length
    /// of the trace. The source's workflows are one-offs (`Arrival::At`) in arrival order.
    pub fn streaming(
        cluster: ClusterConfig,
        source: Box<dyn WorkflowSource>,
        config: SimConfig,
    ) -> Result<Simulation, SimError> {
        Simulation::build(cluster, Workload { workflows: Vec::new() }, config, Some(source))
    }

    fn build(
        cluster: ClusterConfig,
        workload: Workload,
        config: SimConfig,
        source: Option<Box<dyn WorkflowSource>>,
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
        // A streamed trace's length is not known until it has been read.
        let runs_expected = if source.is_some() { None } else { expected_runs(&workload, config.until) };
        let mut metrics = Metrics::new(cluster.queues.len(), config.sample_every.as_millis());
        if cluster.total_resources().gpu > 0 {
            metrics.gpu_mix = gpu_mix(&workload, &plans);
        }
        metrics.saw_gangs = workload.workflows.iter().any(has_gang);
        let mut sim = Simulation {
            engine,
            fault_rng: sample::stream(config.seed, &[3]),
            config,
            cluster,
            workload: Live { workflows: workload.workflows.into_iter().collect() },
            plans: plans.into_iter().collect(),
            events: Default::default(),
            now: Time::ZERO,
            jobs: Window::default(),
            runs: Window::default(),
            tasks: Vec::new(),
            metrics,
            sink: Sink::default(),
            run_stats: RunStats::default(),
            runs_ended: 0,
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
            task_ends_pending: 0,
            nodes_down: 0,
            arrivals_cut: false,
            stalled_steps: 0,
            held_idle_since: None,
            last_progress: Time::ZERO,
            last_run_end: Time::ZERO,
            progress_integrals: Default::default(),
            ending: None,
            streaming: source.is_some(),
            trace_cut: false,
            gpu_kinds: GpuKinds::new(),
            source,
            peeked: None,
            task_records: None,
            limits: Default::default(),
            decision_log: None,
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
        if matches!(event, Event::TaskEnd { .. }) {
            self.task_ends_pending += 1;
        }
        self.events.push(at, event);
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
        let Some(at) = at.filter(|&at| {
            let cut = self.config.until.is_some_and(|u| at >= u);
            self.arrivals_cut |= cut;
            !cut
        }) else {
            self.plans[w as usize].arrivals_done = true;
            self.workflow_maybe_done(w);
            return;
        };
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
        let next_event = self.events.peek().map(|(t, _)| t);
        // A timer already due was handled by the last pass; the next look is a millisecond on.
        let wakeup = self.engine.next_wakeup().map(|t| t.max(self.now.plus(Duration(1))));
        let next_read = self.peek()?.map(|t| t.max(self.now));
        let next = [next_event, wakeup, next_read].into_iter().flatten().min();
        if let Some((end, reason, cut)) = self.end_now(next) {
            if end < self.now {
                // No progress since `end`: the idle steps after it are not part of the replay.
                self.metrics.restore(self.progress_integrals);
            }
            self.metrics.advance(&self.engine, &self.leaves, self.now, end);
            self.now = end;
            self.finished = true;
            self.ending = Some((reason, cut));
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
        if next_read == Some(now) {
            self.read_due()?;
        }
        let before = self.metrics.progress();
        while let Some(event) = self.events.pop_at(now) {
            if matches!(event, Event::TaskEnd { .. }) {
                self.task_ends_pending -= 1;
            }
            self.metrics.events += 1;
            self.handle(event)?;
        }
        self.refill_limited()?;
        let decisions = self.engine.schedule(now);
        for d in &decisions {
            self.metrics.events += 1;
            self.decide(d)?;
        }
        if let Some(kept) = &mut self.decision_log {
            kept.push((now, decisions));
        }
        self.metrics.flush(&self.engine, now);
        if self.metrics.progress() != before {
            self.stalled_steps = 0;
            self.last_progress = now;
            self.progress_integrals = self.metrics.integrals();
        } else if self.task_ends_pending == 0
            && self.arrivals_pending == 0
            && self.nodes_down == 0
            && self.peeked.is_none()
        {
            // (A streamed workflow waiting in the reader is an arrival to come.)
            self.stalled_steps += 1;
        }
        if self.config.check_invariants {
            self.check()?;
            self.check_gangs_progress()?;
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
                self.nodes_down -= 1;
            }
        }
        Ok(())
    }

    fn fail_node(&mut self, node: usize) -> Result<(), SimError> {
        let Some(f) = self.config.node_failures else { return Ok(()) };
        let lost =
            self.engine.on_node_removed(self.now, NodeId(node as u64)).map_err(|e| self.internal(e))?;
        self.node_up[node] = false;
        self.nodes_down += 1;
        self.metrics.node_failures += 1;
        for c in lost {
            self.metrics.containers_lost += 1;
            self.on_lost(c, false)?;
        }
        self.push(self.now.plus(f.repair), Event::NodeRepair { node: node as u64 });
        Ok(())
    }

    fn decide(&mut self, d: &Decision) -> Result<(), SimError> {
        match *d {
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
                if let Some(j) = self.jobs.get(job.0 as usize) {
                    self.metrics.touch(j.leaf);
                }
                Ok(())
            }
            Decision::JobRejected { job, .. } => self.fail_job(job.0 as u32, false),
        }
    }

    /// When the next streamed workflow arrives, reading it if need be; none once the source
    /// is done or the horizon cuts it off.
    fn peek(&mut self) -> Result<Option<Time>, SimError> {
        if self.peeked.is_none() {
            if let Some(source) = &mut self.source {
                self.peeked = source.next_workflow()?;
                if self.peeked.is_none() {
                    self.source = None;
                }
            }
        }
        let at = self.peeked.as_ref().map(first_arrival);
        if let (Some(at), Some(u)) = (at, self.config.until) {
            if at >= u {
                // The stream is in arrival order: nothing after this arrives before the horizon.
                self.arrivals_cut = true;
                self.trace_cut = true;
                self.peeked = None;
                self.source = None;
                return Ok(None);
            }
        }
        Ok(at)
    }

    /// Take in every streamed workflow due by now: plan it and schedule its runs.
    fn read_due(&mut self) -> Result<(), SimError> {
        while self.peek()?.is_some_and(|t| t <= self.now) {
            let Some(wf) = self.peeked.take() else { break };
            let w = self.workload.workflows.len();
            let plan = plan_one(&self.cluster, &wf, w, &self.config, &self.node_groups, &mut self.engine)?;
            self.metrics.saw_gangs |= has_gang(&wf);
            if self.cluster.total_resources().gpu > 0 {
                // A streamed trace's GPU mix grows as it is read: the fragmentation measure
                // weighs the kinds seen so far.
                let before = self.gpu_kinds.len();
                let tasks: f64 = self.gpu_kinds.values().sum();
                tally_gpu_kinds(&wf, &plan, &mut self.gpu_kinds);
                if self.gpu_kinds.len() != before || self.gpu_kinds.values().sum::<f64>() != tasks {
                    self.metrics.gpu_mix = mix_of(&self.gpu_kinds);
                }
            }
            self.workload.workflows.push(wf);
            self.plans.push(plan);
            self.schedule_arrival(w as u32, 0);
        }
        Ok(())
    }

    /// Whether the simulation ends before the step at `next`: where, why, and the horizon it
    /// stopped short of when the workload ended well before it.
    fn end_now(&self, next: Option<Time>) -> Option<(Time, EndReason, Option<Time>)> {
        let now = self.now;
        let work_left = self.runs_active > 0 || self.arrivals_pending > 0 || self.peeked.is_some();
        if !work_left {
            return Some(match self.config.until {
                // A recurring workload would go on: the horizon is its window.
                Some(u) if self.arrivals_cut => (u.max(now), EndReason::Completed, None),
                // Every run ended long before a horizon that cut nothing: stop here, and say so.
                Some(u) if u > now => (now, EndReason::Completed, Some(u)),
                _ => (now, EndReason::Completed, None),
            });
        }
        if next.is_none() || self.stalled_steps >= STALL_STEPS {
            // The end is the last real progress, not the idle steps that showed none would come.
            return Some((self.last_progress.min(now), EndReason::NoProgress, None));
        }
        match (self.config.until, next) {
            (Some(u), Some(t)) if t >= u => Some((u, EndReason::Horizon, None)),
            _ => None,
        }
    }

    /// What happens at `at`, the next time due, for an error message.
    fn what_is_due(&self, at: Time) -> String {
        let Some((t, event)) = self.events.peek().filter(|e| e.0 == at) else {
            return "an engine timer".to_string();
        };
        let workflow = |w: u32| &self.workload.workflows[w as usize];
        match event {
            Event::Arrival { workflow: w, .. } => format!("a run of workflow {}", workflow(w).name),
            Event::TaskEnd { container, .. } => match self.tasks.get(container.index()).copied().flatten() {
                Some(task) if self.jobs.get(task.job as usize).is_some() => {
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
                _ => format!("a task end at {t}"),
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
            .filter(|t| self.jobs.get(t.job as usize).is_some_and(JobRun::is_active))
            .fold(Resources::ZERO, |a, t| a + t.resources);
        // A gang's running tasks all started together.
        let mut first: Vec<(u32, Time)> = Vec::new();
        for (_, j) in self.jobs.iter().filter(|(_, j)| j.is_active() && !j.gang_tasks.is_empty()) {
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

    /// Nothing may stay stuck with gangs holding placeholders while no task runs for longer
    /// than one gang timeout (issue 18's livelock): the engine's timeout hands room over and
    /// breaks a deadlock at once.
    fn check_gangs_progress(&mut self) -> Result<(), SimError> {
        let held = self.engine.placeholder_room();
        let idle = !held.is_zero() && self.engine.cluster_used() == held;
        if !idle {
            self.held_idle_since = None;
            return Ok(());
        }
        let since = *self.held_idle_since.get_or_insert(self.now);
        let timeout = self.cluster.scheduler.gang_timeout;
        if timeout.as_millis() > 0 && self.now.since(since).as_millis() > timeout.as_millis() {
            return Err(self.internal(format!(
                "gangs have held {held} as placeholders with nothing running since {since}, longer than the gang timeout ({timeout})"
            )));
        }
        Ok(())
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Whether a streamed trace still had workflows to read when the simulation stopped.
    pub(crate) fn trace_unread(&self) -> bool {
        self.trace_cut || self.peeked.is_some() || self.source.is_some()
    }

    pub fn progress(&self) -> Progress {
        Progress {
            now: self.now,
            until: self.config.until,
            runs_submitted: self.runs.len() as u64,
            runs_ended: self.runs_ended,
            runs_expected: self.runs_expected,
            events: self.metrics.events,
        }
    }

    /// Hand every run's and job's record to `sink` as it ends, instead of keeping them for
    /// the outcome (whose `runs` and `job_records` are then empty).
    pub fn set_record_sink(&mut self, sink: Box<dyn RecordSink>) {
        self.sink = Sink::Host(sink);
    }

    /// How many workflows, runs and jobs the simulation holds now (a finished one among live
    /// ones counts, as its slot does): with a streamed trace this follows the work in flight.
    pub fn held(&self) -> (usize, usize, usize) {
        (self.workload.workflows.span(), self.runs.span(), self.jobs.span())
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

    /// Keep a record of every task attempt from now on, for [`Simulation::take_task_records`]
    /// (a job model learned from runs, weir-slo, reads them between steps).
    pub fn keep_task_records(&mut self) {
        self.task_records.get_or_insert_with(Vec::new);
    }

    /// Task attempts ended since the last call, in the order they ended (none unless
    /// [`Simulation::keep_task_records`] was called).
    pub fn take_task_records(&mut self) -> Vec<crate::records::TaskRecord> {
        self.task_records.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Keep every pass's decisions from now on, for [`Simulation::take_decisions`].
    pub fn keep_decisions(&mut self) {
        self.decision_log.get_or_insert_with(Vec::new);
    }

    /// The engine's passes since the last call, oldest first: each step's time and the
    /// decisions its `schedule` call returned (empty ones included), in the order the
    /// simulator carried them out. None unless [`Simulation::keep_decisions`] was called.
    pub fn take_decisions(&mut self) -> Vec<(Time, Vec<Decision>)> {
        self.decision_log.as_mut().map(std::mem::take).unwrap_or_default()
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
        self.record_unfinished(end)?;
        crate::summary::build(self)
    }

    pub(crate) fn leaves(&self) -> &[usize] {
        &self.leaves
    }
}

/// The GPU task kinds of a workload and their shares (by tasks, once per listed run): the mix
/// the FGD fragmentation is measured against. At most [`MIX_KINDS`] kinds, the most common.
fn gpu_mix(workload: &Workload, plans: &[Plan]) -> Option<Vec<(weir_engine::Request, f64)>> {
    let mut kinds = GpuKinds::new();
    for (w, wf) in workload.workflows.iter().enumerate() {
        tally_gpu_kinds(wf, &plans[w], &mut kinds);
    }
    mix_of(&kinds)
}

/// A GPU task kind (resources, GPU fraction, selector) and how many tasks of it.
type GpuKinds = std::collections::BTreeMap<([u64; 3], u32, SelectorId), f64>;

/// Count a workflow's GPU tasks by kind (once per listed run).
fn tally_gpu_kinds(wf: &Workflow, plan: &Plan, kinds: &mut GpuKinds) {
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
            let key = ([r.cpu, r.memory, r.gpu], stage.placement.gpu_milli, plan.selectors[j][s]);
            *kinds.entry(key).or_default() += f64::from(stage.tasks) * runs;
        }
    }
}

/// The [`MIX_KINDS`] most common kinds and their shares.
fn mix_of(kinds: &GpuKinds) -> Option<Vec<(weir_engine::Request, f64)>> {
    let mut kinds: Vec<_> = kinds.iter().map(|(k, n)| (*k, *n)).collect();
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
    if let Some(am) = config.am.map(|r| cluster.scheduler.normalize(&r)) {
        if !nodes.iter().any(|n| am.fits_in(&n.resources)) {
            let largest = nodes.iter().fold(Resources::ZERO, |a, n| a.component_max(&n.resources));
            return Err(SimError::Setting {
                setting: "am",
                problem: format!("an application master of {am} fits on no node (largest {largest})"),
            });
        }
    }
    workload
        .workflows
        .iter()
        .enumerate()
        .map(|(w, wf)| plan_one(cluster, wf, w, config, nodes, engine))
        .collect()
}

/// Resolve a workflow's leaf, reject tasks no node can hold, and read its DAGs forwards.
fn plan_one(
    cluster: &ClusterConfig,
    wf: &Workflow,
    w: usize,
    config: &SimConfig,
    nodes: &[NodeGroup],
    engine: &mut Engine,
) -> Result<Plan, SimError> {
    let largest = nodes.iter().fold(Resources::ZERO, |a, n| a.component_max(&n.resources));
    let placeable = |r: &Resources, p: &weir_model::TaskPlacement| {
        nodes.iter().any(|n| {
            r.fits_in(&n.resources)
                && (p.gpu_milli == 0 || n.resources.gpu > 0)
                && p.allows(n.label.as_deref(), n.gpu_model.as_deref())
        })
    };
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
            return Err(SimError::UnknownQueue { workflow: wf.name.clone(), queue: wf.queue.clone(), hint });
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
    Ok(Plan {
        leaf,
        job_next,
        stage_next,
        selectors,
        arrival_rng: sample::stream(config.seed, &[2, w as u64]),
        live_runs: 0,
        arrivals_done: false,
        finalized: false,
        slo: WorkflowSlo::default(),
    })
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
