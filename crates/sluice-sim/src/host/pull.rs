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
//!
//! Where its flows run RCCC's oversubscription control (`cc/oversubscribed.rs`), the host
//! counts what they receive, and at the end of each interval the control sets the share of the
//! line the pacer grants at (`updatePullRate`). Its intervals run from the start of the run, as
//! the reference's control runs at every host from its setup, but its timer sleeps while the
//! pacer is stopped, so a run with nothing left to pull ends; when the pacer starts again, the
//! intervals that ended meanwhile are drawn and taken as intervals in which nothing came.

use crate::cc::{OversubscribedCc, OversubscribedParams, Received};
use crate::ids::FlowId;
use crate::packet::{Ecn, Packet};
use crate::time::{Rate, Time};
use crate::transport::uet::wire::QUANTUM;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;

/// The share of the line rate credit is paced at (`main_uec.cpp:754`).
const RATE_SHARE: f64 = 0.99;
/// Quanta the pacer waits after a PULL that granted nothing.
const IDLE_QUANTA: u64 = 4;
/// Intervals a waking control draws one by one before it counts the rest by their mean.
const CATCH_UP: u64 = 4_096;

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
    /// reference's is (`_time_per_quanta`).
    line_ps_per_quantum: u64,
    /// The same at the share of the line the control sets (`_actual_time_per_quanta`).
    ps_per_quantum: u64,
    /// The oversubscription control, where the host's flows run it.
    pub control: Option<Box<RateControl>>,
}

/// A host's oversubscription control and its timer.
#[derive(Debug)]
pub struct RateControl {
    /// The control.
    cc: OversubscribedCc,
    /// When the interval under way ends.
    ends: Time,
    /// No event is scheduled for `ends`: the pacer was stopped when the last interval ended, or
    /// the control has not run yet.
    asleep: bool,
}

