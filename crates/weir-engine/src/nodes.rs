//! Nodes and the best-fit index used to place containers.
//!
//! Nodes with room sit in an ordered index keyed by free memory, then free cpu: placement takes
//! the tightest fit on memory (then cpu) among the nodes whose cpu and gpu also suffice. A node
//! held for one job (a reservation, or room that preemption is freeing for it) leaves the index
//! until the hold ends, so nobody else takes the room.
//!
//! The index is split by free cpu into power-of-two classes ([`FitIndex`]). A node in a class
//! above the request's holds the request's cpu for sure, so that class answers with one ordered
//! lookup; only the request's own class is walked past nodes short of cpu. Without the split, a
//! cluster whose nodes ran out of cpu long before memory made every placement walk past every
//! such node.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

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
    /// Held for one job: reserved for its next container, or where its victims drain.
    pub hold: Option<(JobSlot, Hold)>,
    /// Resources of containers on this node marked for preemption.
    pub marked: Resources,
}

/// Why a node is held for a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// YARN's reservation: the job's next container fits on no node; this one is kept for it
    /// until it fits here (`FSAppAttempt.reserve`, `FSQueue.assignContainerPreCheck`).
    Reserved,
    /// Containers on it are being preempted for the job (`FSSchedulerNode.addContainersForPreemption`).
    Preempted,
}

impl Node {
    pub fn free(&self) -> Resources {
        self.capacity - self.used
    }

