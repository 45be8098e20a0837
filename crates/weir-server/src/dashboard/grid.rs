//! The grid page (`/grid`): workflows down, logical dates across, one cell per (workflow,
//! logical date) holding the state of its latest run and where it stands against its SLO,
//! linked to the run — the view Airflow calls its grid. Reads the runs the visitor may see.

use std::collections::{BTreeMap, BTreeSet};

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use weir_store::{RunFilter, RunRow};

use super::pages::{encode, signed_in, try_page};
use super::views::span;
use super::{api_error, html, visitor, Nav};
use crate::error::ApiError;
use crate::state::AppState;
use crate::time::now_ms;

/// Most runs the page reads (newest first); older ones fall off the left of the grid.
const MAX_RUNS: u32 = 2000;
/// Logical dates shown by default (the latest).
const DEFAULT_DATES: usize = 14;

#[derive(Deserialize, Default)]
pub struct GridQuery {
    project: Option<String>,
    workflow: Option<String>,
    dates: Option<usize>,
}

/// One cell: the latest run of a workflow for a logical date.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub run: i64,
    pub state: String,
    /// `met`, `missed`, `at-risk`, `on-time` (not ended, more than a quarter left) or `none`.
    pub slo: &'static str,
    /// Runs of this (workflow, date) in all (retries and reruns).
    pub runs: usize,
    /// The cell's tooltip: run, state, time taken, SLO.
    pub title: String,
}

pub struct GridRow {
    pub workflow: String,
    pub tier: u8,
    /// One per column; `None`: no run for that date.
    pub cells: Vec<Option<Cell>>,
}

/// Where a run stands against its SLO (`slo_ms`) at `now`.
pub fn slo_standing(r: &RunRow, slo_ms: Option<i64>, now: i64) -> &'static str {
    let Some(slo) = slo_ms else { return "none" };
    let deadline = r.submitted_ms + slo;
    match (r.state.as_str(), r.finished_ms) {
        ("succeeded", Some(f)) if f <= deadline => "met",
        ("succeeded", _) | ("failed", _) => "missed",
        ("killed", _) => "none",
        _ if now > deadline => "missed",
        _ if deadline - now < slo / 4 => "at-risk",
        _ => "on-time",
    }
}

/// The grid of `runs` (any order): the latest `dates` logical dates (in text order, so ISO
/// dates read left to right) and every workflow with a run on one of them, by name.
pub fn grid(runs: &[(RunRow, Option<i64>)], dates: usize, now: i64) -> (Vec<String>, Vec<GridRow>) {
    let all: BTreeSet<&str> = runs.iter().map(|(r, _)| r.logical_date.as_str()).collect();
    let columns: Vec<String> = all.iter().rev().take(dates).rev().map(|d| d.to_string()).collect();
    let col: BTreeMap<&str, usize> = columns.iter().enumerate().map(|(i, d)| (d.as_str(), i)).collect();
    // (workflow) → (tier of its latest run, per column: (latest run, its SLO), runs).
    type Line<'a> = (i64, u8, Vec<Option<(&'a RunRow, Option<i64>, usize)>>);
    let mut lines: BTreeMap<&str, Line> = BTreeMap::new();
    for (r, slo) in runs {
        let Some(&c) = col.get(r.logical_date.as_str()) else { continue };
        let line =
            lines.entry(r.workflow.as_str()).or_insert_with(|| (r.id, r.tier, vec![None; columns.len()]));
        if r.id > line.0 {
            (line.0, line.1) = (r.id, r.tier);
        }
        let cell = &mut line.2[c];
        match cell {
            Some((latest, s, n)) => {
                *n += 1;
                if r.id > latest.id {
                    (*latest, *s) = (r, *slo);
                }
            }
            None => *cell = Some((r, *slo, 1)),
        }
    }
    let rows = lines
        .into_iter()
        .map(|(workflow, (_, tier, cells))| GridRow {
            workflow: workflow.to_string(),
            tier,
            cells: cells
                .into_iter()
                .map(|c| {
                    c.map(|(r, slo_ms, n)| {
                        let slo = slo_standing(r, slo_ms, now);
                        let took = match r.finished_ms {
                            Some(f) => format!("took {}", span(f - r.submitted_ms)),
                            None => format!("{} so far", span(now - r.submitted_ms)),
                        };
                        let slo_text = match slo_ms {
                            Some(ms) => format!("SLO {} {slo}", span(ms)),
                            None => "no SLO".to_string(),
                        };
                        let more = if n > 1 { format!(" · {n} runs for this date") } else { String::new() };
                        Cell {
                            run: r.id,
                            state: r.state.clone(),
                            slo,
                            runs: n,
                            title: format!(
                                "{} {} · run {} {} · {took} · {slo_text}{more}",
                                r.workflow, r.logical_date, r.id, r.state
                            ),
                        }
                    })
                })
                .collect(),
        })
        .collect();
    (columns, rows)
}

