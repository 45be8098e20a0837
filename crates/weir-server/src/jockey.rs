//! Deadline guarantees in `weir serve` (issue 23): a run of a workflow with `guarantee: jockey`
//! gets weir-slo's controller while it runs (docs/slo.md).
//!
//! - **Profile from history.** When the engine actor first sees such a run, a background task
//!   reads the workflow's earlier successful runs on this cluster from the store (the same
//!   history `weir plan --server` reads: run records and successful attempts' durations, the
//!   last [`HISTORY_DAYS`] days, submitted before this run), builds a `JobProfile` of its job and
//!   a C(p, a) table by job-alone simulation. With fewer than [`MIN_RUNS`] earlier runs, a
//!   workflow of more than one job, or a job with a gang stage, the run falls back to its tier's rules,
//!   and a decision row says so.
//! - **Control on the actor's clock.** Every control period (a twentieth of the deadline,
//!   between 1 s and 1 min) the controller reads the run's progress (tasks done per stage, and
//!   their measured durations for re-estimation) and chooses an allocation; the actor applies it
//!   as the job's guarantee in the engine (`Engine::set_job_guarantee`: that many containers of
//!   the job's largest task).
//! - **Recorded.** Every change of allocation (and every tenth of progress) is a
//!   `Change::SloDecision` in the actor's fenced batch: the run's page and `GET /api/v1/runs/ID`
//!   show them.
//!
//! [`check`] is the admission check `weir submit --check-slo` asks for.
//!
//! **Across restarts.** The profile a run's controller was built from is stored with the run
//! (`Change::SloModel`, schema 20) the first time it is built. After a restart or a lease
//! moving to another worker, the run's controller is rebuilt from that stored profile (not
//! from a history that may have moved on), its measured task durations are read back from
//! the run's succeeded attempts, and it carries on from the last allocation it recorded; a
//! decision row (`resumed: …`) says so.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use weir_model::{Duration as ModelDuration, JobTemplate, Resources, Workflow};
use weir_slo::{
    ControlConfig, Controller, JobProfile, JobState, Predictor, RemainingTable, TableConfig, TaskObservation,
    TaskOutcome, Utility,
};
use weir_store::{Change, JobStore, SloDecisionRow, SloModelRow};

/// Earlier successful runs a profile needs; with fewer the run keeps its tier's rules.
pub const MIN_RUNS: usize = 3;
/// How far back the history is read.
pub const HISTORY_DAYS: i64 = 30;
/// Simulated runs per allocation in the run's C(p, a) table.
const TABLE_RUNS: u32 = 20;
/// The largest allocation a table knows (and the controller can guarantee).
const MAX_ALLOCATION: u32 = 128;

/// A controller ready for a run, or why it has none.
type Built = Result<Box<Model>, String>;

/// What a run's build hands the actor.
pub(crate) struct Model {
    controller: Controller,
    /// The profile to store with the run (a first build), as weir-slo's JSON.
    to_store: Option<String>,
    /// Read back from the store (a restart): when it was first built, and the allocation the
    /// controller last recorded.
    resumed: Option<(i64, Option<u32>)>,
    /// The run's succeeded attempts the store holds: (stage, task, ms).
    measured: Vec<(u32, u32, u64)>,
}

/// What the book knows of one guarded run.
enum Phase {
    /// Its profile and table are being built (one background task per run).
    Building,
    /// Its tier's rules apply (the reason is recorded once).
    Fallback,
    Active {
        controller: Box<Controller>,
        next_step_ms: i64,
        last: Option<Recorded>,
    },
}

/// The last decision written, to write only what changed.
#[derive(Clone, Copy)]
struct Recorded {
    allocation: u32,
    progress: f64,
}

struct Guarded {
    phase: Phase,
    /// Measured durations (ms) of the job's completed tasks, by (stage, task): from the
    /// actor's own exits and, after a restart, from the store (each task counted once).
    ran: BTreeMap<(u32, u32), u64>,
    stages: usize,
}

impl Guarded {
    /// Summed measured durations by stage (what re-estimation compares with the profile).
    fn ran_ms(&self) -> Vec<u64> {
        let mut out = vec![0; self.stages];
        for (&(s, _), &ms) in &self.ran {
            if let Some(o) = out.get_mut(s as usize) {
                *o += ms;
            }
        }
        out
    }
}

/// The engine actor's guarded runs.
pub(crate) struct JockeyBook {
    runs: BTreeMap<i64, Guarded>,
    tx: UnboundedSender<(i64, Built)>,
    rx: UnboundedReceiver<(i64, Built)>,
}

impl Default for JockeyBook {
    fn default() -> JockeyBook {
        let (tx, rx) = unbounded_channel();
        JockeyBook { runs: BTreeMap::new(), tx, rx }
    }
}

/// What the book needs of a live run at a step.
pub(crate) struct RunView<'a> {
    pub id: i64,
    pub workflow: &'a Workflow,
    pub submitted_ms: i64,
    /// Tasks done per stage of its job.
    pub done: Vec<u32>,
    pub started: bool,
    /// The job is in the engine (a guarantee can be set).
    pub in_engine: bool,
}

