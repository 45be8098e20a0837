//! `weir slo`: deadline guarantees for SLO jobs (weir-slo) — profiles, C(p, a) tables and the
//! evaluation of the controller in simulation. See docs/slo.md.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use weir_model::{ClusterConfig, Duration, Workload};
use weir_slo::{
    indicator_error, simulate_alone, EvalConfig, HeldBackSample, Indicator, JobProfile, Policy, Predictor,
    RemainingTable, TableConfig, TaskObservation, TaskOutcome,
};

use crate::cmd::simulate::parse_duration;

#[derive(Debug, Args)]
#[command(
    about = "Deadline guarantees for SLO jobs: job profiles, C(p, a) tables, and the controller evaluated in simulation",
    long_about = "Jockey-style deadline guarantees (docs/slo.md). A recurring SLO job is modelled from its \
earlier runs (a profile: stage DAG, task-duration quantiles, initialization latency, failure \
probability); simulating it alone at every allocation gives C(p, a), the distribution of its remaining \
time at progress p with a containers; while it runs, a controller picks every period the smallest \
allocation predicted to meet its deadline, with slack, hysteresis and a dead zone.\n\n\
The steps, on the example built for it:\n  \
weir simulate --cluster examples/slo/cluster.yaml --workload examples/slo/workload.yaml --until 1d --tasks --out runs/\n  \
weir slo profile --cluster examples/slo/cluster.yaml --workload examples/slo/workload.yaml --records runs/ --workflow etl --out etl.profile.json\n  \
weir slo table --profile etl.profile.json --out etl.table.json\n  \
weir slo evaluate --cluster examples/slo/cluster.yaml --workload examples/slo/workload.yaml --out eval/"
)]
pub struct SloArgs {
    #[command(subcommand)]
    command: SloCommand,
}

#[derive(Debug, Subcommand)]
enum SloCommand {
    Profile(ProfileArgs),
    Table(TableArgs),
    Evaluate(EvaluateArgs),
}

