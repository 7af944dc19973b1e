//! NSCC, the Ultra Ethernet transport's network-signal congestion control, as the UEC's
//! reference simulator (uet-htsim, `uec.cpp`) runs it: a window steered by the ACK's queueing
//! delay against a target and by its ECN echo, with quick adapt to what the last window
//! delivered, and a cut of each trimmed packet's bytes.
//!
//! The decision on each ACK takes the delay sample and the echo together:
//!
//! | | delay below target | delay at or above target |
//! |---|---|---|
//! | no ECN | proportional (or fast) increase | fair increase |
//! | ECN | nothing (the path is penalised) | multiplicative decrease on the average delay |
//!
//! Increases gather in `inc` and are applied at most every `adjust_bytes_threshold` bytes or
//! `adjust_period_threshold`, as `inc / cwnd` (integer division, as the reference does).

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, LossCause, LossSignals, ReceiverCredit, UetFlow, Window};
use crate::auto::Auto;
use crate::time::{Bytes, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("target_qdelay", "\"auto\"  # target queueing delay: 0.75 network_rtt where switches trim, else network_rtt"),
    ("qa_gate", "3  # quick adapt only while a window delivered under maxwnd / 2^qa_gate, 0 to 32"),
    ("qa_threshold", "\"auto\"  # delay that triggers quick adapt: 4 target_qdelay"),
    ("alpha", "\"auto\"  # proportional gain, bytes per byte acked per picosecond under target: 4 mss a b / target_qdelay"),
    ("fi", "\"auto\"  # fair increase per byte acked, over cwnd: 5 mss a"),
    ("eta", "\"auto\"  # bytes added once per adjust period: 0.15 mss a"),
    ("fi_scale", "\"auto\"  # fast increase per byte acked: 0.25 a"),
    ("gamma", "0.8  # multiplicative decrease per unit of relative excess delay, in (0, 1]"),
    ("delay_alpha", "0.0125  # weight of a sample in the average delay, in (0, 1]"),
    ("adjust_period_threshold", "\"auto\"  # most time between applying increases: network_rtt"),
    ("adjust_bytes_threshold", "\"auto\"  # most bytes acked between applying increases: 8 mtu"),
    ("min_cwnd", "\"auto\"  # smallest window: one mtu"),
    ("cwnd", "0  # initial window in packets of mtu; 0 starts at maxwnd, 1.5 base-RTT BDP"),
    ("base_rtt_on_nack", "true  # a NACK's round trip may lower the base RTT (and maxwnd)"),
    ("fast_increase_delay", "\"1us\"  # delay below which a window's worth of ACKs starts fast increase"),
    ("quick_adapt", "true  # cut the window to what the last window delivered after loss or a long delay"),
    ("wrap_inc_bytes", "false  # keep the increase in 32 bits and let it wrap, as the reference's uint32 does at 800 Gb/s"),
    ("receiver_cc", "false  # run with RCCC's receiver credit too (-sender_cc -receiver_cc): send on credit and window; a last-hop trim keeps the window"),
];

/// The reference's scaling point: 12 µs at 100 Gb/s, a 150,000-byte BDP (`uec.cpp:86-159`).
const REFERENCE_BDP: f64 = 150_000.0;
const REFERENCE_RTT: Time = Time::from_us(12);

/// NSCC's tunables as a class writes them; `"auto"` ones are scaled from the network.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    target_qdelay: Auto<Time>,
    qa_gate: u32,
    qa_threshold: Auto<Time>,
    alpha: Auto<f64>,
    fi: Auto<f64>,
    eta: Auto<f64>,
    fi_scale: Auto<f64>,
    gamma: f64,
    delay_alpha: f64,
    adjust_period_threshold: Auto<Time>,
    adjust_bytes_threshold: Auto<Bytes>,
    min_cwnd: Auto<Bytes>,
    cwnd: u64,
    base_rtt_on_nack: bool,
    fast_increase_delay: Time,
    quick_adapt: bool,
    wrap_inc_bytes: bool,
    receiver_cc: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            target_qdelay: Auto::Auto,
            qa_gate: 3,
            qa_threshold: Auto::Auto,
            alpha: Auto::Auto,
            fi: Auto::Auto,
            eta: Auto::Auto,
            fi_scale: Auto::Auto,
            gamma: 0.8,
            delay_alpha: 0.0125,
            adjust_period_threshold: Auto::Auto,
            adjust_bytes_threshold: Auto::Auto,
            min_cwnd: Auto::Auto,
            cwnd: 0,
            base_rtt_on_nack: true,
            fast_increase_delay: Time::from_us(1),
            quick_adapt: true,
            wrap_inc_bytes: false,
            receiver_cc: false,
        }
    }
}

