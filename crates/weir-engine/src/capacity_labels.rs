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
//! Not enforced yet: the per-label capacities and max capacities (sibling order, caps and
//! the proportional policy per partition); the sibling order and limits see the queue's whole
//! usage.

use std::collections::BTreeSet;

use crate::engine::Engine;
use crate::ids::ContainerId;
use crate::input::{Request, Selector};
use crate::state::{JobSlot, QueueIx};

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
