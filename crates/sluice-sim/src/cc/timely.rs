//! TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM
//! 2015, Algorithm 1). Rate-based, driven by RTT samples and their gradient:
//!
//! - per RTT sample: rtt_diff = (1 - alpha) rtt_diff + alpha (new_rtt - prev_rtt), and the
//!   normalized gradient = rtt_diff / min_rtt (the paper's D_minRTT, a parameter);
//! - new_rtt < T_low: additive increase by delta; new_rtt > T_high: R (1 - beta (1 - T_high /
//!   new_rtt)); else a gradient <= 0 increases by delta (N delta once `hai_after` consecutive
//!   increases passed: hyperactive increase), a positive gradient cuts R (1 - beta gradient).
//!
//! As in the HPCC simulator, one update is made per round of data (when the ACK passes the
//! highest sequence sent at the last update), from the RTT of that ACK's packet; the paper's
//! completion events of 16-64 KB segments play the same part. The rate stays within
//! [min_rate, line rate].

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, Window};
use crate::time::{Rate, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("alpha", "0.875  # EWMA weight of the newest RTT difference"),
    ("beta", "0.8  # multiplicative decrease factor"),
    ("t_low", "\"50us\"  # below this RTT, always increase"),
    ("t_high", "\"500us\"  # above this RTT, always decrease"),
    ("min_rtt", "\"20us\"  # the gradient's normalizer D_minRTT"),
    ("delta", "\"10Mbps\"  # additive increase step"),
    ("hai_after", "5  # consecutive increases before each step is hai_after x delta"),
    ("min_rate", "\"100Mbps\"  # the rate never falls below this"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    alpha: f64,
    beta: f64,
    t_low: Time,
    t_high: Time,
    min_rtt: Time,
    delta: Rate,
    hai_after: u32,
    min_rate: Rate,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            alpha: 0.875,
            beta: 0.8,
            t_low: Time::from_us(50),
            t_high: Time::from_us(500),
            min_rtt: Time::from_us(20),
            delta: Rate(10_000_000),
            hai_after: 5,
            min_rate: Rate(100_000_000),
        }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.alpha > 0.0 && p.alpha <= 1.0) {
        return Err(format!("alpha: expected a number in (0, 1], got {}", p.alpha));
    }
    if !(p.beta > 0.0 && p.beta <= 1.0) {
        return Err(format!("beta: expected a number in (0, 1], got {}", p.beta));
    }
    if p.t_high <= p.t_low {
        return Err(format!("t_high: expected more than t_low ({}), got {}", p.t_low, p.t_high));
    }
    if p.min_rtt == Time::ZERO {
        return Err("min_rtt: expected a positive duration like \"20us\"".into());
    }
    let p = Arc::new(p);
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Timely::new(p.clone(), ctx.link_rate)) as Box<dyn CongestionControl>))
}

/// TIMELY's state for one flow.
pub struct Timely {
    p: Arc<Params>,
    line_rate: f64,
    rate: f64,
    prev_rtt: Option<Time>,
    rtt_diff: f64,
    increases: u32,
    /// The next update waits for an ACK past this sequence.
    round_end: u64,
}

impl Timely {
    fn new(p: Arc<Params>, line_rate: Rate) -> Timely {
        let line = line_rate.0 as f64;
        Timely { p, line_rate: line, rate: line, prev_rtt: None, rtt_diff: 0.0, increases: 0, round_end: 0 }
    }

    /// One rate update from an RTT sample (Algorithm 1).
    fn update(&mut self, rtt: Time) {
        let p = &self.p;
        let Some(prev) = self.prev_rtt.replace(rtt) else { return };
        let new_diff = rtt.0 as f64 - prev.0 as f64;
        self.rtt_diff = (1.0 - p.alpha) * self.rtt_diff + p.alpha * new_diff;
        let gradient = self.rtt_diff / p.min_rtt.0 as f64;
        // The first `hai_after` increases in a row add delta, the later ones N delta (the HPCC
        // simulator's `m_incStage < 5`).
        let increase = |s: &mut Timely| {
            let n = if s.increases >= s.p.hai_after { s.p.hai_after as f64 } else { 1.0 };
            s.increases += 1;
            s.rate += n * s.p.delta.0 as f64;
        };
        if rtt < p.t_low {
            increase(self);
        } else if rtt > p.t_high {
            self.rate *= 1.0 - p.beta * (1.0 - p.t_high.0 as f64 / rtt.0 as f64);
            self.increases = 0;
        } else if gradient <= 0.0 {
            increase(self);
        } else {
            self.rate *= (1.0 - p.beta * gradient).max(0.0);
            self.increases = 0;
        }
        self.rate = self.rate.clamp(self.p.min_rate.0 as f64, self.line_rate);
    }
}

impl CongestionControl for Timely {
    fn name(&self) -> &'static str {
        "timely"
    }

    fn init(&mut self, win: &mut Window) {
        // Rate-based: the window stays open (on TCP too), the rate alone holds the flow back.
        win.cwnd = u64::MAX / 4;
        win.pacing_rate = Some(Rate(self.rate as u64));
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let Some(rtt) = ack.rtt else { return };
        if ack.snd_una < self.round_end && self.prev_rtt.is_some() {
            return;
        }
        self.round_end = ack.snd_nxt.max(ack.snd_una + 1);
        self.update(rtt);
        win.pacing_rate = Some(Rate(self.rate.round() as u64));
    }

    fn on_congestion(&mut self, _: CongestionEvent, _: Time, _: &mut Window) {}

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("rate_bps", self.rate), ("rtt_us", self.prev_rtt.map_or(0.0, |r| r.0 as f64 / 1e6))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(t: &mut Timely, w: &mut Window, una: u64, rtt_us: u64) {
        let ack =
            AckSignals { rtt: Some(Time::from_us(rtt_us)), snd_una: una, snd_nxt: una + 1, ..AckSignals::default() };
        t.on_ack(&ack, w);
    }

    #[test]
    fn rtt_regions_and_gradient_drive_the_rate() {
        let mut t = Timely::new(Arc::new(Params::default()), Rate::gbps(10));
        t.rate = 5e9;
        let mut w = Window { cwnd: u64::MAX, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        step(&mut t, &mut w, 1, 100);
        // Rising RTT inside [T_low, T_high]: gradient 0.875 x 20us / 20us = 0.875, cut by
        // 1 - 0.8 x 0.875 = 0.3.
        step(&mut t, &mut w, 2, 120);
        assert!((t.rate - 5e9 * 0.3).abs() < 1.0, "{}", t.rate);
        // Above T_high: R (1 - 0.8 (1 - 500/1000)) = 0.6 R.
        let r = t.rate;
        step(&mut t, &mut w, 3, 1000);
        assert!((t.rate - r * 0.6).abs() < 1.0);
        // Below T_low: five increases of delta, then each adds 5 delta.
        let r = t.rate;
        for i in 0..5 {
            step(&mut t, &mut w, 4 + i, 10);
        }
        assert!((t.rate - (r + 5.0 * 10e6)).abs() < 1.0, "{} vs {}", t.rate, r);
        step(&mut t, &mut w, 9, 10);
        assert!((t.rate - (r + 5.0 * 10e6 + 50e6)).abs() < 1.0, "{} vs {}", t.rate, r);
    }
}
