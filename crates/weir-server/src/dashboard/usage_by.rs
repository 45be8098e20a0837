//! The usage-over-time page (`/usage/by`): core-hours per project and per user in time
//! buckets (hours for windows up to two days, days beyond), for the projects the visitor may
//! read.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use weir_report::{LineChart, Series};

use super::pages::{signed_in, try_page, Choice};
use super::reports::{choices, window, WindowQuery};
use super::{api_error, html, visitor, Nav};
use crate::error::ApiError;
use crate::state::AppState;
use crate::submit::project_of_queue;
use crate::time::{format_utc, now_ms};
use crate::usage_by::{bucket_ms, bucket_starts, by_project, by_user, UsageSeries};

/// Most attempts the page counts (the oldest runs' first).
const MAX_ATTEMPTS: u32 = 200_000;
/// Series drawn on a chart (the largest); the table lists all.
const CHARTED: usize = 8;

pub struct Line {
    name: String,
    cells: Vec<String>,
    total: String,
}

pub struct Table {
    /// `project` or `user`.
    kind: &'static str,
    lines: Vec<Line>,
    chart: String,
}

#[derive(Template)]
#[template(path = "usage_by.html")]
struct UsageByPage {
    nav: Nav,
    window: String,
    windows: Vec<Choice>,
    bucket: &'static str,
    columns: Vec<String>,
    tables: Vec<Table>,
    partial: String,
}

fn table(kind: &'static str, series: &[UsageSeries], starts: &[i64], bucket: i64, unit: &str) -> Table {
    let chart = LineChart {
        title: format!("core-hours per {unit}, by {kind} (the {CHARTED} largest)"),
        x_label: format!("{unit}s, oldest left"),
        y_label: "core-hours".into(),
        series: series
            .iter()
            .take(CHARTED)
            .map(|s| Series {
                name: s.name.clone(),
                points: starts
                    .iter()
                    .zip(&s.core_hours)
                    .map(|(t, v)| (((t - starts[0]) / bucket) as f64, *v))
                    .collect(),
            })
            .collect(),
        y_max: None,
    }
    .render();
    Table {
        kind,
        lines: series
            .iter()
            .map(|s| Line {
                name: s.name.clone(),
                cells: s.core_hours.iter().map(|v| hours(*v)).collect(),
                total: hours(s.total),
            })
            .collect(),
        chart,
    }
}

/// Core-hours with the digits that matter: `0`, `0.0044`, `0.31`, `12.5`.
fn hours(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

pub async fn usage_by(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<WindowQuery>,
) -> Response {
    let v = signed_in!(s, headers);
    let (label, len) = try_page!(window(&q, "1d"));
    let now = now_ms();
    let (since, until) = (now - len, now);
    let bucket = bucket_ms(len);
    let starts = bucket_starts(since, until, bucket);
    let visible = |project: &str| v.reads_all() || v.reads(project);

    // Per project: every cluster's recorded queue usage.
    let mut rows = Vec::new();
    for cluster in s.registry.cluster_names() {
        rows.extend(try_page!(s.store.usage(&cluster, since, until).await.map_err(ApiError::from)));
    }
    rows.retain(|r| visible(&project_of_queue(&r.queue)));
    let projects = by_project(&rows, project_of_queue, &starts, bucket, (since, until));

    // Per user: attempts of the runs submitted in the window (and the day before, for runs
    // still holding cores when it opened), each at its stage's cores.
    let mut spans = try_page!(s
        .store
        .attempt_spans(since - 86_400_000, until, MAX_ATTEMPTS)
        .await
        .map_err(ApiError::from));
    let partial = if spans.len() == MAX_ATTEMPTS as usize {
        format!("Only the first {MAX_ATTEMPTS} task attempts of the window are counted per user.")
    } else {
        String::new()
    };
    spans.retain(|a| visible(&a.project));
    let mut cores: BTreeMap<(i64, u32, u32), f64> = BTreeMap::new();
    let mut runs: Vec<i64> = spans.iter().map(|a| a.run).collect();
    runs.dedup();
    for run in runs {
        let Some(r) = try_page!(s.store.run(run).await.map_err(ApiError::from)) else { continue };
        let Ok(spec) = serde_json::from_str::<weir_model::WorkflowSpec>(&r.spec) else { continue };
        for (j, job) in spec.jobs.iter().enumerate() {
            for (st, stage) in job.stages.iter().enumerate() {
                cores.insert((run, j as u32, st as u32), stage.resources.or(0).cpu as f64 / 1000.0);
            }
        }
    }
    let users =
        by_user(&spans, |r, j, st| cores.get(&(r, j, st)).copied(), &starts, bucket, (since, until), now);

    let (unit, fmt): (&'static str, fn(&str) -> String) = if bucket < 86_400_000 {
        ("hour", |t| format!("{}h", &t[11..13]))
    } else {
        ("day", |t| t[5..10].to_string())
    };
    let columns = starts.iter().map(|&t| fmt(&format_utc(t))).collect();
    html(&UsageByPage {
        nav: Nav::new(&v, "Usage by project and user", "/usage", 0),
        windows: choices(&label),
        window: label,
        bucket: unit,
        columns,
        tables: vec![
            table("project", &projects, &starts, bucket, unit),
            table("user", &users, &starts, bucket, unit),
        ],
        partial,
    })
}
