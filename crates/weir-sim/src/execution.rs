//! The execution model: runs of workflows, their jobs, stages and tasks.
//!
//! A run's jobs are submitted when the jobs they wait for have finished; a stage's tasks become
//! container requests when the stages they wait for have finished (a barrier). A task holds its
//! container for its sampled duration; an attempt that fails (with the stage's probability, at a
//! uniformly drawn point) is retried up to `max_attempts`, after which its job — and its run —
//! fails. A task whose container is preempted or lost with its node loses its work and is asked
//! for again, without using up an attempt. A job holds its application master, when there is
//! one, from its first container to its end.
//!
//! A gang stage's tasks (or, for a gang job, the tasks of every set of stages released
//! together) are requested as one gang: the engine starts all of them in one pass. A gang is
//! never left partly running: when one of its tasks is lost with its node, or fails, the
//! others still running are ended too (their work lost, as a restarted MPI job's), and the
//! whole set is asked for again as a gang.

use weir_engine::{ContainerId, JobId, JobSpec, Request};
use weir_model::{Duration, Resources, Time};

use crate::error::SimError;
use crate::records::{TaskOutcome, TaskRecord};
use crate::sample::{self, Rng};
use crate::sim::{Event, Simulation, AM_TAG};
use crate::stats::ratio_units;
use crate::summary::{bounded_slowdown, JobRecord, JobStatus, RunRecord};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobState {
    Active,
    Done,
    Failed,
}

#[derive(Debug)]
pub(crate) struct JobRun {
    pub run: u32,
    pub workflow: u32,
    /// The job's index in its workflow.
    pub template: u32,
    pub leaf: usize,
    pub tier: u8,
    pub state: JobState,
    /// Whether the engine knows it (a rejected job never entered it).
    pub in_engine: bool,
    pub submit: Time,
    /// Its first container (the application master, if it has one).
    pub first_start: Option<Time>,
    /// When every container of its first request (its AM and the tasks of the stages it could
    /// run at once) had been granted: the job held all it asked for (a gang: it started).
    pub all_started: Option<Time>,
    /// When it completed or failed.
    pub end: Option<Time>,
    /// Containers of that first request not granted yet.
    pub first_left: u32,
    /// Whether its application master was ever granted (a lost one asked for again is not
    /// part of the first request a second time).
    pub am_granted: bool,
    /// Resources its containers hold now.
    pub held: Resources,
    pub am: Option<ContainerId>,
    pub stages: Vec<StageRun>,
    pub stages_left: u32,
    pub rng: Rng,
    /// The last gang number handed out (gangs are numbered per job from 1).
    pub gangs: u32,
    /// Running tasks that belong to a gang: (gang, container).
    pub gang_tasks: Vec<(u32, ContainerId)>,
}

impl JobRun {
    pub fn is_active(&self) -> bool {
        self.state == JobState::Active
    }
}

#[derive(Debug, Default)]
pub(crate) struct StageRun {
    /// Upstream stages not finished yet.
    pub waiting_on: u32,
    /// Tasks never started.
    pub fresh: u32,
    /// Tasks to run again: (duration ms, attempts used).
    pub retry: Vec<(u64, u32)>,
    pub done: u32,
    /// Part of the job's first request (requested when the job was submitted).
    pub first: bool,
    /// The gang its tasks were asked for in (0: none).
    pub gang: u32,
}

/// A task attempt holding a container (or a job's application master, `stage == u32::MAX`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskRun {
    pub id: ContainerId,
    pub job: u32,
    pub stage: u32,
    pub start: Time,
    pub duration: u64,
    pub attempt: u32,
    pub resources: Resources,
}

pub(crate) const AM_STAGE: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct RunState {
    pub workflow: u32,
    pub submit: Time,
    pub first_start: Option<Time>,
    /// The engine job of each of the workflow's jobs, once submitted.
    pub jobs: Vec<Option<u32>>,
    /// For each job, how many of its upstream jobs have not finished.
    pub upstream_left: Vec<u32>,
    pub jobs_left: u32,
    pub ended: bool,
    /// Jobs of the run submitted and not yet holding all they first asked for, since when
    /// some have been, and the time so far with at least one such job (the run's delay).
    pub waiting_jobs: u32,
    pub waiting_since: Time,
    pub delay_ms: u64,
}

impl RunState {
    fn job_waits(&mut self, now: Time) {
        if self.waiting_jobs == 0 {
            self.waiting_since = now;
        }
        self.waiting_jobs += 1;
    }

