//! Capacity mode's preemption: the YARN Capacity Scheduler's proportional policy
//! (`monitor/capacity/ProportionalCapacityPreemptionPolicy` with its `FifoCandidatesSelector` and
//! `PreemptableResourceCalculator`), written from its source. Fair mode's starvation-driven
//! preemption (`preemption.rs`) never runs in capacity mode, and this never runs in fair mode;
//! the container marks, the kill decisions, `explain` and the invariants are shared.
//!
//! Every `monitoring_interval` (rounds at multiples of it since time 0), a round:
//!
//! 1. **Ideal allocation** (`PreemptableResourceCalculator.computeIdealAllocation`): root's ideal
//!    is the cluster; level by level, each parent's ideal is water-filled among its children
//!    (`computeIdealResourceDistribution`, `computeFixpointAllocation`): a child starts at what
//!    it holds when within its guarantee, else at its guarantee plus what it holds beyond it
//!    that may not be taken (`untouchableExtra`: queues with preemption disallowed); then the
//!    rest is offered, most under-served first (ideal / guarantee, queue priorities as in the
//!    sibling order), in proportion to the guarantees of those still wanting (float shares,
//!    offers to the nearest MiB), each taking at
//!    most min(offer, max capacity − ideal, used + pending − ideal) and, for a leaf,
//!    max(guarantee, used) − ideal (`TempQueuePerPartition.offer`). Queues with no guarantee
//!    share what is left equally. A leaf's pending is capped by each user's headroom under the
//!    user limit (`getTotalPendingResourcesConsideringUserLimit`).
//! 2. **What to take** (`TempQueuePerPartition.assignPreemption`): a queue keeps
//!    max(ideal, min(used + pending, guarantee)); the rest of what it holds is its excess, all
//!    excesses of one level scaled down together so that they stay within
//!    `total_preemption_per_round` of the cluster.
//! 3. **Dead zone and pace** (`calculateResToObtainByPartitionForLeafQueues`): a leaf holding
//!    at most guarantee × (1 + `max_ignored_over_capacity`) loses nothing; otherwise this round
//!    asks for excess × `natural_termination_factor`, to the nearest MiB (halves up, YARN's
//!    `multiplyAndNormalizeUp`; so an excess below 2.5 MiB is left alone at the default 0.2).
//! 4. **Victims** (`FifoCandidatesSelector.selectCandidates`, `preemptFrom`,
//!    `preemptAMContainers`, `CapacitySchedulerPreemptionUtils.tryPreemptContainerAndDeductResToObtain`):
//!    leaf by leaf (weir: tree order), jobs in reverse scheduling order (lowest priority, newest
//!    first: `getPreemptionIterator`), each job's containers newest first; application masters
//!    are set aside and taken last, only while the leaf's AMs would still hold more than
//!    `max_am_percent` of its guarantee. A container is taken while the leaf still asks for
//!    something (so the last one may overshoot) and while it fits in what is left of the
//!    round's cap. Queues that disallow preemption (inherited, tier 1 by default) lose nothing.
//! 5. **Mark, then kill** (`preemptOrkillSelectedContainerAfterWait`): a chosen container not
//!    yet marked is marked (the owner is warned); one marked at least `max_wait_before_kill`
//!    ago and chosen again is killed. A marked container the round no longer chooses is
//!    unmarked: the need for it passed. (YARN forgets a mark only after twice the wait, so a
//!    container chosen again within that window is killed at once; weir starts its wait over.)
//!
//! All amounts are memory, as YARN's default resource calculator compares them; a container
//! without memory is never taken. The freed room goes to whoever the sibling order serves
//! first — under-guarantee queues — as in YARN, where nothing holds the node for them. weir
//! names in each mark the queue and job the room is meant for: the most under-served leaf with
//! demand (lowest used / guarantee), then the next, each up to min(ideal − used, pending).
//!
//! Gangs and placeholders are weir's: a placeholder is never taken; taking one member of a
//! running gang takes the whole gang (or none of it under `gang_preemption: protected`).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use weir_model::Time;

use crate::capacity::{user_limit, UserLimitInputs};
use crate::decision::{Decision, PreemptReason, Starvation};
use crate::engine::Engine;
use crate::ids::ContainerId;
use crate::state::{JobSlot, Marked, QueueIx};

