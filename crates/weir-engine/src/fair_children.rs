//! Each fair parent's children kept in the order the descent serves them (issue 22 §3).
//!
//! A placement walks from root to a leaf choosing, under every parent, the most deserving child
//! (`order::FairKey`, then the name). Comparing every child on every placement cost most of a
//! placement; instead a fair parent (in fair mode) keeps its eligible children in a sorted set
//! by packed key (`order::PackedKey`, name rank, index), and the descent takes the first.
//!
//! Eligible: the child has a ready job below it and was not set aside in this pass. A parent
//! with one child keeps no set: its child is taken directly when eligible (the simulator's
//! tree, one leaf under root, re-keyed nothing nobody compares). A child's
//! key follows its memory usage, demand and min share, so it is worked out again
//! (`rekey_path`) wherever those change on a queue path: a container started or released,
//! pending requests added or removed; every key when min shares are resolved again. After a
//! container ends, the keys on its path are worked out just before the next descent instead
//! (`rekey_path_later`, `flush_rekeys`), so many ends under one queue move it once. A child
//! leaves its parent's set when its last ready job does (`count_shape`), and for the rest of a
//! pass when nothing under it can be placed (`exhaust`): exhausted, or every request under it
//! at least one that found no node. Both only hold more as the pass goes on, so the child would
//! be passed over anyway; the next pass puts such children back (`unpark`).
//!
//! The first child of the set is exactly the child the comparison of every child chose (debug
//! builds check it on every descent against that comparison).

use weir_model::Policy;

use crate::engine::Engine;
use crate::nodes::Ask;
use crate::order::{FairKey, PackedKey};
use crate::state::QueueIx;

/// A child's place in its parent's set: key, then name rank above index in one word (siblings
/// in preorder: the comparison of every child kept the first of equals).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ChildKey(PackedKey, u64);

impl ChildKey {
    fn child(&self) -> QueueIx {
        self.1 as QueueIx
    }
}

/// The ordered children of one parent: a sorted `Vec`. A parent has tens of children where a
/// B-tree's upkeep costs more than shifting a few entries; with many, a moved key shifts at
/// most all of them, still less than comparing every child on every placement did.
#[derive(Debug, Default)]
pub(crate) struct ChildSet(Vec<ChildKey>);

impl ChildSet {
    pub(crate) fn insert(&mut self, k: ChildKey) {
        if let Err(at) = self.0.binary_search(&k) {
            self.0.insert(at, k);
        }
    }

    pub(crate) fn remove(&mut self, k: &ChildKey) {
        if let Ok(at) = self.0.binary_search(k) {
            self.0.remove(at);
        }
    }

    /// Put `new` where `old` is. The common case, a child taken first by the descent whose
    /// key grew by a container and stays below the next child's, rewrites it in place: no
    /// search and no shift (issue 22 §3); otherwise the entries between its old and new places
    /// shift by one.
    pub(crate) fn replace(&mut self, old: &ChildKey, new: ChildKey) {
        let v = &mut self.0;
        let at = if v.first() == Some(old) {
            0
        } else {
            match v.binary_search(old) {
                Ok(at) => at,
                Err(_) => return self.insert(new),
            }
        };
        if new > *old && v.get(at + 1).is_none_or(|next| new < *next) {
            v[at] = new;
            return;
        }
        crate::sorted::shift_into(v, at, new, 0);
    }

    pub(crate) fn first(&self) -> Option<&ChildKey> {
        self.0.first()
    }

