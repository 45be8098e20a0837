//! How many trivial tasks per second the local backend starts and sees end.
//!
//! ```sh
//! cargo run --release -p weir-backend --example throughput -- [TASKS] [IN_FLIGHT] [COMMAND]
//! ```
//!
//! Starts TASKS (default 5000) attempts of COMMAND (default `true`), at most IN_FLIGHT (default
//! 500) at once, from 4 concurrent starters; counts each end on the exit channel and forgets the
//! attempt (as the server does after recording it). Prints start-to-last-exit throughput. The
//! state folder is a fresh folder under the system's temporary folder; logs go to /dev/null.
//!
//! Isolation as the server uses it: `WEIR_THROUGHPUT_USER=weir-task` runs the tasks as that
//! user (needs root); `WEIR_THROUGHPUT_CGROUPS=0` turns the attempts' cgroups off (on by
//! default where the machine offers them). What was in use is printed first.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;
use weir_backend::{AttemptId, Backend, Exit, LocalBackend, LocalConfig, TaskLaunch};
use weir_model::Resources;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tasks: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(5000);
    let in_flight: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    let command = args.get(2).cloned().unwrap_or_else(|| "true".to_string());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(run(tasks, in_flight, command));
}

async fn run(tasks: usize, in_flight: usize, command: String) {
    let state = std::env::temp_dir().join(format!("weir-backend-throughput-{}", std::process::id()));
    let (tx, mut exits) = tokio::sync::mpsc::unbounded_channel();
    let mut config = LocalConfig::new(&state);
    config.cgroups = std::env::var("WEIR_THROUGHPUT_CGROUPS").as_deref() != Ok("0");
    let user =
        std::env::var("WEIR_THROUGHPUT_USER").ok().map(|u| weir_backend::TaskUser::lookup(&u).unwrap());
    let backend = Arc::new(LocalBackend::new(config, tx).unwrap());
    println!(
        "{}; tasks as {}",
        backend.isolation(),
        user.as_ref().map_or("this process's user", |u| &u.name)
    );
    let permits = Arc::new(Semaphore::new(in_flight));
    let next = Arc::new(AtomicUsize::new(0));
    let records = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let begin = Instant::now();
    for _ in 0..4 {
        let (backend, permits, next, records, command) =
            (backend.clone(), permits.clone(), next.clone(), records.clone(), command.clone());
        let user = user.clone();
        tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= tasks {
                    break;
                }
                permits.acquire().await.unwrap().forget();
                let launch = TaskLaunch {
                    attempt: AttemptId::new(format!("bench/{i}")).unwrap(),
                    command: command.clone(),
                    env: BTreeMap::new(),
                    workdir: std::env::temp_dir(),
                    resources: Resources::new(100, 64, 0),
                    stdout: "/dev/null".into(),
                    stderr: "/dev/null".into(),
                    spark: None,
                    user: user.clone(),
                };
                let launched = backend.start(&launch).await.unwrap();
                records.lock().unwrap().insert(launched.attempt.clone(), launched);
            }
        });
    }
    let mut failed = 0;
    let mut started_all_at = None;
    for _ in 0..tasks {
        let exit = exits.recv().await.unwrap();
        if exit.exit != Exit::Code(0) {
            failed += 1;
        }
        permits.add_permits(1);
        if started_all_at.is_none() && next.load(Ordering::Relaxed) >= tasks {
            started_all_at = Some(begin.elapsed());
        }
        let record = records.lock().unwrap().remove(&exit.attempt);
        if let Some(record) = record {
            let backend = backend.clone();
            tokio::spawn(async move { backend.forget(&record).await.unwrap() });
        }
    }
    let secs = begin.elapsed().as_secs_f64();
    println!(
        "{tasks} tasks of `{command}`, at most {in_flight} at once: {secs:.2} s, {:.0} tasks/s started and seen ending ({failed} failed)",
        tasks as f64 / secs
    );
    let _ = std::fs::remove_dir_all(&state);
}
