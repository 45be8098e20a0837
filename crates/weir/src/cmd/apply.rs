//! `weir apply PLAN_DIR`: load a plan (`weir plan`'s output) into a running server — the
//! cluster's queue settings and the routes to it — after showing what changes.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use weir_api::{HistoryWindow, PlanDiff, PlanRequest, PlanValidation, Tier1Figures};

use super::client::{Client, Connection};
use super::plan_server::{RoutesFile, Source};

#[derive(Debug, Args)]
#[command(
    about = "Apply a plan to a running server: its queue settings and routes (admin)",
    long_about = "Apply a plan — `weir plan`'s output directory — to a running server: the cluster's queue \
settings become the plan's cluster.yaml, and, if the directory has a routes.yaml, the routes to the \
cluster become exactly its routes. The server checks the plan first and shows what would change; \
then, after you confirm (or with --yes), applies the settings and the routes in one transaction. The \
owning worker rebuilds its scheduler with the new settings at once; running tasks keep running.\n\n\
The server makes every check (the same for a plan posted straight to its API); refused, changing \
nothing:\n  \
- a plan whose validation got worse for tier 1 (validate.json: a lower tier-1 SLO success or fewer \
SLO-successful tier-1 workflows on the planned settings than on the current ones), or a plan \
without validate.json unless --unvalidated;\n  \
- a plan made from less recorded history than the server's minimum (`weir serve \
--plan-min-history`, default 1 day; source.json names the window) unless --force;\n  \
- a plan the server refuses: a queue the cluster does not have (or one left out), other nodes, \
capacities that do not fit (a min above its max, above the cluster, or children's mins above \
their parent's), a route to a queue that is not a leaf;\n  \
- a plan made from an older version of the cluster's configuration (source.json): plan again.\n\n\
Every applied version is recorded on the server: the dashboard's Clusters page shows the history \
and rolls back to any earlier version.\n\n\
A global admin token is needed ($WEIR_TOKEN, or the local data directory's admin.token).\n\n\
Examples:\n  weir plan --server http://127.0.0.1:8470 --validate --out plan/\n  \
weir apply plan/ --server http://127.0.0.1:8470\n  \
weir apply plan/ --yes"
)]
pub struct ApplyArgs {
    /// The plan's directory: cluster.yaml, and optionally routes.yaml, validate.json, source.json.
    dir: PathBuf,
    /// The cluster to apply to (default: source.json's, else the only one or `default`).
    #[arg(long, value_name = "NAME")]
    cluster: Option<String>,
    /// Apply without asking.
    #[arg(long, short)]
    yes: bool,
    /// Apply a plan that has no validate.json (it was not replayed with --validate).
    #[arg(long)]
    unvalidated: bool,
    /// Apply a plan made from less recorded history than the server asks for.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    conn: Connection,
}

fn read(dir: &Path, file: &str) -> Result<Option<String>> {
    let path = dir.join(file);
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Tier 1 as validate.json reports it for `side` (`current` or `planned`).
fn tier1(v: &serde_json::Value, side: &str) -> Tier1Figures {
    let t = &v[side]["tiers"]["1"];
    Tier1Figures {
        slo_success_ratio: t["slo_success_ratio"].as_f64(),
        slo_successful_workflows: t["slo_successful_workflows"].as_u64().unwrap_or(0),
    }
}

/// validate.json's tier-1 figures, for the server to judge; `None` without the file.
fn validation(dir: &Path) -> Result<Option<PlanValidation>> {
    let Some(text) = read(dir, "validate.json")? else { return Ok(None) };
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", dir.join("validate.json").display()))?;
    if v.get("current").is_none() || v.get("planned").is_none() {
        bail!("{}: expected `current` and `planned` summaries", dir.join("validate.json").display());
    }
    Ok(Some(PlanValidation { current: tier1(&v, "current"), planned: tier1(&v, "planned") }))
}

fn show(d: &PlanDiff) -> String {
    let mut out = format!("plan for cluster `{}` (configuration version {}):\n", d.cluster, d.base_version);
    if d.queues.is_empty() && d.routes.is_empty() {
        out.push_str("  nothing changes\n");
        return out;
    }
    let w = d.queues.iter().map(|c| c.queue.len()).max().unwrap_or(0);
    let f = d.queues.iter().map(|c| c.field.len()).max().unwrap_or(0);
    for c in &d.queues {
        out.push_str(&format!("  {:<w$}  {:<f$}  {} → {}\n", c.queue, c.field, c.from, c.to));
    }
    for r in &d.routes {
        out.push_str(&format!(
            "  route {}: {} → {}\n",
            r.key,
            r.from.as_deref().unwrap_or("(none)"),
            r.to.as_deref().unwrap_or("(removed)")
        ));
    }
    for w in &d.warnings {
        out.push_str(&format!("  warning: {w}\n"));
    }
    out
}

async fn post(client: &Client, cluster: &str, req: &PlanRequest) -> Result<PlanDiff> {
    client
        .send(client.request(reqwest::Method::POST, &format!("/v1/clusters/{cluster}/plan")).json(req))
        .await
}

pub fn run(args: &ApplyArgs) -> Result<()> {
    let dir = &args.dir;
    let config = read(dir, "cluster.yaml")?.with_context(|| {
        format!("{} has no cluster.yaml: give `weir plan`'s --out directory", dir.display())
    })?;
    let source: Option<Source> = match read(dir, "source.json")? {
        Some(t) => Some(
            serde_json::from_str(&t)
                .with_context(|| format!("{} is not valid", dir.join("source.json").display()))?,
        ),
        None => None,
    };
    let routes = match read(dir, "routes.yaml")? {
        Some(t) => {
            let file: RoutesFile =
                weir_model::parse_yaml(&dir.join("routes.yaml").display().to_string(), &t)?;
            Some(file)
        }
        None => None,
    };
    let validation = validation(dir)?;
    let mut conn = args.conn.clone();
    if conn.server.is_none() && std::env::var_os("WEIR_SERVER").is_none() {
        conn.server = source.as_ref().map(|s| s.server.clone());
    }
    let client = conn.client()?;
    let cluster = args
        .cluster
        .clone()
        .or_else(|| source.as_ref().map(|s| s.cluster.clone()))
        .or_else(|| routes.as_ref().map(|r| r.cluster.clone()))
        .unwrap_or_else(|| "default".to_string());
    if let Some(r) = &routes {
        if r.cluster != cluster {
            bail!("{} routes to cluster `{}`, not `{cluster}`", dir.join("routes.yaml").display(), r.cluster);
        }
    }
    let from_here = source.as_ref().filter(|s| s.cluster == cluster);
    let mut req = PlanRequest {
        config,
        routes: routes.as_ref().map(RoutesFile::to_routes),
        base_version: from_here.map(|s| s.version),
        dry_run: true,
        unvalidated: validation.is_none() && args.unvalidated,
        validation,
        history: from_here.map(|s| HistoryWindow { since_ms: s.since_ms, until_ms: s.until_ms }),
        force: args.force,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let diff = post(&client, &cluster, &req).await.context("the server refused the plan")?;
        crate::emit(&show(&diff))?;
        if diff.queues.is_empty() && diff.routes.is_empty() {
            return Ok(());
        }
        if !args.yes {
            if !std::io::stdin().is_terminal() {
                bail!("not applied: pass --yes to apply without being asked");
            }
            eprint!("apply these changes to cluster `{cluster}`? [y/N] ");
            std::io::stderr().flush().ok();
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer).context("cannot read the answer")?;
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                bail!("not applied");
            }
        }
        req.dry_run = false;
        req.base_version = Some(diff.base_version);
        let done = post(&client, &cluster, &req).await.context("the server refused the plan")?;
        crate::emit(&format!(
            "applied: cluster `{cluster}` is at configuration version {}\n",
            done.version.unwrap_or(done.base_version)
        ))
    })
}

