//! Synchronized incast: in each round every sender sends a response of the same size to one
//! receiver (a sender listed k times opens k flows); the next round starts when the last
//! response of the round has arrived.

use super::app::{App, AppIo, Request};
use super::{Classify, FlowSpec, Qos};
use crate::time::Time;

/// Rounds of N-to-1 responses.
pub struct IncastRounds {
    senders: Vec<usize>,
    receiver: usize,
    size: u64,
    rounds: u32,
    start: Time,
    class: Classify,
    qos: Qos,
    round: u32,
    round_start: Time,
    pending: usize,
}

impl IncastRounds {
    /// `rounds` rounds of `size` bytes from each sender to `receiver`, the first at `start`.
    pub fn new(senders: Vec<usize>, receiver: usize, size: u64, rounds: u32, start: Time, class: Classify, qos: Qos) -> Self {
        IncastRounds { senders, receiver, size, rounds, start, class, qos, round: 0, round_start: start, pending: 0 }
    }

    fn begin_round(&mut self, now: Time, io: &mut AppIo) {
        self.round += 1;
        self.round_start = now;
        self.pending = self.senders.len();
        for &s in &self.senders {
            let spec = FlowSpec { src: s, dst: self.receiver, size: Some(self.size), start: now, class: (self.class)(s, self.receiver), qos: self.qos, response: None, relay: None };
            io.open.push((spec, self.round));
        }
    }
}

impl App for IncastRounds {
    fn start_time(&self) -> Time {
        self.start
    }

    fn start(&mut self, now: Time, io: &mut AppIo) {
        self.begin_round(now, io);
    }

    fn on_delivered(&mut self, _tag: u32, now: Time, io: &mut AppIo) {
        self.pending -= 1;
        if self.pending == 0 {
            io.completed.push(Request { class: (self.class)(self.senders[0], self.receiver), start: self.round_start, end: now });
            if self.round < self.rounds {
                self.begin_round(now, io);
            }
        }
    }

    fn done(&self) -> bool {
        self.round >= self.rounds && self.pending == 0
    }
}
