//! The engine actor of one cluster: the only owner of its live `Engine`.
//!
//! One loop: gather inputs (task ends from the backend, new runs, kill requests), hand them to
//! the engine stamped with the real clock, `schedule(now)`, turn decisions into store changes,
//! commit them in one fenced batch, and only then act on the world (start and kill processes).
//! Starting an attempt follows the outbox: "starting attempt N" is committed first, the process
//! started second, its launch record committed with the next batch.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{watch, Notify};
use weir_backend::{Backend, Launched, TaskExit, TaskLaunch};
use weir_engine::{ContainerId, Engine};
use weir_model::{ClusterConfig, Time};
use weir_store::{Change, Fence, JobStore, StoreError};

use super::attempts::{starter, Started};
use super::live::{engine_job, AttemptLive, JobPhase, RunLive};
use super::usage::{Held, UsageRecorder};
use super::{Ended, WorkerSettings};
use crate::clusters::Registry;
use crate::config::Stop;
use crate::metrics::Metrics;
use crate::snapshot::{self, BodyCache, Published, Publisher};
use crate::time::now_ms;

/// Most queued runs claimed per pass.
const CLAIM: u32 = 512;

/// Shortest time between the starts of two passes woken by task events (a start coming back,
/// a task ending, a submission). Each pass commits in one store transaction (a disk flush) and
/// reads the queued runs: woken by every event alone, a busy cluster made a pass per task —
/// 1,800 transactions for 2,000 one-task runs of `true` (`weir bench serve`), 744 with this
/// gap. A stop, a drain or the tick is never held back.
const MIN_PASS_GAP: Duration = Duration::from_millis(4);

pub(crate) struct Actor {
    pub cluster: String,
    pub fence: Fence,
    pub store: Arc<dyn JobStore>,
    pub settings: WorkerSettings,
    pub backend: Arc<dyn Backend>,
    pub engine: Engine,
    pub config: Arc<ClusterConfig>,
    pub config_version: i64,
    pub runs: BTreeMap<i64, RunLive>,
    pub attempts: HashMap<String, AttemptLive>,
    pub containers: HashMap<ContainerId, String>,
    /// Store changes of this pass, committed together.
    pub changes: Vec<Change>,
    /// Attempts to start once `changes` is committed.
    pub to_start: Vec<TaskLaunch>,
    /// Attempts whose intent is recorded but that cannot be started (their user is gone).
    pub start_failures: Vec<(weir_backend::AttemptId, weir_backend::BackendError)>,
    /// Attempts to kill once `changes` is committed.
    pub to_kill: Vec<Launched>,
    /// Attempts whose end is recorded: the backend may drop its files once committed.
    pub to_forget: Vec<Launched>,
    pub last_now: u64,
    pub draining: bool,
    /// Route changes of this pass not yet committed: (index in `changes`, run).
    pub routes_pending: Vec<(usize, i64)>,
    /// Attempts to start go to the starter task.
    pub starter: tokio::sync::mpsc::UnboundedSender<TaskLaunch>,
    pub metrics: Arc<Metrics>,
    /// Leaf queues' usage, turned into `usage.csv` rows.
    pub recorder: UsageRecorder,
    /// The leaves, by their index in the configuration, in the recorder's order.
    pub leaves: Vec<usize>,
    /// Tier, submission time and SLO of each run the actor handles, until its end is counted.
    pub run_meta: HashMap<i64, RunMeta>,
    /// Preemption notices to write (`Some`) or remove (`None`) once `changes` is committed.
    pub notices: Vec<(PathBuf, Option<String>)>,
    /// A `nodes: from_backend` cluster: the engine's nodes by the target's names …
    pub nodes: Option<super::nodes::NodeMap>,
    /// … whether weir placed the tasks (`placement: weir`: a task on a lost node is killed) …
    pub placed_by_weir: bool,
    /// … and the backend's node lists as they are read again.
    pub node_updates: Option<UnboundedReceiver<super::nodes::NodeListing>>,
    /// Jobs' waiting spells (`waits.rs`).
    pub waits: super::waits::WaitBook,
    /// Background job commits and input checks (`commit.rs`).
    pub io: super::commit::IoBook,
    /// The last gang number given (Spark executors, `progress::task_requests`).
    pub gang_seq: u32,
    /// Executor containers started before their driver's (by run, job, stage).
    pub spare_executors: HashMap<(i64, usize, usize), Vec<ContainerId>>,
    /// Runs under a deadline guarantee (`guarantee: jockey`) and their controllers.
    pub jockey: crate::jockey::JockeyBook,
    /// A bench's synthetic load (`engine_load.rs`); none in a real server.
    pub load: Option<Box<dyn crate::engine_load::EngineLoad>>,
    /// The snapshot's parts as last published (what changed since).
    pub publisher: Publisher,
    /// Writes published snapshots to the store, off the actor.
    pub writer: SnapshotWriter,
}

