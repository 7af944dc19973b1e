//! DCTCP on a rate-based NIC, as the HPCC simulator models hardware DCTCP: the receiver echoes
//! each packet's CE mark on its ACK; once per window of data (when the ACK passes the highest
//! sequence sent at the last update) alpha = (1 - g) alpha + g F, F the marked fraction of that
//! window's ACKs; a marked ACK outside congestion-window-reduced state cuts the rate by alpha / 2
//! and holds further cuts for a window; each window without a cut adds `rate_ai`. With
//! `window = true` the queue pair also keeps a window of one bandwidth-delay product of its path
//! scaled by rate / line rate, as the HPCC simulator's `run.py` runs it (`HAS_WIN`, `VAR_WIN`;
//! there the BDP is the fabric's longest path's, here the flow's own).

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::{Rate, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("g", "0.0625  # alpha's EWMA gain (1/16)"),
    ("rate_ai", "\"1000Mbps\"  # additive increase per window"),
    ("min_rate", "\"100Mbps\"  # the rate never falls below this"),
    ("window", "false  # also cap bytes in flight at BDP x rate / line rate"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    g: f64,
    rate_ai: Rate,
    min_rate: Rate,
    window: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params { g: 1.0 / 16.0, rate_ai: Rate(1_000_000_000), min_rate: Rate(100_000_000), window: false }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.g > 0.0 && p.g <= 1.0) {
        return Err(format!("g: expected a number in (0, 1], got {}", p.g));
    }
    Ok(Arc::new(move |ctx: &FlowContext| {
        Box::new(DctcpRate {
            g: p.g,
            rate_ai: p.rate_ai.0 as f64,
            min_rate: p.min_rate.0 as f64,
            line_rate: ctx.link_rate.0 as f64,
            rate: ctx.link_rate.0 as f64,
            bdp: p.window.then(|| ctx.link_rate.bytes_in(ctx.base_rtt).max(ctx.mss)),
            mss: ctx.mss,
            alpha: 1.0,
            acks: 0,
            marked: 0,
            round_end: 0,
            cwr_end: None,
        }) as Box<dyn CongestionControl>
    }))
}

impl DctcpRate {
    fn apply(&self, win: &mut Window) {
        win.pacing_rate = Some(Rate(self.rate.round() as u64));
        if let Some(bdp) = self.bdp {
            win.cwnd = ((bdp as f64 * self.rate / self.line_rate) as u64).max(self.mss);
        }
    }
}

/// Rate-based DCTCP's state for one queue pair.
pub struct DctcpRate {
    g: f64,
    rate_ai: f64,
    min_rate: f64,
    line_rate: f64,
    rate: f64,
    /// With `window`: the path's bandwidth-delay product, bytes.
    bdp: Option<u64>,
    mss: u64,
    alpha: f64,
    /// ACKs and marked ACKs in the current window.
    acks: u64,
    marked: u64,
    round_end: u64,
    /// Cuts are held until the ACK passes this.
    cwr_end: Option<u64>,
}

impl CongestionControl for DctcpRate {
    fn name(&self) -> &'static str {
        "dctcp_rate"
    }

    fn ecn_mode(&self) -> EcnMode {
        EcnMode::PerPacket
    }

    fn init(&mut self, win: &mut Window) {
        // Rate-based: without `window` the window stays open (on TCP too), the rate alone
        // holds the flow back.
        win.cwnd = u64::MAX / 4;
        self.apply(win);
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let marked = ack.ce_bytes > 0;
        self.acks += 1;
        self.marked += marked as u64;
        let new_window = ack.snd_una > self.round_end;
        if new_window {
            if self.round_end > 0 {
                let frac = self.marked as f64 / self.acks as f64;
                self.alpha = (1.0 - self.g) * self.alpha + self.g * frac;
            }
            self.round_end = ack.snd_nxt;
            self.acks = 0;
            self.marked = 0;
        }
        if self.cwr_end.is_some_and(|e| ack.snd_una > e) {
            self.cwr_end = None;
        }
        if marked && self.cwr_end.is_none() {
            self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.min_rate);
            self.cwr_end = Some(ack.snd_nxt);
        } else if self.cwr_end.is_none() && new_window {
            self.rate = (self.rate + self.rate_ai).min(self.line_rate);
        }
        self.apply(win);
    }

    fn on_congestion(&mut self, _: CongestionEvent, _: Time, _: &mut Window) {}

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("alpha", self.alpha), ("rate_bps", self.rate)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_follows_the_rate_when_asked_and_stays_open_otherwise() {
        // run.py's DCTCP: window = BDP x rate / line rate (HAS_WIN, VAR_WIN).
        let ctx = FlowContext { mss: 1000, init_cwnd: 10_000, link_rate: Rate::gbps(100), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc };
        let build = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).unwrap()(&ctx);
        let mut win = Window { cwnd: 0, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        let mut cc = build("window = true\ng = 1.0");
        cc.init(&mut win);
        assert_eq!(win.cwnd, 125_000, "one BDP at line rate");
        // A marked ACK with alpha 1 halves the rate, and the window with it.
        let ack = AckSignals { ce_bytes: 1000, ece: true, snd_una: 1000, snd_nxt: 10_000, ..AckSignals::default() };
        cc.on_ack(&ack, &mut win);
        assert_eq!(win.pacing_rate, Some(Rate::gbps(50)));
        assert_eq!(win.cwnd, 62_500);
        let mut open = build("");
        open.init(&mut win);
        open.on_ack(&ack, &mut win);
        assert_eq!(win.cwnd, u64::MAX / 4, "no window by default");
    }
}
