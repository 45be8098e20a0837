//! Trace importers: Alibaba cluster-trace-v2018, the Standard Workload Format, YARN SLS JSON,
//! SWIM's Facebook MapReduce samples and Alibaba's GPU cluster trace (cluster-trace-gpu-v2023, whose node list can also build the
//! cluster: [`import_nodes`]), each turned into a [`weir_model::Workload`] of one-run workflows.
//!
//! A malformed or unusable row is skipped and counted, never fatal: the result says how many
//! rows were read, how many were skipped and why (with the first few line numbers), which jobs
//! vanished because none of their rows was usable, and which kept rows had something repaired.
//! Only a failing reader or a bad option is an error. Each importer's module documents its
//! mapping; `docs/importers.md` is the user-facing version.
//!
//! Every trace job becomes a workflow with one run at its submission time, re-based so the
//! first job arrives at 0 and divided by `time_scale`; it goes to the leaf that `queue_map` gives
//! for its trace keys, else to `queue`; its tier comes from a leaf named `tier1`…`tier3`, else
//! from the seeded `tier_mix`; with `slo_factor`, its SLO is that many times its critical path.

mod alibaba;
mod alibaba_gpu;
mod build;
mod sls;
mod stream;
mod swf;
mod swim;

pub use stream::{TraceStream, REORDER};

use std::collections::BTreeMap;
use std::fmt;
use std::io::BufRead;
use std::path::PathBuf;
use std::str::FromStr;

use weir_model::{QueuePath, Workload};

pub use alibaba_gpu::{import_nodes, ImportedNodes};
pub use swim::SwimModel;

/// Which trace format a `--trace KIND:PATH` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    Alibaba2018,
    Swf,
    Sls,
    /// Alibaba cluster-trace-gpu-v2023 pods (and, beside them, its node list).
    AlibabaGpu2023,
    /// SWIM's Facebook MapReduce samples (FB-2009, FB-2010): bytes, turned into tasks by
    /// [`SwimModel`].
    Swim,
}

impl TraceKind {
    pub const ALL: [TraceKind; 5] =
        [TraceKind::Alibaba2018, TraceKind::Swf, TraceKind::Sls, TraceKind::AlibabaGpu2023, TraceKind::Swim];

    /// Whether the trace's jobs run with an application master: YARN's (SLS) and Alibaba's
    /// batch jobs do; an SWF job is a rigid parallel job of an HPC machine and a Kubernetes pod
    /// is a container on its own, so neither has one. `weir simulate --am` defaults to this.
    pub fn has_application_masters(self) -> bool {
        matches!(self, TraceKind::Alibaba2018 | TraceKind::Sls | TraceKind::Swim)
    }
}

impl FromStr for TraceKind {
    type Err = ImportError;
    fn from_str(s: &str) -> Result<TraceKind, ImportError> {
        TraceKind::ALL
            .into_iter()
            .find(|k| k.to_string() == s)
            .ok_or_else(|| ImportError::UnknownKind { kind: s.to_string() })
    }
}

impl fmt::Display for TraceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TraceKind::Alibaba2018 => "alibaba2018",
            TraceKind::Swf => "swf",
            TraceKind::Sls => "sls",
            TraceKind::AlibabaGpu2023 => "alibaba-gpu2023",
            TraceKind::Swim => "swim",
        })
    }
}

/// A `--trace KIND:PATH` argument: which importer, and the file the caller should open
/// (`alibaba-gpu2023:PODS.csv,NODES.csv` also names the node list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSpec {
    pub kind: TraceKind,
    pub path: PathBuf,
    /// The node list beside an `alibaba-gpu2023` pod list.
    pub nodes: Option<PathBuf>,
}

impl FromStr for TraceSpec {
    type Err = ImportError;
    fn from_str(s: &str) -> Result<TraceSpec, ImportError> {
        match s.split_once(':') {
            Some((kind, path)) if !path.is_empty() => {
                let kind: TraceKind = kind.parse()?;
                match path.rsplit_once(',') {
                    Some((pods, nodes))
                        if kind == TraceKind::AlibabaGpu2023 && !pods.is_empty() && !nodes.is_empty() =>
                    {
                        Ok(TraceSpec { kind, path: pods.into(), nodes: Some(nodes.into()) })
                    }
                    _ => Ok(TraceSpec { kind, path: path.into(), nodes: None }),
                }
            }
            _ => Err(ImportError::BadTraceSpec { spec: s.to_string() }),
        }
    }
}