    pub fn held_for(&self) -> Option<JobSlot> {
        self.hold.map(|(j, _)| j)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Nodes {
    pub slots: Vec<Node>,
    pub by_id: HashMap<NodeId, NodeSlot>,
    index: FitIndex,
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
            hold: None,
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
        n.hold = None;
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
        n.alive && n.hold.is_none() && (f.memory > 0 || f.cpu > 0 || f.gpu > 0)
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

    pub fn reserve(&mut self, slot: NodeSlot, job: JobSlot, hold: Hold) {
        let old = self.key(slot);
        self.slots[slot as usize].hold = Some((job, hold));
        self.reserved.insert(slot);
        self.reindex(slot, Some(old));
    }

    pub fn unreserve(&mut self, slot: NodeSlot) {
        let old = self.key(slot);
        self.slots[slot as usize].hold = None;
        self.reserved.remove(&slot);
        self.reindex(slot, Some(old));
    }

    /// The tightest unreserved node (by memory, then cpu) that holds `r`. Within one free-memory
    /// value the index is ordered by free cpu, so nodes short of cpu are skipped a whole
    /// memory value at a time rather than one by one: on a cpu-bound cluster, where many nodes
    /// have memory left but no cpu, the search stays logarithmic per distinct memory value.
    pub fn best_fit(&self, r: &Resources) -> Option<NodeSlot> {
        self.index.best_fit(r, |slot| self.slots[slot as usize].free().gpu >= r.gpu)
    }

    pub fn fits(&self, slot: NodeSlot, r: &Resources) -> bool {
        let n = &self.slots[slot as usize];
        n.alive && r.fits_in(&n.free())
    }

    /// A node to reserve for a container of `r` that fits on none now: alive, held for no job,
    /// able to hold `r` when empty, and with the most free room (memory, then cpu), so that the
    /// wait is the shortest; `None` if there is none. `skip` excludes nodes.
    pub fn reservation_candidate(&self, r: &Resources, skip: impl Fn(NodeSlot) -> bool) -> Option<NodeSlot> {
        let ok = |s: NodeSlot| {
            let n = &self.slots[s as usize];
            n.alive && n.hold.is_none() && r.fits_in(&n.capacity) && !skip(s)
        };
        // Usually the roomiest indexed node qualifies (nodes of one kind); else look at all.
        if let Some((_, _, s)) = self.index.last() {
            if ok(s) {
                return Some(s);
            }
        }
        (0..self.slots.len() as NodeSlot).filter(|&s| ok(s)).max_by_key(|&s| {
            let f = self.slots[s as usize].free();
            (f.memory, f.cpu, std::cmp::Reverse(s))
        })
    }

    /// The largest free room on any node, by memory then cpu (for explanations).
    pub fn largest_free(&self) -> Resources {
        self.index.last().map(|(_, _, s)| self.slots[s as usize].free()).unwrap_or_default()
    }

    pub fn count(&self) -> usize {
        self.by_id.len()
    }
}

/// Index keys: (free memory, free cpu, slot).
type FitKey = (u64, u64, NodeSlot);

/// The best-fit index: one ordered set per class of free cpu (class 0 holds cpu 0, class k
/// holds cpu in [2^(k−1), 2^k)), and a bit per non-empty class.
#[derive(Debug)]
struct FitIndex {
    classes: Vec<BTreeSet<FitKey>>,
    non_empty: u128,
}

impl Default for FitIndex {
    fn default() -> FitIndex {
        FitIndex { classes: (0..=64).map(|_| BTreeSet::new()).collect(), non_empty: 0 }
    }
}

fn class(cpu: u64) -> usize {
    (u64::BITS - cpu.leading_zeros()) as usize
}

impl FitIndex {
    fn insert(&mut self, key: FitKey) {
        let c = class(key.1);
        self.classes[c].insert(key);
        self.non_empty |= 1 << c;
    }

    fn remove(&mut self, key: &FitKey) {
        let c = class(key.1);
        self.classes[c].remove(key);
        if self.classes[c].is_empty() {
            self.non_empty &= !(1 << c);
        }
    }

    /// The smallest key, by (memory, cpu, slot), that holds `r`'s memory and cpu and passes
    /// `other` (the resources the key does not carry).
    fn best_fit(&self, r: &Resources, other: impl Fn(NodeSlot) -> bool) -> Option<NodeSlot> {
        let own = class(r.cpu);
        let mut best: Option<FitKey> = None;
        let mut classes = self.non_empty >> own << own;
        while classes != 0 {
            let c = classes.trailing_zeros() as usize;
            classes &= classes - 1;
            let set = &self.classes[c];
            let mut from = Bound::Included((r.memory, r.cpu, 0));
            let found = loop {
                let Some(&key) = set.range((from, Bound::Unbounded)).next() else { break None };
                if best.is_some_and(|b| key >= b) {
                    break None;
                }
                let (memory, cpu, slot) = key;
                if cpu < r.cpu {
                    // Only in the request's own class: skip this memory value's short nodes.
                    from = Bound::Included((memory, r.cpu, 0));
                } else if other(slot) {
                    break Some(key);
                } else {
                    from = Bound::Excluded(key);
                }
            };
            if found.is_some() {
                best = found;
            }
        }
        best.map(|(_, _, slot)| slot)
    }

    /// The key with the most free memory (then cpu).
    fn last(&self) -> Option<FitKey> {
        self.classes.iter().filter_map(|s| s.last().copied()).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(free: &[(u64, u64, u64)]) -> Nodes {
        let mut n = Nodes::default();
        for (i, &(cpu, memory, gpu)) in free.iter().enumerate() {
            n.add(&NodeSpec {
                id: NodeId(i as u64),
                resources: Resources::new(cpu, memory, gpu),
                label: None,
            });
        }
        n
    }

    #[test]
    fn best_fit_is_the_tightest_on_memory_then_cpu_among_nodes_that_hold_the_request() {
        let n = nodes(&[
            (500, 8, 0),  // too little cpu, tight memory
            (900, 8, 0),  // too little cpu
            (4000, 8, 1), // fits: tightest memory, then tightest cpu
            (2000, 8, 0), // fits on cpu but no gpu
            (1000, 4, 1), // too little memory
            (8000, 16, 1),
        ]);
        assert_eq!(n.best_fit(&Resources::new(1000, 6, 1)), Some(2));
        assert_eq!(n.best_fit(&Resources::new(1000, 6, 0)), Some(3));
        assert_eq!(n.best_fit(&Resources::new(5000, 6, 0)), Some(5));
        assert_eq!(n.best_fit(&Resources::new(500, 2, 0)), Some(4));
        assert_eq!(n.best_fit(&Resources::new(9000, 1, 0)), None);
        assert_eq!(n.best_fit(&Resources::new(100, 17, 0)), None);
    }

    #[test]
    fn best_fit_matches_a_full_scan_whatever_the_mix_of_free_room() {
        // A small LCG is enough to spread nodes over many cpu classes and memory values.
        let mut x: u64 = 12345;
        let mut next = |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let free: Vec<(u64, u64, u64)> =
            (0..300).map(|_| (next(20_000), 1 + next(70_000), next(3))).collect();
        let n = nodes(&free);
        for _ in 0..2_000 {
            let r = Resources::new(next(12_000), 1 + next(40_000), next(2));
            let want = free
                .iter()
                .enumerate()
                .filter(|(_, &(c, m, g))| c >= r.cpu && m >= r.memory && g >= r.gpu)
                .min_by_key(|(i, &(c, m, _))| (m, c, *i))
                .map(|(i, _)| i as NodeSlot);
            assert_eq!(n.best_fit(&r), want, "{r}");
        }
    }
}
