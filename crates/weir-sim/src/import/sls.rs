//! YARN Scheduler Load Simulator input: a stream of JSON job objects (one after another, not an
//! array), in SLS's own format or in Rumen's, told apart per object.
//!
//! SLS format (`job.id`, `job.start.ms`, `job.queue.name`, `job.user`, `job.tasks[]`):
//! - submitted at `job.start.ms`; tasks are grouped into stages by `container.type` (`map`,
//!   `reduce`, others by name) in the order they first appear, and `reduce` runs after `map`;
//! - each task holds `container.memory` MiB and `container.vcores` cores when given, else SLS's
//!   defaults of 1024 MiB and one vcore;
//! - a stage's task durations are drawn from its tasks' `container.end.ms − container.start.ms`
//!   (an empirical distribution; one value makes it fixed).
//!
//! Rumen format (`jobID`, `submitTime`, `queue`, `user`, `mapTasks[]`, `reduceTasks[]`):
//! - submitted at `submitTime`; a map stage, then a reduce stage after it;
//! - memory `jobMapMB` / `jobReduceMB` (1024 MiB when missing), one core per task;
//! - a task's duration is its successful attempt's `finishTime − startTime`, else the task's.
//!
//! The queue is `ImportOptions::queue_map[<queue name>]`, else `ImportOptions::queue`. Skipped
//! and counted, by record number: objects that are not jobs, jobs without a submit time or
//! without usable tasks; a syntax error ends the stream (the rest cannot be framed) and is counted.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde_json::Value;
use weir_model::{Distribution, Duration, Resources};

use super::build::{Ledger, TraceJob, TraceStage};
use super::{ImportError, ImportOptions};

const DEFAULT_MEMORY: u64 = 1024;

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    _options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let mut jobs = Vec::new();
    let stream = serde_json::Deserializer::from_reader(reader).into_iter::<Value>();
    for (i, item) in stream.enumerate() {
        let record = i as u64 + 1;
        ledger.rows += 1;
        let value = match item {
            Ok(v) => v,
            Err(e) if e.is_io() => {
                return Err(ImportError::Read { file: file.to_string(), source: std::io::Error::other(e) })
            }
            Err(e) => {
                let what = if e.is_eof() { "truncated JSON object" } else { "malformed JSON" };
                ledger.skip(record, format!("{what} (the rest of the file cannot be read)"));
                break;
            }
        };
        let parsed = if value.get("job.tasks").is_some() {
            sls_job(&value, record)
        } else if value.get("mapTasks").is_some() || value.get("reduceTasks").is_some() {
            rumen_job(&value, record)
        } else {
            Err("not an SLS or Rumen job object")
        };
        match parsed {
            Ok(job) => jobs.push(job),
            Err(reason) => ledger.skip(record, reason),
        }
    }
    Ok(jobs)
}

fn int(v: &Value, key: &str) -> Option<i64> {
    let x = v.get(key)?;
    x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)).or_else(|| x.as_str()?.trim().parse().ok())
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Tasks of one stage: (resources, duration in ms) each.
type Tasks = Vec<(Resources, u64)>;

fn stage(name: &str, after: Vec<usize>, tasks: &Tasks) -> TraceStage {
    // A stage asks for one size; the largest of its tasks' keeps every task's room.
    let resources = tasks.iter().fold(Resources::ZERO, |a, (r, _)| a.component_max(r));
    let mut samples: Vec<Duration> =
        tasks.iter().map(|(_, ms)| Duration::from_millis((*ms).max(1))).collect();
    samples.sort();
    let duration = if samples.first() == samples.last() {
        Distribution::Fixed(samples[0])
    } else {
        Distribution::Empirical(samples)
    };
    TraceStage { name: name.to_string(), after, tasks: tasks.len() as u32, resources, duration }
}

