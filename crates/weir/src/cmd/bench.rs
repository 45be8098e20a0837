//! `weir bench`: measure the engine on synthetic clusters and workloads.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration as WallDuration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;
use weir_engine::{ContainerId, Decision, Engine, JobId, JobSpec, Request};
use weir_model::cluster_file::SchedulerSpec;
use weir_model::{QueuePath, Time};

use super::bench_digest::DecisionDigest;
use crate::emit;
use crate::synthetic::{self, SplitMix};

#[derive(Debug, Args)]
#[command(about = "Measure weir's speed on synthetic clusters (use a release build)")]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchTarget,
}

#[derive(Debug, Subcommand)]
enum BenchTarget {
    /// Placements per second (filling an empty cluster, then steady churn), the time to
    /// recompute every fair share of a 10,000-queue tree, and the engine's pass when one leaf of
    /// that tree becomes active or idle (shares updated incrementally). Last line: JSON.
    Engine(EngineBench),
    /// Replay the Alibaba v2018 DAG sample (2,120 jobs, 3.1 M task instances) on 4,000 nodes:
    /// events per second and wall time; with --digest, digests of the decision log and the
    /// summary that a speed-only change must keep. Last line: JSON.
    Sim(super::bench_sim::SimBench),
    /// Planning speed on a synthetic history (by default 1,000 leaves × 30 days at 1-minute
    /// resolution = 43.2 million intervals, generated in memory), and usage.csv reading speed on
    /// a generated CSV held in memory. Last line: JSON.
    Plan(PlanBench),
    /// The job-submission service over loopback HTTP: submissions/s and p50/p99
    /// acknowledgement latency at 1 and 32 clients on SQLite (and PostgreSQL with
    /// --postgres), and one-task runs dispatched and completed per second on the local
    /// backend (or Slurm, or one-task Spark applications on spark-local beside spark-submit
    /// alone, or on a standalone master: --backend). Last line: JSON.
    Serve(Box<super::bench_serve::ServeBench>),
    /// The output committer on moto's S3 server (started and stopped here), another
    /// S3-compatible server or the local store: task-commit throughput and job-commit time for
    /// 1,000 files of 1 MB and 10 of 100 MB, beside plain puts of the same files. Last line:
    /// JSON.
    Commit(super::bench_commit::CommitBench),
}

#[derive(Debug, Args)]
struct PlanBench {
    /// Leaf queues (org > project > tier).
    #[arg(long, default_value_t = 1000)]
    leaves: usize,
    /// Days of history.
    #[arg(long, default_value_t = 30)]
    days: u64,
    /// Length of each interval, in seconds.
    #[arg(long, default_value_t = 60)]
    resolution_secs: u64,
    /// Size of the CSV generated for the reading measurement, in MB (10^6 bytes).
    #[arg(long, default_value_t = 200)]
    csv_mb: u64,
    /// Seed of the synthetic history.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Args)]
struct EngineBench {
    /// Nodes of 16 cores and 64 GiB.
    #[arg(long, default_value_t = 5000)]
    nodes: u32,
    /// Leaf queues (org > project > tier).
    #[arg(long, default_value_t = 2000)]
    leaves: usize,
    /// Jobs submitted, each asking for 1–20 containers of 1–4 cores and 2–16 GiB.
    #[arg(long, default_value_t = 100_000)]
    jobs: u64,
    /// Churn rounds after the fill: each finishes 1% of the running containers and schedules.
    #[arg(long, default_value_t = 200)]
    rounds: u32,
    /// Queues in the tree whose fair shares are recomputed (whole, and in an engine as single
    /// leaves become active or idle).
    #[arg(long, default_value_t = 10_000)]
    share_queues: usize,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The leaves' AM share (scheduler.queue_max_am_share_default; -1 = no AM limit, as
    /// weir had before it followed YARN's 0.5).
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true, value_name = "F")]
    am_share: f64,
    /// scheduler.reservable_nodes (0 = no reservations, as weir had before it followed YARN).
    #[arg(long, default_value_t = 0.05, value_name = "F")]
    reservable_nodes: f64,
    /// Also write the decision digest (printed anyway: the SHA-256 of every decision of the
    /// placement phases, in order, pass by pass) to this file. Two builds with the same
    /// digest made the same decisions.
    #[arg(long, value_name = "PATH")]
    digest_out: Option<PathBuf>,
    /// Also write the decision log the digest is taken over (one line per decision, each pass
    /// opened by `pass N`) to this file, to `diff` two runs whose digests differ.
    #[arg(long, value_name = "PATH")]
    decision_log: Option<PathBuf>,
    /// The scheduler: `fair` (YARN's Fair Scheduler) or `capacity` (the Capacity Scheduler:
    /// the same tree with each weight as a capacity weight, users limited only by the queue's
    /// max, `max_am_percent` = --am-share (1 when -1); it also times a round of the
    /// proportional preemption policy on a --share-queues tree).
    #[arg(long, value_enum, default_value_t = BenchMode::Fair)]
    mode: BenchMode,
    /// Instead: the same cluster and jobs inside a running server's engine actor (an
    /// in-process `weir serve` on SQLite in a scratch directory). The jobs go straight into
    /// the actor's engine at its first pass (the fill); before each of --rounds later passes,
    /// 1% of the containers end. Prints how long each pass held the actor, how long the queue
    /// snapshot took to publish, and the latency of API calls (/healthz, GET /v1/runs, GET
    /// /v1/queues/PATH, made by a client on its own thread) during the fill, during the later
    /// passes and while the actor was idle. Try `--nodes 100000 --leaves 20000 --jobs 1000000
    /// --rounds 20` (about 2 GB of memory).
    #[arg(long)]
    live: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BenchMode {
    Fair,
    Capacity,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    match &args.what {
        BenchTarget::Engine(e) => engine(e),
        BenchTarget::Sim(s) => super::bench_sim::run(s),
        BenchTarget::Serve(s) => super::bench_serve::run(s),
        BenchTarget::Commit(c) => super::bench_commit::run(c),
        BenchTarget::Plan(p) => super::bench_plan::run(p.leaves, p.days, p.resolution_secs, p.csv_mb, p.seed),
    }
}

