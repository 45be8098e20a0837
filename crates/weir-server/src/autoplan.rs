//! The scheduled planner (`weir serve --auto-plan daily`): on a schedule, for every cluster,
//! plan from the recorded usage (weir-planner's Percentile algorithm over the window), replay
//! the recorded runs on the current and the planned settings (weir-sim, the server's jobs
//! without application masters, as they run live) and store the plan as a *proposal* with its
//! validation figures, and — on a server of several clusters — routes from history: each
//! workflow that ran on another cluster and whose memory per core fits this one best is routed
//! here in the proposal, with every cluster replayed before and after
//! (`summary.routes_from_history`; the same matching as `weir plan --server
//! --routes-from-history`). It never applies anything: an admin applies a proposal from the
//! dashboard (or `POST /v1/proposals/{id}/apply`), through the same checks as `weir apply`.
//! A plan whose replay is worse for tier 1 is stored as `refused`, with the reason.
//!
//! Planning and simulating are CPU work: they run on tokio's blocking pool. Only the store is
//! touched; no engine, no backend.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;
use weir_api::Route;
use weir_model::{ClusterConfig, Workload, WorkloadFile};
use weir_planner::{export, plan, ExportOptions, Format, PlanInput, PlanSettings, Tier1};
use weir_sim::{SimConfig, Simulation, Summary};
use weir_store::{JobStore, ProposalRow};

use crate::clusters::Registry;
use crate::config::Stop;
use crate::time::now_ms;

/// How often to plan, and over how much history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoPlan {
    pub every: Duration,
    pub window: Duration,
}

