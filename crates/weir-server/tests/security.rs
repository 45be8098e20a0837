//! The service tried as a hostile tenant would (issue 17): one test per reproduction, each
//! failing on the server before the fix. A tenant here is a token with grants on one project
//! (`ads`), next to another project (`search`) on the same server. Task isolation (what a
//! task's process can reach) is in `isolation.rs`.

mod common;

use std::time::Duration;

use common::{one_task, Db, TestServer};
use reqwest::Method;
use serde_json::{json, Value};
use weir_server::Stop;

const LONG: Duration = Duration::from_secs(60);

/// A token with `grants` (PROJECT, ROLE), and optionally a user and users it may act as.
async fn token(s: &TestServer, name: &str, grants: &[(&str, &str)], extra: Value) -> String {
    let grants: Vec<Value> = grants.iter().map(|(p, r)| json!({"project": p, "role": r})).collect();
    let mut body = json!({"name": name, "grants": grants});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (st, t) = s.call(Method::POST, "/v1/tokens", Some(body)).await;
    assert_eq!(st, 201, "{t:#}");
    t["token"].as_str().expect("secret").to_string()
}

async fn submit_as(s: &TestServer, token: &str, body: Value) -> (u16, Value) {
    s.call_as(token, Method::POST, "/v1/runs", Some(body)).await
}

fn dbs() -> [Db; 2] {
    [Db::Sqlite, Db::Postgres]
}

/// A submitter of `ads` cannot put work in `search`'s queue: not by naming the queue while
/// declaring its own project, not through an admin's `workflow:` route that happens to match
/// its workflow's name. Authorization follows the queue the run will actually run in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_or_a_declared_project_never_puts_work_in_another_projects_queue() {
    for db in dbs() {
        let Some(mut s) = TestServer::start(db, "sec_route").await else { continue };
        let ads = token(&s, "ads", &[("ads", "submitter")], json!({})).await;
        // Its own project declared, another project's queue named.
        let mut wf = one_task("steal", "root.search.tier1", "true");
        wf["project"] = json!("ads");
        let (st, e) = submit_as(&s, &ads, json!({"workflow": wf, "logical_date": "d"})).await;
        assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.project")), "{e:#}");
        // A route for a workflow name sends it to search's queue.
        let (st, _) = s
            .call(
                Method::PUT,
                "/v1/routes/workflow:report",
                Some(json!({"cluster": "default", "queue": "root.search.tier1"})),
            )
            .await;
        assert_eq!(st, 200);
        let mut wf = one_task("report", "root.ads.tier1", "true");
        wf.as_object_mut().expect("object").remove("queue");
        wf["project"] = json!("ads");
        wf["tier"] = json!(1);
        let (st, e) = submit_as(&s, &ads, json!({"workflow": wf, "logical_date": "d"})).await;
        assert!(st == 400 || st == 403, "{st} {e:#}");
        // Without a project, the queue's own project decides: 403.
        let (st, e) = submit_as(
            &s,
            &ads,
            json!({"workflow": one_task("report", "root.ads.tier1", "true"), "logical_date": "d"}),
        )
        .await;
        assert_eq!((st, e["error"]["code"].as_str()), (403, Some("forbidden")), "{e:#}");
        // Nothing of ads's reached search's queue.
        let (_, list) = s.call(Method::GET, "/v1/runs?project=ads", None).await;
        assert_eq!(list["runs"].as_array().map(Vec::len), Some(0), "{list:#}");
        // The operator mapped a project to a queue outside its subtree: allowed for that project.
        let (st, _) = s
            .call(
                Method::PUT,
                "/v1/routes/project:ads:3",
                Some(json!({"cluster": "default", "queue": "root.default"})),
            )
            .await;
        assert_eq!(st, 200);
        let mut wf = one_task("mapped", "root.ads.tier1", "true");
        wf.as_object_mut().expect("object").remove("queue");
        wf["project"] = json!("ads");
        wf["tier"] = json!(3);
        let (st, c) = submit_as(&s, &ads, json!({"workflow": wf, "logical_date": "d"})).await;
        assert_eq!((st, c["queue"].as_str()), (201, Some("root.default")), "{c:#}");
        s.stop(Stop::Now).await;
    }
}