fn engine(a: &EngineBench) -> Result<()> {
    if a.nodes == 0 || a.leaves == 0 || a.jobs == 0 {
        bail!("--nodes, --leaves and --jobs must be positive");
    }
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; measure with `cargo run --release -- bench engine`");
    }
    let config = match a.mode {
        BenchMode::Fair => {
            let scheduler = SchedulerSpec {
                queue_max_am_share_default: Some(a.am_share),
                reservable_nodes: Some(a.reservable_nodes),
                ..SchedulerSpec::default()
            };
            synthetic::cluster(a.nodes, a.leaves, scheduler)
        }
        BenchMode::Capacity => {
            let scheduler = SchedulerSpec {
                max_am_percent: Some(if a.am_share > 0.0 && a.am_share <= 1.0 { a.am_share } else { 1.0 }),
                reservable_nodes: Some(a.reservable_nodes),
                ..SchedulerSpec::default()
            };
            synthetic::capacity_cluster(a.nodes, a.leaves, scheduler)
        }
    };
    if a.live {
        return super::bench_live::run(config, a.jobs, a.rounds, a.seed);
    }
    let leaves: Vec<QueuePath> = config.leaves().map(|q| q.path.clone()).collect();
    let mut engine = Engine::with_config_nodes(config)?;
    let mut rng = SplitMix::new(a.seed);
    let now = Time::ZERO;

    let t = Instant::now();
    for id in 0..a.jobs {
        let leaf = leaves[rng.below(leaves.len() as u64) as usize].clone();
        let count = 1 + rng.below(20) as u32;
        let spec = JobSpec {
            id: JobId(id),
            queue: leaf,
            user: format!("user{}", id % 500),
            priority: None,
            submit_time: now,
            requests: vec![Request::new(synthetic::container(&mut rng), count)],
            has_am: true,
        };
        engine.on_job_submitted(now, spec)?;
    }
    let submit_time = t.elapsed();

    // The digest is taken outside the timed spans.
    let mut digest = DecisionDigest::new(a.decision_log.as_deref())?;
    let mut running: Vec<ContainerId> = Vec::new();
    let t = Instant::now();
    let decisions = engine.schedule(now);
    let fill_time = t.elapsed();
    digest.pass(&decisions)?;
    let fill = collect_starts(decisions, &mut running);

    let mut churn = 0usize;
    let mut churn_time = WallDuration::ZERO;
    let mut clock = 0u64;
    for _ in 0..a.rounds {
        clock += 1000;
        let now = Time(clock);
        let finish = (running.len() / 100).max(1);
        let t = Instant::now();
        for _ in 0..finish.min(running.len()) {
            let i = rng.below(running.len() as u64) as usize;
            let c = running.swap_remove(i);
            engine.on_container_finished(now, c)?;
        }
        let decisions = engine.schedule(now);
        churn_time += t.elapsed();
        digest.pass(&decisions)?;
        churn += collect_starts(decisions, &mut running);
    }
    let (digest, decisions, passes) = digest.finish()?;
    if let Some(path) = &a.digest_out {
        std::fs::write(path, format!("{digest}\n"))
            .with_context(|| format!("--digest-out: cannot write {}", path.display()))?;
    }

    let share_config = synthetic::cluster_with_queues(a.share_queues);
    let share_leaves: Vec<usize> = share_config
        .queues
        .iter()
        .enumerate()
        .filter(|(_, q)| q.is_leaf())
        .map(|(i, _)| i)
        .step_by(2)
        .collect();
    let mut samples = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let shares = weir_engine::shares_for(&share_config, &share_leaves);
        samples.push(t.elapsed());
        std::hint::black_box(shares);
    }
    samples.sort();
    let recompute = samples[samples.len() / 2];
    let flip = activity_flips(&share_config, &share_leaves)?;

    let round = match a.mode {
        BenchMode::Fair => None,
        BenchMode::Capacity => Some(preemption_round(a)?),
    };

    let rate = |n: usize, d: WallDuration| n as f64 / d.as_secs_f64().max(1e-9);
    let total_rate = rate(fill + churn, fill_time + churn_time);
    let mut out = String::new();
    writeln!(
        out,
        "weir bench engine — {} nodes, {} leaves, {} jobs, seed {}",
        a.nodes,
        leaves.len(),
        a.jobs,
        a.seed
    )?;
    writeln!(out, "{:<34} {:>12} {:>12} {:>14}", "phase", "placements", "seconds", "placements/s")?;
    writeln!(out, "{:<34} {:>12} {:>12.3} {:>14}", "submit jobs", "-", submit_time.as_secs_f64(), "-")?;
    writeln!(
        out,
        "{:<34} {:>12} {:>12.3} {:>14.0}",
        "fill empty cluster",
        fill,
        fill_time.as_secs_f64(),
        rate(fill, fill_time)
    )?;
    writeln!(
        out,
        "{:<34} {:>12} {:>12.3} {:>14.0}",
        format!("steady churn ({} rounds)", a.rounds),
        churn,
        churn_time.as_secs_f64(),
        rate(churn, churn_time)
    )?;
    writeln!(
        out,
        "{:<34} {:>12} {:>12.3} {:>14.0}",
        "all placements",
        fill + churn,
        (fill_time + churn_time).as_secs_f64(),
        total_rate
    )?;
    writeln!(
        out,
        "fair-share recompute, {} queues ({} active leaves): median {:.3} ms of 21 runs",
        share_config.queues.len(),
        share_leaves.len(),
        recompute.as_secs_f64() * 1e3
    )?;
    writeln!(
        out,
        "engine share update, same tree, a leaf becomes active or idle: median {:.3} ms of {} passes",
        flip.as_secs_f64() * 1e3,
        2 * FLIPS
    )?;
    if let Some(r) = &round {
        writeln!(
            out,
            "proportional preemption round, {} queues, {} containers running: median {:.3} ms of 21 passes \
             with a round ({} marked by the first)",
            r.queues,
            r.running,
            r.median.as_secs_f64() * 1e3,
            r.marked
        )?;
    }
    writeln!(out, "decision digest: sha256 {digest} ({decisions} decisions in {passes} passes)")?;
    writeln!(
        out,
        "{}",
        json!({
            "decision_digest": digest,
            "decisions": decisions,
            "placements": fill + churn,
            "fill_placements": fill,
            "placements_per_sec": total_rate.round(),
            "fill_placements_per_sec": rate(fill, fill_time).round(),
            "churn_placements_per_sec": rate(churn, churn_time).round(),
            "fair_share_recompute_ms": (recompute.as_secs_f64() * 1e6).round() / 1e3,
            "share_update_ms": (flip.as_secs_f64() * 1e6).round() / 1e3,
            "queues": share_config.queues.len(),
            "nodes": a.nodes,
            "leaves": leaves.len(),
            "jobs": a.jobs,
            "mode": format!("{:?}", a.mode).to_lowercase(),
            "preemption_round_ms": round.as_ref().map(|r| (r.median.as_secs_f64() * 1e6).round() / 1e3),
        })
    )?;
    emit(&out)
}

