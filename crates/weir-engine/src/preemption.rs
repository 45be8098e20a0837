//! Fair-share and min-share preemption.
//!
//! A job is fair-share-starved when its usage stays below `threshold × min(fair share, demand)`
//! for longer than its queue's fair-share timeout; a leaf is min-share-starved when its usage stays
//! below `min(min share, demand)` for longer than its min-share timeout. While cluster utilization
//! (the most used resource) is at least `utilization_threshold`, the engine marks victims for each
//! starved job, one pending request at a time: running containers of jobs in queues that allow
//! preemption, whose job stays at or above its own fair share without them, lowest priority first,
//! newest first, application masters last, all on one node where the freed room fits the request.
//! That node is held for the starved job until the victims are gone; they are killed after
//! `kill_wait` unless they end first.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use weir_model::{Duration, Policy, Resources};

use crate::decision::{Decision, PreemptReason, Starvation};
use crate::engine::{Engine, Starver};
use crate::ids::ContainerId;
use crate::order::below;
use crate::state::{JobSlot, JobState, Marked, NodeSlot, QueueIx};

/// How long a starved job waits before the engine looks for victims again after finding none.
const RETRY_GAP: Duration = Duration(1_000);

/// A running container that may be taken.
#[derive(Clone, Debug)]
struct Candidate {
    id: ContainerId,
    job: JobSlot,
    resources: Resources,
    am: bool,
    priority: i32,
    seq: u64,
}

/// Victims grouped by node, in the order they would be taken.
type CandidatesByNode = BTreeMap<NodeSlot, Vec<Candidate>>;

/// How much a set of victims on one node costs; lower is better. See `choose_victims`.
type VictimCost = (u32, i32, usize, NodeSlot);

impl Engine {
    pub(crate) fn watch_starvation(&mut self, slot: JobSlot) {
        if self.config.scheduler.preemption.enabled {
            self.starvation_dirty.insert(slot);
        }
    }

    fn policy_of(&self, leaf: QueueIx) -> Policy {
        self.queues[leaf as usize].policy
    }

    /// Kill marked containers whose time has come; their resources return at once.
    pub(crate) fn carry_out_kills(&mut self) {
        while let Some(&Reverse((at, id))) = self.kills.peek() {
            if at > self.now {
                break;
            }
            self.kills.pop();
            let Some(marked) = self.container(id).and_then(|c| c.preemption.clone()) else { continue };
            if marked.kill_at != at {
                continue;
            }
            if let Some(c) = self.release_container(id) {
                let j = self.job_mut(c.job);
                j.preempted_count += 1;
                let job = j.id;
                self.decisions.push(Decision::KillContainer { container: id, job, reason: marked.reason });
            }
        }
    }

    /// A node held for a starved job is let go once its victims are gone and a pass has run.
    pub(crate) fn release_drained_reservations(&mut self) {
        let drained: Vec<NodeSlot> = self
            .nodes
            .reserved
            .iter()
            .copied()
            .filter(|&n| self.nodes.slots[n as usize].marked.is_zero())
            .collect();
        for n in drained {
            if let Some(job) = self.nodes.slots[n as usize].reserved_for {
                self.job_mut(job).reservations.retain(|&x| x != n);
            }
            self.nodes.unreserve(n);
        }
    }

