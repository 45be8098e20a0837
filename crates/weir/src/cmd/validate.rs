//! `weir validate`: check cluster files and report every problem in each.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use weir_model::{ClusterConfig, ModelError};

use crate::load_cluster;

/// Exit status when a file was read but is not a valid cluster file.
const INVALID: u8 = 1;
/// Exit status when a file could not be read at all (as for usage errors).
const UNREADABLE: u8 = 2;

#[derive(Debug, Args)]
#[command(
    about = "Check cluster files and list every problem in them",
    long_about = "Check cluster files (cluster.yaml) without running anything: the YAML, unknown or \
misspelled fields, and weir's rules (weights ≥ 0, tiers 1 to 3 on leaves only, fifo on leaves only, \
no `allow_preemption_from: true` under a queue that forbids preemption, fractions within 0 and 1, \
and so on).\n\n\
A valid file prints one summary line on stdout. An invalid file prints every problem found, not \
only the first, one per line on stderr as `FILE: PATH: MESSAGE`, where PATH is the place in the \
file, with queues named as in the tree (`queues.ads.children.ranking.children.tier1.weight`).\n\n\
Exit status: 0 if every file is valid, 1 if any file is invalid, 2 if a file cannot be read.\n\n\
Examples:\n  weir validate examples/cluster.yaml\n  weir validate clusters/*.yaml"
)]
pub struct ValidateArgs {
    /// Cluster files to check; each is checked even if an earlier one fails.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub fn run(args: &ValidateArgs) -> Result<ExitCode> {
    let mut status = 0;
    for path in &args.files {
        match load_cluster(path) {
            Ok(config) => println!("{}: ok — {}", path.display(), summary(&config)),
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
