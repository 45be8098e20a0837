//! `weir serve` with a cluster on a real Slurm, its nodes read from Slurm at start (slurmctld + slurmd + slurmrestd; `.ci/run`
//! starts one with the shared engines' `slurm/up.sh`), through the real binary: runs routed to a
//! local and to a Slurm cluster both finish, `weir status`/`logs`/`kill` work the same on both,
//! and a `kill -9` of the server while Slurm jobs run, then a restart, re-adopts every job and
//! starts none twice.
//!
//! Settings: `WEIR_TEST_SLURM_URL` (default `http://127.0.0.1:6820`), `WEIR_TEST_SLURM_JWT_KEY`
//! (default Debian's `/var/lib/slurm/slurmctld/jwt_hs256.key`). Without a reachable Slurm these
//! tests fail, unless `WEIR_SKIP_SLURM_TESTS=1` says to skip them (loudly).

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The Slurm tests here share one Slurm; the one that drains its node takes this for writing,
/// the others for reading, so that none of them loses its node to another's test.
static SLURM_NODES: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn sharing_slurm() -> std::sync::RwLockReadGuard<'static, ()> {
    SLURM_NODES.read().unwrap_or_else(|e| e.into_inner())
}

struct Serve(Child);

impl Serve {
    fn start(dir: &Path) -> Serve {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("serve.log")).expect("log");
        Serve(
            Command::new(env!("CARGO_BIN_EXE_weir"))
                .args(["serve", "--config", "server.yaml"])
                .current_dir(dir)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("weir serve"),
        )
    }

    fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn slurm_url() -> String {
    std::env::var("WEIR_TEST_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into())
}

fn slurm_key() -> String {
    std::env::var("WEIR_TEST_SLURM_JWT_KEY")
        .unwrap_or_else(|_| "/var/lib/slurm/slurmctld/jwt_hs256.key".into())
}

/// Whether a Slurm is there to test against; panics with what to do when it is not, unless
/// skipping was asked for.
fn slurm_available() -> bool {
    let url = slurm_url();
    let addr = url.trim_start_matches("http://").trim_end_matches('/').to_string();
    let reachable = std::net::TcpStream::connect(&addr).is_ok();
    let key = Path::new(&slurm_key()).exists();
    if reachable && key {
        return true;
    }
    let why = format!("slurmrestd at {url} reachable: {reachable}; jwt key {} present: {key}", slurm_key());
    if std::env::var("WEIR_SKIP_SLURM_TESTS").as_deref() == Ok("1") {
        eprintln!("*** SKIPPED: no Slurm to test against ({why}); WEIR_SKIP_SLURM_TESTS=1 ***");
        return false;
    }
    panic!(
        "this test needs a real Slurm with slurmrestd (start one with the shared engines' slurm/up.sh, or set \
         WEIR_SKIP_SLURM_TESTS=1 to skip): {why}"
    );
}

fn client(dir: &Path, port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(dir)
        .env("WEIR_SERVER", format!("http://127.0.0.1:{port}"))
        .env_remove("WEIR_TOKEN")
        .args(["--data-dir", "data"])
        .output()
        .expect("run weir")
}

/// `weir backends --config server.yaml` in `dir`.
fn backends(dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["backends", "--config", "server.yaml"])
        .current_dir(dir)
        .output()
        .expect("run weir backends")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", common::text(&out.stdout), common::text(&out.stderr));
    common::text(&out.stdout)
}

fn eventually(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(90) {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            panic!("timed out waiting for {what}; the server said:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

const CLUSTER: &str =
    "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 2048}}\nqueues:\n  - {name: default}\n";

/// A server file with a local cluster and a Slurm cluster; its tag keeps this test's Slurm
/// jobs apart from any other's.
fn server_file(scratch: &common::Scratch, port: u16, tag: &str) {
    std::fs::create_dir_all(scratch.0.join("clusters")).expect("mkdir");
    scratch.file("clusters/local.yaml", CLUSTER);
    // No nodes: they are read from Slurm at start (`nodes: from_backend`).
    scratch.file("clusters/hpc.yaml", "version: 1\nqueues:\n  - {name: default}\n");
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1
listen: 127.0.0.1:{port}
data_dir: data
lease_seconds: 2
clusters:
  - name: local
    file: clusters/local.yaml
  - name: hpc
    file: clusters/hpc.yaml
    backend:
      kind: slurm
      url: {url}
      user: root
      jwt_key: {key}
      placement: backend
      poll_interval_ms: 200
      kill_grace_seconds: 1
      tag: {tag}
      nodes: from_backend
",
            url = slurm_url(),
            key = slurm_key()
        ),
    );
}

fn workload(name: &str, tasks: u32, command: &str) -> String {
    format!(
        "  - name: {name}\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: {tasks}, max_attempts: 1, resources: {{cpu: 500, memory: 32}}, command: '{command}'}}\n"
    )
}

fn runs(dir: &Path, port: u16) -> Vec<Value> {
    let out = client(dir, port, &["runs", "--json"]);
    if !out.status.success() {
        return Vec::new();
    }
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v["runs"].as_array().cloned())
        .unwrap_or_default()
}

