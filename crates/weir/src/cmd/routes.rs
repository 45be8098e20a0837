//! `weir routes list|set|delete`: the routing rules that send submissions to a cluster and
//! leaf queue (admins change them; anyone with a token lists them).

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use reqwest::Method;
use weir_api::{Route, RouteList, RouteTarget};

use super::client::Connection;
use crate::emit;

#[derive(Debug, Args)]
#[command(
    about = "List, set and delete the routes that send submissions to a cluster and queue",
    long_about = "List, set and delete routing rules. A submission goes to the cluster and leaf \
queue of the route for its workflow (`workflow:NAME`), else of the route for its project and tier \
(`project:PROJECT:TIER`, tier 1 to 3), else to the cluster named `default` through that cluster \
file's placement rules. Setting or deleting needs an admin token; a run already submitted keeps \
its cluster. Routes of the server file with several candidates and a policy (first, \
least_loaded, spill) are listed too, marked `(server file)`; they win over a route of the same \
key set here and are changed in the server file (docs/serve.md, Load-aware routing).\n\nExamples:\n  \
weir routes set workflow:nightly-etl --cluster batch --queue root.etl\n  \
weir routes set project:ads.ranking:1 --cluster gpu --queue root.ads.tier1\n  \
weir routes list\n  weir routes delete workflow:nightly-etl"
)]
pub struct RoutesArgs {
    #[command(subcommand)]
    what: RoutesCommand,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Subcommand)]
enum RoutesCommand {
    /// Print every route: KEY CLUSTER QUEUE (or JSON with --json).
    List {
        /// The API's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create or replace the route for KEY (`workflow:NAME` or `project:PROJECT:TIER`).
    Set {
        key: String,
        /// A cluster the server has loaded.
        #[arg(long)]
        cluster: String,
        /// A leaf queue of that cluster, e.g. root.etl.
        #[arg(long)]
        queue: String,
    },
    /// Delete the route for KEY.
    Delete { key: String },
}

/// A route key as one URL path segment: keys hold letters, digits, `.`, `_`, `-` and `:`, which
/// need no escaping; anything else is refused here rather than sent mangled.
fn path(key: &str) -> Result<String> {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))
    {
        bail!("route key `{key}`: expected `workflow:NAME` or `project:PROJECT:TIER` (letters, digits, `.`, `_`, `-`)");
    }
    Ok(format!("/v1/routes/{key}"))
}

pub fn run(args: &RoutesArgs) -> Result<()> {
    let client = args.conn.client()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        match &args.what {
            RoutesCommand::List { json } => {
                let list: RouteList = client.send(client.request(Method::GET, "/v1/routes")).await?;
                if *json {
                    return emit(&format!("{}\n", serde_json::to_string_pretty(&list)?));
                }
                let mut out = String::new();
                for r in &list.routes {
                    out.push_str(&format!("{:<40} {:<16} {}\n", r.key, r.cluster, r.queue));
                }
                for r in &list.policy_routes {
                    let after = r.spill_after_seconds.map(|s| format!(" after {s}s")).unwrap_or_default();
                    let to: Vec<String> =
                        r.candidates.iter().map(|c| format!("{} {}", c.cluster, c.queue)).collect();
                    out.push_str(&format!(
                        "{:<40} {}{after}: {} (server file)\n",
                        r.key,
                        r.policy,
                        to.join(", ")
                    ));
                }
                if list.routes.is_empty() && list.policy_routes.is_empty() {
                    eprintln!("no routes: submissions go to the cluster `default` and its placement rules");
                }
                emit(&out)
            }
            RoutesCommand::Set { key, cluster, queue } => {
                let body = RouteTarget { cluster: cluster.clone(), queue: queue.clone() };
                let r: Route = client.send(client.request(Method::PUT, &path(key)?).json(&body)).await?;
                emit(&format!("{} -> {} {}\n", r.key, r.cluster, r.queue))
            }
            RoutesCommand::Delete { key } => {
                client.checked(client.request(Method::DELETE, &path(key)?)).await?;
                emit(&format!("route {key} deleted\n"))
            }
        }
    })
}
