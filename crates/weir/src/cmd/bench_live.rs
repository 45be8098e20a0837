//! `weir bench engine --live`: the engine bench's synthetic cluster and jobs inside a running
//! server's engine actor (issue 22 §3), to see how long a pass at that size holds the actor
//! and what the API answers meanwhile.
//!
//! An in-process server (SQLite store in a scratch directory, the worker on, the local
//! backend) loads the synthetic cluster as its cluster file. A synthetic load
//! (`weir_server::engine_load`) submits the jobs straight into the actor's engine at its first
//! pass, keeps the containers it is given, and before each later pass ends 1% of them, as the
//! engine bench's churn rounds do; none of it reaches the store or a backend. Meanwhile a
//! client on its own thread and runtime (so it does not compete for the server's runtime)
//! calls three endpoints in turn, each answer timed: `/healthz` (no store), `GET
//! /v1/runs?limit=1` (a store read) and `GET /v1/queues/PATH` (the published snapshot, which
//! at this size holds every node and queue).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use weir_engine::{ContainerId, Decision, Engine, JobId, JobSpec, Request};
use weir_model::{ClusterConfig, QueuePath, Time};
use weir_server::engine_load::EngineLoad;
use weir_server::{ClusterSource, Server, ServerConfig, Stop};

use crate::emit;
use crate::synthetic::{self, SplitMix};

/// Above every id the server gives (`run << 12 | job`) for any run id a bench store reaches.
const LOAD_JOBS: u64 = 1 << 62;

/// What the load saw, shared with the bench.
#[derive(Default)]
struct Seen {
    /// Submitting the jobs into the engine (inside the first pass).
    submit: Option<Duration>,
    /// Every pass: when it ended, how long it took, the load's containers started and ended.
    passes: Vec<Pass>,
    /// Every snapshot publication: when it ended and how long it held the actor.
    publishes: Vec<(Instant, Duration)>,
    /// Every store write of a snapshot (off the actor): how long, and whether a part changed.
    writes: Vec<(Duration, bool)>,
}

struct Pass {
    end: Instant,
    took: Duration,
    placed: usize,
    ended: usize,
}

struct Load {
    leaves: Vec<QueuePath>,
    rng: SplitMix,
    jobs: u64,
    submitted: bool,
    running: Vec<ContainerId>,
    killed: HashSet<ContainerId>,
    placed: usize,
    ended: usize,
    seen: Arc<Mutex<Seen>>,
}

impl EngineLoad for Load {
    fn before_pass(&mut self, engine: &mut Engine, now: Time) {
        self.placed = 0;
        self.ended = 0;
        if !self.submitted {
            self.submitted = true;
            let t = Instant::now();
            for i in 0..self.jobs {
                let leaf = self.leaves[self.rng.below(self.leaves.len() as u64) as usize].clone();
                let count = 1 + self.rng.below(20) as u32;
                let spec = JobSpec {
                    id: JobId(LOAD_JOBS | i),
                    queue: leaf,
                    user: format!("user{}", i % 500),
                    priority: None,
                    submit_time: now,
                    requests: vec![Request::new(synthetic::container(&mut self.rng), count)],
                    has_am: true,
                };
                if let Err(e) = engine.on_job_submitted(now, spec) {
                    eprintln!("weir bench engine --live: the engine refused synthetic job {i}: {e}");
                }
            }
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).submit = Some(t.elapsed());
            return;
        }
        let finish = (self.running.len() / 100).max(1).min(self.running.len());
        for _ in 0..finish {
            let i = self.rng.below(self.running.len() as u64) as usize;
            let c = self.running.swap_remove(i);
            if self.killed.remove(&c) {
                continue;
            }
            if engine.on_container_finished(now, c).is_ok() {
                self.ended += 1;
            }
        }
    }

    fn take(&mut self, d: &Decision) -> bool {
        match d {
            Decision::StartContainer { container, job, .. } if job.0 & LOAD_JOBS != 0 => {
                self.running.push(*container);
                self.placed += 1;
                true
            }
            Decision::KillContainer { container, job, .. } if job.0 & LOAD_JOBS != 0 => {
                self.killed.insert(*container);
                true
            }
            Decision::PreemptContainer { job, .. }
            | Decision::JobRunnable { job }
            | Decision::JobRejected { job, .. } => job.0 & LOAD_JOBS != 0,
            _ => false,
        }
    }

    fn after_pass(&mut self, took: Duration) {
        let pass = Pass { end: Instant::now(), took, placed: self.placed, ended: self.ended };
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).passes.push(pass);
    }

    fn published(&mut self, took: Duration) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).publishes.push((Instant::now(), took));
    }

    fn written(&mut self, took: Duration, changed: bool) {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).writes.push((took, changed));
    }
}