#[derive(Debug, Args)]
#[command(
    about = "Build a job's profile from the task records of earlier runs (tasks.csv, jobs.csv)",
    long_about = "Build a job's profile from the task records `weir simulate --tasks` wrote: per stage the \
task count and DAG (from the workload file), quantiles of completed attempts' durations and the share of \
attempts that failed (preempted or lost attempts say nothing about the task and are left out); for the \
job, the median time from submission to its first task (from jobs.csv). The profile is a small \
versioned JSON file.\n\n\
Example:\n  weir slo profile --cluster examples/slo/cluster.yaml --workload examples/slo/workload.yaml \
--records runs/ --workflow etl --out etl.profile.json"
)]
struct ProfileArgs {
    /// The cluster file the records were simulated on (the workload is checked against it).
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// The workload file the records were simulated from (for the stage DAG).
    #[arg(long, value_name = "FILE")]
    workload: PathBuf,
    /// The folder `weir simulate --tasks --out` wrote: tasks.csv and jobs.csv are read.
    #[arg(long, value_name = "DIR")]
    records: PathBuf,
    /// The workflow whose job is profiled (its name in the workload file).
    #[arg(long, value_name = "NAME")]
    workflow: String,
    /// The job of the workflow; default: its only job.
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Where the profile goes (JSON).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

#[derive(Debug, Args)]
#[command(
    about = "Precompute C(p, a) for a profile by simulating the job alone, and measure its prediction error",
    long_about = "Simulate the job of a profile alone, on exactly a containers for every a in \
1..--max-allocation (default: its largest stage), --runs times each with different seeds, sampling \
(progress, remaining time) along every run, and keep the quantiles of remaining time per progress \
bucket and allocation: the table the controller reads. Then measure how well the table's median (and \
Amdahl's S + P/a) predicted the remaining time of --held-back runs it never saw (other seeds), for \
both progress indicators: the error is |predicted - actual| over the run's length.\n\n\
Example:\n  weir slo table --profile etl.profile.json --runs 50 --out etl.table.json"
)]
struct TableArgs {
    /// The profile `weir slo profile` wrote.
    #[arg(long, value_name = "FILE")]
    profile: PathBuf,
    /// The largest allocation (containers) simulated. Default: the job's largest stage, past
    /// which more containers cannot help.
    #[arg(long, value_name = "N")]
    max_allocation: Option<u32>,
    /// Simulated runs per allocation.
    #[arg(long, value_name = "N", default_value_t = 50)]
    runs: u32,
    /// Progress buckets (equal width).
    #[arg(long, value_name = "N", default_value_t = 20)]
    buckets: u32,
    /// How progress is measured: work (expected task-seconds done) or critical-path.
    #[arg(long, value_name = "NAME", default_value = "work", value_parser = parse_indicator)]
    indicator: Indicator,
    /// The seed every simulated run's seed derives from: the same seed, the same table.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Runs held back per measured allocation (a quarter, half and all of the largest).
    #[arg(long, value_name = "N", default_value_t = 10)]
    held_back: u32,
    /// Where the table goes (JSON).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

#[derive(Debug, Args)]
#[command(
    about = "Evaluate the controller against static, maximal and fair-share allocation in simulation",
    long_about = "Learn a profile and a C(p, a) table for every SLO job of the workload (tier 1, an slo, \
one job, no gangs) from a training simulation, then replay the workload with every SLO run perturbed \
(--slow-share of them with one stage's durations times --slow-factor; every stage's failure \
probability raised by --extra-failure) under five policies: jockey (the controller), static (its first \
allocation, never changed), max (the job's full parallelism), fair (no guarantee: plain fair share) \
and amdahl (the controller with S + P/a). An allocation is the job's guarantee in the engine (placed \
ahead of fair share, restored by preemption after the leaf's min-share timeout); the SLO queues' \
configured minimum is removed under every policy, so the guarantee is all an SLO job gets. \
Tier-1 workflows with an slo that the controller does not guard (several jobs, a gang) are named and \
replayed as background.\n\n\
One more replay gives every SLO run room for all its tasks at once (the same task durations and \
failures): its completion there (jobs.csv's alone) is what no policy can beat, and the runs it meets \
are the ones any policy could. Each SLO job's deadline is printed against what the controller plans \
for at its maximal allocation before the job starts; a deadline below that is one the admission \
check refuses at every allocation (docs/slo.md, \"Deadlines\").\n\n\
Prints, and writes to --out: summary.json (per policy: deadlines met, lateness = completion/deadline \
quantiles, allocated and used container-hours of the SLO jobs, background jobs' response times; and \
the SLO jobs' deadline checks and the profiles), jobs.csv (one row per SLO run and policy) and decisions.csv (every control decision: \
time, progress, slack, speed, allocation, predicted completion) and report.html (the policies side by side, \
completion against deadline per run, allocation over time against progress for the controller's \
hardest runs).\n\n\
Example:\n  weir slo evaluate --cluster examples/slo/cluster.yaml --workload examples/slo/workload.yaml --out eval/"
)]
struct EvaluateArgs {
    /// The cluster file; the SLO jobs' queue should guarantee a minimum share (the allocations
    /// the controller chooses are drawn from it).
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// The workload: its tier-1 workflows with an slo, one job and no gangs are the SLO jobs,
    /// the rest is background.
    #[arg(long, value_name = "FILE")]
    workload: PathBuf,
    /// Where summary.json, jobs.csv, decisions.csv and report.html go.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The simulated window (training and replays).
    #[arg(long, value_name = "DURATION", default_value = "2d", value_parser = parse_duration)]
    until: Duration,
    /// The seed of the replays and of the perturbations.
    #[arg(long, value_name = "N", default_value_t = 2)]
    seed: u64,
    /// The seed of the training run the profiles are learned from.
    #[arg(long, value_name = "N", default_value_t = 1)]
    train_seed: u64,
    /// How often the controller looks at each job.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    period: Duration,
    /// The share of SLO runs slowed: one of their stages (drawn at random) runs slower.
    #[arg(long, value_name = "F", default_value_t = 0.3)]
    slow_share: f64,
    /// How much slower: the slowed stage's durations are multiplied by this.
    #[arg(long, value_name = "F", default_value_t = 1.5)]
    slow_factor: f64,
    /// Added to the failure probability of every stage of every SLO run.
    #[arg(long, value_name = "P", default_value_t = 0.03)]
    extra_failure: f64,
    /// Simulated runs per allocation for each table.
    #[arg(long, value_name = "N", default_value_t = 20)]
    table_runs: u32,
    /// The largest allocation a table holds (each job's parallelism caps it too).
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_allocation: u32,
    /// The quantile of C(p, a) the controller plans for.
    #[arg(long, value_name = "Q", default_value_t = 0.99)]
    quantile: f64,
    /// The controller's slack at the start and at the end (linear in progress between).
    #[arg(long, value_name = "F", default_value_t = 1.5)]
    slack_start: f64,
    #[arg(long, value_name = "F", default_value_t = 1.2)]
    slack_end: f64,
    /// Keep the allocation while it is predicted to finish this close before the deadline.
    #[arg(long, value_name = "DURATION", default_value = "3m", value_parser = parse_duration)]
    dead_zone: Duration,
    /// The share of the gap a cut closes per period (1: at once).
    #[arg(long, value_name = "F", default_value_t = 0.5)]
    hysteresis: f64,
    /// Do not re-estimate: plan with the profile's task durations even when the run's
    /// completed tasks show it is slower (docs/slo.md, "re-estimation").
    #[arg(long)]
    no_reestimate: bool,
    /// Policies to run (comma-separated): jockey, static, max, fair, amdahl.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "jockey,static,max,fair,amdahl", value_parser = parse_policy)]
    policies: Vec<Policy>,
}

