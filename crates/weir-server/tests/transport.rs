//! Transport and sessions (issue 17): HTTPS with rustls and a private CA, the listener's
//! timeouts and connection cap against slow clients on raw sockets, and the dashboard's
//! server-side sessions (the token never in a cookie, expiry, logout, revocation, login CSRF).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{config, db_url, temp_dir, Db, TestServer};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weir_server::{HttpSettings, Server, Stop, TlsFiles};

/// How long a test waits for something that must happen within a second or two.
const PATIENCE: Duration = Duration::from_secs(20);

fn tls_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tls")
}

fn tls_files() -> TlsFiles {
    TlsFiles { cert: tls_dir().join("server.crt"), key: tls_dir().join("server.key") }
}

fn no_redirects() -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none())
}

/// A client that trusts the test CA (and the system's roots).
fn trusting_client() -> reqwest::Client {
    let pem = std::fs::read(tls_dir().join("ca.crt")).expect("ca.crt");
    let ca = reqwest::Certificate::from_pem(&pem).expect("CA certificate");
    no_redirects().tls_certs_merge([ca]).build().expect("client")
}

/// A server over HTTPS on 127.0.0.1 with the test certificate.
async fn tls_server(tag: &str) -> (Server, String, String, PathBuf) {
    let dir = temp_dir(tag);
    let url = db_url(Db::Sqlite, &dir, tag).await.expect("url");
    let mut c = config(&dir);
    c.tls = Some(tls_files());
    let store = weir_store::open(&url).await.expect("store");
    let server = Server::start(c, store).await.expect("server starts");
    let token =
        std::fs::read_to_string(weir_server::admin_token_path(&dir)).expect("token").trim().to_string();
    let base = format!("https://localhost:{}", server.addr.expect("addr").port());
    (server, base, token, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_private_ca_secure_cookies_and_the_peer_address() {
    let (server, base, token, _dir) = tls_server("tls").await;
    let http = trusting_client();
    let r = http.get(format!("{base}/healthz")).send().await.expect("https");
    assert_eq!(r.status(), StatusCode::OK);
    let (status, v) = {
        let r = http.get(format!("{base}/v1/runs")).bearer_auth(&token).send().await.expect("api");
        (r.status(), r.json::<serde_json::Value>().await.expect("json"))
    };
    assert_eq!(status, StatusCode::OK, "{v:#}");
    // A client that does not trust the CA refuses the server; plain HTTP gets no answer.
    let untrusting = reqwest::Client::new();
    assert!(untrusting.get(format!("{base}/healthz")).send().await.is_err(), "an unknown CA is refused");
    let plain = base.replace("https://", "http://");
    assert!(untrusting.get(format!("{plain}/healthz")).send().await.is_err(), "no plain HTTP on a TLS port");
    // Over TLS, both the login form's and the session's cookies are `Secure`.
    let login = common::dashboard_login(&http, &base, &token).await;
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    let cookies: Vec<String> = login
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let session = cookies.iter().find(|c| c.starts_with("weir_session=")).expect("a session cookie");
    for part in ["HttpOnly", "SameSite=Strict", "Path=/;", "Secure"] {
        assert!(session.contains(part), "{part} missing: {session}");
    }
    let page = http
        .get(format!("{base}/runs"))
        .header(COOKIE, common::session_cookie(&login))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), StatusCode::OK);
    // Handlers still see the peer address (ConnectInfo): the audit log names it.
    let r = http
        .get(format!("{base}/v1/audit?action=login"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("audit")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(r["entries"][0]["client"], "127.0.0.1", "{r:#}");
    server.shutdown(Stop::Now).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_tls_files_are_named_and_nothing_is_created() {
    let scratch = temp_dir("tls-bad");
    let junk = scratch.join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").expect("write");
    let cases = [
        (
            TlsFiles { cert: scratch.join("missing.crt"), key: tls_files().key },
            "missing.crt",
            "cannot be read",
        ),
        (TlsFiles { cert: junk.clone(), key: tls_files().key }, "junk.pem", "no certificate"),
        (TlsFiles { cert: tls_files().cert, key: junk.clone() }, "junk.pem", "no private key"),
        // A key that is not the certificate's: the CA's certificate with the server's key.
        (TlsFiles { cert: tls_dir().join("ca.crt"), key: tls_files().key }, "server.key", "cannot be used"),
    ];
    for (files, name, problem) in cases {
        let dir = scratch.join("data");
        let mut c = config(&dir);
        c.tls = Some(files);
        let store = weir_store::open(&format!("sqlite://{}", scratch.join("weir.db").display()))
            .await
            .expect("store");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let e = Server::start_on(c, store, Some(listener)).await.err().expect("refused").to_string();
        assert!(e.contains(name) && e.contains(problem), "{name}: {e}");
        assert!(!dir.exists(), "nothing created for {name}");
    }
}

/// Reads until the server closes the connection (or `PATIENCE` passes); what it sent.
async fn until_closed(sock: &mut TcpStream) -> Option<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, sock.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// Slowloris: clients that open connections and trickle their headers a byte at a time, and
/// others that send nothing, take every connection the server allows. They are cut off at the
/// header timeout, and an honest client is served meanwhile or right after — never held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_silent_clients_do_not_hold_the_server() {
    let dir = temp_dir("slowloris");
    let url = db_url(Db::Sqlite, &dir, "slowloris").await.expect("url");
    let mut c = config(&dir);
    c.http = HttpSettings {
        header_read_timeout: Duration::from_secs(1),
        body_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        max_connections: 4,
    };
    let s = TestServer::start_with(c, &url).await;
    let addr = s.base.trim_start_matches("http://").to_string();
    // Four attackers fill the cap: two trickle a header forever, two send nothing.
    let mut attackers = Vec::new();
    for i in 0..4 {
        let addr = addr.clone();
        attackers.push(tokio::spawn(async move {
            let mut sock = TcpStream::connect(&addr).await.expect("connect");
            let opened = Instant::now();
            if i % 2 == 0 {
                let header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
                for b in header.iter().chain(std::iter::repeat(&b'a')) {
                    if sock.write_all(&[*b]).await.is_err() {
                        break;
                    }
                    if opened.elapsed() > PATIENCE {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                // The server closed the connection: drain what it said.
                until_closed(&mut sock).await.map(|_| opened.elapsed())
            } else {
                until_closed(&mut sock).await.map(|_| opened.elapsed())
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // An honest client gets its answer although the attackers came first.
    let honest = tokio::time::timeout(PATIENCE, s.http.get(format!("{}/healthz", s.base)).send())
        .await
        .expect("the honest request was not held")
        .expect("answered");
    assert_eq!(honest.status(), StatusCode::OK);
    for a in attackers {
        let held = a.await.expect("attacker").expect("the server closed the slow connection");
        assert!(held < PATIENCE, "held {held:?}");
    }
    // A body that never finishes: 408 at the body timeout, the connection closed.
    let mut sock = TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000\r\n\r\n{{\"workflow\":",
        s.token
    );
    sock.write_all(head.as_bytes()).await.expect("write");
    let answer = until_closed(&mut sock).await.expect("the server gave up on the body");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    // A kept-alive connection with nothing to ask is closed after the idle timeout.
    let mut sock = TcpStream::connect(&addr).await.expect("connect");
    sock.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("write");
    let answer = until_closed(&mut sock).await.expect("the idle connection was closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let mut s = s;
    s.stop(Stop::Now).await;
}

/// Sessions: the cookie holds a random id, never the token; the store holds hashes only; a
/// session ends at logout, at expiry and with its token; the login form needs its nonce; the
/// internal header that carries a session to the API cannot be sent by a client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_keep_the_token_server_side_and_end_when_they_should() {
    let dir = temp_dir("sessions");
    let url = db_url(Db::Sqlite, &dir, "sessions").await.expect("url");
    let mut c = config(&dir);
    c.session_lifetime = Duration::from_secs(3);
    let mut s = TestServer::start_with(c, &url).await;
    let http = no_redirects().build().expect("client");
    let page = |cookie: String, path: &str| {
        let req = http.get(format!("{}{path}", s.base)).header(COOKIE, cookie);
        async move { req.send().await.expect("page") }
    };

    // Login CSRF: a form without the nonce cookie (another site's), or with another nonce, is
    // refused before the token is even looked at.
    let r = http
        .post(format!("{}/login", s.base))
        .form(&[("token", s.token.as_str()), ("nonce", &"0".repeat(64))])
        .send()
        .await
        .expect("login");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (nonce_cookie, nonce) = common::login_form(&http, &s.base).await;
    assert!(nonce_cookie.starts_with("weir_login="));
    let r = http
        .post(format!("{}/login", s.base))
        .header(COOKIE, &nonce_cookie)
        .form(&[("token", s.token.as_str()), ("nonce", &"0".repeat(64))])
        .send()
        .await
        .expect("login");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = http
        .post(format!("{}/login", s.base))
        .header(COOKIE, &nonce_cookie)
        .form(&[("token", s.token.as_str()), ("nonce", &nonce)])
        .send()
        .await
        .expect("login");
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // The cookie: a random id, not the token; scoped to the whole site, HttpOnly, SameSite,
    // and not Secure over plain HTTP.
    let set: Vec<String> =
        r.headers().get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok().map(str::to_string)).collect();
    let session = set.iter().find(|c| c.starts_with("weir_session=")).expect("session cookie").clone();
    assert!(!set.iter().any(|c| c.contains(&s.token)), "the token is in a cookie: {set:?}");
    assert!(
        session.contains("; Path=/;") && session.contains("HttpOnly") && session.contains("SameSite=Strict"),
        "{session}"
    );
    assert!(!session.contains("Secure"), "{session}");
    let cookie = common::session_cookie(&r);
    let id = cookie.trim_start_matches("weir_session=").to_string();
    assert_eq!(id.len(), 64);
    // The store keeps hashes only: neither the id nor the token is in the database file.
    let db = std::fs::read(dir.join("weir.db")).unwrap_or_default();
    let wal = std::fs::read(dir.join("weir.db-wal")).unwrap_or_default();
    for secret in [&id, &s.token] {
        let needle = secret.as_bytes();
        assert!(
            !db.windows(needle.len()).any(|w| w == needle) && !wal.windows(needle.len()).any(|w| w == needle),
            "a secret is stored in clear"
        );
    }
    assert_eq!(page(cookie.clone(), "/runs").await.status(), StatusCode::OK);
    // The session reads the API (the log tail does); a client cannot pose as a session by
    // sending the internal header itself.
    let r = page(cookie.clone(), "/v1/runs").await;
    assert_eq!(r.status(), StatusCode::OK);
    let admin_hash = weir_server::hash_token(&s.token);
    let r = http
        .get(format!("{}/v1/runs", s.base))
        .header("x-weir-session-token-hash", admin_hash)
        .send()
        .await
        .expect("forged");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "a forged session header is ignored");

    // Logout ends the session on the server: the old cookie no longer works.
    let html = page(cookie.clone(), "/runs").await.text().await.expect("html");
    let at = html.find("name=\"csrf\" value=\"").expect("form token") + "name=\"csrf\" value=\"".len();
    let csrf = html[at..at + 64].to_string();
    let r = http
        .post(format!("{}/logout", s.base))
        .header(COOKIE, &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("logout");
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let r = page(cookie.clone(), "/runs").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers().get(LOCATION).and_then(|v| v.to_str().ok()), Some("/login?expired=1"));
    assert_eq!(page(cookie, "/v1/runs").await.status(), StatusCode::UNAUTHORIZED);

    // Expiry: a session lasts `session_lifetime` (3 s here).
    let cookie = common::session_cookie(&common::dashboard_login(&http, &s.base, &s.token).await);
    assert_eq!(page(cookie.clone(), "/runs").await.status(), StatusCode::OK);
    // Logging in again from the same browser replaces the session: the old id stops working.
    let (nonce_cookie, nonce) = common::login_form(&http, &s.base).await;
    let again = http
        .post(format!("{}/login", s.base))
        .header(COOKIE, format!("{nonce_cookie}; {cookie}"))
        .form(&[("token", s.token.as_str()), ("nonce", &nonce)])
        .send()
        .await
        .expect("login again");
    assert_eq!(page(cookie.clone(), "/runs").await.status(), StatusCode::SEE_OTHER, "the replaced session");
    let cookie = common::session_cookie(&again);
    assert_eq!(page(cookie.clone(), "/runs").await.status(), StatusCode::OK);
    let start = Instant::now();
    loop {
        let r = page(cookie.clone(), "/runs").await;
        if r.status() == StatusCode::SEE_OTHER {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the session did not expire");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Revoking the token ends its sessions.
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "ads", "grants": [{"project": "ads", "role": "viewer"}]})),
        )
        .await;
    let viewer = common::session_cookie(
        &common::dashboard_login(&http, &s.base, t["token"].as_str().expect("token")).await,
    );
    assert_eq!(page(viewer.clone(), "/runs").await.status(), StatusCode::OK);
    let (st, _) =
        s.call(Method::DELETE, &format!("/v1/tokens/{}", t["id"].as_str().expect("id")), None).await;
    assert!(st == 200 || st == 204, "{st}");
    assert_eq!(page(viewer, "/runs").await.status(), StatusCode::SEE_OTHER);
    s.stop(Stop::Now).await;
}

/// The CI's PostgreSQL may speak TLS (`.ci/run` starts it with `ssl=on` and the test
/// certificate): a store URL with `sslmode=verify-full` and the CA connects over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_connects_to_postgresql_over_tls() {
    let Ok(url) = std::env::var("WEIR_TEST_POSTGRES_URL") else {
        eprintln!("\n*** SKIPPED: WEIR_TEST_POSTGRES_URL is not set ***\n");
        return;
    };
    if std::env::var("WEIR_TEST_POSTGRES_TLS").is_err() {
        eprintln!(
            "\n*** SKIPPED: WEIR_TEST_POSTGRES_TLS is not set (the PostgreSQL does not speak TLS) ***\n"
        );
        return;
    }
    weir_server::install_crypto_provider();
    let db = weir_store::create_postgres_database(&url, &format!("weir_tls_{}", std::process::id()))
        .await
        .expect("database");
    let ca = tls_dir().join("ca.crt");
    let secure = format!("{db}?sslmode=verify-full&sslrootcert={}", ca.display());
    let store: Arc<dyn weir_store::JobStore> = weir_store::open(&secure).await.expect("a verified TLS store");
    assert!(store.ping().await.is_ok());
    let required = format!("{db}?sslmode=require");
    assert!(weir_store::open(&required).await.is_ok(), "sslmode=require");
    // Verification is real: a CA that did not sign the server's certificate is refused.
    let wrong = format!("{db}?sslmode=verify-full&sslrootcert={}", tls_dir().join("server.crt").display());
    assert!(weir_store::open(&wrong).await.is_err(), "an unverifiable server is refused");
}

/// A client that asks for a large response and stops reading it (a "slow read") does not keep
/// its connection: once a write has been blocked for the idle timeout, the server closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_disconnected() {
    let dir = temp_dir("slow-read");
    let url = db_url(Db::Sqlite, &dir, "slow-read").await.expect("url");
    let mut c = config(&dir);
    c.http.idle_timeout = Duration::from_secs(1);
    let mut s = TestServer::start_with(c, &url).await;
    let (_, run) = s.submit(common::one_task("log", "root.ads.tier1", "echo first line"), "d").await;
    let id = run["id"].as_i64().expect("id");
    s.wait(id, PATIENCE).await;
    let attempts = weir_store::JobStore::attempts(&s.store, id, 0, 0, 0).await.expect("attempts");
    // A 256 MiB log (sparse): far more than the socket buffers of both ends hold.
    const SIZE: u64 = 256 << 20;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&attempts[0].stdout)
        .expect("log")
        .set_len(SIZE)
        .expect("grow");
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut sock = TcpStream::connect(&addr).await.expect("connect");
    let req = format!(
        "GET /v1/runs/{id}/tasks/j.s.0/logs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        s.token
    );
    sock.write_all(req.as_bytes()).await.expect("request");
    // Read nothing for a while: the server's writes block, and it gives up on the client.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.checked_duration_since(Instant::now()).expect("the connection was never closed");
        match tokio::time::timeout(left, sock.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got += n as u64,
            Err(_) => panic!("the connection was never closed ({got} bytes read)"),
        }
    }
    assert!(got < SIZE, "the whole log arrived ({got} bytes): the server never gave up");
    s.stop(Stop::Now).await;
}

/// The cap: with one connection allowed and a silent client holding it, another client waits
/// (it is not refused, nor served beside it) until the first one goes away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds_further_clients_until_one_closes() {
    let dir = temp_dir("cap");
    let url = db_url(Db::Sqlite, &dir, "cap").await.expect("url");
    let mut c = config(&dir);
    c.http.max_connections = 1;
    c.http.header_read_timeout = Duration::from_secs(60);
    let mut s = TestServer::start_with(c, &url).await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let holder = TcpStream::connect(&addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = tokio::spawn({
        let (http, base) = (s.http.clone(), s.base.clone());
        async move { http.get(format!("{base}/healthz")).send().await.map(|r| r.status()) }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!second.is_finished(), "a second connection was served beside the one allowed");
    drop(holder);
    let status = tokio::time::timeout(PATIENCE, second).await.expect("served once the slot freed");
    assert_eq!(status.expect("task").expect("request"), StatusCode::OK);
    s.stop(Stop::Now).await;
}

/// Behind a reverse proxy that terminates TLS, `secure_cookies` marks the cookies `Secure`
/// although the server itself speaks HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_cookies_behind_a_tls_proxy() {
    let dir = temp_dir("secure-cookies");
    let url = db_url(Db::Sqlite, &dir, "secure-cookies").await.expect("url");
    let mut c = config(&dir);
    c.secure_cookies = true;
    let mut s = TestServer::start_with(c, &url).await;
    let http = no_redirects().build().expect("client");
    let login = common::dashboard_login(&http, &s.base, &s.token).await;
    let set: Vec<&str> = login.headers().get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()).collect();
    assert!(set.iter().all(|c| c.contains("; Secure")), "{set:?}");
    s.stop(Stop::Now).await;
}
