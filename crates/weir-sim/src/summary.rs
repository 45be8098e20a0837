//! What a finished simulation hands over, and its machine-readable forms: `summary.json`,
//! `runs.csv` and `usage.csv`. Writers take any `io::Write` the host opened.
//!
//! Times in the CSV files are whole milliseconds since the start of the simulation; resources
//! are millicores and MiB. The summary is deterministic for a seed, except `wall_seconds`,
//! which the host measures and fills in.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, Duration, Time, Workload};

use crate::metrics::{Sample, UsageRow};
use crate::sim::Simulation;

/// How one workflow run went.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// Index into the workload's workflows.
    pub workflow: u32,
    pub submit: Time,
    /// Its first container.
    pub start: Option<Time>,
    /// When its last job ended (or it failed); `None` if still running at the horizon.
    pub end: Option<Time>,
    pub failed: bool,
    /// Whether it met its workflow's SLO; `None` without an SLO, or when it was still running
    /// at the horizon before its deadline.
    pub met: Option<bool>,
    /// The time during which at least one of its jobs had been submitted but did not yet hold
    /// every container of its first request; `None` if still running at the end.
    pub delay: Option<Duration>,
}

impl RunRecord {
    /// Submit → its first container.
    pub fn wait(&self) -> Option<Duration> {
        self.start.map(|s| s.since(self.submit))
    }

    /// Submit → end (the response time, or turnaround); `None` if it had not ended.
    pub fn response(&self) -> Option<Duration> {
        self.end.map(|e| e.since(self.submit))
    }

    /// [`bounded_slowdown`] of a completed run.
    pub fn bounded_slowdown(&self) -> Option<f64> {
        match (self.failed, self.response(), self.delay) {
            (false, Some(r), Some(d)) => Some(bounded_slowdown(r.as_millis(), d.as_millis())),
            _ => None,
        }
    }
}

/// The bound of [`bounded_slowdown`]: runs shorter than this count as this long.
pub const SLOWDOWN_BOUND_MS: u64 = 10_000;

/// Bounded slowdown as the parallel-job-scheduling literature defines it (Feitelson, Rudolph,
/// Schwiegelshohn, Sevcik and Wong, "Theory and Practice in Parallel Job Scheduling", JSSPP
/// 1997; Feitelson, "Metrics for Parallel Job Scheduling and their Convergence", JSSPP 2001):
/// `max(1, (wait + run) / max(run, 10 s))`. Here the wait is the delay (until the job held
/// everything it first asked for) and the run is the response time less that delay, so a rigid
/// parallel job gets exactly the HPC figure; the 10 s bound keeps very short jobs from
/// dominating a mean.
pub fn bounded_slowdown(response_ms: u64, delay_ms: u64) -> f64 {
    let run = response_ms.saturating_sub(delay_ms).max(SLOWDOWN_BOUND_MS);
    (response_ms as f64 / run as f64).max(1.0)
}

/// How one job went: `jobs.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// The simulator's job number (the engine's `JobId`, `pending.csv`'s `job`).
    pub job: u64,
    /// Index into the workload's workflows, and the job's index in its workflow.
    pub workflow: u32,
    pub template: u32,
    pub tier: u8,
    pub submit: Time,
    /// Its first container.
    pub first_start: Option<Time>,
    /// When every container of its first request had been granted (a gang: when it started).
    pub all_started: Option<Time>,
    /// When it completed or failed.
    pub end: Option<Time>,
    pub status: JobStatus,
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    Completed,
    Failed,
    /// Still in the engine when the simulation ended.
    Unfinished,
}

impl JobStatus {
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Unfinished => "unfinished",
        }
    }
}

