//! `weir serve` runs a stage with `gang: true` all or nothing, as `weir simulate` does: the live
//! engine is handed the stage's tasks as one gang (`Request::in_gang`), so none of them starts
//! until the cluster has room for all of them, and then all start in one pass.
//!
//! The cluster is one node of 3 cores. A blocker run holds 2 of them with two tasks that wait
//! for a release file each; a gang of 3 one-core tasks is then submitted. It waits with the
//! reason `gang_waiting_for_room` while 1 core is free, and still when the first blocker ends
//! and 2 are free (a stage asked for task by task would have started one task, then two); once
//! the second blocker ends, all three start. Each gang task records its start and then waits
//! until it sees the other two started (a barrier with a time limit), so the run succeeds only
//! if the three ran at the same time. The same for a job with `gang: true` whose two first
//! stages (2 tasks and 1) start as one gang, and for the gang stage run as Slurm jobs.

mod common;

use common::{client_of as client, Serve};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 3000, memory: 4g}}
queues:
  - {name: default}
";

fn eventually(dir: &Path, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(120) {
            let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
            panic!("timed out waiting for {what}; the server said:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn run_of(dir: &Path, port: u16, workflow: &str) -> Value {
    let runs = json(&client(dir, port, &["runs", "--json"]));
    let found = runs["runs"].as_array().and_then(|r| r.iter().find(|r| r["workflow"] == workflow).cloned());
    found.unwrap_or(Value::Null)
}

fn status(dir: &Path, port: u16, id: &str) -> Value {
    json(&client(dir, port, &["status", id, "--json"]))
}

/// How many attempts the run's tasks have started (stored).
fn attempts_started(run: &Value) -> u64 {
    let tasks = run["jobs"][0]["tasks"].as_array().cloned().unwrap_or_default();
    assert_eq!(tasks.len(), 3, "{run:#}");
    tasks.iter().map(|t| t["attempts"].as_u64().expect("attempts")).sum()
}

fn started(dir: &Path, prefix: &str) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .expect("scratch")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    found.sort();
    found
}

#[test]
fn a_gang_stage_starts_only_when_all_its_tasks_fit_then_all_at_once() {
    let stage = "          - {name: together, tasks: 3, gang: true, max_attempts: 1, resources: {cpu: 1000, memory: 256m}, command: 'CMD'}\n";
    scenario("serve-gang-stage", "", stage, &["together-0", "together-1", "together-2"], None);
}

/// The same on a real Slurm (`.ci/run` starts one; crates/weir/tests/serve_slurm.rs says how):
/// the engine's gang decides when the Slurm jobs are submitted, whatever the backend.
#[test]
fn a_gang_stage_on_slurm_starts_only_when_all_its_tasks_fit() {
    let Some(slurm) = slurm() else { return };
    let stage = "          - {name: together, tasks: 3, gang: true, max_attempts: 1, resources: {cpu: 1000, memory: 256m}, command: 'CMD'}\n";
    scenario("serve-gang-slurm", "", stage, &["together-0", "together-1", "together-2"], Some(slurm));
}

/// slurmrestd's URL and JWT key (`WEIR_TEST_SLURM_URL`, `WEIR_TEST_SLURM_JWT_KEY`, as
/// serve_slurm.rs); `None` (said loudly) only when `WEIR_SKIP_SLURM_TESTS=1` and none is there.
fn slurm() -> Option<(String, String)> {
    let url = std::env::var("WEIR_TEST_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into());
    let key = std::env::var("WEIR_TEST_SLURM_JWT_KEY")
        .unwrap_or_else(|_| "/var/lib/slurm/slurmctld/jwt_hs256.key".into());
    let reachable =
        std::net::TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).is_ok();
    if reachable && Path::new(&key).exists() {
        return Some((url, key));
    }
    let why = format!("slurmrestd at {url} reachable: {reachable}; jwt key {key}");
    if std::env::var("WEIR_SKIP_SLURM_TESTS").as_deref() == Ok("1") {
        eprintln!("*** SKIPPED: no Slurm to test against ({why}); WEIR_SKIP_SLURM_TESTS=1 ***");
        return None;
    }
    panic!("this test needs a real Slurm with slurmrestd (WEIR_SKIP_SLURM_TESTS=1 to skip): {why}");
}

/// A job with `gang: true`: its stages that become ready together (here both, at its start)
/// start as one gang, 2 tasks of one stage and 1 of the other.
#[test]
fn a_gang_jobs_first_stages_start_as_one_gang() {
    let stages = "          - {name: left, tasks: 2, max_attempts: 1, resources: {cpu: 1000, memory: 256m}, command: 'CMD'}\n          - {name: right, tasks: 1, max_attempts: 1, resources: {cpu: 1000, memory: 256m}, command: 'CMD'}\n";
    scenario("serve-gang-job", "        gang: true\n", stages, &["left-0", "left-1", "right-0"], None);
}

/// The scenario of the module's comment, for a gang workflow whose one job has `job` (its
/// settings) and `stages` (each `CMD` the gang task's command) and whose three tasks are
/// `tasks` (`STAGE-INDEX`); on the local backend, or on Slurm (`slurm`: slurmrestd's URL and
/// JWT key).
fn scenario(test: &str, job: &str, stages: &str, tasks: &[&str], slurm: Option<(String, String)>) {
    let scratch = common::Scratch::new(test);
    let dir = scratch.0.clone();
    let d = dir.display().to_string();
    scratch.file("cluster.yaml", CLUSTER);
    let blocker = format!(
        "version: 1\nworkflows:\n  - name: blocker\n    queue: root.default\n    jobs:\n      - name: j\n        stages:\n          - name: hold\n            tasks: 2\n            max_attempts: 1\n            resources: {{cpu: 1000, memory: 256m}}\n            command: 'touch {d}/blocker-$WEIR_TASK_INDEX; while [ ! -e {d}/release-$WEIR_TASK_INDEX ]; do sleep 0.1; done'\n"
    );
    // Each gang task: mark its start, then wait (at most 60 s) until all three have started.
    let command = format!(
        "touch {d}/gang-$WEIR_STAGE-$WEIR_TASK_INDEX; for i in $(seq 600); do [ $(ls {d} | grep -c ^gang-) -ge 3 ] && echo all three started && exit 0; sleep 0.1; done; echo alone; exit 1"
    );
    let gang = format!(
        "version: 1\nworkflows:\n  - name: gang\n    queue: root.default\n    jobs:\n      - name: j\n{job}        stages:\n{}",
        stages.replace("CMD", &command)
    );
    scratch.file("blocker.yaml", &blocker);
    scratch.file("gang.yaml", &gang);
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_weir"));
    match slurm {
        None => serve
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--kill-grace", "1", "--cluster"])
            .arg(dir.join("cluster.yaml")),
        Some((url, key)) => {
            // The same cluster file, its tasks run as Slurm jobs (`placement: backend`: weir's
            // engine decides when, Slurm where).
            scratch.file(
                "server.yaml",
                &format!(
                    "version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: weir-data\nclusters:\n  - name: default\n    file: cluster.yaml\n    backend: {{kind: slurm, url: '{url}', user: root, jwt_key: '{key}', placement: backend, poll_interval_ms: 200, kill_grace_seconds: 1, tag: weirgang{}}}\n",
                    std::process::id()
                ),
            );
            serve.args(["serve", "--config", "server.yaml"])
        }
    };
    let _serve =
        Serve(serve.current_dir(&dir).stdout(Stdio::null()).stderr(log).spawn().expect("weir serve"));
    eventually(&dir, "the server to take the blocker", || {
        client(&dir, port, &["submit", "blocker.yaml"]).status.success()
    });
    eventually(&dir, "both blocker tasks to start", || started(&dir, "blocker-").len() == 2);

    // 1 core free, the gang needs 3: it waits for room for all of it, none of it started.
    let out = client(&dir, port, &["submit", "gang.yaml"]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let gang_id = run_of(&dir, port, "gang")["id"].to_string();
    eventually(&dir, "the gang to wait for room for all of it", || {
        assert_eq!(started(&dir, "gang-"), Vec::<String>::new(), "a gang task started with 1 core free");
        let waits = status(&dir, port, &gang_id)["jobs"][0]["waits"].clone();
        waits.as_array().and_then(|w| w.last()).is_some_and(|w| w["reason"] == "gang_waiting_for_room")
    });
    assert_eq!(started(&dir, "gang-"), Vec::<String>::new(), "a gang task started with 1 core free");
    assert_eq!(attempts_started(&status(&dir, port, &gang_id)), 0);

    // The first blocker ends: 2 cores free, still not the gang's 3. The server handles a
    // task's end and schedules in one pass, stored at once: once the blocker's task shows
    // succeeded, the engine has had its chance to start gang tasks (their attempts would be
    // stored in the same commit).
    std::fs::write(dir.join("release-0"), "").expect("release");
    let blocker_id = run_of(&dir, port, "blocker")["id"].to_string();
    eventually(&dir, "the first blocker to end", || {
        let tasks = status(&dir, port, &blocker_id)["jobs"][0]["tasks"].clone();
        tasks.as_array().is_some_and(|t| t.iter().filter(|t| t["state"] == "succeeded").count() == 1)
    });
    let run = status(&dir, port, &gang_id);
    assert_eq!(attempts_started(&run), 0, "a gang task started with 2 cores free: {run:#}");
    assert_eq!(run["state"], "waiting", "{run:#}");
    assert_eq!(started(&dir, "gang-"), Vec::<String>::new(), "a gang task started with 2 cores free");

    // Room for all three: they start together and each sees the other two running.
    std::fs::write(dir.join("release-1"), "").expect("release");
    eventually(&dir, "the gang run to end", || {
        matches!(run_of(&dir, port, "gang")["state"].as_str(), Some("succeeded" | "failed"))
    });
    let run = status(&dir, port, &gang_id);
    assert_eq!(run["state"], "succeeded", "{run:#}");
    let names: Vec<String> = tasks.iter().map(|t| format!("gang-{t}")).collect();
    assert_eq!(started(&dir, "gang-"), names);
    for t in tasks {
        let out = client(&dir, port, &["logs", &gang_id, &t.replace('-', ".")]);
        assert_eq!(common::text(&out.stdout), "all three started\n", "task {t}");
    }
    let blocker = run_of(&dir, port, "blocker");
    assert_eq!(blocker["state"], "succeeded", "{blocker}");
}
