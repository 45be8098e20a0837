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
//! Not enforced yet: the per-label capacities and max capacities (sibling order, caps and
//! preemption per partition); the sibling order and limits see the queue's whole usage.

use crate::engine::Engine;
use crate::input::{Request, Selector};
use crate::state::QueueIx;

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
