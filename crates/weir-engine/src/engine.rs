//! The engine: state, construction and the input handlers. Scheduling passes live in
//! `placement.rs`, running-app limits in `admission.rs`, preemption in `preemption.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};

use weir_model::{ClusterConfig, NodeGroup, QueuePath, Resources, Time};

use crate::decision::Decision;
use crate::error::EngineError;
use crate::ids::{ContainerId, JobId, NodeId};
use crate::input::{Input, JobSpec, NodeSpec};
use crate::nodes::Nodes;
use crate::sorted::{SortedSet, StartOrder};
use crate::state::{Container, Job, JobSlot, JobState, Queue, QueueIx, User};

/// A slot of the container slab; the generation makes stale ids detectable.
#[derive(Debug, Default)]
pub(crate) struct ContainerEntry {
    pub generation: u32,
    pub container: Option<Container>,
}

/// The scheduler. Feed it inputs stamped with `now`, call [`Engine::schedule`], carry out the
/// decisions, and come back at [`Engine::next_wakeup`] at the latest.
#[derive(Debug)]
pub struct Engine {
    pub(crate) config: ClusterConfig,
    pub(crate) queues: Vec<Queue>,
    pub(crate) queue_by_path: HashMap<QueuePath, QueueIx>,
    pub(crate) nodes: Nodes,
    pub(crate) jobs: Vec<Option<Job>>,
    pub(crate) free_jobs: Vec<JobSlot>,
    pub(crate) job_by_id: HashMap<JobId, JobSlot>,
    pub(crate) containers: Vec<ContainerEntry>,
    pub(crate) free_containers: Vec<u32>,
    pub(crate) users: Vec<User>,
    user_by_name: HashMap<String, u32>,
    pub(crate) decisions: Vec<Decision>,
    pub(crate) now: Time,
    /// Scheduling pass number; the per-pass marks of queues and leaves compare against it.
    pub(crate) pass: u64,
    pub(crate) next_seq: u64,
    /// Steady shares need recomputing (tree or cluster size changed).
    pub(crate) steady_dirty: bool,
    /// The set of active queues changed: every instantaneous share must be recomputed.
    pub(crate) shares_dirty: bool,
    /// Leaves that became active or idle (their first runnable job came or their last left)
    /// since instantaneous shares were last brought up to date (`shares.rs`: only the parents
    /// whose pool or children's activity changed split their pool again).
    pub(crate) activity_changed: Vec<QueueIx>,
    /// Leaves whose runnable jobs changed: their jobs' shares must be recomputed.
    pub(crate) job_shares_dirty: BTreeSet<QueueIx>,
    /// Preemption kill times: (kill_at, container).
    pub(crate) kills: BinaryHeap<Reverse<(Time, ContainerId)>>,
    /// Starvation timers: when a job or leaf may become starved, or a job's starvation is to
    /// be checked again after preemption was tried for it.
    pub(crate) starvation_timers: BinaryHeap<Reverse<(Time, Starver)>>,
    /// Jobs whose usage, demand, share or state changed since the last starvation check.
    pub(crate) starvation_dirty: BTreeSet<JobSlot>,
    /// Queues set aside from their parents' ordered child sets for the rest of this pass
    /// (`fair_children.rs`).
    pub(crate) parked: Vec<QueueIx>,
    /// Jobs that failed to place in this pass, out of their lanes until it ends (`ready.rs`).
    pub(crate) set_aside: Vec<JobSlot>,
    /// Scratch for `first_ready`: jobs passed over as certain to fail (kept for its allocation).
    pub(crate) passed_over: Vec<crate::state::ReadyEntry>,
    /// Scratch for `first_in_lane`: the failed entries a walk went past.
    pub(crate) walked_failed: Vec<crate::state::ReadyEntry>,
    /// Queues whose key in their parent's ordered child set is to be worked out again before
    /// the next descent (`fair_children.rs`).
    pub(crate) rekey_pending: Vec<QueueIx>,
    /// Leaves whose min share changed (the cluster's size did) since the last check.
    pub(crate) min_share_dirty: BTreeSet<QueueIx>,
    /// Jobs and leaves starved past their timeout as of the last check.
    pub(crate) starved: BTreeSet<Starver>,
    /// Whether cluster utilization was above the preemption threshold at the end of the last
    /// pass (YARN's `shouldAttemptPreemption`); starvation is looked at only while it is.
    pub(crate) gate_open: bool,
    /// When the gate last closed: the last time starvation was looked at.
    pub(crate) gate_closed_at: Time,
    /// Reservations made, turned into containers, and let go unused, since the start.
    pub(crate) reservation_counts: crate::reservation::ReservationStats,
    /// The pass, and the container sizes for which no node could be reserved in it: larger
    /// ones are not looked for again in that pass (holds change only before placement).
    pub(crate) reserve_misses: (u64, Vec<crate::nodes::Ask>),
    /// Jobs given min-share starvation in the last preemption pass (reset at the next).
    pub(crate) min_share_given: Vec<JobSlot>,
    /// Sum of every job's pending demand, runnable or not; inputs that would make it overflow
    /// are refused, so every sum of pending demand in the engine stays exact.
    pub(crate) total_pending: Resources,
    /// Running containers with a walltime, by expected end: what EASY backfilling plans with
    /// (kept only under `backfill: easy`).
    pub(crate) ends: BTreeSet<(Time, ContainerId)>,
    /// Placeholder timeouts: (when, job). Stale entries are skipped.
    pub(crate) gang_timers: BinaryHeap<Reverse<(Time, JobSlot)>>,
    /// The EASY reservation of the last pass: the first gang that could not start and when it
    /// will (`backfill.rs`).
    pub(crate) shadow: Option<crate::backfill::Shadow>,
    /// Conservative backfilling's reservations of the last pass (`conservative.rs`).
    pub(crate) bookings: Vec<crate::conservative::Booking>,
    /// The most containers (placeholders included) that may exist at once: a memory bound.
    pub(crate) container_limit: usize,
    /// The pass in which the container limit stopped placement.
    pub(crate) limited_pass: u64,
    /// Gangs whose placeholders timed out since the start.
    pub(crate) gang_timeouts: u64,
    /// Gangs started since the start (a timed-out gang's bar lasts until the next).
    pub(crate) gang_starts: u64,
    /// Room held by placeholders now.
    pub(crate) placeholder_room: Resources,
    /// The pass, and the EASY head of that pass that got no reserved start (it holds room).
    pub(crate) shadow_less_head: Option<(u64, JobSlot)>,
    /// Jobs tried in this pass since its EASY head was chosen (`backfill_depth` bounds it).
    pub(crate) backfill_tried: u32,
    /// Capacity mode's proportional preemption between rounds (`capacity_preemption.rs`).
    pub(crate) rounds: crate::capacity_preemption::Rounds,
    pub(crate) label_usage: crate::capacity_labels::LabelUsage,
    /// Capacity mode's users per leaf (`capacity_users.rs`).
    pub(crate) user_table: crate::capacity_users::UserTable,
    /// Per-job guarantees set by the host (`guarantee.rs`).
    pub(crate) guarantees: crate::guarantee::Guarantees,
}

