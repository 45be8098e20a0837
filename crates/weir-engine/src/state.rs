//! The engine's records of queues, jobs and containers. Indices, not pointers: a queue is a
//! `u32` into `Engine::queues` (preorder, root = 0), a job a slot in the job slab.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use weir_model::{Duration, Policy, QueuePath, Resources, Time};

use crate::decision::PreemptReason;
use crate::ids::{ContainerId, JobId};
use crate::input::{Request, SelectorId};
use crate::nodes::Ask;
use crate::sorted::{SortedSet, StartOrder};

pub(crate) type QueueIx = u32;
pub(crate) type JobSlot = u32;
pub(crate) type NodeSlot = u32;

/// Where a waiting job stands in promotion order: smaller runs first.
pub(crate) type PromotionKey = (i64, u64, u64);

/// Where a ready job stands in its leaf's order: smaller is served first (see `ready.rs`).
/// Packed in two words compared as integers (issue 22 §3: the lanes' searches on every
/// placement compared three-word arrays, then two more fields): from the top bits down, the
/// policy's order value (96 bits: one `u64` above 32 zero bits, or drf's three shares as `f32`
/// bits), the submit time, the job's id and its slot ([`JobKey::new`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct JobKey(u128, u128);

impl JobKey {
    /// `order` holds at most 96 bits.
    pub(crate) fn new(order: u128, submit: u64, id: u64, slot: JobSlot) -> JobKey {
        debug_assert!(order >> 96 == 0, "order value {order:#x} wider than 96 bits");
        let submit = u128::from(submit);
        JobKey(
            (order << 32) | (submit >> 32),
            ((submit & 0xffff_ffff) << 96) | (u128::from(id) << 32) | u128::from(slot),
        )
    }
}

/// A runnable job's place in its leaf's share split: (minus its priority under the `priority`
/// policy, else 0; submit time; id; slot). The first gets a fifo or priority leaf's whole share;
/// under `rounding: exact` the first ones get the units an equal split leaves over.
pub(crate) type RunnableKey = (i64, u64, u64, JobSlot);

/// How a leaf's instantaneous share is split among its runnable jobs, kept in O(1) per change
/// so that a leaf with thousands of waiting jobs does not rewrite every job's share each time
/// one arrives or leaves: a job's share is read from it (`Engine::fair_share_of`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum JobSplit {
    #[default]
    Nobody,
    /// `fair`, `drf`: per resource, every job gets `base`; jobs whose key is below `cut` one more.
    Equal { base: Resources, cut: [Option<RunnableKey>; 3] },
    /// `fifo`, `priority`: the first job gets the whole share, the others none.
    First { job: JobSlot, share: Resources },
}

/// A ready job in its lane: its key and its slot (unique: the order is the key's). The size of
/// its next container is in the job's `ready`; keeping it in the entry too made every move of
/// the entry in its B-tree (one per placement) shift 80 bytes instead of 48.
pub(crate) type ReadyEntry = (JobKey, JobSlot);

impl Request {
    /// What one of its containers needs from a node.
    pub(crate) fn ask(&self) -> Ask {
        Ask { r: self.resources, milli: self.gpu_milli, selector: self.selector }
    }
}

#[derive(Debug)]
pub(crate) struct Queue {
    pub path: QueuePath,
    pub name: String,
    /// Its name's place among its siblings' names (equal names, equal places): the last
    /// tie-break between siblings, compared without reading the names.
    pub name_rank: u32,
    pub parent: Option<QueueIx>,
    pub children: Vec<QueueIx>,
    /// One past the last queue of this subtree: the subtree is `self..subtree_end` in preorder.
    pub subtree_end: QueueIx,
    /// As YARN holds it: a Java float under `rounding: yarn`.
    pub weight: f64,
    pub policy: Policy,
    /// A fifo leaf's job order (`ready.rs`).
    pub job_order: weir_model::JobOrder,
    /// A capacity-mode leaf with `ordering: fair` and `size_based_weight` (`ready.rs`).
    pub size_based_weight: bool,
    /// The policy that computes this queue's fair share: its parent's (root: its own). A fair
    /// parent computes memory only, so YARN sees no cpu in the share (see `am_limit`).
    pub parent_policy: Policy,
    pub priority: i32,
    pub max_running_apps: Option<u32>,
    /// The AM share applied to this leaf (`None`: no check).
    pub am_share: Option<f64>,
    pub allow_preemption_from: bool,
    /// Whether its running gangs may be taken (whole) by preemption.
    pub gang_preemption: weir_model::GangPreemption,
    pub fair_share_timeout: Option<Duration>,
    pub fair_share_threshold: f64,
    pub min_share_timeout: Option<Duration>,
    /// Resolved against the cluster's current size.
    pub min: Resources,
    /// Effective max: componentwise max(max, min).
    pub max: Resources,