fn parse_indicator(s: &str) -> Result<Indicator, String> {
    Indicator::parse(s).ok_or_else(|| format!("`{s}` is not an indicator: work or critical-path"))
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::ALL
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| format!("`{s}` is not a policy: jockey, static, max, fair or amdahl"))
}

pub fn run(args: &SloArgs) -> Result<()> {
    match &args.command {
        SloCommand::Profile(a) => profile(a),
        SloCommand::Table(a) => table(a),
        SloCommand::Evaluate(a) => evaluate(a),
    }
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn load(cluster: &Path, workload: &Path) -> Result<(ClusterConfig, Workload)> {
    let c = ClusterConfig::from_yaml(&cluster.display().to_string(), &read(cluster)?)?;
    let w = Workload::from_yaml(&workload.display().to_string(), &read(workload)?, &c)?;
    Ok((c, w))
}

fn write(path: &Path, text: &str) -> Result<()> {
    // Written beside and renamed, so a failure leaves any earlier file whole.
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Split one CSV line (RFC 4180 quotes).
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().expect("one field").push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("one field").push(c),
        }
    }
    out
}

/// Rows of a CSV file as maps from its header's column names, each checked to be present.
fn csv_rows(path: &Path, want: &[&str]) -> Result<Vec<Vec<String>>> {
    let text = read(path)?;
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap_or(""));
    let mut at = Vec::new();
    for w in want {
        let Some(i) = header.iter().position(|h| h == w) else {
            bail!("{}: line 1: no column `{w}` (header: {})", path.display(), header.join(","));
        };
        at.push(i);
    }
    lines
        .enumerate()
        .map(|(n, l)| {
            let f = fields(l);
            at.iter()
                .map(|&i| {
                    f.get(i).cloned().with_context(|| {
                        format!("{}: line {}: column {} missing", path.display(), n + 2, i + 1)
                    })
                })
                .collect()
        })
        .collect()
}