/// One project can neither block another's (workflow, logical date) nor overwrite its
/// registered workflow of the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniqueness_and_registered_workflows_are_per_project() {
    for db in dbs() {
        let Some(mut s) = TestServer::start(db, "sec_unique").await else { continue };
        let ads = token(&s, "ads", &[("ads", "submitter")], json!({})).await;
        let search = token(&s, "search", &[("search", "submitter")], json!({})).await;
        let sleepy = |queue| one_task("etl", queue, "sleep 30");
        let (st, first) = submit_as(
            &s,
            &search,
            json!({"workflow": sleepy("root.search.tier1"), "logical_date": "2026-11-24"}),
        )
        .await;
        assert_eq!(st, 201, "{first:#}");
        let (st, mine) =
            submit_as(&s, &ads, json!({"workflow": sleepy("root.ads.tier1"), "logical_date": "2026-11-24"}))
                .await;
        assert_eq!(st, 201, "search's active run must not block ads's date: {mine:#}");
        // Registered workflows: each project keeps its own `etl`.
        for (tok, queue, cmd) in
            [(&ads, "root.ads.tier1", "echo ads"), (&search, "root.search.tier1", "echo search")]
        {
            let r = s
                .http
                .put(format!("{}/v1/workflows/etl", s.base))
                .bearer_auth(tok)
                .json(&one_task("etl", queue, cmd))
                .send()
                .await
                .expect("put");
            assert_eq!(r.status().as_u16(), 204);
        }
        let (st, c) = submit_as(&s, &ads, json!({"workflow_name": "etl", "logical_date": "reg"})).await;
        assert_eq!((st, c["queue"].as_str()), (201, Some("root.ads.tier1")), "{c:#}");
        let run = s.wait(c["id"].as_i64().expect("id"), LONG).await;
        assert_eq!(run["state"], "succeeded", "{run:#}");
        let (_, log) = s.call(Method::GET, &format!("/v1/runs/{}/tasks/j.s.0/logs", c["id"]), None).await;
        assert_eq!(log, Value::String("ads\n".into()), "ads's own registered workflow ran");
        for id in [first["id"].as_i64(), mine["id"].as_i64()].into_iter().flatten() {
            s.call(Method::POST, &format!("/v1/runs/{id}/kill"), None).await;
        }
        s.stop(Stop::Now).await;
    }
}

/// The engine's `user` (what per-user limits count) is the token's user, not free text: a
/// submission naming another user is refused unless the token may act as it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_user_is_the_caller_or_one_it_may_act_as() {
    let Some(mut s) = TestServer::start(Db::Sqlite, "sec-user").await else { return };
    let alice = token(&s, "alice", &[("ads", "submitter")], json!({"user": "alice"})).await;
    let airflow =
        token(&s, "airflow", &[("ads", "submitter")], json!({"user": "airflow", "act_as": ["bob"]})).await;
    let mut wf = one_task("w", "root.ads.tier1", "true");
    wf["user"] = json!("bob");
    let (st, e) = submit_as(&s, &alice, json!({"workflow": wf.clone(), "logical_date": "a"})).await;
    assert_eq!((st, e["error"]["field"].as_str()), (403, Some("workflow.user")), "{e:#}");
    let (st, c) = submit_as(&s, &airflow, json!({"workflow": wf, "logical_date": "b"})).await;
    assert_eq!(st, 201, "{c:#}");
    assert_eq!(s.run(c["id"].as_i64().expect("id")).await["user"], "bob");
    let (st, c) = submit_as(
        &s,
        &alice,
        json!({"workflow": one_task("w", "root.ads.tier1", "true"), "logical_date": "c"}),
    )
    .await;
    assert_eq!(st, 201, "{c:#}");
    assert_eq!(s.run(c["id"].as_i64().expect("id")).await["user"], "alice");
    s.stop(Stop::Now).await;
}

