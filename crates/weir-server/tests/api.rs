//! The API against a real server (ephemeral loopback port, real processes through the local
//! backend), once on SQLite and once on PostgreSQL (when `WEIR_TEST_POSTGRES_URL` is set, as
//! `.ci/run` does): DAG order, logs, retries, kills, restarts, and every bad input with its
//! status code.

mod common;

use std::time::Duration;

use common::{one_task, Db, TestServer};
use reqwest::Method;
use serde_json::{json, Value};
use weir_server::Stop;

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
    stages_and_jobs_run_in_dag_order_and_keep_their_logs,
    a_failed_task_is_retried_up_to_its_limit,
    a_kill_stops_the_processes,
    bad_input_gets_its_status_code,
    uniqueness_and_idempotency,
    a_restart_adopts_running_tasks_instead_of_starting_them_again,
    authorization_follows_projects,
    routes_and_a_queue_tree_reload,
);

/// Each task appends `<name> start <ms>` and `<name> end <ms>` to a marker file.
fn marked(marker: &str, name: &str, sleep: &str) -> String {
    format!(
        "echo {name} start $(date +%s%N) >> {marker}; echo out-{name}-$WEIR_TASK_INDEX; echo err-{name} >&2; sleep {sleep}; echo {name} end $(date +%s%N) >> {marker}"
    )
}

fn events(marker: &std::path::Path) -> Vec<(String, String, u128)> {
    std::fs::read_to_string(marker)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut p = l.split_whitespace();
            Some((p.next()?.to_string(), p.next()?.to_string(), p.next()?.parse().ok()?))
        })
        .collect()
}

async fn stages_and_jobs_run_in_dag_order_and_keep_their_logs(db: Db) {
    let Some(mut s) = TestServer::start(db, "dag").await else { return };
    let marker = s.dir.join("marker");
    let m = marker.display().to_string();
    // Job `second` comes after job `first`; in `first`, stage `b` waits for both tasks of `a`.
    let wf = json!({
        "name": "dag", "queue": "root.ads.tier1",
        "jobs": [
            {"name": "second", "after": ["first"], "stages": [
                {"name": "c", "tasks": 1, "resources": {"cpu": 1000}, "command": marked(&m, "c", "0")}]},
            {"name": "first", "stages": [
                {"name": "b", "after": ["a"], "tasks": 1, "resources": {"cpu": 1000}, "command": marked(&m, "b", "0")},
                {"name": "a", "tasks": 2, "resources": {"cpu": 1000}, "command": marked(&m, "a", "0.3")}]}
        ]
    });
    let (status, created) = s.submit(wf, "2026-11-23").await;
    assert_eq!(status, 201, "{created:#}");
    assert_eq!(created["queue"], "root.ads.tier1");
    assert_eq!(created["state"], "queued");
    let id = created["id"].as_i64().expect("id");
    let run = s.wait(id, LONG).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    let ev = events(&marker);
    let time = |name: &str, what: &str| -> Vec<u128> {
        ev.iter().filter(|(n, w, _)| n == name && w == what).map(|e| e.2).collect()
    };
    assert_eq!(time("a", "end").len(), 2);
    // The barrier: b starts after both a's end; c (next job) after b ends.
    assert!(time("b", "start")[0] >= *time("a", "end").iter().max().expect("a ended"));
    assert!(time("c", "start")[0] >= time("b", "end")[0]);
    for job in run["jobs"].as_array().expect("jobs") {
        assert_eq!(job["state"], "succeeded");
        for t in job["tasks"].as_array().expect("tasks") {
            assert_eq!(
                (t["state"].as_str(), t["attempts"].as_u64(), t["exit_code"].as_i64()),
                (Some("succeeded"), Some(1), Some(0))
            );
        }
    }
    let (st, out) = s.call(Method::GET, &format!("/v1/runs/{id}/tasks/first.a.1/logs"), None).await;
    assert_eq!((st, out), (200, Value::String("out-a-1\n".into())));
    let (st, err) = s
        .call(Method::GET, &format!("/v1/runs/{id}/tasks/first.a.0/logs?stream=stderr&follow=true"), None)
        .await;
    assert_eq!((st, err), (200, Value::String("err-a\n".into())));
    s.stop(Stop::Now).await;
}

