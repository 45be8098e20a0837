//! Load-aware routing at submission: a route of the server file may name several candidate
//! clusters and queues with a policy — `first` (the first candidate, as a one-target route),
//! `least_loaded` (the candidate whose queue has the least pending demand over its guaranteed
//! share) or `spill` (the first candidate unless the work already waiting in its queue would
//! keep a new run from starting for longer than a threshold, then the next).
//!
//! The decision is made once, when the run is submitted, from the engine snapshots the workers
//! publish, the runs this process routed since those snapshots were taken, and the runtimes the
//! store recorded; it is stored with the run and never revisited (a run does not move).
//! A candidate whose backend is unhealthy, or whose cluster the server file marks `drained`,
//! is skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_model::WorkflowSpec;

use crate::backend_status::BackendState;
use crate::clusters::Routed;
use crate::config::Limits;
use crate::error::ApiError;
use crate::snapshot::Published;
use crate::state::AppState;
use crate::submit::{accept_routed, Accepted};

/// How a route with several candidates chooses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The first candidate, always (what a one-target route does).
    First,
    /// The candidate whose queue has the least pending demand over its steady fair share.
    LeastLoaded,
    /// The first candidate whose queue would start the run within `after`; else the candidate
    /// that would start it soonest.
    Spill { after: Duration },
}

impl Policy {
    pub fn name(&self) -> &'static str {
        match self {
            Policy::First => "first",
            Policy::LeastLoaded => "least_loaded",
            Policy::Spill { .. } => "spill",
        }
    }
}

/// One place a route may send a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub cluster: String,
    /// A leaf queue of `cluster`.
    pub queue: String,
}

/// A route of the server file: `workflow:NAME` or `project:PROJECT:TIER`, its policy and its
/// candidates in order of preference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRoute {
    pub key: String,
    pub policy: Policy,
    pub candidates: Vec<Candidate>,
}

/// The routing part of the server's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoutingSettings {
    /// Routes with a policy. A key here wins over a route of the same key set through the API.
    pub routes: Vec<PolicyRoute>,
    /// Clusters that take no newly routed runs from a policy route (their running and waiting
    /// runs go on).
    pub drained: BTreeSet<String>,
}

/// Why a run went where it went (the `reason` label of `weir_route_decisions_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `policy: first`: the first candidate that is not skipped.
    First,
    /// `least_loaded`: the candidate with the least pending demand over share.
    LeastLoaded,
    /// `spill`: the first candidate would start it within the threshold.
    WithinThreshold,
    /// `spill`: an earlier candidate would start it later than the threshold.
    Spilled,
    /// `spill`: every candidate would start it later than the threshold; the soonest one.
    AllOverThreshold,
    /// Every candidate was skipped (unhealthy, drained, or the workflow does not fit there):
    /// the first candidate the workflow fits, where the run waits like any other.
    AllSkipped,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::First => "first",
            Reason::LeastLoaded => "least_loaded",
            Reason::WithinThreshold => "within_threshold",
            Reason::Spilled => "spilled",
            Reason::AllOverThreshold => "all_over_threshold",
            Reason::AllSkipped => "all_skipped",
        }
    }
}

/// A routing decision, recorded with the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The route's key.
    pub key: String,
    pub policy: &'static str,
    pub reason: Reason,
    /// For people: each candidate's figures and why it was taken or passed over.
    pub detail: String,
    /// What the run asks for at its widest (counted on its queue once it is stored).
    pub own: Amount,
}

// ---- The predictor (pure) ----

/// Amounts of the two resources routing weighs: cpu in millicores, memory in MiB.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Amount {
    pub cpu: f64,
    pub memory: f64,
}

impl Amount {
    fn plus(self, o: Amount) -> Amount {
        Amount { cpu: self.cpu + o.cpu, memory: self.memory + o.memory }
    }
    fn minus(self, o: Amount) -> Amount {
        Amount { cpu: self.cpu - o.cpu, memory: self.memory - o.memory }
    }
    /// The larger of the two shares `self / of` (dominant resource); infinite where `of` is 0
    /// and `self` is not.
    fn over(self, of: Amount) -> f64 {
        let ratio = |a: f64, b: f64| {
            if a <= 0.0 {
                0.0
            } else if b <= 0.0 {
                f64::INFINITY
            } else {
                a / b
            }
        };
        ratio(self.cpu, of.cpu).max(ratio(self.memory, of.memory))
    }
}