impl fmt::Display for TraceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.path.display())?;
        if let Some(nodes) = &self.nodes {
            write!(f, ",{}", nodes.display())?;
        }
        Ok(())
    }
}

/// How imported jobs become workflows.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    /// The leaf every job goes to unless `queue_map` says otherwise.
    pub queue: QueuePath,
    /// Trace keys → leaf queues. SWF: `queue:3`, `partition:1`, `group:7`, `user:12` (tried in
    /// that order); SLS: the job's queue name; Alibaba: `job:j_42`.
    pub queue_map: BTreeMap<String, QueuePath>,
    /// Divide arrival times (relative to the first arrival) by this: 2 = twice as fast.
    pub time_scale: f64,
    /// Keep each job with this probability when below 1; replicate jobs when above 1.
    pub load_scale: f64,
    /// Share of jobs per tier 1, 2, 3, drawn with `seed`, for jobs whose leaf is not named
    /// `tier1`…`tier3`.
    pub tier_mix: [f64; 3],
    /// A run's SLO = this × the job's critical-path length; none when `None`.
    pub slo_factor: Option<f64>,
    pub seed: u64,
    /// Alibaba's `plan_mem` is a percentage of one machine's memory: this many MiB.
    pub machine_memory: u64,
    /// Memory per task (MiB) for SWF jobs that record none.
    pub swf_memory: u64,
    /// The most jobs (workflows) an import may create, SLS `job.count` and `load_scale` copies
    /// included. Each costs about 2 KB once simulated (records, engine and simulator state).
    pub max_jobs: u64,
    /// The most stages those jobs may have in all. Copies of a job arrive together, so their
    /// stages are all live at once: a few hundred bytes each.
    pub max_stages: u64,
    /// The nodes the trace will run on: a task none of them can hold is skipped and counted
    /// like any other bad row (empty: no check).
    pub fit: NodeFit,
    /// Where tasks' walltimes (what EASY backfilling plans with) come from.
    pub walltime: WalltimeFrom,
    /// How a SWIM trace's bytes become tasks and durations.
    pub swim: SwimModel,
}

/// Where imported tasks' walltimes come from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum WalltimeFrom {
    /// The trace's own estimates (SWF field 9); none for formats without them.
    #[default]
    Trace,
    /// Each task's own run time (its longest possible, for a distribution with a bound): exact
    /// estimates, the setting of trace studies that take estimation out of the picture.
    Runtime,
    /// The run time × this factor (at least 1): estimates that overshoot uniformly.
    Factor(f64),
}

/// The node shapes of a cluster and its request rounding, to tell whether a task could ever be
/// placed (as the engine rounds it: the minimum allocation, then the increment).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFit {
    pub nodes: Vec<weir_model::Resources>,
    pub minimum_allocation: weir_model::Resources,
    pub increment: weir_model::Resources,
    /// Every node group's resources and node count: how many containers of a size the whole
    /// cluster holds at once (empty: not checked).
    pub groups: Vec<(weir_model::Resources, u64)>,
}

/// The reason under which gangs the whole empty cluster cannot hold are counted (Slurm refuses
/// such a job at submission: "Requested node configuration is not available").
pub(crate) const GANG_TOO_LARGE: &str = "gang larger than the cluster";

/// The reason under which tasks no node can hold are counted.
pub(crate) const TOO_LARGE: &str = "task larger than any node of the cluster";

impl NodeFit {
    pub fn of(cluster: &weir_model::ClusterConfig) -> NodeFit {
        let mut nodes: Vec<_> = cluster.nodes.iter().map(|g| g.resources).collect();
        nodes.sort_by_key(|r| (r.cpu, r.memory, r.gpu));
        nodes.dedup();
        NodeFit {
            nodes,
            minimum_allocation: cluster.scheduler.minimum_allocation,
            increment: cluster.scheduler.increment,
            groups: cluster.nodes.iter().map(|g| (g.resources, u64::from(g.count))).collect(),
        }
    }

