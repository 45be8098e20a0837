//! A real Prometheus (Debian's `prometheus`) scrapes a test server's `/metrics` with a viewer
//! token; the test reads a queue's usage and an SLO counter back through Prometheus' HTTP API
//! and checks them against the server's own API.
//!
//! Prometheus runs on loopback in a temporary directory with a one-job scrape configuration
//! and is stopped by its pid. `.ci/run` installs it and sets `WEIR_REQUIRE_PROMETHEUS=1`, which
//! turns a missing binary into a failure; elsewhere the test says loudly that it skipped.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{temp_dir, Db, TestServer};
use reqwest::Method;
use serde_json::{json, Value};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const LONG: Duration = Duration::from_secs(90);

/// Prometheus, stopped by its pid when dropped.
struct Prometheus {
    child: Child,
    base: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    async fn start(dir: &Path, target: &str, token: &str) -> Prometheus {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        std::fs::write(dir.join("token"), token).expect("token file");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: weir\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    metrics_path: /metrics\n\
             \x20   authorization:\n      type: Bearer\n      credentials_file: {}\n\
             \x20   static_configs:\n      - targets: ['{target}']\n",
            dir.join("token").display()
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("config");
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("log");
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, base: format!("http://127.0.0.1:{port}") };
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{}/-/ready", p.base)).send().await {
                if r.status().is_success() {
                    return p;
                }
            }
            assert!(
                start.elapsed() < LONG,
                "prometheus did not become ready; see {}",
                dir.join("prometheus.log").display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The value of an instant query with one series, if it has one.
    async fn value(&self, query: &str) -> Option<f64> {
        let v: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", query)])
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let result = v["data"]["result"].as_array()?;
        assert!(result.len() <= 1, "`{query}` matches several series: {v}");
        result.first()?["value"][1].as_str()?.parse().ok()
    }
}

fn run(name: &str, command: &str) -> Value {
    json!({
        "name": name, "queue": "root.ads.tier1", "slo": "5m",
        "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": 1, "resources": {"cpu": 2000, "memory": 1024}, "command": command}]}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_queue_usage_and_slo_counters() {
    if !Path::new(PROMETHEUS).exists() {
        assert!(
            std::env::var_os("WEIR_REQUIRE_PROMETHEUS").is_none(),
            "WEIR_REQUIRE_PROMETHEUS is set but {PROMETHEUS} is missing"
        );
        eprintln!("\n*** SKIPPED the Prometheus test: install Debian's prometheus (.ci/run does) ***\n");
        return;
    }
    let mut s = TestServer::start(Db::Sqlite, "prometheus").await.expect("server");
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "prometheus", "grants": [{"project": "*", "role": "viewer"}]})),
        )
        .await;
    let token = t["token"].as_str().expect("token").to_string();
    let dir = temp_dir("prometheus");
    let target = s.base.trim_start_matches("http://").to_string();
    let prom = Prometheus::start(&dir, &target, &token).await;

    // A quick tier-1 run, then one that holds 2 cores for a while.
    let (_, quick) = s.submit(run("quick", "true"), "d1").await;
    s.wait(quick["id"].as_i64().expect("id"), LONG).await;
    let (_, slow) = s.submit(run("slow", "sleep 12"), "d1").await;
    let slow = slow["id"].as_i64().expect("id");
    s.wait_until(slow, LONG, "the slow task to run", |r| r["jobs"][0]["tasks"][0]["state"] == "running")
        .await;

    // The queue's usage as Prometheus scraped it equals the API's (2000 millicores = 2 cores,
    // once the owning worker has published its snapshot).
    let start = Instant::now();
    let q = loop {
        let (_, q) = s.call(Method::GET, "/v1/queues/root.ads.tier1", None).await;
        if q["usage"]["cpu"] == 2000 {
            break q;
        }
        assert!(start.elapsed() < LONG, "the API never showed the task's 2 cores: {q}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let query = "weir_queue_usage{job=\"weir\",queue=\"root.ads.tier1\",resource=\"cpu\",unit=\"core\"}";
    let start = Instant::now();
    loop {
        if prom.value(query).await == Some(q["usage"]["cpu"].as_f64().unwrap_or(0.0) / 1000.0) {
            break;
        }
        assert!(start.elapsed() < LONG, "Prometheus never saw 2 cores in use: {:?}", prom.value(query).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (_, q2) = s.call(Method::GET, "/v1/queues/root.ads.tier1", None).await;
    assert_eq!(q2["usage"]["cpu"], 2000, "still running while Prometheus was read");

    // Once both runs ended, the SLO counter equals the SLO report's tier-1 `met`.
    s.wait(slow, LONG).await;
    let (_, report) = s.call(Method::GET, "/v1/reports/slo?window=1h", None).await;
    let met = report["tiers"][0]["slo_met"].as_f64().expect("met");
    assert_eq!(met, 2.0, "{report:#}");
    let query = "weir_slo_runs_total{job=\"weir\",tier=\"1\",outcome=\"met\"}";
    let start = Instant::now();
    while prom.value(query).await != Some(met) {
        assert!(
            start.elapsed() < LONG,
            "Prometheus' SLO counter is {:?}, the API says {met}",
            prom.value(query).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(prom.value("up{job=\"weir\"}").await, Some(1.0));
    drop(prom);
    s.stop(weir_server::Stop::Now).await;
}