fn number(path: &Path, line: usize, column: &str, value: &str) -> Result<u64> {
    value
        .parse()
        .with_context(|| format!("{}: line {line}: {column} `{value}` is not a whole number", path.display()))
}

fn profile(args: &ProfileArgs) -> Result<()> {
    let (_, workload) = load(&args.cluster, &args.workload)?;
    let wf = workload
        .workflows
        .iter()
        .find(|w| w.name == args.workflow)
        .with_context(|| format!("{}: no workflow `{}`", args.workload.display(), args.workflow))?;
    let template =
        match &args.job {
            Some(j) => wf.jobs.iter().find(|t| &t.name == j).with_context(|| {
                format!("{}: workflow {} has no job `{j}`", args.workload.display(), wf.name)
            })?,
            None if wf.jobs.len() == 1 => &wf.jobs[0],
            None => bail!("workflow {} has {} jobs: say which with --job", wf.name, wf.jobs.len()),
        };
    let tasks_path = args.records.join("tasks.csv");
    let rows = csv_rows(&tasks_path, &["job", "workflow", "job_name", "stage", "duration", "outcome"])
        .with_context(|| "tasks.csv is written by `weir simulate --tasks`")?;
    let mut observations = Vec::new();
    let mut jobs = BTreeSet::new();
    for (n, r) in rows.iter().enumerate() {
        if r[1] != wf.name || r[2] != template.name {
            continue;
        }
        jobs.insert(number(&tasks_path, n + 2, "job", &r[0])?);
        let outcome = match r[5].as_str() {
            "done" => TaskOutcome::Done,
            "failed" => TaskOutcome::Failed,
            "lost" => TaskOutcome::Lost,
            other => bail!(
                "{}: line {}: outcome `{other}` is not done, failed or lost",
                tasks_path.display(),
                n + 2
            ),
        };
        let duration = Duration(number(&tasks_path, n + 2, "duration", &r[4])?);
        observations.push(TaskObservation { stage: r[3].clone(), duration, outcome });
    }
    let jobs_path = args.records.join("jobs.csv");
    let mut init = Vec::new();
    for (n, r) in csv_rows(&jobs_path, &["job", "wait"])?.iter().enumerate() {
        if !r[1].is_empty() && jobs.contains(&number(&jobs_path, n + 2, "job", &r[0])?) {
            init.push(Duration(number(&jobs_path, n + 2, "wait", &r[1])?));
        }
    }
    let p = JobProfile::build(&wf.name, template, jobs.len() as u32, &observations, &init)
        .with_context(|| format!("from {}", tasks_path.display()))?;
    write(&args.out, &p.to_json())?;
    let mut t = format!(
        "{}.{}: {} runs, initialization {}\n",
        p.workflow,
        p.job,
        p.runs,
        Duration(p.init_ms).human()
    );
    for s in &p.stages {
        let _ = writeln!(
            t,
            "  {:<16} {:>5} tasks  median {:>8}  p99 {:>8}  failures {:.1}%",
            s.name,
            s.tasks,
            Duration(s.duration_ms[3]).human(),
            Duration(s.duration_ms[7]).human(),
            s.failure_probability * 100.0
        );
    }
    let _ = writeln!(t, "wrote {}", args.out.display());
    crate::emit(&t)
}

