//! Stages with outputs and inputs (docs/commit.md): the actor's side of weir-commit.
//!
//! - Each attempt of a stage with outputs gets a staging prefix per output and the store's
//!   variables ([`Actor::output_env`]); a failed, killed or superseded attempt's uploads are
//!   aborted ([`Actor::abort_attempt_uploads`]).
//! - When every task of such a stage has succeeded, the stage is held while its job commit runs
//!   in the background ([`Actor::stage_tasks_done`]): every output prepared, then every output
//!   claimed, then each completed and its manifest written, so a refusal comes before any of
//!   the stage's outputs is visible. The committer's state of each output goes to the store
//!   (`job_commits`, a row per output) before the commit touches the object store and after it
//!   ends, so a server killed mid-commit finishes it after restart (recovery calls
//!   [`Actor::resume_commits`]).
//!   A refused commit (another run holds the output) or an aborted one fails the run with the
//!   reason; a run that fails or is killed aborts its stages' uploads ([`Actor::abort_outputs`]).
//! - A stage with inputs is not asked of the engine until every input's manifest exists and
//!   lists only files that are there with their size ([`Actor::poll_inputs`]); the reason it
//!   waits is in the job's explanation.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use weir_commit::{CommitError, Committer, JobCommitPlan, JobCommitState, JobPhase as CommitPhase};
use weir_store::{AttemptKey, Fence, JobCommitRow, JobStore, StoreError};

use super::actor::Actor;
use super::live::{engine_job, JobPhase, RunLive};
use crate::metrics::{Metrics, Reason};
use crate::outputs::{staging_prefix, Outputs};
use crate::time::now_ms;

/// How often a held stage's inputs are checked again.
const INPUT_RECHECK_MS: i64 = 2000;
/// Job commit tries when the object store fails (after its client's own retries).
const COMMIT_TRIES: u32 = 5;

/// A stage's inputs and job commit, as the actor tracks them.
#[derive(Debug, Default)]
pub struct StageIo {
    /// Every input checked out (true for a stage without inputs).
    pub inputs_ok: bool,
    /// A check runs in the background.
    pub checking: bool,
    pub next_check_ms: i64,
    /// Why the stage is held, from the last check.
    pub hold: Option<String>,
    /// Its job commit runs in the background.
    pub committing: bool,
    /// Recovery found every task done but no finished job commit: the stage waits for it.
    pub needs_commit: bool,
}

impl StageIo {
    pub fn new(has_inputs: bool) -> StageIo {
        StageIo { inputs_ok: !has_inputs, ..StageIo::default() }
    }
}

/// What a background commit or check reports to the actor.
#[derive(Debug)]
pub(crate) enum IoEvent {
    Committed { run: i64, job: usize, stage: usize, result: Result<(), String> },
    InputsChecked { run: i64, job: usize, stage: usize, result: Result<(), String> },
}

/// The actor's channel for [`IoEvent`]s, and the job commits recovery found unfinished.
pub(crate) struct IoBook {
    pub tx: UnboundedSender<IoEvent>,
    pub rx: UnboundedReceiver<IoEvent>,
    /// By run, job and stage: the rows of the stage's outputs.
    pub resume: HashMap<(i64, usize, usize), Vec<JobCommitRow>>,
    /// The runs with a stage whose inputs are not checked out yet: the only ones
    /// [`Actor::poll_inputs`] looks at, so a pass costs nothing for runs without inputs.
    pub awaiting_inputs: BTreeSet<i64>,
}

impl IoBook {
    /// Notes `run` for [`Actor::poll_inputs`] when one of its stages waits on its inputs.
    pub fn track(&mut self, run: &RunLive) {
        if run.jobs.iter().any(|j| j.stages.iter().any(|s| !s.io.inputs_ok)) {
            self.awaiting_inputs.insert(run.id);
        }
    }
}

