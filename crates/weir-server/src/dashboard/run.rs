//! The run page (its DAG, timeline against the SLO deadline, tasks and their attempts) and
//! the task log page.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use weir_api::{Role, RunState};

use super::pages::{encode, signed_in, try_page};
use super::views::{self, span, time, time_opt};
use super::{api_error, html, visitor, Nav};
use crate::error::ApiError;
use crate::state::{AppState, Peer};
use crate::time::now_ms;

pub struct TaskLine {
    name: String,
    state: String,
    attempts: u32,
    node: String,
    started: String,
    took: String,
    exit: String,
    /// For a task warned of preemption: when its container will be taken, and why.
    warning: String,
}

/// One waiting spell in the run page's table.
pub struct WaitLine {
    job: String,
    from: String,
    took: String,
    reason: String,
    code: String,
    detail: String,
}

pub struct Explained {
    job: String,
    state: String,
    text: String,
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    nav: Nav,
    id: i64,
    workflow: String,
    state: String,
    logical_date: String,
    project: String,
    tier: u8,
    cluster: String,
    queue: String,
    /// "spill (spilled) by workflow:etl" and the candidates' figures; empty for other routes.
    route: String,
    route_detail: String,
    submitted: String,
    started: String,
    finished: String,
    runtime: String,
    slo: String,
    reason: String,
    dag: String,
    timeline: String,
    /// "waited 13s of its 18s runtime, most on root.analytics at max_running_apps 3".
    waited: String,
    waits: Vec<WaitLine>,
    /// The SLO controller's allocations over time (`guarantee: jockey`): a chart and a table.
    guarantee_chart: String,
    guarantee: Vec<crate::jockey::DecisionLine>,
    explanations: Vec<Explained>,
    tasks: Vec<TaskLine>,
    /// "tasks 1–500 of 100,000" when the table is one page of several.
    tasks_shown: String,
    /// The next page's link, if there is one.
    tasks_next: String,
    /// Whether the visitor may kill or retry the run (submitter on its project, as the API asks).
    may_act: bool,
    /// Whether the run has ended (retry) or not (kill).
    ended: bool,
}

/// Tasks per page of the run page's table.
const TABLE_PAGE: u32 = 500;

/// Above this many tasks the page reads tasks stage by stage (the first squares of each) and a
/// page of the table, never all of them.
const LOAD_ALL: u64 = 5_000;

#[derive(Deserialize, Default)]
pub struct RunPageQuery {
    tasks_after: Option<String>,
}

/// The SLO line of a run: its deadline and whether it was, or still can be, met.
fn slo_line(submitted: i64, finished: Option<i64>, state: &str, slo_ms: Option<i64>, now: i64) -> String {
    let Some(slo) = slo_ms else { return "none".into() };
    let deadline = submitted + slo;
    let head = format!("{} (deadline {})", span(slo), time(deadline));
    match (state, finished) {
        ("succeeded", Some(f)) if f <= deadline => format!("{head}: met, {} to spare", span(deadline - f)),
        ("succeeded", Some(f)) => format!("{head}: missed by {}", span(f - deadline)),
        ("failed", _) => format!("{head}: missed (the run failed)"),
        ("killed", _) => format!("{head}: no outcome (killed)"),
        _ if now > deadline => format!("{head}: missed, overdue by {}", span(now - deadline)),
        _ => format!("{head}: {} left", span(deadline - now)),
    }
}

/// How long the run's jobs waited in all, and on what most: "jobs waited 13s in all (of 18s
/// since submission), most on root.analytics at max_running_apps 3 (13s)".
fn waited_line(waits: &[weir_store::WaitRow], submitted: i64, end: i64) -> String {
    if waits.is_empty() {
        return String::new();
    }
    let now = end;
    let mut by: Vec<(String, i64)> = Vec::new();
    for w in waits {
        let key = crate::words::reason(&w.reason, &w.queue, &w.limit);
        let took = w.to_ms.unwrap_or(now) - w.from_ms;
        match by.iter_mut().find(|(k, _)| *k == key) {
            Some(e) => e.1 += took,
            None => by.push((key, took)),
        }
    }
    by.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let total: i64 = by.iter().map(|e| e.1).sum();
    format!(
        "jobs waited {} in all (of {} since submission), most on {} ({})",
        span(total),
        span(end - submitted),
        by[0].0,
        span(by[0].1)
    )
}

