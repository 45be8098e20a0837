//! Task attempts: the engine's decisions turned into attempts (start a container, preempt or
//! kill one), the launch of each attempt — its intent recorded before the starter hands it to
//! the backend — and how an attempt's end moves its task, stage and run on.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;
use weir_backend::{AttemptId, Backend, BackendError, Exit, Launched, TaskExit, TaskLaunch};
use weir_engine::{ContainerId, Decision};
use weir_store::{AttemptKey, Change, TaskKey};

use super::actor::Actor;
use super::live::{attempt_id, engine_job, split_job, AttemptLive, TaskPhase};
use crate::time::now_ms;

/// Attempts being started at once. A start mostly waits rather than computes: joining its
/// cgroups waits for the kernel (an RCU grace period, longer on a busy machine), so more
/// starts in flight than cores keep the pipe full (4 lost ~15% of dispatch under load).
const START_CONCURRENCY: usize = 16;

impl Actor {
    /// After a commit: hand the attempts whose intent is now stored to the starter, send
    /// kills, let the backend forget attempts whose end is stored. Nothing here waits for a
    /// process: start results come back on the starter's channel.
    pub(super) fn act(&mut self) {
        self.write_notices();
        for launch in std::mem::take(&mut self.to_start) {
            if self.starter.send(launch).is_err() {
                eprintln!("weir worker: the starter has stopped");
            }
        }
        for (attempt, e) in std::mem::take(&mut self.start_failures) {
            self.on_started(attempt, Err(e));
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
    pub(super) fn on_started(&mut self, id: AttemptId, result: Result<Launched, BackendError>) {
        let at = now_ms();
        match result {
            Ok(launched) => {
                // The backend started it: counted even when its end was handled first.
                self.metrics.task_started(&self.cluster);
                let Some(a) = self.attempts.get_mut(id.as_str()) else {
                    // Its end was handled first (it ended, or its run ended): make sure it is gone,
                    // then let the backend forget it (its end is stored by the time `act` runs:
                    // the local backend's cgroup slot goes back to its pool only then).
                    self.to_kill.push(launched.clone());
                    self.to_forget.push(launched);
                    return;
                };
                a.launched = Some(launched.clone());
                self.changes.push(Change::AttemptLaunched { key: a.key, launched: launched.to_json(), at });
                let run = a.key.task.run;
                let warning = a.warning.take();
                let key = a.key;
                let left_running = a.node_lost.as_ref().is_some_and(|(_, killed)| !killed);
                if (a.container.is_none() && !left_running)
                    || self.runs.get(&run).is_some_and(|r| r.ending.is_some())
                {
                    // Preempted or its run ended while it was starting.
                    self.to_kill.push(launched);
                } else if let Some(w) = warning {
                    self.record_warning(key, w);
                }
            }
            // A remote scheduler that cannot be reached (and, the backend checked, holds no job
            // of this attempt): nothing runs, and the task is not at fault — the attempt ends
            // lost, which does not count against max_attempts, and the task waits its turn again.
            Err(e @ BackendError::Unreachable { .. }) => {
                eprintln!("weir worker: cannot start {id}: {e}; the task will be tried again");
                self.on_exit(TaskExit { attempt: id, exit: Exit::Lost, ended_at_ms: at as u64 });
            }
            // The node the engine pinned it to takes no work now (the target holds it down,
            // drained, not responding): the node is at fault, not the task. The attempt ends lost
            // (not counted against max_attempts) and the engine stops placing on that node until
            // the target lists it usable again.
            Err(BackendError::NodeUnavailable { node, message, .. }) => {
                eprintln!(
                    "weir worker: cannot start {id}: node `{node}` takes no work now: {message}; the task will be tried again"
                );
                if let Some(a) = self.attempts.get_mut(id.as_str()) {
                    a.node_lost = Some((format!("node `{node}` refused the start ({message})"), false));
                }
                self.on_exit(TaskExit { attempt: id, exit: Exit::Lost, ended_at_ms: at as u64 });
                self.node_refused(&node, &message);
            }
            Err(e) => {
                eprintln!("weir worker: cannot start {id}: {e}");
                self.metrics.task_failed(&self.cluster, "start_error");
                self.on_exit(TaskExit { attempt: id, exit: Exit::Code(127), ended_at_ms: at as u64 });
            }
        }
    }

    pub fn on_decision(&mut self, d: Decision) {
        match d {
            Decision::StartContainer { container, job, node, resources, tag, .. } => {
                let node = match self.nodes.as_ref().and_then(|m| m.name(node)) {
                    Some(name) => name.to_string(),
                    None => node.to_string(),
                };
                self.start_container(container, job, node, resources, tag)
            }
            Decision::KillContainer { container, reason, .. } => {
                if let Some(id) = self.containers.remove(&container) {
                    if let Some(a) = self.attempts.get_mut(&id) {
                        a.preempted = true;
                        // The driver's container, or one of its executors' (the driver is killed
                        // either way: the application lost part of its gang).
                        if a.container == Some(container) {
                            a.container = None;
                        } else {
                            a.executors.retain(|&c| c != container);
                        }
                        if let Some(l) = &a.launched {
                            self.to_kill.push(l.clone());
                        }
                        eprintln!("weir worker: {id}: {reason}");
                        let key = a.key;
                        self.record_preemption(key, &reason);
                    }
                }
            }
            Decision::JobRejected { job, reason } => {
                let (run, _) = split_job(job);
                self.end_run(run, "failed", format!("rejected by the scheduler: {reason}"));
            }
            Decision::PreemptContainer { container, kill_at, reason, .. } => {
                self.on_preempt_warning(container, kill_at, &reason)
            }
            Decision::JobRunnable { .. } => {}
        }
    }

    pub(super) fn record_preemption(&mut self, key: AttemptKey, reason: &weir_engine::PreemptReason) {
        let kind = match reason.kind {
            weir_engine::Starvation::FairShare => "fair_share",
            weir_engine::Starvation::MinShare => "min_share",
            weir_engine::Starvation::Guarantee { .. } => "guarantee",
            weir_engine::Starvation::JobGuarantee => "job_guarantee",
            weir_engine::Starvation::LentRoom => "lent_room",
        };
        self.metrics.preempted(&self.cluster, kind);
        let Some(run) = self.runs.get(&key.task.run) else { return };
        let (job, stage) = match run.jobs.get(key.task.job as usize) {
            Some(j) => (
                j.name.clone(),
                j.stages.get(key.task.stage as usize).map(|s| s.name.clone()).unwrap_or_default(),
            ),
            None => return,
        };
        let at = self.last_now as i64;
        self.changes.push(Change::Preempted(weir_store::PreemptionRow {
            cluster: self.cluster.clone(),
            at_ms: at,
            run_id: key.task.run,
            task: format!("{job}.{stage}.{}", key.task.task),
            attempt: key.attempt,
            queue: run.queue.to_string(),
            for_queue: reason.for_queue.to_string(),
            kind: kind.to_string(),
            reason: reason.to_string(),
        }));
    }

    /// The engine lost `container` with node `node`: with `placement: weir` the task is killed
    /// (its node is gone or no longer usable) and run again once its end is in; with
    /// `placement: backend` it runs on where the target put it and its end, as the target
    /// reports it, decides (Slurm ends a job of a failed node `NODE_FAIL`: lost, run again).
    pub(super) fn on_container_lost(&mut self, container: ContainerId, node: &str, state: &str) {
        let Some(id) = self.containers.remove(&container) else { return };
        let Some(a) = self.attempts.get_mut(&id) else { return };
        if a.container == Some(container) {
            a.container = None;
        } else {
            // An executor's container: the driver runs on where the master put it.
            a.executors.retain(|&c| c != container);
            return;
        }
        let kill = self.placed_by_weir;
        a.node_lost = Some((format!("node `{node}` left the cluster ({state})"), kill));
        if kill {
            if let Some(l) = &a.launched {
                self.to_kill.push(l.clone());
            }
        }
    }

    pub(super) fn start_container(
        &mut self,
        container: ContainerId,
        job: weir_engine::JobId,
        node: String,
        resources: weir_model::Resources,
        tag: u64,
    ) {
        let now = self.now();
        let (id, j) = split_job(job);
        if tag & super::progress::EXECUTOR_TAG != 0 {
            self.executor_container(container, id, j, (tag & !super::progress::EXECUTOR_TAG) as usize);
            return;
        }
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
        let workdir = run_workdir(&self.settings.work_dir, &self.cluster, id);
        let Some(run) = self.runs.get_mut(&id) else { return };
        let user = self.settings.task_users.for_project(&self.config.file.run_as, &run.project);
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
        // One folder per run, the attempt in the file names: a run's first start makes one
        // folder, not one per level of the attempt id (a mkdir is among the dearest parts of a
        // start on ext4).
        let logs = data_dir.join("logs").join(format!("run-{id}"));
        let name = format!("{j}.{s}.{t}.{}", key.attempt);
        let (stdout, stderr) = (
            path_text(&logs.join(format!("{name}.stdout"))),
            path_text(&logs.join(format!("{name}.stderr"))),
        );
        let mut env = stage.env.clone();
        env.insert("WEIR_RUN_ID".into(), id.to_string());
        env.insert("WEIR_WORKFLOW".into(), run.workflow.clone());
        env.insert("WEIR_LOGICAL_DATE".into(), run.logical_date.clone());
        env.insert("WEIR_JOB".into(), run.jobs[j].name.clone());
        env.insert("WEIR_STAGE".into(), run.jobs[j].stages[s].name.clone());
        env.insert("WEIR_TASK_INDEX".into(), t.to_string());
        env.insert("WEIR_ATTEMPT".into(), key.attempt.to_string());
        // What a backend that runs elsewhere maps to its own terms: the leaf queue (a Slurm
        // partition or QOS), the node weir's engine chose (`placement: weir`), the walltime (a
        // time limit).
        env.insert("WEIR_QUEUE".into(), run.queue.to_string());
        env.insert("WEIR_NODE".into(), node.clone());
        if let Some(w) = run.jobs[j].stages[s].walltime {
            env.insert("WEIR_WALLTIME_SECONDS".into(), w.0.div_ceil(1000).to_string());
        }
        env.insert(
            super::warning::NOTICE_ENV.into(),
            path_text(&super::warning::notice_path(&workdir, &aid)),
        );
        for (k, v) in &run.params {
            env.insert(format!("WEIR_PARAM_{}", k.to_uppercase()), v.clone());
        }
        let command = run.jobs[j].stages[s].command.clone();
        let spark = run.jobs[j].stages[s].spark.clone();
        let Ok(attempt) = AttemptId::new(aid.clone()) else { return };
        // A stage with an output: the attempt's staging area and the store's variables.
        let server_uid = rustix::process::geteuid().as_raw();
        let owner = user
            .as_ref()
            .ok()
            .and_then(|u| u.as_ref())
            .filter(|u| u.uid != server_uid)
            .map(|u| (u.uid, u.gid));
        let user = match self.output_env(&key, owner) {
            Ok(vars) => {
                env.extend(vars);
                user
            }
            Err(why) => Err(weir_backend::BackendError::Refused {
                attempt: aid.clone(),
                backend: "weir",
                message: format!("its output: {why}"),
            }),
        };
        self.changes.push(Change::AttemptStarting {
            key,
            node,
            stdout: stdout.clone(),
            stderr: stderr.clone(),
            at,
        });
        if first_in_job {
            self.wait_over(id, j, at);
            self.changes.push(Change::JobState { run: id, job: j as u32, to: "running", at });
        }
        if first_in_run {
            self.changes.push(Change::RunState { run: id, to: "running", at, reason: None });
        }
        match user {
            Ok(user) => self.to_start.push(TaskLaunch {
                attempt: attempt.clone(),
                command,
                env,
                workdir,
                resources,
                stdout: PathBuf::from(stdout),
                stderr: PathBuf::from(stderr),
                user,
                spark,
            }),
            // The run_as user was removed from the machine since the cluster was loaded: the
            // attempt fails with the reason, never runs as someone else.
            Err(e) => self.start_failures.push((attempt.clone(), e)),
        }
        self.containers.insert(container, aid.clone());
        // Its executors' containers, when they were placed before its own (one gang).
        let executors = self.spare_executors.remove(&(id, j, s)).unwrap_or_default();
        for &c in &executors {
            self.containers.insert(c, aid.clone());
        }
        self.attempts.insert(
            aid,
            AttemptLive {
                key,
                container: Some(container),
                launched: None,
                preempted: false,
                warning: None,
                node_lost: None,
                executors,
            },
        );
    }

    /// A container for an executor of a Spark stage's gang: held for the stage's driver (no
    /// process of weir's runs in it; the master starts the executors), given back with the
    /// driver's end. The gang's containers come in one pass, the driver's before or after.
    fn executor_container(&mut self, container: ContainerId, id: i64, j: usize, s: usize) {
        let now = self.now();
        let Some(run) = self.runs.get(&id) else {
            let _ = self.engine.on_container_finished(now, container);
            return;
        };
        let wanted = run.jobs.get(j).and_then(|job| job.stages.get(s)).map_or(0, |stage| {
            super::progress::executors_of(stage, self.gang_conf().as_ref())
                .executors
                .map_or(0, |(n, _)| n as usize)
        });
        if run.ending.is_some() || wanted == 0 {
            let _ = self.engine.on_container_finished(now, container);
            return;
        }
        // A driver of this stage already started in this pass, still short of executors.
        let short = self.attempts.iter_mut().find(|(_, a)| {
            a.key.task.run == id
                && a.key.task.job as usize == j
                && a.key.task.stage as usize == s
                && a.container.is_some()
                && a.launched.is_none()
                && a.executors.len() < wanted
        });
        match short {
            Some((aid, a)) => {
                a.executors.push(container);
                self.containers.insert(container, aid.clone());
            }
            None => self.spare_executors.entry((id, j, s)).or_default().push(container),
        }
    }

    /// An attempt ended (reported by the backend, or found ended during recovery).
    pub fn on_exit(&mut self, exit: TaskExit) {
        let Some(a) = self.attempts.remove(exit.attempt.as_str()) else { return };
        if !exit.exit.is_success() {
            // Nothing of a failed, killed or lost attempt is ever committed.
            self.abort_attempt_uploads(&a.key);
        }
        let now = self.now();
        let at = now.0 as i64;
        for c in a.container.into_iter().chain(a.executors.iter().copied()) {
            self.containers.remove(&c);
            let _ = self.engine.on_container_finished(now, c);
        }
        if let Some(l) = a.launched.clone() {
            self.to_forget.push(l);
        }
        let key = a.key;
        let (id, j, s, t) = (key.task.run, key.task.job as usize, key.task.stage as usize, key.task.task);
        let conf = self.gang_conf();
        let ran = a.launched.as_ref().filter(|_| exit.exit.is_success());
        self.jockey.task_done(id, j, s, t, ran.map(|l| exit.ended_at_ms.saturating_sub(l.started_at_ms)));
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
                self.stage_tasks_done(id, j, s);
            }
            return;
        }
        let lost_with_node = a
            .node_lost
            .as_ref()
            .filter(|(_, killed)| *killed || matches!(exit.exit, Exit::Lost | Exit::Killed));
        let (to, reason, counts) = if let Some((why, _)) = lost_with_node {
            self.metrics.task_failed(&self.cluster, "lost");
            ("lost", format!("lost: {why}"), false)
        } else if a.preempted {
            ("killed", "preempted".to_string(), false)
        } else if exit.exit == Exit::Lost {
            self.metrics.task_failed(&self.cluster, "lost");
            ("lost", "lost: no process and no exit status".to_string(), false)
        } else {
            let kind = if matches!(exit.exit, Exit::Signal(_)) { "signal" } else { "exit_code" };
            self.metrics.task_failed(&self.cluster, kind);
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
        let gang = super::progress::executors_of(stage, conf.as_ref());
        let requests = super::progress::task_requests(stage.resources, s, 1, gang, &mut self.gang_seq);
        let requests = super::progress::placed(&mut self.engine, &stage.selector, requests);
        let _ = self.engine.on_requests_added(now, engine_job(id, j), requests);
    }
}

pub(crate) type Started = (AttemptId, Result<Launched, BackendError>);

/// Starts attempts, several at once (each on the blocking pool), and sends each result back
/// to the actor.
pub(super) async fn starter(
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
                        if let Err(e) = &result {
                            say_start_failure(&launch, e);
                        }
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

/// An attempt that could not start fails with status 127 and no output of its own: its stderr
/// log says why, so that `weir logs --stream stderr` shows it, not only the server's log. Not
/// for the starts that end `lost` and are tried again (an unreachable scheduler, a node that
/// takes no work). Best effort: the log's folder may be out of reach (a remote shared folder).
fn say_start_failure(launch: &TaskLaunch, e: &BackendError) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    // Not either when the attempt's folder was already there (a crashed server's start may be
    // running and writing this file) or when the backend is going away.
    if matches!(
        e,
        BackendError::Unreachable { .. }
            | BackendError::NodeUnavailable { .. }
            | BackendError::AlreadyStarted { .. }
            | BackendError::ShuttingDown { .. }
    ) {
        return;
    }
    // The backend makes the log's folder as it starts a task: it may not be there yet.
    if let Some(dir) = launch.stderr.parent() {
        use std::os::unix::fs::DirBuilderExt as _;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
    let file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&launch.stderr);
    if let Ok(mut f) = file {
        let _ = writeln!(f, "weir: this attempt could not start: {e}");
    }
}

/// Run `id`'s working folder: `WORK_DIR/CLUSTER/run-ID`, shared by its attempts, made by the
/// backend for the run's user.
pub(crate) fn run_workdir(work_dir: &std::path::Path, cluster: &str, id: i64) -> PathBuf {
    work_dir.join(cluster).join(format!("run-{id}"))
}

fn path_text(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}
