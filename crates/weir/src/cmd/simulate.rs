//! `weir simulate`: replay a workload or a trace through the engine in virtual time.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufWriter, IsTerminal};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use weir_model::{ClusterConfig, Duration, QueuePath, Resources, Time, Workload};
use weir_sim::import::{self, ImportOptions, TraceSpec, TraceStream};
use weir_sim::{NodeFailures, Outcome, SimConfig, Simulation, UsageCsv};

use crate::staging::Staging;
use crate::{emit, load_cluster, EXAMPLE_CLUSTER, EXAMPLE_WORKLOAD};

#[derive(Debug, Args)]
#[command(
    about = "Simulate a cluster on a workload or a trace, in virtual time",
    long_about = "Replay a workload (workload.yaml) or a trace through weir's scheduling engine in \
virtual time, as fast as the machine allows, and measure what the queue layout does to the \
workflows' SLOs, the queues' waits and the cluster's use.\n\n\
Without --cluster and --workload, the examples built into weir are used (examples/cluster.yaml \
and examples/workload.yaml). Recurring workflows need a horizon: --until (default 7d for them); \
a trace replay runs until its last job ends. A run that ends with work unfinished says so, and \
why: the horizon was reached, or no progress was possible (e.g. application masters holding \
every container while their tasks find no room), with the engine's reasons grouped.\n\n\
Writes to --out: summary.json (the figures), runs.csv (one row per workflow run), usage.csv \
(usage intervals per leaf queue: the input of `weir plan`), tasks.csv with --tasks (one row per \
task attempt: the input of `weir slo profile`), pending.csv (every job still \
waiting or running at the end, with the engine's explanation of why) and report.html (charts). \
Times in the CSV files are milliseconds since the start of the simulation. The same inputs and \
seed give the same files, byte for byte (but for wall_seconds in summary.json).\n\n\
--explain JOB prints the engine's explanation for a job still in the engine at the end (job \
numbers are pending.csv's `job` column): pending because of which limit, reserved nodes, \
starvation and preemption.\n\n\
Examples:\n  weir simulate --out out/\n  \
weir simulate --cluster examples/cluster.yaml --workload examples/workload.yaml --until 30d --out out/\n  \
weir simulate --cluster examples/cluster.yaml --trace alibaba2018:selected_DAGs.csv --queue root.default --out out/\n  \
weir simulate --trace swf:jobs.swf --queue-map group:1=root.ads.ranking.tier1 --slo-factor 3 --out out/\n  \
weir simulate --cluster hpc.yaml --trace swf:jobs.swf --backfill easy --walltime-from runtime --out out/\n  \
weir simulate --trace swim:FB-2009_samples_24_times_1hr_0.tsv --swim-split-mib 64 --out out/\n  \
weir simulate --cluster gpu.yaml --trace alibaba-gpu2023:openb_pod_list_default.csv,openb_node_list_gpu_node.csv --nodes-from-trace --out out/\n  \
weir simulate --until 1d --out out/ --explain 1234"
)]
pub struct SimulateArgs {
    /// The cluster file. Default: the example cluster built into weir.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// The workload file. Default (without --trace): the example workload built into weir.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    workload: Option<PathBuf>,
    /// A trace instead of a workload: alibaba2018:PATH, swf:PATH, sls:PATH,
    /// alibaba-gpu2023:PODS.csv[,NODES.csv] or swim:PATH (see docs/importers.md). A gzip-compressed file
    /// (`.gz`) is read as it is.
    #[arg(long, value_name = "KIND:PATH")]
    trace: Option<TraceSpec>,
    /// Where the output files go (created if missing). They are written to a hidden folder
    /// beside it and moved in when the run succeeds; other files in it are left alone.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// End of the simulated window, e.g. 30d. Default: 7d for workloads with recurring
    /// workflows (they never end by themselves), else until every run has ended. A run stops
    /// early, saying why, when the cluster can make no progress (nothing runs and nothing but
    /// timers is due), and a horizon far past the last run's end is cut there, with a note.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    until: Option<Duration>,
    /// Seed of every random draw (durations, failures, arrivals, faults, the tier mix).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Attempts per task before its job fails.
    #[arg(long, default_value_t = 4, value_name = "N")]
    max_attempts: u32,
    /// Each job's application master, CPU,MEMORY (e.g. 1000,1g), or `none`. Default: 1000,1g,
    /// but none for traces whose jobs have no AM (swf: rigid parallel jobs; alibaba-gpu2023:
    /// pods).
    #[arg(long, value_name = "CPU,MEMORY|none")]
    am: Option<String>,
    /// How a gang that cannot start waits: `none` (it holds room as it frees up, and gives it back
    /// after the cluster's gang_timeout) or `easy` (EASY backfilling: the first such gang gets a
    /// reserved start from the walltimes of what runs, and later jobs start first only if they do
    /// not delay it) or `conservative` (every waiting gang gets a reservation, and nothing may
    /// delay any of them). Default: the cluster file's scheduler.backfill.
    #[arg(long, value_name = "none|easy|conservative")]
    backfill: Option<String>,
    /// Under EASY backfilling, how many jobs a pass tries after the reservation (the cluster
    /// file's scheduler.backfill_depth, 500 by default, as Slurm's bf_max_job_test). At high
    /// load a shallow scan misses jobs that could have started: issue 18 measured 57% more mean
    /// wait with depth 100 than with an unlimited scan at 2x on the NASA iPSC/860 log.
    #[arg(long, value_name = "N")]
    backfill_depth: Option<u32>,
    /// Trace: where task walltimes (what EASY backfilling plans with) come from: `trace` (SWF
    /// field 9, requested time; other formats have none, and EASY then does nothing) or
    /// `runtime` (each task's own run time: exact estimates).
    #[arg(long, value_name = "trace|runtime", default_value = "trace")]
    walltime_from: String,
    /// Trace: walltime = run time × F (F ≥ 1): estimates that overshoot uniformly. Overrides
    /// --walltime-from.
    #[arg(long, value_name = "F")]
    walltime_factor: Option<f64>,
    /// swim: input MiB per map task (an HDFS block; maps = input ÷ this).
    #[arg(long, value_name = "MIB", default_value_t = 128)]
    swim_split_mib: u64,
    /// swim: shuffle MiB per reduce task (reduces = shuffle ÷ this).
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    swim_reduce_mib: u64,
    /// swim: MB/s a map task reads (its duration = its input share ÷ this).
    #[arg(long, value_name = "MB/S", default_value_t = 50)]
    swim_map_mbps: u64,
    /// swim: MB/s a reduce task shuffles and writes.
    #[arg(long, value_name = "MB/S", default_value_t = 20)]
    swim_reduce_mbps: u64,
    /// Trace: build the cluster's nodes from the trace's node list (alibaba-gpu2023:PODS,NODES);
    /// the cluster file still gives the queues and the scheduler's settings.
    #[arg(long, requires = "trace")]
    nodes_from_trace: bool,
    /// Mean time between failures of one node (e.g. 30d); nodes do not fail without it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    node_mtbf: Option<Duration>,
    /// How long a failed node stays down.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1h")]
    node_repair: Duration,
    /// How often fair shares and cluster use are sampled for averages and charts.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s")]
    sample_every: Duration,
    /// Trace: the leaf every imported job goes to, unless --queue-map places it.
    #[arg(long, value_name = "PATH", default_value = "root.default")]
    queue: String,
    /// Trace: KEY=LEAF pairs placing jobs by trace ids (SWF queue:3, partition:1, group:7,
    /// user:12; SLS queue names), comma-separated or repeated.
    #[arg(long, value_name = "KEY=LEAF", value_delimiter = ',')]
    queue_map: Vec<String>,
    /// Trace: divide arrival times by this (2 = arrivals twice as dense).
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    time_scale: f64,
    /// Trace: keep each job with this probability below 1, replicate above 1.
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    load_scale: f64,
    /// Trace: share of jobs in tiers 1,2,3 (unless the leaf is named tier1…tier3).
    #[arg(long, default_value = "10,25,65", value_name = "T1,T2,T3", value_delimiter = ',')]
    tier_mix: Vec<f64>,
    /// Trace: give each run an SLO of F × its critical path. Default 2.
    #[arg(long, default_value_t = 2.0, value_name = "F")]
    slo_factor: f64,
    /// Trace: MiB per task for SWF jobs that record no memory.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    swf_memory: u64,
    /// Trace: the most jobs an import may create, SLS job.count and --load-scale copies included.
    #[arg(long, value_name = "N", default_value_t = import::DEFAULT_MAX_JOBS)]
    max_jobs: u64,
    /// Trace: the most stages those jobs may have in all (copies arrive together).
    #[arg(long, value_name = "N", default_value_t = import::DEFAULT_MAX_STAGES)]
    max_stages: u64,
    /// The most runs the workload may submit before the horizon; a workload asking for more
    /// (a period typed in the wrong unit) is refused before the simulation starts.
    #[arg(long, value_name = "N", default_value_t = weir_sim::DEFAULT_MAX_RUNS)]
    max_runs: u64,
    /// Coarsen usage.csv to at most one row per leaf and this span (e.g. 1m): each row the
    /// time-weighted mean over the part of its span the leaf was in use. Default: every change.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    usage_resolution: Option<Duration>,
    /// When stderr is not a terminal (a log, CI), print a progress line this often (wall
    /// clock; 0s: every few steps). On a terminal a progress bar shows instead.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    progress_every: Duration,
    /// The most containers (tasks, application masters, room held for gangs) running at once:
    /// a bound on memory (a few hundred bytes each); the rest wait. See docs/limits.md.
    #[arg(long, value_name = "N", default_value_t = weir_sim::DEFAULT_MAX_CONTAINERS)]
    max_containers: usize,
    /// Skip report.html (the charts); the other files are still written.
    #[arg(long)]
    no_report: bool,
    /// Also write tasks.csv: one row per task attempt (job, workflow, job_name, stage, attempt,
    /// start, end, duration in ms, outcome done|failed|lost) — the input of `weir slo profile`.
    /// Off by default: a trace replay has millions of tasks.
    #[arg(long)]
    tasks: bool,
    /// Print the engine's explanation of these jobs at the end (numbers from pending.csv's
    /// `job` column; comma-separated or repeated).
    #[arg(long, value_name = "JOB", value_delimiter = ',')]
    explain: Vec<u64>,
}

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    s.parse::<Duration>().map_err(|e| e.to_string())
}