/// What the metrics need of a run when its state changes.
#[derive(Clone, Debug)]
pub(crate) struct RunMeta {
    pub tier: u8,
    /// Its leaf queue (the queue-wait histogram's).
    pub queue: String,
    pub submitted_ms: i64,
    pub slo_ms: Option<i64>,
}

impl RunMeta {
    pub fn of(run: &RunLive) -> RunMeta {
        RunMeta {
            tier: run.tier,
            queue: run.queue.to_string(),
            submitted_ms: run.submitted_ms,
            slo_ms: run.slo_ms,
        }
    }
}

pub(crate) async fn run(
    cluster: &str,
    fence: Fence,
    settings: &WorkerSettings,
    store: &Arc<dyn JobStore>,
    registry: &Registry,
    mut stop: watch::Receiver<Stop>,
    notify: Arc<Notify>,
) -> Ended {
    let Some(loaded) = registry.cluster(cluster) else {
        return Ended::Failed(format!("cluster `{cluster}` is not loaded"));
    };
    let (exit_tx, exits) = tokio::sync::mpsc::unbounded_channel();
    let built = match super::backends::build(cluster, settings, exit_tx).await {
        Ok(b) => b,
        Err(why) => return Ended::Failed(why),
    };
    let backend = built.backend;
    let from_backend = settings.nodes_from_backend(cluster);
    let mut refresh_task = None;
    let (engine, nodes, node_updates) = match from_backend {
        None => match Engine::with_config_nodes((*loaded.config).clone()) {
            Ok(e) => (e, None, None),
            Err(e) => return Ended::Failed(format!("the engine refuses the configuration: {e}")),
        },
        // The engine's nodes are the backend's usable nodes as they are now, by name.
        Some((every, _)) => {
            let asked = std::time::Instant::now();
            let reported = match backend.nodes().await {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Ended::Failed(format!("cannot read the backend's nodes: {e}")),
                None => return Ended::Failed("this backend reports no nodes (`nodes: from_backend`)".into()),
            };
            let mut map = super::nodes::NodeMap::default();
            let changes = map.refresh(&reported, asked);
            let mut engine = match Engine::new((*loaded.config).clone()) {
                Ok(e) => e,
                Err(e) => return Ended::Failed(format!("the engine refuses the configuration: {e}")),
            };
            let specs = changes.added.into_iter().map(|(s, _)| s).collect();
            if let Err(e) = engine.on_nodes_added(Time::ZERO, specs) {
                return Ended::Failed(format!("the engine refuses the backend's nodes: {e}"));
            }
            let (counted, gone) = map.lists();
            eprintln!(
                "weir worker: cluster `{cluster}`: nodes from the backend: {} counted ({}){}",
                counted.len(),
                counted.join(", "),
                if gone.is_empty() { String::new() } else { format!("; not usable: {}", gone.join(", ")) }
            );
            settings.statuses.set_nodes(cluster, settings.backend_kind(cluster), counted, gone, now_ms());
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let task = tokio::spawn(super::nodes::refresher(backend.clone(), every, tx));
            (engine, Some(map), Some((rx, AbortOnDrop(task))))
        }
    };
    let health = tokio::spawn(super::backends::watch_health(
        cluster.to_string(),
        settings.backend_kind(cluster),
        backend.clone(),
        settings.statuses.clone(),
        settings.health_interval,
    ));
    let _health = AbortOnDrop(health);
    let mut settings = settings.clone();
    settings.kill_grace = built.kill_grace;
    if let Some(shared) = built.shared_dir {
        // Logs, the working folder and notices: where the compute nodes see them too.
        settings.work_dir = shared.join("work");
        settings.data_dir = shared;
    }
    let (launch_tx, launch_rx) = tokio::sync::mpsc::unbounded_channel();
    let (started_tx, started_rx) = tokio::sync::mpsc::unbounded_channel();
    let starter_task = tokio::spawn(starter(backend.clone(), launch_rx, started_tx));
    let leaves: Vec<usize> =
        (0..loaded.config.queues.len()).filter(|&i| loaded.config.queues[i].is_leaf()).collect();
    let names = leaves.iter().map(|&i| loaded.config.queues[i].path.to_string()).collect();
    let recorder = UsageRecorder::new(names, settings.usage_resolution_ms, now_ms().max(0) as u64);
    let writer =
        SnapshotWriter::start(store.clone(), fence.clone(), settings.lease_ms, settings.metrics.clone());
    let mut actor = Actor {
        cluster: cluster.to_string(),
        fence: fence.clone(),
        store: store.clone(),
        metrics: settings.metrics.clone(),
        settings,
        backend,
        engine,
        config: loaded.config.clone(),
        config_version: loaded.version,
        runs: BTreeMap::new(),
        attempts: HashMap::new(),
        containers: HashMap::new(),
        changes: Vec::new(),
        to_start: Vec::new(),
        start_failures: Vec::new(),
        to_kill: Vec::new(),
        to_forget: Vec::new(),
        last_now: 0,
        draining: false,
        starter: launch_tx,
        routes_pending: Vec::new(),
        recorder,
        leaves,
        run_meta: HashMap::new(),
        notices: Vec::new(),
        nodes,
        placed_by_weir: from_backend.is_some_and(|(_, weir)| weir),
        node_updates: node_updates.map(|(rx, task)| {
            refresh_task = Some(task);
            rx
        }),
        waits: super::waits::WaitBook::default(),
        io: super::commit::IoBook::default(),
        gang_seq: 0,
        spare_executors: HashMap::new(),
        jockey: Default::default(),
        load: crate::engine_load::take(cluster),
        publisher: Publisher::default(),
        writer,
    };
    let board = actor.settings.snapshots.clone();
    let ended = match actor.recover().await {
        Ok(()) => actor.serve(registry, &mut stop, notify, exits, started_rx).await,
        Err(e) => e,
    };
    // Readers go back to the store (whoever owns the cluster next publishes there); the last
    // snapshot is written before the lease is given up.
    board.remove(cluster);
    // Starts not yet begun are dropped: their intents are in the store, and whoever owns the
    // cluster next asks the backend about them.
    starter_task.abort();
    drop(refresh_task);
    ended
}

