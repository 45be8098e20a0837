//! The recorded history and the plan → apply loop through the API, on SQLite and on
//! PostgreSQL: usage and run records exported in the schemas `weir plan` and `weir simulate`
//! use (and read back by the planner), the SLO and usage reports, `/metrics`, the replay
//! workload, a plan checked, shown and applied — or refused whole, changing nothing — and the
//! scheduled planner's proposal applied by an admin.

mod common;

use std::time::{Duration, Instant};

use common::{config, db_url, temp_dir, Db, TestServer};
use reqwest::Method;
use serde_json::{json, Value};
use weir_server::{ServerConfig, Stop};

const LONG: Duration = Duration::from_secs(60);

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(super::Db::Sqlite).await }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(super::Db::Postgres).await }
            )*
        }
    };
}

on_both!(
    usage_and_runs_are_recorded_reported_and_exported,
    a_plan_is_shown_then_applied_or_refused_whole,
    the_scheduled_planner_proposes_and_an_admin_applies,
    plan_now_without_history_says_so,
);

async fn server(db: Db, tag: &str, f: impl FnOnce(&mut ServerConfig)) -> Option<TestServer> {
    let dir = temp_dir(tag);
    let url = db_url(db, &dir, tag).await?;
    let mut c = config(&dir);
    c.usage_resolution = Duration::from_secs(1);
    f(&mut c);
    Some(TestServer::start_with(c, &url).await)
}

/// A tier-1 workflow with an SLO: two tasks of 2 cores, then one of 1 core.
fn report(command: &str) -> Value {
    json!({
        "name": "report", "queue": "root.ads.tier1", "slo": "1m",
        "jobs": [
            {"name": "extract", "stages": [{"name": "q", "tasks": 2, "resources": {"cpu": 2000, "memory": 1024}, "command": command}]},
            {"name": "publish", "after": ["extract"], "stages": [{"name": "up", "tasks": 1, "resources": {"cpu": 1000, "memory": 512}, "command": "true"}]}
        ]
    })
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("expected text, got {v}"))
}

/// Σ cpu × duration (millicore-ms) of the queue's rows in a usage.csv.
fn cpu_ms(csv: &str, queue: &str) -> i64 {
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[2] == queue)
        .map(|f| {
            (f[1].parse::<i64>().unwrap_or(0) - f[0].parse::<i64>().unwrap_or(0))
                * f[3].parse::<i64>().unwrap_or(0)
        })
        .sum()
}

