//! The control loop: every period, the allocation that meets the deadline at least cost.
//!
//! For the job's progress p and each allocation a, the predicted completion is
//! `elapsed + slack(p) × C_q(p, a)` — a high quantile q of the remaining time, stretched by a
//! slack that starts pessimistic (room for failures and slow nodes early on, when most can
//! still go wrong) and relaxes to `slack_end` as the job advances. The utility of that
//! completion, less a small cost per container, picks the target: the smallest allocation of
//! the best score. Three things keep the allocation from flapping, as in Jockey:
//! - a **dead zone**: while the current allocation is predicted to finish within `dead_zone`
//!   before the deadline (on time, not wastefully early), it stays;
//! - **hysteresis**: a raise is applied at once (being late is what the loop exists to avoid),
//!   a cut only by the share `hysteresis` of the gap each period;
//! - never below `min_allocation` (a job at 0 makes no progress) nor above the largest the
//!   model knows.
//!
//! Two guards against the model's own errors:
//! - predictions are made **monotone** in the allocation: a job is never predicted to finish
//!   sooner on fewer containers than on more. C(p, a) is estimated from a few runs per a and
//!   its high quantiles are noisy, so the remaining times over a = 1..A are replaced by their
//!   non-increasing least-squares fit (isotonic regression, pool-adjacent-violators): a noisy
//!   pair is averaged, not resolved to its worse value (which would bias every prediction up);
//! - with `reestimate`, the remaining time is stretched by the run's **speed** so far
//!   ([`JobState::speed`]: its completed tasks' time over what the profile expected of them),
//!   when it is slower than the profile — a run on slow nodes or with a slowed stage is
//!   re-planned as soon as its tasks show it, not only when its progress falls behind.
//!   A cut is never made while the current allocation is predicted late.

use serde::Serialize;

use crate::progress::JobState;
use crate::table::Predictor;

/// Piecewise linear utility of a completion time (ms from the job's submission): `value` up
/// to the deadline, falling by `penalty_per_hour` per hour late, and `after_cutoff` once later
/// than the cut-off, if there is one.
#[derive(Clone, Debug, PartialEq)]
pub struct Utility {
    pub deadline_ms: u64,
    pub value: f64,
    pub penalty_per_hour: f64,
    pub cutoff_ms: Option<u64>,
    pub after_cutoff: f64,
}

impl Utility {
    /// Full value 1 up to the deadline, −1 per hour late, no cut-off.
    pub fn deadline(deadline_ms: u64) -> Utility {
        Utility { deadline_ms, value: 1.0, penalty_per_hour: 1.0, cutoff_ms: None, after_cutoff: 0.0 }
    }

    pub fn at(&self, completion_ms: u64) -> f64 {
        if completion_ms <= self.deadline_ms {
            return self.value;
        }
        if self.cutoff_ms.is_some_and(|c| completion_ms > c) {
            return self.after_cutoff;
        }
        self.value - self.penalty_per_hour * (completion_ms - self.deadline_ms) as f64 / 3_600_000.0
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ControlConfig {
    /// The quantile of C(p, a) planned for.
    pub quantile: f64,
    /// The slack factor at progress 0 and at progress 1 (linear between).
    pub slack_start: f64,
    pub slack_end: f64,
    /// Keep the allocation while its predicted completion is this close before the deadline.
    pub dead_zone_ms: u64,
    /// The share of the gap a cut closes per period (1: at once).
    pub hysteresis: f64,
    pub min_allocation: u32,
    /// Cost of one container, in utility units (small: it only breaks ties between
    /// allocations that all meet the deadline, towards fewer containers).
    pub cost_per_container: f64,
    /// Stretch predictions by the run's observed speed when slower than the profile.
    pub reestimate: bool,
}

impl Default for ControlConfig {
    fn default() -> ControlConfig {
        ControlConfig {
            quantile: 0.95,
            slack_start: 1.3,
            slack_end: 1.05,
            dead_zone_ms: 0,
            hysteresis: 0.5,
            min_allocation: 1,
            cost_per_container: 1e-4,
            reestimate: true,
        }
    }
}

/// One control step's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub elapsed_ms: u64,
    pub progress: f64,
    pub slack: f64,
    /// The run's speed the prediction was stretched by (1: as the profile, or not re-estimating).
    pub speed: f64,
    pub allocation: u32,
    /// The best allocation this period, before the dead zone and hysteresis.
    pub target: u32,
    /// Predicted completion (from submission, ms) under the chosen allocation, slack included.
    pub predicted_ms: u64,
    pub reason: &'static str,
}

/// A job's controller: its predictor, utility and settings, and the allocation it last chose.
#[derive(Clone, Debug)]
pub struct Controller {
    pub predictor: Predictor,
    pub utility: Utility,
    pub config: ControlConfig,
    current: Option<u32>,
}

impl Controller {
    pub fn new(predictor: Predictor, utility: Utility, config: ControlConfig) -> Controller {
        Controller { predictor, utility, config, current: None }
    }

    pub fn current(&self) -> Option<u32> {
        self.current
    }

