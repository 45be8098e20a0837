//! The client commands: `submit`, `runs`, `status`, `kill`, `logs`, `queues`, `explain`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use reqwest::Method;
use weir_api::{QueuesResponse, Run, RunCreated, RunExplanation, RunList, RunState, RunSummary, SubmitRun};
use weir_model::WorkloadFile;

use super::client::{span, Client, Connection};
use super::{safe, safe_lines};
use crate::emit;

#[derive(Debug, Args)]
#[command(
    about = "Submit a run of each workflow in a workload file to a weir server",
    long_about = "Submit one run of each workflow in a workload file (the workload-file schema, \
with a `command` per stage) to a weir server, and print each run's id, cluster and queue. \
The server validates it exactly as `weir validate` would and answers 400 naming the field.\n\n\
A dry-run (`--dry-run`) runs the same workflows with every declared output written to a \
shadow prefix (`_weir_dryrun/RUN/...` in the same bucket) instead of production's; when it \
ends, weir compares the shadow output with production's output of the same workflow and \
logical date and records the verdict in the migration table (`weir migrate status`). \
`--cluster` runs it on the cluster a migration would move the workflow to.\n\n\
`--check-slo` first asks the server's admission check for every workflow with an `slo` \
(docs/slo.md): the SLO controller's model, built from the workflow's earlier runs on its \
cluster, predicts the containers a new run needs to meet its deadline, and whether they fit \
beside the guarded runs already running. If one does not fit, or no allocation meets its \
deadline, nothing is submitted and the exit status is 1; a workflow with too little history \
is submitted with a warning (its run keeps its tier's rules).\n\n\
Examples:\n  weir submit examples/demo/workload.yaml\n  \
weir submit nightly.yaml --check-slo\n  \
weir submit pipeline.yaml --logical-date 2026-11-23 --wait\n  \
weir submit examples/demo/workload.yaml --logical-date 2026-11-23 --dry-run --cluster staging"
)]
pub struct SubmitArgs {
    /// A workload file (version: 1, workflows: [...]).
    file: PathBuf,
    /// The date (or label) of this run; one active run per workflow and logical date.
    #[arg(long, value_name = "DATE")]
    logical_date: Option<String>,
    /// Parameters handed to every task as WEIR_PARAM_<NAME> (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Wait for every run to end; exit non-zero if one did not succeed.
    #[arg(long)]
    wait: bool,
    /// A dry-run: outputs go to shadow prefixes and are compared with production's when the
    /// run ends (`weir migrate status`); production data is never written.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: the cluster to run on (default: the workflow's route).
    #[arg(long, value_name = "CLUSTER", requires = "dry_run")]
    cluster: Option<String>,
    /// Ask the admission check for deadlines first (workflows with an `slo`); submit nothing
    /// if a run is predicted not to meet its deadline or not to fit.
    #[arg(long)]
    check_slo: bool,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Args)]
#[command(
    about = "List runs, newest first",
    long_about = "List runs, newest first.\n\nExamples:\n  \
weir runs\n  weir runs --state running\n  weir runs --workflow nightly-backfill --json"
)]
pub struct RunsArgs {
    #[arg(long)]
    project: Option<String>,
    #[arg(long)]
    workflow: Option<String>,
    /// queued, routed, waiting, running, succeeded, failed or killed.
    #[arg(long)]
    state: Option<String>,
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Args)]
#[command(about = "Show a run: its jobs and tasks, states, attempts, exit codes")]
pub struct RunArgs {
    /// The run's id.
    run: i64,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    /// `weir status` of a run with many tasks lists 1,000 at a time: the next page starts after
    /// this cursor (the one the previous page printed).
    #[arg(long, value_name = "CURSOR")]
    tasks_after: Option<String>,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Args)]