    fn update_starvation(&mut self) {
        let now = self.now;
        let dirty = std::mem::take(&mut self.starvation_dirty);
        let mut leaves: Vec<QueueIx> = Vec::new();
        for slot in dirty {
            let Some(j) = self.jobs[slot as usize].as_ref() else { continue };
            if j.state != JobState::Runnable {
                continue;
            }
            let leaf = j.leaf;
            if leaves.last() != Some(&leaf) {
                leaves.push(leaf);
            }
            let q = &self.queues[leaf as usize];
            let target = j.fair_share.component_min(&j.demand()).scale(q.fair_share_threshold);
            let starving =
                q.fair_share_timeout.is_some() && below(q.policy, &j.usage, &target, &self.nodes.total);
            let timeout = q.fair_share_timeout;
            let j = self.job_mut(slot);
            match (starving, j.below_fair_since) {
                (true, None) => {
                    j.below_fair_since = Some(now);
                    let at = now.plus(timeout.unwrap_or_default());
                    self.starvation_timers.push(Reverse((at, Starver::Job(slot))));
                }
                (false, Some(_)) => {
                    j.below_fair_since = None;
                    self.starved.remove(&Starver::Job(slot));
                }
                _ => {}
            }
        }
        leaves.sort_unstable();
        leaves.dedup();
        for leaf in leaves {
            let q = &self.queues[leaf as usize];
            let desired = q.min.component_min(&q.demand());
            let starving = q.min_share_timeout.is_some()
                && !q.min.is_zero()
                && below(q.policy, &q.usage, &desired, &self.nodes.total);
            let timeout = q.min_share_timeout;
            let q = &mut self.queues[leaf as usize];
            match (starving, q.below_min_since) {
                (true, None) => {
                    q.below_min_since = Some(now);
                    let at = now.plus(timeout.unwrap_or_default());
                    self.starvation_timers.push(Reverse((at, Starver::Leaf(leaf))));
                }
                (false, Some(_)) => {
                    q.below_min_since = None;
                    self.starved.remove(&Starver::Leaf(leaf));
                }
                _ => {}
            }
        }
        while let Some(&Reverse((at, who))) = self.starvation_timers.peek() {
            if at > now {
                break;
            }
            self.starvation_timers.pop();
            let still = match who {
                Starver::Job(s) => self.jobs[s as usize].as_ref().is_some_and(|j| {
                    let t = self.queues[j.leaf as usize].fair_share_timeout.unwrap_or_default();
                    j.below_fair_since.is_some_and(|since| since.plus(t) <= now)
                }),
                Starver::Leaf(l) => {
                    let q = &self.queues[l as usize];
                    let t = q.min_share_timeout.unwrap_or_default();
                    q.below_min_since.is_some_and(|since| since.plus(t) <= now)
                }
            };
            if still {
                self.starved.insert(who);
            }
        }
    }

    /// Cluster utilization: the fraction used of the most used resource.
    pub(crate) fn utilization(&self) -> f64 {
        let (u, t) = (self.nodes.used, self.nodes.total);
        weir_model::ResourceKind::ALL
            .iter()
            .filter(|&&k| t.get(k) > 0)
            .map(|&k| u.get(k) as f64 / t.get(k) as f64)
            .fold(0.0, f64::max)
    }

    pub(crate) fn preempt(&mut self) {
        self.update_starvation();
        if self.starved.is_empty()
            || self.utilization() < self.config.scheduler.preemption.utilization_threshold
        {
            return;
        }
        // Who needs how much, in a fixed order: fair-share starvation of jobs, then min shares.
        let mut needs: Vec<(JobSlot, Resources, Starvation)> = Vec::new();
        for &who in &self.starved.clone() {
            match who {
                Starver::Job(s) => {
                    let j = self.job(s);
                    if j.preempt_retry_at > self.now || j.pending_containers == 0 {
                        continue;
                    }
                    let q = &self.queues[j.leaf as usize];
                    let target = j.fair_share.component_min(&j.demand()).scale(q.fair_share_threshold);
                    let amount = target - j.usage - j.incoming;
                    needs.push((s, amount, Starvation::FairShare));
                }
                Starver::Leaf(l) => {
                    let q = &self.queues[l as usize];
                    let desired = q.min.component_min(&q.demand());
                    let incoming = q.runnable.iter().fold(Resources::ZERO, |a, &s| a + self.job(s).incoming);
                    let mut left = desired - q.usage - incoming;
                    let mut jobs: Vec<JobSlot> = q
                        .runnable
                        .iter()
                        .copied()
                        .filter(|&s| {
                            let j = self.job(s);
                            j.pending_containers > 0 && j.preempt_retry_at <= self.now
                        })
                        .collect();
                    jobs.sort_by(|&a, &b| self.compare_jobs(q.policy, a, b));
                    for s in jobs {
                        let give = left.component_min(&self.job(s).pending);
                        if give.is_zero() {
                            break;
                        }
                        left -= give;
                        needs.push((s, give, Starvation::MinShare));
                    }
                }
            }
        }
        if needs.is_empty() {
            return;
        }
        let mut candidates = self.candidates();
        for (job, amount, kind) in needs {
            self.preempt_for(job, amount, kind, &mut candidates);
        }
    }

    /// Every container that could be taken now, grouped by node and sorted in taking order.
    fn candidates(&self) -> CandidatesByNode {
        let mut by_node: CandidatesByNode = BTreeMap::new();
        for q in &self.queues {
            if !q.is_leaf() || !q.allow_preemption_from {
                continue;
            }
            for &s in &q.runnable {
                let j = self.job(s);
                let left = j.usage - j.outgoing;
                if below(q.policy, &left, &j.fair_share, &self.nodes.total) || left == j.fair_share {
                    continue;
                }
                for &(seq, id) in j.containers.iter().rev() {
                    let Some(c) = self.container(id) else { continue };
                    if c.preemption.is_some() {
                        continue;
                    }
                    by_node.entry(c.node).or_default().push(Candidate {
                        id,
                        job: s,
                        resources: c.resources,
                        am: c.am,
                        priority: j.priority,
                        seq,
                    });
                }
            }
        }
        for list in by_node.values_mut() {
            list.sort_by_key(|c| (c.am, c.priority, Reverse(c.seq)));
        }
        by_node
    }

