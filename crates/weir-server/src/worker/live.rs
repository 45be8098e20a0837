//! The actor's picture of its runs: jobs along the job DAG, stages behind their barriers, tasks
//! and their attempts. Built from a stored run (its workflow re-validated against the cluster)
//! and kept in step with the store by the actor.

use std::collections::{BTreeMap, VecDeque};

use weir_backend::Launched;
use weir_engine::{ContainerId, JobId};
use weir_model::{ClusterConfig, Resources, WorkflowSpec, Workload, WorkloadFile};
use weir_store::{AttemptKey, NewJob, NewTask, RunRow};

pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobPhase {
    /// Waits for upstream jobs.
    Pending,
    /// In the engine.
    InEngine,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskPhase {
    /// Its stage waits for upstream stages.
    Pending,
    /// Asked of the engine.
    Ready,
    /// An attempt holds (or is getting) a container.
    Active,
    Done,
    Failed,
}

#[derive(Debug)]
pub struct TaskLive {
    pub phase: TaskPhase,
    /// The highest attempt number started.
    pub attempts: u32,
    pub failures: u32,
}

#[derive(Debug)]
pub struct StageLive {
    pub name: String,
    pub after: Vec<usize>,
    pub next: Vec<usize>,
    pub waiting_on: u32,
    pub resources: Resources,
    /// The nodes its tasks may run on (the stage's `node_labels`, `gpu_models`): what its
    /// requests ask the engine for (`progress::placed`).
    pub selector: weir_engine::Selector,
    pub command: String,
    /// The stage is a Spark application (`command` is then empty).
    pub spark: Option<weir_model::SparkSpec>,
    /// Its tasks asked for together start together or not at all (the stage's `gang: true`,
    /// or its job's).
    pub gang: bool,
    pub env: BTreeMap<String, String>,
    pub max_attempts: u32,
    /// The walltime each task asks for (a Slurm job's time limit), if the stage gives one.
    pub walltime: Option<weir_model::Duration>,
    /// The prefixes its tasks write through the committer (`outputs:`, in order), substituted
    /// (a dry-run's: their shadow prefixes).
    pub outputs: Vec<weir_model::ObjectUri>,
    /// Prefixes whose manifests must check out before its tasks are asked for (`inputs:`).
    pub inputs: Vec<weir_model::ObjectUri>,
    /// Inputs and job commit as the worker tracks them (`worker/commit.rs`).
    pub io: super::commit::StageIo,
    /// Task indices asked of the engine and not yet given a container, in order.
    pub ready: VecDeque<u32>,
    pub done: u32,
    pub tasks: Vec<TaskLive>,
}

#[derive(Debug)]
pub struct JobLive {
    pub name: String,
    pub next: Vec<usize>,
    pub upstream_left: u32,
    pub phase: JobPhase,
    pub started: bool,
    /// `gang: true`: the stages that become ready together start as one gang.
    pub gang: bool,
    pub stages: Vec<StageLive>,
    pub stages_left: u32,
}

#[derive(Debug)]
pub struct RunLive {
    pub id: i64,
    pub workflow: String,
    /// The project it runs for: its tasks run as that project's `run_as` user.
    pub project: String,
    /// The run's tier as stored (metrics).
    pub tier: u8,
    /// The workflow's runtime SLO (metrics count the outcome when the run ends).
    pub slo_ms: Option<i64>,
    pub logical_date: String,
    pub queue: weir_model::QueuePath,
    pub user: String,
    pub priority: Option<i32>,
    pub submitted_ms: i64,
    pub params: BTreeMap<String, String>,
    pub jobs: Vec<JobLive>,
    pub jobs_left: u32,
    pub started: bool,
    /// Attempts of this run holding or getting a container.
    pub active: u32,
    /// Set once the run is being failed or killed: the final state and why.
    pub ending: Option<(&'static str, String)>,
    /// A dry-run: its stages write to shadow prefixes; these are the production outputs (bucket
    /// and what to compare) its verdict is taken against when it ends (`dry_run.rs`).
    pub dry_run: Option<Vec<(String, crate::DeclaredOutput)>>,
    /// The workflow as validated, when it says `guarantee: jockey` (`crate::jockey`).
    pub jockey: Option<std::sync::Arc<weir_model::Workflow>>,
}

/// A task attempt the actor is responsible for.
#[derive(Debug)]
pub struct AttemptLive {
    pub key: AttemptKey,
    pub container: Option<ContainerId>,
    pub launched: Option<Launched>,
    /// The engine took its container: its end is not a failure.
    pub preempted: bool,
    /// A preemption warning that came before the launch record: recorded once it is.
    pub warning: Option<weir_store::Warning>,
    /// The engine lost its container with its node (`nodes: from_backend`): why, and whether
    /// weir killed it for that (`placement: weir`; with `placement: backend` the target placed
    /// it and reports its end, and weir's node is only a share of the capacity).
    pub node_lost: Option<(String, bool)>,
    /// The containers of its Spark executors (a gang with its own, `progress::task_requests`),
    /// given back when it ends. After a restart a re-adopted driver's executors are counted
    /// again (`recover.rs`).
    pub executors: Vec<ContainerId>,
}

/// How a dry-run's output is compared with production's: as its stage declares it.
fn compare_config(spec: &weir_model::OutputSpec) -> weir_commit::CompareConfig {
    let mut c = weir_commit::CompareConfig::new(spec.format);
    if let Some(h) = spec.csv_header {
        c.csv_header = h;
    }
    if let Some(t) = spec.size_tolerance {
        c.size_tolerance = t;
    }
    c
}

/// The production outputs a dry-run's verdict is taken against, by bucket, from the stored
/// run alone (its workflow, logical date and parameters; no cluster needed): what
/// [`RunLive::build`] gathers for a live dry-run, for one that ended without a verdict.
pub fn dry_run_outputs(row: &RunRow) -> Result<Vec<(String, crate::DeclaredOutput)>, String> {
    let spec: WorkflowSpec =
        serde_json::from_str(&row.spec).map_err(|e| format!("stored workflow does not parse: {e}"))?;
    let params: BTreeMap<String, String> = serde_json::from_str(&row.params).unwrap_or_default();
    let mut out = Vec::new();
    for job in &spec.jobs {
        for stage in &job.stages {
            for (i, o) in stage.outputs.iter().enumerate() {
                let uri = weir_model::substitute(&o.uri, &row.logical_date, &params)
                    .and_then(|u| weir_model::parse_object_uri(&u))
                    .map_err(|why| {
                        format!("jobs.{}.stages.{}.outputs[{i}].uri: {why}", job.name, stage.name)
                    })?;
                out.push((
                    uri.bucket,
                    crate::DeclaredOutput { prefix: uri.prefix, compare: compare_config(o) },
                ));
            }
        }
    }
    Ok(out)
}

/// Engine job ids pack the run id and the job's index.
pub fn engine_job(run: i64, job: usize) -> JobId {
    JobId(((run as u64) << 12) | job as u64)
}

pub fn split_job(id: JobId) -> (i64, usize) {
    ((id.0 >> 12) as i64, (id.0 & 0xfff) as usize)
}

pub fn attempt_id(key: &AttemptKey) -> String {
    let t = key.task;
    format!("run-{}/{}/{}/{}/{}", t.run, t.job, t.stage, t.task, key.attempt)
}

impl RunLive {
    /// Re-validate a stored run's workflow against the cluster and lay out its DAG, every task
    /// pending. `Err` says why it can no longer run here.
    /// `max_tasks` bounds the run's tasks: a run stored before a lower limit (or written to the
    /// store by other means) fails with the reason instead of building millions of tasks.
    pub fn build(row: &RunRow, cluster: &ClusterConfig, max_tasks: u64) -> Result<RunLive, String> {
        let spec: WorkflowSpec =
            serde_json::from_str(&row.spec).map_err(|e| format!("stored workflow does not parse: {e}"))?;
        let tasks: u64 = spec.jobs.iter().flat_map(|j| &j.stages).map(|s| u64::from(s.tasks)).sum();
        if tasks > max_tasks {
            return Err(format!(
                "it has {tasks} tasks, more than the server's max_tasks_per_run ({max_tasks})"
            ));
        }
        let file = WorkloadFile { version: 1, workflows: vec![spec.clone()] };
        let workload = Workload::live_from_file("workflow", &file, cluster)
            .map_err(|e| format!("no longer valid on the cluster's configuration: {e}"))?;
        let wf = workload.workflows.into_iter().next().ok_or("the workflow is empty")?;
        let params: BTreeMap<String, String> = serde_json::from_str(&row.params).unwrap_or_default();
        let uri = |here: String, template: &str| {
            weir_model::substitute(template, &row.logical_date, &params)
                .and_then(|u| weir_model::parse_object_uri(&u))
                .map_err(|why| format!("{here}: {why}"))
        };
        let mut jobs: Vec<JobLive> = Vec::with_capacity(wf.jobs.len());
        let mut dry_outputs = Vec::new();
        for (j, job) in wf.jobs.iter().enumerate() {
            let spec_job = spec.jobs.iter().find(|x| x.name == job.name).ok_or("job names changed")?;
            let mut stages: Vec<StageLive> = Vec::with_capacity(job.stages.len());
            for stage in &job.stages {
                let s = spec_job.stages.iter().find(|x| x.name == stage.name).ok_or("stage names changed")?;
                let here = format!("jobs.{}.stages.{}", job.name, stage.name);
                let mut outputs = Vec::with_capacity(s.outputs.len());
                for (i, spec) in s.outputs.iter().enumerate() {
                    let mut o = uri(format!("{here}.outputs[{i}].uri"), &spec.uri)?;
                    // A dry-run writes beside production, under the shadow prefix of its run.
                    if row.dry_run {
                        dry_outputs.push((
                            o.bucket.clone(),
                            crate::DeclaredOutput { prefix: o.prefix.clone(), compare: compare_config(spec) },
                        ));
                        o.prefix = weir_commit::shadow::shadow_prefix(&o.prefix, &row.id.to_string())
                            .map_err(|e| format!("{here}.outputs[{i}].uri: {e}"))?;
                    }
                    outputs.push(o);
                }
                if let Some((a, b)) = weir_model::overlapping_outputs(&outputs) {
                    return Err(format!(
                        "{here}.outputs[{b}].uri: `{}` overlaps outputs[{a}] `{}`",
                        outputs[b], outputs[a]
                    ));
                }
                let inputs = s
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(i, x)| uri(format!("{here}.inputs[{i}].uri"), &x.uri))
                    .collect::<Result<Vec<_>, _>>()?;
                stages.push(StageLive {
                    name: stage.name.clone(),
                    after: stage.after.clone(),
                    next: Vec::new(),
                    waiting_on: stage.after.len() as u32,
                    resources: stage.resources,
                    selector: weir_engine::Selector {
                        labels: stage.placement.node_labels.clone(),
                        gpu_models: stage.placement.gpu_models.clone(),
                    },
                    command: s.command.clone().unwrap_or_default(),
                    spark: s.spark.clone(),
                    gang: stage.gang || job.gang,
                    env: s.env.clone(),
                    max_attempts: s.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
                    walltime: s.walltime,
                    io: super::commit::StageIo::new(!inputs.is_empty()),
                    outputs,
                    inputs,
                    ready: VecDeque::new(),
                    done: 0,
                    tasks: (0..stage.tasks)
                        .map(|_| TaskLive { phase: TaskPhase::Pending, attempts: 0, failures: 0 })
                        .collect(),
                });
            }
            for s in 0..stages.len() {
                for a in stages[s].after.clone() {
                    stages[a].next.push(s);
                }
            }
            jobs.push(JobLive {
                name: job.name.clone(),
                next: Vec::new(),
                upstream_left: job.after.len() as u32,
                phase: JobPhase::Pending,
                started: false,
                gang: job.gang,
                stages_left: stages.len() as u32,
                stages,
            });
            for &a in &job.after {
                jobs[a].next.push(j);
            }
        }
        Ok(RunLive {
            id: row.id,
            workflow: row.workflow.clone(),
            project: row.project.clone(),
            tier: row.tier,
            slo_ms: wf.slo.map(|d| d.as_millis() as i64),
            logical_date: row.logical_date.clone(),
            queue: wf.queue.clone(),
            user: wf.user.clone(),
            priority: wf.priority,
            submitted_ms: row.submitted_ms,
            params,
            jobs_left: jobs.len() as u32,
            jobs,
            started: row.started_ms.is_some(),
            active: 0,
            ending: None,
            dry_run: row.dry_run.then_some(dry_outputs),
            jockey: (spec.guarantee == Some(weir_model::GuaranteeSpec::Jockey))
                .then(|| std::sync::Arc::new(wf.clone())),
        })
    }

    /// The rows a routed run gets: its jobs and every task.
    pub fn new_jobs(&self) -> Vec<NewJob> {
        self.jobs
            .iter()
            .enumerate()
            .map(|(j, job)| NewJob {
                idx: j as u32,
                name: job.name.clone(),
                tasks: job
                    .stages
                    .iter()
                    .enumerate()
                    .flat_map(|(s, st)| {
                        (0..st.tasks.len() as u32).map(move |t| NewTask {
                            stage_idx: s as u32,
                            task_idx: t,
                            stage: st.name.clone(),
                        })
                    })
                    .collect(),
            })
            .collect()
    }
}
