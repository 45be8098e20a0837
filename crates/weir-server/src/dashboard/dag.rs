//! A run's DAG as inline SVG: jobs in columns by depth (a job after its upstream jobs), each
//! job a box of its stages, also in columns by depth, each stage a row of squares, one per
//! task, coloured by state and linking to the task's logs; and the run's timeline, each job a
//! bar from its start to its end, against the SLO deadline.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use weir_store::TaskCount;

use weir_model::WorkflowSpec;
use weir_report::escape;
use weir_store::{JobRow, TaskRow, WaitRow};

use super::views::state_colour;

const STAGE_W: f64 = 150.0;
const SQUARE: f64 = 11.0;
const PER_ROW: usize = 12;
/// Tasks drawn per stage; the rest are counted in the stage's caption.
pub(crate) const MAX_SQUARES: usize = 240;
const GAP: f64 = 36.0;

/// Depth of each item: 0 without upstream, else one more than its deepest upstream.
fn depths(names: &[String], after: &[Vec<String>]) -> Vec<usize> {
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let mut depth = vec![usize::MAX; names.len()];
    fn visit(
        i: usize,
        after: &[Vec<String>],
        index: &BTreeMap<&str, usize>,
        depth: &mut [usize],
        guard: usize,
    ) -> usize {
        if depth[i] != usize::MAX || guard == 0 {
            return depth[i].min(guard);
        }
        let d = after[i]
            .iter()
            .filter_map(|a| index.get(a.as_str()))
            .map(|&u| visit(u, after, index, depth, guard - 1) + 1)
            .max()
            .unwrap_or(0);
        depth[i] = d;
        d
    }
    for i in 0..names.len() {
        visit(i, after, &index, &mut depth, names.len() + 1);
    }
    depth
}

struct StageBox {
    name: String,
    x: f64,
    y: f64,
    h: f64,
    tasks: Vec<(u32, String, u32)>,
    /// The stage's tasks, and how many succeeded (all of them, not only those drawn).
    total: u64,
    done: u64,
}

struct JobBox {
    name: String,
    state: String,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    stages: Vec<StageBox>,
    stage_edges: Vec<(usize, usize)>,
}

fn stage_height(tasks: usize) -> f64 {
    let rows = tasks.min(MAX_SQUARES).div_ceil(PER_ROW).max(1);
    26.0 + rows as f64 * (SQUARE + 2.0)
}

