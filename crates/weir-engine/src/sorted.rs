//! The engine's ordered sets (issue 22 §2, §3), each cheaper than a B-tree for how the engine
//! changes it, and each holding its elements in the order a B-tree would, so that which form
//! a set is in never changes what the engine decides (proptests below check each against
//! `BTreeSet`):
//!
//! - [`SortedSet`], a leaf's ready lanes: a sorted `Vec` while small (tens of jobs in a typical
//!   leaf; the served job moves back on each placement, one shift of the entries it passes),
//!   a B-tree past [`SortedSet::GROW`] entries (a leaf's deep backlog, where a shift would move
//!   them all), a `Vec` again below [`SortedSet::SHRINK`] (apart enough that a set at the
//!   border does not switch on every change).
//! - [`StartOrder`], a job's running containers: appended in start order, ending in any order
//!   (an end marks its entry; ended entries are dropped in bulk).
//! - [`ChunkedSet`], each class of the best-fit index: thousands of nodes whose keys move by a
//!   few places on every start and end.
//!
//! A B-tree's remove and insert cost hundreds of instructions each where a binary search and a
//! shift of a few entries cost tens.

use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub(crate) enum SortedSet<T> {
    Small(Vec<T>),
    Large(BTreeSet<T>),
}

impl<T> Default for SortedSet<T> {
    fn default() -> Self {
        SortedSet::Small(Vec::new())
    }
}

impl<T: Ord + Copy> SortedSet<T> {
    /// More entries than this and a `Vec` becomes a B-tree.
    pub(crate) const GROW: usize = 128;
    /// Fewer than this and a B-tree becomes a `Vec`.
    pub(crate) const SHRINK: usize = 32;

    pub(crate) fn new() -> Self {
        SortedSet::Small(Vec::new())
    }

    /// Add `x`; false if it was there.
    pub(crate) fn insert(&mut self, x: T) -> bool {
        match self {
            SortedSet::Small(v) => {
                // Appending in order (a job's containers by start) is the common case.
                let at = match v.last() {
                    Some(last) if *last < x => v.len(),
                    _ => match v.binary_search(&x) {
                        Ok(_) => return false,
                        Err(at) => at,
                    },
                };
                v.insert(at, x);
                if v.len() > Self::GROW {
                    *self = SortedSet::Large(std::mem::take(v).into_iter().collect());
                }
                true
            }
            SortedSet::Large(s) => s.insert(x),
        }
    }

    /// Take `x` out; false if it was not there.
    pub(crate) fn remove(&mut self, x: &T) -> bool {
        match self {
            SortedSet::Small(v) => match v.binary_search(x) {
                Ok(at) => {
                    v.remove(at);
                    true
                }
                Err(_) => false,
            },
            SortedSet::Large(s) => {
                let removed = s.remove(x);
                if s.len() < Self::SHRINK {
                    *self = SortedSet::Small(std::mem::take(s).into_iter().collect());
                }
                removed
            }
        }
    }

    /// Put `new` (not in the set) where `old` is (in it), as removing `old` and inserting
    /// `new` would; in a `Vec`, with one shift of the entries between the two places instead
    /// of two shifts of everything after them. A lane's served job is usually its first.
    pub(crate) fn replace(&mut self, old: &T, new: T) {
        let SortedSet::Small(v) = self else {
            self.remove(old);
            self.insert(new);
            return;
        };
        let at = if v.first() == Some(old) {
            0
        } else {
            match v.binary_search(old) {
                Ok(at) => at,
                Err(_) => {
                    debug_assert!(false, "replace: the old element is not in the set");
                    self.insert(new);
                    return;
                }
            }
        };
        shift_into(v, at, new, 0);
    }

    pub(crate) fn contains(&self, x: &T) -> bool {
        match self {
            SortedSet::Small(v) => v.binary_search(x).is_ok(),
            SortedSet::Large(s) => s.contains(x),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            SortedSet::Small(v) => v.len(),
            SortedSet::Large(s) => s.len(),
        }
    }

    /// In order, smallest first (double-ended: `.rev()` for largest first).
    pub(crate) fn iter(&self) -> Iter<'_, T> {
        match self {
            SortedSet::Small(v) => Iter::Small(v.iter()),
            SortedSet::Large(s) => Iter::Large(s.iter()),
        }
    }
}

