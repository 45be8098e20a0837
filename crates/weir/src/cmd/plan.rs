//! `weir plan`: queue weights and running-app limits from usage history, with the usage/capacity
//! report and every export.

use std::fmt::Write as _;
use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use weir_model::{ClusterConfig, Duration, Workload};
use weir_planner::{
    plan, report_html, Comparison, ExportOptions, Format, NameKey, PlanInput, PlanSettings, UsageHistory,
};
use weir_sim::{SimConfig, Simulation, Summary};

use crate::cmd::client::Connection;
use crate::cmd::plan_server;
use crate::cmd::simulate::{drive, horizon};
use crate::{emit, load_cluster};

#[derive(Debug, Args)]
#[command(
    about = "Plan queue weights and max_running_apps from usage history (the Percentile algorithm)",
    long_about = "Plan a cluster's queue settings from its usage history, the way Pinterest's Monarch \
planner does: for each leaf queue, over the most recent window (default 30 days), take the intervals \
in which the queue was in use, and allocate the smallest whole number of instances that covers p% of \
its in-use time — p by tier, 95/85/70 by default. Usage counts in instances of the cluster's instance \
type by the dominant resource: max(cpu/instance.cpu, memory/instance.memory). max_running_apps is the \
same percentile of concurrently running applications plus 20% headroom. A leaf's weight becomes its \
allocated instances; a parent's weight the sum of its children's. Leaves the history does not mention \
keep their settings.\n\n\
The history (--history) is CSV with the columns start,end,queue,cpu,memory,running_apps: start and end \
in milliseconds since the history's epoch, queue a leaf path (root.ads.ranking.tier1), cpu in \
millicores, memory in MiB; an optional seventh column gpu (GPUs held, as weir simulate and weir \
serve write it) is checked and not planned. One row per interval of constant usage; rows may come in any order, gaps \
are idle time, overlapping rows for one queue are an error. A header line is optional.\n\n\
Settings (--settings plan.yaml, all optional but `version`):\n  \
version: 1\n  window: 30d                          # the most recent span of the history\n  \
instance: {cpu: 16000, memory: 64g}  # default: the cluster's most common node\n  \
percentile: {1: 95, 2: 85, 3: 70}    # default: the cluster file's tiers\n  \
max_running_apps_headroom: 0.2\n  shrink_floor: 0.3                    # verdict \"shrink\" below this usage/capacity\n\n\
Writes into --out: plan.json (per queue, per tier and cluster figures and the verdict), report.html \
(self-contained), and the plan in every format: cluster.yaml (weir), fair-scheduler.xml, \
capacity-scheduler.xml, queues.yaml (YuniKorn), kueue.yaml. Prints the per-tier summary and the \
verdict.\n\n\
With --workload, queues whose workflows have SLOs get at least the instances one run needs to \
finish within its SLO. With --validate as well, the workload is replayed by the simulator on the \
cluster as it is and as planned (same seed), and SLO success per tier and utilization are printed \
side by side (validate.json holds both summaries).\n\n\
Examples:\n  weir plan --cluster examples/cluster.yaml --history examples/usage.csv --out plan/\n  \
weir plan --cluster examples/cluster.yaml --history usage.csv --settings examples/plan.yaml --out plan/\n  \
weir simulate --until 30d --out sim/ && weir plan --cluster examples/cluster.yaml \
--history sim/usage.csv --workload examples/workload.yaml --validate --out plan/"
)]
pub struct PlanArgs {
    /// The cluster file to plan (or --server).
    #[arg(long, value_name = "FILE", required_unless_present = "server", conflicts_with = "server")]
    cluster: Option<PathBuf>,
    /// The usage history (usage.csv) (or --server).
    #[arg(long, value_name = "FILE", required_unless_present = "server", conflicts_with = "server")]
    history: Option<PathBuf>,
    /// Plan a running server's cluster from the history it recorded: its cluster file, its
    /// usage over --window and, with --validate, its recorded runs replayed on the current and
    /// the planned settings. Copies go to --out (current.yaml, usage.csv, runs.csv,
    /// workload.yaml, routes.yaml, source.json); `weir apply DIR` applies the plan.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// With --server: also route workflows here from the recorded history (reference 001's
    /// resource DB): every cluster's recorded runs are replayed, each workflow's memory per core
    /// is compared with each cluster's, and a workflow that ran elsewhere and fits this cluster
    /// best gets a route here in routes.yaml (`weir apply` shows and applies it), with the
    /// replayed effect in routes-from-history.json.
    #[arg(long, requires = "server")]
    routes_from_history: bool,
    /// With --server: the cluster to plan (default: the only one, or `default`).
    #[arg(long, value_name = "NAME", requires = "server")]
    server_cluster: Option<String>,
    /// With --server: the local data directory whose admin.token is used when $WEIR_TOKEN is
    /// unset.
    #[arg(long, value_name = "DIR", default_value = "weir-data", requires = "server")]
    data_dir: PathBuf,
    /// With an https:// --server whose certificate a private CA signed: that CA's certificate
    /// (PEM). Default: $WEIR_CA_CERT.
    #[arg(long, value_name = "FILE", requires = "server")]
    ca_cert: Option<PathBuf>,
    /// The most recent span of history to plan from (default 30d, or the settings' `window`).
    #[arg(long, value_name = "DURATION", value_parser = crate::cmd::simulate::parse_duration)]
    window: Option<Duration>,
    /// Planner settings (plan.yaml). Default: 30d window, the most common node as the instance,
    /// the cluster's tier percentiles, 20% headroom, shrink floor 0.3.
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// Directory for plan.json, report.html and the exports (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Kueue: namespace of the LocalQueues.
    #[arg(long, value_name = "NAME", default_value = "default")]
    namespace: String,
    /// The workload (workload.yaml): a queue whose workflows have SLOs gets at least
    /// Σ instance-hours of one run / SLO hours instances. Needed by --validate.
    #[arg(long, value_name = "FILE")]
    workload: Option<PathBuf>,
    /// Replay --workload (with --server: the recorded runs) under the old and the new settings
    /// with the simulator, print SLO success per tier and utilization for both, and write
    /// validate.json.
    #[arg(long)]
    validate: bool,
    /// --validate: the simulated window. Default 7d for recurring workflows.
    #[arg(long, value_name = "DURATION", value_parser = crate::cmd::simulate::parse_duration, requires = "validate")]
    until: Option<Duration>,
    /// --validate: the seed of both simulations (the same for both, so they differ only by the plan).
    #[arg(long, default_value_t = 1, requires = "validate")]
    seed: u64,
}

