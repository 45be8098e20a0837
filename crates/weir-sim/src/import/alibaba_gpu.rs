//! Alibaba's GPU cluster trace (`cluster-trace-gpu-v2023`, the "openb" files of the FGD paper):
//! a pod list and, optionally, the node list the cluster is built from.
//!
//! Pods, `name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time` (a header line is skipped), each become a one-task workflow:
//!
//! - **arrival**: `creation_time` (seconds), re-based and divided by `time_scale` as for every
//!   importer;
//! - **lifetime**: the task holds its container for `deletion_time − creation_time`, the pod's
//!   life in the trace (at least a second), from when weir places it;
//! - **size**: `cpu_milli` and `memory_mib`; `num_gpu` whole GPUs, or, when `num_gpu` is 1 and
//!   `gpu_milli` below 1000, that many thousandths of one GPU, placed on a single GPU (GPU
//!   sharing); `gpu_spec` (`V100M16|V100M32`) lists the GPU models it may use;
//! - **tier** from the QoS class (Kubernetes' classes and Alibaba's): `Guaranteed` and `LS`
//!   (latency-sensitive) tier 1, `Burstable` tier 2, `BE` (best effort) tier 3; a leaf named
//!   `tier1`…`tier3` still decides. Queue keys for `--queue-map`: `qos:LS`, `qos:BE`, …;
//! - **phase**: `Succeeded` and `Running` pods replay their lifetime (a pod still running when
//!   the trace ends was deleted at its end); `Failed` pods replay it and then fail, without a
//!   retry, so their run fails (counted as adjusted); `Pending` pods never ran, so there is no
//!   run to replay: skipped and counted;
//! - pods run **without an application master** (`TraceKind::AlibabaGpu2023` has none).
//!
//! Skipped and counted: lines that are not UTF-8 or have other than 11 fields, a field that is
//! not a number where one is due, `Pending` pods, a deletion before the creation or a lifetime
//! over a year, no resources at all, more than one GPU in fractions (`num_gpu` above 1 with
//! `gpu_milli` below 1000), `gpu_milli` 0 or above 1000 with a GPU asked for, and an unknown
//! QoS class or phase.
//!
//! Nodes, `sn,cpu_milli,memory_mib,gpu,model` (header skipped; `model` empty or `nan` for
//! nodes without GPUs), become node groups of identical nodes in the order first seen.

use std::collections::BTreeMap;
use std::io::BufRead;

use weir_model::{Distribution, NodeGroup, Resources, TaskPlacement};

use super::build::{each_line, task_duration, Ledger, TraceJob, TraceStage, MAX_TASK_MS, MAX_TIME_MS};
use super::{ImportError, ImportOptions, Skipped};

const POD_FIELDS: usize = 11;