    fn job_granted(&mut self, now: Time) {
        self.waiting_jobs = self.waiting_jobs.saturating_sub(1);
        if self.waiting_jobs == 0 {
            self.delay_ms += now.since(self.waiting_since).as_millis();
        }
    }
}

impl Simulation {
    pub(crate) fn start_run(&mut self, workflow: u32, _index: u32) -> Result<(), SimError> {
        let wf = &self.workload.workflows[workflow as usize];
        let run = self.runs.len() as u32;
        let upstream_left: Vec<u32> = wf.jobs.iter().map(|j| j.after.len() as u32).collect();
        let roots: Vec<u32> = (0..wf.jobs.len() as u32).filter(|&j| upstream_left[j as usize] == 0).collect();
        self.runs.push(RunState {
            workflow,
            submit: self.now,
            first_start: None,
            jobs: vec![None; wf.jobs.len()],
            upstream_left,
            jobs_left: wf.jobs.len() as u32,
            ended: false,
            waiting_jobs: 0,
            waiting_since: self.now,
            delay_ms: 0,
        });
        self.runs_active += 1;
        self.plans[workflow as usize].live_runs += 1;
        if roots.is_empty() {
            return self.end_run(run, false);
        }
        for j in roots {
            // A rejected job fails its run: the other roots are not submitted.
            if self.runs.get(run as usize).is_none_or(|r| r.ended) {
                break;
            }
            self.submit_job(run, j)?;
        }
        Ok(())
    }

    fn submit_job(&mut self, run: u32, template: u32) -> Result<(), SimError> {
        let workflow = self.runs[run as usize].workflow;
        let wf = &self.workload.workflows[workflow as usize];
        let tmpl = &wf.jobs[template as usize];
        let id = self.jobs.len() as u32;
        let stages: Vec<StageRun> = tmpl
            .stages
            .iter()
            .map(|s| StageRun {
                waiting_on: s.after.len() as u32,
                fresh: s.tasks,
                retry: Vec::new(),
                done: 0,
                first: false,
                gang: 0,
            })
            .collect();
        let mut stages = stages;
        let mut gangs = 0;
        let mut requests = Vec::new();
        if let Some(am) = self.config.am {
            requests.push(Request::new(am, 1).tagged(AM_TAG).as_am());
        }
        let mut empty_roots = Vec::new();
        let mut roots = Vec::new();
        for (s, stage) in tmpl.stages.iter().enumerate() {
            if stage.after.is_empty() {
                if stage.tasks == 0 {
                    empty_roots.push(s as u32);
                } else {
                    roots.push(s as u32);
                }
            }
        }
        let plan = &self.plans[workflow as usize];
        requests.extend(release(tmpl, &plan.selectors[template as usize], &roots, &mut stages, &mut gangs));
        let spec = JobSpec {
            id: JobId(u64::from(id)),
            queue: wf.queue.clone(),
            user: wf.user.clone(),
            priority: wf.priority,
            submit_time: self.now,
            requests,
            has_am: self.config.am.is_some(),
        };
        let leaf = self.plans[workflow as usize].leaf;
        let rng =
            sample::stream(self.config.seed, &[1, u64::from(workflow), u64::from(run), u64::from(template)]);
        self.jobs.push(JobRun {
            run,
            workflow,
            template,
            leaf,
            tier: wf.tier,
            state: JobState::Active,
            in_engine: true,
            submit: self.now,
            first_start: None,
            all_started: None,
            end: None,
            first_left: 0,
            am_granted: false,
            held: Resources::ZERO,
            am: None,
            stages_left: stages.len() as u32,
            stages,
            rng,
            gangs,
            gang_tasks: Vec::new(),
        });
        self.runs[run as usize].jobs[template as usize] = Some(id);
        self.metrics.jobs_submitted += 1;
        self.metrics.touch(leaf);
        self.limit_new_job(id, workflow, self.jobs[id as usize].stages.len());
        let spec = JobSpec { requests: self.within_limit(id, spec.requests), ..spec };
        let engine_id = spec.id;
        self.engine.on_job_submitted(self.now, spec).map_err(|e| self.refused(e))?;
        if !self.engine.has_job(engine_id) {
            // Rejected (capacity mode's max_applications or a stopped queue): its run fails
            // now, and the engine hears nothing more of it.
            return self.fail_job(id, false);
        }
        for s in empty_roots {
            self.stage_done(id, s)?;
        }
        // The first request: the AM and every stage requested now (roots, and stages after
        // roots without tasks).
        let tmpl = &self.workload.workflows[workflow as usize].jobs[template as usize];
        let j = &mut self.jobs[id as usize];
        let mut first = u32::from(self.config.am.is_some());
        for (st, spec) in j.stages.iter_mut().zip(&tmpl.stages) {
            if st.waiting_on == 0 && spec.tasks > 0 {
                st.first = true;
                first = first.saturating_add(spec.tasks);
            }
        }
        j.first_left = first;
        if first == 0 {
            j.all_started = Some(self.now);
        } else {
            self.runs[run as usize].job_waits(self.now);
        }
        if self.jobs[id as usize].is_active() && self.jobs[id as usize].stages_left == 0 {
            self.job_done(id)?;
        }
        Ok(())
    }