fn run_of(dir: &Path, port: u16, workflow: &str) -> Option<Value> {
    runs(dir, port).into_iter().find(|r| r["workflow"] == workflow)
}

fn state_of(dir: &Path, port: u16, workflow: &str) -> String {
    run_of(dir, port, workflow).and_then(|r| r["state"].as_str().map(String::from)).unwrap_or_default()
}

/// The kind and health columns of a `weir backends` row (the columns are padded).
fn kind_health(row: &str) -> (&str, &str) {
    let mut cols = row.split_whitespace().skip(1);
    (cols.next().unwrap_or_default(), cols.next().unwrap_or_default())
}

/// Slurm's state of a job (`squeue`); empty once Slurm has forgotten it.
fn slurm_state(job: &str) -> String {
    let out = Command::new("squeue").args(["-h", "-t", "all", "-j", job, "-o", "%T"]).output();
    out.map(|o| common::text(&o.stdout).trim().to_string()).unwrap_or_default()
}

#[test]
fn runs_routed_to_a_local_and_a_slurm_cluster_finish_and_kill_works_on_slurm() {
    if !slurm_available() {
        return;
    }
    let _slurm = sharing_slurm();
    let scratch = common::Scratch::new("serve-slurm");
    let dir = scratch.0.clone();
    let port = common::free_port();
    server_file(&scratch, port, &format!("weirtest{}a", std::process::id()));
    let health = ok(&backends(&dir));
    let row = |name: &str| health.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(row("local ").contains("healthy"), "{health}");
    assert!(
        kind_health(&row("hpc ")) == ("slurm", "healthy") && row("hpc ").contains("(v0.0.38)"),
        "{health}"
    );
    let _serve = Serve::start(&dir);
    eventually(&dir, "the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:on-hpc", "--cluster", "hpc", "--queue", "root.default"],
        )
        .status
        .success()
    });
    for w in ["on-local", "sleeper"] {
        let cluster = if w == "on-local" { "local" } else { "hpc" };
        ok(&client(
            &dir,
            port,
            &["routes", "set", &format!("workflow:{w}"), "--cluster", cluster, "--queue", "root.default"],
        ));
    }
    let d = dir.display();
    let wl = format!(
        "version: 1\nworkflows:\n{}{}",
        workload("on-hpc", 6, &format!("echo task $WEIR_TASK_INDEX job ${{SLURM_JOB_ID:-none}} queue $WEIR_QUEUE; touch {d}/hpc-$WEIR_TASK_INDEX")),
        workload("on-local", 2, "echo local ${SLURM_JOB_ID:-none}"),
    );
    scratch.file("wl.yaml", &wl);
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    eventually(&dir, "both runs to succeed", || {
        state_of(&dir, port, "on-hpc") == "succeeded" && state_of(&dir, port, "on-local") == "succeeded"
    });
    let hpc = run_of(&dir, port, "on-hpc").expect("the hpc run");
    let local = run_of(&dir, port, "on-local").expect("the local run");
    assert_eq!((&hpc["cluster"], &local["cluster"]), (&Value::from("hpc"), &Value::from("local")));
    let id = hpc["id"].to_string();
    for t in 0..6 {
        assert!(dir.join(format!("hpc-{t}")).exists(), "task {t} ran");
        // `weir logs` reads the job's output file: it ran as a Slurm job, in the mapped queue.
        let log = ok(&client(&dir, port, &["logs", &id, &format!("s.{t}")]));
        let words: Vec<&str> = log.split_whitespace().collect();
        assert_eq!(words[..2], ["task", &t.to_string()[..]], "{log}");
        assert!(words[3].parse::<u64>().is_ok(), "a Slurm job id: {log}");
        assert_eq!(words[5], "root.default", "{log}");
    }
    // A log the server cannot see (the nodes wrote it elsewhere) is named, not shown as empty.
    std::fs::remove_file(dir.join(format!("data/logs/run-{id}/0.0.0.1.stdout"))).expect("the log file");
    let out = client(&dir, port, &["logs", &id, "s.0"]);
    let err = common::text(&out.stderr);
    assert!(!out.status.success() && err.contains("is not on this server"), "{err}");
    let local_log = ok(&client(&dir, port, &["logs", &local["id"].to_string(), "s.0"]));
    assert_eq!(local_log.trim(), "local none", "the local cluster's task ran outside Slurm");
    let status = ok(&client(&dir, port, &["status", &id]));
    assert!(status.contains("succeeded"), "{status}");
    // The server's own view of both backends (`GET /v1/clusters` through `weir backends`): the
    // Slurm cluster healthy, with Slurm's release, the REST version in use and its node count.
    let view = ok(&client(&dir, port, &["backends"]));
    let row = |name: &str| view.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert!(
        kind_health(&row("local ")) == ("local", "healthy") && row("local ").contains("this machine"),
        "{view}"
    );
    let hpc_row = row("hpc ");
    let nodes: u64 = hpc_row.split_whitespace().nth(5).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(
        kind_health(&hpc_row) == ("slurm", "healthy") && hpc_row.contains("(v0.0.38)") && nodes >= 1,
        "{view}"
    );

    // Kill: the running Slurm job is cancelled and the run ends killed.
    scratch.file(
        "sleeper.yaml",
        &format!(
            "version: 1\nworkflows:\n{}",
            workload("sleeper", 1, &format!("echo $SLURM_JOB_ID > {d}/sleeper.job; sleep 300"))
        ),
    );
    ok(&client(&dir, port, &["submit", "sleeper.yaml"]));
    eventually(&dir, "the sleeper to start on Slurm", || {
        std::fs::read_to_string(dir.join("sleeper.job")).is_ok_and(|s| !s.trim().is_empty())
    });
    let job = std::fs::read_to_string(dir.join("sleeper.job")).expect("job id").trim().to_string();
    let sleeper = run_of(&dir, port, "sleeper").expect("the sleeper run");
    ok(&client(&dir, port, &["kill", &sleeper["id"].to_string()]));
    eventually(&dir, "the sleeper run to be killed", || state_of(&dir, port, "sleeper") == "killed");
    let state = slurm_state(&job);
    assert!(!matches!(state.as_str(), "RUNNING" | "PENDING" | "COMPLETING"), "Slurm job {job} is {state}");
}

