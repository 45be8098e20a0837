//! The overview, queues and runs pages (the run and log pages are in `run.rs`).

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use weir_api::{ClusterQueues, RunState};
use weir_report::{LineChart, Series};
use weir_store::{RunFilter, UsageRow};

use super::views::{self, cores, memory, percent, span, time};
use super::{api_error, html, visitor, Nav};
use crate::error::ApiError;
use crate::state::AppState;
use crate::submit::project_of_queue;
use crate::time::now_ms;

macro_rules! try_page {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return api_error(e.into()),
        }
    };
}
pub(crate) use try_page;

macro_rules! signed_in {
    ($s:expr, $h:expr) => {
        match visitor(&$s, &$h).await {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
}
pub(crate) use signed_in;

pub struct ClusterCard {
    name: String,
    nodes: u64,
    apps: String,
    cpu: String,
    memory: String,
    gpu: String,
    as_of: String,
}

pub struct TierCounts {
    tier: String,
    counts: Vec<i64>,
}

pub struct SloLine {
    tier: u8,
    runs: u64,
    met: u64,
    ratio: String,
    workflows: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    nav: Nav,
    clusters: Vec<ClusterCard>,
    chart: String,
    states: Vec<&'static str>,
    by_tier: Vec<TierCounts>,
    slo: Vec<SloLine>,
}

/// How old a snapshot is, for people.
fn as_of(c: &ClusterQueues, now: i64) -> String {
    match c.as_of_ms {
        Some(t) => format!("live as of {} ago", span(now - t)),
        None => "no worker has published this cluster's queues yet".to_string(),
    }
}

/// Cluster utilization over `[since, until)` in buckets, from recorded usage rows: cpu and
/// memory, and gpus when the cluster has any.
fn utilization_chart(
    cluster: &str,
    span_label: &str,
    total: &weir_api::Resources,
    rows: &[UsageRow],
    since: i64,
    until: i64,
) -> String {
    const BUCKETS: i64 = 60;
    let width = ((until - since) / BUCKETS).max(1);
    let mut cpu = vec![0f64; BUCKETS as usize];
    let mut mem = vec![0f64; BUCKETS as usize];
    let mut gpu = vec![0f64; BUCKETS as usize];
    for r in rows {
        let (s, e) = (r.start_ms.max(since), r.end_ms.min(until));
        if s >= e {
            continue;
        }
        let (first, last) = ((s - since) / width, ((e - since - 1) / width).min(BUCKETS - 1));
        for b in first..=last {
            let (bs, be) = (since + b * width, since + (b + 1) * width);
            let overlap = (e.min(be) - s.max(bs)).max(0) as f64;
            cpu[b as usize] += r.cpu as f64 * overlap;
            mem[b as usize] += r.memory as f64 * overlap;
            gpu[b as usize] += r.gpu as f64 * overlap;
        }
    }
    let (unit_ms, unit) =
        if until - since > 3 * 3_600_000 { (3_600_000.0, "hours") } else { (60_000.0, "minutes") };
    let series = |name: &str, v: &[f64], t: u64| Series {
        name: name.to_string(),
        points: v
            .iter()
            .enumerate()
            .map(|(b, x)| {
                let at = ((b as i64 + 1) * width - (until - since)) as f64 / unit_ms;
                (at, if t == 0 { 0.0 } else { 100.0 * x / (t as f64 * width as f64) })
            })
            .collect(),
    };
    let mut all = vec![series("cpu", &cpu, total.cpu), series("memory", &mem, total.memory)];
    let what = if total.gpu > 0 {
        all.push(series("gpu", &gpu, total.gpu));
        "cpu, memory and gpus"
    } else {
        "cpu and memory"
    };
    LineChart {
        title: format!("{cluster}, {span_label}: {what} in use, % of the cluster"),
        x_label: format!("{unit} from now"),
        y_label: "% of the cluster".into(),
        series: all,
        y_max: Some(100.0),
    }
    .render()
}

pub async fn overview(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    let now = now_ms();
    let clusters = try_page!(crate::state::cluster_queues(&s, None).await);
    let mut cards = Vec::new();
    let mut chart = String::new();
    for c in &clusters {
        let nodes = s.registry.cluster(&c.cluster).map_or(0, |l| l.config.node_count());
        let (running, pending) =
            c.queues.first().map_or((0, 0), |root| (root.running_apps, root.pending_apps));
        cards.push(ClusterCard {
            name: c.cluster.clone(),
            nodes,
            apps: format!("{running} jobs running, {pending} waiting for a slot"),
            cpu: format!("{} of {} cores in use", cores(c.used.cpu), cores(c.total.cpu)),
            memory: format!("{} of {} in use", memory(c.used.memory), memory(c.total.memory)),
            gpu: if c.total.gpu > 0 { format!("{} of {}", c.used.gpu, c.total.gpu) } else { String::new() },
            as_of: as_of(c, now),
        });
        let rows = try_page!(s.store.usage(&c.cluster, now - 86_400_000, now).await);
        if !rows.is_empty() {
            chart.push_str(&utilization_chart(
                &c.cluster,
                "last 24 hours",
                &c.total,
                &rows,
                now - 86_400_000,
                now,
            ));
            chart.push_str(&utilization_chart(
                &c.cluster,
                "last hour",
                &c.total,
                &rows,
                now - 3_600_000,
                now,
            ));
        }
    }
    let states: Vec<&'static str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let counts = try_page!(s.store.run_counts(now - 86_400_000).await);
    let mut table: BTreeMap<u8, Vec<i64>> = (1..=3).map(|t| (t, vec![0; states.len()])).collect();
    for c in counts {
        if !v.reads(&c.project) {
            continue;
        }
        if let Some(i) = states.iter().position(|s| *s == c.state) {
            table.entry(c.tier).or_insert_with(|| vec![0; states.len()])[i] += c.runs;
        }
    }
    let by_tier =
        table.into_iter().map(|(t, counts)| TierCounts { tier: format!("tier {t}"), counts }).collect();
    let runs =
        try_page!(crate::loop_api::readable_runs(&s, &v.principal, None, now - 7 * 86_400_000, now).await);
    let report = crate::reports::slo(&runs, now - 7 * 86_400_000, now, now);
    let slo = report
        .tiers
        .iter()
        .map(|t| SloLine {
            tier: t.tier,
            runs: t.figures.runs_with_slo,
            met: t.figures.slo_met,
            ratio: percent(t.figures.slo_success_ratio),
            workflows: format!("{} of {}", t.slo_successful_workflows, t.workflows),
        })
        .collect();
    html(&OverviewPage {
        nav: Nav::new(&v, "Overview", "/", 5),
        clusters: cards,
        chart,
        states,
        by_tier,
        slo,
    })
}

pub struct QueueLine {
    path: String,
    name: String,
    leaf: bool,
    indent: usize,
    tier: String,
    weight: String,
    usage: String,
    bar: String,
    demand: String,
    steady: String,
    instantaneous: String,
    running: u32,
    pending: u32,
    max_running: String,
}

pub struct ClusterQueuesView {
    name: String,
    as_of: String,
    queues: Vec<QueueLine>,
}

pub struct PendingLine {
    run: i64,
    workflow: String,
    job: String,
    queue: String,
    text: String,
}

pub struct PreemptionLine {
    when: String,
    run: i64,
    task: String,
    attempt: u32,
    queue: String,
    for_queue: String,
    reason: String,
}

#[derive(Template)]
#[template(path = "queues.html")]
struct QueuesPage {
    nav: Nav,
    clusters: Vec<ClusterQueuesView>,
    pending: Vec<PendingLine>,
    preemptions: Vec<PreemptionLine>,
}

/// Whether a visitor sees a queue: its project is readable, or it is an ancestor of a queue
/// whose project is.
fn short(r: &weir_api::Resources) -> String {
    format!("{} · {}", cores(r.cpu), memory(r.memory))
}

pub async fn queues(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    let now = now_ms();
    let clusters = try_page!(crate::state::cluster_queues(&s, None).await);
    let mut views = Vec::new();
    for c in &clusters {
        let paths: Vec<String> = c.queues.iter().map(|q| q.path.clone()).collect();
        let queues = c
            .queues
            .iter()
            .filter(|q| crate::state::queue_visible(&v.principal, &q.path, &paths))
            .map(|q| QueueLine {
                path: q.path.clone(),
                name: q.path.rsplit('.').next().unwrap_or(&q.path).to_string(),
                leaf: q.leaf,
                indent: q.path.matches('.').count() * 2,
                tier: q.tier.map(|t| t.to_string()).unwrap_or_default(),
                weight: format!("{}", (q.weight * 1000.0).round() / 1000.0),
                usage: short(&q.usage),
                bar: views::queue_bar(
                    &q.path,
                    &q.usage,
                    &q.demand,
                    &q.steady_fair_share,
                    &q.instantaneous_fair_share,
                    &q.max,
                    &c.total,
                ),
                demand: short(&q.demand),
                steady: short(&q.steady_fair_share),
                instantaneous: short(&q.instantaneous_fair_share),
                running: q.running_apps,
                pending: q.pending_apps,
                max_running: q.max_running_apps.map(|m| m.to_string()).unwrap_or_else(|| "–".into()),
            })
            .collect();
        views.push(ClusterQueuesView { name: c.cluster.clone(), as_of: as_of(c, now), queues });
    }
    let mut pending = Vec::new();
    // This process's actors' explanations from the board (nothing parsed), the store's for
    // clusters driven elsewhere.
    let snapshots = try_page!(crate::state::served_snapshots(&s, None).await);
    for snap in snapshots.into_iter().filter_map(|(_, snap)| snap) {
        for (key, text) in snap.explanations.value.iter().take(200) {
            let Some((run, job)) = key.split_once('/') else { continue };
            let (Ok(run), Ok(job)) = (run.parse::<i64>(), job.parse::<u32>()) else { continue };
            let Some(r) = try_page!(s.store.run(run).await.map_err(ApiError::from)) else { continue };
            if !v.reads(&r.project) {
                continue;
            }
            let jobs = try_page!(s.store.jobs(run).await.map_err(ApiError::from));
            let name = jobs.iter().find(|j| j.idx == job).map_or_else(|| job.to_string(), |j| j.name.clone());
            pending.push(PendingLine {
                run,
                workflow: r.workflow,
                job: name,
                queue: r.queue,
                text: text.clone(),
            });
        }
    }
    let preemptions =
        try_page!(s.store.preemptions(None, now - 3_600_000, 200).await.map_err(ApiError::from))
            .into_iter()
            .filter(|p| v.reads(&project_of_queue(&p.queue)))
            .map(|p| PreemptionLine {
                when: format!("{} ago", span(now - p.at_ms)),
                run: p.run_id,
                task: p.task,
                attempt: p.attempt,
                queue: p.queue,
                for_queue: p.for_queue,
                reason: p.reason,
            })
            .collect();
    html(&QueuesPage { nav: Nav::new(&v, "Queues", "/queues", 2), clusters: views, pending, preemptions })
}

#[derive(Deserialize, Default)]
pub struct RunsQuery {
    project: Option<String>,
    workflow: Option<String>,
    state: Option<String>,
    cursor: Option<i64>,
}

/// An option of a select or a list of links, and whether it is the current one.
pub struct Choice {
    pub value: String,
    pub chosen: bool,
}

pub struct RunLine {
    id: i64,
    workflow: String,
    logical_date: String,
    tier: u8,
    state: String,
    queue: String,
    submitted: String,
    took: String,
}

#[derive(Template)]
#[template(path = "runs.html")]
struct RunsPage {
    nav: Nav,
    project: String,
    workflow: String,
    states: Vec<Choice>,
    runs: Vec<RunLine>,
    next: String,
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

pub async fn runs(State(s): State<AppState>, headers: HeaderMap, Query(q): Query<RunsQuery>) -> Response {
    let v = signed_in!(s, headers);
    let now = now_ms();
    let state = nonempty(q.state).filter(|st| RunState::parse(st).is_some());
    let filter = RunFilter {
        project: nonempty(q.project.clone()),
        projects_in: v.principal.readable(),
        workflow: nonempty(q.workflow.clone()),
        state: state.clone(),
        since_ms: None,
        before: q.cursor,
        limit: 50,
    };
    let rows = try_page!(s.store.list_runs(&filter).await.map_err(ApiError::from));
    let next = if rows.len() == 50 {
        rows.last().map_or(String::new(), |r| {
            let mut url = format!("/runs?cursor={}", r.id);
            for (k, val) in
                [("project", &filter.project), ("workflow", &filter.workflow), ("state", &filter.state)]
            {
                if let Some(val) = val {
                    url.push_str(&format!("&{k}={}", encode(val)));
                }
            }
            url
        })
    } else {
        String::new()
    };
    let runs = rows
        .into_iter()
        .map(|r| RunLine {
            took: match (r.started_ms, r.finished_ms) {
                (_, Some(f)) => span(f - r.submitted_ms),
                (Some(_), None) => format!("{} so far", span(now - r.submitted_ms)),
                _ => String::new(),
            },
            id: r.id,
            workflow: r.workflow,
            logical_date: r.logical_date,
            tier: r.tier,
            state: r.state,
            queue: r.queue,
            submitted: time(r.submitted_ms),
        })
        .collect();
    html(&RunsPage {
        nav: Nav::new(&v, "Runs", "/runs", 2),
        project: q.project.unwrap_or_default(),
        workflow: q.workflow.unwrap_or_default(),
        states: RunState::ALL
            .iter()
            .map(|st| Choice {
                value: st.as_str().to_string(),
                chosen: state.as_deref() == Some(st.as_str()),
            })
            .collect(),
        runs,
        next,
    })
}

/// Percent-encode a query value (letters, digits and `-._~` pass).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode("ads ranking/1"), "ads%20ranking%2F1");
        assert_eq!(encode("job.stage.0"), "job.stage.0");
    }
}

#[cfg(test)]
mod chart_tests {
    use super::*;

    #[test]
    fn usage_fills_its_bucket_as_a_share_of_the_cluster() {
        // Half the cluster's cpu for 40 s of the last minute: 33.3% in the last bucket.
        let row = UsageRow {
            cluster: "c".into(),
            queue: "root.a".into(),
            start_ms: 3_550_000,
            end_ms: 3_590_000,
            cpu: 8000,
            memory: 0,
            gpu: 0,
            running_apps: 1,
        };
        let total = weir_api::Resources { cpu: 16000, memory: 32768, gpu: 0 };
        let svg = utilization_chart("c", "last hour", &total, &[row], 0, 3_600_000);
        // y = 46 + 230 − 0.333 × 230 = 199.3 at the last point (x = 980).
        assert!(svg.contains("L964.5 276.0 L980.0 199.3\""), "{svg}");
        assert!(!svg.contains(">gpu<"), "no gpu series for a cluster without gpus: {svg}");
    }

    #[test]
    fn a_cluster_with_gpus_gets_a_gpu_series() {
        // 2 of 4 gpus for the last minute: 50% in the last bucket, y = 46 + 230 − 115 = 161.
        let row = UsageRow {
            cluster: "c".into(),
            queue: "root.a".into(),
            start_ms: 3_540_000,
            end_ms: 3_600_000,
            cpu: 0,
            memory: 0,
            gpu: 2,
            running_apps: 1,
        };
        let total = weir_api::Resources { cpu: 16000, memory: 32768, gpu: 4 };
        let svg = utilization_chart("c", "last hour", &total, &[row], 0, 3_600_000);
        assert!(svg.contains("cpu, memory and gpus in use"), "{svg}");
        assert!(svg.contains(">gpu<"), "{svg}");
        assert!(svg.contains("L980.0 161.0\""), "{svg}");
    }
}