/// A viewer of `ads` reads its own subtree and the totals: not search's queues or routes, not
/// the cluster file, and another project's run id is answered as if it did not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_scoped_to_what_the_token_may_see() {
    let Some(mut s) = TestServer::start(Db::Sqlite, "sec-reads").await else { return };
    let viewer = token(&s, "ads-viewer", &[("ads", "viewer")], json!({})).await;
    let (st, _) = s
        .call(
            Method::PUT,
            "/v1/routes/workflow:secret",
            Some(json!({"cluster": "default", "queue": "root.search.tier1"})),
        )
        .await;
    assert_eq!(st, 200);
    let (_, theirs) = s.submit(one_task("theirs", "root.search.tier1", "true"), "d").await;
    // Wait for a snapshot, so that queues are there to filter.
    for _ in 0..100 {
        let (_, q) = s.call(Method::GET, "/v1/queues", None).await;
        if q["clusters"][0]["queues"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (st, q) = s.call_as(&viewer, Method::GET, "/v1/queues", None).await;
    assert_eq!(st, 200);
    let paths: Vec<&str> = q["clusters"][0]["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter_map(|q| q["path"].as_str())
        .collect();
    assert!(
        paths.contains(&"root.ads.tier1") && !paths.iter().any(|p| p.starts_with("root.search")),
        "{paths:?}"
    );
    assert!(q["clusters"][0]["total"]["cpu"].as_u64().is_some_and(|c| c > 0), "totals are shown: {q:#}");
    let (st, _) = s.call_as(&viewer, Method::GET, "/v1/queues/root.search.tier1", None).await;
    assert_eq!(st, 404);
    let (_, routes) = s.call_as(&viewer, Method::GET, "/v1/routes", None).await;
    assert_eq!(routes["routes"].as_array().map(Vec::len), Some(0), "{routes:#}");
    let (st, _) = s.call_as(&viewer, Method::GET, "/v1/clusters/default/config", None).await;
    assert_eq!(st, 403);
    let (st, e) = s.call_as(&viewer, Method::GET, &format!("/v1/runs/{}", theirs["id"]), None).await;
    assert_eq!(st, 404);
    assert!(!e.to_string().contains("search") && !e.to_string().contains("theirs"), "{e}");
    s.stop(Stop::Now).await;
}

/// A listing of a project covers its sub-projects (a grant on `ads` covers `ads.ranking`), and
/// a project's `limit=1` reads one page of its own index, whatever other projects hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_listing_covers_its_sub_projects_and_pages_on_its_own() {
    let dir = common::temp_dir("sec-list");
    let mut c = common::config(&dir);
    c.clusters[0].yaml = common::CLUSTER.replace(
        "children: [{name: tier1, tier: 1}, {name: tier3, tier: 3}]",
        "children: [{name: tier1, tier: 1}, {name: tier3, tier: 3}, {name: ranking, children: [{name: tier2, tier: 2}]}]",
    );
    c.worker = false;
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(c, &url).await;
    let viewer = token(&s, "ads-viewer", &[("ads", "viewer")], json!({})).await;
    let (st, sub) = s.submit(one_task("sub", "root.ads.ranking.tier2", "true"), "d").await;
    assert_eq!(st, 201, "{sub:#}");
    for i in 0..300 {
        let (st, _) = s.submit(one_task("noise", "root.search.tier1", "true"), &format!("d{i}")).await;
        assert_eq!(st, 201);
    }
    let (_, list) = s.call_as(&viewer, Method::GET, "/v1/runs?limit=1", None).await;
    let runs = list["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{list:#}");
    assert_eq!(
        (runs[0]["id"].clone(), runs[0]["project"].as_str()),
        (sub["id"].clone(), Some("ads.ranking"))
    );
    s.stop(Stop::Now).await;
}

/// Bounded work: a stage or a run above the limits is refused with the limit named; a run the
/// worker cannot build (a stored spec that does not parse, a run over the task limit that
/// reached the store another way) fails with its reason instead of taking the cluster down,
/// and the next run still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_refused_by_name_and_a_poison_run_fails_alone() {
    let dir = common::temp_dir("sec-poison");
    let mut c = common::config(&dir);
    c.limits.max_tasks_per_stage = 1_000;
    c.limits.max_tasks_per_run = 1_500;
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(c, &url).await;
    let mut wf = one_task("big", "root.ads.tier1", "true");
    wf["jobs"][0]["stages"][0]["tasks"] = json!(1_001);
    let (st, e) = s.submit(wf, "d").await;
    assert_eq!(st, 400);
    assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("max_tasks_per_stage")), "{e:#}");
    assert_eq!(e["error"]["field"], "workflow.jobs.j.stages.s.tasks");
    // Poison: stored directly, as an older server or a hand-edited store could have left them.
    let poison = |workflow: &str, spec: String| weir_store::NewRun {
        route: None,
        workflow: workflow.into(),
        project: "ads".into(),
        tier: 1,
        logical_date: "p".into(),
        cluster: "default".into(),
        queue: "root.ads.tier1".into(),
        spec,
        params: "{}".into(),
        submitted_by: "admin".into(),
        user: "admin".into(),
        client: None,
        submitted_ms: weir_server::now_ms(),
        slo_ms: None,
        idempotency_key: None,
        request_hash: String::new(),
        idempotency_after_ms: 0,
        dry_run: false,
    };
    let mut huge = one_task("huge", "root.ads.tier1", "true");
    huge["jobs"][0]["stages"][0]["tasks"] = json!(50_000_000);
    let stored = weir_store::JobStore::submit(
        &s.store,
        &[poison("garbled", "{not json".into()), poison("huge", huge.to_string())],
    )
    .await
    .expect("stored");
    let ids: Vec<i64> = stored
        .iter()
        .map(|o| match o {
            weir_store::Submitted::Created { id } => *id,
            other => panic!("{other:?}"),
        })
        .collect();
    for (id, why) in ids.iter().zip(["does not parse", "max_tasks_per_run"]) {
        let run = s.wait(*id, LONG).await;
        assert_eq!(run["state"], "failed", "{run:#}");
        assert!(run["reason"].as_str().is_some_and(|r| r.contains(why)), "{run:#}");
    }
    let (st, c) = s.submit(one_task("after", "root.ads.tier1", "true"), "d").await;
    assert_eq!(st, 201);
    assert_eq!(s.wait(c["id"].as_i64().expect("id"), LONG).await["state"], "succeeded");
    s.stop(Stop::Now).await;
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// A 256 MiB log is streamed in chunks (the server's memory does not grow by the file's size),
/// a tail or a range costs only what it returns, and the size is in `X-Log-Size`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_log_streams_from_disk_and_ranges_read_only_what_they_return() {
    let Some(mut s) = TestServer::start(Db::Sqlite, "sec-logs").await else { return };
    let (_, c) = s.submit(one_task("log", "root.ads.tier1", "echo first line"), "d").await;
    let id = c["id"].as_i64().expect("id");
    s.wait(id, LONG).await;
    let attempts = weir_store::JobStore::attempts(&s.store, id, 0, 0, 0).await.expect("attempts");
    let path = attempts[0].stdout.clone();
    const SIZE: u64 = 256 << 20;
    {
        use std::io::Write;
        let f = std::fs::OpenOptions::new().append(true).open(&path).expect("log");
        f.set_len(SIZE - 9).expect("grow (sparse)");
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("log");
        f.write_all(b"last one\n").expect("tail");
    }
    let url = format!("{}/v1/runs/{id}/tasks/j.s.0/logs", s.base);
    let tail = s.http.get(format!("{url}?tail=9")).bearer_auth(&s.token).send().await.expect("tail");
    assert_eq!(tail.headers()["x-log-size"].to_str().ok(), Some(SIZE.to_string().as_str()));
    assert_eq!(tail.text().await.expect("text"), "last one\n");
    let range =
        s.http.get(format!("{url}?offset=0&length=5")).bearer_auth(&s.token).send().await.expect("range");
    assert_eq!(range.text().await.expect("text"), "first");
    // Read the whole log over a bare socket into one small buffer, so that what this process
    // holds meanwhile is the server's doing.
    let before = rss_kib();
    let (got, peak) = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = s.base.trim_start_matches("http://").to_string();
        let mut sock = tokio::net::TcpStream::connect(&addr).await.expect("connect");
        let req = format!(
            "GET /v1/runs/{id}/tasks/j.s.0/logs HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
            s.token
        );
        sock.write_all(req.as_bytes()).await.expect("request");
        let mut buf = vec![0u8; 64 * 1024];
        let (mut got, mut peak, mut reads) = (0u64, before, 0u64);
        loop {
            let n = sock.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got += n as u64;
            reads += 1;
            if reads % 64 == 0 {
                peak = peak.max(rss_kib());
            }
        }
        (got, peak)
    };
    assert!(got > SIZE, "read {got} bytes (headers and chunk sizes included)");
    assert!(peak - before < 64 * 1024, "the server grew by {} KiB while streaming", peak - before);
    s.stop(Stop::Now).await;
}