#[command(
    about = "Print a task attempt's output",
    long_about = "Print a task attempt's output. TASK is job.stage.index as `weir status` lists \
it (stage.index in a one-job run).\n\nExamples:\n  weir logs 12 extract.query.0\n  \
weir logs 12 query.1 --stream stderr --follow"
)]
pub struct LogsArgs {
    /// The run's id (`weir runs` lists them).
    run: i64,
    /// The task: job.stage.index as `weir status RUN` lists it (stage.index in a one-job run).
    task: String,
    /// Which attempt (default: the latest).
    #[arg(long)]
    attempt: Option<u32>,
    /// stdout or stderr (default: stdout; when it is empty and stderr is not, that is said).
    #[arg(long, value_parser = ["stdout", "stderr"])]
    stream: Option<String>,
    /// Keep printing until the attempt ends.
    #[arg(long, short)]
    follow: bool,
    /// Only the last BYTES bytes (then, with --follow, what follows).
    #[arg(long, value_name = "BYTES")]
    tail: Option<u64>,
    #[command(flatten)]
    conn: Connection,
}

#[derive(Debug, Args)]
#[command(about = "Show the live queue tree: usage, demand, fair shares, running and pending apps")]
pub struct QueuesArgs {
    /// Only this cluster.
    #[arg(long)]
    cluster: Option<String>,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Connection,
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")
}

pub fn submit(args: &SubmitArgs) -> Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let file = args.file.display().to_string();
    let workload: WorkloadFile = weir_model::parse_yaml(&file, &text)?;
    let mut params = std::collections::BTreeMap::new();
    for p in &args.params {
        let (k, v) = p.split_once('=').with_context(|| format!("--param `{p}` is not NAME=VALUE"))?;
        params.insert(k.to_string(), v.to_string());
    }
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        if args.check_slo {
            let mut refused = false;
            for wf in workload.workflows.iter().filter(|w| w.slo.is_some()) {
                let body = SubmitRun {
                    workflow: Some(serde_json::to_value(wf)?),
                    workflow_name: None,
                    project: None,
                    logical_date: args.logical_date.clone(),
                    params: params.clone(),
                    dry_run: args.dry_run,
                    cluster: args.cluster.clone(),
                };
                let c: weir_api::SloCheck = client
                    .send(client.request(Method::POST, "/v1/slo/check").json(&body))
                    .await
                    .with_context(|| format!("{file}: workflow `{}`: the SLO check", wf.name))?;
                let verdict = match c.admitted {
                    Some(true) => "fits",
                    Some(false) => "does not fit",
                    None => "warning",
                };
                refused |= c.admitted == Some(false);
                emit(&format!(
                    "SLO check: {} on {} (deadline {}): {verdict}: {}\n",
                    safe(&c.workflow),
                    c.cluster,
                    span(c.deadline_ms),
                    safe(&c.reason)
                ))?;
            }
            if refused {
                emit("nothing submitted (the SLO check refused a run)\n")?;
                return Ok(ExitCode::FAILURE);
            }
        }
        let mut ids = Vec::new();
        for wf in &workload.workflows {
            let body = SubmitRun {
                workflow: Some(serde_json::to_value(wf)?),
                workflow_name: None,
                project: None,
                logical_date: args.logical_date.clone(),
                params: params.clone(),
                dry_run: args.dry_run,
                cluster: args.cluster.clone(),
            };
            let created: RunCreated = client
                .send(client.request(Method::POST, "/v1/runs").json(&body))
                .await
                .with_context(|| format!("{file}: workflow `{}`", wf.name))?;
            let routed = match &created.route {
                Some(r) => format!(" ({} {}: {})", safe(&r.key), r.policy, r.reason),
                None => String::new(),
            };
            emit(&format!(
                "{} {} of {} ({}) queued on {} in {}{routed}\n",
                if created.dry_run { "dry-run run" } else { "run" },
                created.id,
                safe(&created.workflow),
                safe(&created.logical_date),
                created.cluster,
                created.queue
            ))?;
            ids.push(created.id);
        }
        if !args.wait {
            return Ok(ExitCode::SUCCESS);
        }
        let mut ok = true;
        for id in ids {
            let run = wait_for(&client, id).await?;
            emit(&format!("run {id} {}\n", run.state.as_str()))?;
            ok &= run.state == RunState::Succeeded;
        }
        Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    })
}