#[derive(Debug, Args)]
#[command(
    about = "List a cluster's configuration versions, or roll back to one (admin)",
    long_about = "Without VERSION: list every recorded version of a cluster's configuration, newest first — who \
made it, when, from which plan, proposal, rollback or edit, and what changed. With VERSION: show what \
rolling back to it changes, ask (or --yes), then bring back that version's cluster file and, when they \
were recorded, its routes, as a new version. A rollback keeps the current queue tree (it goes through a \
plan's checks) and is refused if the cluster changed meanwhile.\n\n\
Examples:\n  weir rollback\n  weir rollback 3 --yes\n  weir rollback 3 --cluster gpu"
)]
pub struct RollbackArgs {
    /// The version to bring back; without it, list the versions.
    #[arg(value_name = "VERSION")]
    target: Option<i64>,
    /// The cluster (default: `default`).
    #[arg(long, value_name = "NAME", default_value = "default")]
    cluster: String,
    /// Roll back without asking.
    #[arg(long, short)]
    yes: bool,
    #[command(flatten)]
    conn: Connection,
}

fn history_text(h: &weir_api::ConfigHistory) -> String {
    let mut out = format!("cluster `{}`: configuration version {} in force\n", h.cluster, h.current);
    for v in &h.versions {
        out.push_str(&format!(
            "{:>4}  {}  {}  {}\n",
            v.version,
            weir_server::format_utc(v.at_ms),
            v.actor,
            v.source
        ));
        for c in &v.queues {
            out.push_str(&format!("        {} {}: {} → {}\n", c.queue, c.field, c.from, c.to));
        }
        for r in &v.routes {
            out.push_str(&format!(
                "        route {}: {} → {}\n",
                r.key,
                r.from.as_deref().unwrap_or("(none)"),
                r.to.as_deref().unwrap_or("(removed)")
            ));
        }
    }
    out
}

pub fn rollback(args: &RollbackArgs) -> Result<()> {
    let client = args.conn.client()?;
    let cluster = &args.cluster;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let Some(version) = args.target else {
            let h: weir_api::ConfigHistory =
                client.send(client.request(reqwest::Method::GET, &format!("/v1/clusters/{cluster}/history"))).await?;
            return crate::emit(&history_text(&h));
        };
        let path = format!("/v1/clusters/{cluster}/history/{version}/rollback");
        let mut req = weir_api::RollbackRequest { base_version: None, dry_run: true };
        let diff: PlanDiff = client
            .send(client.request(reqwest::Method::POST, &path).json(&req))
            .await
            .context("the server refused the rollback")?;
        crate::emit(&show(&diff))?;
        if diff.queues.is_empty() && diff.routes.is_empty() {
            return Ok(());
        }
        if !args.yes {
            if !std::io::stdin().is_terminal() {
                bail!("not rolled back: pass --yes to roll back without being asked");
            }
            eprint!("roll cluster `{cluster}` back to version {version}? [y/N] ");
            std::io::stderr().flush().ok();
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer).context("cannot read the answer")?;
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                bail!("not rolled back");
            }
        }
        req.dry_run = false;
        req.base_version = Some(diff.base_version);
        let done: PlanDiff = client
            .send(client.request(reqwest::Method::POST, &path).json(&req))
            .await
            .context("the server refused the rollback")?;
        crate::emit(&format!(
            "rolled back: cluster `{cluster}` is at configuration version {} (version {version}'s settings)\n",
            done.version.unwrap_or(done.base_version)
        ))
    })
}
