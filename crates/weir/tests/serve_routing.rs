//! Load-aware routing against a real `weir serve` with several clusters from one server file:
//! a `spill` route sends a burst to the second cluster once the first one's predicted start
//! passes the threshold, skipping a drained cluster and one whose (Slurm) backend is unhealthy;
//! a `least_loaded` route picks the cluster whose queue has less pending demand over its share;
//! each run's decision is in the API, `weir status` and `/metrics` (which `promtool` accepts).

mod common;

use common::{client_in_data as client, ok, Serve};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(90), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET path` on the server with the admin token: the body's text.
fn get(dir: &Path, port: u16, path: &str) -> String {
    weir_server::install_crypto_provider();
    let token = std::fs::read_to_string(dir.join("data/admin.token")).expect("admin token");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let r = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(token.trim())
            .send()
            .await
            .expect("request");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.text().await.expect("body")
    })
}

/// The dashboard page at `path`, signed in with the admin token as a browser does (the login
/// page's nonce, the login's session cookie).
fn page(dir: &Path, port: u16, path: &str) -> String {
    weir_server::install_crypto_provider();
    let token = std::fs::read_to_string(dir.join("data/admin.token")).expect("admin token");
    let base = format!("http://127.0.0.1:{port}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let http =
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
        let cookie_of = |r: &reqwest::Response, name: &str| {
            r.headers()
                .get_all("set-cookie")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find(|c| c.starts_with(name))
                .and_then(|c| c.split(';').next())
                .map(str::to_string)
                .unwrap_or_else(|| panic!("no {name} cookie"))
        };
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
        let login = http
            .post(format!("{base}/login"))
            .header("cookie", nonce_cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={}&nonce={nonce}", url_encode(token.trim())))
            .send()
            .await
            .expect("login");
        let session = cookie_of(&login, "weir_session=");
        let r = http.get(format!("{base}{path}")).header("cookie", session).send().await.expect("page");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.text().await.expect("page html")
    })
}

/// `s` with every byte but letters, digits and `-_.~` percent-encoded.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const CLUSTER: &str =
    "version: 1\nnodes:\n  - {count: 1, resources: {cpu: CPU, memory: 65536}}\nqueues:\n  - {name: default}\n";

/// A workload of `n` runs of `workflow` (logical dates `d0`…), one task of one core each that
/// waits for the file `go`.
fn workload(dir: &Path, workflow: &str) -> String {
    let d = dir.display();
    format!(
        "version: 1\nworkflows:\n  - name: {workflow}\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: 1, resources: {{cpu: 1000, memory: 64}}, command: 'while [ ! -e {d}/go ]; do sleep 0.05; done'}}\n"
    )
}

fn run_json(dir: &Path, port: u16, id: i64) -> Value {
    serde_json::from_str(&get(dir, port, &format!("/v1/runs/{id}"))).expect("run json")
}

/// Submits `file` for logical date `date`; the new run's id (`run ID of …`).
fn submit(dir: &Path, port: u16, file: &str, date: &str) -> i64 {
    let out = ok(&client(dir, port, &["submit", file, "--logical-date", date]));
    out.strip_prefix("run ")
        .and_then(|r| r.split(' ').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("no run id in {out}"))
}

/// The leaf `root.default` of `cluster` in the last published snapshot, once there is one.
fn queue(dir: &Path, port: u16, cluster: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(&get(dir, port, "/v1/queues")).ok()?;
    let c = v["clusters"].as_array()?.iter().find(|c| c["cluster"] == cluster)?.clone();
    c["as_of_ms"].as_i64()?;
    c["queues"].as_array()?.iter().find(|q| q["path"] == "root.default").cloned()
}

#[test]
fn spill_sends_a_burst_on_and_least_loaded_picks_the_emptier_cluster() {
    let scratch = common::Scratch::new("serve-routing");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("clusters/small.yaml", &CLUSTER.replace("CPU", "2000"));
    scratch.file("clusters/big.yaml", &CLUSTER.replace("CPU", "8000"));
    scratch.file("key", "0123456789abcdef0123456789abcdef");
    // `broken`'s Slurm does not answer (nothing listens on port 9): its backend is unhealthy.
    // `off` is drained. Both come first in the spill route and both must be passed over.
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1
listen: 127.0.0.1:{port}
data_dir: data
clusters:
  - {{name: off, file: clusters/big.yaml, drained: true}}
  - name: broken
    file: clusters/big.yaml
    backend: {{kind: slurm, url: 'http://127.0.0.1:9', user: root, jwt_key: key}}
  - {{name: small, file: clusters/small.yaml}}
  - {{name: big, file: clusters/big.yaml}}
routes:
  - key: workflow:burst
    policy: spill
    spill_after_seconds: 1
    candidates:
      - {{cluster: off, queue: root.default}}
      - {{cluster: broken, queue: root.default}}
      - {{cluster: small, queue: root.default}}
      - {{cluster: big, queue: root.default}}
  - key: workflow:balanced
    policy: least_loaded
    candidates: [{{cluster: small, queue: root.default}}, {{cluster: big, queue: root.default}}]
"
        ),
    );
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config", "server.yaml"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    eventually("the server", || client(&dir, port, &["routes", "list"]).status.success());
    // Routing judges by what the server knows: wait until it has seen `broken` unhealthy and
    // published both local clusters' queues.
    eventually("broken to be seen unhealthy", || {
        common::text(&client(&dir, port, &["backends"]).stdout)
            .lines()
            .any(|l| l.starts_with("broken ") && l.contains("unhealthy"))
    });
    eventually("the snapshots", || {
        queue(&dir, port, "small").is_some() && queue(&dir, port, "big").is_some()
    });
    // `weir routes list` shows the server file's routes with their policy and candidates.
    let list = ok(&client(&dir, port, &["routes", "list"]));
    assert!(
        list.lines().any(|l| l.starts_with("workflow:burst ")
            && l.ends_with("spill after 1s: off root.default, broken root.default, small root.default, big root.default (server file)")),
        "{list}"
    );
    assert!(list.contains("least_loaded: small root.default, big root.default (server file)"), "{list}");

    // A burst of six one-core runs. `small`'s share is two cores: once the work ahead (running,
    // pending and routed since the last snapshot) leaves no room, the predicted start is a
    // share turn (the default runtime, 600 s: nothing is recorded yet) away, past the 1 s
    // threshold, and the rest spill to `big`.
    let burst = scratch.file("burst.yaml", &workload(&dir, "burst"));
    let ids: Vec<i64> = (0..6).map(|i| submit(&dir, port, &burst, &format!("d{i}"))).collect();
    let runs: Vec<Value> = ids.iter().map(|&id| run_json(&dir, port, id)).collect();
    let on = |c: &str| runs.iter().filter(|r| r["cluster"] == c).count();
    assert_eq!((on("off"), on("broken")), (0, 0), "{runs:#?}");
    assert!((1..=2).contains(&on("small")), "small's share fits two runs: {runs:#?}");
    assert_eq!(on("small") + on("big"), 6);
    let first = &runs[0]["route"];
    assert_eq!(
        (&runs[0]["cluster"], &first["reason"]),
        (&Value::from("small"), &Value::from("within_threshold"))
    );
    assert_eq!((&first["key"], &first["policy"]), (&Value::from("workflow:burst"), &Value::from("spill")));
    let detail = first["detail"].as_str().expect("detail");
    assert!(detail.contains("off/root.default skipped (drained)"), "{detail}");
    assert!(detail.contains("broken/root.default skipped (backend unhealthy"), "{detail}");
    let spilled: Vec<&Value> = runs.iter().filter(|r| r["cluster"] == "big").collect();
    assert!(spilled.iter().all(|r| r["route"]["reason"] == "spilled"), "{spilled:#?}");
    let d = spilled[0]["route"]["detail"].as_str().expect("detail");
    assert!(d.contains("big: predicted start 0s within 1s") && d.contains("small/root.default load"), "{d}");
    // A run never moves: once the snapshots count the burst, the stored decisions are the same.
    eventually("the burst to run", || {
        queue(&dir, port, "big")
            .is_some_and(|q| q["usage"]["cpu"].as_u64() == Some(1000 * spilled.len() as u64))
    });
    for (id, before) in ids.iter().zip(&runs) {
        let now = run_json(&dir, port, *id);
        assert_eq!((&now["cluster"], &now["route"]), (&before["cluster"], &before["route"]));
    }

    // `weir status` says how the run was placed.
    let status = ok(&client(&dir, port, &["status", &spilled[0]["id"].to_string()]));
    assert!(status.contains("routed by workflow:burst (spill): spilled"), "{status}");
    // So does the run page of the dashboard.
    let html = page(&dir, port, &format!("/runs/{}", spilled[0]["id"]));
    assert!(html.contains("spill (spilled) by workflow:burst"), "{html}");
    assert!(html.contains("off/root.default skipped (drained)"), "{html}");

    // least_loaded: fill `small` past its share with runs routed there by a plain route, so it
    // has pending demand, while `big` has none pending; the balanced run goes to `big` although
    // `small` is its first candidate.
    ok(&client(
        &dir,
        port,
        &["routes", "set", "workflow:filler", "--cluster", "small", "--queue", "root.default"],
    ));
    let filler = scratch.file("filler.yaml", &workload(&dir, "filler"));
    for i in 0..3 {
        submit(&dir, port, &filler, &format!("f{i}"));
    }
    eventually("small's pending demand in a snapshot", || {
        queue(&dir, port, "small").is_some_and(|q| {
            q["demand"]["cpu"].as_u64().unwrap_or(0) > q["steady_fair_share"]["cpu"].as_u64().unwrap_or(0)
        })
    });
    let balanced = scratch.file("balanced.yaml", &workload(&dir, "balanced"));
    let b = run_json(&dir, port, submit(&dir, port, &balanced, "b0"));
    assert_eq!(
        (&b["cluster"], &b["route"]["reason"]),
        (&Value::from("big"), &Value::from("least_loaded")),
        "{b:#?}"
    );
    let detail = b["route"]["detail"].as_str().expect("detail");
    assert!(detail.starts_with("least loaded: big;"), "{detail}");

    // /metrics counts each decision by cluster and reason, and stays valid for promtool.
    let metrics = get(&dir, port, "/metrics");
    let count = |cluster: &str, reason: &str| {
        let head = format!("weir_route_decisions_total{{cluster=\"{cluster}\",reason=\"{reason}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(head.as_str())).and_then(|v| v.parse::<f64>().ok())
    };
    assert_eq!(count("small", "within_threshold"), Some(on("small") as f64), "{metrics}");
    assert_eq!(count("big", "spilled"), Some(on("big") as f64), "{metrics}");
    assert_eq!(count("big", "least_loaded"), Some(1.0), "{metrics}");
    let promtool = Path::new("/usr/bin/promtool");
    if promtool.exists() {
        let mut child = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(metrics.as_bytes()).expect("write");
        let out = child.wait_with_output().expect("promtool");
        let lint = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
        assert!(out.status.success() && lint.trim().is_empty(), "promtool check metrics: {lint}");
    } else {
        eprintln!("\n*** SKIPPED promtool check: install Debian's prometheus ***\n");
    }
    std::fs::write(dir.join("go"), "").expect("go");
}