/// The default [`Engine::set_container_limit`]: about 350 bytes each in the engine and a host
/// that keeps a record per running task, so well under 2 GB however large the input.
pub const DEFAULT_CONTAINER_LIMIT: usize = 2_000_000;

/// Something that can starve: a job (fair share) or a leaf queue (min share).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Starver {
    Job(JobSlot),
    Leaf(QueueIx),
}

impl Engine {
    /// An engine with the configured queue tree and no nodes: add them with `on_node_added`.
    pub fn new(config: ClusterConfig) -> Result<Engine, EngineError> {
        let rounding = config.scheduler.rounding;
        let mut queues = Vec::with_capacity(config.queues.len());
        let mut queue_by_path = HashMap::new();
        for (i, q) in config.queues.iter().enumerate() {
            queue_by_path.insert(q.path.clone(), i as QueueIx);
            queues.push(Queue {
                path: q.path.clone(),
                name: q.name.clone(),
                name_rank: 0,
                parent: q.parent.map(|p| p as QueueIx),
                children: q.children.iter().map(|&c| c as QueueIx).collect(),
                subtree_end: 0,
                weight: crate::fair_share::weight(q.weight, rounding),
                policy: q.policy,
                job_order: q.job_order,
                size_based_weight: q.capacity.as_ref().is_some_and(|c| c.size_based_weight),
                parent_policy: q.parent.map_or(q.policy, |p| config.queues[p].policy),
                priority: q.priority,
                max_running_apps: q.max_running_apps,
                am_share: q.am_share,
                allow_preemption_from: q.allow_preemption_from,
                gang_preemption: q.gang_preemption,
                fair_share_timeout: q.fair_share_preemption_timeout,
                fair_share_threshold: q.fair_share_preemption_threshold,
                min_share_timeout: q.min_share_preemption_timeout,
                min: Resources::ZERO,
                max: Resources::UNBOUNDED,
                usage: Resources::ZERO,
                pending: Resources::ZERO,
                pending_containers: 0,
                am_usage: Resources::ZERO,
                running_apps: 0,
                waiting_apps: 0,
                runnable: BTreeSet::new(),
                split: Default::default(),
                holding: BTreeSet::new(),
                waiting: BTreeMap::new(),
                waiting_heads: BTreeSet::new(),
                steady: Resources::ZERO,
                instantaneous: Resources::ZERO,
                ready: SortedSet::new(),
                ready_am: SortedSet::new(),
                am_blocked_pass: 0,
                am_shapes: Default::default(),
                holders: 0,
                ready_jobs: 0,
                ready_shapes: Default::default(),
                smallest: Resources::ZERO,
                exhausted_pass: 0,
                kids: Default::default(),
                kid_key: None,
                rekey_pending: false,
                min_clock: None,
                min_timer: None,
            });
        }
        for i in (0..queues.len()).rev() {
            let end = queues[i]
                .children
                .last()
                .map(|&c| queues[c as usize].subtree_end)
                .unwrap_or(i as QueueIx + 1);
            queues[i].subtree_end = end;
        }
        for p in 0..queues.len() {
            let mut children = queues[p].children.clone();
            children.sort_by(|&a, &b| queues[a as usize].name.cmp(&queues[b as usize].name));
            let mut rank = 0;
            for (i, &c) in children.iter().enumerate() {
                if i > 0 && queues[c as usize].name != queues[children[i - 1] as usize].name {
                    rank = i as u32;
                }
                queues[c as usize].name_rank = rank;
            }
        }
        let mut engine = Engine {
            config,
            queues,
            queue_by_path,
            nodes: Nodes::default(),
            jobs: Vec::new(),
            free_jobs: Vec::new(),
            job_by_id: HashMap::new(),
            containers: Vec::new(),
            free_containers: Vec::new(),
            users: Vec::new(),
            user_by_name: HashMap::new(),
            decisions: Vec::new(),
            now: Time::ZERO,
            pass: 1,
            next_seq: 0,
            steady_dirty: true,
            shares_dirty: true,
            activity_changed: Vec::new(),
            job_shares_dirty: BTreeSet::new(),
            kills: BinaryHeap::new(),
            starvation_timers: BinaryHeap::new(),
            starvation_dirty: BTreeSet::new(),
            parked: Vec::new(),
            set_aside: Vec::new(),
            passed_over: Vec::new(),
            walked_failed: Vec::new(),
            rekey_pending: Vec::new(),
            min_share_dirty: BTreeSet::new(),
            starved: BTreeSet::new(),
            gate_open: false,
            gate_closed_at: Time::ZERO,
            reservation_counts: Default::default(),
            total_pending: Resources::ZERO,
            min_share_given: Vec::new(),
            reserve_misses: (0, Vec::new()),
            ends: BTreeSet::new(),
            gang_timers: BinaryHeap::new(),
            shadow: None,
            bookings: Vec::new(),
            container_limit: DEFAULT_CONTAINER_LIMIT,
            limited_pass: 0,
            gang_timeouts: 0,
            gang_starts: 0,
            placeholder_room: Resources::ZERO,
            shadow_less_head: None,
            backfill_tried: 0,
            rounds: Default::default(),
            label_usage: Default::default(),
            user_table: Default::default(),
            guarantees: Default::default(),
        };
        engine.resolve_limits();
        engine.set_up_partitions();
        Ok(engine)
    }

