//! NewReno (RFC 5681, RFC 6582): slow start, additive increase of one MSS per window of acked
//! bytes, halving on loss.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::Time;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] =
    &[("ecn", "false  # classic ECN (RFC 3168): an ECE halves the window like a loss, once per window")];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default)]
    ecn: bool,
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    Ok(Arc::new(move |_: &FlowContext| Box::new(NewReno::new(p.ecn)) as Box<dyn CongestionControl>))
}

/// NewReno with appropriate byte counting (RFC 3465) and no per-ACK cap on slow-start growth.
///
/// Slow start grows the window by every acked byte while `cwnd < ssthresh`; congestion avoidance
/// adds exactly one MSS each time a full window's worth of bytes has been acknowledged.
#[derive(Debug, Clone)]
pub struct NewReno {
    ecn: bool,
    /// Bytes acked in congestion avoidance since the window last grew.
    bytes_acked: u64,
}

impl NewReno {
    /// A NewReno instance; `ecn` asks the transport for classic ECN.
    pub fn new(ecn: bool) -> Self {
        NewReno { ecn, bytes_acked: 0 }
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno_ref"
    }

    fn ecn_mode(&self) -> EcnMode {
        if self.ecn {
            EcnMode::Classic
        } else {
            EcnMode::Off
        }
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        if ack.in_recovery {
            return;
        }
        reno_grow(&mut self.bytes_acked, ack.acked_bytes, win);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        self.bytes_acked = 0;
        win.ssthresh = (win.cwnd / 2).max(win.min_cwnd());
        win.cwnd = match ev {
            CongestionEvent::Timeout => win.mss,
            CongestionEvent::FastRetransmit | CongestionEvent::Ecn => win.ssthresh,
        };
    }
}

/// Reno window growth by `acked` bytes: slow start up to `ssthresh`, then one MSS per `cwnd` bytes
/// acked, carrying the remainder in `acc` so no growth is lost to rounding. Shared with DCTCP.
pub(super) fn reno_grow(acc: &mut u64, mut acked: u64, win: &mut Window) {
    if win.cwnd < win.ssthresh {
        let inc = acked.min(win.ssthresh - win.cwnd);
        win.cwnd += inc;
        acked -= inc;
    }
    *acc += acked;
    while *acc >= win.cwnd {
        *acc -= win.cwnd;
        win.cwnd += win.mss;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn win(cwnd: u64, ssthresh: u64) -> Window {
        Window { cwnd, ssthresh, pacing_rate: None, mss: MSS }
    }

    /// Acks one full window, one MSS per ACK (as many ACKs as the window held at the start).
    fn ack_one_rtt(cc: &mut NewReno, w: &mut Window) {
        let ack = AckSignals { acked_bytes: MSS, ..Default::default() };
        for _ in 0..w.cwnd / MSS {
            cc.on_ack(&ack, w);
        }
    }

    #[test]
    fn slow_start_doubles_each_rtt() {
        let mut cc = NewReno::new(false);
        let mut w = win(10 * MSS, u64::MAX);
        for expect in [20, 40, 80, 160] {
            ack_one_rtt(&mut cc, &mut w);
            assert_eq!(w.cwnd, expect * MSS);
        }
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_carries_the_rest_into_avoidance() {
        let mut cc = NewReno::new(false);
        let mut w = win(10 * MSS, 15 * MSS);
        cc.on_ack(&AckSignals { acked_bytes: 10 * MSS, ..Default::default() }, &mut w);
        assert_eq!(w.cwnd, 15 * MSS);
        assert_eq!(cc.bytes_acked, 5 * MSS);
    }

    #[test]
    fn avoidance_adds_exactly_one_mss_per_window() {
        let mut cc = NewReno::new(false);
        // A window that is not a multiple of the ACK size: rounding must not lose growth.
        let mut w = win(10 * MSS + 1, 0);
        let ack = AckSignals { acked_bytes: 333, ..Default::default() };
        let mut acked = 0u64;
        let mut expect_cwnd = w.cwnd;
        let mut next_step = w.cwnd;
        for _ in 0..100_000 {
            cc.on_ack(&ack, &mut w);
            acked += 333;
            while acked >= next_step {
                expect_cwnd += MSS;
                next_step += expect_cwnd;
            }
            assert_eq!(w.cwnd, expect_cwnd);
        }
        // 33.3 MB acked: cwnd has grown with the square root of it, about 258 MSS.
        assert!((250 * MSS..270 * MSS).contains(&w.cwnd), "cwnd {}", w.cwnd);

        // Per RTT of one-MSS ACKs: +1 MSS exactly.
        let mut w = win(50 * MSS, 0);
        let mut cc = NewReno::new(false);
        for rtt in 1..=20 {
            ack_one_rtt(&mut cc, &mut w);
            assert_eq!(w.cwnd, (50 + rtt) * MSS);
        }
    }

    #[test]
    fn no_growth_in_recovery() {
        let mut cc = NewReno::new(false);
        let mut w = win(10 * MSS, u64::MAX);
        cc.on_ack(&AckSignals { acked_bytes: 5 * MSS, in_recovery: true, ..Default::default() }, &mut w);
        assert_eq!(w.cwnd, 10 * MSS);
    }

    #[test]
    fn halves_on_loss_and_ecn_and_collapses_on_timeout() {
        let mut cc = NewReno::new(true);
        assert_eq!(cc.ecn_mode(), EcnMode::Classic);
        let mut w = win(64 * MSS, u64::MAX);
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (32 * MSS, 32 * MSS));
        cc.on_congestion(CongestionEvent::Ecn, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (16 * MSS, 16 * MSS));
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (MSS, 8 * MSS));
        // Never below two segments except the timeout's one.
        let mut w = win(3 * MSS, u64::MAX);
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (2 * MSS, 2 * MSS));
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (MSS, 2 * MSS));
    }

    #[test]
    fn params() {
        let ctx = FlowContext {
            mss: MSS,
            init_cwnd: 10 * MSS,
            link_rate: crate::time::Rate::gbps(10),
            base_rtt: Time::from_us(10),
            size: None,
            deadline: None,
            uet: None,
            stack: crate::transport::tcp::Stack::Rfc,
        };
        let f = factory(&toml::Table::new()).unwrap();
        assert_eq!(f(&ctx).ecn_mode(), EcnMode::Off);
        assert_eq!(f(&ctx).name(), "newreno_ref");
        let f = factory(&toml::from_str("ecn = true").unwrap()).unwrap();
        assert_eq!(f(&ctx).ecn_mode(), EcnMode::Classic);
        let e = factory(&toml::from_str("enc = true").unwrap()).err().unwrap();
        assert!(e.contains("unknown field `enc`"), "{e}");
        let e = factory(&toml::from_str("ecn = 1").unwrap()).err().unwrap();
        assert!(e.starts_with("ecn: "), "{e}");
    }
}
