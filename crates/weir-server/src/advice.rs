//! The balancing advisor as a server job (issue 25; docs/advise.md): on a schedule (the
//! server file's `advise:`), or when an admin asks, replay every cluster's recorded runs over
//! the window and run `weir_planner::advise` — the same core as `weir advise --server` — then
//! store the advice. `GET /v1/advice` and the dashboard's Advice page show the newest one, each
//! advised move with what makes it: a route change (`POST /v1/advice/moves/{workflow}`, or the
//! dashboard's button; the same checks and audit as `PUT /v1/routes/{key}`), or, when the
//! server file routes the workflow (its routes win over those set through the API), an edit of
//! that file. Beside each move: the workflow's newest dry-run on the target cluster.
//!
//! Simulating is CPU work: it runs on tokio's blocking pool. Only the store is touched; no
//! engine, no backend.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::sync::watch;
use weir_api::{AdviceReport, AdvisedMove, DryRunBeside, Role, Route};
use weir_model::Workload;
use weir_planner::{Advice, AdviseSettings, Site};
use weir_store::{AdviceRow, JobStore, RouteRow};

use crate::clusters::Registry;
use crate::config::Stop;
use crate::error::ApiError;
use crate::state::{AppState, Audit, Peer};
use crate::time::now_ms;

/// When the advisor runs by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every this long after the last advice (and at start when there is none).
    Every(Duration),
    /// Once a day at this minute of the day, UTC.
    DailyAt { minute: u32 },
}

/// The server file's `advise:`.
#[derive(Clone, Debug, PartialEq)]
pub struct AdvisorSettings {
    /// `None`: only when asked (`POST /v1/advice`, the dashboard's "Advise now").
    pub schedule: Option<Schedule>,
    /// The span of recorded runs replayed, ending now.
    pub window: Duration,
    /// Candidate moves tried in the simulator.
    pub candidates: usize,
    /// Price of one node-hour, by cluster.
    pub prices: BTreeMap<String, f64>,
}

impl Default for AdvisorSettings {
    fn default() -> AdvisorSettings {
        AdvisorSettings {
            schedule: None,
            window: Duration::from_secs(7 * 86_400),
            candidates: 6,
            prices: BTreeMap::new(),
        }
    }
}

const DAY_MS: i64 = 86_400_000;

/// Whether an advice is due at `now`: `last` is the newest advice (or attempt), `started` when
/// this process began (a daily slot that passed before it is not caught up at once).
pub fn due(schedule: Schedule, last: Option<i64>, started: i64, now: i64) -> bool {
    match schedule {
        Schedule::Every(every) => last.is_none_or(|l| now - l >= every.as_millis() as i64),
        Schedule::DailyAt { minute } => {
            let today = now.div_euclid(DAY_MS) * DAY_MS + i64::from(minute) * 60_000;
            let slot = if now >= today { today } else { today - DAY_MS };
            last.unwrap_or(i64::MIN).max(started) < slot
        }
    }
}

