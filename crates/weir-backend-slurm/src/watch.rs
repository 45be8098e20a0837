//! The watched jobs and the poller: one `/jobs` call per interval reads every watched job's
//! state, ends are reported exactly once, kill deadlines are kept, and a job that was known and
//! is now gone is ended as `Lost` — "outcome unknown", never a success (Slurm forgets finished
//! jobs after `MinJobAge`).
//!
//! With end markers (the default), each job's script writes its command's exit status into a
//! marker beside its stdout; the poller looks for markers every quarter second and ends an
//! attempt by its marker without asking Slurm (a read of one job costs slurmrestd about as much
//! as 30 jobs' share of a listing, and grows with the jobs Slurm keeps). A marker's word is
//! checked: the next listings must show that job ended (or ending); one that still runs
//! [`CLAIM_GRACE`] after its marker claimed its end is cancelled (a task can write its own
//! marker). Jobs asked to stop, and markers without a readable status, are read one by one
//! (`GET /job/{id}`). The listing of every job runs at most once per interval and no more often
//! than every thirty times its own last duration, up to 30 s apart (four times without
//! markers): a listing carries every job
//! Slurm keeps (finished ones for `MinJobAge`), which on a busy Slurm is megabytes of JSON that
//! slurmctld packs, slurmrestd writes and weir reads — work taken from the jobs themselves on a
//! small machine. The listing still finds every end the markers miss (jobs killed, timed out,
//! failed before their script ran, gone).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use weir_backend::{AttemptId, Exit, ExitSender, TaskExit};

use crate::rest::{jobs_of, JobInfo, Rest, RestError};

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
    /// The file the job's script leaves when its command has ended (a hint to ask Slurm).
    pub marker: Option<PathBuf>,
    /// Read alone and not ended yet (Slurm completes a job a moment after its script's end, or
    /// later on a busy node): not read alone again before this, each wait twice the last.
    pub next_ask: Option<(Instant, Duration)>,
}

pub(crate) struct Kill {
    pub hard_at: Instant,
    pub hard_sent: bool,
}

/// A job whose end was taken from its marker, until a listing shows Slurm agrees.
pub(crate) struct Claim {
    pub attempt: AttemptId,
    pub comment: String,
    /// The status its marker gave.
    pub status: i32,
    /// When the marker was read, and the latest listing's generation then.
    pub at: Instant,
    pub gen: u64,
}

/// How long after its marker claimed its end a job may still be listed running (not yet
/// `COMPLETING` or ended) before it is cancelled as a job that wrote its own marker.
pub(crate) const CLAIM_GRACE: Duration = Duration::from_secs(10);

/// With end markers, listings are spaced by at least this many times the last one's duration:
/// the markers carry the ends, a listing only checks them and finds the ends they miss. At 10×
/// slurmrestd spent ~2.9 s of CPU per 2,000 weir jobs against 1.1 s for the same jobs submitted
/// directly; at 30×, ~2.2 s (BENCHMARKS.md, issue 19).
const LISTING_SPACING: u32 = 30;

/// The longest gap between two listings (with markers): an end no marker tells of (a job
/// killed by Slurm, timed out, failed before its script ran) is found within about this.
const LISTING_GAP_MAX: Duration = Duration::from_secs(30);

/// When the next listing may run after one that took `took`: no sooner than `interval`, and
/// with markers 30 times its own duration (capped at [`LISTING_GAP_MAX`], unless `interval` is
/// longer), without them 4 times.
pub(crate) fn listing_gap(interval: Duration, took: Duration, markers: bool) -> Duration {
    if markers {
        interval.max((took * LISTING_SPACING).min(LISTING_GAP_MAX))
    } else {
        interval.max(took * 4)
    }
}

