//! The validated workload: workflows → jobs (a DAG) → stages (a DAG of identical tasks).
//!
//! This is what the simulator runs, whatever it came from: a `workload.yaml` (see
//! `workload_file.rs`) or a trace importer in weir-sim. Dependencies are indices into the
//! enclosing list and always point backwards (`after[i] < own index`), so every DAG here is
//! acyclic and already in a topological order.

use std::sync::Arc;

use crate::cluster::ClusterConfig;
use crate::error::{parse_yaml_named, ModelError};
use crate::queue_path::QueuePath;
use crate::resources::Resources;
use crate::time::{Duration, Time};
use crate::workload_file::{name_workload_path, WorkloadFile};
use crate::workload_validation::Validator;

#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub workflows: Vec<Workflow>,
}

impl Workload {
    /// Parse and validate a workload file against the cluster it runs on (which places
    /// workflows given by project and decides whether every task fits on some node). `file`
    /// names it in errors.
    pub fn from_yaml(file: &str, text: &str, cluster: &ClusterConfig) -> Result<Workload, ModelError> {
        let raw: WorkloadFile = parse_yaml_named(file, text, name_workload_path)?;
        Workload::from_file(file, &raw, cluster)
    }

    /// Validate a workload for a live run (`weir serve`): as [`Workload::from_file`], except
    /// that every stage needs a `command` and may leave out `duration` (then a zero
    /// `Fixed` duration stands in; the server never reads it).
    pub fn live_from_file(
        file: &str,
        raw: &WorkloadFile,
        cluster: &ClusterConfig,
    ) -> Result<Workload, ModelError> {
        let mut v = Validator::new(cluster);
        v.live = true;
        let workload = v.workload(raw);
        if v.problems.is_empty() {
            Ok(workload)
        } else {
            Err(ModelError::Invalid { file: file.to_string(), problems: v.problems })
        }
    }

    /// Validate a parsed workload file, collecting every problem before failing.
    pub fn from_file(
        file: &str,
        raw: &WorkloadFile,
        cluster: &ClusterConfig,
    ) -> Result<Workload, ModelError> {
        let mut v = Validator::new(cluster);
        let workload = v.workload(raw);
        if v.problems.is_empty() {
            Ok(workload)
        } else {
            Err(ModelError::Invalid { file: file.to_string(), problems: v.problems })
        }
    }
}

/// The shortest `every` and Poisson `mean_interval` a workload may ask for. Batch workflows do
/// not recur faster; below it the period is a typo (`1ms` for `1m`).
pub const MIN_PERIOD: Duration = Duration(1000);

/// A recurring (or one-off) DAG of jobs with an owner queue, a tier and a runtime SLO.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    pub name: String,
    /// The leaf queue its jobs are submitted to.
    pub queue: QueuePath,
    /// 1 (most critical) to 3.
    pub tier: u8,
    /// Runtime SLO of one run: from the run's submission to the end of its last job.
    pub slo: Option<Duration>,
    /// Job priority handed to the engine; `None` lets the queue's (tier's) priority apply.
    pub priority: Option<i32>,
    /// The user its jobs run as (for per-user running-app limits).
    pub user: String,
    pub arrival: Arrival,
    /// In topological order: `jobs[i].after` holds indices below `i`.
    pub jobs: Vec<JobTemplate>,
}

/// When the runs of a workflow are submitted.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    /// A run at each of these times (sorted, non-decreasing). Trace importers use this with a
    /// single time.
    At(Vec<Time>),
    /// A run at `start`, `start + every`, `start + 2·every`, …
    Every { start: Time, every: Duration },
    /// Runs whose gaps are exponentially distributed with this mean, the first one `start` plus
    /// one gap.
    Poisson { start: Time, mean_interval: Duration },
}

#[derive(Clone, Debug, PartialEq)]
pub struct JobTemplate {
    pub name: String,
    /// Jobs of the same workflow that must finish before this one is submitted.
    pub after: Vec<usize>,
    /// In topological order: `stages[i].after` holds indices below `i`.
    pub stages: Vec<Stage>,
    /// Every set of stages that become ready together starts as one gang (all or nothing).
    pub gang: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub name: String,
    /// Stages of the same job whose tasks must all finish before this stage's tasks are requested.
    pub after: Vec<usize>,
    /// Number of identical tasks, each needing one container; at least 1.
    pub tasks: u32,
    pub resources: Resources,
    pub duration: Distribution,
    /// Probability in [0, 1) that one attempt of a task fails (at a uniformly drawn point of
    /// its duration) and is retried.
    pub failure_probability: f64,
    /// All-or-nothing: none of the stage's tasks starts until all of them can.
    pub gang: bool,
    /// The run time each task asks for (an HPC job's requested walltime), which backfilling
    /// plans with; `None` when unknown. The duration, not this, ends a task.
    pub walltime: Option<Duration>,
    /// Where the tasks may run, and what share of a GPU each takes.
    pub placement: TaskPlacement,
    /// Replays a failure a trace recorded: each task's one attempt fails at the end of its
    /// duration, is not retried, and fails its job. Trace importers only.
    pub recorded_failure: bool,
}