/// Per-token submission rates and per-project waiting-run quotas answer 429 with Retry-After;
/// global admins are not limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_and_quotas_answer_429_with_retry_after() {
    let dir = common::temp_dir("sec-rate");
    let mut c = common::config(&dir);
    c.limits.submissions_per_second = 0.01;
    c.limits.submission_burst = 3;
    c.limits.max_waiting_runs_per_project = 2;
    c.worker = false; // Runs stay queued: they count against the quota.
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(c, &url).await;
    let ads = token(&s, "ads", &[("ads", "submitter")], json!({})).await;
    let search = token(&s, "search", &[("search", "submitter")], json!({})).await;
    let body = |q: &str, d: &str| json!({"workflow": one_task("w", q, "true"), "logical_date": d});
    for d in ["1", "2"] {
        assert_eq!(submit_as(&s, &ads, body("root.ads.tier1", d)).await.0, 201);
    }
    // The third waits over ads's quota of 2.
    let r = s.http.post(format!("{}/v1/runs", s.base)).bearer_auth(&ads).json(&body("root.ads.tier1", "3"));
    let r = r.send().await.expect("send");
    assert_eq!(r.status().as_u16(), 429);
    assert!(r.headers().get("retry-after").is_some());
    let e: Value = r.json().await.expect("json");
    assert!(
        e["error"]["message"].as_str().is_some_and(|m| m.contains("max_waiting_runs_per_project")),
        "{e:#}"
    );
    // Its bucket of 3 is now empty (the refused one took a submission too).
    let (st, e) = submit_as(&s, &ads, body("root.ads.tier1", "4")).await;
    assert_eq!((st, e["error"]["code"].as_str()), (429, Some("rate_limited")), "{e:#}");
    // Another token and project are not affected; the admin is not limited.
    assert_eq!(submit_as(&s, &search, body("root.search.tier1", "1")).await.0, 201);
    for d in ["a1", "a2", "a3", "a4"] {
        assert_eq!(s.submit(one_task("w", "root.ads.tier1", "true"), d).await.0, 201);
    }
    let (_, m) = s.call(Method::GET, "/metrics", None).await;
    let m = m.as_str().unwrap_or_default().to_string();
    assert!(m.contains("weir_requests_refused_total{reason=\"rate\"} 1"), "{m}");
    assert!(m.contains("weir_requests_refused_total{reason=\"quota\"} 1"), "{m}");
    s.stop(Stop::Now).await;
}