/// What a plan starts from: files, or a running server.
struct Inputs {
    cluster: ClusterConfig,
    title: String,
    history: UsageHistory,
    history_name: String,
    workload: Option<Workload>,
    /// Where the workload came from, for the validation's description.
    workload_name: String,
    /// The server's jobs run without application masters; replays of them do too.
    live: bool,
    /// With --server: what jobs waited for in the window, per leaf and reason.
    waits: Option<Vec<weir_server::QueueWait>>,
}

fn inputs(args: &PlanArgs, window_ms: u64) -> Result<Inputs> {
    if let Some(server) = &args.server {
        if args.workload.is_some() {
            bail!("--workload: with --server the workload is the server's recorded runs");
        }
        let conn = Connection {
            server: Some(server.clone()),
            data_dir: args.data_dir.clone(),
            ca_cert: args.ca_cert.clone(),
        };
        let f =
            plan_server::fetch(&conn, args.server_cluster.as_deref(), window_ms, args.validate, &args.out)?;
        if args.validate && f.workload.is_none() {
            bail!("--validate: the server recorded no runs of cluster `{}` in the window", f.source.cluster);
        }
        if args.routes_from_history {
            let said =
                plan_server::routes_from_history(&conn, &f.source.cluster, window_ms, args.seed, &args.out)?;
            eprint!("{said}");
        }
        return Ok(Inputs {
            title: format!("cluster `{}` of {}", f.source.cluster, f.source.server),
            cluster: f.cluster,
            history: f.history,
            history_name: f.history_name,
            workload: f.workload,
            workload_name: format!("the runs {} recorded", f.source.server),
            live: true,
            waits: Some(f.waits),
        });
    }
    let (Some(cluster_path), Some(history_path)) = (&args.cluster, &args.history) else {
        bail!("give --cluster and --history, or --server");
    };
    if args.validate && args.workload.is_none() {
        bail!("--validate needs --workload (or --server, whose recorded runs are replayed)");
    }
    let cluster = load_cluster(cluster_path)?;
    let workload = match &args.workload {
        Some(path) => {
            let text = fs::read_to_string(path)
                .with_context(|| format!("--workload: cannot read {}", path.display()))?;
            Some(Workload::from_yaml(&path.display().to_string(), &text, &cluster)?)
        }
        None => None,
    };
    Ok(Inputs {
        cluster,
        title: cluster_path.display().to_string(),
        history: read_history(history_path)?,
        history_name: history_path.display().to_string(),
        workload,
        workload_name: args.workload.as_ref().map_or(String::new(), |p| p.display().to_string()),
        live: false,
        waits: None,
    })
}

