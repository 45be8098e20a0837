//! The SLO page's two views over time: runs at risk now — not ended, with a deadline they are
//! predicted to miss, and why — and each tier's met and missed runs per day. A pure function
//! of run records, open waiting spells and `now`.
//!
//! The prediction is deliberately simple and stated on the page: a run's remaining time is the
//! median time its workflow's earlier successful runs took from their start to their end (in
//! the window); a run still waiting is predicted to end that long after now, a running one that
//! long after it started (or now, if it has run longer already). Without earlier runs, a run is
//! at risk with less than a quarter of its SLO left (what the wait report uses).

use std::collections::BTreeMap;

use weir_store::{RunRecordRow, WaitRow};

use crate::words;

/// A run predicted to miss its deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtRisk {
    pub run: i64,
    pub workflow: String,
    pub tier: u8,
    pub state: String,
    pub deadline_ms: i64,
    /// Predicted end minus deadline (positive: late by this much); `None` without history.
    pub late_by_ms: Option<i64>,
    /// Why, in words.
    pub reason: String,
}

const ENDED: [&str; 3] = ["succeeded", "failed", "killed"];

/// Median of start-to-end times of successful runs, per workflow.
fn typical(runs: &[RunRecordRow]) -> BTreeMap<&str, i64> {
    let mut by: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for r in runs {
        if let ("succeeded", Some(s), Some(f)) = (r.state.as_str(), r.started_ms, r.finished_ms) {
            by.entry(r.workflow.as_str()).or_default().push(f - s);
        }
    }
    by.into_iter()
        .map(|(w, mut v)| {
            v.sort_unstable();
            (w, v[(v.len() - 1) / 2])
        })
        .collect()
}

/// Runs not ended with an SLO that are predicted to miss it (or already have), tier 1 first,
/// then the latest first. `open_waits` holds each waiting run's open spell, if any.
pub fn at_risk(runs: &[RunRecordRow], open_waits: &BTreeMap<i64, WaitRow>, now: i64) -> Vec<AtRisk> {
    let typical = typical(runs);
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| !ENDED.contains(&r.state.as_str())) {
        let Some(slo) = r.slo_ms else { continue };
        let deadline = r.submitted_ms + slo;
        let waiting = open_waits.get(&r.id);
        let on = waiting.map(|w| {
            format!(
                " on {} for {}",
                words::reason(&w.reason, &w.queue, &w.limit),
                words::span(now - w.from_ms)
            )
        });
        let (late_by, reason) = if now > deadline {
            let doing = match (r.started_ms, &on) {
                (_, Some(o)) => format!("; waiting{o}"),
                (Some(s), None) => format!("; running for {}", words::span(now - s)),
                (None, None) => "; not started".to_string(),
            };
            (
                Some(now - deadline),
                format!("already past its deadline by {}{doing}", words::span(now - deadline)),
            )
        } else if let Some(&took) = typical.get(r.workflow.as_str()) {
            let (end, how) = match r.started_ms {
                Some(s) => (
                    (s + took).max(now),
                    format!("running for {}{}", words::span(now - s), on.clone().unwrap_or_default()),
                ),
                None => (now + took, format!("not started{}", on.clone().unwrap_or_default())),
            };
            if end <= deadline {
                continue;
            }
            (
                Some(end - deadline),
                format!(
                    "{how}; its runs take {} once started and {} are left",
                    words::span(took),
                    words::span(deadline - now)
                ),
            )
        } else if deadline - now < slo / 4 {
            (
                None,
                format!(
                    "{} of its {} SLO left and no earlier run to predict from{}",
                    words::span(deadline - now),
                    words::span(slo),
                    on.map(|o| format!("; waiting{o}")).unwrap_or_default()
                ),
            )
        } else {
            continue;
        };
        out.push(AtRisk {
            run: r.id,
            workflow: r.workflow.clone(),
            tier: r.tier,
            state: r.state.clone(),
            deadline_ms: deadline,
            late_by_ms: late_by,
            reason,
        });
    }
    out.sort_by(|a, b| a.tier.cmp(&b.tier).then(b.run.cmp(&a.run)));
    out
}

/// Met and missed runs of one tier on one day (UTC, by submission).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DayOutcome {
    pub met: u64,
    pub missed: u64,
}

