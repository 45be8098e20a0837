//! Where a simulation's per-run and per-job records go as runs and jobs end: kept in memory for
//! the [`crate::Outcome`] (the default, for tests and library callers), or handed to a
//! [`RecordSink`] the host gives — `weir simulate` writes them straight to `runs.csv` and
//! `jobs.csv`, so that a replay of millions of jobs holds none of them.

use std::io;

use weir_model::Workflow;

use weir_model::Time;

use crate::summary::{JobRecord, RunRecord};

/// How one task attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskOutcome {
    /// The task's work is done.
    Done,
    /// The attempt failed (it is retried, or its job fails).
    Failed,
    /// Its container was preempted or lost with its node; the work is lost, the task asked for
    /// again.
    Lost,
}

impl TaskOutcome {
    pub fn name(self) -> &'static str {
        match self {
            TaskOutcome::Done => "done",
            TaskOutcome::Failed => "failed",
            TaskOutcome::Lost => "lost",
        }
    }
}

/// One task attempt that held a container (`tasks.csv`; application masters are left out):
/// numbers, not names, so recording costs no allocation — the workflow handed with it, or the
/// workload, names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskRecord {
    /// The engine's job number (as in `jobs.csv`).
    pub job: u32,
    /// The run the job belongs to, the workflow's index, the job's index in its workflow and
    /// the stage's index in the job.
    pub run: u32,
    pub workflow: u32,
    pub template: u32,
    pub stage: u32,
    /// Failed attempts before this one.
    pub attempt: u32,
    pub start: Time,
    pub end: Time,
    pub outcome: TaskOutcome,
}

/// Receives each run's and each job's record when it ends (unfinished ones at the end of the
/// simulation), with its workflow, which may not outlive the call.
pub trait RecordSink {
    fn run(&mut self, record: &RunRecord, workflow: &Workflow) -> io::Result<()>;
    fn job(&mut self, record: &JobRecord, workflow: &Workflow) -> io::Result<()>;
    /// Each task attempt as it ends (ignored unless the sink wants them).
    fn task(&mut self, _record: &TaskRecord, _workflow: &Workflow) -> io::Result<()> {
        Ok(())
    }
    /// After the last record.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Records kept for the outcome, or given away.
pub(crate) enum Sink {
    Keep { runs: Vec<RunRecord>, jobs: Vec<JobRecord> },
    Host(Box<dyn RecordSink>),
}

impl Default for Sink {
    fn default() -> Sink {
        Sink::Keep { runs: Vec::new(), jobs: Vec::new() }
    }
}

impl Sink {
    pub fn run(&mut self, r: RunRecord, wf: &Workflow) -> io::Result<()> {
        match self {
            Sink::Keep { runs, .. } => {
                runs.push(r);
                Ok(())
            }
            Sink::Host(h) => h.run(&r, wf),
        }
    }

    pub fn task(&mut self, t: &TaskRecord, wf: &Workflow) -> io::Result<()> {
        match self {
            Sink::Keep { .. } => Ok(()),
            Sink::Host(h) => h.task(t, wf),
        }
    }

    pub fn job(&mut self, j: JobRecord, wf: &Workflow) -> io::Result<()> {
        match self {
            Sink::Keep { jobs, .. } => {
                jobs.push(j);
                Ok(())
            }
            Sink::Host(h) => h.job(&j, wf),
        }
    }

    /// The kept records, in submission order (runs) and job order (jobs); none when given away.
    pub fn finish(self) -> io::Result<(Vec<RunRecord>, Vec<JobRecord>)> {
        match self {
            Sink::Keep { mut runs, mut jobs } => {
                runs.sort_by_key(|r| (r.submit, r.workflow));
                jobs.sort_by_key(|j| j.job);
                Ok((runs, jobs))
            }
            Sink::Host(mut h) => h.finish().map(|()| (Vec::new(), Vec::new())),
        }
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sink::Keep { runs, jobs } => write!(f, "Keep({} runs, {} jobs)", runs.len(), jobs.len()),
            Sink::Host(_) => f.write_str("Host"),
        }
    }
}