pub fn run(args: &PlanArgs) -> Result<()> {
    let window = args.window.map_or(weir_planner::settings::DEFAULT_WINDOW.as_millis(), |w| w.as_millis());
    let Inputs { cluster, title, history, history_name, workload, workload_name, live, waits } =
        inputs(args, window)?;
    let mut settings = match &args.settings {
        Some(path) => {
            let text = fs::read_to_string(path)
                .with_context(|| format!("--settings: cannot read {}", path.display()))?;
            PlanSettings::from_yaml(&path.display().to_string(), &text, &cluster)?
        }
        None => PlanSettings::defaults_for(&cluster),
    };
    if let Some(w) = args.window {
        settings.window = w;
    }
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let plan = plan(&PlanInput {
        cluster: &cluster,
        history: &history,
        history_name: &history_name,
        settings: &settings,
        workload: workload.as_ref(),
        threads,
    })?;

    fs::create_dir_all(&args.out).with_context(|| format!("--out: cannot create {}", args.out.display()))?;
    let mut written = Vec::new();
    let json = serde_json::to_string_pretty(&plan)?;
    write(&args.out, "plan.json", &(json + "\n"), &mut written)?;
    let options = ExportOptions { namespace: args.namespace.clone(), ..ExportOptions::default() };
    let mut lossy = Vec::new();
    for format in Format::ALL {
        let exported = weir_planner::export(&plan.planned, format, &options)
            .with_context(|| format!("cannot export the plan as {format}"))?;
        if !exported.losses.is_empty() {
            lossy.push(format!("{} ({})", format.file_name(), exported.losses.len()));
        }
        write(&args.out, format.file_name(), &exported.text, &mut written)?;
    }
    if !lossy.is_empty() {
        eprintln!(
            "weir: settings these formats cannot express are listed at the top of each file: {}",
            lossy.join(", ")
        );
    }
    for w in &plan.warnings {
        eprintln!("weir: warning: {w}");
    }

    let mut out = String::new();
    writeln!(
        out,
        "planned {} from {} ({} rows, {:.1} h window)",
        title,
        history_name,
        history.rows(),
        plan.window.hours
    )?;
    writeln!(
        out,
        "{:<6} {:>10} {:>7} {:>10} {:>15} {:>8} {:>8}",
        "tier", "percentile", "leaves", "instances", "usage/capacity", "cpu", "memory"
    )?;
    let r = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    for t in plan.tiers.values() {
        let u = &t.usage_capacity;
        writeln!(
            out,
            "{:<6} {:>9}% {:>7} {:>10} {:>15} {:>8} {:>8}",
            t.tier,
            t.percentile,
            t.leaves,
            t.instances,
            r(u.instances),
            r(u.cpu),
            r(u.memory)
        )?;
    }
    if plan.tier_order.ok {
        writeln!(out, "tier order: ok (percentile falls, usage/capacity rises from tier 1 to 3)")?;
    }
    for v in &plan.tier_order.violations {
        writeln!(out, "tier order violated: {v}")?;
    }
    for q in &plan.ignored_history {
        writeln!(out, "ignored {} ({} rows): {}", q.queue, q.rows, q.reason)?;
    }
    let kept = plan.queues.iter().filter(|q| q.status == weir_planner::QueueStatus::NoHistory).count();
    if kept > 0 {
        writeln!(out, "{kept} leaves have no history and keep their share of the cluster (see plan.json)")?;
    }
    let c = &plan.cluster;
    for (label, u) in [("tier 1", &c.tier1_summed), ("tiers 1+2", &c.tier1_2_summed)] {
        writeln!(
            out,
            "{label} usage added up: {} instances at the {}th percentile (peak {}); the leaves' own allocations sum to {}",
            u.instances, u.percentile, u.peak_instances, u.per_leaf_sum
        )?;
    }
    writeln!(out, "verdict: {} — {}", c.verdict.name(), c.reason)?;
    if let Some(waits) = &waits {
        write_waits(&mut out, waits, &plan)?;
    }
    let comparison = match (args.validate, &workload) {
        (true, Some(workload)) => {
            emit(&out)?;
            let cmp = validate(args, &cluster, &plan.planned, workload, &workload_name, live, &mut written)?;
            out = format!(
                "\nvalidation: {}\n{:<28} {:>12} {:>12}\n",
                cmp.description, "", "current", "planned"
            );
            for [label, a, b] in &cmp.rows {
                writeln!(out, "{label:<28} {a:>12} {b:>12}")?;
            }
            Some(cmp)
        }
        _ => None,
    };
    write(&args.out, "report.html", &report_html(&plan, &title, comparison.as_ref()), &mut written)?;
    writeln!(out, "wrote {}", written.join(", "))?;
    emit(&out)
}