    /// Whether the empty cluster holds `count` containers of `r` at once (always, without
    /// nodes to check): a gang that asks for more could never start.
    pub fn gang_fits(&self, r: &weir_model::Resources, count: u64) -> bool {
        if self.groups.is_empty() {
            return true;
        }
        let needs = r.component_max(&self.minimum_allocation).round_up_to(&self.increment);
        let mut room = 0u64;
        for (node, nodes) in &self.groups {
            let mut per_node = u64::MAX;
            for (need, have) in [(needs.cpu, node.cpu), (needs.memory, node.memory), (needs.gpu, node.gpu)] {
                if let Some(k) = have.checked_div(need) {
                    per_node = per_node.min(k);
                }
            }
            room = room.saturating_add(per_node.saturating_mul(*nodes));
            if room >= count {
                return true;
            }
        }
        false
    }

    /// Whether some node could hold a task of `r` (always, without nodes to check).
    pub fn fits(&self, r: &weir_model::Resources) -> bool {
        let needs = r.component_max(&self.minimum_allocation).round_up_to(&self.increment);
        self.nodes.is_empty() || self.nodes.iter().any(|n| needs.fits_in(n))
    }
}

/// The default [`ImportOptions::max_jobs`]: 0.5 GB at most. 100 SLS records of 85 bytes asking
/// for 10,000 copies each (a million jobs) once meant 1.8 GB.
pub const DEFAULT_MAX_JOBS: u64 = 250_000;
/// The default [`ImportOptions::max_stages`]. The Alibaba sample has 55,469.
pub const DEFAULT_MAX_STAGES: u64 = 2_000_000;

/// How much an import has created so far, against the options' limits.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub jobs: u64,
    pub stages: u64,
}

impl Tally {
    /// Count `copies` of a job of `stages` stages introduced at `line`; an error once past a limit.
    pub fn add(
        &mut self,
        copies: u64,
        stages: u64,
        line: u64,
        file: &str,
        o: &ImportOptions,
    ) -> Result<(), ImportError> {
        self.jobs = self.jobs.saturating_add(copies);
        self.stages = self.stages.saturating_add(copies.saturating_mul(stages));
        let over =
            |what, limit, flag| ImportError::TooMany { file: file.to_string(), what, limit, line, flag };
        if self.jobs > o.max_jobs {
            return Err(over("jobs", o.max_jobs, "--max-jobs"));
        }
        if self.stages > o.max_stages {
            return Err(over("stages", o.max_stages, "--max-stages"));
        }
        Ok(())
    }
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            queue: QueuePath::root().child("default"),
            queue_map: BTreeMap::new(),
            time_scale: 1.0,
            load_scale: 1.0,
            tier_mix: [0.10, 0.25, 0.65],
            slo_factor: None,
            seed: 1,
            machine_memory: 65536,
            swf_memory: 1024,
            max_jobs: DEFAULT_MAX_JOBS,
            max_stages: DEFAULT_MAX_STAGES,
            fit: NodeFit::default(),
            walltime: WalltimeFrom::Trace,
            swim: SwimModel::default(),
        }
    }
}

/// What an importer produced and what it had to leave out.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub workload: Workload,
    /// Data rows (SLS: records) read, not counting blank lines, comments and headers.
    pub rows: u64,
    /// Trace jobs imported, before `load_scale` drops or copies any.
    pub jobs: u64,
    /// Rows skipped, by reason, each with a count and the first few line numbers (for SLS, the
    /// line where the record starts).
    pub skipped: BTreeMap<String, Skipped>,
    /// Jobs the trace names that produced no workflow because none of their rows was usable,
    /// by reason. Their rows are also counted in `skipped`, under each row's own reason.
    pub dropped_jobs: BTreeMap<String, Skipped>,
    /// Rows kept with something left out or repaired (a dependency on an absent task, a
    /// zero-length task lengthened to a second), by reason.
    pub adjusted: BTreeMap<String, Skipped>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Skipped {
    pub count: u64,
    /// The smallest few line numbers involved.
    pub first_lines: Vec<u64>,
}

