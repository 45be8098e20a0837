//! The real parts the committer's tests run against: moto's S3 server (from PyPI, started here
//! on a loopback port in a temp dir, stopped by pid), a local directory, and a fault proxy in
//! front of moto that answers 503 SlowDown or stalls (moto has no fault injection).

#![allow(dead_code)]

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weir_commit::{CommitConfig, Committer, Credentials, RetrySettings, S3Config, StoreConfig};

pub const MOTO_VERSION: &str = "5.2.1";

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let mut b = [0u8; 6];
        getrandom::fill(&mut b).unwrap();
        let name: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("weir-commit-{tag}-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// moto's S3 server, running until dropped (then killed by its pid).
pub struct Moto {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

impl Moto {
    pub fn start() -> Moto {
        let dir = TempDir::new("moto");
        let port = free_port();
        let log = std::fs::File::create(dir.0.join("moto.log")).unwrap();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(&dir.0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start moto_server ({e}): the S3 tests need moto's server from PyPI: \
                     pip install 'moto[server]=={MOTO_VERSION}' (.ci/run installs it)"
                )
            });
        let moto = Moto { child, port, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen on {port} in 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        moto
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (moto does not check signatures unless told to).
    pub async fn bucket(&self, name: &str) {
        let resp = raw_request(
            self.port,
            &format!(
                "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ),
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 200") || resp.starts_with("HTTP/1.0 200"), "{resp}");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn raw_request(port: u16, req: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub fn s3_config(endpoint: &str, bucket: &str) -> S3Config {
    S3Config {
        endpoint: Some(endpoint.to_string()),
        region: "us-east-1".into(),
        bucket: bucket.into(),
        credentials: Credentials {
            access_key_id: "weir-test".into(),
            secret_access_key: "weir-test-secret".into(),
            session_token: None,
        },
        request_timeout_ms: 20_000,
        retry: RetrySettings {
            max_retries: 6,
            init_backoff_ms: 5,
            max_backoff_ms: 50,
            retry_timeout_ms: 60_000,
        },
    }
}

/// Small parts (S3's minimum) and some parallelism, so a few MiB make several parts.
pub fn small_parts() -> CommitConfig {
    CommitConfig { part_size: weir_commit::MIN_PART_SIZE, parallel_parts: 3, parallel_files: 4 }
}

pub fn s3_committer(endpoint: &str, bucket: &str) -> Committer {
    install_crypto();
    Committer::new(&StoreConfig::S3(s3_config(endpoint, bucket)), small_parts()).unwrap()
}

pub fn local_committer(root: &Path) -> Committer {
    Committer::new(&StoreConfig::Local { root: root.to_path_buf() }, small_parts()).unwrap()
}

/// `len` bytes that differ with `seed` (xorshift), so a content check means something.
pub fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// What the fault proxy does to the next connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer `503 Slow Down` with S3's SlowDown error, then close.
    SlowDown,
    /// Read the request and never answer (the client times out).
    Stall,
}

/// A TCP proxy in front of moto: the first `faults` connections get `fault`, the others are
/// passed through.
pub struct FaultProxy {
    pub port: u16,
    remaining: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    pub async fn start(upstream: u16, fault: Fault, faults: usize) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let remaining = Arc::new(AtomicUsize::new(faults));
        let left = remaining.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                let take =
                    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
                tokio::spawn(async move {
                    if !take {
                        if let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)).await {
                            let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                        }
                        return;
                    }
                    read_request(&mut conn).await;
                    match fault {
                        Fault::SlowDown => {
                            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
                            let head = format!("HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                            let _ = conn.write_all(head.as_bytes()).await;
                            let _ = conn.write_all(body.as_bytes()).await;
                            let _ = conn.shutdown().await;
                        }
                        Fault::Stall => {
                            tokio::time::sleep(Duration::from_secs(600)).await;
                        }
                    }
                });
            }
        });
        FaultProxy { port, remaining, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Faults not yet served.
    pub fn remaining(&self) -> usize {
        self.remaining.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP request (headers and a Content-Length body).
async fn read_request(conn: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut have = buf.len() - header_end;
    while have < len {
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
    }
}