    pub(crate) fn on_start(
        &mut self,
        container: ContainerId,
        job: u32,
        resources: Resources,
        tag: u64,
    ) -> Result<(), SimError> {
        let now = self.now;
        let Some(j) = self.jobs.get_mut(job as usize) else { return Ok(()) };
        if !j.is_active() {
            // Started in the same pass in which its run failed and the job was taken out of the
            // engine, which has already given the container back.
            return Ok(());
        }
        j.held += resources;
        self.metrics.by_tier[usize::from(j.tier.min(3))] += resources;
        self.metrics.touch(j.leaf);
        if j.first_start.is_none() {
            j.first_start = Some(now);
            let wait = now.since(j.submit).as_millis();
            self.metrics.leaves[j.leaf].jobs.wait.push(wait);
            let run = &mut self.runs[j.run as usize];
            run.first_start.get_or_insert(now);
        }
        // Whether this container is one of the job's first request, granted for the first time.
        let mut first = false;
        let (stage, duration, attempt) = if tag == AM_TAG {
            // A lost AM asked for again is not part of the first request a second time.
            first = !j.am_granted;
            j.am_granted = true;
            j.am = Some(container);
            (AM_STAGE, 0, 0)
        } else {
            let s = tag as usize;
            let template = &self.workload.workflows[j.workflow as usize].jobs[j.template as usize].stages[s];
            let st = &mut j.stages[s];
            let (duration, attempt) = match st.retry.pop() {
                Some(r) => r,
                None => {
                    st.fresh = st.fresh.saturating_sub(1);
                    first = st.first;
                    (sample::duration_ms(&template.duration, &mut j.rng), 0)
                }
            };
            self.metrics.tasks_started += 1;
            if st.gang != 0 {
                // A gang starts all at once and never partly runs: its first task here is a start.
                if !j.gang_tasks.iter().any(|&(g, _)| g == st.gang) {
                    self.metrics.gangs_started += 1;
                }
                j.gang_tasks.push((st.gang, container));
            }
            let p = template.failure_probability;
            let (fails, end) = if template.recorded_failure {
                // A failure the trace recorded: the whole duration, then the failure.
                (true, duration)
            } else {
                let fails = p > 0.0 && sample::unit(&mut j.rng) < p;
                (fails, if fails { (sample::unit(&mut j.rng) * duration as f64) as u64 } else { duration })
            };
            self.push(now.plus(Duration(end.max(1))), Event::TaskEnd { container, failed: fails });
            (s as u32, duration, attempt)
        };
        if stage != AM_STAGE {
            self.limited_task_started(job, stage);
        }
        let j = &mut self.jobs[job as usize];
        if first && j.all_started.is_none() {
            j.first_left = j.first_left.saturating_sub(1);
            if j.first_left == 0 {
                j.all_started = Some(now);
                self.metrics.leaves[j.leaf].jobs.delay.push(now.since(j.submit).as_millis());
                self.runs[j.run as usize].job_granted(now);
            }
        }
        let ix = container.index();
        if self.tasks.len() <= ix {
            self.tasks.resize(ix + 1, None);
        }
        self.tasks[ix] =
            Some(TaskRun { id: container, job, stage, start: now, duration, attempt, resources });
        Ok(())
    }

    /// The running task in this container, taken out of the table; `None` for a stale id (its
    /// job failed and the engine already gave the container back).
    fn take_task(&mut self, container: ContainerId) -> Option<TaskRun> {
        let slot = self.tasks.get_mut(container.index())?;
        match slot {
            Some(t) if t.id == container => {
                let t = *t;
                *slot = None;
                self.jobs.get(t.job as usize).is_some_and(JobRun::is_active).then_some(t)
            }
            _ => None,
        }
    }