async fn wait_for(client: &Client, id: i64) -> Result<Run> {
    loop {
        let run: Run = client.send(client.request(Method::GET, &format!("/v1/runs/{id}"))).await?;
        if run.state.is_terminal() {
            return Ok(run);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub fn runs(args: &RunsArgs) -> Result<()> {
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        let mut q = vec![("limit", args.limit.to_string())];
        for (k, v) in [("project", &args.project), ("workflow", &args.workflow), ("state", &args.state)] {
            if let Some(v) = v {
                q.push((k, v.clone()));
            }
        }
        let list: RunList = client.send(client.request(Method::GET, "/v1/runs").query(&q)).await?;
        if args.json {
            return emit(&format!("{}\n", serde_json::to_string(&list)?));
        }
        emit(&runs_table(&list.runs, weir_server::now_ms()))
    })
}

fn runs_table(runs: &[RunSummary], now: i64) -> String {
    let mut out = String::new();
    // Runs on several clusters: the same queue path names a queue of each, so the cluster is
    // said with it (`hpc:root.default`).
    let several = runs.iter().any(|r| r.cluster != runs[0].cluster);
    let queue = |r: &RunSummary| if several { format!("{}:{}", r.cluster, r.queue) } else { r.queue.clone() };
    let _ = writeln!(
        out,
        "{:>6}  {:<24} {:<26} {:>4}  {:<10} {:<28} {:>9}",
        "run",
        "workflow",
        "logical date",
        "tier",
        "state",
        if several { "cluster:queue" } else { "queue" },
        "age"
    );
    for r in runs {
        let _ = writeln!(
            out,
            "{:>6}  {:<24} {:<26} {:>4}  {:<10} {:<28} {:>9}",
            if r.dry_run { format!("{}*", r.id) } else { r.id.to_string() },
            safe(&r.workflow),
            safe(&r.logical_date),
            r.tier,
            r.state.as_str(),
            safe(&queue(r)),
            span(now - r.submitted_ms)
        );
    }
    if runs.is_empty() {
        out.push_str("no runs\n");
    }
    if runs.iter().any(|r| r.dry_run) {
        out.push_str("* a dry-run (outputs to shadow prefixes; see weir migrate status)\n");
    }
    out
}

pub fn status(args: &RunArgs) -> Result<ExitCode> {
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        let mut req = client.request(Method::GET, &format!("/v1/runs/{}", args.run));
        if let Some(c) = &args.tasks_after {
            req = req.query(&[("tasks_after", c)]);
        }
        let run: Run = client.send(req).await?;
        if args.json {
            emit(&format!("{}\n", serde_json::to_string(&run)?))?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut out = String::new();
        writeln!(
            out,
            "run {} of {} ({}), tier {}: {}",
            run.id,
            safe(&run.workflow),
            safe(&run.logical_date),
            run.tier,
            run.state.as_str()
        )?;
        writeln!(out, "cluster {}, queue {}", run.cluster, run.queue)?;
        if let Some(r) = &run.route {
            writeln!(out, "routed by {} ({}): {}", safe(&r.key), r.policy, r.reason)?;
            writeln!(out, "  {}", safe_lines(&r.detail))?;
        }
        if run.dry_run {
            writeln!(
                out,
                "a dry-run: its outputs go to shadow prefixes (weir migrate status {})",
                safe(&run.workflow)
            )?;
        }
        if let Some(u) = &run.user {
            writeln!(out, "user {}", safe(u))?;
        }
        if let Some(r) = &run.reason {
            writeln!(out, "reason: {}", safe_lines(r))?;
        }
        if run.kill_requested && !run.state.is_terminal() {
            writeln!(out, "a kill was requested and is being carried out")?;
        }
        for job in &run.jobs {
            let took = match (job.started_ms, job.finished_ms) {
                (Some(s), Some(f)) => format!(" in {}", span(f - s)),
                _ => String::new(),
            };
            let counts: Vec<String> = job.task_counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
            let counts = if counts.is_empty() { String::new() } else { format!(" ({})", counts.join(", ")) };
            writeln!(out, "\njob {}: {}{took}{counts}", safe(&job.name), job.state)?;
            if !job.waits.is_empty() {
                let now = weir_server::now_ms();
                let total: i64 = job.waits.iter().map(|w| w.to_ms.unwrap_or(now) - w.from_ms).sum();
                writeln!(out, "  waited {} before its first task started:", span(total))?;
                for w in &job.waits {
                    let to = match w.to_ms {
                        Some(t) => format!("{}, {}", weir_server::format_utc(t), span(t - w.from_ms)),
                        None => format!("still waiting, {} so far", span(now - w.from_ms)),
                    };
                    writeln!(out, "  ~ {} → {to}: {}", weir_server::format_utc(w.from_ms), safe(&w.summary))?;
                    if !w.detail.is_empty() {
                        writeln!(out, "    {}", safe(&w.detail))?;
                    }
                }
            }
            if !job.guarantee.is_empty() {
                writeln!(out, "  deadline guarantee (jockey), the controller's allocations:")?;
                for d in &job.guarantee {
                    let predicted = if d.predicted_ms > 0 {
                        format!(", predicted end +{}", span(d.predicted_ms))
                    } else {
                        String::new()
                    };
                    writeln!(
                        out,
                        "  ~ +{}: {} container(s), {:.0}% done, speed {:.2}{predicted} of deadline +{}: {}",
                        span(d.elapsed_ms),
                        d.allocation,
                        d.progress * 100.0,
                        d.speed,
                        span(d.deadline_ms),
                        safe(&d.reason)
                    )?;
                }
            }
            if let Some(e) = &job.explanation {
                for line in e.lines() {
                    writeln!(out, "  | {}", safe(line))?;
                }
            }
            for t in &job.tasks {
                let exit = t.exit_code.map(|c| format!("exit {c}")).unwrap_or_default();
                let node = t.node.clone().unwrap_or_default();
                writeln!(
                    out,
                    "  {:<32} {:<10} attempts {:<2} {:<8} {exit}",
                    safe(&t.name),
                    t.state,
                    t.attempts,
                    safe(&node)
                )?;
                if let Some(p) = &t.preemption {
                    writeln!(
                        out,
                        "  | killed at {} unless it ends first: {}",
                        weir_server::format_utc(p.kill_at_ms),
                        safe(&p.reason)
                    )?;
                }
            }
        }
        if let Some(next) = &run.next_tasks_after {
            let shown: usize = run.jobs.iter().map(|j| j.tasks.len()).sum();
            writeln!(
                out,
                "\n{shown} of {} tasks shown; --tasks-after {next} for the next page",
                run.tasks_total
            )?;
        }
        emit(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}

pub fn kill(args: &RunArgs) -> Result<()> {
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        let r: RunSummary =
            client.send(client.request(Method::POST, &format!("/v1/runs/{}/kill", args.run))).await?;
        let what = match r.state {
            RunState::Killed => "killed".to_string(),
            s if s.is_terminal() => format!("already ended: {} (nothing to kill)", s.as_str()),
            _ => "being killed".to_string(),
        };
        emit(&format!("run {} is {what}\n", r.id))
    })
}

pub fn explain(args: &RunArgs) -> Result<()> {
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        let e: RunExplanation =
            client.send(client.request(Method::GET, &format!("/v1/runs/{}/explain", args.run))).await?;
        if args.json {
            return emit(&format!("{}\n", serde_json::to_string(&e)?));
        }
        let mut out = format!("run {} is {}\n", e.id, e.state.as_str());
        for j in &e.jobs {
            writeln!(out, "job {} ({}):", safe(&j.job), j.state)?;
            for line in j.explanation.lines() {
                writeln!(out, "  {}", safe(line))?;
            }
        }
        emit(&out)
    })
}

