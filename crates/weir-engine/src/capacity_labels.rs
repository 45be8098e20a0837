//! Capacity mode's node labels (YARN's node partitions), as far as the engine enforces them:
//!
//! - A node carries at most one label; the nodes of a label form its partition. A request for
//!   no label runs in the default partition: unlabelled nodes, and the nodes of non-exclusive
//!   labels, whose room is lent (unlabelled nodes are tried first). An exclusive partition
//!   (the default, as YARN's) runs only requests for its label
//!   (`RegularContainerAllocator`/`SchedulingMode.IGNORE_PARTITION_EXCLUSIVITY` only on
//!   non-exclusive partitions).
//! - A request that names no label gets its leaf's `default_label`
//!   (`default-node-label-expression`, applied by `SchedulerUtils.normalizeAndValidateRequest`).
//! - A job whose request names a label its leaf may not use is rejected at submission
//!   (`SchedulerUtils.checkQueueLabelInLabelManager`/`InvalidLabelResourceRequestException`);
//!   a later request of that kind is an invalid request.
//!
//! - A non-exclusive label lends nothing while requests for it wait (YARN offers such a node's
//!   room to requests for its label first, then to the default partition); with preemption on,
//!   a round takes back lent room for the first such request that finds none: containers of
//!   requests for no label on that label's nodes, newest first, never from a queue that
//!   disallows preemption (`Starvation::LentRoom`; YARN reaches the same end through the
//!   per-partition ideal allocation, where the borrowing queues hold more than their
//!   guarantee of the partition).
//!
//! - A queue's max capacity in a label's partition caps what a request for that label may add
//!   to it (every container on the label's nodes counts, lent ones too):
//!   `AbstractCSQueue.canAssignToThisQueue` per partition (`getQueueMaxResource(partition)`).
//!   A gang is checked whole (`gang_label_max_allows`): it starts whole or not at all.
//! - Guarantees per partition: siblings competing for a label's nodes are ordered by their
//!   standing there (`capacity.rs`, `competing_label`), the default partition's standing
//!   counts only what is held off labelled nodes, and user limits are computed in the
//!   partition of the request (`Engine::user_standing`).
//!
//! Not enforced yet: the proportional policy per partition (it sees the queue's whole
//! usage). Partitions' sizes are the cluster file's node groups.

use std::collections::BTreeSet;

use crate::engine::Engine;
use crate::ids::ContainerId;
use crate::input::{Request, Selector, SelectorId};
use crate::placement::Blocker;
use crate::state::{JobSlot, NodeSlot, QueueIx};

/// Every queue's memory on each label's nodes (capacity mode with labelled nodes).
#[derive(Debug, Default)]
pub(crate) struct LabelUsage {
    /// The labels, sorted; a label's index is its place here.
    names: Vec<String>,
    /// Each label's memory in the cluster file's node groups.
    partition: Vec<u64>,
    /// `[queue × names.len() + label]`, MiB.
    used: Vec<u64>,
}

/// A non-exclusive label whose own requests wait: the first such job in tree order and what
/// its next request still asks for (memory).
pub(crate) struct Wanted {
    pub label: String,
    pub job: JobSlot,
    pub memory: u64,
}