/// What the actor does with a step's outcome.
pub(crate) struct Apply {
    pub run: i64,
    /// The job's new guarantee.
    pub guarantee: Resources,
}

impl JockeyBook {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// A completed attempt of a guarded run: its measured time joins its stage's.
    pub fn task_done(&mut self, run: i64, job: usize, stage: usize, task: u32, ran_ms: Option<u64>) {
        if let (0, Some(g), Some(ms)) = (job, self.runs.get_mut(&run), ran_ms) {
            if stage < g.stages {
                g.ran.insert((stage as u32, task), ms);
            }
        }
    }

    /// One control step over the guarded runs: start building controllers for new ones,
    /// take the ones built, drop the runs that left, and step those whose period is due.
    /// Returns the guarantees to set and pushes the decisions to record onto `changes`.
    pub fn step(
        &mut self,
        now_ms: i64,
        cluster: &str,
        store: &Arc<dyn JobStore>,
        scheduler: &weir_model::SchedulerConfig,
        live: &[RunView<'_>],
        changes: &mut Vec<Change>,
    ) -> Vec<Apply> {
        while let Ok((run, built)) = self.rx.try_recv() {
            let Some(g) = self.runs.get_mut(&run) else { continue };
            let deadline_ms = live.iter().find(|r| r.id == run).and_then(deadline).unwrap_or(0);
            match built {
                Ok(model) => {
                    let Model { mut controller, to_store, resumed, measured } = *model;
                    for (stage, task, ms) in measured {
                        if (stage as usize) < g.stages {
                            g.ran.entry((stage, task)).or_insert(ms);
                        }
                    }
                    if let Some(profile) = to_store {
                        changes.push(Change::SloModel(SloModelRow {
                            run_id: run,
                            job_idx: 0,
                            built_ms: now_ms,
                            profile,
                        }));
                    }
                    if let (Some((built_ms, allocation)), Some(r)) =
                        (resumed, live.iter().find(|r| r.id == run))
                    {
                        if let Some(a) = allocation {
                            controller.resume(a);
                        }
                        let state = JobState { done: r.done.clone(), started: r.started, ran_ms: g.ran_ms() };
                        let elapsed = (now_ms - r.submitted_ms).max(0) as u64;
                        let a = controller.current().unwrap_or(0);
                        changes.push(Change::SloDecision(SloDecisionRow {
                            run_id: run,
                            job_idx: 0,
                            at_ms: now_ms,
                            elapsed_ms: elapsed as i64,
                            progress_ppm: (controller.predictor.progress(&state) * 1e6).round() as i64,
                            speed_ppm: (controller.speed(&state) * 1e6).round() as i64,
                            allocation: a,
                            target: a,
                            predicted_ms: if a > 0 { controller.predicted(elapsed, &state, a) as i64 } else { 0 },
                            deadline_ms: deadline_ms as i64,
                            reason: format!(
                                "resumed: the model stored at +{} ({} earlier runs), {} completed task(s) measured",
                                secs(built_ms - r.submitted_ms),
                                controller.predictor.profile().runs,
                                g.ran.len()
                            ),
                        }));
                    }
                    g.phase = Phase::Active { controller: Box::new(controller), next_step_ms: 0, last: None };
                }
                Err(why) => {
                    g.phase = Phase::Fallback;
                    changes.push(Change::SloDecision(fallback_row(run, now_ms, deadline_ms, why)));
                }
            }
        }
        self.runs.retain(|id, _| live.iter().any(|r| r.id == *id));
        let mut out = Vec::new();
        for r in live {
            let Some(deadline_ms) = deadline(r) else { continue };
            let g = match self.runs.entry(r.id) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    let stages = r.workflow.jobs.first().map_or(0, |j| j.stages.len());
                    v.insert(Guarded { phase: Phase::Building, ran: BTreeMap::new(), stages });
                    spawn_build(&self.tx, r, cluster, store, deadline_ms);
                    continue;
                }
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            };
            let ran_ms = g.ran_ms();
            let Phase::Active { controller, next_step_ms, last } = &mut g.phase else { continue };
            if !r.in_engine || now_ms < *next_step_ms {
                continue;
            }
            *next_step_ms = now_ms + period_ms(deadline_ms);
            let state = JobState { done: r.done.clone(), started: r.started, ran_ms };
            let elapsed = (now_ms - r.submitted_ms).max(0) as u64;
            let d = controller.step(elapsed, &state);
            let changed = last.is_none_or(|l| l.allocation != d.allocation);
            if changed {
                out.push(Apply {
                    run: r.id,
                    guarantee: unit(r.workflow, scheduler).times(u64::from(d.allocation)),
                });
            }
            if changed || last.is_none_or(|l| d.progress - l.progress >= 0.1) {
                *last = Some(Recorded { allocation: d.allocation, progress: d.progress });
                changes.push(Change::SloDecision(SloDecisionRow {
                    run_id: r.id,
                    job_idx: 0,
                    at_ms: now_ms,
                    elapsed_ms: elapsed as i64,
                    progress_ppm: (d.progress * 1e6).round() as i64,
                    speed_ppm: (d.speed * 1e6).round() as i64,
                    allocation: d.allocation,
                    target: d.target,
                    predicted_ms: d.predicted_ms as i64,
                    deadline_ms: deadline_ms as i64,
                    reason: d.reason.to_string(),
                }));
            }
        }
        out
    }
}

