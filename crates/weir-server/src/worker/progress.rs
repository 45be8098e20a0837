//! A run's way through its DAG: jobs handed to the engine when their upstream jobs are done,
//! stages released when the stages they wait for are done, and runs ended (succeeded, failed
//! or killed) with every job and task given its final state.

use weir_engine::{JobSpec, Request};
use weir_model::Time;
use weir_store::{Change, TaskKey};

use super::actor::Actor;
use super::live::{engine_job, JobPhase, StageLive, TaskPhase};

/// Tag bit of a container for an executor of a Spark stage's gang; the rest of the tag is the
/// stage's index.
pub(super) const EXECUTOR_TAG: u64 = 1 << 40;

/// How a stage's tasks are asked of the engine beyond one container each (`executors_of`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct StageGangs {
    /// Each task is a Spark application whose executors run as processes of their own: how
    /// many and each one's size (a gang with the driver's container).
    pub executors: Option<(u32, weir_model::Resources)>,
    /// The stage says `gang: true` (or its job does): the tasks asked for together start
    /// together or not at all.
    pub whole: bool,
}

/// The engine requests for `n` ready tasks of a stage (`s`, `resources` each): one request of
/// `n` containers — or, when each task is a Spark application whose executors run as processes
/// of their own (`gangs.executors`: how many and each one's size), per task one gang of its
/// driver's container and its executors' (`EXECUTOR_TAG`), numbered from `seq`: the engine
/// starts the application only when the driver and every executor fit. With `gangs.whole`
/// (the stage's `gang: true`) all of them are one gang: the engine places the `n` tasks (and
/// their executors) in one pass or none of them, as `weir simulate` does.
pub(super) fn task_requests(
    resources: weir_model::Resources,
    s: usize,
    n: u32,
    gangs: StageGangs,
    seq: &mut u32,
) -> Vec<Request> {
    let mut next = || {
        *seq = seq.checked_add(1).unwrap_or(1);
        *seq
    };
    let whole = if gangs.whole { next() } else { 0 };
    let Some((executors, each)) = gangs.executors else {
        let one = Request::new(resources, n).tagged(s as u64);
        return vec![if whole != 0 { one.in_gang(whole) } else { one }];
    };
    let mut out = Vec::with_capacity(2 * n as usize);
    for _ in 0..n {
        let gang = if whole != 0 { whole } else { next() };
        out.push(Request::new(resources, 1).tagged(s as u64).in_gang(gang));
        out.push(Request::new(each, executors).tagged(s as u64 | EXECUTOR_TAG).in_gang(gang));
    }
    out
}

/// A stage's requests with its node selector (`StageLive::selector`, registered with the
/// engine): a stage that names node labels or GPU models runs only where they are, as in
/// `weir simulate`.
pub(super) fn placed(
    engine: &mut weir_engine::Engine,
    selector: &weir_engine::Selector,
    mut requests: Vec<Request>,
) -> Vec<Request> {
    if selector.labels.is_empty() && selector.gpu_models.is_empty() {
        return requests;
    }
    let id = engine.selector(selector);
    for r in &mut requests {
        r.selector = id;
    }
    requests
}