/// A task's GPU share and the nodes it may run on. The default places anywhere with no
/// fractional GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskPlacement {
    /// A fraction of one GPU, in thousandths (1 to 999), taken on one physical GPU; 0 when the
    /// task asks for whole GPUs (`resources.gpu`) or none.
    pub gpu_milli: u32,
    /// GPU models the task may run on; any when empty.
    pub gpu_models: Vec<String>,
    /// Node labels the task may run on; any node when empty.
    pub node_labels: Vec<String>,
}

impl TaskPlacement {
    /// Whether a node of this label and GPU model may hold the task (its size aside).
    pub fn allows(&self, label: Option<&str>, gpu_model: Option<&str>) -> bool {
        let listed = |list: &[String], v: Option<&str>| {
            list.is_empty() || v.is_some_and(|v| list.iter().any(|x| x == v))
        };
        listed(&self.node_labels, label) && listed(&self.gpu_models, gpu_model)
    }

    pub fn is_default(&self) -> bool {
        *self == TaskPlacement::default()
    }
}

/// A task-duration distribution. Samples are whole milliseconds, at least 1.
#[derive(Clone, Debug, PartialEq)]
pub enum Distribution {
    Fixed(Duration),
    Uniform {
        min: Duration,
        max: Duration,
    },
    Exponential {
        mean: Duration,
    },
    /// ln(duration in seconds) ~ Normal(mu, sigma). The file form `{median, p99}` converts to
    /// mu = ln(median), sigma = (ln(p99) − ln(median)) / 2.326348.
    LogNormal {
        mu: f64,
        sigma: f64,
    },
    /// One of these samples, uniformly; never empty. Shared, not copied, between the copies of
    /// a job that a trace import replicates (SLS `job.count`, `--load-scale`).
    Empirical(Arc<[Duration]>),
}

impl Distribution {
    /// The mean in seconds (for sizing: SLO floors, critical paths, C(p,a) tables).
    pub fn mean_secs(&self) -> f64 {
        match self {
            Distribution::Fixed(d) => d.as_secs_f64(),
            Distribution::Uniform { min, max } => (min.as_secs_f64() + max.as_secs_f64()) / 2.0,
            Distribution::Exponential { mean } => mean.as_secs_f64(),
            Distribution::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            Distribution::Empirical(samples) => {
                samples.iter().map(|d| d.as_secs_f64()).sum::<f64>() / samples.len().max(1) as f64
            }
        }
    }
}

impl JobTemplate {
    /// Σ over stages of tasks × mean task duration: the container-seconds one run needs.
    pub fn total_task_secs(&self) -> f64 {
        self.stages.iter().map(|s| s.tasks as f64 * s.duration.mean_secs()).sum()
    }

    /// The longest chain of stage mean durations (a lower bound on the job's runtime).
    pub fn critical_path_secs(&self) -> f64 {
        let mut finish = vec![0.0f64; self.stages.len()];
        for (i, s) in self.stages.iter().enumerate() {
            let ready = s.after.iter().map(|&u| finish[u]).fold(0.0, f64::max);
            finish[i] = ready + s.duration.mean_secs();
        }
        finish.into_iter().fold(0.0, f64::max)
    }
}

impl Workflow {
    /// The longest chain of job critical paths in one run.
    pub fn critical_path_secs(&self) -> f64 {
        let mut finish = vec![0.0f64; self.jobs.len()];
        for (i, j) in self.jobs.iter().enumerate() {
            let ready = j.after.iter().map(|&u| finish[u]).fold(0.0, f64::max);
            finish[i] = ready + j.critical_path_secs();
        }
        finish.into_iter().fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(after: Vec<usize>, secs: u64) -> Stage {
        Stage {
            name: "s".into(),
            after,
            tasks: 2,
            resources: Resources::new(1000, 1024, 0),
            duration: Distribution::Fixed(Duration::from_secs(secs)),
            failure_probability: 0.0,
            gang: false,
            walltime: None,
            placement: TaskPlacement::default(),
            recorded_failure: false,
        }
    }

    #[test]
    fn critical_path_follows_the_longest_chain() {
        let job = JobTemplate {
            name: "j".into(),
            after: vec![],
            stages: vec![stage(vec![], 10), stage(vec![], 100), stage(vec![0, 1], 5), stage(vec![0], 1)],
            gang: false,
        };
        assert_eq!(job.critical_path_secs(), 105.0);
        assert_eq!(job.total_task_secs(), 2.0 * (10.0 + 100.0 + 5.0 + 1.0));
    }

    #[test]
    fn means_of_distributions() {
        let s = Duration::from_secs;
        assert_eq!(Distribution::Uniform { min: s(30), max: s(90) }.mean_secs(), 60.0);
        assert_eq!(Distribution::Empirical(vec![s(1), s(2), s(6)].into()).mean_secs(), 3.0);
        let median = Distribution::LogNormal { mu: 100f64.ln(), sigma: 0.0 };
        assert!((median.mean_secs() - 100.0).abs() < 1e-9);
    }
}