/// The run's DAG. `run` is the run's id (for log links); `tasks` may be only the first tasks of
/// each stage (at most `MAX_SQUARES` are drawn), `counts` count all of them.
pub fn dag_svg(
    run: i64,
    spec: &WorkflowSpec,
    jobs: &[JobRow],
    tasks: &[TaskRow],
    counts: &[TaskCount],
) -> String {
    let names: Vec<String> = spec.jobs.iter().map(|j| j.name.clone()).collect();
    let after: Vec<Vec<String>> = spec.jobs.iter().map(|j| j.after.clone()).collect();
    let jdepth = depths(&names, &after);
    let mut boxes: Vec<JobBox> = Vec::new();
    for (ji, job) in spec.jobs.iter().enumerate() {
        let row = jobs.iter().find(|r| r.name == job.name);
        let snames: Vec<String> = job.stages.iter().map(|s| s.name.clone()).collect();
        let safter: Vec<Vec<String>> = job.stages.iter().map(|s| s.after.clone()).collect();
        let sdepth = depths(&snames, &safter);
        let mut col_y: BTreeMap<usize, f64> = BTreeMap::new();
        let mut stages = Vec::new();
        for (si, st) in job.stages.iter().enumerate() {
            let mine: Vec<(u32, String, u32)> = row
                .map(|r| {
                    tasks
                        .iter()
                        .filter(|t| t.job_idx == r.idx && t.stage == st.name)
                        .map(|t| (t.task_idx, t.state.clone(), t.attempts))
                        .collect()
                })
                .unwrap_or_default();
            let (total, done) = match row {
                Some(r) => counts
                    .iter()
                    .filter(|c| c.job_idx == r.idx && c.stage == st.name)
                    .fold((0, 0), |(t, d), c| {
                        (t + c.count, d + if c.state == "succeeded" { c.count } else { 0 })
                    }),
                None => (u64::from(st.tasks), 0),
            };
            let h = stage_height(st.tasks as usize);
            let y = col_y.entry(sdepth[si]).or_insert(28.0);
            stages.push(StageBox {
                name: st.name.clone(),
                x: 10.0 + sdepth[si] as f64 * (STAGE_W + GAP),
                y: *y,
                h,
                tasks: mine,
                total,
                done,
            });
            *y += h + 10.0;
        }
        let index: BTreeMap<&str, usize> = snames.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let stage_edges = job
            .stages
            .iter()
            .enumerate()
            .flat_map(|(si, st)| {
                st.after.iter().filter_map(|a| index.get(a.as_str()).map(|&u| (u, si))).collect::<Vec<_>>()
            })
            .collect();
        let cols = sdepth.iter().copied().max().map_or(1, |d| d + 1);
        let w = 20.0 + cols as f64 * STAGE_W + (cols - 1) as f64 * GAP;
        let h = col_y.values().fold(40.0f64, |a, &b| a.max(b));
        let _ = ji;
        boxes.push(JobBox {
            name: job.name.clone(),
            state: row.map_or_else(|| "pending".to_string(), |r| r.state.clone()),
            x: 0.0,
            y: 0.0,
            w,
            h,
            stages,
            stage_edges,
        });
    }
    // Columns of jobs by depth.
    let mut col_w: BTreeMap<usize, f64> = BTreeMap::new();
    for (i, b) in boxes.iter().enumerate() {
        let w = col_w.entry(jdepth[i]).or_insert(0.0);
        *w = w.max(b.w);
    }
    let mut col_x: BTreeMap<usize, f64> = BTreeMap::new();
    let mut x = 10.0;
    for (&d, &w) in &col_w {
        col_x.insert(d, x);
        x += w + 60.0;
    }
    let mut col_y: BTreeMap<usize, f64> = BTreeMap::new();
    for (i, b) in boxes.iter_mut().enumerate() {
        let y = col_y.entry(jdepth[i]).or_insert(34.0);
        b.x = col_x[&jdepth[i]];
        b.y = *y;
        *y += b.h + 24.0;
    }
    let width = x.max(580.0);
    let height = col_y.values().fold(80.0f64, |a, &b| a.max(b)) + 10.0;
    let mut s = format!(
        "<svg class=\"dag\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"the run's jobs and stages\">"
    );
    legend(&mut s);
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    for (ji, job) in spec.jobs.iter().enumerate() {
        for a in &job.after {
            if let Some(&u) = index.get(a.as_str()) {
                let (f, t) = (&boxes[u], &boxes[ji]);
                edge(&mut s, f.x + f.w, f.y + 16.0, t.x, t.y + 16.0);
            }
        }
    }
    for b in &boxes {
        let _ = write!(
            s,
            "<g class=\"job\" data-job=\"{}\" data-state=\"{}\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"6\" fill=\"#fafafa\" stroke=\"{}\" stroke-width=\"2\"/>\
<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" font-weight=\"600\">{} · {}</text>",
            escape(&b.name),
            escape(&b.state),
            b.x,
            b.y,
            b.w,
            b.h,
            state_colour(&b.state),
            b.x + 8.0,
            b.y + 18.0,
            escape(&b.name),
            escape(&b.state)
        );
        for &(u, v) in &b.stage_edges {
            let (f, t) = (&b.stages[u], &b.stages[v]);
            edge(&mut s, b.x + f.x + STAGE_W, b.y + f.y + 12.0, b.x + t.x, b.y + t.y + 12.0);
        }
        for st in &b.stages {
            let (sx, sy) = (b.x + st.x, b.y + st.y);
            let done = st.done;
            let _ = write!(
                s,
                "<rect x=\"{sx:.1}\" y=\"{sy:.1}\" width=\"{STAGE_W}\" height=\"{:.1}\" rx=\"4\" fill=\"#fff\" stroke=\"#999\"/>\
<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{} {done}/{}</text>",
                st.h,
                sx + 6.0,
                sy + 16.0,
                escape(&st.name),
                st.total
            );
            for (k, (idx, state, attempts)) in st.tasks.iter().take(MAX_SQUARES).enumerate() {
                let (cx, cy) = (
                    sx + 6.0 + (k % PER_ROW) as f64 * (SQUARE + 1.0),
                    sy + 22.0 + (k / PER_ROW) as f64 * (SQUARE + 2.0),
                );
                let task = format!("{}.{}.{idx}", b.name, st.name);
                let body = format!(
                    "<rect class=\"task\" data-task=\"{t}\" data-state=\"{st}\" x=\"{cx:.1}\" y=\"{cy:.1}\" width=\"{SQUARE}\" height=\"{SQUARE}\" fill=\"{c}\"><title>{t}: {st}, attempt {attempts}</title></rect>",
                    t = escape(&task),
                    st = escape(state),
                    c = state_colour(state)
                );
                if *attempts > 0 {
                    let _ = write!(s, "<a href=\"/runs/{run}/logs/{}\">{body}</a>", escape(&task));
                } else {
                    s.push_str(&body);
                }
            }
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

fn edge(s: &mut String, x1: f64, y1: f64, x2: f64, y2: f64) {
    let mid = (x1 + x2) / 2.0;
    let _ = write!(
        s,
        "<path d=\"M{x1:.1} {y1:.1} C{mid:.1} {y1:.1} {mid:.1} {y2:.1} {x2:.1} {y2:.1}\" fill=\"none\" stroke=\"#888\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/>"
    );
}

fn legend(s: &mut String) {
    s.push_str("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0 0 L10 5 L0 10 z\" fill=\"#888\"/></marker></defs>");
    let mut x = 10.0;
    for state in ["pending", "waiting", "starting", "running", "succeeded", "failed", "killed"] {
        let _ = write!(
            s,
            "<rect x=\"{x:.1}\" y=\"8\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"17\" font-size=\"11\">{state}</text>",
            state_colour(state),
            x + 14.0
        );
        x += 24.0 + state.len() as f64 * 6.5;
    }
}

/// The run's jobs on a time axis from submission: each job's waiting spells (hatched, one
/// colour per reason, the reason in the tooltip) then its running span, against the SLO
/// deadline; a legend below totals the time waited per reason.
pub fn timeline_svg(
    submitted: i64,
    deadline: Option<i64>,
    now: i64,
    jobs: &[JobRow],
    waits: &[WaitRow],
) -> String {
    const W: f64 = 760.0;
    const LEFT: f64 = 140.0;
    let end = jobs
        .iter()
        .filter_map(|j| j.finished_ms.or(j.started_ms.map(|_| now)))
        .chain(waits.iter().map(|w| w.to_ms.unwrap_or(now)))
        .chain(deadline)
        .fold(submitted + 1000, i64::max);
    let span = (end - submitted).max(1) as f64;
    let px = |t: i64| LEFT + (t - submitted).max(0) as f64 / span * (W - LEFT - 10.0);
    // Reasons in order of first appearance, each with its colour and total.
    let mut reasons: Vec<(String, i64)> = Vec::new();
    for w in waits {
        let key = crate::words::reason(&w.reason, &w.queue, &w.limit);
        let took = w.to_ms.unwrap_or(now) - w.from_ms;
        match reasons.iter_mut().find(|(k, _)| *k == key) {
            Some(r) => r.1 += took,
            None => reasons.push((key, took)),
        }
    }
    let rows = 34.0 + jobs.len() as f64 * 22.0;
    let height = rows + reasons.len() as f64 * 18.0 + if reasons.is_empty() { 0.0 } else { 8.0 };
    let mut s = format!(
        "<svg class=\"timeline\" id=\"wait-timeline\" width=\"{W}\" height=\"{height:.0}\" viewBox=\"0 0 {W} {height:.0}\" role=\"img\" aria-label=\"job waits and runs against the SLO deadline\">"
    );
    s.push_str(
        "<defs><pattern id=\"waiting\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#ffffff\" fill-opacity=\"0.45\"/></pattern></defs>",
    );
    let _ = write!(s, "<text x=\"{LEFT}\" y=\"14\" font-size=\"11\">submitted</text>");
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"14\" font-size=\"11\" text-anchor=\"end\">+{}</text>",
        W - 10.0,
        super::views::span(end - submitted)
    );
    let colour = |key: &str| {
        let i = reasons.iter().position(|(k, _)| k == key).unwrap_or(0);
        WAIT_COLOURS[i % WAIT_COLOURS.len()]
    };
    for (i, j) in jobs.iter().enumerate() {
        let y = 24.0 + i as f64 * 22.0;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
            LEFT - 8.0,
            y + 12.0,
            escape(&j.name)
        );
        for w in waits.iter().filter(|w| w.job_idx == j.idx) {
            let stop = w.to_ms.unwrap_or(now);
            let (x1, x2) = (px(w.from_ms), px(stop).max(px(w.from_ms) + 2.0));
            let key = crate::words::reason(&w.reason, &w.queue, &w.limit);
            let c = colour(&key);
            let detail = if w.detail.is_empty() { String::new() } else { format!(" — {}", w.detail) };
            let _ = write!(
                s,
                "<g class=\"wait\" data-reason=\"{}\" data-queue=\"{}\"><rect x=\"{x1:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{c}\"/><rect x=\"{x1:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"14\" fill=\"url(#waiting)\"/><title>{}: waited {} ({} to {}) on {}{}</title></g>",
                escape(&w.reason),
                escape(&w.queue),
                x2 - x1,
                x2 - x1,
                escape(&j.name),
                super::views::span(stop - w.from_ms),
                super::views::span(w.from_ms - submitted),
                super::views::span(stop - submitted),
                escape(&key),
                escape(&detail)
            );
        }
        if let Some(start) = j.started_ms {
            let stop = j.finished_ms.unwrap_or(now);
            let (x1, x2) = (px(start), px(stop).max(px(start) + 2.0));
            let _ = write!(
                s,
                "<rect class=\"ran\" x=\"{x1:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"14\" fill=\"{}\"><title>{}: ran {} to {}</title></rect>",
                x2 - x1,
                state_colour(&j.state),
                escape(&j.name),
                super::views::span(start - submitted),
                super::views::span(stop - submitted)
            );
        }
    }
    if let Some(d) = deadline {
        let x = px(d);
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"18\" x2=\"{x:.1}\" y2=\"{rows:.0}\" stroke=\"#D55E00\" stroke-width=\"2\" stroke-dasharray=\"4 3\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#D55E00\" text-anchor=\"end\">SLO deadline</text>",
            x - 4.0,
            rows - 4.0
        );
    }
    for (i, (key, took)) in reasons.iter().enumerate() {
        let y = rows + 8.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            "<g class=\"wait-legend\"><rect x=\"{LEFT}\" y=\"{y:.1}\" width=\"14\" height=\"12\" fill=\"{}\"/><rect x=\"{LEFT}\" y=\"{y:.1}\" width=\"14\" height=\"12\" fill=\"url(#waiting)\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">waited {} on {}</text></g>",
            colour(key),
            LEFT + 20.0,
            y + 10.0,
            super::views::span(*took),
            escape(key)
        );
    }
    s.push_str("</svg>");
    s
}

