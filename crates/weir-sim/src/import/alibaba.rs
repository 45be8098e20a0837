//! Alibaba cluster-trace-v2018 `batch_task` CSV.
//!
//! Columns: `task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem`
//! (header lines are recognised and ignored; fields may be quoted). How rows become jobs:
//!
//! - one job per `job_name`, submitted at its earliest kept task start (seconds → milliseconds);
//! - one stage per task row, with `instance_num` tasks; the task name encodes the DAG: in
//!   `R5_2_3` the leading letters are ignored, 5 is the task's id and it runs after tasks 2 and 3
//!   of the same job; `task_<anything>` names are independent tasks;
//! - the trace stores task names cut to 50 characters, so a 50-character name may end inside a
//!   dependency id (`…_100_1` for `…_100_102`): its last segment is dropped, as are the
//!   dependencies past the cut, and the row is counted as adjusted. Reading the partial id as
//!   a real one invents dependencies, and in the shared sample those close cycles;
//! - `plan_cpu` 100 = one core (→ 1000 millicores); `plan_mem` is a percentage of one machine's
//!   memory, `ImportOptions::machine_memory` MiB (default 64 GiB), rounded up to a MiB;
//! - every instance runs for the task's `end_time − start_time`: the table has no per-instance
//!   durations. Times are whole seconds, so a task with end = start took under a second; it is
//!   given one second (counted as adjusted);
//! - `Terminated` rows replay as recorded. `Failed` rows replay their recorded span as if it
//!   succeeded, and `Running` rows replay the span recorded so far (a lower bound); both are kept
//!   because their containers held resources, and both are counted as adjusted. `Waiting` rows
//!   never started (no instance count, times or resources) and are skipped; so are `Running`
//!   rows with no end time (end 0);
//! - the trace has no users or queues: every job runs as user `alibaba` in
//!   `ImportOptions::queue`, unless `queue_map` has an entry `job:<job_name>`.
//!
//! Skipped and counted: lines that are not UTF-8, lines with other than 9 fields, a missing job
//! name, `Waiting` rows, names that encode no task id, a bad or missing `instance_num`,
//! `plan_cpu` or `plan_mem` (or one out of range: `plan_mem` above 100, `plan_cpu` above
//! 10,000 cores), bad, negative or absurd times (beyond 200 years, or a task longer than a
//! year), an end before the start, a task larger than any node of the cluster
//! (`ImportOptions::fit`), and a task id listed twice in one job. A job none of whose rows is usable is counted as dropped. Dependencies on absent
//! tasks (never listed, or skipped) or on the task itself are dropped and counted; a cycle loses
//! one edge per cycle (see `build::order_dag`) and is counted; the tasks are kept.

use std::collections::BTreeMap;
use std::io::BufRead;

use weir_model::{Distribution, Resources};

use super::build::{each_line, order_dag, reorder, task_duration, Ledger, TraceJob, TraceStage};
use super::build::{MAX_TASK_MS, MAX_TIME_MS};
use super::{ImportError, ImportOptions, TOO_LARGE};

const FIELDS: usize = 9;
/// The width at which the trace cuts task names.
const NAME_WIDTH: usize = 50;

const CUT_NAME: &str = "task name cut at 50 characters: dependencies past the cut lost";
const FAILED: &str = "Failed task replayed as if it had succeeded";
const RUNNING: &str = "Running task: the span recorded so far replayed as its duration";
const OTHER_STATUS: &str = "task with an unknown status replayed as recorded";
const LENGTHENED: &str = "zero-length task lengthened to 1 s";

/// Which task of its job a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TaskId {
    /// A DAG task: other tasks of the job may name this id as a dependency.
    Dag(u64),
    /// A `task_…` row: no dependencies either way; numbered in file order.
    Independent(u64),
}

struct Row {
    line: u64,
    task: String,
    id: TaskId,
    deps: Vec<u64>,
    instances: u32,
    resources: Resources,
    start: i64,
    end: i64,
    /// Adjustments to count if the row is kept.
    notes: Vec<&'static str>,
}