pub fn logs(args: &LogsArgs) -> Result<()> {
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        let stream = args.stream.as_deref().unwrap_or("stdout");
        let mut q = vec![("stream", stream.to_string()), ("follow", args.follow.to_string())];
        if let Some(a) = args.attempt {
            q.push(("attempt", a.to_string()));
        }
        if let Some(t) = args.tail {
            q.push(("tail", t.to_string()));
        }
        let path = format!("/v1/runs/{}/tasks/{}/logs", args.run, args.task);
        let mut resp = client.checked(client.request(Method::GET, &path).query(&q)).await?;
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        let mut written = 0usize;
        while let Some(chunk) = resp.chunk().await.context("the log stream broke off")? {
            written += chunk.len();
            if stdout.write_all(&chunk).and_then(|()| stdout.flush()).is_err() {
                break;
            }
        }
        // An empty stdout asked for by default: a failed start, a shell's "not found" or a
        // Spark driver's log4j lines are all on stderr. Say so rather than print nothing.
        if written == 0 && args.stream.is_none() && !args.follow {
            let mut q: Vec<(&str, String)> = vec![("stream", "stderr".into()), ("tail", "1".into())];
            if let Some(a) = args.attempt {
                q.push(("attempt", a.to_string()));
            }
            let other = client.checked(client.request(Method::GET, &path).query(&q)).await;
            if let Ok(other) = other {
                if other.bytes().await.is_ok_and(|b| !b.is_empty()) {
                    let attempt = args.attempt.map(|a| format!(" --attempt {a}")).unwrap_or_default();
                    eprintln!(
                        "weir: this attempt wrote nothing to stdout; its stderr is not empty: \
                         weir logs {} {}{attempt} --stream stderr",
                        args.run,
                        shell_word(&args.task)
                    );
                }
            }
        }
        Ok(())
    })
}