impl Default for IoBook {
    fn default() -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        IoBook { tx, rx, resume: HashMap::new(), awaiting_inputs: BTreeSet::new() }
    }
}

fn staging_of(key: &AttemptKey, output: usize) -> String {
    let t = key.task;
    staging_prefix(t.run, t.job, t.stage, t.task, key.attempt, output)
}

/// What retrying a job commit may cure: the object store failing (after its client's retries).
fn store_failure(e: &CommitError) -> bool {
    matches!(e, CommitError::Store { .. } | CommitError::ListUploads { .. })
}

/// The partitions a prefix names (`table/dt=2026-11-27/region=eu/` → `dt=2026-11-27`,
/// `region=eu`), recorded in the manifest.
fn partitions(prefix: &str) -> Vec<String> {
    prefix.split('/').filter(|s| s.contains('=')).map(str::to_string).collect()
}

impl Actor {
    fn outputs(&self) -> &Arc<Outputs> {
        &self.settings.outputs
    }

    /// The stage's outputs, of the attempt's stage.
    fn outputs_of(&self, key: &AttemptKey) -> Vec<weir_model::ObjectUri> {
        let t = key.task;
        self.runs
            .get(&t.run)
            .and_then(|r| r.jobs.get(t.job as usize))
            .and_then(|j| j.stages.get(t.stage as usize))
            .map(|s| s.outputs.clone())
            .unwrap_or_default()
    }

    /// The variables of an attempt of a stage with outputs (none for other stages): output 0's
    /// under the plain names, output K's suffixed `_K`, and `WEIR_COMMIT_OUTPUTS`.
    pub(super) fn output_env(
        &self,
        key: &AttemptKey,
        owner: Option<(u32, u32)>,
    ) -> Result<Vec<(String, String)>, String> {
        let outputs = self.outputs_of(key);
        let mut vars = Vec::new();
        for (k, out) in outputs.iter().enumerate() {
            vars.extend(self.outputs().task_env(out, k, &staging_of(key, k), owner)?);
        }
        if !outputs.is_empty() {
            vars.push((weir_commit::vars::OUTPUTS.to_string(), outputs.len().to_string()));
        }
        Ok(vars)
    }

    /// Aborts the uploads of an attempt that will not be committed (it failed, was killed or
    /// lost). In the background; what fails is left to the run's end and the sweeper.
    pub(super) fn abort_attempt_uploads(&self, key: &AttemptKey) {
        for (k, out) in self.outputs_of(key).iter().enumerate() {
            let Ok(c) = self.outputs().committer(&out.bucket) else { continue };
            let staging = staging_of(key, k);
            tokio::spawn(async move {
                if let Err(e) = c.abort_attempts(std::slice::from_ref(&staging)).await {
                    eprintln!("weir worker: aborting the uploads of {staging}: {e}");
                }
            });
        }
    }

    /// Every task of stage `s` succeeded: a stage without outputs is done; one with outputs
    /// is held while its job commit runs.
    pub(super) fn stage_tasks_done(&mut self, id: i64, j: usize, s: usize) {
        let has_output = self.runs.get(&id).is_some_and(|r| !r.jobs[j].stages[s].outputs.is_empty());
        if has_output {
            self.start_job_commit(id, j, s, Vec::new());
        } else {
            self.stage_done(id, j, s);
        }
    }