    pub usage: Resources,
    /// Resources asked for and not yet given, over the whole subtree.
    pub pending: Resources,
    pub pending_containers: u64,
    pub am_usage: Resources,
    /// Runnable jobs in the subtree (what `max_running_apps` limits).
    pub running_apps: u32,
    /// Jobs in the subtree waiting for a running-app slot.
    pub waiting_apps: u32,
    /// Leaves only: runnable jobs, by their place in the share split.
    pub runnable: BTreeSet<RunnableKey>,
    /// Leaves only: how the leaf's share is split among them.
    pub split: JobSplit,
    /// Leaves only: the runnable jobs that hold containers (whose starvation can change with
    /// their share even while it stays above zero).
    pub holding: BTreeSet<JobSlot>,
    /// Leaves only: jobs waiting for a running-app slot, by user, each in promotion order.
    pub waiting: BTreeMap<u32, BTreeSet<(PromotionKey, JobSlot)>>,
    /// Leaves only: each waiting user's first job of `waiting`, in promotion order. The leaf's
    /// next promotion is the first head whose user is below the user limit, so a user at its
    /// limit with thousands of waiting jobs costs one skipped head, not thousands.
    pub waiting_heads: BTreeSet<(PromotionKey, JobSlot)>,
    pub steady: Resources,
    pub instantaneous: Resources,
    /// Leaves only: runnable jobs with pending containers whose next container is not an AM,
    /// in the leaf's order, less those set aside in the current pass (`ready.rs`). A `Vec`
    /// while small (`sorted.rs`): the served job moves back on every placement.
    pub ready: SortedSet<ReadyEntry>,
    /// Leaves only: the ready jobs whose next container is an application master, in the same
    /// order. A separate lane so that once one AM fails the AM share in a pass, the others are
    /// passed over at once (the limit only tightens as a pass places containers).
    pub ready_am: SortedSet<ReadyEntry>,
    /// Leaves only: the pass in which even the smallest AM of the lane failed the AM share.
    pub am_blocked_pass: u64,
    /// Leaves only: how many of its jobs hold a node (they try their held nodes even when a
    /// request as large already found no node in the pass).
    pub holders: u32,
    /// Leaves only: the sizes of the AMs in `ready_am`, per resource, counted.
    pub am_shapes: [BTreeMap<u64, u32>; 3],
    /// Ready jobs in the subtree.
    pub ready_jobs: u32,
    /// The next request sizes of the ready jobs in the subtree, per resource, counted, so the
    /// smallest is at hand: a subtree whose smallest request cannot fit is skipped.
    pub ready_shapes: [BTreeMap<u64, u32>; 3],
    /// The componentwise smallest of `ready_shapes`, kept at hand: it is read for every
    /// child a pass looks at once a request has failed.
    pub smallest: Resources,
    /// The pass in which nothing under this queue could be placed; it is skipped for the rest
    /// of that pass (the componentwise smallest request can miss that every one is too big).
    pub exhausted_pass: u64,
    /// A fair parent in fair mode: its children with a ready job that are not set aside in
    /// this pass, in the order the descent serves them (`fair_children.rs`).
    pub kids: crate::fair_children::ChildSet,
    /// The key this queue sits under in its parent's `kids`, while it does.
    pub kid_key: Option<crate::fair_children::ChildKey>,
    /// Its key is to be worked out again before the next descent (`Engine::rekey_pending`).
    pub rekey_pending: bool,
    /// Leaves only: YARN's `lastTimeAtMinShare`. `None` while the leaf is at its min share;
    /// else the last time it was seen there (see `starvation.rs`).
    pub min_clock: Option<Time>,
    /// Leaves only: when the min-share timer last set for it falls due.
    pub min_timer: Option<Time>,
}

