//! Outputs through the committer with the real `weir serve` binary, beyond one output on the
//! local backend (tests/serve_commit.rs has that): tasks running `weir commit-helper put` as
//! the unprivileged task user, outputs on the local store.
//! - a stage with two outputs, in two buckets: both committed at once when the run succeeds;
//!   nothing in either when a task fails; when one output is already claimed by another run,
//!   the run is refused before the other output shows anything; a dry-run compares both;
//! - the comparison's settings as a workload gives them: `csv_header: false` (a csv without a
//!   header line compares its first line as a row) and `size_tolerance` (bytes within it are
//!   `equivalent`, beyond it `different`);
//! - a stage with an output on a cluster whose backend is a real Slurm (the shared engines'
//!   `slurm/up.sh`; `WEIR_SKIP_SLURM_TESTS=1` skips it loudly): its tasks run as Slurm jobs and
//!   write through the helper, and the output is committed; and the same with a `spark-local`
//!   cluster (a real PySpark, as tests/serve_spark.rs uses it): the Spark driver writes its
//!   result through the helper.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weir_commit::{CommitConfig, Committer, StoreConfig};

const CLUSTER: &str = "version: 1
nodes:
  - {count: 2, resources: {cpu: 4000, memory: 4096}}
queues:
  - {name: default}
";

struct Server {
    dir: PathBuf,
    port: u16,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `weir serve` in `dir` with `clusters` (YAML list items) and the local store at
    /// `dir/objects`.
    fn start(dir: &Path, clusters: &str) -> Server {
        Server::start_with(dir, clusters, &[])
    }

    /// [`Server::start`] with more arguments for `weir serve`.
    fn start_with(dir: &Path, clusters: &str, args: &[&str]) -> Server {
        Server::start_env(dir, clusters, args, &[])
    }