pub fn run(args: &SimulateArgs) -> Result<()> {
    let cluster = match &args.cluster {
        Some(p) => load_cluster(p)?,
        None => ClusterConfig::from_yaml("examples/cluster.yaml (built in)", EXAMPLE_CLUSTER)?,
    };
    let cluster = adjust_cluster(args, cluster)?;
    // Valid, but work that can never be scheduled: said before the run, named again after it.
    let cluster_name =
        args.cluster.as_ref().map_or("examples/cluster.yaml (built in)".into(), |p| p.display().to_string());
    warn(&cluster_name, &cluster.warnings);
    let input = match &args.trace {
        Some(spec) => trace_input(args, spec, &cluster)?,
        None => {
            let workload = load_workload(args, &cluster)?;
            let name = args
                .workload
                .as_ref()
                .map_or("examples/workload.yaml (built in)".into(), |p| p.display().to_string());
            warn(&name, &workload.warnings(&cluster));
            Input::Workload(workload)
        }
    };
    let until = match &input {
        Input::Workload(w) => horizon(args.until, w),
        // A trace replay runs until its last run ends.
        Input::Trace { .. } => args.until.map(|d| Time(d.as_millis())),
    };
    let config = SimConfig {
        seed: args.seed,
        until,
        max_attempts: args.max_attempts,
        am: am(args)?,
        node_failures: args.node_mtbf.map(|mtbf| NodeFailures { mtbf, repair: args.node_repair }),
        sample_every: args.sample_every,
        // Debug builds check the engine's and the simulator's invariants after every step.
        check_invariants: cfg!(debug_assertions),
        max_runs: args.max_runs,
        max_containers: args.max_containers,
    };
    if args.max_attempts == 0 {
        bail!("--max-attempts must be at least 1");
    }
    // Everything is written to a hidden folder beside --out and moved in only at the end, so
    // a run that fails leaves the previous run's files whole.
    let staging = Staging::new(&args.out, "--out")?;
    let usage_path = staging.path("usage.csv");
    let usage_file =
        File::create(&usage_path).with_context(|| format!("cannot write {}", usage_path.display()))?;
    let usage_out = BufWriter::new(usage_file);
    let mut usage = match args.usage_resolution {
        Some(d) if d.as_millis() == 0 => {
            bail!("--usage-resolution must be positive (leave it out for every change)")
        }
        Some(d) => UsageCsv::coarse(usage_out, &cluster, d),
        None => UsageCsv::new(usage_out, &cluster),
    }
    .with_context(|| format!("cannot write {}", usage_path.display()))?;

    let backfill = cluster.scheduler.backfill;
    let gangs = Rc::new(RefCell::new((0u64, 0u64)));
    let (mut sim, trace) = match input {
        Input::Workload(w) => (Simulation::new(cluster, w, config)?, None),
        Input::Trace { stream, path } => {
            let tiers = cluster.leaves().filter_map(|q| Some((q.path.clone(), q.tier?))).collect();
            let source = TraceSource { stream: Rc::clone(&stream), tiers, gangs: Rc::clone(&gangs) };
            (Simulation::streaming(cluster, Box::new(source), config)?, Some((stream, path)))
        }
    };
    // Run and job records go to their files as they end, not into memory.
    let open = |name: &str| -> Result<BufWriter<File>> {
        let path = staging.path(name);
        Ok(BufWriter::new(File::create(&path).with_context(|| format!("cannot write {}", path.display()))?))
    };
    let mut records =
        weir_sim::CsvRecords::new(open("runs.csv")?, open("jobs.csv")?).context("cannot write runs.csv")?;
    if args.tasks {
        records = records.with_tasks(open("tasks.csv")?).context("cannot write tasks.csv")?;
    }
    sim.set_record_sink(Box::new(records));
    let every = std::time::Duration::from_millis(args.progress_every.as_millis());
    let outcome = drive_with(sim, "simulating", every, |rows| {
        usage.write(&rows).with_context(|| format!("cannot write {}", usage_path.display()))
    })?;
    usage.finish().with_context(|| format!("cannot write {}", usage_path.display()))?;
    if let Some((stream, path)) = &trace {
        // Read as the simulation went: what the trace held, skipped and adjusted.
        let report = stream.borrow().report();
        eprint!("{path}: {report}");
        if report.workflows == 0 {
            bail!("{path}: no usable job in the trace");
        }
        let (all, without) = *gangs.borrow();
        if !backfill.is_none() && without > 0 {
            // EASY plans a reserved start from the walltimes of what runs; without them it
            // cannot plan one, and the gang holds room instead, as without backfilling.
            eprintln!(
                "warning: --backfill {} {}: {without} of {all} gangs had no walltime (SWF field 9 \
                 missing, or a format without estimates); use --walltime-from runtime (exact \
                 estimates) or --walltime-factor F (run time × F) — docs/importers.md",
                if backfill == weir_model::Backfill::Easy { "easy" } else { "conservative" },
                if without == all { "did nothing" } else { "was partly inert" }
            );
        }
    }
    write_outputs(&staging, &outcome, !args.no_report)?;
    // An old report would describe another run.
    staging.commit(if args.no_report { &["report.html"] } else { &[] })?;
    let ending = &outcome.summary.ending;
    if ending.reason == weir_sim::EndReason::NoProgress || ending.trace_unread {
        // Said on stderr too, so a script reading only the exit status and stderr learns that
        // the figures do not cover the whole workload.
        eprintln!(
            "warning: the replay stopped early ({}) at t={}: {} runs unfinished{}; its figures cover only what ran",
            if ending.trace_unread { "horizon" } else { ending.reason.name() },
            Duration((outcome.summary.simulated_seconds * 1000.0) as u64).human(),
            ending.runs_unfinished,
            if ending.trace_unread { ", part of the trace never read" } else { "" }
        );
    }
    let mut text = screen(&outcome, &args.out, !args.no_report);
    for &job in &args.explain {
        text.push_str(&explain(&outcome, job));
    }
    emit(&text)
}