/// Leaves made active then idle again by `activity_flips`, each a timed pass.
const FLIPS: u64 = 21;

/// What the engine pays when one leaf becomes active or idle (its first runnable job comes or
/// its last leaves): an engine on the share tree with the `active` leaves holding a runnable
/// job (jobs without requests: nothing to place), then for each of `FLIPS` idle leaves a job
/// submitted and a pass, the job finished and a pass. Each timed pass brings the instantaneous
/// shares up to date (`refresh_instantaneous` in weir-engine's `shares.rs`). The median pass.
fn activity_flips(config: &weir_model::ClusterConfig, active: &[usize]) -> Result<WallDuration> {
    let mut engine = Engine::with_config_nodes(config.clone())?;
    let job = |id: u64, leaf: usize, now: Time| JobSpec {
        id: JobId(id),
        queue: config.queues[leaf].path.clone(),
        user: format!("user{}", id % 500),
        priority: None,
        submit_time: now,
        requests: Vec::new(),
        has_am: false,
    };
    let mut id = 0u64;
    for &leaf in active {
        engine.on_job_submitted(Time(1), job(id, leaf, Time(1)))?;
        id += 1;
    }
    engine.schedule(Time(1));
    let mut is_active = vec![false; config.queues.len()];
    for &leaf in active {
        is_active[leaf] = true;
    }
    let idle: Vec<usize> = config
        .queues
        .iter()
        .enumerate()
        .filter(|&(i, q)| q.is_leaf() && !is_active[i])
        .map(|(i, _)| i)
        .collect();
    let mut samples = Vec::new();
    let step = (idle.len() as u64 / FLIPS).max(1) as usize;
    for (k, &leaf) in idle.iter().step_by(step).take(FLIPS as usize).enumerate() {
        let now = Time(1000 * (k as u64 + 2));
        engine.on_job_submitted(now, job(id, leaf, now))?;
        let t = Instant::now();
        std::hint::black_box(engine.schedule(now));
        samples.push(t.elapsed());
        let later = Time(now.0 + 500);
        engine.on_job_finished(later, JobId(id))?;
        let t = Instant::now();
        std::hint::black_box(engine.schedule(later));
        samples.push(t.elapsed());
        id += 1;
    }
    samples.sort();
    Ok(samples[samples.len() / 2])
}

