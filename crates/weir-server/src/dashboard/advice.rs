//! The Advice page: the balancing advisor's newest advice (viewers of every project), each
//! advised move with the newest dry-run on its target beside it and, for global admins, a
//! button that makes it — the same route change and audit as `POST /v1/advice/moves/{workflow}`
//! — unless the server file routes the workflow, which the page then says. "Advise now" runs
//! the advisor at once.

use askama::Template;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Form;
use serde::Deserialize;
use weir_planner::ClusterState;

use super::pages::{signed_in, try_page};
use super::views::time;
use super::{api_error, html, page_error, visitor, Nav, Visitor};
use crate::advice::{advise_now, make_move, report, Schedule};
use crate::state::{AppState, Audit, Peer};

pub struct StateLine {
    cluster: String,
    cpu: String,
    memory: String,
    imbalance: String,
    slo: String,
    after_cpu: String,
    after_memory: String,
    after_imbalance: String,
    after_slo: String,
}

pub struct MoveLine {
    workflow: String,
    from: String,
    to: String,
    queue: String,
    why: String,
    in_server_file: bool,
    done: bool,
    together: bool,
    routed_now: String,
    /// 0: no dry-run on the target.
    dry_run_run: i64,
    dry_run: String,
}

#[derive(Template)]
#[template(path = "advice.html")]
struct AdvicePage {
    nav: Nav,
    admin: bool,
    message: String,
    message_class: String,
    schedule: String,
    /// Empty: no advice yet.
    made: String,
    states: Vec<StateLine>,
    moves: Vec<MoveLine>,
    others: Vec<String>,
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn slo(s: &ClusterState) -> String {
    if s.tier1_runs == 0 {
        "-".into()
    } else {
        format!("{}/{}", s.tier1_met, s.tier1_runs)
    }
}

async fn advice_page(s: &AppState, v: &Visitor, message: Result<String, String>) -> Response {
    if !v.reads_all() {
        return page_error(
            StatusCode::FORBIDDEN,
            &format!(
                "token {} cannot read every project; advice spans them all and needs a viewer grant on `*`",
                v.principal.token_id
            ),
        );
    }
    let schedule = match s.advisor.schedule {
        None => "It runs when an admin asks (the server file's `advise:` schedules it).".to_string(),
        Some(Schedule::Every(d)) => {
            format!("It runs every {}.", weir_model::Duration(d.as_millis() as u64).human())
        }
        Some(Schedule::DailyAt { minute }) => {
            format!("It runs daily at {:02}:{:02} UTC.", minute / 60, minute % 60)
        }
    };
    let mut page = AdvicePage {
        nav: Nav::new(v, "Advice", "/advice", 0),
        admin: v.is_admin(),
        message: String::new(),
        message_class: String::new(),
        schedule,
        made: String::new(),
        states: Vec::new(),
        moves: Vec::new(),
        others: Vec::new(),
    };
    (page.message, page.message_class) = match message {
        Ok(m) => (m, "ok".into()),
        Err(m) => (m, "error".into()),
    };
    let Some(row) = try_page!(s.store.latest_advice().await) else { return html(&page) };
    let r = try_page!(report(s, &row).await);
    let advice: weir_planner::Advice = match serde_json::from_value(r.advice.clone()) {
        Ok(a) => a,
        Err(e) => return page_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("advice {}: {e}", r.id)),
    };
    page.made = format!(
        "{} of {} ({}), from the runs recorded over {}",
        r.id,
        time(r.created_ms),
        if r.trigger == "schedule" {
            "scheduled".to_string()
        } else {
            format!("asked by token {}", r.trigger)
        },
        advice.window
    );
    for b in &advice.before {
        let a = advice.after.iter().find(|a| a.cluster == b.cluster).unwrap_or(b);
        page.states.push(StateLine {
            cluster: b.cluster.clone(),
            cpu: pct(b.cpu_used),
            memory: pct(b.memory_used),
            imbalance: format!("{:+.1}", b.imbalance * 100.0),
            slo: slo(b),
            after_cpu: pct(a.cpu_used),
            after_memory: pct(a.memory_used),
            after_imbalance: format!("{:+.1}", a.imbalance * 100.0),
            after_slo: slo(a),
        });
    }
    for m in r.moves {
        let (dry_run_run, dry_run) = match m.dry_run {
            Some(d) => (
                d.run_id,
                format!(
                    "{} ({}, {}){}",
                    d.verdict,
                    d.logical_date,
                    time(d.at_ms),
                    d.approved_by.map(|b| format!(", approved by {b}")).unwrap_or_default()
                ),
            ),
            None => (0, String::new()),
        };
        page.moves.push(MoveLine {
            workflow: m.workflow,
            from: m.from,
            to: m.to,
            queue: m.queue,
            why: m.why,
            in_server_file: m.in_server_file,
            done: m.done,
            together: m.together,
            routed_now: m.routed_now.unwrap_or_default(),
            dry_run_run,
            dry_run,
        });
    }
    page.others = advice
        .moves
        .iter()
        .filter(|m| !page.moves.iter().any(|k| k.workflow == m.workflow && k.to == m.to))
        .map(|m| format!("{}: {} → {}: {}", m.workflow, m.from, m.to, m.why))
        .collect();
    html(&page)
}

pub async fn advice(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let v = signed_in!(s, headers);
    advice_page(&s, &v, Ok(String::new())).await
}

#[derive(Deserialize)]
pub struct MoveForm {
    csrf: String,
    workflow: String,
    to: String,
}

pub async fn make(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Form(f): Form<MoveForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let outcome =
        match make_move(&s, &v.principal.token_id, &peer, &f.workflow, Some(&f.to), "dashboard").await {
            Ok((route, was)) => Ok(format!(
                "{} now goes to {}:{}; its next run lands there. To undo, route it back{}.",
                route.key,
                route.cluster,
                route.queue,
                was.map(|w| format!(" to {w}"))
                    .unwrap_or_else(|| " (it had no route of this key: delete it on Routes)".into())
            )),
            Err(e) => Err(e.body.error.message),
        };
    advice_page(&s, &v, outcome).await
}

#[derive(Deserialize)]
pub struct NowForm {
    csrf: String,
}

pub async fn now(
    State(s): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Form(f): Form<NowForm>,
) -> Response {
    let v = signed_in!(s, headers);
    if let Some(r) = v.refuse_form(&f.csrf, true) {
        return r;
    }
    let outcome = match advise_now(s.store.as_ref(), &s.registry, &s.advisor, &v.principal.token_id).await {
        Ok((id, a)) => {
            s.audit(&v.principal.token_id, "advice.make", format!("advice {id}"), "ok", Audit::from(&peer))
                .await;
            Ok(format!("advice {id} made: {} move(s) advised", a.together.len()))
        }
        Err(why) => Err(why),
    };
    advice_page(&s, &v, outcome).await
}