    /// Starts the job commit of stage `s`'s outputs in the background, from their plans or
    /// from the rows recovery found (`resume`, by output).
    fn start_job_commit(&mut self, id: i64, j: usize, s: usize, resume: Vec<JobCommitRow>) {
        let store = self.store.clone();
        let metrics = self.metrics.clone();
        let tx = self.io.tx.clone();
        let objects = self.settings.outputs.clone();
        let Some(run) = self.runs.get_mut(&id) else { return };
        let stage = &mut run.jobs[j].stages[s];
        if stage.outputs.is_empty() || stage.io.committing {
            return;
        }
        stage.io.committing = true;
        stage.io.needs_commit = false;
        run.active += 1;
        let mut outputs = Vec::with_capacity(stage.outputs.len());
        let mut opened = Ok(());
        for (k, out) in stage.outputs.iter().enumerate() {
            let attempts: Vec<String> = stage
                .tasks
                .iter()
                .enumerate()
                .map(|(t, task)| staging_prefix(id, j as u32, s as u32, t as u32, task.attempts, k))
                .collect();
            let plan = JobCommitPlan {
                run_id: id.to_string(),
                output: out.prefix.clone(),
                partitions: partitions(&out.prefix),
                attempts,
            };
            match objects.committer(&out.bucket) {
                Ok(c) => outputs.push(OutputCommit {
                    index: k,
                    uri: out.to_string(),
                    c,
                    plan,
                    resume: resume.iter().find(|r| r.output_idx as usize == k).cloned(),
                }),
                Err(e) => opened = Err(e),
            }
        }
        let fence = self.fence.clone();
        tokio::spawn(async move {
            let result = match opened {
                Ok(()) => stage_commit((&*store, &fence), &metrics, (id, j, s), outputs).await,
                Err(e) => Err(e),
            };
            let _ = tx.send(IoEvent::Committed { run: id, job: j, stage: s, result });
        });
    }

    /// A background commit or input check ended.
    pub(super) fn on_io_event(&mut self, event: IoEvent) {
        match event {
            IoEvent::Committed { run: id, job: j, stage: s, result } => {
                let Some(run) = self.runs.get_mut(&id) else { return };
                run.active = run.active.saturating_sub(1);
                run.jobs[j].stages[s].io.committing = false;
                if run.ending.is_some() {
                    if run.active == 0 {
                        self.finish_ending(id);
                    }
                    return;
                }
                match result {
                    Ok(()) => self.stage_done(id, j, s),
                    Err(why) => {
                        let name = format!("{}.{}", run.jobs[j].name, run.jobs[j].stages[s].name);
                        self.end_run(id, "failed", format!("stage {name}: job commit failed: {why}"));
                    }
                }
            }
            IoEvent::InputsChecked { run: id, job: j, stage: s, result } => {
                let now = self.now();
                let conf = self.gang_conf();
                let Some(run) = self.runs.get_mut(&id) else { return };
                let job = &mut run.jobs[j];
                let in_engine = job.phase == JobPhase::InEngine;
                let stage = &mut job.stages[s];
                stage.io.checking = false;
                match result {
                    Ok(()) => {
                        stage.io.inputs_ok = true;
                        stage.io.hold = None;
                        if in_engine && stage.waiting_on == 0 && run.ending.is_none() {
                            let n = super::progress::ready_tasks(stage);
                            if n > 0 {
                                let gang = super::progress::executors_of(stage, conf.as_ref());
                                let requests = super::progress::task_requests(
                                    stage.resources,
                                    s,
                                    n,
                                    gang,
                                    &mut self.gang_seq,
                                );
                                let requests =
                                    super::progress::placed(&mut self.engine, &stage.selector, requests);
                                let _ = self.engine.on_requests_added(now, engine_job(id, j), requests);
                            }
                        }
                    }
                    Err(why) => {
                        if stage.io.hold.as_deref() != Some(why.as_str()) {
                            eprintln!("weir worker: run {id}: stage {}.{} held: {why}", job.name, stage.name);
                        }
                        stage.io.hold = Some(why);
                        stage.io.next_check_ms = now.0 as i64 + INPUT_RECHECK_MS;
                    }
                }
            }
        }
    }