/// NSCC's parameters with every `"auto"` resolved for one network (`initNsccParams`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Target queueing delay.
    pub target: Time,
    /// Quick adapt runs only while the window delivered under `maxwnd >> qa_gate`.
    pub qa_gate: u32,
    /// Delay that triggers quick adapt.
    pub qa_threshold: Time,
    /// Proportional gain (bytes per acked byte per picosecond under target).
    pub alpha: f64,
    /// Fair-increase numerator per acked byte.
    pub fi: f64,
    /// Bytes added once per adjust period.
    pub eta: f64,
    /// Fast increase per acked byte.
    pub fi_scale: f64,
    /// Multiplicative-decrease aggressiveness.
    pub gamma: f64,
    /// Weight of a sample in the average delay.
    pub delay_alpha: f64,
    /// Most time between applying increases.
    pub adjust_period: Time,
    /// Most bytes acked between applying increases.
    pub adjust_bytes: u64,
    /// Smallest window in bytes.
    pub min_cwnd: i64,
    /// Initial window in packets of `mtu`; 0 starts at maxwnd.
    pub cwnd_pkts: u64,
    /// Packet bytes, header included.
    pub mtu: u64,
    /// The longest unloaded round trip of the network, the delay a NACK stands for.
    pub network_rtt: Time,
    /// A NACK's round trip may lower the base RTT.
    pub base_rtt_on_nack: bool,
    /// Delay below which fast increase may start.
    pub fast_increase_delay: Time,
    /// Quick adapt is on.
    pub quick_adapt: bool,
    /// `inc` wraps at 32 bits.
    pub wrap_inc: bool,
    /// RCCC's receiver credit runs beside the window.
    pub receiver_cc: bool,
}

impl Config {
    /// Scales the `"auto"` parameters from the network, as `initNsccParams` does.
    fn resolve(&self, net: &UetFlow, ctx: &FlowContext) -> Params {
        let rtt = net.network_rtt;
        let mss = ctx.mss as f64;
        // Seconds as the reference's `timeAsSec` makes them, so the truncation lands alike.
        let network_bdp = (rtt.ps() as f64 / 1e12 * ctx.link_rate.bps() as f64 / 8.0) as u64;
        let a = network_bdp as f64 / REFERENCE_BDP;
        let auto_target = if net.trimming { Time((rtt.ps() as f64 * 0.75) as u64) } else { rtt };
        let target = self.target_qdelay.or(auto_target);
        let b = target.ps() as f64 / REFERENCE_RTT.ps() as f64;
        Params {
            target,
            qa_gate: self.qa_gate,
            qa_threshold: self.qa_threshold.or(Time(target.ps() * 4)),
            alpha: self.alpha.or(4.0 * mss * a * b / target.ps().max(1) as f64),
            fi: self.fi.or(5.0 * mss * a),
            eta: self.eta.or(0.15 * mss * a),
            fi_scale: self.fi_scale.or(0.25 * a),
            gamma: self.gamma,
            delay_alpha: self.delay_alpha,
            adjust_period: self.adjust_period_threshold.or(rtt),
            adjust_bytes: self.adjust_bytes_threshold.or(Bytes(8 * net.mtu)).0,
            min_cwnd: self.min_cwnd.or(Bytes(net.mtu)).0 as i64,
            cwnd_pkts: self.cwnd,
            mtu: net.mtu,
            network_rtt: rtt,
            base_rtt_on_nack: self.base_rtt_on_nack,
            fast_increase_delay: self.fast_increase_delay,
            quick_adapt: self.quick_adapt,
            wrap_inc: self.wrap_inc_bytes,
            receiver_cc: self.receiver_cc,
        }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let c: Config = parse_params(params)?;
    let unit = |key: &str, v: f64| {
        if v.is_finite() && v > 0.0 && v <= 1.0 {
            Ok(())
        } else {
            Err(format!("{key}: expected a number in (0, 1], got {v}"))
        }
    };
    unit("gamma", c.gamma)?;
    unit("delay_alpha", c.delay_alpha)?;
    if c.qa_gate > 32 {
        return Err(format!("qa_gate: expected a shift from 0 to 32, got {}", c.qa_gate));
    }
    for (key, v) in [("alpha", c.alpha), ("fi", c.fi), ("eta", c.eta), ("fi_scale", c.fi_scale)] {
        if let Auto::Set(v) = v {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{key}: expected \"auto\" or a non-negative number, got {v}"));
            }
        }
    }
    for (key, v) in [("target_qdelay", c.target_qdelay), ("qa_threshold", c.qa_threshold), ("adjust_period_threshold", c.adjust_period_threshold)] {
        if let Auto::Set(Time::ZERO) = v {
            return Err(format!("{key}: expected \"auto\" or a positive duration like \"10us\""));
        }
    }
    for (key, v) in [("adjust_bytes_threshold", c.adjust_bytes_threshold), ("min_cwnd", c.min_cwnd)] {
        if let Auto::Set(Bytes(0)) = v {
            return Err(format!("{key}: expected \"auto\" or a positive size like \"4150B\""));
        }
    }
    if c.cwnd > 1 << 20 {
        return Err(format!("cwnd: expected at most {} packets (0 starts at maxwnd), got {}", 1 << 20, c.cwnd));
    }
    Ok(Arc::new(move |ctx: &FlowContext| {
        // Classes refuse nscc off UET, so `uet` is always there; the fallback keeps this total.
        let net = ctx.uet.unwrap_or(UetFlow { network_rtt: ctx.base_rtt, trimming: false, mtu: ctx.mss, oversubscription: 1.0 });
        Box::new(Nscc::new(c.resolve(&net, ctx), ctx)) as Box<dyn CongestionControl>
    }))
}

