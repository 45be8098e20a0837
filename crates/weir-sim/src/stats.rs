//! Figures gathered as a simulation goes, in memory that does not grow with its length:
//! [`Quantiles`] (exact up to a million values, then a log-scale histogram good to 0.1%), the
//! per-tier and per-run aggregates of `summary.json`, and each workflow's SLO record, folded
//! into its tier (and into the bounded table of the report) once its last run is over.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::Duration;

use crate::summary::{RunRecord, Stats, TierSummary, TimeFigures, SLO_SUCCESSFUL};

/// Values kept exactly before the histogram takes over (8 MB).
const EXACT: usize = 1 << 20;
/// Values below this have a bucket each; above, 1,024 buckets per power of two.
const LINEAR: u64 = 2048;

/// Nearest-rank percentiles, mean and maximum of non-negative integers: exact while there are
/// at most [`EXACT`] values, then within 0.1% (the value's top 11 bits).
#[derive(Clone, Debug, Default)]
pub(crate) struct Quantiles {
    exact: Vec<u64>,
    hist: Option<BTreeMap<u64, u64>>,
    count: u64,
    sum: u128,
    max: u64,
}

fn bucket(v: u64) -> u64 {
    if v < LINEAR {
        return v;
    }
    let e = u64::from(63 - v.leading_zeros());
    let m = v >> (e - 10);
    LINEAR + (e - 11) * 1024 + (m - 1024)
}

/// The smallest value of a bucket.
fn floor(k: u64) -> u64 {
    if k < LINEAR {
        return k;
    }
    let (e, m) = (11 + (k - LINEAR) / 1024, 1024 + (k - LINEAR) % 1024);
    m << (e - 10)
}

impl Quantiles {
    pub fn push(&mut self, v: u64) {
        self.count += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
        match &mut self.hist {
            Some(h) => *h.entry(bucket(v)).or_default() += 1,
            None => {
                self.exact.push(v);
                if self.exact.len() > EXACT {
                    self.switch_to_histogram();
                }
            }
        }
    }

    fn switch_to_histogram(&mut self) {
        let mut h = BTreeMap::new();
        for v in std::mem::take(&mut self.exact) {
            *h.entry(bucket(v)).or_default() += 1;
        }
        self.hist = Some(h);
    }

    /// Add every value of `other`.
    pub fn merge(&mut self, other: &Quantiles) {
        match &other.hist {
            None => other.exact.iter().for_each(|&v| self.push(v)),
            Some(oh) => {
                if self.hist.is_none() {
                    self.switch_to_histogram();
                }
                if let Some(h) = &mut self.hist {
                    for (&k, &n) in oh {
                        *h.entry(k).or_default() += n;
                    }
                }
                self.count += other.count;
                self.sum += other.sum;
                self.max = self.max.max(other.max);
            }
        }
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The nearest-rank `p` percentile (sorts the exact values in place).
    fn percentile(&mut self, p: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
        match &self.hist {
            None => {
                self.exact.sort_unstable();
                self.exact.get(rank as usize - 1).copied()
            }
            Some(h) => {
                let mut seen = 0;
                h.iter().find_map(|(&k, &n)| {
                    seen += n;
                    (seen >= rank).then_some(floor(k))
                })
            }
        }
    }

    /// Of values in milliseconds, in seconds.
    pub fn seconds(&mut self) -> Stats {
        self.scaled(1000.0)
    }

    /// Of values in units of `1 / scale`.
    pub fn scaled(&mut self, scale: f64) -> Stats {
        let f = |v: Option<u64>| v.map(|v| v as f64 / scale);
        Stats {
            count: self.count,
            mean: (self.count > 0).then(|| self.sum as f64 / self.count as f64 / scale),
            p50: f(self.percentile(0.50)),
            p99: f(self.percentile(0.99)),
            max: f((self.count > 0).then_some(self.max)),
        }
    }
}

/// Slowdowns are kept in millionths.
pub(crate) const RATIO: f64 = 1e6;

pub(crate) fn ratio_units(v: f64) -> u64 {
    (v * RATIO).round() as u64
}

/// Wait, delay, response time and bounded slowdown over jobs or runs, as they end.
#[derive(Clone, Debug, Default)]
pub(crate) struct Times {
    pub completed: u64,
    pub wait: Quantiles,
    pub delay: Quantiles,
    pub response: Quantiles,
    pub slowdown: Quantiles,
}

impl Times {
    pub fn merge(&mut self, o: &Times) {
        self.completed += o.completed;
        self.wait.merge(&o.wait);
        self.delay.merge(&o.delay);
        self.response.merge(&o.response);
        self.slowdown.merge(&o.slowdown);
    }

