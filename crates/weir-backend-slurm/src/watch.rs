//! The watched jobs and the poller: one `/jobs` call per interval reads every watched job's
//! state (never one call per job), ends are reported exactly once, kill deadlines are kept,
//! and a job that was known and is now gone is ended as `Lost` — "outcome unknown", never a
//! success (Slurm forgets finished jobs after `MinJobAge`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;
use weir_backend::{AttemptId, Exit, ExitSender, TaskExit};

use crate::rest::{jobs_of, JobInfo, Rest};

/// One watched attempt.
pub(crate) struct Entry {
    pub attempt: AttemptId,
    pub job: u64,
    /// The job's comment, which names the attempt; a job id whose comment differs is another job.
    pub comment: String,
    /// Listings with a generation above this one were asked for after the job was known, so
    /// its absence from them means it is gone.
    pub since_gen: u64,
    /// Asked to stop: the end is `Killed`. The hard cancel is due at the deadline.
    pub kill: Option<Kill>,
}

pub(crate) struct Kill {
    pub hard_at: Instant,
    pub hard_sent: bool,
}

/// What the poller and the trait methods share.
#[derive(Default)]
pub(crate) struct Watched {
    pub entries: HashMap<String, Entry>,
    /// Generation of the latest listing asked for.
    pub gen: u64,
    /// The latest poll's failure, cleared by the next success (health).
    pub last_error: Option<String>,
}

/// How a job in a terminal state ended, for weir.
pub(crate) fn exit_of(info: &JobInfo, kill_requested: bool) -> Exit {
    let sig = (info.exit_code & 0x7f) as i32;
    let code = ((info.exit_code >> 8) & 0xff) as i32;
    if kill_requested {
        return if info.state == "COMPLETED" && info.exit_code == 0 { Exit::Code(0) } else { Exit::Killed };
    }
    match info.state.as_str() {
        "COMPLETED" | "FAILED" => {
            if sig != 0 {
                Exit::Signal(sig)
            } else {
                Exit::Code(code)
            }
        }
        // Ended by Slurm or an operator, not at weir's request.
        "CANCELLED" | "TIMEOUT" | "DEADLINE" => Exit::Signal(if sig != 0 { sig } else { 15 }),
        "OUT_OF_MEMORY" => Exit::Signal(9),
        // NODE_FAIL, BOOT_FAIL, PREEMPTED: the job did not end on its own; no status to report.
        _ => Exit::Lost,
    }
}

pub(crate) fn now_ms() -> u64 {
    crate::rest::now_s() * 1000
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::from(d.subsec_millis()))
            .unwrap_or(0)
}

/// Reads every watched job's state once per `interval` until the backend is dropped.
pub(crate) async fn poll(
    rest: Arc<Rest>,
    watched: Arc<Mutex<Watched>>,
    exits: ExitSender,
    interval: std::time::Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported_error = false;
    loop {
        tick.tick().await;
        let gen = {
            let mut w = lock(&watched);
            if w.entries.is_empty() {
                continue;
            }
            w.gen += 1;
            w.gen
        };
        let listing = match rest.get("/jobs").await {
            Ok(v) => v,
            Err(e) => {
                let m = e.message();
                if !reported_error {
                    eprintln!("weir slurm backend: cannot list jobs: {m} (retrying every {interval:?})");
                    reported_error = true;
                }
                lock(&watched).last_error = Some(m);
                continue;
            }
        };
        if reported_error {
            eprintln!("weir slurm backend: listing jobs works again");
            reported_error = false;
        }
        let jobs: HashMap<u64, JobInfo> = jobs_of(&listing).into_iter().map(|j| (j.id, j)).collect();
        let now = Instant::now();
        let mut hard = Vec::new();
        let mut ended = Vec::new();
        {
            let mut w = lock(&watched);
            w.last_error = None;
            let mut gone = Vec::new();
            for (key, e) in w.entries.iter_mut() {
                match jobs.get(&e.job) {
                    Some(info) if info.comment == e.comment => {
                        if info.is_terminal() {
                            gone.push((key.clone(), exit_of(info, e.kill.is_some())));
                        } else if let Some(k) = &mut e.kill {
                            if !k.hard_sent && now >= k.hard_at {
                                k.hard_sent = true;
                                hard.push(e.job);
                            }
                        }
                    }
                    // Known before this listing was asked for, and not in it (or its id now
                    // names another job): gone, its outcome unknown.
                    _ if e.since_gen < gen => {
                        eprintln!(
                            "weir slurm backend: {}: Slurm job {} is gone (forgotten after MinJobAge, or the cluster was reset): outcome unknown",
                            e.attempt, e.job
                        );
                        let exit = if e.kill.is_some() { Exit::Killed } else { Exit::Lost };
                        gone.push((key.clone(), exit));
                    }
                    _ => {}
                }
            }
            for (key, exit) in gone {
                if let Some(e) = w.entries.remove(&key) {
                    ended.push(TaskExit { attempt: e.attempt, exit, ended_at_ms: now_ms() });
                }
            }
        }
        for x in ended {
            let _ = exits.send(x);
        }
        for job in hard {
            if let Err(e) = rest.cancel(job, None).await {
                eprintln!(
                    "weir slurm backend: cannot cancel Slurm job {job}: {} (trying again)",
                    e.message()
                );
                let mut w = lock(&watched);
                if let Some(k) = w.entries.values_mut().find(|e| e.job == job).and_then(|e| e.kill.as_mut()) {
                    k.hard_sent = false;
                }
            }
        }
    }
}

pub(crate) fn lock(w: &Mutex<Watched>) -> std::sync::MutexGuard<'_, Watched> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str, exit_code: i64) -> JobInfo {
        JobInfo { id: 1, state: state.into(), exit_code, comment: String::new() }
    }

    #[test]
    fn exit_statuses_follow_slurms_wait_status() {
        let cases = [
            (job("COMPLETED", 0), false, Exit::Code(0)),
            (job("FAILED", 3 << 8), false, Exit::Code(3)),
            (job("FAILED", 9), false, Exit::Signal(9)),
            (job("CANCELLED", 0), false, Exit::Signal(15)),
            (job("TIMEOUT", 0), false, Exit::Signal(15)),
            (job("NODE_FAIL", 0), false, Exit::Lost),
            (job("FAILED", 15), true, Exit::Killed),
            (job("COMPLETED", 0), true, Exit::Code(0)),
        ];
        for (info, killed, want) in cases {
            assert_eq!(exit_of(&info, killed), want, "{info:?} killed={killed}");
        }
    }

    #[test]
    fn running_states_are_not_terminal() {
        for s in ["PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "REQUEUED"] {
            assert!(!job(s, 0).is_terminal(), "{s}");
        }
    }
}