pub async fn run(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(q): Query<RunPageQuery>,
) -> Response {
    let v = signed_in!(s, headers);
    let now = now_ms();
    let missing = || api_error(ApiError::not_found(format!("no run {id}")));
    let Some(r) = try_page!(s.store.run(id).await.map_err(ApiError::from)) else {
        return missing();
    };
    if !v.reads(&r.project) {
        return missing();
    }
    let jobs = try_page!(s.store.jobs(id).await.map_err(ApiError::from));
    let counts = try_page!(s.store.task_counts(id).await.map_err(ApiError::from));
    let total: u64 = counts.iter().map(|c| c.count).sum();
    let after = q.tasks_after.as_deref().and_then(task_cursor);
    // The DAG's squares: every task of a small run; of a large one the first squares of each
    // stage (the picture shows at most MAX_SQUARES per stage anyway).
    let (dag_tasks, table) = if total <= LOAD_ALL && after.is_none() {
        let all = try_page!(s.store.tasks(id).await.map_err(ApiError::from));
        let table = all.iter().take(TABLE_PAGE as usize).cloned().collect::<Vec<_>>();
        (all, table)
    } else {
        let mut firsts = Vec::new();
        let mut stages: Vec<(u32, u32)> = counts.iter().map(|c| (c.job_idx, c.stage_idx)).collect();
        stages.dedup();
        for (j, st) in stages {
            let start = stage_start(j, st);
            let page = try_page!(s
                .store
                .tasks_page(id, start, super::dag::MAX_SQUARES as u32)
                .await
                .map_err(ApiError::from));
            firsts.extend(page.into_iter().filter(|t| t.job_idx == j && t.stage_idx == st));
        }
        let table = try_page!(s.store.tasks_page(id, after, TABLE_PAGE).await.map_err(ApiError::from));
        (firsts, table)
    };
    let tasks_next = match table.last() {
        Some(t) if table.len() == TABLE_PAGE as usize && total > TABLE_PAGE as u64 => {
            format!("/runs/{id}?tasks_after={}.{}.{}", t.job_idx, t.stage_idx, t.task_idx)
        }
        _ => String::new(),
    };
    let tasks_shown = if total > table.len() as u64 {
        format!("{} of {total} tasks on this page", table.len())
    } else {
        String::new()
    };
    let tasks = table;
    let spec: Option<weir_model::WorkflowSpec> = serde_json::from_str(&r.spec).ok();
    let slo_ms = spec.as_ref().and_then(|w| w.slo).map(|d| d.as_millis() as i64);
    let dag =
        spec.as_ref().map(|w| super::dag::dag_svg(id, w, &jobs, &dag_tasks, &counts)).unwrap_or_default();
    let waits = try_page!(s.store.waits(id).await.map_err(ApiError::from));
    let timeline =
        super::dag::timeline_svg(r.submitted_ms, slo_ms.map(|d| r.submitted_ms + d), now, &jobs, &waits);
    let waited = waited_line(&waits, r.submitted_ms, r.finished_ms.unwrap_or(now));
    let decisions = try_page!(s.store.slo_decisions(id).await.map_err(ApiError::from));
    let guarantee_chart = crate::jockey::decisions_svg(&decisions, r.finished_ms.map(|f| f - r.submitted_ms));
    let guarantee = decisions.iter().map(crate::jockey::decision_line).collect();
    let wait_lines = waits
        .iter()
        .map(|w| WaitLine {
            job: jobs
                .iter()
                .find(|j| j.idx == w.job_idx)
                .map_or_else(|| w.job_idx.to_string(), |j| j.name.clone()),
            from: time(w.from_ms),
            took: match w.to_ms {
                Some(t) => span(t - w.from_ms),
                None => format!("{} so far", span(now - w.from_ms)),
            },
            reason: crate::words::reason(&w.reason, &w.queue, &w.limit),
            code: w.reason.clone(),
            detail: w.detail.clone(),
        })
        .collect();
    let terminal = RunState::parse(&r.state).is_some_and(|st| st.is_terminal());
    let explanations = if terminal {
        Vec::new()
    } else {
        let snap = try_page!(crate::state::snapshot(&s, &r.cluster).await);
        let texts = snap.map(|sn| (*sn.explanations.value).clone()).unwrap_or_default();
        jobs.iter()
            .filter_map(|j| {
                texts.get(&format!("{id}/{}", j.idx)).map(|t| Explained {
                    job: j.name.clone(),
                    state: j.state.clone(),
                    text: t.clone(),
                })
            })
            .collect()
    };
    let job_names: BTreeMap<u32, &str> = jobs.iter().map(|j| (j.idx, j.name.as_str())).collect();
    // A task warned of preemption: its warned attempt's kill time and the engine's reason.
    let mut warnings = BTreeMap::new();
    for t in tasks.iter().filter(|t| t.state == "preempting") {
        let attempts =
            try_page!(s.store.attempts(id, t.job_idx, t.stage_idx, t.task_idx).await.map_err(ApiError::from));
        if let Some(a) = attempts.iter().rev().find(|a| a.state == "preempting") {
            if let (Some(reason), Some(kill_at)) = (&a.reason, a.kill_at_ms) {
                let when = if kill_at > now { format!("in {}", span(kill_at - now)) } else { "now".into() };
                warnings.insert(
                    (t.job_idx, t.stage_idx, t.task_idx),
                    format!("preempted at {} ({when}): {reason}", time(kill_at)),
                );
            }
        }
    }
    let task_lines = tasks
        .iter()
        .map(|t| TaskLine {
            name: format!("{}.{}.{}", job_names.get(&t.job_idx).copied().unwrap_or("?"), t.stage, t.task_idx),
            state: t.state.clone(),
            attempts: t.attempts,
            node: t.node.clone().unwrap_or_default(),
            started: time_opt(t.started_ms),
            took: match (t.started_ms, t.finished_ms) {
                (Some(a), Some(b)) => span(b - a),
                (Some(a), None) => format!("{} so far", span(now - a)),
                _ => String::new(),
            },
            exit: t.exit_code.map(|c| c.to_string()).unwrap_or_default(),
            warning: warnings.remove(&(t.job_idx, t.stage_idx, t.task_idx)).unwrap_or_default(),
        })
        .collect();
    let runtime = match (r.finished_ms, terminal) {
        (Some(f), _) => span(f - r.submitted_ms),
        (None, false) => format!("{} so far", span(now - r.submitted_ms)),
        _ => String::new(),
    };
    let refresh = if terminal { 0 } else { 2 };
    html(&RunPage {
        nav: Nav::new(&v, format!("Run {id}"), "/runs", refresh),
        may_act: v.principal.can(&r.project, Role::Submitter),
        ended: terminal,
        id,
        slo: slo_line(r.submitted_ms, r.finished_ms, &r.state, slo_ms, now),
        workflow: r.workflow,
        state: r.state,
        logical_date: r.logical_date,
        project: r.project,
        tier: r.tier,
        cluster: r.cluster,
        queue: r.queue,
        route: r
            .route
            .as_ref()
            .map(|d| format!("{} ({}) by {}", d.policy, d.reason, d.key))
            .unwrap_or_default(),
        route_detail: r.route.as_ref().map(|d| d.detail.clone()).unwrap_or_default(),
        submitted: time(r.submitted_ms),
        started: time_opt(r.started_ms),
        finished: time_opt(r.finished_ms),
        runtime,
        reason: r.reason.unwrap_or_default(),
        dag,
        timeline,
        waited,
        waits: wait_lines,
        guarantee_chart,
        guarantee,
        explanations,
        tasks: task_lines,
        tasks_shown,
        tasks_next,
    })
}

