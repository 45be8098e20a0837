//! `report.html`: the plan as one self-contained page — inline CSS, charts as inline SVG, no
//! scripts, nothing fetched — so it can be mailed, archived or opened offline. The page and its
//! charts are drawn by weir-report, like the simulator's report.

use weir_report::{BarChart, Bars, Page};

use crate::plan::{Plan, QueueStatus};
use crate::summary::{fmt_num, Ratios, Verdict};

/// The current and the planned settings side by side, from replaying a workload on both
/// (`weir plan --validate`): one row per figure, `[label, current, planned]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// What was replayed, for how long, with which seed.
    pub description: String,
    pub rows: Vec<[String; 3]>,
}

/// Render `plan` as HTML; `title` names the cluster (e.g. its file name). With a `comparison`
/// (from `--validate`) the page opens with current against planned.
pub fn report_html(plan: &Plan, title: &str, comparison: Option<&Comparison>) -> String {
    let mut page = Page::new(&format!("weir plan — {title}"));
    let s = &plan.settings;
    page.note(&format!(
        "Window: {} hours of history ({} ms to {} ms). Instance: {} millicores, {} MiB. Percentiles: {}. \
         Headroom on max_running_apps: {}%. Usage is instance-hours used (dominant resource); capacity \
         is allocated instances × window hours.",
        fmt_num(plan.window.hours),
        plan.window.start_ms,
        plan.window.end_ms,
        s.instance.cpu,
        s.instance.memory,
        s.percentile.iter().map(|(t, p)| format!("tier {t} {}%", fmt_num(*p))).collect::<Vec<_>>().join(", "),
        fmt_num(s.max_running_apps_headroom * 100.0)
    ));

    if let Some(cmp) = comparison {
        page.heading("Current and planned settings, replayed");
        page.note(&cmp.description);
        let rows: Vec<Vec<String>> = cmp.rows.iter().map(|r| r.to_vec()).collect();
        page.table(&["", "current", "planned"], &rows);
    }

    let c = &plan.cluster;
    page.heading("Cluster");
    page.figures(&[
        (c.verdict.name().to_uppercase(), "verdict"),
        (fmt_num(c.instances), "cluster size, instances"),
        (c.allocated.to_string(), "instances allocated"),
        (c.tier1_tier2_allocated.to_string(), "of them tier 1 and 2"),
        (ratio(c.usage_capacity.instances), "usage/capacity of the cluster"),
    ]);
    let verdict = format!("Verdict: {} — {}.", c.verdict.name(), c.reason);
    match c.verdict {
        Verdict::Keep => page.paragraph(&verdict),
        Verdict::Grow | Verdict::Shrink | Verdict::None => {
            page.table(&["verdict"], &[vec![format!("!{verdict}")]])
        }
    };
    if !plan.warnings.is_empty() {
        let rows: Vec<Vec<String>> = plan.warnings.iter().map(|w| vec![format!("!{w}.")]).collect();
        page.table(&["warning"], &rows);
    }
    page.heading("Tier-1 and tier-2 usage added up");
    page.note(
        "Per-leaf percentiles assume the leaves' peaks never coincide. What capacity must cover is the usage of \
         the critical leaves added up moment by moment; the verdict is based on it.",
    );
    let summed_row = |label: &str, u: &crate::summed::SummedUsage| {
        vec![
            label.to_string(),
            format!("{}%", fmt_num(u.percentile)),
            u.instances.to_string(),
            u.peak_instances.to_string(),
            u.per_leaf_sum.to_string(),
            fmt_num(u.in_use_hours),
        ]
    };
    page.table(
        &[
            "leaves",
            "percentile",
            "summed: instances",
            "summed: peak",
            "Σ per-leaf allocations",
            "in use (h)",
        ],
        &[summed_row("tier 1", &c.tier1_summed), summed_row("tiers 1 and 2", &c.tier1_2_summed)],
    );
    let mut row = vec![
        format!("{} instances", fmt_num(c.instances)),
        c.allocated.to_string(),
        c.tier1_tier2_allocated.to_string(),
        fmt_num(c.used.instance_hours),
    ];
    row.extend(ratios(&c.usage_capacity));
    row.push(ratio(c.allocated_usage_capacity.instances));
    row.push(c.shrink_floor.to_string());
    page.table(
        &[
            "cluster size",
            "allocated",
            "tier 1 + 2",
            "instance-hours used",
            "usage/capacity (cluster)",
            "cpu",
            "memory",
            "usage/capacity (allocated)",
            "shrink floor",
        ],
        &[row],
    );

    page.heading("Tiers");
    let rows: Vec<Vec<String>> = plan
        .tiers
        .values()
        .map(|t| {
            let mut r = vec![
                format!("tier {}", t.tier),
                format!("{}%", fmt_num(t.percentile)),
                t.leaves.to_string(),
                t.instances.to_string(),
                fmt_num(t.used.instance_hours),
            ];
            r.extend(ratios(&t.usage_capacity));
            r
        })
        .collect();
    page.table(
        &[
            "tier",
            "percentile",
            "leaves",
            "instances",
            "instance-hours used",
            "usage/capacity",
            "cpu",
            "memory",
        ],
        &rows,
    );
    page.svg(
        &BarChart {
            title: "Usage/capacity per tier".into(),
            unit: String::new(),
            series: vec!["instances".into(), "cpu".into(), "memory".into()],
            groups: plan
                .tiers
                .values()
                .map(|t| Bars {
                    label: format!("tier {}", t.tier),
                    values: vec![t.usage_capacity.instances, t.usage_capacity.cpu, t.usage_capacity.memory],
                })
                .collect(),
            max: None,
        }
        .render(),
    );

    page.heading("Tier order");
    page.note(
        "From tier 1 to tier 3 the percentile must fall and usage/capacity rise: the most critical work keeps \
         the most headroom.",
    );
    let rows: Vec<Vec<String>> = plan
        .tier_order
        .steps
        .iter()
        .map(|step| {
            let falls = if step.percentile_falls { "+falls ✓" } else { "!does not fall ✗" };
            let rises = match step.ratio_rises {
                Some(true) => "+rises ✓",
                Some(false) => "!does not rise ✗",
                None => "not measured (a tier has no allocation)",
            };
            vec![format!("tier {} → tier {}", step.from, step.to), falls.into(), rises.into()]
        })
        .collect();
    page.table(&["step", "percentile", "usage/capacity"], &rows);
    if !plan.tier_order.violations.is_empty() {
        let rows: Vec<Vec<String>> =
            plan.tier_order.violations.iter().map(|v| vec![format!("!{v}.")]).collect();
        page.table(&["violation"], &rows);
    }

    page.heading("Queues");
    let rows: Vec<Vec<String>> = plan
        .queues
        .iter()
        .map(|q| {
            let status = match q.status {
                QueueStatus::Planned => "planned",
                QueueStatus::Vacant => "vacant",
                QueueStatus::NoHistory => "kept (no history)",
                QueueStatus::Parent => "parent",
            };
            let leaf = matches!(q.status, QueueStatus::Planned | QueueStatus::Vacant);
            vec![
                q.queue.clone(),
                q.tier.map(|t| t.to_string()).unwrap_or_default(),
                status.into(),
                if leaf {
                    let floor = q.slo_floor.map(|f| format!(", SLO floor {f:.1}")).unwrap_or_default();
                    format!(
                        "{} ({}% → {}{floor})",
                        q.instances,
                        fmt_num(q.percentile.unwrap_or(0.0)),
                        q.percentile_instances
                    )
                } else {
                    q.instances.to_string()
                },
                if leaf { q.peak_instances.to_string() } else { String::new() },
                format!("{} → {}", fmt_num(q.previous_weight), fmt_num(q.weight)),
                format!("{:.1}% → {:.1}%", q.previous_share * 100.0, q.share * 100.0),
                format!(
                    "{} → {}",
                    q.previous_max_running_apps.map_or("–".to_string(), |n| n.to_string()),
                    q.max_running_apps.map_or("–".to_string(), |n| n.to_string())
                ),
                ratio(q.usage_capacity.instances),
            ]
        })
        .collect();
    page.table(
        &[
            "queue",
            "tier",
            "status",
            "instances",
            "peak",
            "weight",
            "share of cluster",
            "max running apps",
            "usage/capacity",
        ],
        &rows,
    );
    let leaves: Vec<Bars> = plan
        .queues
        .iter()
        .filter(|q| matches!(q.status, QueueStatus::Planned | QueueStatus::Vacant))
        .map(|q| Bars {
            label: q.queue.clone(),
            values: vec![Some(q.instances as f64), Some(q.peak_instances as f64)],
        })
        .collect();
    if !leaves.is_empty() {
        page.heading("Allocation and peak per leaf");
        page.svg(
            &BarChart {
                title: "Instances".into(),
                unit: String::new(),
                series: vec!["allocated".into(), "peak use".into()],
                groups: leaves,
                max: None,
            }
            .render(),
        );
    }

    if !plan.ignored_history.is_empty() {
        page.heading("History not planned");
        let rows: Vec<Vec<String>> = plan
            .ignored_history
            .iter()
            .map(|q| vec![q.queue.clone(), q.rows.to_string(), q.reason.to_string()])
            .collect();
        page.table(&["queue", "rows", "why"], &rows);
    }
    page.note("Written by weir plan.");
    page.render()
}

fn ratio(r: Option<f64>) -> String {
    r.map(|v| format!("{v:.3}")).unwrap_or_else(|| "–".into())
}

fn ratios(r: &Ratios) -> [String; 3] {
    [ratio(r.instances), ratio(r.cpu), ratio(r.memory)]
}
