//! A table of records numbered in the order they were made, which forgets the old ones once
//! they are done: the simulator's workflows, runs and jobs. Ids are never reused (they name
//! jobs in `pending.csv` and runs in records), and memory follows the records still in use —
//! the span from the oldest live one to the newest, each finished one in between costing a
//! pointer — instead of every record a long replay ever made.

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

pub(crate) struct Window<T> {
    /// The id of `items[0]`.
    base: usize,
    items: VecDeque<Option<Box<T>>>,
}

impl<T> Default for Window<T> {
    fn default() -> Window<T> {
        Window { base: 0, items: VecDeque::new() }
    }
}

impl<T> Window<T> {
    /// Records made so far: the next one's id.
    pub fn len(&self) -> usize {
        self.base + self.items.len()
    }

    pub fn push(&mut self, item: T) {
        self.items.push_back(Some(Box::new(item)));
    }

    pub fn get(&self, id: usize) -> Option<&T> {
        self.items.get(id.checked_sub(self.base)?)?.as_deref()
    }

    pub fn get_mut(&mut self, id: usize) -> Option<&mut T> {
        self.items.get_mut(id.checked_sub(self.base)?)?.as_deref_mut()
    }

    /// Forget record `id`; its id stays taken.
    pub fn remove(&mut self, id: usize) -> Option<T> {
        let item = self.items.get_mut(id.checked_sub(self.base)?)?.take();
        while matches!(self.items.front(), Some(None)) {
            self.items.pop_front();
            self.base += 1;
        }
        item.map(|b| *b)
    }

    /// The records still held, with their ids, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        let base = self.base;
        self.items.iter().enumerate().filter_map(move |(i, t)| Some((base + i, t.as_deref()?)))
    }

    /// Slots held: the records still in use and the finished ones between them.
    pub fn span(&self) -> usize {
        self.items.len()
    }

    /// The ids of the records still held, oldest first.
    pub fn ids(&self) -> Vec<usize> {
        self.iter().map(|(id, _)| id).collect()
    }

    /// The records still held, oldest first.
    pub fn into_values(self) -> Vec<T> {
        self.items.into_iter().flatten().map(|b| *b).collect()
    }
}

impl<T> FromIterator<T> for Window<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Window<T> {
        Window { base: 0, items: iter.into_iter().map(|t| Some(Box::new(t))).collect() }
    }
}

/// Indexing a record that was forgotten is a simulator bug: every caller that may meet one
/// (a decision for a job that ended in the same pass) uses `get`.
impl<T> Index<usize> for Window<T> {
    type Output = T;
    fn index(&self, id: usize) -> &T {
        match self.get(id) {
            Some(t) => t,
            None => panic!("record {id} was forgotten (window {}..{})", self.base, self.len()),
        }
    }
}

impl<T> IndexMut<usize> for Window<T> {
    fn index_mut(&mut self, id: usize) -> &mut T {
        let (base, len) = (self.base, self.len());
        match self.get_mut(id) {
            Some(t) => t,
            None => panic!("record {id} was forgotten (window {base}..{len})"),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Window<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_and_the_front_is_forgotten() {
        let mut w: Window<&str> = ["a", "b", "c"].into_iter().collect();
        w.push("d");
        assert_eq!((w.len(), w[3]), (4, "d"));
        assert_eq!(w.remove(1), Some("b"));
        assert_eq!(w.get(1), None);
        assert_eq!(w.ids(), vec![0, 2, 3]);
        assert_eq!(w.remove(0), Some("a"));
        // 0 and 1 are gone from the front: the window starts at 2.
        assert_eq!((w.base, w.items.len(), w.len()), (2, 2, 4));
        assert_eq!(w.remove(0), None, "a forgotten id stays forgotten");
        w.push("e");
        assert_eq!(w.iter().map(|(i, t)| (i, *t)).collect::<Vec<_>>(), vec![(2, "c"), (3, "d"), (4, "e")]);
        assert_eq!(w.into_values(), vec!["c", "d", "e"]);
    }
}