#[derive(Deserialize)]
pub struct ActionForm {
    csrf: String,
}

/// The run a kill or retry form names, if the visitor may act on it: a run it cannot read is
/// "no run", one it can only read is refused as the API refuses it (submitter needed).
async fn actionable(s: &AppState, v: &super::Visitor, id: i64) -> Result<weir_store::RunRow, Response> {
    let missing = || api_error(ApiError::not_found(format!("no run {id}")));
    let r = match s.store.run(id).await {
        Ok(Some(r)) if v.reads(&r.project) => r,
        Ok(_) => return Err(missing()),
        Err(e) => return Err(api_error(e.into())),
    };
    if let Err(e) = v.principal.require(&r.project, Role::Submitter) {
        return Err(api_error(e));
    }
    Ok(r)
}

/// `POST /runs/{id}/kill` (the run page's Kill button): the API's kill, then back to the run.
pub async fn kill(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Form(f): Form<ActionForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, false) {
        return r;
    }
    let row = match actionable(&s, &v, id).await {
        Ok(r) => r,
        Err(page) => return page,
    };
    match crate::api::runs::kill(&s, &v.principal, &peer, row).await {
        Ok(_) => Redirect::to(&format!("/runs/{id}")).into_response(),
        Err(e) => api_error(e),
    }
}