struct JobRows {
    first_line: u64,
    rows: Vec<Row>,
}

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut jobs: BTreeMap<String, JobRows> = BTreeMap::new();
    let mut independent = 0u64;
    each_line(file, reader, |n, line| {
        let Some(line) = line else {
            ledger.rows += 1;
            ledger.skip(n, "not valid UTF-8");
            return;
        };
        if line.trim().is_empty() {
            return;
        }
        let mut fields = [""; FIELDS];
        let mut count = 0;
        for f in line.split(',') {
            if let Some(slot) = fields.get_mut(count) {
                *slot = f.trim().trim_matches('"').trim();
            }
            count += 1;
        }
        if fields[0] == "task_name" {
            return;
        }
        ledger.rows += 1;
        // Every job a row names is remembered, so that one left with no usable row is reported.
        let job = if count >= 3 && !fields[2].is_empty() {
            if !jobs.contains_key(fields[2]) {
                jobs.insert(fields[2].to_string(), JobRows { first_line: n, rows: Vec::new() });
            }
            jobs.get_mut(fields[2])
        } else {
            None
        };
        let parsed = if count < FIELDS {
            Err("fewer than 9 fields (truncated line?)")
        } else if count > FIELDS {
            Err("more than 9 fields")
        } else {
            parse_row(&fields, n, options, &mut independent)
        };
        match (parsed, job) {
            (Ok(row), Some(job)) => job.rows.push(row),
            (Ok(_), None) => ledger.skip(n, "missing job_name"),
            (Err(reason), _) => ledger.skip(n, reason),
        }
    })?;
    Ok(jobs.into_iter().filter_map(|(name, rows)| job(name, rows, ledger)).collect())
}

fn parse_row(
    f: &[&str; FIELDS],
    line: u64,
    options: &ImportOptions,
    independent: &mut u64,
) -> Result<Row, &'static str> {
    let status = f[4];
    if status == "Waiting" {
        return Err("Waiting task (never started)");
    }
    let mut notes = Vec::new();
    let (id, deps) = if let Some(rest) = f[0].strip_prefix("task_") {
        if rest.is_empty() {
            return Err("task name encodes no task id");
        }
        *independent += 1;
        (TaskId::Independent(*independent), Vec::new())
    } else {
        let name = parse_name(f[0]).ok_or("task name encodes no task id")?;
        if name.cut {
            notes.push(CUT_NAME);
        }
        (TaskId::Dag(name.id), name.deps)
    };
    let instances =
        f[1].parse::<f64>().ok().filter(|n| n.fract() == 0.0 && (1.0..=u32::MAX as f64).contains(n));
    let Some(instances) = instances else { return Err("missing or bad instance_num") };
    let (Some(start), Some(end)) = (whole(f[5]), whole(f[6])) else {
        return Err("missing or bad start_time or end_time");
    };
    if start < 0 || end < 0 {
        return Err("negative time");
    }
    if start > MAX_TIME_MS / 1000 || end > MAX_TIME_MS / 1000 {
        return Err("time beyond 200 years (absurd)");
    }
    if end < start {
        return Err(if status == "Running" {
            "Running task without an end time"
        } else {
            "end_time before start_time"
        });
    }
    if (end - start) * 1000 > MAX_TASK_MS {
        return Err("task longer than a year (absurd)");
    }
    let cpu = f[7].parse::<f64>().ok().filter(|c| c.is_finite() && *c > 0.0);
    let mem = f[8].parse::<f64>().ok().filter(|m| m.is_finite() && *m >= 0.0);
    let (Some(cpu), Some(mem)) = (cpu, mem) else { return Err("missing or bad plan_cpu or plan_mem") };
    // 10,000 cores or more than a whole machine is not a request but a broken record.
    if cpu > 1_000_000.0 || mem > 100.0 {
        return Err("plan_cpu or plan_mem out of range");
    }
    let memory = ((mem / 100.0) * options.machine_memory as f64).ceil().max(1.0) as u64;
    let resources = Resources::new(((cpu * 10.0).round() as u64).max(1), memory, 0);
    if !options.fit.fits(&resources) {
        return Err(TOO_LARGE);
    }
    match status {
        "Terminated" => {}
        "Failed" => notes.push(FAILED),
        "Running" => notes.push(RUNNING),
        _ => notes.push(OTHER_STATUS),
    }
    if end == start {
        notes.push(LENGTHENED);
    }
    Ok(Row {
        line,
        task: f[0].to_string(),
        id,
        deps,
        instances: instances as u32,
        resources,
        start,
        end,
        notes,
    })
}

/// An integer, also written as a float with no fraction (`419912.0`, as pandas prints).
fn whole(s: &str) -> Option<i64> {
    s.parse::<i64>().ok().or_else(|| {
        let x = s.parse::<f64>().ok()?;
        (x.fract() == 0.0 && x.abs() < 9e15).then_some(x as i64)
    })
}

#[derive(Debug, PartialEq)]
struct TaskName {
    id: u64,
    deps: Vec<u64>,
    /// The name was cut at the trace's width: its last segment is not trusted.
    cut: bool,
}

