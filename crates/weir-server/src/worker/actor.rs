//! The engine actor of one cluster: the only owner of its live `Engine`.
//!
//! One loop: gather inputs (task ends from the backend, new runs, kill requests), hand them to
//! the engine stamped with the real clock, `schedule(now)`, turn decisions into store changes,
//! commit them in one fenced batch, and only then act on the world (start and kill processes).
//! Starting an attempt follows the outbox: "starting attempt N" is committed first, the process
//! started second, its launch record committed with the next batch.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{watch, Notify};
use weir_backend::{
    AttemptId, Backend, BackendError, Exit, Launched, LocalBackend, LocalConfig, TaskExit, TaskLaunch,
};
use weir_engine::{ContainerId, Decision, Engine, JobSpec, Request};
use weir_model::{ClusterConfig, Time};
use weir_store::{AttemptKey, Change, Fence, Store, StoreError, TaskKey};

use super::live::{attempt_id, engine_job, split_job, AttemptLive, JobPhase, RunLive, TaskPhase};
use super::{Ended, WorkerSettings};
use crate::clusters::Registry;
use crate::snapshot::{self, Snapshot};
use crate::time::now_ms;
use crate::Stop;

/// Most queued runs claimed per pass.
const CLAIM: u32 = 512;

/// Attempts being started at once.
const START_CONCURRENCY: usize = 4;

pub(crate) struct Actor {
    pub cluster: String,
    pub fence: Fence,
    pub store: Store,
    pub settings: WorkerSettings,
    pub backend: Arc<dyn Backend>,
    pub engine: Engine,
    pub config: Arc<ClusterConfig>,
    pub config_version: i64,
    pub runs: BTreeMap<i64, RunLive>,
    pub attempts: HashMap<String, AttemptLive>,
    pub containers: HashMap<ContainerId, String>,
    /// Store changes of this pass, committed together.
    pub changes: Vec<Change>,
    /// Attempts to start once `changes` is committed.
    pub to_start: Vec<TaskLaunch>,
    /// Attempts to kill once `changes` is committed.
    pub to_kill: Vec<Launched>,
    /// Attempts whose end is recorded: the backend may drop its files once committed.
    pub to_forget: Vec<Launched>,
    pub last_now: u64,
    pub draining: bool,
    /// Route changes of this pass not yet committed: (index in `changes`, run).
    pub routes_pending: Vec<(usize, i64)>,
    /// Attempts to start go to the starter task.
    pub starter: tokio::sync::mpsc::UnboundedSender<TaskLaunch>,
}

pub(crate) async fn run(
    cluster: &str,
    fence: Fence,
    settings: &WorkerSettings,
    store: &Store,
    registry: &Registry,
    mut stop: watch::Receiver<Stop>,
    notify: Arc<Notify>,
) -> Ended {
    let Some(loaded) = registry.cluster(cluster) else {
        return Ended::Failed(format!("cluster `{cluster}` is not loaded"));
    };
    let engine = match Engine::with_config_nodes((*loaded.config).clone()) {
        Ok(e) => e,
        Err(e) => return Ended::Failed(format!("the engine refuses the configuration: {e}")),
    };
    let (exit_tx, exits) = tokio::sync::mpsc::unbounded_channel();
    let state_dir = settings.data_dir.join("backend").join(cluster);
    let backend: Arc<dyn Backend> = match LocalBackend::new(LocalConfig::new(state_dir), exit_tx) {
        Ok(b) => Arc::new(b),
        Err(e) => return Ended::Failed(format!("cannot set up the local backend: {e}")),
    };
    let (launch_tx, launch_rx) = tokio::sync::mpsc::unbounded_channel();
    let (started_tx, started_rx) = tokio::sync::mpsc::unbounded_channel();
    let starter_task = tokio::spawn(starter(backend.clone(), launch_rx, started_tx));
    let mut actor = Actor {
        cluster: cluster.to_string(),
        fence,
        store: store.clone(),
        settings: settings.clone(),
        backend,
        engine,
        config: loaded.config.clone(),
        config_version: loaded.version,
        runs: BTreeMap::new(),
        attempts: HashMap::new(),
        containers: HashMap::new(),
        changes: Vec::new(),
        to_start: Vec::new(),
        to_kill: Vec::new(),
        to_forget: Vec::new(),
        last_now: 0,
        draining: false,
        starter: launch_tx,
        routes_pending: Vec::new(),
    };
    let ended = match actor.recover().await {
        Ok(()) => actor.serve(registry, &mut stop, notify, exits, started_rx).await,
        Err(e) => e,
    };
    // Starts not yet begun are dropped: their intents are in the store, and whoever owns the
    // cluster next asks the backend about them.
    starter_task.abort();
    ended
}