    /// [`Server::start_with`] with environment variables for the server.
    fn start_env(dir: &Path, clusters: &str, args: &[&str], env: &[(&str, &Path)]) -> Server {
        let port = common::free_port();
        std::fs::write(
            dir.join("server.yaml"),
            format!(
                "version: 1\ndata_dir: data\nclusters:\n{clusters}object_store:\n  local: {{root: {}}}\n",
                dir.join("objects").display()
            ),
        )
        .expect("server file");
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("serve.log")).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config"])
            .arg(dir.join("server.yaml"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--lease", "1"])
            .args(args)
            .current_dir(dir)
            .env_remove("WEIR_TEST_PAUSE_BEFORE_MANIFEST")
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start weir serve");
        Server { dir: dir.to_path_buf(), port, child }
    }

    /// `kill -9` of the server, then the same server again (same port, data and store).
    fn kill9_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = std::fs::OpenOptions::new().append(true).open(self.dir.join("serve.log")).expect("log");
        self.child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config"])
            .arg(self.dir.join("server.yaml"))
            .args(["--listen", &format!("127.0.0.1:{}", self.port), "--lease", "1"])
            .current_dir(&self.dir)
            .env_remove("WEIR_TEST_PAUSE_BEFORE_MANIFEST")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("restart weir serve");
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn ready(&self) -> String {
        let http = reqwest::Client::new();
        for _ in 0..1200 {
            if http.get(format!("{}/readyz", self.base())).send().await.is_ok_and(|r| r.status().is_success())
            {
                let t = std::fs::read_to_string(self.dir.join("data").join("admin.token")).expect("token");
                return t.trim().to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("weir serve did not get ready; see {}", self.dir.join("serve.log").display());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }

    /// A committer of the test's own on `bucket` of the server's local store.
    fn bucket(&self, bucket: &str) -> Committer {
        let root = self.dir.join("objects").join(bucket);
        Committer::new(&StoreConfig::Local { root }, CommitConfig::default()).expect("committer")
    }
}

fn scratch(tag: &str) -> PathBuf {
    weir_server::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("weir-commit-outputs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    common::open_to_tasks(&dir);
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).expect("cluster file");
    dir
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

/// Submits `wf` for `date` (`extra`: more fields of the request, e.g. `dry_run`); its id.
async fn submit(base: &str, token: &str, wf: &Value, date: &str, extra: Value) -> i64 {
    let mut body = json!({"workflow": wf, "logical_date": date});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (status, v) = post(base, token, "/v1/runs", &body).await;
    assert_eq!(status, 201, "{v}");
    v["id"].as_i64().expect("id")
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
        assert!(start.elapsed() < Duration::from_secs(180), "run {id} still {state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The migration table's verdict of dry-run `run`, once the worker recorded it.
async fn verdict_of(base: &str, token: &str, run: i64) -> Value {
    let start = Instant::now();
    loop {
        let v = get(base, token, "/v1/migrations?differences=true").await;
        if let Some(found) = v["verdicts"].as_array().into_iter().flatten().find(|x| x["run_id"] == run) {
            return found.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no verdict for dry-run {run}: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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

/// Polls until no multipart upload is left in `c`'s bucket (aborts run in the background).
async fn no_uploads_left(c: &Committer) {
    let start = Instant::now();
    while !c.store().list_uploads("").await.expect("list uploads").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "uploads left: {:?}",
            c.store().list_uploads("").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A workflow `name` of one stage of `tasks` tasks with two outputs: csv rows in
/// `s3://lake/sales/dt=DATE/` (output 0) and a jsonl count in `s3://audit/counts/dt=DATE/`
/// (output 1, put with `--output 1`); `count` is what the jsonl says, `script` runs last.
fn two_outputs(name: &str, tasks: u32, count: &str, script: &str) -> Value {
    let weir = env!("CARGO_BIN_EXE_weir");
    let cmd = format!(
        "set -e; r=rows-$WEIR_RUN_ID-$WEIR_TASK_INDEX.csv; c=count-$WEIR_RUN_ID-$WEIR_TASK_INDEX.jsonl; \
         printf 'id,task\\n%s,%s\\n' 1 $WEIR_TASK_INDEX > $r; printf '{{\"count\": {count}}}\\n' > $c; \
         \"$WEIR_COMMIT_HELPER\" commit-helper put $r --as part-$WEIR_TASK_INDEX.csv; \
         {weir} commit-helper --output 1 put $c --as count-$WEIR_TASK_INDEX.jsonl; {script}"
    );
    json!({"name": name, "queue": "root.default",
           "jobs": [{"name": "j", "stages": [{"name": "write", "tasks": tasks, "max_attempts": 1,
                     "resources": {"cpu": 100, "memory": 64}, "command": cmd,
                     "outputs": [{"uri": "s3://lake/sales/dt={{logical_date}}/", "format": "csv"},
                                 {"uri": "s3://audit/counts/dt={{logical_date}}/", "format": "jsonl"}]}]}]})
}

/// A stage with two outputs: each is committed whole with its own manifest (same run), a
/// failed task leaves nothing in either, a claim held by another run on one output refuses the
/// run before the other output shows anything, and a dry-run compares both outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_with_two_outputs_commits_both_or_neither() {
    let dir = scratch("two");
    let server = Server::start(&dir, "  - {name: default, file: cluster.yaml}\n");
    let token = server.ready().await;
    let base = server.base();

    // Outputs that overlap are refused at submission, naming the second one.
    let mut overlapping = two_outputs("bad", 1, "1", "true");
    overlapping["jobs"][0]["stages"][0]["outputs"][1]["uri"] =
        json!("s3://lake/sales/dt={{logical_date}}/eu/");
    let (status, e) =
        post(&base, &token, "/v1/runs", &json!({"workflow": overlapping, "logical_date": "2026-12-01"}))
            .await;
    assert_eq!(status, 400, "{e}");
    assert!(e.to_string().contains("outputs[1].uri") && e.to_string().contains("overlaps outputs[0]"), "{e}");

    // Success: both outputs, each with its manifest listing its files.
    let id = submit(&base, &token, &two_outputs("two", 2, "2", "true"), "2026-12-01", json!({})).await;
    assert_eq!(finished(&base, &token, id).await, ("succeeded".into(), String::new()), "{}", server.log());
    let (lake, audit) = (server.bucket("lake"), server.bucket("audit"));
    let sales = lake.check_output("sales/dt=2026-12-01/").await.expect("sales whole");
    let counts = audit.check_output("counts/dt=2026-12-01/").await.expect("counts whole");
    assert_eq!(
        (sales.run_id.as_str(), counts.run_id.as_str()),
        (id.to_string().as_str(), id.to_string().as_str())
    );
    let names = |m: &weir_commit::Manifest| m.files.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&sales), ["part-0.csv", "part-1.csv"]);
    assert_eq!(names(&counts), ["count-0.jsonl", "count-1.jsonl"]);
    assert_eq!(counts.partitions, ["dt=2026-12-01"]);
    // Nothing of either output went to the other's prefix or bucket.
    assert!(objects_at(&lake, "counts/").await.is_empty() && objects_at(&audit, "sales/").await.is_empty());
    no_uploads_left(&lake).await;
    no_uploads_left(&audit).await;

    // Failed: task 1 fails after both its puts; neither output shows anything.
    let id = submit(
        &base,
        &token,
        &two_outputs("two", 2, "2", "[ $WEIR_TASK_INDEX = 1 ] && exit 3; true"),
        "2026-12-02",
        json!({}),
    )
    .await;
    assert_eq!(finished(&base, &token, id).await.0, "failed");
    assert_eq!(objects_at(&lake, "sales/dt=2026-12-02/").await, vec![]);
    assert_eq!(objects_at(&audit, "counts/dt=2026-12-02/").await, vec![]);
    no_uploads_left(&lake).await;
    no_uploads_left(&audit).await;

    // Another run committed the counts of 2026-12-03 first: the two-output run is refused at its
    // claims, so its sales output (claimed first, then released) never shows a file.
    let weir = env!("CARGO_BIN_EXE_weir");
    let counts_only = json!({"name": "counts", "queue": "root.default",
        "jobs": [{"name": "j", "stages": [{"name": "write", "tasks": 1, "resources": {"cpu": 100, "memory": 64},
                  "command": format!("set -e; echo '{{\"count\": 9}}' > c.jsonl; {weir} commit-helper put c.jsonl"),
                  "outputs": [{"uri": "s3://audit/counts/dt={{logical_date}}/", "format": "jsonl"}]}]}]});
    let first = submit(&base, &token, &counts_only, "2026-12-03", json!({})).await;
    assert_eq!(finished(&base, &token, first).await.0, "succeeded");
    let id = submit(&base, &token, &two_outputs("two", 2, "2", "true"), "2026-12-03", json!({})).await;
    let (state, reason) = finished(&base, &token, id).await;
    assert_eq!(state, "failed");
    assert!(
        reason.contains("job commit failed") && reason.contains(&format!("already claimed by run {first}")),
        "{reason}"
    );
    assert_eq!(objects_at(&lake, "sales/dt=2026-12-03/").await, vec![], "the sales output showed something");
    assert_eq!(audit.check_output("counts/dt=2026-12-03/").await.expect("whole").run_id, first.to_string());
    no_uploads_left(&lake).await;
    no_uploads_left(&audit).await;

    // A dry-run compares both outputs: the same rows and counts are identical; another count
    // in output 1 is `different`, and the difference names that output.
    let dry =
        submit(&base, &token, &two_outputs("two", 2, "2", "true"), "2026-12-01", json!({"dry_run": true}))
            .await;
    assert_eq!(finished(&base, &token, dry).await.0, "succeeded");
    assert!(audit.check_output(&format!("_weir_dryrun/{dry}/counts/dt=2026-12-01/")).await.is_ok());
    let v = verdict_of(&base, &token, dry).await;
    let shadow = objects_at(&lake, &format!("_weir_dryrun/{dry}/sales/dt=2026-12-01/")).await;
    assert_eq!(v["verdict"], "identical", "{v}\nshadow: {shadow:?}\n{}", server.log());
    let dry =
        submit(&base, &token, &two_outputs("two", 2, "3", "true"), "2026-12-01", json!({"dry_run": true}))
            .await;
    assert_eq!(finished(&base, &token, dry).await.0, "succeeded");
    let v = verdict_of(&base, &token, dry).await;
    assert_eq!(v["verdict"], "different", "{v}");
    let differences = v["differences"].as_array().cloned().unwrap_or_default();
    assert!(!differences.is_empty(), "{v}");
    assert!(
        differences.iter().all(|d| d["output"] == "counts/dt=2026-12-01/" || d["tolerated"] == true),
        "only output 1 differs: {v}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kill -9` in the middle of a two-output stage's job commit (the test-only pause before the
/// first manifest: both outputs claimed, the first one's uploads completed): after the restart
/// both outputs are committed by the run from their stored states, and a reader polling both
/// throughout never sees a manifest whose files are not all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_in_the_middle_of_a_two_output_commit_then_both_complete() {
    let dir = scratch("two-crash");
    let pause = dir.join("paused");
    let mut server = Server::start_env(
        &dir,
        "  - {name: default, file: cluster.yaml}\n",
        &[],
        &[("WEIR_TEST_PAUSE_BEFORE_MANIFEST", &pause)],
    );
    let token = server.ready().await;
    let base = server.base();
    let (lake, audit) = (server.bucket("lake"), server.bucket("audit"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (lake, audit, stop) = (lake.clone(), audit.clone(), stop.clone());
        tokio::spawn(async move {
            let mut checks = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (c, prefix) in [(&lake, "sales/dt=2026-12-05/"), (&audit, "counts/dt=2026-12-05/")] {
                    // A manifest, once there, lists only files that are there with their size.
                    if c.read_manifest(prefix).await.expect("read").is_some() {
                        c.check_output(prefix).await.expect("a manifest with every file");
                    }
                }
                checks += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            checks
        })
    };
    let id = submit(&base, &token, &two_outputs("two", 2, "2", "true"), "2026-12-05", json!({})).await;
    let start = Instant::now();
    while !pause.exists() {
        assert!(start.elapsed() < Duration::from_secs(120), "never paused: {}", server.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Paused: both claimed, no manifest yet.
    for (c, prefix) in [(&lake, "sales/dt=2026-12-05/"), (&audit, "counts/dt=2026-12-05/")] {
        let names: Vec<String> = objects_at(c, prefix).await.into_iter().map(|o| o.0).collect();
        assert!(names.contains(&"_weir_claim.json".to_string()), "{prefix}: {names:?}");
        assert!(!names.contains(&"_weir_manifest.json".to_string()), "{prefix}: {names:?}");
    }
    server.kill9_and_restart();
    let token = server.ready().await;
    assert_eq!(finished(&base, &token, id).await, ("succeeded".into(), String::new()), "{}", server.log());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.await.expect("reader") > 0);
    // The restarted server committed both (the first one never wrote a manifest).
    let log = server.log();
    let restarted = &log[log.rfind("weir serve: listening on").expect("started")..];
    for uri in ["s3://lake/sales/dt=2026-12-05/", "s3://audit/counts/dt=2026-12-05/"] {
        assert!(restarted.contains(&format!("run {id}: committed {uri}")), "{log}");
    }
    for (c, prefix, files) in [(&lake, "sales/dt=2026-12-05/", 2), (&audit, "counts/dt=2026-12-05/", 2)] {
        let m = c.check_output(prefix).await.expect("whole after the restart");
        assert_eq!((m.run_id.clone(), m.files.len()), (id.to_string(), files), "{prefix}");
    }
    no_uploads_left(&lake).await;
    no_uploads_left(&audit).await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A workflow `name` of one stage writing `body` (printf format) as one file of an output of
/// `format`, with the output's extra fields `settings` (`csv_header`, `size_tolerance`).
fn one_file(name: &str, body: &str, format: &str, settings: Value) -> Value {
    let cmd = format!(
        "set -e; f=f-$WEIR_RUN_ID-$WEIR_TASK_INDEX; printf '{body}' > $f; \"$WEIR_COMMIT_HELPER\" commit-helper put $f --as part-0"
    );
    let mut output = json!({"uri": format!("s3://lake/{name}/dt={{{{logical_date}}}}/"), "format": format});
    if let (Some(o), Some(s)) = (output.as_object_mut(), settings.as_object()) {
        o.extend(s.clone());
    }
    json!({"name": name, "queue": "root.default",
           "jobs": [{"name": "j", "stages": [{"name": "write", "tasks": 1, "max_attempts": 1,
                     "resources": {"cpu": 100, "memory": 64}, "command": cmd, "outputs": [output]}]}]})
}

/// Production writes `prod`, a dry-run of the same workflow writes `shadow`: the verdict.
async fn dry_verdict(
    base: &str,
    token: &str,
    name: &str,
    format: &str,
    settings: Value,
    prod: &str,
    shadow: &str,
) -> Value {
    let date = "2026-12-10";
    let p = submit(base, token, &one_file(name, prod, format, settings.clone()), date, json!({})).await;
    assert_eq!(finished(base, token, p).await.0, "succeeded", "{name}");
    let d =
        submit(base, token, &one_file(name, shadow, format, settings), date, json!({"dry_run": true})).await;
    assert_eq!(finished(base, token, d).await.0, "succeeded", "{name}");
    verdict_of(base, token, d).await
}

/// The comparison's settings reach the verdict through the server: a csv without a header
/// line (`csv_header: false`) whose rows come in another order is equivalent, while the same
/// files read with the default (first line a header) differ by header; bytes within
/// `size_tolerance` are equivalent, beyond it (or without it) different.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_header_and_size_tolerance_decide_dry_run_verdicts() {
    let dir = scratch("settings");
    let server = Server::start(&dir, "  - {name: default, file: cluster.yaml}\n");
    let token = server.ready().await;
    let base = server.base();
    let (rows, reordered) = ("eu,1\\nus,2\\nasia,3\\n", "asia,3\\nus,2\\neu,1\\n");

    let v =
        dry_verdict(&base, &token, "noheader", "csv", json!({"csv_header": false}), rows, reordered).await;
    assert_eq!(v["verdict"], "equivalent", "{v}");
    let v = dry_verdict(&base, &token, "withheader", "csv", json!({}), rows, reordered).await;
    assert_eq!(v["verdict"], "different", "{v}");
    assert!(v.to_string().contains("header"), "the header differs: {v}");

    // 1,000 bytes against 1,005: 0.5% apart.
    let (thousand, more) = ("%01000d", "%01005d");
    let v = dry_verdict(&base, &token, "tolerant", "bytes", json!({"size_tolerance": 0.01}), thousand, more)
        .await;
    assert_eq!(v["verdict"], "equivalent", "{v}");
    let v =
        dry_verdict(&base, &token, "strict", "bytes", json!({"size_tolerance": 0.001}), thousand, more).await;
    assert_eq!(v["verdict"], "different", "{v}");
    let v = dry_verdict(&base, &token, "exact", "bytes", json!({}), thousand, more).await;
    assert_eq!(v["verdict"], "different", "{v}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether a Slurm is there (slurmrestd reachable and its JWT key readable); panics with what to
/// do when it is not, unless `WEIR_SKIP_SLURM_TESTS=1` asks to skip (loudly).
fn slurm() -> Option<(String, String)> {
    let url = std::env::var("WEIR_TEST_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into());
    let key = std::env::var("WEIR_TEST_SLURM_JWT_KEY")
        .unwrap_or_else(|_| "/var/lib/slurm/slurmctld/jwt_hs256.key".into());
    let reachable =
        std::net::TcpStream::connect(url.trim_start_matches("http://").trim_end_matches('/')).is_ok();
    if reachable && Path::new(&key).exists() {
        return Some((url, key));
    }
    let why = format!(
        "slurmrestd at {url} reachable: {reachable}; jwt key {key} present: {}",
        Path::new(&key).exists()
    );
    if std::env::var("WEIR_SKIP_SLURM_TESTS").as_deref() == Ok("1") {
        eprintln!("*** SKIPPED: no Slurm to test against ({why}); WEIR_SKIP_SLURM_TESTS=1 ***");
        return None;
    }
    panic!("this test needs a real Slurm with slurmrestd (the shared engines' slurm/up.sh), or WEIR_SKIP_SLURM_TESTS=1: {why}");
}

/// A stage with an output on a cluster whose backend is a real Slurm: its tasks run as Slurm
/// jobs, put their files through `"$WEIR_COMMIT_HELPER" commit-helper` (the variables reach the
/// Slurm job's environment), and the output is committed whole; a run whose task fails after
/// its put leaves nothing and no upload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_on_a_slurm_cluster() {
    let Some((url, key)) = slurm() else { return };
    let dir = scratch("slurm");
    std::fs::write(dir.join("hpc.yaml"), "version: 1\nqueues:\n  - {name: default}\n").expect("cluster file");
    let tag = format!("commit-outputs-{}", std::process::id());
    let server = Server::start(
        &dir,
        &format!(
            "  - name: hpc\n    file: hpc.yaml\n    backend:\n      kind: slurm\n      url: {url}\n      user: root\n      \
             jwt_key: {key}\n      placement: backend\n      poll_interval_ms: 200\n      kill_grace_seconds: 1\n      \
             tag: {tag}\n      nodes: from_backend\n"
        ),
    );
    let token = server.ready().await;
    let base = server.base();
    let lake = server.bucket("lake");

    let mut wf = one_file("slurm-report", "region,total\\neu,42\\n", "csv", json!({}));
    wf["jobs"][0]["stages"][0]["tasks"] = json!(2);
    wf["jobs"][0]["stages"][0]["command"] = json!(
        "set -e; f=f-$WEIR_RUN_ID-$WEIR_TASK_INDEX; printf 'region,total\\neu,%s\\n' $WEIR_TASK_INDEX > $f; \
         [ -n \"$SLURM_JOB_ID\" ]; \"$WEIR_COMMIT_HELPER\" commit-helper put $f --as part-$WEIR_TASK_INDEX.csv"
    );
    let id = submit(&base, &token, &wf, "2026-12-20", json!({})).await;
    assert_eq!(finished(&base, &token, id).await, ("succeeded".into(), String::new()), "{}", server.log());
    let run = get(&base, &token, &format!("/v1/runs/{id}")).await;
    assert_eq!(run["cluster"], "hpc", "{run}");
    let m = lake.check_output("slurm-report/dt=2026-12-20/").await.expect("a whole output");
    assert_eq!(m.run_id, id.to_string());
    assert_eq!(m.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["part-0.csv", "part-1.csv"]);
    no_uploads_left(&lake).await;

    wf["jobs"][0]["stages"][0]["command"] = json!(format!(
        "{}; [ $WEIR_TASK_INDEX = 1 ] && exit 3; true",
        wf["jobs"][0]["stages"][0]["command"].as_str().expect("command")
    ));
    let id = submit(&base, &token, &wf, "2026-12-21", json!({})).await;
    assert_eq!(finished(&base, &token, id).await.0, "failed", "{}", server.log());
    assert_eq!(objects_at(&lake, "slurm-report/dt=2026-12-21/").await, vec![]);
    no_uploads_left(&lake).await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A PySpark application: sums `2x` for x in 0..100 on the executors (9,900), writes the result
/// as csv and puts it through `"$WEIR_COMMIT_HELPER" commit-helper` (the variables reach the
/// driver through `spark-submit`).
const SPARK_SUM: &str = r#"import os, subprocess
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
total = spark.sparkContext.parallelize(range(100), 2).map(lambda x: 2 * x).sum()
spark.stop()
path = "sum-%s.csv" % os.environ["WEIR_RUN_ID"]
with open(path, "w") as f:
    f.write("what,value\nsum,%d\n" % total)
subprocess.run([os.environ["WEIR_COMMIT_HELPER"], "commit-helper", "put", path, "--as", "sum.csv"], check=True)
"#;

/// A stage that is a Spark application on a `spark-local` cluster (a real PySpark; the server
/// runs `--single-tenant`, as in tests/serve_spark.rs, so the task user can read root's
/// pyspark): its driver writes the result through the helper and the output is committed with
/// the value Spark computed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_on_a_spark_local_cluster() {
    let dir = scratch("spark");
    std::fs::write(dir.join("sum.py"), SPARK_SUM).expect("script");
    let server = Server::start_with(
        &dir,
        "  - name: spark\n    file: cluster.yaml\n    backend:\n      kind: spark-local\n      \
         kill_grace_seconds: 2\n      conf: {spark.ui.enabled: 'false'}\n",
        &["--single-tenant"],
    );
    let token = server.ready().await;
    let base = server.base();
    let lake = server.bucket("lake");
    let wf = json!({"name": "spark-sum", "queue": "root.default",
        "jobs": [{"name": "j", "stages": [{"name": "sum", "tasks": 1, "max_attempts": 1,
                  "resources": {"cpu": 1000, "memory": 3072},
                  "spark": {"main": dir.join("sum.py").display().to_string(), "executors": 1},
                  "outputs": [{"uri": "s3://lake/spark-sum/dt={{logical_date}}/", "format": "csv"}]}]}]});
    let id = submit(&base, &token, &wf, "2026-12-30", json!({})).await;
    assert_eq!(finished(&base, &token, id).await, ("succeeded".into(), String::new()), "{}", server.log());
    let m = lake.check_output("spark-sum/dt=2026-12-30/").await.expect("a whole output");
    assert_eq!(m.run_id, id.to_string());
    assert_eq!(m.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["sum.csv"]);
    let body = lake.store().get("spark-sum/dt=2026-12-30/sum.csv").await.expect("get").expect("the file");
    assert_eq!(String::from_utf8_lossy(&body), "what,value\nsum,9900\n");
    no_uploads_left(&lake).await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