/// `R5_2_3` → 5 after [2, 3]. Leading letters are a task type and are ignored.
fn parse_name(name: &str) -> Option<TaskName> {
    let digits = name.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    if digits.len() == name.len() {
        return None;
    }
    let mut parts: Vec<&str> = digits.split('_').collect();
    let cut = name.len() >= NAME_WIDTH && parts.len() > 1;
    if cut {
        // Either the cut fell right after a `_` (an empty last part) or inside an id.
        parts.pop();
    }
    let mut numbers = parts.into_iter().map(|p| p.parse::<u64>().ok());
    let id = numbers.next()??;
    let deps = numbers.collect::<Option<Vec<u64>>>()?;
    Some(TaskName { id, deps, cut })
}

fn job(name: String, job: JobRows, ledger: &mut Ledger) -> Option<TraceJob> {
    let JobRows { first_line, mut rows } = job;
    if rows.is_empty() {
        ledger.drop_job(first_line, "no usable row (every row of the job was skipped)");
        return None;
    }
    // Rows within a job are not sorted in the trace; order by id for a stable stage order.
    rows.sort_by_key(|r| (r.id, r.line));
    let mut kept: Vec<Row> = Vec::with_capacity(rows.len());
    for row in rows {
        if kept.last().is_some_and(|k| k.id == row.id) {
            ledger.skip(row.line, "task id listed twice in one job");
        } else {
            kept.push(row);
        }
    }
    let index: BTreeMap<u64, usize> = kept
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.id {
            TaskId::Dag(id) => Some((id, i)),
            TaskId::Independent(_) => None,
        })
        .collect();
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(kept.len());
    for row in &kept {
        for note in &row.notes {
            ledger.adjust(row.line, *note);
        }
        let mut ds = Vec::with_capacity(row.deps.len());
        for &d in &row.deps {
            match index.get(&d) {
                _ if row.id == TaskId::Dag(d) => {
                    ledger.adjust(row.line, "dependency on the task itself dropped")
                }
                Some(&i) => ds.push(i),
                None => ledger.adjust(row.line, "dependency on an absent task dropped"),
            }
        }
        deps.push(ds);
    }
    let keys: Vec<(i64, usize)> = kept.iter().enumerate().map(|(i, r)| (r.start, i)).collect();
    let dag = order_dag(&mut deps, &keys);
    for &(from, _) in &dag.broken {
        ledger.adjust(kept[from].line, "dependency that closes a cycle dropped");
    }
    let submit = kept.iter().map(|r| r.start).min()?;
    let stages: Vec<TraceStage> = kept
        .into_iter()
        .zip(deps)
        .map(|(r, after)| {
            let duration = Distribution::Fixed(task_duration((r.end - r.start) * 1000).0);
            TraceStage::new(r.task, after, r.instances, r.resources, duration)
        })
        .collect();
    Some(TraceJob {
        queue_keys: vec![format!("job:{name}")],
        name,
        line: first_line,
        submit_ms: submit * 1000,
        user: "alibaba".to_string(),
        stages: reorder(stages, &dag.order),
        tier: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(id: u64, deps: &[u64], cut: bool) -> Option<TaskName> {
        Some(TaskName { id, deps: deps.to_vec(), cut })
    }

    #[test]
    fn task_names() {
        assert_eq!(parse_name("R5_2_3"), name(5, &[2, 3], false));
        assert_eq!(parse_name("M1"), name(1, &[], false));
        assert_eq!(parse_name("MergeTask"), None);
        assert_eq!(parse_name("J3_x"), None);
        assert_eq!(parse_name("J3__4"), None);
        assert_eq!(parse_name("12"), None);
        assert_eq!(parse_name("M"), None);
    }

    #[test]
    fn names_cut_at_the_trace_width_lose_their_last_segment() {
        // Both from the shared sample: one cut inside an id, one right after a `_`.
        let inside = "M5_14_17_28_30_40_42_52_54_64_66_76_78_88_90_100_1";
        assert_eq!(inside.len(), 50);
        assert_eq!(
            parse_name(inside),
            name(5, &[14, 17, 28, 30, 40, 42, 52, 54, 64, 66, 76, 78, 88, 90, 100], true)
        );
        let after = "J30_4_5_6_8_9_10_12_13_14_16_17_18_19_21_22_24_25_";
        assert_eq!(after.len(), 50);
        let got = parse_name(after).expect("parses");
        assert_eq!((got.id, got.deps.last(), got.cut), (30, Some(&25), true));
        // A 49-character name is whole.
        let whole = "J30_4_5_6_8_9_10_12_13_14_16_17_18_19_21_22_24_25";
        assert_eq!(parse_name(whole).map(|n| (n.deps.last().copied(), n.cut)), Some((Some(25), false)));
    }

    #[test]
    fn whole_numbers_in_either_spelling() {
        assert_eq!(whole("419912"), Some(419_912));
        assert_eq!(whole("419912.0"), Some(419_912));
        assert_eq!(whole("1.5"), None);
        assert_eq!(whole("inf"), None);
        assert_eq!(whole(""), None);
    }
}
