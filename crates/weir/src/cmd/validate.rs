//! `weir validate`: check cluster and workload files and report every problem in each.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use weir_model::{ClusterConfig, ModelError, Workload, WorkloadFile};

use crate::{load_cluster, EXAMPLE_CLUSTER};

/// Exit status when a file was read but is not a valid cluster file.
const INVALID: u8 = 1;
/// Exit status when a file could not be read at all (as for usage errors).
const UNREADABLE: u8 = 2;

#[derive(Debug, Args)]
#[command(
    about = "Check cluster and workload files and list every problem in them",
    long_about = "Check cluster files (cluster.yaml) and workload files (workload.yaml) without running \
anything: the YAML, unknown or misspelled fields, and weir's rules (weights ≥ 0, tiers 1 to 3 on \
leaves only, fifo on leaves only, no `allow_preemption_from: true` under a queue that forbids \
preemption, fractions within 0 and 1; for workloads: DAGs without cycles, queues that are leaves \
of the cluster, tasks that fit on a node, and so on; a queue's `min` above its `max` or an \
ancestor's, weights above 1,000,000). A file with a top-level `workflows:` is a workload, checked \
against --cluster (default: the example cluster built into weir).\n\n\
Warnings, on stderr as `FILE: warning: PATH: MESSAGE`, name what is valid but can never be \
scheduled: a queue whose `max` leaves no cpu or memory, `max_running_apps: 0`, children \
guaranteed more together than their parent may hold, tasks larger than their queue's cap, \
workflows in a closed queue; and layouts YARN would refuse. They do not change the exit status.\n\n\
A valid file prints one summary line on stdout. An invalid file prints every problem found, not \
only the first, one per line on stderr as `FILE: PATH: MESSAGE`, where PATH is the place in the \
file, with queues named as in the tree (`queues.ads.children.ranking.children.tier1.weight`).\n\n\
Exit status: 0 if every file is valid, 1 if any file is invalid, 2 if a file cannot be read.\n\n\
Examples:\n  weir validate examples/cluster.yaml\n  weir validate clusters/*.yaml\n  \
weir validate --cluster examples/story/cluster-tiered.yaml examples/story/workload.yaml\n  \
weir validate --cluster examples/demo/cluster.yaml examples/demo/workload.yaml   # for weir serve\n\n\
A workload written for `weir serve` (stages with a `command` and no `duration`) is valid: a note \
names each stage only the service can run."
)]
pub struct ValidateArgs {
    /// Cluster or workload files to check; each is checked even if an earlier one fails.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The cluster workload files are checked against. Default: the example cluster built in.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
}

pub fn run(args: &ValidateArgs) -> Result<ExitCode> {
    let mut status = 0;
    for path in &args.files {
        match check(path, args.cluster.as_deref()) {
            Ok(line) => println!("{}: ok — {line}", path.display()),
            Err(e) => match e.downcast_ref::<ModelError>() {
                Some(invalid) => {
                    for problem in invalid.problems() {
                        eprintln!("{}: {problem}", invalid.file());
                    }
                    status = status.max(INVALID);
                }
                None => {
                    eprintln!("weir: {e:#}");
                    status = status.max(UNREADABLE);
                }
            },
        }
    }
    Ok(ExitCode::from(status))
}

/// One summary line for a valid file, cluster or workload.
fn check(path: &Path, cluster: Option<&Path>) -> Result<String> {
    let text = fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if !text.lines().any(|l| l.starts_with("workflows:")) {
        let c = load_cluster(path)?;
        // Valid for weir, but a layout YARN refuses (under rounding: yarn it is an error).
        for w in &c.warnings {
            eprintln!("{}: warning: {w}", path.display());
        }
        return Ok(summary(&c));
    }
    let cluster = match cluster {
        Some(p) => load_cluster(p)?,
        None => ClusterConfig::from_yaml("examples/cluster.yaml (built in)", EXAMPLE_CLUSTER)?,
    };
    let file = path.display().to_string();
    // A workload written for `weir serve` gives commands and no durations: valid for serve.
    let (w, serve_only) = match Workload::from_yaml(&file, &text, &cluster) {
        Ok(w) => (w, Vec::new()),
        Err(sim @ ModelError::Invalid { .. }) => {
            let raw: WorkloadFile = weir_model::parse_yaml(&file, &text)?;
            let stages = || raw.workflows.iter().flat_map(|w| w.jobs.iter().map(move |j| (w, j)));
            let all_commands = stages().all(|(_, j)| j.stages.iter().all(|s| s.command.is_some()));
            if !all_commands {
                return Err(sim.into());
            }
            let live = Workload::live_from_file(&file, &raw, &cluster)?;
            let serve_only = stages()
                .flat_map(|(w, j)| {
                    j.stages
                        .iter()
                        .filter(|s| s.duration.is_none())
                        .map(move |s| format!("workflows.{}.jobs.{}.stages.{}", w.name, j.name, s.name))
                })
                .collect();
            (live, serve_only)
        }
        Err(e) => return Err(e.into()),
    };
    for stage in &serve_only {
        eprintln!(
            "{file}: note: {stage}: a command and no duration: `weir serve` can run it, `weir simulate` cannot \
             (give it a duration to simulate it too)"
        );
    }
    // Valid, but asking what the cluster can never give.
    for warning in w.warnings(&cluster) {
        eprintln!("{}: warning: {warning}", path.display());
    }
    let tiers = [1, 2, 3].map(|t| w.workflows.iter().filter(|f| f.tier == t).count());
    let jobs: usize = w.workflows.iter().map(|f| f.jobs.len()).sum();
    let stages: usize = w.workflows.iter().flat_map(|f| &f.jobs).map(|j| j.stages.len()).sum();
    let with_slo = w.workflows.iter().filter(|f| f.slo.is_some()).count();
    let serve = if serve_only.is_empty() {
        String::new()
    } else {
        format!(" ({} only for weir serve)", serve_only.len())
    };
    Ok(format!(
        "{} workflows (tier 1: {}, tier 2: {}, tier 3: {}; {with_slo} with an SLO), {jobs} jobs, {stages} stages{serve}",
        w.workflows.len(),
        tiers[0],
        tiers[1],
        tiers[2]
    ))
}

/// `40 nodes, 48 queues (33 leaves), total {cpu: 640000, memory: 2621440}`. The implicit `root`
/// is not counted: the numbers match what the file declares.
fn summary(config: &ClusterConfig) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{}, {} ({}), total {}",
        plural(config.node_count() as usize, "node", "nodes"),
        plural(config.queues.len().saturating_sub(1), "queue", "queues"),
        plural(config.leaves().count(), "leaf", "leaves"),
        config.total_resources()
    )
}
