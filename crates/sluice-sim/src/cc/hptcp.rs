//! HPTCP: HPCC's window control (Li et al., SIGCOMM 2019) ported to TCP, driven by the single
//! aggregated TCP-INT value instead of per-hop records.
//!
//! The echo gives the bottleneck's normalized load U: on the queue branch U = qdepth / (B x T) + 1
//! (a standing queue means the link is full), on the utilization branch U = utilization. U is
//! smoothed over one base RTT as HPCC does. The window moves towards the target eta: when
//! U >= eta (or after `max_stage` additive rounds) W = Wc / (U / eta) + W_AI, otherwise
//! W = Wc + W_AI; the reference window Wc is updated once per RTT. The pacing rate is W / T.
//! Fast retransmit halves the window; a timeout sets it to min(W / 2, W_init).

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, IntReading, Window};
use crate::time::{Rate, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("eta", "0.95  # target utilization, in (0, 1]"),
    ("max_stage", "5  # additive-increase rounds before a multiplicative step"),
    ("w_ai_fraction", "0.005  # additive increase per RTT as a fraction of the BDP, in (0, 1)"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    eta: f64,
    max_stage: u32,
    w_ai_fraction: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params { eta: 0.95, max_stage: 5, w_ai_fraction: 0.005 }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.eta > 0.0 && p.eta <= 1.0) {
        return Err(format!("eta: expected a number in (0, 1], got {}", p.eta));
    }
    if !(p.w_ai_fraction > 0.0 && p.w_ai_fraction < 1.0) {
        return Err(format!("w_ai_fraction: expected a number in (0, 1), got {}", p.w_ai_fraction));
    }
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Hptcp::new(ctx, p.eta, p.max_stage, p.w_ai_fraction)) as Box<dyn CongestionControl>))
}

/// HPTCP state for one flow.
#[derive(Debug, Clone)]
pub struct Hptcp {
    eta: f64,
    max_stage: u32,
    /// Bottleneck-free bandwidth-delay product B x T, bytes.
    bdp: f64,
    base_rtt: Time,
    link_rate: Rate,
    w_ai: f64,
    w_init: f64,
    /// Reference window Wc, bytes.
    wc: f64,
    /// Smoothed normalized load.
    u: f64,
    inc_stage: u32,
    /// Wc is next updated once snd_una passes this.
    last_update_seq: u64,
    last_echo: Option<Time>,
}

impl Hptcp {
    /// A flow starting at line rate (W = B x T), as HPCC does.
    pub fn new(ctx: &FlowContext, eta: f64, max_stage: u32, w_ai_fraction: f64) -> Self {
        let bdp = ctx.link_rate.0 as f64 / 8.0 * ctx.base_rtt.secs_f64();
        Hptcp {
            eta,
            max_stage,
            bdp,
            base_rtt: ctx.base_rtt,
            link_rate: ctx.link_rate,
            w_ai: (bdp * w_ai_fraction).max(1.0),
            w_init: bdp,
            wc: bdp,
            u: 0.0,
            inc_stage: 0,
            last_update_seq: 0,
            last_echo: None,
        }
    }

    /// The smoothed normalized load U.
    pub fn load(&self) -> f64 {
        self.u
    }

    fn apply(&self, w: f64, win: &mut Window) {
        let w = w.clamp(win.mss as f64, self.bdp * 2.0);
        win.cwnd = w.round() as u64;
        let bits_per_s = w * 8.0 / self.base_rtt.secs_f64();
        win.pacing_rate = Some(Rate((bits_per_s as u64).clamp(1, self.link_rate.0)));
    }
}

