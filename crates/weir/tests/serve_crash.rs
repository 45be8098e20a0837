//! Crash-only, tested with real processes: while 2,000 one-task runs are being submitted and
//! executed by the real `weir serve` binary, it is killed with SIGKILL at random moments five
//! times and restarted on the same data directory. Afterwards: every run acknowledged with 201
//! succeeded and ran exactly once to its end, no two attempts of one run overlapped in time, and
//! no task process is left behind. Also: two `weir serve` processes on one PostgreSQL never
//! start a task twice, and the survivor takes the cluster over within the lease when the other
//! dies.
//!
//! Each task appends `RUN ATTEMPT start NS` and `RUN ATTEMPT end NS` lines to a marker file.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 64000, memory: 65536}}
queues:
  - {name: default}
";

struct Weir {
    child: Child,
}

fn serve(dir: &Path, port: u16, extra: &[&str]) -> Weir {
    let mut args = vec![
        "serve".to_string(),
        "--data-dir".into(),
        dir.join("data").display().to_string(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
        "--cluster".into(),
        dir.join("cluster.yaml").display().to_string(),
        "--lease".into(),
        "2".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("serve-{port}.log")))
        .expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start weir serve");
    Weir { child }
}

impl Weir {
    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Weir {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Splitmix64: the test's random moments, seeded so a failure can be rerun.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn token(dir: &Path) -> String {
    let path = dir.join("data").join("admin.token");
    for _ in 0..200 {
        if let Ok(t) = std::fs::read_to_string(&path) {
            if !t.trim().is_empty() {
                return t.trim().to_string();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no admin token at {}", path.display());
}

fn workflow(marker: &Path) -> Value {
    let m = marker.display();
    let cmd = format!(
        "echo \"$WEIR_RUN_ID $WEIR_ATTEMPT start $(date +%s%N)\" >> {m}; sleep 0.05; \
         echo \"$WEIR_RUN_ID $WEIR_ATTEMPT end $(date +%s%N)\" >> {m}"
    );
    json!({"name": "crash", "queue": "root.default",
           "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": 1, "resources": {"cpu": 100, "memory": 64},
                     "command": cmd, "max_attempts": 1}]}]})
}

/// Submit runs `from..to` with 16 concurrent clients; retry while the server is down. Returns
/// the ids answered with 201.
async fn submit_all(base: &str, token: &str, marker: &Path, from: u32, to: u32) -> Vec<i64> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
    let wf = workflow(marker);
    let mut set = tokio::task::JoinSet::new();
    let per = (to - from).div_ceil(16);
    for c in 0..16u32 {
        let (http, wf, base, token) = (http.clone(), wf.clone(), base.to_string(), token.to_string());
        let lo = from + c * per;
        let hi = (lo + per).min(to);
        set.spawn(async move {
            let mut acked = Vec::new();
            for i in lo..hi {
                let body = json!({"workflow": wf, "logical_date": format!("run-{i}")});
                loop {
                    match http.post(format!("{base}/v1/runs")).bearer_auth(&token).json(&body).send().await {
                        Ok(r) if r.status().as_u16() == 201 => {
                            let v: Value = r.json().await.unwrap_or(Value::Null);
                            if let Some(id) = v["id"].as_i64() {
                                acked.push(id);
                            }
                            break;
                        }
                        // Stored before the crash, answer lost: it will run, but was never
                        // acknowledged.
                        Ok(r) if r.status().as_u16() == 409 => break,
                        _ => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
            acked
        });
    }
    let mut all = Vec::new();
    while let Some(r) = set.join_next().await {
        all.extend(r.expect("submitter"));
    }
    all
}

async fn runs_by_state(base: &str, token: &str) -> Option<BTreeMap<String, usize>> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().ok()?;
    let mut counts = BTreeMap::new();
    for state in ["queued", "routed", "waiting", "running", "succeeded", "failed", "killed"] {
        let mut cursor: Option<String> = None;
        let mut n = 0;
        loop {
            let mut url = format!("{base}/v1/runs?state={state}&limit=1000");
            if let Some(c) = &cursor {
                url += &format!("&cursor={c}");
            }
            let v: Value = http.get(url).bearer_auth(token).send().await.ok()?.json().await.ok()?;
            n += v["runs"].as_array()?.len();
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        counts.insert(state.to_string(), n);
    }
    Some(counts)
}

/// Marker lines by run: (attempt, start ns, end ns if any).
fn attempts(marker: &Path) -> BTreeMap<i64, Vec<(u32, u128, Option<u128>)>> {
    let mut by: BTreeMap<(i64, u32), (Option<u128>, Option<u128>)> = BTreeMap::new();
    for line in std::fs::read_to_string(marker).unwrap_or_default().lines() {
        let p: Vec<&str> = line.split_whitespace().collect();
        let [run, attempt, what, ns] = p.as_slice() else { continue };
        let (Ok(run), Ok(attempt), Ok(ns)) = (run.parse(), attempt.parse(), ns.parse()) else { continue };
        let e = by.entry((run, attempt)).or_default();
        if *what == "start" {
            e.0 = Some(ns);
        } else {
            e.1 = Some(ns);
        }
    }
    let mut out: BTreeMap<i64, Vec<(u32, u128, Option<u128>)>> = BTreeMap::new();
    for ((run, attempt), (start, end)) in by {
        out.entry(run).or_default().push((attempt, start.unwrap_or(0), end));
    }
    out
}

/// Task processes still alive whose command line names the marker file.
fn leftovers(marker: &Path) -> Vec<String> {
    let needle = marker.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim_start().starts_with('Z')))
            .unwrap_or(true);
        if cmd.contains(&needle) && !zombie {
            found.push(format!("{name}: {cmd}"));
        }
    }
    found
}