impl From<weir_api::Resources> for Amount {
    fn from(r: weir_api::Resources) -> Amount {
        Amount { cpu: r.cpu as f64, memory: r.memory as f64 }
    }
}

impl From<weir_model::Resources> for Amount {
    fn from(r: weir_model::Resources) -> Amount {
        Amount { cpu: r.cpu as f64, memory: r.memory as f64 }
    }
}

/// What is known of one candidate queue at submission.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueLoad {
    /// Its steady fair share: what it is guaranteed when every queue wants its part.
    pub share: Amount,
    /// What its running tasks hold (from the last snapshot).
    pub usage: Amount,
    /// What its jobs want in all, running and pending (from the last snapshot).
    pub demand: Amount,
    /// What runs this server routed there since that snapshot want (not in it yet).
    pub routed: Amount,
    /// How long a run of this queue takes (recorded history, or a default).
    pub runtime_ms: f64,
}

impl QueueLoad {
    /// Pending demand (not yet running, the runs routed since the snapshot included) over the
    /// guaranteed share, of the dominant resource: `least_loaded` picks the lowest.
    pub fn load(&self) -> f64 {
        self.demand.minus(self.usage).plus(self.routed).over(self.share)
    }

    /// When a new run wanting `own` would start, in milliseconds from now: at once if the
    /// work ahead of it and itself fit in the share not used yet; otherwise once the share has
    /// turned over enough times to run the excess, a share's worth of work per `runtime_ms`.
    pub fn predicted_start_ms(&self, own: Amount) -> f64 {
        let free = self.share.minus(self.usage);
        let ahead = self.demand.minus(self.usage).plus(self.routed).plus(own);
        let excess =
            Amount { cpu: (ahead.cpu - free.cpu).max(0.0), memory: (ahead.memory - free.memory).max(0.0) };
        let turns = excess.over(self.share);
        if turns == 0.0 {
            0.0
        } else {
            turns * self.runtime_ms
        }
    }
}

/// What a run asks for at its widest: per job, the widest stage of each resource (tasks × the
/// stage's resources); the jobs together.
pub fn run_demand(workflow: &weir_model::Workflow) -> Amount {
    workflow.jobs.iter().fold(Amount::default(), |sum, job| {
        let widest = |f: fn(&weir_model::Resources) -> u64| {
            job.stages.iter().map(|s| f(&s.resources) as f64 * f64::from(s.tasks)).fold(0.0, f64::max)
        };
        sum.plus(Amount { cpu: widest(|r| r.cpu), memory: widest(|r| r.memory) })
    })
}

/// One candidate as the chooser sees it: `None` in `load` when it was skipped, with why.
#[derive(Clone, Debug)]
pub struct Seen {
    pub cluster: String,
    pub queue: String,
    pub skipped: Option<String>,
    pub load: QueueLoad,
    pub own: Amount,
}

/// Chooses among `seen` (in the route's order) under `policy`: the index chosen, the reason
/// and a line for people. Pure: the same figures give the same answer.
pub fn choose(policy: &Policy, seen: &[Seen]) -> (usize, Reason, String) {
    let open: Vec<usize> = (0..seen.len()).filter(|&i| seen[i].skipped.is_none()).collect();
    let mut parts: Vec<String> = Vec::new();
    for s in seen {
        let at = format!("{}/{}", s.cluster, s.queue);
        match &s.skipped {
            Some(why) => parts.push(format!("{at} skipped ({why})")),
            None => parts.push(format!(
                "{at} load {:.2}, predicted start {}s",
                s.load.load(),
                secs(s.load.predicted_start_ms(s.own))
            )),
        }
    }
    let detail = |head: String| format!("{head}; {}", parts.join("; "));
    let Some(&first) = open.first() else {
        return (0, Reason::AllSkipped, detail("every candidate was skipped: the first one".into()));
    };
    match policy {
        Policy::First => (first, Reason::First, detail(format!("first: {}", seen[first].cluster))),
        Policy::LeastLoaded => {
            let best = open
                .iter()
                .copied()
                .min_by(|&a, &b| seen[a].load.load().total_cmp(&seen[b].load.load()))
                .unwrap_or(first);
            (best, Reason::LeastLoaded, detail(format!("least loaded: {}", seen[best].cluster)))
        }
        Policy::Spill { after } => {
            let limit = after.as_millis() as f64;
            let start = |i: usize| seen[i].load.predicted_start_ms(seen[i].own);
            if let Some(&i) = open.iter().find(|&&i| start(i) <= limit) {
                let reason = if i == first { Reason::WithinThreshold } else { Reason::Spilled };
                let head = format!(
                    "{}: predicted start {}s within {}s",
                    seen[i].cluster,
                    secs(start(i)),
                    secs(limit)
                );
                return (i, reason, detail(head));
            }
            let best = open.iter().copied().min_by(|&a, &b| start(a).total_cmp(&start(b))).unwrap_or(first);
            let head = format!("every candidate over {}s: the soonest, {}", secs(limit), seen[best].cluster);
            (best, Reason::AllOverThreshold, detail(head))
        }
    }
}

