//! SWIM's Facebook MapReduce traces (the `FB-2009_samples_24_times_1hr_*.tsv` and `FB-2010_*`
//! samples of the SWIM project, Chen, Alspaugh and Katz, "Interactive Analytical Processing in
//! Big Data Systems: A Cross-Industry Study of MapReduce Workloads", VLDB 2012): the standard
//! Hadoop workload of YARN scheduler studies. One tab-separated line per job:
//!
//! `job id, submit time (s), inter-arrival gap (s), map input bytes, shuffle bytes, output bytes`
//!
//! The trace carries bytes, not tasks or durations, so weir applies a model, each part settable
//! ([`SwimModel`]) and stated in `docs/importers.md` and by `weir simulate` before it runs:
//!
//! - maps = ⌈input ÷ split size⌉ (at least 1: a job with no input still runs one map), as
//!   Hadoop's `FileInputFormat` makes one split per HDFS block;
//! - reduces = ⌈shuffle ÷ bytes per reduce⌉ (0 without shuffle: a map-only job), as Hive and Pig
//!   size reducers (`hive.exec.reducers.bytes.per.reducer`);
//! - a map runs for (input ÷ maps) ÷ map throughput (a map-only job's maps also write its
//!   output: (input + output) ÷ maps), a reduce for ((shuffle + output) ÷ reduces) ÷ reduce
//!   throughput, at least 1 s each;
//! - the reduce stage starts when every map has finished (no slow start);
//! - every task asks for `task_resources` (1 core, 1 GiB by default);
//! - the job has an application master (`weir simulate --am`, YARN's).
//!
//! Skipped and counted: lines without six fields, fields that are not numbers, negative values,
//! submit times beyond 200 years, tasks that would run over a year. The inter-arrival gap (field 3) is not used: field 2 is the
//! submission itself.

use std::io::BufRead;

use weir_model::{Distribution, Resources};

use super::build::{each_line, task_duration, Ledger, TraceJob, TraceStage, MAX_TASK_MS, MAX_TIME_MS};
use super::{ImportError, ImportOptions};

/// How SWIM's bytes become tasks and durations. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwimModel {
    /// Input bytes per map task (an HDFS block): 128 MiB.
    pub split_bytes: u64,
    /// Shuffle bytes per reduce task: 1 GiB.
    pub reduce_bytes: u64,
    /// Bytes a map task reads per second: 50 MB/s.
    pub map_bytes_per_sec: u64,
    /// Bytes a reduce task shuffles and writes per second: 20 MB/s.
    pub reduce_bytes_per_sec: u64,
    /// What every task asks for: 1 core, 1 GiB.
    pub task_resources: Resources,
}

impl Default for SwimModel {
    fn default() -> SwimModel {
        SwimModel {
            split_bytes: 128 << 20,
            reduce_bytes: 1 << 30,
            map_bytes_per_sec: 50_000_000,
            reduce_bytes_per_sec: 20_000_000,
            task_resources: Resources::new(1000, 1024, 0),
        }
    }
}

impl std::fmt::Display for SwimModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "maps = input ÷ {} MiB (at least 1), reduces = shuffle ÷ {} MiB (none without shuffle); \
             a map runs its input share ÷ {} MB/s, a reduce its shuffle and output share ÷ {} MB/s \
             (at least 1 s); reduces start after every map; each task {}",
            self.split_bytes >> 20,
            self.reduce_bytes >> 20,
            self.map_bytes_per_sec / 1_000_000,
            self.reduce_bytes_per_sec / 1_000_000,
            self.task_resources
        )
    }
}

/// The most tasks of one stage (a typo'd byte count must not make a billion tasks).
const MAX_TASKS: u64 = 1_000_000;

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut jobs = Vec::new();
    each_line(file, reader, |n, line| {
        let Some(line) = line else {
            ledger.rows += 1;
            ledger.skip(n, "not valid UTF-8");
            return;
        };
        if line.trim().is_empty() {
            return;
        }
        ledger.rows += 1;
        match job(line, n, &options.swim) {
            Ok((job, notes)) => {
                for note in notes {
                    ledger.adjust(n, note);
                }
                jobs.push(job);
            }
            Err(reason) => ledger.skip(n, reason),
        }
    })?;
    Ok(jobs)
}

fn job(line: &str, n: u64, m: &SwimModel) -> Result<(TraceJob, Vec<&'static str>), &'static str> {
    let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
    if fields.len() < 6 {
        return Err("fewer than 6 tab-separated fields");
    }
    let num = |s: &str| s.parse::<f64>().ok().filter(|x| x.is_finite());
    let [submit, _gap, input, shuffle, output] =
        [fields[1], fields[2], fields[3], fields[4], fields[5]].map(num);
    let (Some(submit), Some(input), Some(shuffle), Some(output)) = (submit, input, shuffle, output) else {
        return Err("a field is not a number");
    };
    if submit < 0.0 || input < 0.0 || shuffle < 0.0 || output < 0.0 {
        return Err("a negative time or byte count");
    }
    if submit * 1000.0 > MAX_TIME_MS as f64 {
        return Err("submit time beyond 200 years (absurd)");
    }
    let mut notes = Vec::new();
    let count = |bytes: f64, per: u64, notes: &mut Vec<&'static str>| -> u64 {
        let k = (bytes / per.max(1) as f64).ceil() as u64;
        if k > MAX_TASKS {
            notes.push("more than 1,000,000 tasks in a stage: capped");
        }
        k.min(MAX_TASKS)
    };
    let maps = count(input, m.split_bytes, &mut notes).max(1);
    let reduces = count(shuffle, m.reduce_bytes, &mut notes);
    let secs = |bytes: f64, per_sec: u64| (bytes / per_sec.max(1) as f64 * 1000.0).round() as i64;
    // A map-only job's maps write its output themselves.
    let map_bytes = if reduces == 0 { input + output } else { input };
    let map_span = secs(map_bytes / maps as f64, m.map_bytes_per_sec);
    let reduce_span =
        (reduces > 0).then(|| secs((shuffle + output) / reduces as f64, m.reduce_bytes_per_sec));
    if map_span.max(reduce_span.unwrap_or(0)) > MAX_TASK_MS {
        return Err("a task would run longer than a year (absurd byte counts)");
    }
    let (map_ms, short_map) = task_duration(map_span);
    let mut stages = vec![TraceStage::new(
        "map".to_string(),
        Vec::new(),
        maps as u32,
        m.task_resources,
        Distribution::Fixed(map_ms),
    )];
    let mut short = short_map;
    if let Some(span) = reduce_span {
        let (reduce_ms, short_reduce) = task_duration(span);
        short |= short_reduce;
        stages.push(TraceStage::new(
            "reduce".to_string(),
            vec![0],
            reduces as u32,
            m.task_resources,
            Distribution::Fixed(reduce_ms),
        ));
    }
    if short {
        notes.push("task under 1 s lengthened to 1 s");
    }
    let name = if fields[0].is_empty() { format!("swim-{n}") } else { fields[0].to_string() };
    Ok((
        TraceJob {
            name,
            line: n,
            submit_ms: (submit * 1000.0).round() as i64,
            queue_keys: Vec::new(),
            user: "swim".to_string(),
            stages,
            tier: None,
        },
        notes,
    ))
}
