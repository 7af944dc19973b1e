//! The event scheduler: a monotone priority queue over integer time, FIFO among equal times, and
//! cancellable timers by generation counter.

use crate::time::Time;
use dary_heap::QuaternaryHeap;
use std::cmp::{Ordering, Reverse};

/// A deterministic future-event list: events pop in time order, ties in insertion order.
///
/// A 4-ary heap keyed by (time, insertion sequence): shallower than a binary heap and friendlier
/// to the cache. The queue is monotone: nothing is scheduled before the last popped time.
pub struct EventQueue<E> {
    heap: QuaternaryHeap<Entry<E>>,
    /// An event popped past a limit, handed out first next time.
    held: Option<(Time, E)>,
    seq: u64,
    now: Time,
}

/// A heap entry ordered by (time, seq), earliest first.
struct Entry<E> {
    key: Reverse<(u64, u64)>,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key)
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue { heap: QuaternaryHeap::new(), held: None, seq: 0, now: Time::ZERO }
    }

    /// The time of the last popped event.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedules `ev` at `at`; times before `now` are clamped to `now` (the queue is monotone).
    #[inline]
    pub fn push(&mut self, at: Time, ev: E) {
        let at = at.max(self.now);
        self.heap.push(Entry { key: Reverse((at.0, self.seq)), ev });
        self.seq += 1;
    }

    /// Removes and returns the earliest event, advancing `now` to its time.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.pop_until(Time::MAX)
    }

    /// Like `pop`, but leaves an event later than `limit` in the queue and returns `None`.
    #[inline]
    pub fn pop_until(&mut self, limit: Time) -> Option<(Time, E)> {
        let next = self.held.take().or_else(|| self.heap.pop().map(|e| (Time(e.key.0 .0), e.ev)));
        match next {
            Some((t, ev)) if t <= limit => {
                self.now = t;
                Some((t, ev))
            }
            later => {
                self.held = later;
                None
            }
        }
    }

    /// Number of pending events (including stale timer events).
    pub fn len(&self) -> usize {
        self.heap.len() + self.held.is_some() as usize
    }

    /// True when no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A timer that can be re-armed and cancelled without touching the queue.
///
/// Re-arming to a later deadline does not schedule a new event: when the pending one fires early
/// the owner re-schedules it for the deadline. Only an earlier deadline needs a new event, which
/// gets a new generation so the old one is recognised as stale. An RTO re-armed on every ACK
/// therefore costs one queue entry per RTO period, not one per ACK.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerSlot {
    gen: u32,
    deadline: Option<Time>,
    pending: Option<Time>,
}

/// What the owner must do when a timer event pops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerFire {
    /// The event is stale (cancelled or superseded): ignore it.
    Stale,
    /// The deadline moved later: schedule the same generation again at this time.
    Reschedule(Time, u32),
    /// The timer expired now.
    Expired,
}

impl TimerSlot {
    /// Sets the deadline; returns `Some((time, gen))` when the caller must schedule an event.
    #[must_use]
    pub fn arm(&mut self, at: Time) -> Option<(Time, u32)> {
        self.deadline = Some(at);
        match self.pending {
            Some(p) if p <= at => None,
            _ => {
                self.gen = self.gen.wrapping_add(1);
                self.pending = Some(at);
                Some((at, self.gen))
            }
        }
    }

    /// Cancels the timer; its pending event becomes stale.
    pub fn cancel(&mut self) {
        self.deadline = None;
    }

    /// The current deadline, if armed.
    pub fn deadline(&self) -> Option<Time> {
        self.deadline
    }

    /// Interprets a timer event of generation `gen` popped at `now`.
    pub fn fire(&mut self, now: Time, gen: u32) -> TimerFire {
        if gen != self.gen || self.pending.is_none() {
            return TimerFire::Stale;
        }
        self.pending = None;
        match self.deadline {
            None => TimerFire::Stale,
            Some(d) if d > now => {
                self.pending = Some(d);
                TimerFire::Reschedule(d, gen)
            }
            Some(_) => {
                self.deadline = None;
                TimerFire::Expired
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_fifo_among_ties() {
        let mut q = EventQueue::new();
        q.push(Time(30), 'c');
        q.push(Time(10), 'a');
        q.push(Time(30), 'd');
        q.push(Time(10), 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
        assert_eq!(q.now(), Time(30));
    }

    #[test]
    fn pop_until_holds_later_events_back() {
        let mut q = EventQueue::new();
        q.push(Time(10), 1);
        q.push(Time(50), 2);
        assert_eq!(q.pop_until(Time(20)), Some((Time(10), 1)));
        assert_eq!(q.pop_until(Time(20)), None);
        assert_eq!(q.now(), Time(10));
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_until(Time(50)), Some((Time(50), 2)));
        assert!(q.is_empty());
    }

    #[test]
    fn past_events_are_clamped_to_now() {
        let mut q = EventQueue::new();
        q.push(Time(100), 1);
        q.pop();
        q.push(Time(5), 2);
        assert_eq!(q.pop(), Some((Time(100), 2)));
    }

    #[test]
    fn timer_rearm_later_reuses_event_and_cancel_makes_it_stale() {
        let mut t = TimerSlot::default();
        let (at, g) = t.arm(Time(100)).unwrap();
        assert_eq!(at, Time(100));
        assert_eq!(t.arm(Time(150)), None, "a later deadline needs no new event");
        assert_eq!(t.fire(Time(100), g), TimerFire::Reschedule(Time(150), g));
        assert_eq!(t.fire(Time(150), g), TimerFire::Expired);

        let (_, g1) = t.arm(Time(200)).unwrap();
        let (_, g2) = t.arm(Time(180)).unwrap();
        assert_ne!(g1, g2);
        assert_eq!(t.fire(Time(180), g1), TimerFire::Stale);
        t.cancel();
        assert_eq!(t.fire(Time(180), g2), TimerFire::Stale);
    }
}
