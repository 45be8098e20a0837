//! Alibaba cluster-trace-v2018 `batch_task` CSV.
//!
//! Columns: `task_name,instance_num,job_name,task_type,status,start_time,end_time,plan_cpu,plan_mem`
//! (a header line is optional). How rows become jobs:
//!
//! - one job per `job_name`, submitted at its earliest task start (seconds → milliseconds);
//! - one stage per task row, with `instance_num` tasks; the task name encodes the DAG: in
//!   `R5_2_3` the leading letters are ignored, 5 is the task's id and it runs after tasks 2 and 3
//!   of the same job; `task_<anything>` names are independent tasks;
//! - `plan_cpu` 100 = one core (→ 1000 millicores); `plan_mem` is a percentage of one machine's
//!   memory, `ImportOptions::machine_memory` MiB (default 64 GiB);
//! - every instance runs for the task's `end_time − start_time` (at least one second): the
//!   table has no per-instance durations;
//! - status is not used: failed and still-running tasks replay with their recorded span.
//!
//! Skipped and counted: rows with too few fields, a bad or missing `instance_num`, `plan_cpu`,
//! `plan_mem` or time, negative times or an end before the start, names that encode no task id,
//! a task id seen twice in one job, and every row of a job whose dependencies form a cycle.
//! Dependencies on tasks that are absent (never listed or skipped) or on the task itself are
//! dropped and counted; the task is kept.

use std::collections::BTreeMap;
use std::io::BufRead;

use weir_model::{Distribution, Duration, Resources};

use super::build::{reorder, topological, Ledger, TraceJob, TraceStage};
use super::{ImportError, ImportOptions};

struct Row {
    line: u64,
    task: String,
    id: u64,
    deps: Vec<u64>,
    instances: u32,
    resources: Resources,
    start: i64,
    end: i64,
}

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut csv = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(reader);
    let mut jobs: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    let mut record = csv::StringRecord::new();
    let mut independent = 0u64;
    loop {
        let line = record.position().map_or(1, |p| p.line() + 1);
        match csv.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) if e.is_io_error() => {
                return Err(ImportError::Read { file: file.to_string(), source: std::io::Error::other(e) })
            }
            Err(_) => {
                ledger.rows += 1;
                ledger.skip(line, "not valid CSV");
                continue;
            }
        }
        let line = record.position().map_or(line, |p| p.line());
        if line == 1 && record.get(0) == Some("task_name") {
            continue;
        }
        if record.len() == 1 && record.get(0).is_some_and(|f| f.trim().is_empty()) {
            continue;
        }
        ledger.rows += 1;
        match parse_row(&record, line, options, &mut independent) {
            Ok((job, row)) => jobs.entry(job).or_default().push(row),
            Err(reason) => ledger.skip(line, reason),
        }
    }
    Ok(jobs.into_iter().filter_map(|(name, rows)| job(name, rows, ledger)).collect())
}

fn parse_row(
    r: &csv::StringRecord,
    line: u64,
    options: &ImportOptions,
    independent: &mut u64,
) -> Result<(String, Row), &'static str> {
    if r.len() < 9 {
        return Err("fewer than 9 fields (truncated line?)");
    }
    let field = |i: usize| r.get(i).unwrap_or("").trim();
    let task = field(0).to_string();
    let (id, deps) = if let Some(rest) = task.strip_prefix("task_") {
        if rest.is_empty() {
            return Err("task name encodes no task id");
        }
        // Independent tasks get ids no DAG name can use.
        *independent += 1;
        (u64::MAX - *independent, Vec::new())
    } else {
        parse_name(&task).ok_or("task name encodes no task id")?
    };
    let instances = field(1).parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 1.0 && n.fract() == 0.0);
    let Some(instances) = instances else { return Err("missing or bad instance_num") };
    let job = field(2);
    if job.is_empty() {
        return Err("missing job_name");
    }
    let (Ok(start), Ok(end)) = (field(5).parse::<i64>(), field(6).parse::<i64>()) else {
        return Err("missing or bad start_time or end_time");
    };
    if start < 0 || end < 0 {
        return Err("negative time");
    }
    if end < start {
        return Err("end_time before start_time");
    }
    let cpu = field(7).parse::<f64>().ok().filter(|c| c.is_finite() && *c > 0.0);
    let mem = field(8).parse::<f64>().ok().filter(|m| m.is_finite() && *m >= 0.0);
    let (Some(cpu), Some(mem)) = (cpu, mem) else { return Err("missing or bad plan_cpu or plan_mem") };
    let memory = ((mem / 100.0) * options.machine_memory as f64).ceil().max(1.0) as u64;
    let resources = Resources::new((cpu * 10.0).round() as u64, memory, 0);
    let row =
        Row { line, task, id, deps, instances: instances.min(u32::MAX as f64) as u32, resources, start, end };
    Ok((job.to_string(), row))
}

/// `R5_2_3` → (5, [2, 3]). Leading letters are a task type and are ignored.
fn parse_name(name: &str) -> Option<(u64, Vec<u64>)> {
    let digits = name.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    if digits.len() == name.len() {
        return None;
    }
    let mut parts = digits.split('_');
    let id = parts.next()?.parse().ok()?;
    let deps = parts.map(|p| p.parse().ok()).collect::<Option<Vec<u64>>>()?;
    Some((id, deps))
}

fn job(name: String, mut rows: Vec<Row>, ledger: &mut Ledger) -> Option<TraceJob> {
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
    let index: BTreeMap<u64, usize> = kept.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(kept.len());
    for row in &kept {
        let mut ds = Vec::new();
        for &d in &row.deps {
            match index.get(&d) {
                _ if d == row.id => ledger.adjust(row.line, "dependency on the task itself dropped"),
                Some(&i) => ds.push(i),
                None => ledger.adjust(row.line, "dependency on an absent task dropped"),
            }
        }
        ds.sort_unstable();
        ds.dedup();
        deps.push(ds);
    }
    let order = match topological(&deps) {
        Ok(order) => order,
        Err(_) => {
            let line = kept.first().map_or(0, |r| r.line);
            ledger.skip_many(line, kept.len() as u64, "row of a job whose dependencies form a cycle");
            return None;
        }
    };
    let submit = kept.iter().map(|r| r.start).min()?;
    let stages: Vec<TraceStage> = kept
        .into_iter()
        .zip(deps)
        .map(|(r, after)| TraceStage {
            name: r.task,
            after,
            tasks: r.instances,
            resources: r.resources,
            duration: Distribution::Fixed(Duration::from_secs((r.end - r.start).max(1) as u64)),
        })
        .collect();
    Some(TraceJob {
        name,
        submit_ms: submit.saturating_mul(1000),
        queue_keys: Vec::new(),
        user: "alibaba".to_string(),
        stages: reorder(stages, &order),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_names() {
        assert_eq!(parse_name("R5_2_3"), Some((5, vec![2, 3])));
        assert_eq!(parse_name("M1"), Some((1, vec![])));
        assert_eq!(parse_name("MergeTask"), None);
        assert_eq!(parse_name("J3_x"), None);
        assert_eq!(parse_name("12"), None);
    }
}