    pub fn figures(&mut self) -> TimeFigures {
        TimeFigures {
            completed: self.completed,
            wait: self.wait.seconds(),
            delay: self.delay.seconds(),
            response: self.response.seconds(),
            bounded_slowdown: self.slowdown.scaled(RATIO),
        }
    }
}

/// One workflow's SLO record while it has runs to come or going.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkflowSlo {
    /// Runs with a known SLO outcome, and those meeting it.
    pub judged: u64,
    pub met: u64,
    pub ended: u64,
    pub runtime: Quantiles,
}

/// `summary.json`'s `workflow_slos`: one workflow's runs against its SLO.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkflowSloRow {
    pub workflow: String,
    pub tier: u8,
    pub slo_seconds: f64,
    /// Runs that ended, and runs whose SLO outcome is known (ended, or past their deadline).
    pub runs: u64,
    pub runs_with_slo: u64,
    pub met: u64,
    pub success_ratio: Option<f64>,
    /// Runtime (submit → end) of ended runs, seconds.
    pub runtime_p50: Option<f64>,
    pub runtime_p99: Option<f64>,
}

/// Rows of the per-workflow SLO table kept: the least successful first.
pub const SLO_ROWS: usize = 200;

/// Everything about runs that `summary.json` reports, gathered as runs end.
#[derive(Debug, Default)]
pub(crate) struct RunStats {
    pub runs: Times,
    pub ended: u64,
    pub completed: u64,
    pub failed: u64,
    pub unfinished: u64,
    /// Per tier: counts, run figures, and runtimes of every run that ended (failed ones too).
    tiers: BTreeMap<u8, (TierSummary, Times, Quantiles)>,
    /// The least successful workflows with an SLO, by (success, name), at most [`SLO_ROWS`].
    table: BTreeMap<(u64, String), WorkflowSloRow>,
    pub slo_workflows: u64,
}

impl RunStats {
    /// A run ended (or was still going at the end, `end: None`).
    pub fn run(&mut self, r: &RunRecord, tier: u8, slo: &mut WorkflowSlo) {
        let (t, times, runtimes) = self.tiers.entry(tier).or_default();
        let response = r.response().map(Duration::as_millis);
        let slowdown = r.bounded_slowdown().map(ratio_units);
        match (r.end, r.failed) {
            (None, _) => self.unfinished += 1,
            (Some(_), true) => self.failed += 1,
            (Some(_), false) => self.completed += 1,
        }
        if let Some(rt) = response {
            self.ended += 1;
            t.runs += 1;
            runtimes.push(rt);
            slo.ended += 1;
            slo.runtime.push(rt);
        }
        for x in [&mut self.runs, times] {
            if let Some(w) = r.wait() {
                x.wait.push(w.as_millis());
            }
            if let Some(d) = r.delay {
                x.delay.push(d.as_millis());
            }
            if let (Some(rt), false) = (response, r.failed) {
                x.response.push(rt);
                x.completed += 1;
            }
            if let Some(s) = slowdown {
                x.slowdown.push(s);
            }
        }
        if let Some(met) = r.met {
            t.runs_with_slo += 1;
            t.slo_met += u64::from(met);
            slo.judged += 1;
            slo.met += u64::from(met);
        }
    }

