//! Deadline guarantees live (issue 23): a real `weir serve` runs a workflow with
//! `guarantee: jockey` beside a background load that holds every slot, and its plain twin (the
//! same tasks, no guarantee) beside the same load. The guarded run's profile comes from the
//! workflow's three earlier runs recorded by this server; its tasks are slowed by an injected
//! factor (3: `sleep 3` where its history ran `sleep 1`). The controller sets the run's
//! guarantee in the engine, which preempts background containers for it (the SLO queue has no
//! fair-share preemption, so nothing else would): it meets the deadline its plain twin misses,
//! waiting behind the background's minute-long tasks. The allocations it chose are in the
//! run's API JSON and on its page.

mod common;

use common::{client_of as client, Serve};
#[path = "../../weir-server/tests/common/webdriver.rs"]
mod webdriver;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `weir serve` on `port` with its data in `dir` (weir-data), logging to serve.log (appended:
/// a restarted server's lines follow its predecessor's).
fn serve(dir: &Path, port: u16, cluster: &str) -> Serve {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("serve.log")).expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--kill-grace", "1", "--cluster", cluster])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("weir serve");
    let serve = Serve(child);
    wait_for(dir, "the server answering", Duration::from_secs(60), || {
        client(dir, port, &["runs", "--json"]).status.success().then_some(Value::Null).ok_or_else(String::new)
    });
    serve
}

/// One slot per task: 8 cores and 16 GiB, tasks of 1 core and 2 GiB (memory is what the fair
/// policy compares, so it must be what the tasks fill). The SLO queue weighs three times the background's, and only
/// the guarantee's preemption is on (no queue has a fair-share or min-share timeout).
const CLUSTER: &str = "version: 1
scheduler: {preemption: {enabled: true, kill_wait: 1s}}
nodes:
  - count: 1
    resources: {cpu: 8000, memory: 16g}
queues:
  - {name: slo, tier: 1, weight: 3}
  - {name: batch, tier: 3, weight: 1}
";

/// The SLO workflow: 16 one-core tasks of `sleep SECS`, deadline 40 s.
fn slo_workflow(name: &str, secs: u32, guarantee: bool) -> String {
    slo_workflow_of(name, 16, secs, 40, guarantee)
}

/// An SLO workflow of `tasks` one-core tasks of `sleep SECS`, deadline `deadline` seconds.
fn slo_workflow_of(name: &str, tasks: u32, secs: u32, deadline: u32, guarantee: bool) -> String {
    let g = if guarantee { "\n    guarantee: jockey" } else { "" };
    format!(
        "version: 1
workflows:
  - name: {name}
    queue: root.slo
    slo: {deadline}s{g}
    jobs:
      - name: work
        stages:
          - {{name: shards, tasks: {tasks}, resources: {{cpu: 1000, memory: 2g}}, command: 'sleep {secs}'}}
"
    )
}

/// The background: 8 one-core tasks of 90 s, every slot of the cluster.
const BACKGROUND: &str = "version: 1
workflows:
  - name: backfill
    queue: root.batch
    jobs:
      - name: fill
        stages:
          - {name: hold, tasks: 8, resources: {cpu: 1000, memory: 2g}, command: 'sleep 90'}
";

fn submit(dir: &Path, port: u16, file: &str, date: &str) -> i64 {
    submit_with(dir, port, &["submit", file, "--logical-date", date]).0
}

/// The run id and the whole output.
fn submit_with(dir: &Path, port: u16, args: &[&str]) -> (i64, String) {
    let out = client(dir, port, args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    // `run N of WORKFLOW (DATE) queued on …`
    let text = common::text(&out.stdout);
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("run ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no run id: {text}"));
    (id, text)
}