/// Print the first few warnings about a file on stderr, and how many more there are.
fn warn(file: &str, warnings: &[weir_model::Problem]) {
    const SHOWN: usize = 10;
    for w in warnings.iter().take(SHOWN) {
        eprintln!("warning: {file}: {w}");
    }
    if warnings.len() > SHOWN {
        eprintln!("warning: {file}: … and {} more like these", warnings.len() - SHOWN);
    }
}

/// The engine's explanation of `job` at the end, or why there is none.
fn explain(o: &Outcome, job: u64) -> String {
    if let Some(p) = o.pending.iter().find(|p| p.job == job) {
        return format!(
            "\n{} ({} of workflow {}, submitted {}):\n{}",
            p.explanation.job,
            p.name,
            p.workflow,
            human_ms(p.submit.as_millis()),
            p.explanation
        );
    }
    if job < o.jobs {
        format!("\njob-{job} was no longer in the engine at the end: it completed or failed (see runs.csv)\n")
    } else {
        format!("\njob-{job}: no such job; the simulation submitted jobs 0 to {}\n", o.jobs.saturating_sub(1))
    }
}

fn human_ms(ms: u64) -> String {
    format!("t={}", Duration(ms).human())
}

/// What to simulate: a workload file (or the built-in example), or a trace read as the
/// simulation reaches its jobs.
enum Input {
    Workload(Workload),
    Trace { stream: Rc<RefCell<TraceStream>>, path: String },
}