/// What a request set going.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// The pacer was stopped: its next event is due now.
    pub pacer: bool,
    /// The control's timer slept: its interval ends then.
    pub control: Option<Time>,
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
        PullPacer { active: VecDeque::new(), idle: VecDeque::new(), running: false, line_ps_per_quantum: ps as u64, ps_per_quantum: ps as u64, control: None }
    }

    /// Starts the oversubscription control with `params`, its jitter drawn from `rng`. Its
    /// intervals count from the run's start, as the reference's control runs at every host from
    /// its setup; it sleeps until the pacer runs.
    pub fn start_control(&mut self, params: OversubscribedParams, rng: Xoshiro256PlusPlus) {
        let mut cc = OversubscribedCc::new(params, rng);
        let ends = Time::ZERO + cc.interval();
        self.control = Some(Box::new(RateControl { cc, ends, asleep: true }));
    }

    /// Counts `pkt`, which reached one of the host's flows, towards the control's interval
    /// (`data_received`, `ecn_received`, `trimmed_received`).
    #[inline]
    pub fn count(&mut self, pkt: &Packet) {
        let Some(c) = self.control.as_deref_mut() else { return };
        let n: &mut Received = &mut c.cc.received;
        n.packets += 1;
        if pkt.is_trimmed() {
            // Hosts never count TTL down: a header cut at the last switch still has its TTL.
            if pkt.ttl == pkt.trim_ttl() {
                n.trimmed_last_hop += 1;
            } else {
                n.trimmed_other += 1;
            }
        } else if pkt.payload > 0 && pkt.ecn == Ecn::Ce {
            n.ecn += 1;
        }
    }

    /// The control's interval ended: the pacer grants at the rate it sets from now on. Returns
    /// when the next one ends, or `None` while the pacer is stopped: the timer sleeps.
    pub fn control_tick(&mut self, now: Time) -> Option<Time> {
        let c = self.control.as_deref_mut().expect("a control tick at a host that runs the control");
        debug_assert_eq!(now, c.ends);
        c.cc.adjust();
        self.ps_per_quantum = (self.line_ps_per_quantum as f64 / c.cc.rate) as u64;
        c.ends = now + c.cc.interval();
        c.asleep = !self.running;
        (!c.asleep).then_some(c.ends)
    }

    /// A sleeping control catches up on the intervals that ended meanwhile, and returns when
    /// the one under way ends. After a long sleep (more than [`CATCH_UP`] intervals) the rest are
    /// counted by their mean length and a fresh interval starts now, so a run with long quiet
    /// spells does not draw every interval it slept through.
    fn wake_control(&mut self, now: Time) -> Option<Time> {
        let c = self.control.as_deref_mut().filter(|c| c.asleep)?;
        let mut ended = 0;
        while c.ends <= now {
            ended += 1;
            if ended == CATCH_UP {
                ended += (now - c.ends).ps() / c.cc.mean_interval().ps().max(1);
                c.ends = now;
            }
            c.ends += c.cc.interval();
        }
        c.cc.slept(ended);
        c.asleep = false;
        self.ps_per_quantum = (self.line_ps_per_quantum as f64 / c.cc.rate) as u64;
        Some(c.ends)
    }

    /// Flow `f` wants credit (`requestPull`). If the pacer was stopped it starts, and must be
    /// scheduled now; a control that slept wakes, and must be scheduled at the time returned.
    pub fn request(&mut self, f: FlowId, now: Time) -> Started {
        debug_assert!(!self.active.contains(&f), "a flow waits in the active list once");
        self.active.push_back(f);
        let pacer = !std::mem::replace(&mut self.running, true);
        Started { pacer, control: self.wake_control(now) }
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
        let t0 = Time::ZERO;
        assert!(p.request(a, t0).pacer, "the first request starts the pacer");
        assert!(!p.request(b, t0).pacer, "then it runs");
        // a wants more, b is satisfied and goes idle.
        let t = p.turn().unwrap();
        assert_eq!(t, Turn::Pull(a));
        p.requeue(t, true, false);
        let t = p.turn().unwrap();
        assert_eq!(t, Turn::Pull(b));
        p.requeue(t, false, false);
        assert!(!p.request(c, t0).pacer);
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
        assert!(p.request(a, t0).pacer, "and starts again at the next request");
    }

    /// A pacer at 100 Gb/s whose control runs with the reference's constants at 4:1, a 10 µs
    /// network RTT: intervals of 11.25 to 18.75 µs.
    fn controlled() -> PullPacer {
        let mut p = PullPacer::new(Rate::gbps(100));
        p.start_control(OversubscribedParams::reference(4.0, Time::from_us(10)), crate::context::stream(3, 6));
        p
    }

    /// A data packet of flow 0, CE-marked or not, or its header trimmed `hops_before` switches
    /// before the last.
    fn arrival(ce: bool, trimmed_hops_before: Option<u8>) -> Packet {
        let mut p = Packet { payload: 4086, ttl: 60, ..Packet::default() };
        p.ecn = if ce { Ecn::Ce } else { Ecn::Ect };
        if let Some(h) = trimmed_hops_before {
            p.payload = 0;
            p.fabric = crate::packet::fabric::TRIMMED | ((60 + h) << 1);
        }
        p
    }

    #[test]
    fn the_control_sleeps_until_the_pacer_runs_and_counts_its_intervals_from_the_start() {
        let mut p = controlled();
        let now = Time::from_us(40);
        let started = p.request(FlowId(0), now);
        let ends = started.control.expect("the first request wakes the control");
        assert!(started.pacer);
        // Intervals of 11.25-18.75 µs from time 0: two or three have ended by 40 µs, and the
        // one under way ends within one interval of now.
        assert!(ends > now && ends <= now + Time::from_ns(18_750), "{ends:?}");
        assert_eq!(p.request(FlowId(1), now).control, None, "a waking control is scheduled once");
    }

    #[test]
    fn the_rate_the_control_sets_stretches_the_pacing() {
        let mut p = controlled();
        let ends = p.request(FlowId(0), Time::ZERO).control.unwrap();
        // 100 packets: 20 cut upstream, 10 at the last hop, 70 whole of which 35 marked.
        for i in 0..100 {
            let pkt = match i {
                0..20 => arrival(false, Some(1)),
                20..30 => arrival(false, Some(0)),
                30..65 => arrival(true, None),
                _ => arrival(false, None),
            };
            p.count(&pkt);
        }
        let c = &p.control.as_ref().unwrap().cc;
        assert_eq!(c.received, Received { packets: 100, ecn: 35, trimmed_last_hop: 10, trimmed_other: 20 });
        let next = p.control_tick(ends).expect("the pacer runs: the timer goes on");
        assert!(next > ends);
        // Rate 1 - 20/100 = 0.8; g = 0.5 * 35/70 = 0.25 is under the target: no cut, no increase.
        let rate = p.control.as_ref().unwrap().cc.rate;
        assert!((rate - 0.8).abs() < 1e-12, "{rate}");
        assert_eq!(p.next_at(Time::ZERO, 64), Time(64 * (20_686.0 / 0.8) as u64), "a full PULL every 1.655 µs instead of 1.324");
        // Once the pacer stops, the next interval's end puts the timer to sleep.
        while let Some(t) = p.turn() {
            p.requeue(t, false, false);
        }
        p.stop();
        assert_eq!(p.control_tick(next), None);
        let woke = p.request(FlowId(0), next + Time::from_us(100)).control.unwrap();
        assert!(woke > next + Time::from_us(100));
        assert_eq!(p.control.as_ref().unwrap().cc.rate, 1.0, "the empty intervals slept through brought the rate back to the line");
    }

    #[test]
    fn a_long_sleep_starts_a_fresh_interval_at_waking() {
        // Ten seconds asleep is some 670,000 intervals of 15 µs: the first 4,096 drawn, the rest
        // counted, and the next ends within an interval of waking.
        let mut p = controlled();
        let now = Time::from_ms(10_000);
        let ends = p.request(FlowId(0), now).control.unwrap();
        assert!(ends > now && ends <= now + Time::from_ns(18_750), "{ends:?}");
    }
}