#[derive(Template)]
#[template(path = "grid.html")]
struct GridPage {
    nav: Nav,
    project: String,
    workflow: String,
    dates: usize,
    columns: Vec<String>,
    rows: Vec<GridRow>,
    truncated: bool,
    older: String,
}

/// Only the SLO of a stored spec (the rest is not read).
#[derive(Deserialize)]
struct SloOnly {
    slo: Option<weir_model::Duration>,
}

pub async fn grid_page(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<GridQuery>,
) -> Response {
    let v = signed_in!(s, headers);
    let now = now_ms();
    let nonempty = |o: Option<String>| o.filter(|x| !x.trim().is_empty());
    let filter = RunFilter {
        project: nonempty(q.project.clone()),
        projects_in: v.principal.readable(),
        workflow: nonempty(q.workflow.clone()),
        state: None,
        since_ms: None,
        before: None,
        limit: MAX_RUNS,
    };
    let rows = try_page!(s.store.list_runs(&filter).await.map_err(ApiError::from));
    let truncated = rows.len() == MAX_RUNS as usize;
    let runs: Vec<(RunRow, Option<i64>)> = rows
        .into_iter()
        .map(|r| {
            let slo = serde_json::from_str::<SloOnly>(&r.spec)
                .ok()
                .and_then(|s| s.slo)
                .map(|d| d.as_millis().min(i64::MAX as u64) as i64);
            (r, slo)
        })
        .collect();
    let dates = q.dates.unwrap_or(DEFAULT_DATES).clamp(1, 60);
    let (columns, rows) = grid(&runs, dates, now);
    let older = if dates < 60 {
        let mut url = format!("/grid?dates={}", (dates * 2).min(60));
        for (k, val) in [("project", &filter.project), ("workflow", &filter.workflow)] {
            if let Some(val) = val {
                url.push_str(&format!("&{k}={}", encode(val)));
            }
        }
        url
    } else {
        String::new()
    };
    html(&GridPage {
        nav: Nav::new(&v, "Grid", "/grid", 5),
        project: q.project.unwrap_or_default(),
        workflow: q.workflow.unwrap_or_default(),
        dates,
        columns,
        rows,
        truncated,
        older,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, wf: &str, date: &str, state: &str, finished: Option<i64>) -> RunRow {
        RunRow {
            route: None,
            id,
            workflow: wf.into(),
            project: "p".into(),
            tier: 1,
            logical_date: date.into(),
            state: state.into(),
            cluster: "default".into(),
            queue: "root.p.tier1".into(),
            spec: String::new(),
            params: String::new(),
            submitted_by: "t".into(),
            user: None,
            submitted_ms: 0,
            started_ms: None,
            finished_ms: finished,
            kill_requested: false,
            reason: None,
            dry_run: false,
        }
    }

    #[test]
    fn the_latest_run_of_each_workflow_and_date_fills_its_cell() {
        let slo = Some(100_000);
        let runs = vec![
            (run(1, "report", "2026-11-01", "failed", Some(5_000)), slo),
            // A retry of the same date: the cell shows it, and counts both.
            (run(4, "report", "2026-11-01", "succeeded", Some(50_000)), slo),
            (run(2, "report", "2026-11-02", "succeeded", Some(150_000)), slo),
            (run(3, "backfill", "2026-11-02", "running", None), None),
            (run(5, "report", "2026-11-03", "waiting", None), slo),
            // Outside the last 3 dates.
            (run(6, "old", "2026-10-30", "succeeded", Some(1)), None),
        ];
        let (columns, rows) = grid(&runs, 3, 80_000);
        assert_eq!(columns, ["2026-11-01", "2026-11-02", "2026-11-03"]);
        type Brief<'a> = Option<(i64, String, &'a str, usize)>;
        let brief: Vec<(String, Vec<Brief>)> = rows
            .iter()
            .map(|r| {
                let cells =
                    r.cells.iter().map(|c| c.as_ref().map(|c| (c.run, c.state.clone(), c.slo, c.runs)));
                (r.workflow.clone(), cells.collect())
            })
            .collect();
        assert_eq!(
            brief,
            [
                ("backfill".to_string(), vec![None, Some((3, "running".into(), "none", 1)), None]),
                (
                    "report".to_string(),
                    vec![
                        Some((4, "succeeded".into(), "met", 2)),
                        Some((2, "succeeded".into(), "missed", 1)),
                        Some((5, "waiting".into(), "at-risk", 1)),
                    ]
                ),
            ]
        );
        assert_eq!(
            rows[1].cells[0].as_ref().map(|c| c.title.as_str()),
            Some("report 2026-11-01 · run 4 succeeded · took 50s · SLO 1m 40s met · 2 runs for this date")
        );
    }
}
