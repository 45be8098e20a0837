//! The balancing advisor as a server job, against a real `weir serve` with two clusters of
//! different shapes (each running the other's kind of work) and a real headless Chromium:
//! - the server file's `advise:` schedule makes an advice at start (none stored yet), shown by
//!   `GET /v1/advice`;
//! - after the runs, `POST /v1/advice` advises moving both workflows; the one the server file
//!   routes is flagged so (its move is refused with 409: the file's routes win), the other is
//!   movable; a dry-run of it on the target shows beside the move;
//! - on the dashboard's Advice page the file-routed workflow has a note and no button, a
//!   forged form is refused, and one click moves the other workflow: its next run lands on the
//!   new cluster, and the audit log has the change with the route it replaced.

mod common;

use common::{api, client_in_data as client, ok, Serve};
#[path = "../../weir-server/tests/common/webdriver.rs"]
mod webdriver;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn eventually(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(180) {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            panic!("timed out waiting for {what}; the server said:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn runs(dir: &Path, port: u16) -> Vec<Value> {
    let out = client(dir, port, &["runs", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["runs"].as_array().cloned().or_else(|| v.as_array().cloned()))
        .unwrap_or_default()
}

/// A workflow of one stage of `tasks` tasks of `cpu` millicores and `memory`, each `sleep 2`.
fn workflow(name: &str, tasks: u32, cpu: u32, memory: &str) -> String {
    format!(
        "version: 1\nworkflows:\n  - name: {name}\n    queue: root.analytics.tier1\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: {tasks}, resources: {{cpu: {cpu}, memory: {memory}}}, command: 'sleep 2'}}\n"
    )
}

/// A blocking call of the API with the admin token: (status, JSON body).
fn move_of<'a>(report: &'a Value, workflow: &str, to: &str) -> Option<&'a Value> {
    report["moves"].as_array()?.iter().find(|m| m["workflow"] == workflow && m["to"] == to)
}

#[test]
fn the_advisor_runs_on_schedule_and_one_click_moves_a_workflow() {
    weir_server::install_crypto_provider();
    let scratch = common::Scratch::new("serve-advise-job");
    let dir = scratch.0.clone();
    let port = common::free_port();
    let ws = common::workspace();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    for f in ["cpu-rich.yaml", "mem-rich.yaml"] {
        std::fs::copy(ws.join("examples/advise").join(f), dir.join("clusters").join(f)).expect("copy");
    }
    // feature-compute is routed by the server file (which wins over `weir routes set`), so
    // its advised move is a file edit; sessions-etl is routed through the API.
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1
listen: 127.0.0.1:{port}
data_dir: data
clusters:
  - {{name: cpu, file: clusters/cpu-rich.yaml}}
  - {{name: mem, file: clusters/mem-rich.yaml}}
routes:
  - key: workflow:feature-compute
    candidates: [{{cluster: mem, queue: root.analytics.tier1}}]
advise: {{every: 1d, window: 1h}}
"
        ),
    );
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config", "server.yaml", "--single-tenant"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    eventually(&dir, "the server", || client(&dir, port, &["routes", "list"]).status.success());
    let token =
        std::fs::read_to_string(dir.join("data/admin.token")).expect("admin token").trim().to_string();

    // The schedule's first advice, made at start (no advice was stored): nothing ran yet, so
    // nothing is advised.
    let mut scheduled = Value::Null;
    eventually(&dir, "the scheduled advice", || {
        let (status, body) = api(port, &token, "GET", "/v1/advice");
        scheduled = body;
        status == 200
    });
    assert_eq!(scheduled["trigger"], "schedule", "{scheduled}");
    assert_eq!(scheduled["moves"], json!([]), "{scheduled}");
    assert_eq!(scheduled["window_ms"], 3_600_000);

    ok(&client(
        &dir,
        port,
        &["routes", "set", "workflow:sessions-etl", "--cluster", "cpu", "--queue", "root.analytics.tier1"],
    ));
    // 16 GiB-per-core work on the compute cluster, 1 GiB-per-core work on the memory cluster.
    let etl = scratch.file("etl.yaml", &workflow("sessions-etl", 30, 1000, "15g"));
    let features = scratch.file("features.yaml", &workflow("feature-compute", 16, 4000, "4g"));
    for d in ["d0", "d1"] {
        ok(&client(&dir, port, &["submit", &etl, "--logical-date", d]));
        ok(&client(&dir, port, &["submit", &features, "--logical-date", d]));
    }
    eventually(&dir, "the four runs to succeed", || {
        let r = runs(&dir, port);
        r.len() == 4 && r.iter().all(|r| r["state"] == "succeeded")
    });

    // Advise now: both workflows are advised to move.
    let (status, report) = api(port, &token, "POST", "/v1/advice");
    assert_eq!(status, 200, "{report}");
    assert_ne!(report["id"], scheduled["id"]);
    let etl_move = move_of(&report, "sessions-etl", "mem").unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(
        (&etl_move["in_server_file"], &etl_move["done"], &etl_move["routed_now"]),
        (&json!(false), &json!(false), &json!("cpu/root.analytics.tier1")),
        "{etl_move}"
    );
    assert_eq!(etl_move["queue"], "root.analytics.tier1");
    let features_move = move_of(&report, "feature-compute", "cpu").unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(features_move["in_server_file"], true, "{features_move}");
    // The figures behind it: the simulated before/after of every cluster.
    let before = report["advice"]["before"].as_array().expect("before");
    assert_eq!(before.len(), 2, "{report}");
    // The file-routed workflow's move is refused: a route set through the API would do nothing.
    let (status, body) = api(port, &token, "POST", "/v1/advice/moves/feature-compute?to=cpu");
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or("").contains("editing that file"), "{body}");

    // A dry-run of sessions-etl on the memory cluster, shown beside its move.
    ok(&client(&dir, port, &["submit", &etl, "--logical-date", "d1", "--dry-run", "--cluster", "mem"]));
    let mut dry = Value::Null;
    eventually(&dir, "the dry-run's verdict beside the move", || {
        let (_, r) = api(port, &token, "GET", "/v1/advice");
        dry = move_of(&r, "sessions-etl", "mem").map(|m| m["dry_run"].clone()).unwrap_or_default();
        dry.is_object()
    });
    let dry_run_id = dry["run_id"].as_i64().expect("the dry-run's id");

    if !webdriver::available() {
        assert!(
            std::env::var_os("WEIR_REQUIRE_BROWSER").is_none(),
            "WEIR_REQUIRE_BROWSER is set but {} or {} is missing",
            webdriver::CHROMIUM,
            webdriver::CHROMEDRIVER
        );
        eprintln!("\n*** SKIPPED the dashboard part: install Debian's chromium and chromium-driver ***\n");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    rt.block_on(async {
        let base = format!("http://127.0.0.1:{port}");
        let driver = webdriver::Driver::start(&dir.join("chromedriver.log")).await;
        let s = driver.session(&dir.join("chromium-profile")).await;
        let long = Duration::from_secs(60);
        s.goto(&format!("{base}/advice")).await;
        let field = s.wait_for("#token", long).await;
        s.type_into(&field, &token).await;
        s.click(&s.wait_for("#login", long).await).await;
        s.wait_for("#runs-by-state", long).await;
        s.goto(&format!("{base}/advice")).await;
        s.wait_for("#moves", long).await;
        // The file-routed workflow: a note, no button.
        let action = |wf: &str, to: &str| {
            format!("return (document.querySelector('tr[data-workflow=\"{wf}\"][data-to=\"{to}\"] td.action') || {{}}).textContent")
        };
        let note = s.script(&action("feature-compute", "cpu")).await;
        assert!(note.as_str().is_some_and(|t| t.contains("The server file routes this workflow")), "{note}");
        let buttons =
            s.script("return document.querySelectorAll('tr[data-workflow=\"feature-compute\"] button').length").await;
        assert_eq!(buttons, json!(0));
        // The dry-run beside the move links its run.
        let cell = s
            .script("return document.querySelector('tr[data-workflow=\"sessions-etl\"][data-to=\"mem\"] td.dry-run').textContent")
            .await;
        assert!(cell.as_str().is_some_and(|t| t.contains(&format!("run {dry_run_id}"))), "{cell}");
        webdriver_shot(&s, "advice").await;
        // A form without the dashboard's token changes nothing, though the session cookie goes along.
        let forged = s
            .script(
                "return fetch('/advice/move', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, \
                 body: 'csrf=forged&workflow=sessions-etl&to=mem'}).then(r => r.status)",
            )
            .await;
        assert_eq!(forged, json!(403));
        // The browser logs the refusal; that entry is the only one (the log is read once).
        let logged = s.console().await;
        assert!(logged.iter().all(|e| e["message"].as_str().is_some_and(|m| m.contains("/advice/move") && m.contains("403"))), "{logged:#?}");
        // One click.
        s.click(&s.wait_for("tr[data-workflow=\"sessions-etl\"][data-to=\"mem\"] button", long).await).await;
        let said = s
            .wait_until(
                "the move's message",
                "return (document.querySelector('#message') || {}).textContent",
                long,
                |v| v.as_str().is_some_and(|t| t.contains("now goes to")),
            )
            .await;
        assert!(
            said.as_str().is_some_and(|t| t.contains("workflow:sessions-etl now goes to mem:root.analytics.tier1")
                && t.contains("route it back to cpu/root.analytics.tier1")),
            "{said}"
        );
        let after = s.script(&action("sessions-etl", "mem")).await;
        assert!(after.as_str().is_some_and(|t| t.contains("Moved")), "{after}");
        webdriver_shot(&s, "advice-moved").await;
    });

    // The next run goes to the memory cluster; the change is audited with what it replaced.
    ok(&client(&dir, port, &["submit", &etl, "--logical-date", "d2"]));
    let next = runs(&dir, port)
        .into_iter()
        .find(|r| r["logical_date"] == "d2" && r["dry_run"] != true)
        .expect("the next run");
    assert_eq!(next["cluster"], "mem", "{next}");
    let (_, audit) = api(port, &token, "GET", "/v1/audit?action=route.put");
    let entries = audit["entries"].as_array().cloned().unwrap_or_default();
    assert!(
        entries.iter().any(|e| e["target"] == "route workflow:sessions-etl"
            && e["detail"].as_str().is_some_and(
                |d| d.contains("(dashboard, advice") && d.contains("was cpu/root.analytics.tier1")
            )),
        "{audit:#}"
    );
}

async fn webdriver_shot(s: &webdriver::Session, name: &str) {
    s.screenshot(&webdriver::screenshot_dir().join(format!("{name}.png"))).await;
    let errors: Vec<Value> = s.console().await.into_iter().filter(|e| e["level"] == "SEVERE").collect();
    assert!(errors.is_empty(), "the {name} page logged console errors: {errors:#?}");
}