fn run(dir: &Path, port: u16, id: i64) -> Value {
    let out = client(dir, port, &["status", &id.to_string(), "--json"]);
    assert!(out.status.success(), "status {id}: {out:?}");
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Polls `done` until it gives a value; on timeout, fails with what it last said and the log.
fn wait_for(
    dir: &Path,
    what: &str,
    limit: Duration,
    mut done: impl FnMut() -> Result<Value, String>,
) -> Value {
    let start = Instant::now();
    loop {
        let last = match done() {
            Ok(v) => return v,
            Err(last) => last,
        };
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        assert!(start.elapsed() < limit, "{what} did not happen; last: {last}\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ended(v: &Value) -> bool {
    matches!(v["state"].as_str(), Some("succeeded" | "failed" | "killed"))
}

/// The run once it has ended.
fn done(v: Value) -> Result<Value, String> {
    if ended(&v) {
        Ok(v)
    } else {
        Err(v.to_string())
    }
}

/// Submission to end, in ms, of an ended run.
fn took(v: &Value) -> i64 {
    v["finished_ms"].as_i64().expect("finished") - v["submitted_ms"].as_i64().expect("submitted")
}

#[test]
fn a_guaranteed_run_meets_the_deadline_its_fair_share_twin_misses() {
    let scratch = common::Scratch::new("serve-jockey");
    let dir = scratch.0.clone();
    common::open_to_tasks(&dir);
    let cluster = scratch.file("cluster.yaml", CLUSTER);
    let history = scratch.file("history.yaml", &slo_workflow("nightly", 1, true));
    let slowed = scratch.file("slowed.yaml", &slo_workflow("nightly", 3, true));
    let twin = scratch.file("twin.yaml", &slo_workflow("nightly-plain", 3, false));
    let background = scratch.file("background.yaml", BACKGROUND);
    let port = common::free_port();
    let _serve = serve(&dir, port, &cluster);

    // History: three runs of the workflow alone, as it usually runs (1 s tasks).
    let mut first = None;
    for day in 1..=3 {
        let id = submit(&dir, port, &history, &format!("2026-11-0{day}"));
        let v = wait_for(&dir, "a history run ending", Duration::from_secs(60), || done(run(&dir, port, id)));
        assert_eq!(v["state"], "succeeded", "{v}");
        first.get_or_insert(v);
    }
    // The first had no history: it fell back to its tier's rules, and says so.
    let first = first.expect("first run");
    let fallback = &first["jobs"][0]["guarantee"];
    assert_eq!(fallback.as_array().map(Vec::len), Some(1), "{first}");
    assert_eq!(fallback[0]["allocation"], 0, "{first}");
    let why = fallback[0]["reason"].as_str().unwrap_or_default();
    assert!(why.starts_with("fallback: 0 earlier successful run(s) of nightly"), "{why}");

    // The admission check before submitting: a deadline of 1 s cannot be met at any
    // allocation (one task alone takes a second): refused, nothing submitted.
    let tight = scratch.file("tight.yaml", &slo_workflow("nightly", 1, true).replace("slo: 40s", "slo: 1s"));
    let out = client(&dir, port, &["submit", &tight, "--check-slo", "--logical-date", "2026-11-09"]);
    let said = common::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(said.contains("SLO check: nightly on ") && said.contains("does not fit"), "{said}");
    assert!(said.contains("cannot meet its deadline"), "{said}");
    assert!(said.contains("nothing submitted"), "{said}");
    let all: Value = serde_json::from_slice(&client(&dir, port, &["runs", "--json"]).stdout).expect("json");
    assert_eq!(all["runs"].as_array().map(Vec::len), Some(3), "{all}");

    // Plain fair share: the background holds every slot for 90 s, the twin waits behind it.
    let fill = submit(&dir, port, &background, "2026-11-10");
    let busy = |dir: &Path, fill: i64| {
        wait_for(dir, "the background holding every slot", Duration::from_secs(60), || {
            let v = run(dir, port, fill);
            if v["jobs"][0]["task_counts"]["running"].as_u64() == Some(8) {
                Ok(v)
            } else {
                Err(v.to_string())
            }
        })
    };
    busy(&dir, fill);
    let plain = submit(&dir, port, &twin, "2026-11-10");
    // The twin's deadline passes with it still waiting or running (40 s after submission).
    let missed = wait_for(&dir, "the plain twin passing its deadline", Duration::from_secs(120), || {
        let v = run(&dir, port, plain);
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis()
                as i64;
        let late = now - v["submitted_ms"].as_i64().unwrap_or(now) > 40_000;
        if ended(&v) || late {
            Ok(v)
        } else {
            Err(v.to_string())
        }
    });
    assert!(!ended(&missed) || took(&missed) > 40_000, "plain fair share met the deadline: {missed}");
    assert!(missed["jobs"][0]["guarantee"].as_array().is_none_or(Vec::is_empty), "{missed}");
    // Clear the cluster for the guarded run's turn.
    for id in [plain, fill] {
        assert!(client(&dir, port, &["kill", &id.to_string()]).status.success());
    }
    for id in [plain, fill] {
        wait_for(&dir, "a kill", Duration::from_secs(60), || done(run(&dir, port, id)));
    }

    // The same load, the slowed run under the controller.
    let fill = submit(&dir, port, &background, "2026-11-11");
    busy(&dir, fill);
    // Checked first: its model fits in the cluster's 8 containers (no other guarded run).
    let (guarded, said) =
        submit_with(&dir, port, &["submit", &slowed, "--check-slo", "--logical-date", "2026-11-11"]);
    assert!(said.contains("SLO check: nightly on ") && said.contains(": fits: nightly needs "), "{said}");
    assert!(said.contains("of 8 are free beside 0 admitted job(s)"), "{said}");
    let v =
        wait_for(&dir, "the guarded run ending", Duration::from_secs(120), || done(run(&dir, port, guarded)));
    assert_eq!(v["state"], "succeeded", "{v}");
    assert!(took(&v) <= 40_000, "the guarded run missed its deadline: {} ms\n{v}", took(&v));
    let decisions = v["jobs"][0]["guarantee"].as_array().expect("decisions").clone();
    assert!(!decisions.is_empty(), "{v}");
    assert_eq!(decisions[0]["reason"], "first decision", "{v}");
    for d in &decisions {
        let a = d["allocation"].as_u64().expect("allocation");
        // Never none, never more than the job's 16 tasks.
        assert!((1..=16).contains(&a), "{d}");
        assert_eq!(d["deadline_ms"], 40_000, "{d}");
        assert!(d["predicted_ms"].as_i64().expect("predicted") > 0, "{d}");
    }
    // The slowed tasks showed: the run was re-estimated slower than its profile and its
    // allocation raised above the first one.
    assert!(decisions.iter().any(|d| d["speed"].as_f64().unwrap_or(0.0) > 1.2), "{decisions:?}");
    let first_a = decisions[0]["allocation"].as_u64().expect("allocation");
    assert!(
        decisions.iter().any(|d| d["reason"] == "behind: raised" && d["allocation"].as_u64() > Some(first_a)),
        "{decisions:?}"
    );
    // Its containers came from the background by preemption for the guarantee: background
    // tasks were started again.
    let fill_v = run(&dir, port, fill);
    let tasks = fill_v["jobs"][0]["tasks"].as_array().expect("tasks");
    assert!(
        tasks.iter().any(|t| t["attempts"].as_u64() >= Some(2)),
        "no background task was preempted: {fill_v}"
    );

    // `weir status` lists them.
    let status = common::text(&client(&dir, port, &["status", &guarded.to_string()]).stdout);
    assert!(status.contains("deadline guarantee (jockey), the controller's allocations:"), "{status}");
    assert!(status.contains("container(s)") && status.contains(": behind: raised"), "{status}");

    // The run's page shows the allocation over time against progress and the deadline.
    let html = page(&dir, port, &format!("/runs/{guarded}"));
    assert!(html.contains("<h2>Deadline guarantee</h2>"), "{html}");
    assert!(html.contains("class=\"allocation\"") && html.contains("class=\"deadline\""), "{html}");
    assert!(html.contains("<td>behind: raised</td>"), "{html}");
    // And a real browser draws it: the chart is there with a size, its allocation line has
    // points and its progress dots are drawn.
    run_page_in_a_browser(&dir, port, guarded);

    // The background's tasks are not left running after the server.
    assert!(client(&dir, port, &["kill", &fill.to_string()]).status.success());
    wait_for(&dir, "the background's kill", Duration::from_secs(60), || done(run(&dir, port, fill)));
}

/// The run's page in headless Chromium, signed in with the admin token: the deadline
/// guarantee's chart (an SVG) is rendered with a non-empty box, its allocation step line has
/// points (path segments and a drawn length) and its progress dots are there; a screenshot
/// goes to target/screenshots/run-guarantee.png. Skipped (said so) without Chromium, unless
/// WEIR_REQUIRE_BROWSER is set.
fn run_page_in_a_browser(dir: &Path, port: u16, run: i64) {
    if !webdriver::available() {
        assert!(
            std::env::var_os("WEIR_REQUIRE_BROWSER").is_none(),
            "WEIR_REQUIRE_BROWSER is set but {} or {} is missing",
            webdriver::CHROMIUM,
            webdriver::CHROMEDRIVER
        );
        eprintln!("\n*** SKIPPED the browser part: install Debian's chromium and chromium-driver ***\n");
        return;
    }
    let token = std::fs::read_to_string(dir.join("weir-data/admin.token")).expect("admin token");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
    rt.block_on(async {
        let base = format!("http://127.0.0.1:{port}");
        let driver = webdriver::Driver::start(&dir.join("chromedriver.log")).await;
        let s = driver.session(&dir.join("chromium-profile")).await;
        let long = Duration::from_secs(60);
        s.goto(&format!("{base}/runs/{run}")).await;
        let field = s.wait_for("#token", long).await;
        s.type_into(&field, token.trim()).await;
        s.click(&s.wait_for("#login", long).await).await;
        s.wait_for("#runs-by-state", long).await;
        s.goto(&format!("{base}/runs/{run}")).await;
        s.wait_for("svg.guarantee-chart", long).await;
        let drawn = s
            .script(
                "const svg = document.querySelector('svg.guarantee-chart');
                 const box = svg.getBoundingClientRect();
                 const line = svg.querySelector('path.allocation');
                 const points = line ? (line.getAttribute('d').match(/[ML]/g) || []).length : 0;
                 return {width: box.width, height: box.height, points: points,
                         length: line ? line.getTotalLength() : 0,
                         dots: svg.querySelectorAll('circle.progress').length,
                         deadline: svg.querySelectorAll('line.deadline').length};",
            )
            .await;
        assert!(drawn["width"].as_f64().is_some_and(|w| w > 100.0), "{drawn}");
        assert!(drawn["height"].as_f64().is_some_and(|h| h > 50.0), "{drawn}");
        assert!(drawn["points"].as_u64().is_some_and(|p| p > 0), "{drawn}");
        assert!(drawn["length"].as_f64().is_some_and(|l| l > 0.0), "{drawn}");
        assert!(drawn["dots"].as_u64().is_some_and(|d| d > 0), "{drawn}");
        assert_eq!(drawn["deadline"], 1, "{drawn}");
        // The deadline's label is drawn inside the chart (it once ran past its right edge).
        let label = s
            .script(
                "const svg = document.querySelector('svg.guarantee-chart');
                 const t = [...svg.querySelectorAll('text')].find(t => t.textContent === 'deadline');
                 const b = t.getBoundingClientRect(), box = svg.getBoundingClientRect();
                 return b.right <= box.right + 0.5 && b.left >= box.left;",
            )
            .await;
        assert_eq!(label, Value::Bool(true), "the deadline's label is cut by the chart's edge");
        s.screenshot(&webdriver::screenshot_dir().join("run-guarantee.png")).await;
        let errors: Vec<Value> = s.console().await.into_iter().filter(|e| e["level"] == "SEVERE").collect();
        assert!(errors.is_empty(), "the run page logged console errors: {errors:#?}");
        s.close().await;
    });
}

/// The dashboard page at `path`, signed in with the admin token as a browser does (the login
/// page's nonce, the login's session cookie).
fn page(dir: &Path, port: u16, path: &str) -> String {
    weir_server::install_crypto_provider();
    let token = std::fs::read_to_string(dir.join("weir-data/admin.token")).expect("admin token");
    let base = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let http =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        let form = http.get(format!("{base}/login")).send().await.expect("login page");
        let nonce_cookie = form
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|c| c.split(';').next())
            .expect("a nonce cookie")
            .to_string();
        let html = form.text().await.expect("login html");
        let at = html.find("name=\"nonce\" value=\"").expect("a nonce") + "name=\"nonce\" value=\"".len();
        let nonce = html[at..at + 64].to_string();
        let token: String = token
            .trim()
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let login = http
            .post(format!("{base}/login"))
            .header("cookie", nonce_cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}&nonce={nonce}"))
            .send()
            .await
            .expect("login");
        let session = login
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with("weir_session="))
            .and_then(|c| c.split(';').next())
            .map(str::to_string)
            .expect("a session cookie");
        let r = http.get(format!("{base}{path}")).header("cookie", session).send().await.expect("page");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.text().await.expect("page html")
    })
}