impl Actor {
    pub fn now(&mut self) -> Time {
        let now = (now_ms().max(0) as u64).max(self.last_now);
        self.last_now = now;
        Time(now)
    }

    fn lease_until(&self) -> i64 {
        now_ms() + self.settings.lease_ms
    }

    async fn serve(
        mut self,
        registry: &Registry,
        stop: &mut watch::Receiver<Stop>,
        notify: Arc<Notify>,
        exits: UnboundedReceiver<TaskExit>,
        started: UnboundedReceiver<Started>,
    ) -> Ended {
        let writer = self.writer.handle();
        let ended = self.serve_until_ended(registry, stop, notify, exits, started).await;
        writer.finish().await;
        ended
    }

    async fn serve_until_ended(
        mut self,
        registry: &Registry,
        stop: &mut watch::Receiver<Stop>,
        notify: Arc<Notify>,
        mut exits: UnboundedReceiver<TaskExit>,
        mut started: UnboundedReceiver<Started>,
    ) -> Ended {
        let mut last_snapshot = 0i64;
        let mut last_kill_poll = 0i64;
        let mut pass_started: tokio::time::Instant;
        loop {
            match *stop.borrow() {
                Stop::Running => {}
                Stop::Now => return Ended::Stopped,
                Stop::Drain => self.draining = true,
            }
            if self.draining && self.attempts.is_empty() {
                return Ended::Stopped;
            }
            if registry.cluster(&self.cluster).is_some_and(|c| c.version != self.config_version) {
                if let Err(e) = self.commit().await {
                    return e;
                }
                return Ended::Reload;
            }
            // Inputs: task ends, kill requests, new runs.
            while let Ok((id, result)) = started.try_recv() {
                self.on_started(id, result);
            }
            while let Ok(exit) = exits.try_recv() {
                self.on_exit(exit);
            }
            while let Ok(event) = self.io.rx.try_recv() {
                self.on_io_event(event);
            }
            self.poll_inputs();
            while let Some(Ok(update)) = self.node_updates.as_mut().map(|r| r.try_recv()) {
                self.on_nodes(update);
            }
            let now = now_ms();
            if now - last_kill_poll >= 250 {
                last_kill_poll = now;
                match self.store.kill_requests(&self.cluster).await {
                    Ok(ids) => {
                        for id in ids {
                            self.end_run(id, "killed", "killed on request".to_string());
                        }
                    }
                    Err(e) => return Ended::Failed(format!("cannot read kill requests: {e}")),
                }
            }
            pass_started = tokio::time::Instant::now();
            let t0 = std::time::Instant::now();
            if !self.draining {
                if let Err(e) = self.claim().await {
                    return e;
                }
            }
            let t1 = t0.elapsed();
            let t = self.now();
            if let Some(load) = &mut self.load {
                load.before_pass(&mut self.engine, t);
            }
            self.step_guarantees(t);
            let decisions = self.engine.schedule(t);
            for d in decisions {
                if self.load.as_mut().is_some_and(|l| l.take(&d)) {
                    continue;
                }
                self.on_decision(d);
            }
            self.sample_waits(t.0 as i64);
            self.record_usage(t.0);
            let nchanges = self.changes.len();
            let t2 = t0.elapsed();
            if let Err(e) = self.commit().await {
                return e;
            }
            let t3 = t0.elapsed();
            let nstart = self.to_start.len();
            self.act();
            self.metrics.observe_pass(&self.cluster, t0.elapsed());
            if let Some(load) = &mut self.load {
                load.after_pass(t0.elapsed());
            }
            if std::env::var_os("WEIR_TRACE_ACTOR").is_some() {
                eprintln!(
                    "pass: claim {t1:?} schedule {:?} commit {nchanges} in {:?} act {nstart} in {:?}",
                    t2 - t1,
                    t3 - t2,
                    t0.elapsed() - t3
                );
            }
            if let Some(e) = self.writer.failed() {
                return e;
            }
            if now_ms() - last_snapshot >= 1000 {
                last_snapshot = now_ms();
                let t0 = std::time::Instant::now();
                self.publish();
                let held = t0.elapsed();
                let written = self.writer.took();
                if let Some(load) = &mut self.load {
                    load.published(held);
                    for (took, changed) in written {
                        load.written(took, changed);
                    }
                }
            }
            // Sleep until the next input, the engine's wakeup or the tick.
            let tick = self.settings.tick;
            let wake = match self.engine.next_wakeup() {
                Some(Time(at)) => Duration::from_millis(at.saturating_sub(self.last_now)).min(tick),
                None => tick,
            };
            if !self.to_start.is_empty() || !self.changes.is_empty() {
                continue;
            }
            let event = tokio::select! {
                exit = exits.recv() => {
                    if let Some(exit) = exit {
                        self.on_exit(exit);
                    }
                    true
                }
                s = started.recv() => {
                    if let Some((id, result)) = s {
                        self.on_started(id, result);
                    }
                    true
                }
                Some(update) = async {
                    match self.node_updates.as_mut() {
                        Some(r) => r.recv().await,
                        None => std::future::pending().await,
                    }
                } => { self.on_nodes(update); true }
                Some(event) = self.io.rx.recv() => { self.on_io_event(event); true }
                _ = notify.notified() => true,
                _ = tokio::time::sleep(wake) => false,
                _ = stop.changed() => false,
            };
            // Let the events that follow this one go into the same pass (see MIN_PASS_GAP);
            // a stop still ends the wait at once.
            if event {
                tokio::select! {
                    _ = tokio::time::sleep_until(pass_started + MIN_PASS_GAP) => {}
                    _ = stop.changed() => {}
                }
            }
        }
    }