    fn preempt_for(
        &mut self,
        job: JobSlot,
        mut amount: Resources,
        kind: Starvation,
        candidates: &mut CandidatesByNode,
    ) {
        let leaf = self.job(job).leaf;
        let policy = self.policy_of(leaf);
        let mut budget = self.job(job).pending_containers;
        let requests: Vec<(Resources, u32)> =
            self.job(job).requests.iter().map(|r| (r.resources, r.count)).collect();
        let mut sizes = requests.iter().flat_map(|&(r, n)| std::iter::repeat_n(r, n as usize));
        while budget > 0 && below(policy, &Resources::ZERO, &amount, &self.nodes.total) {
            let Some(r) = sizes.next() else { break };
            budget -= 1;
            let Some((node, victims)) = self.choose_victims(job, &r, candidates) else {
                let now = self.now;
                self.job_mut(job).preempt_retry_at = now.plus(RETRY_GAP);
                break;
            };
            self.mark(job, leaf, kind, node, &victims, candidates);
            amount -= r;
        }
    }

    /// The node where taking the fewest, least important containers makes room for `r`: fewest
    /// AM containers, then the lowest top priority, then the fewest containers, then the node.
    fn choose_victims(
        &self,
        job: JobSlot,
        r: &Resources,
        candidates: &CandidatesByNode,
    ) -> Option<(NodeSlot, Vec<ContainerId>)> {
        let mut best: Option<(VictimCost, Vec<ContainerId>)> = None;
        for (&node, list) in candidates {
            let n = &self.nodes.slots[node as usize];
            if !n.alive || n.reserved_for.is_some_and(|j| j != job) || !r.fits_in(&n.capacity) {
                continue;
            }
            let mut room = n.free();
            let mut taken: Vec<ContainerId> = Vec::new();
            let mut took_from: Vec<(JobSlot, Resources)> = Vec::new();
            let (mut ams, mut top_priority) = (0u32, i32::MIN);
            for c in list {
                if r.fits_in(&room) {
                    break;
                }
                if c.job == job {
                    continue;
                }
                let v = self.job(c.job);
                let already =
                    took_from.iter().filter(|(s, _)| *s == c.job).fold(Resources::ZERO, |a, (_, x)| a + *x);
                let after = v.usage - v.outgoing - already - c.resources;
                if below(self.policy_of(v.leaf), &after, &v.fair_share, &self.nodes.total) {
                    continue;
                }
                room += c.resources;
                taken.push(c.id);
                took_from.push((c.job, c.resources));
                ams += u32::from(c.am);
                top_priority = top_priority.max(c.priority);
            }
            if taken.is_empty() || !r.fits_in(&room) {
                continue;
            }
            let cost = (ams, top_priority, taken.len(), node);
            if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                best = Some((cost, taken));
            }
        }
        best.map(|((_, _, _, node), v)| (node, v))
    }

    fn mark(
        &mut self,
        job: JobSlot,
        leaf: QueueIx,
        kind: Starvation,
        node: NodeSlot,
        victims: &[ContainerId],
        candidates: &mut CandidatesByNode,
    ) {
        let kill_at = self.now.plus(self.config.scheduler.preemption.kill_wait);
        let reason = PreemptReason {
            for_job: self.job(job).id,
            for_queue: self.queues[leaf as usize].path.clone(),
            kind,
        };
        for &id in victims {
            let Some(c) = self.containers[id.slot()].container.as_mut() else { continue };
            c.preemption = Some(Marked { kill_at, for_job: job, reason: reason.clone() });
            let (r, victim) = (c.resources, c.job);
            self.nodes.slots[node as usize].marked += r;
            self.job_mut(job).incoming += r;
            let v = self.job_mut(victim);
            v.outgoing += r;
            v.last_preempted = Some(reason.clone());
            let victim_id = v.id;
            self.kills.push(Reverse((kill_at, id)));
            self.decisions.push(Decision::PreemptContainer {
                container: id,
                job: victim_id,
                kill_at,
                reason: reason.clone(),
            });
        }
        if let Some(list) = candidates.get_mut(&node) {
            list.retain(|c| !victims.contains(&c.id));
        }
        if self.nodes.slots[node as usize].reserved_for.is_none() {
            self.reserve(node, job);
        }
    }
}
