//! Why deadlines were missed: the recorded waiting spells of runs that missed their SLO or are
//! at risk of missing it, grouped by tier and reason (rule, queue, limit) and ranked by the
//! time waited — "tier 1 waited 41m 00s on root.analytics at max_running_apps 3". A pure
//! function of store rows and `now`.

use std::collections::{BTreeMap, BTreeSet};

use weir_store::RunWaitRow;

use crate::words;

/// One reason behind missed or at-risk deadlines of one tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitCause {
    pub tier: u8,
    pub reason: String,
    pub queue: String,
    pub limit: String,
    /// Time the tier's missed and at-risk runs spent waiting for this reason.
    pub waited_ms: i64,
    /// Runs that missed their deadline and waited for it …
    pub missed: u64,
    /// … and runs not ended, with less than a quarter of their SLO left, that did.
    pub at_risk: u64,
    /// Up to three of their workflows, by name.
    pub workflows: Vec<String>,
}

/// Most spells a report reads.
pub const MAX_SPELLS: u32 = 50_000;

impl WaitCause {
    pub fn to_api(&self) -> weir_api::WaitCause {
        weir_api::WaitCause {
            tier: self.tier,
            reason: self.reason.clone(),
            queue: self.queue.clone(),
            limit: self.limit.clone(),
            waited_ms: self.waited_ms,
            missed_runs: self.missed,
            at_risk_runs: self.at_risk,
            workflows: self.workflows.clone(),
            summary: self.sentence(),
        }
    }

    /// "tier 1 waited 41m 00s on root.analytics at max_running_apps 3".
    pub fn sentence(&self) -> String {
        format!(
            "tier {} waited {} on {}",
            self.tier,
            words::span(self.waited_ms),
            words::reason(&self.reason, &self.queue, &self.limit)
        )
    }
}

/// Whether a run missed its SLO (`Some(true)`), is at risk (`Some(false)`), or neither.
fn standing(r: &RunWaitRow, now: i64) -> Option<bool> {
    let slo = r.slo_ms?;
    let deadline = r.submitted_ms + slo;
    match (r.state.as_str(), r.finished_ms) {
        ("succeeded", Some(f)) => (f > deadline).then_some(true),
        ("failed", _) => Some(true),
        ("killed", _) => None,
        (_, _) if now > deadline => Some(true),
        // Not ended: at risk with less than a quarter of its SLO left.
        _ => (deadline - now < slo / 4).then_some(false),
    }
}

/// The causes behind missed and at-risk deadlines among `rows` (one row per spell, already
/// filtered to the runs the reader may see), the longest waits first; ties by tier, reason,
/// queue.
pub fn wait_causes(rows: &[RunWaitRow], now: i64) -> Vec<WaitCause> {
    /// (tier, reason, queue, limit) → (time waited, missed runs, at-risk runs, workflows).
    type Key = (u8, String, String, String);
    type Sums = (i64, BTreeSet<i64>, BTreeSet<i64>, BTreeSet<String>);
    let mut by: BTreeMap<Key, Sums> = BTreeMap::new();
    for r in rows {
        let Some(missed) = standing(r, now) else { continue };
        let w = &r.wait;
        let took = (w.to_ms.unwrap_or(now) - w.from_ms).max(0);
        let e = by.entry((r.tier, w.reason.clone(), w.queue.clone(), w.limit.clone())).or_default();
        e.0 += took;
        if missed {
            e.1.insert(w.run_id);
        } else {
            e.2.insert(w.run_id);
        }
        e.3.insert(r.workflow.clone());
    }
    let mut out: Vec<WaitCause> = by
        .into_iter()
        .map(|((tier, reason, queue, limit), (waited_ms, missed, at_risk, workflows))| WaitCause {
            tier,
            reason,
            queue,
            limit,
            waited_ms,
            missed: missed.len() as u64,
            at_risk: at_risk.len() as u64,
            workflows: workflows.into_iter().take(3).collect(),
        })
        .collect();
    out.sort_by(|a, b| {
        b.waited_ms
            .cmp(&a.waited_ms)
            .then(a.tier.cmp(&b.tier))
            .then_with(|| (&a.reason, &a.queue).cmp(&(&b.reason, &b.queue)))
    });
    out
}

/// What one leaf's jobs waited for over a window, by reason: the history `weir plan --server`
/// reads beside the usage (`waits.csv`), so a plan is read against the limits that held work
/// back, not only against what the queues used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueWait {
    /// The leaf the waiting runs were in.
    pub leaf: String,
    pub tier: u8,
    pub reason: String,
    /// The queue (or `user NAME`) the rule applies to; empty when none.
    pub queue: String,
    pub limit: String,
    /// Spells that overlapped the window …
    pub spells: u64,
    /// … of this many runs …
    pub runs: u64,
    /// … and the part of them inside the window (an open spell counts up to `now`).
    pub waited_ms: i64,
}