/// The policy's state between rounds.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    /// When the next round is due.
    pub next: Time,
    /// Whether a round may find something new: the engine was called since the last round,
    /// or containers stay marked. Otherwise the next round would repeat the last one.
    pub wanted: bool,
    /// Containers marked by rounds (some may have ended since).
    pub marked: Vec<ContainerId>,
}

/// One queue as a round sees it (`TempQueuePerPartition`), memory in MiB.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IdealQueue {
    pub guaranteed: u64,
    pub max: u64,
    pub used: u64,
    /// Pending demand of runnable jobs, capped by user limits; a parent's is its children's.
    pub pending: u64,
    pub preemption_disabled: bool,
    pub leaf: bool,
    pub priority: i32,
    pub untouchable_extra: u64,
    pub preemptable_extra: u64,
    pub ideal: u64,
    /// What the level's computation would take back (`toBePreempted`).
    pub to_be_preempted: u64,
    /// What this round asks of a leaf after the dead zone and the pace (`actuallyToBePreempted`).
    pub to_obtain: u64,
}

/// The ideal-allocation computation over a tree in preorder (`parents[i] < i`, root 0).
pub struct IdealInputs<'a> {
    pub queues: &'a mut [IdealQueue],
    pub children: &'a [Vec<usize>],
    /// The most taken per round, memory (cluster × `total_preemption_per_round`).
    pub total_preemption_allowed: u64,
    pub max_ignored_over_capacity: f64,
    pub natural_termination_factor: f64,
}

/// Steps 1–3 of the module doc: ideal allocations, what each queue would lose, and what this
/// round asks of each leaf. Pure over its inputs, so tests can check hand-worked cases.
pub fn compute_ideal(i: IdealInputs) {
    let IdealInputs { queues, children, total_preemption_allowed, .. } = i;
    // updatePreemptableExtras, bottom-up (children come after their parent in preorder).
    for q in (0..queues.len()).rev() {
        let extra = queues[q].used.saturating_sub(queues[q].guaranteed);
        let (untouchable, preemptable) = if children[q].is_empty() {
            if queues[q].preemption_disabled {
                (extra, 0)
            } else {
                (0, extra)
            }
        } else {
            let childrens: u64 = children[q].iter().map(|&c| queues[c].preemptable_extra).sum();
            (extra.saturating_sub(childrens), childrens.min(extra))
        };
        queues[q].untouchable_extra = untouchable;
        queues[q].preemptable_extra = preemptable;
    }
    if queues.is_empty() {
        return;
    }
    queues[0].ideal = queues[0].guaranteed;
    for q in 0..queues.len() {
        if !children[q].is_empty() {
            let total = queues[q].ideal;
            distribute(queues, &children[q], total, total_preemption_allowed);
        }
    }
    for q in 0..queues.len() {
        let t = &mut queues[q];
        t.to_obtain = 0;
        if !children[q].is_empty() || t.preemption_disabled {
            continue;
        }
        let dead_zone = (t.guaranteed as f64 * (1.0 + i.max_ignored_over_capacity)) as u64;
        if t.used > dead_zone && t.to_be_preempted > 0 {
            t.to_obtain = half_up(t.to_be_preempted as f64 * i.natural_termination_factor);
        }
    }
}

/// `computeIdealResourceDistribution` for one level: `total` (the parent's ideal) among `level`.
fn distribute(queues: &mut [IdealQueue], level: &[usize], total: u64, allowed: u64) {
    let mut unassigned = total;
    let (with, without): (Vec<usize>, Vec<usize>) = level.iter().partition(|&&c| queues[c].guaranteed > 0);
    fixpoint(queues, &with, &mut unassigned, false);
    if !without.is_empty() && unassigned > 0 {
        fixpoint(queues, &without, &mut unassigned, true);
    }
    let needed: u64 = level.iter().map(|&c| queues[c].used.saturating_sub(queues[c].ideal)).sum();
    let scaling = if needed > allowed { allowed as f32 / needed as f32 } else { 1.0 };
    for &c in level {
        let t = &mut queues[c];
        // assignPreemption: keep max(ideal, min(used + pending, guaranteed)).
        let keep = t.ideal.max((t.used + t.pending).min(t.guaranteed));
        t.to_be_preempted =
            if t.used > keep { ((t.used - keep) as f64 * f64::from(scaling)) as u64 } else { 0 };
    }
}

