//! Pure queries: queue snapshots and "why is this job pending / why was it preempted".

use std::fmt;

use weir_model::{QueuePath, Resources, Time};

use crate::engine::Engine;
use crate::engine::Starver;
use crate::error::EngineError;
use crate::ids::JobId;
use crate::nodes::Hold;
use crate::placement::Blocker;
use crate::state::{JobSlot, JobState, NodeSlot};

/// A request's GPU fraction and selector as a phrase (empty for a plain one).
fn describe_ask(engine: &Engine, r: &crate::input::Request) -> String {
    let mut s = String::new();
    if r.gpu_milli > 0 {
        s.push_str(&format!(" with {}/1000 of one GPU", r.gpu_milli));
    }
    s.push_str(&engine.nodes.describe(r.selector));
    s
}

/// One queue as the engine sees it now.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSnapshot {
    pub queue: QueuePath,
    pub leaf: bool,
    pub weight: f64,
    pub min: Resources,
    /// Effective max (at least `min`); `u64::MAX` components mean unbounded.
    pub max: Resources,
    pub usage: Resources,
    /// Usage plus resources asked for and not yet given.
    pub demand: Resources,
    pub steady: Resources,
    pub instantaneous: Resources,
    pub running_apps: u32,
    pub waiting_apps: u32,
    pub max_running_apps: Option<u32>,
}

/// The figures of one queue a host samples often (a simulator, a metrics exporter): cheap to
/// read, no allocation. Indices are the cluster configuration's (`ClusterConfig::queues`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueStat {
    pub usage: Resources,
    pub pending: Resources,
    pub steady: Resources,
    pub instantaneous: Resources,
    pub running_apps: u32,
    pub waiting_apps: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Waiting for a running-app slot.
    Waiting,
    Runnable,
}

/// Why a job is where it is, in words an operator can act on.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    pub job: JobId,
    pub queue: QueuePath,
    pub status: JobStatus,
    pub usage: Resources,
    pub fair_share: Resources,
    pub pending: Resources,
    pub pending_containers: u64,
    pub running_containers: usize,
    /// Resources of its containers marked for preemption and not yet gone.
    pub marked: Resources,
    /// Sentences, most important first.
    pub reasons: Vec<String>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            JobStatus::Waiting => "waiting",
            JobStatus::Runnable => "runnable",
        };
        writeln!(
            f,
            "{} in {} ({status}): {} containers using {}, fair share {}, {} more wanted",
            self.job,
            self.queue,
            self.running_containers,
            self.usage,
            self.fair_share,
            self.pending_containers
        )?;
        for r in &self.reasons {
            writeln!(f, "  - {r}")?;
        }
        Ok(())
    }
}

impl Engine {
    /// Every queue, depth-first with root first. Shares are as of the last `schedule` call.
    pub fn queues(&self) -> Vec<QueueSnapshot> {
        self.queues
            .iter()
            .map(|q| QueueSnapshot {
                queue: q.path.clone(),
                leaf: q.is_leaf(),
                weight: q.weight,
                min: q.min,
                max: q.max,
                usage: q.usage,
                demand: q.demand(),
                steady: q.steady,
                instantaneous: q.instantaneous,
                running_apps: q.running_apps,
                waiting_apps: q.waiting_apps,
                max_running_apps: q.max_running_apps,
            })
            .collect()
    }

    /// One queue's figures by its index in the cluster configuration. Shares are as of the last
    /// `schedule` call. Panics on an index the configuration does not have.
    pub fn queue_stat(&self, queue: usize) -> QueueStat {
        let q = &self.queues[queue];
        QueueStat {
            usage: q.usage,
            pending: q.pending,
            steady: q.steady,
            instantaneous: q.instantaneous,
            running_apps: q.running_apps,
            waiting_apps: q.waiting_apps,
        }
    }

    /// The sum of all nodes' resources.
    pub fn cluster_total(&self) -> Resources {
        self.nodes.total
    }

    /// Resources held by running containers and placeholders.
    pub fn cluster_used(&self) -> Resources {
        self.nodes.used
    }

