//! Nodes and the best-fit index used to place containers.
//!
//! Nodes with room sit in an ordered index keyed by free memory, then free cpu: placement takes
//! the tightest fit on memory (then cpu) among the nodes whose cpu and gpu also suffice. A node
//! held for one job (a reservation, or room that preemption is freeing for it) leaves the index
//! until the hold ends, so nobody else takes the room.
//!
//! A node may also carry a label and a GPU model, and its GPUs may be shared: a request for a
//! fraction of a GPU ([`Ask::milli`]) is placed on one physical GPU with that much free, the
//! tightest such GPU first, never split across two. GPUs given out in fractions are not free for
//! whole-GPU requests until every fraction on them has ended. A request's selector limits the
//! nodes it may use by label and GPU model.
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
use crate::input::{NodeSpec, Selector, SelectorId};
use crate::sorted::ChunkedSet;
use crate::state::{JobSlot, NodeSlot};

/// What one container needs from a node: its resources (whole GPUs in `r.gpu`), a fraction of
/// one GPU in thousandths, and the nodes its selector allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ask {
    pub r: Resources,
    pub milli: u32,
    pub selector: SelectorId,
}

impl Ask {
    pub fn plain(r: Resources) -> Ask {
        Ask { r, milli: 0, selector: SelectorId::default() }
    }

    /// Whether any node that could hold `self` could also hold `other`: the same or no
    /// selector, no larger a GPU fraction, no more resources. (A request that found no node
    /// makes every request it covers fail too.)
    pub fn covers(&self, other: &Ask) -> bool {
        (self.selector.0 == 0 || self.selector == other.selector)
            && self.milli <= other.milli
            && self.r.fits_in(&other.r)
    }
}

/// A selector with its names interned: sorted label and model numbers (empty: any).
#[derive(Clone, Debug, Default)]
struct SelectorSet {
    labels: Vec<u32>,
    models: Vec<u32>,
    /// Capacity mode's default partition: unlabelled nodes, and those of labels that lend
    /// their room (`Partitions::lent`).
    default_partition: bool,
}

/// Capacity mode's node partitions (`capacity_labels.rs`): which labelled nodes lend their room
/// to requests for no label. Empty outside capacity mode with labels.
#[derive(Clone, Debug, Default)]
struct Partitions {
    /// The selector of requests for no label (0: no partitions).
    default: SelectorId,
    /// Label numbers of non-exclusive partitions, sorted.
    lent: Vec<u32>,
    /// Those of `lent` whose own requests wait for room now: they lend nothing.
    wanted: Vec<u32>,
}

/// Thousandths in one GPU.
pub(crate) const GPU_MILLI: u32 = 1000;
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
    /// Its label and GPU model as interned numbers (0: none).
    pub label_id: u32,
    pub model_id: u32,
    /// GPUs given out in fractions: thousandths used on each; a slot at 0 is free for reuse.
    pub frac: Vec<u16>,
    /// GPUs partly used by fractions (slots above 0): not free for whole-GPU requests.
    pub frac_gpus: u64,
    /// The most room (thousandths) left on a partly used GPU; 0 when there is none.
    pub frac_room: u32,
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
    /// Room left: whole GPUs count only those not given out in fractions.
    pub fn free(&self) -> Resources {
        let mut f = self.capacity - self.used;
        f.gpu = f.gpu.saturating_sub(self.frac_gpus);
        f
    }

    /// Whether a fraction of `milli` thousandths fits on one of its GPUs.
    pub fn frac_fits(&self, milli: u32) -> bool {
        milli == 0 || self.frac_room >= milli || self.free().gpu >= 1
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
    /// Thousandths of a GPU given out as fractions (`used.gpu` counts whole GPUs only).
    pub frac_milli: u64,
    /// Nodes currently held for a starved job.
    pub reserved: BTreeSet<NodeSlot>,
    /// Label and GPU model names, numbered from 1 in the order first seen.
    names: HashMap<String, u32>,
    /// Registered selectors; index 0 allows every node.
    selectors: Vec<SelectorSet>,
    selector_ids: HashMap<Selector, SelectorId>,
    /// Each registered selector as given, for explanations (index 0: none).
    selector_names: Vec<Selector>,
    partitions: Partitions,
}