    /// Carry on from an allocation chosen before (by this controller's earlier life, before a
    /// restart): the next step treats it as the current allocation — a raise, a cut by
    /// hysteresis or the dead zone — instead of a first decision. Clamped to the model's range.
    pub fn resume(&mut self, allocation: u32) {
        let (min, max) = self.bounds();
        self.current = Some(allocation.clamp(min, max));
    }

    fn bounds(&self) -> (u32, u32) {
        let max = self.predictor.max_allocation().max(1);
        (self.config.min_allocation.clamp(1, max), max)
    }

    /// Predicted completion under `a` in this state: slack and speed included, never sooner
    /// than under any larger allocation.
    pub fn predicted(&self, elapsed_ms: u64, state: &JobState, a: u32) -> u64 {
        let all = self.predictions(elapsed_ms, state);
        all[(a.clamp(1, all.len() as u32) - 1) as usize]
    }

    /// Predicted completions under a = 1..=max (index a − 1), made non-increasing in a.
    fn predictions(&self, elapsed_ms: u64, state: &JobState) -> Vec<u64> {
        let (_, max) = self.bounds();
        let q = self.config.quantile;
        let raw: Vec<f64> = (1..=max).map(|a| self.predictor.remaining(state, a, q) as f64).collect();
        let stretch = self.slack(state) * self.speed(state);
        non_increasing(&raw).into_iter().map(|r| elapsed_ms + (r * stretch).round() as u64).collect()
    }

    /// The run's speed against the profile when re-estimating and slower (else 1).
    pub fn speed(&self, state: &JobState) -> f64 {
        if self.config.reestimate {
            state.speed(self.predictor.profile()).max(1.0)
        } else {
            1.0
        }
    }

    fn slack(&self, state: &JobState) -> f64 {
        let p = self.predictor.progress(state);
        self.config.slack_start + (self.config.slack_end - self.config.slack_start) * p
    }

    /// The best allocation for this state: the highest utility less container cost, the
    /// smallest of equals.
    pub fn target(&self, elapsed_ms: u64, state: &JobState) -> u32 {
        let (min, max) = self.bounds();
        let predictions = self.predictions(elapsed_ms, state);
        let mut best = (f64::NEG_INFINITY, min);
        for a in min..=max {
            let score = self.utility.at(predictions[(a - 1) as usize])
                - self.config.cost_per_container * f64::from(a);
            if score > best.0 + 1e-12 {
                best = (score, a);
            }
        }
        best.1
    }

    /// The allocation before the job starts (what a static policy would give it throughout).
    pub fn initial(&self) -> u32 {
        let state = JobState::new(self.predictor.profile());
        self.target(0, &state)
    }

    /// What the admission check needs of this job: the containers it starts at and whether
    /// they are predicted to meet its deadline.
    pub fn admission(&self, name: &str) -> crate::admission::AdmittedJob {
        let state = JobState::new(self.predictor.profile());
        let a = self.initial();
        crate::admission::AdmittedJob {
            name: name.into(),
            allocation: a,
            feasible: self.predicted(0, &state, a) <= self.utility.deadline_ms,
        }
    }

    /// One control period: choose and remember the allocation.
    pub fn step(&mut self, elapsed_ms: u64, state: &JobState) -> Decision {
        let target = self.target(elapsed_ms, state);
        let (allocation, reason) = match self.current {
            None => (target, "first decision"),
            Some(cur) if target > cur => (target, "behind: raised"),
            Some(cur) => {
                let now = self.predicted(elapsed_ms, state, cur);
                let deadline = self.utility.deadline_ms;
                if target == cur {
                    (cur, "on track")
                } else if now > deadline {
                    // Fewer containers are predicted no sooner: more cannot be worse.
                    (cur, "late: kept")
                } else if now + self.config.dead_zone_ms >= deadline {
                    (cur, "dead zone: on time, kept")
                } else {
                    let step =
                        (f64::from(cur - target) * self.config.hysteresis.clamp(0.0, 1.0)).ceil() as u32;
                    (cur - step.max(1).min(cur - target), "ahead: lowered")
                }
            }
        };
        self.current = Some(allocation);
        Decision {
            elapsed_ms,
            progress: self.predictor.progress(state),
            slack: self.slack(state),
            speed: self.speed(state),
            allocation,
            target,
            predicted_ms: self.predicted(elapsed_ms, state, allocation),
            reason,
        }
    }
}

/// The non-increasing sequence closest to `y` in least squares (pool adjacent violators):
/// wherever a value exceeds the one before, the run is replaced by its mean.
fn non_increasing(y: &[f64]) -> Vec<f64> {
    // Blocks of (sum, count), each mean no larger than the one before.
    let mut blocks: Vec<(f64, usize)> = Vec::with_capacity(y.len());
    for &v in y {
        blocks.push((v, 1));
        while blocks.len() > 1 {
            let (s, n) = blocks[blocks.len() - 1];
            let (ps, pn) = blocks[blocks.len() - 2];
            if s / n as f64 <= ps / pn as f64 {
                break;
            }
            blocks.pop();
            let last = blocks.len() - 1;
            blocks[last] = (ps + s, pn + n);
        }
    }
    blocks.into_iter().flat_map(|(s, n)| std::iter::repeat_n(s / n as f64, n)).collect()
}