fn collect_starts(decisions: Vec<Decision>, running: &mut Vec<ContainerId>) -> usize {
    let before = running.len();
    for d in decisions {
        if let Decision::StartContainer { container, .. } = d {
            running.push(container);
        }
    }
    running.len() - before
}

/// What the timing of a proportional preemption round found.
struct Round {
    queues: usize,
    running: usize,
    marked: usize,
    median: WallDuration,
}

/// A round of capacity mode's proportional policy on a tree of about --share-queues queues:
/// the first half of the leaves fills the cluster (idle guarantees are lent), then the other
/// half asks for room; each timed pass falls on a round (every 3 s) and includes the policy's
/// ideal allocation over every queue, its choice of victims and the (failed) placement.
fn preemption_round(a: &EngineBench) -> Result<Round> {
    let scheduler = SchedulerSpec {
        preemption: Some(weir_model::cluster_file::PreemptionSpec {
            enabled: Some(true),
            ..Default::default()
        }),
        max_am_percent: Some(1.0),
        ..SchedulerSpec::default()
    };
    let leaves_wanted = synthetic::cluster_with_queues(a.share_queues).leaves().count();
    let config = synthetic::capacity_cluster(a.nodes, leaves_wanted, scheduler);
    let queues = config.queues.len();
    let leaves: Vec<QueuePath> = config.leaves().map(|q| q.path.clone()).collect();
    let mut engine = Engine::with_config_nodes(config)?;
    let mut rng = SplitMix::new(a.seed);
    let (first, second) = leaves.split_at(leaves.len() / 2);
    let mut id = 0u64;
    let mut submit =
        |engine: &mut Engine, rng: &mut SplitMix, now: Time, among: &[QueuePath], jobs: u64| -> Result<()> {
            for _ in 0..jobs {
                let spec = JobSpec {
                    id: JobId(id),
                    queue: among[rng.below(among.len() as u64) as usize].clone(),
                    user: format!("user{}", id % 500),
                    priority: None,
                    submit_time: now,
                    requests: vec![Request::new(synthetic::container(rng), 1 + rng.below(20) as u32)],
                    has_am: true,
                };
                id += 1;
                engine.on_job_submitted(now, spec)?;
            }
            Ok(())
        };
    let jobs = a.jobs.max(2) / 2;
    submit(&mut engine, &mut rng, Time(1), first, jobs)?;
    let running =
        engine.schedule(Time(1)).iter().filter(|d| matches!(d, Decision::StartContainer { .. })).count();
    submit(&mut engine, &mut rng, Time(2), second, jobs)?;
    engine.schedule(Time(2));
    let mut samples = Vec::new();
    let mut marked = 0;
    for k in 1..=21u64 {
        let now = Time(k * 3000);
        let t = Instant::now();
        let decisions = engine.schedule(now);
        samples.push(t.elapsed());
        if k == 1 {
            marked = decisions.iter().filter(|d| matches!(d, Decision::PreemptContainer { .. })).count();
        }
    }
    samples.sort();
    Ok(Round { queues, running, marked, median: samples[samples.len() / 2] })
}