fn scratch(tag: &str) -> PathBuf {
    // reqwest's rustls needs the process's provider (ring) before any client is built.
    weir_server::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("weir-crash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    // Tasks run as `weir-task` when the test runs as root: they write their markers here.
    common::open_to_tasks(&dir);
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).expect("cluster file");
    dir
}

async fn wait_ready(base: &str) {
    let http = reqwest::Client::new();
    for _ in 0..400 {
        if http.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{base} never became ready");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_five_times_while_2000_runs_go_through() {
    let runs: u32 = std::env::var("WEIR_CRASH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let seed: u64 = std::env::var("WEIR_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(7);
    eprintln!(
        "crash test: {runs} runs, seed {seed} (rerun with WEIR_CRASH_SEED={seed} WEIR_CRASH_RUNS={runs})"
    );
    let dir = scratch("sqlite");
    let marker = dir.join("marker");
    let port = common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = serve(&dir, port, &[]);
    wait_ready(&base).await;
    let token = token(&dir);
    let submitter = {
        let (base, token, marker) = (base.clone(), token.clone(), marker.clone());
        tokio::spawn(async move { submit_all(&base, &token, &marker, 0, runs).await })
    };
    let mut rng = Rng(seed);
    for crash in 0..5 {
        let pause = Duration::from_millis(300 + rng.next() % 1200);
        tokio::time::sleep(pause).await;
        server.kill9();
        eprintln!("crash test: kill -9 number {} after {pause:?}", crash + 1);
        server = serve(&dir, port, &[]);
        wait_ready(&base).await;
    }
    let acked = submitter.await.expect("submissions");
    let start = Instant::now();
    let counts = loop {
        let counts = runs_by_state(&base, &token).await.expect("list runs");
        let open: usize = ["queued", "routed", "waiting", "running"].iter().map(|s| counts[*s]).sum();
        if open == 0 {
            break counts;
        }
        assert!(start.elapsed() < Duration::from_secs(240), "runs still open: {counts:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    eprintln!("crash test: {} acknowledged, final states {counts:?}", acked.len());
    assert!(acked.len() as u32 >= runs * 9 / 10, "too few acknowledged: {}", acked.len());
    assert_eq!(counts["failed"] + counts["killed"], 0, "{counts:?}");
    let http = reqwest::Client::new();
    let marks = attempts(&marker);
    for id in &acked {
        let run: Value = http
            .get(format!("{base}/v1/runs/{id}"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        assert_eq!(run["state"], "succeeded", "{run:#}");
        let tries = marks.get(id).cloned().unwrap_or_default();
        let finished = tries.iter().filter(|t| t.2.is_some()).count();
        assert_eq!(finished, 1, "run {id} finished {finished} times: {tries:?}");
        let mut spans: Vec<(u128, u128)> = tries.iter().map(|t| (t.1, t.2.unwrap_or(u128::MAX))).collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "run {id}: two attempts overlapped: {tries:?}");
        }
    }
    let distinct: BTreeSet<i64> = acked.iter().copied().collect();
    assert_eq!(distinct.len(), acked.len(), "an id was acknowledged twice");
    drop(server);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(leftovers(&marker), Vec::<String>::new(), "orphaned task processes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_never_start_a_task_twice_and_take_over() {
    weir_server::install_crypto_provider();
    let Ok(admin_url) = std::env::var("WEIR_TEST_POSTGRES_URL") else {
        eprintln!(
            "\n*** SKIPPED: WEIR_TEST_POSTGRES_URL is not set; the multi-worker test needs PostgreSQL (.ci/run sets it) ***\n"
        );
        return;
    };
    let dir = scratch("pg");
    let name = format!("weir_multi_{}", std::process::id());
    let db = weir_store::create_postgres_database(&admin_url, &name).await.expect("database");
    let marker = dir.join("marker");
    let (p1, p2) = (common::free_port(), common::free_port());
    let mut a = serve(&dir, p1, &["--db", &db]);
    wait_ready(&format!("http://127.0.0.1:{p1}")).await;
    let mut b = serve(&dir, p2, &["--db", &db]);
    let (base1, base2) = (format!("http://127.0.0.1:{p1}"), format!("http://127.0.0.1:{p2}"));
    wait_ready(&base2).await;
    let token = token(&dir);
    // Submissions through both servers; one of them owns the cluster.
    let half = {
        let (base, token, marker) = (base2.clone(), token.clone(), marker.clone());
        tokio::spawn(async move { submit_all(&base, &token, &marker, 0, 150).await })
    };
    let mut acked = submit_all(&base1, &token, &marker, 150, 300).await;
    acked.extend(half.await.expect("submitter"));
    // Kill whichever owns the cluster; the other must finish the work.
    let store = weir_store::open(&db).await.expect("store");
    let weir_store::Lease { owner, fence, .. } =
        store.lease("default").await.expect("lease").expect("someone owns it");
    let killed_at = Instant::now();
    let pid_a = a.child.id();
    let survivor = if owner.starts_with(&format!("weir-{pid_a}-")) {
        a.kill9();
        base2.clone()
    } else {
        b.kill9();
        base1.clone()
    };
    let took_over = loop {
        let now = store.lease("default").await.expect("lease").expect("lease row");
        if now.owner != owner && now.fence > fence {
            break killed_at.elapsed();
        }
        assert!(killed_at.elapsed() < Duration::from_secs(30), "no takeover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "multi-worker: the survivor took the cluster over {took_over:?} after the owner died (lease 2 s)"
    );
    assert!(took_over < Duration::from_secs(2) + Duration::from_millis(1500), "takeover took {took_over:?}");
    let start = Instant::now();
    loop {
        let counts = runs_by_state(&survivor, &token).await.expect("list");
        let open: usize = ["queued", "routed", "waiting", "running"].iter().map(|s| counts[*s]).sum();
        if open == 0 {
            assert_eq!(counts["succeeded"], 300, "{counts:?}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "runs still open: {counts:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let marks = attempts(&marker);
    for id in &acked {
        let finished = marks.get(id).map(|t| t.iter().filter(|x| x.2.is_some()).count()).unwrap_or(0);
        assert_eq!(finished, 1, "run {id} finished {finished} times");
    }
    let started_twice: Vec<_> =
        marks.iter().filter(|(_, t)| t.iter().filter(|x| x.0 == 1).count() > 1).collect();
    assert!(started_twice.is_empty(), "attempt 1 started twice: {started_twice:?}");
    drop((a, b));
}

/// After a kill -9 and an immediate restart on the same data directory, the new process knows
/// its predecessor is gone (its lock on the data directory went with it) and takes the
/// cluster's lease at once — before the dead process's lease would have expired — instead of
/// waiting out the lease while nothing starts. The running task is re-adopted and finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_kill_9_takes_its_predecessors_lease_at_once() {
    let dir = scratch("self-takeover");
    let port = common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    // As `serve` does, with a long lease (60 s): the takeover must not wait for it.
    let start = |dir: &Path| {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("serve-{port}.log")))
            .expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--data-dir"])
            .arg(dir.join("data"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--cluster"])
            .arg(dir.join("cluster.yaml"))
            .args(["--lease", "60"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start weir serve");
        Weir { child }
    };
    let mut first = start(&dir);
    wait_ready(&base).await;
    let token = token(&dir);
    let http = reqwest::Client::new();
    // The task marks that it has started: killing the server before the task's process exists
    // would (rightly) make the restart start it again as a new attempt.
    let marker = dir.join("started");
    let wf = json!({"name": "long", "queue": "root.default",
        "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": 1, "resources": {"cpu": 100, "memory": 64},
                  "command": format!("touch {} && sleep 3", marker.display()), "max_attempts": 1}]}]});
    let created: Value = http
        .post(format!("{base}/v1/runs"))
        .bearer_auth(&token)
        .json(&json!({"workflow": wf, "logical_date": "d"}))
        .send()
        .await
        .expect("submit")
        .json()
        .await
        .expect("json");
    let id = created["id"].as_i64().expect("id");
    let db = format!("sqlite://{}", dir.join("data").join("weir.db").display());
    let store = weir_store::open(&db).await.expect("store");
    let old = loop {
        if let Some(l) = store.lease("default").await.expect("lease") {
            break l;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for _ in 0..600 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(marker.exists(), "the task did not start within 30 s");
    first.kill9();
    let _second = start(&dir);
    let taken = loop {
        let now = store.lease("default").await.expect("lease").expect("lease row");
        if now.owner != old.owner {
            break now;
        }
        assert!(
            weir_server::now_ms() < old.expires_ms,
            "the new process waited for the dead one's lease to expire"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(taken.fence > old.fence);
    // Taken while the dead process's lease still had most of its minute to run.
    assert!(
        weir_server::now_ms() + 30_000 < old.expires_ms,
        "taken at {} (old lease until {})",
        weir_server::now_ms(),
        old.expires_ms
    );
    for _ in 0..300 {
        let run: Value = http
            .get(format!("{base}/v1/runs/{id}"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("get")
            .json()
            .await
            .unwrap_or(Value::Null);
        if run["state"] == "succeeded" {
            assert_eq!(run["jobs"][0]["tasks"][0]["attempts"], 1, "re-adopted, not started again: {run:#}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {id} did not finish after the restart");
}
