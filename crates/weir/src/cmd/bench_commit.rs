//! `weir bench commit`: the output committer's throughput and job-commit time against direct
//! puts of the same files, on moto's S3 server (started here), another S3-compatible server,
//! or the local store.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::json;
use tokio::sync::Semaphore;
use weir_commit::{
    CommitConfig, Committer, Credentials, JobCommitPlan, RetrySettings, S3Config, StoreConfig,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BenchStore {
    /// moto's S3 server from PyPI (`moto_server` on PATH), started on a free loopback port in a
    /// temp dir and stopped by pid at the end.
    Moto,
    /// An S3-compatible server at --endpoint, bucket --bucket (which must exist), credentials
    /// from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
    S3,
    /// weir's local store in a temp dir.
    Local,
}

#[derive(Debug, Args)]
pub struct CommitBench {
    #[arg(long, value_enum, default_value = "moto")]
    store: BenchStore,
    /// With --store s3: the server's URL.
    #[arg(long)]
    endpoint: Option<String>,
    /// With --store s3: the bucket.
    #[arg(long)]
    bucket: Option<String>,
    /// Sets of files as COUNTxMB, each measured on its own.
    #[arg(long = "set", value_name = "COUNTxMB", default_values = ["1000x1", "10x100"])]
    sets: Vec<String>,
    /// Files written at once (direct puts, task commits, completions).
    #[arg(long, default_value_t = 8)]
    parallel_files: usize,
    /// Parts of one file in flight at once.
    #[arg(long, default_value_t = 4)]
    parallel_parts: usize,
    /// Part size in MiB (at least 5).
    #[arg(long, default_value_t = 8)]
    part_mib: usize,
    /// Where the generated files go (default: a temp dir, removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_moto(dir: &Path) -> Result<(Moto, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let log = std::fs::File::create(dir.join("moto.log"))?;
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("start moto_server (pip install 'moto[server]==5.2.1')")?;
    let moto = Moto(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("moto_server did not listen on 127.0.0.1:{port} within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // moto does not check signatures: a plain PUT creates the bucket.
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.write_all(
        b"PUT /weir-bench HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    if !answer.contains(" 200 ") {
        bail!("moto did not create the bucket: {}", answer.lines().next().unwrap_or(""));
    }
    Ok((moto, format!("http://127.0.0.1:{port}")))
}

fn parse_set(s: &str) -> Result<(usize, usize)> {
    let (n, mb) = s.split_once('x').with_context(|| format!("--set {s:?}: expected COUNTxMB (1000x1)"))?;
    let n: usize = n.parse().with_context(|| format!("--set {s:?}: COUNT is not a number"))?;
    let mb: usize = mb.parse().with_context(|| format!("--set {s:?}: MB is not a number"))?;
    if n == 0 || mb == 0 {
        bail!("--set {s:?}: COUNT and MB must be at least 1");
    }
    Ok((n, mb))
}

pub fn run(args: &CommitBench) -> Result<()> {
    let sets: Vec<(usize, usize)> = args.sets.iter().map(|s| parse_set(s)).collect::<Result<_>>()?;
    let tmp = std::env::temp_dir().join(format!("weir-bench-commit-{}", std::process::id()));
    let work = args.work_dir.clone().unwrap_or_else(|| tmp.clone());
    std::fs::create_dir_all(&work).with_context(|| format!("{}", work.display()))?;
    let config = CommitConfig {
        part_size: args.part_mib * 1024 * 1024,
        parallel_parts: args.parallel_parts,
        parallel_files: args.parallel_files,
    };
    let mut _moto = None;
    let store = match args.store {
        BenchStore::Local => StoreConfig::Local { root: work.join("store") },
        BenchStore::Moto | BenchStore::S3 => {
            let (endpoint, bucket, credentials) = if args.store == BenchStore::Moto {
                let (m, endpoint) = start_moto(&work)?;
                _moto = Some(m);
                let c = Credentials {
                    access_key_id: "bench".into(),
                    secret_access_key: "bench".into(),
                    session_token: None,
                };
                (endpoint, "weir-bench".to_string(), c)
            } else {
                let endpoint = args.endpoint.clone().context("--store s3 needs --endpoint")?;
                let bucket = args.bucket.clone().context("--store s3 needs --bucket")?;
                let c = Credentials::from_env(&|k| std::env::var(k).ok())?;
                (endpoint, bucket, c)
            };
            StoreConfig::S3(S3Config {
                endpoint: Some(endpoint),
                region: "us-east-1".into(),
                bucket,
                credentials,
                request_timeout_ms: 120_000,
                retry: RetrySettings::default(),
            })
        }
    };
    let committer = Committer::new(&store, config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut results = Vec::new();
    for (i, &(count, mb)) in sets.iter().enumerate() {
        let dir = work.join(format!("set{i}"));
        std::fs::create_dir_all(&dir)?;
        let mut files = Vec::with_capacity(count);
        let mut block = vec![0u8; mb * 1_000_000];
        for f in 0..count {
            // Distinct content per file (the first bytes), cheap to make.
            block[..8].copy_from_slice(&(f as u64).to_le_bytes());
            let path = dir.join(format!("f{f:05}"));
            std::fs::write(&path, &block)?;
            files.push(path);
        }
        let bytes = (count * mb * 1_000_000) as f64;
        let r = runtime.block_on(measure(&committer, &files, i, args.parallel_files))?;
        eprintln!(
            "{count} x {mb} MB: direct puts {:.2} s ({:.1} MB/s); task commits {:.2} s ({:.1} MB/s); job commit {:.3} s",
            r.direct,
            bytes / 1e6 / r.direct,
            r.task,
            bytes / 1e6 / r.task,
            r.job
        );
        results.push(json!({
            "files": count, "mb_each": mb,
            "direct_s": r.direct, "direct_mb_per_s": bytes / 1e6 / r.direct,
            "task_commit_s": r.task, "task_commit_mb_per_s": bytes / 1e6 / r.task,
            "job_commit_s": r.job,
            "committed_mb_per_s": bytes / 1e6 / (r.task + r.job),
        }));
        std::fs::remove_dir_all(&dir)?;
    }
    let counts = committer.store().metrics().snapshot();
    let store_name = match args.store {
        BenchStore::Moto => "moto",
        BenchStore::S3 => "s3",
        BenchStore::Local => "local",
    };
    println!(
        "{}",
        json!({
            "store": store_name,
            "parallel_files": args.parallel_files,
            "parallel_parts": args.parallel_parts,
            "part_mib": args.part_mib,
            "sets": results,
            "store_retryable_failures": counts.retryable_failures(),
        })
    );
    if args.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}

struct Times {
    direct: f64,
    task: f64,
    job: f64,
}

async fn measure(c: &Committer, files: &[PathBuf], set: usize, parallel: usize) -> Result<Times> {
    let gate = Arc::new(Semaphore::new(parallel));
    // Direct: one plain PUT per file, the same parallelism.
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, path) in files.iter().enumerate() {
        let (c, path, gate) = (c.clone(), path.clone(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.expect("open");
            let body = tokio::fs::read(&path).await?;
            c.store().put(&format!("bench/direct{set}/f{i:05}"), body).await?;
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let direct = start.elapsed().as_secs_f64();

    // Committer: task commits (one attempt per file, as one task per file would), then the
    // job commit.
    let output = format!("bench/committed{set}/");
    let run = format!("bench-{set}");
    let start = Instant::now();
    for (i, path) in files.iter().enumerate() {
        let (c, path, gate, output) = (c.clone(), path.clone(), gate.clone(), output.clone());
        let staging = format!("_weir/staging/{run}/t{i}/");
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.expect("open");
            c.put_file(&output, &staging, &format!("f{i:05}"), &path).await?;
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let task = start.elapsed().as_secs_f64();
    let plan = JobCommitPlan {
        run_id: run.clone(),
        output: output.clone(),
        partitions: vec![],
        attempts: (0..files.len()).map(|i| format!("_weir/staging/{run}/t{i}/")).collect(),
    };
    let start = Instant::now();
    let mut state = c.prepare_job_commit(&plan).await?;
    let manifest = c.job_commit(&mut state).await?;
    let job = start.elapsed().as_secs_f64();
    if manifest.files.len() != files.len() {
        bail!("the manifest lists {} files, {} were written", manifest.files.len(), files.len());
    }
    Ok(Times { direct, task, job })
}
