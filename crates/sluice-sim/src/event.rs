//! The event scheduler: a monotone priority queue over integer time, FIFO among equal times, and
//! cancellable timers by generation counter.

use crate::time::Time;
use dary_heap::QuaternaryHeap;
use std::cmp::Ordering;

/// A deterministic future-event list: events pop in time order, ties in insertion order.
pub struct EventQueue<E> {
    heap: QuaternaryHeap<Entry<E>>,
    seq: u64,
    now: Time,
}

struct Entry<E> {
    key: u128,
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
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key)
    }
}
impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}
impl<E> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue { heap: QuaternaryHeap::new(), seq: 0, now: Time::ZERO }
    }
    pub fn now(&self) -> Time {
        self.now
    }
    #[inline]
    pub fn push(&mut self, at: Time, ev: E) {
        let at = at.max(self.now);
        self.heap.push(Entry { key: (at.0 as u128) << 64 | self.seq as u128, ev });
        self.seq += 1;
    }
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let e = self.heap.pop()?;
        self.now = Time((e.key >> 64) as u64);
        Some((self.now, e.ev))
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
    fn interleaved_pushes_keep_time_order_and_fifo_ties() {
        // Pushes between pops, at the current time and later, as a run makes them.
        let mut q = EventQueue::new();
        q.push(Time(10), 0);
        q.push(Time(1_000_000), 1);
        let mut out = Vec::new();
        while let Some((t, e)) = q.pop() {
            out.push((t.0, e));
            if e < 6 {
                q.push(t, 10 + e);
                q.push(Time(t.0 + 7), e + 2);
            }
        }
        let times: Vec<u64> = out.iter().map(|p| p.0).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{out:?}");
        assert_eq!(out[..3], [(10, 0), (10, 10), (17, 2)]);
        assert_eq!(out.len(), 2 + 2 * 6);
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
