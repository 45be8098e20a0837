//! Nodes and their allocation: `GET /v1/nodes` and the dashboard's Nodes page show what the
//! engine holds on each node while a task runs and give it back when the task ends; a viewer of
//! one project is refused (nodes are shared by all projects).

mod common;
#[path = "common/webdriver.rs"]
mod webdriver;

use std::time::{Duration, Instant};

use common::{one_task, temp_dir, Db, TestServer};
use reqwest::Method;
use serde_json::{json, Value};
use webdriver::{screenshot_dir, Driver};

/// Poll `/v1/nodes` until the only node of `default` satisfies `f`; return that node.
async fn node_until(s: &TestServer, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let (status, body) = s.call(Method::GET, "/v1/nodes", None).await;
        assert_eq!(status, 200, "{body}");
        let node = &body["clusters"][0]["nodes"][0];
        if f(node) {
            return node.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{what} did not happen: {body:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_task_is_held_on_its_node_and_given_back() {
    let s = TestServer::start(Db::Sqlite, "nodes-api").await.expect("sqlite");
    // The test cluster `default`: one node of 8 cores and 16 GiB.
    let idle = node_until(&s, "a published snapshot", |n| n["id"].is_string()).await;
    assert_eq!(idle["capacity"], json!({"cpu": 8000, "memory": 16384, "gpu": 0}));

    let (status, created) = s.submit(one_task("hold", "root.ads.tier1", "sleep 5"), "d1").await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    let busy = node_until(&s, "the task to be placed", |n| n["containers"] == 1).await;
    // one_task asks 1 core and 512 MiB.
    assert_eq!(busy["used"], json!({"cpu": 1000, "memory": 512, "gpu": 0}), "{busy:#}");
    assert_eq!(busy["free"], json!({"cpu": 7000, "memory": 16384 - 512, "gpu": 0}), "{busy:#}");
    assert_eq!(busy["state"], "running");

    // The same snapshot reaches the store while the actor runs (what another server process,
    // /metrics and routing read): its nodes part shows the task held.
    let start = Instant::now();
    loop {
        let rows = weir_store::JobStore::snapshots(&s.store).await.expect("snapshots");
        let body: Value = rows
            .iter()
            .find(|r| r.cluster == "default")
            .map_or(Value::Null, |r| serde_json::from_str(&r.body).expect("a stored snapshot parses"));
        if body["nodes"][0]["containers"] == 1 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no stored snapshot with the task: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let run = s.wait(id, Duration::from_secs(60)).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    let after = node_until(&s, "the task's resources to come back", |n| n["containers"] == 0).await;
    assert_eq!(after["used"], json!({"cpu": 0, "memory": 0, "gpu": 0}), "{after:#}");
    assert_eq!(after["free"], after["capacity"]);

    // One cluster asked by name; an unknown one is named in the error.
    let (status, one) = s.call(Method::GET, "/v1/nodes?cluster=default", None).await;
    assert_eq!((status, one["clusters"].as_array().map(Vec::len)), (200, Some(1)), "{one}");
    let (status, none) = s.call(Method::GET, "/v1/nodes?cluster=nope", None).await;
    assert_eq!(status, 404, "{none}");
    assert!(none["error"]["message"].as_str().is_some_and(|m| m.contains("nope")), "{none}");

    // A viewer of one project cannot read nodes, in the API or the dashboard.
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "ads", "grants": [{"project": "ads", "role": "viewer"}]})),
        )
        .await;
    let viewer = t["token"].as_str().expect("token").to_string();
    let (status, refused) = s.call_as(&viewer, Method::GET, "/v1/nodes", None).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("`*`")), "{refused}");
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let login = common::dashboard_login(&http, &s.base, &viewer).await;
    let cookie = common::session_cookie(&login);
    let page = http.get(format!("{}/nodes", s.base)).header("cookie", cookie).send().await.expect("page");
    assert_eq!(page.status().as_u16(), 403);
    let text = page.text().await.unwrap_or_default();
    assert!(!text.contains("data-node="), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_nodes_page_in_a_real_browser() {
    if !webdriver::available() {
        assert!(
            std::env::var_os("WEIR_REQUIRE_BROWSER").is_none(),
            "WEIR_REQUIRE_BROWSER is set but the browser is missing"
        );
        eprintln!(
            "\n*** SKIPPED the nodes browser test: install Debian's chromium and chromium-driver ***\n"
        );
        return;
    }
    let dir = temp_dir("browser-nodes");
    let url = common::db_url(Db::Sqlite, &dir, "browser-nodes").await.expect("sqlite");
    let s = TestServer::start_with(common::config(&dir), &url).await;
    let base = s.base.clone();
    let driver = Driver::start(&dir.join("chromedriver.log")).await;
    let b = driver.session(&dir.join("chromium-profile")).await;
    let long = Duration::from_secs(60);

    b.goto(&format!("{base}/nodes")).await;
    let field = b.wait_for("#token", long).await;
    b.type_into(&field, &s.token).await;
    b.click(&b.wait_for("#login", long).await).await;
    b.wait_for("#runs-by-state", long).await;

    let (status, created) = s.submit(one_task("hold", "root.ads.tier1", "sleep 6"), "d1").await;
    assert_eq!(status, 201, "{created}");
    b.goto(&format!("{base}/nodes")).await;
    // The page refreshes itself: the node shows the running task and 7 free cores.
    let row = "return (document.querySelector('tr.node') || {dataset: {}}).dataset.containers";
    b.wait_until("the node to show a running task", row, long, |v| v == "1").await;
    let free = "return document.querySelector('tr.node td.cores-free').textContent";
    b.wait_until("7 free cores", free, long, |v| v == "7").await;
    b.screenshot(&screenshot_dir().join("nodes.png")).await;
    let errors: Vec<Value> = b.console().await.into_iter().filter(|e| e["level"] == "SEVERE").collect();
    assert!(errors.is_empty(), "the nodes page logged console errors: {errors:#?}");
}
