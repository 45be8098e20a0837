//! What a host changes about one job between steps:
//!
//! - **task limits**: a cap on how many of a job's tasks may hold or ask for containers at once
//!   (its application master asks for no more). Only the simulator's side of the job changes:
//!   the engine sees fewer requests, never a new policy. Tasks over a lowered cap keep running
//!   to their end; requests not yet granted are withdrawn. A capped workflow may not use gangs.
//! - **guarantees** (`set_job_guarantee`): passed to the engine's per-job guarantee
//!   (`Engine::set_job_guarantee`) — how weir-slo's controller applies the allocation it
//!   chooses for an SLO job.

use std::collections::BTreeMap;

use weir_engine::{JobId, Request};

use crate::error::SimError;
use crate::sim::{Simulation, AM_TAG};

/// A capped job's tasks: the cap, how many run, how many are asked for per stage, and how many
/// wait for room under the cap per stage.
#[derive(Debug, Default)]
pub(crate) struct JobLimit {
    pub limit: u32,
    pub running: u32,
    pub asked: Vec<u32>,
    pub backlog: Vec<u32>,
}

impl JobLimit {
    fn budget(&self) -> u32 {
        self.limit.saturating_sub(self.running + self.asked.iter().sum::<u32>())
    }
}

#[derive(Debug, Default)]
pub(crate) struct Limits {
    /// The cap new jobs of a workflow start with (by workflow index).
    pub workflows: BTreeMap<u32, u32>,
    /// Capped jobs still going (by job number).
    pub jobs: BTreeMap<u32, JobLimit>,
}

impl Simulation {
    /// Cap the tasks of every job of workflow `workflow` (its index in the workload) submitted
    /// from now on at `limit` (at least 1). Refused for a workflow with gangs.
    pub fn set_workflow_task_limit(&mut self, workflow: u32, limit: u32) -> Result<(), SimError> {
        let wf = self.workload.workflows.get(workflow as usize).ok_or(SimError::Setting {
            setting: "task limit",
            problem: format!("no workflow number {workflow}"),
        })?;
        if wf.jobs.iter().any(|j| j.gang || j.stages.iter().any(|s| s.gang)) {
            return Err(SimError::Setting {
                setting: "task limit",
                problem: format!("workflow {} has gangs, which a task limit cannot split", wf.name),
            });
        }
        self.limits.workflows.insert(workflow, limit.max(1));
        Ok(())
    }

    /// Change a capped job's limit (at least 1); false if the job is not capped (its workflow
    /// had no limit when it was submitted) or has ended. Applied by the next step.
    pub fn set_job_task_limit(&mut self, job: JobId, limit: u32) -> Result<bool, SimError> {
        let Ok(id) = u32::try_from(job.0) else { return Ok(false) };
        let Some(l) = self.limits.jobs.get_mut(&id) else { return Ok(false) };
        l.limit = limit.max(1);
        if l.running + l.asked.iter().sum::<u32>() > l.limit && l.asked.iter().any(|&a| a > 0) {
            // Withdraw what is asked for and not granted; the next step asks again within the cap.
            for (b, a) in l.backlog.iter_mut().zip(l.asked.iter_mut()) {
                *b += *a;
                *a = 0;
            }
            self.engine.on_requests_cleared(self.now, job).map_err(|e| self.internal(e))?;
            let j = &self.jobs[id as usize];
            if j.am.is_none() && j.is_active() {
                if let Some(am) = self.config.am {
                    // The withdrawal took an application master not yet granted with it.
                    let r = Request::new(am, 1).tagged(AM_TAG).as_am();
                    self.engine.on_requests_added(self.now, job, vec![r]).map_err(|e| self.refused(e))?;
                }
            }
        }
        Ok(true)
    }