/// Colours of waiting spells, one per reason in order of appearance (Okabe–Ito, skipping the
/// deadline's vermilion and the states' greens and blues).
const WAIT_COLOURS: [&str; 4] = ["#E69F00", "#CC79A7", "#F0E442", "#999999"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_follows_the_longest_upstream_path() {
        let names: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let after = vec![vec![], vec!["a".into()], vec!["a".into(), "b".into()], vec![]];
        assert_eq!(depths(&names, &after), vec![0, 1, 2, 0]);
    }

    #[test]
    fn tasks_link_to_their_logs_once_they_have_an_attempt() {
        let spec: WorkflowSpec = serde_json::from_value(serde_json::json!({
            "name": "w", "queue": "root.a",
            "jobs": [
                {"name": "extract", "stages": [{"name": "q", "tasks": 2, "resources": {"cpu": 1000, "memory": 512}}]},
                {"name": "publish", "after": ["extract"], "stages": [{"name": "u", "tasks": 1, "resources": {"cpu": 1000, "memory": 512}}]}
            ]
        }))
        .expect("spec");
        let job = |idx, name: &str, state: &str| JobRow {
            run_id: 7,
            idx,
            name: name.into(),
            state: state.into(),
            started_ms: None,
            finished_ms: None,
        };
        let task = |job_idx, stage: &str, task_idx, state: &str, attempts| TaskRow {
            run_id: 7,
            job_idx,
            stage_idx: 0,
            task_idx,
            stage: stage.into(),
            state: state.into(),
            attempts,
            node: None,
            started_ms: None,
            finished_ms: None,
            exit_code: None,
        };
        let count = |job_idx, stage: &str, state: &str, count| TaskCount {
            job_idx,
            stage_idx: 0,
            stage: stage.into(),
            state: state.into(),
            count,
        };
        let svg = dag_svg(
            7,
            &spec,
            &[job(0, "extract", "running"), job(1, "publish", "pending")],
            &[task(0, "q", 0, "succeeded", 1), task(0, "q", 1, "running", 2), task(1, "u", 0, "pending", 0)],
            // Only some of the tasks are drawn; the counts cover them all.
            &[count(0, "q", "succeeded", 40), count(0, "q", "running", 2), count(1, "u", "pending", 1)],
        );
        assert!(svg.contains("<a href=\"/runs/7/logs/extract.q.1\">"), "{svg}");
        assert!(svg.contains(">q 40/42</text>"), "{svg}");
        assert!(!svg.contains("/runs/7/logs/publish.u.0"), "no attempt, no log link");
        assert!(svg.contains("data-job=\"publish\" data-state=\"pending\""));
        assert_eq!(svg.matches("marker-end").count(), 1, "one job edge, no stage edges");
    }
}