    /// The backend's nodes, read again: a node gone or no longer usable leaves the engine (its
    /// tasks are lost and rescheduled), one that is new or back joins it.
    fn on_nodes(&mut self, (asked, update): super::nodes::NodeListing) {
        let reported = match update {
            Ok(r) => r,
            Err(e) => {
                // Cannot tell: nothing changes (a Slurm that is briefly away is not a node failure).
                eprintln!("weir worker: cluster `{}`: cannot read the backend's nodes: {e}", self.cluster);
                return;
            }
        };
        let Some(map) = self.nodes.as_mut() else { return };
        let changes = map.refresh(&reported, asked);
        if changes.removed.is_empty() && changes.added.is_empty() {
            return;
        }
        let (counted, gone) = map.lists();
        let now = self.now();
        for (id, name, state) in changes.removed {
            self.node_left(now, id, &name, &state);
        }
        for (spec, name) in changes.added {
            match self.engine.on_node_added(now, spec) {
                Ok(()) => eprintln!("weir worker: cluster `{}`: node `{name}` joined", self.cluster),
                Err(e) => eprintln!("weir worker: cluster `{}`: node `{name}`: {e}", self.cluster),
            }
        }
        let kind = self.settings.backend_kind(&self.cluster);
        self.settings.statuses.set_nodes(&self.cluster, kind, counted, gone, now_ms());
    }