impl Actor {
    pub fn now(&mut self) -> Time {
        let now = (now_ms().max(0) as u64).max(self.last_now);
        self.last_now = now;
        Time(now)
    }

    fn lease_until(&self) -> i64 {
        now_ms() + self.settings.lease_ms
    }

    async fn serve(
        mut self,
        registry: &Registry,
        stop: &mut watch::Receiver<Stop>,
        notify: Arc<Notify>,
        mut exits: UnboundedReceiver<TaskExit>,
        mut started: UnboundedReceiver<Started>,
    ) -> Ended {
        let mut last_snapshot = 0i64;
        let mut last_kill_poll = 0i64;
        loop {
            match *stop.borrow() {
                Stop::Running => {}
                Stop::Now => return Ended::Stopped,
                Stop::Drain => self.draining = true,
            }
            if self.draining && self.attempts.is_empty() {
                return Ended::Stopped;
            }
            if registry.cluster(&self.cluster).is_some_and(|c| c.version != self.config_version) {
                if let Err(e) = self.commit().await {
                    return e;
                }
                return Ended::Reload;
            }
            // Inputs: task ends, kill requests, new runs.
            while let Ok((id, result)) = started.try_recv() {
                self.on_started(id, result);
            }
            while let Ok(exit) = exits.try_recv() {
                self.on_exit(exit);
            }
            let now = now_ms();
            if now - last_kill_poll >= 250 {
                last_kill_poll = now;
                match self.store.kill_requests(&self.cluster).await {
                    Ok(ids) => {
                        for id in ids {
                            self.end_run(id, "killed", "killed on request".to_string());
                        }
                    }
                    Err(e) => return Ended::Failed(format!("cannot read kill requests: {e}")),
                }
            }
            let t0 = std::time::Instant::now();
            if !self.draining {
                if let Err(e) = self.claim().await {
                    return e;
                }
            }
            let t1 = t0.elapsed();
            let t = self.now();
            let decisions = self.engine.schedule(t);
            for d in decisions {
                self.on_decision(d);
            }
            let nchanges = self.changes.len();
            let t2 = t0.elapsed();
            if let Err(e) = self.commit().await {
                return e;
            }
            let t3 = t0.elapsed();
            let nstart = self.to_start.len();
            self.act();
            if std::env::var_os("WEIR_TRACE_ACTOR").is_some() {
                eprintln!(
                    "pass: claim {t1:?} schedule {:?} commit {nchanges} in {:?} act {nstart} in {:?}",
                    t2 - t1,
                    t3 - t2,
                    t0.elapsed() - t3
                );
            }
            if now_ms() - last_snapshot >= 1000 {
                last_snapshot = now_ms();
                if let Err(e) = self.publish().await {
                    return e;
                }
            }
            // Sleep until the next input, the engine's wakeup or the tick.
            let tick = self.settings.tick;
            let wake = match self.engine.next_wakeup() {
                Some(Time(at)) => Duration::from_millis(at.saturating_sub(self.last_now)).min(tick),
                None => tick,
            };
            if !self.to_start.is_empty() || !self.changes.is_empty() {
                continue;
            }
            tokio::select! {
                exit = exits.recv() => {
                    if let Some(exit) = exit {
                        self.on_exit(exit);
                    }
                }
                s = started.recv() => {
                    if let Some((id, result)) = s {
                        self.on_started(id, result);
                    }
                }
                _ = notify.notified() => {}
                _ = tokio::time::sleep(wake) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Commit this pass's changes in one fenced transaction.
    pub async fn commit(&mut self) -> Result<Vec<bool>, Ended> {
        let changes = std::mem::take(&mut self.changes);
        match self.store.apply(&self.fence, self.lease_until(), &changes).await {
            Ok(applied) => {
                self.settle_routes(&applied);
                Ok(applied)
            }
            Err(StoreError::LeaseLost { .. }) => Err(Ended::LeaseLost),
            Err(e) => Err(Ended::Failed(format!("cannot write to the store: {e}"))),
        }
    }

    /// After a commit: hand the attempts whose intent is now stored to the starter, send
    /// kills, let the backend forget attempts whose end is stored. Nothing here waits for a
    /// process: start results come back on the starter's channel.
    fn act(&mut self) {
        for launch in std::mem::take(&mut self.to_start) {
            if self.starter.send(launch).is_err() {
                eprintln!("weir worker: the starter has stopped");
            }
        }
        let kills = std::mem::take(&mut self.to_kill);
        let forget = std::mem::take(&mut self.to_forget);
        if kills.is_empty() && forget.is_empty() {
            return;
        }
        let backend = self.backend.clone();
        let grace = self.settings.kill_grace;
        tokio::spawn(async move {
            for l in kills {
                if let Err(e) = backend.kill(&l, grace).await {
                    eprintln!("weir worker: cannot kill {}: {e}", l.attempt);
                }
            }
            for l in forget {
                let _ = backend.forget(&l).await;
            }
        });
    }

    /// A start came back from the starter.
    fn on_started(&mut self, id: AttemptId, result: Result<Launched, BackendError>) {
        let at = now_ms();
        match result {
            Ok(launched) => {
                let Some(a) = self.attempts.get_mut(id.as_str()) else {
                    // Its end was handled first (it ended, or its run ended): make sure it is gone.
                    self.to_kill.push(launched);
                    return;
                };
                a.launched = Some(launched.clone());
                self.changes.push(Change::AttemptLaunched { key: a.key, launched: launched.to_json(), at });
                let run = a.key.task.run;
                if a.container.is_none() || self.runs.get(&run).is_some_and(|r| r.ending.is_some()) {
                    // Preempted or its run ended while it was starting.
                    self.to_kill.push(launched);
                }
            }
            Err(e) => {
                eprintln!("weir worker: cannot start {id}: {e}");
                self.on_exit(TaskExit { attempt: id, exit: Exit::Code(127), ended_at_ms: at as u64 });
            }
        }
    }

    async fn publish(&mut self) -> Result<(), Ended> {
        let now = now_ms();
        let mut explanations = BTreeMap::new();
        for (&id, run) in &self.runs {
            for (j, job) in run.jobs.iter().enumerate() {
                if job.phase != JobPhase::InEngine || explanations.len() >= 1000 {
                    continue;
                }
                if let Ok(e) = self.engine.explain(engine_job(id, j)) {
                    if e.pending_containers > 0 {
                        explanations.insert(format!("{id}/{j}"), e.to_string().trim_end().to_string());
                    }
                }
            }
        }
        let snap =
            Snapshot { queues: Some(snapshot::queues(&self.cluster, &self.engine, now)), explanations };
        let body = serde_json::to_string(&snap).unwrap_or_default();
        match self.store.publish_snapshot(&self.fence, self.lease_until(), &body, now).await {
            Ok(()) => Ok(()),
            Err(StoreError::LeaseLost { .. }) => Err(Ended::LeaseLost),
            Err(e) => Err(Ended::Failed(format!("cannot publish the queue snapshot: {e}"))),
        }
    }

    /// Claim queued runs of this cluster: route them (creating their jobs and tasks) and
    /// submit their first jobs.
    async fn claim(&mut self) -> Result<(), Ended> {
        let rows = match self.store.queued_runs(&self.cluster, CLAIM).await {
            Ok(r) => r,
            Err(e) => return Err(Ended::Failed(format!("cannot read queued runs: {e}"))),
        };
        if rows.is_empty() {
            return Ok(());
        }
        let at = now_ms();
        for row in &rows {
            match RunLive::build(row, &self.config) {
                Ok(live) => {
                    // Optimistic: the run goes into the engine now, and the route commits with
                    // the rest of this pass. If the compare-and-set fails (it was killed while
                    // queued), `settle_routes` takes it out again before anything is started.
                    self.routes_pending.push((self.changes.len(), row.id));
                    self.changes.push(Change::Route { run: row.id, jobs: live.new_jobs(), at });
                    let id = live.id;
                    self.runs.insert(id, live);
                    self.start_ready_jobs(id);
                }
                Err(why) => {
                    self.changes.push(Change::RunState { run: row.id, to: "failed", at, reason: Some(why) });
                }
            }
        }
        Ok(())
    }

    /// After a commit: undo the runs whose route did not apply. Their other changes in the
    /// batch did not apply either (no job or task rows exist, the run is terminal), and their
    /// attempts are dropped before they are handed to the starter.
    fn settle_routes(&mut self, applied: &[bool]) {
        let now = self.now();
        for (ix, id) in std::mem::take(&mut self.routes_pending) {
            if applied.get(ix).copied().unwrap_or(false) {
                continue;
            }
            let Some(run) = self.runs.remove(&id) else { continue };
            for (j, job) in run.jobs.iter().enumerate() {
                if job.phase == JobPhase::InEngine {
                    let _ = self.engine.on_job_finished(now, engine_job(id, j));
                }
            }
            let gone: Vec<String> =
                self.attempts.iter().filter(|(_, a)| a.key.task.run == id).map(|(k, _)| k.clone()).collect();
            for k in gone {
                if let Some(a) = self.attempts.remove(&k) {
                    if let Some(c) = a.container {
                        self.containers.remove(&c);
                    }
                }
            }
            self.to_start.retain(|l| !l.attempt.as_str().starts_with(&format!("run-{id}/")));
        }
    }

    /// Submit every pending job of a run whose upstream jobs are done; end the run if all are.
    pub fn start_ready_jobs(&mut self, id: i64) {
        let Some(run) = self.runs.get(&id) else { return };
        if run.jobs_left == 0 {
            self.finish_run(id, "succeeded", None);
            return;
        }
        let ready: Vec<usize> = run
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| j.phase == JobPhase::Pending && j.upstream_left == 0)
            .map(|(i, _)| i)
            .collect();
        for j in ready {
            self.submit_job(id, j, Vec::new());
        }
    }

    /// Hand a job to the engine, asking for the tasks of its stages that are free to run
    /// (plus `extra` requests, used by recovery for attempts still running).
    pub fn submit_job(&mut self, id: i64, j: usize, extra: Vec<Request>) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(&id) else { return };
        let mut requests = extra;
        let job = &mut run.jobs[j];
        for (s, stage) in job.stages.iter_mut().enumerate() {
            if stage.waiting_on == 0 {
                let r = ready_tasks(stage);
                if r > 0 {
                    requests.push(Request::new(stage.resources, r).tagged(s as u64));
                }
            }
        }
        job.phase = JobPhase::InEngine;
        let spec = JobSpec {
            id: engine_job(id, j),
            queue: run.queue.clone(),
            user: run.user.clone(),
            priority: run.priority,
            submit_time: Time(run.submitted_ms.max(0) as u64),
            requests,
            has_am: false,
        };
        let at = now.0 as i64;
        self.changes.push(Change::JobState { run: id, job: j as u32, to: "waiting", at });
        if !run.started {
            self.changes.push(Change::RunState { run: id, to: "waiting", at, reason: None });
        }
        if let Err(e) = self.engine.on_job_submitted(now, spec) {
            self.end_run(id, "failed", format!("the engine refused job {j}: {e}"));
        }
        // A job whose stages are all done already (recovery) or that has no stage left.
        if self.runs.get(&id).is_some_and(|r| r.jobs[j].stages_left == 0) {
            self.job_done(id, j);
        }
    }

    pub fn on_decision(&mut self, d: Decision) {
        match d {
            Decision::StartContainer { container, job, node, resources, tag, .. } => {
                self.start_container(container, job, node.to_string(), resources, tag)
            }
            Decision::KillContainer { container, reason, .. } => {
                if let Some(id) = self.containers.remove(&container) {
                    if let Some(a) = self.attempts.get_mut(&id) {
                        a.preempted = true;
                        a.container = None;
                        if let Some(l) = &a.launched {
                            self.to_kill.push(l.clone());
                        }
                        eprintln!("weir worker: {id}: {reason}");
                    }
                }
            }
            Decision::JobRejected { job, reason } => {
                let (run, _) = split_job(job);
                self.end_run(run, "failed", format!("rejected by the scheduler: {reason}"));
            }
            Decision::PreemptContainer { .. } | Decision::JobRunnable { .. } => {}
        }
    }

    fn start_container(
        &mut self,
        container: ContainerId,
        job: weir_engine::JobId,
        node: String,
        resources: weir_model::Resources,
        tag: u64,
    ) {
        let now = self.now();
        let (id, j) = split_job(job);
        let s = tag as usize;
        let task = self.runs.get_mut(&id).and_then(|run| {
            if run.ending.is_some() {
                return None;
            }
            let stage = run.jobs.get_mut(j)?.stages.get_mut(s)?;
            let t = stage.ready.pop_front()?;
            Some(t)
        });
        let Some(t) = task else {
            // Nothing to run in it (the run is ending): give it back.
            let _ = self.engine.on_container_finished(now, container);
            return;
        };
        let data_dir = self.settings.data_dir.clone();
        let Some(run) = self.runs.get_mut(&id) else { return };
        let at = now.0 as i64;
        let first_in_job = !run.jobs[j].started;
        run.jobs[j].started = true;
        let first_in_run = !run.started;
        run.started = true;
        run.active += 1;
        let stage = &mut run.jobs[j].stages[s];
        let tl = &mut stage.tasks[t as usize];
        tl.phase = TaskPhase::Active;
        tl.attempts += 1;
        let key = AttemptKey {
            task: TaskKey { run: id, job: j as u32, stage: s as u32, task: t },
            attempt: tl.attempts,
        };
        let aid = attempt_id(&key);
        let logs = data_dir.join("logs").join(&aid);
        let (stdout, stderr) = (path_text(&logs.join("stdout")), path_text(&logs.join("stderr")));
        let mut env = stage.env.clone();
        env.insert("WEIR_RUN_ID".into(), id.to_string());
        env.insert("WEIR_WORKFLOW".into(), run.workflow.clone());
        env.insert("WEIR_LOGICAL_DATE".into(), run.logical_date.clone());
        env.insert("WEIR_JOB".into(), run.jobs[j].name.clone());
        env.insert("WEIR_STAGE".into(), run.jobs[j].stages[s].name.clone());
        env.insert("WEIR_TASK_INDEX".into(), t.to_string());
        env.insert("WEIR_ATTEMPT".into(), key.attempt.to_string());
        for (k, v) in &run.params {
            env.insert(format!("WEIR_PARAM_{}", k.to_uppercase()), v.clone());
        }
        let command = run.jobs[j].stages[s].command.clone();
        let Ok(attempt) = AttemptId::new(aid.clone()) else { return };
        self.changes.push(Change::AttemptStarting {
            key,
            node,
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            at,
        });
        if first_in_job {
            self.changes.push(Change::JobState { run: id, job: j as u32, to: "running", at });
        }
        if first_in_run {
            self.changes.push(Change::RunState { run: id, to: "running", at, reason: None });
        }
        self.to_start.push(TaskLaunch {
            attempt: attempt.clone(),
            command,
            env,
            workdir: data_dir.join("work"),
            resources,
            stdout: PathBuf::from(stdout),
            stderr: PathBuf::from(stderr),
        });
        self.containers.insert(container, aid.clone());
        self.attempts
            .insert(aid, AttemptLive { key, container: Some(container), launched: None, preempted: false });
    }

    /// An attempt ended (reported by the backend, or found ended during recovery).
    pub fn on_exit(&mut self, exit: TaskExit) {
        let Some(a) = self.attempts.remove(exit.attempt.as_str()) else { return };
        let now = self.now();
        let at = now.0 as i64;
        if let Some(c) = a.container {
            self.containers.remove(&c);
            let _ = self.engine.on_container_finished(now, c);
        }
        if let Some(l) = a.launched.clone() {
            self.to_forget.push(l);
        }
        let key = a.key;
        let (id, j, s, t) = (key.task.run, key.task.job as usize, key.task.stage as usize, key.task.task);
        let Some(run) = self.runs.get_mut(&id) else { return };
        run.active = run.active.saturating_sub(1);
        let code = match exit.exit {
            Exit::Code(c) => Some(c),
            Exit::Signal(sig) => Some(128 + sig),
            Exit::Killed | Exit::Lost => None,
        };
        if let Some((final_state, _)) = &run.ending {
            let to = if exit.exit.is_success() { "succeeded" } else { "killed" };
            self.changes.push(Change::AttemptEnded { key, to, exit_code: code, at, reason: None });
            let task_to = if exit.exit.is_success() { "succeeded" } else { final_state };
            self.changes.push(Change::TaskState { task: key.task, to: task_to, at, exit_code: code });
            if run.active == 0 {
                self.finish_ending(id);
            }
            return;
        }
        let job_name = run.jobs[j].name.clone();
        let stage = &mut run.jobs[j].stages[s];
        if exit.exit.is_success() {
            stage.tasks[t as usize].phase = TaskPhase::Done;
            stage.done += 1;
            self.changes.push(Change::AttemptEnded {
                key,
                to: "succeeded",
                exit_code: code,
                at,
                reason: None,
            });
            self.changes.push(Change::TaskState { task: key.task, to: "succeeded", at, exit_code: code });
            if stage.done as usize == stage.tasks.len() {
                self.stage_done(id, j, s);
            }
            return;
        }
        let (to, reason, counts) = if a.preempted {
            ("killed", "preempted".to_string(), false)
        } else if exit.exit == Exit::Lost {
            ("lost", "lost: no process and no exit status".to_string(), false)
        } else {
            ("failed", exit.exit.to_string(), true)
        };
        self.changes.push(Change::AttemptEnded {
            key,
            to,
            exit_code: code,
            at,
            reason: Some(reason.clone()),
        });
        let tl = &mut stage.tasks[t as usize];
        if counts {
            tl.failures += 1;
        }
        if tl.failures >= stage.max_attempts {
            tl.phase = TaskPhase::Failed;
            self.changes.push(Change::TaskState { task: key.task, to: "failed", at, exit_code: code });
            let why = format!(
                "task {}.{}.{t} failed {} times (max_attempts {}); last: {reason}",
                job_name, stage.name, tl.failures, stage.max_attempts
            );
            self.end_run(id, "failed", why);
            return;
        }
        tl.phase = TaskPhase::Ready;
        stage.ready.push_back(t);
        let request = Request::new(stage.resources, 1).tagged(s as u64);
        let _ = self.engine.on_requests_added(now, engine_job(id, j), vec![request]);
    }

    /// A stage finished: release the stages that waited only for it; the job may be done.
    fn stage_done(&mut self, id: i64, j: usize, s: usize) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(&id) else { return };
        let job = &mut run.jobs[j];
        job.stages_left -= 1;
        let mut requests = Vec::new();
        for d in job.stages[s].next.clone() {
            let st = &mut job.stages[d];
            st.waiting_on -= 1;
            if st.waiting_on == 0 {
                let n = ready_tasks(st);
                if n > 0 {
                    requests.push(Request::new(st.resources, n).tagged(d as u64));
                }
            }
        }
        let left = job.stages_left;
        if !requests.is_empty() {
            let _ = self.engine.on_requests_added(now, engine_job(id, j), requests);
        }
        if left == 0 {
            self.job_done(id, j);
        }
    }

