//! Outputs through the committer, end to end with the real `weir serve` binary, its tasks
//! running `weir commit-helper put` as the unprivileged task user, on the local store and on
//! moto's S3 server (from PyPI, `pip install 'moto[server]==5.2.1'`, started on a loopback port
//! and stopped by pid):
//! - a stage of three tasks writes a partition: once the run succeeds, the manifest lists every
//!   file with its size and every file is there;
//! - a failed, a killed and a retried attempt leave nothing in the output, and no multipart
//!   upload is left (ListMultipartUploads is empty; the sweeper aborts an orphan upload);
//! - two runs writing one partition at once: one commits, the other fails with "already
//!   claimed";
//! - a reading stage (`inputs: require: manifest`) is held, with the reason in `explain`,
//!   until the writer commits;
//! - crash tests: `kill -9` of the server between the task commits and the job commit, and in
//!   the middle of the job commit (the test-only pauses `WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT`,
//!   `WEIR_TEST_PAUSE_BEFORE_MANIFEST`); after a restart the commit completes, and a reader
//!   polling the output throughout never sees a manifest whose files are not all there.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weir_commit::{CommitConfig, Committer, Credentials, RetrySettings, S3Config, StoreConfig};

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 64000, memory: 65536}}
queues:
  - {name: default}
";

struct Proc(Child);

