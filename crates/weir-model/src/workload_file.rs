//! The workload file (`workload.yaml`) exactly as written: every field optional where the
//! format allows, unknown fields rejected. [`crate::Workload`] is the validated form, built by
//! [`crate::Workload::from_yaml`] against a cluster.
//!
//! ```yaml
//! version: 1
//! workflows:
//!   - name: ads-daily-rollup
//!     queue: root.ads.ranking.tier1     # or `project: ads.ranking` (+ `tier`), placed by the cluster
//!     slo: 2h
//!     every: 24h                        # or `arrivals: {poisson: {mean_interval: 10m}}`, or `at: [1h, 5h]`
//!     start: 1h
//!     jobs:
//!       - name: extract
//!         stages:
//!           - {name: map, tasks: 200, resources: {cpu: 1000, memory: 4g},
//!              duration: {lognormal: {median: 120s, p99: 600s}}, failure_probability: 0.01}
//!           - {name: reduce, after: [map], tasks: 20, resources: {cpu: 2000, memory: 8g},
//!              duration: {fixed: 300s}}
//! ```
//!
//! Live runs (`weir serve`) use the same schema: each stage also gives `command` (a shell
//! command line per task), optionally `env` and `max_attempts`, and may leave out `duration`
//! ([`crate::Workload::live_from_file`]). The simulator ignores those fields and requires
//! `duration`.
//!
//! Rules beyond the field types, checked by validation:
//! - Placement: `queue` (an existing leaf; `root.` may be left out) or `project`, not both. A
//!   project goes through the cluster's `placement:` rules (first match; a rule without a tier
//!   matches any tier), else to `root.<project>.tier<N>`, which must be an existing leaf. A project
//!   without `tier` is placed as tier 3, so unclassified work never lands in a critical queue.
//! - `tier` defaults to the leaf's tier, else 3; when both the workflow and its leaf have a tier
//!   they must agree (the queue's tier drives scheduling, the workflow's drives SLO reports).
//! - `user` defaults to the workflow's name rather than one shared user, so that a cluster's
//!   per-user running-app limit applies per workflow instead of capping all workflows together.
//! - At most one of `every`, `arrivals` and `at`; with none, one run at `start` (default 0).
//!   `at` lists the run times themselves (sorted on reading) and takes no `start`.
//! - Names of workflows, of a workflow's jobs and of a job's stages are unique in their list and
//!   contain no dots, brackets or spaces (they appear in error paths). `after` names a sibling
//!   (not itself; repeats are ignored); cycles are errors. Lists are reordered topologically,
//!   the earliest ready item first, so a list already in order keeps it.
//! - `tasks` ≥ 1; a task's resources are non-zero and, rounded up to the scheduler's increment,
//!   fit on at least one node; `failure_probability` in [0, 1); every duration is positive,
//!   `uniform` min ≤ max, lognormal p99 ≥ median (converted with sigma = ln(p99/median) / 2.326348)
//!   or mu finite and sigma ≥ 0; `empirical` is non-empty; `slo` > 0; `every` and `mean_interval`
//!   at least 1s ([`crate::MIN_PERIOD`]: a shorter period is a typo such as `1ms` for `1m`).

use serde::{Deserialize, Serialize};

use crate::resources::PartialResources;
use crate::time::Duration;

/// The whole workload file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    pub version: u32,
    #[serde(default)]
    pub workflows: Vec<WorkflowSpec>,
}

/// A workflow: where it runs, when its runs start, and its DAG of jobs.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpec {
    pub name: String,
    /// A leaf queue such as `root.ads.ranking.tier1`. Either this or `project`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// A project such as `ads.ranking`, placed by the cluster's placement rules (or the default
    /// rule `root.<project>.tier<N>`). Either this or `queue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// 1 to 3; defaults to the tier of the workflow's leaf queue, else 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    /// Runtime SLO of one run: from the run's submission to the end of its last job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Duration>,
    /// How `weir serve` keeps the SLO: `jockey` resizes the run's guaranteed allocation while
    /// it runs (docs/slo.md). Needs `slo`; `weir simulate` ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<GuaranteeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Defaults to the workflow's name, so per-user limits apply per workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The first run (with `every`), the origin of the arrival stream (with `arrivals`), or the
    /// single run (with neither). A span since the start of the simulation; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    /// Recurring runs at `start`, `start + every`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<Duration>,
    /// A random stream of runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<ArrivalsSpec>,
    /// Runs at exactly these times (spans since the start of the simulation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Vec<Duration>>,
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
}