    fn release(&mut self, t: &TaskRun) {
        let j = &mut self.jobs[t.job as usize];
        if let Some(pos) = j.gang_tasks.iter().position(|&(_, c)| c == t.id) {
            j.gang_tasks.swap_remove(pos);
        }
        j.held -= t.resources;
        self.metrics.by_tier[usize::from(j.tier.min(3))] -= t.resources;
        self.metrics.touch(j.leaf);
        if t.stage != AM_STAGE {
            self.limited_task_ended(t.job);
        }
    }

    pub(crate) fn on_task_end(&mut self, container: ContainerId, failed: bool) -> Result<(), SimError> {
        let Some(t) = self.take_task(container) else { return Ok(()) };
        self.engine.on_container_finished(self.now, container).map_err(|e| self.internal(e))?;
        self.release(&t);
        self.record_task(&t, if failed { TaskOutcome::Failed } else { TaskOutcome::Done })?;
        if failed {
            self.metrics.task_attempts_failed += 1;
            if t.attempt + 1 >= self.config.max_attempts || self.recorded_failure(&t) {
                return self.fail_job(t.job, true);
            }
            self.jobs[t.job as usize].stages[t.stage as usize].retry.push((t.duration, t.attempt + 1));
            self.break_gang(&t)?;
            return self.ask_again(&t);
        }
        self.metrics.tasks_completed += 1;
        let j = &mut self.jobs[t.job as usize];
        let st = &mut j.stages[t.stage as usize];
        st.done += 1;
        let tasks = self.workload.workflows[j.workflow as usize].jobs[j.template as usize].stages
            [t.stage as usize]
            .tasks;
        if st.done == tasks {
            self.stage_done(t.job, t.stage)?;
            if self.jobs[t.job as usize].stages_left == 0 {
                self.job_done(t.job)?;
            }
        }
        Ok(())
    }

    /// A container was taken (preemption) or lost (its node failed): the engine has already
    /// given it back; its task's work is lost and the task is asked for again.
    pub(crate) fn on_lost(&mut self, container: ContainerId, preempted: bool) -> Result<(), SimError> {
        let Some(t) = self.take_task(container) else { return Ok(()) };
        self.release(&t);
        self.record_task(&t, TaskOutcome::Lost)?;
        let leaf = self.jobs[t.job as usize].leaf;
        if preempted {
            self.metrics.leaves[leaf].preempted += 1;
        }
        self.metrics.wasted_ms += u128::from(self.now.since(t.start).as_millis());
        if t.stage == AM_STAGE {
            self.jobs[t.job as usize].am = None;
        } else {
            self.jobs[t.job as usize].stages[t.stage as usize].retry.push((t.duration, t.attempt));
            if !preempted {
                // Preemption takes a whole gang itself; a node failure takes only what ran there.
                self.break_gang(&t)?;
            }
        }
        self.ask_again(&t)
    }

    /// Hand a task attempt that just ended to whoever wants task records (AMs are left out).
    fn record_task(&mut self, t: &TaskRun, outcome: TaskOutcome) -> Result<(), SimError> {
        let wants_host = matches!(self.sink, crate::records::Sink::Host(_));
        if t.stage == AM_STAGE || (self.task_records.is_none() && !wants_host) {
            return Ok(());
        }
        let j = &self.jobs[t.job as usize];
        let record = TaskRecord {
            job: t.job,
            run: j.run,
            workflow: j.workflow,
            template: j.template,
            stage: t.stage,
            attempt: t.attempt,
            start: t.start,
            end: self.now,
            outcome,
        };
        if let Some(kept) = &mut self.task_records {
            kept.push(record);
        }
        if wants_host {
            let wf = &self.workload.workflows[record.workflow as usize];
            self.sink.task(&record, wf).map_err(|source| SimError::Records { source })?;
        }
        Ok(())
    }

    /// Whether the task replays a failure its trace recorded (no retry: its job fails).
    fn recorded_failure(&self, t: &TaskRun) -> bool {
        let j = &self.jobs[t.job as usize];
        let job = &self.workload.workflows[j.workflow as usize].jobs[j.template as usize];
        job.stages.get(t.stage as usize).is_some_and(|s| s.recorded_failure)
    }