/// `DefaultResourceCalculator.multiplyAndNormalizeUp` with a step of 1: to the nearest, halves up.
fn half_up(x: f64) -> u64 {
    (x + 0.5) as u64
}

/// ideal / guaranteed, or "most over" for a queue with none (`TQComparator.getIdealPctOfGuaranteed`).
fn ideal_pct(q: &IdealQueue) -> f64 {
    if q.guaranteed > 0 {
        q.ideal as f64 / q.guaranteed as f64
    } else {
        f64::from(i32::MAX)
    }
}

/// Most under-served first, with queue priorities (`PriorityUtilizationQueueOrderingPolicy.compare`).
fn by_need(a: &IdealQueue, b: &IdealQueue) -> Ordering {
    let (x, y) = (ideal_pct(a), ideal_pct(b));
    let by_pct = || x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    if a.priority == b.priority || (x < 1.0) != (y < 1.0) {
        by_pct()
    } else {
        b.priority.cmp(&a.priority)
    }
}

/// `computeFixpointAllocation`: give `unassigned` to `level` until no one wants more or
/// nothing is left. Ties keep tree order (weir's; YARN's priority queue leaves them open).
fn fixpoint(queues: &mut [IdealQueue], level: &[usize], unassigned: &mut u64, ignore_guarantee: bool) {
    let mut wanting: Vec<usize> = Vec::new();
    for &c in level {
        let q = &mut queues[c];
        q.ideal = if q.used > q.guaranteed { q.guaranteed + q.untouchable_extra } else { q.used };
        *unassigned = unassigned.saturating_sub(q.ideal);
        if q.ideal < q.used + q.pending {
            wanting.push(c);
        }
    }
    while !wanting.is_empty() && *unassigned > 0 {
        // resetCapacity: normalized guarantees among those still wanting.
        let active: u64 = wanting.iter().map(|&c| queues[c].guaranteed).sum();
        let n = wanting.len();
        let norm = |q: &IdealQueue| {
            if ignore_guarantee {
                1.0 / n as f64
            } else if active > 0 {
                f64::from(q.guaranteed as f32 / active as f32)
            } else {
                0.0
            }
        };
        // getMostUnderservedQueues: the head and every queue tied with it.
        wanting.sort_by(|&a, &b| by_need(&queues[a], &queues[b]));
        let head = wanting[0];
        let ties =
            wanting.iter().take_while(|&&c| by_need(&queues[c], &queues[head]) == Ordering::Equal).count();
        let served: Vec<usize> = wanting.drain(..ties).collect();
        // Offers of one round are shares of what was left at its start, each at most what is
        // left now (Hadoop 3.x's `dupUnassignedForTheRound`).
        let at_start = *unassigned;
        for c in served {
            if *unassigned == 0 {
                break;
            }
            let offer = half_up(at_start as f64 * norm(&queues[c])).min(*unassigned);
            let q = &mut queues[c];
            let mut accepted =
                offer.min(q.max.saturating_sub(q.ideal)).min((q.used + q.pending).saturating_sub(q.ideal));
            if q.leaf {
                accepted = accepted.min(q.used.max(q.guaranteed).saturating_sub(q.ideal));
            }
            q.ideal += accepted;
            if accepted > 0 {
                wanting.push(c);
            }
            *unassigned -= accepted;
        }
    }
}

/// What a leaf still asks of this round, and where its victims go.
struct Pick {
    need: u64,
    leaf: QueueIx,
    protected: bool,
}

/// A leaf the freed room is meant for, and how much more it is owed.
struct Beneficiary {
    leaf: QueueIx,
    job: JobSlot,
    owed: u64,
}

impl Engine {
    fn capacity_preemption_on(&self) -> bool {
        self.config.scheduler.preemption.enabled && self.capacity_mode()
    }