impl CongestionControl for Hptcp {
    fn name(&self) -> &'static str {
        "hptcp"
    }

    fn needs_int(&self) -> bool {
        true
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        if win.pacing_rate.is_none() {
            self.apply(self.wc, win);
        }
        let Some(echo) = ack.int else { return };
        let u_now = match echo.reading {
            IntReading::QueueBytes(q) => q as f64 / self.bdp + 1.0,
            IntReading::Utilization(f) => f,
        };
        // HPCC's EWMA over one base RTT, weighted by the time since the last echo.
        let tau = self.last_echo.map_or(self.base_rtt, |t| ack.now.saturating_sub(t)).min(self.base_rtt);
        let k = tau.0 as f64 / self.base_rtt.0.max(1) as f64;
        self.u = (1.0 - k) * self.u + k * u_now;
        self.last_echo = Some(ack.now);
        if ack.in_recovery {
            return;
        }
        let update_wc = ack.snd_una > self.last_update_seq;
        let w = if self.u >= self.eta || self.inc_stage >= self.max_stage {
            let w = self.wc / (self.u / self.eta).max(1e-3) + self.w_ai;
            if update_wc {
                self.inc_stage = 0;
                self.wc = w.min(self.bdp * 2.0);
            }
            w
        } else {
            let w = self.wc + self.w_ai;
            if update_wc {
                self.inc_stage += 1;
                self.wc = w.min(self.bdp * 2.0);
            }
            w
        };
        if update_wc {
            self.last_update_seq = ack.snd_nxt;
        }
        self.apply(w, win);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        self.wc = window_after_loss(ev, win.cwnd as f64, self.w_init);
        self.inc_stage = 0;
        self.apply(self.wc, win);
        win.ssthresh = win.cwnd;
    }
}

/// The reference window after a loss, for HPCC on TCP: fast retransmit halves it, a timeout sets
/// min(W / 2, W_init).
pub(super) fn window_after_loss(ev: CongestionEvent, cwnd: f64, w_init: f64) -> f64 {
    match ev {
        CongestionEvent::Timeout => (cwnd / 2.0).min(w_init),
        CongestionEvent::FastRetransmit | CongestionEvent::Ecn => cwnd / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::IntEcho;

    fn ctx() -> FlowContext {
        // 100 Gb/s x 10 us: a 125 KB BDP.
        FlowContext { mss: 1000, init_cwnd: 10_000, link_rate: Rate(100_000_000_000), base_rtt: Time(10_000_000), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc }
    }

    fn ack(now_us: u64, una: u64, reading: IntReading) -> AckSignals {
        AckSignals {
            now: Time(now_us * 1_000_000),
            acked_bytes: 1000,
            snd_una: una,
            snd_nxt: una + 100_000,
            int: Some(IntEcho { reading, path_latency: Time::ZERO, hop_id: 1 }),
            ..Default::default()
        }
    }

    #[test]
    fn a_standing_queue_of_one_bdp_halves_the_reference_window() {
        let mut cc = Hptcp::new(&ctx(), 0.95, 5, 0.005);
        let mut w = Window { cwnd: 10_000, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        // U = 125 KB / 125 KB + 1 = 2 after a full RTT of smoothing: W = Wc x 0.95 / 2 + W_AI.
        cc.on_ack(&ack(10, 1000, IntReading::QueueBytes(125_000)), &mut w);
        assert!((cc.load() - 2.0).abs() < 1e-9);
        let expect = 125_000.0 * 0.95 / 2.0 + 625.0;
        assert!((w.cwnd as f64 - expect).abs() < 2.0, "{} vs {expect}", w.cwnd);
        assert!(w.pacing_rate.unwrap().0 < 50_000_000_000);
    }

    #[test]
    fn below_target_it_grows_additively_once_per_rtt() {
        let mut cc = Hptcp::new(&ctx(), 0.95, 5, 0.005);
        let mut w = Window { cwnd: 10_000, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        cc.on_ack(&ack(10, 1000, IntReading::Utilization(0.5)), &mut w);
        // The first ACK starts a new RTT: Wc = BDP + W_AI.
        assert_eq!(cc.wc.round() as u64, 125_625);
        // Within that RTT every ACK computes Wc + W_AI without moving Wc.
        cc.on_ack(&ack(11, 2000, IntReading::Utilization(0.5)), &mut w);
        let within = w.cwnd;
        cc.on_ack(&ack(12, 3000, IntReading::Utilization(0.5)), &mut w);
        assert_eq!((within, w.cwnd), (126_250, 126_250));
        // Once snd_una passes the recorded snd_nxt, Wc advances by one W_AI.
        cc.on_ack(&ack(21, 200_000, IntReading::Utilization(0.5)), &mut w);
        assert_eq!((cc.wc.round() as u64, w.cwnd), (126_250, 126_250));
    }

    #[test]
    fn timeout_sets_min_of_half_window_and_initial() {
        let mut cc = Hptcp::new(&ctx(), 0.95, 5, 0.005);
        let mut w = Window { cwnd: 200_000, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        assert_eq!(w.cwnd, 100_000);
        w.cwnd = 40_000;
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!(w.cwnd, 20_000);
    }
}
