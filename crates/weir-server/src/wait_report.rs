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
}
