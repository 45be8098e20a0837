//! `weir migrate status|approve`: the migration table (each dry-run's verdict) and the approval
//! that moves a workflow's route to the cluster its dry-run ran on.

use std::fmt::Write as _;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use reqwest::Method;
use weir_api::{ApproveMigration, MigrationApproved, MigrationStatus, MigrationVerdict};

use super::client::Connection;
use super::safe;
use crate::emit;

#[derive(Debug, Args)]
#[command(
    about = "Show dry-run verdicts and approve moving a workflow to another cluster",
    long_about = "The migration table: each dry-run (`weir submit --dry-run --cluster C`) is \
compared, when it ends, with the production output of the same workflow and logical date, and \
gets a verdict: identical, equivalent (within tolerance: the same rows in another order or \
split, sizes within the configured tolerance) or different, with the differences listed. \
Approving moves the workflow's route (`workflow:NAME`) to the cluster and queue its newest \
dry-run there ran in; it is refused when that verdict is `different` or there is none. \
Approving needs an admin token, as changing a route does.\n\nExamples:\n  \
weir migrate status\n  weir migrate status revenue-report --json\n  \
weir migrate approve revenue-report --to staging"
)]
pub struct MigrateArgs {
    #[command(subcommand)]
    what: MigrateCommand,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Subcommand)]
enum MigrateCommand {
    /// Print the verdicts, newest first: of WORKFLOW, or of every workflow you may view.
    Status {
        workflow: Option<String>,
        /// The API's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Move WORKFLOW's route to CLUSTER, after a dry-run there that was not `different`.
    Approve {
        workflow: String,
        /// The cluster the dry-run ran on.
        #[arg(long = "to", value_name = "CLUSTER")]
        to: String,
    },
}

/// A workflow name as one URL path segment.
fn segment(workflow: &str) -> Result<&str> {
    if workflow.is_empty()
        || !workflow.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        bail!("workflow `{workflow}`: a workflow name has letters, digits, `.`, `_` and `-` only");
    }
    Ok(workflow)
}

pub fn run(args: &MigrateArgs) -> Result<()> {
    let client = args.conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        match &args.what {
            MigrateCommand::Status { workflow, json } => {
                let mut req = client.request(Method::GET, "/v1/migrations");
                if let Some(w) = workflow {
                    req = req.query(&[("workflow", segment(w)?)]);
                }
                let status: MigrationStatus = client.send(req).await?;
                if *json {
                    return emit(&format!("{}\n", serde_json::to_string_pretty(&status)?));
                }
                emit(&table(&status.verdicts))
            }
            MigrateCommand::Approve { workflow, to } => {
                let path = format!("/v1/migrations/{}/approve", segment(workflow)?);
                let body = ApproveMigration { cluster: to.clone() };
                let done: MigrationApproved =
                    client.send(client.request(Method::POST, &path).json(&body)).await?;
                emit(&format!(
                    "{} -> {} {} (dry-run run {}: {})\n",
                    done.route.key,
                    done.route.cluster,
                    done.route.queue,
                    done.verdict.run_id,
                    done.verdict.verdict
                ))
            }
        }
    })
}

fn table(verdicts: &[MigrationVerdict]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6}  {:<24} {:<20} {:<14} {:<11} {:<16} differences",
        "run", "workflow", "logical date", "cluster", "verdict", "approved by"
    );
    for v in verdicts {
        let diffs = v.differences.as_array().map(Vec::as_slice).unwrap_or_default();
        let shown: Vec<String> = diffs
            .iter()
            .filter(|d| !d["tolerated"].as_bool().unwrap_or(false))
            .chain(diffs.iter().filter(|d| d["tolerated"].as_bool().unwrap_or(false)))
            .take(3)
            .map(|d| {
                let part = d["partition"].as_str().filter(|p| !p.is_empty()).unwrap_or("(output)");
                format!(
                    "{part}: {} {} vs {}{}",
                    d["what"].as_str().unwrap_or("?"),
                    d["shadow"].as_str().unwrap_or("?"),
                    d["production"].as_str().unwrap_or("?"),
                    if d["tolerated"].as_bool().unwrap_or(false) { " (tolerated)" } else { "" }
                )
            })
            .collect();
        let more = diffs.len().saturating_sub(shown.len());
        let _ = writeln!(
            out,
            "{:>6}  {:<24} {:<20} {:<14} {:<11} {:<16} {}{}",
            v.run_id,
            safe(&v.workflow),
            safe(&v.logical_date),
            safe(&v.cluster),
            v.verdict,
            v.approved_by.as_deref().map(safe).unwrap_or_default(),
            safe(&shown.join("; ")),
            if more > 0 { format!("; {more} more (--json)") } else { String::new() }
        );
    }
    if verdicts.is_empty() {
        out.push_str("no dry-run verdicts: weir submit FILE --dry-run --cluster CLUSTER\n");
    }
    out
}