/// Everything a simulation measured.
#[derive(Debug)]
pub struct Outcome {
    pub summary: Summary,
    pub runs: Vec<RunRecord>,
    /// Usage intervals not yet taken with `Simulation::take_usage_rows`.
    pub usage_rows: Vec<UsageRow>,
    pub samples: Vec<Sample>,
    pub workload: Workload,
    pub cluster: ClusterConfig,
    /// Jobs still in the engine at the end, with its explanation (`pending.csv`).
    pub pending: Vec<crate::pending::PendingJob>,
    /// Jobs submitted in all (their numbers are 0 to this, less one).
    pub jobs: u64,
    /// One record per job, in job order (`jobs.csv`).
    pub job_records: Vec<JobRecord>,
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub seed: u64,
    pub nodes: usize,
    pub jobs_submitted: u64,
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    /// Runs submitted.
    pub runs: u64,
    pub runs_completed: u64,
    pub runs_failed: u64,
    /// Runs still going when the simulation ended.
    pub runs_unfinished: u64,
    pub tasks_completed: u64,
    pub task_attempts_failed: u64,
    /// Discrete events handled: arrivals, task ends, node faults and engine decisions.
    pub events: u64,
    pub simulated_seconds: f64,
    /// From t=0 (a trace's first arrival) to the end of the last run that ended, seconds:
    /// the HPC literature's makespan (`null` when no run ended). Equal to `simulated_seconds`
    /// when the replay is complete and ended with its last run.
    pub makespan: Option<f64>,
    /// Jobs submitted that never got a container: their waits are in no wait figure, so a
    /// low wait p99 beside many of these means the worst waits were never measured.
    pub jobs_never_placed: u64,
    /// Filled in by the host; not part of the deterministic output.
    pub wall_seconds: f64,
    /// Cluster average: used / capacity over the simulated time, per resource.
    pub utilization: ResourceFloats,
    /// Containers killed by preemption.
    pub preemptions: u64,
    /// Containers marked for preemption (some end by themselves before the kill).
    pub preemption_warnings: u64,
    pub node_failures: u64,
    pub containers_lost_to_node_failures: u64,
    /// Container time thrown away by preemption and node failures.
    pub wasted_container_seconds: f64,
    /// Nodes reserved for a job whose next container fit on no node (YARN's reservations).
    pub reservations: ReservationSummary,
    /// Jobs still in the engine at the end (`pending.csv` explains each).
    pub jobs_unfinished: u64,
    /// Why the simulation ended, and what holds the work left unfinished.
    pub ending: crate::ending::Ending,
    /// Wait, delay, response time and bounded slowdown of every job (`jobs.csv` has each).
    pub job_figures: TimeFigures,
    /// The same for workflow runs (`runs.csv` has each).
    pub run_figures: TimeFigures,
    /// Gangs (all-or-nothing sets of tasks), when the workload has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gangs: Option<GangSummary>,
    /// GPUs, when the cluster and the workload have any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<GpuSummary>,
    pub tiers: BTreeMap<String, TierSummary>,
    /// Workflows with at least one run whose SLO outcome is known.
    pub slo_workflows: u64,
    /// Those workflows' runs against their SLO, the least successful first, at most
    /// [`crate::SLO_ROWS`] of them.
    pub workflow_slos: Vec<crate::WorkflowSloRow>,
    /// Leaf queues, in the cluster file's order.
    pub queues: Vec<QueueSummary>,
}

/// What reservations did over the simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ReservationSummary {
    /// Nodes reserved for a job.
    pub made: u64,
    /// Reservations that became the job's container.
    pub fulfilled: u64,
    /// Reservations let go unused (no longer needed or valid, or taken over by preemption).
    pub released: u64,
    /// Reservations still held at the end.
    pub active_at_end: u64,
    /// Time-average of the nodes reserved: nodes whose free room nobody else could use.
    pub reserved_nodes_avg: f64,
}

/// Wait, delay, response time and bounded slowdown over jobs or runs, in seconds (the
/// slowdown is a ratio). Waits and delays count every job (run) that got there; response
/// times and slowdowns count those that completed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeFigures {
    /// Jobs (runs) that completed.
    pub completed: u64,
    /// Submit → first container.
    pub wait: Stats,
    /// Submit → every container of the first request granted: the honest wait of a job that
    /// asked for many containers (a gang: submit → start).
    pub delay: Stats,
    /// Submit → end.
    pub response: Stats,
    /// `max(1, response / max(response − delay, 10 s))`.
    pub bounded_slowdown: Stats,
}

/// Mean, median, 99th percentile (nearest rank) and maximum of some values; all `null`
/// without any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    pub count: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

/// What gangs did over the simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GangSummary {
    /// Gangs that started (each all at once; a gang restarted after a loss counts again).
    pub started: u64,
    /// Gangs whose placeholders were released because they had not started within
    /// `gang_timeout`, and went to the back of their queue.
    pub placeholder_timeouts: u64,
    /// Time-average room held by placeholders for gangs not started yet (idle, and not in
    /// `utilization`).
    pub placeholder_avg: ResourceFloats,
    /// Tasks ended because another task of their gang failed or was lost with its node.
    pub tasks_restarted: u64,
}

