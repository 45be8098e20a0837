//! Every start of an actor is a recovery (crash-only): rebuild the runs from the store,
//! reconcile each open attempt with the backend — `adopt` what has a launch record, `recover`
//! what only has its intent — and rebuild the engine: jobs with running attempts first, each
//! holding exactly the containers its running attempts hold, then everything still to run.
//! An intent without an outcome is never started again blindly: only a backend answer of
//! "never started / left no trace" lets the task run a new attempt.

use std::collections::{BTreeMap, HashMap};

use weir_backend::{Adopted, AttemptId, Exit, Launched, Recovered, TaskExit};
use weir_engine::{Decision, Request};
use weir_store::{AttemptKey, Change, TaskKey};

use super::actor::{Actor, RunMeta};
use super::live::{attempt_id, engine_job, split_job, AttemptLive, JobPhase, RunLive, TaskPhase};
use super::Ended;
use crate::time::now_ms;

impl Actor {
    pub(crate) async fn recover(&mut self) -> Result<(), Ended> {
        let work = self.settings.work_dir.join(&self.cluster);
        let made = crate::isolation::make_work_root(&self.settings.work_dir)
            .and_then(|()| crate::isolation::make_work_root(&work));
        if let Err(e) = made {
            return Err(Ended::Failed(format!(
                "cannot create the working folders' root {}: {e}",
                work.display()
            )));
        }
        let active = match self.store.active_runs(&self.cluster).await {
            Ok(a) => a,
            Err(e) => return Err(Ended::Failed(format!("cannot read the cluster's runs: {e}"))),
        };
        let at = now_ms();
        // Ends found while nobody watched, handled once the engine is rebuilt.
        let mut ended: Vec<TaskExit> = Vec::new();
        // Running attempts by (run, job) → stage → attempt ids, to give them containers.
        let mut holding: BTreeMap<(i64, usize), BTreeMap<usize, Vec<String>>> = BTreeMap::new();
        for a in active {
            let mut live = match RunLive::build(&a.run, &self.config, self.settings.max_tasks_per_run) {
                Ok(l) => l,
                Err(why) => {
                    let meta = RunMeta {
                        tier: a.run.tier,
                        queue: a.run.queue.clone(),
                        submitted_ms: a.run.submitted_ms,
                        slo_ms: None,
                    };
                    self.run_meta.insert(a.run.id, meta);
                    self.changes.push(Change::RunState {
                        run: a.run.id,
                        to: "failed",
                        at,
                        reason: Some(why),
                    });
                    continue;
                }
            };
            let id = live.id;
            let failures: HashMap<TaskKey, u32> = a.failed_attempts.into_iter().collect();
            for t in &a.tasks {
                let Some(st) = live
                    .jobs
                    .get_mut(t.job_idx as usize)
                    .and_then(|j| j.stages.get_mut(t.stage_idx as usize))
                else {
                    continue;
                };
                let Some(task) = st.tasks.get_mut(t.task_idx as usize) else { continue };
                task.attempts = t.attempts;
                let key = TaskKey { run: id, job: t.job_idx, stage: t.stage_idx, task: t.task_idx };
                task.failures = failures.get(&key).copied().unwrap_or(0);
                match t.state.as_str() {
                    "succeeded" => {
                        task.phase = TaskPhase::Done;
                        st.done += 1;
                    }
                    "failed" => task.phase = TaskPhase::Failed,
                    _ => {}
                }
            }
            // Stages with outputs whose job commit did not finish are not done yet.
            if let Err(e) = self.mark_unfinished_commits(&mut live).await {
                return Err(Ended::Failed(format!("cannot read the job commits of run {}: {e}", live.id)));
            }
            // Stage barriers and job order from what is done.
            let mut failed_task = false;
            for job in &mut live.jobs {
                let complete: Vec<bool> = job
                    .stages
                    .iter()
                    .map(|s| s.done as usize == s.tasks.len() && !s.io.needs_commit)
                    .collect();
                job.stages_left = complete.iter().filter(|c| !**c).count() as u32;
                for st in &mut job.stages {
                    st.waiting_on = st.after.iter().filter(|&&u| !complete[u]).count() as u32;
                    failed_task |= st.tasks.iter().any(|t| t.phase == TaskPhase::Failed);
                }
            }
            for row in &a.jobs {
                let j = row.idx as usize;
                let Some(job) = live.jobs.get_mut(j) else { continue };
                match row.state.as_str() {
                    "succeeded" => job.phase = JobPhase::Done,
                    "waiting" | "running" => {
                        job.phase = JobPhase::InEngine;
                        job.started = row.state == "running";
                    }
                    _ => {}
                }
            }
            let done: Vec<bool> = live.jobs.iter().map(|j| j.phase == JobPhase::Done).collect();
            live.jobs_left = done.iter().filter(|d| !**d).count() as u32;
            let afters: Vec<Vec<usize>> = {
                let mut v = vec![Vec::new(); live.jobs.len()];
                for (i, job) in live.jobs.iter().enumerate() {
                    for &n in &job.next {
                        v[n].push(i);
                    }
                }
                v
            };
            for (i, job) in live.jobs.iter_mut().enumerate() {
                job.upstream_left = afters[i].iter().filter(|&&u| !done[u]).count() as u32;
            }
            if a.run.kill_requested {
                live.ending = Some(("killed", "killed on request".to_string()));
            } else if failed_task {
                live.ending = Some(("failed", "a task ran out of attempts".to_string()));
            }
            // Open attempts: ask the backend what became of each.
            for open in &a.open_attempts {
                let key = AttemptKey {
                    task: TaskKey { run: id, job: open.job_idx, stage: open.stage_idx, task: open.task_idx },
                    attempt: open.attempt,
                };
                let aid = attempt_id(&key);
                let Ok(attempt) = AttemptId::new(aid.clone()) else { continue };
                let outcome = match &open.launched {
                    Some(text) => match Launched::from_json(text) {
                        Ok(l) => match self.backend.adopt(&l).await {
                            Ok(Adopted::Running) => Ok(Some(l)),
                            Ok(Adopted::Ended(exit)) => Err((exit, Some(l))),
                            Err(e) => {
                                eprintln!("weir worker: cannot adopt {aid}: {e}");
                                Err((Exit::Lost, Some(l)))
                            }
                        },
                        Err(_) => Err((Exit::Lost, None)),
                    },
                    None => match self.backend.recover(&attempt).await {
                        Ok(Recovered::Running(l)) => {
                            self.changes.push(Change::AttemptLaunched { key, launched: l.to_json(), at });
                            Ok(Some(l))
                        }
                        Ok(Recovered::Ended(exit)) => Err((exit, None)),
                        Ok(Recovered::NotFound) => Err((Exit::Lost, None)),
                        Err(e) => {
                            eprintln!("weir worker: cannot recover {aid}: {e}");
                            Err((Exit::Lost, None))
                        }
                    },
                };
                let Some(task) = live
                    .jobs
                    .get_mut(key.task.job as usize)
                    .and_then(|j| j.stages.get_mut(key.task.stage as usize))
                    .and_then(|s| s.tasks.get_mut(key.task.task as usize))
                else {
                    continue;
                };
                task.phase = TaskPhase::Active;
                live.active += 1;
                let launched = match outcome {
                    Ok(l) => l,
                    Err((exit, l)) => {
                        ended.push(TaskExit { attempt: attempt.clone(), exit, ended_at_ms: at as u64 });
                        l
                    }
                };
                holding
                    .entry((id, key.task.job as usize))
                    .or_default()
                    .entry(key.task.stage as usize)
                    .or_default()
                    .push(aid.clone());
                if open.state == "preempting" && launched.is_some() {
                    self.withdraw_warning(key);
                }
                self.attempts.insert(
                    aid,
                    AttemptLive {
                        key,
                        container: None,
                        launched,
                        preempted: false,
                        warning: None,
                        node_lost: None,
                        executors: Vec::new(),
                    },
                );
            }
            self.run_meta.insert(id, RunMeta::of(&live));
            self.io.track(&live);
            self.runs.insert(id, live);
        }
        // Jobs holding containers go back into the engine first, asking for exactly those: each
        // running attempt's own and, for a Spark application whose executors weir counts
        // (`spark-standalone`), its executors' (`EXECUTOR_TAG`), as the master still runs them.
        let mut resubmitted = Vec::new();
        let conf = self.gang_conf();
        for (&(id, j), stages) in &holding {
            let Some(run) = self.runs.get(&id) else { continue };
            let mut requests = Vec::new();
            for (&s, ids) in stages {
                let stage = &run.jobs[j].stages[s];
                let mut asked = vec![Request::new(stage.resources, ids.len() as u32).tagged(s as u64)];
                if let Some((n, each)) = super::progress::executors_of(stage, conf.as_ref()).executors {
                    let tag = s as u64 | super::progress::EXECUTOR_TAG;
                    asked.push(Request::new(each, n * ids.len() as u32).tagged(tag));
                }
                requests.extend(super::progress::placed(&mut self.engine, &stage.selector, asked));
            }
            resubmitted.push((id, j, requests));
        }
        for (id, j, requests) in resubmitted {
            self.submit_held(id, j, requests);
        }
        let now = self.now();
        let decisions = self.engine.schedule(now);
        let mut rest = Vec::new();
        for d in decisions {
            match d {
                Decision::StartContainer { container, job, tag, .. }
                    if tag & super::progress::EXECUTOR_TAG != 0 =>
                {
                    let (id, j) = split_job(job);
                    let s = (tag & !super::progress::EXECUTOR_TAG) as usize;
                    self.recovered_executor(container, id, j, s, conf.as_ref());
                }
                Decision::StartContainer { container, job, tag, .. } => {
                    let (id, j) = split_job(job);
                    let aid = holding
                        .get_mut(&(id, j))
                        .and_then(|st| st.get_mut(&(tag as usize)))
                        .and_then(|v| v.pop());
                    match aid.and_then(|a| self.attempts.get_mut(&a).map(|x| (a, x))) {
                        Some((aid, a)) => {
                            a.container = Some(container);
                            self.containers.insert(container, aid);
                        }
                        None => {
                            let _ = self.engine.on_container_finished(now, container);
                        }
                    }
                }
                other => rest.push(other),
            }
        }
        let unplaced: usize = holding.values().flat_map(|s| s.values()).map(Vec::len).sum();
        if unplaced > 0 {
            eprintln!(
                "weir worker: cluster `{}`: {unplaced} running attempts no longer fit the cluster; they keep running outside the engine's accounting",
                self.cluster
            );
        }
        // What did not fit stays outside the engine's accounting: no request left behind for it
        // (a driver's or executor's container placed later would find no attempt waiting).
        for &(id, j) in holding.keys() {
            let _ = self.engine.on_requests_cleared(now, engine_job(id, j));
        }
        for d in rest {
            self.on_decision(d);
        }
        // Then everything else: the rest of the jobs in the engine, jobs whose upstream is done.
        let ids: Vec<i64> = self.runs.keys().copied().collect();
        for id in ids {
            let Some(run) = self.runs.get(&id) else { continue };
            if let Some((to, why)) = run.ending.clone() {
                // end_run starts the ending afresh: kills what still runs, or finishes the run.
                if let Some(r) = self.runs.get_mut(&id) {
                    r.ending = None;
                }
                self.end_run(id, to, why);
                continue;
            }
            let in_engine: Vec<usize> = (0..run.jobs.len())
                .filter(|&j| run.jobs[j].phase == JobPhase::InEngine && !holding_has(&self.engine, id, j))
                .collect();
            for j in in_engine {
                if let Some(run) = self.runs.get_mut(&id) {
                    run.jobs[j].phase = JobPhase::Pending;
                }
                self.submit_job(id, j, Vec::new());
            }
            self.add_ready_requests(id);
            self.start_ready_jobs(id);
        }
        self.resume_commits();
        if let Err(e) = self.recover_verdicts().await {
            return Err(Ended::Failed(format!("cannot read the cluster's dry-runs without a verdict: {e}")));
        }
        for exit in ended {
            self.on_exit(exit);
        }
        self.commit().await?;
        Ok(())
    }