    /// One task of a gang is gone (failed, or lost with its node): end the others still running
    /// — their work is lost — and ask for them again, so the gang restarts whole.
    fn break_gang(&mut self, t: &TaskRun) -> Result<(), SimError> {
        let stage_gang = self.jobs[t.job as usize].stages.get(t.stage as usize).map_or(0, |s| s.gang);
        if stage_gang == 0 {
            return Ok(());
        }
        let others: Vec<ContainerId> = self.jobs[t.job as usize]
            .gang_tasks
            .iter()
            .filter(|&&(g, c)| g == stage_gang && c != t.id)
            .map(|&(_, c)| c)
            .collect();
        for c in others {
            let Some(sibling) = self.take_task(c) else { continue };
            self.engine.on_container_finished(self.now, c).map_err(|e| self.internal(e))?;
            self.release(&sibling);
            self.record_task(&sibling, TaskOutcome::Lost)?;
            self.metrics.gang_restarts_tasks += 1;
            self.metrics.wasted_ms += u128::from(self.now.since(sibling.start).as_millis());
            self.jobs[t.job as usize].stages[sibling.stage as usize]
                .retry
                .push((sibling.duration, sibling.attempt));
            self.ask_again(&sibling)?;
        }
        Ok(())
    }

    fn ask_again(&mut self, t: &TaskRun) -> Result<(), SimError> {
        let j = &self.jobs[t.job as usize];
        let request = if t.stage == AM_STAGE {
            // A lost AM is asked for again as an AM: it goes first and counts against the AM share.
            Request::new(self.config.am.unwrap_or(t.resources), 1).tagged(AM_TAG).as_am()
        } else {
            let s = &self.workload.workflows[j.workflow as usize].jobs[j.template as usize].stages
                [t.stage as usize];
            let selector = self.plans[j.workflow as usize].selectors[j.template as usize][t.stage as usize];
            stage_request(s, t.stage, 1, j.stages[t.stage as usize].gang, selector)
        };
        let requests = self.within_limit(t.job, vec![request]);
        if requests.is_empty() {
            return Ok(());
        }
        self.engine
            .on_requests_added(self.now, JobId(u64::from(t.job)), requests)
            .map_err(|e| self.refused(e))
    }

    /// A stage finished: release the stages waiting only for it (a stage without tasks finishes
    /// at once, so this walks on through them).
    fn stage_done(&mut self, job: u32, stage: u32) -> Result<(), SimError> {
        let j = &mut self.jobs[job as usize];
        let (w, t) = (j.workflow as usize, j.template as usize);
        let template = &self.workload.workflows[w].jobs[t];
        let mut ready = Vec::new();
        let mut finished = vec![stage];
        while let Some(s) = finished.pop() {
            j.stages_left -= 1;
            for &d in &self.plans[w].stage_next[t][s as usize] {
                let st = &mut j.stages[d as usize];
                st.waiting_on -= 1;
                if st.waiting_on == 0 {
                    if template.stages[d as usize].tasks == 0 {
                        finished.push(d);
                    } else {
                        ready.push(d);
                    }
                }
            }
        }
        let requests = release(template, &self.plans[w].selectors[t], &ready, &mut j.stages, &mut j.gangs);
        let requests = self.within_limit(job, requests);
        if !requests.is_empty() {
            self.engine
                .on_requests_added(self.now, JobId(u64::from(job)), requests)
                .map_err(|e| self.refused(e))?;
        }
        Ok(())
    }

    fn job_done(&mut self, job: u32) -> Result<(), SimError> {
        if self.config.check_invariants {
            let j = &self.jobs[job as usize];
            let stages = &self.workload.workflows[j.workflow as usize].jobs[j.template as usize].stages;
            if let Some((s, _)) = j.stages.iter().zip(stages).find(|(st, spec)| st.done != spec.tasks) {
                return Err(self.internal(format!("job-{job} ended with stage {s:?} not done")));
            }
        }
        self.end_job(job, JobState::Done)?;
        self.metrics.jobs_completed += 1;
        let (run, template) = (self.jobs[job as usize].run, self.jobs[job as usize].template);
        let w = self.runs[run as usize].workflow as usize;
        let next = self.plans[w].job_next[template as usize].clone();
        let r = &mut self.runs[run as usize];
        r.jobs_left -= 1;
        let mut ready = Vec::new();
        for d in next {
            r.upstream_left[d as usize] -= 1;
            if r.upstream_left[d as usize] == 0 {
                ready.push(d);
            }
        }
        if r.jobs_left == 0 {
            return self.end_run(run, false);
        }
        for d in ready {
            if self.runs.get(run as usize).is_none_or(|r| r.ended) {
                break;
            }
            self.submit_job(run, d)?;
        }
        Ok(())
    }