    /// A workflow will have no more runs: fold its SLO record into its tier and the table.
    pub fn workflow_done(&mut self, name: &str, tier: u8, slo: Option<Duration>, mut w: WorkflowSlo) {
        if w.judged == 0 {
            return;
        }
        let (t, ..) = self.tiers.entry(tier).or_default();
        t.workflows += 1;
        t.slo_successful_workflows += u64::from(w.met as f64 >= SLO_SUCCESSFUL * w.judged as f64);
        self.slo_workflows += 1;
        let success = w.met as f64 / w.judged as f64;
        let key = ratio_units(success);
        // A full table keeps a row only if it is less successful than its last one (or as
        // successful with an earlier name): most workflows of a long replay are not.
        if self.table.len() >= SLO_ROWS
            && self.table.last_key_value().is_some_and(|((k, n), _)| (key, name) >= (*k, n.as_str()))
        {
            return;
        }
        let runtime = w.runtime.seconds();
        let row = WorkflowSloRow {
            workflow: name.to_string(),
            tier,
            slo_seconds: slo.map_or(0.0, Duration::as_secs_f64),
            runs: w.ended,
            runs_with_slo: w.judged,
            met: w.met,
            success_ratio: Some(success),
            runtime_p50: runtime.p50,
            runtime_p99: runtime.p99,
        };
        // Success in millionths orders the rows; ties go by name.
        self.table.insert((key, name.to_string()), row);
        if self.table.len() > SLO_ROWS {
            self.table.pop_last();
        }
    }

    pub fn tiers(&mut self) -> BTreeMap<String, TierSummary> {
        let mut out: BTreeMap<String, TierSummary> =
            (1..=3).map(|t: u8| (t.to_string(), TierSummary::default())).collect();
        for (tier, (t, x, runtimes)) in &mut self.tiers {
            let mut t = t.clone();
            t.slo_success_ratio = (t.runs_with_slo > 0).then(|| t.slo_met as f64 / t.runs_with_slo as f64);
            let f = x.figures();
            (t.wait_p50, t.wait_p99) = (f.wait.p50, f.wait.p99);
            (t.delay_p50, t.delay_p99) = (f.delay.p50, f.delay.p99);
            (t.bounded_slowdown_mean, t.bounded_slowdown_p99) =
                (f.bounded_slowdown.mean, f.bounded_slowdown.p99);
            let r = runtimes.seconds();
            (t.runtime_p50, t.runtime_p99) = (r.p50, r.p99);
            out.insert(tier.to_string(), t);
        }
        out
    }

    /// The per-workflow SLO table, least successful first.
    pub fn table(&self) -> Vec<WorkflowSloRow> {
        self.table.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_within_a_thousandth() {
        let mut last = 0;
        for v in 0..100_000u64 {
            assert!(bucket(v) >= last, "{v}");
            last = bucket(v);
        }
        for v in (0..100_000u64).chain((0..63).map(|s| (1u64 << s) + 12_345)).chain([u64::MAX / 3, u64::MAX])
        {
            let lo = floor(bucket(v));
            assert!(lo <= v && v - lo <= v / 1024, "{v}: {lo}");
        }
    }

    #[test]
    fn exact_until_the_histogram_then_close() {
        let mut q = Quantiles::default();
        for v in 1..=100u64 {
            q.push(v);
        }
        let s = q.scaled(1.0);
        assert_eq!((s.count, s.p50, s.p99, s.max), (100, Some(50.0), Some(99.0), Some(100.0)));
        assert_eq!(s.mean, Some(50.5));
        let mut big = Quantiles::default();
        for v in 0..(EXACT as u64 + 10) {
            big.push(v * 7);
        }
        assert!(big.hist.is_some());
        let p50 = big.percentile(0.5).expect("p50") as f64;
        let exact = (EXACT as f64 / 2.0 + 5.0) * 7.0;
        assert!((p50 - exact).abs() / exact < 0.001, "{p50} vs {exact}");
        assert_eq!(big.max, (EXACT as u64 + 9) * 7, "max and mean stay exact");
        let mut merged = Quantiles::default();
        merged.merge(&big);
        merged.merge(&q);
        assert_eq!(merged.count(), big.count() + 100);
    }
}