    pub(crate) fn contains(&self, k: &ChildKey) -> bool {
        self.0.binary_search(k).is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl Engine {
    /// Whether `q`'s parent keeps its children ordered: a fair (not drf) parent in fair mode
    /// with two children or more. An only child needs no order (`first_fair_child` takes it
    /// directly), so it has no key to work out on every placement and end (issue 22 §2).
    fn kept_in_parent(&self, q: QueueIx) -> Option<QueueIx> {
        let p = self.queues[q as usize].parent?;
        let parent = &self.queues[p as usize];
        (!self.capacity_mode() && parent.policy != Policy::Drf && parent.children.len() >= 2).then_some(p)
    }

    fn child_key(&self, q: QueueIx) -> ChildKey {
        let queue = &self.queues[q as usize];
        ChildKey(FairKey::of(&self.standing(q)).packed(), (u64::from(queue.name_rank) << 32) | u64::from(q))
    }

    /// Put `q` in its parent's set if it belongs there and is not in it.
    pub(crate) fn kid_enter(&mut self, q: QueueIx) {
        let queue = &self.queues[q as usize];
        if queue.kid_key.is_some() || queue.ready_jobs == 0 || queue.exhausted_pass == self.pass {
            return;
        }
        let Some(p) = self.kept_in_parent(q) else { return };
        let key = self.child_key(q);
        self.queues[p as usize].kids.insert(key);
        self.queues[q as usize].kid_key = Some(key);
    }

    /// Take `q` out of its parent's set, if it is in it.
    pub(crate) fn kid_leave(&mut self, q: QueueIx) {
        let queue = &mut self.queues[q as usize];
        let (Some(key), Some(p)) = (queue.kid_key.take(), queue.parent) else { return };
        self.queues[p as usize].kids.remove(&key);
    }

    /// Work out again the keys of `leaf` and its ancestors after their usage or demand changed.
    pub(crate) fn rekey_path(&mut self, leaf: QueueIx) {
        let mut q = leaf;
        while let Some(p) = self.queues[q as usize].parent {
            self.rekey(q, p);
            q = p;
        }
    }

    fn rekey(&mut self, q: QueueIx, p: QueueIx) {
        if let Some(old) = self.queues[q as usize].kid_key {
            let new = self.child_key(q);
            if new != old {
                self.queues[p as usize].kids.replace(&old, new);
                self.queues[q as usize].kid_key = Some(new);
            }
        }
    }

    /// `rekey_path`, put off until the next descent (`flush_rekeys`): a batch of container
    /// ends under one queue moves it once. Only the descent reads the sets.
    pub(crate) fn rekey_path_later(&mut self, leaf: QueueIx) {
        let mut q = leaf;
        while let Some(p) = self.queues[q as usize].parent {
            let queue = &mut self.queues[q as usize];
            if queue.kid_key.is_some() && !queue.rekey_pending {
                queue.rekey_pending = true;
                self.rekey_pending.push(q);
            }
            q = p;
        }
    }

    /// Every key put off by `rekey_path_later` worked out now.
    pub(crate) fn flush_rekeys(&mut self) {
        for q in std::mem::take(&mut self.rekey_pending) {
            self.queues[q as usize].rekey_pending = false;
            if let Some(p) = self.queues[q as usize].parent {
                self.rekey(q, p);
            }
        }
    }

    /// Work out every key again (min shares resolved anew).
    pub(crate) fn rekey_all(&mut self) {
        for q in 1..self.queues.len() as QueueIx {
            if self.queues[q as usize].kid_key.is_some() {
                self.kid_leave(q);
                self.kid_enter(q);
            }
        }
    }

    /// Nothing under `q` can be placed in this pass: mark it, and set it aside until the next.
    pub(crate) fn exhaust(&mut self, q: QueueIx) {
        self.queues[q as usize].exhausted_pass = self.pass;
        if self.queues[q as usize].kid_key.is_some() {
            self.kid_leave(q);
            self.parked.push(q);
        }
    }

    /// A new pass: children set aside in the last one come back.
    pub(crate) fn unpark(&mut self) {
        for q in std::mem::take(&mut self.parked) {
            self.kid_enter(q);
        }
    }

    /// Every ordered child set holds exactly the eligible children, each under its current
    /// key (`check_invariants`).
    pub(crate) fn check_child_sets(&self) -> Result<(), String> {
        for q in 1..self.queues.len() as QueueIx {
            let queue = &self.queues[q as usize];
            let want = (self.kept_in_parent(q).is_some()
                && queue.ready_jobs > 0
                && queue.exhausted_pass != self.pass)
                .then(|| self.child_key(q));
            // A key put off (`rekey_path_later`) is worked out before the next descent.
            if queue.kid_key != want && !(queue.rekey_pending && queue.kid_key.is_some() && want.is_some()) {
                return Err(format!(
                    "{}: in its parent's ordered child set as {:?}, should be {want:?}",
                    queue.path, queue.kid_key
                ));
            }
            if let (Some(k), Some(p)) = (queue.kid_key, queue.parent) {
                if !self.queues[p as usize].kids.contains(&k) {
                    return Err(format!("{}: missing from its parent's ordered child set", queue.path));
                }
            }
        }
        let members = self.queues.iter().map(|q| q.kids.len()).sum::<usize>();
        let keyed = self.queues.iter().filter(|q| q.kid_key.is_some()).count();
        if members != keyed {
            return Err(format!("the ordered child sets hold {members} children, {keyed} are keyed"));
        }
        Ok(())
    }

    /// The most deserving child of a fair parent that still may place something in this pass:
    /// the first of its set, past children whose every request is at least one that found no
    /// node (set aside on the way).
    pub(crate) fn first_fair_child(&mut self, parent: QueueIx, failed: &[Ask]) -> Option<QueueIx> {
        let found = if let [only] = self.queues[parent as usize].children[..] {
            // An only child, kept in no set: eligible as the sets' members are.
            let q = &self.queues[only as usize];
            if q.ready_jobs == 0 || q.exhausted_pass == self.pass {
                None
            } else if self.subtree_failed(only, failed) {
                self.exhaust(only);
                None
            } else {
                Some(only)
            }
        } else {
            self.first_in_set(parent, failed)
        };
        debug_assert_eq!(found, self.best_fair_child_by_scan(parent, failed), "parent {parent}");
        found
    }

    /// `first_fair_child` for a parent that keeps its children ordered.
    fn first_in_set(&mut self, parent: QueueIx, failed: &[Ask]) -> Option<QueueIx> {
        loop {
            let Some(c) = self.queues[parent as usize].kids.first().map(ChildKey::child) else { break None };
            if self.subtree_failed(c, failed) {
                self.exhaust(c);
                continue;
            }
            break Some(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{ChildKey, ChildSet};
    use crate::order::PackedKey;

    fn key(k: u64, child: u64) -> ChildKey {
        ChildKey(PackedKey::from_words([1 << 63, k, 0]), child)
    }

    proptest! {
        /// `replace` leaves the set as removing the old key and inserting the new one would,
        /// whether the key stays in place, moves left or moves right.
        #[test]
        fn replace_is_remove_then_insert(
            keys in proptest::collection::vec(0u64..40, 1..30),
            pick in any::<proptest::sample::Index>(),
            to in 0u64..40,
        ) {
            let mut set = ChildSet::default();
            for (child, &k) in keys.iter().enumerate() {
                set.insert(key(k, child as u64));
            }
            let members = set.0.clone();
            let old = members[pick.index(members.len())];
            let new = key(to, old.1);
            let mut want = members.clone();
            want.retain(|k| *k != old);
            want.push(new);
            want.sort();
            set.replace(&old, new);
            prop_assert_eq!(set.0, want);
        }
    }
}