/// What the poller and the trait methods share.
#[derive(Default)]
pub(crate) struct Watched {
    pub entries: HashMap<String, Entry>,
    /// Jobs ended by their markers, by Slurm job id, awaiting a listing's confirmation.
    pub claimed: HashMap<u64, Claim>,
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

/// Reads every watched job's state until the backend is dropped: by a listing once per
/// `interval`, or (`markers`) one by one for the jobs whose marker is there and by a listing
/// now and then (see the module's documentation).
pub(crate) async fn poll(
    rest: Arc<Rest>,
    watched: Arc<Mutex<Watched>>,
    exits: ExitSender,
    interval: Duration,
    markers: bool,
) {
    let every = if markers { interval.min(Duration::from_millis(250)) } else { interval };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported_error = false;
    let mut next_listing = Instant::now();
    loop {
        tick.tick().await;
        let (gen, hinted, between) = {
            let w = lock(&watched);
            if w.entries.is_empty() && w.claimed.is_empty() {
                continue;
            }
            let now = Instant::now();
            let hinted: Vec<(String, Option<PathBuf>, bool)> = if markers && now < next_listing {
                w.entries
                    .iter()
                    .filter(|(_, e)| e.next_ask.is_none_or(|(at, _)| now >= at))
                    .map(|(k, e)| (k.clone(), e.marker.clone(), e.kill.is_some()))
                    .collect()
            } else {
                Vec::new()
            };
            (w.gen, hinted, markers && now < next_listing)
        };
        if between {
            // Between listings: the jobs whose marker is there, and those asked to stop.
            let (marked, asks) =
                tokio::task::spawn_blocking(move || read_markers(hinted)).await.unwrap_or_default();
            if !marked.is_empty() {
                end_by_markers(&watched, &exits, marked);
            }
            if !asks.is_empty() {
                ask_each(&rest, &watched, &exits, asks, gen).await;
            }
            continue;
        }
        let gen = {
            let mut w = lock(&watched);
            w.gen += 1;
            w.gen
        };
        let started = Instant::now();
        let listing = match rest.get("/jobs").await {
            Ok(v) => v,
            Err(e) => {
                let m = e.message();
                if !reported_error {
                    eprintln!("weir slurm backend: cannot list jobs: {m} (retrying every {interval:?})");
                    reported_error = true;
                }
                lock(&watched).last_error = Some(m);
                next_listing = Instant::now() + interval;
                continue;
            }
        };
        if reported_error {
            eprintln!("weir slurm backend: listing jobs works again");
            reported_error = false;
        }
        let jobs: HashMap<u64, JobInfo> = jobs_of(&listing).into_iter().map(|j| (j.id, j)).collect();
        drop(listing);
        next_listing = Instant::now() + listing_gap(interval, started.elapsed(), markers);
        let now = Instant::now();
        let mut hard = Vec::new();
        let mut ended = Vec::new();
        {
            let mut w = lock(&watched);
            w.last_error = None;
            let mut gone = Vec::new();
            for (key, e) in w.entries.iter_mut() {
                if let Some(exit) = settle(e, jobs.get(&e.job), gen, now, &mut hard) {
                    gone.push((key.clone(), exit));
                }
            }
            for (key, exit) in gone {
                if let Some(e) = w.entries.remove(&key) {
                    ended.push(TaskExit { attempt: e.attempt, exit, ended_at_ms: now_ms() });
                }
            }
            audit_claims(&mut w.claimed, &jobs, gen, now, &mut hard);
        }
        for x in ended {
            let _ = exits.send(x);
        }
        cancel_hard(&rest, &watched, hard).await;
    }
}

/// Reads the markers of the `hinted` jobs (key, marker, asked to stop): the jobs whose marker
/// gives a status, and the jobs to read from Slurm (asked to stop, or a marker without a
/// status: a script of an older weir, or one caught between creating and writing it).
fn read_markers(hinted: Vec<(String, Option<PathBuf>, bool)>) -> (Vec<(String, i32)>, Vec<String>) {
    let mut marked = Vec::new();
    let mut asks = Vec::new();
    for (key, marker, killed) in hinted {
        if killed {
            asks.push(key);
            continue;
        }
        let Some(m) = marker else { continue };
        match std::fs::read(&m) {
            Ok(text) => match marker_status(&text) {
                Some(status) => marked.push((key, status)),
                None => asks.push(key),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => asks.push(key),
        }
    }
    (marked, asks)
}

/// The exit status a marker holds: the shell's `$?` (0 to 255) and a newline.
pub(crate) fn marker_status(text: &[u8]) -> Option<i32> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('\n')?;
    let status: i32 = text.parse().ok()?;
    (0..=255).contains(&status).then_some(status)
}

/// Ends the `marked` attempts by their markers' statuses, and keeps each as a claim for the
/// listings to check.
fn end_by_markers(watched: &Mutex<Watched>, exits: &ExitSender, marked: Vec<(String, i32)>) {
    let now = Instant::now();
    let mut ended = Vec::with_capacity(marked.len());
    {
        let mut w = lock(watched);
        let gen = w.gen;
        for (key, status) in marked {
            // Asked to stop since the markers were read: Slurm's word decides (the next read).
            if w.entries.get(&key).is_none_or(|e| e.kill.is_some()) {
                continue;
            }
            let Some(e) = w.entries.remove(&key) else { continue };
            w.claimed.insert(
                e.job,
                Claim { attempt: e.attempt.clone(), comment: e.comment, status, at: now, gen },
            );
            ended.push(TaskExit { attempt: e.attempt, exit: Exit::Code(status), ended_at_ms: now_ms() });
        }
    }
    for x in ended {
        let _ = exits.send(x);
    }
}

/// Checks the claims against a listing of generation `gen`: a job listed as ended is settled
/// (a different status than its marker's is said), one no longer listed too; one still listed
/// as running (not `COMPLETING`) [`CLAIM_GRACE`] after its marker goes on `hard`, cancelled.
fn audit_claims(
    claimed: &mut HashMap<u64, Claim>,
    jobs: &HashMap<u64, JobInfo>,
    gen: u64,
    now: Instant,
    hard: &mut Vec<u64>,
) {
    claimed.retain(|job, c| match jobs.get(job) {
        Some(info) if info.comment == c.comment => {
            if info.is_terminal() {
                let slurm = exit_of(info, false);
                if slurm != Exit::Code(c.status) {
                    eprintln!(
                        "weir slurm backend: {}: Slurm job {job} ended {} ({:?}) but its end marker said exit status {}: the marker's was recorded",
                        c.attempt, info.state, slurm, c.status
                    );
                }
                false
            } else if info.state == "COMPLETING" || now.saturating_duration_since(c.at) < CLAIM_GRACE {
                true
            } else {
                eprintln!(
                    "weir slurm backend: {}: Slurm job {job} is still {} {:?} after its end marker said it ended: cancelling it (did the task write its own marker?)",
                    c.attempt,
                    info.state,
                    now.saturating_duration_since(c.at)
                );
                hard.push(*job);
                true
            }
        }
        // Not listed (forgotten, or its id now names another job) by a listing asked for
        // after the claim: nothing left to check.
        _ => c.gen >= gen,
    });
}

/// What one read of `e`'s job says: its end, if it has ended (`info` is the job as Slurm lists
/// it, `None` when a read asked for after generation `gen` does not have it). A kill whose
/// grace is over puts the job on `hard`.
fn settle(
    e: &mut Entry,
    info: Option<&JobInfo>,
    gen: u64,
    now: Instant,
    hard: &mut Vec<u64>,
) -> Option<Exit> {
    match info {
        Some(info) if info.comment == e.comment => {
            if info.is_terminal() {
                return Some(exit_of(info, e.kill.is_some()));
            }
            if let Some(k) = &mut e.kill {
                if !k.hard_sent && now >= k.hard_at {
                    k.hard_sent = true;
                    hard.push(e.job);
                }
            }
            None
        }
        // Known before this read was asked for, and not in it (or its id now names another
        // job): gone, its outcome unknown.
        _ if e.since_gen < gen => {
            eprintln!(
                "weir slurm backend: {}: Slurm job {} is gone (forgotten after MinJobAge, or the cluster was reset): outcome unknown",
                e.attempt, e.job
            );
            Some(if e.kill.is_some() { Exit::Killed } else { Exit::Lost })
        }
        _ => None,
    }
}

/// The first wait before a job read alone and not ended yet is read alone again, and the
/// longest (the listing finds it meanwhile too).
const ASK_PAUSE: Duration = Duration::from_millis(250);
const ASK_PAUSE_MAX: Duration = Duration::from_secs(4);

/// Reads the jobs of `keys` one by one (a few at a time) and reports those that ended.
async fn ask_each(
    rest: &Arc<Rest>,
    watched: &Arc<Mutex<Watched>>,
    exits: &ExitSender,
    keys: Vec<String>,
    gen: u64,
) {
    let jobs: Vec<(String, u64)> = {
        let w = lock(watched);
        keys.into_iter().filter_map(|k| w.entries.get(&k).map(|e| (k, e.job))).collect()
    };
    let mut set = tokio::task::JoinSet::new();
    let mut answers = Vec::with_capacity(jobs.len());
    for (key, job) in jobs {
        if set.len() >= 8 {
            if let Some(Ok(a)) = set.join_next().await {
                answers.push(a);
            }
        }
        let rest = rest.clone();
        set.spawn(async move {
            let answer = rest.get(&format!("/job/{job}")).await;
            (key, job, answer)
        });
    }
    while let Some(a) = set.join_next().await {
        if let Ok(a) = a {
            answers.push(a);
        }
    }
    let now = Instant::now();
    let mut hard = Vec::new();
    let mut ended = Vec::new();
    {
        let mut w = lock(watched);
        for (key, job, answer) in answers {
            let info = match answer {
                Ok(v) => jobs_of(&v).into_iter().find(|j| j.id == job),
                // Slurm no longer knows it: read as absent from a listing asked for now.
                Err(RestError::UnknownJob) => None,
                // Cannot tell now: the next read or listing decides.
                Err(_) => continue,
            };
            let Some(e) = w.entries.get_mut(&key) else { continue };
            if e.job != job {
                continue;
            }
            // A job id read alone was known to this backend since `gen` at most: absence counts.
            if let Some(exit) = settle(e, info.as_ref(), gen.max(e.since_gen) + 1, now, &mut hard) {
                if let Some(e) = w.entries.remove(&key) {
                    ended.push(TaskExit { attempt: e.attempt, exit, ended_at_ms: now_ms() });
                }
            } else {
                let pause = e.next_ask.map_or(ASK_PAUSE, |(_, p)| (p * 2).min(ASK_PAUSE_MAX));
                e.next_ask = Some((now + pause, pause));
            }
        }
    }
    for x in ended {
        let _ = exits.send(x);
    }
    cancel_hard(rest, watched, hard).await;
}

/// Cancels (without a grace now) the jobs whose kill grace is over.
async fn cancel_hard(rest: &Rest, watched: &Mutex<Watched>, hard: Vec<u64>) {
    for job in hard {
        if let Err(e) = rest.cancel(job, None).await {
            eprintln!("weir slurm backend: cannot cancel Slurm job {job}: {} (trying again)", e.message());
            let mut w = lock(watched);
            if let Some(k) = w.entries.values_mut().find(|e| e.job == job).and_then(|e| e.kill.as_mut()) {
                k.hard_sent = false;
            }
        }
    }
}

pub(crate) fn lock(w: &Mutex<Watched>) -> std::sync::MutexGuard<'_, Watched> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    #[test]
    fn listings_are_spaced_by_thirty_durations_up_to_thirty_seconds_with_markers() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        // A 346 ms listing (2,000 jobs kept): the next one 10.4 s later with markers, 1.4 s without.
        assert_eq!(listing_gap(s(1), ms(346), true), ms(10_380));
        assert_eq!(listing_gap(s(1), ms(346), false), ms(1_384));
        // A cheap listing: the interval bounds it.
        assert_eq!(listing_gap(s(1), ms(4), true), s(1));
        // A slow one: markers or not, an end they miss is found within 30 s…
        assert_eq!(listing_gap(s(1), s(3), true), s(30));
        // …unless the operator's interval is longer.
        assert_eq!(listing_gap(s(60), s(3), true), s(60));
        assert_eq!(listing_gap(s(1), s(3), false), s(12));
    }

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
    fn a_marker_holds_the_shells_status_or_is_not_read_as_one() {
        assert_eq!(marker_status(b"0\n"), Some(0));
        assert_eq!(marker_status(b"137\n"), Some(137));
        // Caught between the shell's create and its write, or an older weir's empty marker.
        assert_eq!(marker_status(b""), None);
        for bad in [&b"7"[..], b"256\n", b"-1\n", b" 3\n", b"3\n\n", b"\xff\n"] {
            assert_eq!(marker_status(bad), None, "{bad:?}");
        }
    }

    fn claim(job_comment: &str, status: i32, at: Instant, gen: u64) -> Claim {
        Claim { attempt: AttemptId::new("r/1").unwrap(), comment: job_comment.into(), status, at, gen }
    }

    fn listed(id: u64, state: &str, exit_code: i64, comment: &str) -> (u64, JobInfo) {
        (id, JobInfo { id, state: state.into(), exit_code, comment: comment.into() })
    }

    /// A marker's word is checked by the listings: agreed ends and gone jobs are settled, a
    /// job still running after the grace is cancelled, one completing or inside the grace waits.
    #[test]
    fn claims_are_settled_kept_or_cancelled_by_the_listing() {
        let t0 = Instant::now();
        let late = t0 + CLAIM_GRACE + Duration::from_secs(1);
        let mut claimed: HashMap<u64, Claim> = [
            (1, claim("c1", 0, t0, 3)), // listed COMPLETED: settled
            (2, claim("c2", 0, t0, 3)), // not listed, listing asked after: settled
            (3, claim("c3", 0, t0, 3)), // RUNNING past the grace: cancelled, kept
            (4, claim("c4", 0, t0, 3)), // COMPLETING: kept
            (5, claim("c5", 0, t0, 3)), // id now names another job: settled
            (6, claim("c6", 0, t0, 4)), // not listed, but claimed after this listing was asked: kept
        ]
        .into_iter()
        .collect();
        let jobs: HashMap<u64, JobInfo> = [
            listed(1, "COMPLETED", 0, "c1"),
            listed(3, "RUNNING", 0, "c3"),
            listed(4, "COMPLETING", 0, "c4"),
            listed(5, "RUNNING", 0, "someone else"),
        ]
        .into_iter()
        .collect();
        let mut hard = Vec::new();
        audit_claims(&mut claimed, &jobs, 4, late, &mut hard);
        let mut kept: Vec<u64> = claimed.keys().copied().collect();
        kept.sort();
        assert_eq!(kept, [3, 4, 6]);
        assert_eq!(hard, [3]);
        // Inside the grace a running job is not cancelled.
        let mut hard = Vec::new();
        audit_claims(&mut claimed, &jobs, 4, t0 + Duration::from_secs(1), &mut hard);
        assert!(hard.is_empty());
    }

    #[test]
    fn running_states_are_not_terminal() {
        for s in ["PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "REQUEUED"] {
            assert!(!job(s, 0).is_terminal(), "{s}");
        }
    }
}
