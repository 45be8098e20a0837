//! weir-slo: deadline guarantees for recurring SLO jobs, after Jockey (Ferguson et al.,
//! EuroSys 2012; DESIGN's "Jockey-style SLO control").
//!
//! - [`JobProfile`] (`profile.rs`): what earlier runs of a job taught — its stage DAG, per-stage
//!   task-duration quantiles, initialization latency and task failure probability — built from
//!   task records (`weir simulate --tasks`' `tasks.csv`) and kept as a small versioned JSON file.
//! - [`RemainingTable`] (`table.rs`): C(p, a), the distribution of the job's remaining time at
//!   progress p when it holds a containers, estimated offline by simulating the job alone with
//!   weir-sim at every allocation 1..A over many seeds and kept as quantiles per progress bucket;
//!   [`Amdahl`] (S + P/a) is the cheap alternative.
//! - [`Indicator`] (`progress.rs`): how far along a running job is — the fraction of expected
//!   task-seconds done, or a critical-path-aware fraction — and [`indicator_error`], their
//!   prediction error on held-back runs.
//! - [`evaluate`] (`evaluate.rs`): the controller against static, maximal and fair-share
//!   allocation and the Amdahl controller, on a workload in weir-sim.
//! - [`Utility`] and [`Controller`] (`controller.rs`): every period, the smallest allocation
//!   whose predicted completion, with slack, meets the deadline; hysteresis and a dead zone keep
//!   it from flapping. [`admit`] (`admission.rs`) says whether a new SLO job fits beside the
//!   ones admitted.
//!
//! It never reads a clock, a file or the network and holds no threads: the host (the `weir slo`
//! commands) reads and writes files and hands time in. Everything random derives from a seed
//! given in, so the same inputs give the same tables, decisions and figures.

mod admission;
mod controller;
mod error;
mod evaluate;
mod profile;
mod progress;
mod report;
mod table;

pub use admission::{admit, Admission, AdmittedJob};
pub use controller::{ControlConfig, Controller, Decision, Utility};
pub use error::SloError;
pub use evaluate::{evaluate, EvalConfig, EvalJob, EvalReport, Policy, PolicyFigures};
pub use profile::{
    observations, JobProfile, StageProfile, TaskObservation, TaskOutcome, PROFILE_VERSION, QUANTILE_LEVELS,
};
pub use progress::{indicator_error, HeldBackSample, Indicator, IndicatorError, JobState};
pub use report::report_html;
pub use table::{
    samples_of_run, simulate_alone, Amdahl, Predictor, RemainingTable, TableConfig, TABLE_QUANTILES,
    TABLE_VERSION,
};