    /// Node `name` (engine id `id`) is no longer counted (`state` says why): its tasks are lost.
    fn node_left(&mut self, now: Time, id: weir_engine::NodeId, name: &str, state: &str) {
        let lost = match self.engine.on_node_removed(now, id) {
            Ok(lost) => lost,
            Err(e) => {
                eprintln!("weir worker: cluster `{}`: node `{name}`: {e}", self.cluster);
                return;
            }
        };
        eprintln!(
            "weir worker: cluster `{}`: node `{name}` left ({state}): {} task(s) on it lost{}",
            self.cluster,
            lost.len(),
            if lost.is_empty() { "" } else { ", to be run again" }
        );
        for c in lost {
            self.on_container_lost(c, name, state);
        }
    }

    /// Node `name` refused a start pinned to it (`why`: the target's words): the engine stops
    /// counting it until a node listing asked for from now on shows it usable again.
    pub(super) fn node_refused(&mut self, name: &str, why: &str) {
        let Some(map) = self.nodes.as_mut() else { return };
        let Some(id) = map.refused(name, why, std::time::Instant::now()) else { return };
        let (counted, gone) = map.lists();
        let now = self.now();
        let state = format!("refused a pinned start: {why}");
        self.node_left(now, id, name, &state);
        let kind = self.settings.backend_kind(&self.cluster);
        self.settings.statuses.set_nodes(&self.cluster, kind, counted, gone, now_ms());
    }

    /// Commit this pass's changes in one fenced transaction.
    pub async fn commit(&mut self) -> Result<Vec<bool>, Ended> {
        let changes = std::mem::take(&mut self.changes);
        let t0 = std::time::Instant::now();
        let result = self.store.apply(&self.fence, self.lease_until(), &changes).await;
        self.metrics.observe_store("apply", t0.elapsed());
        match result {
            Ok(applied) => {
                self.settle_routes(&applied);
                self.count(&changes, &applied);
                Ok(applied)
            }
            Err(StoreError::LeaseLost { .. }) => Err(Ended::LeaseLost),
            Err(e) => Err(Ended::Failed(format!("cannot write to the store: {e}"))),
        }
    }

    /// Count runs started and ended (with their SLO outcome) among the changes that applied.
    fn count(&mut self, changes: &[Change], applied: &[bool]) {
        for (c, ok) in changes.iter().zip(applied) {
            let Change::RunState { run, to, at, .. } = c else { continue };
            if !*ok {
                continue;
            }
            let Some(meta) = self.run_meta.get(run).cloned() else { continue };
            match *to {
                "running" => {
                    let queue_tier = weir_model::QueuePath::parse(&meta.queue)
                        .and_then(|p| self.config.find(&p))
                        .and_then(|i| self.config.queues[i].tier);
                    let waited = at - meta.submitted_ms;
                    self.metrics.run_started(meta.tier, &self.cluster, &meta.queue, queue_tier, waited);
                }
                "succeeded" | "failed" | "killed" => {
                    let met = match *to {
                        "killed" => None,
                        "succeeded" => meta.slo_ms.map(|slo| at - meta.submitted_ms <= slo),
                        _ => meta.slo_ms.map(|_| false),
                    };
                    self.metrics.run_finished(meta.tier, to, met);
                    self.run_meta.remove(run);
                }
                _ => {}
            }
        }
    }