    /// A round of the proportional policy, when one is due; called at the start of every pass
    /// (so that room freed by its kills is placed in the same pass).
    pub(crate) fn capacity_preemption_round(&mut self) {
        let wanted = if self.nodes.lends() { self.refresh_lent() } else { Vec::new() };
        if !self.capacity_preemption_on() {
            return;
        }
        if self.now < self.rounds.next {
            // Something may have changed since the last round: look at the next one.
            self.rounds.wanted = true;
            return;
        }
        let interval = self.config.scheduler.preemption.capacity.monitoring_interval.0.max(1);
        self.rounds.next = Time((self.now.0 / interval + 1) * interval);
        let tree = self.ideal_allocation();
        let mut need = tree.iter().any(|t| t.to_obtain > 0);
        let chosen = if need { self.choose_capacity_victims(&tree) } else { Vec::new() };
        let taken: BTreeSet<ContainerId> = chosen.iter().map(|&(c, _)| c).collect();
        let lent = self.lent_victims(&wanted, &taken);
        need |= !lent.is_empty();
        self.carry_out_round(&tree, chosen, lent);
        // Unchanged state repeats a round's result: wake for the next one only while marks
        // wait for their kill or some leaf is owed room.
        self.rounds.wanted = need || !self.rounds.marked.is_empty();
    }

    /// When the next round is needed even if nothing else happens.
    pub(crate) fn capacity_round_wakeup(&self) -> Option<Time> {
        (self.capacity_preemption_on() && self.rounds.wanted).then_some(self.rounds.next)
    }