/// Many tokens submitting at once are each held to their own rate: the buckets no longer sit
/// under one lock, and a lost update between concurrent requests would let a token through
/// more than its burst (or charge one token's submission to another).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_submissions_of_many_tokens_are_each_rate_limited_on_their_own() {
    const BURST: usize = 4;
    const TRIES: usize = 12;
    let dir = common::temp_dir("sec-rate-concurrent");
    let mut c = common::config(&dir);
    c.limits.submissions_per_second = 0.001;
    c.limits.submission_burst = BURST as u32;
    c.worker = false;
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(c, &url).await;
    let mut tokens = Vec::new();
    for i in 0..4 {
        tokens.push(token(&s, &format!("ads{i}"), &[("ads", "submitter")], json!({})).await);
    }
    // Every token's tries in flight together, interleaved across tokens.
    let mut tries = Vec::new();
    for n in 0..TRIES {
        for (i, t) in tokens.iter().enumerate() {
            let body = json!({"workflow": one_task("w", "root.ads.tier1", "true"), "logical_date": format!("{i}-{n}")});
            let req = s.http.post(format!("{}/v1/runs", s.base)).bearer_auth(t).json(&body);
            tries.push(tokio::spawn(async move { (i, req.send().await.map(|r| r.status().as_u16())) }));
        }
    }
    let mut created = [0usize; 4];
    let mut limited = [0usize; 4];
    for t in tries {
        let (i, status) = t.await.expect("task");
        match status.expect("send") {
            201 => created[i] += 1,
            429 => limited[i] += 1,
            other => panic!("token {i}: unexpected status {other}"),
        }
    }
    assert_eq!(created, [BURST; 4], "each token's burst, no more and no less");
    assert_eq!(limited, [TRIES - BURST; 4]);
    // The store holds exactly the admitted runs, each audited under the token that sent it.
    let (_, list) = s.call(Method::GET, "/v1/runs?project=ads&limit=500", None).await;
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(4 * BURST), "{list:#}");
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=submit&limit=500", None).await;
    let mut per_token = std::collections::BTreeMap::<String, usize>::new();
    for e in audit["entries"].as_array().into_iter().flatten() {
        if e["outcome"] == "created" {
            *per_token.entry(e["token"].as_str().unwrap_or_default().to_string()).or_default() += 1;
        }
    }
    assert_eq!(per_token.values().copied().collect::<Vec<_>>(), vec![BURST; 4], "{audit:#}");
    s.stop(Stop::Now).await;
}