fn sls_job(v: &Value, record: u64) -> Result<TraceJob, &'static str> {
    let submit = int(v, "job.start.ms").filter(|t| *t >= 0).ok_or("missing or negative job.start.ms")?;
    let Some(Value::Array(list)) = v.get("job.tasks") else { return Err("job.tasks is not a list") };
    // Stage names in order of first appearance.
    let mut order: Vec<String> = Vec::new();
    let mut by_type: BTreeMap<String, Tasks> = BTreeMap::new();
    for t in list {
        let (Some(start), Some(end)) = (int(t, "container.start.ms"), int(t, "container.end.ms")) else {
            continue;
        };
        if start < 0 || end < start {
            continue;
        }
        let kind = text(t, "container.type").unwrap_or_else(|| "map".to_string());
        let memory = int(t, "container.memory").filter(|m| *m > 0).map_or(DEFAULT_MEMORY, |m| m as u64);
        let cores = int(t, "container.vcores").filter(|c| *c > 0).unwrap_or(1) as u64;
        if !by_type.contains_key(&kind) {
            order.push(kind.clone());
        }
        by_type
            .entry(kind)
            .or_default()
            .push((Resources::new(cores * 1000, memory, 0), (end - start) as u64));
    }
    if order.is_empty() {
        return Err("no task with a usable start and end");
    }
    // Map first, reduce after it, anything else in order of appearance after both.
    order.sort_by_key(|k| match k.as_str() {
        "map" => 0,
        "reduce" => 1,
        _ => 2,
    });
    let map_ix = order.iter().position(|k| k == "map");
    let stages = order
        .iter()
        .map(|k| {
            let after = match (k.as_str(), map_ix) {
                ("reduce", Some(m)) => vec![m],
                _ => Vec::new(),
            };
            stage(k, after, &by_type[k])
        })
        .collect();
    Ok(TraceJob {
        name: text(v, "job.id").unwrap_or_else(|| format!("sls-{record}")),
        submit_ms: submit,
        queue_keys: text(v, "job.queue.name").into_iter().collect(),
        user: text(v, "job.user").unwrap_or_else(|| "default".to_string()),
        stages,
    })
}

fn rumen_job(v: &Value, record: u64) -> Result<TraceJob, &'static str> {
    let submit = int(v, "submitTime").filter(|t| *t >= 0).ok_or("missing or negative submitTime")?;
    let tasks = |key: &str, mb_key: &str| -> Tasks {
        let memory = int(v, mb_key).filter(|m| *m > 0).map_or(DEFAULT_MEMORY, |m| m as u64);
        let Some(Value::Array(list)) = v.get(key) else { return Vec::new() };
        list.iter()
            .filter_map(|t| {
                let attempt = t.get("attempts").and_then(Value::as_array).and_then(|a| {
                    a.iter().find(|x| x.get("result").and_then(Value::as_str) == Some("SUCCESS"))
                });
                let span = |x: &Value| Some((int(x, "startTime")?, int(x, "finishTime")?));
                let (start, end) = attempt.and_then(span).or_else(|| span(t))?;
                (start >= 0 && end >= start).then(|| (Resources::new(1000, memory, 0), (end - start) as u64))
            })
            .collect()
    };
    let maps = tasks("mapTasks", "jobMapMB");
    let reduces = tasks("reduceTasks", "jobReduceMB");
    let mut stages = Vec::new();
    if !maps.is_empty() {
        stages.push(stage("map", Vec::new(), &maps));
    }
    if !reduces.is_empty() {
        let after = if maps.is_empty() { Vec::new() } else { vec![0] };
        stages.push(stage("reduce", after, &reduces));
    }
    if stages.is_empty() {
        return Err("no task with a usable start and finish time");
    }
    Ok(TraceJob {
        name: text(v, "jobID").unwrap_or_else(|| format!("rumen-{record}")),
        submit_ms: submit,
        queue_keys: text(v, "queue").into_iter().collect(),
        user: text(v, "user").unwrap_or_else(|| "default".to_string()),
        stages,
    })
}
