//! Partitions taking turns window by window, each on its own event list (the check that a run's
//! order does not depend on how its partitions are scheduled), and the hand-over of what one
//! schedules for another at its turn's end, which the threads' shards share (`threads.rs`).

use super::World;
use crate::context::{CrossEvent, Event};
use crate::event::EventQueue;
use crate::time::Time;

/// A run by lookahead windows: partitions that take turns, each on its own event list (the check
/// that a run's order does not depend on how its partitions are scheduled), or a shard on a
/// thread, whose partitions share one list and meet the other shards at each window's end.
pub(super) struct WindowedRun {
    /// Each partition's list, the run's own last; the acting one's is in `World::q`. None in a
    /// shard on a thread, whose partitions share `World::q`, the order the same.
    pub(super) lists: Vec<EventQueue<Event>>,
    /// Whose list is in `World::q`.
    pub(super) acting: usize,
    /// What an acting partition scheduled for another, handed over when its turn ends.
    pub(super) across: Vec<CrossEvent>,
    /// What was scheduled for partitions another shard runs, shipped at the window's end.
    pub(super) outbox: Vec<CrossEvent>,
    /// Partitions take their turns last to first.
    pub(super) reversed: bool,
}

impl World {
    /// Makes partition `part` (or the run's own source) the one acting: what is scheduled next is
    /// its.
    #[inline]
    pub(super) fn act_as(&mut self, part: usize) {
        self.part = part;
        match self.windows.as_deref_mut() {
            None => self.q.set_source(part),
            // A shard on a thread: its partitions share one list.
            Some(w) if w.lists.is_empty() => self.q.set_source(part),
            Some(w) if w.acting != part => {
                std::mem::swap(&mut self.q, &mut w.lists[w.acting]);
                std::mem::swap(&mut self.q, &mut w.lists[part]);
                w.acting = part;
            }
            Some(_) => {}
        }
    }

    /// Lets the partitions take turns window by window, each on its own event list, first to
    /// last or (`reversed`) last to first, as threads will run them. The run is the same as on
    /// the one list (a test checks); with one partition nothing changes. Call before [`Self::run`].
    pub fn take_turns(&mut self, reversed: bool) {
        if self.parts.count == 1 || self.events > 0 {
            return;
        }
        let lists = (0..=self.global)
            .map(|part| {
                let mut q = EventQueue::new();
                q.set_source(part);
                q
            })
            .collect();
        self.q = EventQueue::new();
        self.windows = Some(Box::new(WindowedRun { lists, acting: self.global, across: Vec::new(), outbox: Vec::new(), reversed }));
        std::mem::swap(&mut self.q, &mut self.windows.as_deref_mut().expect("just set").lists[self.global]);
        if let Some(c) = self.capture.as_deref_mut() {
            c.by_windows();
        }
        self.schedule_starts();
    }

    /// Partitions take turns window by window, each window as long as the lookahead (aligned to
    /// its multiples): within one, each partition runs its own list alone, since nothing another
    /// does reaches it before the window ends; then what crossed goes to its lists.
    #[inline(never)]
    pub(super) fn run_windows(&mut self, window: Time, progress: &mut dyn FnMut(Time)) {
        let order = self.turn_order();
        let mut reported = self.events;
        while !self.stopped {
            let Some(start) = self.next_time_of_all() else { break };
            if self.stop_at.is_some_and(|t| start >= t) {
                self.stopped = true;
                break;
            }
            self.run_window(start, window, &order);
            if self.events - reported > 0xffff {
                reported = self.events;
                progress(self.clock);
            }
        }
        // Rows came in turn order within each window.
        self.hosts.telemetry.merge([]);
    }

    /// The partitions, in the order they take their turns.
    pub(super) fn turn_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.parts.count).collect();
        if self.windows.as_deref().is_some_and(|w| w.reversed) {
            order.reverse();
        }
        order
    }

    /// Runs the lookahead window that `start` falls in: each partition in `order` takes its turn.
    /// The run's own events cut a window: the partitions run up to and including their time,
    /// then the event.
    pub(super) fn run_window(&mut self, start: Time, window: Time, order: &[usize]) {
        let own = self.global;
        let end = Time((start.0 / window.0 + 1) * window.0);
        loop {
            self.act_as(own);
            let cut = self.q.next_time().filter(|&t| t < end);
            let limit = cut.unwrap_or(Time(end.0 - 1));
            for &part in order {
                self.act_as(part);
                while let Some((now, ev, _)) = self.q.pop_until(limit) {
                    self.prefetch_ahead();
                    self.clock = self.clock.max(now);
                    self.events += 1;
                    self.step(now, ev);
                }
                self.hand_over(limit);
            }
            if cut.is_none() {
                break;
            }
            self.act_as(own);
            let (now, ev, _) = self.q.pop_for().expect("the run's own event just seen");
            self.clock = self.clock.max(now);
            self.events += 1;
            self.step(now, ev);
            self.hand_over(limit);
            if self.stopped {
                break;
            }
        }
        if let Some(c) = self.capture.as_deref_mut() {
            c.settle();
        }
    }

    /// When the earliest event of any partition's list is due.
    pub(super) fn next_time_of_all(&self) -> Option<Time> {
        let w = self.windows.as_deref().expect("partitions take turns");
        let parked = w.lists.iter().enumerate().filter(|&(i, _)| i != w.acting).filter_map(|(_, q)| q.next_time());
        parked.chain(self.q.next_time()).min()
    }

    /// Hands what the acting partition scheduled for others to their lists: nothing may be due
    /// within the turn that just ran to `limit`, or the lookahead was wrong.
    pub(super) fn hand_over(&mut self, limit: Time) {
        let w = self.windows.as_deref_mut().expect("partitions take turns");
        for a in w.across.drain(..) {
            assert!(a.at > limit, "{:?} for partition {} at {} reaches back into a turn that ran to {limit}", a.ev, a.part, a.at);
            let list = if w.lists.is_empty() { &mut self.q } else { &mut w.lists[a.part.index()] };
            match self.own[a.part.index()] {
                true => list.push_keyed(a.at, a.tie, a.ev, a.part.index()),
                false => w.outbox.push(a),
            }
        }
    }
}