impl QueueWait {
    /// "root.ads at max_running_apps 1".
    pub fn phrase(&self) -> String {
        words::reason(&self.reason, &self.queue, &self.limit)
    }
}

/// The waits of `rows` (spells with their runs) per (leaf, reason, queue, limit), clipped to
/// `[since, until)`; `leaf_of` gives each run's leaf and tier (runs not in it — another
/// cluster, or not readable — are left out). Sorted by leaf, then the longest wait first.
pub fn queue_waits(
    rows: &[RunWaitRow],
    leaf_of: &BTreeMap<i64, (String, u8)>,
    since: i64,
    until: i64,
    now: i64,
) -> Vec<QueueWait> {
    type Key = (String, u8, String, String, String);
    let mut by: BTreeMap<Key, (u64, BTreeSet<i64>, i64)> = BTreeMap::new();
    for r in rows {
        let w = &r.wait;
        let Some((leaf, tier)) = leaf_of.get(&w.run_id) else { continue };
        let end = w.to_ms.unwrap_or(now);
        if w.from_ms >= until || end < since {
            continue;
        }
        let (from, to) = (w.from_ms.max(since), end.min(until));
        let e =
            by.entry((leaf.clone(), *tier, w.reason.clone(), w.queue.clone(), w.limit.clone())).or_default();
        e.0 += 1;
        e.1.insert(w.run_id);
        e.2 += (to - from).max(0);
    }
    let mut out: Vec<QueueWait> = by
        .into_iter()
        .map(|((leaf, tier, reason, queue, limit), (spells, runs, waited_ms))| QueueWait {
            leaf,
            tier,
            reason,
            queue,
            limit,
            spells,
            runs: runs.len() as u64,
            waited_ms,
        })
        .collect();
    out.sort_by(|a, b| {
        a.leaf.cmp(&b.leaf).then(b.waited_ms.cmp(&a.waited_ms)).then_with(|| a.reason.cmp(&b.reason))
    });
    out
}

/// The `waits.csv` header.
pub const WAITS_CSV_HEADER: &str = "leaf,tier,reason,queue,limit,spells,runs,waited_ms";

/// `waits.csv`: one line per [`QueueWait`]; fields with commas (limits such as `cpu 4 cores,
/// memory 16 GiB`) quoted.
pub fn waits_csv(waits: &[QueueWait]) -> String {
    use std::fmt::Write;
    let mut out = format!("{WAITS_CSV_HEADER}\n");
    for w in waits {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            crate::reports::csv_field(&w.leaf),
            w.tier,
            crate::reports::csv_field(&w.reason),
            crate::reports::csv_field(&w.queue),
            crate::reports::csv_field(&w.limit),
            w.spells,
            w.runs,
            w.waited_ms
        );
    }
    out
}

/// Read `waits.csv` back (what `weir plan --server` fetched); errors name the line and field.
pub fn read_waits_csv(name: &str, text: &str) -> Result<Vec<QueueWait>, String> {
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.trim() == WAITS_CSV_HEADER => {}
        other => {
            return Err(format!(
                "{name}: line 1 is `{}`; expected the header `{WAITS_CSV_HEADER}`",
                other.unwrap_or("")
            ))
        }
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = i + 2;
        let f = split_csv(line);
        if f.len() != 8 {
            return Err(format!("{name}: line {at} has {} fields; expected 8 ({WAITS_CSV_HEADER})", f.len()));
        }
        let num = |k: usize, field: &str| -> Result<i64, String> {
            f[k].parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("{name}: line {at}, field {field}: `{}` is not a count", f[k]))
        };
        out.push(QueueWait {
            leaf: f[0].clone(),
            tier: num(1, "tier")?.clamp(0, 255) as u8,
            reason: f[2].clone(),
            queue: f[3].clone(),
            limit: f[4].clone(),
            spells: num(5, "spells")? as u64,
            runs: num(6, "runs")? as u64,
            waited_ms: num(7, "waited_ms")?,
        });
    }
    Ok(out)
}