/// The cluster's GPUs over the simulation, sampled every `--sample-every`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GpuSummary {
    pub gpus: f64,
    /// Time-average GPUs given out (whole GPUs and fractions).
    pub allocated_avg: f64,
    /// Time-average idle GPUs.
    pub idle_avg: f64,
    /// Time-average idle GPUs that a task drawn from the workload's GPU task mix could not use
    /// (the FGD paper's fragmentation), and that as a share of the idle GPUs: average and peak.
    pub fragmented_avg: f64,
    pub fragmentation_ratio_avg: Option<f64>,
    pub fragmentation_ratio_max: Option<f64>,
    /// Containers still wanted at the end by jobs that could not get them (`pending.csv`).
    pub tasks_unplaced: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ResourceFloats {
    pub cpu: f64,
    pub memory: f64,
    pub gpu: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TierSummary {
    /// Runs that ended (completed or failed).
    pub runs: u64,
    /// Runs with an SLO whose outcome is known: ended, or past their deadline at the horizon.
    pub runs_with_slo: u64,
    pub slo_met: u64,
    pub slo_success_ratio: Option<f64>,
    /// Workflows of this tier with at least one run with a known SLO outcome.
    pub workflows: u64,
    /// Those meeting their SLO in at least 90% of their runs.
    pub slo_successful_workflows: u64,
    /// Runtime (submit → end: the response time) of ended runs, seconds.
    pub runtime_p50: Option<f64>,
    pub runtime_p99: Option<f64>,
    /// Submit → first container of runs that got one, seconds.
    pub wait_p50: Option<f64>,
    pub wait_p99: Option<f64>,
    /// Runs' delays (the time some job of the run was short of its first request), ended runs.
    pub delay_p50: Option<f64>,
    pub delay_p99: Option<f64>,
    /// Bounded slowdown of completed runs.
    pub bounded_slowdown_mean: Option<f64>,
    pub bounded_slowdown_p99: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueSummary {
    pub queue: String,
    pub tier: Option<u8>,
    /// Time-average use (millicores, MiB, GPUs).
    pub usage_avg: ResourceFloats,
    /// Average instantaneous fair share, sampled.
    pub fair_share_avg: ResourceFloats,
    pub jobs_started: u64,
    /// Submit → first container of its jobs, seconds.
    pub wait_p50: Option<f64>,
    pub wait_p99: Option<f64>,
    /// Submit → every container of a job's first request granted, seconds.
    pub delay_p50: Option<f64>,
    pub delay_p99: Option<f64>,
    /// Submit → end of its completed jobs, seconds.
    pub response_p50: Option<f64>,
    pub response_p99: Option<f64>,
    /// Bounded slowdown of its completed jobs.
    pub bounded_slowdown_mean: Option<f64>,
    pub bounded_slowdown_p99: Option<f64>,
    /// Containers taken from it by preemption.
    pub preempted: u64,
}

/// A workflow is SLO-successful when at least this share of its runs meet the SLO.
pub const SLO_SUCCESSFUL: f64 = 0.9;

pub(crate) fn build(mut sim: Simulation) -> Result<Outcome, crate::SimError> {
    let pending = crate::pending::collect(&sim);
    let end = sim.now;
    let secs = end.as_millis() as f64 / 1000.0;
    let ratio = |m: &crate::metrics::Metrics, k: usize| {
        if m.total_integral[k] == 0 {
            0.0
        } else {
            m.used_integral[k] as f64 / m.total_integral[k] as f64
        }
    };
    let samples = sim.metrics.samples_taken().max(1) as f64;
    let mut all_jobs = crate::stats::Times::default();
    let mut queues = Vec::new();
    for &q in &sim.leaves().to_vec() {
        let l = &mut sim.metrics.leaves[q];
        let avg = |i: &[u128; 3]| {
            let t = end.as_millis().max(1) as f64;
            ResourceFloats { cpu: i[0] as f64 / t, memory: i[1] as f64 / t, gpu: i[2] as f64 / t }
        };
        all_jobs.merge(&l.jobs);
        let f = l.jobs.figures();
        queues.push(QueueSummary {
            queue: sim.cluster.queues[q].path.to_string(),
            tier: sim.cluster.queues[q].tier,
            usage_avg: avg(&l.usage_integral),
            fair_share_avg: ResourceFloats {
                cpu: l.share_sum[0] as f64 / samples,
                memory: l.share_sum[1] as f64 / samples,
                gpu: l.share_sum[2] as f64 / samples,
            },
            jobs_started: f.wait.count,
            wait_p50: f.wait.p50,
            wait_p99: f.wait.p99,
            delay_p50: f.delay.p50,
            delay_p99: f.delay.p99,
            response_p50: f.response.p50,
            response_p99: f.response.p99,
            bounded_slowdown_mean: f.bounded_slowdown.mean,
            bounded_slowdown_p99: f.bounded_slowdown.p99,
            preempted: l.preempted,
        });
    }
    let job_figures = TimeFigures { completed: sim.metrics.jobs_completed, ..all_jobs.figures() };
    let r = &mut sim.run_stats;
    let tiers = r.tiers();
    let run_figures = r.runs.figures();
    let workflow_slos = r.table();
    let (runs_completed, runs_failed, runs_unfinished, slo_workflows) =
        (r.completed, r.failed, r.unfinished, r.slo_workflows);
    let ending = crate::ending::ending(&sim, &pending, runs_unfinished);
    let m = &sim.metrics;
    let summary = Summary {
        seed: sim.config.seed,
        nodes: sim.engine.node_count(),
        jobs_submitted: m.jobs_submitted,
        jobs_completed: m.jobs_completed,
        jobs_failed: m.jobs_failed,
        runs: sim.runs.len() as u64,
        runs_completed,
        runs_failed,
        runs_unfinished,
        tasks_completed: m.tasks_completed,
        task_attempts_failed: m.task_attempts_failed,
        events: m.events,
        simulated_seconds: secs,
        makespan: (sim.runs_ended > 0).then(|| sim.last_run_end.as_millis() as f64 / 1000.0),
        jobs_never_placed: m.jobs_submitted.saturating_sub(job_figures.wait.count),
        wall_seconds: 0.0,
        utilization: ResourceFloats {
            cpu: ratio(m, 0),
            memory: ratio(m, 1),
            // Fractions of shared GPUs count (a pod on half a GPU uses half of one).
            gpu: match m.gpu_milli_integral {
                [_, 0] => 0.0,
                [used, total] => used as f64 / total as f64,
            },
        },
        preemptions: m.preemptions,
        preemption_warnings: m.preemption_warnings,
        node_failures: m.node_failures,
        containers_lost_to_node_failures: m.containers_lost,
        wasted_container_seconds: m.wasted_ms as f64 / 1000.0,
        reservations: {
            let r = sim.engine.reservation_stats();
            ReservationSummary {
                made: r.made,
                fulfilled: r.fulfilled,
                released: r.released,
                active_at_end: r.active,
                reserved_nodes_avg: m.reserved_node_ms as f64 / end.as_millis().max(1) as f64,
            }
        },
        jobs_unfinished: pending.len() as u64,
        ending,
        job_figures,
        run_figures,
        gangs: gangs(&sim, end),
        gpus: gpus(&sim, &pending),
        tiers,
        slo_workflows,
        workflow_slos,
        queues,
    };
    let jobs = sim.jobs.len() as u64;
    let (runs, job_records) = sim.sink.finish().map_err(|source| crate::SimError::Records { source })?;
    Ok(Outcome {
        summary,
        runs,
        usage_rows: sim.metrics.usage_rows,
        samples: sim.metrics.series.finish(),
        workload: Workload { workflows: sim.workload.workflows.into_values() },
        cluster: sim.cluster,
        jobs,
        job_records,
        pending,
    })
}

fn gangs(sim: &Simulation, end: Time) -> Option<GangSummary> {
    let any = sim.metrics.saw_gangs;
    if !any {
        return None;
    }
    let m = &sim.metrics;
    let t = end.as_millis().max(1) as f64;
    let p = &m.placeholder_integral;
    Some(GangSummary {
        started: m.gangs_started,
        placeholder_timeouts: sim.engine.gang_timeouts(),
        placeholder_avg: ResourceFloats {
            cpu: p[0] as f64 / t,
            memory: p[1] as f64 / t,
            gpu: p[2] as f64 / t,
        },
        tasks_restarted: m.gang_restarts_tasks,
    })
}

fn gpus(sim: &Simulation, pending: &[crate::pending::PendingJob]) -> Option<GpuSummary> {
    sim.metrics.gpu_mix.as_ref()?;
    let g = &sim.metrics.gpu;
    let n = g.samples.max(1) as f64;
    let gpus = |milli: f64| milli / 1000.0;
    Some(GpuSummary {
        gpus: gpus(g.total as f64),
        allocated_avg: gpus(g.allocated_sum as f64 / n),
        idle_avg: gpus(g.idle_sum as f64 / n),
        fragmented_avg: gpus(g.fragmented_sum / n),
        fragmentation_ratio_avg: (g.ratio_samples > 0).then(|| g.ratio_sum / g.ratio_samples as f64),
        fragmentation_ratio_max: (g.ratio_samples > 0).then_some(g.ratio_max),
        tasks_unplaced: pending.iter().map(|p| p.explanation.pending_containers).sum(),
    })
}

impl Summary {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }
}