/// `POST /runs/{id}/retry` (the run page's Retry button): the API's retry, then to the new run.
pub async fn retry(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Form(f): Form<ActionForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, false) {
        return r;
    }
    let row = match actionable(&s, &v, id).await {
        Ok(r) => r,
        Err(page) => return page,
    };
    match crate::api::runs::retry(&s, &v.principal, &peer, row).await {
        Ok(created) => Redirect::to(&format!("/runs/{}", created.id)).into_response(),
        Err(e) => api_error(e),
    }
}

/// The exclusive cursor just before the first task of stage `st` of job `j`.
fn stage_start(j: u32, st: u32) -> Option<(u32, u32, u32)> {
    match (j, st) {
        (0, 0) => None,
        (j, 0) => Some((j - 1, u32::MAX, u32::MAX)),
        (j, st) => Some((j, st - 1, u32::MAX)),
    }
}

fn task_cursor(c: &str) -> Option<(u32, u32, u32)> {
    let mut it = c.split('.').map(|p| p.parse::<u32>().ok());
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(Some(j)), Some(Some(s)), Some(Some(t)), None) => Some((j, s, t)),
        _ => None,
    }
}

#[derive(Deserialize, Default)]
pub struct LogQuery {
    attempt: Option<u32>,
    stream: Option<String>,
}

pub struct AttemptLink {
    number: u32,
    state: String,
    href: String,
    current: bool,
}

#[derive(Template)]
#[template(path = "logs.html")]
struct LogsPage {
    nav: Nav,
    id: i64,
    task: String,
    stream: String,
    attempts: Vec<AttemptLink>,
    other_stream: String,
    other_stream_name: String,
    raw: String,
    src: String,
    live: bool,
    /// What of the output the page holds, in words.
    shown: String,
    initial: String,
}

