//! `weir commit-helper`: run inside a task, writes the task's output files through weir's
//! committer (docs/commit.md). Everything it needs comes from the WEIR_COMMIT_* variables weir
//! sets for tasks of stages that declare outputs.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use weir_commit::{Committer, TaskEnv};

#[derive(Debug, Args)]
#[command(
    about = "Inside a task: upload output files through weir's committer (nothing is visible \
             until the job commit)",
    long_about = "Run inside a task of a stage that declares outputs. weir gives the task its \
staging location and the store's credentials in WEIR_COMMIT_* (and AWS_*) variables; this \
command reads them.\n\n\
`put FILE` uploads FILE as a multipart upload (the task commit) and records it in the \
attempt's staging area. Nothing appears in the output until every task of the stage has \
succeeded and weir writes the output's manifest (the job commit); a failed, killed or retried \
attempt leaves nothing behind.\n\n\
Examples, in a task's script:\n\n  \
weir commit-helper put out/part-0.csv\n  \
weir commit-helper put /tmp/eu.csv --as region=eu/part-0.csv\n  \
weir commit-helper list\n\n\
A stage that declares several outputs: --output K picks the output number K (from 0, in the \
order the stage declares them; 0 by default):\n\n  \
weir commit-helper put counts.jsonl --output 1\n\n\
docs/commit.md describes the protocol for programs that do not call this command."
)]
pub struct CommitHelperArgs {
    /// Which of the stage's outputs, from 0 in the order the stage declares them.
    #[arg(long, value_name = "K", default_value_t = 0, global = true)]
    output: usize,
    #[command(subcommand)]
    what: HelperCommand,
}

#[derive(Debug, Subcommand)]
enum HelperCommand {
    /// Upload FILE into the output (task commit): parts in parallel, the ETags recorded.
    /// Prints the file's name in the output, its size and parts.
    Put(PutArgs),
    /// List what this attempt has uploaded so far into the output (name, size, state).
    List,
}

#[derive(Debug, Args)]
struct PutArgs {
    /// The local file to upload.
    file: PathBuf,
    /// Its name inside the output (may hold partition folders: `region=eu/part-0.csv`);
    /// defaults to the file's own name.
    #[arg(long = "as", value_name = "NAME")]
    name: Option<String>,
}

pub fn run(args: &CommitHelperArgs) -> Result<()> {
    let env = TaskEnv::from_env_output(&|k| std::env::var(k).ok(), args.output)
        .context("weir commit-helper runs inside a task whose stage declares outputs")?;
    let committer = Committer::for_task(&env)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    match &args.what {
        HelperCommand::Put(put) => {
            let name = match &put.name {
                Some(n) => n.clone(),
                None => put
                    .file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .with_context(|| {
                        format!("{}: no file name to use; give one with --as", put.file.display())
                    })?
                    .to_string(),
            };
            let record = runtime
                .block_on(committer.put_file(&env.output, &env.staging, &name, &put.file))
                .with_context(|| format!("put {} as {name}", put.file.display()))?;
            println!("{}\t{} bytes\t{} parts", record.name, record.size, record.parts.len());
        }
        HelperCommand::List => {
            let records = runtime.block_on(committer.attempt_records(&env.staging))?;
            for r in records {
                let state = match r.state {
                    weir_commit::UploadState::Uploaded => "uploaded",
                    weir_commit::UploadState::Uploading => "uploading",
                };
                println!("{}\t{} bytes\t{state}", r.name, r.size);
            }
        }
    }
    Ok(())
}
