//! "Store unavailable" for real: the server runs on a PostgreSQL server of its own, which is
//! stopped (immediate shutdown, as a crash) under it. Submissions and `/readyz` answer 503;
//! nothing of a refused submission is in the store once PostgreSQL is back; the server carries
//! on by itself (no restart): new submissions are accepted and run to their end.
//!
//! Runs where `.ci/run` runs the PostgreSQL tests (`WEIR_TEST_POSTGRES_URL` set), with the
//! PostgreSQL binaries it installs; skipped loudly otherwise.

mod common;
#[path = "common/ports.rs"]
mod ports;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{one_task, TestServer};
use reqwest::Method;
use weir_server::Stop;

/// A throwaway PostgreSQL cluster in `dir`, run as the `postgres` user when we are root (the
/// server refuses to run as root), on a loopback port.
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    dir: PathBuf,
    port: u16,
}

fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

impl Postgres {
    fn run(&self, program: &str, args: &[&str]) -> bool {
        let exe = self.bin.join(program);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.args(args).output().is_ok_and(|o| o.status.success())
    }

    fn init(bin: PathBuf, dir: &Path) -> Postgres {
        // Stopped and started again on this port: one below the ephemeral range.
        let port = ports::free_port();
        let pg = Postgres { bin, data: dir.join("pgdata"), dir: dir.to_path_buf(), port };
        if is_root() {
            assert!(Command::new("chown").arg("postgres").arg(dir).status().is_ok_and(|s| s.success()));
        }
        let data = pg.data.display().to_string();
        assert!(pg.run("initdb", &["-D", &data, "-A", "trust", "-U", "weir"]), "initdb");
        pg
    }

    fn start(&self) {
        let opts = format!("-p {} -k {} -c listen_addresses=127.0.0.1", self.port, self.dir.display());
        let (data, log) = (self.data.display().to_string(), self.dir.join("pg.log").display().to_string());
        assert!(self.run("pg_ctl", &["-D", &data, "-l", &log, "-w", "-o", &opts, "start"]), "pg_ctl start");
    }

    /// `immediate`: as if the machine lost power (no checkpoint; recovery at the next start).
    fn stop(&self, mode: &str) {
        assert!(self.run("pg_ctl", &["-D", &self.data.display().to_string(), "-m", mode, "-w", "stop"]));
    }

    fn url(&self) -> String {
        format!("postgres://weir@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.run("pg_ctl", &["-D", &self.data.display().to_string(), "-m", "immediate", "stop"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_postgres_gives_503_and_nothing_half_written_and_the_server_carries_on() {
    let (Ok(_), Some(bin)) = (std::env::var("WEIR_TEST_POSTGRES_URL"), pg_bin()) else {
        eprintln!("\n*** SKIPPED: WEIR_TEST_POSTGRES_URL is not set or PostgreSQL is not installed (.ci/run does both) ***\n");
        return;
    };
    let dir = common::temp_dir("unavailable");
    let pg = Postgres::init(bin, &dir);
    pg.start();
    let mut s = TestServer::start_with(common::config(&dir.join("server")), &pg.url()).await;
    let (st, first) = s.submit(one_task("before", "root.ads.tier1", "true"), "d").await;
    assert_eq!(st, 201, "{first:#}");
    let first = first["id"].as_i64().expect("id");
    assert_eq!(s.wait(first, Duration::from_secs(30)).await["state"], "succeeded");

    pg.stop("immediate");
    let (st, e) = s.submit(one_task("late", "root.ads.tier1", "true"), "d").await;
    assert_eq!((st, e["error"]["code"].as_str()), (503, Some("unavailable")), "{e:#}");
    assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("nothing was changed")), "{e:#}");
    let ready = s.http.get(format!("{}/readyz", s.base)).send().await.expect("readyz").status().as_u16();
    assert_eq!(ready, 503);

    pg.start();
    // The same server, not restarted: its pool reconnects and its worker starts over.
    let mut after = None;
    for _ in 0..100 {
        let (st, v) = s.submit(one_task("after", "root.ads.tier1", "true"), "d").await;
        if st == 201 {
            after = v["id"].as_i64();
            break;
        }
        assert_eq!(st, 503, "{v:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = after.expect("accepted once PostgreSQL is back");
    assert_eq!(s.wait(after, Duration::from_secs(60)).await["state"], "succeeded");
    let (_, list) = s.call(Method::GET, "/v1/runs", None).await;
    let workflows: Vec<&str> =
        list["runs"].as_array().expect("runs").iter().filter_map(|r| r["workflow"].as_str()).collect();
    assert_eq!(workflows, ["after", "before"], "the refused submission left nothing behind");
    s.stop(Stop::Now).await;
}