/// Across a restart (kill -9, then `weir serve` again on the same data): a guarded run's
/// controller carries on from the model stored with the run (schema 20), the durations its
/// completed tasks measured (read back from the store: the run is still known to be slower
/// than its history) and the allocation it last chose — a `resumed:` decision says so — and
/// is not started over (one first decision). The run finishes in time.
#[test]
fn a_restarted_server_resumes_a_guarded_runs_controller_from_the_store() {
    let scratch = common::Scratch::new("serve-jockey-restart");
    let dir = scratch.0.clone();
    common::open_to_tasks(&dir);
    let cluster = scratch.file("cluster.yaml", CLUSTER);
    let history = scratch.file("history.yaml", &slo_workflow_of("nightly", 40, 1, 90, true));
    let slowed = scratch.file("slowed.yaml", &slo_workflow_of("nightly", 40, 4, 90, true));
    let port = common::free_port();
    let mut server = serve(&dir, port, &cluster);
    for day in 1..=3 {
        let id = submit(&dir, port, &history, &format!("2026-11-0{day}"));
        let v = wait_for(&dir, "a history run ending", Duration::from_secs(60), || done(run(&dir, port, id)));
        assert_eq!(v["state"], "succeeded", "{v}");
    }
    // 40 tasks of 4 s on 8 slots: five waves. After the first, its tasks show it slower.
    let guarded = submit(&dir, port, &slowed, "2026-11-04");
    let before = wait_for(&dir, "a decision re-estimating the run slower", Duration::from_secs(60), || {
        let v = run(&dir, port, guarded);
        let d = v["jobs"][0]["guarantee"].as_array().cloned().unwrap_or_default();
        if d.iter().any(|d| d["speed"].as_f64().unwrap_or(0.0) > 1.2) && !ended(&v) {
            Ok(Value::Array(d))
        } else {
            Err(v.to_string())
        }
    });
    drop(server);
    server = serve(&dir, port, &cluster);
    let v = wait_for(&dir, "the guarded run ending after the restart", Duration::from_secs(120), || {
        done(run(&dir, port, guarded))
    });
    assert_eq!(v["state"], "succeeded", "{v}");
    let decisions = v["jobs"][0]["guarantee"].as_array().expect("decisions").clone();
    let reasons: Vec<&str> = decisions.iter().filter_map(|d| d["reason"].as_str()).collect();
    assert_eq!(reasons.iter().filter(|r| **r == "first decision").count(), 1, "{reasons:?}");
    let at = reasons.iter().position(|r| r.starts_with("resumed: the model stored at +")).expect("resumed");
    let resumed = &decisions[at];
    assert!(reasons[at].contains("(3 earlier runs)"), "{resumed}");
    // Resumed at the allocation it had, already knowing the run slower than its profile:
    // the measured durations came back from the store, not from tasks ending after the restart.
    assert_eq!(resumed["allocation"], decisions[at - 1]["allocation"], "{decisions:?}");
    assert!(resumed["speed"].as_f64().is_some_and(|s| s > 1.2), "{resumed}");
    assert!(at >= before.as_array().map_or(0, Vec::len), "{reasons:?}");
    drop(server);
}
