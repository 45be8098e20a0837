//! `weir export`: a cluster file as weir, YARN, YuniKorn or Kueue configuration.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use weir_planner::{ExportOptions, Format};

use crate::{emit, load_cluster};

#[derive(Debug, Args)]
#[command(
    about = "Write a cluster's queues as weir, YARN Fair/Capacity Scheduler, YuniKorn or Kueue configuration",
    long_about = "Write the queue tree of a cluster file in another scheduler's configuration format, with \
the field names and units that system documents. Every queue's resolved settings are written (tier \
defaults and inherited preemption settings applied), so the output means the same without weir's tiers; \
what a format cannot express is written as a comment.\n\n\
Formats:\n  \
weir           cluster.yaml as weir writes it\n  \
yarn-fair      fair-scheduler.xml: weight, minResources/maxResources (\"X mb, Y vcores\" or \"X%\"), \
maxRunningApps, maxAMShare, schedulingPolicy, allowPreemptionFrom, fairSharePreemptionTimeout (s), \
fairSharePreemptionThreshold, minSharePreemptionTimeout (s)\n  \
yarn-capacity  capacity-scheduler.xml: capacity (% of parent, siblings sum to exactly 100), \
maximum-capacity, max-parallel-apps, maximum-am-resource-percent, ordering-policy, priority, disable_preemption\n  \
yunikorn       queues.yaml: guaranteed (the steady fair share) and max resources, maxapplications, \
priority and preemption properties\n  \
kueue          ResourceFlavor, Cohort per parent, ClusterQueue and LocalQueue per leaf, nominal quotas\n\n\
Examples:\n  weir export --format yarn-fair --cluster examples/cluster.yaml\n  \
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
}

pub fn run(args: &ExportArgs) -> Result<()> {
    let cluster = load_cluster(&args.cluster)?;
    let options = ExportOptions {
        namespace: args.namespace.clone(),
        partition: args.partition.clone(),
        ..ExportOptions::default()
    };
    let text = weir_planner::export(&cluster, args.format, &options)
        .with_context(|| format!("cannot export {} as {}", args.cluster.display(), args.format))?;
    match &args.out {
        Some(path) => {
            fs::write(path, text).with_context(|| format!("--out: cannot write {}", path.display()))
        }
        None => emit(&text),
    }
}