fn secs(ms: f64) -> String {
    if ms.is_infinite() {
        "never".into()
    } else {
        format!("{:.0}", ms / 1000.0)
    }
}

// ---- The router (this process's view) ----

/// How long a run takes when nothing is recorded for its queue or workflow.
pub const DEFAULT_RUNTIME: Duration = Duration::from_secs(600);
/// How far back recorded runtimes are read.
const HISTORY: Duration = Duration::from_secs(7 * 86_400);
/// How often recorded runtimes are re-read.
const HISTORY_EVERY: Duration = Duration::from_secs(60);
/// A run routed this long before a snapshot was taken is counted in that snapshot (the worker
/// takes a run into its engine within a tick of being woken).
const IN_SNAPSHOT_AFTER_MS: i64 = 2_000;
/// The longest a routed run is counted without a snapshot of its cluster.
const ROUTED_KEPT_MS: i64 = 600_000;

/// Mean runtimes (first task's start to the run's end) of the runs that succeeded.
#[derive(Debug, Default, PartialEq)]
struct Runtimes {
    /// By (cluster, queue).
    by_queue: BTreeMap<(String, String), f64>,
    by_workflow: BTreeMap<String, f64>,
}

impl Runtimes {
    fn of(rows: &[weir_store::RunRecordRow]) -> Runtimes {
        let mut sums: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
        let mut by_wf: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for r in rows.iter().filter(|r| r.state == "succeeded") {
            let (Some(a), Some(b)) = (r.started_ms, r.finished_ms) else { continue };
            let ms = (b - a).max(0) as f64;
            let e = sums.entry((r.cluster.clone(), r.queue.clone())).or_default();
            *e = (e.0 + ms, e.1 + 1.0);
            let e = by_wf.entry(r.workflow.clone()).or_default();
            *e = (e.0 + ms, e.1 + 1.0);
        }
        let mean = |(sum, n): (f64, f64)| sum / n;
        Runtimes {
            by_queue: sums.into_iter().map(|(k, v)| (k, mean(v))).collect(),
            by_workflow: by_wf.into_iter().map(|(k, v)| (k, mean(v))).collect(),
        }
    }

    /// A run's expected runtime on (cluster, queue): the queue's mean, else the workflow's,
    /// else [`DEFAULT_RUNTIME`].
    fn expected_ms(&self, cluster: &str, queue: &str, workflow: &str) -> f64 {
        self.by_queue
            .get(&(cluster.to_string(), queue.to_string()))
            .or_else(|| self.by_workflow.get(workflow))
            .copied()
            .unwrap_or(DEFAULT_RUNTIME.as_millis() as f64)
    }
}

/// Routing settings and what this process routed recently.
#[derive(Default)]
pub struct Router {
    pub settings: RoutingSettings,
    /// (cluster, queue, when, demand) of runs routed by a policy route, until a snapshot
    /// counts them.
    routed: Mutex<Vec<(String, String, i64, Amount)>>,
    runtimes: Mutex<Option<(Instant, std::sync::Arc<Runtimes>)>>,
    /// Steady shares of each cluster's queues with nothing running, by cluster version: what a
    /// candidate without a snapshot yet is judged by.
    idle_shares: Mutex<BTreeMap<(String, i64), BTreeMap<String, Amount>>>,
}

impl Router {
    pub fn new(settings: RoutingSettings) -> Router {
        Router { settings, ..Router::default() }
    }

    /// The policy route for a workflow, if the server file has one (the workflow's key before
    /// its project's).
    pub fn route_for(&self, workflow: &str, project: Option<&str>, tier: u8) -> Option<&PolicyRoute> {
        let by_key = |k: String| self.settings.routes.iter().find(|r| r.key == k);
        by_key(format!("workflow:{workflow}")).or_else(|| {
            project.and_then(|p| by_key(format!("project:{}:{tier}", p.strip_prefix("root.").unwrap_or(p))))
        })
    }