    /// Starts the checks of held stages whose turn has come: stages whose upstream stages are
    /// done, in a job the engine has, with inputs not yet checked out.
    pub(super) fn poll_inputs(&mut self) {
        if self.io.awaiting_inputs.is_empty() {
            return;
        }
        let now = now_ms();
        let tx = self.io.tx.clone();
        let mut checks = Vec::new();
        let mut settled = Vec::new();
        for &id in &self.io.awaiting_inputs {
            let Some(run) = self.runs.get_mut(&id) else {
                settled.push(id);
                continue;
            };
            if run.ending.is_some() {
                continue;
            }
            let mut awaiting = false;
            for (j, job) in run.jobs.iter_mut().enumerate() {
                for (s, stage) in job.stages.iter_mut().enumerate() {
                    let io = &mut stage.io;
                    if io.inputs_ok {
                        continue;
                    }
                    awaiting = true;
                    if job.phase != JobPhase::InEngine
                        || io.checking
                        || stage.waiting_on != 0
                        || io.next_check_ms > now
                    {
                        continue;
                    }
                    io.checking = true;
                    checks.push((id, j, s, stage.inputs.clone()));
                }
            }
            if !awaiting {
                settled.push(id);
            }
        }
        for id in settled {
            self.io.awaiting_inputs.remove(&id);
        }
        for (id, j, s, inputs) in checks {
            let outputs = self.settings.outputs.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut problems = Vec::new();
                for input in &inputs {
                    let checked = match outputs.committer(&input.bucket) {
                        Ok(c) => c.check_output(&input.prefix).await.map(|_| ()).map_err(|e| e.to_string()),
                        Err(e) => Err(e),
                    };
                    if let Err(why) = checked {
                        problems.push(format!("input {input}: {why}"));
                    }
                }
                let result = if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) };
                let _ = tx.send(IoEvent::InputsChecked { run: id, job: j, stage: s, result });
            });
        }
    }

    /// Why held stages wait, by `RUN/JOB` (added to the jobs' explanations).
    pub(super) fn input_holds(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (&id, run) in &self.runs {
            for (j, job) in run.jobs.iter().enumerate() {
                for stage in &job.stages {
                    if let Some(why) = stage.io.hold.as_ref().filter(|_| !stage.io.inputs_ok) {
                        out.push((
                            format!("{id}/{j}"),
                            format!("stage {} is held until its inputs are complete: {why}", stage.name),
                        ));
                    }
                    if stage.io.committing || stage.io.needs_commit {
                        out.push((
                            format!("{id}/{j}"),
                            format!("stage {}: every task succeeded; its job commit is running", stage.name),
                        ));
                    }
                }
            }
        }
        out
    }

    /// A run that did not succeed leaves no upload behind: every attempt of its stages with
    /// outputs is aborted (committed stages have no records left, so theirs stay).
    pub(super) fn abort_outputs(&self, run: &RunLive, to: &str) {
        if to == "succeeded" {
            return;
        }
        for (j, job) in run.jobs.iter().enumerate() {
            for (s, stage) in job.stages.iter().enumerate() {
                for (k, out) in stage.outputs.iter().enumerate() {
                    let Ok(c) = self.settings.outputs.committer(&out.bucket) else { continue };
                    let stagings: Vec<String> = stage
                        .tasks
                        .iter()
                        .enumerate()
                        .flat_map(|(t, task)| {
                            (1..=task.attempts)
                                .map(move |a| staging_prefix(run.id, j as u32, s as u32, t as u32, a, k))
                        })
                        .collect();
                    if stagings.is_empty() {
                        continue;
                    }
                    tokio::spawn(async move {
                        if let Err(e) = c.abort_attempts(&stagings).await {
                            eprintln!("weir worker: aborting a run's uploads: {e}");
                        }
                    });
                }
            }
        }
    }

    /// Recovery: reads the run's job commits and marks each stage with outputs whose tasks
    /// all succeeded but whose commit did not finish (an output without a `committed` row);
    /// such a stage is not done yet.
    pub(super) async fn mark_unfinished_commits(&mut self, live: &mut RunLive) -> Result<(), String> {
        if !live.jobs.iter().flat_map(|j| &j.stages).any(|s| !s.outputs.is_empty()) {
            return Ok(());
        }
        let rows = self.store.job_commits(live.id).await.map_err(|e| e.to_string())?;
        for (j, job) in live.jobs.iter_mut().enumerate() {
            for (s, stage) in job.stages.iter_mut().enumerate() {
                if stage.outputs.is_empty() || stage.done as usize != stage.tasks.len() {
                    continue;
                }
                let mine: Vec<JobCommitRow> = rows
                    .iter()
                    .filter(|r| r.job_idx as usize == j && r.stage_idx as usize == s)
                    .cloned()
                    .collect();
                let committed = (0..stage.outputs.len())
                    .all(|k| mine.iter().any(|r| r.output_idx as usize == k && r.phase == "committed"));
                if committed {
                    continue;
                }
                stage.io.needs_commit = true;
                if !mine.is_empty() {
                    self.io.resume.insert((live.id, j, s), mine);
                }
            }
        }
        Ok(())
    }

    /// Recovery, once the runs are rebuilt: finishes the job commits of held stages (or, for a
    /// run that is over or ending, aborts them).
    pub(super) fn resume_commits(&mut self) {
        let mut starts = Vec::new();
        for (&id, run) in &self.runs {
            for (j, job) in run.jobs.iter().enumerate() {
                for (s, stage) in job.stages.iter().enumerate() {
                    if stage.io.needs_commit && run.ending.is_none() {
                        starts.push((id, j, s));
                    }
                }
            }
        }
        for (id, j, s) in starts {
            let rows = self.io.resume.remove(&(id, j, s)).unwrap_or_default();
            self.start_job_commit(id, j, s, rows);
        }
        // Rows of runs that are over or ending: their job commits are aborted.
        let ended = std::mem::take(&mut self.io.resume);
        for (id, row) in
            ended.into_iter().flat_map(|((id, _, _), rows)| rows.into_iter().map(move |r| (id, r)))
        {
            let Ok(uri) = weir_model::parse_object_uri(&row.output) else { continue };
            let Ok(c) = self.settings.outputs.committer(&uri.bucket) else { continue };
            let (store, metrics, fence) = (self.store.clone(), self.metrics.clone(), self.fence.clone());
            tokio::spawn(async move {
                let Ok(mut state) = serde_json::from_str::<JobCommitState>(&row.state) else { return };
                if matches!(state.phase, CommitPhase::Committed | CommitPhase::Aborted) {
                    return;
                }
                let why = format!("run {id} ended before its job commit finished");
                finish_abort(&store, &fence, &c, &metrics, &row, &mut state, why).await;
            });
        }
    }
}

