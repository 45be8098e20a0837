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

impl Stats {
    /// Of milliseconds, in seconds.
    pub fn of_ms(values: &mut [u64]) -> Stats {
        values.sort_unstable();
        let secs = |v: Option<u64>| v.map(|ms| ms as f64 / 1000.0);
        let sum: u128 = values.iter().map(|&v| u128::from(v)).sum();
        Stats {
            count: values.len() as u64,
            mean: (!values.is_empty()).then(|| sum as f64 / values.len() as f64 / 1000.0),
            p50: secs(percentile(values, 0.50)),
            p99: secs(percentile(values, 0.99)),
            max: secs(values.last().copied()),
        }
    }

    pub fn of(values: &mut [f64]) -> Stats {
        values.sort_unstable_by(f64::total_cmp);
        let rank = |p: f64| {
            let rank = (p * values.len() as f64).ceil() as usize;
            values.get(rank.clamp(1, values.len().max(1)) - 1).copied()
        };
        Stats {
            count: values.len() as u64,
            mean: (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64),
            p50: rank(0.50),
            p99: rank(0.99),
            max: values.last().copied(),
        }
    }
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

pub(crate) fn build(sim: Simulation) -> Outcome {
    let pending = crate::pending::collect(&sim);
    let end = sim.now;
    let m = &sim.metrics;
    let secs = end.as_millis() as f64 / 1000.0;
    let ratio = |k: usize| {
        if m.total_integral[k] == 0 {
            0.0
        } else {
            m.used_integral[k] as f64 / m.total_integral[k] as f64
        }
    };
    let samples = m.samples_taken().max(1) as f64;
    let queues = sim
        .leaves()
        .iter()
        .map(|&q| {
            let l = &m.leaves[q];
            let avg = |i: &[u128; 3]| {
                let t = end.as_millis().max(1) as f64;
                ResourceFloats { cpu: i[0] as f64 / t, memory: i[1] as f64 / t, gpu: i[2] as f64 / t }
            };
            let wait = Stats::of_ms(&mut l.waits.clone());
            let delay = Stats::of_ms(&mut l.delays.clone());
            let response = Stats::of_ms(&mut l.responses.clone());
            let slowdown = Stats::of(&mut l.slowdowns.clone());
            QueueSummary {
                queue: sim.cluster.queues[q].path.to_string(),
                tier: sim.cluster.queues[q].tier,
                usage_avg: avg(&l.usage_integral),
                fair_share_avg: ResourceFloats {
                    cpu: l.share_sum[0] as f64 / samples,
                    memory: l.share_sum[1] as f64 / samples,
                    gpu: l.share_sum[2] as f64 / samples,
                },
                jobs_started: wait.count,
                wait_p50: wait.p50,
                wait_p99: wait.p99,
                delay_p50: delay.p50,
                delay_p99: delay.p99,
                response_p50: response.p50,
                response_p99: response.p99,
                bounded_slowdown_mean: slowdown.mean,
                bounded_slowdown_p99: slowdown.p99,
                preempted: l.preempted,
            }
        })
        .collect();
    let tiers = tiers(&sim.records, &sim.workload);
    let job_figures = {
        let all = |f: fn(&crate::metrics::LeafMetrics) -> &Vec<u64>| -> Vec<u64> {
            m.leaves.iter().flat_map(|l| f(l).iter().copied()).collect()
        };
        let mut slowdowns: Vec<f64> = m.leaves.iter().flat_map(|l| l.slowdowns.iter().copied()).collect();
        TimeFigures {
            completed: m.jobs_completed,
            wait: Stats::of_ms(&mut all(|l| &l.waits)),
            delay: Stats::of_ms(&mut all(|l| &l.delays)),
            response: Stats::of_ms(&mut all(|l| &l.responses)),
            bounded_slowdown: Stats::of(&mut slowdowns),
        }
    };
    let run_figures = run_figures(&sim.records);
    let job_records = job_records(&sim);
    let count = |f: &dyn Fn(&RunRecord) -> bool| sim.records.iter().filter(|r| f(r)).count() as u64;
    let ending = crate::ending::ending(&sim, &pending, count(&|r| r.end.is_none()));
    let summary = Summary {
        seed: sim.config.seed,
        nodes: sim.engine.node_count(),
        jobs_submitted: m.jobs_submitted,
        jobs_completed: m.jobs_completed,
        jobs_failed: m.jobs_failed,
        runs: sim.runs.len() as u64,
        runs_completed: count(&|r| r.end.is_some() && !r.failed),
        runs_failed: count(&|r| r.failed),
        runs_unfinished: count(&|r| r.end.is_none()),
        tasks_completed: m.tasks_completed,
        task_attempts_failed: m.task_attempts_failed,
        events: m.events,
        simulated_seconds: secs,
        wall_seconds: 0.0,
        utilization: ResourceFloats { cpu: ratio(0), memory: ratio(1), gpu: ratio(2) },
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
        queues,
    };
    let mut runs = sim.records;
    runs.sort_by_key(|r| (r.submit, r.workflow));
    Outcome {
        summary,
        runs,
        usage_rows: sim.metrics.usage_rows,
        samples: sim.metrics.series.finish(),
        workload: sim.workload,
        cluster: sim.cluster,
        jobs: sim.jobs.len() as u64,
        job_records,
        pending,
    }
}

fn job_records(sim: &Simulation) -> Vec<JobRecord> {
    use crate::execution::JobState;
    sim.jobs
        .iter()
        .enumerate()
        .map(|(id, j)| JobRecord {
            job: id as u64,
            workflow: j.workflow,
            template: j.template,
            tier: j.tier,
            submit: j.submit,
            first_start: j.first_start,
            all_started: j.all_started,
            end: j.end,
            status: match j.state {
                JobState::Done => JobStatus::Completed,
                JobState::Failed => JobStatus::Failed,
                JobState::Active => JobStatus::Unfinished,
            },
        })
        .collect()
}

fn run_figures(records: &[RunRecord]) -> TimeFigures {
    let ms = |f: &dyn Fn(&RunRecord) -> Option<Duration>| -> Vec<u64> {
        records.iter().filter_map(|r| f(r).map(Duration::as_millis)).collect()
    };
    let mut slowdowns: Vec<f64> = records.iter().filter_map(RunRecord::bounded_slowdown).collect();
    TimeFigures {
        completed: records.iter().filter(|r| r.end.is_some() && !r.failed).count() as u64,
        wait: Stats::of_ms(&mut ms(&RunRecord::wait)),
        delay: Stats::of_ms(&mut ms(&|r| r.delay)),
        response: Stats::of_ms(&mut ms(&|r| r.response().filter(|_| !r.failed))),
        bounded_slowdown: Stats::of(&mut slowdowns),
    }
}

fn gangs(sim: &Simulation, end: Time) -> Option<GangSummary> {
    let any = sim
        .workload
        .workflows
        .iter()
        .flat_map(|w| &w.jobs)
        .any(|j| j.gang || j.stages.iter().any(|s| s.gang));
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

fn tiers(records: &[RunRecord], workload: &Workload) -> BTreeMap<String, TierSummary> {
    let mut out: BTreeMap<String, TierSummary> =
        (1..=3).map(|t: u8| (t.to_string(), TierSummary::default())).collect();
    // Per workflow: (runs with a known SLO outcome, runs meeting it).
    let mut per_workflow: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    #[derive(Default)]
    struct Times {
        runtimes: Vec<u64>,
        waits: Vec<u64>,
        delays: Vec<u64>,
        slowdowns: Vec<f64>,
    }
    let mut times: BTreeMap<u8, Times> = BTreeMap::new();
    for r in records {
        let wf = &workload.workflows[r.workflow as usize];
        let t = out.entry(wf.tier.to_string()).or_default();
        let x = times.entry(wf.tier).or_default();
        if let Some(end) = r.end {
            t.runs += 1;
            x.runtimes.push(end.since(r.submit).as_millis());
        }
        x.waits.extend(r.wait().map(Duration::as_millis));
        x.delays.extend(r.delay.map(Duration::as_millis));
        x.slowdowns.extend(r.bounded_slowdown());
        if let Some(met) = r.met {
            t.runs_with_slo += 1;
            t.slo_met += u64::from(met);
            let w = per_workflow.entry(r.workflow).or_default();
            w.0 += 1;
            w.1 += u64::from(met);
        }
    }
    for (w, (n, met)) in per_workflow {
        let t = out.entry(workload.workflows[w as usize].tier.to_string()).or_default();
        t.workflows += 1;
        t.slo_successful_workflows += u64::from(met as f64 >= SLO_SUCCESSFUL * n as f64);
    }
    for (tier, t) in out.iter_mut() {
        t.slo_success_ratio = (t.runs_with_slo > 0).then(|| t.slo_met as f64 / t.runs_with_slo as f64);
        if let Some(x) = tier.parse::<u8>().ok().and_then(|k| times.get_mut(&k)) {
            let runtime = Stats::of_ms(&mut x.runtimes);
            (t.runtime_p50, t.runtime_p99) = (runtime.p50, runtime.p99);
            let wait = Stats::of_ms(&mut x.waits);
            (t.wait_p50, t.wait_p99) = (wait.p50, wait.p99);
            let delay = Stats::of_ms(&mut x.delays);
            (t.delay_p50, t.delay_p99) = (delay.p50, delay.p99);
            let slowdown = Stats::of(&mut x.slowdowns);
            (t.bounded_slowdown_mean, t.bounded_slowdown_p99) = (slowdown.mean, slowdown.p99);
        }
    }
    out
}

/// Nearest-rank percentile of sorted values.
pub(crate) fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Summary {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7], 0.99), Some(7));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.50), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 1.0), Some(100));
    }
}