pub(crate) fn read(
    file: &str,
    reader: impl BufRead,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<TraceJob>, ImportError> {
    let _ = options;
    let mut jobs = Vec::new();
    each_line(file, reader, |n, line| {
        let Some(line) = line else {
            ledger.rows += 1;
            ledger.skip(n, "not valid UTF-8");
            return;
        };
        let text = line.trim();
        if text.is_empty() || (n == 1 && text.starts_with("name,")) {
            return;
        }
        ledger.rows += 1;
        match pod(text, n) {
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

/// The tier a QoS class stands for.
fn tier(qos: &str) -> Option<u8> {
    match qos {
        "Guaranteed" | "LS" => Some(1),
        "Burstable" => Some(2),
        "BE" => Some(3),
        _ => None,
    }
}

fn pod(text: &str, line: u64) -> Result<(TraceJob, Vec<&'static str>), &'static str> {
    let f: Vec<&str> = text.split(',').map(str::trim).collect();
    if f.len() != POD_FIELDS {
        return Err("not 11 fields (name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time)");
    }
    let int = |s: &str| s.parse::<u64>().ok();
    let (Some(cpu), Some(memory), Some(num_gpu), Some(gpu_milli)) =
        (int(f[1]), int(f[2]), int(f[3]), int(f[4]))
    else {
        return Err("cpu_milli, memory_mib, num_gpu or gpu_milli is not a whole number");
    };
    let qos = f[6];
    let tier = tier(qos).ok_or("unknown QoS class (not Guaranteed, LS, Burstable or BE)")?;
    let mut notes = Vec::new();
    match f[7] {
        "Running" | "Succeeded" => {}
        "Failed" => notes.push("Failed pod replayed for its lifetime, then failed (no retry)"),
        "Pending" => return Err("Pending pod (never scheduled): no run to replay"),
        _ => return Err("unknown pod phase (not Running, Succeeded, Failed or Pending)"),
    }
    let (Some(created), Some(deleted)) = (int(f[8]), int(f[9])) else {
        return Err("missing or bad creation_time or deletion_time");
    };
    if created.saturating_mul(1000) > MAX_TIME_MS as u64 {
        return Err("creation time beyond 200 years (absurd)");
    }
    let life_ms = deleted.checked_sub(created).ok_or("deleted before it was created")?.saturating_mul(1000);
    if life_ms > MAX_TASK_MS as u64 {
        return Err("lifetime longer than a year (absurd)");
    }
    let (whole, milli) = match (num_gpu, gpu_milli) {
        (0, _) => (0, 0),
        (1, m @ 1..=999) => (0, m as u32),
        (_, 1000) => (num_gpu, 0),
        (_, 1..=999) => {
            return Err("a GPU fraction over several GPUs (num_gpu above 1, gpu_milli below 1000)")
        }
        _ => return Err("GPUs asked for with gpu_milli 0 or above 1000"),
    };
    if cpu == 0 && memory == 0 && whole == 0 && milli == 0 {
        return Err("no resources asked for");
    }
    let (duration, lengthened) = task_duration(life_ms as i64);
    if lengthened {
        notes.push("lifetime under 1 s lengthened to 1 s");
    }
    let gpu_models: Vec<String> =
        f[5].split('|').map(str::trim).filter(|m| !m.is_empty() && *m != "nan").map(str::to_string).collect();
    let mut stage = TraceStage::new(
        "pod".to_string(),
        Vec::new(),
        1,
        Resources::new(cpu, memory, whole),
        Distribution::Fixed(duration),
    );
    stage.placement = TaskPlacement { gpu_milli: milli, gpu_models, node_labels: Vec::new() };
    stage.recorded_failure = f[7] == "Failed";
    let job = TraceJob {
        name: if f[0].is_empty() { format!("pod-line-{line}") } else { f[0].to_string() },
        line,
        submit_ms: (created * 1000) as i64,
        queue_keys: vec![format!("qos:{qos}")],
        user: "pod".to_string(),
        stages: vec![stage],
        tier: Some(tier),
    };
    Ok((job, notes))
}

/// A node list read into node groups, with the rows it could not use.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedNodes {
    /// Identical nodes grouped, in the order first seen.
    pub groups: Vec<NodeGroup>,
    pub rows: u64,
    pub skipped: BTreeMap<String, Skipped>,
}

impl ImportedNodes {
    pub fn nodes(&self) -> u64 {
        self.groups.iter().map(|g| u64::from(g.count)).sum()
    }
}

/// Read an `openb_node_list_*.csv` (`sn,cpu_milli,memory_mib,gpu,model`) into node groups.
pub fn import_nodes(file: &str, reader: impl BufRead) -> Result<ImportedNodes, ImportError> {
    let mut ledger = Ledger::default();
    let mut groups: Vec<NodeGroup> = Vec::new();
    each_line(file, reader, |n, line| {
        let Some(line) = line else {
            ledger.rows += 1;
            ledger.skip(n, "not valid UTF-8");
            return;
        };
        let text = line.trim();
        if text.is_empty() || (n == 1 && text.starts_with("sn,")) {
            return;
        }
        ledger.rows += 1;
        match node(text) {
            Ok((resources, model)) => {
                match groups.iter_mut().find(|g| g.resources == resources && g.gpu_model == model) {
                    Some(g) if g.count < u32::MAX => g.count += 1,
                    _ => groups.push(NodeGroup { count: 1, resources, label: None, gpu_model: model }),
                }
            }
            Err(reason) => ledger.skip(n, reason),
        }
    })?;
    Ok(ImportedNodes { groups, rows: ledger.rows, skipped: ledger.skipped })
}

fn node(text: &str) -> Result<(Resources, Option<String>), &'static str> {
    let f: Vec<&str> = text.split(',').map(str::trim).collect();
    if f.len() != 5 {
        return Err("not 5 fields (sn, cpu_milli, memory_mib, gpu, model)");
    }
    let int = |s: &str| s.parse::<u64>().ok();
    let (Some(cpu), Some(memory), Some(gpu)) = (int(f[1]), int(f[2]), int(f[3])) else {
        return Err("cpu_milli, memory_mib or gpu is not a whole number");
    };
    if cpu == 0 && memory == 0 {
        return Err("a node without cpu or memory");
    }
    let model = Some(f[4]).filter(|m| !m.is_empty() && *m != "nan").map(str::to_string);
    if gpu == 0 && model.is_some() {
        return Err("a GPU model on a node without GPUs");
    }
    Ok((Resources::new(cpu, memory, gpu), model.filter(|_| gpu > 0)))
}
