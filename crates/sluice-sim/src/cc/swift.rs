//! Swift (Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in the
//! Datacenter", SIGCOMM 2020): AIMD on delay against a target that grows with the path's hop
//! count and shrinks as the flow's window grows.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, Window};
use crate::time::{Rate, Time};
use crate::transport::tcp::TcpConfig;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("base_target", "\"20us\"  # target fabric delay of a path with no hops, > 0"),
    ("hop_scale", "\"1us\"  # target added per switch hop (h)"),
    ("fs_range", "\"20us\"  # most target flow scaling adds, for windows at or below fs_min_cwnd"),
    ("fs_min_cwnd", "0.1  # window (packets) at or below which flow scaling adds all of fs_range, > 0"),
    ("fs_max_cwnd", "100.0  # window (packets) at or above which flow scaling adds nothing, > fs_min_cwnd"),
    ("ai", "1.0  # additive increase in packets per RTT, > 0"),
    ("beta", "0.8  # multiplicative decrease per unit of relative excess delay, > 0"),
    ("max_mdf", "0.5  # largest fraction one decrease removes, in (0, 1)"),
    ("min_cwnd", "0.001  # smallest window in packets; below 1 the flow is paced, > 0"),
    ("max_cwnd", "10000.0  # largest window in packets, >= min_cwnd"),
    ("retx_reset_threshold", "5  # consecutive timeouts that reset the window to min_cwnd, >= 1"),
];

/// Swift's tunables. Defaults are sized for a 10-100 Gb/s fabric with microsecond links; the
/// paper gives the control laws, not its production values.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Target delay before hop and flow scaling.
    pub base_target: Time,
    /// Target added per switch hop.
    pub hop_scale: Time,
    /// Upper bound of the flow-scaling term.
    pub fs_range: Time,
    /// Window (packets) at or below which flow scaling adds `fs_range`.
    pub fs_min_cwnd: f64,
    /// Window (packets) at or above which flow scaling adds nothing.
    pub fs_max_cwnd: f64,
    /// Additive increase, packets per RTT.
    pub ai: f64,
    /// Multiplicative-decrease constant.
    pub beta: f64,
    /// Maximum multiplicative-decrease factor.
    pub max_mdf: f64,
    /// Window floor in packets.
    pub min_cwnd: f64,
    /// Window ceiling in packets.
    pub max_cwnd: f64,
    /// Consecutive RTOs after which the window resets to `min_cwnd`.
    pub retx_reset_threshold: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base_target: Time::from_us(20),
            hop_scale: Time::from_us(1),
            fs_range: Time::from_us(20),
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            min_cwnd: 0.001,
            max_cwnd: 10_000.0,
            retx_reset_threshold: 5,
        }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let c: Config = parse_params(params)?;
    let positive = |key: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(format!("{key}: expected a positive number, got {v}"))
        }
    };
    if c.base_target == Time::ZERO {
        return Err("base_target: expected a positive duration like \"20us\"".into());
    }
    positive("fs_min_cwnd", c.fs_min_cwnd)?;
    if !(c.fs_max_cwnd.is_finite() && c.fs_max_cwnd > c.fs_min_cwnd) {
        return Err(format!(
            "fs_max_cwnd: expected a number above fs_min_cwnd ({}), got {}",
            c.fs_min_cwnd, c.fs_max_cwnd
        ));
    }
    positive("ai", c.ai)?;
    positive("beta", c.beta)?;
    if !(c.max_mdf > 0.0 && c.max_mdf < 1.0) {
        return Err(format!("max_mdf: expected a number in (0, 1), got {}", c.max_mdf));
    }
    positive("min_cwnd", c.min_cwnd)?;
    if !(c.max_cwnd.is_finite() && c.max_cwnd >= c.min_cwnd) {
        return Err(format!(
            "max_cwnd: expected a number of packets at least min_cwnd ({}), got {}",
            c.min_cwnd, c.max_cwnd
        ));
    }
    if c.retx_reset_threshold == 0 {
        return Err("retx_reset_threshold: expected at least 1".into());
    }
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Swift::new(c, ctx)) as Box<dyn CongestionControl>))
}