/// Build a run's controller in the background; its answer comes back on `tx`.
fn spawn_build(
    tx: &UnboundedSender<(i64, Built)>,
    r: &RunView<'_>,
    cluster: &str,
    store: &Arc<dyn JobStore>,
    deadline_ms: u64,
) {
    let (tx, store, cluster, workflow, run, before) =
        (tx.clone(), store.clone(), cluster.to_string(), r.workflow.clone(), r.id, r.submitted_ms);
    tokio::spawn(async move {
        let built = build_for_run(&*store, &cluster, &workflow, run, before, deadline_ms).await;
        let _ = tx.send((run, built));
    });
}

/// The run's deadline (its SLO). The actor hands in only runs whose stored workflow says
/// `guarantee: jockey`, which validation lets through only with an `slo`.
fn deadline(r: &RunView<'_>) -> Option<u64> {
    r.workflow.slo.map(|d| d.as_millis())
}

/// A control period for a deadline: a twentieth of it, between 1 s and 1 min.
pub fn period_ms(deadline_ms: u64) -> i64 {
    (deadline_ms / 20).clamp(1000, 60_000) as i64
}

/// One container of the job: its largest task, as the scheduler normalizes it.
fn unit(w: &Workflow, scheduler: &weir_model::SchedulerConfig) -> Resources {
    w.jobs
        .first()
        .map(|j| {
            j.stages
                .iter()
                .map(|s| scheduler.normalize(&s.resources))
                .fold(Resources::ZERO, |a, r| a.component_max(&r))
        })
        .unwrap_or(Resources::ZERO)
}

fn fallback_row(run: i64, now_ms: i64, deadline_ms: u64, why: String) -> SloDecisionRow {
    SloDecisionRow {
        run_id: run,
        job_idx: 0,
        at_ms: now_ms,
        elapsed_ms: 0,
        progress_ppm: 0,
        speed_ppm: 1_000_000,
        allocation: 0,
        target: 0,
        predicted_ms: 0,
        deadline_ms: deadline_ms as i64,
        reason: format!("fallback: {why}; the tier's rules apply"),
    }
}

/// The controller's settings for a live run: evaluate's defaults, with the dead zone a tenth of
/// the deadline at most (3 minutes before a 10-second deadline would never cut).
pub fn control_config(deadline_ms: u64) -> ControlConfig {
    ControlConfig {
        quantile: 0.99,
        slack_start: 1.5,
        slack_end: 1.2,
        dead_zone_ms: (deadline_ms / 10).min(180_000),
        hysteresis: 0.5,
        ..ControlConfig::default()
    }
}

/// A profile of the workflow's job from its earlier successful runs on `cluster` (submitted
/// before `before_ms`, in the last [`HISTORY_DAYS`] days, other than `run`), or why not.
pub async fn profile_from_history(
    store: &dyn JobStore,
    cluster: &str,
    workflow: &Workflow,
    run: i64,
    before_ms: i64,
) -> Result<JobProfile, String> {
    let job = single_job(workflow)?;
    let since = before_ms - HISTORY_DAYS * 86_400_000;
    let records = store
        .run_records(Some(cluster), None, since, before_ms)
        .await
        .map_err(|e| format!("cannot read the workflow's history: {e}"))?;
    let earlier: BTreeMap<i64, i64> = records
        .iter()
        .filter(|r| r.workflow == workflow.name && r.id != run && r.state == "succeeded")
        .filter_map(|r| Some((r.id, r.started_ms? - r.submitted_ms)))
        .collect();
    if earlier.len() < MIN_RUNS {
        return Err(format!(
            "{} earlier successful run(s) of {} on {cluster} in the last {HISTORY_DAYS} days; a profile needs {MIN_RUNS}",
            earlier.len(),
            workflow.name
        ));
    }
    let attempts = store
        .workflow_attempt_durations(cluster, &workflow.name, since, before_ms)
        .await
        .map_err(|e| format!("cannot read the workflow's task history: {e}"))?;
    let tasks: Vec<TaskObservation> = attempts
        .iter()
        .filter(|a| a.job == 0 && earlier.contains_key(&a.run))
        .filter_map(|a| {
            Some(TaskObservation {
                stage: job.stages.get(a.stage as usize)?.name.clone(),
                duration: ModelDuration(a.ms.max(0) as u64),
                outcome: TaskOutcome::Done,
            })
        })
        .collect();
    let init: Vec<ModelDuration> = earlier.values().map(|&ms| ModelDuration(ms.max(0) as u64)).collect();
    JobProfile::build(&workflow.name, job, earlier.len() as u32, &tasks, &init).map_err(|e| e.to_string())
}