/// Values that could never reach a task are refused at submission (they were accepted, then
/// failed three times with exit 127 and empty logs): a 1 MB logical date, a NUL or an escape
/// in a name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_that_cannot_reach_a_task_are_refused_at_submission() {
    let dir = common::temp_dir("sec-values");
    let mut c = common::config(&dir);
    c.body_limit = 2 << 20;
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(c, &url).await;
    let (st, e) = s.submit(one_task("w", "root.ads.tier1", "true"), &"x".repeat(1_000_000)).await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("logical_date")), "{e:#}");
    let (st, e) = s.submit(one_task("w", "root.ads.tier1", "true"), "2026-11-24\u{1b}[2J").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("logical_date")), "{e:#}");
    let (st, e) = s.submit(one_task("nul\u{0}name", "root.ads.tier1", "true"), "d").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.name")), "{e:#}");
    let mut wf = one_task("w", "root.ads.tier1", "true");
    wf["jobs"][0]["stages"][0]["env"] = json!({"BIG": "y".repeat(200_000)});
    let (st, e) = s.submit(wf, "d").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("workflow.jobs.j.stages.s.env.BIG")), "{e:#}");
    s.stop(Stop::Now).await;
}

/// An Idempotency-Key reused with another request is refused (422), not answered with the
/// first request's run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_reused_with_another_request_is_422() {
    let Some(mut s) = TestServer::start(Db::Sqlite, "sec-idem").await else { return };
    let post = |date: &str| {
        s.http
            .post(format!("{}/v1/runs", s.base))
            .bearer_auth(&s.token)
            .header("Idempotency-Key", "k-1")
            .json(&json!({"workflow": one_task("w", "root.ads.tier1", "true"), "logical_date": date}))
    };
    let first = post("d1").send().await.expect("send");
    assert_eq!(first.status().as_u16(), 201);
    let first: Value = first.json().await.expect("json");
    let again = post("d1").send().await.expect("send");
    assert_eq!(again.status().as_u16(), 201);
    assert_eq!(again.json::<Value>().await.expect("json")["id"], first["id"], "the same request replays");
    let other = post("d2").send().await.expect("send");
    assert_eq!(other.status().as_u16(), 422);
    let e: Value = other.json().await.expect("json");
    assert_eq!(e["error"]["code"], "idempotency_key_reused", "{e:#}");
    s.stop(Stop::Now).await;
}

/// Every error is the documented JSON (axum's own rejections answered plain text), every
/// response carries `nosniff`, the Bearer scheme is accepted in any case, and an internal
/// error tells the client an incident id, not its details.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_json_responses_nosniff_bearer_any_case_internals_hidden() {
    let Some(mut s) = TestServer::start(Db::Sqlite, "sec-errors").await else { return };
    for (method, path) in
        [(Method::GET, "/v1/runs/not-a-number"), (Method::DELETE, "/v1/queues"), (Method::GET, "/v1/nowhere")]
    {
        let r =
            s.http.request(method.clone(), format!("{}{path}", s.base)).bearer_auth(&s.token).send().await;
        let r = r.expect("send");
        assert!(r.status().is_client_error(), "{path}: {}", r.status());
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        assert!(
            r.headers()["content-type"].to_str().is_ok_and(|c| c.starts_with("application/json")),
            "{path}"
        );
        let e: Value = r.json().await.expect("json");
        assert!(e["error"]["code"].is_string() && e["error"]["message"].is_string(), "{path}: {e:#}");
    }
    let r = s.http.get(format!("{}/healthz", s.base)).send().await.expect("send");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let r = s
            .http
            .get(format!("{}/v1/runs", s.base))
            .header("Authorization", format!("{scheme} {}", s.token))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 200, "{scheme}");
    }
    // An internal error: a registered workflow whose stored text is garbled.
    weir_store::JobStore::put_workflow(&s.store, "ads", "garbled", "{\"name\": oops", 0).await.expect("put");
    let (st, e) =
        s.call(Method::POST, "/v1/runs", Some(json!({"workflow_name": "garbled", "project": "ads"}))).await;
    assert_eq!(st, 500);
    let message = e["error"]["message"].as_str().unwrap_or_default();
    assert!(e["error"]["incident"].as_str().is_some_and(|i| message.contains(i)), "{e:#}");
    assert!(!message.contains("oops") && !message.contains("expected"), "{e:#}");
    s.stop(Stop::Now).await;
}

