//! `weir bench sim`: replay the Alibaba cluster-trace-v2018 DAG sample on a large cluster, or
//! (`--backlog`) a synthetic SWF trace at twice a small machine's capacity, and measure the
//! simulator's speed.

use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use weir_model::ClusterConfig;
use weir_sim::import::{self, ImportOptions, TraceKind};
use weir_sim::{SimConfig, Simulation, Summary};

use super::bench_digest::DecisionDigest;
use crate::emit;

#[derive(Debug, Args)]
pub struct SimBench {
    /// The Alibaba batch_task CSV to replay.
    #[arg(long, value_name = "PATH", default_value = "../shared/traces/alibaba-2018-dag/selected_DAGs.csv")]
    trace: PathBuf,
    /// Nodes of 96 cores and 512 GiB (the trace's machines have 96 cores).
    #[arg(long, default_value_t = 4000)]
    nodes: u32,
    /// Divide the trace's arrival times by this (1 = as recorded, 8 days).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Instead of the Alibaba sample: a synthetic SWF trace of rigid parallel jobs (1 to 128
    /// processors, weir_sim::synth_swf) offered at twice the capacity of 128 one-processor
    /// nodes, so that thousands of jobs wait in one FIFO leaf.
    #[arg(long)]
    backlog: bool,
    /// --backlog: jobs in the synthetic trace.
    #[arg(long, default_value_t = 20_000, requires = "backlog")]
    jobs: u32,
    /// --backlog: offered load relative to the machine's capacity.
    #[arg(long, default_value_t = 2.0, requires = "backlog")]
    load: f64,
    /// --backlog: also write the synthetic trace here (an SWF file for `weir simulate --trace swf:PATH`).
    #[arg(long, value_name = "PATH", requires = "backlog")]
    swf_out: Option<PathBuf>,
    /// --backlog: how gangs wait (none: placeholders; easy: EASY backfilling).
    #[arg(long, default_value = "none", value_name = "none|easy", requires = "backlog")]
    backfill: String,
    /// --backlog: instead of the SWF mix, one user at `user_max_running_apps: 1` on one 8-core
    /// node, submitting a one-task 20 s job every second, so the user's waiting jobs pile up and
    /// every job end promotes the next one.
    #[arg(long, requires = "backlog")]
    user_limit: bool,
    /// --user-limit: simulated hours (jobs arrive for all of them; the run stops there).
    #[arg(long, default_value_t = 16, requires = "user_limit")]
    hours: u64,
    /// Also print two SHA-256 digests: of the engine's decision log (every pass of the
    /// simulation, `pass N at MS` and one line per decision in the form `weir bench engine`
    /// writes) and of the summary (summary.json less its wall time). The same digests from two
    /// builds mean the same decisions at the same times and the same measurements: a change
    /// meant only to make the simulator faster must keep both. Off by default: writing and
    /// hashing the log (3.1 million lines for the Alibaba sample) is work of its own, which the
    /// wall time then includes and which would blur instruction counts of the simulator.
    #[arg(long)]
    digest: bool,
    /// Also write the decision digest to this file (implies --digest).
    #[arg(long, value_name = "PATH")]
    digest_out: Option<PathBuf>,
    /// Also write the decision log the digest is taken over to this file, to `diff` two runs
    /// whose digests differ (implies --digest).
    #[arg(long, value_name = "PATH")]
    decision_log: Option<PathBuf>,
}

const NODE_MEMORY: u64 = 512 * 1024;

pub fn run(a: &SimBench) -> Result<()> {
    if a.backlog {
        return backlog(a);
    }
    if a.nodes == 0 {
        bail!("--nodes must be positive");
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; measure with `cargo run --release -- bench sim`");
    }
    let yaml = format!(
        "version: 1
scheduler:
  mode: fair
  preemption: {{enabled: true, utilization_threshold: 0.8, kill_wait: 15s}}
nodes:
  - {{count: {}, resources: {{cpu: 96000, memory: {NODE_MEMORY}}}}}
queues:
  - {{name: default, weight: 1}}
",
        a.nodes
    );
    let cluster = ClusterConfig::from_yaml("bench cluster", &yaml)?;
    let path = a.trace.display().to_string();
    let file = File::open(&a.trace).with_context(|| {
        format!(
            "--trace: cannot open {path} (run from the repository root, beside ../shared, or pass --trace)"
        )
    })?;
    let options = ImportOptions {
        time_scale: a.time_scale,
        seed: a.seed,
        machine_memory: NODE_MEMORY,
        slo_factor: Some(2.0),
        ..ImportOptions::default()
    };
    let t = Instant::now();
    let imported = import::import(TraceKind::Alibaba2018, &path, BufReader::new(file), &options)?;
    let import_secs = t.elapsed().as_secs_f64();
    let jobs = imported.workload.workflows.len();
    let skipped = imported.skipped_rows();
    let instances: u64 = imported
        .workload
        .workflows
        .iter()
        .flat_map(|w| &w.jobs)
        .flat_map(|j| &j.stages)
        .map(|s| u64::from(s.tasks))
        .sum();

    let config = SimConfig { seed: a.seed, check_invariants: false, ..SimConfig::default() };
    let t = Instant::now();
    let mut sim = Simulation::new(cluster, imported.workload, config)?;
    let mut digest = Digesting::new(a, &mut sim)?;
    let mut steps = 0u64;
    while sim.step()? {
        steps += 1;
        digest.step(&mut sim)?;
        // Usage rows are part of the work; the bench drops them instead of writing a file.
        if steps.is_multiple_of(4096) {
            drop(sim.take_usage_rows());
        }
    }
    let outcome = sim.finish()?;
    let wall = t.elapsed().as_secs_f64();
    let s = &outcome.summary;
    let rate = s.events as f64 / wall.max(1e-9);

    let mut out = String::new();
    writeln!(
        out,
        "weir bench sim — Alibaba v2018 DAG sample on {} nodes (96 cores, 512 GiB), seed {}",
        a.nodes, a.seed
    )?;
    writeln!(
        out,
        "import: {jobs} jobs, {instances} task instances, {} rows skipped, {import_secs:.3} s",
        skipped
    )?;
    writeln!(
        out,
        "simulated {:.1} days: {} runs completed, {} failed, {} tasks, utilization cpu {:.1}%",
        s.simulated_seconds / 86_400.0,
        s.runs_completed,
        s.runs_failed,
        s.tasks_completed,
        s.utilization.cpu * 100.0
    )?;
    finish(out, s, digest, wall, rate)
}

