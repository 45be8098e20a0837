//! The simulator's pending events, by time: a sorted map from each time with something due to
//! the events due then, in the order they were scheduled.
//!
//! A replay has many events at one time (the Alibaba sample: 6.3 million events in about
//! 32,000 distinct times, as its durations are whole seconds), so a binary heap over every
//! event — sifting 32-byte entries through a heap of every running task's end — cost more than
//! this map over distinct times with a queue per time. The order is the heap's: by time, then
//! by when scheduled (an event scheduled for the current time while its events are handled
//! comes after them).

use std::collections::{BTreeMap, VecDeque};

use weir_model::Time;

use crate::sim::Event;

#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    by_time: BTreeMap<Time, VecDeque<Event>>,
}

impl EventQueue {
    pub fn push(&mut self, at: Time, event: Event) {
        self.by_time.entry(at).or_default().push_back(event);
    }

    /// The earliest event and its time.
    pub fn peek(&self) -> Option<(Time, Event)> {
        let (&t, events) = self.by_time.first_key_value()?;
        Some((t, *events.front()?))
    }

    /// The earliest event, if it is due at `at`, taken out.
    pub fn pop_at(&mut self, at: Time) -> Option<Event> {
        let mut first = self.by_time.first_entry()?;
        if *first.key() != at {
            return None;
        }
        let event = first.get_mut().pop_front();
        if first.get().is_empty() {
            first.remove();
        }
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::ContainerId;

    fn end(c: u64) -> Event {
        Event::TaskEnd { container: ContainerId(c), failed: false }
    }

    /// The order of a heap keyed by (time, sequence number): time first, then scheduling order,
    /// including events scheduled for the time being handled.
    #[test]
    fn events_come_by_time_then_in_the_order_they_were_scheduled() {
        let mut q = EventQueue::default();
        q.push(Time(20), end(1));
        q.push(Time(10), end(2));
        q.push(Time(20), end(3));
        q.push(Time(10), end(4));
        assert_eq!(q.peek(), Some((Time(10), end(2))));
        assert_eq!(q.pop_at(Time(20)), None, "not due yet");
        assert_eq!(q.pop_at(Time(10)), Some(end(2)));
        q.push(Time(10), end(5));
        assert_eq!(q.pop_at(Time(10)), Some(end(4)));
        assert_eq!(q.pop_at(Time(10)), Some(end(5)));
        assert_eq!(q.pop_at(Time(10)), None);
        assert_eq!(q.peek(), Some((Time(20), end(1))));
        assert_eq!(q.pop_at(Time(20)), Some(end(1)));
        assert_eq!(q.pop_at(Time(20)), Some(end(3)));
        assert_eq!(q.peek(), None);
    }
}