/// How a workflow's SLO is kept beyond its tier's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GuaranteeSpec {
    /// The SLO controller (after Jockey) sets the run's guaranteed allocation as it runs.
    Jockey,
}

/// A random stream of runs.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalsSpec {
    /// Exponentially distributed gaps: `{poisson: {mean_interval: 10m}}`.
    Poisson(PoissonSpec),
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    pub mean_interval: Duration,
}

/// A job: a DAG of stages, submitted when the jobs it comes `after` have finished.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    /// Names of jobs of the same workflow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    #[serde(default)]
    pub stages: Vec<StageSpec>,
    /// All-or-nothing: every set of the job's stages that become ready together starts as one
    /// gang (none of its tasks starts until all of them can). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<bool>,
}

/// A stage: `tasks` identical tasks, requested when the stages it comes `after` have finished.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    pub name: String,
    /// Names of stages of the same job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    pub tasks: u32,
    /// One task's container.
    pub resources: PartialResources,
    /// One task's duration. Required to simulate; optional in a live run (`weir serve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<DistributionSpec>,
    /// Chance that one attempt of a task fails and is retried; default 0. Simulation only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_probability: Option<f64>,
    /// All-or-nothing: none of the stage's tasks starts until all of them can. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<bool>,
    /// The run time each task asks for (an HPC job's requested walltime): what backfilling
    /// plans with. It does not end a task; the duration does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walltime: Option<Duration>,
    /// A fraction of one GPU per task, in thousandths (1 to 999), placed on one physical GPU
    /// with that much free; `resources.gpu` then stays 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_milli: Option<u32>,
    /// GPU models the tasks may run on (a node's `gpu_model`); any when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_models: Vec<String>,
    /// Node labels the tasks may run on (`label in [...]`); any node when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_labels: Vec<String>,
    /// Live runs: the shell command each task runs (`/bin/sh -c`). Ignored by the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Live runs: each task is a Spark application (instead of a `command`), run by a cluster
    /// whose backend is a Spark one. Ignored by the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spark: Option<SparkSpec>,
    /// Live runs: environment variables of each task.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Live runs: attempts a task gets before its job fails (default 3; at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Live runs: prefixes the tasks write through weir's committer (`s3://BUCKET/PREFIX/`
    /// with `{{logical_date}}` and `{{params.NAME}}`); at most one per stage for now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<crate::stage_io::OutputSpec>,
    /// Live runs: prefixes the stage reads; it is held until each is committed and whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<crate::stage_io::InputSpec>,
}

/// A stage whose tasks are Spark applications: `spark: {main: wordcount.py, args: [in.txt]}`,
/// or a JVM application, `spark: {main: org.example.Main, jar: app.jar}`. What `spark-submit`
/// gets: `--master` (the backend's), `--name`, `--class` for a JVM main, `--conf K=V` for each of
/// `conf`, then the file and `args`. Relative paths are taken from the task's working folder.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SparkSpec {
    /// A Python file (`*.py`, a PySpark driver) or a JVM main class (then `jar` is required).
    pub main: String,
    /// The application jar holding a JVM `main` class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jar: Option<String>,
    /// The application's own arguments, after the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Spark properties (`spark.*`), passed as `--conf KEY=VALUE`; `spark.master` and
    /// `spark.submit.deployMode` are the backend's.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub conf: std::collections::BTreeMap<String, String>,
    /// How many executors the application asks for (`spark.executor.instances`; with
    /// `spark-local`, the threads of `local[N]`). Default: the backend decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executors: Option<u32>,
}

