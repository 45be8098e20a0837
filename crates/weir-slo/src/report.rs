//! `report.html` of an evaluation: the policies side by side, completion against deadline per
//! run, and the controller's allocation over time against progress for the runs that were
//! hardest for it. A pure function of the report (weir-report draws the page).

use weir_report::{BarChart, Bars, LineChart, Page, Series};

use crate::evaluate::{EvalReport, Policy};

/// The most runs whose allocation over time is drawn.
const TRACES: usize = 6;

pub fn report_html(report: &EvalReport) -> String {
    let mut page = Page::new("weir slo evaluate");
    page.heading("Deadline guarantees: the controller against its alternatives");
    page.paragraph(
        "Each SLO run replayed under every policy: jockey (the controller with C(p, a)), static (its first \
         allocation, never changed), max (the job's full parallelism), fair (plain fair share, no \
         guaranteed minimum) and amdahl (the controller with S + P/a). Lateness is completion / deadline \
         (below 1: on time). Allocated container-hours are what the SLO jobs were guaranteed; used, what \
         their tasks ran. docs/slo.md explains how to read this page.",
    );
    let rows: Vec<Vec<String>> = report
        .policies
        .iter()
        .map(|f| {
            vec![
                f.policy.name().to_string(),
                format!("{}{}/{}", if f.met == f.slo_runs { "+" } else { "!" }, f.met, f.slo_runs),
                format!("{:.1}%", f.met_ratio * 100.0),
                format!("{:.2}", f.lateness_p50),
                format!("{:.2}", f.lateness_p90),
                format!("{:.2}", f.lateness_max),
                format!("{:.1}", f.allocated_hours),
                format!("{:.1}", f.used_hours),
                format!("{:.0} s", f.background_response_mean_s),
                format!("{:.0} s", f.background_response_p90_s),
            ]
        })
        .collect();
    page.table(
        &[
            "policy",
            "deadlines met",
            "ratio",
            "lateness p50",
            "p90",
            "max",
            "allocated ch",
            "used ch",
            "background response mean",
            "p90",
        ],
        &rows,
    );
    let policies: Vec<Policy> = report.policies.iter().map(|f| f.policy).collect();
    page.svg(
        &BarChart {
            title: "Container-hours of the SLO jobs: allocated (guaranteed) and used".into(),
            unit: " ch".into(),
            series: vec!["allocated".into(), "used".into()],
            groups: report
                .policies
                .iter()
                .map(|f| Bars {
                    label: f.policy.name().into(),
                    values: vec![Some(f.allocated_hours), Some(f.used_hours)],
                })
                .collect(),
            max: None,
        }
        .render(),
    );
    // Completion / deadline per run, one bar per policy.
    let mut runs: Vec<(String, u32)> = report.jobs.iter().map(|j| (j.workflow.clone(), j.run)).collect();
    runs.sort();
    runs.dedup();
    page.svg(
        &BarChart {
            title: "Completion relative to the deadline, per SLO run (1 = the deadline; * = slowed)".into(),
            unit: String::new(),
            series: policies.iter().map(|p| p.name().to_string()).collect(),
            groups: runs
                .iter()
                .map(|(w, r)| {
                    let of = |p: Policy| {
                        report.jobs.iter().find(|j| j.policy == p && &j.workflow == w && j.run == *r)
                    };
                    let slowed = of(policies[0]).is_some_and(|j| j.slowed);
                    Bars {
                        label: format!("{w} #{r}{}", if slowed { " *" } else { "" }),
                        values: policies
                            .iter()
                            .map(|&p| {
                                of(p)
                                    .and_then(|j| Some(j.completion_ms? as f64 / j.deadline_ms.max(1) as f64))
                            })
                            .collect(),
                    }
                })
                .collect(),
            max: None,
        }
        .render(),
    );
    // The controller's hardest runs: latest relative to the deadline first.
    let mut hardest: Vec<_> =
        report.jobs.iter().filter(|j| j.policy == Policy::Jockey && !j.decisions.is_empty()).collect();
    hardest.sort_by(|a, b| {
        let late = |j: &&crate::evaluate::EvalJob| {
            j.completion_ms.map_or(f64::INFINITY, |c| c as f64 / j.deadline_ms.max(1) as f64)
        };
        late(b).total_cmp(&late(a))
    });
    if !hardest.is_empty() {
        page.heading("Allocation over time against progress (the controller's hardest runs)");
    }
    for j in hardest.into_iter().take(TRACES) {
        let minutes = |ms: u64| ms as f64 / 60_000.0;
        let alloc: Vec<(f64, f64)> =
            j.decisions.iter().map(|d| (minutes(d.elapsed_ms), f64::from(d.allocation))).collect();
        let progress: Vec<(f64, f64)> =
            j.decisions.iter().map(|d| (minutes(d.elapsed_ms), d.progress * 100.0)).collect();
        let predicted: Vec<(f64, f64)> =
            j.decisions.iter().map(|d| (minutes(d.elapsed_ms), minutes(d.predicted_ms))).collect();
        let deadline = minutes(j.deadline_ms);
        let end = j
            .completion_ms
            .map_or("did not finish".to_string(), |c| format!("finished at {:.1} min", minutes(c)));
        page.svg(
            &LineChart {
                title: format!(
                    "{} #{}{}: deadline {:.0} min, {end}",
                    j.workflow,
                    j.run,
                    if j.slowed { " (slowed)" } else { "" },
                    deadline
                ),
                x_label: "minutes since submission".into(),
                y_label: "containers · progress % · predicted completion (min)".into(),
                series: vec![
                    Series { name: "allocation (containers)".into(), points: alloc },
                    Series { name: "progress (%)".into(), points: progress },
                    Series { name: "predicted completion (min)".into(), points: predicted },
                    Series {
                        name: "deadline (min)".into(),
                        points: j.decisions.iter().map(|d| (minutes(d.elapsed_ms), deadline)).collect(),
                    },
                ],
                y_max: None,
            }
            .render(),
        );
    }
    page.render()
}
