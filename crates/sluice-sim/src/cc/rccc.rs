//! RCCC, the Ultra Ethernet receiver-credit congestion control (the reference simulator's
//! `-receiver_cc_only`, `uec.cpp:186-199, 799-810, 1838-1904, 2912-2947, 3045-3170`). The
//! sender starts with a speculative window of credit, stops speculating at its first feedback,
//! and from then on sends only on the credit its receiver's host paces out at 99% of line rate
//! (`host/pull.rs`). The transport carries the mechanism; this algorithm only asks for it and
//! sizes the speculative window, and keeps no window of its own.
//!
//! On an oversubscribed fabric the receiving host also scales its credit rate by the trims and
//! marks the core leaves on what it receives (`oversubscribed.rs`), as the reference does
//! whenever RCCC runs alone on such a topology.
//!
//! With NSCC, `nscc`'s `receiver_cc = true` runs both (the reference's `-sender_cc
//! -receiver_cc`): credit and NSCC's window must both allow a packet.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, LossSignals, OversubscribedParams, ReceiverCredit, Window};
use crate::auto::Auto;
use crate::time::Time;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("credit", "0  # speculative credit in packets of mtu; 0 is 1.5 BDP at the network RTT, the reference's _configured_maxwnd"),
    ("oversubscribed_cc", "\"auto\"  # the receiver scales its credit rate by the core's trims and marks; auto: where the fabric is oversubscribed"),
    ("ai", "0.01  # its additive increase, a share of the line rate (_Ai)"),
    ("md", "0.5  # its decrease per unit of the marked share above target_congestion (_Md)"),
    ("alpha", "0.5  # the newest interval's weight in the marked share (_alpha)"),
    ("target_congestion", "0.3  # the marked share the receiver allows before it slows (_target_congestion)"),
];

#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    credit: u64,
    oversubscribed_cc: Auto<bool>,
    ai: f64,
    md: f64,
    alpha: f64,
    target_congestion: f64,
}

impl Default for Config {
    fn default() -> Self {
        let r = OversubscribedParams::reference(1.0, Time::ZERO);
        Config { credit: 0, oversubscribed_cc: Auto::Auto, ai: r.ai, md: r.md, alpha: r.alpha, target_congestion: r.target_congestion }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let c: Config = parse_params(params)?;
    if c.credit > 1 << 20 {
        return Err(format!("credit: expected at most {} packets (0 is 1.5 BDP), got {}", 1 << 20, c.credit));
    }
    for (key, v, zero) in [("ai", c.ai, false), ("md", c.md, true), ("alpha", c.alpha, false), ("target_congestion", c.target_congestion, true)] {
        if !(v <= 1.0 && (v > 0.0 || zero && v == 0.0)) {
            let range = if zero { "[0, 1]" } else { "(0, 1]" };
            return Err(format!("{key}: expected a number in {range}, got {v}"));
        }
    }
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Rccc::new(c.credit, ctx).with_oversubscribed(&c, ctx)) as Box<dyn CongestionControl>))
}

/// The speculative window in bytes of a flow under `ctx`: `packets` of its MTU, or 1.5 BDP at
/// its base RTT where `packets` is 0 (`setConfiguredMaxWnd(1.5*_bdp)`).
pub(super) fn speculative_window(packets: u64, ctx: &FlowContext) -> u64 {
    let mtu = ctx.uet.map_or(ctx.mss, |u| u.mtu);
    let bdp = (ctx.base_rtt.ps() as f64 / 1e12 * ctx.link_rate.bps() as f64 / 8.0) as u64;
    if packets == 0 { (1.5 * bdp as f64) as u64 } else { packets * mtu }.max(mtu)
}

/// Credit alone: the window stays open.
#[derive(Clone, Copy, Debug)]
pub struct Rccc {
    cap: u64,
    oversubscribed: Option<OversubscribedParams>,
}

impl Rccc {
    /// A flow whose speculative credit is `packets` of its MTU (0: 1.5 BDP).
    pub fn new(packets: u64, ctx: &FlowContext) -> Rccc {
        Rccc { cap: speculative_window(packets, ctx), oversubscribed: None }
    }