/// A trace's workflows for the simulation, each in its leaf's tier where the leaf has one (the
/// importer sees only leaf names).
struct TraceSource {
    stream: Rc<RefCell<TraceStream>>,
    tiers: std::collections::BTreeMap<QueuePath, u8>,
    /// Gang stages read, and those without a walltime (EASY cannot plan around them).
    gangs: Rc<RefCell<(u64, u64)>>,
}

impl weir_sim::WorkflowSource for TraceSource {
    fn next_workflow(&mut self) -> Result<Option<weir_model::Workflow>, weir_sim::SimError> {
        let mut wf = self.stream.borrow_mut().next_workflow()?;
        if let Some(w) = &wf {
            let mut g = self.gangs.borrow_mut();
            for s in w.jobs.iter().flat_map(|j| j.stages.iter()).filter(|s| s.gang) {
                g.0 += 1;
                g.1 += u64::from(s.walltime.is_none());
            }
        }
        if let Some(tier) = wf.as_mut().and_then(|w| self.tiers.get(&w.queue).map(|&t| (w, t))) {
            tier.0.tier = tier.1;
        }
        Ok(wf)
    }
}

/// The workload file (or the built-in example).
fn load_workload(args: &SimulateArgs, cluster: &ClusterConfig) -> Result<Workload> {
    let (name, text) = match &args.workload {
        Some(p) => {
            let text = fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
            (p.display().to_string(), text)
        }
        None => ("examples/workload.yaml (built in)".to_string(), EXAMPLE_WORKLOAD.to_string()),
    };
    Ok(Workload::from_yaml(&name, &text, cluster)?)
}

