//! C(p, a): the distribution of a job's remaining time at progress p under allocation a.
//!
//! Built offline, as Jockey does: the job alone is simulated with weir-sim on a cluster of
//! exactly `a` containers, for every a in 1..=A and many seeds, its task durations drawn from
//! the profile's quantiles and its attempts failing with the profile's probability. Along each
//! run, (progress, remaining) pairs are taken at the start, at every task end and at twenty
//! even points; they are kept as a few quantiles per progress bucket and allocation. A lookup
//! is then a table read, cheap enough for every control period.
//!
//! [`Amdahl`] predicts S + P/a instead (S the remaining critical path, P the remaining work):
//! no simulation, no distribution, no failures.

use serde::{Deserialize, Serialize};
use weir_model::{
    Arrival, ClusterConfig, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow, Workload,
};
use weir_sim::{SimConfig, Simulation, TaskOutcome as SimOutcome, TaskRecord};

use crate::error::SloError;
use crate::profile::JobProfile;
use crate::progress::{longest_path, HeldBackSample, Indicator, JobState};

/// The format version of a table file.
pub const TABLE_VERSION: u32 = 1;

/// The quantiles of remaining time kept per bucket and allocation.
pub const TABLE_QUANTILES: [f64; 6] = [0.5, 0.75, 0.9, 0.95, 0.99, 1.0];

/// How a table is built.
#[derive(Clone, Debug, PartialEq)]
pub struct TableConfig {
    /// Allocations 1..=this are simulated.
    pub max_allocation: u32,
    /// Simulated runs per allocation.
    pub runs: u32,
    /// Progress buckets (of equal width).
    pub buckets: u32,
    pub indicator: Indicator,
    pub seed: u64,
}

impl Default for TableConfig {
    fn default() -> TableConfig {
        TableConfig { max_allocation: 0, runs: 50, buckets: 20, indicator: Indicator::Work, seed: 1 }
    }
}

/// The precomputed C(p, a).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemainingTable {
    pub version: u32,
    pub workflow: String,
    pub job: String,
    pub indicator: Indicator,
    pub buckets: u32,
    pub runs: u32,
    pub seed: u64,
    /// `remaining_ms[a - 1][bucket]`: remaining time at [`TABLE_QUANTILES`], or empty when no
    /// sample fell in the bucket.
    pub remaining_ms: Vec<Vec<Vec<u64>>>,
}

impl RemainingTable {
    pub fn build(profile: &JobProfile, config: &TableConfig) -> Result<RemainingTable, SloError> {
        if config.max_allocation == 0 || config.runs == 0 || config.buckets == 0 {
            return Err(SloError::Setting {
                setting: "table allocations, runs and buckets",
                value: format!("{}, {}, {}", config.max_allocation, config.runs, config.buckets),
                problem: "each must be at least 1",
            });
        }
        let mut remaining_ms = Vec::with_capacity(config.max_allocation as usize);
        for a in 1..=config.max_allocation {
            let mut by_bucket: Vec<Vec<u64>> = vec![Vec::new(); config.buckets as usize];
            for r in 0..config.runs {
                let seed =
                    config.seed.wrapping_mul(1_000_003).wrapping_add(u64::from(a) * 10_007 + u64::from(r));
                for s in simulate_alone(profile, a, seed)? {
                    let p = config.indicator.progress(profile, &s.state);
                    by_bucket[bucket(p, config.buckets)].push(s.remaining_ms);
                }
            }
            remaining_ms.push(
                by_bucket
                    .into_iter()
                    .map(|mut v| {
                        v.sort_unstable();
                        if v.is_empty() {
                            Vec::new()
                        } else {
                            TABLE_QUANTILES.iter().map(|&q| crate::profile::quantile(&v, q)).collect()
                        }
                    })
                    .collect(),
            );
        }
        Ok(RemainingTable {
            version: TABLE_VERSION,
            workflow: profile.workflow.clone(),
            job: profile.job.clone(),
            indicator: config.indicator,
            buckets: config.buckets,
            runs: config.runs,
            seed: config.seed,
            remaining_ms,
        })
    }

    pub fn max_allocation(&self) -> u32 {
        self.remaining_ms.len() as u32
    }

