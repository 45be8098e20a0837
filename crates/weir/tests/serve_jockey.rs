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

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn client(dir: &Path, port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(dir)
        .env("WEIR_SERVER", format!("http://127.0.0.1:{port}"))
        .env_remove("WEIR_TOKEN")
        .output()
        .expect("run weir")
}

/// One slot per task: 8 cores. The SLO queue weighs three times the background's, and only
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
    let g = if guarantee { "\n    guarantee: jockey" } else { "" };
    format!(
        "version: 1
workflows:
  - name: {name}
    queue: root.slo
    slo: 40s{g}
    jobs:
      - name: work
        stages:
          - {{name: shards, tasks: 16, resources: {{cpu: 1000, memory: 512m}}, command: 'sleep {secs}'}}
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
          - {name: hold, tasks: 8, resources: {cpu: 1000, memory: 512m}, command: 'sleep 90'}
";

fn submit(dir: &Path, port: u16, file: &str, date: &str) -> i64 {
    let out = client(dir, port, &["submit", file, "--logical-date", date]);
    assert!(out.status.success(), "submit {file}: {out:?}");
    // `run N of WORKFLOW (DATE) queued on …`
    let text = common::text(&out.stdout);
    text.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no run id: {text}"))
}

fn run(dir: &Path, port: u16, id: i64) -> Value {
    let out = client(dir, port, &["status", &id.to_string(), "--json"]);
    assert!(out.status.success(), "status {id}: {out:?}");
    serde_json::from_slice(&out.stdout).expect("json")
}

fn wait_for(dir: &Path, what: &str, limit: Duration, mut done: impl FnMut() -> Option<Value>) -> Value {
    let start = Instant::now();
    loop {
        if let Some(v) = done() {
            return v;
        }
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        assert!(start.elapsed() < limit, "{what} did not happen\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn ended(v: &Value) -> bool {
    matches!(v["state"].as_str(), Some("succeeded" | "failed" | "killed"))
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
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--kill-grace", "1", "--cluster", &cluster])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    wait_for(&dir, "the server answering", Duration::from_secs(60), || {
        client(&dir, port, &["runs", "--json"]).status.success().then_some(Value::Null)
    });

    // History: three runs of the workflow alone, as it usually runs (1 s tasks).
    let mut first = None;
    for day in 1..=3 {
        let id = submit(&dir, port, &history, &format!("2026-11-0{day}"));
        let v = wait_for(&dir, "a history run ending", Duration::from_secs(60), || {
            Some(run(&dir, port, id)).filter(ended)
        });
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

    // Plain fair share: the background holds every slot for 90 s, the twin waits behind it.
    let fill = submit(&dir, port, &background, "2026-11-10");
    let busy = |dir: &Path| {
        wait_for(dir, "the background holding every slot", Duration::from_secs(60), || {
            let v = run(dir, port, fill);
            (v["jobs"][0]["task_counts"]["running"].as_u64() == Some(8)).then_some(v)
        })
    };
    busy(&dir);
    let plain = submit(&dir, port, &twin, "2026-11-10");
    // The twin's deadline passes with it still waiting or running (40 s after submission).
    let missed = wait_for(&dir, "the plain twin passing its deadline", Duration::from_secs(120), || {
        let v = run(&dir, port, plain);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis()
            as i64;
        let late = now - v["submitted_ms"].as_i64().unwrap_or(now) > 40_000;
        (ended(&v) || late).then_some(v)
    });
    assert!(!ended(&missed) || took(&missed) > 40_000, "plain fair share met the deadline: {missed}");
    assert!(missed["jobs"][0]["guarantee"].as_array().is_none_or(Vec::is_empty), "{missed}");
    // Clear the cluster for the guarded run's turn.
    for id in [plain, fill] {
        assert!(client(&dir, port, &["kill", &id.to_string()]).status.success());
    }
    for id in [plain, fill] {
        wait_for(&dir, "a kill", Duration::from_secs(60), || Some(run(&dir, port, id)).filter(ended));
    }

    // The same load, the slowed run under the controller.
    let fill = submit(&dir, port, &background, "2026-11-11");
    busy(&dir);
    let guarded = submit(&dir, port, &slowed, "2026-11-11");
    let v = wait_for(&dir, "the guarded run ending", Duration::from_secs(120), || {
        Some(run(&dir, port, guarded)).filter(ended)
    });
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
    // Its containers came from the background by preemption for the guarantee.
    let fill_v = run(&dir, port, fill);
    assert!(!ended(&fill_v) || fill_v["state"] != "succeeded" || took(&fill_v) > 90_000, "{fill_v}");
    let metrics = reqwest_metrics(port);
    assert!(
        metrics.lines().any(|l| l.contains("job_guarantee") && !l.starts_with('#') && !l.trim_end().ends_with(" 0")),
        "no preemption for the guarantee in /metrics:\n{metrics}"
    );

    // The run's page shows the allocation over time against progress and the deadline.
    let page = http_get(port, &format!("/runs/{guarded}"));
    assert!(page.contains("Deadline guarantee"), "{page}");
    assert!(page.contains("behind: raised"), "{page}");
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

fn reqwest_metrics(port: u16) -> String {
    http_get(port, "/metrics")
}
