//! The testbed's circuit mode, at millisecond scale: one host pair's path alternates between a
//! slow rate (the packet network) and a fast one (a circuit day) on a weekly schedule, and from
//! `tau` before each day to its end the switch sets ECE on the ACKs going back to the sender, as
//! a reconfigurable network's ToR signals reTCP (Mukerjee et al., NSDI 2020; Etalon).
//!
//! The rate is the shaper's on the switch port facing the receiver (`tc class change`); the
//! signal is the INT switch's `ece_acks` on the port facing the sender. Both are set from user
//! space, so each change lands a fraction of a millisecond after its time; the log records when
//! it did.

use crate::kernel::int_switch;
use crate::testbed::netns::{self, Testbed};
use anyhow::{bail, Result};
use std::time::{Duration, Instant};

/// A weekly schedule for one host pair of a testbed.
#[derive(Debug, Clone)]
pub struct CircuitPlan {
    /// The sender's switch port (ACKs to it get ECE), e.g. `p1`.
    pub sender_port: String,
    /// The receiver's switch port (its shaper alternates rates), e.g. `p3`.
    pub receiver_port: String,
    /// Rate outside the days, bits/s.
    pub slow_bps: u64,
    /// Rate during a day, bits/s.
    pub fast_bps: u64,
    /// How long a day lasts.
    pub day: Duration,
    /// A day begins every `week`, the first one week after the start.
    pub week: Duration,
    /// The signal turns on this long before each day.
    pub tau: Duration,
    /// How many weeks to run.
    pub weeks: u32,
}

/// What changed at one moment of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The ECE signal turned on or off.
    Signal(bool),
    /// The receiver port's rate became this, bits/s.
    Rate(u64),
}

/// One change as applied: when it took effect (after `t0`), and the receiver port's bytes sent
/// by then.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Since the run's start.
    pub at: Duration,
    /// What changed.
    pub change: Change,
    /// Bytes the receiver port had sent when it did.
    pub tx_bytes: u64,
}

impl CircuitPlan {
    /// Checks the plan against the testbed; errors name the flag.
    pub fn validate(&self, tb: &Testbed) -> Result<()> {
        for (flag, port) in [("--sender", &self.sender_port), ("--receiver", &self.receiver_port)] {
            if !tb.hosts.iter().any(|h| &h.switch_port == port) {
                bail!("{flag}: the testbed has no switch port {port} (ports p1..p{})", tb.hosts.len());
            }
        }
        if self.sender_port == self.receiver_port {
            bail!("--sender and --receiver: expected two different hosts");
        }
        if self.slow_bps == 0 || self.fast_bps <= self.slow_bps {
            bail!("--fast: expected a rate above --slow ({} bit/s), got {} bit/s", self.slow_bps, self.fast_bps);
        }
        if self.day.is_zero() || self.day >= self.week {
            bail!("--day: expected a positive duration shorter than --week ({:?}), got {:?}", self.week, self.day);
        }
        if self.tau + self.day >= self.week {
            bail!("--tau: the signal must be off for part of each week: tau + day must be below --week");
        }
        if self.weeks == 0 {
            bail!("--weeks: expected at least 1");
        }
        Ok(())
    }

    /// The schedule as (time after the start, change), in time order.
    pub fn timeline(&self) -> Vec<(Duration, Change)> {
        let mut t = Vec::new();
        for k in 1..=self.weeks {
            let day = self.week * k;
            t.push((day - self.tau, Change::Signal(true)));
            t.push((day, Change::Rate(self.fast_bps)));
            t.push((day + self.day, Change::Rate(self.slow_bps)));
            t.push((day + self.day, Change::Signal(false)));
        }
        // A zero tau puts the signal and the rate at the same time: the rate first, then the signal.
        t.sort_by_key(|&(at, c)| (at, matches!(c, Change::Signal(true))));
        t
    }
}

/// Runs the plan from `t0` on a testbed (slow rate and no signal first), calling `step` after
/// each change, and leaves the pair at the slow rate with no signal.
pub fn run(tb: &Testbed, plan: &CircuitPlan, t0: Instant, mut step: impl FnMut(Step)) -> Result<Vec<Step>> {
    plan.validate(tb)?;
    set_signal(tb, &plan.sender_port, false)?;
    netns::set_rate(tb, &plan.receiver_port, plan.slow_bps)?;
    let mut log = Vec::new();
    let result = (|| -> Result<()> {
        for (at, change) in plan.timeline() {
            if let Some(wait) = at.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
            match change {
                Change::Signal(on) => set_signal(tb, &plan.sender_port, on)?,
                Change::Rate(bps) => netns::set_rate(tb, &plan.receiver_port, bps)?,
            }
            let a = Step { at: t0.elapsed(), change, tx_bytes: netns::port_tx_bytes(tb, &plan.receiver_port)? };
            step(a);
            log.push(a);
        }
        Ok(())
    })();
    let restored = set_signal(tb, &plan.sender_port, false).and(netns::set_rate(tb, &plan.receiver_port, plan.slow_bps));
    result.and(restored)?;
    Ok(log)
}

/// Turns the switch's ECE marking of ACKs leaving `port` on or off.
fn set_signal(tb: &Testbed, port: &str, on: bool) -> Result<()> {
    if !tb.int_switch {
        bail!("testbed {}: the circuit signal needs the INT switch (bring it up without --no-int-switch)", tb.prefix);
    }
    let mut cfg = int_switch::port_config(port, Some(&tb.switch))?;
    cfg.ece_acks = on;
    int_switch::set_port_config(port, Some(&tb.switch), &cfg)
}

/// Fast-phase goodput per day, bits/s: the receiver port's bytes from each day's start to its
/// end over the time between them, from a run's log.
pub fn day_rates(log: &[Step], fast_bps: u64) -> Vec<f64> {
    let starts = log.iter().filter(|a| a.change == Change::Rate(fast_bps));
    starts
        .filter_map(|s| {
            let end = log.iter().find(|e| e.at > s.at && matches!(e.change, Change::Rate(r) if r != fast_bps))?;
            let secs = (end.at - s.at).as_secs_f64();
            (secs > 0.0).then(|| (end.tx_bytes - s.tx_bytes) as f64 * 8.0 / secs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> CircuitPlan {
        CircuitPlan {
            sender_port: "p1".into(),
            receiver_port: "p3".into(),
            slow_bps: 100_000_000,
            fast_bps: 1_000_000_000,
            day: Duration::from_millis(20),
            week: Duration::from_millis(100),
            tau: Duration::from_millis(5),
            weeks: 2,
        }
    }

    #[test]
    fn the_signal_leads_each_day_by_tau_and_ends_with_it() {
        let ms = Duration::from_millis;
        let t = plan().timeline();
        assert_eq!(t[..4], [
            (ms(95), Change::Signal(true)),
            (ms(100), Change::Rate(1_000_000_000)),
            (ms(120), Change::Rate(100_000_000)),
            (ms(120), Change::Signal(false)),
        ]);
        assert_eq!(t.len(), 8);
        assert_eq!(t[4].0, ms(195));
    }

    #[test]
    fn day_rates_divide_each_days_bytes_by_its_length() {
        let at = |ms, change, tx_bytes| Step { at: Duration::from_millis(ms), change, tx_bytes };
        let log = [
            at(95, Change::Signal(true), 0),
            at(100, Change::Rate(1_000_000_000), 1_000),
            at(120, Change::Rate(100_000_000), 2_001_000),
            at(120, Change::Signal(false), 2_001_000),
        ];
        assert_eq!(day_rates(&log, 1_000_000_000), vec![800_000_000.0]);
    }
}