    /// The `q` quantile (the nearest kept level at or above it) of C(p, a), in ms. An
    /// allocation past the table's reads its largest; a bucket no run passed through reads
    /// the nearest lower one that has samples (earlier progress: more left, the safe side).
    pub fn remaining(&self, p: f64, a: u32, q: f64) -> u64 {
        let row = &self.remaining_ms[(a.clamp(1, self.max_allocation()) - 1) as usize];
        let level = TABLE_QUANTILES.iter().position(|&l| l >= q).unwrap_or(TABLE_QUANTILES.len() - 1);
        let b = bucket(p, self.buckets);
        let found = (0..=b).rev().chain(b + 1..row.len()).find(|&i| !row[i].is_empty());
        found.map_or(0, |i| row[i][level])
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a table serializes") + "\n"
    }

    pub fn from_json(file: &str, text: &str) -> Result<RemainingTable, SloError> {
        let bad = |field: String, problem: String| SloError::File { file: file.into(), field, problem };
        let t: RemainingTable = serde_json::from_str(text)
            .map_err(|e| bad(format!("line {} column {}", e.line(), e.column()), e.to_string()))?;
        if t.version != TABLE_VERSION {
            return Err(bad(
                "version".into(),
                format!("{} is not a table version this weir reads", t.version),
            ));
        }
        if t.remaining_ms.is_empty() {
            return Err(bad("remaining_ms".into(), "no allocation".into()));
        }
        for (a, row) in t.remaining_ms.iter().enumerate() {
            if row.len() != t.buckets as usize {
                return Err(bad(
                    format!("remaining_ms[{a}]"),
                    format!("{} buckets, not {}", row.len(), t.buckets),
                ));
            }
            if let Some(b) = row.iter().position(|v| !v.is_empty() && v.len() != TABLE_QUANTILES.len()) {
                return Err(bad(
                    format!("remaining_ms[{a}][{b}]"),
                    format!("{:?}: not one value per quantile", row[b]),
                ));
            }
        }
        Ok(t)
    }
}

fn bucket(p: f64, buckets: u32) -> usize {
    ((p.clamp(0.0, 1.0) * f64::from(buckets)) as usize).min(buckets as usize - 1)
}

/// Amdahl's law for the remaining time: S + P/a, S the remaining critical path (each
/// unfinished stage's long task, p90), P the remaining expected task time.
#[derive(Clone, Debug, PartialEq)]
pub struct Amdahl;

impl Amdahl {
    pub fn remaining(profile: &JobProfile, state: &JobState, a: u32) -> u64 {
        let s = longest_path(profile, |i| if state.done[i] >= profile.stages[i].tasks { 0.0 } else { 1.0 });
        let p: f64 = profile
            .stages
            .iter()
            .zip(&state.done)
            .map(|(st, &d)| st.mean_ms * f64::from(st.tasks.saturating_sub(d)))
            .sum();
        let init = if state.started { 0.0 } else { profile.init_ms as f64 };
        (init + s + p / f64::from(a.max(1))).round() as u64
    }
}

/// A remaining-time model the controller asks: the simulated table or Amdahl's law.
#[derive(Clone, Debug)]
pub enum Predictor {
    Table { profile: JobProfile, table: RemainingTable },
    Amdahl { profile: JobProfile },
}

impl Predictor {
    pub fn name(&self) -> String {
        match self {
            Predictor::Table { table, .. } => format!("C(p,a) {}", table.indicator.name()),
            Predictor::Amdahl { .. } => "amdahl".into(),
        }
    }

    pub fn profile(&self) -> &JobProfile {
        match self {
            Predictor::Table { profile, .. } | Predictor::Amdahl { profile } => profile,
        }
    }

    /// The progress this predictor reads a state as (Amdahl: expected task-seconds done).
    pub fn progress(&self, state: &JobState) -> f64 {
        match self {
            Predictor::Table { profile, table } => table.indicator.progress(profile, state),
            Predictor::Amdahl { profile } => Indicator::Work.progress(profile, state),
        }
    }

    /// The `q` quantile of remaining time in this state under `a` containers, in ms (Amdahl
    /// has one value for every q).
    pub fn remaining(&self, state: &JobState, a: u32, q: f64) -> u64 {
        match self {
            Predictor::Table { profile, table } => {
                table.remaining(table.indicator.progress(profile, state), a, q)
            }
            Predictor::Amdahl { profile } => Amdahl::remaining(profile, state, a),
        }
    }

