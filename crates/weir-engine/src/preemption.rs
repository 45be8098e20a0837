//! Preemption: victims for starved jobs, marks, and kills after `kill_wait`.
//!
//! For each starved job (`starvation.rs`) the engine asks for whole containers of its pending
//! requests, in order, as many as fit in its starvation (`FSAppAttempt.getStarvedResourceRequests`:
//! floor(starvation / container) by memory, so starvation smaller than one container preempts
//! nothing). For each such container it looks for victims all on one node where the freed room
//! fits it (`FSPreemptionThread.identifyContainersToPreemptOnNode`): running containers of jobs
//! in queues that allow preemption, whose job stays at or above its own fair share without them
//! (`FSAppAttempt.canContainerBePreempted`). weir's order among candidates is its own: fewest
//! application masters (as YARN), then lowest job priority, then fewest containers, newest
//! first. The node is held for the starved job while the victims drain; they are killed after
//! `kill_wait` unless they end first.
//!
//! A running gang is never left half-running: taking one of its containers takes all of them,
//! on whatever node (its job must stay at or above its fair share without the whole gang), or,
//! in a queue with `gang_preemption: protected`, none of them is ever taken. Placeholders (room
//! held for a gang that has not started) are not taken.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use weir_model::{Policy, Resources};

use crate::decision::{Decision, PreemptReason, Starvation};
use crate::engine::{Engine, Starver};
use crate::ids::ContainerId;
use crate::nodes::{Ask, Hold};
use crate::order::below;
use crate::state::{JobSlot, Marked, NodeSlot, QueueIx};

/// A running container that may be taken.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    id: ContainerId,
    job: JobSlot,
    am: bool,
    priority: i32,
    seq: u64,
    /// Its gang number (0: none): taking it takes every container of that gang.
    gang: u32,
}

/// Victims grouped by node, in the order they would be taken.
pub(crate) type CandidatesByNode = BTreeMap<NodeSlot, Vec<Candidate>>;

/// How much a set of victims on one node costs; lower is better. See `choose_victims`.
type VictimCost = (u32, i32, usize, NodeSlot);

/// How many containers of `size` fit in `pending`: by memory as YARN's default resource
/// calculator does, or (a container with no memory) by the scarcest of its other resources.
pub(crate) fn whole_containers(pending: &Resources, size: &Resources) -> u64 {
    if let Some(n) = pending.memory.checked_div(size.memory) {
        return n;
    }
    weir_model::ResourceKind::ALL
        .iter()
        .filter(|&&k| size.get(k) > 0)
        .map(|&k| pending.get(k) / size.get(k))
        .min()
        .unwrap_or(0)
}