async fn a_failed_task_is_retried_up_to_its_limit(db: Db) {
    let Some(mut s) = TestServer::start(db, "retry").await else { return };
    let flag = s.dir.join("failed-once");
    // Fails on its first attempt only.
    let flaky = format!("if [ -f {f} ]; then exit 0; else touch {f}; exit 3; fi", f = flag.display());
    let mut wf = one_task("flaky", "root.ads.tier1", &flaky);
    wf["jobs"][0]["stages"][0]["max_attempts"] = json!(2);
    let (_, c) = s.submit(wf, "d1").await;
    let run = s.wait(c["id"].as_i64().expect("id"), LONG).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    assert_eq!(run["jobs"][0]["tasks"][0]["attempts"], 2);
    // Always fails: two attempts, then the run fails and says why.
    let mut wf = one_task("broken", "root.ads.tier1", "exit 7");
    wf["jobs"][0]["stages"][0]["max_attempts"] = json!(2);
    let (_, c) = s.submit(wf, "d1").await;
    let run = s.wait(c["id"].as_i64().expect("id"), LONG).await;
    assert_eq!(run["state"], "failed", "{run:#}");
    let task = &run["jobs"][0]["tasks"][0];
    assert_eq!(
        (task["state"].as_str(), task["attempts"].as_u64(), task["exit_code"].as_i64()),
        (Some("failed"), Some(2), Some(7))
    );
    assert!(run["reason"].as_str().unwrap_or("").contains("failed 2 times"), "{run:#}");
    s.stop(Stop::Now).await;
}

