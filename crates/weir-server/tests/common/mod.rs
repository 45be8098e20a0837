//! A real server on an ephemeral loopback port, on SQLite in a temp dir or on the PostgreSQL
//! named by `WEIR_TEST_POSTGRES_URL` (each server its own database), and HTTP helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{json, Value};
use weir_server::{ClusterSource, Server, ServerConfig, Stop};

pub const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 8000, memory: 16g}}
queues:
  - name: ads
    children: [{name: tier1, tier: 1}, {name: tier3, tier: 3}]
  - name: search
    children: [{name: tier1, tier: 1}]
  - {name: default, tier: 3}
";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh temporary directory (removed by the OS's tmp cleaning; tests keep it for post-mortems).
pub fn temp_dir(tag: &str) -> PathBuf {
    // reqwest's rustls needs the process's provider before any client is built.
    weir_server::install_crypto_provider();
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("weir-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The store URL for a new test server, or `None` (with a loud note) when PostgreSQL is not
/// configured.
pub async fn db_url(db: Db, dir: &Path, tag: &str) -> Option<String> {
    match db {
        Db::Sqlite => Some(format!("sqlite://{}", dir.join("weir.db").display())),
        Db::Postgres => {
            let Ok(url) = std::env::var("WEIR_TEST_POSTGRES_URL") else {
                eprintln!(
                    "\n*** SKIPPED on PostgreSQL: WEIR_TEST_POSTGRES_URL is not set (.ci/run sets it; \
                     run the suite through .ci/run to cover PostgreSQL) ***\n"
                );
                return None;
            };
            let n = SEQ.fetch_add(1, Ordering::SeqCst);
            let name = format!("weir_{tag}_{}_{n}", std::process::id());
            Some(weir_store::create_postgres_database(&url, &name).await.expect("create test database"))
        }
    }
}

pub struct TestServer {
    pub server: Option<Server>,
    pub base: String,
    pub token: String,
    pub dir: PathBuf,
    pub url: String,
    /// The server's store, as the concrete implementation (tests close it to make it fail).
    pub store: weir_store::Store,
    pub http: reqwest::Client,
}

pub fn config(dir: &Path) -> ServerConfig {
    let mut c = ServerConfig::new(dir.to_path_buf());
    c.listen = Some("127.0.0.1:0".parse().expect("addr"));
    c.clusters =
        vec![ClusterSource { name: "default".into(), yaml: CLUSTER.into(), file: "test cluster".into() }];
    c.tick = Duration::from_millis(100);
    c.kill_grace = Duration::from_secs(2);
    c.body_limit = 64 * 1024;
    // The service's own tests have their tasks write markers into the test's folder: tasks as
    // the test's user. Isolated tasks (the default) are tested in isolation.rs.
    c.tasks.single_tenant = true;
    c
}

impl TestServer {
    pub async fn start(db: Db, tag: &str) -> Option<TestServer> {
        let dir = temp_dir(tag);
        let url = db_url(db, &dir, tag).await?;
        Some(TestServer::start_with(config(&dir), &url).await)
    }

    pub async fn start_with(c: ServerConfig, url: &str) -> TestServer {
        let dir = c.data_dir.clone();
        let url = url.to_string();
        let store = weir_store::Store::open(&url).await.expect("store opens");
        let server = Server::start(c, std::sync::Arc::new(store.clone())).await.expect("server starts");
        let token = std::fs::read_to_string(weir_server::admin_token_path(&dir))
            .expect("admin token")
            .trim()
            .to_string();
        let base = format!("http://{}", server.addr.expect("listening"));
        TestServer { server: Some(server), base, token, dir, url, store, http: reqwest::Client::new() }
    }

    pub async fn stop(&mut self, how: Stop) {
        if let Some(s) = self.server.take() {
            s.shutdown(how).await;
        }
    }

    /// A request with the admin token.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(&self.token.clone(), method, path, body).await
    }

    pub async fn call_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base)).bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn submit(&self, workflow: Value, logical_date: &str) -> (u16, Value) {
        self.call(
            reqwest::Method::POST,
            "/v1/runs",
            Some(json!({"workflow": workflow, "logical_date": logical_date})),
        )
        .await
    }

    pub async fn run(&self, id: i64) -> Value {
        self.call(reqwest::Method::GET, &format!("/v1/runs/{id}"), None).await.1
    }

    /// Wait (at most `limit`) for the run to reach a final state.
    pub async fn wait(&self, id: i64, limit: Duration) -> Value {
        let start = std::time::Instant::now();
        loop {
            let run = self.run(id).await;
            if matches!(run["state"].as_str(), Some("succeeded" | "failed" | "killed")) {
                return run;
            }
            assert!(start.elapsed() < limit, "run {id} did not end within {limit:?}: {run:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait for a condition on the run.
    pub async fn wait_until(
        &self,
        id: i64,
        limit: Duration,
        what: &str,
        f: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = std::time::Instant::now();
        loop {
            let run = self.run(id).await;
            if f(&run) {
                return run;
            }
            assert!(start.elapsed() < limit, "run {id}: {what} did not happen within {limit:?}: {run:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A one-stage workflow in `queue` running `command`.
pub fn one_task(name: &str, queue: &str, command: &str) -> Value {
    json!({
        "name": name, "queue": queue,
        "jobs": [{"name": "j", "stages": [{"name": "s", "tasks": 1, "resources": {"cpu": 1000, "memory": 512},
                   "command": command}]}]
    })
}

/// The login page's nonce cookie (`weir_login=…`) and the nonce its form carries.
pub async fn login_form(http: &reqwest::Client, base: &str) -> (String, String) {
    let r = http.get(format!("{base}/login")).send().await.expect("login page");
    let cookie = r.headers().get("set-cookie").and_then(|v| v.to_str().ok()).expect("a nonce cookie");
    let cookie = cookie.split(';').next().expect("name=value").to_string();
    let html = r.text().await.unwrap_or_default();
    let at = html.find("name=\"nonce\" value=\"").expect("a nonce") + "name=\"nonce\" value=\"".len();
    (cookie, html[at..at + 64].to_string())
}

/// Log in to the dashboard at `base` with `token` as a browser does (the login page first, for
/// its nonce); the response to the login.
pub async fn dashboard_login(http: &reqwest::Client, base: &str, token: &str) -> reqwest::Response {
    let (cookie, nonce) = login_form(http, base).await;
    http.post(format!("{base}/login"))
        .header("cookie", cookie)
        .form(&[("token", token), ("nonce", nonce.as_str())])
        .send()
        .await
        .expect("login")
}

/// The session cookie (`weir_session=…`) a login set.
pub fn session_cookie(login: &reqwest::Response) -> String {
    login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("weir_session="))
        .expect("a session cookie")
        .split(';')
        .next()
        .expect("name=value")
        .to_string()
}
