//! A host's pull pacer (`UecPullPacer`, `uec.cpp:3045-3170`): under UET's receiver credit
//! (RCCC), the receiving host grants its flows credit in PULLs paced at 99% of its line rate, so
//! what its senders send together never outruns its own link.
//!
//! Flows that want credit wait in an active list, served round robin, each PULL granting up to
//! 16 KB towards the flow's pull target. A flow whose target is met moves to an idle list. Only
//! when no flow is active are idle ones served, with slow pulls: 16 KB whatever the target, up
//! to a speculative window's worth, so a sender that falls quiet and resumes finds credit
//! waiting. After each PULL the pacer waits as long as the line takes to carry what it granted
//! (four quanta when it granted nothing), and stops when both lists are empty.

use crate::ids::FlowId;
use crate::time::{Rate, Time};
use crate::transport::uet::wire::QUANTUM;
use std::collections::VecDeque;

/// The share of the line rate credit is paced at (`main_uec.cpp:754`).
const RATE_SHARE: f64 = 0.99;
/// Quanta the pacer waits after a PULL that granted nothing.
const IDLE_QUANTA: u64 = 4;

/// One receiving host's pull pacer.
#[derive(Debug)]
pub struct PullPacer {
    /// Flows that want credit, served in turn.
    active: VecDeque<FlowId>,
    /// Flows whose targets are met, served slow pulls while none is active.
    idle: VecDeque<FlowId>,
    /// A pacing event is scheduled.
    running: bool,
    /// Picoseconds the line takes for a quantum at 99% of its rate, truncated as the
    /// reference's is.
    ps_per_quantum: u64,
}

/// The flow a pacer serves next, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// An active flow: credit towards its target.
    Pull(FlowId),
    /// An idle flow: a slow pull.
    SlowPull(FlowId),
}

impl PullPacer {
    /// A pacer for a host whose link runs at `rate`.
    pub fn new(rate: Rate) -> PullPacer {
        let ps = (8 * QUANTUM) as f64 * 1e12 / rate.bps() as f64 / RATE_SHARE;
        PullPacer { active: VecDeque::new(), idle: VecDeque::new(), running: false, ps_per_quantum: ps as u64 }
    }

    /// Flow `f` wants credit (`requestPull`); true when the pacer was stopped and must be
    /// scheduled now.
    pub fn request(&mut self, f: FlowId) -> bool {
        debug_assert!(!self.active.contains(&f), "a flow waits in the active list once");
        self.active.push_back(f);
        !std::mem::replace(&mut self.running, true)
    }

    /// The flow served at this pacing event, or `None`: both lists are empty and the pacer stops.
    pub fn turn(&mut self) -> Option<Turn> {
        let turn = match self.active.pop_front() {
            Some(f) => Turn::Pull(f),
            None => Turn::SlowPull(self.idle.pop_front()?),
        };
        Some(turn)
    }

    /// The pacer has stopped: nothing is scheduled.
    pub fn stop(&mut self) {
        self.running = false;
    }

    /// Puts a flow served at this event back: at the end of the active list while it wants
    /// more, else at the end of the idle list; a slow-pulled flow stays idle while it
    /// `takes_more` slow pulls, and leaves otherwise.
    pub fn requeue(&mut self, turn: Turn, wants: bool, takes_more: bool) {
        match turn {
            Turn::Pull(f) if wants => self.active.push_back(f),
            Turn::Pull(f) => self.idle.push_back(f),
            Turn::SlowPull(f) if takes_more => self.idle.push_back(f),
            Turn::SlowPull(_) => {}
        }
    }

    /// When the next pacing event is due after a PULL that granted `quanta`.
    pub fn next_at(&self, now: Time, quanta: u64) -> Time {
        now + Time(self.ps_per_quantum * if quanta == 0 { IDLE_QUANTA } else { quanta })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_is_paced_at_99_percent_of_the_line() {
        // 256 bytes at 100 Gb/s is 20.48 ns; at 99% of it, 20,686 ps (the reference's figure).
        let p = PullPacer::new(Rate::gbps(100));
        assert_eq!(p.ps_per_quantum, 20_686);
        assert_eq!(p.next_at(Time::ZERO, 64), Time(64 * 20_686), "a full PULL of 16 KB, every 1.324 µs");
        assert_eq!(p.next_at(Time::ZERO, 0), Time(4 * 20_686), "a PULL that granted nothing still takes four quanta");
    }

    #[test]
    fn active_flows_take_turns_and_idle_ones_are_served_only_when_none_is_active() {
        let mut p = PullPacer::new(Rate::gbps(100));
        let (a, b, c) = (FlowId(1), FlowId(2), FlowId(3));
        assert!(p.request(a), "the first request starts the pacer");
        assert!(!p.request(b), "then it runs");
        // a wants more, b is satisfied and goes idle.
        let t = p.turn().unwrap();
        assert_eq!(t, Turn::Pull(a));
        p.requeue(t, true, false);
        let t = p.turn().unwrap();
        assert_eq!(t, Turn::Pull(b));
        p.requeue(t, false, false);
        assert!(!p.request(c));
        assert_eq!(p.turn(), Some(Turn::Pull(a)));
        p.requeue(Turn::Pull(a), false, false);
        assert_eq!(p.turn(), Some(Turn::Pull(c)));
        p.requeue(Turn::Pull(c), false, false);
        // Nobody active: the idle ones, in the order they went idle, slow-pulled while they take it.
        assert_eq!(p.turn(), Some(Turn::SlowPull(b)));
        p.requeue(Turn::SlowPull(b), false, true);
        assert_eq!(p.turn(), Some(Turn::SlowPull(a)));
        p.requeue(Turn::SlowPull(a), false, false);
        assert_eq!(p.turn(), Some(Turn::SlowPull(c)));
        p.requeue(Turn::SlowPull(c), false, false);
        assert_eq!(p.turn(), Some(Turn::SlowPull(b)));
        p.requeue(Turn::SlowPull(b), false, false);
        assert_eq!(p.turn(), None, "both lists empty: the pacer stops");
        p.stop();
        assert!(p.request(a), "and starts again at the next request");
    }
}