#[test]
fn kill_9_while_slurm_jobs_run_then_restart_readopts_them_and_starts_none_twice() {
    if !slurm_available() {
        return;
    }
    let _slurm = sharing_slurm();
    let scratch = common::Scratch::new("serve-slurm-crash");
    let dir = scratch.0.clone();
    let port = common::free_port();
    server_file(&scratch, port, &format!("weirtest{}b", std::process::id()));
    let mut serve = Serve::start(&dir);
    eventually(&dir, "the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:crash", "--cluster", "hpc", "--queue", "root.default"],
        )
        .status
        .success()
    });
    let d = dir.display();
    let command = format!(
        "echo \"$WEIR_TASK_INDEX $WEIR_ATTEMPT $SLURM_JOB_ID start\" >> {d}/marker; while [ ! -e {d}/go ]; do sleep 0.1; done; echo \"$WEIR_TASK_INDEX $WEIR_ATTEMPT $SLURM_JOB_ID end\" >> {d}/marker"
    );
    scratch.file("wl.yaml", &format!("version: 1\nworkflows:\n{}", workload("crash", 2, &command)));
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    let starts = |dir: &Path| {
        std::fs::read_to_string(dir.join("marker"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.ends_with("start"))
            .count()
    };
    // Two tasks: a Slurm on a 2-core machine runs two 1-CPU jobs at once.
    eventually(&dir, "two Slurm jobs to run", || starts(&dir) == 2);
    // Let the launch records be committed for some, then kill the server mid-flight.
    std::thread::sleep(Duration::from_millis(300));
    serve.kill9();
    let mut serve = Serve::start(&dir);
    eventually(&dir, "the restarted server", || client(&dir, port, &["runs", "--json"]).status.success());
    // Give recovery time to adopt (and, were it wrong, to start a second attempt).
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(dir.join("go"), "").expect("go");
    eventually(&dir, "the run to succeed", || state_of(&dir, port, "crash") == "succeeded");
    let marker = std::fs::read_to_string(dir.join("marker")).expect("marker");
    let mut lines: Vec<&str> = marker.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 4, "each task started and ended once:\n{marker}");
    for t in 0..2 {
        let mine: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with(&format!("{t} "))).collect();
        assert_eq!(mine.len(), 2, "task {t}:\n{marker}");
        assert!(mine.iter().all(|l| l.split(' ').nth(1) == Some("1")), "attempt 1 only:\n{marker}");
    }
    let id = run_of(&dir, port, "crash").expect("run")["id"].to_string();
    let status = ok(&client(&dir, port, &["status", &id]));
    assert!(status.contains("succeeded"), "{status}");
    serve.kill9();
}

