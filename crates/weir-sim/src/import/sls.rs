//! YARN Scheduler Load Simulator input: a stream of JSON objects (one after another; a
//! top-level array of them also works), each a job in SLS's own format or in Rumen's, told
//! apart per object. A leading `{"num.nodes": …, "num.racks": …}` cluster description is not a
//! job and is passed over without counting.
//!
//! SLS format (`job.id`, `job.start.ms`, `job.queue.name`, `job.user`, `job.count`, `job.tasks[]`):
//! - submitted at `job.start.ms`; `job.count` copies of the job (default 1), named
//!   `<job.id>.1`, `<job.id>.2`, … when more than one;
//! - each task entry stands for `count` tasks (default 1) of type `container.type` (default
//!   `map`) needing `container.memory-mb` (or `container.memory`) MiB, `container.vcores` cores
//!   and `container.yarn.io/gpu` GPUs, defaulting to SLS's 1024 MiB and one vcore;
//! - a task's duration is `container.duration.ms` or `duration.ms`, else
//!   `container.end.ms − container.start.ms`;
//! - tasks are grouped into one stage per type and size; `reduce` stages run after all `map`
//!   stages; other types have no dependencies. `container.request.delay` (the DAG AM's
//!   staggering), hosts, priorities and execution types are not modelled, nor is the AM
//!   container itself.
//!
//! Rumen format (`jobID`, `submitTime`, `queue`, `user`, `mapTasks[]`, `reduceTasks[]`):
//! - submitted at `submitTime`; a map stage, then a reduce stage after it;
//! - memory `jobMapMB` / `jobReduceMB` (1024 MiB when missing), one core per task;
//! - a task's duration is its successful attempt's `finishTime − startTime`, else (counted as
//!   adjusted) the task's own span. `otherTasks` (setup, cleanup) are not modelled.
//!
//! In both, a stage's task durations are its tasks' own durations, drawn uniformly (an
//! empirical distribution; one distinct value makes it fixed), at least one second each.
//! The queue is `ImportOptions::queue_map[<queue name>]`, else `queue_map["user:<user>"]`, else
//! `ImportOptions::queue`.
//!
//! Skipped and counted, by the line where the record starts: input that is not JSON (reading
//! resumes at the next line that starts with `{`), values that are not objects, objects that are
//! not jobs (an SLS synthetic-load spec among them, named as such), jobs without a usable submit
//! time or without a usable task, and a `job.count` above 10,000. Tasks without a usable
//! duration, count or size, and tasks larger than any node of the cluster
//! (`ImportOptions::fit`), are dropped from their job and counted as adjusted; a job left
//! with none is skipped.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde_json::{Map, Value};
use weir_model::{Distribution, Duration, Resources};

use super::build::{task_duration, Ledger, TraceJob, TraceStage, MAX_TASK_MS, MAX_TIME_MS};
use super::{ImportError, ImportOptions, NodeFit, Tally, TOO_LARGE};

const DEFAULT_MEMORY: u64 = 1024;
const MAX_JOB_COUNT: i64 = 10_000;
const MAX_TASK_COUNT: i64 = 1_000_000;
/// A stage's empirical distribution keeps at most about this many samples.
const MAX_SAMPLES: u64 = 10_000;
/// 1 PiB in MiB, a million cores, a thousand GPUs: any more is a broken record, not a container.
const MAX_SIZE: (i64, i64, i64) = (1 << 30, 1_000_000, 1000);

