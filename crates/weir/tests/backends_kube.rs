//! The `kind: kubernetes` wiring of the server file, through the real binary built with the
//! `kubernetes` feature (`cargo test -p weir --features kubernetes --test backends_kube`; without
//! the feature this file is empty, and serve_config's tests check that the kind is refused with
//! how to build it). No Kubernetes API server can run on this machine (no package ships
//! kube-apiserver), so `weir backends --config` talks over HTTP, through a kubeconfig, to a small
//! stand-in that answers the four requests the backend's health check makes the way an API server
//! does (`/version`; a namespace, or a 404 `Status` for one that does not exist; the node list).
//! The backend's own behaviour (Jobs, watch, kill, re-adoption) is tested in
//! crates/weir-backend-kube/tests against its stateful fake.

#![cfg(feature = "kubernetes")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;

/// Answers like an API server for `/version`, `/api/v1/namespaces/batch` (exists), any other
/// namespace (404 NotFound) and `/api/v1/nodes` (one node); returns its address.
fn stand_in() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // The rest of the head (no body on GET).
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path =
                line.split_whitespace().nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_string();
            let (status, body) = match path.as_str() {
                "/version" => (
                    "200 OK",
                    r#"{"major":"1","minor":"31","gitVersion":"v1.31.0-standin","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}"#.to_string(),
                ),
                "/api/v1/namespaces/batch" => {
                    ("200 OK", r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"batch"}}"#.to_string())
                }
                "/api/v1/nodes" => (
                    "200 OK",
                    r#"{"apiVersion":"v1","kind":"NodeList","metadata":{},"items":[{"metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"4","memory":"8Gi"}}}]}"#.to_string(),
                ),
                p => {
                    let name = p.rsplit('/').next().unwrap_or_default();
                    (
                        "404 Not Found",
                        format!(
                            r#"{{"apiVersion":"v1","kind":"Status","metadata":{{}},"status":"Failure","message":"namespaces \"{name}\" not found","reason":"NotFound","details":{{"name":"{name}","kind":"namespaces"}},"code":404}}"#
                        ),
                    )
                }
            };
            let mut s = stream;
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_kubernetes_cluster_of_the_server_file_is_asked_through_the_kubeconfig() {
    let scratch = common::Scratch::new("backends-kube");
    let dir = scratch.0.clone();
    let api = stand_in();
    scratch.file(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n  - name: standin\n    cluster: {{server: '{api}'}}\nusers:\n  - name: weir\n    user: {{token: not-a-secret}}\ncontexts:\n  - name: c\n    context: {{cluster: standin, user: weir}}\ncurrent-context: c\n"
        ),
    );
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file(
        "clusters/k.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8g}}\nqueues:\n  - {name: default}\n",
    );
    scratch.file(
        "server.yaml",
        "version: 1\ndata_dir: data\nclusters:\n  - name: k8s\n    file: clusters/k.yaml\n    backend: {kind: kubernetes, namespace: batch, image: 'python:3.12-slim', scheduler: kueue, default_queue: team-a}\n  - name: nons\n    file: clusters/k.yaml\n    backend: {kind: kubernetes, namespace: missing, image: 'python:3.12-slim'}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["backends", "--config", "server.yaml"])
        .current_dir(&dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .output()
        .expect("weir backends");
    let text = common::text(&out.stdout);
    // One cluster is unhealthy: exit status 1.
    assert_eq!(out.status.code(), Some(1), "{text}\n{}", common::text(&out.stderr));
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row("k8s")[1..5], ["kubernetes", "healthy", "v1.31.0-standin", "1"], "{text}");
    let nons = row("nons");
    assert_eq!(nons[1..3], ["kubernetes", "unhealthy"], "{text}");
    assert!(text.contains("namespace \"missing\" does not exist"), "{text}");
}

/// `weir serve` builds the backend from the same entry: its worker connects through the
/// kubeconfig, and the server's own view (`weir backends` without `--config`, from
/// `GET /v1/clusters`) shows the cluster healthy with the stand-in's version.
#[test]
fn weir_serve_drives_a_kubernetes_cluster_of_its_server_file() {
    let scratch = common::Scratch::new("serve-kube");
    let dir = scratch.0.clone();
    let api = stand_in();
    let port = common::free_port();
    scratch.file(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n  - name: standin\n    cluster: {{server: '{api}'}}\nusers:\n  - name: weir\n    user: {{token: not-a-secret}}\ncontexts:\n  - name: c\n    context: {{cluster: standin, user: weir}}\ncurrent-context: c\n"
        ),
    );
    std::fs::create_dir_all(dir.join("clusters")).expect("mkdir");
    scratch.file(
        "clusters/k.yaml",
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8g}}\nqueues:\n  - {name: default}\n",
    );
    scratch.file(
        "server.yaml",
        &format!("version: 1\nlisten: 127.0.0.1:{port}\ndata_dir: data\nclusters:\n  - name: k8s\n    file: clusters/k.yaml\n    backend: {{kind: kubernetes, namespace: batch, image: 'python:3.12-slim'}}\n"),
    );
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--config", "server.yaml", "--single-tenant"])
        .current_dir(&dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("weir serve");
    let mut seen = String::new();
    for _ in 0..240 {
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["backends", "--data-dir", "data"])
            .current_dir(&dir)
            .env("WEIR_SERVER", format!("http://127.0.0.1:{port}"))
            .env_remove("WEIR_TOKEN")
            .output()
            .expect("weir backends");
        seen = common::text(&out.stdout);
        if seen.contains("v1.31.0-standin") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let _ = serve.kill();
    let _ = serve.wait();
    let row: Vec<&str> =
        seen.lines().find(|l| l.starts_with("k8s ")).unwrap_or_default().split_whitespace().collect();
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
    assert_eq!(row.get(1..4), Some(&["kubernetes", "healthy", "v1.31.0-standin"][..]), "{seen}\n{log}");
}
