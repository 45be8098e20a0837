//! A real crash: a separate "server" process starts attempts and is killed with SIGKILL; a new
//! backend adopts what it left behind.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::*;
use weir_backend::{Adopted, Backend, Exit, Launched, LocalBackend, LocalConfig};

const HELPER_ENV: &str = "WEIR_BACKEND_CRASH_HELPER_ROOT";

/// Not a test: the "server" that `attempts_survive_a_killed_server_and_are_adopted` runs as a
/// child process (ignored, so it runs only when asked for by name).
#[test]
#[ignore = "helper process for attempts_survive_a_killed_server_and_are_adopted"]
fn crash_helper_server() {
    let Ok(root) = std::env::var(HELPER_ENV) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let backend = LocalBackend::new(LocalConfig::new(format!("{root}/state")), tx).unwrap();
        let f = Fixture { root: root.into(), backend: None, exits: tokio::sync::mpsc::unbounded_channel().1, started: vec![] };
        let commands = [
            ("crash/running", "while [ ! -e go ]; do sleep 0.05; done; exit 4"),
            ("crash/quick", "exit 6"),
            ("crash/stray", "(trap '' TERM; exec sleep 300) & echo started; while [ ! -e go ]; do sleep 0.05; done; exit 2"),
        ];
        let mut out = std::io::stdout().lock();
        for (attempt, command) in commands {
            let launched = backend.start(&f.launch(attempt, command)).await.unwrap();
            writeln!(out, "LAUNCHED {}", launched.to_json()).unwrap();
        }
        writeln!(out, "READY").unwrap();
        out.flush().unwrap();
        std::mem::forget(f); // its Drop would clean up what the crash must leave behind
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    });
}

/// The helper server, killed if the test fails before it does.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_survive_a_killed_server_and_are_adopted() {
    let mut f = Fixture::new("crash");
    let mut server = Server(
        Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "crash_helper_server", "--nocapture", "--test-threads=1"])
            .env(HELPER_ENV, &f.root)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut launched = Vec::new();
    for line in BufReader::new(server.0.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // libtest may print its "test … " prefix on the same line.
        if let Some(json) = line.split_once("LAUNCHED ").map(|(_, json)| json) {
            let l = Launched::from_json(json).unwrap();
            f.started.push((l.pid, l.start_ticks));
            launched.push(l);
        } else if line == "READY" {
            break;
        }
    }
    assert_eq!(launched.len(), 3, "the helper server did not start its attempts");
    let [running, quick, stray] = [&launched[0], &launched[1], &launched[2]];
    let stray_log = f.launch("crash/stray", "").stdout;
    eventually("the stray to start", || read(&stray_log).contains("started")).await;
    eventually("the quick attempt to end", || quick.dir.join("status").exists()).await;

    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    // The server's death took none of its attempts with it.
    assert_eq!(start_ticks(running.pid), Some(running.start_ticks));
    assert_eq!(start_ticks(stray.pid), Some(stray.start_ticks));
    // Their parent is now init, which reaps the quick one.
    eventually("init to reap the quick attempt", || start_ticks(quick.pid) != Some(quick.start_ticks)).await;

    f.restart();
    assert_eq!(f.backend().adopt(quick).await.unwrap(), Adopted::Ended(Exit::Code(6)));
    assert_eq!(f.backend().adopt(running).await.unwrap(), Adopted::Running);
    assert_eq!(f.backend().adopt(stray).await.unwrap(), Adopted::Running);
    std::fs::write(f.work().join("go"), "").unwrap();
    let exits = f.exits(2).await;
    assert_eq!(exits["crash/running"].exit, Exit::Code(4));
    assert_eq!(exits["crash/stray"].exit, Exit::Code(2));
    // What the stray attempt left in its group (ignoring SIGTERM) went with it.
    assert_eq!(group_members(stray.pid), Vec::<i32>::new());
    f.no_more_exits().await;
}