impl<'a, T: Ord + Copy> IntoIterator for &'a SortedSet<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// In sorted `v`, overwrite the element at `at` with `new` and move it to its place: the
/// entries between shift by one, `v` stays sorted (`new` is not in `v`). The first `walk`
/// entries on the way are passed one by one (where moves are usually of a place or two: a
/// node's key in the best-fit index); past them, the rest is found by binary search and
/// shifted at once (where moves are long: a served job going to the back of its lane).
pub(crate) fn shift_into<T: Ord + Copy>(v: &mut [T], mut at: usize, new: T, walk: usize) {
    if new > v[at] {
        for _ in 0..walk {
            if at + 1 == v.len() || v[at + 1] > new {
                v[at] = new;
                return;
            }
            v[at] = v[at + 1];
            at += 1;
        }
        let to = at + 1 + v[at + 1..].partition_point(|k| *k < new);
        v.copy_within(at + 1..to, at);
        v[to - 1] = new;
    } else {
        for _ in 0..walk {
            if at == 0 || v[at - 1] < new {
                v[at] = new;
                return;
            }
            v[at] = v[at - 1];
            at -= 1;
        }
        let to = v[..at].partition_point(|k| *k < new);
        v.copy_within(to..at, to + 1);
        v[to] = new;
    }
}

/// A [`SortedSet`]'s elements in order.
pub(crate) enum Iter<'a, T> {
    Small(std::slice::Iter<'a, T>),
    Large(std::collections::btree_set::Iter<'a, T>),
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        match self {
            Iter::Small(i) => i.next(),
            Iter::Large(i) => i.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(i) => i.size_hint(),
            Iter::Large(i) => i.size_hint(),
        }
    }
}

impl<T> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next_back(),
            Iter::Large(i) => i.next_back(),
        }
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

/// A job's running containers by start sequence (issue 22 §2): a sorted `Vec` in which an end
/// marks its entry, and ended entries are dropped later, many at once.
///
/// A start always comes last (the sequence only grows): a push. Ends come in any order: the
/// entry is found by a binary search on its start sequence ([`Started`]) and marked; an end at
/// either edge of the live entries drops it (with the ended ones next to it) at once, so ends
/// in start order leave nothing behind. Once ended entries outnumber live ones (and are at
/// least [`StartOrder::SLACK`]), one pass drops them all: each end costs a search and a
/// constant share of that pass, whatever the order of ends, where a shift costs up to the
/// job's size and a B-tree a descent and a rebalance on every end. Iteration skips the ended
/// entries, never more than the live ones (plus `SLACK`). An insert out of order (not a start)
/// shifts the entries after it.
#[derive(Debug, Clone)]
pub(crate) struct StartOrder<T> {
    /// In order; the set is the entries of `v[head..]` whose flag is set (the others ended).
    /// `v[head]` and the last entry are live whenever the set is not empty; empty, `v` is too.
    v: Vec<(T, bool)>,
    head: usize,
    /// How many entries of `v[head..]` ended.
    ended: usize,
}

impl<T> Default for StartOrder<T> {
    fn default() -> Self {
        StartOrder { v: Vec::new(), head: 0, ended: 0 }
    }
}

/// An element of a [`StartOrder`]: its start sequence orders it and is unique in the set (a
/// search compares one integer, not the whole element).
pub(crate) trait Started: Ord + Copy {
    fn seq(&self) -> u64;
}