/// A task-duration distribution as written: a map with one key naming the kind.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DistributionSpec {
    /// `{fixed: 300s}`
    Fixed(Duration),
    /// `{uniform: {min: 30s, max: 90s}}`
    Uniform(UniformSpec),
    /// `{exponential: {mean: 5m}}`
    Exponential(ExponentialSpec),
    /// `{lognormal: {median: 120s, p99: 600s}}` or `{lognormal: {mu: 4.8, sigma: 0.7}}` (of the
    /// natural log of the duration in seconds).
    LogNormal(LogNormalSpec),
    /// `{empirical: [40s, 45s, 2m]}`: one of the samples, uniformly.
    Empirical(Vec<Duration>),
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UniformSpec {
    pub min: Duration,
    pub max: Duration,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExponentialSpec {
    pub mean: Duration,
}

/// Either `median` and `p99`, or `mu` and `sigma`; validation checks that exactly one pair is given.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LogNormalSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
}

/// Just the names of a workload file's workflows, jobs and stages, read leniently (other fields
/// ignored, a list of the wrong shape read as empty), so that a syntax error's path can name them
/// the way validation errors do.
#[derive(Deserialize)]
struct NamesOnly {
    #[serde(default)]
    workflows: Lenient<WorkflowNames>,
}

#[derive(Deserialize)]
struct WorkflowNames {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    jobs: Lenient<JobNames>,
}

#[derive(Deserialize)]
struct JobNames {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    stages: Lenient<StageNames>,
}

#[derive(Deserialize)]
struct StageNames {
    #[serde(default)]
    name: Option<String>,
}

trait Named {
    fn name(&self) -> Option<&str>;
}

impl Named for WorkflowNames {
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

impl Named for JobNames {
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

impl Named for StageNames {
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// A list, or nothing if the value is not a list. A streaming visitor rather than an untagged
/// enum, which would buffer values and read a plain `on` as a boolean (see `cluster_file.rs`).
struct Lenient<T>(Vec<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ListVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ListVisitor<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("anything")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient<T>, A::Error> {
                let mut list = Vec::new();
                while let Some(item) = seq.next_element()? {
                    list.push(item);
                }
                Ok(Lenient(list))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Lenient<T>, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(Lenient::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
            fn visit_unit<E>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
            fn visit_none<E>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient::default())
            }
        }
        d.deserialize_any(ListVisitor(std::marker::PhantomData))
    }
}

/// Rewrite serde's `workflows[0].jobs[1].stages[2].taks` as
/// `workflows.rollup.jobs.extract.stages.map.taks`, the form validation errors use. Where a name
/// cannot be read the index stays, and so does every segment after it.
pub(crate) fn name_workload_path(text: &str, path: &str) -> String {
    let Ok(names) = serde_saphyr::from_str::<NamesOnly>(text) else {
        return path.to_string();
    };
    let mut out: Vec<String> = Vec::new();
    // The item the previous segment named, while every segment so far named one.
    let mut workflow: Option<&WorkflowNames> = None;
    let mut job: Option<&JobNames> = None;
    let mut naming = true;
    for (depth, segment) in path.split('.').enumerate() {
        let indexed = segment
            .split_once('[')
            .and_then(|(field, rest)| Some((field, rest.strip_suffix(']')?.parse::<usize>().ok()?)));
        let named = match (naming, depth, indexed) {
            (true, 0, Some(("workflows", i))) => names.workflows.0.get(i).and_then(|w| {
                workflow = Some(w);
                usable(w)
            }),
            (true, 1, Some(("jobs", i))) => workflow.and_then(|w| w.jobs.0.get(i)).and_then(|j| {
                job = Some(j);
                usable(j)
            }),
            (true, 2, Some(("stages", i))) => job.and_then(|j| j.stages.0.get(i)).and_then(usable),
            _ => None,
        };
        match (named, indexed) {
            (Some(name), Some((field, _))) => out.push(format!("{field}.{name}")),
            _ => {
                naming = false;
                out.push(segment.to_string());
            }
        }
    }
    out.join(".")
}

/// The item's name if it can stand in a dotted path.
fn usable<T: Named>(item: &T) -> Option<&str> {
    item.name().filter(|n| !n.is_empty() && !n.contains(['.', '[', ']']) && !n.contains(char::is_whitespace))
}