/// One timed call of the client.
struct Probe {
    what: usize,
    start: Instant,
    took: Duration,
    ok: bool,
    /// A failed call's status (or error) and the start of its answer.
    why: Option<String>,
}

const PROBES: [&str; 3] = ["GET /healthz", "GET /v1/runs?limit=1", "GET /v1/queues/PATH"];

pub(super) fn run(config: ClusterConfig, jobs: u64, rounds: u32, seed: u64) -> Result<()> {
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build; measure with `cargo run --release -- bench engine --live`"
        );
    }
    let leaves: Vec<QueuePath> = config.leaves().map(|q| q.path.clone()).collect();
    let nodes: u64 = config.nodes.iter().map(|g| u64::from(g.count)).sum();
    let probe_queue = leaves[0].to_string();
    // JSON is YAML: the cluster file as the server reads it.
    let yaml = serde_json::to_string(&config.file)?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let load = Load {
        leaves: leaves.clone(),
        rng: SplitMix::new(seed),
        jobs,
        submitted: false,
        running: Vec::new(),
        killed: HashSet::new(),
        placed: 0,
        ended: 0,
        seen: seen.clone(),
    };
    weir_server::engine_load::install("default", Box::new(load));

    let dir = std::env::temp_dir().join(format!("weir-bench-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let started = Instant::now();
    let (server, base, token) = rt.block_on(async {
        let mut c = ServerConfig::new(dir.clone());
        c.listen = Some("127.0.0.1:0".parse()?);
        c.worker = true;
        c.clusters = vec![ClusterSource { name: "default".into(), yaml, file: "synthetic cluster".into() }];
        let store = weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await?;
        let server = Server::start(c, store).await?;
        let token = std::fs::read_to_string(weir_server::admin_token_path(&dir))
            .context("the bench server wrote no admin token")?
            .trim()
            .to_string();
        let base = format!("http://{}", server.addr.context("not listening")?);
        Ok::<_, anyhow::Error>((server, base, token))
    })?;
    let server_up = started.elapsed();

    // The client: its own thread and runtime, one call at a time, 20 ms apart.
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let stop = stop.clone();
        let urls = [
            format!("{base}/healthz"),
            format!("{base}/v1/runs?limit=1"),
            format!("{base}/v1/queues/{probe_queue}"),
        ];
        std::thread::spawn(move || -> Result<Vec<Probe>> {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                let http = reqwest::Client::new();
                let mut probes = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for (what, url) in urls.iter().enumerate() {
                        let start = Instant::now();
                        let why = match http.get(url).bearer_auth(&token).send().await {
                            Ok(r) => {
                                let status = r.status();
                                match r.bytes().await {
                                    Ok(_) if status.is_success() => None,
                                    Ok(body) => Some(format!(
                                        "{status}: {}",
                                        String::from_utf8_lossy(&body[..body.len().min(200)])
                                    )),
                                    Err(e) => Some(format!("{status}, reading the answer: {e}")),
                                }
                            }
                            Err(e) => Some(e.to_string()),
                        };
                        let took = start.elapsed();
                        probes.push(Probe { what, start, took, ok: why.is_none(), why });
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(probes)
            })
        })
    };

    // Wait for the fill and `rounds` passes after it.
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let passes = seen.lock().unwrap_or_else(|p| p.into_inner()).passes.len();
        if passes > rounds as usize {
            break;
        }
        if Instant::now() > deadline {
            stop.store(true, Ordering::Relaxed);
            bail!("--live: only {passes} passes of the actor within an hour");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // One more second for a snapshot of the churned cluster to be read.
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let probes = client.join().map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
    rt.block_on(server.shutdown(Stop::Now));
    let _ = std::fs::remove_dir_all(&dir);
    let peak_kib = peak_rss_kib();

    let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    report(&Report { nodes, leaves: leaves.len(), jobs, seed, server_up, peak_kib }, &seen, &probes)
}

