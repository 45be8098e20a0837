//! The one error type of weir-sim.

use weir_model::{QueuePath, Resources};

use crate::import::ImportError;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A trace could not be read at all (bad rows are skipped and counted instead).
    #[error(transparent)]
    Import(#[from] ImportError),
    /// The cluster file cannot drive the engine, or the workload asks for more than it can
    /// count. Fix the files; retrying does not help.
    #[error("engine: {0}")]
    Engine(#[from] weir_engine::EngineError),
    /// A workflow names a queue that is not a leaf of the cluster.
    #[error("workflow {workflow}: queue {queue} is not a leaf queue of the cluster{hint}")]
    UnknownQueue { workflow: String, queue: QueuePath, hint: String },
    /// A task no node can ever hold would wait forever.
    #[error(
        "workflow {workflow}, job {job}, stage {stage}: a task needs {needs} but the largest node has {largest}"
    )]
    TaskTooLarge { workflow: String, job: String, stage: String, needs: Resources, largest: Resources },
    /// Recurring or Poisson arrivals never end by themselves.
    #[error("workflow {workflow} recurs forever: give the simulation a horizon (--until)")]
    Unbounded { workflow: String },
    /// The workload would submit more runs than the simulation may hold. Fix the period or
    /// the horizon, or raise the limit; retrying the same run does not help.
    #[error(
        "the workload would submit about {runs} runs before the horizon ({workflow} alone {workflow_runs}), \
         more than the limit of {limit} runs: check its period and the horizon (--until), \
         or raise the limit (--max-runs)"
    )]
    TooManyRuns { runs: u64, limit: u64, workflow: String, workflow_runs: u64 },
    /// Virtual time would pass the longest span weir simulates (`MAX_SIMULATED`).
    #[error(
        "{what} falls at {at_days} days of simulated time, past the {limit_days} days (100 years) weir \
         simulates: a duration or a timestamp in the wrong unit? (a trace can be compressed with --time-scale)"
    )]
    Horizon { what: String, at_days: u64, limit_days: u64 },
    /// The host's record sink (`runs.csv`, `jobs.csv`) could not take a record: a full disk
    /// or a closed file; retrying can help once that is fixed.
    #[error("cannot write a run or job record: {source}")]
    Records { source: std::io::Error },
    /// A setting is out of range.
    #[error("simulation setting {setting}: {problem}")]
    Setting { setting: &'static str, problem: String },
    /// The engine refused an input the simulator built: a simulator bug, reported with the seed.
    #[error("internal error at {at} (seed {seed}): {problem}")]
    Internal { at: weir_model::Time, seed: u64, problem: String },
}
