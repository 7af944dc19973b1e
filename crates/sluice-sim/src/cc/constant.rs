//! A window that never moves: the reference simulator's `-sender_cc_algo constant`, which
//! isolates the UET transport's delivery (PSNs, SACK, NACK, timeouts) from any control.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, LossSignals, Window};
use crate::time::Time;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[("cwnd", "0  # window in packets of mtu; 0 is 1.5 base-RTT BDP, NSCC's starting window")];

#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    cwnd: u64,
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let c: Config = parse_params(params)?;
    if c.cwnd > 1 << 20 {
        return Err(format!("cwnd: expected at most {} packets (0 is 1.5 BDP), got {}", 1 << 20, c.cwnd));
    }
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Constant::new(c.cwnd, ctx)) as Box<dyn CongestionControl>))
}

/// A fixed window in bytes, headers included.
#[derive(Clone, Copy, Debug)]
pub struct Constant {
    cwnd: u64,
}

impl Constant {
    /// `cwnd` packets of the flow's MTU, or 1.5 BDP at its base RTT where `cwnd` is 0.
    pub fn new(cwnd: u64, ctx: &FlowContext) -> Constant {
        let mtu = ctx.uet.map_or(ctx.mss, |u| u.mtu);
        let bdp = (ctx.base_rtt.secs_f64() * ctx.link_rate.bps() as f64 / 8.0) as u64;
        Constant { cwnd: if cwnd == 0 { (1.5 * bdp as f64) as u64 } else { cwnd * mtu }.max(mtu) }
    }
}

impl CongestionControl for Constant {
    fn name(&self) -> &'static str {
        "constant"
    }
    fn init(&mut self, win: &mut Window) {
        win.cwnd = self.cwnd;
    }
    fn on_ack(&mut self, _ack: &AckSignals, _win: &mut Window) {}
    fn on_loss(&mut self, _loss: &LossSignals, _win: &mut Window) {}
    fn on_congestion(&mut self, _ev: CongestionEvent, _now: Time, _win: &mut Window) {}
    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("cwnd", self.cwnd as f64)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{LossCause, UetFlow};
    use crate::time::Rate;

    #[test]
    fn the_window_is_set_once_and_never_moves() {
        let uet = Some(UetFlow { network_rtt: Time::from_us(12), trimming: true, mtu: 4150, oversubscription: 1.0 });
        let ctx = FlowContext { mss: 4086, init_cwnd: 0, link_rate: Rate::gbps(100), base_rtt: Time::from_us(12), size: None, deadline: None, uet, stack: crate::transport::tcp::Stack::Rfc };
        let mut win = Window { cwnd: 0, ssthresh: u64::MAX, pacing_rate: None, mss: 4086 };
        let build = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).unwrap()(&ctx);
        // 12 µs at 100 Gb/s is 150,000 bytes; 1.5 of it, or 8 packets of 4150 bytes.
        for (params, want) in [("", 225_000), ("cwnd = 8", 33_200)] {
            let mut cc = build(params);
            cc.init(&mut win);
            assert_eq!(win.cwnd, want);
            cc.on_ack(&AckSignals { now: Time::from_us(20), acked_bytes: 16_600, ece: true, rtt: Some(Time::from_us(90)), ..Default::default() }, &mut win);
            let loss = LossSignals { now: Time::from_us(21), cause: LossCause::Trimmed, bytes: 4150, rtt: None, last_hop: false, ece: false, in_flight: 0 };
            cc.on_loss(&loss, &mut win);
            cc.on_loss(&LossSignals { cause: LossCause::Timeout, ..loss }, &mut win);
            assert_eq!(win.cwnd, want);
        }
        assert!(factory(&"cwnd = 2000000".parse::<toml::Table>().unwrap()).is_err());
    }
}
