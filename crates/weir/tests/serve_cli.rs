//! The README's serve story through the real binary: `weir serve --demo`, then the client
//! commands (`runs`, `queues`, `status`, `logs`, `explain`, `submit --wait`, `kill`, `token`,
//! `submit --dry-run`, `migrate`).
//! The demo admits the tier-1 reports ahead of the remaining tier-3 backfills, as `weir
//! simulate` decides on the same files.

mod common;

use common::{client_of as client, ok, Serve};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("JSON output")
}

/// Start times (ms) of the demo's runs by (workflow, logical date), from `weir status --json`.
fn started(dir: &Path, port: u16, runs: &Value) -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    for r in runs["runs"].as_array().expect("runs") {
        let id = r["id"].as_i64().expect("id").to_string();
        let run = json(&client(dir, port, &["status", &id, "--json"]));
        out.push((
            r["workflow"].as_str().unwrap_or("").to_string(),
            r["logical_date"].as_str().unwrap_or("").to_string(),
            run["started_ms"].as_i64().unwrap_or(i64::MAX),
        ));
    }
    out
}

#[test]
fn the_demo_and_the_client_commands() {
    let scratch = common::Scratch::new("serve-cli");
    let dir = scratch.0.clone();
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}"), "--kill-grace", "1"])
            .args(["--usage-resolution", "1s"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    // The client finds the server by WEIR_SERVER and the token in ./weir-data/admin.token.
    let start = Instant::now();
    let all = loop {
        let out = client(&dir, port, &["runs", "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).expect("json");
            let runs = v["runs"].as_array().map(Vec::len).unwrap_or(0);
            let done = v["runs"].as_array().is_some_and(|r| r.iter().all(|r| r["state"] == "succeeded"));
            if runs == 7 && done {
                break v;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the demo did not finish: {:?}", out);
        std::thread::sleep(Duration::from_millis(500));
    };
    // With --demo (only), the server printed the admin token to log in with.
    let said = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    let token = std::fs::read_to_string(dir.join("weir-data/admin.token")).expect("token");
    assert!(said.contains(&format!("log in with the admin token {}", token.trim())), "{said}");
    let times = started(&dir, port, &all);
    let at =
        |wf: &str, date: &str| times.iter().find(|t| t.0 == wf && t.1 == date).map(|t| t.2).expect("run");
    let reports = [at("revenue-report", "demo-1"), at("revenue-report", "demo-2")];
    let late_backfills = [at("nightly-backfill", "demo-4"), at("nightly-backfill", "demo-5")];
    // Three backfills take the three slots; the tier-1 reports, submitted later, are admitted
    // before the two backfills that were waiting longer.
    for r in reports {
        assert!(r <= late_backfills[1], "a report started after the last backfill: {times:?}");
        assert!(r <= late_backfills[0] + 1000, "a report started well after backfill demo-4: {times:?}");
    }
    // `weir simulate` on the same files decides the same.
    let sim = dir.join("sim");
    let root = common::workspace();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "simulate",
            "--cluster",
            "examples/demo/cluster.yaml",
            "--workload",
            "examples/demo/workload.yaml",
            "--out",
        ])
        .arg(&sim)
        .current_dir(&root)
        .output()
        .expect("simulate");
    ok(&out);
    let csv = std::fs::read_to_string(sim.join("runs.csv")).expect("runs.csv");
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let sim_start = |wf: &str| -> Vec<u64> {
        rows.iter().filter(|r| r[0] == wf).map(|r| r[4].parse().unwrap_or(u64::MAX)).collect()
    };
    let (mut b, r) = (sim_start("nightly-backfill"), sim_start("revenue-report"));
    b.sort();
    assert!(r.iter().all(|&t| t <= b[3] && t <= b[4]), "simulate: reports {r:?}, backfills {b:?}");

    // The other client commands.
    let queues = ok(&client(&dir, port, &["queues"]));
    assert!(queues.contains("root.analytics.tier1") && queues.contains("pending"), "{queues}");
    let id = at_id(&all, "revenue-report", "demo-1");
    let status = ok(&client(&dir, port, &["status", &id]));
    assert!(status.contains("job extract: succeeded") && status.contains("publish.upload.0"), "{status}");
    // The report waited for one of root.analytics's 3 slots while the backfills held them, and
    // `status` says so after the fact, naming the tier-3 runs it waited behind.
    assert!(status.contains("before its first task started:"), "{status}");
    assert!(status.contains("root.analytics at max_running_apps 3"), "{status}");
    assert!(status.contains("tier-1 work waiting behind lower tiers"), "{status}");
    assert!(status.contains("nightly-backfill (run "), "{status}");
    // `weir plan --server` reads the same spells, per leaf, from the history it fetches, and
    // tells them beside what the plan does to the leaf.
    std::thread::sleep(Duration::from_millis(1500));
    let server = format!("http://127.0.0.1:{port}");
    let plan = ok(&client(&dir, port, &["plan", "--server", &server, "--window", "1h", "--out", "plan"]));
    assert!(plan.contains("waiting in the window, per leaf (waits.csv):"), "{plan}");
    assert!(plan.contains("\n  root.analytics.tier1 (tier 1, weight "), "{plan}");
    assert!(plan.contains(" on root.analytics at max_running_apps 3 ("), "{plan}");
    // … and what the plan does to that limit.
    let line =
        plan.lines().find(|l| l.contains(" on root.analytics at max_running_apps 3 (")).unwrap_or_default();
    assert!(line.contains(" — the plan ") && line.contains("root.analytics's max_running_apps"), "{line}");
    let waits = std::fs::read_to_string(dir.join("plan/waits.csv")).expect("waits.csv");
    assert!(waits.contains("\nroot.analytics.tier1,1,queue_max_running_apps,root.analytics,3,"), "{waits}");
    let logs = ok(&client(&dir, port, &["logs", &id, "extract.query.1"]));
    assert_eq!(logs, "querying shard 1\n");
    let logs = ok(&client(&dir, port, &["logs", &id, "publish.upload.0", "--follow"]));
    assert_eq!(logs, "report for demo-1 is ready\n");
    // submit --wait, and a kill.
    let wf = dir.join("mine.yaml");
    std::fs::write(
        &wf,
        "version: 1\nworkflows:\n  - name: mine\n    queue: root.default\n    jobs:\n      - name: j\n        stages:\n          - {name: s, tasks: 1, resources: {cpu: 1000}, command: 'echo hello $WEIR_PARAM_WHO'}\n",
    )
    .expect("write");
    let out = ok(&client(
        &dir,
        port,
        &["submit", "mine.yaml", "--logical-date", "d1", "--param", "who=you", "--wait"],
    ));
    assert!(out.contains("queued on default in root.default") && out.ends_with("succeeded\n"), "{out}");
    let mine = out.split_whitespace().nth(1).expect("run id").to_string();
    assert_eq!(ok(&client(&dir, port, &["logs", &mine, "s.0"])), "hello you\n");
    std::fs::write(
        &wf,
        std::fs::read_to_string(&wf).expect("read").replace("echo hello $WEIR_PARAM_WHO", "sleep 60"),
    )
    .expect("write");
    let out = ok(&client(&dir, port, &["submit", "mine.yaml", "--logical-date", "d2"]));
    let sleeper = out.split_whitespace().nth(1).expect("run id").to_string();
    let dup = client(&dir, port, &["submit", "mine.yaml", "--logical-date", "d2"]);
    assert!(!dup.status.success() && common::text(&dup.stderr).contains("409 conflict"), "{dup:?}");
    let start = Instant::now();
    while !ok(&client(&dir, port, &["status", &sleeper])).contains("running") {
        assert!(start.elapsed() < Duration::from_secs(30), "never ran");
        std::thread::sleep(Duration::from_millis(200));
    }
    ok(&client(&dir, port, &["kill", &sleeper]));
    let start = Instant::now();
    while !ok(&client(&dir, port, &["status", &sleeper])).contains(": killed") {
        assert!(start.elapsed() < Duration::from_secs(30), "not killed");
        std::thread::sleep(Duration::from_millis(200));
    }
    // A kill of a run that already ended says so rather than "run N is succeeded".
    assert_eq!(
        ok(&client(&dir, port, &["kill", &mine])),
        format!("run {mine} is already ended: succeeded (nothing to kill)\n")
    );
    // A task that wrote only to stderr: `weir logs` prints its (empty) stdout and says where
    // the output is, with the command to read it.
    std::fs::write(
        &wf,
        std::fs::read_to_string(&wf).expect("read").replace("sleep 60", "echo oops >&2; exit 3"),
    )
    .expect("write");
    let out = client(&dir, port, &["submit", "mine.yaml", "--logical-date", "d3", "--wait"]);
    let failed = common::text(&out.stdout).split_whitespace().nth(1).expect("run id").to_string();
    let logs = client(&dir, port, &["logs", &failed, "s.0"]);
    assert!(logs.status.success() && logs.stdout.is_empty(), "{logs:?}");
    let hint = common::text(&logs.stderr);
    assert!(
        hint.contains(&format!("its stderr is not empty: weir logs {failed} s.0 --stream stderr")),
        "{hint}"
    );
    assert_eq!(ok(&client(&dir, port, &["logs", &failed, "s.0", "--stream", "stderr"])), "oops\n");
    // Tokens: a viewer of `ads` sees no demo run (they belong to `analytics`) and cannot submit.
    let token = ok(&client(&dir, port, &["token", "create", "reader", "--grant", "ads:viewer"]));
    let listed = ok(&client(&dir, port, &["token", "list"]));
    assert!(listed.contains("reader") && listed.contains("ads:viewer"), "{listed}");
    let as_reader = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["runs", "--json"])
        .current_dir(&dir)
        .env("WEIR_SERVER", format!("http://127.0.0.1:{port}"))
        .env("WEIR_TOKEN", token.trim())
        .output()
        .expect("runs");
    assert_eq!(json(&as_reader)["runs"].as_array().map(Vec::len), Some(0));

    // A dry-run of `mine` for d1 (whose production run succeeded): marked by `submit`, `runs`
    // and `status`. Its verdict is the worker's to record when it ends; until one exists, the
    // migration table says so and approving is refused with the reason. Its task waits for a
    // `go` file, so that it cannot end (and be judged) before those checks.
    let go = dir.join("go");
    std::fs::write(
        dir.join("mine-held.yaml"),
        format!(
            "version: 1\nworkflows:\n  - name: mine\n    queue: root.default\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: 1, resources: {{cpu: 1000}}, command: 'while [ ! -e {} ]; do sleep 0.05; done; echo hello $WEIR_PARAM_WHO'}}\n",
            go.display()
        ),
    )
    .expect("write");
    let out = ok(&client(
        &dir,
        port,
        &["submit", "mine-held.yaml", "--logical-date", "d1", "--dry-run", "--cluster", "default"],
    ));
    assert!(out.starts_with("dry-run run ") && out.contains("queued on default"), "{out}");
    let dry = out.split_whitespace().nth(2).expect("run id").to_string();
    let listed = ok(&client(&dir, port, &["runs", "--workflow", "mine"]));
    assert!(listed.contains(&format!("{dry}*")) && listed.contains("* a dry-run"), "{listed}");
    assert!(
        ok(&client(&dir, port, &["status", &dry])).contains("a dry-run: its outputs go to shadow prefixes")
    );
    let table = ok(&client(&dir, port, &["migrate", "status", "mine"]));
    assert!(table.contains("no dry-run verdicts"), "{table}");
    let refused = client(&dir, port, &["migrate", "approve", "mine", "--to", "default"]);
    let err = common::text(&refused.stderr);
    assert!(!refused.status.success() && err.contains("404") && err.contains("has a verdict"), "{err}");
    let bad = client(&dir, port, &["submit", "mine.yaml", "--cluster", "default"]);
    assert!(!bad.status.success() && common::text(&bad.stderr).contains("--dry-run"), "{bad:?}");
    // Released, it ends and is judged: it succeeded and declares no outputs, so it compares
    // as identical, and approving moves the workflow's route to the cluster, naming the run.
    std::fs::write(&go, "").expect("go");
    let start = Instant::now();
    while ok(&client(&dir, port, &["migrate", "status", "mine"])).contains("no dry-run verdicts") {
        assert!(start.elapsed() < Duration::from_secs(120), "the dry-run was never judged");
        std::thread::sleep(Duration::from_millis(200));
    }
    let table = ok(&client(&dir, port, &["migrate", "status", "mine"]));
    assert!(table.contains(&format!("{dry}  mine")) && table.contains(" identical "), "{table}");
    let approved = ok(&client(&dir, port, &["migrate", "approve", "mine", "--to", "default"]));
    assert_eq!(approved, format!("workflow:mine -> default root.default (dry-run run {dry}: identical)\n"));
}

fn at_id(all: &Value, wf: &str, date: &str) -> String {
    all["runs"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["workflow"] == wf && r["logical_date"] == date))
        .and_then(|r| r["id"].as_i64())
        .expect("run")
        .to_string()
}