/// A container of a job: its start sequence and id.
impl Started for (u64, crate::ids::ContainerId) {
    fn seq(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
impl Started for u32 {
    fn seq(&self) -> u64 {
        u64::from(*self)
    }
}

impl<T: Started> StartOrder<T> {
    /// Ended entries (or a dropped front) are kept until there are this many at least.
    pub(crate) const SLACK: usize = if cfg!(test) { 4 } else { 32 };

    pub(crate) fn new() -> Self {
        StartOrder::default()
    }

    /// Make room for `n` more without growing step by step (at most 64 more: a job that asks
    /// for thousands may never hold them all at once).
    pub(crate) fn reserve(&mut self, n: usize) {
        self.v.reserve(n.min(64));
    }

    /// Where `x` is or would go in `v`: `Ok` with its index (live or ended), or `Err`.
    fn find(&self, x: &T) -> Result<usize, usize> {
        let seq = x.seq();
        let i = self.head + self.v[self.head..].partition_point(|e| e.0.seq() < seq);
        match self.v.get(i) {
            Some(e) if e.0.seq() == seq => {
                debug_assert!(e.0 == *x, "two elements of one start sequence");
                Ok(i)
            }
            _ => Err(i),
        }
    }

    /// Add `x`; false if it was there.
    pub(crate) fn insert(&mut self, x: T) -> bool {
        if self.v.last().is_none_or(|last| last.0.seq() < x.seq()) {
            self.v.push((x, true));
            return true;
        }
        match self.find(&x) {
            Ok(i) if self.v[i].1 => false,
            Ok(i) => {
                // An ended entry between live ones (the edges are always live): live again.
                self.v[i].1 = true;
                self.ended -= 1;
                true
            }
            Err(i) => {
                self.v.insert(i, (x, true));
                true
            }
        }
    }

    /// Take `x` out; false if it was not there.
    pub(crate) fn remove(&mut self, x: &T) -> bool {
        let Ok(i) = self.find(x) else { return false };
        if !self.v[i].1 {
            return false;
        }
        self.v[i].1 = false;
        self.ended += 1;
        if i == self.head {
            while self.head < self.v.len() && !self.v[self.head].1 {
                self.head += 1;
                self.ended -= 1;
            }
        }
        while self.v.len() > self.head && !self.v[self.v.len() - 1].1 {
            self.v.pop();
            self.ended -= 1;
        }
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.ended >= Self::SLACK && self.ended > self.len() {
            self.v.drain(..self.head);
            self.v.retain(|e| e.1);
            self.head = 0;
            self.ended = 0;
        } else if self.head >= Self::SLACK && 2 * self.head >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.v.len() - self.head - self.ended
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// In order, oldest first (double-ended: `.rev()` for newest first).
    pub(crate) fn iter(&self) -> Live<'_, T> {
        Live(self.v[self.head..].iter())
    }
}

impl<'a, T: Started> IntoIterator for &'a StartOrder<T> {
    type Item = &'a T;
    type IntoIter = Live<'a, T>;

    fn into_iter(self) -> Live<'a, T> {
        self.iter()
    }
}

/// A [`StartOrder`]'s live entries in order.
pub(crate) struct Live<'a, T>(std::slice::Iter<'a, (T, bool)>);

impl<'a, T> Iterator for Live<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        self.0.by_ref().find(|e| e.1).map(|e| &e.0)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, self.0.size_hint().1)
    }
}

impl<T> DoubleEndedIterator for Live<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.by_ref().rfind(|e| e.1).map(|e| &e.0)
    }
}

/// A large ordered set whose elements move by small steps: sorted chunks of at most
/// [`ChunkedSet::CHUNK`] elements, in order (issue 22 §3: the best-fit index of nodes).
///
/// A node's free room changes on every container start and end, and its key in the best-fit
/// order moves by a little: past the few nodes whose free room lies between the old and the
/// new. A B-tree pays a removal and an insertion for that, each a descent, a shift and now and
/// then a rebalance; here, when the new key stays within the old one's chunk, the move is one
/// search and a shift of the entries in between ([`ChunkedSet::replace`]). A chunk that grows
/// past `CHUNK` splits in two; one that shrinks below a quarter of it merges with its right
/// neighbour when both fit in one.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChunkedSet<T> {
    chunks: Vec<Vec<T>>,
}

impl<T: Ord + Copy> ChunkedSet<T> {
    /// Most elements of a chunk (fewer in tests, so that they split and merge often).
    const CHUNK: usize = if cfg!(test) { 8 } else { 64 };

    /// The chunk that holds `x` or would: the first whose last element is at least `x` (the
    /// last chunk when `x` is above all). `None` when empty.
    fn chunk_for(&self, x: &T) -> Option<usize> {
        if self.chunks.is_empty() {
            return None;
        }
        let i = self.chunks.partition_point(|c| c[c.len() - 1] < *x);
        Some(i.min(self.chunks.len() - 1))
    }

    /// Add `x`; false if it was there.
    pub(crate) fn insert(&mut self, x: T) -> bool {
        let Some(i) = self.chunk_for(&x) else {
            self.chunks.push(vec![x]);
            return true;
        };
        let c = &mut self.chunks[i];
        let Err(at) = c.binary_search(&x) else { return false };
        c.insert(at, x);
        if c.len() > Self::CHUNK {
            let tail = c.split_off(c.len() / 2);
            self.chunks.insert(i + 1, tail);
        }
        true
    }

    /// Take `x` out; false if it was not there.
    pub(crate) fn remove(&mut self, x: &T) -> bool {
        let Some(i) = self.chunk_for(x) else { return false };
        let c = &mut self.chunks[i];
        let Ok(at) = c.binary_search(x) else { return false };
        c.remove(at);
        self.settle(i);
        true
    }

