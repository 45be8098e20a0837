//! Progress indicators: how far along a running job is, from which of its tasks are done.
//!
//! Jockey found that how progress is measured decides how well C(p, a) predicts. Two are
//! offered, and [`indicator_error`] measures each on runs held back from the table:
//! - [`Indicator::Work`]: the fraction of the job's expected task-seconds done (DESIGN's p);
//! - [`Indicator::CriticalPath`]: one minus the remaining critical path over the whole one,
//!   where an unfinished stage still counts the part of its long-task time its undone tasks
//!   stand for. A job waiting on a long chain of small stages is not "almost done" because
//!   its big stage is.

use serde::{Deserialize, Serialize};

use crate::profile::JobProfile;
use crate::table::Predictor;

/// Which tasks of a running job are done: per stage (profile order), tasks completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobState {
    pub done: Vec<u32>,
    /// Whether its first task has started (before, the initialization latency is still ahead).
    pub started: bool,
    /// Per stage, the summed durations (ms) of its completed tasks, where the host knows them
    /// (empty: unknown) — what re-estimation compares with the profile ([`JobState::speed`]).
    pub ran_ms: Vec<u64>,
}

/// How many tasks' worth of the profile's expectation re-estimation starts from: a run's first
/// slow task moves its speed a little, ten slow tasks most of the way.
const PRIOR_TASKS: f64 = 10.0;

impl JobState {
    pub fn new(profile: &JobProfile) -> JobState {
        JobState {
            done: vec![0; profile.stages.len()],
            started: false,
            ran_ms: vec![0; profile.stages.len()],
        }
    }

    /// This run's speed against the profile: its completed tasks' time over what the profile
    /// expected of them (stage means), with `PRIOR_TASKS` tasks of expectation on both sides
    /// so a few tasks cannot swing it; 1 while nothing is known. Above 1: slower than the
    /// runs the model learned from.
    pub fn speed(&self, profile: &JobProfile) -> f64 {
        let mut ran = 0.0;
        let mut expected = 0.0;
        let mut tasks = 0.0;
        for ((s, &d), &r) in profile.stages.iter().zip(&self.done).zip(&self.ran_ms) {
            ran += r as f64;
            expected += s.mean_ms * f64::from(d);
            tasks += f64::from(d);
        }
        if tasks == 0.0 || expected <= 0.0 {
            return 1.0;
        }
        let prior = PRIOR_TASKS * expected / tasks;
        (ran + prior) / (expected + prior)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Indicator {
    Work,
    CriticalPath,
}

impl Indicator {
    pub const ALL: [Indicator; 2] = [Indicator::Work, Indicator::CriticalPath];

    pub fn name(self) -> &'static str {
        match self {
            Indicator::Work => "work",
            Indicator::CriticalPath => "critical-path",
        }
    }

    pub fn parse(s: &str) -> Option<Indicator> {
        Indicator::ALL.into_iter().find(|i| i.name() == s)
    }

    /// Progress in [0, 1].
    pub fn progress(self, profile: &JobProfile, state: &JobState) -> f64 {
        let p = match self {
            Indicator::Work => {
                let total = profile.total_work_ms();
                let done: f64 =
                    profile.stages.iter().zip(&state.done).map(|(s, &d)| s.mean_ms * f64::from(d)).sum();
                if total > 0.0 {
                    done / total
                } else {
                    0.0
                }
            }
            Indicator::CriticalPath => {
                let whole = longest_path(profile, |_| 1.0);
                let left = longest_path(profile, |i| {
                    let s = &profile.stages[i];
                    1.0 - f64::from(state.done[i].min(s.tasks)) / f64::from(s.tasks)
                });
                if whole > 0.0 {
                    1.0 - left / whole
                } else {
                    0.0
                }
            }
        };
        p.clamp(0.0, 1.0)
    }
}

/// The longest path through the stage DAG, each stage weighing its long task (p90) times
/// `share(stage)`.
pub(crate) fn longest_path(profile: &JobProfile, share: impl Fn(usize) -> f64) -> f64 {
    let long = crate::profile::QUANTILE_LEVELS.iter().position(|&q| q == 0.9).expect("p90 is kept");
    let mut to_end = vec![0.0f64; profile.stages.len()];
    let mut best = 0.0f64;
    for (i, s) in profile.stages.iter().enumerate() {
        let before = s.after.iter().map(|&a| to_end[a]).fold(0.0, f64::max);
        to_end[i] = before + s.duration_ms[long] as f64 * share(i);
        best = best.max(to_end[i]);
    }
    best
}

/// A point of a held-back run: its state, what it then held, and how long it really had left.
#[derive(Clone, Debug, PartialEq)]
pub struct HeldBackSample {
    pub state: JobState,
    pub allocation: u32,
    pub remaining_ms: u64,
    /// The whole run's length, which the error is measured against.
    pub run_ms: u64,
}

/// How well one predictor did on held-back runs: the median of C(p, a) against what remained.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IndicatorError {
    pub predictor: String,
    pub samples: usize,
    /// Mean |predicted − actual| over the run's length.
    pub mean_abs_error: f64,
    /// The 90th percentile of that.
    pub p90_abs_error: f64,
    /// Mean (predicted − actual) over the run's length: > 0 predicts too long (safe side).
    pub mean_bias: f64,
}

pub fn indicator_error(predictor: &Predictor, samples: &[HeldBackSample]) -> IndicatorError {
    let mut errs: Vec<f64> = Vec::with_capacity(samples.len());
    let mut bias = 0.0;
    for s in samples {
        let predicted = predictor.remaining(&s.state, s.allocation, 0.5) as f64;
        let e = (predicted - s.remaining_ms as f64) / (s.run_ms.max(1) as f64);
        bias += e;
        errs.push(e.abs());
    }
    errs.sort_by(f64::total_cmp);
    let n = errs.len().max(1) as f64;
    IndicatorError {
        predictor: predictor.name(),
        samples: samples.len(),
        mean_abs_error: errs.iter().sum::<f64>() / n,
        p90_abs_error: errs.get(((errs.len() as f64 - 1.0) * 0.9).round() as usize).copied().unwrap_or(0.0),
        mean_bias: bias / n,
    }
}