/// The audit log records who submitted, killed, changed routes and tokens — and who tried and
/// was refused — with the peer address; only admins read it; no secret is in it; failed
/// authentications are counted in /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_changes_and_refusals_without_secrets() {
    for db in dbs() {
        audit_log_on(db).await;
    }
}

async fn audit_log_on(db: Db) {
    let Some(mut s) = TestServer::start(db, "secaudit").await else { return };
    let ads = token(&s, "ads", &[("ads", "submitter")], json!({})).await;
    let (_, c) = submit_as(
        &s,
        &ads,
        json!({"workflow": one_task("w", "root.ads.tier1", "sleep 30"), "logical_date": "d"}),
    )
    .await;
    let id = c["id"].as_i64().expect("id");
    s.call_as(&ads, Method::POST, &format!("/v1/runs/{id}/kill"), None).await;
    let (st, _) = s
        .call_as(
            &ads,
            Method::PUT,
            "/v1/routes/workflow:x",
            Some(json!({"cluster": "default", "queue": "root.ads.tier1"})),
        )
        .await;
    assert_eq!(st, 403);
    s.call(
        Method::PUT,
        "/v1/routes/workflow:x",
        Some(json!({"cluster": "default", "queue": "root.ads.tier1"})),
    )
    .await;
    let (st, _) = s.call_as(&ads, Method::GET, "/v1/audit", None).await;
    assert_eq!(st, 403, "the audit log is for admins");
    let (st, log) = s.call(Method::GET, "/v1/audit", None).await;
    assert_eq!(st, 200, "{log:#}");
    let entries = log["entries"].as_array().expect("entries");
    let has = |action: &str, outcome: &str| {
        entries.iter().any(|e| e["action"] == action && e["outcome"] == outcome && e["client"] == "127.0.0.1")
    };
    assert!(has("token.create", "ok") && has("submit", "created") && has("kill", "ok"), "{log:#}");
    assert!(has("route.put", "denied") && has("route.put", "ok"), "{log:#}");
    // The submission's row (written by the store's trigger, in the run's own statement).
    let submit: Vec<_> = entries.iter().filter(|e| e["action"] == "submit").collect();
    assert_eq!(submit.len(), 1, "{db:?}: one row per submission: {log:#}");
    assert_eq!(submit[0]["target"], format!("run {id}"), "{db:?}");
    assert_eq!(submit[0]["project"], "ads", "{db:?}");
    let detail = submit[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("workflow w logical date d as user ")
            && detail.ends_with(" to default/root.ads.tier1"),
        "{db:?}: {detail}"
    );
    let text = log.to_string();
    assert!(!text.contains(&ads) && !text.contains(&s.token), "no secret in the audit log");
    // Failed authentications are counted.
    for bad in ["weir_nope", "weir_nope2"] {
        s.call_as(bad, Method::GET, "/v1/runs", None).await;
    }
    let (_, m) = s.call(Method::GET, "/metrics", None).await;
    assert!(m.as_str().is_some_and(|m| m.contains("weir_auth_failures_total{reason=\"unknown\"} 2")), "{m}");
    s.stop(Stop::Now).await;
}