fn single_job(workflow: &Workflow) -> Result<&JobTemplate, String> {
    match workflow.jobs.as_slice() {
        [job] if job.stages.iter().any(|s| s.gang) => Err(format!(
            "the controller guards jobs of independent tasks; stage {} of {} is a gang",
            job.stages.iter().find(|s| s.gang).map_or("?", |s| s.name.as_str()),
            workflow.name
        )),
        [job] => Ok(job),
        jobs => {
            Err(format!("the controller guards workflows of one job; {} has {}", workflow.name, jobs.len()))
        }
    }
}

/// A run's controller: from the profile stored with the run when it has one (it was built
/// before a restart), else from history (and the profile is to be stored); with the run's
/// measured durations and last allocation from the store.
pub(crate) async fn build_for_run(
    store: &dyn JobStore,
    cluster: &str,
    workflow: &Workflow,
    run: i64,
    before_ms: i64,
    deadline_ms: u64,
) -> Built {
    let read = |e: weir_store::StoreError| format!("cannot read the run's model: {e}");
    let measured = store
        .succeeded_attempt_ms(run, 0)
        .await
        .map_err(read)?
        .into_iter()
        .map(|m| (m.stage, m.task, m.ms.max(0) as u64))
        .collect();
    match store.slo_model(run, 0).await.map_err(read)? {
        Some(stored) => {
            let profile = JobProfile::from_json(&format!("the stored model of run {run}"), &stored.profile)
                .map_err(|e| e.to_string())?;
            let controller = controller_for(profile, deadline_ms).await?;
            let last = store
                .slo_decisions(run)
                .await
                .map_err(read)?
                .iter()
                .rev()
                .find(|d| d.job_idx == 0 && d.allocation > 0)
                .map(|d| d.allocation);
            Ok(Box::new(Model {
                controller,
                to_store: None,
                resumed: Some((stored.built_ms, last)),
                measured,
            }))
        }
        None => {
            let profile = profile_from_history(store, cluster, workflow, run, before_ms).await?;
            let to_store = Some(profile.to_json());
            let controller = controller_for(profile, deadline_ms).await?;
            Ok(Box::new(Model { controller, to_store, resumed: None, measured }))
        }
    }
}

/// The controller of a new run of `workflow` (the admission check's): profile from history.
pub async fn build(
    store: &dyn JobStore,
    cluster: &str,
    workflow: &Workflow,
    run: i64,
    before_ms: i64,
    deadline_ms: u64,
) -> Result<Box<Controller>, String> {
    let profile = profile_from_history(store, cluster, workflow, run, before_ms).await?;
    Ok(Box::new(controller_for(profile, deadline_ms).await?))
}

/// A controller for `profile`: its C(p, a) table by job-alone simulation (off the actor's
/// thread: it is CPU work; the same profile gives the same table).
async fn controller_for(profile: JobProfile, deadline_ms: u64) -> Result<Controller, String> {
    tokio::task::spawn_blocking(move || -> Result<Controller, String> {
        let config = TableConfig {
            max_allocation: profile.max_parallelism().min(MAX_ALLOCATION),
            runs: TABLE_RUNS,
            ..TableConfig::default()
        };
        let table = RemainingTable::build(&profile, &config).map_err(|e| e.to_string())?;
        Ok(Controller::new(
            Predictor::Table { profile, table },
            Utility::deadline(deadline_ms),
            control_config(deadline_ms),
        ))
    })
    .await
    .map_err(|e| format!("building the model failed: {e}"))?
}