/// `--backlog`: the synthetic SWF trace on 128 one-processor nodes, one FIFO leaf, no AMs.
fn backlog(a: &SimBench) -> Result<()> {
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build; measure with `cargo run --release -- bench sim --backlog`"
        );
    }
    if !(a.load.is_finite() && a.load > 0.0) || a.jobs == 0 {
        bail!("--load must be a positive number and --jobs at least 1");
    }
    if a.user_limit {
        return user_limit(a);
    }
    const NODES: u32 = 128;
    let backfill = match a.backfill.as_str() {
        "none" | "easy" => a.backfill.as_str(),
        other => bail!("--backfill {other}: write none or easy"),
    };
    let yaml = format!(
        "version: 1
scheduler: {{mode: fair, backfill: {backfill}, gang_timeout: 0s}}
nodes:
  - {{count: {NODES}, resources: {{cpu: 1000, memory: 2048}}}}
queues:
  - {{name: default, policy: fifo}}
"
    );
    let cluster = ClusterConfig::from_yaml("bench cluster", &yaml)?;
    let model = weir_sim::synth_swf::SwfModel { jobs: a.jobs, processors: NODES, load: a.load, seed: a.seed };
    let text = model.swf();
    if let Some(path) = &a.swf_out {
        std::fs::write(path, &text).with_context(|| format!("--swf-out: cannot write {}", path.display()))?;
    }
    let options =
        ImportOptions { seed: a.seed, swf_memory: 1024, slo_factor: Some(2.0), ..ImportOptions::default() };
    let t = Instant::now();
    let imported = import::import(TraceKind::Swf, "synthetic.swf", text.as_bytes(), &options)?;
    let import_secs = t.elapsed().as_secs_f64();
    let tasks: u64 = imported
        .workload
        .workflows
        .iter()
        .flat_map(|w| &w.jobs)
        .flat_map(|j| &j.stages)
        .map(|s| u64::from(s.tasks))
        .sum();
    let config = SimConfig { seed: a.seed, check_invariants: false, am: None, ..SimConfig::default() };
    let t = Instant::now();
    let mut sim = Simulation::new(cluster, imported.workload, config)?;
    let mut digest = Digesting::new(a, &mut sim)?;
    let mut steps = 0u64;
    let mut deepest = 0u32;
    while sim.step()? {
        steps += 1;
        digest.step(&mut sim)?;
        if steps.is_multiple_of(256) {
            deepest = deepest
                .max(sim.engine().queue_stat(1).waiting_apps + sim.engine().queue_stat(1).running_apps);
        }
        if steps.is_multiple_of(4096) {
            drop(sim.take_usage_rows());
        }
    }
    let outcome = sim.finish()?;
    let wall = t.elapsed().as_secs_f64();
    let s = &outcome.summary;
    let rate = s.events as f64 / wall.max(1e-9);
    let mut out = String::new();
    writeln!(
        out,
        "weir bench sim --backlog — {} synthetic SWF jobs ({tasks} tasks, 1 to {NODES} processors) at {}× the \
         capacity of {NODES} one-processor nodes, one FIFO leaf, backfill {backfill}, seed {}",
        a.jobs, a.load, a.seed
    )?;
    writeln!(
        out,
        "import: {} jobs, {import_secs:.3} s; at most {deepest} jobs in the leaf at once",
        imported.jobs
    )?;
    writeln!(
        out,
        "simulated {:.1} days: {} runs completed, {} tasks, utilization cpu {:.1}%",
        s.simulated_seconds / 86_400.0,
        s.runs_completed,
        s.tasks_completed,
        s.utilization.cpu * 100.0
    )?;
    finish(out, s, digest, wall, rate)
}