pub(crate) async fn run(
    store: Arc<dyn JobStore>,
    registry: Arc<Registry>,
    cfg: AutoPlan,
    mut stop: watch::Receiver<Stop>,
) {
    let every = cfg.every.as_millis() as i64;
    // Failed attempts wait a period too, so a cluster without history is not planned every minute.
    let mut tried: BTreeMap<String, i64> = BTreeMap::new();
    loop {
        for cluster in registry.cluster_names() {
            let now = now_ms();
            let last = store.last_proposal_ms(&cluster).await.ok().flatten().unwrap_or(i64::MIN / 2);
            let attempted = tried.get(&cluster).copied().unwrap_or(i64::MIN / 2);
            if now - last.max(attempted) < every {
                continue;
            }
            tried.insert(cluster.clone(), now);
            match propose(store.as_ref(), &registry, &cluster, cfg.window).await {
                Ok((id, state)) => {
                    eprintln!("weir serve: auto-plan: cluster `{cluster}`: proposal {id} ({state})")
                }
                Err(why) => eprintln!("weir serve: auto-plan: cluster `{cluster}`: no proposal: {why}"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(cfg.every.min(Duration::from_secs(60))) => {}
            _ = stop.changed() => return,
        }
    }
}

/// What the blocking part hands back.
struct Planned {
    config: String,
    summary: serde_json::Value,
    refused: bool,
}

/// Plan and validate one cluster now; store the proposal. Returns its id and state.
pub(crate) async fn propose(
    store: &dyn JobStore,
    registry: &Registry,
    cluster: &str,
    window: Duration,
) -> Result<(i64, String), String> {
    let loaded = registry.cluster(cluster).ok_or_else(|| format!("cluster `{cluster}` is not loaded"))?;
    let until = now_ms();
    let since = until - window.as_millis() as i64;
    let rows = store.usage(cluster, since, until).await.map_err(|e| e.to_string())?;
    let (file, skipped) = crate::loop_api::recorded_workload(store, &loaded.config, cluster, since, until)
        .await
        .map_err(|e| e.to_string())?;
    let mut routes: Vec<Route> = store
        .routes()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|r| r.cluster == cluster)
        .map(|r| Route { key: r.key, cluster: r.cluster, queue: r.queue })
        .collect();
    if rows.is_empty() {
        let began = store.recording_since(cluster).await.map_err(|e| e.to_string())?;
        return Err(match began {
            Some(at) if at < until => format!(
                "no queue usage is recorded for cluster `{cluster}` yet: the server began recording it {} ago \
                 and no job has run since; a plan is made from what the queues used, so run work first (a day \
                 of it shows the daily peaks) and plan again",
                crate::loop_api::span_words(until - at)
            ),
            _ => format!(
                "no queue usage is recorded for cluster `{cluster}` in the last {}: a plan is made from what \
                 the queues used, so run work first (a day of it shows the daily peaks) and plan again",
                crate::loop_api::span_words(until - since)
            ),
        });
    }
    let config = loaded.config.clone();
    let mut planned =
        tokio::task::spawn_blocking(move || plan_and_validate(&config, &rows, since, until, &file, skipped))
            .await
            .map_err(|e| format!("the planner stopped: {e}"))??;
    // Routes from history: not being able to work them out leaves the queue plan as it is.
    match routes_from_history(store, registry, cluster, since, until, window).await {
        Ok(Some((added, report))) => {
            for r in added {
                routes.retain(|have| have.key != r.key);
                routes.push(r);
            }
            planned.summary["routes_from_history"] = report;
        }
        Ok(None) => {}
        Err(why) => planned.summary["routes_from_history"] = json!({ "error": why }),
    }
    let row = ProposalRow {
        id: 0,
        cluster: cluster.to_string(),
        created_ms: until,
        base_version: loaded.version,
        config: planned.config,
        routes: serde_json::to_string(&routes).map_err(|e| e.to_string())?,
        summary: planned.summary.to_string(),
        state: if planned.refused { "refused".into() } else { "proposed".into() },
        decided_ms: None,
    };
    let id = store.put_proposal(&row).await.map_err(|e| e.to_string())?;
    Ok((id, row.state))
}

/// Routes from the recorded history (reference 001's resource DB, as `weir plan --server
/// --routes-from-history` makes them): every cluster's runs replayed, each workflow matched to
/// the cluster whose memory per core fits its use best; a workflow that ran elsewhere and fits
/// `cluster` best gets a route to it, and every cluster is replayed again with those moves.
/// `None` on a server of one cluster. The routes and what the replays showed.
async fn routes_from_history(
    store: &dyn JobStore,
    registry: &Registry,
    cluster: &str,
    since: i64,
    until: i64,
    window: Duration,
) -> Result<Option<(Vec<Route>, serde_json::Value)>, String> {
    if registry.cluster_names().len() < 2 {
        return Ok(None);
    }
    let sites = crate::advice::recorded_sites(store, registry, since, until).await?;
    let settings = weir_planner::AdviseSettings {
        window: weir_model::Duration(window.as_millis() as u64),
        seed: 1,
        candidates: 0,
        prices: Default::default(),
    };
    let cluster = cluster.to_string();
    tokio::task::spawn_blocking(move || {
        let before = weir_planner::advise::states(&sites, &settings).map_err(|e| e.to_string())?;
        let fits = weir_planner::best_fits(&sites, &before);
        let added: Vec<weir_planner::Fit> =
            fits.iter().filter(|f| f.to == cluster && f.from != cluster).cloned().collect();
        let after = if added.is_empty() {
            before.clone()
        } else {
            weir_planner::advise::states(&weir_planner::with_fits(&sites, &added), &settings)
                .map_err(|e| e.to_string())?
        };
        let routes = added
            .iter()
            .map(|f| Route {
                key: format!("workflow:{}", f.workflow),
                cluster: cluster.clone(),
                queue: f.queue.clone(),
            })
            .collect();
        let report = json!({ "fits": fits, "added": added, "before": before, "after": after });
        Ok(Some((routes, report)))
    })
    .await
    .map_err(|e| format!("the replay of the recorded runs stopped: {e}"))?
}

/// Replay `workload` on `cluster` as the live server runs jobs (no application masters).
pub fn replay(cluster: &ClusterConfig, workload: &Workload) -> Result<Summary, String> {
    let config =
        SimConfig { seed: 1, until: None, am: None, check_invariants: false, ..SimConfig::default() };
    let sim = Simulation::new(cluster.clone(), workload.clone(), config).map_err(|e| e.to_string())?;
    Ok(sim.finish().map_err(|e| e.to_string())?.summary)
}

fn plan_and_validate(
    config: &ClusterConfig,
    rows: &[weir_store::UsageRow],
    since: i64,
    until: i64,
    file: &WorkloadFile,
    skipped: Vec<String>,
) -> Result<Planned, String> {
    let history = crate::reports::history(rows, since, until);
    let mut settings = PlanSettings::defaults_for(config);
    settings.window = weir_model::Duration((until - since).max(1) as u64);
    let workload = if file.workflows.is_empty() {
        None
    } else {
        Some(Workload::from_file("the recorded runs", file, config).map_err(|e| e.to_string())?)
    };
    let p = plan(&PlanInput {
        cluster: config,
        history: &history,
        history_name: "the recorded usage",
        settings: &settings,
        workload: workload.as_ref(),
        threads: 1,
    })
    .map_err(|e| e.to_string())?;
    let text = export(&p.planned, Format::Weir, &ExportOptions::default()).map_err(|e| e.to_string())?.text;
    let mut summary = json!({
        "verdict": p.cluster.verdict.name(),
        "reason": p.cluster.reason,
        "window_hours": p.window.hours,
        "warnings": p.warnings,
        "left_out_of_replay": skipped,
        "history": {"since_ms": since, "until_ms": until},
    });
    let mut refused = false;
    let mut headline = format!("verdict {} — {}", p.cluster.verdict.name(), p.cluster.reason);
    if let Some(w) = &workload {
        let old = replay(config, w)?;
        let new = replay(&p.planned, w)?;
        summary["validation"] = json!(weir_planner::comparison_rows(&old, &new));
        let figures = |t: Tier1| json!({"slo_success_ratio": t.slo_success_ratio, "slo_successful_workflows": t.slo_successful_workflows});
        summary["tier1"] = json!({"current": figures(Tier1::of(&old)), "planned": figures(Tier1::of(&new))});
        if let Some(why) = weir_planner::tier1_regression(Tier1::of(&old), Tier1::of(&new)) {
            summary["refused"] = json!(why);
            headline = format!("refused: {why}");
            refused = true;
        }
    } else {
        headline.push_str(" (no recorded runs to replay: not validated)");
    }
    summary["headline"] = json!(headline);
    Ok(Planned { config: text, summary, refused })
}