    /// Every queue as the policy sees it now, with its ideal allocation and what a round would
    /// ask of it, in tree order (root first). Memory, MiB.
    pub(crate) fn ideal_allocation(&self) -> Vec<IdealQueue> {
        let total = self.nodes.total.memory;
        let mut tree: Vec<IdealQueue> = self
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| IdealQueue {
                guaranteed: q.min.memory.min(total),
                max: q.max.memory.min(total),
                used: q.usage.memory,
                pending: if q.is_leaf() { self.pending_within_user_limits(i as QueueIx) } else { 0 },
                preemption_disabled: !q.allow_preemption_from,
                leaf: q.is_leaf(),
                priority: self.config.queues[i].capacity.as_ref().map_or(0, |c| c.queue_priority),
                ..IdealQueue::default()
            })
            .collect();
        tree[0].guaranteed = total;
        for i in (1..tree.len()).rev() {
            if let Some(p) = self.queues[i].parent {
                tree[p as usize].pending += tree[i].pending;
            }
        }
        let children: Vec<Vec<usize>> =
            self.queues.iter().map(|q| q.children.iter().map(|&c| c as usize).collect()).collect();
        let p = &self.config.scheduler.preemption.capacity;
        compute_ideal(IdealInputs {
            queues: &mut tree,
            children: &children,
            total_preemption_allowed: (total as f64 * p.total_preemption_per_round) as u64,
            max_ignored_over_capacity: p.max_ignored_over_capacity,
            natural_termination_factor: p.natural_termination_factor,
        });
        tree
    }

    /// A leaf's pending demand, each user's capped by its headroom under the user limit
    /// (`AbstractLeafQueue.getTotalPendingResourcesConsideringUserLimit`), memory. From the
    /// leaf's user table (`capacity_users.rs`).
    fn pending_within_user_limits(&self, leaf: QueueIx) -> u64 {
        let q = &self.queues[leaf as usize];
        let Some(cap) = self.config.queues[leaf as usize].capacity.as_ref() else { return 0 };
        if q.runnable.is_empty() {
            return 0;
        }
        if cfg!(debug_assertions) {
            if let Err(e) = self.check_leaf_users(leaf) {
                panic!("{e}");
            }
        }
        let Some(table) = self.leaf_users(leaf) else { return 0 };
        let mut total = 0;
        for u in table.users() {
            if u.pending_memory == 0 {
                continue;
            }
            let limit = user_limit(&UserLimitInputs {
                capacity: q.min,
                max_capacity: q.max.component_min(&self.nodes.total),
                used: q.usage,
                active_used: table.active_used,
                active_weights: table.active_weights,
                min_user_percent: cap.min_user_percent,
                user_limit_factor: cap.user_limit_factor,
                minimum_allocation: self.config.scheduler.minimum_allocation,
                user_weight: u.weight,
            });
            total += u.pending_memory.min(limit.memory.saturating_sub(u.used.memory));
        }
        total
    }

    /// Step 4 of the module doc: the containers this round chooses, in order, each with the
    /// leaf it is taken from.
    fn choose_capacity_victims(&self, tree: &[IdealQueue]) -> Vec<(ContainerId, QueueIx)> {
        let mut allowed = (self.nodes.total.memory as f64
            * self.config.scheduler.preemption.capacity.total_preemption_per_round)
            as u64;
        let mut chosen: Vec<(ContainerId, QueueIx)> = Vec::new();
        let mut taken: BTreeSet<ContainerId> = BTreeSet::new();
        for (leaf, t) in tree.iter().enumerate() {
            if t.to_obtain == 0 || !t.leaf || t.preemption_disabled {
                continue;
            }
            let leaf = leaf as QueueIx;
            let q = &self.queues[leaf as usize];
            let protected = q.gang_preemption == weir_model::GangPreemption::Protected;
            let mut pick = Pick { need: t.to_obtain, leaf, protected };
            let mut ams: Vec<(ContainerId, u64)> = Vec::new();
            let mut am_size = 0u64;
            'jobs: for &(_, _, _, slot) in q.runnable.iter().rev() {
                for &(_, id) in self.job(slot).containers.iter().rev() {
                    if pick.need == 0 {
                        break 'jobs;
                    }
                    let Some(c) = self.container(id) else { continue };
                    if c.placeholder || taken.contains(&id) {
                        continue;
                    }
                    if c.am {
                        ams.push((id, c.resources.memory));
                        am_size += c.resources.memory;
                        continue;
                    }
                    self.try_take(id, &mut pick, &mut allowed, &mut taken, &mut chosen);
                }
            }
            // preemptAMContainers: the leaf's AMs keep at least max_am_percent of its guarantee.
            let am_percent =
                self.config.queues[leaf as usize].capacity.as_ref().map_or(0.0, |c| c.max_am_percent);
            let am_floor = (t.guaranteed as f64 * am_percent) as u64;
            for (id, size) in ams {
                if pick.need == 0 || am_size <= am_floor {
                    break;
                }
                if self.try_take(id, &mut pick, &mut allowed, &mut taken, &mut chosen) {
                    am_size -= size;
                }
            }
        }
        chosen
    }

    /// `CapacitySchedulerPreemptionUtils.tryPreemptContainerAndDeductResToObtain` for a
    /// container and the rest of its gang: taken while the leaf still asks for something and
    /// the round's cap holds it.
    fn try_take(
        &self,
        id: ContainerId,
        pick: &mut Pick,
        allowed: &mut u64,
        taken: &mut BTreeSet<ContainerId>,
        chosen: &mut Vec<(ContainerId, QueueIx)>,
    ) -> bool {
        let Some(c) = self.container(id) else { return false };
        let members = if c.gang == 0 {
            vec![id]
        } else if pick.protected {
            return false;
        } else {
            self.gang_members(c.job, c.gang)
        };
        let members: Vec<ContainerId> = members.into_iter().filter(|m| !taken.contains(m)).collect();
        let size: u64 = members.iter().filter_map(|&m| self.container(m)).map(|x| x.resources.memory).sum();
        if pick.need == 0 || size == 0 || size > *allowed {
            return false;
        }
        pick.need = pick.need.saturating_sub(size);
        *allowed -= size;
        for m in members {
            taken.insert(m);
            chosen.push((m, pick.leaf));
        }
        true
    }

    /// Step 5 of the module doc: kill what was chosen again after its wait, mark what is newly
    /// chosen, unmark what is no longer chosen.
    fn carry_out_round(
        &mut self,
        tree: &[IdealQueue],
        chosen: Vec<(ContainerId, QueueIx)>,
        lent: Vec<(ContainerId, JobSlot)>,
    ) {
        let chosen_set: BTreeSet<ContainerId> =
            chosen.iter().map(|&(c, _)| c).chain(lent.iter().map(|&(c, _)| c)).collect();
        for id in std::mem::take(&mut self.rounds.marked) {
            let still = self.container(id).is_some_and(|c| c.preemption.is_some());
            if still && !chosen_set.contains(&id) {
                self.unmark(id);
            }
        }
        let mut owed = self.beneficiaries(tree);
        let mut next_owed = 0;
        let wait = self.config.scheduler.preemption.kill_wait;
        for (id, leaf) in chosen {
            let Some(c) = self.container(id) else { continue };
            if let Some(m) = &c.preemption {
                if m.kill_at <= self.now {
                    let reason = m.reason.clone();
                    self.kill_marked(id, reason);
                } else {
                    self.rounds.marked.push(id);
                }
                continue;
            }
            let size = c.resources.memory;
            // The room goes to the most under-served leaf still owed some.
            while next_owed + 1 < owed.len() && owed[next_owed].owed == 0 {
                next_owed += 1;
            }
            let Some(b) = owed.get_mut(next_owed) else { continue };
            b.owed = b.owed.saturating_sub(size);
            let (for_job, for_leaf) = (b.job, b.leaf);
            let t = &tree[leaf as usize];
            let reason = PreemptReason {
                for_job: self.job(for_job).id,
                for_queue: self.queues[for_leaf as usize].path.clone(),
                kind: Starvation::Guarantee { used: t.used, ideal: t.ideal, guaranteed: t.guaranteed },
            };
            self.mark_for_round(id, for_job, self.now.plus(wait), reason);
            self.rounds.marked.push(id);
        }
        // Lent room taken back (`capacity_labels.rs`): for the label's waiting job.
        for (id, for_job) in lent {
            let Some(c) = self.container(id) else { continue };
            if let Some(m) = &c.preemption {
                if m.kill_at <= self.now {
                    let reason = m.reason.clone();
                    self.kill_marked(id, reason);
                } else {
                    self.rounds.marked.push(id);
                }
                continue;
            }
            let j = self.job(for_job);
            let reason = PreemptReason {
                for_job: j.id,
                for_queue: self.queues[j.leaf as usize].path.clone(),
                kind: Starvation::LentRoom,
            };
            self.mark_for_round(id, for_job, self.now.plus(wait), reason);
            self.rounds.marked.push(id);
        }
    }

    /// Leaves below their ideal allocation with demand, most under-served (used / guarantee)
    /// first, ties in tree order; each with its first job that wants containers.
    fn beneficiaries(&self, tree: &[IdealQueue]) -> Vec<Beneficiary> {
        let mut out: Vec<(f64, Beneficiary)> = Vec::new();
        for (i, t) in tree.iter().enumerate() {
            if !t.leaf || t.ideal <= t.used || t.pending == 0 {
                continue;
            }
            let q = &self.queues[i];
            let Some(job) = q.runnable.iter().map(|k| k.3).find(|&s| self.job(s).pending_containers > 0)
            else {
                continue;
            };
            let ratio = if t.guaranteed > 0 { t.used as f64 / t.guaranteed as f64 } else { f64::MAX };
            let owed = (t.ideal - t.used).min(t.pending);
            out.push((ratio, Beneficiary { leaf: i as QueueIx, job, owed }));
        }
        out.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal).then(a.1.leaf.cmp(&b.1.leaf)));
        out.into_iter().map(|(_, b)| b).collect()
    }

    fn mark_for_round(&mut self, id: ContainerId, for_job: JobSlot, kill_at: Time, reason: PreemptReason) {
        let Some(c) = self.containers[id.slot()].container.as_mut() else { return };
        c.preemption = Some(Marked { kill_at, for_job, reason: reason.clone() });
        let (r, victim, node) = (c.resources, c.job, c.node);
        self.nodes.slots[node as usize].marked += r;
        self.job_mut(for_job).incoming += r;
        let v = self.job_mut(victim);
        v.outgoing += r;
        v.last_preempted = Some(reason.clone());
        let job = v.id;
        self.decisions.push(Decision::PreemptContainer { container: id, job, kill_at, reason });
    }

    fn unmark(&mut self, id: ContainerId) {
        let Some(c) = self.containers[id.slot()].container.as_mut() else { return };
        let Some(m) = c.preemption.take() else { return };
        let (r, victim, node) = (c.resources, c.job, c.node);
        self.nodes.slots[node as usize].marked -= r;
        if let Some(j) = self.jobs[m.for_job as usize].as_mut() {
            j.incoming -= r;
        }
        self.job_mut(victim).outgoing -= r;
    }

    fn kill_marked(&mut self, id: ContainerId, reason: PreemptReason) {
        if let Some(c) = self.release_container(id) {
            let j = self.job_mut(c.job);
            j.preempted_count += 1;
            let job = j.id;
            self.decisions.push(Decision::KillContainer { container: id, job, reason });
        }
    }
}
