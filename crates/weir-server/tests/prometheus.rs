//! A real Prometheus (Debian's `prometheus`) scrapes a test server's `/metrics` with a viewer
//! token; the test reads a queue's usage and an SLO counter back through Prometheus' HTTP API
//! and checks them against the server's own API. Prometheus 2.x asks for OpenMetrics first, so
//! this is also the check that the OpenMetrics answer parses: `promtool check metrics` reads
//! only the classic text format (prometheus/prometheus issue 8932, "Promtool should support
//! openmetrics", open), and lints the classic answer here.
//!
//! `promtool` also checks and unit-tests the rules in `examples/prometheus/`, and every series
//! the rules and the Grafana dashboard there name is checked against a live `/metrics`.
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
const PROMTOOL: &str = "/usr/bin/promtool";
/// The Accept header Prometheus 2.x sends (scrape/scrape.go, `scrapeAcceptHeader`).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
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
    // Families with no event yet are there at zero, through Prometheus' OpenMetrics parser.
    for query in [
        "weir_preemptions_total{job=\"weir\",cluster=\"default\",reason=\"min_share\"}",
        "weir_slo_runs_total{job=\"weir\",tier=\"1\",outcome=\"missed\"}",
        "weir_runs_finished_total{job=\"weir\",tier=\"3\",state=\"killed\"}",
        "weir_queue_wait_seconds_count{job=\"weir\",cluster=\"default\",queue=\"root.search.tier1\",tier=\"1\"}",
    ] {
        assert_eq!(prom.value(query).await, Some(0.0), "{query}");
    }
    // Both runs waited in root.ads.tier1: two observations of its wait histogram.
    let query = "weir_queue_wait_seconds_count{job=\"weir\",queue=\"root.ads.tier1\",tier=\"1\"}";
    assert_eq!(prom.value(query).await, Some(2.0), "{query}");
    assert_eq!(prom.value("weir_cluster_lease_held{job=\"weir\",cluster=\"default\"}").await, Some(1.0));
    let targets: Value = reqwest::Client::new()
        .get(format!("{}/api/v1/targets", prom.base))
        .send()
        .await
        .expect("targets")
        .json()
        .await
        .expect("targets json");
    assert_eq!(targets["data"]["activeTargets"][0]["lastError"], "", "{targets:#}");
    drop(prom);
    s.stop(weir_server::Stop::Now).await;
}

fn promtool_missing() -> bool {
    if Path::new(PROMTOOL).exists() {
        return false;
    }
    assert!(
        std::env::var_os("WEIR_REQUIRE_PROMETHEUS").is_none(),
        "WEIR_REQUIRE_PROMETHEUS is set but {PROMTOOL} (Debian's prometheus) is missing"
    );
    eprintln!("\n*** SKIPPED a promtool test: install Debian's prometheus (.ci/run does) ***\n");
    true
}

/// `promtool` with `args`, `stdin` piped in: its exit status and everything it printed.
fn promtool(args: &[&str], dir: &Path, stdin: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new(PROMTOOL)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write to promtool");
    let out = child.wait_with_output().expect("promtool");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/prometheus")
}

/// `/metrics` with `accept` (none: no header): the content type and the body.
async fn scrape(s: &TestServer, accept: Option<&str>) -> (String, String) {
    let mut req = s.http.get(format!("{}/metrics", s.base)).bearer_auth(&s.token);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let r = req.send().await.expect("scrape");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["vary"], "Accept");
    let ct = r.headers()["content-type"].to_str().expect("content type").to_string();
    (ct, r.text().await.expect("body"))
}

/// Each sample's name and labels (not its value: counters move between two scrapes).
fn series(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').map_or(l, |(s, _)| s).to_string())
        .collect()
}

/// Sample and family names of a text exposition.
fn names_served(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|l| match l.strip_prefix("# TYPE ") {
            Some(t) => t.split(' ').next(),
            None if l.starts_with('#') || l.is_empty() => None,
            None => l.split(['{', ' ']).next(),
        })
        .map(str::to_string)
        .collect()
}

/// Every `weir_…` or `weir:…` name in `text` (a rules file, a dashboard).
fn names_in(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("weir") {
        let after = &rest[i + 4..];
        let starts_word =
            i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric() && rest.as_bytes()[i - 1] != b'_';
        if starts_word && (after.starts_with('_') || after.starts_with(':')) {
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(after.len());
            out.insert(format!("weir{}", &after[..len]));
        }
        rest = after;
    }
    out
}

