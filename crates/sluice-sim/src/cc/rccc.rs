//! RCCC, the Ultra Ethernet receiver-credit congestion control (the reference simulator's
//! `-receiver_cc_only`, `uec.cpp:186-199, 799-810, 1838-1904, 2912-2947, 3045-3170`). The
//! sender starts with a speculative window of credit, stops speculating at its first feedback,
//! and from then on sends only on the credit its receiver's host paces out at 99% of line rate
//! (`host/pull.rs`). The transport carries the mechanism; this algorithm only asks for it and
//! sizes the speculative window, and keeps no window of its own.
//!
//! With NSCC, `nscc`'s `receiver_cc = true` runs both (the reference's `-sender_cc
//! -receiver_cc`): credit and NSCC's window must both allow a packet.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, LossSignals, ReceiverCredit, Window};
use crate::time::Time;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[("credit", "0  # speculative credit in packets of mtu; 0 is 1.5 BDP at the network RTT, the reference's _configured_maxwnd")];

#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    credit: u64,
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let c: Config = parse_params(params)?;
    if c.credit > 1 << 20 {
        return Err(format!("credit: expected at most {} packets (0 is 1.5 BDP), got {}", 1 << 20, c.credit));
    }
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Rccc::new(c.credit, ctx)) as Box<dyn CongestionControl>))
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
}

impl Rccc {
    /// A flow whose speculative credit is `packets` of its MTU (0: 1.5 BDP).
    pub fn new(packets: u64, ctx: &FlowContext) -> Rccc {
        Rccc { cap: speculative_window(packets, ctx) }
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
        Some(ReceiverCredit { cap: self.cap, windowed: false })
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
        let uet = Some(UetFlow { network_rtt: rtt, trimming: true, mtu: 4150 });
        let ctx = FlowContext { mss: 4086, init_cwnd: 0, link_rate: Rate::gbps(100), base_rtt: rtt, size: None, deadline: None, uet };
        let build = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).unwrap()(&ctx);
        assert_eq!(build("").receiver_credit(), Some(ReceiverCredit { cap: 262_926, windowed: false }));
        assert_eq!(build("credit = 50").receiver_credit().unwrap().cap, 207_500);
        let refused = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).err().unwrap();
        assert!(refused("credit = 2000000").starts_with("credit: expected at most"));
        assert!(refused("cwnd = 5").contains("cwnd"), "unknown keys are refused");
    }
}