    /// The receiver's oversubscription control as `c` sets it: on where asked, or, by default,
    /// where the fabric is oversubscribed (`main_uec.cpp:688-691`).
    fn with_oversubscribed(mut self, c: &Config, ctx: &FlowContext) -> Rccc {
        let Some(net) = ctx.uet else { return self };
        if c.oversubscribed_cc.or(net.oversubscription > 1.0) {
            let reference = OversubscribedParams::reference(net.oversubscription, net.network_rtt);
            self.oversubscribed = Some(OversubscribedParams { ai: c.ai, md: c.md, alpha: c.alpha, target_congestion: c.target_congestion, ..reference });
        }
        self
    }
}

impl CongestionControl for Rccc {
    fn name(&self) -> &'static str {
        "rccc"
    }
    fn init(&mut self, win: &mut Window) {
        // Credit gates the sender; the window is there for the path policies to read.
        win.cwnd = self.cap;
    }
    fn receiver_credit(&self) -> Option<ReceiverCredit> {
        Some(ReceiverCredit { cap: self.cap, windowed: false, oversubscribed: self.oversubscribed })
    }
    fn on_ack(&mut self, _ack: &AckSignals, _win: &mut Window) {}
    fn on_loss(&mut self, _loss: &LossSignals, _win: &mut Window) {}
    fn on_congestion(&mut self, _ev: CongestionEvent, _now: Time, _win: &mut Window) {}
    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("credit_cap", self.cap as f64)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::UetFlow;
    use crate::time::Rate;

    #[test]
    fn the_speculative_credit_is_one_and_a_half_bdp_at_the_network_rtt_or_set_in_packets() {
        // The reference's auto topology: 14.02272 µs at 100 Gb/s is 175,284 bytes; 1.5 of it.
        let rtt = Time(14_022_720);
        let uet = Some(UetFlow { network_rtt: rtt, trimming: true, mtu: 4150, oversubscription: 1.0 });
        let ctx = FlowContext { mss: 4086, init_cwnd: 0, link_rate: Rate::gbps(100), base_rtt: rtt, size: None, deadline: None, uet, stack: crate::transport::tcp::Stack::Rfc };
        let build = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).unwrap()(&ctx);
        assert_eq!(build("").receiver_credit(), Some(ReceiverCredit { cap: 262_926, windowed: false, oversubscribed: None }));
        assert_eq!(build("credit = 50").receiver_credit().unwrap().cap, 207_500);
        let refused = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).err().unwrap();
        assert!(refused("credit = 2000000").starts_with("credit: expected at most"));
        assert!(refused("cwnd = 5").contains("cwnd"), "unknown keys are refused");
    }

    #[test]
    fn the_receiver_control_is_on_where_the_fabric_is_oversubscribed_or_asked_for() {
        let rtt = Time::from_us(10);
        let ctx = |ratio: f64| {
            let uet = Some(UetFlow { network_rtt: rtt, trimming: true, mtu: 4150, oversubscription: ratio });
            FlowContext { mss: 4086, init_cwnd: 0, link_rate: Rate::gbps(400), base_rtt: rtt, size: None, deadline: None, uet, stack: crate::transport::tcp::Stack::Rfc }
        };
        let control = |s: &str, ratio: f64| factory(&s.parse::<toml::Table>().unwrap()).unwrap()(&ctx(ratio)).receiver_credit().unwrap().oversubscribed;
        assert_eq!(control("", 4.0), Some(OversubscribedParams::reference(4.0, rtt)));
        assert_eq!(control("", 1.0), None, "a non-blocking fabric runs without it");
        assert_eq!(control("oversubscribed_cc = false", 8.0), None);
        assert_eq!(control("oversubscribed_cc = true", 1.0).unwrap().min_rate, 0.01, "forced on: the reference's 1% floor");
        let tuned = control("ai = 0.05\nmd = 0\nalpha = 1\ntarget_congestion = 0.1", 8.0).unwrap();
        assert_eq!((tuned.ai, tuned.md, tuned.alpha, tuned.target_congestion, tuned.min_rate), (0.05, 0.0, 1.0, 0.1, 0.1125));
        let refused = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).err().unwrap();
        assert_eq!(refused("alpha = 0"), "alpha: expected a number in (0, 1], got 0");
        assert_eq!(refused("md = 1.5"), "md: expected a number in [0, 1], got 1.5");
        assert_eq!(refused("oversubscribed_cc = \"yes\""), "oversubscribed_cc: expected a boolean; or \"auto\" to derive it from the network; got the text \"yes\"");
    }
}
