//! What a finished simulation hands over, and its machine-readable forms: `summary.json`,
//! `runs.csv` and `usage.csv`. Writers take any `io::Write` the host opened.
//!
//! Times in the CSV files are whole milliseconds since the start of the simulation; resources
//! are millicores and MiB. The summary is deterministic for a seed, except `wall_seconds`,
//! which the host measures and fills in.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;
use weir_model::{ClusterConfig, QueuePath, Resources, Time, Workload};

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
    /// Runtime (submit → end) of ended runs, seconds.
    pub runtime_p50: Option<f64>,
    pub runtime_p99: Option<f64>,
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
            let mut waits = l.waits.clone();
            waits.sort_unstable();
            QueueSummary {
                queue: sim.cluster.queues[q].path.to_string(),
                tier: sim.cluster.queues[q].tier,
                usage_avg: avg(&l.usage_integral),
                fair_share_avg: ResourceFloats {
                    cpu: l.share_sum[0] as f64 / samples,
                    memory: l.share_sum[1] as f64 / samples,
                    gpu: l.share_sum[2] as f64 / samples,
                },
                jobs_started: waits.len() as u64,
                wait_p50: percentile(&waits, 0.50).map(|ms| ms as f64 / 1000.0),
                wait_p99: percentile(&waits, 0.99).map(|ms| ms as f64 / 1000.0),
                preempted: l.preempted,
            }
        })
        .collect();
    let tiers = tiers(&sim.records, &sim.workload);
    let count = |f: &dyn Fn(&RunRecord) -> bool| sim.records.iter().filter(|r| f(r)).count() as u64;
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
        pending,
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
    let mut runtimes: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for r in records {
        let wf = &workload.workflows[r.workflow as usize];
        let t = out.entry(wf.tier.to_string()).or_default();
        if let Some(end) = r.end {
            t.runs += 1;
            runtimes.entry(wf.tier).or_default().push(end.since(r.submit).as_millis());
        }
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
        if let Some(v) = tier.parse::<u8>().ok().and_then(|k| runtimes.get_mut(&k)) {
            v.sort_unstable();
            t.runtime_p50 = percentile(v, 0.50).map(|ms| ms as f64 / 1000.0);
            t.runtime_p99 = percentile(v, 0.99).map(|ms| ms as f64 / 1000.0);
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

/// `runs.csv`: one row per run, in submission order.
pub fn write_runs_csv(mut w: impl Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(w, "workflow,tier,queue,submit,start,end,slo,met,status")?;
    let opt = |t: Option<u64>| t.map(|v| v.to_string()).unwrap_or_default();
    for r in &outcome.runs {
        let wf = &outcome.workload.workflows[r.workflow as usize];
        let status = match (r.failed, r.end) {
            (true, _) => "failed",
            (false, Some(_)) => "completed",
            (false, None) => "unfinished",
        };
        let met = match r.met {
            Some(true) => "true",
            Some(false) => "false",
            None => "",
        };
        writeln!(
            w,
            "{},{},{},{},{},{},{},{met},{status}",
            csv_field(&wf.name),
            wf.tier,
            wf.queue,
            r.submit.as_millis(),
            opt(r.start.map(Time::as_millis)),
            opt(r.end.map(Time::as_millis)),
            opt(wf.slo.map(|d| d.as_millis())),
        )?;
    }
    Ok(())
}

/// Quote a field that holds a comma, quote or line break (RFC 4180).
pub(crate) fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Writes `usage.csv`: the header once, then rows as the simulation hands them over.
pub struct UsageCsv<W: Write> {
    out: W,
    names: Vec<QueuePath>,
}

impl<W: Write> UsageCsv<W> {
    pub fn new(mut out: W, cluster: &ClusterConfig) -> io::Result<UsageCsv<W>> {
        writeln!(out, "start,end,queue,cpu,memory,running_apps")?;
        Ok(UsageCsv { out, names: cluster.queues.iter().map(|q| q.path.clone()).collect() })
    }

    pub fn write(&mut self, rows: &[UsageRow]) -> io::Result<()> {
        for r in rows {
            let Resources { cpu, memory, .. } = r.usage;
            writeln!(
                self.out,
                "{},{},{},{cpu},{memory},{}",
                r.start.as_millis(),
                r.end.as_millis(),
                self.names[r.queue],
                r.running_apps
            )?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
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

    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