async fn usage_and_runs_are_recorded_reported_and_exported(db: Db) {
    let Some(mut s) = server(db, "recorded", |_| {}).await else { return };
    let (status, created) = s.submit(report("sleep 1.5"), "d1").await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    let (_, other) = s.submit(common::one_task("backfill", "root.ads.tier3", "sleep 0.5"), "d1").await;
    let run = s.wait(id, LONG).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    s.wait(other["id"].as_i64().expect("id"), LONG).await;

    // Usage rows: the tier-1 queue's cpu integral is what its attempts held (within the
    // rounding of each row's average), once the last window has closed.
    let attempts: i64 = run["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .flat_map(|j| j["tasks"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            let cpu = if t["stage"] == "q" { 2000 } else { 1000 };
            cpu * (t["finished_ms"].as_i64().unwrap_or(0) - t["started_ms"].as_i64().unwrap_or(0))
        })
        .sum();
    let start = Instant::now();
    let csv = loop {
        let (status, v) = s.call(Method::GET, "/v1/usage?window=1h", None).await;
        assert_eq!(status, 200, "{v}");
        let csv = text(&v).to_string();
        let got = cpu_ms(&csv, "root.ads.tier1");
        if (got - attempts).abs() * 100 <= attempts {
            break csv;
        }
        assert!(
            start.elapsed() < LONG,
            "usage {got} millicore-ms never matched the attempts' {attempts}:\n{csv}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(csv.starts_with("start,end,queue,cpu,memory,running_apps,gpu\n"), "{csv}");
    assert!(cpu_ms(&csv, "root.ads.tier3") > 0, "{csv}");
    // The planner reads it as it is.
    let history = weir_planner::UsageHistory::read_csv(csv.as_bytes(), "usage.csv", Default::default())
        .expect("the planner reads the server's usage.csv");
    assert!(history.rows() >= 2);

    // Run records, as `weir simulate` writes runs.csv.
    let (_, v) = s.call(Method::GET, "/v1/runs.csv?window=1h", None).await;
    let lines: Vec<&str> = text(&v).lines().collect();
    assert_eq!(lines[0], "workflow,tier,queue,submit,start,end,slo,met,status");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("report,1,root.ads.tier1,") && l.ends_with(",60000,true,completed")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("backfill,3,root.ads.tier3,") && l.ends_with(",,,completed")),
        "{lines:?}"
    );

    // The SLO report and the usage report.
    let (_, slo) = s.call(Method::GET, "/v1/reports/slo?window=1h", None).await;
    let t1 = &slo["tiers"][0];
    assert_eq!(
        (t1["tier"].as_u64(), t1["runs"].as_u64(), t1["slo_met"].as_u64()),
        (Some(1), Some(1), Some(1)),
        "{slo:#}"
    );
    assert_eq!(t1["slo_success_ratio"], 1.0);
    assert_eq!(slo["workflows"][0]["workflow"], "report");
    let (_, usage) = s.call(Method::GET, "/v1/reports/usage?window=1h", None).await;
    let q = usage["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == "root.ads.tier1")
        .expect("tier1")
        .clone();
    assert!(q["used_instance_hours"].as_f64().unwrap_or(0.0) > 0.0, "{usage:#}");
    assert!(usage["verdict"].is_string() && usage["verdict_reason"].is_string());

    // The replay workload: the run at its submission time, durations as recorded.
    let (_, v) = s.call(Method::GET, "/v1/replay?window=1h", None).await;
    let file: weir_model::WorkloadFile =
        serde_saphyr::from_str(text(&v)).unwrap_or_else(|e| panic!("{e}: {v}"));
    let wf = file.workflows.iter().find(|w| w.name == "report").expect("report");
    assert_eq!(wf.at.as_ref().map(Vec::len), Some(1));
    let q = &wf.jobs.iter().find(|j| j.name == "extract").expect("extract").stages[0];
    match &q.duration {
        Some(weir_model::DistributionSpec::Empirical(v)) => {
            assert_eq!(v.len(), 2);
            assert!(v.iter().all(|d| d.as_millis() >= 1500), "{v:?}");
        }
        other => panic!("{other:?}"),
    }

    // /metrics: the counters of this process, the queue gauges of the snapshot. The actor
    // publishes its snapshot at most once a second, so the gauges may still show the last
    // run's containers for a moment after it ended: wait for the idle tier-1 queue.
    let idle =
        "weir_queue_usage{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\",resource=\"cpu\",unit=\"core\"} 0.0";
    let start = Instant::now();
    let v = loop {
        let (status, v) = s.call(Method::GET, "/metrics", None).await;
        assert_eq!(status, 200);
        if text(&v).lines().any(|l| l == idle) {
            break v;
        }
        assert!(start.elapsed() < LONG, "no `{idle}` within {LONG:?}:\n{v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let m = text(&v);
    for line in [
        "weir_runs_finished_total{tier=\"1\",state=\"succeeded\"} 1",
        "weir_runs_started_total{tier=\"3\"} 1",
        "weir_slo_runs_total{tier=\"1\",outcome=\"met\"} 1",
        "weir_task_starts_total{cluster=\"default\"} 4",
        "weir_cluster_capacity{cluster=\"default\",resource=\"cpu\",unit=\"core\"} 8.0",
    ] {
        assert!(m.contains(line), "no `{line}` in\n{m}");
    }
    assert!(m.contains("weir_scheduling_pass_duration_seconds_count{cluster=\"default\"}"), "{m}");
    assert!(m.contains("weir_submission_duration_seconds_count 2"), "{m}");
    // Only a token that reads every project gets /metrics.
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "ads", "grants": [{"project": "ads", "role": "viewer"}]})),
        )
        .await;
    let ads = t["token"].as_str().expect("token").to_string();
    let (status, _) = s.call_as(&ads, Method::GET, "/metrics", None).await;
    assert_eq!(status, 403);
    let (status, _) = s.call_as(&ads, Method::GET, "/v1/usage", None).await;
    assert_eq!(status, 403);
    s.stop(Stop::Now).await;
}

const PLANNED: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 8000, memory: 16g}}
queues:
  - name: ads
    children: [{name: tier1, tier: 1, weight: 5}, {name: tier3, tier: 3}]
  - name: search
    children: [{name: tier1, tier: 1}]
  - {name: default, tier: 3}
";

