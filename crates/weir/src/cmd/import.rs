//! `weir import`: a YARN Fair Scheduler allocation file or Capacity Scheduler configuration as a
//! weir cluster file.

use std::fs;
use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::{Args, ValueEnum};
use weir_model::cluster_file::NodeGroupSpec;
use weir_model::resources::parse_memory;
use weir_model::{ClusterConfig, PartialResources};
use weir_planner::{
    import_yarn_capacity, import_yarn_fair, ExportOptions, Format, ImportOptions, ResourceCalculator,
};

use crate::emit;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ImportFormat {
    /// Hadoop YARN Fair Scheduler allocation file (fair-scheduler.xml).
    YarnFair,
    /// Hadoop YARN Capacity Scheduler configuration (capacity-scheduler.xml), as a
    /// capacity-mode cluster.
    YarnCapacity,
}

#[derive(Debug, Args)]
#[command(
    about = "Turn a YARN fair-scheduler.xml or capacity-scheduler.xml into a weir cluster file",
    long_about = "Read a Hadoop YARN Fair Scheduler allocation file and write the equivalent weir cluster \
file: the queue tree with weight, minResources, maxResources, maxRunningApps, maxAMShare, \
schedulingPolicy, allowPreemptionFrom and the preemption timeouts and threshold, plus the file's \
defaults (userMaxAppsDefault, queueMaxAppsDefault, default*PreemptionTimeout, ...). Elements weir has \
no equivalent for (ACLs, user limits, placement policy, reservations) are listed on stderr.\n\n\
An allocation file has no nodes: give them with --nodes, --node-cpu and --node-memory. Preemption is \
switched on in yarn-site.xml, not in the allocation file: pass --preemption if yours has it on.\n\n\
Exporting the result back with `weir export --format yarn-fair` gives the same settings.\n\n\
--format yarn-capacity reads a capacity-scheduler.xml (the yarn.scheduler.capacity.* properties: \
the queue tree, capacities, max capacities, user limits, priorities, application limits) as a \
capacity-mode cluster; every property weir has no equivalent for is listed on stderr as ignored.\n\n\
Examples:\n  weir import --format yarn-fair fair-scheduler.xml --nodes 40 --out cluster.yaml\n  \
weir import --format yarn-fair fair-scheduler.xml --tiers-from-names --preemption\n  \
weir import --format yarn-capacity capacity-scheduler.xml --nodes 40 --out cluster.yaml"
)]
pub struct ImportArgs {
    /// Input format.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: ImportFormat,
    /// The allocation file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Write the cluster file here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Number of nodes in the cluster.
    #[arg(long, value_name = "COUNT", default_value_t = 1)]
    nodes: u32,
    /// Each node's cpu in millicores.
    #[arg(long, value_name = "MILLICORES", default_value_t = 16_000)]
    node_cpu: u64,
    /// Each node's memory: MiB, or with a unit (64g).
    #[arg(long, value_name = "MEMORY", default_value = "64g")]
    node_memory: String,
    /// Give leaves named tier1, tier2, tier3 that tier (preemption settings kept as in the file).
    #[arg(long)]
    tiers_from_names: bool,
    /// Preemption is on (yarn.scheduler.fair.preemption=true).
    #[arg(long)]
    preemption: bool,
    /// How limits count resources: `default` (YARN's DefaultResourceCalculator, memory only:
    /// the vcores of minResources and maxResources are left out, and listed) or `dominant`
    /// (memory and vcores, as written).
    #[arg(long, value_enum, value_name = "CALCULATOR", default_value = "default")]
    resource_calculator: Calculator,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Calculator {
    Default,
    Dominant,
}

impl From<Calculator> for ResourceCalculator {
    fn from(c: Calculator) -> ResourceCalculator {
        match c {
            Calculator::Default => ResourceCalculator::Default,
            Calculator::Dominant => ResourceCalculator::Dominant,
        }
    }
}

pub fn run(args: &ImportArgs) -> Result<()> {
    let memory = parse_memory(&args.node_memory).map_err(|e| anyhow!("--node-memory: {e}"))?;
    let text =
        fs::read_to_string(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    let name = args.file.display().to_string();
    let options = ImportOptions {
        nodes: vec![NodeGroupSpec {
            count: args.nodes,
            resources: PartialResources { cpu: Some(args.node_cpu), memory: Some(memory), gpu: None },
            label: None,
            gpu_model: None,
        }],
        tiers_from_names: args.tiers_from_names,
        preemption: args.preemption,
        resource_calculator: args.resource_calculator.into(),
    };
    let imported = match args.format {
        ImportFormat::YarnFair => import_yarn_fair(&name, &text, &options)?,
        ImportFormat::YarnCapacity => import_yarn_capacity(&name, &text, &options)?,
    };
    for note in &imported.notes {
        eprintln!("weir: {name}: {note}");
    }
    let cluster = ClusterConfig::from_file(&name, imported.file)?;
    let yaml = weir_planner::export(&cluster, Format::Weir, &ExportOptions::default())?.text;
    match &args.out {
        Some(path) => {
            fs::write(path, yaml).with_context(|| format!("--out: cannot write {}", path.display()))
        }
        None => emit(&yaml),
    }
}