/// Queue ACLs in the cluster file are enforced for submissions by user (YARN's rule:
/// `AllocationConfiguration#hasAccess`), and ACLs naming groups, which weir cannot resolve, are
/// refused with their path rather than parsed and ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_acls_are_enforced_by_user_and_group_acls_refused() {
    let dir = common::temp_dir("sec-acl");
    let mut c = common::config(&dir);
    c.clusters[0].yaml = format!(
        "root_acl: {{submit: ' ', administer: ' '}}\n{}",
        common::CLUSTER.replace("  - name: ads\n", "  - name: ads\n    acl: {submit: alice}\n")
    );
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(c, &url).await;
    let alice = token(&s, "alice", &[("ads", "submitter")], json!({"user": "alice"})).await;
    let bob = token(&s, "bob", &[("ads", "submitter")], json!({"user": "bob"})).await;
    let body = |d: &str| json!({"workflow": one_task("w", "root.ads.tier1", "true"), "logical_date": d});
    assert_eq!(submit_as(&s, &alice, body("1")).await.0, 201);
    let (st, e) = submit_as(&s, &bob, body("2")).await;
    assert_eq!(st, 403, "{e:#}");
    assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("ACL")), "{e:#}");
    let grouped =
        common::CLUSTER.replace("  - name: ads\n", "  - name: ads\n    acl: {submit: 'alice admins'}\n");
    let r = s
        .http
        .put(format!("{}/v1/clusters/default/config", s.base))
        .bearer_auth(&s.token)
        .body(grouped)
        .send()
        .await
        .expect("put");
    assert_eq!(r.status().as_u16(), 400);
    let e: Value = r.json().await.expect("json");
    assert_eq!(e["error"]["field"], "queues.ads.acl.submit", "{e:#}");
    s.stop(Stop::Now).await;
}

/// A run of 100,000 tasks is read a page at a time: `GET /v1/runs/{id}` carries every job's
/// counts by state and 1,000 tasks with the cursor to the next page, and the run page shows
/// one page of its table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_100000_tasks_is_summarized_and_paginated() {
    let Some(mut s) = TestServer::start(Db::Sqlite, "sec-big").await else { return };
    let mut wf = one_task("wide", "root.ads.tier1", "sleep 60");
    wf["jobs"][0]["stages"][0]["tasks"] = json!(100_000);
    wf["jobs"][0]["stages"][0]["resources"] = json!({"cpu": 8000, "memory": 512});
    let (st, c) = s.submit(wf, "d").await;
    assert_eq!(st, 201, "{c:#}");
    let id = c["id"].as_i64().expect("id");
    let run = s.wait_until(id, LONG, "the run to be routed", |r| r["tasks_total"] == 100_000).await;
    let tasks = run["jobs"][0]["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 1000);
    let counts: u64 =
        run["jobs"][0]["task_counts"].as_object().expect("counts").values().filter_map(Value::as_u64).sum();
    assert_eq!(counts, 100_000, "{:#}", run["jobs"][0]["task_counts"]);
    let next = run["next_tasks_after"].as_str().expect("a next page").to_string();
    let (st, page) =
        s.call(Method::GET, &format!("/v1/runs/{id}?tasks_after={next}&tasks_limit=10"), None).await;
    assert_eq!(st, 200);
    let indexes: Vec<u64> = page["jobs"][0]["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["index"].as_u64())
        .collect();
    assert_eq!(indexes, (1000..1010).collect::<Vec<u64>>());
    let (st, e) = s.call(Method::GET, &format!("/v1/runs/{id}?tasks_after=garbage"), None).await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("tasks_after")));
    // The dashboard's run page: one page of the table, and the count of all.
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let login = common::dashboard_login(&http, &s.base, &s.token).await;
    let cookie = common::session_cookie(&login);
    let page =
        s.http.get(format!("{}/runs/{id}", s.base)).header("cookie", cookie).send().await.expect("page");
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.expect("html");
    assert!(
        html.contains("500 of 100000 tasks on this page") && html.contains("id=\"tasks-next\""),
        "{}",
        &html[html.find("<h2>Tasks").unwrap_or(0)..][..600.min(html.len())]
    );
    assert_eq!(html.matches("<tr data-task=").count(), 500);
    s.call(Method::POST, &format!("/v1/runs/{id}/kill"), None).await;
    s.wait(id, LONG).await;
    s.stop(Stop::Now).await;
}