/// A trace, opened for reading as the simulation goes; warnings for the capped leaves its jobs
/// may go to.
fn trace_input(args: &SimulateArgs, spec: &TraceSpec, cluster: &ClusterConfig) -> Result<Input> {
    let options = import_options(args, cluster)?;
    let path = spec.path.display().to_string();
    let reader = crate::trace_file::open(&spec.path, &format!("--trace {spec}"))?;
    if spec.kind == import::TraceKind::Swim {
        // The trace has bytes, not tasks: say how they become tasks before anything runs.
        eprintln!("{path}: SWIM model (docs/importers.md): {}", options.swim);
    }
    let stream = TraceStream::new(spec.kind, &path, reader, &options)?;
    let leaves: std::collections::BTreeSet<&QueuePath> =
        std::iter::once(&options.queue).chain(options.queue_map.values()).collect();
    for leaf in leaves {
        if let Some(caps) = caps(cluster, leaf) {
            let how = if *leaf == options.queue { "--queue" } else { "--queue-map" };
            eprintln!(
                "warning: the trace's jobs go to {leaf} ({how}), which is capped: {caps}; they will queue \
                 behind the cap (send them elsewhere with --queue or --queue-map)"
            );
        }
    }
    Ok(Input::Trace { stream: Rc::new(RefCell::new(stream)), path })
}

/// The caps on `leaf` and its ancestors (`max` below the whole cluster, `max_running_apps`), in
/// words, or `None` if nothing caps it.
fn caps(cluster: &ClusterConfig, leaf: &QueuePath) -> Option<String> {
    let total = cluster.total_resources();
    let mut found = Vec::new();
    let mut q = cluster.find(leaf);
    while let Some(ix) = q {
        let queue = &cluster.queues[ix];
        match queue.max {
            weir_model::Limit::Percent(p) if p < 100.0 => {
                found.push(format!("max {p}% of the cluster ({})", queue.path))
            }
            weir_model::Limit::Absolute(r) if !total.fits_in(&r) => {
                found.push(format!("max {r} ({})", queue.path))
            }
            _ => {}
        }
        if let Some(n) = queue.max_running_apps {
            found.push(format!("max_running_apps {n} ({})", queue.path));
        }
        q = queue.parent;
    }
    (!found.is_empty()).then(|| found.join(", "))
}

fn import_options(args: &SimulateArgs, cluster: &ClusterConfig) -> Result<ImportOptions> {
    let queue =
        QueuePath::parse(&args.queue).with_context(|| format!("--queue {}: not a queue path", args.queue))?;
    let mut queue_map = std::collections::BTreeMap::new();
    for pair in &args.queue_map {
        let (key, leaf) = pair
            .split_once('=')
            .with_context(|| format!("--queue-map {pair}: write KEY=LEAF, e.g. group:7=root.ads"))?;
        let leaf = QueuePath::parse(leaf)
            .with_context(|| format!("--queue-map {pair}: {leaf} is not a queue path"))?;
        queue_map.insert(key.trim().to_string(), leaf);
    }
    let [t1, t2, t3] = args.tier_mix[..] else {
        bail!("--tier-mix: give three shares, for tiers 1, 2 and 3 (e.g. 10,25,65)");
    };
    let machine_memory = cluster.nodes.iter().map(|g| g.resources.memory).max().unwrap_or(0);
    Ok(ImportOptions {
        queue,
        queue_map,
        time_scale: args.time_scale,
        load_scale: args.load_scale,
        tier_mix: [t1, t2, t3],
        slo_factor: Some(args.slo_factor),
        seed: args.seed,
        machine_memory,
        swf_memory: args.swf_memory,
        max_jobs: args.max_jobs,
        max_stages: args.max_stages,
        fit: import::NodeFit::of(cluster),
        walltime: walltime_from(args)?,
        swim: swim_model(args)?,
    })
}

fn swim_model(args: &SimulateArgs) -> Result<import::SwimModel> {
    for (flag, v) in [
        ("--swim-split-mib", args.swim_split_mib),
        ("--swim-reduce-mib", args.swim_reduce_mib),
        ("--swim-map-mbps", args.swim_map_mbps),
        ("--swim-reduce-mbps", args.swim_reduce_mbps),
    ] {
        if v == 0 || v > 1 << 30 {
            bail!("{flag} {v}: give a whole number from 1 to {}", 1u64 << 30);
        }
    }
    Ok(import::SwimModel {
        split_bytes: args.swim_split_mib << 20,
        reduce_bytes: args.swim_reduce_mib << 20,
        map_bytes_per_sec: args.swim_map_mbps * 1_000_000,
        reduce_bytes_per_sec: args.swim_reduce_mbps * 1_000_000,
        ..import::SwimModel::default()
    })
}