/// What jobs waited for in the window, per leaf (from the server's `waits.csv`), beside what
/// the plan does to that leaf: a plan made from usage alone cannot see work held back by a
/// limit, so the operator reads the two together.
fn write_waits(out: &mut String, waits: &[weir_server::QueueWait], plan: &weir_planner::Plan) -> Result<()> {
    if waits.is_empty() {
        writeln!(out, "waiting: no job waited in the window (waits.csv)")?;
        return Ok(());
    }
    writeln!(out, "waiting in the window, per leaf (waits.csv):")?;
    let mut leaves: Vec<&str> = waits.iter().map(|w| w.leaf.as_str()).collect();
    leaves.dedup();
    for leaf in leaves {
        let of: Vec<&weir_server::QueueWait> = waits.iter().filter(|w| w.leaf == leaf).collect();
        let total: i64 = of.iter().map(|w| w.waited_ms).sum();
        let status =
            plan.queues.iter().find(|q| q.queue == leaf).map_or("not in the plan".to_string(), |q| {
                format!("weight {} → {} in the plan", q.previous_weight, q.weight)
            });
        writeln!(
            out,
            "  {leaf} (tier {}, {}): waited {} in all",
            of[0].tier,
            status,
            weir_server::words_span(total)
        )?;
        for w in of {
            let fate = limit_in_plan(w, plan);
            if w.tier == 1 && fate.ends_with("not relieved") {
                eprintln!(
                    "weir: warning: tier-1 leaf {leaf} waited {} on {} and the plan leaves that limit as it is",
                    weir_server::words_span(w.waited_ms),
                    w.phrase()
                );
            }
            writeln!(
                out,
                "    {} on {} ({} spells, {} runs){fate}",
                weir_server::words_span(w.waited_ms),
                w.phrase(),
                w.spells,
                w.runs,
            )?;
        }
    }
    Ok(())
}

