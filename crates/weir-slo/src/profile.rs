//! Job profiles: what earlier runs of a job taught about it.
//!
//! A profile is built from task records (one per task attempt: which stage, how long, how it
//! ended) and the job's stage DAG. It keeps per stage the task count, quantiles of the
//! durations of completed attempts, and the share of attempts that failed; and for the job its
//! initialization latency (submission to first task, the median over runs). It is a small JSON
//! file, versioned: a reader refuses a version it does not know instead of misreading it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_model::{Distribution, Duration, JobTemplate};

use crate::error::SloError;

/// The format version [`JobProfile::to_json`] writes and [`JobProfile::from_json`] reads.
pub const PROFILE_VERSION: u32 = 1;

/// The quantile levels kept of each stage's task durations.
pub const QUANTILE_LEVELS: [f64; 11] = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0];

/// How one task attempt ended (as `tasks.csv`'s `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskOutcome {
    Done,
    Failed,
    /// Preempted or lost with its node: says nothing about the task itself.
    Lost,
}

/// One task attempt of the job, from any source (the simulator's records, `tasks.csv`, later
/// the server's history).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskObservation {
    pub stage: String,
    pub duration: Duration,
    pub outcome: TaskOutcome,
}

/// A job's profile. Stages are in the job's topological order (`after` points backwards).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobProfile {
    pub version: u32,
    pub workflow: String,
    pub job: String,
    /// Runs of the job the profile learned from.
    pub runs: u32,
    /// Median time from the job's submission to its first task, in ms.
    pub init_ms: u64,
    pub stages: Vec<StageProfile>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageProfile {
    pub name: String,
    /// Indices of the stages it waits for (all lower than its own).
    pub after: Vec<usize>,
    pub tasks: u32,
    /// Task durations of completed attempts at [`QUANTILE_LEVELS`], in ms, non-decreasing.
    pub duration_ms: Vec<u64>,
    /// Mean of those durations, in ms.
    pub mean_ms: f64,
    /// Failed attempts over all attempts that ended by themselves (lost ones left out).
    pub failure_probability: f64,
}

impl JobProfile {
    /// A profile of `template` (job `job` of workflow `workflow`) from the attempts of `runs`
    /// runs of it and their initialization latencies.
    pub fn build(
        workflow: &str,
        template: &JobTemplate,
        runs: u32,
        tasks: &[TaskObservation],
        init_latencies: &[Duration],
    ) -> Result<JobProfile, SloError> {
        let mut stages = Vec::with_capacity(template.stages.len());
        let mut any = false;
        for s in &template.stages {
            let mut done: Vec<u64> = Vec::new();
            let mut failed = 0u64;
            for t in tasks.iter().filter(|t| t.stage == s.name) {
                match t.outcome {
                    TaskOutcome::Done => done.push(t.duration.as_millis()),
                    TaskOutcome::Failed => failed += 1,
                    TaskOutcome::Lost => {}
                }
            }
            any |= !done.is_empty();
            done.sort_unstable();
            let duration_ms = if done.is_empty() {
                // Never seen to complete: the declared distribution's mean stands in.
                vec![(s.duration.mean_secs() * 1000.0) as u64; QUANTILE_LEVELS.len()]
            } else {
                QUANTILE_LEVELS.iter().map(|&q| quantile(&done, q)).collect()
            };
            let mean_ms = if done.is_empty() {
                duration_ms[0] as f64
            } else {
                done.iter().map(|&d| d as f64).sum::<f64>() / done.len() as f64
            };
            let attempts = done.len() as u64 + failed;
            stages.push(StageProfile {
                name: s.name.clone(),
                after: s.after.clone(),
                tasks: s.tasks,
                duration_ms,
                // Rounded so that the JSON file reads back to the same value.
                mean_ms: (mean_ms * 10.0).round() / 10.0,
                failure_probability: if attempts == 0 {
                    0.0
                } else {
                    (failed as f64 / attempts as f64 * 1e6).round() / 1e6
                },
            });
        }
        if !any {
            return Err(SloError::NoRecords { job: format!("{workflow}.{}", template.name) });
        }
        let mut init: Vec<u64> = init_latencies.iter().map(|d| d.as_millis()).collect();
        init.sort_unstable();
        let init_ms = if init.is_empty() { 0 } else { quantile(&init, 0.5) };
        Ok(JobProfile {
            version: PROFILE_VERSION,
            workflow: workflow.into(),
            job: template.name.clone(),
            runs,
            init_ms,
            stages,
        })
    }

