//! A `weir serve` that cannot switch users (not root) runs tasks as itself: it says so at start,
//! loudly, and refuses a cluster file whose `run_as` it cannot honour, naming the file, the
//! field and the value. Run as root, the test starts the server as `nobody` (through `setpriv`, util-linux).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 2000, memory: 2048}}
queues:
  - {name: ads}
";

/// `weir serve …` as an unprivileged user: `nobody` when this test runs as root.
fn unprivileged(args: &[&str]) -> Command {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let mut cmd = if root {
        // setpriv execs the program itself (runuser would fork and wait): killing the child
        // then kills the server.
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", env!("CARGO_BIN_EXE_weir")]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_weir"))
    };
    cmd.args(args);
    cmd
}

fn port() -> String {
    let p = common::free_port();
    format!("127.0.0.1:{p}")
}

#[test]
fn an_unprivileged_server_warns_it_is_single_tenant_and_refuses_run_as() {
    let scratch = common::Scratch::new("serve-tenancy");
    let data = scratch.0.join("data").display().to_string();
    let with_run_as = scratch.file("run-as.yaml", &format!("{CLUSTER}run_as: {{ads: ads-batch}}\n"));
    let out = unprivileged(&["serve", "--listen", &port(), "--data-dir", &data, "--cluster", &with_run_as])
        .output()
        .expect("run weir serve");
    assert!(!out.status.success());
    let err = common::text(&out.stderr);
    for part in [with_run_as.as_str(), "run_as.ads", "ads-batch", "not root"] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }

    let plain = scratch.file("plain.yaml", CLUSTER);
    let mut child = unprivileged(&["serve", "--listen", &port(), "--data-dir", &data, "--cluster", &plain])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start weir serve");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let until = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    let warned = loop {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains("SINGLE-TENANT MODE") => break Some(line),
            Ok(line) => seen.push(line),
            Err(_) => break None,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let warned = warned.unwrap_or_else(|| panic!("no single-tenant warning; stderr: {seen:#?}"));
    assert!(warned.contains("one trusted tenant") && warned.contains("admin.token"), "{warned}");
}
