//! Reports over the recorded history, shared by the API (`/v1/reports/…`, `/v1/usage`,
//! `/v1/runs.csv`) and the dashboard: the SLO report (weir-planner's, with `weir simulate`'s
//! definitions), the usage/capacity report with the planner's verdict, and the CSV exports in
//! the schemas `weir plan` and `weir simulate` use. Pure functions of store rows and `now`.

use std::fmt::Write as _;

use weir_api::{SloFigures, SloReport, TierSlo, UsageFigures, UsageReport, WorkflowSlo};
use weir_model::{ClusterConfig, Resources};
use weir_planner::slo::instances_of;
use weir_planner::summary::cluster_instances;
use weir_planner::{plan, PlanInput, PlanSettings, RunEnd, RunOutcome, UsageHistory};
use weir_store::{RunRecordRow, UsageRow};

/// The report's view of a stored run.
pub fn outcome(r: &RunRecordRow) -> RunOutcome {
    RunOutcome {
        workflow: r.workflow.clone(),
        tier: r.tier,
        submit_ms: r.submitted_ms.max(0) as u64,
        end_ms: r.finished_ms.map(|t| t.max(0) as u64),
        end: match r.state.as_str() {
            "succeeded" => RunEnd::Succeeded,
            "failed" => RunEnd::Failed,
            "killed" => RunEnd::Killed,
            _ => RunEnd::Unfinished,
        },
        slo_ms: r.slo_ms.map(|v| v.max(0) as u64),
    }
}

fn figures(f: &weir_planner::SloFigures) -> SloFigures {
    SloFigures {
        runs: f.runs,
        runs_with_slo: f.runs_with_slo,
        slo_met: f.slo_met,
        slo_success_ratio: f.slo_success_ratio,
        runtime_p50_ms: f.runtime_p50_ms,
        runtime_p99_ms: f.runtime_p99_ms,
    }
}

/// The SLO report over `runs` (already filtered to what the caller may read).
pub fn slo(runs: &[RunRecordRow], since_ms: i64, until_ms: i64, now_ms: i64) -> SloReport {
    let outcomes: Vec<RunOutcome> = runs.iter().map(outcome).collect();
    let r = weir_planner::slo_report(&outcomes, now_ms.max(0) as u64);
    SloReport {
        since_ms,
        until_ms,
        tiers: r
            .tiers
            .iter()
            .map(|t| TierSlo {
                tier: t.tier,
                figures: figures(&t.figures),
                workflows: t.workflows,
                slo_successful_workflows: t.slo_successful_workflows,
            })
            .collect(),
        workflows: r
            .workflows
            .iter()
            .map(|w| WorkflowSlo {
                workflow: w.workflow.clone(),
                tier: w.tier,
                figures: figures(&w.figures),
                slo_successful: w.slo_successful,
            })
            .collect(),
        wait_causes: Vec::new(),
        at_risk: Vec::new(),
        trend: Vec::new(),
    }
}

fn clip(r: &UsageRow, since: i64, until: i64) -> Option<(i64, i64)> {
    let (s, e) = (r.start_ms.max(since), r.end_ms.min(until));
    (s < e).then_some((s, e))
}

fn res(cpu: i64, memory: i64) -> Resources {
    Resources { cpu: cpu.max(0) as u64, memory: memory.max(0) as u64, gpu: 0 }
}