impl Queue {
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// Usage plus pending requests. YARN caps a queue's demand at its max share
    /// (`FSLeafQueue.updateDemand`), but no rule can tell the difference: demand is only ever
    /// compared with a min share, and the effective max is at least the min.
    pub fn demand(&self) -> Resources {
        self.usage + self.pending
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobState {
    /// Waiting for a running-app slot in its queues or for its user.
    Waiting,
    Runnable,
}

#[derive(Debug)]
pub(crate) struct Job {
    pub id: JobId,
    pub leaf: QueueIx,
    pub user: u32,
    pub priority: i32,
    /// YARN's app start time: ordering ties break on it, then on the id.
    pub submit_time: Time,
    pub state: JobState,
    pub requests: VecDeque<Request>,
    pub pending: Resources,
    pub pending_containers: u64,
    pub usage: Resources,
    /// Containers held, in start order (newest last): a sorted `Vec` in which an end marks its
    /// entry, ended entries dropped in bulk (`sorted.rs`; a job of a real trace holds
    /// thousands, ending in any order).
    pub containers: StartOrder<(u64, ContainerId)>,
    /// Whether it ever started a container (its first one is its AM).
    pub am_started: bool,
    /// Whether it holds a live application master (YARN's `isAmRunning`).
    pub am_running: bool,
    /// Its key, next container's needs and lane (AM or not) while it is in a ready set of its leaf.
    pub ready: Option<(JobKey, Ask, bool)>,
    /// The last pass in which it failed to place: lookups in its lane pass over it for the
    /// rest of that pass (`Engine::skip`).
    pub failed_pass: u64,
    /// It failed to place in the current pass and is out of its lane until the pass ends
    /// (`first_in_lane`, after walking past many such).
    pub aside: bool,
    /// Where it stands in its leaf's order: its submit time, or when its gang was last sent
    /// to the back of the queue (a placeholder timeout).
    pub order_time: Time,
    /// Placeholders held for its front gang while the gang accumulates room (`gang.rs`), each
    /// with the request (count 1) it holds room for, and when the first was taken.
    pub placeholders: Vec<(ContainerId, Request)>,
    pub gang_since: Option<Time>,
    /// When its placeholders time out (`gang_since` + the gang timeout).
    pub gang_deadline: Option<Time>,
    /// Set at a placeholder timeout to the engine's count of gang starts then: while no gang
    /// has started since, it takes no placeholders (`gang.rs`).
    pub gang_barred: Option<u64>,
    /// YARN's `lastTimeAtFairShare`: `None` while it is seen at its fair-share target; else
    /// the last time it was (see `starvation.rs`).
    pub fair_clock: Option<Time>,
    /// When the starvation timer last set for it falls due.
    pub fair_timer: Option<Time>,
    /// Min-share starvation of its leaf attributed to it in the last preemption pass.
    pub min_share_starvation: Resources,
    /// Resources being freed on its behalf by preemptions not yet carried out.
    pub incoming: Resources,
    /// Resources of its own containers marked for preemption.
    pub outgoing: Resources,
    /// Nodes held for it: reserved for its next container, or where preempted room drains.
    pub reservations: Vec<NodeSlot>,
    /// The last reason this job lost a container, and how many it lost in all.
    pub last_preempted: Option<PreemptReason>,
    pub preempted_count: u64,
    /// Not before this time is its starvation checked again (YARN's `nextStarvationCheck`:
    /// set after preemption was tried for it).
    pub recheck_at: Time,
}

impl Job {
    pub fn demand(&self) -> Resources {
        self.usage + self.pending
    }
}

#[derive(Debug)]
pub(crate) struct Container {
    pub id: ContainerId,
    pub job: JobSlot,
    pub node: NodeSlot,
    pub resources: Resources,
    pub am: bool,
    /// Global start sequence: larger is newer.
    pub seq: u64,
    /// Set when marked for preemption.
    pub preemption: Option<Marked>,
    /// Its gang (0: none), GPU fraction and selector, from the request it was started for. The
    /// rest of that request (tag, walltime) is kept only for a placeholder, in its job's
    /// `placeholders`, to start it or ask for it again: a copy in every container cost 12% of
    /// the simulator's instructions.
    pub gang: u32,
    pub gpu_milli: u32,
    pub selector: SelectorId,
    /// The GPU slot on its node its fraction went to (0 without one).
    pub gpu: u16,
    /// Room held for a gang that has not started yet: the host knows nothing of it.
    pub placeholder: bool,
    /// When it is expected to end (start + walltime), for EASY backfilling.
    pub expected_end: Option<Time>,
}

impl Container {
    pub fn ask(&self) -> Ask {
        Ask { r: self.resources, milli: self.gpu_milli, selector: self.selector }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Marked {
    pub kill_at: Time,
    pub for_job: JobSlot,
    pub reason: PreemptReason,
}

#[derive(Debug, Default)]
pub(crate) struct User {
    pub name: String,
    pub running: u32,
}