/// Needs no Slurm: nothing listens on the URL.
#[test]
fn a_slurm_that_cannot_be_reached_is_named_at_start_and_its_runs_wait() {
    let scratch = common::Scratch::new("serve-slurm-down");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("key", "0123456789abcdef0123456789abcdef");
    scratch.file("clusters/hpc.yaml", CLUSTER);
    scratch.file("clusters/bare.yaml", "version: 1\nqueues:\n  - {name: default}\n");
    let backend = "{kind: slurm, url: 'http://127.0.0.1:9', user: root, jwt_key: key}";
    // Nodes from a backend that cannot be asked: refused at start, naming the field.
    scratch.file(
        "from.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: hpc\n    file: clusters/bare.yaml\n    backend: {}\n",
            backend.replace('}', ", nodes: from_backend}")
        ),
    );
    let out = client(&dir, port, &["serve", "--config", "from.yaml"]);
    let err = common::text(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("clusters[0].backend.nodes: from_backend: cannot read the nodes")
            && err.contains("cannot be reached"),
        "{err}"
    );
    // With its nodes written down, the server starts; the cluster's runs wait, with the reason
    // in the server's log.
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: hpc\n    file: clusters/hpc.yaml\n    backend: {backend}\n  - name: strict\n    file: clusters/hpc.yaml\n    backend: {}\n",
            backend.replace('}', ", when_unhealthy: refuse}")
        ),
    );
    let out = backends(&dir);
    let health = common::text(&out.stdout);
    assert!(
        !out.status.success() && health.contains("unhealthy") && health.contains("cannot be reached"),
        "{health}"
    );
    let _serve = Serve::start(&dir);
    eventually(&dir, "the server", || {
        client(&dir, port, &["routes", "set", "workflow:w", "--cluster", "hpc", "--queue", "root.default"])
            .status
            .success()
    });
    scratch.file("wl.yaml", &format!("version: 1\nworkflows:\n{}", workload("w", 1, "true")));
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    eventually(&dir, "the reason in the log", || {
        std::fs::read_to_string(dir.join("serve.log"))
            .is_ok_and(|l| l.contains("the Slurm backend is unavailable") && l.contains("cannot be reached"))
    });
    // The server's own view (`GET /v1/clusters`, read by `weir backends` without --config):
    // the cluster is unhealthy, with the reason; the command exits 1.
    let out = client(&dir, port, &["backends"]);
    let view = common::text(&out.stdout);
    let row = view.lines().find(|l| l.starts_with("hpc ")).unwrap_or_default();
    assert!(
        !out.status.success()
            && row.contains("slurm")
            && row.contains("unhealthy")
            && row.contains("the Slurm backend is unavailable")
            && row.contains("cannot be reached"),
        "{view}\n{}",
        common::text(&out.stderr)
    );
    // `strict` says `when_unhealthy: refuse`: a submission routed to it is refused with the
    // reason (503 with Retry-After, said by `weir submit`), and nothing is stored.
    eventually(&dir, "strict to be seen unhealthy", || {
        common::text(&client(&dir, port, &["backends"]).stdout)
            .lines()
            .any(|l| l.starts_with("strict ") && l.contains("unhealthy"))
    });
    ok(&client(
        &dir,
        port,
        &["routes", "set", "workflow:s", "--cluster", "strict", "--queue", "root.default"],
    ));
    scratch.file("strict.yaml", &format!("version: 1\nworkflows:\n{}", workload("s", 1, "true")));
    let out = client(&dir, port, &["submit", "strict.yaml"]);
    let err = common::text(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("cluster `strict`'s slurm backend is unhealthy")
            && err.contains("cannot be reached")
            && err.contains("when_unhealthy: refuse"),
        "{err}"
    );
    assert!(run_of(&dir, port, "s").is_none(), "a refused submission stores nothing");
    std::thread::sleep(Duration::from_secs(1));
    let state = state_of(&dir, port, "w");
    assert!(
        matches!(state.as_str(), "queued" | "routed" | "waiting"),
        "the run waits, nothing lost: {state}"
    );
}