impl Actor {
    /// The Spark properties of a backend whose executors weir counts as a gang
    /// (`spark-standalone`: the executors run on the workers beside the driver); `None` for
    /// every other backend (`spark-local`'s executors are threads of the driver's JVM, counted
    /// in the task's `resources`).
    pub(super) fn gang_conf(&self) -> Option<std::collections::BTreeMap<String, String>> {
        match self.settings.backends.get(&self.cluster) {
            Some(crate::BackendSettings::SparkStandalone { config, .. }) => Some(config.conf.clone()),
            _ => None,
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
        let conf = self.gang_conf();
        let Some(run) = self.runs.get_mut(&id) else { return };
        let extra_len = extra.len();
        let mut requests = extra;
        let job = &mut run.jobs[j];
        for (s, stage) in job.stages.iter_mut().enumerate() {
            if stage.waiting_on == 0 {
                let r = ready_tasks(stage);
                if r > 0 {
                    let gang = executors_of(stage, conf.as_ref());
                    let asked = task_requests(stage.resources, s, r, gang, &mut self.gang_seq);
                    requests.extend(placed(&mut self.engine, &stage.selector, asked));
                }
            }
        }
        if job.gang {
            one_gang(&mut requests[extra_len..], &mut self.gang_seq);
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
        } else {
            self.wait_entered(id, j, at);
        }
        // A job whose stages are all done already (recovery) or that has no stage left.
        if self.runs.get(&id).is_some_and(|r| r.jobs[j].stages_left == 0) {
            self.job_done(id, j);
        }
    }

    /// A stage finished: release the stages that waited only for it; the job may be done.
    pub(super) fn stage_done(&mut self, id: i64, j: usize, s: usize) {
        let now = self.now();
        let conf = self.gang_conf();
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
                    let gang = executors_of(st, conf.as_ref());
                    let asked = task_requests(st.resources, d, n, gang, &mut self.gang_seq);
                    requests.extend(placed(&mut self.engine, &st.selector, asked));
                }
            }
        }
        if job.gang {
            one_gang(&mut requests, &mut self.gang_seq);
        }
        let left = job.stages_left;
        if !requests.is_empty() {
            let _ = self.engine.on_requests_added(now, engine_job(id, j), requests);
        }
        if left == 0 {
            self.job_done(id, j);
        }
    }

    pub(super) fn job_done(&mut self, id: i64, j: usize) {
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

    pub(super) fn finish_ending(&mut self, id: i64) {
        let Some((to, reason)) = self.runs.get(&id).and_then(|r| r.ending.clone()) else { return };
        self.finish_run(id, to, Some(reason));
    }

    /// The run is over: take its jobs out of the engine and record the final states.
    pub fn finish_run(&mut self, id: i64, to: &'static str, reason: Option<String>) {
        let now = self.now();
        let at = now.0 as i64;
        let Some(run) = self.runs.remove(&id) else { return };
        self.abort_outputs(&run, to);
        self.record_verdict_after_end(&run);
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

/// A `gang: true` job's stages released together start as one gang: their requests all take
/// one new number.
fn one_gang(requests: &mut [Request], seq: &mut u32) {
    if requests.is_empty() {
        return;
    }
    *seq = seq.checked_add(1).unwrap_or(1);
    for r in requests {
        r.gang = *seq;
    }
}

/// Mark a stage's not-yet-run tasks ready and count them.
pub fn ready_tasks(stage: &mut StageLive) -> u32 {
    let mut n = 0;
    // Held until its inputs check out (`commit.rs`).
    if !stage.io.inputs_ok {
        return 0;
    }
    for (t, task) in stage.tasks.iter_mut().enumerate() {
        if task.phase == TaskPhase::Pending {
            task.phase = TaskPhase::Ready;
            stage.ready.push_back(t as u32);
            n += 1;
        }
    }
    n
}

/// How a stage's tasks are grouped for the engine: its Spark executors as a gang with each
/// driver, with `conf` the backend's properties when its backend runs executors as processes
/// of their own (`Actor::gang_conf`), and its `gang: true`.
pub(super) fn executors_of(
    stage: &super::live::StageLive,
    conf: Option<&std::collections::BTreeMap<String, String>>,
) -> StageGangs {
    let executors = match (stage.spark.as_ref(), conf) {
        (Some(app), Some(conf)) => weir_backend_spark::executor_gang(app, conf),
        _ => None,
    };
    StageGangs { executors, whole: stage.gang }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::Resources;

    #[test]
    fn a_spark_stages_tasks_are_each_a_gang_of_driver_and_executors() {
        let driver = Resources { cpu: 1000, memory: 2048, gpu: 0 };
        let mut seq = 0;
        // No executors to count: one request for all the ready tasks, no gang.
        let plain = task_requests(driver, 3, 4, StageGangs::default(), &mut seq);
        assert_eq!(plain, vec![Request::new(driver, 4).tagged(3)]);
        assert_eq!(seq, 0);
        let each = Resources { cpu: 1000, memory: 1024, gpu: 0 };
        let spark = |n, whole| StageGangs { executors: Some((n, each)), whole };
        let gangs = task_requests(driver, 3, 2, spark(5, false), &mut seq);
        assert_eq!(
            gangs,
            vec![
                Request::new(driver, 1).tagged(3).in_gang(1),
                Request::new(each, 5).tagged(3 | EXECUTOR_TAG).in_gang(1),
                Request::new(driver, 1).tagged(3).in_gang(2),
                Request::new(each, 5).tagged(3 | EXECUTOR_TAG).in_gang(2),
            ]
        );
        // Numbers go on from the last, never 0.
        let mut top = u32::MAX;
        assert_eq!(task_requests(driver, 0, 1, spark(1, false), &mut top)[0].gang, 1);
    }

    #[test]
    fn a_gang_stages_tasks_are_one_gang_with_their_executors() {
        let task = Resources { cpu: 500, memory: 256, gpu: 0 };
        let mut seq = 7;
        let whole = StageGangs { executors: None, whole: true };
        assert_eq!(
            task_requests(task, 2, 3, whole, &mut seq),
            vec![Request::new(task, 3).tagged(2).in_gang(8)]
        );
        // A Spark stage with `gang: true`: every driver and executor under one number.
        let each = Resources { cpu: 1000, memory: 1024, gpu: 0 };
        let both = StageGangs { executors: Some((2, each)), whole: true };
        assert_eq!(
            task_requests(task, 2, 2, both, &mut seq),
            vec![
                Request::new(task, 1).tagged(2).in_gang(9),
                Request::new(each, 2).tagged(2 | EXECUTOR_TAG).in_gang(9),
                Request::new(task, 1).tagged(2).in_gang(9),
                Request::new(each, 2).tagged(2 | EXECUTOR_TAG).in_gang(9),
            ]
        );
        assert_eq!(seq, 9);
    }
}
