//! Judging a plan by replaying a workload on the current and the planned settings (`weir plan
//! --validate`, `weir apply`, the server's scheduled planner): the side-by-side figures people
//! read, and the rule that refuses a plan — tier 1 must not get worse.
//!
//! The replays themselves are the caller's (the CLI drives them behind a progress bar, the
//! server on its blocking pool); this module only compares their summaries.

use weir_model::Duration;
use weir_sim::Summary;

/// The label and the current and planned figures of each row of the comparison.
pub fn comparison_rows(old: &Summary, new: &Summary) -> Vec<[String; 3]> {
    let pct = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0));
    let secs = |s: Option<f64>| s.map_or("-".to_string(), |s| Duration::from_secs(s.round() as u64).human());
    let mut rows = Vec::new();
    for tier in ["1", "2", "3"] {
        let (Some(a), Some(b)) = (old.tiers.get(tier), new.tiers.get(tier)) else { continue };
        rows.push([format!("tier {tier} SLO success"), pct(a.slo_success_ratio), pct(b.slo_success_ratio)]);
        rows.push([format!("tier {tier} runtime p50"), secs(a.runtime_p50), secs(b.runtime_p50)]);
        // The worst leaf's 99th-percentile wait for a first container, in this tier.
        let wait = |s: &Summary| {
            s.queues
                .iter()
                .filter(|q| q.tier.map(|t| t.to_string()).as_deref() == Some(tier))
                .filter_map(|q| q.wait_p99)
                .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))))
        };
        rows.push([format!("tier {tier} wait p99 (worst leaf)"), secs(wait(old)), secs(wait(new))]);
    }
    rows.push(["utilization cpu".into(), pct(Some(old.utilization.cpu)), pct(Some(new.utilization.cpu))]);
    rows.push([
        "utilization memory".into(),
        pct(Some(old.utilization.memory)),
        pct(Some(new.utilization.memory)),
    ]);
    rows.push(["containers preempted".into(), old.preemptions.to_string(), new.preemptions.to_string()]);
    rows.push(["runs completed".into(), old.runs_completed.to_string(), new.runs_completed.to_string()]);
    rows
}

/// Tier 1 as a validation reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tier1 {
    pub slo_success_ratio: Option<f64>,
    pub slo_successful_workflows: u64,
}

impl Tier1 {
    pub fn of(s: &Summary) -> Tier1 {
        s.tiers.get("1").map_or(Tier1::default(), |t| Tier1 {
            slo_success_ratio: t.slo_success_ratio,
            slo_successful_workflows: t.slo_successful_workflows,
        })
    }
}

/// Why the planned settings are worse for tier 1 than the current ones, if they are: a lower
/// SLO success ratio, or fewer SLO-successful workflows. A tier without runs in either replay
/// cannot get worse.
pub fn tier1_regression(current: Tier1, planned: Tier1) -> Option<String> {
    let pct = |r: f64| format!("{:.1}%", r * 100.0);
    match (current.slo_success_ratio, planned.slo_success_ratio) {
        (Some(a), Some(b)) if b < a => {
            return Some(format!("tier-1 SLO success falls from {} to {} in the replay", pct(a), pct(b)))
        }
        (Some(a), None) => {
            return Some(format!(
                "tier-1 SLO success was {} and the planned replay has no tier-1 outcome",
                pct(a)
            ))
        }
        _ => {}
    }
    (planned.slo_successful_workflows < current.slo_successful_workflows).then(|| {
        format!(
            "SLO-successful tier-1 workflows fall from {} to {} in the replay",
            current.slo_successful_workflows, planned.slo_successful_workflows
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(r: Option<f64>, w: u64) -> Tier1 {
        Tier1 { slo_success_ratio: r, slo_successful_workflows: w }
    }

    #[test]
    fn tier1_may_not_get_worse() {
        assert_eq!(tier1_regression(t(Some(0.9), 3), t(Some(0.9), 3)), None);
        assert_eq!(tier1_regression(t(Some(0.5), 1), t(Some(1.0), 2)), None);
        assert_eq!(tier1_regression(t(None, 0), t(None, 0)), None);
        let why = tier1_regression(t(Some(1.0), 2), t(Some(0.8), 2)).expect("worse");
        assert!(why.contains("100.0% to 80.0%"), "{why}");
        assert!(tier1_regression(t(Some(1.0), 2), t(Some(1.0), 1)).is_some());
        assert!(tier1_regression(t(Some(1.0), 2), t(None, 0)).is_some());
    }
}