/// One flow's NSCC (`UecSrc`'s NSCC state, `uec.h:324-421`).
#[derive(Clone, Debug)]
pub struct Nscc {
    p: Params,
    /// Window in bytes, headers included; signed because a NACK's cut may pass zero before
    /// the bounds are applied.
    cwnd: i64,
    /// Largest window: 1.5 BDP at the base RTT, shrinking with it.
    maxwnd: i64,
    /// maxwnd as the flow started: the speculative credit under RCCC.
    configured_maxwnd: u64,
    /// Smallest round trip seen: starts at the flow's unloaded RTT and only falls.
    base_rtt: Time,
    /// Bits per second, for the BDP.
    rate_bps: u64,
    /// Average queueing delay in whole picoseconds, as the reference's integer keeps it.
    avg_delay: u64,
    /// Bytes delivered in the current quick-adapt window.
    achieved: u64,
    /// Bytes acked since increases were last applied.
    received: u64,
    /// Increase gathered since it was last applied, in byte-squared units.
    inc: u64,
    /// Bytes acked under `fast_increase_delay` in a row.
    fi_count: u64,
    /// Fast increase is running.
    increase: bool,
    /// A loss asks the next quick-adapt check to act.
    trigger_qa: bool,
    /// End of the current quick-adapt window; zero before the first.
    qa_end: Time,
    /// Marked ACKs are ignored after a quick adapt until this many bytes are acked.
    to_ignore: u64,
    ignored: u64,
    /// When eta was last added.
    last_adjust: Time,
    /// When the window was last cut multiplicatively.
    last_dec: Time,
}

impl Nscc {
    /// A flow starting at its unloaded RTT `ctx.base_rtt` (`initNscc`).
    pub fn new(p: Params, ctx: &FlowContext) -> Nscc {
        let rate_bps = ctx.link_rate.bps();
        let bdp = (ctx.base_rtt.ps() as f64 / 1e12 * rate_bps as f64 / 8.0) as u64;
        let maxwnd = (1.5 * bdp as f64) as i64;
        let cwnd = if p.cwnd_pkts == 0 { maxwnd } else { (p.cwnd_pkts * p.mtu) as i64 };
        Nscc {
            p,
            cwnd,
            maxwnd,
            configured_maxwnd: maxwnd as u64,
            base_rtt: ctx.base_rtt,
            rate_bps,
            avg_delay: 0,
            achieved: 0,
            received: 0,
            inc: 0,
            fi_count: 0,
            increase: false,
            trigger_qa: false,
            qa_end: Time::ZERO,
            to_ignore: 0,
            ignored: 0,
            last_adjust: Time::ZERO,
            last_dec: Time::ZERO,
        }
    }

    /// The window, clamped to `[min_cwnd, maxwnd]` (`set_cwnd_bounds`).
    fn bounds(&mut self) {
        self.cwnd = self.cwnd.max(self.p.min_cwnd).min(self.maxwnd);
    }

    /// A smaller RTT lowers the base and with it maxwnd (`update_base_rtt`).
    fn update_base_rtt(&mut self, raw: Time) {
        if raw < self.base_rtt {
            self.base_rtt = raw;
            let bdp = (raw.ps() as f64 / 1e6 * self.rate_bps as f64 / 8e6) as i64;
            self.maxwnd = (1.5 * bdp as f64) as i64;
        }
    }