/// Swift's window control (the paper's Algorithm 1) with hop- and flow-scaled targets.
///
/// The delay signal is the ACK's RTT sample. Swift proper subtracts NIC and host delays from it
/// to get fabric delay; the simulator has no host delay, so the RTT is the fabric delay. The
/// window is kept in packets; below one packet the flow sends one packet per `rtt / cwnd`
/// through the NIC's pacer. Only the fabric window is modelled, not Swift's endpoint window.
#[derive(Debug, Clone)]
pub struct Swift {
    cfg: Config,
    mss: u64,
    /// Wire bytes of a full segment, for pacing below one packet.
    frame: u64,
    /// Window in packets.
    cwnd: f64,
    /// Flow-scaling curve `alpha / sqrt(cwnd) + beta`, in seconds.
    fs_alpha: f64,
    fs_beta: f64,
    last_decrease: Option<Time>,
    /// The latest smoothed RTT: decreases are at most one per this long.
    rtt: Time,
    /// Consecutive RTOs.
    retransmits: u32,
}

impl Swift {
    /// A Swift instance starting from the transport's initial window.
    pub fn new(cfg: Config, ctx: &FlowContext) -> Self {
        let range = cfg.fs_range.secs_f64();
        let fs_alpha = range / (1.0 / cfg.fs_min_cwnd.sqrt() - 1.0 / cfg.fs_max_cwnd.sqrt());
        Swift {
            cfg,
            mss: ctx.mss,
            frame: TcpConfig::wire_bytes(ctx.mss) as u64,
            cwnd: (ctx.init_cwnd as f64 / ctx.mss as f64).clamp(cfg.min_cwnd, cfg.max_cwnd),
            fs_alpha,
            fs_beta: -fs_alpha / cfg.fs_max_cwnd.sqrt(),
            last_decrease: None,
            rtt: ctx.base_rtt,
            retransmits: 0,
        }
    }

    /// The window in packets.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The target delay for a path of `hops` switch hops at the current window.
    pub fn target_delay(&self, hops: Option<u8>) -> Time {
        let flow = (self.fs_alpha / self.cwnd.sqrt() + self.fs_beta).clamp(0.0, self.cfg.fs_range.secs_f64());
        self.cfg.base_target + self.cfg.hop_scale.saturating_mul(hops.unwrap_or(0) as u64) + Time::from_secs_f64(flow)
    }

    fn can_decrease(&self, now: Time) -> bool {
        self.last_decrease.is_none_or(|t| now.saturating_sub(t) >= self.rtt)
    }

    /// Clamps the window, notes a decrease, and hands it to the transport.
    fn apply(&mut self, before: f64, now: Time, win: &mut Window) {
        self.cwnd = self.cwnd.clamp(self.cfg.min_cwnd, self.cfg.max_cwnd);
        if self.cwnd < before {
            self.last_decrease = Some(now);
        }
        if self.cwnd >= 1.0 {
            win.cwnd = (self.cwnd * self.mss as f64) as u64;
            win.pacing_rate = None;
        } else {
            // One packet at a time, spaced rtt / cwnd apart.
            win.cwnd = self.mss;
            let bps = self.frame as f64 * 8.0 * self.cwnd / self.rtt.secs_f64().max(1e-9);
            win.pacing_rate = Some(Rate((bps as u64).max(1)));
        }
    }
}