fn row_of(
    key: (i64, usize, usize, usize),
    uri: &str,
    state: &JobCommitState,
    reason: Option<String>,
) -> JobCommitRow {
    let phase = match state.phase {
        CommitPhase::Prepared => "prepared",
        CommitPhase::Claimed => "claimed",
        CommitPhase::Committed => "committed",
        CommitPhase::Aborted => "aborted",
    };
    JobCommitRow {
        run_id: key.0,
        job_idx: key.1 as u32,
        stage_idx: key.2 as u32,
        output_idx: key.3 as u32,
        output: uri.to_string(),
        phase: phase.into(),
        state: serde_json::to_string(state).expect("serializable"),
        reason,
        updated_ms: now_ms(),
    }
}

/// Writes the row, fenced by the worker's lease (a worker that lost its cluster writes
/// nothing: the new owner's recovery resumes the commit from what is stored), retrying while
/// the store is briefly away.
async fn put_row(store: &dyn JobStore, fence: &Fence, row: &JobCommitRow) -> Result<(), String> {
    let mut tries = 0;
    loop {
        match store.put_job_commit(fence, row).await {
            Ok(()) => return Ok(()),
            Err(e @ StoreError::LeaseLost { .. }) => {
                return Err(format!("cannot record the job commit: {e}"))
            }
            Err(e) if tries < COMMIT_TRIES => {
                tries += 1;
                eprintln!("weir worker: cannot record the job commit of run {}: {e}; retrying", row.run_id);
                tokio::time::sleep(Duration::from_millis(500 << tries)).await;
            }
            Err(e) => return Err(format!("cannot record the job commit: {e}")),
        }
    }
}