    /// Folds a sample into the average delay (`update_delay`). An unmarked sample above
    /// target pulls the average towards a quarter of the base RTT instead of itself.
    fn update_delay(&mut self, raw: Time, skip: bool) {
        let delay = raw.saturating_sub(self.base_rtt);
        let x = if !skip && delay > self.p.target { self.base_rtt.ps() as f64 * 0.25 } else { delay.ps() as f64 };
        self.avg_delay = (self.p.delay_alpha * x + (1.0 - self.p.delay_alpha) * self.avg_delay as f64) as u64;
    }

    /// Adds to the pending increase, truncating as the reference's integer does.
    fn add_inc(&mut self, x: f64) {
        let sum = (self.inc as f64 + x) as u64;
        self.inc = if self.p.wrap_inc { sum as u32 as u64 } else { sum };
    }

    /// Quick adapt (`quick_adapt`): once per window of base RTT plus target, after a loss or a
    /// long delay, a window that delivered little becomes what it delivered. True when the
    /// caller must do nothing more with this signal.
    fn quick_adapt(&mut self, now: Time, is_loss: bool, skip: bool, delay: Time, in_flight: u64) -> bool {
        if !self.p.quick_adapt {
            return false;
        }
        let mut done = false;
        if self.ignored < self.to_ignore && skip {
            done = true;
        } else if now > self.qa_end {
            let gate = (self.maxwnd.max(0) as u64) >> self.p.qa_gate.min(63);
            if self.qa_end != Time::ZERO && (self.trigger_qa || is_loss || delay > self.p.qa_threshold) && self.achieved < gate {
                self.cwnd = (self.achieved as i64).max(self.p.min_cwnd);
                self.to_ignore = in_flight;
                self.ignored = 0;
                self.trigger_qa = false;
                done = true;
            }
            self.achieved = 0;
            self.qa_end = now + self.base_rtt + self.p.target;
        }
        if done {
            self.inc = 0;
            self.received = 0;
        }
        done
    }

    /// Fast increase (`fast_increase`): after a window's worth of bytes under
    /// `fast_increase_delay`, each acked byte grows the window by `fi_scale` at once.
    fn fast_increase(&mut self, acked: u64, delay: Time) {
        if delay < self.p.fast_increase_delay {
            self.fi_count += acked;
            if self.fi_count > self.cwnd.max(0) as u64 || self.increase {
                self.cwnd = (self.cwnd as f64 + acked as f64 * self.p.fi_scale) as i64;
                self.increase = true;
                return;
            }
        } else {
            self.fi_count = 0;
        }
        self.increase = false;
    }

    /// Multiplicative decrease on the average delay, at most once per base RTT.
    fn decrease(&mut self, now: Time) {
        self.increase = false;
        self.fi_count = 0;
        let (avg, target) = (self.avg_delay, self.p.target.ps());
        if avg > target && now.saturating_sub(self.last_dec) > self.base_rtt {
            let factor = (1.0 - self.p.gamma * (avg - target) as f64 / avg as f64).max(0.5);
            self.cwnd = ((self.cwnd as f64 * factor) as i64).max(self.p.min_cwnd);
            self.last_dec = now;
        }
    }

    /// Applies the gathered increase (`fulfill_adjustment`), and eta once per period.
    fn fulfil(&mut self, now: Time) {
        if self.cwnd > 0 {
            self.cwnd += (self.inc / self.cwnd as u64) as i64;
        }
        if now.saturating_sub(self.last_adjust) >= self.p.adjust_period {
            self.cwnd = (self.cwnd as f64 + self.p.eta) as i64;
            self.last_adjust = now;
        }
        self.inc = 0;
        self.received = 0;
    }

    fn publish(&self, win: &mut Window) {
        win.cwnd = self.cwnd.max(0) as u64;
    }
}

