//! Trace importers: Alibaba cluster-trace-v2018, the Standard Workload Format and YARN SLS JSON,
//! each turned into a [`weir_model::Workload`] of one-run workflows.
//!
//! A malformed or unusable row is skipped and counted, never fatal: the result says how many
//! rows were read, how many were skipped and why (with the first few line numbers), and which
//! kept rows had something left out. Each importer's module documents its mapping.
//!
//! Every trace job becomes a workflow with one run at its submission time, re-based so the
//! first job arrives at 0 and divided by `time_scale`; it goes to the leaf that `queue_map` gives
//! for its trace keys, else to `queue`; its tier comes from a leaf named `tier1`…`tier3`, else
//! from the seeded `tier_mix`; with `slo_factor`, its SLO is that many times its critical path.

mod alibaba;
mod build;
mod sls;
mod swf;

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
    /// Alibaba's `plan_mem` is a percentage of one machine's memory: this many MiB.
    pub machine_memory: u64,
    /// Memory per task (MiB) for SWF jobs that record none.
    pub swf_memory: u64,
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
            machine_memory: 65536,
            swf_memory: 1024,
        }
    }
}

/// What an importer produced and what it had to leave out.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub workload: Workload,
    /// Data rows (or records) read, not counting comments and headers.
    pub rows: u64,
    /// Rows skipped, by reason, each with a count and the first few line (or, for SLS, record)
    /// numbers.
    pub skipped: BTreeMap<String, Skipped>,
    /// Rows kept with something left out (a dependency on an absent task, say), by reason.
    pub adjusted: BTreeMap<String, Skipped>,
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
    #[error("import option {option}: {problem}")]
    Option { option: &'static str, problem: String },
}

/// Read a whole trace. `file` names the source in errors.
pub fn import(
    kind: TraceKind,
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
) -> Result<Imported, ImportError> {
    check(options)?;
    let mut ledger = build::Ledger::default();
    let jobs = match kind {
        TraceKind::Alibaba2018 => alibaba::read(file, reader, options, &mut ledger)?,
        TraceKind::Swf => swf::read(file, reader, options, &mut ledger)?,
        TraceKind::Sls => sls::read(file, reader, options, &mut ledger)?,
    };
    let workflows = build::workflows(jobs, options);
    Ok(Imported {
        workload: Workload { workflows },
        rows: ledger.rows,
        skipped: ledger.skipped,
        adjusted: ledger.adjusted,
    })
}

fn check(o: &ImportOptions) -> Result<(), ImportError> {
    let bad = |option, problem: String| Err(ImportError::Option { option, problem });
    if !(o.time_scale.is_finite() && o.time_scale > 0.0) {
        return bad("time_scale", format!("{} is not a positive number", o.time_scale));
    }
    if !(o.load_scale.is_finite() && o.load_scale >= 0.0) {
        return bad("load_scale", format!("{} is not a number ≥ 0", o.load_scale));
    }
    if o.tier_mix.iter().any(|w| !w.is_finite() || *w < 0.0) || o.tier_mix.iter().sum::<f64>() <= 0.0 {
        return bad("tier_mix", format!("{:?} needs three weights ≥ 0, not all 0", o.tier_mix));
    }
    if let Some(f) = o.slo_factor.filter(|f| !(f.is_finite() && *f > 0.0)) {
        return bad("slo_factor", format!("{f} is not a positive number"));
    }
    Ok(())
}