    /// The profile as pretty JSON (what `weir slo profile` writes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a profile serializes") + "\n"
    }

    /// Read a profile written by [`JobProfile::to_json`]; `file` names it in errors, which name
    /// the field and value at fault.
    pub fn from_json(file: &str, text: &str) -> Result<JobProfile, SloError> {
        let bad = |field: String, problem: String| SloError::File { file: file.into(), field, problem };
        let p: JobProfile = serde_json::from_str(text)
            .map_err(|e| bad(format!("line {} column {}", e.line(), e.column()), e.to_string()))?;
        if p.version != PROFILE_VERSION {
            return Err(bad(
                "version".into(),
                format!(
                    "{} is not a profile version this weir reads (it reads {PROFILE_VERSION})",
                    p.version
                ),
            ));
        }
        if p.stages.is_empty() {
            return Err(bad("stages".into(), "empty: a job has at least one stage".into()));
        }
        for (i, s) in p.stages.iter().enumerate() {
            let at = |f: &str| format!("stages[{i}] ({}).{f}", s.name);
            if let Some(&a) = s.after.iter().find(|&&a| a >= i) {
                return Err(bad(
                    at("after"),
                    format!("{a} is not an earlier stage (stages are in DAG order)"),
                ));
            }
            if s.duration_ms.len() != QUANTILE_LEVELS.len() {
                return Err(bad(
                    at("duration_ms"),
                    format!(
                        "{} values; expected {} (one per quantile level)",
                        s.duration_ms.len(),
                        QUANTILE_LEVELS.len()
                    ),
                ));
            }
            if s.duration_ms.windows(2).any(|w| w[0] > w[1]) {
                return Err(bad(at("duration_ms"), format!("{:?} is not non-decreasing", s.duration_ms)));
            }
            if !(0.0..1.0).contains(&s.failure_probability) {
                return Err(bad(
                    at("failure_probability"),
                    format!("{} is not in [0, 1)", s.failure_probability),
                ));
            }
            if s.tasks == 0 {
                return Err(bad(at("tasks"), "0: a stage has at least one task".into()));
            }
        }
        Ok(p)
    }

    /// The stage's task durations as the simulator's distribution: 100 points at the middle of
    /// each percentile, interpolated between the kept quantiles.
    pub fn stage_distribution(&self, stage: usize) -> Distribution {
        let q = &self.stages[stage].duration_ms;
        if q.first() == q.last() {
            return Distribution::Fixed(Duration(q[0].max(1)));
        }
        let points: Vec<Duration> =
            (0..100).map(|i| Duration(interpolate(q, (i as f64 + 0.5) / 100.0).max(1))).collect();
        Distribution::Empirical(Arc::<[Duration]>::from(points))
    }

    /// The most tasks that can run at once: the largest stage (stages may overlap, but a
    /// stage's tasks are the job's usual peak).
    pub fn max_parallelism(&self) -> u32 {
        self.stages.iter().map(|s| s.tasks).max().unwrap_or(1)
    }

    /// Expected task-seconds of the whole job, in ms (failures not counted).
    pub fn total_work_ms(&self) -> f64 {
        self.stages.iter().map(|s| s.mean_ms * f64::from(s.tasks)).sum()
    }
}

/// The `q` quantile of sorted values (nearest rank).
pub(crate) fn quantile(sorted: &[u64], q: f64) -> u64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A duration at level `q` from the kept quantiles, linear between levels.
fn interpolate(values: &[u64], q: f64) -> u64 {
    for (i, w) in QUANTILE_LEVELS.windows(2).enumerate() {
        if q <= w[1] {
            let f = (q - w[0]) / (w[1] - w[0]);
            return (values[i] as f64 + f * (values[i + 1] as f64 - values[i] as f64)).round() as u64;
        }
    }
    values[values.len() - 1]
}

/// The simulator's task records of one job of a workflow (`workflow_index` and `template` as
/// the records number them), as observations for [`JobProfile::build`].
pub fn observations(
    records: &[weir_sim::TaskRecord],
    workflow: &weir_model::Workflow,
    workflow_index: u32,
    template: u32,
) -> Vec<TaskObservation> {
    let Some(job) = workflow.jobs.get(template as usize) else { return Vec::new() };
    records
        .iter()
        .filter(|r| r.workflow == workflow_index && r.template == template)
        .filter_map(|r| {
            Some(TaskObservation {
                stage: job.stages.get(r.stage as usize)?.name.clone(),
                duration: r.end.since(r.start),
                outcome: match r.outcome {
                    weir_sim::TaskOutcome::Done => TaskOutcome::Done,
                    weir_sim::TaskOutcome::Failed => TaskOutcome::Failed,
                    weir_sim::TaskOutcome::Lost => TaskOutcome::Lost,
                },
            })
        })
        .collect()
}