struct Report {
    nodes: u64,
    leaves: usize,
    jobs: u64,
    seed: u64,
    server_up: Duration,
    peak_kib: Option<u64>,
}

fn report(r: &Report, seen: &Seen, probes: &[Probe]) -> Result<()> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let submit = seen.submit.unwrap_or_default();
    // The first pass that placed anything is the fill (passes before the load's submission
    // may run while the server starts; the submission is inside the fill's pass).
    let fill_ix = seen.passes.iter().position(|p| p.placed > 0);
    let mut out = String::new();
    writeln!(
        out,
        "weir bench engine --live — {} nodes, {} leaves, {} jobs, seed {}: in a server's engine actor",
        r.nodes, r.leaves, r.jobs, r.seed
    )?;
    writeln!(
        out,
        "server started (cluster file loaded, engine built) in {:.3} s",
        r.server_up.as_secs_f64()
    )?;
    let mut line =
        json!({"nodes": r.nodes, "leaves": r.leaves, "jobs": r.jobs, "submit_ms": ms(submit).round()});
    // The pass intervals: when each held the actor.
    let spans: Vec<(Instant, Instant)> = seen.passes.iter().map(|p| (p.end - p.took, p.end)).collect();
    let mut publish_spans: Vec<(Instant, Instant)> =
        seen.publishes.iter().map(|&(e, t)| (e - t, e)).collect();
    if let Some(f) = fill_ix {
        let fill = &seen.passes[f];
        writeln!(
            out,
            "fill pass: {:.3} s holding the actor ({:.3} s of it submitting the jobs into the engine), {} containers placed",
            fill.took.as_secs_f64(),
            submit.as_secs_f64(),
            fill.placed
        )?;
        line["fill_pass_ms"] = json!(ms(fill.took).round());
        line["fill_placed"] = json!(fill.placed);
        let churn: Vec<&Pass> = seen.passes[f + 1..].iter().collect();
        if !churn.is_empty() {
            let mut took: Vec<Duration> = churn.iter().map(|p| p.took).collect();
            took.sort();
            let placed: usize = churn.iter().map(|p| p.placed).sum();
            let ended: usize = churn.iter().map(|p| p.ended).sum();
            writeln!(
                out,
                "churn passes: {} (each after 1% of the load's containers ended; {ended} ended, {placed} placed in all): median {:.1} ms, max {:.1} ms",
                churn.len(),
                ms(took[took.len() / 2]),
                ms(took[took.len() - 1])
            )?;
            line["churn_passes"] = json!(churn.len());
            line["churn_pass_median_ms"] = json!((ms(took[took.len() / 2]) * 10.0).round() / 10.0);
            line["churn_pass_max_ms"] = json!((ms(took[took.len() - 1]) * 10.0).round() / 10.0);
        }
    }
    if !seen.publishes.is_empty() {
        let (median, max) = median_max(seen.publishes.iter().map(|p| p.1).collect());
        writeln!(
            out,
            "queue snapshot published {} times (its parts built from the engine, on the actor): median {median:.1} ms, max {max:.1} ms",
            seen.publishes.len(),
        )?;
        line["publish_median_ms"] = json!(median);
        line["publish_max_ms"] = json!(max);
    }
    if !seen.writes.is_empty() {
        let (median, max) = median_max(seen.writes.iter().map(|w| w.0).collect());
        let changed = seen.writes.iter().filter(|w| w.1).count();
        writeln!(
            out,
            "queue snapshot written to the store {} times ({changed} with a changed part; changed parts serialized, off the actor): median {median:.1} ms, max {max:.1} ms",
            seen.writes.len(),
        )?;
        line["write_median_ms"] = json!(median);
        line["write_max_ms"] = json!(max);
    }
    // A call is "during" the fill when it overlaps the fill pass; "during churn" when it
    // overlaps a later pass or a snapshot publication; otherwise the actor was idle.
    let fill_span = fill_ix.map(|f| spans[f]);
    let later: Vec<(Instant, Instant)> = match fill_ix {
        Some(f) => spans[f + 1..].to_vec(),
        None => Vec::new(),
    };
    publish_spans.retain(|s| fill_span.is_none_or(|f| s.0 >= f.1));
    let overlaps = |p: &Probe, s: &(Instant, Instant)| p.start < s.1 && p.start + p.took > s.0;
    writeln!(
        out,
        "{:<24} {:<14} {:>6} {:>9} {:>9} {:>9} {:>6}",
        "API call", "while", "calls", "p50 ms", "p99 ms", "max ms", "failed"
    )?;
    let mut api = serde_json::Map::new();
    for (what, name) in PROBES.iter().enumerate() {
        let mine: Vec<&Probe> = probes.iter().filter(|p| p.what == what).collect();
        let groups: [(&str, Vec<&Probe>); 3] = [
            (
                "fill pass",
                mine.iter().copied().filter(|p| fill_span.is_some_and(|s| overlaps(p, &s))).collect(),
            ),
            (
                "churn/publish",
                mine.iter()
                    .copied()
                    .filter(|p| later.iter().chain(&publish_spans).any(|s| overlaps(p, s)))
                    .collect(),
            ),
            (
                "actor idle",
                mine.iter()
                    .copied()
                    .filter(|p| {
                        fill_span.is_none_or(|s| !overlaps(p, &s))
                            && !later.iter().chain(&publish_spans).any(|s| overlaps(p, s))
                            && fill_span.is_some_and(|s| p.start > s.1)
                    })
                    .collect(),
            ),
        ];
        for (label, group) in groups {
            if group.is_empty() {
                writeln!(out, "{name:<24} {label:<14} {:>6}", 0)?;
                continue;
            }
            let mut took: Vec<f64> = group.iter().map(|p| ms(p.took)).collect();
            took.sort_by(f64::total_cmp);
            let q = |f: f64| took[((took.len() as f64 - 1.0) * f).round() as usize];
            let failed = group.iter().filter(|p| !p.ok).count();
            let first_failure = group.iter().find_map(|p| p.why.as_deref());
            writeln!(
                out,
                "{name:<24} {label:<14} {:>6} {:>9.1} {:>9.1} {:>9.1} {failed:>6}",
                took.len(),
                q(0.5),
                q(0.99),
                q(1.0)
            )?;
            api.insert(
                format!("{name} / {label}"),
                json!({"calls": took.len(), "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": q(1.0), "failed": failed}),
            );
            if let Some(why) = first_failure {
                writeln!(out, "  first failure: {}", why.replace('\n', " "))?;
            }
        }
    }
    line["api"] = serde_json::Value::Object(api);
    if let Some(kib) = r.peak_kib {
        writeln!(out, "maximum resident set of the process: {kib} KiB")?;
        line["peak_rss_kib"] = json!(kib);
    }
    writeln!(out, "{line}")?;
    emit(&out)
}

/// VmHWM of this process, from /proc (Linux).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The median and the largest of `took`, in milliseconds to a tenth (not empty).
fn median_max(mut took: Vec<Duration>) -> (f64, f64) {
    took.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
    (ms(took[took.len() / 2]), ms(took[took.len() - 1]))
}