impl Proc {
    fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// moto's S3 server with a bucket `lake`.
struct Moto {
    _proc: Proc,
    port: u16,
}

fn moto(dir: &Path) -> Moto {
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("moto.log")).expect("log");
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start moto_server ({e}): pip install 'moto[server]==5.2.1'"));
    let m = Moto { _proc: Proc(child), port };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            s.write_all(
                b"PUT /lake HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .expect("create bucket");
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            assert!(out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200"), "{out}");
            return m;
        }
        assert!(Instant::now() < deadline, "moto_server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn s3_config(port: u16) -> S3Config {
    S3Config {
        endpoint: Some(format!("http://127.0.0.1:{port}")),
        region: "us-east-1".into(),
        bucket: "lake".into(),
        credentials: Credentials {
            access_key_id: "weir-test".into(),
            secret_access_key: "weir-test-secret".into(),
            session_token: None,
        },
        request_timeout_ms: 30_000,
        retry: RetrySettings::default(),
    }
}

/// Where the test's server keeps outputs, and a committer of its own on the same store.
#[derive(Clone)]
enum Where {
    Local(PathBuf),
    S3(u16),
}

impl Where {
    fn server_yaml(&self, dir: &Path, db: Option<&str>) -> String {
        let store = match self {
            Where::Local(root) => format!("  local: {{root: {}}}\n", root.display()),
            Where::S3(port) => {
                std::fs::write(
                    dir.join("creds"),
                    "[default]\naws_access_key_id = weir-test\naws_secret_access_key = weir-test-secret\n",
                )
                .expect("creds");
                format!(
                    "  s3: {{endpoint: \"http://127.0.0.1:{port}\", region: us-east-1, bucket: lake, credentials_file: creds}}\n"
                )
            }
        };
        let db = db.map(|u| format!("db: \"{u}\"\n")).unwrap_or_default();
        format!(
            "version: 1\ndata_dir: data\n{db}clusters:\n  - {{name: default, file: cluster.yaml}}\nobject_store:\n{store}  sweep_every_seconds: 1\n  sweep_after_seconds: 2\n"
        )
    }

    fn committer(&self) -> Committer {
        let store = match self {
            Where::Local(root) => StoreConfig::Local { root: root.join("lake") },
            Where::S3(port) => StoreConfig::S3(s3_config(*port)),
        };
        Committer::new(&store, CommitConfig::default()).expect("committer")
    }
}

struct Server {
    dir: PathBuf,
    port: u16,
    proc: Option<Proc>,
}

impl Server {
    fn start(dir: &Path, place: &Where, env: &[(&str, &Path)]) -> Server {
        Server::start_on(dir, place, env, None)
    }

    fn start_on(dir: &Path, place: &Where, env: &[(&str, &Path)], db: Option<&str>) -> Server {
        std::fs::write(dir.join("server.yaml"), place.server_yaml(dir, db)).expect("server file");
        let mut s = Server { dir: dir.to_path_buf(), port: common::free_port(), proc: None };
        s.spawn(env);
        s
    }

    fn spawn(&mut self, env: &[(&str, &Path)]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("serve.log"))
            .expect("log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
        cmd.args(["serve", "--config"])
            .arg(self.dir.join("server.yaml"))
            .args(["--listen", &format!("127.0.0.1:{}", self.port), "--lease", "1"])
            .env_remove("WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT")
            .env_remove("WEIR_TEST_PAUSE_BEFORE_MANIFEST")
            .env_remove("WEIR_TEST_PAUSE_BEFORE_VERDICT")
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.proc = Some(Proc(cmd.spawn().expect("start weir serve")));
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn ready(&self) -> String {
        let http = reqwest::Client::new();
        for _ in 0..600 {
            if http.get(format!("{}/readyz", self.base())).send().await.is_ok_and(|r| r.status().is_success())
            {
                let t = std::fs::read_to_string(self.dir.join("data").join("admin.token")).expect("token");
                return t.trim().to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("weir serve did not get ready; see {}", self.dir.join("serve.log").display());
    }
}

fn scratch(tag: &str) -> PathBuf {
    weir_server::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("weir-commit-serve-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    common::open_to_tasks(&dir);
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).expect("cluster file");
    dir
}

/// A writer of `s3://lake/sales/dt=DATE/`: `tasks` tasks, each `script` then putting
/// `part-$WEIR_TASK_INDEX.csv` (task 0's is 6 MiB: two parts).
fn writer(tasks: u32, script: &str, max_attempts: u32) -> Value {
    named_writer("sales", tasks, script, max_attempts)
}

fn named_writer(name: &str, tasks: u32, script: &str, max_attempts: u32) -> Value {
    let weir = env!("CARGO_BIN_EXE_weir");
    let cmd = format!(
        "set -e; f=part-$WEIR_TASK_INDEX-$WEIR_ATTEMPT.csv; \
         if [ $WEIR_TASK_INDEX = 0 ]; then head -c 6291456 /dev/zero | tr '\\0' x > $f; \
         else printf 'id,run\\n%s,%s\\n' $WEIR_TASK_INDEX $WEIR_RUN_ID > $f; fi; \
         {weir} commit-helper put $f --as part-$WEIR_TASK_INDEX.csv; {script}"
    );
    json!({"name": name, "queue": "root.default",
           "jobs": [{"name": "j", "stages": [{"name": "write", "tasks": tasks,
                     "resources": {"cpu": 100, "memory": 64}, "command": cmd, "max_attempts": max_attempts,
                     "outputs": [{"uri": "s3://lake/sales/dt={{logical_date}}/", "format": "csv"}]}]}]})
}

async fn submit(base: &str, token: &str, wf: &Value, date: &str) -> i64 {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/runs"))
        .bearer_auth(token)
        .json(&json!({"workflow": wf, "logical_date": date}))
        .send()
        .await
        .expect("submit");
    let status = r.status();
    let v: Value = r.json().await.expect("json");
    assert_eq!(status.as_u16(), 201, "{v}");
    v["id"].as_i64().expect("id")
}

async fn get(base: &str, token: &str, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json")
}

/// Waits for the run's end; returns (state, reason).
async fn finished(base: &str, token: &str, id: i64) -> (String, String) {
    let start = Instant::now();
    loop {
        let v = get(base, token, &format!("/v1/runs/{id}")).await;
        let state = v["state"].as_str().unwrap_or("").to_string();
        if ["succeeded", "failed", "killed"].contains(&state.as_str()) {
            return (state, v["reason"].as_str().unwrap_or("").to_string());
        }
        assert!(start.elapsed() < Duration::from_secs(120), "run {id} still {state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every object of the partition, by name (without the prefix).
async fn objects(c: &Committer, date: &str) -> Vec<(String, u64)> {
    let prefix = format!("sales/dt={date}/");
    c.store()
        .list(&prefix)
        .await
        .expect("list")
        .into_iter()
        .map(|o| (o.key[prefix.len()..].to_string(), o.size))
        .collect()
}

async fn uploads(c: &Committer) -> usize {
    c.store().list_uploads("").await.expect("list uploads").len()
}

/// Polls until no multipart upload is left (the aborts run in the background).
async fn no_uploads_left(c: &Committer) {
    let start = Instant::now();
    while uploads(c).await > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "uploads left: {:?}",
            c.store().list_uploads("").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn scenarios(tag: &str, place: Where, dir: &Path) {
    let server = Server::start(dir, &place, &[]);
    let token = server.ready().await;
    let base = server.base();
    let c = place.committer();

    // On S3, an output in a bucket the server's store does not serve is refused at submission,
    // naming the field (not at the first attempt's start).
    if let Where::S3(_) = place {
        let mut elsewhere = writer(1, "true", 1);
        elsewhere["jobs"][0]["stages"][0]["outputs"][0]["uri"] =
            json!("s3://other-bucket/sales/dt={{logical_date}}/");
        let body = json!({"workflow": elsewhere, "logical_date": "2026-10-01"});
        let (status, e) = post(&base, &token, "/v1/runs", &body).await;
        assert_eq!(status, 400, "{e}");
        assert_eq!(e["error"]["field"], "workflow.jobs.j.stages.write.outputs[0].uri", "{e}");
        assert!(e.to_string().contains("bucket `other-bucket`") && e.to_string().contains("`lake`"), "{e}");
    }

    // A reader submitted first is held until the partition is committed.
    let reader = json!({"name": "report", "queue": "root.default",
        "jobs": [{"name": "j", "stages": [{"name": "read", "tasks": 1, "resources": {"cpu": 100, "memory": 64},
                  "command": "true",
                  "inputs": [{"uri": "s3://lake/sales/dt={{logical_date}}/", "require": "manifest"}]}]}]});
    let read_id = submit(&base, &token, &reader, "2026-11-01").await;
    let start = Instant::now();
    loop {
        let e = get(&base, &token, &format!("/v1/runs/{read_id}/explain")).await;
        let text = e["jobs"][0]["explanation"].as_str().unwrap_or("").to_string();
        if text.contains("held until its inputs are complete") {
            assert!(text.contains("no _weir_manifest.json"), "{text}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{tag}: no hold in explain: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Success: manifest and all files, each of its size.
    let id = submit(&base, &token, &writer(3, "true", 1), "2026-11-01").await;
    assert_eq!(finished(&base, &token, id).await, ("succeeded".into(), String::new()), "{tag}");
    let m = c.check_output("sales/dt=2026-11-01/").await.expect("a whole output");
    assert_eq!(m.run_id, id.to_string());
    assert_eq!(m.partitions, vec!["dt=2026-11-01".to_string()]);
    let names: Vec<(&str, u64)> = m.files.iter().map(|f| (f.name.as_str(), f.size)).collect();
    assert_eq!(names[0], ("part-0.csv", 6_291_456), "{tag}");
    assert_eq!(names.iter().map(|n| n.0).collect::<Vec<_>>(), ["part-0.csv", "part-1.csv", "part-2.csv"]);
    assert!(m.files[0].etag.ends_with("-1") || m.files[0].etag.ends_with("-2"), "{:?}", m.files[0]);
    let listed: Vec<String> = objects(&c, "2026-11-01").await.into_iter().map(|o| o.0).collect();
    for f in &m.files {
        assert!(listed.contains(&f.name), "{tag}: {} listed in the manifest but absent", f.name);
    }
    // The reader ran once the output was whole; its wait is on the run's record, with why.
    assert_eq!(finished(&base, &token, read_id).await.0, "succeeded", "{tag}");
    let run = get(&base, &token, &format!("/v1/runs/{read_id}")).await;
    let waits = run["jobs"][0]["waits"].as_array().cloned().unwrap_or_default();
    assert!(
        waits.iter().any(|w| w["reason"] == "inputs"
            && w["detail"].as_str().is_some_and(|d| d.contains("no _weir_manifest.json"))
            && w["to_ms"].is_i64()),
        "{tag}: no closed `inputs` wait on the reader's job: {waits:?}"
    );
    no_uploads_left(&c).await;

    // Failed: task 1 fails after its put; nothing appears, nothing is left.
    let id =
        submit(&base, &token, &writer(2, "[ $WEIR_TASK_INDEX = 1 ] && exit 3; true", 1), "2026-11-02").await;
    let (state, reason) = finished(&base, &token, id).await;
    assert_eq!(state, "failed", "{tag}: {reason}");
    assert_eq!(objects(&c, "2026-11-02").await, vec![], "{tag}: a failed run left objects");
    no_uploads_left(&c).await;

    // Retried: attempt 1 of every task fails after its put, attempt 2 succeeds; the
    // manifest lists the second attempts' files only, once each.
    let id =
        submit(&base, &token, &writer(2, "[ $WEIR_ATTEMPT = 1 ] && exit 4; true", 2), "2026-11-03").await;
    assert_eq!(finished(&base, &token, id).await.0, "succeeded", "{tag}");
    let m = c.check_output("sales/dt=2026-11-03/").await.expect("whole");
    assert_eq!(m.files.len(), 2);
    assert_eq!(
        objects(&c, "2026-11-03").await.into_iter().filter(|o| !o.0.starts_with("_weir")).count(),
        2,
        "{tag}: a failed attempt left an object"
    );
    no_uploads_left(&c).await;

    // Killed while its tasks run (after their puts): nothing appears, nothing is left.
    let id = submit(&base, &token, &writer(2, "sleep 60", 1), "2026-11-04").await;
    let start = Instant::now();
    while c.store().list_uploads("sales/dt=2026-11-04/").await.expect("uploads").len() < 2 {
        if start.elapsed() > Duration::from_secs(60) {
            let run = get(&base, &token, &format!("/v1/runs/{id}")).await;
            panic!("{tag}: the tasks never uploaded; the run: {run}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/runs/{id}/kill"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("kill");
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(finished(&base, &token, id).await.0, "killed", "{tag}");
    no_uploads_left(&c).await;
    assert_eq!(objects(&c, "2026-11-04").await, vec![], "{tag}: a killed run left objects");

    // Two runs writing one partition at once (two workflows: weir keeps one active run per
    // workflow and date): one commits, the other is refused cleanly.
    let a = submit(&base, &token, &writer(2, "true", 1), "2026-11-05").await;
    let b = submit(&base, &token, &named_writer("sales-backfill", 2, "true", 1), "2026-11-05").await;
    let (ra, rb) = (finished(&base, &token, a).await, finished(&base, &token, b).await);
    let (winner, loser) = if ra.0 == "succeeded" { ((a, ra), (b, rb)) } else { ((b, rb), (a, ra)) };
    assert_eq!(winner.1 .0, "succeeded", "{tag}: {winner:?} {loser:?}");
    assert_eq!(loser.1 .0, "failed", "{tag}");
    assert!(
        loser.1 .1.contains("already claimed by run") && loser.1 .1.contains("job commit is refused"),
        "{tag}: {}",
        loser.1 .1
    );
    let m = c.check_output("sales/dt=2026-11-05/").await.expect("whole");
    assert_eq!(m.run_id, winner.0.to_string());
    no_uploads_left(&c).await;

    // The sweeper aborts an upload nobody recorded (a task killed between creating it and
    // recording it). moto reports every upload as initiated in 2010, so it is old at once;
    // the local store's is old after sweep_after_seconds (2 s).
    let orphan = c.store().create_upload("sales/dt=2026-11-06/orphan.csv").await.expect("orphan");
    assert!(uploads(&c).await >= 1, "{orphan}");
    no_uploads_left(&c).await;

    let metrics = reqwest::Client::new()
        .get(format!("{base}/metrics"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    eprintln!(
        "{tag}: {}",
        metrics
            .lines()
            .filter(|l| l.contains("object_store") || l.contains("job_commits") || l.contains("swept"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(metrics.contains("weir_job_commits_total{reason=\"refused\"} 1"), "{tag}: {metrics}");
    assert!(metrics.contains("weir_uploads_swept_total"), "{tag}");
    if matches!(place, Where::S3(_)) {
        // The server's S3 client counted its requests (the counters are exported every 2 s).
        let start = Instant::now();
        loop {
            let text = reqwest::Client::new()
                .get(format!("{base}/metrics"))
                .bearer_auth(&token)
                .send()
                .await
                .expect("metrics")
                .text()
                .await
                .expect("text");
            let requests: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("weir_object_store_requests_total "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0);
            if requests > 0.0 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{tag}: no object store requests counted");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_on_the_local_store() {
    let dir = scratch("local");
    scenarios("local", Where::Local(dir.join("outputs")), &dir).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_on_moto_s3() {
    let dir = scratch("s3");
    let m = moto(&dir);
    scenarios("s3", Where::S3(m.port), &dir).await;
    // No task_credentials_file: the tasks got the server's own key, and the operator was told.
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("serve.log");
    assert!(
        log.contains("warning: object_store.s3 has no task_credentials_file")
            && log.contains("server's own credentials for bucket `lake`"),
        "{log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills the server at the pause `var` names, restarts it, and checks the commit completes
/// while a reader polling the output never sees a manifest with a file missing.
async fn crash_at(tag: &str, place: Where, dir: &Path, var: &str) {
    crash_on(tag, place, dir, var, None).await;
}

/// As [`crash_at`], the server's store on PostgreSQL (a fresh database) when
/// `WEIR_TEST_POSTGRES_URL` is set.
async fn crash_on_postgres(tag: &str, place: Where, dir: &Path, var: &str) {
    match std::env::var("WEIR_TEST_POSTGRES_URL") {
        Ok(url) => {
            let name = format!("weir_commit_{}_{}", tag.replace('-', "_"), std::process::id());
            let db = weir_store::create_postgres_database(&url, &name).await.expect("database");
            crash_on(tag, place, dir, var, Some(&db)).await;
        }
        Err(_) => eprintln!("\n*** SKIPPED on PostgreSQL: WEIR_TEST_POSTGRES_URL is not set ***\n"),
    }
}

async fn crash_on(tag: &str, place: Where, dir: &Path, var: &str, db: Option<&str>) {
    let pause = dir.join(format!("paused-{tag}"));
    let mut server = Server::start_on(dir, &place, &[(var, &pause)], db);
    let token = server.ready().await;
    let base = server.base();
    let c = place.committer();
    let stop = Arc::new(AtomicBool::new(false));
    let whole_seen = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (c, stop, whole_seen) = (c.clone(), stop.clone(), whole_seen.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(m) = c.read_manifest("sales/dt=2026-12-01/").await.expect("read") {
                    // A manifest is the commit point: everything it lists is there, whole.
                    let checked = c.check_output("sales/dt=2026-12-01/").await;
                    assert!(checked.is_ok(), "a partial output behind a manifest: {checked:?} {m:?}");
                    whole_seen.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let id = submit(&base, &token, &writer(3, "true", 1), "2026-12-01").await;
    let start = Instant::now();
    while !pause.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "{tag}: the server never paused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(c.read_manifest("sales/dt=2026-12-01/").await.expect("read").is_none());
    let visible = objects(&c, "2026-12-01").await.into_iter().filter(|o| o.0.starts_with("part-")).count();
    if var == "WEIR_TEST_PAUSE_BEFORE_MANIFEST" {
        // In the middle: every upload completed, the manifest not written.
        assert_eq!(visible, 3, "{tag}: the pause came before the uploads were completed");
    } else {
        assert_eq!(visible, 0, "{tag}: objects completed before the job commit");
    }
    server.proc.as_mut().expect("running").kill9();
    server.spawn(&[]);
    let token = server.ready().await;
    assert_eq!(finished(&base, &token, id).await.0, "succeeded", "{tag}");
    let m = c.check_output("sales/dt=2026-12-01/").await.expect("whole after the restart");
    assert_eq!(m.files.len(), 3);
    assert_eq!(m.run_id, id.to_string());
    no_uploads_left(&c).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    reader.await.expect("the reader never saw a partial output");
    assert!(whole_seen.load(Ordering::Relaxed) > 0, "the reader never saw the output");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_between_task_commit_and_job_commit_then_the_commit_completes() {
    let dir = scratch("crash-between");
    crash_at("local-between", Where::Local(dir.join("outputs")), &dir, "WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT")
        .await;
    let dir2 = scratch("crash-between-s3");
    let m = moto(&dir2);
    crash_at("s3-between", Where::S3(m.port), &dir2, "WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT").await;
    let dir3 = scratch("crash-between-pg");
    crash_on_postgres(
        "pg-between",
        Where::Local(dir3.join("outputs")),
        &dir3,
        "WEIR_TEST_PAUSE_BEFORE_JOB_COMMIT",
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir3);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_in_the_middle_of_a_job_commit_then_it_completes() {
    let dir = scratch("crash-middle");
    crash_at("local-middle", Where::Local(dir.join("outputs")), &dir, "WEIR_TEST_PAUSE_BEFORE_MANIFEST")
        .await;
    let dir2 = scratch("crash-middle-s3");
    let m = moto(&dir2);
    crash_at("s3-middle", Where::S3(m.port), &dir2, "WEIR_TEST_PAUSE_BEFORE_MANIFEST").await;
    let dir3 = scratch("crash-middle-pg");
    crash_on_postgres(
        "pg-middle",
        Where::Local(dir3.join("outputs")),
        &dir3,
        "WEIR_TEST_PAUSE_BEFORE_MANIFEST",
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir3);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

/// What a task of a stage with outputs can reach on the local store when the server is root
/// and tasks run as the unprivileged task user: not the output (only the job commit writes
/// there), not other attempts' uploads, not the server's data directory; and a part it
/// replaces with a link to a file of the server's is refused by the job commit, which then
/// fails the run with nothing in the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cannot_reach_past_its_staging_area() {
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("\n*** SKIPPED: the server runs tasks as another user only when it is root ***\n");
        return;
    }
    let dir = scratch("isolation");
    let root = dir.join("outputs");
    let place = Where::Local(root.clone());
    let server = Server::start(&dir, &place, &[]);
    let token = server.ready().await;
    let base = server.base();
    let c = place.committer();
    let weir = env!("CARGO_BIN_EXE_weir");
    let data = dir.join("data");
    // Each probe must fail for the task to go on.
    let probe = format!(
        "root=${{WEIR_COMMIT_STORE#file://}}; \
         if echo x > $root/sales/evil.csv; then echo wrote-output; exit 10; fi; \
         if ls $root/.weir-uploads > /dev/null; then echo listed-uploads; exit 11; fi; \
         if cat {data}/admin.token; then echo read-token; exit 12; fi; \
         set -e; printf 'a\\n' > p.csv; {weir} commit-helper put p.csv; \
         id=$(sed -n 's/.*\"upload_id\": *\"\\([0-9a-f]*\\)\".*/\\1/p' $root/${{WEIR_COMMIT_STAGING}}files/p.csv.upload.json); \
         test -n \"$id\"; rm $root/.weir-uploads/$id/part-000001; \
         ln -s {data}/admin.token $root/.weir-uploads/$id/part-000001",
        data = data.display()
    );
    let wf = json!({"name": "probe", "queue": "root.default",
        "jobs": [{"name": "j", "stages": [{"name": "write", "tasks": 1, "resources": {"cpu": 100, "memory": 64},
                  "command": probe, "max_attempts": 1,
                  "outputs": [{"uri": "s3://lake/sales/dt={{logical_date}}/", "format": "csv"}]}]}]});
    let id = submit(&base, &token, &wf, "2026-11-20").await;
    let (state, reason) = finished(&base, &token, id).await;
    let logs = std::fs::read_dir(data.join("logs").join(format!("run-{id}")))
        .map(|d| {
            d.flatten()
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    eprintln!("probe run: {state}: {reason}");
    assert_eq!(state, "failed", "{reason}\n{logs}");
    assert!(reason.contains("job commit failed") && reason.contains("part-000001"), "{reason}\n{logs}");
    assert!(
        !logs.contains("wrote-output") && !logs.contains("listed-uploads") && !logs.contains("read-token")
    );
    assert_eq!(objects(&c, "2026-11-20").await, vec![], "nothing may appear");
    assert!(!root.join("lake").join("sales").join("evil.csv").exists());
    no_uploads_left(&c).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A report writer: each task puts the same rows whatever the run (`rows` decides them), so a
/// dry-run of it produces production's output again.
fn report(rows: &str) -> Value {
    let weir = env!("CARGO_BIN_EXE_weir");
    // Each task its own local file: the tasks of a run share its working folder, and a file
    // both write could be truncated by one while the other's helper reads it (CI: one side's
    // output had an empty part — 19 bytes against 38).
    let cmd = format!(
        "set -e; f=part-$WEIR_TASK_INDEX.csv; printf 'region,total\\n{rows}\\n' > $f; \
         {weir} commit-helper put $f --as $f"
    );
    json!({"name": "report", "queue": "root.default",
           "jobs": [{"name": "j", "stages": [{"name": "write", "tasks": 2,
                     "resources": {"cpu": 100, "memory": 64}, "command": cmd,
                     "outputs": [{"uri": "s3://lake/report/dt={{logical_date}}/", "format": "csv"}]}]}]})
}

async fn post(base: &str, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("post");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The migration table's verdict of dry-run `run`, once the worker recorded it.
async fn verdict_of(base: &str, token: &str, run: i64) -> Value {
    let start = Instant::now();
    loop {
        let v = get(base, token, "/v1/migrations").await;
        if let Some(found) = v["verdicts"].as_array().into_iter().flatten().find(|x| x["run_id"] == run) {
            return found.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no verdict for dry-run {run}: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Issue 24's dry-run acceptance, end to end: a dry-run of a workflow on a second cluster
/// writes to the shadow prefix only, its verdict against production lands in the migration
/// table, approving it moves the workflow's route, and the next run goes to the new cluster; a
/// dry-run whose output differs is `different` and cannot be approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_on_another_cluster_is_compared_approved_and_moves_the_route() {
    let dir = scratch("dry-run");
    let root = dir.join("objects");
    let place = Where::Local(root.clone());
    let two_clusters = place.server_yaml(&dir, None).replace(
        "  - {name: default, file: cluster.yaml}\n",
        "  - {name: default, file: cluster.yaml}\n  - {name: staging, file: cluster.yaml}\n",
    );
    std::fs::write(dir.join("server.yaml"), two_clusters).expect("server file");
    let mut server = Server { dir: dir.clone(), port: common::free_port(), proc: None };
    server.spawn(&[]);
    let token = server.ready().await;
    let base = server.base();
    let c = place.committer();
    let date = "2026-11-27";

    // Production: the workflow has no route, so it runs on `default`.
    let prod = submit(&base, &token, &report("eu,42"), date).await;
    assert_eq!(finished(&base, &token, prod).await.0, "succeeded");
    let production = objects_at(&c, &format!("report/dt={date}/")).await;
    assert!(production.iter().any(|(k, _)| k == "_weir_manifest.json"), "{production:?}");

    // The dry-run on staging: beside production (its own uniqueness key), output in the shadow.
    let (status, created) = post(
        &base,
        &token,
        "/v1/runs",
        &json!({"workflow": report("eu,42"), "logical_date": date, "dry_run": true, "cluster": "staging"}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["cluster"], "staging");
    let dry = created["id"].as_i64().expect("id");
    assert_eq!(finished(&base, &token, dry).await.0, "succeeded");
    let shadow = objects_at(&c, &format!("_weir_dryrun/{dry}/report/dt={date}/")).await;
    assert!(shadow.iter().any(|(k, _)| k == "_weir_manifest.json"), "{shadow:?}");
    assert_eq!(objects_at(&c, &format!("report/dt={date}/")).await, production, "production untouched");

    let verdict = verdict_of(&base, &token, dry).await;
    assert_eq!(verdict["verdict"], "identical", "{verdict}");
    assert_eq!(verdict["cluster"], "staging");
    assert_eq!(verdict["production_run"], prod.to_string());

    // A dry-run whose rows differ: `different`, and approval refuses while it is the newest.
    let (_, other) = post(
        &base,
        &token,
        "/v1/runs",
        &json!({"workflow": report("eu,41"), "logical_date": date, "dry_run": true, "cluster": "staging"}),
    )
    .await;
    let other = other["id"].as_i64().expect("id");
    assert_eq!(finished(&base, &token, other).await.0, "succeeded");
    assert_eq!(verdict_of(&base, &token, other).await["verdict"], "different");
    let (status, refused) =
        post(&base, &token, "/v1/migrations/report/approve", &json!({"cluster": "staging"})).await;
    assert_eq!(status, 409, "{refused}");

    // Another identical dry-run, approved: the route moves and the next run lands on staging.
    let (_, again) = post(
        &base,
        &token,
        "/v1/runs",
        &json!({"workflow": report("eu,42"), "logical_date": date, "dry_run": true, "cluster": "staging"}),
    )
    .await;
    let again = again["id"].as_i64().expect("id");
    assert_eq!(finished(&base, &token, again).await.0, "succeeded");
    assert_eq!(verdict_of(&base, &token, again).await["verdict"], "identical");
    let (status, approved) =
        post(&base, &token, "/v1/migrations/report/approve", &json!({"cluster": "staging"})).await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["route"]["cluster"], "staging");
    let routes = get(&base, &token, "/v1/routes").await;
    assert!(
        routes["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["key"] == "workflow:report" && r["cluster"] == "staging"),
        "{routes}"
    );
    let (status, next) =
        post(&base, &token, "/v1/runs", &json!({"workflow": report("eu,42"), "logical_date": "2026-11-28"}))
            .await;
    assert_eq!(status, 201, "{next}");
    assert_eq!(next["cluster"], "staging", "{next}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server killed (`kill -9`) after a dry-run's final state was stored and before its verdict
/// (the test-only pause `WEIR_TEST_PAUSE_BEFORE_VERDICT`): the migration table has nothing for
/// it; the next start finds the dry-run over without a verdict and records one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_between_a_dry_runs_end_and_its_verdict_then_the_restart_records_it() {
    let dir = scratch("verdict-crash");
    let place = Where::Local(dir.join("objects"));
    let pause = dir.join("paused-verdict");
    let mut server = Server::start(&dir, &place, &[("WEIR_TEST_PAUSE_BEFORE_VERDICT", &pause)]);
    let token = server.ready().await;
    let base = server.base();
    let date = "2026-11-29";
    let prod = submit(&base, &token, &report("eu,42"), date).await;
    assert_eq!(finished(&base, &token, prod).await.0, "succeeded");
    let (status, created) = post(
        &base,
        &token,
        "/v1/runs",
        &json!({"workflow": report("eu,42"), "logical_date": date, "dry_run": true}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let dry = created["id"].as_i64().expect("id");
    assert_eq!(finished(&base, &token, dry).await.0, "succeeded");
    let start = Instant::now();
    while !pause.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "the server never paused before the verdict");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let table = get(&base, &token, "/v1/migrations").await;
    assert_eq!(table["verdicts"].as_array().map(Vec::len), Some(0), "{table}");
    server.proc.as_mut().expect("running").kill9();
    server.spawn(&[]);
    let token = server.ready().await;
    let verdict = verdict_of(&base, &token, dry).await;
    assert_eq!(verdict["verdict"], "identical", "{verdict}");
    assert_eq!(verdict["production_run"], prod.to_string(), "{verdict}");
    let said = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    assert!(said.contains(&format!("dry-run {dry} ended without a verdict")), "{said}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every object under `prefix`, by name (without the prefix), sorted.
async fn objects_at(c: &Committer, prefix: &str) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = c
        .store()
        .list(prefix)
        .await
        .expect("list")
        .into_iter()
        .map(|o| (o.key[prefix.len()..].to_string(), o.size))
        .collect();
    v.sort();
    v
}
