//! `weir bench plan`: the planner on a synthetic history held in memory, and the usage.csv
//! reader on a generated CSV held in memory (so the disk is not what is measured).

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Instant;

use anyhow::{bail, Result};
use serde_json::json;
use weir_model::cluster_file::SchedulerSpec;
use weir_planner::{plan, Interval, PlanInput, PlanSettings, UsageHistory};

use crate::emit;
use crate::synthetic::{self, SplitMix};

/// One interval's usage: vacant 30% of the time, otherwise 1–32 cores with memory to match and
/// a few running applications; leaves differ in scale so allocations differ.
fn usage(rng: &mut SplitMix, scale: u64) -> (u64, u64, u32) {
    let r = rng.next_u64();
    if r % 10 < 3 {
        return (0, 0, 0);
    }
    let cores = 1 + (r >> 8) % (8 * scale);
    let cpu = cores * 1000;
    let memory = cores * 4096 + ((r >> 20) % 4) * 1024;
    let apps = 1 + ((r >> 32) % (cores / 2 + 1)) as u32;
    (cpu, memory, apps)
}

pub fn run(leaves: usize, days: u64, resolution_secs: u64, csv_mb: u64, seed: u64) -> Result<()> {
    if leaves == 0 || days == 0 || resolution_secs == 0 {
        bail!("--leaves, --days and --resolution-secs must be positive");
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; measure with `cargo run --release -- bench plan`");
    }
    let cluster = synthetic::cluster(5000, leaves, SchedulerSpec::default());
    let paths: Vec<String> = cluster.leaves().map(|q| q.path.to_string()).collect();
    let step = resolution_secs * 1000;
    let per_leaf = (days * 86_400 / resolution_secs) as usize;
    let intervals = per_leaf * paths.len();

    let t = Instant::now();
    let mut history = UsageHistory::new();
    let mut rng = SplitMix::new(seed);
    for (l, path) in paths.iter().enumerate() {
        let id = history.queue_id(path);
        history.reserve(id, per_leaf);
        let scale = 1 + (l % 4) as u64;
        for i in 0..per_leaf as u64 {
            let (cpu, memory, running_apps) = usage(&mut rng, scale);
            history.push(
                id,
                Interval { start: i * step, end: (i + 1) * step, cpu, memory, running_apps, line: 0 },
            );
        }
    }
    let generate = t.elapsed();

    let settings = PlanSettings::defaults_for(&cluster);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let t = Instant::now();
    let planned = plan(&PlanInput {
        cluster: &cluster,
        history: &history,
        history_name: "<synthetic>",
        settings: &settings,
        workload: None,
        threads,
    })?;
    let plan_time = t.elapsed();
    let allocated = planned.cluster.allocated;
    drop(planned);
    drop(history);

    // A CSV of the same shape, csv_mb large, read back from memory.
    let t = Instant::now();
    let target = (csv_mb * 1_000_000) as usize;
    let mut csv: Vec<u8> = Vec::with_capacity(target + 4096);
    writeln!(csv, "{}", weir_planner::usage::HEADER)?;
    let mut rows = 0u64;
    let mut i = 0u64;
    'fill: loop {
        for (l, path) in paths.iter().enumerate() {
            if csv.len() >= target {
                break 'fill;
            }
            let (cpu, memory, apps) = usage(&mut rng, 1 + (l % 4) as u64);
            writeln!(csv, "{},{},{path},{cpu},{memory},{apps}", i * step, (i + 1) * step)?;
            rows += 1;
        }
        i += 1;
    }
    let csv_generate = t.elapsed();
    let t = Instant::now();
    let read =
        UsageHistory::read_csv(csv.as_slice(), "<generated usage.csv>", crate::cmd::plan::secret_name_key())?;
    let read_time = t.elapsed();
    if read.rows() as u64 != rows {
        bail!("read {} rows of the {rows} generated", read.rows());
    }

    let secs = |d: std::time::Duration| d.as_secs_f64().max(1e-9);
    let intervals_per_sec = intervals as f64 / secs(plan_time);
    let mb = csv.len() as f64 / 1e6;
    let csv_mb_per_sec = mb / secs(read_time);
    let mut out = String::new();
    writeln!(
        out,
        "weir bench plan — {} leaves × {days} days at {resolution_secs} s = {intervals} intervals, {threads} threads, seed {seed}",
        paths.len()
    )?;
    writeln!(out, "{:<40} {:>12} {:>10} {:>16}", "phase", "items", "seconds", "rate")?;
    writeln!(
        out,
        "{:<40} {:>12} {:>10.3} {:>16}",
        "generate history in memory",
        intervals,
        secs(generate),
        "-"
    )?;
    writeln!(
        out,
        "{:<40} {:>12} {:>10.3} {:>11.0} int/s",
        "plan (all leaves, weights, reports)",
        intervals,
        secs(plan_time),
        intervals_per_sec
    )?;
    writeln!(
        out,
        "{:<40} {:>12} {:>10.3} {:>16}",
        format!("generate usage.csv ({mb:.0} MB)"),
        rows,
        secs(csv_generate),
        "-"
    )?;
    writeln!(
        out,
        "{:<40} {:>12} {:>10.3} {:>13.0} MB/s",
        "read usage.csv from memory",
        rows,
        secs(read_time),
        csv_mb_per_sec
    )?;
    writeln!(out, "allocated {allocated} instances over {} leaves", paths.len())?;
    writeln!(
        out,
        "{}",
        json!({
            "intervals_per_sec": intervals_per_sec.round(),
            "csv_mb_per_sec": (csv_mb_per_sec * 10.0).round() / 10.0,
            "plan_seconds": (secs(plan_time) * 1e3).round() / 1e3,
            "intervals": intervals,
            "leaves": paths.len(),
            "csv_mb": (mb * 10.0).round() / 10.0,
            "csv_rows": rows,
            "threads": threads,
        })
    )?;
    emit(&out)
}