impl Imported {
    pub fn skipped_rows(&self) -> u64 {
        self.skipped.values().map(|s| s.count).sum()
    }

    pub fn dropped_job_count(&self) -> u64 {
        self.dropped_jobs.values().map(|s| s.count).sum()
    }
}

/// The report a command prints after an import: totals, then every reason with its count and
/// first lines.
impl fmt::Display for Imported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.report(f, self.workload.workflows.len() as u64)
    }
}

impl Imported {
    fn report(&self, f: &mut fmt::Formatter<'_>, workflows: u64) -> fmt::Result {
        writeln!(
            f,
            "{} rows read, {} skipped; {} jobs imported, {} dropped; {} workflows",
            self.rows,
            self.skipped_rows(),
            self.jobs,
            self.dropped_job_count(),
            workflows
        )?;
        for (title, map) in [
            ("skipped rows", &self.skipped),
            ("dropped jobs", &self.dropped_jobs),
            ("kept with changes", &self.adjusted),
        ] {
            if map.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for (reason, s) in map {
                let lines: Vec<String> = s.first_lines.iter().map(u64::to_string).collect();
                let more = if s.count > s.first_lines.len() as u64 { ", …" } else { "" };
                writeln!(f, "  {:>8}  {reason} (lines {}{more})", s.count, lines.join(", "))?;
            }
        }
        Ok(())
    }
}

/// What a streamed import read, skipped and adjusted, and how many workflows it handed out.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamReport {
    pub imported: Imported,
    pub workflows: u64,
}

impl fmt::Display for StreamReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.imported.report(f, self.workflows)
    }
}

/// Why an import could not run at all. Malformed rows are not errors: they are counted in
/// [`Imported`].
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The reader failed; retrying can help if the cause was transient.
    #[error("{file}: cannot read: {source}")]
    Read { file: String, source: std::io::Error },
    /// An option is out of range; retrying with the same options cannot help.
    #[error("import option {option}: {problem}")]
    Option { option: &'static str, problem: String },
    /// Not one of the known trace kinds.
    #[error("unknown trace kind `{kind}`; expected alibaba2018, swf, sls, alibaba-gpu2023 or swim")]
    UnknownKind { kind: String },
    /// The trace asks for more jobs or stages than `ImportOptions::max_jobs` or `max_stages`:
    /// raise the limit if that many is meant; retrying as is cannot help.
    #[error(
        "{file}: the trace asks for more than {limit} {what} (by line {line}, counting SLS job.count \
         and --load-scale copies): raise the limit with {flag} if that many is meant"
    )]
    TooMany { file: String, what: &'static str, limit: u64, line: u64, flag: &'static str },
    /// A `--trace` argument that is not `KIND:PATH`.
    #[error("`{spec}` is not KIND:PATH (e.g. alibaba2018:traces/batch_task.csv)")]
    BadTraceSpec { spec: String },
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
        TraceKind::AlibabaGpu2023 => alibaba_gpu::read(file, reader, options, &mut ledger)?,
        TraceKind::Swim => swim::read(file, reader, options, &mut ledger)?,
    };
    let job_count = jobs.len() as u64;
    let workflows = build::workflows(file, jobs, options, &mut ledger)?;
    Ok(Imported {
        workload: Workload { workflows },
        rows: ledger.rows,
        jobs: job_count,
        skipped: ledger.skipped,
        dropped_jobs: ledger.dropped_jobs,
        adjusted: ledger.adjusted,
    })
}

