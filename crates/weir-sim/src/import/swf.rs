//! The Standard Workload Format of the Parallel Workloads Archive.
//!
//! Lines starting with `;` are header comments. Every other non-blank line holds 18
//! whitespace-separated fields; `-1` means missing. How a line becomes a job:
//!
//! - submitted at field 2 (submit time, seconds);
//! - one stage of N tasks, N = field 5 (allocated processors) or, when missing, field 8
//!   (requested processors); each task holds one core (1000 millicores);
//! - memory per task: field 10 (requested memory, KB per processor), else field 7 (used memory,
//!   KB per processor), else `ImportOptions::swf_memory` MiB (default 1 GiB); rounded up to MiB;
//! - every task runs for field 4 (run time, seconds; at least one second);
//! - queue: the first of `queue:<field 15>`, `partition:<field 16>`, `group:<field 13>`,
//!   `user:<field 12>` found in `ImportOptions::queue_map`, else `ImportOptions::queue`; the user
//!   is `user<field 12>`;
//! - field 17 (preceding job) and 18 (think time) are not used: each job is its own workflow.
//!
//! Skipped and counted: lines with fewer than 18 fields or a field that is not a number, a
//! missing or negative submit time, a missing run time, and no processor count at all.

use std::io::BufRead;

use weir_model::{Distribution, Duration, Resources};

use super::build::{Ledger, TraceJob, TraceStage};
use super::{ImportError, ImportOptions};

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut jobs = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let n = i as u64 + 1;
        let line = line.map_err(|source| ImportError::Read { file: file.to_string(), source })?;
        let text = line.trim();
        if text.is_empty() || text.starts_with(';') {
            continue;
        }
        ledger.rows += 1;
        match parse(text, options) {
            Ok(job) => jobs.push(job),
            Err(reason) => ledger.skip(n, reason),
        }
    }
    Ok(jobs)
}

fn parse(text: &str, options: &ImportOptions) -> Result<TraceJob, &'static str> {
    let mut f = [0f64; 18];
    let mut count = 0;
    for (i, word) in text.split_whitespace().enumerate() {
        if i >= 18 {
            break;
        }
        f[i] = word.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or("a field is not a number")?;
        count = i + 1;
    }
    if count < 18 {
        return Err("fewer than 18 fields (truncated line?)");
    }
    let known = |x: f64| (x >= 0.0).then_some(x);
    let id = f[0];
    let submit = known(f[1]).ok_or("missing or negative submit time")?;
    let runtime = known(f[3]).ok_or("missing run time")?;
    let procs = known(f[4]).filter(|p| *p >= 1.0).or(known(f[7]).filter(|p| *p >= 1.0));
    let procs = procs.ok_or("no processor count (fields 5 and 8 missing)")?;
    let memory_kb = known(f[9]).filter(|m| *m > 0.0).or(known(f[6]).filter(|m| *m > 0.0));
    let memory = memory_kb.map_or(options.swf_memory, |kb| (kb / 1024.0).ceil().max(1.0) as u64);
    let int = |x: f64| x as i64;
    let mut queue_keys = Vec::new();
    for (key, field) in [("queue", f[14]), ("partition", f[15]), ("group", f[12]), ("user", f[11])] {
        if field >= 0.0 {
            queue_keys.push(format!("{key}:{}", int(field)));
        }
    }
    let user = if f[11] >= 0.0 { format!("user{}", int(f[11])) } else { "unknown".to_string() };
    Ok(TraceJob {
        name: format!("swf-{}", int(id)),
        submit_ms: (submit * 1000.0) as i64,
        queue_keys,
        user,
        stages: vec![TraceStage {
            name: "run".to_string(),
            after: Vec::new(),
            tasks: procs.min(u32::MAX as f64) as u32,
            resources: Resources::new(1000, memory, 0),
            duration: Distribution::Fixed(Duration::from_secs((runtime as u64).max(1))),
        }],
    })
}