pub(crate) fn read(
    file: &str,
    mut reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut data = Vec::new();
    reader.read_to_end(&mut data).map_err(|source| ImportError::Read { file: file.to_string(), source })?;
    let mut jobs = Vec::new();
    let mut tally = Tally::default();
    let mut lines = LineIndex::default();
    let mut base = 0usize;
    'chunks: while base < data.len() {
        let mut stream = serde_json::Deserializer::from_slice(&data[base..]).into_iter::<Value>();
        loop {
            let start = base + skip_space(&data[base..], stream.byte_offset());
            if start >= data.len() {
                break 'chunks;
            }
            let line = lines.line_at(&data, start);
            match stream.next() {
                None => break 'chunks,
                Some(Ok(Value::Array(items))) => {
                    for item in items {
                        let before = jobs.len();
                        record(item, line, &options.fit, ledger, &mut jobs);
                        count(&jobs[before..], &mut tally, line, file, options)?;
                    }
                }
                Some(Ok(value)) => {
                    let before = jobs.len();
                    record(value, line, &options.fit, ledger, &mut jobs);
                    count(&jobs[before..], &mut tally, line, file, options)?;
                }
                Some(Err(e)) => {
                    ledger.rows += 1;
                    let reason = if e.is_eof() {
                        "truncated JSON record"
                    } else {
                        "malformed JSON record (skipped to the next line starting with `{`)"
                    };
                    ledger.skip(line, reason);
                    match next_record_start(&data, start + 1) {
                        Some(next) => {
                            base = next;
                            continue 'chunks;
                        }
                        None => break 'chunks,
                    }
                }
            }
        }
    }
    Ok(jobs)
}

/// Count the jobs a record added, and stop as soon as they pass the import's limits, before
/// more copies use the memory the limits protect (one record adds at most `MAX_JOB_COUNT`).
fn count(
    new: &[TraceJob],
    tally: &mut Tally,
    line: u64,
    file: &str,
    o: &ImportOptions,
) -> Result<(), ImportError> {
    new.iter().try_for_each(|j| tally.add(1, j.stages.len() as u64, line, file, o))
}

