//! Trace importers: Alibaba cluster-trace-v2018, the Standard Workload Format and YARN SLS JSON,
//! each turned into a [`weir_model::Workload`] of one-run workflows.
//!
//! A malformed or unusable row is skipped and counted, never fatal: the result says how many
//! rows were read, how many were skipped and why (with the first few line numbers).

use std::collections::BTreeMap;
use std::fmt;
use std::io::BufRead;
use std::str::FromStr;

use weir_model::{QueuePath, Workload};

/// Which trace format a `--trace KIND:PATH` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    Alibaba2018,
    Swf,
    Sls,
}

impl FromStr for TraceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<TraceKind, String> {
        match s {
            "alibaba2018" => Ok(TraceKind::Alibaba2018),
            "swf" => Ok(TraceKind::Swf),
            "sls" => Ok(TraceKind::Sls),
            other => Err(format!("unknown trace kind `{other}`; expected alibaba2018, swf or sls")),
        }
    }
}

impl fmt::Display for TraceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceKind::Alibaba2018 => "alibaba2018",
            TraceKind::Swf => "swf",
            TraceKind::Sls => "sls",
        })
    }
}

/// How imported jobs become workflows.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    /// The leaf every job goes to unless `queue_map` says otherwise.
    pub queue: QueuePath,
    /// Trace-specific ids (SWF queue/partition/group/user ids as `queue:3`, `partition:1`,
    /// `group:7`, `user:12`; SLS queue names) → leaf queues.
    pub queue_map: BTreeMap<String, QueuePath>,
    /// Divide arrival times (relative to the first arrival) by this: 2 = twice as fast.
    pub time_scale: f64,
    /// Keep each job with this probability when below 1; replicate jobs when above 1.
    pub load_scale: f64,
    /// Share of jobs per tier 1, 2, 3, drawn with `seed`.
    pub tier_mix: [f64; 3],
    /// A run's SLO = this × the job's critical-path length; none when `None`.
    pub slo_factor: Option<f64>,
    pub seed: u64,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            queue: QueuePath::parse("root.default").expect("a valid path"),
            queue_map: BTreeMap::new(),
            time_scale: 1.0,
            load_scale: 1.0,
            tier_mix: [0.10, 0.25, 0.65],
            slo_factor: None,
            seed: 1,
        }
    }
}

/// What an importer produced and what it had to leave out.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub workload: Workload,
    /// Data rows (or records) read, not counting comments and headers.
    pub rows: u64,
    /// Rows skipped, by reason, each with a count and the first few line (or record) numbers.
    pub skipped: BTreeMap<String, Skipped>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Skipped {
    pub count: u64,
    pub first_lines: Vec<u64>,
}

impl Imported {
    pub fn skipped_rows(&self) -> u64 {
        self.skipped.values().map(|s| s.count).sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}: cannot read: {source}")]
    Read { file: String, source: std::io::Error },
    #[error("{file}: {problem}")]
    Unusable { file: String, problem: String },
}

/// Read a whole trace. `file` names the source in errors.
pub fn import(
    kind: TraceKind,
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
) -> Result<Imported, ImportError> {
    let _ = (kind, reader, options);
    Err(ImportError::Unusable { file: file.to_string(), problem: "importers are being written".into() })
}