/// Usage against allocation over `[since_ms, until_ms)` from the recorded `rows` of `cluster`,
/// with the planner's verdict on them. Allocation is each leaf's steady fair share under the
/// current configuration.
/// The usage report of `[since_ms, until_ms)`, of which the server recorded
/// `[recorded_since_ms, until_ms)`: allocations and ratios count only the recorded part, so a
/// server started an hour ago is not judged against a whole day it never saw.
pub fn usage(
    cluster: &str,
    config: &ClusterConfig,
    rows: &[UsageRow],
    since_ms: i64,
    until_ms: i64,
    recorded_since_ms: i64,
) -> UsageReport {
    let report_since = since_ms;
    let since_ms = recorded_since_ms.clamp(since_ms, until_ms);
    let settings = {
        let mut s = PlanSettings::defaults_for(config);
        s.window = weir_model::Duration((until_ms - since_ms).max(1) as u64);
        s
    };
    let instance = settings.instance;
    let hours = (until_ms - since_ms).max(0) as f64 / 3_600_000.0;
    let shares = weir_engine::shares_for(config, &[]);
    let mut queues = Vec::new();
    let mut tiers: Vec<UsageFigures> = (1..=3u8)
        .map(|t| UsageFigures {
            name: format!("tier {t}"),
            tier: Some(t),
            used_instance_hours: 0.0,
            allocated_instance_hours: 0.0,
            usage_capacity: None,
        })
        .collect();
    let mut used_total = 0.0;
    for (i, q) in config.queues.iter().enumerate().filter(|(_, q)| q.is_leaf()) {
        let path = q.path.to_string();
        let used: f64 = rows
            .iter()
            .filter(|r| r.queue == path)
            .filter_map(|r| {
                clip(r, since_ms, until_ms)
                    .map(|(s, e)| instances_of(&res(r.cpu, r.memory), &instance) * (e - s) as f64)
            })
            .fold(0.0, |a, b| a + b)
            / 3_600_000.0;
        let allocated = shares.get(i).map_or(0.0, |s| instances_of(&s.steady, &instance)) * hours;
        let tier = q.tier.unwrap_or(3).clamp(1, 3);
        let t = &mut tiers[usize::from(tier - 1)];
        t.used_instance_hours += used;
        t.allocated_instance_hours += allocated;
        used_total += used;
        queues.push(UsageFigures {
            name: path,
            tier: q.tier,
            used_instance_hours: used,
            allocated_instance_hours: allocated,
            usage_capacity: (allocated > 0.0).then(|| used / allocated),
        });
    }
    for t in &mut tiers {
        t.usage_capacity =
            (t.allocated_instance_hours > 0.0).then(|| t.used_instance_hours / t.allocated_instance_hours);
    }
    let size = cluster_instances(&config.total_resources(), &instance);
    let total_alloc = size * hours;
    let total = UsageFigures {
        name: "cluster".into(),
        tier: None,
        used_instance_hours: used_total,
        allocated_instance_hours: total_alloc,
        usage_capacity: (total_alloc > 0.0).then(|| used_total / total_alloc),
    };
    let (verdict, verdict_reason) = verdict(config, &settings, rows, since_ms, until_ms);
    UsageReport {
        cluster: cluster.to_string(),
        since_ms: report_since,
        until_ms,
        recorded_since_ms: since_ms,
        instance: crate::snapshot::wire(instance),
        cluster_instances: size,
        tiers,
        queues,
        total,
        verdict,
        verdict_reason,
    }
}

/// The recorded rows as the planner's history, clipped to the window.
pub fn history(rows: &[UsageRow], since_ms: i64, until_ms: i64) -> UsageHistory {
    let mut h = UsageHistory::new();
    for r in rows {
        if let Some((s, e)) = clip(r, since_ms, until_ms) {
            let id = h.queue_id(&r.queue);
            h.push(
                id,
                weir_planner::Interval {
                    start: s.max(0) as u64,
                    end: e.max(0) as u64,
                    cpu: r.cpu.max(0) as u64,
                    memory: r.memory.max(0) as u64,
                    running_apps: r.running_apps.clamp(0, i64::from(u32::MAX)) as u32,
                    line: 0,
                },
            );
        }
    }
    h
}

