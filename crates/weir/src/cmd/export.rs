//! `weir export`: a cluster file as weir, YARN, YuniKorn or Kueue configuration.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use weir_planner::{ExportOptions, Format, Version};

use crate::{emit, load_cluster};

#[derive(Debug, Args)]
#[command(
    about = "Write a cluster's queues as weir, YARN Fair/Capacity Scheduler, YuniKorn or Kueue configuration",
    long_about = "Write the queue tree of a cluster file in another scheduler's configuration format, with \
the field names and units that system documents. Every queue's resolved settings are written (tier \
defaults and inherited preemption settings applied), so the output means the same without weir's tiers; \
what a format cannot express is listed in a comment block at the top of the file and on stderr.\n\n\
Formats:\n  \
weir           cluster.yaml as weir writes it\n  \
yarn-fair      fair-scheduler.xml: weight, minResources (always absolute: YARN reads a percentage as none), \
maxResources, maxRunningApps, maxAMShare, schedulingPolicy (drf on every ancestor of a drf queue, as YARN \
requires), preemption settings, ACLs, users, reservations, queuePlacementPolicy; GPU limits only with \
--gpu-resource-name\n  \
yarn-capacity  capacity-scheduler.xml: capacity (% of parent, siblings sum to exactly 100, covering each \
queue's min), maximum-capacity, max-parallel-apps (Hadoop 3.3+), priority with priority-utilization ordering, \
ordering-policy, disable_preemption, ACLs; --hadoop-version for older releases\n  \
yunikorn       queues.yaml: guaranteed (the steady fair share, fitted inside the parent's) and max resources, \
maxapplications, user limits, placement rules, sort/priority/preemption properties\n  \
kueue          ResourceFlavor, a Cohort per parent (borrowing limit where capped), a ClusterQueue and \
LocalQueue per leaf; v1beta2 by default, --kueue-version for older releases\n\n\
Examples:\n  weir export --format yarn-fair --cluster examples/cluster.yaml\n  \
weir export --format yarn-capacity --cluster examples/cluster-small.yaml --hadoop-version 3.2\n  \
weir export --format kueue --cluster examples/cluster.yaml --namespace batch --out kueue.yaml"
)]
pub struct ExportArgs {
    /// Target format: weir, yarn-fair, yarn-capacity, yunikorn or kueue.
    #[arg(long, value_name = "FORMAT")]
    format: Format,
    /// The cluster file to export.
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// Write here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Kueue: namespace of the LocalQueues.
    #[arg(long, value_name = "NAME", default_value = "default")]
    namespace: String,
    /// YuniKorn: partition name.
    #[arg(long, value_name = "NAME", default_value = "default")]
    partition: String,
    /// The GPU resource name. YARN: GPU limits are written only with it (e.g. yarn.io/gpu; the
    /// cluster must declare the resource type, or YARN refuses the whole file). YuniKorn and
    /// Kueue: default nvidia.com/gpu.
    #[arg(long, value_name = "NAME")]
    gpu_resource_name: Option<String>,
    /// yarn-capacity: the Hadoop release to write for (before 3.3: leaf names must be unique
    /// and there is no max-parallel-apps).
    #[arg(long, value_name = "VERSION", default_value = "3.4")]
    hadoop_version: Version,
    /// kueue: the Kueue release to write for (0.9–0.12: Cohort v1alpha1; 0.13–0.14: v1beta1;
    /// 0.15 and later: v1beta2).
    #[arg(long, value_name = "VERSION", default_value = "0.16")]
    kueue_version: Version,
}

pub fn run(args: &ExportArgs) -> Result<()> {
    let cluster = load_cluster(&args.cluster)?;
    let options = ExportOptions {
        namespace: args.namespace.clone(),
        partition: args.partition.clone(),
        gpu_resource: args.gpu_resource_name.clone(),
        hadoop_version: args.hadoop_version,
        kueue_version: args.kueue_version,
        ..ExportOptions::default()
    };
    let exported = weir_planner::export(&cluster, args.format, &options)
        .with_context(|| format!("cannot export {} as {}", args.cluster.display(), args.format))?;
    if !exported.losses.is_empty() {
        eprintln!(
            "weir: {}: {} cannot express {} setting{} (listed at the top of the file too):",
            args.cluster.display(),
            args.format,
            exported.losses.len(),
            if exported.losses.len() == 1 { "" } else { "s" }
        );
        for l in &exported.losses {
            eprintln!("  - {l}");
        }
    }
    let text = exported.text;
    match &args.out {
        Some(path) => {
            fs::write(path, text).with_context(|| format!("--out: cannot write {}", path.display()))
        }
        None => emit(&text),
    }
}