/// Per tier, per day of `days` (their starts, Unix ms, a day apart): runs that met or missed
/// their SLO (as of `now`; killed runs and runs still within their deadline have no outcome).
pub fn trend(runs: &[RunRecordRow], days: &[i64], now: i64) -> BTreeMap<u8, Vec<DayOutcome>> {
    const DAY: i64 = 86_400_000;
    let mut out: BTreeMap<u8, Vec<DayOutcome>> = BTreeMap::new();
    for r in runs {
        let Some(slo) = r.slo_ms else { continue };
        let Some(i) = days.iter().position(|&d| (d..d + DAY).contains(&r.submitted_ms)) else { continue };
        let deadline = r.submitted_ms + slo;
        let met = match (r.state.as_str(), r.finished_ms) {
            ("succeeded", Some(f)) => f <= deadline,
            ("failed", _) => false,
            ("killed", _) => continue,
            _ if now > deadline => false,
            _ => continue,
        };
        let cell = &mut out.entry(r.tier).or_insert_with(|| vec![DayOutcome::default(); days.len()])[i];
        if met {
            cell.met += 1;
        } else {
            cell.missed += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    fn rec(id: i64, wf: &str, tier: u8, state: &str, times: (i64, Option<i64>, Option<i64>)) -> RunRecordRow {
        RunRecordRow {
            id,
            workflow: wf.into(),
            project: "p".into(),
            tier,
            cluster: "default".into(),
            queue: "root.p.tier1".into(),
            state: state.into(),
            submitted_ms: times.0,
            started_ms: times.1,
            finished_ms: times.2,
            slo_ms: Some(100 * S),
        }
    }

    #[test]
    fn runs_predicted_to_miss_are_at_risk_with_the_reason() {
        let runs = [
            // History: report runs take 60 s (median of 50, 60, 70) once started.
            rec(1, "report", 1, "succeeded", (0, Some(0), Some(50 * S))),
            rec(2, "report", 1, "succeeded", (0, Some(10 * S), Some(70 * S))),
            rec(3, "report", 1, "succeeded", (0, Some(0), Some(70 * S))),
            // Submitted at 1000 s, still waiting at 1050 s: 60 s from now is 10 s past 1100 s.
            rec(4, "report", 1, "waiting", (1000 * S, None, None)),
            // Started at 1000 s: predicted at 1060 s, in time.
            rec(5, "report", 1, "running", (1000 * S, Some(1000 * S), None)),
            // Past its deadline already.
            rec(6, "report", 1, "running", (900 * S, Some(910 * S), None)),
            // No history: 10 s of 100 s left (under a quarter) — at risk; another with 90 s not.
            rec(7, "backfill", 3, "running", (960 * S, Some(960 * S), None)),
            rec(8, "fresh", 3, "waiting", (1040 * S, None, None)),
        ];
        let open: BTreeMap<i64, WaitRow> = [(
            4,
            WaitRow {
                run_id: 4,
                job_idx: 0,
                from_ms: 1010 * S,
                to_ms: None,
                reason: "queue_max_running_apps".into(),
                queue: "root.p".into(),
                limit: "3".into(),
                detail: String::new(),
            },
        )]
        .into();
        let got = at_risk(&runs, &open, 1050 * S);
        let brief: Vec<(i64, Option<i64>, &str)> =
            got.iter().map(|a| (a.run, a.late_by_ms, a.reason.as_str())).collect();
        assert_eq!(
            brief,
            [
                (
                    6,
                    Some(50 * S),
                    "already past its deadline by 50s; running for 2m 20s"
                ),
                (
                    4,
                    Some(10 * S),
                    "not started on root.p at max_running_apps 3 for 40s; its runs take 1m 00s once started and 50s are left"
                ),
                (7, None, "10s of its 1m 40s SLO left and no earlier run to predict from"),
            ]
        );
    }

    #[test]
    fn the_trend_counts_met_and_missed_per_tier_and_day() {
        const DAY: i64 = 86_400_000;
        let runs = [
            rec(1, "a", 1, "succeeded", (10, Some(10), Some(50 * S))),
            rec(2, "a", 1, "succeeded", (20, Some(20), Some(500 * S))),
            rec(3, "a", 1, "failed", (DAY + 5, None, Some(DAY + 6))),
            rec(4, "a", 1, "killed", (DAY + 5, None, Some(DAY + 6))),
            rec(5, "b", 2, "running", (DAY + 7, Some(DAY + 7), None)),
        ];
        let got = trend(&runs, &[0, DAY], DAY + 10 * S);
        let d = |met, missed| DayOutcome { met, missed };
        // Run 5 is still within its deadline: no outcome, so tier 2 has no line.
        assert_eq!(got, BTreeMap::from([(1, vec![d(1, 1), d(0, 1)])]));
    }
}