pub async fn logs(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((id, task)): Path<(i64, String)>,
    Query(q): Query<LogQuery>,
) -> Response {
    let v = signed_in!(s, headers);
    let Some(r) = try_page!(s.store.run(id).await.map_err(ApiError::from)) else {
        return api_error(ApiError::not_found(format!("no run {id}")));
    };
    try_page!(v.principal.require(&r.project, Role::Viewer));
    let stream = match q.stream.as_deref() {
        Some("stderr") => "stderr",
        _ => "stdout",
    };
    let parts: Vec<&str> = task.split('.').collect();
    let [job, stage, index] = parts.as_slice() else {
        return api_error(ApiError::bad_request(format!("`{task}` is not a task: write job.stage.index")));
    };
    let Ok(index) = index.parse::<u32>() else {
        return api_error(ApiError::bad_request(format!("`{index}` is not a task index")));
    };
    let jobs = try_page!(s.store.jobs(id).await.map_err(ApiError::from));
    let tasks = try_page!(s.store.tasks(id).await.map_err(ApiError::from));
    let found = jobs
        .iter()
        .find(|j| j.name == *job)
        .and_then(|j| tasks.iter().find(|t| t.job_idx == j.idx && t.stage == *stage && t.task_idx == index));
    let Some(t) = found else {
        return api_error(ApiError::not_found(format!("run {id} has no task {task}")));
    };
    let attempts =
        try_page!(s.store.attempts(id, t.job_idx, t.stage_idx, t.task_idx).await.map_err(ApiError::from));
    let Some(current) = q.attempt.and_then(|n| attempts.iter().find(|a| a.attempt == n)).or(attempts.last())
    else {
        return api_error(ApiError::not_found(format!(
            "task {task} of run {id} has not started an attempt yet"
        )));
    };
    let base = format!("/runs/{id}/logs/{}", encode(&task));
    let links = attempts
        .iter()
        .map(|a| AttemptLink {
            number: a.attempt,
            state: a.state.clone(),
            href: format!("{base}?attempt={}&stream={stream}", a.attempt),
            current: a.attempt == current.attempt,
        })
        .collect();
    let other = if stream == "stdout" { "stderr" } else { "stdout" };
    let api =
        format!("/v1/runs/{id}/tasks/{}/logs?attempt={}&stream={stream}", encode(&task), current.attempt);
    let live = current.ended_ms.is_none();
    let path = if stream == "stdout" { &current.stdout } else { &current.stderr };
    // The last PAGE_TAIL bytes, read from the end (a log may be gigabytes).
    let (initial, size) = tail_of(path, PAGE_TAIL).await;
    html(&LogsPage {
        nav: Nav::new(&v, format!("Run {id} · {task}"), "/runs", 0),
        id,
        task: task.clone(),
        stream: stream.to_string(),
        attempts: links,
        other_stream: format!("{base}?attempt={}&stream={other}", current.attempt),
        other_stream_name: other.to_string(),
        raw: api.clone(),
        src: format!("{api}&tail={PAGE_TAIL}&follow=true"),
        live,
        shown: if size > PAGE_TAIL {
            format!(
                "the last {} of {} (the raw link has all of it)",
                views::bytes(PAGE_TAIL),
                views::bytes(size)
            )
        } else {
            "all of its output".to_string()
        },
        initial,
    })
}

/// How much of a log the page shows (and follows from).
const PAGE_TAIL: u64 = 256 * 1024;

/// The last `n` bytes of a file (as text) and the file's size.
async fn tail_of(path: &str, n: u64) -> (String, u64) {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let Ok(mut f) = tokio::fs::File::open(path).await else { return (String::new(), 0) };
    let size = f.metadata().await.map(|m| m.len()).unwrap_or(0);
    let start = size.saturating_sub(n);
    let mut buf = Vec::new();
    if f.seek(std::io::SeekFrom::Start(start)).await.is_ok() {
        let _ = f.take(n).read_to_end(&mut buf).await;
    }
    (String::from_utf8_lossy(&buf).into_owned(), size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slo_line_says_where_the_run_stands() {
        assert_eq!(
            slo_line(0, Some(50_000), "succeeded", Some(60_000), 99_000),
            "1m 00s (deadline 1970-01-01 00:01:00): met, 10s to spare"
        );
        assert!(slo_line(0, Some(70_000), "succeeded", Some(60_000), 99_000).ends_with("missed by 10s"));
        assert!(slo_line(0, None, "running", Some(60_000), 30_000).ends_with("30s left"));
        assert!(slo_line(0, None, "running", Some(60_000), 90_000).ends_with("overdue by 30s"));
        assert_eq!(slo_line(0, None, "running", None, 90_000), "none");
    }
}