impl Nodes {
    fn name_id(&mut self, name: Option<&str>) -> u32 {
        let Some(name) = name else { return 0 };
        let next = self.names.len() as u32 + 1;
        *self.names.entry(name.to_string()).or_insert(next)
    }

    /// The name interned as `id` (0: none).
    pub fn name_of(&self, id: u32) -> Option<String> {
        (id != 0).then(|| self.names.iter().find(|(_, &v)| v == id).map(|(k, _)| k.clone())).flatten()
    }

    /// The number of a selector, registering it the first time it is seen.
    pub fn selector(&mut self, s: &Selector) -> SelectorId {
        if self.selectors.is_empty() {
            self.selectors.push(SelectorSet::default());
            self.selector_names.push(Selector::default());
        }
        if s.labels.is_empty() && s.gpu_models.is_empty() {
            return SelectorId::default();
        }
        if let Some(&id) = self.selector_ids.get(s) {
            return id;
        }
        let mut set = SelectorSet::default();
        for l in &s.labels {
            set.labels.push(self.name_id(Some(l)));
        }
        for m in &s.gpu_models {
            set.models.push(self.name_id(Some(m)));
        }
        set.labels.sort_unstable();
        set.models.sort_unstable();
        let id = SelectorId(self.selectors.len() as u32);
        self.selectors.push(set);
        self.selector_ids.insert(s.clone(), id);
        self.selector_names.push(s.clone());
        id
    }

    /// The selector as a phrase (" on nodes with label in [a] and GPU model in [A100]"), empty
    /// for any node.
    pub fn describe(&self, id: SelectorId) -> String {
        let Some(s) = self.selector_names.get(id.0 as usize).filter(|_| id.0 != 0) else {
            return String::new();
        };
        if id == self.partitions.default {
            return " on nodes of the default partition (no label, or a label that lends its room)"
                .to_string();
        }
        let mut parts = Vec::new();
        if !s.labels.is_empty() {
            parts.push(format!("label in [{}]", s.labels.join(", ")));
        }
        if !s.gpu_models.is_empty() {
            parts.push(format!("GPU model in [{}]", s.gpu_models.join(", ")));
        }
        format!(" on nodes with {}", parts.join(" and "))
    }

    /// Capacity mode with node labels: register the default partition's selector (unlabelled
    /// nodes and those of the `lent` labels) and return it.
    pub fn set_partitions(&mut self, lent: &[String]) -> SelectorId {
        self.selector(&Selector::default());
        let mut ids: Vec<u32> = lent.iter().map(|l| self.name_id(Some(l))).collect();
        ids.sort_unstable();
        let id = SelectorId(self.selectors.len() as u32);
        self.selectors.push(SelectorSet { default_partition: true, ..SelectorSet::default() });
        self.selector_names.push(Selector::default());
        self.partitions = Partitions { default: id, lent: ids, wanted: Vec::new() };
        id
    }

    /// The non-exclusive labels (by name) whose own requests wait: their nodes lend nothing
    /// until those requests are served (YARN offers a non-exclusive node's room to requests
    /// for its label first).
    pub fn set_wanted(&mut self, labels: &[String]) {
        let mut ids: Vec<u32> = labels.iter().map(|l| self.name_id(Some(l))).collect();
        ids.sort_unstable();
        self.partitions.wanted = ids;
    }

    /// Whether some partition lends its room.
    pub fn lends(&self) -> bool {
        !self.partitions.lent.is_empty()
    }

    /// The default partition's selector (0 when there are no partitions).
    pub fn default_partition(&self) -> SelectorId {
        self.partitions.default
    }

    /// A registered selector as given (the default for 0 and the default partition's).
    pub fn selector_of(&self, id: SelectorId) -> Selector {
        self.selector_names.get(id.0 as usize).cloned().unwrap_or_default()
    }

    pub fn knows_selector(&self, id: SelectorId) -> bool {
        id.0 == 0 || (id.0 as usize) < self.selectors.len()
    }