impl Engine {
    /// The running (not placeholder) containers of a job's gang.
    pub(crate) fn gang_members(&self, job: JobSlot, gang: u32) -> Vec<ContainerId> {
        self.job(job)
            .containers
            .iter()
            .filter_map(|&(_, id)| self.container(id))
            .filter(|c| c.gang == gang && !c.placeholder)
            .map(|c| c.id)
            .collect()
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

    /// Preemption for every starved job (`FSPreemptionThread`): only while utilization is above
    /// the threshold; each job's need comes from `starvation_in`, asked for in whole containers.
    pub(crate) fn preempt(&mut self) {
        if !self.preemption_gate() {
            if self.gate_open {
                self.gate_closed_at = self.now;
            }
            self.gate_open = false;
            return;
        }
        for s in std::mem::take(&mut self.min_share_given) {
            if let Some(j) = self.jobs[s as usize].as_mut() {
                j.min_share_starvation = Resources::ZERO;
            }
        }
        self.update_starvation();
        self.gate_open = true;
        self.preempt_for_guarantees();
        if self.starved.is_empty() {
            return;
        }
        let leaves: BTreeSet<QueueIx> = self
            .starved
            .iter()
            .map(|&w| match w {
                Starver::Job(s) => self.job(s).leaf,
                Starver::Leaf(l) => l,
            })
            .collect();
        let mut candidates: Option<CandidatesByNode> = None;
        for leaf in leaves {
            for (job, fair, min) in self.starvation_in(leaf) {
                if !min.is_zero() {
                    self.job_mut(job).min_share_starvation = min;
                    self.min_share_given.push(job);
                }
                let kind = if fair.is_zero() { Starvation::MinShare } else { Starvation::FairShare };
                let amount = fair + min - self.job(job).incoming;
                let c = candidates.get_or_insert_with(|| self.candidates());
                self.preempt_for(job, amount, kind, c);
                self.preemption_tried(job);
            }
        }
    }

    /// Every container that could be taken now, grouped by node and sorted in taking order.
    pub(crate) fn candidates(&self) -> CandidatesByNode {
        let mut by_node: CandidatesByNode = BTreeMap::new();
        for q in &self.queues {
            if !q.is_leaf() || !q.allow_preemption_from {
                continue;
            }
            for &(_, _, _, s) in &q.runnable {
                let j = self.job(s);
                let left = j.usage - j.outgoing;
                let share = self.protected_share(s);
                if below(q.policy, &left, &share, &self.nodes.total) || left == share {
                    continue;
                }
                let protected = q.gang_preemption == weir_model::GangPreemption::Protected;
                for &(seq, id) in j.containers.iter().rev() {
                    let Some(c) = self.container(id) else { continue };
                    if c.preemption.is_some() || c.placeholder || (protected && c.gang != 0) {
                        continue;
                    }
                    by_node.entry(c.node).or_default().push(Candidate {
                        id,
                        job: s,
                        am: c.am,
                        priority: j.priority,
                        seq,
                        gang: c.gang,
                    });
                }
            }
        }
        for list in by_node.values_mut() {
            list.sort_by_key(|c| (c.am, c.priority, Reverse(c.seq)));
        }
        by_node
    }

    /// Mark victims for `amount` of `job`'s pending requests, in whole containers.
    pub(crate) fn preempt_for(
        &mut self,
        job: JobSlot,
        amount: Resources,
        kind: Starvation,
        candidates: &mut CandidatesByNode,
    ) {
        let leaf = self.job(job).leaf;
        let requests: Vec<(Ask, u32)> = self.job(job).requests.iter().map(|r| (r.ask(), r.count)).collect();
        let mut pending = amount;
        for (ask, count) in requests {
            if pending.is_zero() {
                break;
            }
            let n = whole_containers(&pending, &ask.r).min(u64::from(count));
            for _ in 0..n {
                let Some((node, victims)) = self.choose_victims(job, &ask, candidates) else { break };
                self.mark(job, leaf, kind, node, &victims, candidates);
            }
            pending -= ask.r.times(n);
        }
    }

    /// The node where taking the fewest, least important containers makes room for `r`: fewest
    /// AM containers, then the lowest top priority, then the fewest containers, then the node.
    fn choose_victims(
        &self,
        job: JobSlot,
        ask: &Ask,
        candidates: &CandidatesByNode,
    ) -> Option<(NodeSlot, Vec<ContainerId>)> {
        let r = &ask.r;
        let mut best: Option<(VictimCost, Vec<ContainerId>)> = None;
        for (&node, list) in candidates {
            let n = &self.nodes.slots[node as usize];
            let held_for_other = matches!(n.hold, Some((j, Hold::Preempted)) if j != job);
            // A GPU fraction needs its GPU room now: victims are chosen for cpu and memory.
            if !n.alive || held_for_other || !self.nodes.could_hold(node, ask) || !n.frac_fits(ask.milli) {
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
                if c.job == job
                    || taken.contains(&c.id)
                    || self.container(c.id).is_none_or(|x| x.preemption.is_some())
                {
                    continue;
                }
                // A gang member comes with the rest of its gang.
                let whole = if c.gang == 0 { vec![c.id] } else { self.gang_members(c.job, c.gang) };
                let mut here = Resources::ZERO;
                let mut all = Resources::ZERO;
                for &id in &whole {
                    if let Some(x) = self.container(id) {
                        all += x.resources;
                        if x.node == node {
                            here += x.resources;
                        }
                    }
                }
                let v = self.job(c.job);
                let already =
                    took_from.iter().filter(|(s, _)| *s == c.job).fold(Resources::ZERO, |a, (_, x)| a + *x);
                let after = v.usage - v.outgoing - already - all;
                if below(self.policy_of(v.leaf), &after, &self.protected_share(c.job), &self.nodes.total) {
                    continue;
                }
                room += here;
                took_from.push((c.job, all));
                for id in whole {
                    if !taken.contains(&id) {
                        taken.push(id);
                    }
                }
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
            if c.preemption.is_some() {
                continue;
            }
            c.preemption = Some(Marked { kill_at, for_job: job, reason: reason.clone() });
            let (r, victim, on) = (c.resources, c.job, c.node);
            self.nodes.slots[on as usize].marked += r;
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
        let mut touched: Vec<NodeSlot> =
            victims.iter().filter_map(|&id| self.container(id)).map(|c| c.node).collect();
        touched.sort_unstable();
        touched.dedup();
        for n in touched {
            if let Some(list) = candidates.get_mut(&n) {
                list.retain(|c| !victims.contains(&c.id));
            }
        }
        self.hold(node, job, Hold::Preempted);
    }
}