    /// Take a job out of the engine (its containers, the AM among them, are given back).
    fn end_job(&mut self, job: u32, state: JobState) -> Result<(), SimError> {
        self.limited_job_ended(job);
        let now = self.now;
        let j = &mut self.jobs[job as usize];
        j.state = state;
        j.stages = Vec::new();
        j.end = Some(now);
        let record = job_record(job, j);
        let (held, tier, leaf, in_engine, am) = (j.held, j.tier, j.leaf, j.in_engine, j.am.take());
        j.held = Resources::ZERO;
        match j.all_started {
            // It never held all it asked for: it no longer waits either.
            None => self.runs[j.run as usize].job_granted(now),
            Some(all) if state == JobState::Done => {
                let response = now.since(j.submit).as_millis();
                let l = &mut self.metrics.leaves[leaf].jobs;
                l.completed += 1;
                l.response.push(response);
                l.slowdown.push(ratio_units(bounded_slowdown(response, all.since(j.submit).as_millis())));
            }
            Some(_) => {}
        }
        self.metrics.by_tier[usize::from(tier.min(3))] -= held;
        self.metrics.touch(leaf);
        if let Some(am) = am {
            if self.tasks.get(am.index()).and_then(|t| t.as_ref()).is_some_and(|t| t.id == am) {
                self.tasks[am.index()] = None;
            }
        }
        if in_engine {
            self.engine.on_job_finished(now, JobId(u64::from(job))).map_err(|e| self.internal(e))?;
        }
        let wf = &self.workload.workflows[record.workflow as usize];
        self.sink.job(record, wf).map_err(|source| SimError::Records { source })
    }

    /// A job failed (a task out of attempts, or the engine rejected it): its run fails with it,
    /// and the run's other jobs are stopped.
    pub(crate) fn fail_job(&mut self, job: u32, in_engine: bool) -> Result<(), SimError> {
        if !self.jobs.get(job as usize).is_some_and(JobRun::is_active) {
            return Ok(());
        }
        self.jobs[job as usize].in_engine = in_engine;
        self.end_job(job, JobState::Failed)?;
        self.metrics.jobs_failed += 1;
        let run = self.jobs[job as usize].run;
        let others: Vec<u32> = self.runs[run as usize]
            .jobs
            .iter()
            .flatten()
            .copied()
            .filter(|&o| self.jobs.get(o as usize).is_some_and(JobRun::is_active))
            .collect();
        for o in others {
            self.end_job(o, JobState::Failed)?;
            self.metrics.jobs_failed += 1;
        }
        self.end_run(run, true)
    }

    fn end_run(&mut self, run: u32, failed: bool) -> Result<(), SimError> {
        let Some(r) = self.runs.get_mut(run as usize) else { return Ok(()) };
        if r.ended {
            return Ok(());
        }
        r.ended = true;
        let jobs = std::mem::take(&mut r.jobs);
        r.upstream_left = Vec::new();
        self.runs_active -= 1;
        let wf = &self.workload.workflows[r.workflow as usize];
        let elapsed = self.now.since(r.submit);
        let record = RunRecord {
            workflow: r.workflow,
            submit: r.submit,
            start: r.first_start,
            end: Some(self.now),
            failed,
            met: wf.slo.map(|slo| !failed && elapsed <= slo),
            delay: Some(Duration(r.delay_ms)),
        };
        self.last_run_end = self.now;
        self.run_over(record)?;
        // Its records are out: the run and its jobs are forgotten (a decision still to come for
        // one of them in this pass finds no job and is passed over).
        for job in jobs.into_iter().flatten() {
            self.jobs.remove(job as usize);
        }
        self.runs.remove(run as usize);
        Ok(())
    }

    /// A run's record is final (it ended, or the simulation did): count it, hand it over, and
    /// close its workflow's SLO record if no run of it is left.
    fn run_over(&mut self, record: RunRecord) -> Result<(), SimError> {
        let w = record.workflow as usize;
        let wf = &self.workload.workflows[w];
        let plan = &mut self.plans[w];
        self.run_stats.run(&record, wf.tier, &mut plan.slo);
        plan.live_runs -= 1;
        self.runs_ended += 1;
        self.sink.run(record, wf).map_err(|source| SimError::Records { source })?;
        self.workflow_maybe_done(w as u32);
        Ok(())
    }