    /// Chunk `i` lost an element: drop it when empty, merge it with its right neighbour when
    /// small and both fit in one.
    fn settle(&mut self, i: usize) {
        let len = self.chunks[i].len();
        if len == 0 {
            self.chunks.remove(i);
        } else if len < Self::CHUNK / 4
            && i + 1 < self.chunks.len()
            && len + self.chunks[i + 1].len() <= Self::CHUNK
        {
            let next = self.chunks.remove(i + 1);
            self.chunks[i].extend_from_slice(&next);
        }
    }

    /// Take `old` out if it is in and put `new` (not in the set) in, as `remove` and `insert`
    /// would; with one search and one shift when `new` belongs in `old`'s chunk.
    pub(crate) fn replace(&mut self, old: &T, new: T) {
        let Some(i) = self.chunk_for(old) else {
            self.insert(new);
            return;
        };
        let at = match self.chunks[i].binary_search(old) {
            Ok(at) => at,
            Err(_) => {
                self.insert(new);
                return;
            }
        };
        let after_previous = i == 0 || *self.chunks[i - 1].last().expect("chunks are not empty") < new;
        let before_next = self.chunks.get(i + 1).is_none_or(|next| new < next[0]);
        if !(after_previous && before_next) {
            self.chunks[i].remove(at);
            self.settle(i);
            self.insert(new);
            return;
        }
        shift_into(&mut self.chunks[i], at, new, 4);
    }

    /// The smallest element at or after `from` (`Included`: at least it, `Excluded`: above it).
    pub(crate) fn first_from(&self, from: std::ops::Bound<T>) -> Option<T> {
        use std::ops::Bound;
        let (i, at) = match from {
            Bound::Included(x) => {
                let i = self.chunks.partition_point(|c| c[c.len() - 1] < x);
                (i, self.chunks.get(i)?.partition_point(|e| *e < x))
            }
            Bound::Excluded(x) => {
                let i = self.chunks.partition_point(|c| c[c.len() - 1] <= x);
                (i, self.chunks.get(i)?.partition_point(|e| *e <= x))
            }
            Bound::Unbounded => (0, 0),
        };
        self.chunks.get(i).map(|c| c[at])
    }