pub(crate) async fn run(
    store: Arc<dyn JobStore>,
    registry: Arc<Registry>,
    settings: Arc<AdvisorSettings>,
    mut stop: watch::Receiver<Stop>,
) {
    let Some(schedule) = settings.schedule else { return };
    let started = now_ms();
    // A failed attempt waits its period too, as a made advice would.
    let mut tried: Option<i64> = None;
    loop {
        let now = now_ms();
        let last = store.latest_advice().await.ok().flatten().map(|a| a.created_ms);
        if due(schedule, last.max(tried), started, now) {
            tried = Some(now);
            match advise_now(store.as_ref(), &registry, &settings, "schedule").await {
                Ok((id, advice)) => eprintln!(
                    "weir serve: advisor: advice {id}: {} move(s) advised together",
                    advice.together.len()
                ),
                Err(why) => eprintln!("weir serve: advisor: no advice: {why}"),
            }
        }
        let nap = match schedule {
            Schedule::Every(every) => every.min(Duration::from_secs(30)),
            Schedule::DailyAt { .. } => Duration::from_secs(30),
        };
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Replays every cluster's recorded runs over the window, advises, and stores the advice.
pub(crate) async fn advise_now(
    store: &dyn JobStore,
    registry: &Registry,
    settings: &AdvisorSettings,
    trigger: &str,
) -> Result<(i64, Advice), String> {
    let names = registry.cluster_names();
    if names.len() < 2 {
        return Err(format!("the server has {} cluster(s): advice moves work between clusters", names.len()));
    }
    let until = now_ms();
    let since = until - settings.window.as_millis() as i64;
    let sites = recorded_sites(store, registry, since, until).await?;
    let core = AdviseSettings {
        window: weir_model::Duration(settings.window.as_millis() as u64),
        seed: 1,
        candidates: settings.candidates,
        prices: settings.prices.clone(),
    };
    let advice = tokio::task::spawn_blocking(move || weir_planner::advise(&sites, &core, &mut |_| {}))
        .await
        .map_err(|e| format!("the advisor stopped: {e}"))?
        .map_err(|e| e.to_string())?;
    let row = AdviceRow {
        id: 0,
        created_ms: until,
        window_ms: until - since,
        trigger: trigger.to_string(),
        body: serde_json::to_string(&advice).map_err(|e| e.to_string())?,
    };
    let id = store.put_advice(&row).await.map_err(|e| e.to_string())?;
    Ok((id, advice))
}

/// Every cluster of the server with the runs it recorded between `since` and `until`, as the
/// advisor's and the planner's replays take them. A cluster that ran nothing still counts: it
/// can take work.
pub(crate) async fn recorded_sites(
    store: &dyn JobStore,
    registry: &Registry,
    since: i64,
    until: i64,
) -> Result<Vec<Site>, String> {
    let mut sites = Vec::new();
    for name in registry.cluster_names() {
        let loaded = registry.cluster(&name).ok_or_else(|| format!("cluster `{name}` is not loaded"))?;
        let (file, _skipped) = crate::loop_api::recorded_workload(store, &loaded.config, &name, since, until)
            .await
            .map_err(|e| e.to_string())?;
        // A cluster that ran nothing in the window still counts: it can take work.
        let workflows = if file.workflows.is_empty() {
            Vec::new()
        } else {
            Workload::from_file(&format!("the runs cluster `{name}` recorded"), &file, &loaded.config)
                .map_err(|e| e.to_string())?
                .workflows
        };
        sites.push(Site { name, config: (*loaded.config).clone(), workflows, live: true });
    }
    Ok(sites)
}

/// The newest advice with each advised move made actionable: its route key, the route now,
/// whether the server file routes it, and the newest dry-run on the target.
pub(crate) async fn report(s: &AppState, row: &AdviceRow) -> Result<AdviceReport, ApiError> {
    let advice: Advice = serde_json::from_str(&row.body)
        .map_err(|e| ApiError::internal(format!("advice {} cannot be read: {e}", row.id)))?;
    let routes: BTreeMap<String, RouteRow> =
        s.store.routes().await?.into_iter().map(|r| (r.key.clone(), r)).collect();
    let mut moves = Vec::new();
    let kept: Vec<&weir_planner::Move> = advice.kept().collect();
    for m in advice.moves.iter().filter(|m| m.advised) {
        let route_key = format!("workflow:{}", m.workflow);
        let project = crate::submit::project_of_queue(&m.from_queue);
        let in_server_file = s.router.route_for(&m.workflow, Some(&project), m.tier).is_some();
        let now = routes.get(&route_key);
        let dry_run = s
            .store
            .dry_run_verdicts(Some(&m.workflow), 50)
            .await?
            .into_iter()
            .find(|v| v.cluster == m.to)
            .map(|v| DryRunBeside {
                run_id: v.run_id,
                logical_date: v.logical_date,
                verdict: v.verdict,
                at_ms: v.at_ms,
                approved_by: v.approved_by,
            });
        moves.push(AdvisedMove {
            workflow: m.workflow.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            queue: m.queue.clone(),
            why: m.why.clone(),
            route_key,
            routed_now: now.map(|r| format!("{}/{}", r.cluster, r.queue)),
            in_server_file,
            done: !in_server_file && now.is_some_and(|r| r.cluster == m.to && r.queue == m.queue),
            together: kept.iter().any(|k| std::ptr::eq(*k, m)),
            dry_run,
        });
    }
    Ok(AdviceReport {
        id: row.id,
        created_ms: row.created_ms,
        window_ms: row.window_ms,
        trigger: row.trigger.clone(),
        moves,
        advice: serde_json::to_value(&advice).map_err(|e| ApiError::internal(e.to_string()))?,
    })
}

/// Makes the advised move of `workflow` from the newest advice: the route change, audited as
/// `route.put` with the route it replaces (so it can be undone). `via` is said in the audit.
pub(crate) async fn make_move(
    s: &AppState,
    token_id: &str,
    peer: &Peer,
    workflow: &str,
    to: Option<&str>,
    via: &str,
) -> Result<(Route, Option<String>), ApiError> {
    let row =
        s.store.latest_advice().await?.ok_or_else(|| ApiError::not_found("no advice has been made yet"))?;
    let r = report(s, &row).await?;
    let m =
        r.moves.iter().find(|m| m.workflow == workflow && to.is_none_or(|t| m.to == t)).ok_or_else(|| {
            let whither = to.map(|t| format!(" to `{t}`")).unwrap_or_default();
            ApiError::not_found(format!(
                "advice {} does not advise moving workflow `{workflow}`{whither}",
                row.id
            ))
        })?;
    if m.in_server_file {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "in_server_file",
            format!(
                "the server file routes workflow `{workflow}` (its routes win over those set through the API): \
                 move it by editing that file's route to {}/{}",
                m.to, m.queue
            ),
        ));
    }
    let cluster = s
        .registry
        .cluster(&m.to)
        .ok_or_else(|| ApiError::invalid(format!("no cluster `{}` any more", m.to)).field("cluster"))?;
    let leaf = weir_model::QueuePath::parse(&m.queue)
        .and_then(|q| cluster.config.find(&q))
        .is_some_and(|i| cluster.config.queues[i].is_leaf());
    if !leaf {
        return Err(ApiError::invalid(format!(
            "{} is no longer a leaf queue of cluster `{}`",
            m.queue, m.to
        ))
        .field("queue"));
    }
    let route = RouteRow { key: m.route_key.clone(), cluster: m.to.clone(), queue: m.queue.clone() };
    s.store.put_route(&route, now_ms()).await?;
    s.registry.put_route(route);
    let was = m.routed_now.clone();
    let detail = format!(
        "to {}/{} ({via}, advice {}); was {}",
        m.to,
        m.queue,
        row.id,
        was.as_deref().unwrap_or("no route of this key")
    );
    s.audit(token_id, "route.put", format!("route {}", m.route_key), "ok", Audit::from(peer).detail(detail))
        .await;
    Ok((Route { key: m.route_key.clone(), cluster: m.to.clone(), queue: m.queue.clone() }, was))
}