/// The admission check for a submission (`weir submit --check-slo`, `POST /v1/slo/check`):
/// the controller's first allocation for a new run of the workflow (its model built from its
/// history as a run's would be), against the containers of its size the cluster holds less the
/// allocations of the guarded runs running there now (their latest decisions). Conservative, as
/// `weir_slo::admit`: it assumes they all overlap the new run.
pub(crate) async fn check_handler(
    axum::extract::State(s): axum::extract::State<crate::state::AppState>,
    headers: axum::http::HeaderMap,
    b: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::Json<weir_api::SloCheck>, crate::error::ApiError> {
    use crate::error::ApiError;
    let principal = s.principal(&headers).await?;
    let b = crate::state::body(b)?;
    let req = crate::submit::parse_body(&b, crate::state::is_yaml(&headers))?;
    let spec_value =
        req.workflow.ok_or_else(|| ApiError::invalid("give the `workflow` to check").field("workflow"))?;
    let spec = crate::submit::workflow_spec(&spec_value)?;
    let accepted = crate::submit::accept_on(&s.registry, spec, &s.limits, req.cluster.as_deref())?;
    principal.require(&accepted.owner, weir_api::Role::Submitter)?;
    let Some(loaded) = s.registry.cluster(&accepted.cluster) else {
        return Err(ApiError::invalid(format!("cluster `{}` is not configured", accepted.cluster)));
    };
    let file = weir_model::WorkloadFile { version: 1, workflows: vec![accepted.spec.clone()] };
    let workload = weir_model::Workload::live_from_file("workflow", &file, &loaded.config)
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    let Some(workflow) = workload.workflows.into_iter().next() else {
        return Err(ApiError::invalid("the file has no workflow").field("workflow"));
    };
    let Some(slo) = workflow.slo else {
        return Err(ApiError::invalid(format!(
            "{} has no `slo`: there is no deadline to check",
            workflow.name
        ))
        .field("workflow.slo"));
    };
    let deadline_ms = slo.as_millis();
    let now = crate::time::now_ms();
    let answer = |admitted, allocation, reason| weir_api::SloCheck {
        workflow: workflow.name.clone(),
        cluster: accepted.cluster.clone(),
        admitted,
        allocation,
        deadline_ms: deadline_ms as i64,
        reason,
    };
    let controller = match build(&*s.store, &accepted.cluster, &workflow, -1, now + 1, deadline_ms).await {
        Ok(c) => c,
        Err(why) => {
            return Ok(axum::Json(answer(
                None,
                None,
                format!("no model: {why}; a run keeps its tier's rules"),
            )))
        }
    };
    // The guarded runs running on the cluster, at their latest allocations.
    let mut admitted = Vec::new();
    let records =
        s.store.run_records(Some(&accepted.cluster), None, now - HISTORY_DAYS * 86_400_000, now + 1).await?;
    for r in records.iter().filter(|r| !matches!(r.state.as_str(), "succeeded" | "failed" | "killed")) {
        let decisions = s.store.slo_decisions(r.id).await?;
        if let Some(d) = decisions.last().filter(|d| d.allocation > 0) {
            admitted.push(weir_slo::AdmittedJob {
                name: format!("{} (run {})", r.workflow, r.id),
                allocation: d.allocation,
                feasible: true,
            });
        }
    }
    let capacity = containers_in(loaded.config.total_resources(), unit(&workflow, &loaded.config.scheduler));
    let new = controller.admission(&workflow.name);
    let verdict = weir_slo::admit(&new, &admitted, capacity);
    Ok(axum::Json(answer(Some(verdict.admitted), Some(new.allocation), verdict.reason)))
}

/// How many containers of `unit` fit in `total` (by every resource the unit asks for).
fn containers_in(total: Resources, unit: Resources) -> u32 {
    [(total.cpu, unit.cpu), (total.memory, unit.memory), (total.gpu, unit.gpu)]
        .iter()
        .filter(|(_, u)| *u > 0)
        .map(|(t, u)| t / u)
        .min()
        .unwrap_or(0)
        .min(u64::from(u32::MAX)) as u32
}

/// A stored decision as the API shows it.
pub fn wire_decision(d: &SloDecisionRow) -> weir_api::SloDecision {
    weir_api::SloDecision {
        at_ms: d.at_ms,
        elapsed_ms: d.elapsed_ms,
        progress: d.progress_ppm as f64 / 1e6,
        speed: d.speed_ppm as f64 / 1e6,
        allocation: d.allocation,
        target: d.target,
        predicted_ms: d.predicted_ms,
        deadline_ms: d.deadline_ms,
        reason: d.reason.clone(),
    }
}

/// One decision in the run page's table.
pub struct DecisionLine {
    pub at: String,
    pub progress: String,
    pub speed: String,
    pub allocation: u32,
    pub target: u32,
    pub predicted: String,
    pub deadline: String,
    pub reason: String,
}

fn secs(ms: i64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

pub fn decision_line(d: &SloDecisionRow) -> DecisionLine {
    DecisionLine {
        at: format!("+{}", secs(d.elapsed_ms)),
        progress: format!("{:.0}%", d.progress_ppm as f64 / 1e4),
        speed: format!("{:.2}", d.speed_ppm as f64 / 1e6),
        allocation: d.allocation,
        target: d.target,
        predicted: if d.predicted_ms > 0 { format!("+{}", secs(d.predicted_ms)) } else { String::new() },
        deadline: format!("+{}", secs(d.deadline_ms)),
        reason: d.reason.clone(),
    }
}

/// The allocation over time (a step line) against progress (dots, as a share of the height)
/// and the deadline (a dashed line), from submission; `end_ms` (the run's end, from
/// submission) closes the steps. Empty without decisions.
pub fn decisions_svg(decisions: &[SloDecisionRow], end_ms: Option<i64>) -> String {
    use std::fmt::Write;
    let Some(last) = decisions.last() else { return String::new() };
    let (w, h, left, top, bottom) = (640.0, 200.0, 40.0, 10.0, 30.0);
    let deadline = decisions.iter().map(|d| d.deadline_ms).max().unwrap_or(0);
    let end = end_ms.unwrap_or(last.elapsed_ms).max(last.elapsed_ms);
    let span = (deadline.max(end) as f64 * 1.05).max(1.0);
    let top_a = decisions.iter().map(|d| d.allocation.max(d.target)).max().unwrap_or(1).max(1) as f64;
    let x = |ms: i64| left + (w - left - 10.0) * ms as f64 / span;
    let y = |v: f64| top + (h - top - bottom) * (1.0 - v);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"guarantee-chart\" width=\"{w}\" height=\"{h}\" \
         role=\"img\" aria-label=\"allocation over time against progress and the deadline\">"
    );
    let _ = write!(
        svg,
        "<line x1=\"{left}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#888\"/>\
         <text x=\"2\" y=\"{t}\" font-size=\"11\">{top_a}</text><text x=\"2\" y=\"{b}\" font-size=\"11\">0</text>\
         <text x=\"{left}\" y=\"{lb}\" font-size=\"11\">0s</text><text x=\"{rx}\" y=\"{lb}\" font-size=\"11\" text-anchor=\"end\">{rs}</text>",
        b = y(0.0),
        r = w - 10.0,
        t = y(1.0) + 10.0,
        lb = h - 8.0,
        rx = w - 10.0,
        rs = secs(span as i64),
    );
    let dx = x(deadline);
    let _ = write!(
        svg,
        "<line class=\"deadline\" x1=\"{dx:.1}\" y1=\"{t}\" x2=\"{dx:.1}\" y2=\"{b}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>\
         <text x=\"{tx:.1}\" y=\"{t2}\" font-size=\"11\" fill=\"#c00\" text-anchor=\"end\">deadline</text>",
        t = y(1.0),
        b = y(0.0),
        t2 = y(1.0) + 10.0,
        // Left of the line: the deadline sits near the right edge, and the word would be cut.
        tx = dx - 3.0,
    );
    let mut path = String::new();
    let mut prev: Option<(f64, f64)> = None;
    for d in decisions.iter().filter(|d| !d.reason.starts_with("fallback")) {
        let (px, py) = (x(d.elapsed_ms), y(f64::from(d.allocation) / top_a));
        match prev {
            None => {
                let _ = write!(path, "M{px:.1},{py:.1}");
            }
            Some((_, qy)) => {
                let _ = write!(path, " L{px:.1},{qy:.1} L{px:.1},{py:.1}");
            }
        }
        prev = Some((px, py));
        let _ = write!(
            svg,
            "<circle class=\"progress\" cx=\"{px:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#2a7\"><title>{:.0}% done at +{}</title></circle>",
            y(d.progress_ppm as f64 / 1e6),
            d.progress_ppm as f64 / 1e4,
            secs(d.elapsed_ms)
        );
    }
    if let Some((_, qy)) = prev {
        let _ = write!(path, " L{:.1},{qy:.1}", x(end));
        let _ = write!(
            svg,
            "<path class=\"allocation\" d=\"{path}\" fill=\"none\" stroke=\"#36c\" stroke-width=\"2\"/>"
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    //! The profile a live run gets is built from what the store recorded of its workflow's
    //! earlier runs: a real SQLite store, runs written through the worker's own changes.
    use std::sync::Arc;

    use weir_model::{ClusterConfig, Workload};
    use weir_store::{AttemptKey, Change, JobStore, NewJob, NewRun, NewTask, Submitted, TaskKey};

    use super::*;

    const CLUSTER: &str = "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 8000, memory: 16g}}\nqueues:\n  - {name: slo, tier: 1}\n";
    const WORKLOAD: &str = "version: 1\nworkflows:\n  - name: nightly\n    queue: root.slo\n    slo: 40s\n    guarantee: jockey\n    jobs:\n      - name: work\n        stages:\n          - {name: map, tasks: 2, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1s}}\n          - {name: reduce, after: [map], tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1s}}\n";

    fn new_run(workflow: &str, date: &str, at: i64) -> NewRun {
        NewRun {
            route: None,
            workflow: workflow.into(),
            project: "slo".into(),
            tier: 1,
            logical_date: date.into(),
            cluster: "c".into(),
            queue: "root.slo".into(),
            spec: "{}".into(),
            params: "{}".into(),
            submitted_by: "admin".into(),
            user: "u".into(),
            client: None,
            submitted_ms: at,
            slo_ms: Some(40_000),
            idempotency_key: None,
            request_hash: String::new(),
            idempotency_after_ms: 0,
            dry_run: false,
        }
    }

    /// A run of `workflow` submitted at `at`, started 500 ms later, whose map tasks take
    /// `map_ms` each and reduce task `reduce_ms`; it ends in `state`.
    async fn record(
        store: &Arc<dyn JobStore>,
        fence: &weir_store::Fence,
        workflow: &str,
        at: i64,
        map_ms: [i64; 2],
        reduce_ms: i64,
        state: &'static str,
    ) -> i64 {
        let id = match &store.submit(&[new_run(workflow, &format!("d{at}"), at)]).await.expect("submit")[0] {
            Submitted::Created { id } => *id,
            other => panic!("{other:?}"),
        };
        let task = |stage: u32, name: &str, idx: u32| NewTask {
            stage_idx: stage,
            task_idx: idx,
            stage: name.into(),
        };
        let jobs = vec![NewJob {
            idx: 0,
            name: "work".into(),
            tasks: vec![task(0, "map", 0), task(0, "map", 1), task(1, "reduce", 0)],
        }];
        let mut changes = vec![
            Change::Route { run: id, jobs, at },
            Change::RunState { run: id, to: "running", at: at + 500, reason: None },
        ];
        let spans = [
            (0, 0, at + 500, map_ms[0]),
            (0, 1, at + 500, map_ms[1]),
            (1, 0, at + 500 + map_ms[0].max(map_ms[1]), reduce_ms),
        ];
        for (stage, t, start, ms) in spans {
            let key = AttemptKey { task: TaskKey { run: id, job: 0, stage, task: t }, attempt: 1 };
            changes.push(Change::AttemptStarting {
                key,
                node: "n".into(),
                stdout: String::new(),
                stderr: String::new(),
                at: start,
            });
            changes.push(Change::AttemptLaunched { key, launched: "{}".into(), at: start });
            changes.push(Change::AttemptEnded {
                key,
                to: "succeeded",
                exit_code: Some(0),
                at: start + ms,
                reason: None,
            });
        }
        if state != "running" {
            changes.push(Change::RunState { run: id, to: state, at: at + 20_000, reason: None });
        }
        let applied = store.apply(fence, i64::MAX / 2, &changes).await.expect("apply");
        assert!(applied.iter().all(|&a| a), "{applied:?}");
        id
    }

    /// A fresh SQLite store in its own folder (`tag` names it), cluster `c`'s lease, and the
    /// test workload's workflow.
    async fn fixture(tag: &str) -> (Arc<dyn JobStore>, weir_store::Fence, Workflow) {
        let dir = std::env::temp_dir().join(format!("weir-jockey-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let store =
            weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await.expect("sqlite");
        let fence =
            store.acquire_lease("c", "me", None, 0, i64::MAX / 2).await.expect("lease").expect("free");
        let cluster = ClusterConfig::from_yaml("cluster.yaml", CLUSTER).expect("cluster");
        let workflow =
            Workload::from_yaml("w.yaml", WORKLOAD, &cluster).expect("workload").workflows.remove(0);
        (store, fence, workflow)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_profile_is_built_from_the_workflows_successful_runs_only() {
        let (store, fence, workflow) = fixture("history").await;
        let day = 86_400_000;
        let now = 40 * day;
        // Two successful runs: too few for a profile, and the run says how many it had.
        record(&store, &fence, "nightly", now - 3 * day, [1000, 1200], 3000, "succeeded").await;
        record(&store, &fence, "nightly", now - 2 * day, [1100, 1300], 3100, "succeeded").await;
        // A failed run, another workflow's run and one older than the window say nothing.
        record(&store, &fence, "nightly", now - day, [9000, 9000], 9000, "failed").await;
        record(&store, &fence, "other", now - day, [9000, 9000], 9000, "succeeded").await;
        record(&store, &fence, "nightly", now - 31 * day, [9000, 9000], 9000, "succeeded").await;
        let why = profile_from_history(&*store, "c", &workflow, -1, now).await.unwrap_err();
        assert_eq!(why, "2 earlier successful run(s) of nightly on c in the last 30 days; a profile needs 3");
        let third = record(&store, &fence, "nightly", now - day / 2, [1400, 1600], 3200, "succeeded").await;
        // The run itself is not its own history.
        let why = profile_from_history(&*store, "c", &workflow, third, now).await.unwrap_err();
        assert!(why.starts_with("2 earlier successful run(s)"), "{why}");
        let p = profile_from_history(&*store, "c", &workflow, -1, now).await.expect("profile");
        assert_eq!((p.workflow.as_str(), p.job.as_str(), p.runs), ("nightly", "work", 3));
        // Every run started 500 ms after its submission.
        assert_eq!(p.init_ms, 500);
        assert_eq!(p.stages[0].name, "map");
        assert_eq!(p.stages[0].tasks, 2);
        // Six map attempts 1000..1600: nearest-rank quantiles 0, 50 and 100%, and the mean.
        assert_eq!(
            (p.stages[0].duration_ms[0], p.stages[0].duration_ms[3], p.stages[0].duration_ms[10]),
            (1000, 1300, 1600)
        );
        assert_eq!(p.stages[0].mean_ms, 1266.7);
        assert_eq!((p.stages[1].name.as_str(), p.stages[1].after.as_slice()), ("reduce", &[0usize][..]));
        assert_eq!((p.stages[1].duration_ms[0], p.stages[1].duration_ms[10]), (3000, 3200));
        assert_eq!(p.stages[1].failure_probability, 0.0);
    }

    /// After a restart, a run's controller comes from the profile stored with the run, not from
    /// the history (which has moved on: a fourth run with other durations succeeded since), with
    /// the run's measured durations and its last allocation from the store. A run with no stored
    /// model is built from history and hands its profile over to be stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_runs_controller_comes_from_its_stored_model() {
        let (store, fence, workflow) = fixture("resume").await;
        let day = 86_400_000;
        let now = 40 * day;
        for (i, map) in [[1000, 1200], [1100, 1300], [1400, 1600]].into_iter().enumerate() {
            record(&store, &fence, "nightly", now - (3 - i as i64) * day, map, 3000, "succeeded").await;
        }
        // The guarded run: its map tasks took 2.5 s and 3.5 s (slower than its history).
        let run = record(&store, &fence, "nightly", now, [2500, 3500], 3000, "running").await;
        // First build: from history, and the profile is handed over to be stored.
        let first = build_for_run(&*store, "c", &workflow, run, now, 40_000).await.expect("built");
        let stored = first.to_store.clone().expect("a profile to store");
        assert!(first.resumed.is_none());
        assert_eq!(first.controller.predictor.profile().runs, 3);
        // The history moves on: a fourth run, much slower, succeeds (submitted before the run,
        // so a rebuild from history would now count it).
        record(&store, &fence, "nightly", now - day / 2, [9000, 9000], 9000, "succeeded").await;
        let rebuilt = profile_from_history(&*store, "c", &workflow, run, now).await.expect("profile");
        assert_eq!(rebuilt.runs, 4);
        // What the actor writes: the model and a decision at 5 containers.
        let changes = vec![
            Change::SloModel(SloModelRow {
                run_id: run,
                job_idx: 0,
                built_ms: now + 700,
                profile: stored.clone(),
            }),
            Change::SloDecision(SloDecisionRow {
                run_id: run,
                job_idx: 0,
                at_ms: now + 900,
                elapsed_ms: 900,
                progress_ppm: 0,
                speed_ppm: 1_000_000,
                allocation: 5,
                target: 5,
                predicted_ms: 20_000,
                deadline_ms: 40_000,
                reason: "first decision".into(),
            }),
        ];
        assert_eq!(store.apply(&fence, i64::MAX / 2, &changes).await.expect("apply"), vec![true, true]);
        // After the restart: the stored model (3 runs), not the 4-run history.
        let again = build_for_run(&*store, "c", &workflow, run, now, 40_000).await.expect("built");
        assert!(again.to_store.is_none());
        assert_eq!(again.resumed, Some((now + 700, Some(5))));
        assert_eq!(again.controller.predictor.profile(), first.controller.predictor.profile());
        assert_ne!(again.controller.predictor.profile(), &rebuilt);
        // The run's three succeeded attempts, measured: (stage, task, ms).
        assert_eq!(again.measured, vec![(0, 0, 2500), (0, 1, 3500), (1, 0, 3000)]);
    }

    /// A workflow of two jobs, and a job with a gang stage, get no model, and the reason (what
    /// the run's fallback decision, `weir status`, the run page and `--check-slo` show) names
    /// the workflow and what keeps it out, before any history is read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn workflows_the_controller_cannot_guard_say_why() {
        let dir = std::env::temp_dir().join(format!("weir-jockey-fallback-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let store =
            weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await.expect("sqlite");
        let cluster = ClusterConfig::from_yaml("cluster.yaml", CLUSTER).expect("cluster");
        let two_jobs = WORKLOAD.replace(
            "          - {name: reduce, after: [map], tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1s}}\n",
            "          - {name: reduce, after: [map], tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1s}}\n      - name: publish\n        stages:\n          - {name: push, tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1s}}\n",
        );
        let gang = WORKLOAD.replace("{name: map, tasks: 2,", "{name: map, gang: true, tasks: 2,");
        for (yaml, why) in [
            (two_jobs, "the controller guards workflows of one job; nightly has 2"),
            (gang, "the controller guards jobs of independent tasks; stage map of nightly is a gang"),
        ] {
            let wf = Workload::from_yaml("w.yaml", &yaml, &cluster).expect("workload").workflows.remove(0);
            let got = profile_from_history(&*store, "c", &wf, -1, 40 * 86_400_000).await.unwrap_err();
            assert_eq!(got, why);
            let built = build_for_run(&*store, "c", &wf, 1, 40 * 86_400_000, 40_000).await;
            assert_eq!(built.err().as_deref(), Some(why));
        }
    }

    #[test]
    fn containers_and_periods() {
        let unit = Resources::new(1000, 2048, 0);
        assert_eq!(containers_in(Resources::new(8000, 16384, 0), unit), 8);
        assert_eq!(containers_in(Resources::new(8000, 10240, 2), unit), 5);
        assert_eq!(period_ms(40_000), 2000);
        assert_eq!(period_ms(5000), 1000);
        assert_eq!(period_ms(7_200_000), 60_000);
        assert_eq!(control_config(40_000).dead_zone_ms, 4000);
        assert_eq!(control_config(7_200_000).dead_zone_ms, 180_000);
    }
}