pub(crate) fn check(o: &ImportOptions) -> Result<(), ImportError> {
    let bad = |option, problem: String| Err(ImportError::Option { option, problem });
    if !(o.time_scale.is_finite() && o.time_scale > 0.0) {
        return bad("time_scale", format!("{} is not a positive number", o.time_scale));
    }
    // Above a hundred copies per job, a typo is likelier than a wish (and memory runs out).
    if !(o.load_scale.is_finite() && (0.0..=100.0).contains(&o.load_scale)) {
        return bad("load_scale", format!("{} is not a number from 0 to 100", o.load_scale));
    }
    if o.tier_mix.iter().any(|w| !w.is_finite() || *w < 0.0) || o.tier_mix.iter().sum::<f64>() <= 0.0 {
        return bad("tier_mix", format!("{:?} needs three weights ≥ 0, not all 0", o.tier_mix));
    }
    if let Some(f) = o.slo_factor.filter(|f| !(f.is_finite() && *f > 0.0)) {
        return bad("slo_factor", format!("{f} is not a positive number"));
    }
    if o.machine_memory == 0 {
        return bad("machine_memory", "must be at least 1 MiB".to_string());
    }
    if o.swf_memory == 0 {
        return bad("swf_memory", "must be at least 1 MiB".to_string());
    }
    if o.max_jobs == 0 || o.max_stages == 0 {
        return bad("max_jobs", "max_jobs and max_stages must be at least 1".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_arguments_parse() {
        let spec: TraceSpec = "alibaba2018:traces/a.csv".parse().expect("parses");
        assert_eq!(
            spec,
            TraceSpec { kind: TraceKind::Alibaba2018, path: "traces/a.csv".into(), nodes: None }
        );
        assert_eq!(spec.to_string(), "alibaba2018:traces/a.csv");
        let sls: TraceSpec = "sls:C:/x.json".parse().expect("only the first colon splits");
        assert_eq!(sls.path, PathBuf::from("C:/x.json"));
        assert_eq!(
            "google:x".parse::<TraceSpec>().map_err(|e| e.to_string()),
            Err("unknown trace kind `google`; expected alibaba2018, swf, sls, alibaba-gpu2023 or swim"
                .to_string())
        );
        assert!(matches!("swf".parse::<TraceSpec>(), Err(ImportError::BadTraceSpec { .. })));
        assert!(matches!("swf:".parse::<TraceSpec>(), Err(ImportError::BadTraceSpec { .. })));
        for kind in TraceKind::ALL {
            assert_eq!(kind.to_string().parse::<TraceKind>().ok(), Some(kind));
        }
        let gpu: TraceSpec = "alibaba-gpu2023:pods.csv,nodes.csv".parse().expect("parses");
        assert_eq!((gpu.path, gpu.nodes), ("pods.csv".into(), Some("nodes.csv".into())));
        let one: TraceSpec = "alibaba-gpu2023:pods.csv".parse().expect("parses");
        assert_eq!(one.nodes, None);
        // Only the GPU trace names a second file; elsewhere a comma is part of the path.
        let swf: TraceSpec = "swf:a,b.swf".parse().expect("parses");
        assert_eq!((swf.path, swf.nodes), ("a,b.swf".into(), None));
        assert_eq!(gpu_spec_display(), "alibaba-gpu2023:p.csv,n.csv");
    }

    fn gpu_spec_display() -> String {
        "alibaba-gpu2023:p.csv,n.csv".parse::<TraceSpec>().expect("parses").to_string()
    }

    #[test]
    fn options_out_of_range_are_refused_by_name() {
        let refused = |o: ImportOptions| match check(&o) {
            Err(ImportError::Option { option, .. }) => option,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let d = ImportOptions::default;
        assert_eq!(refused(ImportOptions { time_scale: f64::NAN, ..d() }), "time_scale");
        assert_eq!(refused(ImportOptions { load_scale: -1.0, ..d() }), "load_scale");
        assert_eq!(refused(ImportOptions { load_scale: 1e9, ..d() }), "load_scale");
        assert_eq!(refused(ImportOptions { tier_mix: [0.0; 3], ..d() }), "tier_mix");
        assert_eq!(refused(ImportOptions { slo_factor: Some(0.0), ..d() }), "slo_factor");
        assert_eq!(refused(ImportOptions { machine_memory: 0, ..d() }), "machine_memory");
        assert!(check(&d()).is_ok());
    }
}
