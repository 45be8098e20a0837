//! The SLO report and the usage/capacity report pages.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use weir_report::{BarChart, Bars};

use super::pages::{signed_in, try_page, Choice};
use super::views::{percent, span};
use super::{api_error, html, visitor, Nav};
use crate::error::ApiError;
use crate::state::AppState;
use crate::time::now_ms;

#[derive(Deserialize, Default)]
pub struct WindowQuery {
    pub(super) window: Option<String>,
}

pub(super) fn window(q: &WindowQuery, default: &'static str) -> Result<(String, i64), ApiError> {
    let w = q.window.clone().filter(|w| !w.trim().is_empty()).unwrap_or_else(|| default.to_string());
    let d: weir_model::Duration =
        w.parse().map_err(|e| ApiError::bad_request(format!("{e}")).field("window"))?;
    Ok((w, d.as_millis().min(400 * 86_400_000) as i64))
}

pub(super) fn choices(current: &str) -> Vec<Choice> {
    ["1h", "1d", "7d", "30d"].iter().map(|w| Choice { value: w.to_string(), chosen: *w == current }).collect()
}

pub struct TierLine {
    tier: u8,
    runs: u64,
    with_slo: u64,
    met: u64,
    ratio: String,
    workflows: u64,
    successful: u64,
    p50: String,
    p99: String,
}

pub struct WorkflowLine {
    name: String,
    tier: u8,
    runs: u64,
    with_slo: u64,
    met: u64,
    ratio: String,
    successful: String,
    p50: String,
    p99: String,
}

/// One reason behind missed and at-risk deadlines.
pub struct CauseLine {
    sentence: String,
    tier: u8,
    reason: String,
    missed: u64,
    at_risk: u64,
    workflows: String,
}

/// A run at risk now.
pub struct RiskLine {
    run: i64,
    workflow: String,
    tier: u8,
    state: String,
    deadline: String,
    late: String,
    reason: String,
}

/// One tier's met/missed runs per day.
pub struct TrendLine {
    tier: u8,
    cells: Vec<(u64, u64)>,
}

#[derive(Template)]
#[template(path = "slo.html")]
struct SloPage {
    nav: Nav,
    at_risk: Vec<RiskLine>,
    days: Vec<String>,
    trend: Vec<TrendLine>,
    window: String,
    windows: Vec<Choice>,
    chart: String,
    tiers: Vec<TierLine>,
    workflows: Vec<WorkflowLine>,
    causes: Vec<CauseLine>,
}

fn ms(v: Option<u64>) -> String {
    v.map(|x| span(x as i64)).unwrap_or_else(|| "–".into())
}

pub async fn slo(State(s): State<AppState>, headers: HeaderMap, Query(q): Query<WindowQuery>) -> Response {
    let v = signed_in!(s, headers);
    let (label, len) = try_page!(window(&q, "7d"));
    let windows = choices(&label);
    let now = now_ms();
    let runs = try_page!(crate::loop_api::readable_runs(&s, &v.principal, None, now - len, now).await);
    let r = crate::reports::slo(&runs, now - len, now, now);
    let chart = BarChart {
        title: "SLO success per tier".into(),
        unit: "%".into(),
        series: vec!["runs meeting the SLO".into(), "SLO-successful workflows".into()],
        groups: r
            .tiers
            .iter()
            .map(|t| Bars {
                label: format!("tier {}", t.tier),
                values: vec![
                    t.figures.slo_success_ratio.map(|x| x * 100.0),
                    (t.workflows > 0).then(|| 100.0 * t.slo_successful_workflows as f64 / t.workflows as f64),
                ],
            })
            .collect(),
        max: Some(100.0),
    }
    .render();
    let tiers = r
        .tiers
        .iter()
        .map(|t| TierLine {
            tier: t.tier,
            runs: t.figures.runs,
            with_slo: t.figures.runs_with_slo,
            met: t.figures.slo_met,
            ratio: percent(t.figures.slo_success_ratio),
            workflows: t.workflows,
            successful: t.slo_successful_workflows,
            p50: ms(t.figures.runtime_p50_ms),
            p99: ms(t.figures.runtime_p99_ms),
        })
        .collect();
    let workflows = r
        .workflows
        .iter()
        .map(|w| WorkflowLine {
            name: w.workflow.clone(),
            tier: w.tier,
            runs: w.figures.runs,
            with_slo: w.figures.runs_with_slo,
            met: w.figures.slo_met,
            ratio: percent(w.figures.slo_success_ratio),
            successful: match w.slo_successful {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "–".into(),
            },
            p50: ms(w.figures.runtime_p50_ms),
            p99: ms(w.figures.runtime_p99_ms),
        })
        .collect();
    let readable: std::collections::BTreeSet<i64> = runs.iter().map(|r| r.id).collect();
    let mut spells = try_page!(s
        .store
        .waits_since(now - len, crate::wait_report::MAX_SPELLS)
        .await
        .map_err(ApiError::from));
    spells.retain(|w| readable.contains(&w.wait.run_id));
    let causes = crate::wait_report::wait_causes(&spells, now)
        .into_iter()
        .take(20)
        .map(|c| CauseLine {
            sentence: c.sentence(),
            tier: c.tier,
            reason: c.reason.clone(),
            missed: c.missed,
            at_risk: c.at_risk,
            workflows: c.workflows.join(", "),
        })
        .collect();
    // At risk now: the runs not ended, with the spell each is waiting in, if any.
    let at_risk = try_page!(crate::loop_api::at_risk_now(&s, &runs, now).await)
        .into_iter()
        .map(|a| RiskLine {
            run: a.run,
            workflow: a.workflow,
            tier: a.tier,
            state: a.state,
            deadline: super::views::time(a.deadline_ms),
            late: a.late_by_ms.map_or("–".into(), |l| format!("{} late", span(l))),
            reason: a.reason,
        })
        .collect();
    // The trend: each day of the window (UTC), by submission.
    let day_starts = crate::loop_api::day_starts(now - len, now);
    let trend = crate::slo_watch::trend(&runs, &day_starts, now)
        .into_iter()
        .map(|(tier, days)| TrendLine { tier, cells: days.into_iter().map(|d| (d.met, d.missed)).collect() })
        .collect();
    let days = day_starts.iter().map(|&d| crate::time::format_utc(d)[5..10].to_string()).collect();
    html(&SloPage {
        nav: Nav::new(&v, "SLO report", "/slo", 30),
        at_risk,
        days,
        trend,
        window: label,
        windows,
        chart,
        tiers,
        workflows,
        causes,
    })
}

