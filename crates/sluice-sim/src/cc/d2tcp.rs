//! D2TCP (Vamanan, Hasan, Vijaykumar, "Deadline-Aware Datacenter TCP", SIGCOMM 2012): DCTCP
//! whose cut weighs how close the flow is to missing its deadline. With DCTCP's marked-fraction
//! estimate alpha, a window with marks cuts by `p / 2` where `p = alpha^d`. The imminence
//! `d = Tc / D` compares the time the flow needs to finish at its current rate, `Tc = B / (3/4 ·
//! W / RTT)` (B bytes left, W the window: a sawtooth averages 3/4 of its peak), with the time
//! left before its deadline, `D`; it is held to [0.5, 2] as the paper does. A near-deadline flow
//! (d > 1) backs off less than DCTCP, a far one (d < 1) more; a flow without a deadline, or past
//! it, has d = 1 and is DCTCP.

use super::dctcp::{self, Dctcp};
use super::{AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::Time;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = dctcp::PARAMS;

/// The paper's bounds on the imminence factor d.
const D_MIN: f64 = 0.5;
const D_MAX: f64 = 2.0;

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let (g, alpha_init) = dctcp::params(params)?;
    Ok(Arc::new(move |ctx: &FlowContext| {
        Box::new(D2tcp { dctcp: Dctcp::new(g, alpha_init), size: ctx.size, deadline: ctx.deadline, base_rtt: ctx.base_rtt, d: 1.0 })
            as Box<dyn CongestionControl>
    }))
}

/// One flow's D2TCP: DCTCP's state, and what the imminence is measured from.
#[derive(Debug, Clone)]
pub struct D2tcp {
    dctcp: Dctcp,
    /// Bytes the flow carries.
    size: Option<u64>,
    /// When it should have completed.
    deadline: Option<Time>,
    /// The path's round trip, standing in for the RTT until one is measured.
    base_rtt: Time,
    /// The imminence of the last ACK, for the state samples.
    d: f64,
}

impl D2tcp {
    /// The imminence `d` at this ACK.
    fn imminence(&self, ack: &AckSignals, win: &Window) -> f64 {
        let (Some(size), Some(deadline)) = (self.size, self.deadline) else { return 1.0 };
        if ack.now >= deadline || win.cwnd == 0 {
            return 1.0;
        }
        let rtt = if ack.srtt > Time::ZERO { ack.srtt } else { self.base_rtt };
        let left = size.saturating_sub(ack.snd_una) as f64;
        let needed = left * rtt.secs_f64() / (0.75 * win.cwnd as f64);
        (needed / (deadline - ack.now).secs_f64()).clamp(D_MIN, D_MAX)
    }
}

impl CongestionControl for D2tcp {
    fn name(&self) -> &'static str {
        "d2tcp"
    }

    fn ecn_mode(&self) -> EcnMode {
        EcnMode::PerPacket
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let d = self.imminence(ack, win);
        self.d = d;
        self.dctcp.on_ack_penalty(ack, win, false, |alpha| alpha.powf(d));
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        self.dctcp.on_congestion_event(ev, win);
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("alpha", self.dctcp.alpha()), ("d", self.d)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn flow(size: Option<u64>, deadline: Option<Time>) -> D2tcp {
        D2tcp { dctcp: Dctcp::new(1.0 / 16.0, 1.0), size, deadline, base_rtt: Time::from_us(100), d: 1.0 }
    }

    #[test]
    fn imminence_compares_the_time_needed_with_the_time_left() {
        let win = Window { cwnd: 100 * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS };
        let ack = AckSignals { now: Time::from_ms(1), srtt: Time::from_us(100), snd_una: 0, ..Default::default() };
        // 300 KB left at 3/4 of 100 KB per 100 us: 400 us needed.
        assert_eq!(flow(Some(300_000), Some(Time::from_us(1_800))).imminence(&ack, &win), 0.5, "800 us left: d = 0.5");
        assert!((flow(Some(300_000), Some(Time::from_us(1_500))).imminence(&ack, &win) - 0.8).abs() < 1e-9, "500 us left");
        assert_eq!(flow(Some(300_000), Some(Time::from_us(1_100))).imminence(&ack, &win), 2.0, "100 us left: d = 4, held to 2");
        assert_eq!(flow(Some(300_000), Some(Time::from_us(900))).imminence(&ack, &win), 1.0, "missed: DCTCP");
        assert_eq!(flow(Some(300_000), None).imminence(&ack, &win), 1.0, "no deadline: DCTCP");
    }

    #[test]
    fn a_near_deadline_cuts_less_and_a_far_one_more_than_dctcp() {
        // One marked ACK inside the first observation window: alpha stays at 1/4 and the window
        // of 100 segments is cut by alpha^d / 2.
        let cut = |deadline: Option<Time>| {
            let mut cc = flow(Some(10_000_000), deadline);
            cc.dctcp = Dctcp::new(1.0 / 16.0, 0.25);
            let mut w = Window { cwnd: 100 * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS };
            let ack = AckSignals {
                now: Time::from_ms(1),
                srtt: Time::from_us(100),
                acked_bytes: MSS,
                ce_bytes: MSS,
                ece: true,
                snd_una: MSS,
                snd_nxt: 200 * MSS,
                ..Default::default()
            };
            cc.on_ack(&ack, &mut w);
            w.cwnd
        };
        // 10 MB at 75 KB per 100 us needs 13.3 ms. With 10 ms left, d = 1.33: 0.25^1.33 = 0.157,
        // a cut of 7.9 %; with 100 ms left, d is held to 0.5: 0.25^0.5 = 0.5, a cut of 25 %;
        // DCTCP cuts 12.5 %.
        assert_eq!(cut(None), 87_500);
        let near = cut(Some(Time::from_ms(11)));
        assert!((92_120..=92_130).contains(&near), "near {near}");
        assert_eq!(cut(Some(Time::from_ms(101))), 75_000);
    }
}