fn table(args: &TableArgs) -> Result<()> {
    let file = args.profile.display().to_string();
    let p = JobProfile::from_json(&file, &read(&args.profile)?)?;
    let max = args.max_allocation.unwrap_or_else(|| p.max_parallelism());
    let config = TableConfig {
        max_allocation: max,
        runs: args.runs,
        buckets: args.buckets,
        indicator: args.indicator,
        seed: args.seed,
    };
    let table = RemainingTable::build(&p, &config)?;
    write(&args.out, &table.to_json())?;
    let mut t = format!(
        "{}.{}: C(p, a) for a = 1..{max}, {} runs each, {} buckets of {} progress\n",
        p.workflow,
        p.job,
        args.runs,
        args.buckets,
        args.indicator.name()
    );
    let _ = writeln!(t, "{:>6}  {:>10}  {:>10}  {:>10}", "a", "p=0 q50", "p=0 q95", "p=0.5 q95");
    for a in [1, max / 4, max / 2, max].into_iter().filter(|&a| a >= 1).collect::<BTreeSet<_>>() {
        let _ = writeln!(
            t,
            "{a:>6}  {:>10}  {:>10}  {:>10}",
            Duration(table.remaining(0.0, a, 0.5)).human(),
            Duration(table.remaining(0.0, a, 0.95)).human(),
            Duration(table.remaining(0.5, a, 0.95)).human()
        );
    }
    if args.held_back > 0 {
        // Held-back runs: seeds the table never used.
        let mut samples: Vec<HeldBackSample> = Vec::new();
        for a in [max / 4, max / 2, max].into_iter().filter(|&a| a >= 1).collect::<BTreeSet<_>>() {
            for r in 0..args.held_back {
                samples.extend(simulate_alone(&p, a, u64::MAX - u64::from(r) - u64::from(a) * 1000)?);
            }
        }
        let _ = writeln!(
            t,
            "\nprediction error on {} samples of held-back runs (|predicted − actual| / run length):",
            samples.len()
        );
        let _ = writeln!(t, "  {:<26} {:>8} {:>8} {:>8}", "predictor", "mean", "p90", "bias");
        let mut predictors = Vec::new();
        for ind in Indicator::ALL {
            let tb = if ind == args.indicator {
                table.clone()
            } else {
                RemainingTable::build(&p, &TableConfig { indicator: ind, ..config.clone() })?
            };
            predictors.push(Predictor::Table { profile: p.clone(), table: tb });
        }
        predictors.push(Predictor::Amdahl { profile: p.clone() });
        for pr in &predictors {
            let e = indicator_error(pr, &samples);
            let _ = writeln!(
                t,
                "  {:<26} {:>7.1}% {:>7.1}% {:>+7.1}%",
                e.predictor,
                e.mean_abs_error * 100.0,
                e.p90_abs_error * 100.0,
                e.mean_bias * 100.0
            );
        }
    }
    let _ = writeln!(t, "wrote {}", args.out.display());
    crate::emit(&t)
}