impl CongestionControl for Swift {
    fn name(&self) -> &'static str {
        "swift"
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        self.retransmits = 0;
        if ack.srtt > Time::ZERO {
            self.rtt = ack.srtt;
        }
        let Some(delay) = ack.rtt else { return };
        let before = self.cwnd;
        let target = self.target_delay(ack.path_hops);
        let acked = ack.acked_bytes as f64 / self.mss as f64;
        if delay < target {
            self.cwnd += if self.cwnd >= 1.0 { self.cfg.ai / self.cwnd * acked } else { self.cfg.ai * acked };
        } else if self.can_decrease(ack.now) {
            let excess = (delay - target).secs_f64() / delay.secs_f64();
            self.cwnd *= (1.0 - self.cfg.beta * excess).max(1.0 - self.cfg.max_mdf);
        }
        self.apply(before, ack.now, win);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, now: Time, win: &mut Window) {
        let before = self.cwnd;
        match ev {
            CongestionEvent::FastRetransmit => {
                self.retransmits = 0;
                if self.can_decrease(now) {
                    self.cwnd *= 1.0 - self.cfg.max_mdf;
                }
            }
            CongestionEvent::Timeout => {
                self.retransmits += 1;
                if self.retransmits >= self.cfg.retx_reset_threshold {
                    self.cwnd = self.cfg.min_cwnd;
                } else if self.can_decrease(now) {
                    self.cwnd *= 1.0 - self.cfg.max_mdf;
                }
            }
            CongestionEvent::Ecn => {}
        }
        self.apply(before, now, win);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;
    const RTT: Time = Time::from_us(10);

    fn ctx() -> FlowContext {
        FlowContext { mss: MSS, init_cwnd: 10 * MSS, link_rate: Rate::gbps(10), base_rtt: RTT, size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc }
    }

    /// Swift with flow scaling off unless a test asks for it: target = 20 us + 1 us per hop.
    fn swift() -> (Swift, Window) {
        let cfg = Config { fs_range: Time::ZERO, ..Config::default() };
        (Swift::new(cfg, &ctx()), Window { cwnd: 10 * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS })
    }

    fn ack(now: Time, delay: Time, acked: u64) -> AckSignals {
        AckSignals { now, rtt: Some(delay), srtt: RTT, acked_bytes: acked, path_hops: Some(3), ..Default::default() }
    }

    #[test]
    fn target_scales_with_hops_and_shrinks_as_the_window_grows() {
        let cfg = Config::default();
        let mut s = Swift::new(cfg, &ctx());
        let us = |t: Time| t.secs_f64() * 1e6;
        // Flow scaling: fs_range at or below fs_min_cwnd, nothing at or above fs_max_cwnd.
        s.cwnd = 0.05;
        assert_eq!(s.target_delay(Some(3)), Time::from_us(20 + 3 + 20));
        s.cwnd = 100.0;
        assert_eq!(s.target_delay(Some(3)), Time::from_us(23));
        assert_eq!(s.target_delay(None), Time::from_us(20), "unknown hops add nothing");
        s.cwnd = 1000.0;
        assert_eq!(s.target_delay(Some(0)), Time::from_us(20));
        // In between: alpha / sqrt(cwnd) + beta with alpha = 20 / (1/sqrt(0.1) - 1/sqrt(100)).
        s.cwnd = 4.0;
        let alpha = 20.0 / (1.0 / 0.1f64.sqrt() - 0.1);
        let expect = 23.0 + alpha / 2.0 - alpha / 10.0;
        assert!((us(s.target_delay(Some(3))) - expect).abs() < 1e-6, "{} vs {expect}", us(s.target_delay(Some(3))));
        assert!((expect - 23.0 - 2.61).abs() < 0.01, "about 2.6 us of flow scaling at 4 packets");
    }

    #[test]
    fn below_target_adds_ai_per_rtt() {
        let (mut s, mut w) = swift();
        // One window of one-packet ACKs at 22 us (target 23 us): each adds ai / cwnd, so the
        // window grows by about ai (0.96 packets, as it grows along the way).
        let mut expect = 10.0;
        for i in 0..10 {
            s.on_ack(&ack(Time::from_us(i), Time::from_us(22), MSS), &mut w);
            expect += 1.0 / expect;
        }
        assert!((s.cwnd() - expect).abs() < 1e-12 && (10.95..11.0).contains(&s.cwnd()), "{}", s.cwnd());
        assert_eq!(w.cwnd, (s.cwnd() * MSS as f64) as u64);
        // Below one packet the increase is ai per packet acked.
        s.cwnd = 0.25;
        s.on_ack(&ack(Time::from_us(20), Time::from_us(22), MSS / 2), &mut w);
        assert!((s.cwnd() - 0.75).abs() < 1e-12);
    }

    #[test]
    fn above_target_cuts_at_once_by_the_excess_then_waits_an_rtt() {
        let (mut s, mut w) = swift();
        s.cwnd = 40.0;
        // Target 23 us (3 hops); delay 30 us: factor 1 - 0.8 * 7/30.
        s.on_ack(&ack(Time::from_us(100), Time::from_us(30), MSS), &mut w);
        let cut = 40.0 * (1.0 - 0.8 * 7.0 / 30.0);
        assert!((s.cwnd() - cut).abs() < 1e-9, "{}", s.cwnd());
        assert_eq!(w.cwnd, (cut * MSS as f64) as u64);
        // Within one RTT (srtt 10 us) of the cut: neither cut nor growth.
        s.on_ack(&ack(Time::from_us(109), Time::from_us(60), MSS), &mut w);
        assert!((s.cwnd() - cut).abs() < 1e-9);
        // One RTT later: cut again, by at most max_mdf however large the excess.
        s.on_ack(&ack(Time::from_us(110), Time::from_us(500), MSS), &mut w);
        assert!((s.cwnd() - cut * 0.5).abs() < 1e-9, "{}", s.cwnd());
        // An ACK with no RTT sample changes nothing.
        s.on_ack(&AckSignals { now: Time::from_us(200), acked_bytes: MSS, ..Default::default() }, &mut w);
        assert!((s.cwnd() - cut * 0.5).abs() < 1e-9);
    }

    #[test]
    fn loss_cuts_by_max_mdf_once_per_rtt_and_repeated_timeouts_reset() {
        let (mut s, mut w) = swift();
        s.cwnd = 64.0;
        s.on_congestion(CongestionEvent::FastRetransmit, Time::from_us(100), &mut w);
        assert_eq!(s.cwnd(), 32.0);
        s.on_congestion(CongestionEvent::FastRetransmit, Time::from_us(105), &mut w);
        assert_eq!(s.cwnd(), 32.0, "once per RTT");
        s.on_congestion(CongestionEvent::Timeout, Time::from_us(110), &mut w);
        assert_eq!(s.cwnd(), 16.0);
        for t in 1..4 {
            s.on_congestion(CongestionEvent::Timeout, Time::from_us(110 + 20 * t), &mut w);
        }
        assert_eq!(s.cwnd(), 2.0);
        s.on_congestion(CongestionEvent::Timeout, Time::from_us(200), &mut w);
        assert_eq!(s.cwnd(), 0.001, "fifth consecutive timeout");
    }

    #[test]
    fn below_one_packet_the_window_is_paced() {
        let (mut s, mut w) = swift();
        s.cwnd = 0.5;
        s.on_ack(&ack(Time::from_us(100), Time::from_us(200), MSS), &mut w);
        let cwnd = s.cwnd();
        assert!(cwnd < 0.5);
        assert_eq!(w.cwnd, MSS, "one packet may be in flight");
        // One frame every rtt / cwnd: frame * 8 * cwnd / 10 us.
        let expect = TcpConfig::wire_bytes(MSS) as f64 * 8.0 * cwnd / 10e-6;
        assert!((w.pacing_rate.unwrap().bps() as f64 - expect).abs() <= 1.0);
        s.cwnd = 5.0;
        s.on_ack(&ack(Time::from_us(300), Time::from_us(5), MSS), &mut w);
        assert_eq!(w.pacing_rate, None);
    }

    #[test]
    fn params() {
        let cc = factory(&toml::Table::new()).unwrap()(&ctx());
        assert_eq!(cc.name(), "swift");
        assert!(factory(&toml::from_str("base_target = \"50us\"\nfs_range = 0\nai = 0.5").unwrap()).is_ok());
        let err = |s: &str| factory(&toml::from_str(s).unwrap()).err().unwrap();
        assert_eq!(err("ai = -1"), "ai: expected a positive number, got -1");
        assert_eq!(err("beta = 0"), "beta: expected a positive number, got 0");
        assert_eq!(err("max_mdf = 1.0"), "max_mdf: expected a number in (0, 1), got 1");
        assert_eq!(err("base_target = \"0us\""), "base_target: expected a positive duration like \"20us\"");
        assert_eq!(err("fs_max_cwnd = 0.05"), "fs_max_cwnd: expected a number above fs_min_cwnd (0.1), got 0.05");
        assert_eq!(
            err("max_cwnd = 0.0001"),
            "max_cwnd: expected a number of packets at least min_cwnd (0.001), got 0.0001"
        );
        assert_eq!(err("retx_reset_threshold = 0"), "retx_reset_threshold: expected at least 1");
        let e = err("target = \"20us\"");
        assert!(e.contains("unknown field `target`") && e.contains("`base_target`"), "{e}");
        assert!(err("hop_scale = 3").starts_with("hop_scale: "), "{}", err("hop_scale = 3"));
    }
}