    /// Fold a workflow's SLO record into its tier once it will have no more runs.
    pub(crate) fn workflow_maybe_done(&mut self, w: u32) {
        let plan = &mut self.plans[w as usize];
        if plan.arrivals_done && plan.live_runs == 0 && !plan.finalized {
            plan.finalized = true;
            let slo = std::mem::take(&mut plan.slo);
            let wf = &self.workload.workflows[w as usize];
            self.run_stats.workflow_done(&wf.name, wf.tier, wf.slo, slo);
            // A streamed workflow is forgotten once done; a workload's are the outcome's.
            if self.streaming && !self.finished {
                self.workload.workflows.remove(w as usize);
                self.plans.remove(w as usize);
            }
        }
    }

    /// The end of the simulation: runs still going are missed if their deadline has already
    /// passed, else unfinished and left out of SLO figures; jobs still going get their records;
    /// every workflow's SLO record is closed.
    pub(crate) fn record_unfinished(&mut self, end: Time) -> Result<(), SimError> {
        let live: Vec<u32> =
            self.jobs.iter().filter(|(_, j)| j.is_active()).map(|(id, _)| id as u32).collect();
        for job in live {
            let record = job_record(job, &self.jobs[job as usize]);
            let wf = &self.workload.workflows[record.workflow as usize];
            self.sink.job(record, wf).map_err(|source| SimError::Records { source })?;
        }
        let open: Vec<u32> = self.runs.iter().filter(|(_, r)| !r.ended).map(|(id, _)| id as u32).collect();
        for run in open {
            let r = &mut self.runs[run as usize];
            r.ended = true;
            let wf = &self.workload.workflows[r.workflow as usize];
            let missed = wf.slo.filter(|slo| r.submit.plus(*slo) <= end).map(|_| false);
            let record = RunRecord {
                workflow: r.workflow,
                submit: r.submit,
                start: r.first_start,
                end: None,
                failed: false,
                met: missed,
                delay: None,
            };
            self.run_over(record)?;
        }
        for w in self.plans.ids() {
            self.plans[w].arrivals_done = true;
            self.workflow_maybe_done(w as u32);
        }
        Ok(())
    }
}

/// A job's record as it stands.
fn job_record(id: u32, j: &JobRun) -> JobRecord {
    JobRecord {
        job: u64::from(id),
        workflow: j.workflow,
        template: j.template,
        tier: j.tier,
        submit: j.submit,
        first_start: j.first_start,
        all_started: j.all_started,
        end: j.end,
        status: match j.state {
            JobState::Done => JobStatus::Completed,
            JobState::Failed => JobStatus::Failed,
            JobState::Active => JobStatus::Unfinished,
        },
    }
}

/// The request for `count` tasks of a stage, in gang `gang` (0: none), on its selector.
pub(crate) fn stage_request(
    s: &weir_model::Stage,
    stage: u32,
    count: u32,
    gang: u32,
    selector: weir_engine::SelectorId,
) -> Request {
    let mut r = Request::new(s.resources, count)
        .tagged(u64::from(stage))
        .in_gang(gang)
        .with_gpu_milli(s.placement.gpu_milli)
        .on(selector);
    if let Some(w) = s.walltime {
        r = r.with_walltime(w);
    }
    r
}

/// The requests for stages released together: a gang job's stages form one gang, a gang stage
/// its own; gang numbers are handed out per job.
fn release(
    tmpl: &weir_model::JobTemplate,
    selectors: &[weir_engine::SelectorId],
    stages: &[u32],
    runs: &mut [StageRun],
    gangs: &mut u32,
) -> Vec<Request> {
    let mut job_gang = 0;
    let mut out = Vec::with_capacity(stages.len());
    for &s in stages {
        let spec = &tmpl.stages[s as usize];
        let gang = if tmpl.gang {
            if job_gang == 0 {
                *gangs += 1;
                job_gang = *gangs;
            }
            job_gang
        } else if spec.gang {
            *gangs += 1;
            *gangs
        } else {
            0
        };
        runs[s as usize].gang = gang;
        out.push(stage_request(spec, s, spec.tasks, gang, selectors[s as usize]));
    }
    out
}