/// `--backlog --user-limit`: one user's jobs wait behind `user_max_running_apps: 1`.
fn user_limit(a: &SimBench) -> Result<()> {
    if a.hours == 0 {
        bail!("--hours must be at least 1");
    }
    let yaml = "version: 1
scheduler: {mode: fair, user_max_running_apps: 1}
nodes:
  - {count: 1, resources: {cpu: 8000, memory: 16384}}
queues:
  - {name: default, policy: fifo}
";
    let cluster = ClusterConfig::from_yaml("bench cluster", yaml)?;
    let seconds = a.hours * 3600;
    let mut text = String::new();
    for i in 0..seconds {
        // SWF: id, submit, wait, run time, processors, ..., status 1, user 1, group 1.
        writeln!(text, "{} {i} -1 20 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1", i + 1)?;
    }
    let options = ImportOptions { seed: a.seed, swf_memory: 1024, ..ImportOptions::default() };
    let imported = import::import(TraceKind::Swf, "user-limit.swf", text.as_bytes(), &options)?;
    let config = SimConfig {
        seed: a.seed,
        check_invariants: false,
        am: None,
        until: Some(weir_model::Time(seconds * 1000)),
        ..SimConfig::default()
    };
    let t = Instant::now();
    let mut sim = Simulation::new(cluster, imported.workload, config)?;
    let mut digest = Digesting::new(a, &mut sim)?;
    let mut steps = 0u64;
    let mut deepest = 0u32;
    while sim.step()? {
        steps += 1;
        digest.step(&mut sim)?;
        if steps.is_multiple_of(256) {
            deepest = deepest.max(sim.engine().queue_stat(1).waiting_apps);
        }
        if steps.is_multiple_of(4096) {
            drop(sim.take_usage_rows());
        }
    }
    let outcome = sim.finish()?;
    let wall = t.elapsed().as_secs_f64();
    let s = &outcome.summary;
    let rate = s.events as f64 / wall.max(1e-9);
    let mut out = String::new();
    writeln!(
        out,
        "weir bench sim --backlog --user-limit — one user at user_max_running_apps 1 on one 8-core node, \
         a one-task 20 s job every second for {} h, seed {}",
        a.hours, a.seed
    )?;
    writeln!(
        out,
        "simulated {:.1} h: {} runs completed, at most {deepest} jobs waiting",
        s.simulated_seconds / 3600.0,
        s.runs_completed
    )?;
    finish(out, s, digest, wall, rate)
}

/// `--digest`: the decision log's digest, fed between steps, and the summary's.
struct Digesting {
    digest: Option<DecisionDigest>,
    out: Option<PathBuf>,
}

impl Digesting {
    fn new(a: &SimBench, sim: &mut Simulation) -> Result<Digesting> {
        if !(a.digest || a.digest_out.is_some() || a.decision_log.is_some()) {
            return Ok(Digesting { digest: None, out: None });
        }
        sim.keep_decisions();
        Ok(Digesting {
            digest: Some(DecisionDigest::new(a.decision_log.as_deref())?),
            out: a.digest_out.clone(),
        })
    }

    /// Take in the passes of the step just made.
    fn step(&mut self, sim: &mut Simulation) -> Result<()> {
        if let Some(digest) = &mut self.digest {
            for (at, decisions) in sim.take_decisions() {
                digest.pass_at(at.as_millis(), &decisions)?;
            }
        }
        Ok(())
    }
}

/// The phase table, the digests asked for and the last-line JSON every bench ends with, then
/// print it all.
fn finish(mut out: String, summary: &Summary, digest: Digesting, wall: f64, rate: f64) -> Result<()> {
    writeln!(out, "{:<12} {:>12} {:>10} {:>14}", "phase", "events", "seconds", "events/s")?;
    writeln!(out, "{:<12} {:>12} {:>10.3} {:>14.0}", "simulate", summary.events, wall, rate)?;
    let mut line = json!({"events_per_sec": rate.round(), "wall_seconds": (wall * 1000.0).round() / 1000.0});
    if let Some(decisions) = digest.digest {
        let (hex, count, passes) = decisions.finish()?;
        if let Some(path) = &digest.out {
            std::fs::write(path, format!("{hex}\n"))
                .with_context(|| format!("--digest-out: cannot write {}", path.display()))?;
        }
        // The summary as summary.json has it, less the one figure that is not deterministic.
        let mut summary = summary.clone();
        summary.wall_seconds = 0.0;
        let summary_hex = sha256_hex(&serde_json::to_vec(&summary)?);
        writeln!(out, "decision digest: sha256 {hex} ({count} decisions in {passes} passes)")?;
        writeln!(out, "summary digest: sha256 {summary_hex}")?;
        line["decision_digest"] = json!(hex);
        line["decisions"] = json!(count);
        line["passes"] = json!(passes);
        line["summary_digest"] = json!(summary_hex);
    }
    writeln!(out, "{line}")?;
    emit(&out)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().fold(String::with_capacity(64), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    })
}