    async fn runtimes(&self, s: &AppState) -> Result<std::sync::Arc<Runtimes>, ApiError> {
        if let Some((at, r)) = self.runtimes.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if at.elapsed() < HISTORY_EVERY {
                return Ok(r.clone());
            }
        }
        let now = crate::time::now_ms();
        let rows = s.store.run_records(None, None, now - HISTORY.as_millis() as i64, now + 1).await?;
        let r = std::sync::Arc::new(Runtimes::of(&rows));
        *self.runtimes.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), r.clone()));
        Ok(r)
    }

    fn idle_share(&self, s: &AppState, cluster: &str, queue: &str) -> Amount {
        let Some(loaded) = s.registry.cluster(cluster) else { return Amount::default() };
        let mut cache = self.idle_shares.lock().unwrap_or_else(|e| e.into_inner());
        let shares = cache.entry((cluster.to_string(), loaded.version)).or_insert_with(|| {
            weir_engine::Engine::new((*loaded.config).clone())
                .map(|e| {
                    e.queues().into_iter().map(|q| (q.queue.to_string(), Amount::from(q.steady))).collect()
                })
                .unwrap_or_default()
        });
        shares.get(queue).copied().unwrap_or_default()
    }

    /// Routes `spec` by `route` and accepts it on the chosen candidate.
    pub async fn route(
        &self,
        s: &AppState,
        route: &PolicyRoute,
        spec: WorkflowSpec,
        limits: &Limits,
    ) -> Result<(Accepted, Decision), ApiError> {
        // This process's actors' snapshots from the board (nothing parsed), the store's for
        // clusters driven elsewhere.
        let snapshots: BTreeMap<String, Arc<Published>> = crate::state::served_snapshots(s, None)
            .await?
            .into_iter()
            .filter_map(|(cluster, snap)| Some((cluster, snap?)))
            .collect();
        let runtimes = self.runtimes(s).await?;
        let mut seen = Vec::new();
        let mut accepted: Vec<Option<Accepted>> = Vec::new();
        let mut first_error = None;
        for c in &route.candidates {
            let routed = Routed {
                cluster: c.cluster.clone(),
                queue: Some(c.queue.clone()),
                by_project: route_project(&route.key),
            };
            let (acc, own) = match accept_routed(&s.registry, spec.clone(), limits, Some(routed)) {
                Ok((a, wf)) => (Some(a), run_demand(&wf)),
                Err(e) => {
                    let why = format!("the workflow does not fit there: {}", e.body.error.message);
                    first_error.get_or_insert(e);
                    seen.push(Seen {
                        cluster: c.cluster.clone(),
                        queue: c.queue.clone(),
                        skipped: Some(why),
                        load: QueueLoad::default(),
                        own: Amount::default(),
                    });
                    accepted.push(None);
                    continue;
                }
            };
            let skipped = if self.settings.drained.contains(&c.cluster) {
                Some("drained".to_string())
            } else {
                s.backends.get(&c.cluster).filter(|b| b.state == BackendState::Unhealthy).map(|b| {
                    format!("backend unhealthy: {}", b.reason.as_deref().unwrap_or("no reason given"))
                })
            };
            let mut load =
                QueueLoad { share: self.idle_share(s, &c.cluster, &c.queue), ..QueueLoad::default() };
            let mut taken_ms = i64::MIN;
            if let Some(snap) = snapshots.get(&c.cluster) {
                if let Some(q) = Option::as_ref(&*snap.queues.value).and_then(|tree| tree.get(&c.queue)) {
                    load.share = q.steady_fair_share.into();
                    load.usage = q.usage.into();
                    load.demand = q.demand.into();
                    taken_ms = snap.taken_ms;
                }
            }
            load.routed = self
                .routed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|(cl, q, at, _)| {
                    *cl == c.cluster && *q == c.queue && *at + IN_SNAPSHOT_AFTER_MS > taken_ms
                })
                .fold(Amount::default(), |sum, e| sum.plus(e.3));
            load.runtime_ms = runtimes.expected_ms(&c.cluster, &c.queue, &spec.name);
            seen.push(Seen { cluster: c.cluster.clone(), queue: c.queue.clone(), skipped, load, own });
            accepted.push(acc);
        }
        let (mut i, reason, detail) = choose(&route.policy, &seen);
        if accepted[i].is_none() {
            // All skipped: the first candidate the workflow fits.
            match accepted.iter().position(Option::is_some) {
                Some(j) => i = j,
                None => {
                    return Err(
                        first_error.unwrap_or_else(|| ApiError::invalid("the route has no candidates"))
                    )
                }
            }
        }
        let chosen = accepted.swap_remove(i).ok_or_else(|| ApiError::internal("no candidate accepted"))?;
        let now = crate::time::now_ms();
        {
            let mut routed = self.routed.lock().unwrap_or_else(|e| e.into_inner());
            // Kept until a snapshot of its cluster counts it, and at most ROUTED_KEPT (a cluster
            // that publishes none, e.g. one whose worker is down).
            routed.retain(|(cluster, _, at, _)| {
                let taken = snapshots.get(cluster).map_or(i64::MIN, |sn| sn.taken_ms);
                *at + IN_SNAPSHOT_AFTER_MS > taken && now - *at < ROUTED_KEPT_MS
            });
        }
        let decision = Decision {
            key: route.key.clone(),
            policy: route.policy.name(),
            reason,
            detail,
            own: seen[i].own,
        };
        Ok((chosen, decision))
    }

    /// Counts a run this route placed and the store accepted, until a snapshot counts it.
    pub fn routed(&self, cluster: &str, queue: &str, own: Amount) {
        let now = crate::time::now_ms();
        let mut routed = self.routed.lock().unwrap_or_else(|e| e.into_inner());
        routed.push((cluster.to_string(), queue.to_string(), now, own));
    }
}