impl CongestionControl for Nscc {
    fn name(&self) -> &'static str {
        "nscc"
    }

    fn ecn_mode(&self) -> EcnMode {
        EcnMode::PerPacket
    }

    fn init(&mut self, win: &mut Window) {
        self.publish(win);
    }

    /// `updateCwndOnAck_NSCC` with `processAck`'s delay: the decision reads this ACK's delay
    /// sample, and the average only where there is none.
    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let (now, acked, ecn) = (ack.now, ack.acked_bytes, ack.ece);
        self.achieved += acked;
        self.received += acked;
        self.ignored += acked;
        let delay = match ack.rtt {
            Some(raw) => {
                if !ack.probe {
                    self.update_base_rtt(raw);
                }
                if raw >= self.base_rtt {
                    self.update_delay(raw, ecn);
                    raw - self.base_rtt
                } else {
                    Time(self.avg_delay)
                }
            }
            None => Time(self.avg_delay),
        };
        if self.quick_adapt(now, false, ecn, delay, ack.in_flight) {
            return self.publish(win);
        }
        match (ecn, delay >= self.p.target) {
            (false, true) => self.add_inc(self.p.fi * acked as f64),
            (false, false) => {
                self.fast_increase(acked, delay);
                if !self.increase {
                    self.add_inc(self.p.alpha * acked as f64 * (self.p.target - delay).ps() as f64);
                }
            }
            (true, true) => self.decrease(now),
            // Marked but short: only the path is penalised, by the transport.
            (true, false) => {}
        }
        self.bounds();
        if self.received > self.p.adjust_bytes || now.saturating_sub(self.last_adjust) > self.p.adjust_period {
            self.fulfil(now);
        }
        self.bounds();
        self.publish(win);
    }

    /// A trim's NACK stands for a delay of one network RTT and asks for quick adapt; unless
    /// that acts, the window loses the packet's bytes, except under receiver credit where the
    /// trim was at the last hop, which the receiver's pacing owns. A timeout takes the bytes,
    /// down to one MTU (`updateCwndOnNack_NSCC`, `mark_packet_for_retransmission`).
    fn on_loss(&mut self, loss: &LossSignals, win: &mut Window) {
        match loss.cause {
            LossCause::Trimmed => {
                if let (true, Some(rtt)) = (self.p.base_rtt_on_nack, loss.rtt) {
                    self.update_base_rtt(rtt);
                }
                self.ignored += loss.bytes;
                self.update_delay(self.base_rtt + self.p.network_rtt, true);
                self.trigger_qa = true;
                let cut = !self.p.receiver_cc || !loss.last_hop;
                if !self.quick_adapt(loss.now, true, true, Time::ZERO, loss.in_flight) && cut {
                    self.cwnd -= loss.bytes as i64;
                    self.bounds();
                }
            }
            LossCause::Timeout => self.cwnd = (self.cwnd - loss.bytes as i64).max(self.p.mtu as i64),
        }
        self.publish(win);
    }

    /// UET reports loss per packet (`on_loss`) and ECN per ACK; nothing else reaches NSCC.
    fn on_congestion(&mut self, _ev: CongestionEvent, _now: Time, _win: &mut Window) {}

    fn receiver_credit(&self) -> Option<ReceiverCredit> {
        self.p.receiver_cc.then_some(ReceiverCredit { cap: self.configured_maxwnd, windowed: true, oversubscribed: None })
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("cwnd", self.cwnd as f64),
            ("maxwnd", self.maxwnd as f64),
            ("base_rtt_us", self.base_rtt.ps() as f64 / 1e6),
            ("avg_delay_us", self.avg_delay as f64 / 1e6),
            ("achieved", self.achieved as f64),
            ("inc", self.inc as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rate;

    /// The reference's auto topology: 100 Gb/s, 1 µs links, three tiers, 4150-byte packets.
    const RTT_100G: Time = Time(14_022_720);
    const MTU: u64 = 4150;
    const MSS: u64 = MTU - 64;
    const ACK: u64 = 4 * MTU;

    fn ctx(rate: Rate, rtt: Time) -> FlowContext {
        let uet = Some(UetFlow { network_rtt: rtt, trimming: true, mtu: MTU, oversubscription: 1.0 });
        FlowContext { mss: MSS, init_cwnd: 0, link_rate: rate, base_rtt: rtt, size: None, deadline: None, uet, stack: crate::transport::tcp::Stack::Rfc }
    }

    fn build(rate: Rate, rtt: Time, params: &str) -> (Nscc, Window) {
        let c: Config = parse_params(&params.parse::<toml::Table>().unwrap()).unwrap();
        let ctx = ctx(rate, rtt);
        let mut cc = Nscc::new(c.resolve(ctx.uet.as_ref().unwrap(), &ctx), &ctx);
        let mut win = Window { cwnd: 0, ssthresh: u64::MAX, pacing_rate: None, mss: MSS };
        cc.init(&mut win);
        (cc, win)
    }

    /// No increase is applied and no quick adapt runs unless a test asks for it.
    const HELD: &str = "adjust_bytes_threshold = \"1GB\"\nadjust_period_threshold = \"1s\"\nquick_adapt = false";

    fn ack(now_us: u64, delay: Time, ece: bool, base: Time) -> AckSignals {
        AckSignals { now: Time::from_us(now_us), acked_bytes: ACK, ece, rtt: Some(base + delay), in_flight: 100_000, ..Default::default() }
    }

    fn close(got: f64, want: f64, digits: f64) {
        assert!((got - want).abs() <= 0.5 * 10f64.powf(-digits), "got {got}, expected {want} to {digits} decimals");
    }

    /// The parameters `initNsccParams` derives, against the worked table of the reference's
    /// three cases (mss 4086, trimming on), to the digits the table prints.
    #[test]
    fn scaled_parameters_match_the_references_worked_values() {
        let cases = [
            (Rate::gbps(100), RTT_100G, 1.16856, 10.51704, 23873.7, 716.2, 0.29214, 1.5916e-3, 262_926),
            (Rate::gbps(400), Time(8_337_120), 2.77904, 6.25284, 56775.8, 1703.3, 0.69476, 3.7851e-3, 625_284),
            (Rate::gbps(800), Time(8_168_560), 5.44571, 6.12642, 111255.8, 3337.7, 1.36143, 7.4171e-3, 1_225_284),
        ];
        for (rate, rtt, a, target_us, fi, eta, fi_scale, alpha, maxwnd) in cases {
            let (cc, win) = build(rate, rtt, "");
            let p = cc.p;
            close(p.fi_scale / 0.25, a, 5.0);
            close(p.target.ps() as f64 / 1e6, target_us, 5.0);
            close(p.fi, fi, 1.0);
            close(p.eta, eta, 1.0);
            close(p.fi_scale, fi_scale, 5.0);
            close(p.alpha * 1e3, alpha * 1e3, 4.0);
            assert_eq!((cc.maxwnd, win.cwnd), (maxwnd, maxwnd as u64), "a flow starts at maxwnd, 1.5 BDP");
            assert_eq!(p.qa_threshold, Time(4 * p.target.ps()));
            assert_eq!((p.adjust_period, p.adjust_bytes, p.min_cwnd), (rtt, 8 * MTU, MTU as i64));
        }
        // Without trimming the target is the whole network RTT.
        let c = Config::default();
        let ctx = FlowContext { uet: Some(UetFlow { network_rtt: RTT_100G, trimming: false, mtu: MTU, oversubscription: 1.0 }), ..ctx(Rate::gbps(100), RTT_100G) };
        assert_eq!(c.resolve(ctx.uet.as_ref().unwrap(), &ctx).target, RTT_100G);
    }

    #[test]
    fn each_ack_takes_the_case_its_delay_and_echo_choose() {
        let base = RTT_100G;
        // Fair: at or above target, fi per acked byte (5 mss a x 16600 = 396,303,101).
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        cc.on_ack(&ack(100, Time::from_us(11), false, base), &mut win);
        assert_eq!((cc.inc, win.cwnd), (396_303_101, 262_926));
        // Proportional: alpha x acked x (target - delay), at half the target: 138,931,185.
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        cc.on_ack(&ack(100, Time(10_517_040 / 2), false, base), &mut win);
        assert!((cc.inc as i64 - 138_931_185).abs() <= 1, "{}", cc.inc);
        assert_eq!(win.cwnd, 262_926);
        // Marked but under target: nothing moves.
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        cc.on_ack(&ack(100, Time::from_us(5), true, base), &mut win);
        assert_eq!((cc.inc, win.cwnd), (0, 262_926));
    }

    #[test]
    fn the_decrease_reads_the_average_delay_and_waits_a_base_rtt() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        cc.avg_delay = 12_000_000;
        // A 40 µs sample moves the average to 12.35 µs; the cut is 1 - 0.8 (12.35 - 10.517) /
        // 12.35 = 0.88127 of the window. Cut by the sample, it would be halved.
        cc.on_ack(&ack(100, Time::from_us(40), true, base), &mut win);
        assert_eq!(cc.avg_delay, (0.0125 * 40e6 + (1.0 - 0.0125) * 12e6) as u64);
        let avg = cc.avg_delay as f64;
        let factor = 1.0 - 0.8 * (avg - 10_517_040.0) / avg;
        assert_eq!(win.cwnd, (262_926.0 * factor) as u64);
        let cut = win.cwnd;
        // A second mark within one base RTT leaves it.
        cc.on_ack(&ack(110, Time::from_us(40), true, base), &mut win);
        assert_eq!(win.cwnd, cut);
        // One base RTT later it cuts again.
        cc.on_ack(&ack(115, Time::from_us(40), true, base), &mut win);
        assert!(win.cwnd < cut);
    }

    #[test]
    fn fast_increase_starts_after_a_window_of_bytes_under_one_microsecond() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, &format!("{HELD}\ncwnd = 20"));
        assert_eq!(win.cwnd, 83_000);
        // Five ACKs (83,000 bytes) are not more than the window: proportional increase only.
        for t in 0..5 {
            cc.on_ack(&ack(100 + t, Time(500_000), false, base), &mut win);
            assert_eq!(win.cwnd, 83_000);
        }
        assert!(cc.inc > 0);
        // The sixth passes it: each acked byte adds fi_scale (0.29214) at once, and so on.
        let step = (ACK as f64 * cc.p.fi_scale) as u64;
        cc.on_ack(&ack(105, Time(500_000), false, base), &mut win);
        assert_eq!(win.cwnd, 83_000 + step);
        cc.on_ack(&ack(106, Time(500_000), false, base), &mut win);
        assert_eq!(win.cwnd, 83_000 + 2 * step);
        // A sample at 1 µs or more stops it.
        cc.on_ack(&ack(107, Time::from_us(2), false, base), &mut win);
        assert!(!cc.increase);
        assert_eq!(cc.fi_count, 0);
    }

    #[test]
    fn increases_apply_on_bytes_or_time_and_eta_once_a_period() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, "quick_adapt = false\ncwnd = 30");
        // The first ACK is more than a network RTT after time zero: applied, with eta.
        cc.on_ack(&ack(20, Time::from_us(11), false, base), &mut win);
        let first = 124_500 + 396_303_101 / 124_500 + 716;
        assert_eq!((win.cwnd, cc.inc, cc.received), (first, 0, 0));
        // Two more ACKs (33,200 bytes) are not more than 8 MTUs: gathered.
        cc.on_ack(&ack(21, Time::from_us(11), false, base), &mut win);
        cc.on_ack(&ack(22, Time::from_us(11), false, base), &mut win);
        assert_eq!(win.cwnd, first);
        let (inc, cwnd) = (cc.inc, cc.cwnd as u64);
        // The third is: inc / cwnd in whole bytes, no eta within the period.
        cc.on_ack(&ack(23, Time::from_us(11), false, base), &mut win);
        let inc = (inc as f64 + cc.p.fi * ACK as f64) as u64;
        assert_eq!(win.cwnd, cwnd + inc / cwnd);
        // A period after the first eta, the time trigger applies eta again.
        cc.on_ack(&ack(35, Time::from_us(11), false, base), &mut win);
        assert_eq!(cc.last_adjust, Time::from_us(35));
    }

    #[test]
    fn quick_adapt_cuts_to_what_the_window_delivered_then_ignores_marks() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, "adjust_bytes_threshold = \"1GB\"\nadjust_period_threshold = \"1s\"");
        // The first ACK opens the window (base RTT + target = 24.54 µs) and does nothing else.
        cc.on_ack(&ack(20, Time::from_us(5), false, base), &mut win);
        assert_eq!(cc.qa_end, Time::from_us(20) + base + cc.p.target);
        // A trim's NACK inside the window cuts only its bytes, and asks for quick adapt.
        let nack = LossSignals { now: Time::from_us(30), cause: LossCause::Trimmed, bytes: MTU, rtt: Some(base + Time::from_us(3)), last_hop: false, ece: false, in_flight: 200_000 };
        cc.on_loss(&nack, &mut win);
        assert_eq!(win.cwnd, 262_926 - MTU);
        assert!(cc.trigger_qa);
        // The first ACK past the window's end finds the window delivered its own 16,600 bytes,
        // under maxwnd / 8 = 32,865, and makes that the window.
        cc.on_ack(&ack(45, Time::from_us(5), false, base), &mut win);
        assert_eq!(win.cwnd, ACK);
        assert_eq!((cc.to_ignore, cc.ignored), (100_000, 0));
        // Marked ACKs are skipped until the bytes in flight then are acked.
        for t in 0..6 {
            cc.on_ack(&ack(50 + t * 20, Time::from_us(30), true, base), &mut win);
            assert_eq!(win.cwnd, ACK, "ACK {t} with {} of {} bytes ignored", cc.ignored, cc.to_ignore);
        }
        cc.avg_delay = 30_000_000;
        cc.on_ack(&ack(200, Time::from_us(30), true, base), &mut win);
        assert!(win.cwnd < ACK, "the seventh mark, past 100,000 bytes, cuts");
    }

    #[test]
    fn quick_adapt_leaves_a_window_that_delivered_enough() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, "adjust_bytes_threshold = \"1GB\"\nadjust_period_threshold = \"1s\"");
        cc.on_ack(&ack(20, Time::from_us(5), false, base), &mut win);
        for t in 0..2 {
            cc.on_ack(&ack(21 + t, Time::from_us(5), false, base), &mut win);
        }
        cc.trigger_qa = true;
        // 3 x 16,600 = 49,800 bytes delivered, at least maxwnd / 8 = 32,865: no cut.
        cc.on_ack(&ack(45, Time::from_us(5), false, base), &mut win);
        assert_eq!(win.cwnd, 262_926);
        assert_eq!(cc.achieved, 0, "a new window starts");
    }

    #[test]
    fn a_fast_nack_lowers_the_base_rtt_and_maxwnd_and_a_timeout_takes_its_bytes() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        let nack = LossSignals { now: Time::from_us(30), cause: LossCause::Trimmed, bytes: MTU, rtt: Some(Time::from_us(5)), last_hop: true, ece: false, in_flight: 0 };
        cc.on_loss(&nack, &mut win);
        // 5 µs at 100 Gb/s is 62,500 bytes: maxwnd 93,750, and the window is held under it.
        assert_eq!((cc.base_rtt, cc.maxwnd, win.cwnd), (Time::from_us(5), 93_750, 93_750));
        // The NACK stands for a delay of one network RTT in the average.
        assert_eq!(cc.avg_delay, (0.0125 * RTT_100G.ps() as f64) as u64);
        let timeout = LossSignals { cause: LossCause::Timeout, rtt: None, ..nack };
        cc.cwnd = 5_000;
        cc.on_loss(&timeout, &mut win);
        assert_eq!(win.cwnd, MTU, "down to one MTU, not below");
        cc.on_loss(&timeout, &mut win);
        assert_eq!(win.cwnd, MTU);
    }

    #[test]
    fn an_unmarked_sample_above_target_pulls_the_average_to_a_quarter_base_rtt() {
        let base = RTT_100G;
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        cc.on_ack(&ack(100, Time::from_us(20), false, base), &mut win);
        assert_eq!(cc.avg_delay, 43_821, "0.0125 x 14.02272 µs / 4, whole picoseconds");
        let (mut cc, mut win) = build(Rate::gbps(100), base, HELD);
        cc.on_ack(&ack(100, Time::from_us(20), true, base), &mut win);
        assert_eq!(cc.avg_delay, 250_000, "a marked one is taken as it is");
        // A sample under the base RTT becomes the base, and a delay of zero.
        cc.on_ack(&ack(101, Time::ZERO, false, Time::from_us(10)), &mut win);
        assert_eq!((cc.base_rtt, cc.avg_delay), (Time::from_us(10), 246_875));
    }

    #[test]
    fn the_increase_wraps_at_32_bits_only_when_asked() {
        let rtt = Time(8_168_560);
        let (mut wrapped, mut w1) = build(Rate::gbps(800), rtt, &format!("{HELD}\nwrap_inc_bytes = true"));
        let (mut whole, mut w2) = build(Rate::gbps(800), rtt, HELD);
        for t in 0..3 {
            wrapped.on_ack(&ack(100 + t, Time::from_us(7), false, rtt), &mut w1);
            whole.on_ack(&ack(100 + t, Time::from_us(7), false, rtt), &mut w2);
        }
        // Three fair increases of 111,256 x 16,600 pass 2^32.
        assert!(whole.inc > 1 << 32);
        assert_eq!(wrapped.inc, whole.inc - (1 << 32));
    }

    #[test]
    fn bad_parameters_are_refused_by_key() {
        let err = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).err().unwrap();
        assert_eq!(err("gamma = 2.0"), "gamma: expected a number in (0, 1], got 2");
        assert_eq!(err("qa_gate = 40"), "qa_gate: expected a shift from 0 to 32, got 40");
        assert!(err("target_qdelay = \"soon\"").starts_with("target_qdelay: "), "{}", err("target_qdelay = \"soon\""));
        assert!(err("target_qdelay = \"soon\"").contains("\"auto\""));
        assert_eq!(err("min_cwnd = \"0B\""), "min_cwnd: expected \"auto\" or a positive size like \"4150B\"");
        assert!(err("speed = 1").contains("speed"));
        assert!(factory(&"alpha = 0.002\ntarget_qdelay = \"auto\"".parse::<toml::Table>().unwrap()).is_ok());
    }
}