pub fn queues(args: &QueuesArgs) -> Result<()> {
    let client = args.conn.client()?;
    runtime()?.block_on(async {
        let mut req = client.request(Method::GET, "/v1/queues");
        if let Some(c) = &args.cluster {
            req = req.query(&[("cluster", c)]);
        }
        let q: QueuesResponse = client.send(req).await?;
        if args.json {
            return emit(&format!("{}\n", serde_json::to_string(&q)?));
        }
        let mut out = String::new();
        for c in &q.clusters {
            let Some(as_of) = c.as_of_ms else {
                writeln!(out, "cluster {}: no worker has published its queues yet", c.cluster)?;
                continue;
            };
            writeln!(
                out,
                "cluster {} ({} ago): using {} of {} cpu (millicores), {} of {} MiB",
                c.cluster,
                span(weir_server::now_ms() - as_of),
                c.used.cpu,
                c.total.cpu,
                c.used.memory,
                c.total.memory
            )?;
            let width = c.queues.iter().map(|q| q.path.len()).max().unwrap_or(5).max(5);
            writeln!(
                out,
                "{:<width$} {:>4} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7} {:>7} {:>8}",
                "queue",
                "tier",
                "weight",
                "min cpu",
                "max cpu",
                "used cpu",
                "demand",
                "steady",
                "instant",
                "running",
                "pending",
                "max apps"
            )?;
            for q in &c.queues {
                let tier = q.tier.map(|t| t.to_string()).unwrap_or_default();
                writeln!(
                    out,
                    "{:<width$} {:>4} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>7} {:>7} {:>8}",
                    q.path,
                    tier,
                    q.weight,
                    q.min.cpu,
                    if q.max.cpu == u64::MAX { "-".to_string() } else { q.max.cpu.to_string() },
                    q.usage.cpu,
                    q.demand.cpu,
                    q.steady_fair_share.cpu,
                    q.instantaneous_fair_share.cpu,
                    q.running_apps,
                    q.pending_apps,
                    q.max_running_apps.map_or_else(|| "-".to_string(), |m| m.to_string())
                )?;
            }
        }
        if q.clusters.is_empty() {
            bail!("the server knows no cluster");
        }
        emit(&out)
    })
}

/// `word` as one shell word: as it is when it holds only safe characters, else single-quoted.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:=@".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: i64, cluster: &str) -> RunSummary {
        RunSummary {
            id,
            workflow: "wf".into(),
            project: "p".into(),
            tier: 3,
            logical_date: "d".into(),
            state: RunState::Running,
            cluster: cluster.into(),
            queue: "root.default".into(),
            submitted_ms: 0,
            finished_ms: None,
            dry_run: false,
        }
    }

    #[test]
    fn runs_on_several_clusters_name_the_cluster_with_the_queue() {
        let one = runs_table(&[run(2, "default"), run(1, "default")], 1000);
        assert!(one.lines().next().unwrap().contains(" queue "), "{one}");
        assert!(!one.contains("default:"), "{one}");
        let two = runs_table(&[run(2, "hpc"), run(1, "default")], 1000);
        assert!(two.lines().next().unwrap().contains("cluster:queue"), "{two}");
        assert!(two.lines().nth(1).unwrap().contains(" hpc:root.default "), "{two}");
        assert!(two.lines().nth(2).unwrap().contains(" default:root.default "), "{two}");
    }
}