    pub(crate) fn last(&self) -> Option<T> {
        self.chunks.last().and_then(|c| c.last().copied())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// In order (tests).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::{ChunkedSet, SortedSet, StartOrder};

    proptest! {
        /// Whatever the inserts and removes, and across the switches between its two forms,
        /// the set holds what a B-tree would, in the same order, and answers alike.
        #[test]
        fn behaves_as_a_btree_set(ops in proptest::collection::vec((0u8..4, 0u16..400), 0..2_000)) {
            let mut set = SortedSet::new();
            let mut want = BTreeSet::new();
            for (op, x) in ops {
                match op {
                    0 => prop_assert_eq!(set.insert(x), want.insert(x)),
                    1 => prop_assert_eq!(set.remove(&x), want.remove(&x)),
                    _ => {
                        // A move of a present element (the first, or one further on) to an
                        // absent place.
                        let from = if op == 2 { 0 } else { x / 2 };
                        let Some(&old) = want.range(from..).next() else { continue };
                        if want.contains(&x) { continue }
                        set.replace(&old, x);
                        want.remove(&old);
                        want.insert(x);
                    }
                }
                prop_assert_eq!(set.len(), want.len());
                prop_assert_eq!(set.contains(&x), want.contains(&x));
            }
            prop_assert!(set.iter().eq(want.iter()));
            prop_assert!(set.iter().rev().eq(want.iter().rev()));
        }
    }

    #[test]
    fn grows_into_a_btree_and_shrinks_back_to_a_vec() {
        let mut set = SortedSet::new();
        for x in 0..=SortedSet::<u32>::GROW as u32 {
            set.insert(x);
        }
        assert!(matches!(set, SortedSet::Large(_)), "past GROW entries: a B-tree");
        // Oldest first, as a trace's tasks end.
        let mut x = 0;
        while set.len() >= SortedSet::<u32>::SHRINK {
            assert!(set.remove(&x));
            x += 1;
        }
        assert!(matches!(set, SortedSet::Small(_)), "below SHRINK entries: a Vec again");
        assert!(set.iter().copied().eq(x..=SortedSet::<u32>::GROW as u32));
    }

    proptest! {
        /// Inserts, removes, moves and searches from a bound answer as a B-tree would, across
        /// chunks splitting, emptying and merging (chunks of 8 in tests).
        #[test]
        fn chunked_behaves_as_a_btree_set(
            ops in proptest::collection::vec((0u8..4, 0u16..300, 0u16..300), 0..1_500),
        ) {
            use std::ops::Bound;
            let mut set = ChunkedSet::default();
            let mut want = BTreeSet::new();
            for (op, x, y) in ops {
                match op {
                    0 => prop_assert_eq!(set.insert(x), want.insert(x)),
                    1 => prop_assert_eq!(set.remove(&x), want.remove(&x)),
                    2 => {
                        // A move: of a present element to an absent place (near or far).
                        // Of a present element, or of one not there (a plain insert).
                        let old = want.range(x..).next().copied().unwrap_or(x);
                        if want.contains(&y) || old == y { continue }
                        set.replace(&old, y);
                        want.remove(&old);
                        want.insert(y);
                    }
                    _ => {
                        prop_assert_eq!(set.first_from(Bound::Included(x)), want.range(x..).next().copied());
                        prop_assert_eq!(
                            set.first_from(Bound::Excluded(x)),
                            want.range((Bound::Excluded(x), Bound::Unbounded)).next().copied()
                        );
                    }
                }
                prop_assert_eq!(set.last(), want.last().copied());
                prop_assert_eq!(set.is_empty(), want.is_empty());
            }
            prop_assert!(set.iter().eq(want.iter()));
            prop_assert!(set.chunks.iter().all(|c| !c.is_empty() && c.len() <= ChunkedSet::<u16>::CHUNK));
        }
    }

    proptest! {
        /// Starts (mostly appended) and ends (near the front, or anywhere) leave a job's
        /// containers as a B-tree would hold them, with ended entries never more than the live
        /// ones (and `SLACK`).
        #[test]
        fn start_order_behaves_as_a_btree_set(
            ops in proptest::collection::vec((0u8..5, 0u32..600), 0..3_000),
        ) {
            let mut set = StartOrder::new();
            let mut want = BTreeSet::new();
            let mut next = 0u32;
            for (op, x) in ops {
                match op {
                    // A start: the next sequence number.
                    0 | 1 => {
                        next += 1 + x % 3;
                        prop_assert_eq!(set.insert(next), want.insert(next));
                    }
                    // An end near the front.
                    2 => {
                        let Some(&first) = want.iter().nth((x % 3) as usize) else { continue };
                        prop_assert!(set.remove(&first));
                        want.remove(&first);
                    }
                    // Any value: an end anywhere, or an insert in the middle.
                    3 => prop_assert_eq!(set.remove(&(x * 2)), want.remove(&(x * 2))),
                    _ => prop_assert_eq!(set.insert(x * 2), want.insert(x * 2)),
                }
                prop_assert_eq!(set.len(), want.len());
                prop_assert_eq!(set.is_empty(), want.is_empty());
                prop_assert!(set.ended <= set.len().max(StartOrder::<u32>::SLACK));
            }
            prop_assert!(set.iter().eq(want.iter()));
            prop_assert!(set.iter().rev().eq(want.iter().rev()));
        }
    }

    #[test]
    fn start_order_drops_ended_entries_at_its_edges_at_once_and_the_rest_in_bulk() {
        let mut set = StartOrder::new();
        for x in 0..1_000u32 {
            set.insert(x);
        }
        // Oldest first, and newest first: every end at an edge, nothing kept.
        for x in (0..300u32).chain((700..1_000).rev()) {
            assert!(set.remove(&x));
            assert_eq!(set.ended, 0, "an end at an edge is dropped at once");
        }
        assert_eq!(set.len(), 400);
        // Ends between: marked, until they outnumber the live entries; then one pass drops them.
        for x in (301..700u32).step_by(2) {
            assert!(set.remove(&x));
            assert!(!set.remove(&x), "an ended entry is not in the set");
            assert!(
                set.ended <= set.len().max(StartOrder::<u32>::SLACK),
                "{} ended, {} live",
                set.ended,
                set.len()
            );
        }
        assert!(set.iter().copied().eq((300..700u32).step_by(2)));
        assert!(set.v.len() - set.head < 2 * 200 + StartOrder::<u32>::SLACK, "ended entries were dropped");
        // A start after ends: appended; an insert of an ended value in the middle: live again.
        assert!(set.insert(1_000));
        assert!(set.insert(301));
        assert!(!set.insert(301));
        assert_eq!(set.iter().next_back(), Some(&1_000));
        assert!(set.iter().rev().nth(199) == Some(&302));
        for x in set.iter().copied().collect::<Vec<_>>() {
            assert!(set.remove(&x));
        }
        assert!(set.is_empty() && set.v.is_empty() && set.iter().next().is_none());
    }
}