fn verdict(
    config: &ClusterConfig,
    settings: &PlanSettings,
    rows: &[UsageRow],
    since_ms: i64,
    until_ms: i64,
) -> (String, String) {
    let h = history(rows, since_ms, until_ms);
    let input = PlanInput {
        cluster: config,
        history: &h,
        history_name: "the recorded usage",
        settings,
        workload: None,
        threads: 1,
    };
    match plan(&input) {
        Ok(p) => (p.cluster.verdict.name().to_string(), p.cluster.reason.clone()),
        Err(e) => ("none".to_string(), format!("no verdict: {e}")),
    }
}

/// `usage.csv`: `start,end,queue,cpu,memory,running_apps,gpu`, Unix milliseconds, rows clipped
/// to the window (the planner reads the first six and checks `gpu`).
pub fn usage_csv(rows: &[UsageRow], since_ms: i64, until_ms: i64) -> String {
    let mut out = String::from("start,end,queue,cpu,memory,running_apps,gpu\n");
    for r in rows {
        if let Some((s, e)) = clip(r, since_ms, until_ms) {
            let _ = writeln!(out, "{s},{e},{},{},{},{},{}", r.queue, r.cpu, r.memory, r.running_apps, r.gpu);
        }
    }
    out
}

/// Quote a CSV field holding a comma, quote or line break (RFC 4180); a field a spreadsheet
/// would run as a formula (starting with `=`, `+`, `-`, `@`, tab or carriage return) is written
/// as text, with a leading `'`. Names are refused with such starts on the way in; this is for
/// rows stored before that.
pub(crate) fn csv_field(s: &str) -> String {
    let formula = s.starts_with(weir_model::FORMULA_STARTS) || s.starts_with(['\t', '\r']);
    let s = if formula { format!("'{s}") } else { s.to_string() };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// `runs.csv`: `workflow,tier,queue,submit,start,end,slo,met,status` as `weir simulate` writes
/// it (Unix milliseconds here); `status` is `completed`, `failed`, `killed` or `unfinished`,
/// `met` as of `now_ms`.
pub fn runs_csv(runs: &[RunRecordRow], now_ms: i64) -> String {
    let mut out = String::from("workflow,tier,queue,submit,start,end,slo,met,status\n");
    let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in runs {
        let o = outcome(r);
        let met = match o.met(now_ms.max(0) as u64) {
            Some(true) => "true",
            Some(false) => "false",
            None => "",
        };
        let status = match o.end {
            RunEnd::Succeeded => "completed",
            RunEnd::Failed => "failed",
            RunEnd::Killed => "killed",
            RunEnd::Unfinished => "unfinished",
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{met},{status}",
            csv_field(&r.workflow),
            r.tier,
            csv_field(&r.queue),
            r.submitted_ms,
            opt(r.started_ms),
            opt(r.finished_ms),
            opt(r.slo_ms)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        id: i64,
        wf: &str,
        state: &str,
        submitted: i64,
        finished: Option<i64>,
        slo: Option<i64>,
    ) -> RunRecordRow {
        RunRecordRow {
            id,
            workflow: wf.into(),
            project: "ads".into(),
            tier: 1,
            cluster: "c".into(),
            queue: "root.ads.tier1".into(),
            state: state.into(),
            submitted_ms: submitted,
            started_ms: Some(submitted + 1),
            finished_ms: finished,
            slo_ms: slo,
        }
    }

    #[test]
    fn runs_csv_has_the_simulators_columns() {
        let runs = [
            run(1, "report", "succeeded", 1000, Some(2000), Some(5000)),
            run(2, "a,b", "running", 1000, None, Some(500)),
            run(3, "c", "killed", 1000, Some(1200), None),
            run(4, "=HYPERLINK(\"x\")", "killed", 1000, Some(1200), None),
        ];
        assert_eq!(
            runs_csv(&runs, 3000),
            "workflow,tier,queue,submit,start,end,slo,met,status\n\
             report,1,root.ads.tier1,1000,1001,2000,5000,true,completed\n\
             \"a,b\",1,root.ads.tier1,1000,1001,,500,false,unfinished\n\
             c,1,root.ads.tier1,1000,1001,1200,,,killed\n\
             \"'=HYPERLINK(\"\"x\"\")\",1,root.ads.tier1,1000,1001,1200,,,killed\n"
        );
    }

    #[test]
    fn usage_is_counted_in_instances_against_the_steady_share() {
        let config = ClusterConfig::from_yaml(
            "c",
            "version: 1\nnodes: [{count: 4, resources: {cpu: 4000, memory: 8g}}]\nqueues:\n  - {name: a, tier: 1, weight: 3}\n  - {name: b, tier: 3}\n",
        )
        .expect("cluster");
        let row = |q: &str, s, e, cpu| UsageRow {
            cluster: "c".into(),
            queue: q.into(),
            start_ms: s,
            end_ms: e,
            cpu,
            memory: 0,
            gpu: 0,
            running_apps: 1,
        };
        // One hour window; a uses 2 instances for the whole hour (a row sticking out on both
        // sides is clipped), b uses 1 instance for half an hour.
        let rows = [row("root.a", -1000, 3_700_000, 8000), row("root.b", 0, 1_800_000, 4000)];
        let r = usage("c", &config, &rows, 0, 3_600_000, 0);
        assert_eq!(r.cluster_instances, 4.0);
        let a = &r.queues[0];
        assert_eq!(
            (a.name.as_str(), a.used_instance_hours, a.allocated_instance_hours),
            ("root.a", 2.0, 3.0)
        );
        let b = &r.queues[1];
        assert_eq!((b.used_instance_hours, b.allocated_instance_hours), (0.5, 1.0));
        assert_eq!(r.tiers[0].usage_capacity, Some(2.0 / 3.0));
        assert_eq!(r.total.usage_capacity, Some(2.5 / 4.0));
        assert_eq!(r.verdict, "none", "an hour of history gets no verdict: {}", r.verdict_reason);
        assert_eq!(
            usage_csv(&rows, 0, 3_600_000),
            "start,end,queue,cpu,memory,running_apps,gpu\n0,3600000,root.a,8000,0,1,0\n0,1800000,root.b,4000,0,1,0\n"
        );
    }

    /// A server that began recording 6 minutes before the end of a day's window: the 6 minutes
    /// are what the queues are measured against, not the day (a fresh demo read 0.0% everywhere).
    #[test]
    fn usage_counts_only_the_span_the_server_recorded() {
        let config = ClusterConfig::from_yaml(
            "c",
            "version: 1\nnodes: [{count: 4, resources: {cpu: 4000, memory: 8g}}]\nqueues:\n  - {name: a, tier: 1}\n  - {name: b, tier: 3}\n",
        )
        .expect("cluster");
        let day = 86_400_000;
        let began = day - 360_000;
        // a holds one instance for the last 3 of those 6 minutes.
        let rows = [UsageRow {
            cluster: "c".into(),
            queue: "root.a".into(),
            start_ms: day - 180_000,
            end_ms: day,
            cpu: 4000,
            memory: 0,
            gpu: 0,
            running_apps: 1,
        }];
        let r = usage("c", &config, &rows, 0, day, began);
        assert_eq!((r.since_ms, r.recorded_since_ms), (0, began));
        let a = &r.queues[0];
        // Steady share 2 instances over 0.1 h; used 1 instance over 0.05 h.
        assert!((a.allocated_instance_hours - 0.2).abs() < 1e-9, "{}", a.allocated_instance_hours);
        assert!((a.used_instance_hours - 0.05).abs() < 1e-9);
        assert_eq!(a.usage_capacity.map(|x| (x * 1000.0).round() / 1000.0), Some(0.25));
        assert_eq!(r.total.usage_capacity.map(|x| (x * 10000.0).round() / 10000.0), Some(0.125));
        // Recording that began before the window: the whole window counts.
        let whole = usage("c", &config, &rows, 0, day, -5);
        assert_eq!(whole.recorded_since_ms, 0);
        assert!((whole.queues[0].allocated_instance_hours - 48.0).abs() < 1e-9);
    }
}