    /// The largest allocation worth considering.
    pub fn max_allocation(&self) -> u32 {
        match self {
            Predictor::Table { table, .. } => table.max_allocation(),
            Predictor::Amdahl { profile } => profile.max_parallelism(),
        }
    }
}

/// The size of one container in the job-alone simulations (every stage's tasks are given it,
/// so that exactly `a` run at once).
const UNIT: Resources = Resources { cpu: 1000, memory: 1024, gpu: 0 };

/// The job alone on `a` containers, one seed: its (state, remaining) samples, the first at
/// submission (the initialization latency still ahead).
pub fn simulate_alone(profile: &JobProfile, a: u32, seed: u64) -> Result<Vec<HeldBackSample>, SloError> {
    let job = profile_template(profile);
    let cluster_yaml = format!(
        "version: 1\nnodes:\n  - {{count: {a}, resources: {{cpu: {}, memory: {}}}}}\nqueues:\n  - {{name: job}}\n",
        UNIT.cpu, UNIT.memory
    );
    let sim_err = |source| SloError::Sim {
        job: format!("{}.{}", profile.workflow, profile.job),
        allocation: a,
        source: Box::new(source),
    };
    // Built here from a count of at least 1: a parse error would be a bug of this function.
    let cluster = ClusterConfig::from_yaml("(job-alone cluster)", &cluster_yaml)
        .unwrap_or_else(|e| panic!("the job-alone cluster of {a} containers: {e}"));
    let workflow = Workflow {
        name: profile.workflow.clone(),
        queue: QueuePath::parse("root.job").expect("a valid path"),
        tier: 1,
        slo: None,
        priority: None,
        user: "slo".into(),
        arrival: Arrival::At(vec![Time::ZERO]),
        jobs: vec![job],
    };
    let config =
        SimConfig { seed, am: None, max_attempts: 1000, check_invariants: false, ..SimConfig::default() };
    let mut sim =
        Simulation::new(cluster, Workload { workflows: vec![workflow] }, config).map_err(sim_err)?;
    sim.keep_task_records();
    let mut records = Vec::new();
    while sim.step().map_err(sim_err)? {
        records.extend(sim.take_task_records());
    }
    Ok(samples_of_run(profile, &records, Time::ZERO, Duration(profile.init_ms), a))
}

/// The job's template as the profile has it, every task one [`UNIT`] container.
fn profile_template(profile: &JobProfile) -> JobTemplate {
    JobTemplate {
        name: profile.job.clone(),
        after: vec![],
        stages: profile
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| Stage {
                name: s.name.clone(),
                after: s.after.clone(),
                tasks: s.tasks,
                resources: UNIT,
                duration: profile.stage_distribution(i),
                failure_probability: s.failure_probability,
                gang: false,
                walltime: None,
                placement: Default::default(),
                recorded_failure: false,
            })
            .collect(),
        gang: false,
    }
}

/// (state, remaining) samples along one run of the job from its task records (stage indices
/// as the profile's): at its start `start`, at every task end and at twenty even points. The
/// run's end is its last completed task; `init` is added before its first sample (the
/// initialization latency a simulated job does not have).
pub fn samples_of_run(
    profile: &JobProfile,
    records: &[TaskRecord],
    start: Time,
    init: Duration,
    allocation: u32,
) -> Vec<HeldBackSample> {
    let done: Vec<&TaskRecord> = records.iter().filter(|r| r.outcome == SimOutcome::Done).collect();
    let Some(end) = done.iter().map(|r| r.end).max() else { return Vec::new() };
    let first = records.iter().map(|r| r.start).min().unwrap_or(start);
    let run = end.since(start).as_millis() + init.as_millis();
    let mut times: Vec<Time> = done.iter().map(|r| r.end).filter(|&t| t < end).collect();
    let span = end.since(start).as_millis();
    times.extend((0..20).map(|k| start.plus(Duration(span * k / 20))));
    times.sort_unstable();
    times.dedup();
    let mut out =
        vec![HeldBackSample { state: JobState::new(profile), allocation, remaining_ms: run, run_ms: run }];
    for t in times {
        let mut state = JobState::new(profile);
        state.started = t >= first;
        for r in done.iter().filter(|r| r.end <= t) {
            if let Some(d) = state.done.get_mut(r.stage as usize) {
                *d += 1;
            }
        }
        out.push(HeldBackSample { state, allocation, remaining_ms: end.since(t).as_millis(), run_ms: run });
    }
    out
}
