//! weir-sim: the cluster simulator. It runs the real weir engine in virtual time, as fast as the
//! machine allows, on workloads from a `workload.yaml` or from a trace.
//!
//! [`Simulation`] is a discrete-event loop (`sim.rs`) over an execution model of workflow runs,
//! jobs, stages and tasks (`execution.rs`): tasks hold containers for sampled durations, fail and
//! retry, lose their work to preemption and node failures. It measures as it goes (`metrics.rs`)
//! and hands over an [`Outcome`]: the [`Summary`] (`summary.json`), one [`RunRecord`] per run
//! (`runs.csv`), usage intervals per leaf queue ([`UsageRow`], `usage.csv`, the planner's input),
//! the jobs unfinished at the end with the engine's explanation ([`PendingJob`], `pending.csv`)
//! and samples for the report (`report.rs`, `report.html`).
//!
//! It never reads a clock, spawns threads or depends on tokio, and it is deterministic: the same
//! cluster, workload and seed give the same events and the same outputs, bit for bit. Events at
//! one time are handled in the order they were scheduled (a sequence number breaks ties), and
//! every random stream is derived from the seed (`sample.rs`). Its only I/O-shaped code is in
//! the importers and writers, which take readers and writers the caller opened, so every error
//! can name the file.

mod config;
mod csv;
mod ending;
mod error;
mod execution;
pub mod import;
mod limit;
mod metrics;
mod pending;
mod queue;
mod records;
pub mod report;
mod sample;
mod sim;
mod stats;
mod summary;
pub mod synth_swf;
mod usage_csv;
mod window;

pub use config::{NodeFailures, SimConfig, DEFAULT_MAX_CONTAINERS, DEFAULT_MAX_RUNS, MAX_SIMULATED};
pub use csv::{write_jobs_csv, write_runs_csv, CsvRecords, TASKS_HEADER};
pub use ending::{human_wait, longest_wait, Ending, ReasonCount, LONG_WAIT};
pub use error::SimError;
pub use metrics::{Sample, UsageRow, MAX_SAMPLES};
pub use pending::{write_pending_csv, PendingJob};
pub use records::{RecordSink, TaskOutcome, TaskRecord};
pub use sim::{EndReason, Progress, Simulation, WorkflowSource, STALL_STEPS};
pub use stats::{WorkflowSloRow, SLO_ROWS};
pub use summary::{
    bounded_slowdown, GangSummary, GpuSummary, JobRecord, JobStatus, Outcome, QueueSummary,
    ReservationSummary, ResourceFloats, RunRecord, Stats, Summary, TierSummary, TimeFigures,
    SLOWDOWN_BOUND_MS, SLO_SUCCESSFUL,
};
pub use usage_csv::UsageCsv;
