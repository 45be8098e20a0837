//! A small WebDriver client (W3C protocol over HTTP with reqwest) driving Debian's headless
//! Chromium through chromedriver, for the dashboard's end-to-end test. Only what the test needs:
//! sessions, navigation, elements, scripts, screenshots and the browser's console log.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver in a process group of its own, with the Chromium it starts (the browser and its
/// helpers stay in that group): the whole group is killed when dropped, so no browser outlives
/// the test.
pub struct Driver {
    child: Child,
    pub base: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether Chromium and chromedriver are installed.
pub fn available() -> bool {
    Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists()
}

impl Driver {
    pub async fn start(log: &Path) -> Driver {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        let driver = Driver { child, base: format!("http://127.0.0.1:{port}") };
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{}/status", driver.base)).send().await {
                if r.status().is_success() {
                    return driver;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(20), "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A headless Chromium session with a fresh profile in `profile`.
    pub async fn session(&self, profile: &Path) -> Session {
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1400,1800",
                    format!("--user-data-dir={}", profile.display()),
                ]
            }
        }}});
        let v: Value = http
            .post(format!("{}/session", self.base))
            .json(&caps)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("json");
        let id = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_string();
        Session { http, url: format!("{}/session/{id}", self.base) }
    }
}

pub struct Session {
    http: reqwest::Client,
    url: String,
}

/// An element reference.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Session {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.expect("webdriver").json().await.expect("webdriver json");
        if v["value"].get("error").is_some() {
            panic!("webdriver {path}: {}", v["value"]);
        }
        v["value"].clone()
    }

    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.url));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.expect("webdriver").json().await.expect("webdriver json");
        if v["value"].get("error").is_some() {
            Err(v["value"].clone())
        } else {
            Ok(v["value"].clone())
        }
    }

    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    pub async fn current_url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None).await.as_str().unwrap_or_default().to_string()
    }

    pub async fn find(&self, css: &str) -> Option<Element> {
        let v = self
            .try_call(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css})))
            .await
            .ok()?;
        v[ELEMENT].as_str().map(|id| Element(id.to_string()))
    }

    /// Wait (at most `limit`) for an element.
    pub async fn wait_for(&self, css: &str, limit: Duration) -> Element {
        let start = Instant::now();
        loop {
            if let Some(e) = self.find(css).await {
                return e;
            }
            assert!(start.elapsed() < limit, "no `{css}` within {limit:?} on {}", self.current_url().await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, e: &Element) {
        self.call(reqwest::Method::POST, &format!("/element/{}/click", e.0), Some(json!({}))).await;
    }

    pub async fn type_into(&self, e: &Element, text: &str) {
        self.call(reqwest::Method::POST, &format!("/element/{}/value", e.0), Some(json!({"text": text})))
            .await;
    }

    pub async fn text(&self, e: &Element) -> String {
        self.call(reqwest::Method::GET, &format!("/element/{}/text", e.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Run a script in the page and return its value.
    pub async fn script(&self, js: &str) -> Value {
        self.call(reqwest::Method::POST, "/execute/sync", Some(json!({"script": js, "args": []}))).await
    }

    /// Poll `js` (which returns a value) until `ok` holds for it.
    pub async fn wait_until(
        &self,
        what: &str,
        js: &str,
        limit: Duration,
        ok: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let v = self.script(js).await;
            if ok(&v) {
                return v;
            }
            assert!(start.elapsed() < limit, "{what} did not happen within {limit:?} (last value {v})");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A PNG of the whole page (Chromium's DevTools capture beyond the viewport, through
    /// chromedriver; the plain WebDriver screenshot of the viewport if that is unavailable).
    pub async fn screenshot(&self, path: &Path) {
        let h = self
            .script("var m = document.querySelector('main') || document.body; return Math.ceil(m.getBoundingClientRect().bottom + window.scrollY + 24)")
            .await
            .as_u64()
            .unwrap_or(1800)
            .clamp(400, 10_000);
        let params = json!({"cmd": "Page.captureScreenshot", "params": {
            "format": "png", "captureBeyondViewport": true,
            "clip": {"x": 0, "y": 0, "width": 1400, "height": h, "scale": 1}
        }});
        let b64 = match self.try_call(reqwest::Method::POST, "/goog/cdp/execute", Some(params)).await {
            Ok(v) => v["data"].clone(),
            Err(_) => self.call(reqwest::Method::GET, "/screenshot", None).await,
        };
        let png = base64_decode(b64.as_str().unwrap_or_default());
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("screenshot dir");
        }
        std::fs::write(path, png).expect("write screenshot");
    }

    /// Browser console entries since the last call (chromedriver's log endpoint).
    pub async fn console(&self) -> Vec<Value> {
        self.call(reqwest::Method::POST, "/se/log", Some(json!({"type": "browser"})))
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub async fn close(&self) {
        let _ = self.http.delete(&self.url).send().await;
    }
}

/// Where screenshots go: `target/screenshots/` of the workspace.
pub fn screenshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots")
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter_map(val) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[test]
fn base64_round_trips_known_text() {
    assert_eq!(base64_decode("aGVsbG8gd29ybGQ="), b"hello world");
    assert_eq!(base64_decode("iVBORw=="), b"\x89PNG");
}