fn key_of(row: &JobCommitRow) -> (i64, usize, usize, usize) {
    (row.run_id, row.job_idx as usize, row.stage_idx as usize, row.output_idx as usize)
}

async fn finish_abort(
    store: &Arc<dyn JobStore>,
    fence: &Fence,
    c: &Committer,
    metrics: &Metrics,
    row: &JobCommitRow,
    state: &mut JobCommitState,
    why: String,
) {
    match c.abort_job(state).await {
        Ok(_) => {
            metrics.job_commits.get_or_create(&Reason { reason: "aborted".into() }).inc();
            let row = row_of(key_of(row), &row.output, state, Some(why));
            let _ = put_row(&**store, fence, &row).await;
        }
        Err(CommitError::AlreadyCommitted { .. }) => {
            let row = row_of(key_of(row), &row.output, state, None);
            let _ = put_row(&**store, fence, &row).await;
        }
        Err(e) => eprintln!("weir worker: aborting the job commit of run {}: {e}", row.run_id),
    }
}

/// TEST ONLY: with `WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT=FILE`, a stage whose tasks all succeeded
/// writes FILE and waits forever before its job commit starts, so that a crash test can kill
/// the server between the task commits and the job commit (tests/serve_commit.rs).
async fn test_pause_before_job_commit() {
    if let Some(file) = std::env::var_os("WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT") {
        let _ = std::fs::write(&file, b"paused before the job commit\n");
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
}

/// One output of a stage being committed: its committer, its plan, the row recovery found.
struct OutputCommit {
    index: usize,
    uri: String,
    c: Committer,
    plan: JobCommitPlan,
    resume: Option<JobCommitRow>,
}

/// One stage's job commit, every output of it, from their plans or from the states recovery
/// found (rows written to `store` under the worker's `fence`): each output prepared and
/// stored; every output claimed, then each completed and its manifest written, its row stored
/// again (retried while the object store fails). A refusal or failure aborts every output not
/// yet committed. `Err` is why the run fails.
async fn stage_commit(
    (store, fence): (&dyn JobStore, &Fence),
    metrics: &Metrics,
    (id, j, s): (i64, usize, usize),
    outputs: Vec<OutputCommit>,
) -> Result<(), String> {
    let key = |o: &OutputCommit| (id, j, s, o.index);
    let count = |reason: &str| metrics.job_commits.get_or_create(&Reason { reason: reason.into() }).inc();
    // Prepare, or take up the stored states. An output aborted before a crash aborts them all.
    if outputs.iter().all(|o| o.resume.is_none()) {
        test_pause_before_job_commit().await;
    }
    let mut states = Vec::with_capacity(outputs.len());
    let mut failed = None;
    for o in &outputs {
        let state = match o.resume.as_ref().map(|r| (r.phase.as_str(), r)) {
            Some(("aborted", r)) => Err(r.reason.clone().unwrap_or_else(|| "aborted".into())),
            Some((_, r)) => serde_json::from_str::<JobCommitState>(&r.state)
                .map_err(|e| format!("the stored job commit state of {} does not parse: {e}", o.uri)),
            None => o.c.prepare_job_commit(&o.plan).await.map_err(|e| e.to_string()),
        };
        match state {
            Ok(st) => states.push(Some(st)),
            Err(why) => {
                states.push(None);
                failed.get_or_insert(why);
            }
        }
    }
    if let Some(why) = failed {
        for (o, st) in outputs.iter().zip(states.iter_mut()) {
            match st {
                Some(st) => abort_one((store, fence), (id, j, s), o, st, &why).await?,
                None => {
                    let _ = o.c.abort_attempts(&o.plan.attempts).await;
                }
            }
        }
        count("aborted");
        return Err(why);
    }
    let mut states: Vec<JobCommitState> = states.into_iter().flatten().collect();
    for (o, st) in outputs.iter().zip(&states) {
        put_row(store, fence, &row_of(key(o), &o.uri, st, None)).await?;
    }
    let mut tries = 0;
    loop {
        let e = match commit_all((store, fence), (id, j, s), &outputs, &mut states).await {
            Ok(()) => {
                for _ in &outputs {
                    count("committed");
                }
                return Ok(());
            }
            Err(Failure::Row(why)) => return Err(why),
            Err(Failure::Commit(e)) => e,
        };
        if store_failure(&e) && tries + 1 < COMMIT_TRIES {
            tries += 1;
            eprintln!("weir worker: run {id}: job commit of stage {j}.{s} failed ({e}); retrying");
            tokio::time::sleep(Duration::from_millis(500 << tries)).await;
            continue;
        }
        let refused = matches!(e, CommitError::Conflict { .. });
        let why = e.to_string();
        for (o, st) in outputs.iter().zip(states.iter_mut()) {
            abort_one((store, fence), (id, j, s), o, st, &why).await?;
        }
        // Every manifest was written after all (an abort found them): the stage is committed.
        if states.iter().all(|st| st.phase == CommitPhase::Committed) {
            return Ok(());
        }
        count(if refused { "refused" } else { "aborted" });
        return Err(why);
    }
}

/// Why [`commit_all`] stopped.
enum Failure {
    /// The object store or the outputs refused; the caller retries or aborts.
    Commit(CommitError),
    /// A row could not be stored (the lease is lost or the store is away): nothing more.
    Row(String),
}

/// Claims every output, then completes each and writes its manifest, storing each output's
/// row as it commits. Resumable: outputs already claimed or committed are left as they are.
async fn commit_all(
    (store, fence): (&dyn JobStore, &Fence),
    (id, j, s): (i64, usize, usize),
    outputs: &[OutputCommit],
    states: &mut [JobCommitState],
) -> Result<(), Failure> {
    for (o, st) in outputs.iter().zip(states.iter_mut()) {
        let before = st.phase;
        o.c.claim(st).await.map_err(Failure::Commit)?;
        if st.phase != before {
            put_row(store, fence, &row_of((id, j, s, o.index), &o.uri, st, None))
                .await
                .map_err(Failure::Row)?;
        }
    }
    for (o, st) in outputs.iter().zip(states.iter_mut()) {
        let manifest = o.c.job_commit(st).await.map_err(Failure::Commit)?;
        put_row(store, fence, &row_of((id, j, s, o.index), &o.uri, st, None)).await.map_err(Failure::Row)?;
        eprintln!(
            "weir worker: run {id}: committed {}: {} files, {} bytes",
            o.uri,
            manifest.files.len(),
            manifest.total_size
        );
    }
    Ok(())
}

/// Aborts one output's job commit (an output whose manifest is written stays committed) and
/// stores its row with the reason.
async fn abort_one(
    (store, fence): (&dyn JobStore, &Fence),
    key: (i64, usize, usize),
    o: &OutputCommit,
    st: &mut JobCommitState,
    why: &str,
) -> Result<(), String> {
    let reason = match o.c.abort_job(st).await {
        Ok(_) => Some(why.to_string()),
        Err(CommitError::AlreadyCommitted { .. }) => None,
        Err(a) => {
            eprintln!("weir worker: aborting the job commit of {}: {a}", o.uri);
            Some(why.to_string())
        }
    };
    put_row(store, fence, &row_of((key.0, key.1, key.2, o.index), &o.uri, st, reason)).await
}