/// What the plan does to the limit a wait was on: " — the plan keeps root.a's
/// max_running_apps at 3" (a wait the plan does not relieve) or " — the plan raises it to 5".
fn limit_in_plan(w: &weir_server::QueueWait, plan: &weir_planner::Plan) -> String {
    if w.reason != "queue_max_running_apps" {
        return String::new();
    }
    let Some(q) = plan.queues.iter().find(|q| q.queue == w.queue) else { return String::new() };
    let show = |v: Option<u32>| v.map_or("no limit".to_string(), |n| n.to_string());
    match (q.previous_max_running_apps, q.max_running_apps) {
        (Some(a), Some(b)) if b > a => format!(" — the plan raises {}'s max_running_apps to {b}", w.queue),
        (Some(_), None) => format!(" — the plan lifts {}'s max_running_apps", w.queue),
        (a, b) => format!(
            " — the plan keeps {}'s max_running_apps at {} (was {}): this wait is not relieved",
            w.queue,
            show(b),
            show(a)
        ),
    }
}

/// Replay the workload on the cluster as it is and as planned, with one seed, and compare.
fn validate(
    args: &PlanArgs,
    before: &ClusterConfig,
    after: &ClusterConfig,
    workload: &Workload,
    workload_name: &str,
    live: bool,
    written: &mut Vec<String>,
) -> Result<Comparison> {
    let mut config = SimConfig {
        seed: args.seed,
        until: horizon(args.until, workload),
        check_invariants: cfg!(debug_assertions),
        ..SimConfig::default()
    };
    if live {
        config.am = None;
    }
    let run = |cluster: &ClusterConfig, label: &str| -> Result<Summary> {
        let sim = Simulation::new(cluster.clone(), workload.clone(), config.clone())
            .with_context(|| format!("--validate: cannot simulate the {label} settings"))?;
        Ok(drive(sim, &format!("validating ({label})"), |_| Ok(()))?.summary)
    };
    let old = run(before, "current")?;
    let new = run(after, "planned")?;
    let json = serde_json::json!({"current": &old, "planned": &new});
    write(&args.out, "validate.json", &(serde_json::to_string_pretty(&json)? + "\n"), written)?;

    let days = old.simulated_seconds / 86_400.0;
    let description = format!(
        "{workload_name} replayed for {days:.1} days on the current and the planned settings (seed {})",
        args.seed
    );
    let rows = weir_planner::comparison_rows(&old, &new);
    Ok(Comparison { description, rows })
}

/// Read usage.csv through a large buffer (histories run to gigabytes).
pub fn read_history(path: &Path) -> Result<UsageHistory> {
    let file = fs::File::open(path).with_context(|| format!("--history: cannot read {}", path.display()))?;
    let reader = BufReader::with_capacity(1 << 20, file);
    Ok(UsageHistory::read_csv(reader, &path.display().to_string(), secret_name_key())?)
}

/// A key for the history's name table that a file's author cannot predict: std's per-process
/// random SipHash keys, drawn through two hashers (the CLI owns the process's randomness).
pub fn secret_name_key() -> NameKey {
    use std::hash::{BuildHasher, RandomState};
    let state = RandomState::new();
    NameKey(state.hash_one(1u8), state.hash_one(2u8))
}

fn write(dir: &Path, name: &str, text: &str, written: &mut Vec<String>) -> Result<()> {
    let path = dir.join(name);
    fs::write(&path, text).with_context(|| format!("--out: cannot write {}", path.display()))?;
    written.push(path.display().to_string());
    Ok(())
}