    /// Show the recorder every leaf's usage now; closed windows become `Usage` changes.
    fn record_usage(&mut self, now: u64) {
        let mut out = Vec::new();
        for (i, &q) in self.leaves.iter().enumerate() {
            let stat = self.engine.queue_stat(q);
            let held = Held {
                cpu: stat.usage.cpu,
                memory: stat.usage.memory,
                gpu: stat.usage.gpu,
                running_apps: stat.running_apps,
            };
            self.recorder.observe(i, now, held, &mut out);
        }
        self.recorder.flush(now, &mut out);
        for mut c in out {
            if let Change::Usage(row) = &mut c {
                row.cluster = self.cluster.clone();
            }
            self.changes.push(c);
        }
    }

    /// Publish the queue snapshot: build its parts from the engine, keep those that did not
    /// change, put it on this process's board (readers here see it at once) and hand it to the
    /// store writer. Serializing and writing the store happen off the actor.
    fn publish(&mut self) {
        let now = now_ms();
        let explanations = self.explanations(now);
        let mut nodes = [0_i64; 3];
        for n in self.engine.nodes() {
            let full = n.used.cpu >= n.capacity.cpu || n.used.memory >= n.capacity.memory;
            nodes[if n.containers == 0 {
                0
            } else if full {
                2
            } else {
                1
            }] += 1;
        }
        self.metrics.set_nodes(&self.cluster, nodes);
        let (published, _) = self.publisher.publish(
            now,
            snapshot::queues(&self.cluster, &self.engine, now),
            snapshot::nodes(&self.engine, |id| {
                self.nodes.as_ref().and_then(|m| m.name(id)).map(String::from)
            }),
            explanations,
        );
        self.settings.snapshots.set(&self.cluster, published.clone());
        self.writer.send(published);
    }

    /// Claim queued runs of this cluster: route them (creating their jobs and tasks) and
    /// submit their first jobs.
    async fn claim(&mut self) -> Result<(), Ended> {
        let t0 = std::time::Instant::now();
        let rows = self.store.queued_runs(&self.cluster, CLAIM).await;
        self.metrics.observe_store("claim", t0.elapsed());
        let rows = match rows {
            Ok(r) => r,
            Err(e) => return Err(Ended::Failed(format!("cannot read queued runs: {e}"))),
        };
        if rows.is_empty() {
            return Ok(());
        }
        let at = now_ms();
        for row in &rows {
            match RunLive::build(row, &self.config, self.settings.max_tasks_per_run) {
                Ok(live) => {
                    self.run_meta.insert(live.id, RunMeta::of(&live));
                    // Optimistic: the run goes into the engine now, and the route commits with
                    // the rest of this pass. If the compare-and-set fails (it was killed while
                    // queued), `settle_routes` takes it out again before anything is started.
                    self.routes_pending.push((self.changes.len(), row.id));
                    self.changes.push(Change::Route { run: row.id, jobs: live.new_jobs(), at });
                    let id = live.id;
                    self.io.track(&live);
                    self.runs.insert(id, live);
                    self.start_ready_jobs(id);
                    self.taken_up(id, row.submitted_ms, at);
                }
                Err(why) => {
                    self.run_meta.insert(
                        row.id,
                        RunMeta {
                            tier: row.tier,
                            queue: row.queue.clone(),
                            submitted_ms: row.submitted_ms,
                            slo_ms: None,
                        },
                    );
                    self.changes.push(Change::RunState { run: row.id, to: "failed", at, reason: Some(why) });
                }
            }
        }
        Ok(())
    }

    /// After a commit: undo the runs whose route did not apply. Their other changes in the
    /// batch did not apply either (no job or task rows exist, the run is terminal), and their
    /// attempts are dropped before they are handed to the starter.
    fn settle_routes(&mut self, applied: &[bool]) {
        let now = self.now();
        for (ix, id) in std::mem::take(&mut self.routes_pending) {
            if applied.get(ix).copied().unwrap_or(false) {
                continue;
            }
            let Some(run) = self.runs.remove(&id) else { continue };
            for (j, job) in run.jobs.iter().enumerate() {
                if job.phase == JobPhase::InEngine {
                    let _ = self.engine.on_job_finished(now, engine_job(id, j));
                }
            }
            let gone: Vec<String> =
                self.attempts.iter().filter(|(_, a)| a.key.task.run == id).map(|(k, _)| k.clone()).collect();
            for k in gone {
                if let Some(a) = self.attempts.remove(&k) {
                    if let Some(c) = a.container {
                        self.containers.remove(&c);
                    }
                }
            }
            self.to_start.retain(|l| !l.attempt.as_str().starts_with(&format!("run-{id}/")));
        }
    }
}