fn walltime_from(args: &SimulateArgs) -> Result<import::WalltimeFrom> {
    if let Some(f) = args.walltime_factor {
        if !(f.is_finite() && f >= 1.0) {
            bail!("--walltime-factor {f}: give a factor of at least 1 (weir never kills a task at its walltime, so an estimate below the run time would plan starts that cannot happen)");
        }
        return Ok(import::WalltimeFrom::Factor(f));
    }
    match args.walltime_from.as_str() {
        "trace" => Ok(import::WalltimeFrom::Trace),
        "runtime" => Ok(import::WalltimeFrom::Runtime),
        other => bail!("--walltime-from {other}: write trace or runtime"),
    }
}

/// `--backfill` and `--nodes-from-trace` applied to the cluster file, which is validated again.
fn adjust_cluster(args: &SimulateArgs, cluster: ClusterConfig) -> Result<ClusterConfig> {
    if args.backfill.is_none() && args.backfill_depth.is_none() && !args.nodes_from_trace {
        return Ok(cluster);
    }
    let mut file = cluster.file.clone();
    if let Some(d) = args.backfill_depth {
        if d == 0 {
            bail!("--backfill-depth 0: give at least 1");
        }
        file.scheduler.backfill_depth = Some(d);
    }
    if let Some(b) = &args.backfill {
        file.scheduler.backfill = match b.as_str() {
            "none" => weir_model::Backfill::None,
            "easy" => weir_model::Backfill::Easy,
            "conservative" => weir_model::Backfill::Conservative,
            other => bail!("--backfill {other}: write none, easy or conservative"),
        };
    }
    if args.nodes_from_trace {
        let spec = args.trace.as_ref().context("--nodes-from-trace needs --trace")?;
        let Some(path) = &spec.nodes else {
            bail!(
                "--nodes-from-trace: --trace {spec} names no node list; write {}:PODS.csv,NODES.csv \
                 (only alibaba-gpu2023 traces carry one)",
                spec.kind
            );
        };
        let name = path.display().to_string();
        let f = File::open(path).with_context(|| format!("--nodes-from-trace: cannot open {name}"))?;
        let nodes = import::import_nodes(&name, std::io::BufReader::new(f))?;
        let skipped: u64 = nodes.skipped.values().map(|s| s.count).sum();
        eprintln!(
            "{name}: {} rows read, {skipped} skipped; {} nodes in {} groups",
            nodes.rows,
            nodes.nodes(),
            nodes.groups.len()
        );
        for (reason, s) in &nodes.skipped {
            eprintln!("  {:>8}  {reason}", s.count);
        }
        if nodes.groups.is_empty() {
            bail!("{name}: no usable node in the node list");
        }
        file.nodes = nodes
            .groups
            .iter()
            .map(|g| weir_model::cluster_file::NodeGroupSpec {
                count: g.count,
                resources: weir_model::PartialResources::from_resources(g.resources),
                label: g.label.clone(),
                gpu_model: g.gpu_model.clone(),
            })
            .collect();
    }
    let name = args
        .cluster
        .as_ref()
        .map_or("examples/cluster.yaml (built in)".to_string(), |p| p.display().to_string());
    Ok(ClusterConfig::from_file(&name, file)?)
}

/// `--am`, or the default for the workload: none for traces whose jobs have no AM.
fn am(args: &SimulateArgs) -> Result<Option<Resources>> {
    let default = args.trace.as_ref().is_none_or(|t| t.kind.has_application_masters());
    let spec = match &args.am {
        Some(s) => s.as_str(),
        None if default => "1000,1g",
        None => "none",
    };
    if spec.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let bad = || format!("--am {spec}: write CPU,MEMORY (millicores and MiB, or e.g. 1g), or none");
    let (cpu, memory) = spec.split_once(',').with_context(bad)?;
    let cpu: u64 = cpu.trim().parse().ok().with_context(bad)?;
    let memory = weir_model::resources::parse_memory(memory.trim()).ok().with_context(bad)?;
    if cpu == 0 && memory == 0 {
        bail!("--am {spec}: an application master needs some resources; use --am none for none");
    }
    Ok(Some(Resources::new(cpu, memory, 0)))
}

/// The horizon: `--until`, or 7 days for a workload with recurring or Poisson workflows (which
/// never end by themselves), or none (run until every run has ended).
pub(crate) fn horizon(until: Option<Duration>, workload: &Workload) -> Option<Time> {
    let recurring = workload.workflows.iter().any(|w| !matches!(w.arrival, weir_model::Arrival::At(_)));
    until.or(recurring.then_some(Duration::from_secs(7 * 86_400))).map(|d| Time(d.as_millis()))
}

/// Run a simulation to its end behind a progress bar (on stderr, hidden when that is not a
/// terminal), handing usage rows to `rows` as they close. Fills in `wall_seconds`.
pub(crate) fn drive(
    sim: Simulation,
    label: &str,
    rows: impl FnMut(Vec<weir_sim::UsageRow>) -> Result<()>,
) -> Result<Outcome> {
    drive_with(sim, label, std::time::Duration::from_secs(10), rows)
}