fn skip_space(data: &[u8], mut at: usize) -> usize {
    while data.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Both formats are written one job per top-level object whose `{` opens a line, while nested
/// objects are indented: the next such line is where a damaged record's successor begins.
fn next_record_start(data: &[u8], from: usize) -> Option<usize> {
    let rest = data.get(from..)?;
    rest.windows(2).position(|w| w == b"\n{").map(|p| from + p + 1)
}

/// Line numbers of byte offsets, counted incrementally (offsets only grow).
#[derive(Default)]
struct LineIndex {
    offset: usize,
    line: u64,
}

impl LineIndex {
    fn line_at(&mut self, data: &[u8], offset: usize) -> u64 {
        let end = offset.min(data.len());
        if end >= self.offset {
            self.line += data[self.offset..end].iter().filter(|&&b| b == b'\n').count() as u64;
            self.offset = end;
        }
        self.line + 1
    }
}

fn record(value: Value, line: u64, fit: &NodeFit, ledger: &mut Ledger, jobs: &mut Vec<TraceJob>) {
    let Value::Object(v) = value else {
        ledger.rows += 1;
        ledger.skip(line, "not a JSON object");
        return;
    };
    let has = |key: &str| v.contains_key(key);
    if (has("num.nodes") || has("num.racks")) && !has("job.tasks") {
        return;
    }
    ledger.rows += 1;
    let parsed = if has("job.tasks") || has("job.start.ms") {
        sls_job(&v, line, fit, ledger)
    } else if has("mapTasks") || has("reduceTasks") || has("jobID") {
        rumen_job(&v, line, fit, ledger).map(|j| vec![j])
    } else if has("workloads") || has("num_jobs") {
        Err("SLS synthetic-load spec (SYNTH), not a trace")
    } else {
        Err("not an SLS or Rumen job object")
    };
    match parsed {
        Ok(list) => jobs.extend(list),
        Err(reason) => ledger.skip(line, reason),
    }
}

/// An integer, also written as a float or a string, as SLS's own reader accepts.
fn int(v: &Map<String, Value>, key: &str) -> Option<i64> {
    match v.get(key)? {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.is_finite() && f.abs() < 9e18).map(|f| f as i64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn text(v: &Map<String, Value>, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn submit_time(v: &Map<String, Value>, key: &str) -> Result<i64, &'static str> {
    match int(v, key) {
        Some(t) if (0..=MAX_TIME_MS).contains(&t) => Ok(t),
        Some(t) if t > MAX_TIME_MS => Err("submit time beyond 200 years (absurd)"),
        _ => Err("missing or negative submit time"),
    }
}

/// A span in milliseconds if it is a usable task duration.
fn span(start: Option<i64>, end: Option<i64>) -> Option<i64> {
    let (start, end) = (start?, end?);
    (start >= 0 && end >= start && end - start <= MAX_TASK_MS).then(|| end - start)
}

/// Tasks of one stage: (duration ms, how many tasks) each.
type Samples = Vec<(i64, u64)>;

fn stage(
    name: String,
    after: Vec<usize>,
    resources: Resources,
    samples: Samples,
    line: u64,
    ledger: &mut Ledger,
) -> TraceStage {
    let tasks: u64 = samples.iter().map(|(_, n)| n).sum();
    let shrink = tasks.div_ceil(MAX_SAMPLES).max(1);
    let mut draws: Vec<Duration> = Vec::new();
    for (ms, n) in samples {
        let (d, lengthened) = task_duration(ms);
        if lengthened {
            ledger.adjust_many(line, n, "task shorter than 1 s lengthened to 1 s");
        }
        // Weights stay proportional when there are too many tasks to list each one.
        let weight = if shrink > 1 { (n / shrink).max(1) } else { n };
        draws.extend(std::iter::repeat_n(d, weight as usize));
    }
    draws.sort();
    let duration = match (draws.first(), draws.last()) {
        (Some(&a), Some(&b)) if a == b => Distribution::Fixed(a),
        _ => Distribution::Empirical(draws.into()),
    };
    TraceStage::new(name, after, tasks.min(u32::MAX as u64) as u32, resources, duration)
}

fn sls_job(
    v: &Map<String, Value>,
    line: u64,
    fit: &NodeFit,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, &'static str> {
    let submit = submit_time(v, "job.start.ms")?;
    let Some(Value::Array(list)) = v.get("job.tasks") else { return Err("job.tasks is not a list") };
    // (type rank, type, cpu, memory, gpu) → samples: map before reduce before the rest.
    let mut groups: BTreeMap<(u8, String, u64, u64, u64), Samples> = BTreeMap::new();
    let mut too_large = 0u64;
    for t in list {
        let Value::Object(t) = t else {
            ledger.adjust(line, "task that is not an object dropped");
            continue;
        };
        let count = int(t, "count").unwrap_or(1);
        if !(1..=MAX_TASK_COUNT).contains(&count) {
            ledger.adjust(line, "task with a bad count dropped");
            continue;
        }
        let given = int(t, "container.duration.ms").or_else(|| int(t, "duration.ms"));
        let ms = match given {
            Some(ms) => (0..=MAX_TASK_MS).contains(&ms).then_some(ms),
            None => span(int(t, "container.start.ms"), int(t, "container.end.ms")),
        };
        let Some(ms) = ms else {
            ledger.adjust(line, "task without a usable duration dropped");
            continue;
        };
        let memory = int(t, "container.memory-mb")
            .or_else(|| int(t, "container.memory"))
            .unwrap_or(DEFAULT_MEMORY as i64);
        let cores = int(t, "container.vcores").unwrap_or(1);
        let gpus = int(t, "container.yarn.io/gpu").unwrap_or(0);
        let (max_mem, max_cores, max_gpus) = MAX_SIZE;
        if !((1..=max_mem).contains(&memory)
            && (1..=max_cores).contains(&cores)
            && (0..=max_gpus).contains(&gpus))
        {
            ledger.adjust(line, "task with a bad size dropped");
            continue;
        }
        if !fit.fits(&Resources::new(cores as u64 * 1000, memory as u64, gpus as u64)) {
            too_large += count as u64;
            continue;
        }
        let kind = text(t, "container.type").unwrap_or_else(|| "map".to_string());
        let rank = match kind.as_str() {
            "map" => 0,
            "reduce" => 1,
            _ => 2,
        };
        let key = (rank, kind, cores as u64 * 1000, memory as u64, gpus as u64);
        groups.entry(key).or_default().push((ms, count as u64));
    }
    if groups.is_empty() {
        return Err(if too_large > 0 { TOO_LARGE } else { "no task with a usable duration" });
    }
    if too_large > 0 {
        ledger.adjust_many(line, too_large, "task larger than any node of the cluster dropped");
    }
    let copies = int(v, "job.count").unwrap_or(1).max(1);
    if copies > MAX_JOB_COUNT {
        return Err("job.count above 10,000 (absurd)");
    }
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, kind, ..) in groups.keys() {
        *per_kind.entry(kind.as_str()).or_default() += 1;
    }
    // A type with several sizes gets one stage per size, named by the size.
    let names: Vec<String> = groups
        .keys()
        .map(|(_, kind, cpu, mem, gpu)| match (per_kind.get(kind.as_str()), gpu) {
            (Some(1), _) => kind.clone(),
            (_, 0) => format!("{kind}@{cpu}m/{mem}Mi"),
            _ => format!("{kind}@{cpu}m/{mem}Mi/{gpu}gpu"),
        })
        .collect();
    let maps: Vec<usize> = groups.keys().enumerate().filter(|(_, k)| k.0 == 0).map(|(i, _)| i).collect();
    let mut stages = Vec::with_capacity(groups.len());
    for (((rank, _, cpu, mem, gpu), samples), name) in groups.into_iter().zip(names) {
        let after = if rank == 1 { maps.clone() } else { Vec::new() };
        stages.push(stage(name, after, Resources::new(cpu, mem, gpu), samples, line, ledger));
    }
    let id = text(v, "job.id").unwrap_or_else(|| format!("sls-{line}"));
    let user = text(v, "job.user").unwrap_or_else(|| "default".to_string());
    let queue_keys = queue_keys(text(v, "job.queue.name"), &user);
    Ok((1..=copies)
        .map(|k| TraceJob {
            name: if copies == 1 { id.clone() } else { format!("{id}.{k}") },
            line,
            submit_ms: submit,
            queue_keys: queue_keys.clone(),
            user: user.clone(),
            stages: stages.clone(),
            tier: None,
        })
        .collect())
}

fn queue_keys(queue: Option<String>, user: &str) -> Vec<String> {
    queue.into_iter().chain([format!("user:{user}")]).collect()
}

fn rumen_job(
    v: &Map<String, Value>,
    line: u64,
    fit: &NodeFit,
    ledger: &mut Ledger,
) -> Result<TraceJob, &'static str> {
    let submit = submit_time(v, "submitTime")?;
    let mut stages = Vec::new();
    let mut too_large = false;
    for (key, mb_key, name) in [("mapTasks", "jobMapMB", "map"), ("reduceTasks", "jobReduceMB", "reduce")] {
        let memory =
            int(v, mb_key).filter(|m| (1..=MAX_SIZE.0).contains(m)).map_or(DEFAULT_MEMORY, |m| m as u64);
        let Some(Value::Array(list)) = v.get(key) else { continue };
        let mut samples: Samples = Vec::with_capacity(list.len());
        for t in list {
            let Value::Object(t) = t else {
                ledger.adjust(line, "task that is not an object dropped");
                continue;
            };
            let succeeded = t.get("attempts").and_then(Value::as_array).and_then(|a| {
                a.iter()
                    .filter_map(Value::as_object)
                    .find(|x| x.get("result").and_then(Value::as_str) == Some("SUCCESS"))
            });
            let attempt = succeeded.and_then(|x| span(int(x, "startTime"), int(x, "finishTime")));
            let ms = match attempt {
                Some(ms) => Some(ms),
                None => {
                    let own = span(int(t, "startTime"), int(t, "finishTime"));
                    if own.is_some() {
                        ledger.adjust(line, "task without a successful attempt: its own span used");
                    }
                    own
                }
            };
            match ms {
                Some(ms) => samples.push((ms, 1)),
                None => ledger.adjust(line, "task without a usable start and finish dropped"),
            }
        }
        if samples.is_empty() {
            continue;
        }
        if !fit.fits(&Resources::new(1000, memory, 0)) {
            ledger.adjust_many(
                line,
                samples.len() as u64,
                "task larger than any node of the cluster dropped",
            );
            too_large = true;
            continue;
        }
        let after = if name == "reduce" && !stages.is_empty() { vec![0] } else { Vec::new() };
        stages.push(stage(name.to_string(), after, Resources::new(1000, memory, 0), samples, line, ledger));
    }
    if stages.is_empty() {
        return Err(if too_large { TOO_LARGE } else { "no task with a usable start and finish time" });
    }
    let user = text(v, "user").unwrap_or_else(|| "default".to_string());
    Ok(TraceJob {
        name: text(v, "jobID").unwrap_or_else(|| format!("rumen-{line}")),
        line,
        submit_ms: submit,
        queue_keys: queue_keys(text(v, "queue"), &user),
        user,
        stages,
        tier: None,
    })
}