/// Ends a spawned task when the actor that spawned it ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes the actor's published snapshots to the store on a task of its own: the body is built
/// from the parts (only changed parts serialized again, on a blocking thread) and written fenced,
/// like every worker write. Only the newest snapshot waits: one published while a write is under
/// way replaces any older one not yet written. A snapshot whose parts are all unchanged is
/// written again only when the stored one is [`REWRITE_MS`] old (its `taken_ms` is the store
/// readers' "as of").
pub(crate) struct SnapshotWriter {
    tx: watch::Sender<Option<Arc<Published>>>,
    shared: Arc<WriterShared>,
    task: Option<JoinHandle<()>>,
}

/// At least this often the store's snapshot is written again, changed or not.
const REWRITE_MS: i64 = 10_000;

#[derive(Default)]
struct WriterShared {
    /// Why writing stopped: the lease was lost, or the store failed.
    failed: std::sync::Mutex<Option<Ended>>,
    /// Writes done since last asked: how long each took (serialize + store), and whether any
    /// part had changed.
    took: std::sync::Mutex<Vec<(Duration, bool)>>,
}

/// Waits for a [`SnapshotWriter`]'s last write when the actor ends: its sender goes with the
/// actor, and the task writes what it had not yet seen, then sees the channel closed.
pub(crate) struct WriterHandle {
    task: Option<JoinHandle<()>>,
}

impl WriterHandle {
    pub async fn finish(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl SnapshotWriter {
    fn start(store: Arc<dyn JobStore>, fence: Fence, lease_ms: i64, metrics: Arc<Metrics>) -> SnapshotWriter {
        let (tx, rx) = watch::channel(None);
        let shared = Arc::new(WriterShared::default());
        let task = tokio::spawn(write_snapshots(store, fence, lease_ms, metrics, rx, shared.clone()));
        SnapshotWriter { tx, shared, task: Some(task) }
    }

    fn send(&self, published: Arc<Published>) {
        self.tx.send_replace(Some(published));
    }

    fn failed(&self) -> Option<Ended> {
        self.shared.failed.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn took(&self) -> Vec<(Duration, bool)> {
        std::mem::take(&mut *self.shared.took.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The writer's task, taken out to wait on when the actor (and with it the sender) ends.
    /// The sender stays: every snapshot the actor publishes goes to this task.
    fn handle(&mut self) -> WriterHandle {
        WriterHandle { task: self.task.take() }
    }
}

async fn write_snapshots(
    store: Arc<dyn JobStore>,
    fence: Fence,
    lease_ms: i64,
    metrics: Arc<Metrics>,
    mut rx: watch::Receiver<Option<Arc<Published>>>,
    shared: Arc<WriterShared>,
) {
    let mut cache = Some(BodyCache::default());
    // The parts' versions and the time of the last snapshot written.
    let mut written: Option<([u64; 3], i64)> = None;
    while rx.changed().await.is_ok() {
        let Some(published) = rx.borrow_and_update().clone() else { continue };
        let versions = [published.queues.version, published.nodes.version, published.explanations.version];
        let changed = written.is_none_or(|(v, _)| v != versions);
        if !changed && written.is_some_and(|(_, at)| published.taken_ms - at < REWRITE_MS) {
            continue;
        }
        let t0 = std::time::Instant::now();
        let mut c = cache.take().unwrap_or_default();
        let p = published.clone();
        let Ok((body, c)) = tokio::task::spawn_blocking(move || (c.body(&p), c)).await else {
            cache = Some(BodyCache::default());
            continue;
        };
        cache = Some(c);
        let t1 = std::time::Instant::now();
        let result = store.publish_snapshot(&fence, now_ms() + lease_ms, &body, published.taken_ms).await;
        metrics.observe_store("publish", t1.elapsed());
        match result {
            Ok(()) => written = Some((versions, published.taken_ms)),
            Err(e) => {
                let why = match e {
                    StoreError::LeaseLost { .. } => Ended::LeaseLost,
                    e => Ended::Failed(format!("cannot publish the queue snapshot: {e}")),
                };
                *shared.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                return;
            }
        }
        shared.took.lock().unwrap_or_else(|e| e.into_inner()).push((t0.elapsed(), changed));
    }
}