/// [`drive`], printing a progress line on stderr every `every` of wall-clock time when stderr
/// is not a terminal (where the bar would be hidden), so a long run in a log shows it moves.
pub(crate) fn drive_with(
    mut sim: Simulation,
    label: &str,
    every: std::time::Duration,
    mut rows: impl FnMut(Vec<weir_sim::UsageRow>) -> Result<()>,
) -> Result<Outcome> {
    let started = Instant::now();
    let bar = progress_bar(&sim, label);
    let lines = !std::io::stderr().is_terminal();
    let mut last_line = started;
    let mut last_check = started;
    let mut steps = 0u64;
    // The clock is read after the first step, then every `stride` steps: 64 while steps are
    // quick (most runs: millions of steps, a read each would cost several percent), every step
    // while they take 1.5 ms or more on average (passes that place or end millions of
    // containers: a stage of 10^8 tasks replays in about 50 steps of seconds each).
    let mut stride = 1u64;
    while sim.step()? {
        steps += 1;
        if steps.is_multiple_of(stride) {
            update(&bar, &sim);
            let now = Instant::now();
            let slow =
                std::time::Duration::from_micros(1500).saturating_mul(u32::try_from(stride).unwrap_or(64));
            stride = if now.duration_since(last_check) >= slow { 1 } else { 64 };
            last_check = now;
            if lines && now.duration_since(last_line) >= every {
                last_line = now;
                eprintln!("{}", progress_line(&sim, label, started.elapsed().as_secs_f64()));
            }
        }
        if steps.is_multiple_of(4096) {
            rows(sim.take_usage_rows())?;
        }
    }
    bar.finish_and_clear();
    let mut outcome = sim.finish()?;
    outcome.summary.wall_seconds = started.elapsed().as_secs_f64();
    rows(std::mem::take(&mut outcome.usage_rows))?;
    Ok(outcome)
}

/// `simulating: t=3d 4h of 7d (45%) · 1234 runs ended · 2301223 events · 12 s`
fn progress_line(sim: &Simulation, label: &str, wall: f64) -> String {
    let p = sim.progress();
    let t = Duration(p.now.as_millis()).human();
    let of = match (p.until, p.runs_expected) {
        (Some(u), _) => {
            let pct = p.now.as_millis() as f64 * 100.0 / u.as_millis().max(1) as f64;
            format!(" of {} ({pct:.0}%)", Duration(u.as_millis()).human())
        }
        _ => String::new(),
    };
    let runs = match p.runs_expected {
        Some(n) => format!("{} of {n} runs ended", p.runs_ended),
        None => format!("{} runs ended", p.runs_ended),
    };
    format!("{label}: t={t}{of} · {runs} · {} events · {wall:.0} s", p.events)
}