pub struct FigureLine {
    name: String,
    tier: String,
    used: String,
    allocated: String,
    ratio: String,
}

pub struct ClusterUsage {
    cluster: String,
    instances: String,
    instance: String,
    verdict: String,
    reason: String,
    tiers: Vec<FigureLine>,
    queues: Vec<FigureLine>,
    chart: String,
    /// Empty when the server recorded the whole window.
    recorded: String,
}

#[derive(Template)]
#[template(path = "usage.html")]
struct UsagePage {
    nav: Nav,
    window: String,
    windows: Vec<Choice>,
    reports: Vec<ClusterUsage>,
}

/// Instance-hours with three significant figures (demo clusters use thousandths).
fn hours(h: f64) -> String {
    if h == 0.0 {
        "0".into()
    } else if h.abs() < 0.01 {
        format!("{h:.5}")
    } else if h.abs() < 10.0 {
        format!("{h:.3}")
    } else {
        format!("{h:.1}")
    }
}

fn line(f: &weir_api::UsageFigures) -> FigureLine {
    FigureLine {
        name: f.name.clone(),
        tier: f.tier.map(|t| t.to_string()).unwrap_or_default(),
        used: hours(f.used_instance_hours),
        allocated: hours(f.allocated_instance_hours),
        ratio: percent(f.usage_capacity),
    }
}

pub async fn usage(State(s): State<AppState>, headers: HeaderMap, Query(q): Query<WindowQuery>) -> Response {
    let v = signed_in!(s, headers);
    let (label, len) = try_page!(window(&q, "1d"));
    let windows = choices(&label);
    let now = now_ms();
    let mut reports = Vec::new();
    for cluster in s.registry.cluster_names() {
        let r = try_page!(crate::loop_api::usage_report_of(&s, &cluster, now - len, now).await);
        let visible = |name: &str| v.reads_all() || v.reads(&crate::submit::project_of_queue(name));
        let queues: Vec<&weir_api::UsageFigures> = r.queues.iter().filter(|q| visible(&q.name)).collect();
        // Bars against 100% (a 0.06% queue is a sliver, not a full bar), or the largest when
        // a queue ran above its share.
        let largest = queues.iter().filter_map(|q| q.usage_capacity).fold(0.0f64, f64::max) * 100.0;
        let chart = BarChart {
            title: "usage/capacity per leaf queue".into(),
            unit: "%".into(),
            series: vec!["usage/capacity".into()],
            groups: queues
                .iter()
                .map(|q| Bars { label: q.name.clone(), values: vec![q.usage_capacity.map(|x| x * 100.0)] })
                .collect(),
            max: Some(largest.max(100.0)),
        }
        .render();
        let mut tiers: Vec<FigureLine> = r.tiers.iter().map(line).collect();
        tiers.push(line(&r.total));
        reports.push(ClusterUsage {
            cluster: r.cluster.clone(),
            instances: format!("{:.1}", r.cluster_instances),
            instance: super::views::resources(&r.instance),
            verdict: r.verdict.clone(),
            reason: r.verdict_reason.clone(),
            tiers: if v.reads_all() { tiers } else { Vec::new() },
            queues: queues.into_iter().map(line).collect(),
            chart,
            recorded: if r.recorded_since_ms > r.since_ms {
                format!(
                    "The server has recorded this cluster for the last {} of the {label} window: the figures count that span.",
                    crate::loop_api::span_words(r.until_ms - r.recorded_since_ms)
                )
            } else {
                String::new()
            },
        });
    }
    html(&UsagePage { nav: Nav::new(&v, "Usage", "/usage", 30), window: label, windows, reports })
}