/// A TCP proxy to slurmrestd that can be switched off: while off it drops every connection,
/// new and open, as a Slurm that went away would.
struct Proxy {
    port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    fn start(target: String) -> Proxy {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = up.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                if !flag.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection closed
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else { continue };
                for (mut from, mut to) in [
                    (client.try_clone().expect("clone"), server.try_clone().expect("clone")),
                    (server, client),
                ] {
                    let flag = flag.clone();
                    std::thread::spawn(move || {
                        let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
                        let mut buf = [0u8; 65536];
                        while flag.load(Ordering::SeqCst) {
                            match from.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                        let _ = from.shutdown(std::net::Shutdown::Both);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, up }
    }

    fn set(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_task_started_while_slurm_is_away_is_not_lost_and_runs_once_slurm_is_back() {
    if !slurm_available() {
        return;
    }
    let _slurm = sharing_slurm();
    let scratch = common::Scratch::new("serve-slurm-away");
    let dir = scratch.0.clone();
    let port = common::free_port();
    let proxy = Proxy::start(slurm_url().trim_start_matches("http://").trim_end_matches('/').to_string());
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("clusters/hpc.yaml", CLUSTER);
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: hpc\n    file: clusters/hpc.yaml\n    backend: {{kind: slurm, url: 'http://127.0.0.1:{}', user: root, jwt_key: '{}', poll_interval_ms: 200, tag: weirtest{}c}}\n",
            proxy.port,
            slurm_key(),
            std::process::id()
        ),
    );
    let _serve = Serve::start(&dir);
    eventually(&dir, "the server", || {
        client(&dir, port, &["routes", "set", "workflow:away", "--cluster", "hpc", "--queue", "root.default"])
            .status
            .success()
    });
    // The cluster's actor is connected; now Slurm goes away and a run arrives.
    std::thread::sleep(Duration::from_secs(1));
    proxy.set(false);
    let d = dir.display();
    scratch.file(
        "wl.yaml",
        &format!(
            "version: 1\nworkflows:\n{}",
            workload("away", 1, &format!("echo $WEIR_ATTEMPT >> {d}/ran"))
        ),
    );
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    // The submission may or may not have reached Slurm: the start waits until Slurm can say.
    eventually(&dir, "the start to wait for Slurm", || {
        std::fs::read_to_string(dir.join("serve.log")).is_ok_and(|l| l.contains("waiting for Slurm"))
    });
    std::thread::sleep(Duration::from_secs(1));
    proxy.set(true);
    eventually(&dir, "the run to succeed once Slurm is back", || state_of(&dir, port, "away") == "succeeded");
    let ran = std::fs::read_to_string(dir.join("ran")).expect("the task ran");
    assert_eq!(ran.lines().count(), 1, "it ran exactly once: {ran}");
}

/// Puts a Slurm node back in service however the test ends.
struct Resume(String);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("scontrol")
            .args(["update", &format!("nodename={}", self.0), "state=resume"])
            .output();
    }
}

/// `placement: weir` with `nodes: from_backend`, refreshed every second: weir's engine picks the
/// node and the job is pinned to it (slurmctld shows it as the job's `ReqNodeList`); draining
/// that node in Slurm (`scontrol update state=drain`) is a node failure to the engine — the
/// task's Slurm job is cancelled, its attempt ends `lost`, the node is shown as not counted —
/// and once the node is resumed the task runs again there and the run succeeds.
#[test]
fn a_drained_slurm_node_is_a_node_failure_and_its_task_runs_again_when_it_is_back() {
    if !slurm_available() {
        return;
    }
    let _slurm = SLURM_NODES.write().unwrap_or_else(|e| e.into_inner());
    let out = Command::new("sinfo").args(["-h", "-N", "-o", "%N"]).output().expect("sinfo");
    let node = common::text(&out.stdout).lines().next().unwrap_or_default().trim().to_string();
    assert!(!node.is_empty(), "Slurm lists no node");
    let scratch = common::Scratch::new("serve-slurm-node");
    let dir = scratch.0.clone();
    let port = common::free_port();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("clusters/hpc.yaml", "version: 1\nqueues:\n  - {name: default}\n");
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: hpc\n    file: clusters/hpc.yaml\n    backend: {{kind: slurm, url: '{}', user: root, jwt_key: '{}', placement: weir, poll_interval_ms: 200, kill_grace_seconds: 1, tag: weirtest{}d, nodes: from_backend, nodes_refresh_seconds: 1}}\n",
            slurm_url(),
            slurm_key(),
            std::process::id()
        ),
    );
    let _serve = Serve::start(&dir);
    eventually(&dir, "the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:pinned", "--cluster", "hpc", "--queue", "root.default"],
        )
        .status
        .success()
    });
    let log = || std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    eventually(&dir, "the nodes read from Slurm", || log().contains(&format!("1 counted ({node})")));
    // The nodes API (and the dashboard's Nodes page) name the node as Slurm does.
    let token = std::fs::read_to_string(dir.join("data/admin.token")).expect("admin token");
    eventually(&dir, "the node under Slurm's name in /v1/nodes", || {
        let (status, body) = common::api(port, token.trim(), "GET", "/v1/nodes?cluster=hpc");
        status == 200 && body["clusters"][0]["nodes"][0]["name"] == node.as_str()
    });
    let d = dir.display();
    let command = format!(
        "echo \"$WEIR_ATTEMPT $WEIR_NODE $SLURM_JOB_ID $SLURM_JOB_NODELIST\" >> {d}/ran; if [ \"$WEIR_ATTEMPT\" = 1 ]; then sleep 300; fi"
    );
    scratch.file("wl.yaml", &format!("version: 1\nworkflows:\n{}", workload("pinned", 1, &command)));
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    let ran = || std::fs::read_to_string(dir.join("ran")).unwrap_or_default();
    eventually(&dir, "attempt 1 to run on Slurm", || ran().lines().count() == 1);
    let first = ran();
    let words: Vec<&str> = first.split_whitespace().collect();
    assert_eq!((words[0], words[1], words[3]), ("1", node.as_str(), node.as_str()), "{first}");
    let job = words[2].to_string();
    let shown = common::text(
        &Command::new("scontrol").args(["show", "job", &job]).output().expect("scontrol").stdout,
    );
    assert!(shown.contains(&format!("ReqNodeList={node}")), "pinned by weir: {shown}");

    let _resume = Resume(node.clone());
    let drain = Command::new("scontrol")
        .args(["update", &format!("nodename={node}"), "state=drain", "reason=weir-test"])
        .output()
        .expect("scontrol");
    assert!(drain.status.success(), "{}", common::text(&drain.stderr));
    eventually(&dir, "the node failure", || {
        let l = log();
        l.contains(&format!("node `{node}` left")) && l.contains("1 task(s) on it lost")
    });
    eventually(&dir, "weir to cancel the job on the drained node", || {
        !matches!(slurm_state(&job).as_str(), "RUNNING" | "PENDING" | "COMPLETING")
    });
    // The server's view: the node is not counted, with Slurm's state.
    eventually(&dir, "the node shown as not counted", || {
        common::text(&client(&dir, port, &["backends"]).stdout).lines().any(|l| {
            l.starts_with("hpc ")
                && l.contains(&format!("nodes not counted: {node} ("))
                && l.contains("drain")
        })
    });
    // No node: the task waits (a lost attempt does not count against max_attempts 1).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(ran().lines().count(), 1, "nothing runs while the only node is drained:\n{}", ran());
    assert_eq!(state_of(&dir, port, "pinned"), "running");

    let resume = Command::new("scontrol")
        .args(["update", &format!("nodename={node}"), "state=resume"])
        .output()
        .expect("scontrol");
    assert!(resume.status.success(), "{}", common::text(&resume.stderr));
    eventually(&dir, "the node back", || log().contains(&format!("node `{node}` joined")));
    eventually(&dir, "the run to succeed", || state_of(&dir, port, "pinned") == "succeeded");
    let all = ran();
    assert_eq!(all.lines().count(), 2, "attempt 1, then the one that ran after the resume: {all}");
    let second: Vec<&str> = all.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    let id = run_of(&dir, port, "pinned").expect("run")["id"].to_string();
    let status: Value =
        serde_json::from_str(&ok(&client(&dir, port, &["status", &id, "--json"]))).expect("json");
    let task = &status["jobs"][0]["tasks"][0];
    // Attempt 2 runs, unless slurmctld refused it on the node it had just resumed (listed idle,
    // not responding until its slurmd registers): then that attempt ended lost and a later one
    // ran (see the next test). Either way the last attempt is the one that ran, on that node.
    let attempts = task["attempts"].as_u64().unwrap_or(0);
    assert!(attempts >= 2, "{status}");
    assert_eq!(
        (second.first().copied(), second.get(1).copied()),
        (Some(attempts.to_string().as_str()), Some(node.as_str())),
        "{all}"
    );
    assert_eq!(task["node"].as_str(), Some(node.as_str()), "{status}");
    assert_eq!(task["state"], "succeeded", "{status}");
}