fn evaluate(args: &EvaluateArgs) -> Result<()> {
    let (cluster, workload) = load(&args.cluster, &args.workload)?;
    let config = EvalConfig {
        until: args.until,
        train_seed: args.train_seed,
        seed: args.seed,
        control_period: args.period,
        table: TableConfig {
            max_allocation: args.max_allocation,
            runs: args.table_runs,
            ..TableConfig::default()
        },
        control: weir_slo::ControlConfig {
            quantile: args.quantile,
            slack_start: args.slack_start,
            slack_end: args.slack_end,
            dead_zone_ms: args.dead_zone.as_millis(),
            hysteresis: args.hysteresis,
            reestimate: !args.no_reestimate,
            ..weir_slo::ControlConfig::default()
        },
        slow_share: args.slow_share,
        slow_factor: args.slow_factor,
        extra_failure: args.extra_failure,
        policies: args.policies.clone(),
    };
    let report = weir_slo::evaluate(&cluster, &workload, &config)?;
    fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let summary = serde_json::json!({ "policies": report.policies, "slo_jobs": report.slo_jobs, "unguarded": report.unguarded, "profiles": report.profiles });
    write(&args.out.join("summary.json"), &(serde_json::to_string_pretty(&summary)? + "\n"))?;
    let mut jobs = String::from(
        "policy,workflow,run,slowed,submit,deadline,completion,met,alone,allocated_hours,used_hours\n",
    );
    let mut decisions =
        String::from("policy,workflow,run,elapsed,progress,slack,speed,allocation,target,predicted,reason\n");
    for j in &report.jobs {
        let _ = writeln!(
            jobs,
            "{},{},{},{},{},{},{},{},{},{:.3},{:.3}",
            j.policy.name(),
            j.workflow,
            j.run,
            j.slowed,
            j.submit_ms,
            j.deadline_ms,
            j.completion_ms.map(|c| c.to_string()).unwrap_or_default(),
            j.met,
            j.alone_ms.map(|c| c.to_string()).unwrap_or_default(),
            j.allocated_hours,
            j.used_hours
        );
        for d in &j.decisions {
            let _ = writeln!(
                decisions,
                "{},{},{},{},{:.4},{:.3},{:.3},{},{},{},{}",
                j.policy.name(),
                j.workflow,
                j.run,
                d.elapsed_ms,
                d.progress,
                d.slack,
                d.speed,
                d.allocation,
                d.target,
                d.predicted_ms,
                d.reason
            );
        }
    }
    write(&args.out.join("jobs.csv"), &jobs)?;
    write(&args.out.join("decisions.csv"), &decisions)?;
    write(&args.out.join("report.html"), &weir_slo::report_html(&report))?;
    let mut t = format!(
        "{:<8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>11} {:>9} {:>14}\n",
        "policy", "met", "ratio", "late p50", "late p90", "late max", "alloc ch", "used ch", "bg resp mean"
    );
    for f in &report.policies {
        let _ = writeln!(
            t,
            "{:<8} {:>4}/{:<4} {:>7.1}% {:>9.2} {:>9.2} {:>9.2} {:>11.1} {:>9.1} {:>13.0}s",
            f.policy.name(),
            f.met,
            f.slo_runs,
            f.met_ratio * 100.0,
            f.lateness_p50,
            f.lateness_p90,
            f.lateness_max,
            f.allocated_hours,
            f.used_hours,
            f.background_response_mean_s
        );
    }
    let _ = writeln!(t, "(lateness: completion / deadline; ch: container-hours; bg: background jobs)");
    if let Some(max) = report.policies.iter().find(|f| f.policy == Policy::Max) {
        let of: Vec<String> = report
            .policies
            .iter()
            .filter_map(|f| Some(format!("{} {}", f.policy.name(), f.met_where_max_met?)))
            .collect();
        let _ =
            writeln!(t, "of the {} runs maximal allocation met, each policy met: {}", max.met, of.join(", "));
    }
    if let Some(first) = report.policies.first() {
        let of: Vec<String> =
            report.policies.iter().map(|f| format!("{} {}", f.policy.name(), f.met_where_feasible)).collect();
        let _ = writeln!(
            t,
            "of the {} runs that meet their deadline with room for all their tasks, each policy met: {}",
            first.feasible_runs,
            of.join(", ")
        );
    }
    for u in &report.unguarded {
        let _ = writeln!(t, "not guarded, replayed as background: {u}");
    }
    for j in &report.slo_jobs {
        let _ = writeln!(
            t,
            "{}: deadline {:.0}s; at its maximal allocation ({} containers) C(0, a) p50 {:.0}s, p99 {:.0}s, \
             the controller plans for {:.0}s (deadline / that: {:.2}{})",
            j.workflow,
            j.deadline_ms as f64 / 1000.0,
            j.max_allocation,
            j.predicted_p50_ms as f64 / 1000.0,
            j.predicted_p99_ms as f64 / 1000.0,
            j.controller_ms as f64 / 1000.0,
            j.deadline_ms as f64 / j.controller_ms.max(1) as f64,
            if j.controller_ms > j.deadline_ms {
                "; admission would refuse it: no allocation is predicted to meet the deadline"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        t,
        "wrote {}, jobs.csv, decisions.csv, report.html",
        args.out.join("summary.json").display()
    );
    crate::emit(&t)
}
