//! The Standard Workload Format of the Parallel Workloads Archive.
//!
//! Lines starting with `;` are header comments. Every other non-blank line holds 18
//! whitespace-separated numbers; `-1` means missing. How a line becomes a job:
//!
//! - submitted at field 2 (submit time, seconds; fractions allowed);
//! - one stage of N tasks, N = field 5 (allocated processors) or, when missing, field 8
//!   (requested processors); each task holds one core (1000 millicores);
//! - memory per task: field 10 (requested memory, KB per processor), else field 7 (used memory,
//!   KB per processor), else `ImportOptions::swf_memory` MiB (default 1 GiB); rounded up to MiB;
//! - every task runs for field 4 (run time, seconds); a run time under a second (the format
//!   allows 0 for "less than half a second") becomes one second, counted as adjusted;
//! - the job is a **gang**: an SWF job is a rigid parallel job, so all of its tasks start
//!   together or none does;
//! - its tasks ask for field 9 (requested time, seconds) as their walltime, which EASY
//!   backfilling plans with; missing (-1) means unknown; a requested time below the run time
//!   (logs record jobs that ran past their limit) is raised to the run time, counted as
//!   adjusted, since weir does not kill a task at its walltime and a plan must not be
//!   overtaken by the tasks it plans with;
//! - jobs run **without an application master** by default (`TraceKind::Swf` has none:
//!   `weir simulate`'s `--am` then defaults to `none`);
//! - queue: the first of `queue:<field 15>`, `partition:<field 16>`, `group:<field 13>`,
//!   `user:<field 12>` found in `ImportOptions::queue_map`, else `ImportOptions::queue`; the user
//!   is `user<field 12>`;
//! - field 11 (status): 1 (completed) replays as recorded; 0 (failed) and 5 (cancelled) replay
//!   their recorded run time and are counted as adjusted; 2, 3 and 4 mark the partial
//!   executions of a checkpointed or swapped job, which the archive also summarises in one line
//!   with status 0, 1 or 5, so they are skipped (and counted) to avoid running the job twice;
//! - fields 3 (wait time), 6 (CPU time), 14 (executable), 17 (preceding job) and 18 (think
//!   time) are not used: the simulator decides waits, and each job is its own workflow.
//!
//! Skipped and counted: lines that are not UTF-8, lines with other than 18 fields or a field
//! that is not a number, a missing, negative or absurd submit time, a missing or absurd run
//! time (cancelled jobs that never ran have none), no processor count, memory above 1 PiB per
//! processor, a task (one processor and its memory) larger than any node of the cluster
//! (`ImportOptions::fit`), and partial-execution lines.

use std::io::BufRead;

use weir_model::{Distribution, Duration, Resources};

use super::build::{each_line, task_duration, Ledger, TraceJob, TraceStage, MAX_TASK_MS, MAX_TIME_MS};
use super::{ImportError, ImportOptions};

const FIELDS: usize = 18;

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut jobs = Vec::new();
    each_line(file, reader, |n, line| jobs.extend(line_job(n, line, options, ledger)))?;
    Ok(jobs)
}