    /// GPUs in use, in thousandths: whole GPUs given out plus the fractions of shared ones (a
    /// pod asking for half a GPU counts 500), as the GPU-sharing literature counts allocation.
    pub fn gpu_milli_used(&self) -> u64 {
        self.nodes.used.gpu * u64::from(crate::nodes::GPU_MILLI) + self.nodes.frac_milli
    }

    /// Resources held by placeholders: room kept for gangs that have not started (counted in
    /// `cluster_used` and in their queues' usage, unknown to the host).
    pub fn placeholder_room(&self) -> Resources {
        self.placeholder_room
    }

    /// Gangs whose placeholders were released because they did not start in time.
    pub fn gang_timeouts(&self) -> u64 {
        self.gang_timeouts
    }

    pub fn node_count(&self) -> usize {
        self.nodes.count()
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Why `job` is pending, running or losing containers.
    pub fn explain(&self, job: JobId) -> Result<Explanation, EngineError> {
        let slot = self.slot_of(job)?;
        let j = self.job(slot);
        let leaf = &self.queues[j.leaf as usize];
        let mut reasons = Vec::new();
        let status = match j.state {
            JobState::Waiting => {
                if let Some(q) = self.full_queue_on_path(j.leaf) {
                    let q = &self.queues[q as usize];
                    let setting = if self.capacity_mode() { "max_parallel_apps" } else { "max_running_apps" };
                    reasons.push(format!(
                        "pending because {} is at {setting} {} ({} running, {} waiting)",
                        q.path,
                        q.max_running_apps.unwrap_or_default(),
                        q.running_apps,
                        q.waiting_apps
                    ));
                } else if self.user_full(j.user) {
                    reasons.push(format!(
                        "pending because user {} is at user_max_running_apps {}",
                        self.users[j.user as usize].name,
                        self.config.scheduler.user_max_running_apps.unwrap_or_default()
                    ));
                }
                JobStatus::Waiting
            }
            JobState::Runnable => {
                self.runnable_reasons(slot, &mut reasons);
                JobStatus::Runnable
            }
        };
        reasons.extend(self.guarantee_reason(slot));
        if let Some(reason) = &j.last_preempted {
            if !j.outgoing.is_zero() {
                reasons.push(format!("{} of its containers are marked: {reason}", j.outgoing));
            }
            if j.preempted_count > 0 {
                reasons.push(format!("lost {} container(s): {reason}", j.preempted_count));
            }
        }
        Ok(Explanation {
            job,
            queue: leaf.path.clone(),
            status,
            usage: j.usage,
            fair_share: self.fair_share_of(slot),
            pending: j.pending,
            pending_containers: j.pending_containers,
            running_containers: j.containers.len(),
            marked: j.outgoing,
            reasons,
        })
    }

    /// A gang's wait: how many of its containers fit now and the room it holds.
    fn gang_reason(&self, slot: JobSlot) -> String {
        let j = self.job(slot);
        let held = j.placeholders.len() as u64;
        let g = j.requests.front().map_or(0, |r| r.gang);
        let missing: u64 = j.requests.iter().filter(|r| r.gang == g).map(|r| u64::from(r.count)).sum();
        let total = held + missing;
        let fit = held + self.gang_fits_now(slot).min(missing);
        let mut s = format!(
            "gang of {total} waits: {fit} of {total} containers fit (all start together or none does)"
        );
        match (j.gang_since, j.gang_deadline) {
            (Some(since), Some(deadline)) => s.push_str(&format!(
                "; it holds room for {held} of them (placeholders) since {since}, released and sent to the \
                 back of the queue at {deadline} if it has not started (gang_timeout {})",
                self.config.scheduler.gang_timeout
            )),
            (Some(since), None) => s.push_str(&format!(
                "; it holds room for {held} of them (placeholders) since {since}, until it starts (gang_timeout 0s)"
            )),
            _ => {}
        }
        if self.barred(slot) {
            s.push_str(
                "; its placeholders timed out and no gang has started since, so it takes no room \
                 until one does (the room it gave up went to other gangs first)",
            );
        }
        if fit < total {
            if let Some(holders) = self.placeholder_holders(slot) {
                s.push_str(&format!("; {holders}"));
            }
        }
        s
    }

    /// "nodes 1–4 held by placeholders of jobs 5, 6, 7": the room other gangs hold, by node id
    /// and job id (at most 10 of each named).
    fn placeholder_holders(&self, slot: JobSlot) -> Option<String> {
        if self.placeholder_room.is_zero() {
            return None;
        }
        let mut nodes = std::collections::BTreeSet::new();
        let mut jobs = std::collections::BTreeSet::new();
        for c in self.containers.iter().filter_map(|e| e.container.as_ref()) {
            if c.placeholder && c.job != slot {
                nodes.insert(self.nodes.slots[c.node as usize].id.0);
                jobs.insert(self.job(c.job).id.0);
            }
        }
        if jobs.is_empty() {
            return None;
        }
        let node_list = ranges(&nodes.into_iter().collect::<Vec<_>>());
        let job_list = listed(&jobs.into_iter().collect::<Vec<_>>());
        let (n, j) = (
            if node_list.contains(['–', ',']) { "nodes" } else { "node" },
            if job_list.contains(',') { "jobs" } else { "job" },
        );
        Some(format!("{n} {node_list} held by placeholders of {j} {job_list}"))
    }

    /// Where a job stands under EASY backfilling, if a reservation was made in the last pass.
    fn easy_reason(&self, slot: JobSlot) -> Option<String> {
        let shadow = self.shadow.as_ref()?;
        if shadow.job == slot {
            return Some(format!(
                "EASY backfilling: reserved to start at {} on {} node(s), when the running work is \
                 expected to have ended (by its walltimes); later jobs start first only if they end by \
                 then or fit in the room it leaves",
                shadow.start,
                shadow.spare.len()
            ));
        }
        let gang = self.job(slot).requests.front().is_some_and(|r| r.gang != 0);
        gang.then(|| {
            format!(
                "EASY backfilling: {} holds the reservation (start at {}); this job starts first only if \
                 it fits now without delaying that start",
                self.job(shadow.job).id,
                shadow.start
            )
        })
    }

    /// Why a runnable job waits, what it holds, and where its starvation stands — each
    /// sentence stating the rule the engine applies.
    fn runnable_reasons(&self, slot: JobSlot, reasons: &mut Vec<String>) {
        let j = self.job(slot);
        let leaf = &self.queues[j.leaf as usize];
        let node_name = |n: NodeSlot| self.nodes.slots[n as usize].id;
        if let Some(front) = j.requests.front() {
            let r = front.resources;
            let am = if self.next_is_am(slot) { "application master" } else { "container" };
            let needs = describe_ask(self, front);
            let gang = (front.gang != 0).then(|| self.gang_reason(slot));
            reasons.push(match self.blocker(slot) {
                Some(Blocker::QueueMax(q)) => {
                    let q = &self.queues[q as usize];
                    format!(
                        "pending because {} is at its max {} (using {}; next {am} {r})",
                        q.path, q.max, q.usage
                    )
                }
                Some(Blocker::AmShare { limit }) if self.capacity_mode() => format!(
                    "pending because its application master ({r}) would put {}'s AM usage {} over the AM limit \
                     {limit}: max_am_percent {} × the larger of its capacity {} and its max capacity {} \
                     within the cluster, rounded up to the minimum allocation",
                    leaf.path,
                    leaf.am_usage,
                    leaf.am_share.unwrap_or(1.0),
                    leaf.min,
                    leaf.max
                ),
                Some(Blocker::UserLimit { limit }) => format!(
                    "pending because user {} holds {} in {}, over the user limit {limit} (capacity mode: \
                     user_limit_factor, min_user_percent and the active users' share of the queue; see \
                     docs/semantics.md)",
                    self.users[j.user as usize].name,
                    self.user_standing(slot).map(|(_, used)| used).unwrap_or_default(),
                    leaf.path
                ),
                Some(Blocker::AmShare { limit }) => format!(
                    "pending because its application master ({r}) would put {}'s AM usage {} over {limit}: \
                     max_am_share {} × the leaf's fair share {}, where a resource's share is 0 (a fair \
                     parent shares memory only) × min(free in the cluster, the leaf's max), rounded up",
                    leaf.path,
                    leaf.am_usage,
                    leaf.am_share.unwrap_or(1.0),
                    leaf.instantaneous
                ),
                Some(Blocker::LabelMax { queue, label, max, used }) => format!(
                    "pending because {} is at its max capacity in node label {}'s partition: {max} MiB \
                     (using {used} MiB; next {am} {r})",
                    self.queues[queue as usize].path,
                    self.label_name(label)
                ),
                Some(Blocker::ContainerLimit) => format!(
                    "pending because the engine holds its limit of {} containers at once (a bound on \
                     memory; weir simulate --max-containers)",
                    self.container_limit
                ),
                Some(Blocker::NoRoom) if gang.is_some() => gang.clone().unwrap_or_default(),
                Some(Blocker::NoRoom) => {
                    let held = self
                        .nodes
                        .reserved
                        .iter()
                        .filter(|&&n| self.nodes.slots[n as usize].held_for() != Some(slot))
                        .count();
                    let others = if held > 0 {
                        format!("; {held} node(s) are held for other jobs")
                    } else {
                        String::new()
                    };
                    format!(
                        "pending because no node has room for its next {am} {r}{needs} (largest free room on a \
                         node not held for another job {}; cluster {} of {} used{others})",
                        self.nodes.largest_free(),
                        self.nodes.used,
                        self.nodes.total
                    )
                }
                None => "pending: room is free; the next scheduling pass will place it".to_string(),
            });
            if let Some(easy) = self.easy_reason(slot) {
                reasons.push(easy);
            }
        } else if j.containers.is_empty() {
            reasons.push("runnable, with no containers requested".to_string());
        }
        for &n in &j.reservations {
            match self.hold_kind(n) {
                Some(Hold::Reserved) => reasons.push(format!(
                    "{} is reserved for it: nobody else is placed there until its next container fits \
                     (it is below its fair share; a job may reserve up to {}% of the nodes)",
                    node_name(n),
                    self.config.scheduler.reservable_nodes * 100.0
                )),
                Some(Hold::Preempted) => reasons.push(format!(
                    "{} is held for it while containers preempted there for it drain",
                    node_name(n)
                )),
                None => {}
            }
        }
        if let (Some(timeout), Some(since)) = (leaf.fair_share_timeout, j.fair_clock) {
            if self.fair_target(slot).memory > j.usage.memory || self.starved.contains(&Starver::Job(slot)) {
                let state = if self.starved.contains(&Starver::Job(slot)) { "starved" } else { "below it" };
                reasons.push(format!(
                    "fair-share target {} = min({} × fair share {}, demand {}); {state}, last at it {since} \
                     (fair-share preemption timeout {timeout})",
                    self.fair_target(slot),
                    leaf.fair_share_threshold,
                    self.fair_share_of(slot),
                    j.demand()
                ));
            }
        }
        if self.starved.contains(&Starver::Leaf(j.leaf)) {
            reasons.push(format!(
                "{} is below its min-share target {} (min(min share, demand)) past its min-share preemption timeout",
                leaf.path,
                self.min_target(j.leaf)
            ));
        }
        if !j.min_share_starvation.is_zero() {
            reasons.push(format!(
                "{} of its leaf's min-share starvation is attributed to it",
                j.min_share_starvation
            ));
        }
        if j.recheck_at > self.now {
            reasons.push(format!(
                "preemption was tried for it; its starvation is looked at again at {} (kill_wait + 14s, as YARN)",
                j.recheck_at
            ));
        }
        if !j.incoming.is_zero() {
            reasons.push(format!("{} is being preempted from other jobs on its behalf", j.incoming));
        }
    }
}

/// Sorted ids as ranges: "1–4, 7, 9–10" (at most 10 ranges, then "…").
fn ranges(ids: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut k = i;
        while k + 1 < ids.len() && ids[k + 1] == ids[k] + 1 {
            k += 1;
        }
        if out.len() == 10 {
            out.push("…".to_string());
            break;
        }
        out.push(if k == i { ids[i].to_string() } else { format!("{}–{}", ids[i], ids[k]) });
        i = k + 1;
    }
    out.join(", ")
}

/// Sorted ids, at most 10, then how many more.
fn listed(ids: &[u64]) -> String {
    let mut s: Vec<String> = ids.iter().take(10).map(u64::to_string).collect();
    if ids.len() > 10 {
        s.push(format!("and {} more", ids.len() - 10));
    }
    s.join(", ")
}