fn pid_alive(pid: i32) -> bool {
    // A zombie is gone for our purposes; /proc/PID/stat's third field is the state.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

async fn a_kill_stops_the_processes(db: Db) {
    let Some(mut s) = TestServer::start(db, "kill").await else { return };
    let pids = s.dir.join("pids");
    let cmd = format!("echo $$ >> {}; sleep 120 & wait", pids.display());
    let mut wf = one_task("sleeper", "root.ads.tier1", &cmd);
    wf["jobs"][0]["stages"][0]["tasks"] = json!(2);
    let (_, c) = s.submit(wf, "d1").await;
    let id = c["id"].as_i64().expect("id");
    s.wait_until(id, LONG, "both tasks running", |r| {
        r["jobs"][0]["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["state"] == "running"))
    })
    .await;
    let started: Vec<i32> = loop {
        let p: Vec<i32> = std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .collect();
        if p.len() == 2 {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (st, body) = s.call(Method::POST, &format!("/v1/runs/{id}/kill"), None).await;
    assert_eq!(st, 202, "{body:#}");
    let run = s.wait(id, LONG).await;
    assert_eq!(run["state"], "killed", "{run:#}");
    for t in run["jobs"][0]["tasks"].as_array().expect("tasks") {
        assert_eq!(t["state"], "killed");
    }
    for pid in started {
        assert!(!pid_alive(pid), "process {pid} of the killed run is still alive");
    }
    // A queued run is killed at once.
    s.stop(Stop::Now).await;
}

async fn bad_input_gets_its_status_code(db: Db) {
    let Some(mut s) = TestServer::start(db, "bad").await else { return };
    let post_raw = |body: &'static str, ctype: &'static str, token: Option<String>| {
        let mut req = s.http.post(format!("{}/v1/runs", s.base)).header("content-type", ctype).body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let r = req.send().await.expect("request");
            let st = r.status().as_u16();
            (st, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let tok = Some(s.token.clone());
    // Malformed JSON: 400 with the path of the bad field.
    let (st, e) = post_raw(r#"{"workflow": {"name": "w", "queue": "root.ads.tier1", "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": "many"}]}]}}"#, "application/json", tok.clone()).await;
    assert_eq!(st, 400, "{e:#}");
    assert_eq!(e["error"]["field"], "workflow.jobs[0].stages[0].tasks", "{e:#}");
    let (st, e) = post_raw("{not json", "application/json", tok.clone()).await;
    assert_eq!((st, e["error"]["code"].as_str()), (400, Some("bad_request")), "{e:#}");
    // Malformed YAML.
    let (st, e) = post_raw("workflow: {name: w, jobs: [\n", "application/yaml", tok.clone()).await;
    assert_eq!(st, 400, "{e:#}");
    // A valid YAML submission works the same way as JSON.
    let (st, e) = post_raw(
        "workflow: {name: yaml-wf, queue: root.default, jobs: [{name: j, stages: [{name: s, tasks: 1, resources: {cpu: 1000}, command: 'true'}]}]}\nlogical_date: d1\n",
        "application/yaml",
        tok.clone(),
    )
    .await;
    assert_eq!(st, 201, "{e:#}");
    // Unknown queue, unknown project, a DAG cycle: 400 naming the field.
    let (st, e) = s.submit(one_task("w", "root.nope", "true"), "d").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.queue")), "{e:#}");
    let mut wf = one_task("w", "root.ads.tier1", "true");
    wf.as_object_mut().expect("object").remove("queue");
    wf["project"] = json!("nosuch");
    let (st, e) = s.submit(wf, "d").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.project")), "{e:#}");
    let cycle = json!({"name": "cyc", "queue": "root.ads.tier1", "jobs": [{"name": "j", "stages": [
        {"name": "x", "after": ["y"], "tasks": 1, "resources": {"cpu": 1000}, "command": "true"},
        {"name": "y", "after": ["x"], "tasks": 1, "resources": {"cpu": 1000}, "command": "true"}]}]});
    let (st, e) = s.submit(cycle, "d").await;
    assert_eq!(st, 400, "{e:#}");
    assert!(e["error"]["message"].as_str().unwrap_or("").contains("cycle"), "{e:#}");
    assert_eq!(e["error"]["field"], "workflow.jobs.j.stages.x.after");
    // A stage without a command.
    let mut wf = one_task("w", "root.ads.tier1", "true");
    wf["jobs"][0]["stages"][0].as_object_mut().expect("stage").remove("command");
    let (st, e) = s.submit(wf, "d").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.jobs.j.stages.s.command")), "{e:#}");
    // A Spark application routed to a cluster whose backend is `local`: refused at submission
    // (it could only fail at start), naming the stage.
    let mut wf = one_task("w", "root.ads.tier1", "true");
    let stage = wf["jobs"][0]["stages"][0].as_object_mut().expect("stage");
    stage.remove("command");
    stage.insert("spark".to_string(), json!({"main": "wordcount.py"}));
    let (st, e) = s.submit(wf, "d").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.jobs.j.stages.s.spark")), "{e:#}");
    assert!(e["error"]["message"].as_str().unwrap_or("").contains("`local` backend"), "{e:#}");
    // Oversize body: 413.
    let big =
        json!({"workflow": one_task("w", "root.ads.tier1", &"x".repeat(100 * 1024)), "logical_date": "d"});
    let (st, e) = s.call(Method::POST, "/v1/runs", Some(big)).await;
    assert_eq!((st, e["error"]["code"].as_str()), (413, Some("payload_too_large")), "{e:#}");
    // No token, a bad token: 401.
    let (st, e) = post_raw("{}", "application/json", None).await;
    assert_eq!((st, e["error"]["code"].as_str()), (401, Some("unauthorized")), "{e:#}");
    let (st, _) = s.call_as("weir_nope", Method::GET, "/v1/runs", None).await;
    assert_eq!(st, 401);
    // Unknown run: 404.
    let (st, e) = s.call(Method::GET, "/v1/runs/999999", None).await;
    assert_eq!((st, e["error"]["code"].as_str()), (404, Some("not_found")), "{e:#}");
    let (st, _) = s.call(Method::POST, "/v1/runs/999999/kill", None).await;
    assert_eq!(st, 404);
    // Health needs no token.
    let st = s.http.get(format!("{}/healthz", s.base)).send().await.expect("healthz").status().as_u16();
    assert_eq!(st, 200);
    // Store unavailable: 503, and nothing half-written.
    let before = s.call(Method::GET, "/v1/runs", None).await.1["runs"].as_array().map(Vec::len);
    s.store.close().await;
    let (st, e) = s.submit(one_task("late", "root.ads.tier1", "true"), "d").await;
    assert_eq!((st, e["error"]["code"].as_str()), (503, Some("unavailable")), "{e:#}");
    let (url, dir) = (s.url.clone(), s.dir.clone());
    s.stop(Stop::Now).await;
    let reopened = weir_store::open(&url).await.expect("reopen");
    let after =
        reopened.list_runs(&weir_store::RunFilter { limit: 1000, ..Default::default() }).await.expect("list");
    assert_eq!(Some(after.len()), before, "a run was written although the answer was 503");
    assert!(after.iter().all(|r| r.workflow != "late"));
    let _ = dir;
}

async fn uniqueness_and_idempotency(db: Db) {
    let Some(mut s) = TestServer::start(db, "uniq").await else { return };
    let wf = one_task("daily", "root.ads.tier1", "sleep 30");
    let (st, first) = s.submit(wf.clone(), "2026-11-01").await;
    assert_eq!(st, 201);
    let id = first["id"].as_i64().expect("id");
    let (st, e) = s.submit(wf.clone(), "2026-11-01").await;
    assert_eq!((st, e["error"]["existing_run"].as_i64()), (409, Some(id)), "{e:#}");
    // Another logical date is another run.
    let (st, other) = s.submit(wf.clone(), "2026-11-02").await;
    assert_eq!(st, 201);
    // An Idempotency-Key replays the first answer, even when a retry would now conflict.
    let send = |key: &'static str, date: &'static str| {
        let req = s
            .http
            .post(format!("{}/v1/runs", s.base))
            .bearer_auth(&s.token)
            .header("idempotency-key", key)
            .json(&json!({"workflow": one_task("keyed", "root.ads.tier1", "true"), "logical_date": date}));
        async move {
            let r = req.send().await.expect("request");
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (st1, a) = send("k-1", "x").await;
    let (st2, b) = send("k-1", "x").await;
    assert_eq!((st1, st2), (201, 201), "{a:#} {b:#}");
    assert_eq!(a["id"], b["id"]);
    // Once the first run has ended, the same (workflow, date) may run again.
    s.call(Method::POST, &format!("/v1/runs/{id}/kill"), None).await;
    s.wait(id, LONG).await;
    let (st, again) = s.submit(wf, "2026-11-01").await;
    assert_eq!(st, 201, "{again:#}");
    assert_ne!(again["id"], first["id"]);
    for r in [other["id"].as_i64(), again["id"].as_i64()].into_iter().flatten() {
        s.call(Method::POST, &format!("/v1/runs/{r}/kill"), None).await;
    }
    // Listing with a filter and paging.
    let (_, page) = s.call(Method::GET, "/v1/runs?workflow=daily&limit=2", None).await;
    assert_eq!(page["runs"].as_array().map(Vec::len), Some(2));
    let cursor = page["next_cursor"].as_str().expect("a next page").to_string();
    let (_, rest) =
        s.call(Method::GET, &format!("/v1/runs?workflow=daily&limit=2&cursor={cursor}"), None).await;
    assert_eq!(rest["runs"].as_array().map(Vec::len), Some(1));
    s.stop(Stop::Now).await;
}

async fn a_restart_adopts_running_tasks_instead_of_starting_them_again(db: Db) {
    let Some(mut s) = TestServer::start(db, "restart").await else { return };
    let marker = s.dir.join("starts");
    let cmd = format!("echo $WEIR_ATTEMPT >> {}; sleep 2", marker.display());
    let (_, c) = s.submit(one_task("long", "root.ads.tier1", &cmd), "d1").await;
    let id = c["id"].as_i64().expect("id");
    s.wait_until(id, LONG, "the task running", |r| r["jobs"][0]["tasks"][0]["state"] == "running").await;
    s.stop(Stop::Now).await;
    // The process outlives the server; a new server on the same store adopts it.
    let mut s2 = TestServer::start_with(common::config(&s.dir), &s.url.clone()).await;
    let run = s2.wait(id, LONG).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    assert_eq!(run["jobs"][0]["tasks"][0]["attempts"], 1);
    assert_eq!(std::fs::read_to_string(&marker).unwrap_or_default(), "1\n", "the task was started again");
    s2.stop(Stop::Now).await;
}

async fn authorization_follows_projects(db: Db) {
    let Some(mut s) = TestServer::start(db, "authz").await else { return };
    let (st, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "ads-ci", "grants": [{"project": "ads", "role": "submitter"}]})),
        )
        .await;
    assert_eq!(st, 201, "{t:#}");
    let ads = t["token"].as_str().expect("secret").to_string();
    let submit_as = |token: String, queue: &'static str| {
        let req = s
            .http
            .post(format!("{}/v1/runs", s.base))
            .bearer_auth(token)
            .json(&json!({"workflow": one_task("w", queue, "true"), "logical_date": queue}));
        async move {
            let r = req.send().await.expect("request");
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (st, mine) = submit_as(ads.clone(), "root.ads.tier1").await;
    assert_eq!(st, 201, "{mine:#}");
    let (st, e) = submit_as(ads.clone(), "root.search.tier1").await;
    assert_eq!((st, e["error"]["code"].as_str()), (403, Some("forbidden")), "{e:#}");
    // Another project's run: cannot read, kill or see its logs — answered as if there were
    // no such run, so that a tenant learns nothing of what others run.
    let (_, theirs) = s.submit(one_task("other", "root.search.tier1", "true"), "d").await;
    let tid = theirs["id"].as_i64().expect("id");
    for (m, path) in [
        (Method::GET, format!("/v1/runs/{tid}")),
        (Method::POST, format!("/v1/runs/{tid}/kill")),
        (Method::GET, format!("/v1/runs/{tid}/tasks/j.s.0/logs")),
    ] {
        let (st, e) = s.call_as(&ads, m, &path, None).await;
        assert_eq!(st, 404, "{path}");
        assert!(!e.to_string().contains("search"), "{path}: {e}");
    }
    let (_, list) = s.call_as(&ads, Method::GET, "/v1/runs", None).await;
    assert!(list["runs"].as_array().expect("runs").iter().all(|r| r["project"] == "ads"), "{list:#}");
    // Only global admins manage tokens; a revoked token stops working (after the cache's 5 s).
    let (st, _) = s.call_as(&ads, Method::GET, "/v1/tokens", None).await;
    assert_eq!(st, 403);
    let id = t["id"].as_str().expect("id");
    let (st, _) = s.call(Method::DELETE, &format!("/v1/tokens/{id}"), None).await;
    assert_eq!(st, 204);
    s.stop(Stop::Now).await;
}

async fn routes_and_a_queue_tree_reload(db: Db) {
    let Some(mut s) = TestServer::start(db, "reload").await else { return };
    let put_config = |text: String| {
        let req =
            s.http.put(format!("{}/v1/clusters/default/config", s.base)).bearer_auth(&s.token).body(text);
        async move {
            let r = req.send().await.expect("request");
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    // A bad file is refused with the path of the problem, and changes nothing.
    let bad = common::CLUSTER.replace("{name: tier3, tier: 3}", "{name: tier3, tier: 3, weight: -1}");
    let (st, e) = put_config(bad).await;
    assert_eq!(st, 400, "{e:#}");
    assert!(e["error"]["field"].as_str().unwrap_or("").contains("weight"), "{e:#}");
    let (st, _) = s.submit(one_task("new-queue", "root.ml.tier2", "true"), "d").await;
    assert_eq!(st, 400, "root.ml.tier2 does not exist yet");
    // A good one adds a queue; runs go there and the worker runs them on the new tree.
    let good = format!("{}  - name: ml\n    children: [{{name: tier2, tier: 2}}]\n", common::CLUSTER);
    let (st, applied) = put_config(good).await;
    assert_eq!(st, 200, "{applied:#}");
    let (st, c) = s.submit(one_task("new-queue", "root.ml.tier2", "true"), "d").await;
    assert_eq!(st, 201, "{c:#}");
    let run = s.wait(c["id"].as_i64().expect("id"), LONG).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    // A route sends a project's tier-1 workflows to a chosen leaf.
    let (st, r) = s
        .call(
            Method::PUT,
            "/v1/routes/project:reports:1",
            Some(json!({"cluster": "default", "queue": "root.search.tier1"})),
        )
        .await;
    assert_eq!(st, 200, "{r:#}");
    let mut wf = one_task("routed", "root.ads.tier1", "true");
    wf.as_object_mut().expect("object").remove("queue");
    wf["project"] = json!("reports");
    wf["tier"] = json!(1);
    let (st, c) = s.submit(wf, "d").await;
    assert_eq!((st, c["queue"].as_str()), (201, Some("root.search.tier1")), "{c:#}");
    let (st, _) = s
        .call(
            Method::PUT,
            "/v1/routes/project:reports:1",
            Some(json!({"cluster": "default", "queue": "root.nope"})),
        )
        .await;
    assert_eq!(st, 400);
    let (_, list) = s.call(Method::GET, "/v1/routes", None).await;
    assert_eq!(list["routes"].as_array().map(Vec::len), Some(1));
    // A registered workflow is submitted by name.
    let (st, e) = s
        .call(Method::PUT, "/v1/workflows/nightly", Some(one_task("nightly", "root.ads.tier1", "true")))
        .await;
    assert_eq!(st, 204, "{e:#}");
    let (st, e) =
        s.call(Method::PUT, "/v1/workflows/other", Some(one_task("nightly", "root.ads.tier1", "true"))).await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.name")), "{e:#}");
    let (st, c) = s
        .call(Method::POST, "/v1/runs", Some(json!({"workflow_name": "nightly", "logical_date": "d"})))
        .await;
    assert_eq!((st, c["workflow"].as_str()), (201, Some("nightly")), "{c:#}");
    assert_eq!(s.wait(c["id"].as_i64().expect("id"), LONG).await["state"], "succeeded");
    let (st, e) = s.call(Method::POST, "/v1/runs", Some(json!({"workflow_name": "missing"}))).await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow_name")), "{e:#}");
    // The live queue tree includes the new queue once the actor has reloaded.
    let start = std::time::Instant::now();
    loop {
        let (_, q) = s.call(Method::GET, "/v1/queues/root.ml.tier2", None).await;
        if q["path"] == "root.ml.tier2" {
            break;
        }
        assert!(start.elapsed() < LONG, "the reloaded tree was never published: {q:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.stop(Stop::Now).await;
}

/// A queue of the cluster file asked for before its cluster's engine has published anything
/// (here a server that runs no worker, on a new store; live, the first pass of a large cluster
/// takes seconds) is "not ready" (503 with `Retry-After`), not "no such queue"; a queue the
/// file does not have is still 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_before_the_first_publication_is_not_ready_rather_than_missing() {
    let dir = common::temp_dir("notready");
    let Some(url) = common::db_url(Db::Sqlite, &dir, "notready").await else { return };
    let mut c = common::config(&dir);
    c.worker = false;
    let mut s = TestServer::start_with(c, &url).await;
    let resp = s
        .http
        .get(format!("{}/v1/queues/root.ads.tier1", s.base))
        .bearer_auth(&s.token)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(resp.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["code"], "not_ready", "{body:#}");
    let (st, e) = s.call(Method::GET, "/v1/queues/root.nope", None).await;
    assert_eq!((st, e["error"]["code"].as_str()), (404, Some("not_found")), "{e:#}");
    s.stop(Stop::Now).await;
}