    /// Whether a container of the selector may run on the node: as `allows`, but a
    /// non-exclusive label's nodes hold default-partition containers even while its own
    /// requests wait (they are only not placed there then).
    pub fn may_hold(&self, slot: NodeSlot, selector: SelectorId) -> bool {
        let lent = self.selectors.get(selector.0 as usize).is_some_and(|s| s.default_partition)
            && self.partitions.lent.binary_search(&self.slots[slot as usize].label_id).is_ok();
        lent || self.allows(slot, selector)
    }

    /// Whether the selector lets a container on the node (its size aside).
    pub fn allows(&self, slot: NodeSlot, selector: SelectorId) -> bool {
        if selector.0 == 0 {
            return true;
        }
        let Some(set) = self.selectors.get(selector.0 as usize) else { return false };
        let n = &self.slots[slot as usize];
        if set.default_partition {
            let p = &self.partitions;
            return n.label_id == 0
                || (p.lent.binary_search(&n.label_id).is_ok()
                    && p.wanted.binary_search(&n.label_id).is_err());
        }
        let listed = |list: &[u32], v: u32| list.is_empty() || (v != 0 && list.binary_search(&v).is_ok());
        listed(&set.labels, n.label_id) && listed(&set.models, n.model_id)
    }

    pub fn add(&mut self, spec: &NodeSpec) -> NodeSlot {
        let slot = self.slots.len() as NodeSlot;
        let label_id = self.name_id(spec.label.as_deref());
        let model_id = self.name_id(spec.gpu_model.as_deref());
        self.slots.push(Node {
            id: spec.id,
            capacity: spec.resources,
            used: Resources::ZERO,
            label: spec.label.clone(),
            alive: true,
            containers: 0,
            hold: None,
            marked: Resources::ZERO,
            label_id,
            model_id,
            frac: Vec::new(),
            frac_gpus: 0,
            frac_room: 0,
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
        let new = self.indexable(slot).then(|| self.key(slot));
        match (old, new) {
            (Some(old), Some(new)) => self.index.replace(&old, new),
            (Some(old), None) => self.index.remove(&old),
            (None, Some(new)) => self.index.insert(new),
            (None, None) => {}
        }
    }

    /// Give a container its room on a node (checked by the caller). Returns the GPU slot a
    /// fraction went to (0 without one).
    pub fn allocate(&mut self, slot: NodeSlot, ask: &Ask) -> u16 {
        let old = self.key(slot);
        let r = &ask.r;
        let n = &mut self.slots[slot as usize];
        n.used += *r;
        n.containers += 1;
        let gpu = if ask.milli > 0 { take_fraction(n, ask.milli) } else { 0 };
        self.used += *r;
        self.frac_milli += u64::from(ask.milli);
        self.reindex(slot, Some(old));
        gpu
    }

    pub fn release(&mut self, slot: NodeSlot, ask: &Ask, gpu: u16) {
        let old = self.key(slot);
        let r = &ask.r;
        let n = &mut self.slots[slot as usize];
        n.used -= *r;
        n.containers -= 1;
        if ask.milli > 0 {
            give_fraction(n, gpu, ask.milli);
        }
        if n.alive {
            self.used -= *r;
            self.frac_milli -= u64::from(ask.milli);
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
    pub fn best_fit(&self, ask: &Ask) -> Option<NodeSlot> {
        self.best_fit_where(ask, |_| true)
    }

    /// The best fit among the nodes that also pass `also`.
    pub fn best_fit_where(&self, ask: &Ask, also: impl Fn(NodeSlot) -> bool) -> Option<NodeSlot> {
        if ask.selector.0 != 0 && ask.selector == self.partitions.default && !self.partitions.lent.is_empty()
        {
            // Room of a non-exclusive partition is only lent: unlabelled nodes first.
            let own = self.index.best_fit(&ask.r, |slot| {
                let n = &self.slots[slot as usize];
                n.label_id == 0 && n.free().gpu >= ask.r.gpu && n.frac_fits(ask.milli) && also(slot)
            });
            if own.is_some() {
                return own;
            }
        }
        self.index.best_fit(&ask.r, |slot| {
            let n = &self.slots[slot as usize];
            n.free().gpu >= ask.r.gpu
                && n.frac_fits(ask.milli)
                && self.allows(slot, ask.selector)
                && also(slot)
        })
    }

    pub fn fits(&self, slot: NodeSlot, ask: &Ask) -> bool {
        let n = &self.slots[slot as usize];
        n.alive && ask.r.fits_in(&n.free()) && n.frac_fits(ask.milli) && self.allows(slot, ask.selector)
    }

    /// Whether the node could hold the container when empty.
    pub fn could_hold(&self, slot: NodeSlot, ask: &Ask) -> bool {
        let n = &self.slots[slot as usize];
        ask.r.fits_in(&n.capacity)
            && (ask.milli == 0 || n.capacity.gpu >= 1)
            && self.allows(slot, ask.selector)
    }

    /// A node to reserve for a container of `r` that fits on none now: alive, held for no job,
    /// able to hold `r` when empty, and with the most free room (memory, then cpu), so that the
    /// wait is the shortest; `None` if there is none. `skip` excludes nodes.
    pub fn reservation_candidate(&self, ask: &Ask, skip: impl Fn(NodeSlot) -> bool) -> Option<NodeSlot> {
        let ok = |s: NodeSlot| {
            let n = &self.slots[s as usize];
            n.alive && n.hold.is_none() && self.could_hold(s, ask) && !skip(s)
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

/// Put a fraction on the tightest GPU with room for it, else on a GPU nobody uses (the caller
/// checked that one of the two exists). Returns the GPU's slot.
fn take_fraction(n: &mut Node, milli: u32) -> u16 {
    let tightest = n
        .frac
        .iter()
        .enumerate()
        .filter(|(_, &used)| used > 0 && GPU_MILLI - u32::from(used) >= milli)
        .max_by_key(|(i, &used)| (used, std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    let i = match tightest {
        Some(i) => i,
        None => {
            n.frac_gpus += 1;
            match n.frac.iter().position(|&used| used == 0) {
                Some(i) => i,
                None => {
                    n.frac.push(0);
                    n.frac.len() - 1
                }
            }
        }
    };
    n.frac[i] += milli as u16;
    n.frac_room = frac_room(&n.frac);
    i as u16
}

fn give_fraction(n: &mut Node, gpu: u16, milli: u32) {
    let Some(used) = n.frac.get_mut(usize::from(gpu)) else { return };
    *used = used.saturating_sub(milli as u16);
    if *used == 0 {
        n.frac_gpus -= 1;
    }
    while n.frac.last() == Some(&0) {
        n.frac.pop();
    }
    n.frac_room = frac_room(&n.frac);
}

fn frac_room(frac: &[u16]) -> u32 {
    frac.iter().filter(|&&u| u > 0).map(|&u| GPU_MILLI - u32::from(u)).max().unwrap_or(0)
}

/// Index keys: (free memory, free cpu, slot).
type FitKey = (u64, u64, NodeSlot);

/// A key as one of the index's sets holds it. Classes of free cpu below 2^32 millicores (every
/// node there is) hold each key packed in one `u128` (memory, cpu, slot from the top bits
/// down, the same order): the best-fit set's searches and moves on every start and end compare
/// two words instead of three fields and shift 16 bytes instead of 24 (issue 22 §3).
trait StoredKey: Ord + Copy {
    fn pack(key: FitKey) -> Self;
    fn unpack(self) -> FitKey;
}

impl StoredKey for FitKey {
    fn pack(key: FitKey) -> Self {
        key
    }

    fn unpack(self) -> FitKey {
        self
    }
}

impl StoredKey for u128 {
    fn pack((memory, cpu, slot): FitKey) -> Self {
        debug_assert!(cpu >> 32 == 0, "cpu {cpu} in a packed class");
        (u128::from(memory) << 64) | (u128::from(cpu) << 32) | u128::from(slot)
    }

    fn unpack(self) -> FitKey {
        ((self >> 64) as u64, (self >> 32) as u32 as u64, self as u32)
    }
}

/// Classes `0..PACKED` hold free cpu below 2^32: their keys are packed.
const PACKED: usize = 33;

/// The best-fit index: one ordered set per class of free cpu (class 0 holds cpu 0, class k
/// holds cpu in [2^(k−1), 2^k)), and a bit per non-empty class.
#[derive(Debug)]
struct FitIndex {
    packed: Vec<ChunkedSet<u128>>,
    wide: Vec<ChunkedSet<FitKey>>,
    non_empty: u128,
}

impl Default for FitIndex {
    fn default() -> FitIndex {
        FitIndex {
            packed: (0..PACKED).map(|_| ChunkedSet::default()).collect(),
            wide: (PACKED..=64).map(|_| ChunkedSet::default()).collect(),
            non_empty: 0,
        }
    }
}

fn class(cpu: u64) -> usize {
    (u64::BITS - cpu.leading_zeros()) as usize
}

impl FitIndex {
    fn insert(&mut self, key: FitKey) {
        let c = class(key.1);
        if c < PACKED {
            self.packed[c].insert(u128::pack(key));
        } else {
            self.wide[c - PACKED].insert(key);
        }
        self.non_empty |= 1 << c;
    }

    fn remove(&mut self, key: &FitKey) {
        let c = class(key.1);
        let empty = if c < PACKED {
            let set = &mut self.packed[c];
            set.remove(&u128::pack(*key));
            set.is_empty()
        } else {
            let set = &mut self.wide[c - PACKED];
            set.remove(key);
            set.is_empty()
        };
        if empty {
            self.non_empty &= !(1 << c);
        }
    }

    /// Move a key: `old` (if in the index) becomes `new` (not in it).
    fn replace(&mut self, old: &FitKey, new: FitKey) {
        let c = class(old.1);
        if c != class(new.1) {
            self.remove(old);
            return self.insert(new);
        }
        if c < PACKED {
            self.packed[c].replace(&u128::pack(*old), u128::pack(new));
        } else {
            self.wide[c - PACKED].replace(old, new);
        }
        self.non_empty |= 1 << c;
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
            let found = if c < PACKED {
                first_fit(&self.packed[c], r, best, &other)
            } else {
                first_fit(&self.wide[c - PACKED], r, best, &other)
            };
            if found.is_some() {
                best = found;
            }
        }
        best.map(|(_, _, slot)| slot)
    }

    /// The key with the most free memory (then cpu).
    fn last(&self) -> Option<FitKey> {
        let packed = self.packed.iter().filter_map(|s| s.last().map(|k| k.unpack()));
        let wide = self.wide.iter().filter_map(|s| s.last());
        packed.chain(wide).max()
    }
}

/// The smallest key of one class's set that holds `r`'s memory and cpu, passes `other` and is
/// below `best`. Only in the request's own class can a node have less cpu than `r`: those are
/// skipped a whole memory value at a time. (In a packed class `r.cpu` is below 2^32: the
/// classes searched are the request's own and above.)
fn first_fit<K: StoredKey>(
    set: &ChunkedSet<K>,
    r: &Resources,
    best: Option<FitKey>,
    other: &impl Fn(NodeSlot) -> bool,
) -> Option<FitKey> {
    let mut from = Bound::Included(K::pack((r.memory, r.cpu, 0)));
    loop {
        let stored = set.first_from(from)?;
        let key = stored.unpack();
        if best.is_some_and(|b| key >= b) {
            return None;
        }
        let (memory, cpu, slot) = key;
        if cpu < r.cpu {
            from = Bound::Included(K::pack((memory, r.cpu, 0)));
        } else if other(slot) {
            return Some(key);
        } else {
            from = Bound::Excluded(stored);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(free: &[(u64, u64, u64)]) -> Nodes {
        let mut n = Nodes::default();
        for (i, &(cpu, memory, gpu)) in free.iter().enumerate() {
            n.add(&NodeSpec::new(NodeId(i as u64), Resources::new(cpu, memory, gpu)));
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
        let best_fit = |r: Resources| n.best_fit(&Ask::plain(r));
        assert_eq!(best_fit(Resources::new(1000, 6, 1)), Some(2));
        assert_eq!(best_fit(Resources::new(1000, 6, 0)), Some(3));
        assert_eq!(best_fit(Resources::new(5000, 6, 0)), Some(5));
        assert_eq!(best_fit(Resources::new(500, 2, 0)), Some(4));
        assert_eq!(best_fit(Resources::new(9000, 1, 0)), None);
        assert_eq!(best_fit(Resources::new(100, 17, 0)), None);
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
            assert_eq!(n.best_fit(&Ask::plain(r)), want, "{r}");
        }
    }
}