    fn job_done(&mut self, id: i64, j: usize) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(&id) else { return };
        if run.jobs[j].phase == JobPhase::InEngine {
            let _ = self.engine.on_job_finished(now, engine_job(id, j));
        }
        run.jobs[j].phase = JobPhase::Done;
        run.jobs_left -= 1;
        self.changes.push(Change::JobState { run: id, job: j as u32, to: "succeeded", at: now.0 as i64 });
        for d in run.jobs[j].next.clone() {
            run.jobs[d].upstream_left -= 1;
        }
        self.start_ready_jobs(id);
    }

    /// Start failing or killing a run: no more containers for it, its attempts are killed, and
    /// once none is left it takes its final state.
    pub fn end_run(&mut self, id: i64, to: &'static str, reason: String) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(&id) else { return };
        if run.ending.is_some() {
            return;
        }
        run.ending = Some((to, reason));
        for (j, job) in run.jobs.iter_mut().enumerate() {
            for st in &mut job.stages {
                st.ready.clear();
            }
            if job.phase == JobPhase::InEngine {
                let _ = self.engine.on_requests_cleared(now, engine_job(id, j));
            }
        }
        for a in self.attempts.values() {
            if a.key.task.run == id {
                if let Some(l) = &a.launched {
                    self.to_kill.push(l.clone());
                }
            }
        }
        if run.active == 0 {
            self.finish_ending(id);
        }
    }

    fn finish_ending(&mut self, id: i64) {
        let Some((to, reason)) = self.runs.get(&id).and_then(|r| r.ending.clone()) else { return };
        self.finish_run(id, to, Some(reason));
    }

    /// The run is over: take its jobs out of the engine and record the final states.
    pub fn finish_run(&mut self, id: i64, to: &'static str, reason: Option<String>) {
        let now = self.now();
        let at = now.0 as i64;
        let Some(run) = self.runs.remove(&id) else { return };
        for (j, job) in run.jobs.iter().enumerate() {
            if job.phase == JobPhase::InEngine {
                let _ = self.engine.on_job_finished(now, engine_job(id, j));
            }
            if job.phase != JobPhase::Done {
                self.changes.push(Change::JobState { run: id, job: j as u32, to, at });
                for (s, st) in job.stages.iter().enumerate() {
                    for (t, task) in st.tasks.iter().enumerate() {
                        if matches!(task.phase, TaskPhase::Pending | TaskPhase::Ready) {
                            let key = TaskKey { run: id, job: j as u32, stage: s as u32, task: t as u32 };
                            self.changes.push(Change::TaskState {
                                task: key,
                                to: "killed",
                                at,
                                exit_code: None,
                            });
                        }
                    }
                }
            }
        }
        self.changes.push(Change::RunState { run: id, to, at, reason });
    }
}