/// The project of a `project:P:TIER` key (its runs there count as placed by the operator).
fn route_project(key: &str) -> Option<String> {
    let rest = key.strip_prefix("project:")?;
    rest.rsplit_once(':').map(|(p, _)| p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(share: f64, usage: f64, demand: f64, routed: f64) -> QueueLoad {
        let a = |cpu: f64| Amount { cpu, memory: cpu };
        QueueLoad {
            share: a(share),
            usage: a(usage),
            demand: a(demand),
            routed: a(routed),
            runtime_ms: 60_000.0,
        }
    }

    fn seen(name: &str, load: QueueLoad, own: f64) -> Seen {
        Seen {
            cluster: name.into(),
            queue: "root.q".into(),
            skipped: None,
            load,
            own: Amount { cpu: own, memory: own },
        }
    }

    #[test]
    fn a_run_that_fits_in_the_unused_share_starts_at_once() {
        assert_eq!(
            q(4000.0, 1000.0, 1000.0, 0.0).predicted_start_ms(Amount { cpu: 3000.0, memory: 3000.0 }),
            0.0
        );
    }

    #[test]
    fn work_beyond_the_share_waits_a_share_turn_per_runtime() {
        // Share 2000 all used, 2000 pending, 1000 routed since, the run wants 1000: 4000 beyond
        // the free share = two turns of the share, 60 s each.
        let l = q(2000.0, 2000.0, 4000.0, 1000.0);
        assert_eq!(l.predicted_start_ms(Amount { cpu: 1000.0, memory: 1000.0 }), 120_000.0);
        // Routed runs count: without them one turn and a half.
        let l = q(2000.0, 2000.0, 4000.0, 0.0);
        assert_eq!(l.predicted_start_ms(Amount { cpu: 1000.0, memory: 1000.0 }), 90_000.0);
    }

    #[test]
    fn the_dominant_resource_decides() {
        let l = QueueLoad {
            share: Amount { cpu: 4000.0, memory: 1000.0 },
            usage: Amount { cpu: 0.0, memory: 1000.0 },
            demand: Amount { cpu: 0.0, memory: 1000.0 },
            routed: Amount::default(),
            runtime_ms: 10_000.0,
        };
        // Plenty of cpu, no memory left: a memory-wanting run waits one turn (1000/1000).
        assert_eq!(l.predicted_start_ms(Amount { cpu: 100.0, memory: 1000.0 }), 10_000.0);
        assert_eq!(l.load(), 0.0);
    }

    #[test]
    fn a_queue_without_share_never_starts_waiting_work() {
        assert!(q(0.0, 0.0, 0.0, 0.0).predicted_start_ms(Amount { cpu: 1.0, memory: 1.0 }).is_infinite());
        assert!(q(0.0, 0.0, 1.0, 0.0).load().is_infinite());
    }

    #[test]
    fn least_loaded_picks_the_lowest_pending_over_share_and_the_first_on_a_tie() {
        let a = seen("a", q(2000.0, 2000.0, 4000.0, 0.0), 0.0); // 2000/2000 = 1.0
        let b = seen("b", q(8000.0, 0.0, 4000.0, 0.0), 0.0); // 4000/8000 = 0.5
        let (i, r, _) = choose(&Policy::LeastLoaded, &[a.clone(), b.clone()]);
        assert_eq!((i, r), (1, Reason::LeastLoaded));
        let (i, _, _) = choose(&Policy::LeastLoaded, &[b.clone(), b]);
        assert_eq!(i, 0);
        // Runs routed since the snapshot make a queue look as loaded as they will be.
        let a = seen("a", q(8000.0, 0.0, 0.0, 6000.0), 0.0);
        let b = seen("b", q(8000.0, 0.0, 4000.0, 0.0), 0.0);
        assert_eq!(choose(&Policy::LeastLoaded, &[a, b]).0, 1);
    }

    #[test]
    fn spill_keeps_the_first_within_the_threshold_then_moves_on() {
        let after = Duration::from_secs(60);
        let policy = Policy::Spill { after };
        let idle = seen("a", q(2000.0, 0.0, 0.0, 0.0), 1000.0);
        let busy = seen("b", q(8000.0, 0.0, 0.0, 0.0), 1000.0);
        assert_eq!(choose(&policy, &[idle, busy.clone()]).1, Reason::WithinThreshold);
        // One turn (60 s) is within; more is not.
        let one_turn = seen("a", q(2000.0, 2000.0, 2000.0, 1000.0), 1000.0);
        assert_eq!(choose(&policy, &[one_turn, busy.clone()]).0, 0);
        let full = seen("a", q(2000.0, 2000.0, 4000.0, 0.0), 1000.0);
        let (i, r, detail) = choose(&policy, &[full.clone(), busy]);
        assert_eq!((i, r), (1, Reason::Spilled));
        assert!(detail.contains("a/root.q load 1.00, predicted start 90s"), "{detail}");
        // All over: the soonest.
        let fuller = seen("b", q(2000.0, 2000.0, 8000.0, 0.0), 1000.0);
        assert_eq!(choose(&policy, &[fuller, full]).0, 1);
    }

    #[test]
    fn skipped_candidates_are_passed_over_and_all_skipped_is_said() {
        let mut a = seen("a", q(8000.0, 0.0, 0.0, 0.0), 0.0);
        a.skipped = Some("drained".into());
        let b = seen("b", q(8000.0, 8000.0, 20_000.0, 0.0), 0.0);
        let (i, r, detail) = choose(&Policy::First, &[a.clone(), b.clone()]);
        assert_eq!((i, r), (1, Reason::First));
        assert!(detail.contains("a/root.q skipped (drained)"), "{detail}");
        assert_eq!(choose(&Policy::LeastLoaded, &[a.clone(), b]).0, 1);
        assert_eq!(choose(&Policy::Spill { after: Duration::ZERO }, &[a.clone()]).1, Reason::AllSkipped);
    }

    #[test]
    fn recorded_runtimes_are_the_mean_of_succeeded_runs_by_queue_then_workflow() {
        let row = |wf: &str, queue: &str, state: &str, started: Option<i64>, finished: i64| {
            weir_store::RunRecordRow {
                id: 0,
                workflow: wf.into(),
                project: "p".into(),
                tier: 1,
                cluster: "a".into(),
                queue: queue.into(),
                state: state.into(),
                submitted_ms: 0,
                started_ms: started,
                finished_ms: Some(finished),
                slo_ms: None,
            }
        };
        let r = Runtimes::of(&[
            row("etl", "root.q", "succeeded", Some(0), 60_000),
            row("etl", "root.q", "succeeded", Some(10_000), 130_000),
            row("etl", "root.q", "failed", Some(0), 1_000),
            row("etl", "root.q", "killed", None, 5_000),
            row("report", "root.r", "succeeded", Some(0), 30_000),
        ]);
        // Failed, killed and never-started runs say nothing of how long a run takes.
        assert_eq!(r.expected_ms("a", "root.q", "report"), 90_000.0);
        // A queue with no history: the workflow's own runs, wherever they ran.
        assert_eq!(r.expected_ms("b", "root.q", "report"), 30_000.0);
        assert_eq!(r.expected_ms("b", "root.q", "etl"), 90_000.0);
        assert_eq!(r.expected_ms("b", "root.q", "new"), DEFAULT_RUNTIME.as_millis() as f64);
    }

    #[test]
    fn project_keys_name_their_project() {
        assert_eq!(route_project("project:ads.ranking:1").as_deref(), Some("ads.ranking"));
        assert_eq!(route_project("workflow:x"), None);
    }
}