/// The Prometheus text format, version 0.0.4 ("Exposition formats", prometheus.io): the answer
/// without an Accept header or when the scraper asks for `text/plain`, and what `promtool check
/// metrics` lints. OpenMetrics when asked ("Scrape protocol content negotiation"), with the same
/// series. Then the store goes away: `/metrics` still answers, with `weir_store_up 0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_in_the_classic_format_and_negotiate_openmetrics() {
    if promtool_missing() {
        return;
    }
    // The test cluster with a max and a max_running_apps on root.ads, so that every family the
    // example rules read has series.
    let dir = temp_dir("promtool");
    let url = common::db_url(Db::Sqlite, &dir, "promtool").await.expect("sqlite");
    let mut c = common::config(&dir);
    c.clusters[0].yaml = common::CLUSTER.replace(
        "  - name: ads\n",
        "  - name: ads\n    max: {cpu: 6000, memory: 12g}\n    max_running_apps: 4\n",
    );
    assert_ne!(c.clusters[0].yaml, common::CLUSTER);
    let mut s = TestServer::start_with(c, &url).await;
    let (_, run) = s.submit(run("quick", "true"), "d1").await;
    s.wait(run["id"].as_i64().expect("id"), LONG).await;

    let (ct, classic) = scrape(&s, None).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    let (ok, lint) = promtool(&["check", "metrics"], &examples(), &classic);
    assert!(ok && lint.is_empty(), "promtool check metrics: {lint}\n{classic}");
    assert!(!classic.contains("# EOF") && !classic.contains("# UNIT"), "{classic}");
    let (ct, asked) = scrape(&s, Some("text/plain; version=0.0.4")).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert_eq!(series(&asked), series(&classic));

    let (ct, open) = scrape(&s, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(ct, "application/openmetrics-text; version=1.0.0; charset=utf-8");
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(open.contains("# TYPE weir_runs_finished counter\n"), "{open}");
    assert!(classic.contains("# HELP weir_runs_finished_total Runs that reached a final state"), "{classic}");
    assert_eq!(series(&open), series(&classic), "the two formats carry the same series");
    for line in [
        "weir_runs_finished_total{tier=\"1\",state=\"succeeded\"} 1",
        "weir_slo_runs_total{tier=\"1\",outcome=\"met\"} 1",
        "weir_slo_runs_total{tier=\"1\",outcome=\"missed\"} 0",
        "weir_preemptions_total{cluster=\"default\",reason=\"fair_share\"} 0",
        "weir_queue_weight{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\"} 1.0",
        "weir_queue_weight{cluster=\"default\",queue=\"root.ads\"} 1.0",
        "weir_queue_max_resources{cluster=\"default\",queue=\"root.ads\",resource=\"cpu\",unit=\"core\"} 6.0",
        "weir_queue_max_running_apps{cluster=\"default\",queue=\"root.ads\"} 4",
        "weir_queue_wait_seconds_count{cluster=\"default\",queue=\"root.ads.tier1\",tier=\"1\"} 1",
        "weir_cluster_lease_held{cluster=\"default\"} 1",
        "weir_store_up 1",
        "weir_runs{tier=\"1\",state=\"waiting\"} 0",
    ] {
        assert!(classic.contains(line), "missing `{line}` in:\n{classic}");
    }

    // The test cluster's one node, in one state, as the lease holder's engine sees it.
    let nodes: f64 = classic
        .lines()
        .filter(|l| l.starts_with("weir_cluster_nodes{cluster=\"default\","))
        .map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()).expect("a value"))
        .sum();
    assert_eq!(nodes, 1.0, "{classic}");

    // Every series the example rules and dashboard name is served, or is a recording rule.
    let rules = std::fs::read_to_string(examples().join("weir-rules.yml")).expect("rules");
    let dashboard = std::fs::read_to_string(examples().join("weir-dashboard.json")).expect("dashboard");
    let served = names_served(&classic);
    let recorded: std::collections::BTreeSet<String> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
        .map(|n| n.trim().to_string())
        .collect();
    assert!(recorded.len() >= 5, "{recorded:?}");
    for name in names_in(&rules).union(&names_in(&dashboard)) {
        assert!(
            served.contains(name) || recorded.contains(name),
            "examples/prometheus names `{name}`, which /metrics does not serve and no rule records"
        );
    }

    // The store goes away: the token seen before still reads /metrics, which says so.
    s.store.close().await;
    let (ct, down) = scrape(&s, None).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert!(down.contains("\nweir_store_up 0\n"), "{down}");
    assert!(!down.contains("weir_queue_usage{"), "no stale queue gauges: {down}");
    let (ok, lint) = promtool(&["check", "metrics"], &examples(), &down);
    assert!(ok && lint.is_empty(), "promtool check metrics: {lint}");
    // Past the server's 5 s token cache the token is still known (it cannot have been revoked
    // while the store is away); a token never seen cannot be checked: 503, not 401.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let (_, down) = scrape(&s, None).await;
    assert!(down.contains("\nweir_store_up 0\n"), "{down}");
    let r = s
        .http
        .get(format!("{}/metrics", s.base))
        .bearer_auth("weir_never_seen")
        .send()
        .await
        .expect("scrape");
    assert_eq!(r.status(), 503);
    s.stop(weir_server::Stop::Now).await;
}

/// `promtool check rules` and `promtool test rules` on `examples/prometheus/`.
#[test]
fn example_rules_pass_promtool_check_and_their_unit_tests() {
    if promtool_missing() {
        return;
    }
    let (ok, out) = promtool(&["check", "rules", "weir-rules.yml"], &examples(), "");
    assert!(ok && out.contains("SUCCESS"), "promtool check rules: {out}");
    let (ok, out) = promtool(&["test", "rules", "weir-rules.test.yml"], &examples(), "");
    assert!(ok && out.contains("SUCCESS"), "promtool test rules: {out}");
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(examples().join("weir-dashboard.json")).expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() >= 8), "{dashboard}");
}
