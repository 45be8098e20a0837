//! `weir`: the command-line tool for weir, a resource manager for shared batch clusters.
//!
//! It holds no scheduling logic: each subcommand (one file under `cmd/`) parses its flags, reads
//! files, calls a library crate and prints the result. Library errors arrive as `anyhow` errors
//! with context naming the file or flag involved.

mod cmd;
mod staging;
mod synthetic;
mod trace_file;

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use weir_model::ClusterConfig;

#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version,
    about = "weir: fair scheduling, simulation and planning for shared batch clusters",
    long_about = "weir schedules batch work through a hierarchical, tiered queue tree \
(organization > project > tier) with Hadoop YARN Fair Scheduler semantics: weights, \
guaranteed and maximum shares, running-app limits and fair-share preemption that never takes \
from tier-1 work.\n\n\
Everything starts from a cluster file (cluster.yaml): the nodes, the scheduler settings, the \
tier defaults and the queue tree. Check one, then see the fair share of every queue:\n\n  \
weir validate examples/cluster.yaml\n  weir shares --cluster examples/cluster.yaml --active all\n\n\
Plan queue weights from usage history and export them to YARN, YuniKorn or Kueue:\n\n  \
weir plan --cluster examples/cluster.yaml --history examples/usage.csv --out plan/\n\n\
Run `weir help <command>` for what each command does, with examples.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Validate(cmd::validate::ValidateArgs),
    Shares(cmd::shares::SharesArgs),
    Simulate(Box<cmd::simulate::SimulateArgs>),
    Slo(Box<cmd::slo::SloArgs>),
    Plan(cmd::plan::PlanArgs),
    Apply(cmd::apply::ApplyArgs),
    Rollback(cmd::apply::RollbackArgs),
    Export(cmd::export::ExportArgs),
    Import(cmd::import::ImportArgs),
    Bench(cmd::bench::BenchArgs),
    Serve(Box<cmd::serve::ServeArgs>),
    Worker(Box<cmd::serve::WorkerArgs>),
    Submit(cmd::runs::SubmitArgs),
    Runs(cmd::runs::RunsArgs),
    /// Show a run: its jobs and tasks, states, attempts, exit codes.
    Status(cmd::runs::RunArgs),
    /// Kill a run: queued runs end at once, running tasks get SIGTERM then SIGKILL.
    Kill(cmd::runs::RunArgs),
    Logs(cmd::runs::LogsArgs),
    Queues(cmd::runs::QueuesArgs),
    /// Why each unfinished job of a run is where it is (the engine's explanation).
    Explain(cmd::runs::RunArgs),
    Token(cmd::token::TokenArgs),
    Routes(cmd::routes::RoutesArgs),
    Advise(cmd::advise::AdviseArgs),
    Migrate(cmd::migrate::MigrateArgs),
    Backends(cmd::backends::BackendsArgs),
    CommitHelper(cmd::commit_helper::CommitHelperArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // One rustls crypto provider (ring) for the whole process: the client's HTTPS, `serve`'s
    // TLS and PostgreSQL connections with `sslmode`.
    weir_server::install_crypto_provider();
    let result = match &cli.command {
        Command::Validate(args) => cmd::validate::run(args),
        Command::Shares(args) => cmd::shares::run(args).map(|()| ExitCode::SUCCESS),
        Command::Simulate(args) => cmd::simulate::run(args).map(|()| ExitCode::SUCCESS),
        Command::Slo(args) => cmd::slo::run(args).map(|()| ExitCode::SUCCESS),
        Command::Plan(args) => cmd::plan::run(args).map(|()| ExitCode::SUCCESS),
        Command::Apply(args) => cmd::apply::run(args).map(|()| ExitCode::SUCCESS),
        Command::Rollback(args) => cmd::apply::rollback(args).map(|()| ExitCode::SUCCESS),
        Command::Export(args) => cmd::export::run(args).map(|()| ExitCode::SUCCESS),
        Command::Import(args) => cmd::import::run(args).map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => cmd::bench::run(args).map(|()| ExitCode::SUCCESS),
        Command::Serve(args) => cmd::serve::serve(args).map(|()| ExitCode::SUCCESS),
        Command::Worker(args) => cmd::serve::worker(args).map(|()| ExitCode::SUCCESS),
        Command::Submit(args) => cmd::runs::submit(args),
        Command::Runs(args) => cmd::runs::runs(args).map(|()| ExitCode::SUCCESS),
        Command::Status(args) => cmd::runs::status(args),
        Command::Kill(args) => cmd::runs::kill(args).map(|()| ExitCode::SUCCESS),
        Command::Logs(args) => cmd::runs::logs(args).map(|()| ExitCode::SUCCESS),
        Command::Queues(args) => cmd::runs::queues(args).map(|()| ExitCode::SUCCESS),
        Command::Explain(args) => cmd::runs::explain(args).map(|()| ExitCode::SUCCESS),
        Command::Token(args) => cmd::token::run(args).map(|()| ExitCode::SUCCESS),
        Command::Routes(args) => cmd::routes::run(args).map(|()| ExitCode::SUCCESS),
        Command::Advise(args) => cmd::advise::run(args),
        Command::Migrate(args) => cmd::migrate::run(args).map(|()| ExitCode::SUCCESS),
        Command::CommitHelper(args) => cmd::commit_helper::run(args).map(|()| ExitCode::SUCCESS),
        Command::Backends(args) => {
            cmd::backends::run(args).map(|ok| if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("weir: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Write a command's output to stdout. A reader that went away (`weir shares | head`) is not
/// an error.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("cannot write to stdout"),
        _ => Ok(()),
    }
}

/// The example cluster (examples/cluster.yaml), built in so that weir runs with no files at all.
pub const EXAMPLE_CLUSTER: &str = include_str!("../../../examples/cluster.yaml");

/// The example workload (examples/workload.yaml), built in like the example cluster.
pub const EXAMPLE_WORKLOAD: &str = include_str!("../../../examples/workload.yaml");

/// Read and validate a cluster file. A broken file fails with a [`weir_model::ModelError`] (which
/// lists every problem, each naming the file and the path inside it); an unreadable one with an
/// I/O error naming the file.
pub fn load_cluster(path: &Path) -> Result<ClusterConfig> {
    let text = fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(ClusterConfig::from_yaml(&path.display().to_string(), &text)?)
}