impl Engine {
    /// At start: in capacity mode with labelled nodes, register the default partition.
    pub(crate) fn set_up_partitions(&mut self) {
        if !self.capacity_mode() || self.config.nodes.iter().all(|g| g.label.is_none()) {
            return;
        }
        let lent: Vec<String> = self
            .config
            .file
            .scheduler
            .node_labels
            .iter()
            .filter(|(_, l)| !l.exclusive)
            .map(|(name, _)| name.clone())
            .collect();
        self.nodes.set_partitions(&lent);
        let names: Vec<String> = self
            .config
            .nodes
            .iter()
            .filter_map(|g| g.label.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let partition = names
            .iter()
            .map(|l| {
                self.config
                    .nodes
                    .iter()
                    .filter(|g| g.label.as_ref() == Some(l))
                    .map(|g| g.resources.memory * u64::from(g.count))
                    .sum()
            })
            .collect();
        let used = vec![0; names.len() * self.queues.len()];
        self.label_usage = LabelUsage { names, partition, used };
    }

    /// A container of `memory` of `job` on `node` started (`add`) or ended: its queues' and
    /// its user's usage in the node's label's partition follow.
    pub(crate) fn charge_label(&mut self, job: JobSlot, node: NodeSlot, memory: u64, add: bool) {
        if self.label_usage.names.is_empty() {
            return;
        }
        let Some(label) = self.nodes.slots[node as usize].label.as_deref() else { return };
        let Ok(i) = self.label_usage.names.binary_search_by(|n| n.as_str().cmp(label)) else { return };
        let n = self.label_usage.names.len();
        let mut q = Some(self.job(job).leaf);
        while let Some(ix) = q {
            let u = &mut self.label_usage.used[ix as usize * n + i];
            *u = if add { *u + memory } else { u.saturating_sub(memory) };
            q = self.queues[ix as usize].parent;
        }
        self.count_user_label(job, i, memory, add);
    }

    /// A label's index in the usage table.
    pub(crate) fn label_index(&self, label: &str) -> Option<u32> {
        self.label_usage.names.binary_search_by(|n| n.as_str().cmp(label)).ok().map(|i| i as u32)
    }

    /// How many labels the usage table has (0: no labelled nodes, or fair mode).
    pub(crate) fn label_count(&self) -> usize {
        self.label_usage.names.len()
    }

    /// The label a selector asks for, as an index of the usage table: `None` for the default
    /// partition, no label or more than one.
    pub(crate) fn label_of_selector(&self, selector: SelectorId) -> Option<u32> {
        if self.label_usage.names.is_empty() || selector.0 == 0 {
            return None;
        }
        let selector = self.nodes.selector_of(selector);
        let [label] = selector.labels.as_slice() else { return None };
        self.label_usage.names.binary_search(label).ok().map(|i| i as u32)
    }

    /// The label the ready job's next request asks for.
    pub(crate) fn ready_label(&self, job: JobSlot) -> Option<u32> {
        let (_, ask, _) = self.job(job).ready?;
        self.label_of_selector(ask.selector)
    }

    /// A queue's guarantee and max in a label's partition (memory, MiB): its share of the
    /// partition's memory (`QueueCapacities` per partition, absolute); zero for a queue that
    /// may not use the label.
    pub(crate) fn label_capacity(&self, q: QueueIx, label: u32) -> (u64, u64) {
        let name = &self.label_usage.names[label as usize];
        let partition = self.label_usage.partition[label as usize] as f64;
        self.config.queues[q as usize]
            .capacity
            .as_ref()
            .and_then(|c| c.labels.get(name))
            .map_or((0, 0), |s| {
                ((partition * s.absolute_capacity) as u64, (partition * s.absolute_max_capacity) as u64)
            })
    }

    /// What a queue holds on a label's nodes, memory.
    pub(crate) fn label_used(&self, q: QueueIx, label: u32) -> u64 {
        self.label_usage.used[q as usize * self.label_usage.names.len() + label as usize]
    }

    /// What a queue holds on labelled nodes, memory.
    pub(crate) fn labelled_used(&self, q: QueueIx) -> u64 {
        let n = self.label_usage.names.len();
        self.label_usage.used[q as usize * n..(q as usize + 1) * n].iter().sum()
    }

    /// A memory figure of the whole cluster (a queue's guarantee or max) scaled to the default
    /// partition: YARN resolves a queue's capacity against each partition's resources, so its
    /// default-partition guarantee is its share of the unlabelled nodes.
    pub(crate) fn in_default_partition(&self, memory: u64) -> u64 {
        let total = self.nodes.total.memory;
        let default = total.saturating_sub(self.label_usage.partition.iter().sum());
        (u128::from(memory) * u128::from(default)).checked_div(u128::from(total)).unwrap_or(0) as u64
    }

    /// Whether a whole gang (`indices` of the job's requests, all still to place) fits under
    /// the max capacity in each label's partition on the job's path: a gang starts whole or
    /// not at all, so it is checked as a whole, each label's requests summed.
    pub(crate) fn gang_label_max_allows(&self, job: JobSlot, indices: &[usize]) -> Result<(), Blocker> {
        if self.label_usage.names.is_empty() {
            return Ok(());
        }
        let j = self.job(job);
        let mut asks: Vec<(u32, u64)> = Vec::new();
        for &i in indices {
            let r = &j.requests[i];
            let Some(label) = self.label_of_selector(r.selector) else { continue };
            let memory = r.resources.memory * u64::from(r.count);
            match asks.iter_mut().find(|a| a.0 == label) {
                Some(a) => a.1 += memory,
                None => asks.push((label, memory)),
            }
        }
        asks.sort_unstable();
        for (label, memory) in asks {
            if let Some(b) = self.label_max_blocks(j.leaf, label, memory) {
                return Err(b);
            }
        }
        Ok(())
    }

    /// The first queue from `leaf` up whose max capacity in the label's partition `memory`
    /// more would pass, as the blocker to report.
    fn label_max_blocks(&self, leaf: QueueIx, label: u32, memory: u64) -> Option<Blocker> {
        let name = &self.label_usage.names[label as usize];
        for q in self.path_up(leaf) {
            let Some(share) =
                self.config.queues[q as usize].capacity.as_ref().and_then(|c| c.labels.get(name))
            else {
                continue;
            };
            let max =
                (self.label_usage.partition[label as usize] as f64 * share.absolute_max_capacity) as u64;
            let used = self.label_used(q, label);
            if used + memory > max {
                return Some(Blocker::LabelMax { queue: q, label, max, used });
            }
        }
        None
    }

    /// Whether the job's next container, a request for one label, fits under the max capacity
    /// in that label's partition of every queue on its path.
    pub(crate) fn label_max_allows(&self, job: JobSlot) -> Result<(), Blocker> {
        if self.label_usage.names.is_empty() {
            return Ok(());
        }
        let j = self.job(job);
        let Some(front) = j.requests.front() else { return Ok(()) };
        let Some(label) = self.label_of_selector(front.selector) else { return Ok(()) };
        match self.label_max_blocks(j.leaf, label, front.resources.memory) {
            Some(b) => Err(b),
            None => Ok(()),
        }
    }

    /// A label's name by its index in the usage table.
    pub(crate) fn label_name(&self, i: u32) -> &str {
        &self.label_usage.names[i as usize]
    }

    /// A capacity-mode job's requests in `leaf`, their labels applied: the leaf's
    /// `default_label` for those that name none, else the default partition. `Err` names a
    /// label the leaf may not use. Fair mode: as they are.
    pub(crate) fn capacity_labels(
        &mut self,
        leaf: QueueIx,
        mut requests: Vec<Request>,
    ) -> Result<Vec<Request>, String> {
        let Some(cap) = self.config.queues[leaf as usize].capacity.as_ref() else { return Ok(requests) };
        let default_partition = self.nodes.default_partition();
        if default_partition.0 == 0 && cap.default_label.is_none() && cap.labels.is_empty() {
            return Ok(requests);
        }
        let default_label = cap.default_label.clone();
        for r in &mut requests {
            let selector = self.nodes.selector_of(r.selector);
            if selector.labels.is_empty() {
                match &default_label {
                    Some(l) => {
                        r.selector = self.nodes.selector(&Selector { labels: vec![l.clone()], ..selector });
                    }
                    None if r.selector.0 == 0 && default_partition.0 != 0 => r.selector = default_partition,
                    None => {}
                }
                continue;
            }
            let cap = self.config.queues[leaf as usize].capacity.as_ref().expect("capacity mode");
            if let Some(l) = selector.labels.iter().find(|l| !cap.labels.contains_key(*l)) {
                let usable: Vec<&str> = cap.labels.keys().map(String::as_str).collect();
                return Err(format!(
                    "{} may not use node label `{l}` (its accessible_labels: {})",
                    self.queues[leaf as usize].path,
                    if usable.is_empty() { "none".to_string() } else { usable.join(", ") }
                ));
            }
        }
        Ok(requests)
    }
}

impl Engine {
    /// At the start of a pass, with non-exclusive labels: which of them have requests waiting
    /// (those lend nothing in this pass), each with its first such job.
    pub(crate) fn refresh_lent(&mut self) -> Vec<Wanted> {
        let lent: BTreeSet<&String> = self
            .config
            .file
            .scheduler
            .node_labels
            .iter()
            .filter(|(_, l)| !l.exclusive)
            .map(|(n, _)| n)
            .collect();
        let mut wanted: Vec<Wanted> = Vec::new();
        for q in &self.queues {
            for &(_, _, _, slot) in &q.runnable {
                let j = self.job(slot);
                let Some(front) = j.requests.front().filter(|_| j.pending_containers > 0) else { continue };
                let selector = self.nodes.selector_of(front.selector);
                let [label] = selector.labels.as_slice() else { continue };
                if lent.contains(label) && !wanted.iter().any(|w| &w.label == label) {
                    let memory = front.resources.memory * u64::from(front.count);
                    wanted.push(Wanted { label: label.clone(), job: slot, memory });
                }
            }
        }
        let names: Vec<String> = wanted.iter().map(|w| w.label.clone()).collect();
        self.nodes.set_wanted(&names);
        wanted
    }

