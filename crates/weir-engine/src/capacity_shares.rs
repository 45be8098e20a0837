//! What `weir shares` shows of a capacity-mode cluster: per queue, its guarantee (YARN's
//! absolute capacity) and cap in resources, what it holds and asks for now, and the ideal
//! allocation the proportional preemption policy would aim at from this state
//! (`ProportionalCapacityPreemptionPolicy`'s `idealAssigned`, `toBePreempted`,
//! `actuallyToBePreempted`), computed as a round would, without acting on it.

use weir_model::{QueuePath, Resources};

use crate::engine::Engine;

/// One queue of a capacity-mode engine, now.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityShare {
    pub queue: QueuePath,
    /// The guarantee in resources (root: the cluster).
    pub guaranteed: Resources,
    /// The cap in resources, at most the cluster.
    pub max: Resources,
    pub used: Resources,
    /// Asked for by its runnable jobs and not yet given.
    pub pending: Resources,
    /// The preemption policy's ideal allocation, memory in MiB (`idealAssigned`).
    pub ideal_memory: u64,
    /// What that computation would take back from the queue, memory (`toBePreempted`).
    pub over_ideal_memory: u64,
    /// What a round would ask of a leaf now, after the dead zone and the pace
    /// (`actuallyToBePreempted`); 0 for parents and protected queues.
    pub round_memory: u64,
}

impl Engine {
    /// Every queue's capacity figures in tree order (root first); empty in fair mode.
    pub fn capacity_shares(&self) -> Vec<CapacityShare> {
        if !self.capacity_mode() {
            return Vec::new();
        }
        let total = self.nodes.total;
        let ideal = self.ideal_allocation();
        self.queues
            .iter()
            .zip(&ideal)
            .enumerate()
            .map(|(i, (q, t))| CapacityShare {
                queue: self.config.queues[i].path.clone(),
                guaranteed: if i == 0 { total } else { q.min.component_min(&total) },
                max: q.max.component_min(&total),
                used: q.usage,
                pending: q.pending,
                ideal_memory: t.ideal,
                over_ideal_memory: t.to_be_preempted,
                round_memory: t.to_obtain,
            })
            .collect()
    }
}