    /// Guarantee `job` at least `resources` from now on (zero: none), through the engine's
    /// per-job guarantee (`Engine::set_job_guarantee`): its containers are placed ahead of fair
    /// share up to it, and preemption restores it after its leaf's min-share timeout. False if
    /// the job has ended (or was never submitted). Applied by the next step.
    pub fn set_job_guarantee(
        &mut self,
        job: JobId,
        resources: weir_model::Resources,
    ) -> Result<bool, SimError> {
        let Ok(id) = usize::try_from(job.0) else { return Ok(false) };
        if !self.jobs.get(id).is_some_and(|j| j.is_active()) {
            return Ok(false);
        }
        self.engine.set_job_guarantee(self.now, job, resources).map_err(|e| self.refused(e))?;
        Ok(true)
    }

    /// Jobs submitted so far (engine job numbers run from 0 to this, less one): a host finds
    /// new jobs between steps with this and [`Simulation::workflow_of`].
    pub fn jobs_submitted(&self) -> u64 {
        self.jobs.len() as u64
    }

    /// The current cap of a job, and its tasks running now, if it is capped.
    pub fn job_task_limit(&self, job: JobId) -> Option<(u32, u32)> {
        let l = self.limits.jobs.get(&u32::try_from(job.0).ok()?)?;
        Some((l.limit, l.running))
    }

    /// A job is submitted: capped if its workflow is.
    pub(crate) fn limit_new_job(&mut self, job: u32, workflow: u32, stages: usize) {
        if let Some(&limit) = self.limits.workflows.get(&workflow) {
            let l = JobLimit { limit, running: 0, asked: vec![0; stages], backlog: vec![0; stages] };
            self.limits.jobs.insert(job, l);
        }
    }

    /// The part of `requests` a capped job may ask for now; the rest waits in its backlog.
    pub(crate) fn within_limit(&mut self, job: u32, requests: Vec<Request>) -> Vec<Request> {
        let Some(l) = self.limits.jobs.get_mut(&job) else { return requests };
        let mut out = Vec::with_capacity(requests.len());
        for mut r in requests {
            if r.tag == AM_TAG {
                out.push(r);
                continue;
            }
            let s = r.tag as usize;
            let take = r.count.min(l.budget());
            l.backlog[s] += r.count - take;
            l.asked[s] += take;
            if take > 0 {
                r.count = take;
                out.push(r);
            }
        }
        out
    }

    pub(crate) fn limited_task_started(&mut self, job: u32, stage: u32) {
        if let Some(l) = self.limits.jobs.get_mut(&job) {
            l.asked[stage as usize] = l.asked[stage as usize].saturating_sub(1);
            l.running += 1;
        }
    }

    pub(crate) fn limited_task_ended(&mut self, job: u32) {
        if let Some(l) = self.limits.jobs.get_mut(&job) {
            l.running = l.running.saturating_sub(1);
        }
    }

    pub(crate) fn limited_job_ended(&mut self, job: u32) {
        self.limits.jobs.remove(&job);
    }

    /// Before each scheduling pass: ask for backlogged tasks of capped jobs that now have room.
    pub(crate) fn refill_limited(&mut self) -> Result<(), SimError> {
        let ids: Vec<u32> = self
            .limits
            .jobs
            .iter()
            .filter(|(_, l)| l.budget() > 0 && l.backlog.iter().any(|&b| b > 0))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            let j = &self.jobs[id as usize];
            if !j.is_active() {
                continue;
            }
            let (w, t) = (j.workflow as usize, j.template as usize);
            let l = self.limits.jobs.get_mut(&id).expect("listed above");
            let mut requests = Vec::new();
            for s in 0..l.backlog.len() {
                let take = l.backlog[s].min(l.budget());
                if take == 0 {
                    continue;
                }
                l.backlog[s] -= take;
                l.asked[s] += take;
                let stage = &self.workload.workflows[w].jobs[t].stages[s];
                let selector = self.plans[w].selectors[t][s];
                requests.push(crate::execution::stage_request(stage, s as u32, take, 0, selector));
            }
            if !requests.is_empty() {
                self.engine
                    .on_requests_added(self.now, JobId(u64::from(id)), requests)
                    .map_err(|e| self.refused(e))?;
            }
        }
        Ok(())
    }
}
