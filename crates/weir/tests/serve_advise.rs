//! `weir advise --server` against a real `weir serve` with two clusters of different shapes:
//! each runs the other's kind of work (memory-heavy tasks on the compute cluster, compute-heavy
//! ones on the memory cluster); the advisor, from the runs the server recorded, names both
//! workflows and prints the `weir routes set` commands; one of them moves a workflow, and its
//! next run lands on the new cluster.

mod common;

use common::{api, client_in_data as client, ok, Serve};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

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

/// A blocking call of the API with the admin token: (status, JSON body).
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

#[test]
fn advise_on_a_servers_history_names_the_moves_and_a_move_routes_the_next_run() {
    weir_server::install_crypto_provider();
    let scratch = common::Scratch::new("serve-advise");
    let dir = scratch.0.clone();
    let port = common::free_port();
    let ws = common::workspace();
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    for f in ["cpu-rich.yaml", "mem-rich.yaml"] {
        std::fs::copy(ws.join("examples/advise").join(f), dir.join("clusters").join(f)).expect("copy");
    }
    // A third cluster that runs nothing (and that none of the tasks fits): it is counted, idle.
    scratch.file(
        "clusters/tiny.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 1000, memory: 1g}}\nqueues:\n  - name: analytics\n    children:\n      - {name: tier1, tier: 1}\n",
    );
    scratch.file(
        "server.yaml",
        &format!(
            "version: 1
listen: 127.0.0.1:{port}
data_dir: data
clusters:
  - {{name: cpu, file: clusters/cpu-rich.yaml}}
  - {{name: mem, file: clusters/mem-rich.yaml}}
  - {{name: tiny, file: clusters/tiny.yaml}}
"
        ),
    );
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let _serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["serve", "--config", "server.yaml", "--single-tenant", "--usage-resolution", "1s"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("weir serve"),
    );
    eventually(&dir, "the server", || client(&dir, port, &["routes", "list"]).status.success());
    // Routes set through the API (a server-file route of the same key would win over the move).
    for (wf, cluster) in [("sessions-etl", "cpu"), ("feature-compute", "mem")] {
        let key = format!("workflow:{wf}");
        ok(&client(
            &dir,
            port,
            &["routes", "set", &key, "--cluster", cluster, "--queue", "root.analytics.tier1"],
        ));
    }
    // 16 GiB-per-core work on the compute cluster (2 GiB per core), 1 GiB-per-core work on the
    // memory cluster (32 GiB per core): each fills the resource its cluster is short of.
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
    for r in runs(&dir, port) {
        let want = if r["workflow"] == "sessions-etl" { "cpu" } else { "mem" };
        assert_eq!(r["cluster"], want, "{r}");
    }

    let url = format!("http://127.0.0.1:{port}");
    let out = client(&dir, port, &["advise", "--server", &url, "--until", "10m", "--json", "advice.json"]);
    let said = ok(&out);
    let advice: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("advice.json")).expect("advice.json"))
            .expect("json");
    assert_eq!(advice["server"], true);
    let before = advice["before"].as_array().expect("before");
    let state = |name: &str| before.iter().find(|s| s["cluster"] == name).cloned().expect("a cluster state");
    assert!(state("cpu")["imbalance"].as_f64().unwrap() < 0.0, "memory fuller than cores on cpu: {before:?}");
    assert!(state("mem")["imbalance"].as_f64().unwrap() > 0.0, "cores fuller than memory on mem: {before:?}");
    assert_eq!(
        (state("tiny")["cpu_used"].as_f64(), state("tiny")["memory_used"].as_f64()),
        (Some(0.0), Some(0.0))
    );
    assert!(
        common::text(&out.stderr).contains("cluster tiny recorded no run in the window"),
        "{}",
        common::text(&out.stderr)
    );
    let advised: Vec<String> = advice["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .filter(|m| m["advised"] == true)
        .map(|m| {
            format!(
                "{} {}→{}",
                m["workflow"].as_str().unwrap(),
                m["from"].as_str().unwrap(),
                m["to"].as_str().unwrap()
            )
        })
        .collect();
    assert!(advised.contains(&"sessions-etl cpu→mem".to_string()), "{advised:?}\n{said}");
    assert!(advised.contains(&"feature-compute mem→cpu".to_string()), "{advised:?}\n{said}");
    let command = "weir routes set workflow:sessions-etl --cluster mem --queue root.analytics.tier1";
    assert!(said.contains(command), "{said}");

    // Routes from history (`weir plan --server --routes-from-history`): planning the memory
    // cluster adds a route for the memory-heavy workflow that ran on the compute cluster, with
    // the replayed effect; `weir apply` applies it with the plan.
    let out = client(
        &dir,
        port,
        &[
            "plan",
            "--server",
            &url,
            "--server-cluster",
            "mem",
            "--window",
            "10m",
            "--routes-from-history",
            "--out",
            "plan-mem",
        ],
    );
    let said = ok(&out);
    let told = common::text(&out.stderr);
    assert!(
        told.contains("sessions-etl: ") && told.contains("route added: cpu → mem (root.analytics.tier1)"),
        "{said}\n{told}"
    );
    assert!(
        told.contains("feature-compute: 1.0 GiB per core, on cpu (2.0 GiB per core): fits cpu better"),
        "{told}"
    );
    let routes = std::fs::read_to_string(dir.join("plan-mem/routes.yaml")).expect("routes.yaml");
    assert!(
        routes.contains("key: workflow:sessions-etl") && routes.contains("Added from the recorded history"),
        "{routes}"
    );
    let history: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("plan-mem/routes-from-history.json"))
            .expect("routes-from-history.json"),
    )
    .expect("json");
    let added: Vec<&str> =
        history["added"].as_array().expect("added").iter().filter_map(|f| f["workflow"].as_str()).collect();
    assert_eq!(added, ["sessions-etl"], "{history:#}");
    let sum = |k: &str| {
        history[k].as_array().expect(k).iter().map(|s| s["imbalance"].as_f64().unwrap().abs()).sum::<f64>()
    };
    assert!(sum("after") < sum("before"), "the replay with the route is better balanced: {history:#}");
    let applied = client(&dir, port, &["apply", "plan-mem", "--yes", "--force", "--unvalidated"]);
    let applied_said = ok(&applied);
    assert!(applied_said.contains("workflow:sessions-etl"), "{applied_said}");
    let routed = ok(&client(&dir, port, &["routes", "list"]));
    assert!(routed.lines().any(|l| l.contains("workflow:sessions-etl") && l.contains("mem")), "{routed}");
    // Back to the compute cluster, so that the printed command below is what moves it.
    ok(&client(
        &dir,
        port,
        &["routes", "set", "workflow:sessions-etl", "--cluster", "cpu", "--queue", "root.analytics.tier1"],
    ));

    // The scheduled planner's proposal (`POST /v1/clusters/mem/proposals` plans now, as
    // `--auto-plan` does) proposes the same route from history, with the replays behind it, and
    // its diff shows the route moving from the compute cluster.
    let token =
        std::fs::read_to_string(dir.join("data/admin.token")).expect("admin token").trim().to_string();
    let (status, proposal) = api(port, &token, "POST", "/v1/clusters/mem/proposals");
    assert_eq!(status, 201, "{proposal:#}");
    let history = &proposal["summary"]["routes_from_history"];
    let added: Vec<&str> =
        history["added"].as_array().expect("added").iter().filter_map(|f| f["workflow"].as_str()).collect();
    assert_eq!(added, ["sessions-etl"], "{proposal:#}");
    let moved = proposal["diff"]["routes"]
        .as_array()
        .expect("route changes")
        .iter()
        .any(|c| c["key"] == "workflow:sessions-etl" && c["to"] == "mem:root.analytics.tier1");
    assert!(moved, "{proposal:#}");
    let cpu_proposal = api(port, &token, "POST", "/v1/clusters/cpu/proposals").1;
    let to_cpu: Vec<&str> = cpu_proposal["summary"]["routes_from_history"]["added"]
        .as_array()
        .expect("added")
        .iter()
        .filter_map(|f| f["workflow"].as_str())
        .collect();
    assert_eq!(to_cpu, ["feature-compute"], "{cpu_proposal:#}");

    // Make the move as printed; the workflow's next run goes to the memory cluster.
    let args: Vec<&str> = command.split(' ').skip(1).collect();
    ok(&client(&dir, port, &args));
    ok(&client(&dir, port, &["submit", &etl, "--logical-date", "d2"]));
    let next = runs(&dir, port).into_iter().find(|r| r["logical_date"] == "d2").expect("the next run");
    assert_eq!(next["cluster"], "mem", "{next}");
}