pub(crate) type Started = (AttemptId, Result<Launched, BackendError>);

/// Starts attempts, a few at once (each forks on the blocking pool; more threads than cores
/// only queue behind each other), and sends each result back to the actor.
async fn starter(
    backend: Arc<dyn Backend>,
    mut launches: UnboundedReceiver<TaskLaunch>,
    results: tokio::sync::mpsc::UnboundedSender<Started>,
) {
    let mut set = tokio::task::JoinSet::new();
    let mut open = true;
    loop {
        tokio::select! {
            launch = launches.recv(), if open && set.len() < START_CONCURRENCY => match launch {
                Some(launch) => {
                    let backend = backend.clone();
                    set.spawn(async move {
                        let result = backend.start(&launch).await;
                        (launch.attempt, result)
                    });
                }
                None => open = false,
            },
            Some(done) = set.join_next(), if !set.is_empty() => {
                if let Ok(done) = done {
                    let _ = results.send(done);
                }
            }
            else => return,
        }
    }
}

/// Mark a stage's not-yet-run tasks ready and count them.
pub fn ready_tasks(stage: &mut super::live::StageLive) -> u32 {
    let mut n = 0;
    for (t, task) in stage.tasks.iter_mut().enumerate() {
        if task.phase == TaskPhase::Pending {
            task.phase = TaskPhase::Ready;
            stage.ready.push_back(t as u32);
            n += 1;
        }
    }
    n
}

fn path_text(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}