/// The job on line `n` (`None` for a line that is not UTF-8), if it holds one; what it could
/// not use is counted in the ledger.
pub(crate) fn line_job(
    n: u64,
    line: Option<&str>,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Option<TraceJob> {
    let Some(line) = line else {
        ledger.rows += 1;
        ledger.skip(n, "not valid UTF-8");
        return None;
    };
    let text = line.trim();
    if text.is_empty() || text.starts_with(';') {
        return None;
    }
    ledger.rows += 1;
    match parse(text, n, options) {
        Ok((job, notes)) => {
            for note in notes {
                ledger.adjust(n, note);
            }
            Some(job)
        }
        Err(reason) => {
            ledger.skip(n, reason);
            None
        }
    }
}

fn parse(
    text: &str,
    line: u64,
    options: &ImportOptions,
) -> Result<(TraceJob, Vec<&'static str>), &'static str> {
    let mut f = [0f64; FIELDS];
    let mut count = 0;
    for word in text.split_whitespace() {
        let slot = f.get_mut(count).ok_or("more than 18 fields")?;
        *slot = word.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or("a field is not a number")?;
        count += 1;
    }
    if count < FIELDS {
        return Err("fewer than 18 fields (truncated line?)");
    }
    let known = |x: f64| (x >= 0.0).then_some(x);
    let status = f[10];
    if [2.0, 3.0, 4.0].contains(&status) {
        return Err("partial execution of a checkpointed job (its summary line is used)");
    }
    let submit = known(f[1]).ok_or("missing or negative submit time")?;
    if submit * 1000.0 > MAX_TIME_MS as f64 {
        return Err("submit time beyond 200 years (absurd)");
    }
    let Some(runtime) = known(f[3]) else {
        return Err(if status == 5.0 { "cancelled before it ran (no run time)" } else { "missing run time" });
    };
    if runtime * 1000.0 > MAX_TASK_MS as f64 {
        return Err("run time longer than a year (absurd)");
    }
    let procs = known(f[4]).filter(|p| *p >= 1.0).or(known(f[7]).filter(|p| *p >= 1.0));
    let procs = procs.ok_or("no processor count (fields 5 and 8 missing)")?;
    let memory_kb = known(f[9]).filter(|m| *m > 0.0).or(known(f[6]).filter(|m| *m > 0.0));
    if memory_kb.is_some_and(|kb| kb > 1024.0 * 1024.0 * 1024.0 * 1024.0) {
        return Err("memory per processor above 1 PiB (absurd)");
    }
    let memory = memory_kb.map_or(options.swf_memory, |kb| (kb / 1024.0).ceil().max(1.0) as u64);
    if !options.fit.fits(&Resources::new(1000, memory, 0)) {
        return Err(super::TOO_LARGE);
    }
    if !options.fit.gang_fits(&Resources::new(1000, memory, 0), procs.min(u32::MAX as f64) as u64) {
        return Err(super::GANG_TOO_LARGE);
    }
    let (duration, lengthened) = task_duration((runtime * 1000.0).round() as i64);
    let mut notes = Vec::new();
    if lengthened {
        notes.push("run time under 1 s lengthened to 1 s");
    }
    let walltime = match known(f[8]) {
        Some(req) if req * 1000.0 > MAX_TASK_MS as f64 => {
            notes.push("requested time longer than a year (absurd): left unknown");
            None
        }
        Some(req) if (req * 1000.0).round() < duration.as_millis() as f64 => {
            notes.push("requested time below the run time: raised to the run time");
            Some(duration)
        }
        Some(req) => Some(Duration::from_millis((req * 1000.0).round() as u64)),
        None => None,
    };
    if status == 0.0 {
        notes.push("failed job replayed with its recorded run time");
    } else if status == 5.0 {
        notes.push("cancelled job replayed with its recorded run time");
    }
    let int = |x: f64| x as i64;
    let mut queue_keys = Vec::new();
    for (key, field) in [("queue", f[14]), ("partition", f[15]), ("group", f[12]), ("user", f[11])] {
        if field >= 0.0 {
            queue_keys.push(format!("{key}:{}", int(field)));
        }
    }
    let user = if f[11] >= 0.0 { format!("user{}", int(f[11])) } else { "unknown".to_string() };
    let job = TraceJob {
        name: format!("swf-{}", int(f[0])),
        line,
        submit_ms: (submit * 1000.0).round() as i64,
        queue_keys,
        user,
        stages: vec![TraceStage {
            gang: true,
            walltime,
            ..TraceStage::new(
                "run".to_string(),
                Vec::new(),
                procs.min(u32::MAX as f64) as u32,
                Resources::new(1000, memory, 0),
                Distribution::Fixed(duration),
            )
        }],
        tier: None,
    };
    Ok((job, notes))
}