/// A server that cannot have its port creates nothing: no data directory, no store file, no
/// admin token — and says which address it could not listen on.
#[test]
fn a_server_that_cannot_bind_creates_nothing() {
    let scratch = common::Scratch::new("serve-bind");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let data = scratch.0.join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&data)
        .output()
        .expect("run weir serve");
    assert!(!out.status.success());
    let stderr = common::text(&out.stderr);
    assert!(
        stderr.contains(&format!("127.0.0.1:{port}")) && stderr.contains("nothing was created"),
        "{stderr}"
    );
    assert!(!data.exists(), "{} was created", data.display());
}

/// `weir serve --tls-cert/--tls-key` speaks HTTPS; the client commands reach it with the
/// private CA from `--ca-cert` or `$WEIR_CA_CERT` and refuse it without. Without `--demo` the
/// admin token is not printed: its file is named.
#[test]
fn https_serve_and_clients_that_trust_its_ca() {
    let scratch = common::Scratch::new("serve-tls");
    let dir = scratch.0.clone();
    let tls = common::workspace().join("crates/weir-server/tests/data/tls");
    let port = common::free_port();
    let log_path = dir.join("serve.log");
    let log = std::fs::File::create(&log_path).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--tls-cert"])
            .arg(tls.join("server.crt"))
            .arg("--tls-key")
            .arg(tls.join("server.key"))
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    let https = |extra: &[&str], ca_env: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
        c.args(["runs", "--json"])
            .args(extra)
            .current_dir(&dir)
            .env("WEIR_SERVER", format!("https://localhost:{port}"))
            .env_remove("WEIR_TOKEN")
            .env_remove("WEIR_CA_CERT");
        if let Some(ca) = ca_env {
            c.env("WEIR_CA_CERT", ca);
        }
        c.output().expect("run weir")
    };
    let ca = tls.join("ca.crt");
    let ca_arg = ca.display().to_string();
    let start = Instant::now();
    loop {
        let out = https(&["--ca-cert", &ca_arg], None);
        if out.status.success() {
            assert_eq!(json(&out)["runs"].as_array().map(Vec::len), Some(0));
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no answer over https: {out:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    ok(&https(&[], Some(&ca)));
    let refused = https(&[], None);
    assert!(!refused.status.success());
    let stderr = common::text(&refused.stderr);
    assert!(stderr.contains("certificate"), "the refusal should say why: {stderr}");
    let missing = https(&["--ca-cert", "nope.pem"], None);
    assert!(common::text(&missing.stderr).contains("--ca-cert: cannot read nope.pem"), "{missing:?}");
    // What the server said at start: https, and where the admin token is — not the token.
    let said = std::fs::read_to_string(&log_path).expect("log");
    let token = std::fs::read_to_string(dir.join("weir-data/admin.token")).expect("token");
    assert!(said.contains(&format!("https://127.0.0.1:{port}")), "{said}");
    assert!(said.contains("log in with the admin token in") && said.contains("admin.token"), "{said}");
    assert!(!said.contains(token.trim()), "the admin token was printed without --demo: {said}");
}

/// A key file that is not a key stops `weir serve` with the file's name, before anything is
/// created.
#[test]
fn a_bad_tls_key_is_named_and_nothing_is_created() {
    let scratch = common::Scratch::new("serve-tls-bad");
    let tls = common::workspace().join("crates/weir-server/tests/data/tls");
    let data = scratch.0.join("data");
    let junk = scratch.file("junk.key", "not a key\n");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(tls.join("server.crt"))
        .args(["--tls-key", &junk, "--data-dir"])
        .arg(&data)
        .output()
        .expect("run weir serve");
    assert!(!out.status.success());
    let stderr = common::text(&out.stderr);
    assert!(stderr.contains("junk.key") && stderr.contains("no private key"), "{stderr}");
    assert!(!data.exists(), "{} was created", data.display());
}

/// The acceptance of docs/commit.md's dry-runs on the demo itself: `weir serve --demo` with a
/// second cluster (`staging`, the same cluster file). The demo's revenue-report writes its
/// report through the committer (`"$WEIR_COMMIT_HELPER" commit-helper put`); a dry-run of it
/// on `staging` writes a shadow copy, is compared with the demo's committed report of the
/// same date and gets a verdict in the migration table. A dry-run whose report differs is
/// refused approval; one that matches is approved, and the route moves to `staging`.
#[test]
fn the_demo_report_dry_run_on_a_second_cluster_moves_its_route() {
    let scratch = common::Scratch::new("serve-demo-dry-run");
    let dir = scratch.0.clone();
    let demo_cluster = common::workspace().join("examples/demo/cluster.yaml");
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--demo", "--listen", &format!("127.0.0.1:{port}"), "--kill-grace", "1"])
            .arg("--cluster")
            .arg(format!("default={}", demo_cluster.display()))
            .arg("--cluster")
            .arg(format!("staging={}", demo_cluster.display()))
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    // The demo's two reports, committed on `default`.
    let start = Instant::now();
    let reports = loop {
        let out = client(&dir, port, &["runs", "--workflow", "revenue-report", "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).expect("json");
            let runs = v["runs"].as_array().cloned().unwrap_or_default();
            assert!(runs.iter().all(|r| r["state"] != "failed"), "a demo report failed: {v}");
            if runs.len() == 2 && runs.iter().all(|r| r["state"] == "succeeded") {
                break v;
            }
        }
        let said = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        assert!(start.elapsed() < Duration::from_secs(120), "the demo's reports did not finish: {said}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let production = at_id(&reports, "revenue-report", "demo-1");
    // The report is in the local store beside the data directory, whole: both parts and the
    // manifest naming the run that committed it.
    let out_dir = dir.join("weir-data-outputs/demo/revenue/dt=demo-1");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("_weir_manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    assert_eq!(manifest["run_id"], production.as_str(), "{manifest}");
    let names: Vec<&str> =
        manifest["files"].as_array().expect("files").iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(names, ["part-0.csv", "part-1.csv"], "{manifest}");
    assert_eq!(std::fs::read_to_string(out_dir.join("part-1.csv")).expect("part"), "shard,revenue\n1,1250\n");

    // The demo's revenue-report alone, as a workload file.
    let demo =
        std::fs::read_to_string(common::workspace().join("examples/demo/workload.yaml")).expect("demo");
    let report = &demo[demo.find("  - name: revenue-report").expect("the demo has revenue-report")..];
    let same = format!("version: 1\nworkflows:\n{report}");
    assert!(same.contains("1000 + 250 * WEIR_TASK_INDEX"), "the demo's report changed: {report}");
    std::fs::write(dir.join("report.yaml"), &same).expect("write");
    std::fs::write(dir.join("changed.yaml"), same.replace("1000 + 250 *", "1000 + 251 *")).expect("write");
    let dry_run = |file: &str, date: &str| {
        let out = ok(&client(
            &dir,
            port,
            &["submit", file, "--logical-date", date, "--dry-run", "--cluster", "staging", "--wait"],
        ));
        assert!(out.starts_with("dry-run run ") && out.contains("queued on staging"), "{out}");
        assert!(out.ends_with("succeeded\n"), "{out}");
        out.split_whitespace().nth(2).expect("run id").to_string()
    };
    let verdict_of = |run: &str| {
        let start = Instant::now();
        loop {
            let status = json(&client(&dir, port, &["migrate", "status", "revenue-report", "--json"]));
            let found = status["verdicts"]
                .as_array()
                .and_then(|v| {
                    v.iter().find(|v| v["run_id"].as_i64().map(|i| i.to_string()).as_deref() == Some(run))
                })
                .cloned();
            if let Some(v) = found {
                return v;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no verdict for dry-run {run}: {status}");
            std::thread::sleep(Duration::from_millis(300));
        }
    };

    // A dry-run whose shard 1 computes another revenue: `different`, the row named; approving
    // the move is refused.
    let changed = dry_run("changed.yaml", "demo-2");
    let v = verdict_of(&changed);
    assert_eq!(v["verdict"], "different", "{v}");
    assert_eq!(v["cluster"], "staging", "{v}");
    assert_eq!(v["production_run"], at_id(&reports, "revenue-report", "demo-2").as_str(), "{v}");
    let diffs = v["differences"].to_string();
    assert!(diffs.contains("1250") || diffs.contains("rows") || diffs.contains("checksum"), "{v}");
    let refused = client(&dir, port, &["migrate", "approve", "revenue-report", "--to", "staging"]);
    let err = common::text(&refused.stderr);
    assert!(!refused.status.success() && err.contains("409"), "{err}");
    // Production's report of demo-2 is untouched: the dry-run wrote under the shadow prefix.
    let shadow = dir.join(format!("weir-data-outputs/demo/_weir_dryrun/{changed}/revenue/dt=demo-2"));
    assert_eq!(
        std::fs::read_to_string(shadow.join("part-1.csv")).expect("shadow part"),
        "shard,revenue\n1,1251\n"
    );
    let prod2 = dir.join("weir-data-outputs/demo/revenue/dt=demo-2/part-1.csv");
    assert_eq!(std::fs::read_to_string(prod2).expect("production part"), "shard,revenue\n1,1250\n");

    // The demo's own report: `identical`, and approving moves the route to `staging`.
    let same_run = dry_run("report.yaml", "demo-1");
    let v = verdict_of(&same_run);
    assert_eq!(v["verdict"], "identical", "{v}");
    assert_eq!((v["cluster"].as_str(), v["queue"].as_str()), (Some("staging"), Some("root.analytics.tier1")));
    assert_eq!(v["production_run"], production.as_str(), "{v}");
    let table = ok(&client(&dir, port, &["migrate", "status", "revenue-report"]));
    assert!(
        table.contains(&same_run) && table.contains("identical") && table.contains("different"),
        "{table}"
    );
    let moved = ok(&client(&dir, port, &["migrate", "approve", "revenue-report", "--to", "staging"]));
    assert!(moved.starts_with("workflow:revenue-report -> staging root.analytics.tier1"), "{moved}");
    assert!(moved.contains(&format!("dry-run run {same_run}: identical")), "{moved}");
    // The next production run of the report goes to `staging`, and commits its report there.
    let out = client(&dir, port, &["submit", "report.yaml", "--logical-date", "after-move", "--wait"]);
    let said = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    let out = common::text(&out.stdout) + &common::text(&out.stderr);
    assert!(out.contains("queued on staging") && out.ends_with("succeeded\n"), "{out}\n{said}");
    assert!(dir.join("weir-data-outputs/demo/revenue/dt=after-move/_weir_manifest.json").exists());
}

/// SIGTERM (what `systemctl stop`, `kill` and container runtimes send) stops the server in
/// order, as Ctrl-C does: it says so, exits with status 0, and the local backend removes its
/// cgroup slots (where the machine gives cgroups). Before, SIGTERM killed it outright: nothing
/// was closed and every slot stayed behind until the next start.
#[test]
fn sigterm_stops_the_server_in_order() {
    let scratch = common::Scratch::new("serve-term");
    let dir = scratch.0.clone();
    let port = common::free_port();
    let log = dir.join("serve.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("weir serve");
    let start = Instant::now();
    while !client(&dir, port, &["runs", "--json"]).status.success() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("the server never answered: {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::write(
        dir.join("mine.yaml"),
        "version: 1\nworkflows:\n  - name: mine\n    queue: root.default\n    jobs:\n      - name: j\n        stages:\n          - {name: s, tasks: 2, resources: {cpu: 100}, command: 'echo hello'}\n",
    )
    .expect("write");
    let out = ok(&client(&dir, port, &["submit", "mine.yaml", "--logical-date", "d1", "--wait"]));
    assert!(out.ends_with("succeeded\n"), "{out}");
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(term.success());
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("SIGTERM did not stop the server: {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = std::fs::read_to_string(&log).expect("log");
    assert!(status.success(), "{status:?}: {said}");
    assert!(said.contains("weir serve: SIGTERM: stopping"), "{said}");
    // Where the tasks had cgroups, none of the server's slots is left (the tasks ended).
    if let Some(line) = said.lines().find(|l| l.contains("tasks run in their own cgroups:")) {
        let bases: Vec<&str> =
            line.split(" under ").skip(1).map(|rest| rest.split(';').next().unwrap_or(rest).trim()).collect();
        assert!(!bases.is_empty(), "{line}");
        for base in bases {
            let left: Vec<String> = std::fs::read_dir(base)
                .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            assert!(!left.iter().any(|n| n.starts_with("slot.")), "{base} still holds {left:?}");
        }
    }
}