/// `/v1/advice` and its moves.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/advice", get(get_advice).post(post_advice))
        .route("/v1/advice/moves/{workflow}", post(post_move))
}

fn require_all(s: &crate::auth::Principal) -> Result<(), ApiError> {
    if s.can_all(Role::Viewer) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "token {} cannot read every project; advice spans them all and needs a viewer grant on `*`",
            s.token_id
        )))
    }
}

async fn get_advice(State(s): State<AppState>, headers: HeaderMap) -> Result<Json<AdviceReport>, ApiError> {
    require_all(&s.principal(&headers).await?)?;
    let row = s.store.latest_advice().await?.ok_or_else(|| {
        ApiError::not_found("no advice has been made yet: `advise:` in the server file schedules it, POST /v1/advice makes one now")
    })?;
    Ok(Json(report(&s, &row).await?))
}

async fn post_advice(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
) -> Result<Json<AdviceReport>, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "advice.make", String::new()).await?;
    let (id, _) = advise_now(s.store.as_ref(), &s.registry, &s.advisor, &p.token_id)
        .await
        .map_err(|why| ApiError::unprocessable("no_advice", why))?;
    s.audit(&p.token_id, "advice.make", format!("advice {id}"), "ok", Audit::from(&peer)).await;
    let row =
        s.store.latest_advice().await?.ok_or_else(|| ApiError::internal("the advice was not stored"))?;
    Ok(Json(report(&s, &row).await?))
}

#[derive(serde::Deserialize)]
struct MoveQuery {
    /// The target, when the advice moves the workflow to several.
    to: Option<String>,
}

async fn post_move(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(workflow): Path<String>,
    Query(q): Query<MoveQuery>,
) -> Result<Json<Route>, ApiError> {
    let p = s.principal(&headers).await?;
    crate::api::admin_or_audit(&s, &p, &peer, "route.put", format!("route workflow:{workflow}")).await?;
    Ok(Json(make_move(&s, &p.token_id, &peer, &workflow, q.to.as_deref(), "advice API").await?.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_due_at_once_then_after_its_span() {
        let every = Schedule::Every(Duration::from_secs(3600));
        assert!(due(every, None, 0, 10));
        assert!(!due(every, Some(1_000), 0, 1_000 + 3_599_999));
        assert!(due(every, Some(1_000), 0, 1_000 + 3_600_000));
    }

    #[test]
    fn a_daily_time_is_due_once_its_slot_has_passed_and_not_for_slots_before_the_start() {
        let at = Schedule::DailyAt { minute: 3 * 60 };
        let day = 20_000 * DAY_MS;
        let three = day + 3 * 3_600_000;
        // Started at 01:00 with no advice: not due before 03:00, due after.
        assert!(!due(at, None, day + 3_600_000, three - 1));
        assert!(due(at, None, day + 3_600_000, three));
        // Made at 03:00: not again that day, due the next day's 03:00.
        assert!(!due(at, Some(three), day, three + 20 * 3_600_000));
        assert!(due(at, Some(three), day, three + DAY_MS));
        // Started at 05:00: today's 03:00 passed before the start; the next is tomorrow's.
        assert!(!due(at, None, day + 5 * 3_600_000, day + 6 * 3_600_000));
    }
}