/// Split one CSV line (RFC 4180 quoting, no line breaks inside fields).
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let cur = fields.last_mut().expect("one field at least");
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => fields.push(String::new()),
            (c, _) => cur.push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_store::WaitRow;

    #[allow(clippy::too_many_arguments)]
    fn row(
        run: i64,
        tier: u8,
        state: &str,
        finished: Option<i64>,
        from: i64,
        to: Option<i64>,
        reason: &str,
        queue: &str,
    ) -> RunWaitRow {
        RunWaitRow {
            wait: WaitRow {
                run_id: run,
                job_idx: 0,
                from_ms: from,
                to_ms: to,
                reason: reason.into(),
                queue: queue.into(),
                limit: if reason == "queue_max_running_apps" { "3".into() } else { String::new() },
                detail: String::new(),
            },
            workflow: format!("wf{run}"),
            tier,
            state: state.into(),
            submitted_ms: 0,
            finished_ms: finished,
            slo_ms: Some(100_000),
        }
    }

    #[test]
    fn only_missed_and_at_risk_runs_count_longest_wait_first() {
        let q = "queue_max_running_apps";
        let rows = [
            // Missed (ended after its deadline): 40 s on root.analytics.
            row(1, 1, "succeeded", Some(150_000), 0, Some(40_000), q, "root.analytics"),
            // Met: its wait does not count.
            row(2, 1, "succeeded", Some(50_000), 0, Some(30_000), q, "root.analytics"),
            // Failed: missed; 20 s on root.analytics, then 5 s for room.
            row(3, 1, "failed", Some(60_000), 0, Some(20_000), q, "root.analytics"),
            row(3, 1, "failed", Some(60_000), 20_000, Some(25_000), "no_room", "root.analytics.tier1"),
            // Not ended, 80 s into a 100 s SLO: at risk, still waiting (counted up to now).
            row(4, 3, "waiting", None, 10_000, None, "no_room", "root.batch"),
            // Killed: no outcome.
            row(5, 1, "killed", Some(500_000), 0, Some(400_000), q, "root.analytics"),
        ];
        let got = wait_causes(&rows, 80_000);
        let summary: Vec<(String, u64, u64, Vec<String>)> =
            got.iter().map(|c| (c.sentence(), c.missed, c.at_risk, c.workflows.clone())).collect();
        assert_eq!(
            summary,
            [
                (
                    "tier 3 waited 1m 10s on room in the cluster for root.batch's next task (capacity or fair share)"
                        .to_string(),
                    0,
                    1,
                    vec!["wf4".to_string()]
                ),
                (
                    "tier 1 waited 1m 00s on root.analytics at max_running_apps 3".to_string(),
                    2,
                    0,
                    vec!["wf1".to_string(), "wf3".to_string()]
                ),
                (
                    "tier 1 waited 5s on room in the cluster for root.analytics.tier1's next task (capacity or fair share)"
                        .to_string(),
                    1,
                    0,
                    vec!["wf3".to_string()]
                ),
            ]
        );
        // Earlier in its life the unfinished run was not at risk: nothing of it counts.
        assert!(wait_causes(&rows[3..5], 30_000).iter().all(|c| c.tier == 1));
    }

    #[test]
    fn queue_waits_are_clipped_to_the_window_and_read_back() {
        let q = "queue_max_resources";
        let mut rows = vec![
            row(1, 1, "succeeded", Some(150_000), 0, Some(40_000), q, "root.analytics"),
            row(1, 1, "succeeded", Some(150_000), 40_000, Some(45_000), "no_room", "root.analytics.tier1"),
            row(2, 1, "waiting", None, 50_000, None, q, "root.analytics"),
            // Another cluster's run: not in `leaf_of`.
            row(3, 1, "succeeded", Some(150_000), 0, Some(40_000), q, "root.other"),
        ];
        for r in &mut rows {
            if r.wait.reason == q {
                r.wait.limit = "cpu 4 cores, memory 16 GiB".into();
            }
        }
        let leaf_of: BTreeMap<i64, (String, u8)> =
            [(1, ("root.analytics.tier1".to_string(), 1)), (2, ("root.analytics.tier1".to_string(), 1))]
                .into();
        // Window [10 s, 70 s), now 60 s: run 1's first spell counts 30 s, run 2's open one 10 s.
        let got = queue_waits(&rows, &leaf_of, 10_000, 70_000, 60_000);
        let brief: Vec<(&str, u64, u64, i64)> =
            got.iter().map(|w| (w.reason.as_str(), w.spells, w.runs, w.waited_ms)).collect();
        assert_eq!(brief, [(q, 2, 2, 40_000), ("no_room", 1, 1, 5_000)]);
        assert_eq!(got[0].phrase(), "root.analytics at its max (cpu 4 cores, memory 16 GiB)");
        let text = waits_csv(&got);
        assert!(text.contains(",\"cpu 4 cores, memory 16 GiB\",2,2,40000\n"), "{text}");
        assert_eq!(read_waits_csv("waits.csv", &text), Ok(got));
        let bad = read_waits_csv("waits.csv", &format!("{WAITS_CSV_HEADER}\nroot.a,1,no_room,,,x,1,5\n"));
        assert_eq!(bad, Err("waits.csv: line 2, field spells: `x` is not a count".to_string()));
    }
}