/// Stops a process (SIGSTOP) and lets it go on (SIGCONT) however the test ends.
struct Paused(i32);

impl Paused {
    fn new(pid: i32) -> Paused {
        let out = Command::new("kill").args(["-STOP", &pid.to_string()]).output().expect("kill");
        assert!(out.status.success(), "cannot stop pid {pid}: {}", common::text(&out.stderr));
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0.to_string()]).output();
    }
}

/// The pid of the Slurm's slurmd (`WEIR_TEST_SLURMD_PID_FILE`, by default where the shared
/// engines' `slurm/up.sh` writes it).
fn slurmd_pid() -> i32 {
    let file =
        std::env::var("WEIR_TEST_SLURMD_PID_FILE").unwrap_or_else(|_| "/run/slurm-ci/slurmd.pid".into());
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{file}: {e} (set WEIR_TEST_SLURMD_PID_FILE to slurmd's pid file)"));
    text.trim().parse().unwrap_or_else(|e| panic!("{file}: {text:?}: {e}"))
}

/// The race CI met after `scontrol update state=resume`: Slurm lists the node `idle` (flagged
/// `NOT_RESPONDING` until its slurmd registers again), weir counts it and pins a task to it, and
/// slurmctld refuses the pinned job with `ESLURM_NODE_NOT_AVAIL` ("Required node not available
/// (down, drained or reserved)": `select_nodes` in src/slurmctld/node_scheduler.c finds the
/// required node outside its available-node bitmap; `job_allocate` keeps the job pending). Made
/// deterministic here by holding slurmd stopped (SIGSTOP) across a drain and resume, so the node
/// stays listed usable and not responding. Weir treats the refusal as the node's fault: the
/// attempt ends `lost` (the task has `max_attempts: 1` and still runs), Slurm's pending job is
/// cancelled (nothing runs twice), and the node is out of the engine until a later node listing
/// — one refused start per refresh at most, each refusal preceded by the node joining again.
/// Once slurmd goes on, the task runs there and the run succeeds.
#[test]
fn a_pinned_start_the_node_refuses_is_lost_not_failed_and_the_node_waits_for_a_refresh() {
    if !slurm_available() {
        return;
    }
    let _slurm = SLURM_NODES.write().unwrap_or_else(|e| e.into_inner());
    let out = Command::new("sinfo").args(["-h", "-N", "-o", "%N"]).output().expect("sinfo");
    let node = common::text(&out.stdout).lines().next().unwrap_or_default().trim().to_string();
    assert!(!node.is_empty(), "Slurm lists no node");
    let pid = slurmd_pid();
    let scratch = common::Scratch::new("serve-slurm-refused");
    let dir = scratch.0.clone();
    let port = common::free_port();
    let tag = format!("weirtest{}r", std::process::id());
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file("clusters/hpc.yaml", "version: 1\nqueues:\n  - {name: default}\n");
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: hpc\n    file: clusters/hpc.yaml\n    backend: {{kind: slurm, url: '{}', user: root, jwt_key: '{}', placement: weir, poll_interval_ms: 200, kill_grace_seconds: 1, tag: {tag}, nodes: from_backend, nodes_refresh_seconds: 1}}\n",
            slurm_url(),
            slurm_key(),
        ),
    );
    let _serve = Serve::start(&dir);
    eventually(&dir, "the server", || {
        client(
            &dir,
            port,
            &["routes", "set", "workflow:refused", "--cluster", "hpc", "--queue", "root.default"],
        )
        .status
        .success()
    });
    let log = || std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    eventually(&dir, "the nodes read from Slurm", || log().contains(&format!("1 counted ({node})")));

    // slurmd stopped, the node drained and resumed: Slurm lists it idle, not responding.
    let _resume = Resume(node.clone());
    let paused = Paused::new(pid);
    for state in ["state=drain reason=weir-test", "state=resume"] {
        let mut args = vec!["update".to_string(), format!("nodename={node}")];
        args.extend(state.split(' ').map(String::from));
        let out = Command::new("scontrol").args(&args).output().expect("scontrol");
        assert!(out.status.success(), "{}", common::text(&out.stderr));
    }
    let shown = common::text(
        &Command::new("sinfo").args(["-h", "-n", &node, "-o", "%T"]).output().expect("sinfo").stdout,
    );
    assert_eq!(shown.trim(), "idle*", "slurmctld holds the node not responding while slurmd is stopped");
    // Weir counts it again (it may have seen the drain and taken it out in between).
    eventually(&dir, "the node counted", || {
        common::text(&client(&dir, port, &["backends"]).stdout)
            .lines()
            .any(|l| l.starts_with("hpc ") && !l.contains("nodes not counted"))
    });

    let d = dir.display();
    let command = format!("echo \"$WEIR_ATTEMPT $SLURM_JOB_ID $SLURM_JOB_NODELIST\" >> {d}/ran");
    scratch.file("wl.yaml", &format!("version: 1\nworkflows:\n{}", workload("refused", 1, &command)));
    ok(&client(&dir, port, &["submit", "wl.yaml"]));
    let refusal = format!("node `{node}` takes no work now: Required node not available");
    eventually(&dir, "three refused starts", || log().matches(&refusal).count() >= 3);
    assert_eq!(
        state_of(&dir, port, "refused"),
        "running",
        "a refused start is not a task failure:\n{}",
        log()
    );
    // Never two refused starts without a node listing that brought the node back in between.
    let events: Vec<&str> = log()
        .lines()
        .filter_map(|l| {
            if l.contains(&refusal) {
                Some("refused")
            } else if l.contains(&format!("node `{node}` joined")) {
                Some("joined")
            } else {
                None
            }
        })
        .collect::<Vec<_>>()
        .into_iter()
        .skip_while(|e| *e != "refused")
        .collect();
    assert!(
        events.windows(2).all(|w| w != ["refused", "refused"]),
        "a refusal without a refresh between: {events:?}"
    );
    assert!(
        log().contains(&format!("node `{node}` left (refused a pinned start: Required node not available")),
        "{}",
        log()
    );
    assert!(!std::path::Path::new(&format!("{d}/ran")).exists(), "nothing ran on the refusing node");
    drop(paused);
    eventually(&dir, "the run to succeed once slurmd answers", || {
        state_of(&dir, port, "refused") == "succeeded"
    });
    // Each refused job was cancelled: once Slurm holds no job of this server pending or running,
    // only the last attempt has run (an uncancelled one would have run on the node too).
    eventually(&dir, "Slurm to hold no job of this server", || {
        let out =
            Command::new("squeue").args(["-h", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%k"]).output();
        let jobs = out.map(|o| common::text(&o.stdout)).unwrap_or_default();
        !jobs.lines().any(|c| c.contains(&format!("weir-attempt {tag}:")))
    });
    let ran = std::fs::read_to_string(dir.join("ran")).expect("the task ran");
    assert_eq!(ran.lines().count(), 1, "it ran exactly once: {ran}");
    let words: Vec<&str> = ran.split_whitespace().collect();
    assert_eq!(words.get(2).copied(), Some(node.as_str()), "{ran}");
    let id = run_of(&dir, port, "refused").expect("run")["id"].to_string();
    let status: Value =
        serde_json::from_str(&ok(&client(&dir, port, &["status", &id, "--json"]))).expect("json");
    let task = &status["jobs"][0]["tasks"][0];
    let attempts = task["attempts"].as_u64().unwrap_or(0);
    assert!(attempts >= 4, "three refused attempts, then the one that ran: {status}");
    assert_eq!(words.first().copied(), Some(attempts.to_string().as_str()), "the last attempt ran: {ran}");
    assert_eq!(task["state"], "succeeded", "{status}");
}