fn progress_bar(sim: &Simulation, label: &str) -> ProgressBar {
    let p = sim.progress();
    let (len, unit) = match (p.until, p.runs_expected) {
        (Some(u), _) => (u.as_millis() / 1000, "simulated s"),
        (None, Some(n)) => (n, "runs"),
        (None, None) => (0, "runs"),
    };
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!(
        "{{spinner}} {label} [{{bar:40}}] {{pos}}/{{len}} {unit} · {{msg}} · {{elapsed}} (eta {{eta}})"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

fn update(bar: &ProgressBar, sim: &Simulation) {
    let p = sim.progress();
    bar.set_position(match p.until {
        Some(_) => p.now.as_millis() / 1000,
        None => p.runs_ended,
    });
    bar.set_message(format!("{} events, t={}", p.events, Duration(p.now.as_millis()).human()));
}

fn write_outputs(dir: &Staging, outcome: &Outcome, report: bool) -> Result<()> {
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let path = dir.path(name);
        fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    write("summary.json", outcome.summary.to_json().as_bytes())?;
    let mut pending = Vec::new();
    weir_sim::write_pending_csv(&mut pending, outcome).context("cannot format pending.csv")?;
    write("pending.csv", &pending)?;
    if report {
        write("report.html", weir_sim::report::render(outcome).as_bytes())?;
    }
    Ok(())
}

/// The one-screen summary printed at the end.
fn screen(o: &Outcome, out: &Path, report: bool) -> String {
    let s = &o.summary;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "simulated {} on {} nodes in {:.2} s wall ({:.0} events/s), seed {}",
        human(s.simulated_seconds),
        s.nodes,
        s.wall_seconds,
        s.events as f64 / s.wall_seconds.max(1e-9),
        s.seed
    );
    let _ = writeln!(
        t,
        "runs {} ({} completed, {} failed, {} unfinished) · jobs {} · tasks {} · events {}",
        s.runs,
        s.runs_completed,
        s.runs_failed,
        s.runs_unfinished,
        s.jobs_submitted,
        s.tasks_completed,
        s.events
    );
    let _ = writeln!(
        t,
        "utilization cpu {:.1}% memory {:.1}%{} · preemptions {} · wasted {:.0} container-s · node failures {}",
        s.utilization.cpu * 100.0,
        s.utilization.memory * 100.0,
        // GPU allocation counts fractions of shared GPUs; the FGD fragmentation beside it.
        match &s.gpus {
            Some(g) => format!(
                " gpu {:.1}% (of {} GPUs; fragmented {})",
                s.utilization.gpu * 100.0,
                g.gpus,
                g.fragmentation_ratio_avg.map_or("-".to_string(), |r| format!("{:.1}% of idle GPU room", r * 100.0))
            ),
            None => String::new(),
        },
        s.preemptions,
        s.wasted_container_seconds,
        s.node_failures
    );
    t.push_str(&s.ending.screen());
    let longest = weir_sim::longest_wait(s.job_figures.delay.max, s.ending.longest_unfinished_seconds);
    if let Some(w) = longest.filter(|&w| w >= weir_sim::LONG_WAIT.as_secs_f64()) {
        let _ = writeln!(
            t,
            "warning: a job waited {} for what it asked for: the cluster, or the queues' caps, are far \
             too small for this workload (see jobs.csv and pending.csv)",
            weir_sim::human_wait(w)
        );
    }
    let r = &s.reservations;
    let _ = writeln!(
        t,
        "reservations {} ({} fulfilled, {} released, {} held at the end; {:.1} nodes reserved on average) · jobs unfinished {}",
        r.made, r.fulfilled, r.released, r.active_at_end, r.reserved_nodes_avg, s.jobs_unfinished
    );
    let w = |v: Option<f64>| v.map_or("-".to_string(), human);
    let f = &s.job_figures;
    let _ = writeln!(
        t,
        "jobs: wait mean {} p50 {} p99 {}{} · delay (until all asked for was granted) p50 {} p99 {} max {} · bounded slowdown mean {} p99 {}",
        w(f.wait.mean),
        w(f.wait.p50),
        w(f.wait.p99),
        // Never-placed jobs have no wait: without this, "p99 0s" could hide jobs that waited
        // for ever.
        match s.jobs_never_placed {
            0 => String::new(),
            n => format!(" (and {n} job{} never placed, not in these figures)", if n == 1 { "" } else { "s" }),
        },
        w(f.delay.p50),
        w(f.delay.p99),
        w(f.delay.max),
        slowdown(f.bounded_slowdown.mean),
        slowdown(f.bounded_slowdown.p99),
    );
    let _ = writeln!(
        t,
        "\ntier  runs  with SLO  met    SLO success  workflows  SLO-successful  runtime p50  delay p50  delay p99  slowdown"
    );
    for (tier, x) in &s.tiers {
        let ratio = x.slo_success_ratio.map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0));
        let _ = writeln!(
            t,
            "{tier:<5} {:>4}  {:>8}  {:>5}  {ratio:>11}  {:>9}  {:>14}  {:>11}  {:>9}  {:>9}  {:>8}",
            x.runs,
            x.runs_with_slo,
            x.slo_met,
            x.workflows,
            x.slo_successful_workflows,
            w(x.runtime_p50),
            w(x.delay_p50),
            w(x.delay_p99),
            slowdown(x.bounded_slowdown_mean),
        );
    }
    let busiest: Vec<_> = {
        let mut q: Vec<_> = s.queues.iter().filter(|q| q.jobs_started > 0).collect();
        q.sort_by(|a, b| b.usage_avg.memory.total_cmp(&a.usage_avg.memory).then(a.queue.cmp(&b.queue)));
        q.into_iter().take(8).collect()
    };
    if !busiest.is_empty() {
        let _ = writeln!(
            t,
            "\nbusiest queues                      avg memory  avg fair share  wait p50  wait p99  delay p50  delay p99  preempted"
        );
        for q in busiest {
            let _ = writeln!(
                t,
                "{:<35} {:>10}  {:>14}  {:>8}  {:>8}  {:>9}  {:>9}  {:>9}",
                q.queue,
                format!("{:.0} MiB", q.usage_avg.memory),
                format!("{:.0} MiB", q.fair_share_avg.memory),
                w(q.wait_p50),
                w(q.wait_p99),
                w(q.delay_p50),
                w(q.delay_p99),
                q.preempted
            );
        }
    }
    let report = if report { ", report.html" } else { "" };
    let _ = writeln!(
        t,
        "\nwrote {}, runs.csv, jobs.csv, usage.csv, pending.csv{report}",
        out.join("summary.json").display()
    );
    t
}

fn slowdown(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.2}"))
}

fn human(seconds: f64) -> String {
    Duration((seconds * 1000.0).round() as u64).human()
}