async fn a_plan_is_shown_then_applied_or_refused_whole(db: Db) {
    let Some(mut s) = server(db, "plan", |_| {}).await else { return };
    let (_, clusters) = s.call(Method::GET, "/v1/clusters", None).await;
    let version = clusters["clusters"][0]["version"].as_i64().expect("version");
    let (_, before) = s.call(Method::GET, "/v1/clusters/default/config", None).await;
    let route = json!([{"key": "workflow:report", "cluster": "default", "queue": "root.ads.tier1"}]);

    // A dry run shows what would change and changes nothing.
    let (status, diff) = s
        .call(
            Method::POST,
            "/v1/clusters/default/plan",
            Some(json!({"config": PLANNED, "routes": route, "dry_run": true, "unvalidated": true})),
        )
        .await;
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["applied"], false);
    assert_eq!(
        diff["queues"],
        json!([{"queue": "root.ads.tier1", "field": "weight", "from": "1", "to": "5"}])
    );
    assert_eq!(diff["routes"], json!([{"key": "workflow:report", "to": "default:root.ads.tier1"}]));
    let warning = diff["warnings"][0].as_str().unwrap_or("");
    assert!(warning.starts_with("not validated"), "an unvalidated plan says so: {diff}");

    // Bad plans are refused whole: nothing changes, and the answer says why.
    let bad = [
        (
            PLANNED.replace("{name: tier3, tier: 3}", "{name: tier3, tier: 3}, {name: tier9, tier: 3}"),
            "unknown queue",
            None,
        ),
        (
            PLANNED.replace("weight: 5}", "weight: 5, min: {cpu: 9000, memory: 1g}}"),
            "capacities do not fit",
            None,
        ),
        (
            PLANNED.to_string(),
            "unknown queue",
            Some(json!([{"key": "workflow:x", "cluster": "default", "queue": "root.nowhere"}])),
        ),
        (PLANNED.replace("count: 1", "count: 4"), "does not resize", None),
    ];
    for (config, why, routes) in bad {
        let mut body = json!({"config": config, "base_version": version, "unvalidated": true});
        if let Some(r) = routes {
            body["routes"] = r;
        }
        let (status, err) = s.call(Method::POST, "/v1/clusters/default/plan", Some(body)).await;
        assert_eq!(status, 400, "{err}");
        let message = err["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(why) && message.contains("nothing was changed"), "{why}: {message}");
        assert!(err["error"]["field"].is_string(), "{err}");
    }
    let (status, err) = s
        .call(
            Method::POST,
            "/v1/clusters/default/plan",
            Some(json!({"config": PLANNED, "base_version": version - 1, "unvalidated": true})),
        )
        .await;
    assert_eq!(status, 409, "a plan made from another version: {err}");
    assert_eq!(err["error"]["field"], "base_version");

    // The guards `weir apply` once made alone, now the server's for any caller: each refusal
    // says why in words and names the field.
    let even = json!({"slo_success_ratio": 1.0, "slo_successful_workflows": 4});
    let worse = json!({"slo_success_ratio": 0.5, "slo_successful_workflows": 2});
    let now = weir_server::now_ms();
    let guarded = [
        // Not saying which version it was made from.
        (
            json!({"config": PLANNED, "unvalidated": true}),
            "base_version",
            "does not say which configuration version",
        ),
        // Its own validation says tier 1 gets worse.
        (
            json!({"config": PLANNED, "base_version": version, "validation": {"current": even, "planned": worse}}),
            "validation",
            "worse for tier 1 — tier-1 SLO success falls from 100.0% to 50.0%",
        ),
        // No validation at all.
        (json!({"config": PLANNED, "base_version": version}), "validation", "carries no validation"),
        // An hour's window of a server that has recorded a few seconds.
        (
            json!({"config": PLANNED, "base_version": version, "validation": {"current": even, "planned": even},
                   "history": {"since_ms": now - 3_600_000, "until_ms": now}}),
            "history",
            "of recorded history",
        ),
    ];
    for (body, field, why) in guarded {
        let (status, err) = s.call(Method::POST, "/v1/clusters/default/plan", Some(body.clone())).await;
        assert_eq!(status, 422, "{body}: {err}");
        assert_eq!(err["error"]["field"], field, "{err}");
        let message = err["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(why) && message.contains("nothing was changed"), "{why}: {message}");
    }
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "sub", "grants": [{"project": "*", "role": "submitter"}]})),
        )
        .await;
    let (status, _) = s
        .call_as(
            t["token"].as_str().expect("token"),
            Method::POST,
            "/v1/clusters/default/plan",
            Some(json!({"config": PLANNED})),
        )
        .await;
    assert_eq!(status, 403, "only a global admin applies plans");
    let (_, after) = s.call(Method::GET, "/v1/clusters/default/config", None).await;
    assert_eq!(after, before, "nothing changed");
    let (_, routes) = s.call(Method::GET, "/v1/routes", None).await;
    assert_eq!(routes["routes"], json!([]));

    // The good plan, forced past the short history (and saying so): configuration and routes
    // together; the live queues follow.
    let (status, diff) = s
        .call(
            Method::POST,
            "/v1/clusters/default/plan",
            Some(json!({"config": PLANNED, "routes": route, "base_version": version,
                        "validation": {"current": even, "planned": even},
                        "history": {"since_ms": now - 3_600_000, "until_ms": now}, "force": true})),
        )
        .await;
    assert_eq!(status, 200, "{diff}");
    assert_eq!((diff["applied"].as_bool(), diff["version"].as_i64()), (Some(true), Some(version + 1)));
    let warning = diff["warnings"][0].as_str().unwrap_or("");
    assert!(warning.starts_with("forced: the plan was made from"), "{diff}");
    assert!(diff["history_ms"].as_i64().is_some_and(|h| h < 3_600_000), "{diff}");
    let (_, routes) = s.call(Method::GET, "/v1/routes", None).await;
    assert_eq!(routes["routes"][0]["key"], "workflow:report");
    let start = Instant::now();
    loop {
        let (_, q) = s.call(Method::GET, "/v1/queues/root.ads.tier1", None).await;
        if q["weight"] == 5.0 {
            break;
        }
        assert!(start.elapsed() < LONG, "the live queue never took the new weight: {q}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A run of the routed workflow goes where the route says and still runs.
    let (status, created) = s.submit(common::one_task("report", "root.default", "true"), "d1").await;
    assert_eq!((status, created["queue"].as_str()), (201, Some("root.ads.tier1")), "{created}");
    assert_eq!(s.wait(created["id"].as_i64().expect("id"), LONG).await["state"], "succeeded");

    // The history: each version, who made it and from what, with the diff.
    let (status, h) = s.call(Method::GET, "/v1/clusters/default/history", None).await;
    assert_eq!(status, 200, "{h}");
    assert_eq!(h["current"].as_i64(), Some(version + 1));
    let versions = h["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2, "{h:#}");
    assert_eq!(
        (versions[0]["version"].as_i64(), versions[0]["source"].as_str()),
        (Some(version + 1), Some("plan"))
    );
    // Made by the admin token (the only other one is `sub`'s).
    let (_, tokens) = s.call(Method::GET, "/v1/tokens", None).await;
    let admin = tokens["tokens"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] != "sub").cloned())
        .expect("the admin token");
    assert_eq!(versions[0]["actor"], admin["id"], "{h:#}");
    assert_eq!(
        versions[0]["queues"],
        json!([{"queue": "root.ads.tier1", "field": "weight", "from": "1", "to": "5"}])
    );
    assert_eq!(versions[0]["routes"][0]["key"], "workflow:report");
    assert!(versions[1]["source"].as_str().is_some_and(|s| s.starts_with("loaded at start")), "{h:#}");

    // Roll back to the first version: the live queues and the routes are as before.
    let (status, back) =
        s.call(Method::POST, &format!("/v1/clusters/default/history/{version}/rollback"), None).await;
    assert_eq!(status, 200, "{back}");
    assert_eq!(back["version"].as_i64(), Some(version + 2));
    assert_eq!(
        back["queues"],
        json!([{"queue": "root.ads.tier1", "field": "weight", "from": "5", "to": "1"}])
    );
    let start = Instant::now();
    loop {
        let (_, q) = s.call(Method::GET, "/v1/queues/root.ads.tier1", None).await;
        if q["weight"] == 1.0 {
            break;
        }
        assert!(start.elapsed() < LONG, "the live queue never went back: {q}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, routes) = s.call(Method::GET, "/v1/routes", None).await;
    assert_eq!(routes["routes"], json!([]), "the routes are as before too");
    let (_, after_rollback) = s.call(Method::GET, "/v1/clusters/default/config", None).await;
    assert_eq!(after_rollback, before, "the file in force is the first one again");
    let (_, h) = s.call(Method::GET, "/v1/clusters/default/history", None).await;
    assert_eq!(h["versions"][0]["source"].as_str(), Some(format!("rollback to version {version}").as_str()));
    // A rollback made against a version no longer in force changes nothing.
    let (status, _) = s
        .call(
            Method::POST,
            &format!("/v1/clusters/default/history/{}/rollback", version + 1),
            Some(json!({"base_version": version + 1})),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = s.call(Method::POST, "/v1/clusters/default/history/99/rollback", None).await;
    assert_eq!(status, 404);
    s.stop(Stop::Now).await;
}

async fn the_scheduled_planner_proposes_and_an_admin_applies(db: Db) {
    let Some(mut s) = server(db, "autoplan", |c| {
        c.auto_plan =
            Some(weir_server::AutoPlan { every: Duration::from_secs(1), window: Duration::from_secs(3600) });
    })
    .await
    else {
        return;
    };
    let (status, created) = s.submit(report("sleep 1"), "d1").await;
    assert_eq!(status, 201, "{created}");
    s.wait(created["id"].as_i64().expect("id"), LONG).await;
    let start = Instant::now();
    let proposal = loop {
        let (_, v) = s.call(Method::GET, "/v1/proposals", None).await;
        let found =
            v["proposals"].as_array().and_then(|p| p.iter().find(|p| p["state"] == "proposed").cloned());
        if let Some(p) = found {
            break p;
        }
        assert!(start.elapsed() < LONG, "no proposal: {v:#}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    // Validated by replaying the recorded run on the current and the planned settings.
    let validation = proposal["summary"]["validation"].as_array().expect("validation figures");
    assert!(
        validation.iter().any(|r| r[0] == "tier 1 SLO success" && r[1] == "100.0%" && r[2] == "100.0%"),
        "{proposal:#}"
    );
    assert!(proposal["diff"]["queues"].is_array(), "{proposal:#}");
    let id = proposal["id"].as_i64().expect("id");
    // Made from the few seconds this server has recorded: refused unless forced.
    let (status, err) = s.call(Method::POST, &format!("/v1/proposals/{id}/apply"), None).await;
    assert_eq!((status, err["error"]["field"].as_str()), (422, Some("history")), "{err}");
    let warned = proposal["diff"]["warnings"].as_array().expect("warnings");
    assert!(
        warned.iter().any(|w| w.as_str().is_some_and(|w| w.contains("of recorded history"))),
        "{proposal:#}"
    );
    let (status, diff) = s.call(Method::POST, &format!("/v1/proposals/{id}/apply?force=true"), None).await;
    assert_eq!(status, 200, "{diff}");
    assert_eq!(diff["applied"], true);
    let (_, v) = s.call(Method::GET, "/v1/proposals", None).await;
    let applied = v["proposals"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["id"] == id).cloned())
        .expect("still listed");
    assert_eq!(applied["state"], "applied");
    let (status, _) = s.call(Method::POST, &format!("/v1/proposals/{id}/apply?force=true"), None).await;
    assert_eq!(status, 409, "a proposal applies once");
    let (_, h) = s.call(Method::GET, "/v1/clusters/default/history", None).await;
    assert_eq!(h["versions"][0]["source"].as_str(), Some(format!("proposal {id}").as_str()), "{h:#}");

    // Plan now, then dismiss what it proposed.
    let (status, now) = s.call(Method::POST, "/v1/clusters/default/proposals", None).await;
    assert_eq!(status, 201, "{now}");
    let fresh = now["id"].as_i64().expect("id");
    assert!(fresh > id && now["state"] == "proposed", "{now:#}");
    let (status, _) = s.call(Method::POST, &format!("/v1/proposals/{fresh}/dismiss"), None).await;
    assert_eq!(status, 204);
    let (_, v) = s.call(Method::GET, "/v1/proposals", None).await;
    let dismissed = v["proposals"].as_array().and_then(|p| p.iter().find(|p| p["id"] == fresh).cloned());
    assert_eq!(dismissed.expect("listed")["state"], "dismissed");
    let (status, err) = s.call(Method::POST, &format!("/v1/proposals/{fresh}/dismiss"), None).await;
    assert_eq!(status, 409, "{err}");
    s.stop(Stop::Now).await;
}

/// "Plan now" on a server that has recorded nothing says so in words (it once answered with
/// the CSV parser's "the usage history has no rows; expected `start,end,…` lines").
async fn plan_now_without_history_says_so(db: Db) {
    let Some(mut s) = server(db, "plannow", |_| {}).await else { return };
    let (status, err) = s.call(Method::POST, "/v1/clusters/default/proposals", None).await;
    assert_eq!(status, 422, "{err}");
    let message = err["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("no queue usage is recorded for cluster `default` yet"), "{message}");
    assert!(!message.contains("start,end"), "{message}");
    s.stop(Stop::Now).await;
}