    /// A container for an executor of a re-adopted Spark driver (stage `s` of job `j` of run
    /// `id`): given to the first of the stage's attempts still short of executors, given back
    /// when none is.
    fn recovered_executor(
        &mut self,
        container: weir_engine::ContainerId,
        id: i64,
        j: usize,
        s: usize,
        conf: Option<&BTreeMap<String, String>>,
    ) {
        let wanted = self
            .runs
            .get(&id)
            .and_then(|r| r.jobs.get(j))
            .and_then(|job| job.stages.get(s))
            .and_then(|st| super::progress::executors_of(st, conf).executors)
            .map_or(0, |(n, _)| n as usize);
        let short = self.attempts.iter_mut().find(|(_, a)| {
            a.key.task.run == id
                && a.key.task.job as usize == j
                && a.key.task.stage as usize == s
                && a.executors.len() < wanted
        });
        match short {
            Some((aid, a)) => {
                a.executors.push(container);
                self.containers.insert(container, aid.clone());
            }
            None => {
                let now = self.now();
                let _ = self.engine.on_container_finished(now, container);
            }
        }
    }

    /// Submit a job that has running attempts, asking only for their containers.
    fn submit_held(&mut self, id: i64, j: usize, requests: Vec<Request>) {
        let now = self.now();
        let Some(run) = self.runs.get_mut(&id) else { return };
        run.jobs[j].phase = JobPhase::InEngine;
        let spec = weir_engine::JobSpec {
            id: engine_job(id, j),
            queue: run.queue.clone(),
            user: run.user.clone(),
            priority: run.priority,
            submit_time: weir_model::Time(run.submitted_ms.max(0) as u64),
            requests,
            has_am: false,
        };
        if let Err(e) = self.engine.on_job_submitted(now, spec) {
            eprintln!("weir worker: cannot resubmit job {j} of run {id}: {e}");
        }
    }

    /// For jobs resubmitted with their running attempts: ask for their other runnable tasks.
    fn add_ready_requests(&mut self, id: i64) {
        let now = self.now();
        let conf = self.gang_conf();
        let Some(run) = self.runs.get_mut(&id) else { return };
        for (j, job) in run.jobs.iter_mut().enumerate() {
            if job.phase != JobPhase::InEngine {
                continue;
            }
            let mut requests = Vec::new();
            for (s, st) in job.stages.iter_mut().enumerate() {
                if st.waiting_on == 0 {
                    let n = super::progress::ready_tasks(st);
                    if n > 0 {
                        let gang = super::progress::executors_of(st, conf.as_ref());
                        requests.extend(super::progress::task_requests(
                            st.resources,
                            s,
                            n,
                            gang,
                            &mut self.gang_seq,
                        ));
                    }
                }
            }
            if !requests.is_empty() {
                let _ = self.engine.on_requests_added(now, engine_job(id, j), requests);
            }
        }
    }
}

/// Whether the engine already knows this job (it was resubmitted with running attempts).
fn holding_has(engine: &weir_engine::Engine, id: i64, j: usize) -> bool {
    engine.explain(engine_job(id, j)).is_ok()
}