    /// An engine with the nodes the configuration lists, numbered from 0 in file order.
    pub fn with_config_nodes(config: ClusterConfig) -> Result<Engine, EngineError> {
        let groups: Vec<NodeGroup> = config.nodes.clone();
        let mut engine = Engine::new(config)?;
        let mut specs = Vec::new();
        for g in &groups {
            for _ in 0..g.count {
                let id = NodeId(specs.len() as u64);
                specs.push(NodeSpec {
                    id,
                    resources: g.resources,
                    label: g.label.clone(),
                    gpu_model: g.gpu_model.clone(),
                });
            }
        }
        engine.on_nodes_added(Time::ZERO, specs)?;
        Ok(engine)
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The number of a [`Selector`] for requests ([`Request::on`]), registered the first time.
    /// An empty selector is 0: every node.
    pub fn selector(&mut self, selector: &crate::input::Selector) -> crate::input::SelectorId {
        self.nodes.selector(selector)
    }

    /// At most this many containers (placeholders included) exist at once; past it nothing
    /// more starts until some end, and `explain` says so. A bound on memory, counted in
    /// containers: [`DEFAULT_CONTAINER_LIMIT`] unless set.
    pub fn set_container_limit(&mut self, limit: usize) {
        self.container_limit = limit.max(1);
    }

    /// Apply one input. Equivalent to the matching `on_*` method.
    pub fn handle(&mut self, now: Time, input: Input) -> Result<(), EngineError> {
        match input {
            Input::NodeAdded(spec) => self.on_node_added(now, spec),
            Input::NodeRemoved(id) => self.on_node_removed(now, id).map(|_| ()),
            Input::JobSubmitted(spec) => self.on_job_submitted(now, spec),
            Input::RequestsAdded { job, requests } => self.on_requests_added(now, job, requests),
            Input::RequestsCleared { job } => self.on_requests_cleared(now, job),
            Input::ContainerFinished(c) => self.on_container_finished(now, c),
            Input::JobFinished(job) => self.on_job_finished(now, job),
        }
    }

    pub(crate) fn advance(&mut self, now: Time) -> Result<(), EngineError> {
        if now < self.now {
            return Err(EngineError::TimeWentBackwards { now, last: self.now });
        }
        self.now = now;
        Ok(())
    }

    /// Min and max as resources, now that the cluster's size is known.
    fn resolve_limits(&mut self) {
        let total = self.nodes.total;
        let preemption = self.config.scheduler.preemption.enabled;
        for (i, (q, c)) in self.queues.iter_mut().zip(self.config.queues.iter()).enumerate() {
            q.min = c.min.resolve(&total);
            q.max = c.max.resolve(&total).component_max(&q.min);
            if preemption && q.is_leaf() && !q.min.is_zero() {
                self.min_share_dirty.insert(i as QueueIx);
            }
        }
        self.steady_dirty = true;
        self.shares_dirty = true;
        // Fair children's keys follow their min shares.
        self.rekey_all();
        // Dominant-share keys depend on the cluster's size.
        for slot in 0..self.jobs.len() as JobSlot {
            if self.jobs[slot as usize].as_ref().is_some_and(|j| j.ready.is_some()) {
                self.unready(slot);
                self.sync_ready(slot);
            }
        }
    }

    pub fn on_node_added(&mut self, now: Time, spec: NodeSpec) -> Result<(), EngineError> {
        self.on_nodes_added(now, vec![spec])
    }

    /// Add many nodes at once (a cluster starting up): queue limits given as a share of the
    /// cluster are resolved once, not once per node. On a duplicate id nothing is added.
    pub fn on_nodes_added(&mut self, now: Time, specs: Vec<NodeSpec>) -> Result<(), EngineError> {
        self.advance(now)?;
        let mut seen = std::collections::HashSet::with_capacity(specs.len());
        if let Some(dup) = specs.iter().find(|s| self.nodes.by_id.contains_key(&s.id) || !seen.insert(s.id)) {
            return Err(EngineError::DuplicateNode { node: dup.id });
        }
        let added = specs.iter().try_fold(self.nodes.total, |t, s| checked_add(&t, &s.resources));
        if added.is_none_or(|t| largest(&t) == u64::MAX) {
            return Err(EngineError::ClusterTooLarge { nodes: specs.len() });
        }
        for spec in &specs {
            self.nodes.add(spec);
        }
        self.resolve_limits();
        Ok(())
    }

    /// Remove a node. Its containers are lost: they are returned so the host can re-run their work.
    pub fn on_node_removed(&mut self, now: Time, id: NodeId) -> Result<Vec<ContainerId>, EngineError> {
        self.advance(now)?;
        let slot = *self.nodes.by_id.get(&id).ok_or(EngineError::UnknownNode { node: id })?;
        let on_node: Vec<ContainerId> = self
            .containers
            .iter()
            .filter_map(|e| e.container.as_ref())
            .filter(|c| c.node == slot)
            .map(|c| c.id)
            .collect();
        let mut lost = Vec::with_capacity(on_node.len());
        for c in on_node {
            // A placeholder is the engine's own: its container is asked for again here, and
            // the host never hears of it.
            let held = self.container(c).filter(|x| x.placeholder).and_then(|x| {
                self.job(x.job).placeholders.iter().find(|&&(p, _)| p == c).map(|&(_, r)| (x.job, r))
            });
            if let Some(gone) = self.release_container(c) {
                if gone.placeholder {
                    if let Some((job, request)) = held {
                        self.add_requests_front(job, vec![request]);
                    }
                } else {
                    lost.push(c);
                }
            }
        }
        if let Some(job) = self.nodes.slots[slot as usize].held_for() {
            self.release_hold(slot, job, false);
        }
        self.nodes.remove(slot);
        self.resolve_limits();
        Ok(lost)
    }

    pub fn on_job_submitted(&mut self, now: Time, spec: JobSpec) -> Result<(), EngineError> {
        self.advance(now)?;
        if self.job_by_id.contains_key(&spec.id) {
            return Err(EngineError::DuplicateJob { job: spec.id });
        }
        let requests = self.normalize(spec.id, spec.requests)?;
        let leaf = match self.queue_by_path.get(&spec.queue) {
            Some(&q) if self.queues[q as usize].is_leaf() => q,
            Some(_) => {
                let reason = format!("{} is not a leaf queue; jobs go to leaves only", spec.queue);
                self.decisions.push(Decision::JobRejected { job: spec.id, reason });
                return Ok(());
            }
            None => {
                let reason = format!("no queue {} in the cluster configuration", spec.queue);
                self.decisions.push(Decision::JobRejected { job: spec.id, reason });
                return Ok(());
            }
        };
        if let Some(reason) = self.capacity_rejection(leaf, &spec.user) {
            self.decisions.push(Decision::JobRejected { job: spec.id, reason });
            return Ok(());
        }
        let requests = match self.capacity_labels(leaf, requests) {
            Ok(r) => r,
            Err(reason) => {
                self.decisions.push(Decision::JobRejected { job: spec.id, reason });
                return Ok(());
            }
        };
        let user = self.user_index(&spec.user);
        let job = Job {
            id: spec.id,
            leaf,
            user,
            priority: spec.priority.unwrap_or(self.queues[leaf as usize].priority),
            submit_time: spec.submit_time,
            state: JobState::Waiting,
            requests: VecDeque::new(),
            pending: Resources::ZERO,
            pending_containers: 0,
            usage: Resources::ZERO,
            containers: StartOrder::new(),
            // Without an AM, no container is one unless its request says so.
            am_started: !spec.has_am,
            am_running: false,
            ready: None,
            failed_pass: 0,
            aside: false,
            order_time: spec.submit_time,
            placeholders: Vec::new(),
            gang_since: None,
            gang_deadline: None,
            gang_barred: None,
            // YARN starts lastTimeAtFairShare at the app's start.
            fair_clock: Some(now),
            fair_timer: None,
            min_share_starvation: Resources::ZERO,
            incoming: Resources::ZERO,
            outgoing: Resources::ZERO,
            reservations: Vec::new(),
            last_preempted: None,
            preempted_count: 0,
            recheck_at: Time::ZERO,
        };
        let slot = match self.free_jobs.pop() {
            Some(s) => {
                self.jobs[s as usize] = Some(job);
                s
            }
            None => {
                self.jobs.push(Some(job));
                (self.jobs.len() - 1) as JobSlot
            }
        };
        self.job_by_id.insert(spec.id, slot);
        self.add_requests(slot, requests);
        self.admit_or_wait(slot);
        Ok(())
    }

    pub(crate) fn user_by_name(&self, name: &str) -> Option<u32> {
        self.user_by_name.get(name).copied()
    }

    fn user_index(&mut self, name: &str) -> u32 {
        if let Some(&u) = self.user_by_name.get(name) {
            return u;
        }
        let u = self.users.len() as u32;
        self.users.push(User { name: name.to_string(), running: 0 });
        self.user_by_name.insert(name.to_string(), u);
        u
    }

    /// Whether the engine holds this job: false once it ended, or when its submission was
    /// rejected (`Decision::JobRejected`, which the next `schedule` returns), so that a host
    /// sends it nothing more.
    pub fn has_job(&self, job: JobId) -> bool {
        self.job_by_id.contains_key(&job)
    }

    pub(crate) fn slot_of(&self, job: JobId) -> Result<JobSlot, EngineError> {
        self.job_by_id.get(&job).copied().ok_or(EngineError::UnknownJob { job })
    }

    pub(crate) fn job(&self, slot: JobSlot) -> &Job {
        self.jobs[slot as usize].as_ref().expect("live job slot")
    }

    pub(crate) fn job_mut(&mut self, slot: JobSlot) -> &mut Job {
        self.jobs[slot as usize].as_mut().expect("live job slot")
    }

    /// The queues from `leaf` up to root, leaf first.
    pub(crate) fn path_up(&self, leaf: QueueIx) -> impl Iterator<Item = QueueIx> + '_ {
        std::iter::successors(Some(leaf), move |&q| self.queues[q as usize].parent)
    }
}

/// Componentwise checked sum; `None` on overflow.
pub(crate) fn checked_add(a: &Resources, b: &Resources) -> Option<Resources> {
    Some(Resources::new(
        a.cpu.checked_add(b.cpu)?,
        a.memory.checked_add(b.memory)?,
        a.gpu.checked_add(b.gpu)?,
    ))
}

/// The largest component (`u64::MAX` means unbounded, so no sum may reach it).
pub(crate) fn largest(r: &Resources) -> u64 {
    r.cpu.max(r.memory).max(r.gpu)
}