    /// Lent room to take back this round: for each wanted label whose job finds no room,
    /// containers of requests for no label on the label's nodes, newest first, until its next
    /// request's memory is covered; never from a queue that disallows preemption, never a
    /// placeholder or one in `taken`.
    pub(crate) fn lent_victims(
        &self,
        wanted: &[Wanted],
        taken: &BTreeSet<ContainerId>,
    ) -> Vec<(ContainerId, JobSlot)> {
        let mut out = Vec::new();
        let default = self.nodes.default_partition();
        for w in wanted {
            let j = self.job(w.job);
            let Some(front) = j.requests.front() else { continue };
            if self.node_for(w.job, front).is_some() {
                continue;
            }
            let mut candidates: Vec<(u64, ContainerId, u64)> = self
                .containers
                .iter()
                .filter_map(|e| e.container.as_ref())
                .filter(|c| {
                    c.selector == default
                        && !c.placeholder
                        && c.preemption.as_ref().is_none_or(|m| m.for_job == w.job)
                        && !taken.contains(&c.id)
                        && self.nodes.slots[c.node as usize].label.as_deref() == Some(w.label.as_str())
                        && self.queues[self.job(c.job).leaf as usize].allow_preemption_from
                })
                .map(|c| (c.seq, c.id, c.resources.memory))
                .collect();
            candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
            let mut need = w.memory;
            for (_, id, memory) in candidates {
                if need == 0 {
                    break;
                }
                need = need.saturating_sub(memory);
                out.push((id, w.job));
            }
        }
        out
    }
}
