//! Nodes and the best-fit index used to place containers.
//!
//! Nodes with room sit in an ordered index keyed by free memory, then free cpu: placement takes
//! the first node (the tightest fit on memory) whose cpu and gpu also suffice. A node reserved
//! for a starved job leaves the index until the reservation ends, so nobody else takes the room
//! preemption is freeing.

use std::collections::{BTreeSet, HashMap};

use weir_model::Resources;

use crate::ids::NodeId;
use crate::input::NodeSpec;
use crate::state::{JobSlot, NodeSlot};

#[derive(Debug)]
pub(crate) struct Node {
    pub id: NodeId,
    pub capacity: Resources,
    pub used: Resources,
    pub label: Option<String>,
    pub alive: bool,
    pub containers: u32,
    /// Held for a starved job while its victims on this node drain.
    pub reserved_for: Option<JobSlot>,
    /// Resources of containers on this node marked for preemption.
    pub marked: Resources,
}

impl Node {
    pub fn free(&self) -> Resources {
        self.capacity - self.used
    }
}

#[derive(Debug, Default)]
pub(crate) struct Nodes {
    pub slots: Vec<Node>,
    pub by_id: HashMap<NodeId, NodeSlot>,
    index: BTreeSet<(u64, u64, NodeSlot)>,
    pub total: Resources,
    pub used: Resources,
    /// Nodes currently held for a starved job.
    pub reserved: BTreeSet<NodeSlot>,
}

impl Nodes {
    pub fn add(&mut self, spec: &NodeSpec) -> NodeSlot {
        let slot = self.slots.len() as NodeSlot;
        self.slots.push(Node {
            id: spec.id,
            capacity: spec.resources,
            used: Resources::ZERO,
            label: spec.label.clone(),
            alive: true,
            containers: 0,
            reserved_for: None,
            marked: Resources::ZERO,
        });
        self.by_id.insert(spec.id, slot);
        self.total += spec.resources;
        self.reindex(slot, None);
        slot
    }

    /// Take a node out of service; its containers must be released by the caller first.
    pub fn remove(&mut self, slot: NodeSlot) {
        let key = self.key(slot);
        self.index.remove(&key);
        let n = &mut self.slots[slot as usize];
        n.alive = false;
        n.reserved_for = None;
        self.reserved.remove(&slot);
        self.total -= n.capacity;
        self.by_id.remove(&n.id);
    }

    fn key(&self, slot: NodeSlot) -> (u64, u64, NodeSlot) {
        let f = self.slots[slot as usize].free();
        (f.memory, f.cpu, slot)
    }

    fn indexable(&self, slot: NodeSlot) -> bool {
        let n = &self.slots[slot as usize];
        let f = n.free();
        n.alive && n.reserved_for.is_none() && (f.memory > 0 || f.cpu > 0 || f.gpu > 0)
    }

    /// Update the index after a node's free room or reservation changed; `old` is its previous key.
    fn reindex(&mut self, slot: NodeSlot, old: Option<(u64, u64, NodeSlot)>) {
        if let Some(k) = old {
            self.index.remove(&k);
        }
        if self.indexable(slot) {
            let k = self.key(slot);
            self.index.insert(k);
        }
    }

    pub fn allocate(&mut self, slot: NodeSlot, r: &Resources) {
        let old = self.key(slot);
        let n = &mut self.slots[slot as usize];
        n.used += *r;
        n.containers += 1;
        self.used += *r;
        self.reindex(slot, Some(old));
    }

    pub fn release(&mut self, slot: NodeSlot, r: &Resources) {
        let old = self.key(slot);
        let n = &mut self.slots[slot as usize];
        n.used -= *r;
        n.containers -= 1;
        if n.alive {
            self.used -= *r;
        }
        self.reindex(slot, Some(old));
    }

    pub fn reserve(&mut self, slot: NodeSlot, job: JobSlot) {
        let old = self.key(slot);
        self.slots[slot as usize].reserved_for = Some(job);
        self.reserved.insert(slot);
        self.reindex(slot, Some(old));
    }

    pub fn unreserve(&mut self, slot: NodeSlot) {
        let old = self.key(slot);
        self.slots[slot as usize].reserved_for = None;
        self.reserved.remove(&slot);
        self.reindex(slot, Some(old));
    }

    /// The tightest unreserved node (by memory) that holds `r`.
    pub fn best_fit(&self, r: &Resources) -> Option<NodeSlot> {
        for &(_, cpu, slot) in self.index.range((r.memory, 0, 0)..) {
            if cpu >= r.cpu && self.slots[slot as usize].free().gpu >= r.gpu {
                return Some(slot);
            }
        }
        None
    }

    pub fn fits(&self, slot: NodeSlot, r: &Resources) -> bool {
        let n = &self.slots[slot as usize];
        n.alive && r.fits_in(&n.free())
    }

    /// The largest free room on any node, by memory then cpu (for explanations).
    pub fn largest_free(&self) -> Resources {
        self.index.iter().next_back().map(|&(_, _, s)| self.slots[s as usize].free()).unwrap_or_default()
    }

    pub fn count(&self) -> usize {
        self.by_id.len()
    }
}
