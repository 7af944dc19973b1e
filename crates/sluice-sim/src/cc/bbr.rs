//! BBR v1 (Cardwell et al., ACM Queue 2016), following Linux `tcp_bbr.c`: a model of the path's
//! bottleneck bandwidth (windowed max of delivery-rate samples) and round-trip propagation time
//! (windowed min RTT), paced at the bandwidth and capped at a multiple of their product.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, Window};
use crate::time::{Rate, Time};
use crate::transport::tcp::{Stack, TcpConfig};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("cwnd_gain", "2.0  # ProbeBW window as a multiple of the estimated BDP, > 0"),
    ("bw_window_rounds", "10  # round trips the max-bandwidth filter remembers, >= 1"),
    ("min_rtt_window", "\"10s\"  # a min-RTT estimate this old sends the flow to ProbeRTT"),
    ("probe_rtt_time", "\"200ms\"  # how long ProbeRTT holds the window at 4 packets"),
    ("pacing_margin", "0.01  # pace this fraction below the estimated bandwidth, in [0, 1)"),
];

/// Startup's pacing and window gain, 2/ln 2: the smallest gain that doubles the delivery rate
/// every round trip.
pub const HIGH_GAIN: f64 = 2.0 / std::f64::consts::LN_2;
/// Drain's pacing gain, the inverse of Linux's rounded startup gain (1000/2885).
pub const DRAIN_GAIN: f64 = 1.0 / 2.885;
/// ProbeBW's pacing gains, one phase per min RTT: probe, drain what the probe queued, cruise.
pub const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The phase ProbeBW starts in. Linux picks a random phase other than the 0.75 one to
/// desynchronize flows; a fixed one (the first cruise phase) keeps runs reproducible.
pub const PROBE_BW_START_PHASE: usize = 2;
/// Packets the window keeps in ProbeRTT, and its floor elsewhere.
const MIN_CWND_PACKETS: u64 = 4;
/// Startup ends after this many rounds without this much bandwidth growth.
const FULL_BW_ROUNDS: u32 = 3;
const FULL_BW_GROWTH: f64 = 1.25;
/// Segments per send burst the window allows for on the `rfc` stack (Linux's minimum TSO goal
/// of 2 segments; the simulator sends one segment at a time, so it never needs more).
const SEND_QUANTUM_PACKETS: u64 = 2;
/// Linux: the pacing rate below which a TSO goal is one segment, bytes/s (`bbr_min_tso_rate`,
/// 1.2 Mb/s, in `bbr_min_tso_segs`).
const MIN_TSO_RATE: f64 = 1_200_000.0 / 8.0;
/// Linux: the bytes one GSO packet may carry, less the headers room (`GSO_LEGACY_MAX_SIZE - 1 -
/// MAX_TCP_HEADER`, with MAX_TCP_HEADER 320 on x86-64).
const GSO_MAX_PAYLOAD: f64 = (65_536 - 1 - 320) as f64;
/// Linux: a socket's pacing shift, the pacing rate's 1/1024 s a TSO packet may hold
/// (`sk_pacing_shift`, 10 for TCP).
const PACING_SHIFT: u32 = 10;
/// Linux's cap on a TSO goal, segments.
const MAX_TSO_SEGS: u64 = 0x7F;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    cwnd_gain: f64,
    bw_window_rounds: u64,
    min_rtt_window: Time,
    probe_rtt_time: Time,
    pacing_margin: f64,
}

impl Default for Params {
    fn default() -> Self {
        let c = Config::default();
        Params {
            cwnd_gain: c.cwnd_gain,
            bw_window_rounds: c.bw_window_rounds,
            min_rtt_window: c.min_rtt_window,
            probe_rtt_time: c.probe_rtt_time,
            pacing_margin: c.pacing_margin,
        }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.cwnd_gain.is_finite() && p.cwnd_gain > 0.0) {
        return Err(format!("cwnd_gain: expected a positive number, got {}", p.cwnd_gain));
    }
    if p.bw_window_rounds == 0 {
        return Err("bw_window_rounds: expected at least 1 round".into());
    }
    if p.min_rtt_window == Time::ZERO {
        return Err("min_rtt_window: expected a positive duration like \"10s\"".into());
    }
    if !(0.0..1.0).contains(&p.pacing_margin) {
        return Err(format!("pacing_margin: expected a number in [0, 1), got {}", p.pacing_margin));
    }
    let cfg = Config {
        cwnd_gain: p.cwnd_gain,
        bw_window_rounds: p.bw_window_rounds,
        min_rtt_window: p.min_rtt_window,
        probe_rtt_time: p.probe_rtt_time,
        pacing_margin: p.pacing_margin,
    };
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Bbr::new(cfg, ctx)) as Box<dyn CongestionControl>))
}

/// BBR's tunables; the defaults are Linux's.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// ProbeBW window gain over the estimated BDP.
    pub cwnd_gain: f64,
    /// Length of the max-bandwidth filter in round trips.
    pub bw_window_rounds: u64,
    /// Age at which the min-RTT estimate expires and ProbeRTT runs.
    pub min_rtt_window: Time,
    /// Minimum time ProbeRTT holds the window at 4 packets.
    pub probe_rtt_time: Time,
    /// Fraction below the bandwidth estimate the pacer runs at, so queues drain.
    pub pacing_margin: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cwnd_gain: 2.0,
            bw_window_rounds: 10,
            min_rtt_window: Time::from_ms(10_000),
            probe_rtt_time: Time::from_ms(200),
            pacing_margin: 0.01,
        }
    }
}

/// BBR's operating mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Doubling the rate each round until the bandwidth stops growing.
    Startup,
    /// Draining the queue Startup built.
    Drain,
    /// Cycling the pacing gain around the bandwidth estimate.
    ProbeBw,
    /// Holding 4 packets in flight to measure the propagation delay afresh.
    ProbeRtt,
}

/// BBR v1 as in Linux `tcp_bbr.c`, with bandwidth in payload bytes per second.
///
/// Not modelled: the long-term (policer) bandwidth estimate, the ACK-aggregation window
/// allowance, idle restart, and loss counts in rate samples (a 1.25 probe phase ends on reaching
/// its in-flight target or on time, not on loss). The first window leaves unpaced, as the
/// platform hands an algorithm the window only from the first ACK on; pacing then starts from
/// the window over the first smoothed RTT, as Linux does from the handshake's.
#[derive(Debug, Clone)]
pub struct Bbr {
    cfg: Config,
    mss: u64,
    /// Wire bytes per payload byte of a full segment: the pacer meters frames, the bandwidth
    /// estimate counts payload (Linux likewise paces MTU-sized bytes per packet delivered).
    wire_ratio: f64,
    init_cwnd: u64,
    mode: Mode,
    /// Windowed max of delivery rates (bytes/s), indexed by round count.
    bw: MaxFilter,
    round_count: u64,
    /// A round ends when a segment sent after this much was delivered is acknowledged.
    next_round_delivered: u64,
    round_start: bool,
    min_rtt: Option<Time>,
    min_rtt_stamp: Time,
    /// When ProbeRTT may end (set once in flight has fallen to 4 packets).
    probe_rtt_done: Option<Time>,
    probe_rtt_round_done: bool,
    /// Rate samples from data sent before `delivered` passed this are app-limited: ProbeRTT's
    /// deliberately low rates must not lower the bandwidth estimate.
    app_limited_until: u64,
    full_bw: f64,
    full_bw_count: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: Time,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// The window before loss recovery or ProbeRTT, restored after.
    prior_cwnd: u64,
    in_recovery: bool,
    packet_conservation: bool,
    /// After an RTO: the window is restored once `snd_una` passes this.
    rto_recovery_end: Option<u64>,
    after_rto: bool,
    pacing_from_rtt: bool,
    /// The host stack: `linux` sizes the send quanta as `tcp_bbr.c` does.
    stack: Stack,
    /// The pacing rate last set, payload bytes/s (Linux's `sk_pacing_rate`; `linux` stack only).
    paced: f64,
}

impl Bbr {
    /// A BBR instance for a flow.
    pub fn new(cfg: Config, ctx: &FlowContext) -> Self {
        Bbr {
            cfg,
            mss: ctx.mss,
            wire_ratio: TcpConfig::wire_bytes(ctx.mss) as f64 / ctx.mss as f64,
            init_cwnd: ctx.init_cwnd,
            mode: Mode::Startup,
            bw: MaxFilter::default(),
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            min_rtt: None,
            min_rtt_stamp: Time::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            app_limited_until: 0,
            full_bw: 0.0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: Time::ZERO,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            prior_cwnd: 0,
            in_recovery: false,
            packet_conservation: false,
            rto_recovery_end: None,
            after_rto: false,
            pacing_from_rtt: false,
            stack: ctx.stack,
            paced: 0.0,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate in payload bytes per second.
    pub fn max_bw(&self) -> f64 {
        self.bw.get()
    }

    /// The propagation round-trip estimate.
    pub fn min_rtt(&self) -> Option<Time> {
        self.min_rtt
    }

    /// The pacing gain in force.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// The ProbeBW gain-cycle phase, an index into `PACING_GAIN_CYCLE`.
    pub fn cycle_phase(&self) -> Option<usize> {
        (self.mode == Mode::ProbeBw).then_some(self.cycle_idx)
    }

    /// Round trips counted so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }

    /// Bytes in flight the model wants at `gain`: `gain` times the estimated BDP plus room for
    /// three send bursts (and 2 more packets while probing, so the probe is not window-limited).
    pub fn target_inflight(&self, gain: f64) -> u64 {
        let bdp = match self.min_rtt {
            None => self.init_cwnd,
            Some(rtt) => (self.max_bw() * rtt.ps() as f64 * gain / 1e12).ceil() as u64,
        };
        let probing = if self.mode == Mode::ProbeBw && self.cycle_idx == 0 { 2 } else { 0 };
        match self.stack {
            Stack::Rfc => bdp + (3 * SEND_QUANTUM_PACKETS + probing) * self.mss,
            // bbr_quantization_budget: in packets, rounded up to an even count so that delayed
            // ACKs (one per two segments) never leave one segment waiting.
            Stack::Linux => {
                let packets = bdp.div_ceil(self.mss) + 3 * self.tso_segs_goal();
                (packets.next_multiple_of(2) + probing) * self.mss
            }
        }
    }

    /// Linux's `bbr_tso_segs_goal`: the segments of one TSO packet, the pacing rate's 1/1024 s
    /// (at most 64 KB, at least 2 segments above 1.2 Mb/s), whatever the device's own limit.
    pub fn tso_segs_goal(&self) -> u64 {
        let min_segs = if self.paced < MIN_TSO_RATE { 1 } else { 2 };
        let bytes = (self.paced / f64::from(1u32 << PACING_SHIFT)).min(GSO_MAX_PAYLOAD);
        ((bytes as u64) / self.mss).max(min_segs).min(MAX_TSO_SEGS)
    }

    fn update_bw(&mut self, ack: &AckSignals) -> bool {
        self.round_start = false;
        let Some(rate) = ack.delivery_rate else { return false };
        if ack.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = ack.delivered;
            self.round_count += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        let app_limited = ack.is_app_limited || ack.prior_delivered < self.app_limited_until;
        if self.app_limited_until != 0 && ack.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let bw = rate.bps() as f64 / 8.0;
        if !app_limited || bw >= self.max_bw() {
            self.bw.update(self.round_count, bw, self.cfg.bw_window_rounds);
        }
        app_limited
    }

    fn update_cycle_phase(&mut self, ack: &AckSignals) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let full_length = self.min_rtt.is_some_and(|rtt| ack.now - self.cycle_stamp > rtt);
        // In flight before this ACK, which is what the phase's sending produced.
        let prior_in_flight = ack.in_flight + ack.acked_bytes;
        let gain = PACING_GAIN_CYCLE[self.cycle_idx];
        let next = if gain > 1.0 {
            full_length && prior_in_flight >= self.target_inflight(gain)
        } else if gain < 1.0 {
            full_length || prior_in_flight <= self.target_inflight(1.0)
        } else {
            full_length
        };
        if next {
            self.cycle_idx = (self.cycle_idx + 1) % PACING_GAIN_CYCLE.len();
            self.cycle_stamp = ack.now;
        }
    }

    fn check_full_bw_reached(&mut self, app_limited: bool) {
        if self.full_bw_reached || !self.round_start || app_limited {
            return;
        }
        if self.max_bw() >= self.full_bw * FULL_BW_GROWTH {
            self.full_bw = self.max_bw();
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= FULL_BW_ROUNDS;
    }

    fn check_drain(&mut self, ack: &AckSignals, win: &mut Window) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            win.ssthresh = self.target_inflight(1.0);
        }
        if self.mode == Mode::Drain && ack.in_flight <= self.target_inflight(1.0) {
            self.enter_probe_bw(ack.now);
        }
    }

    fn enter_probe_bw(&mut self, now: Time) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = PROBE_BW_START_PHASE;
        self.cycle_stamp = now;
    }

    fn update_min_rtt(&mut self, ack: &AckSignals, win: &mut Window) {
        let now = ack.now;
        let expired = self.min_rtt.is_some() && now > self.min_rtt_stamp + self.cfg.min_rtt_window;
        if let Some(rtt) = ack.rtt {
            if self.min_rtt.is_none_or(|m| rtt < m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
            }
        }
        if expired && self.mode != Mode::ProbeRtt {
            self.save_cwnd(win);
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_done = None;
        }
        if self.mode != Mode::ProbeRtt {
            return;
        }
        self.app_limited_until = (ack.delivered + ack.in_flight).max(1);
        match self.probe_rtt_done {
            None if ack.in_flight <= MIN_CWND_PACKETS * self.mss => {
                // Hold for the time and for one full round trip at the low window.
                self.probe_rtt_done = Some(now + self.cfg.probe_rtt_time);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = ack.delivered;
            }
            None => {}
            Some(done) => {
                self.probe_rtt_round_done |= self.round_start;
                if self.probe_rtt_round_done && now > done {
                    self.min_rtt_stamp = now;
                    win.cwnd = win.cwnd.max(self.prior_cwnd);
                    if self.full_bw_reached {
                        self.enter_probe_bw(now);
                    } else {
                        self.mode = Mode::Startup;
                    }
                }
            }
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (PACING_GAIN_CYCLE[self.cycle_idx], self.cfg.cwnd_gain),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    /// Payload bytes/s at `gain`, as the wire rate the NIC's pacer enforces.
    fn pacing_rate(&self, bw: f64, gain: f64) -> Rate {
        Rate((bw * gain * (1.0 - self.cfg.pacing_margin) * self.wire_ratio * 8.0) as u64)
    }

    fn set_pacing_rate(&mut self, ack: &AckSignals, win: &mut Window) {
        if !self.pacing_from_rtt && ack.srtt > Time::ZERO {
            // Until the model has a bandwidth, pace Startup from the window over the RTT.
            self.pacing_from_rtt = true;
            let bw = win.cwnd as f64 / ack.srtt.secs_f64();
            win.pacing_rate = Some(self.pacing_rate(bw, HIGH_GAIN));
        }
        let rate = self.pacing_rate(self.max_bw(), self.pacing_gain);
        // Startup never slows down on a low sample; once the pipe is full the model rules.
        if rate.bps() > 0 && (self.full_bw_reached || win.pacing_rate.is_none_or(|r| rate > r)) {
            win.pacing_rate = Some(rate);
        }
        // Only Linux's send quanta read it: the `rfc` stack's per-ACK path stays as it was.
        if let (Stack::Linux, Some(r)) = (self.stack, win.pacing_rate) {
            self.paced = r.bps() as f64 / 8.0 / self.wire_ratio;
        }
    }

    fn set_cwnd(&mut self, ack: &AckSignals, win: &mut Window) {
        let acked = ack.acked_bytes;
        if acked > 0 {
            let mut cwnd = win.cwnd;
            if ack.in_recovery && !self.in_recovery {
                // Entering fast recovery: send one segment per segment delivered for a round.
                self.packet_conservation = true;
                self.next_round_delivered = ack.delivered;
                cwnd = ack.in_flight + acked;
            } else if !ack.in_recovery && self.in_recovery {
                cwnd = cwnd.max(self.prior_cwnd);
                self.packet_conservation = false;
            }
            self.in_recovery = ack.in_recovery;
            if self.after_rto {
                let end = *self.rto_recovery_end.get_or_insert(ack.snd_nxt);
                if ack.snd_una >= end {
                    cwnd = cwnd.max(self.prior_cwnd);
                    self.after_rto = false;
                    self.rto_recovery_end = None;
                }
            }
            if self.packet_conservation {
                cwnd = cwnd.max(ack.in_flight + acked);
            } else {
                let target = self.target_inflight(self.cwnd_gain);
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || ack.delivered < self.init_cwnd {
                    cwnd += acked;
                }
                cwnd = cwnd.max(MIN_CWND_PACKETS * self.mss);
            }
            win.cwnd = cwnd;
        }
        if self.mode == Mode::ProbeRtt {
            win.cwnd = win.cwnd.min(MIN_CWND_PACKETS * self.mss);
        }
    }

    /// Remembers the window to return to after recovery or ProbeRTT.
    fn save_cwnd(&mut self, win: &Window) {
        self.prior_cwnd = if !self.in_recovery && !self.after_rto && self.mode != Mode::ProbeRtt {
            win.cwnd
        } else {
            self.prior_cwnd.max(win.cwnd)
        };
    }
}

impl CongestionControl for Bbr {
    fn state(&self) -> Vec<(&'static str, f64)> {
        let mode = match self.mode {
            Mode::Startup => 0.0,
            Mode::Drain => 1.0,
            Mode::ProbeBw => 2.0,
            Mode::ProbeRtt => 3.0,
        };
        vec![("mode", mode), ("max_bw_bps", self.max_bw() * 8.0)]
    }

    fn name(&self) -> &'static str {
        "bbr"
    }

    fn needs_delivery_rate(&self) -> bool {
        true
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let app_limited = self.update_bw(ack);
        self.update_cycle_phase(ack);
        self.check_full_bw_reached(app_limited);
        self.check_drain(ack, win);
        self.update_min_rtt(ack, win);
        self.update_gains();
        self.set_pacing_rate(ack, win);
        self.set_cwnd(ack, win);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        match ev {
            // BBR does not back off on a loss; the next ACK applies packet conservation.
            CongestionEvent::FastRetransmit => self.save_cwnd(win),
            CongestionEvent::Timeout => {
                self.save_cwnd(win);
                self.after_rto = true;
                self.rto_recovery_end = None;
                self.full_bw = 0.0;
                win.cwnd = win.mss;
            }
            CongestionEvent::Ecn => {}
        }
    }
}

/// A windowed running maximum over three samples (Kathleen Nichols' algorithm, Linux
/// `lib/minmax.c`): the best, second best and third best maxima of successive sub-windows.
#[derive(Clone, Copy, Debug, Default)]
struct MaxFilter {
    /// (round, value), best first.
    s: [(u64, f64); 3],
}

impl MaxFilter {
    fn get(&self) -> f64 {
        self.s[0].1
    }

    fn update(&mut self, t: u64, v: f64, win: u64) {
        let val = (t, v);
        if v >= self.s[0].1 || t - self.s[2].0 > win {
            // A new maximum, or every remembered sample is out of the window.
            self.s = [val; 3];
            return;
        }
        if v >= self.s[1].1 {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].1 {
            self.s[2] = val;
        }
        let dt = t - self.s[0].0;
        if dt > win {
            // The best sample aged out: promote the next ones.
            self.s = [self.s[1], self.s[2], val];
            if t - self.s[0].0 > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            // A quarter of the window passed without a second choice: take this one.
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = val;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;
    const RTT: Time = Time::from_us(100);
    /// 10 Gb/s of payload in bytes per second.
    const B: f64 = 1.25e9;

    fn ctx() -> FlowContext {
        FlowContext { mss: MSS, init_cwnd: 10 * MSS, link_rate: Rate::gbps(10), base_rtt: RTT, size: None, deadline: None, uet: None, stack: Stack::Rfc }
    }

    fn gbps(g: f64) -> Rate {
        Rate((g * 1e9) as u64)
    }

    /// Drives one BBR instance with synthetic ACKs.
    struct Driver {
        bbr: Bbr,
        win: Window,
        now: Time,
        delivered: u64,
    }

    impl Driver {
        fn new() -> Driver {
            Driver::on(Stack::Rfc)
        }

        fn on(stack: Stack) -> Driver {
            Driver {
                bbr: Bbr::new(Config::default(), &FlowContext { stack, ..ctx() }),
                win: Window { cwnd: 10 * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS },
                now: Time::ZERO,
                delivered: 0,
            }
        }

        /// An ACK `dt` after the last one, delivering 10 MSS at `rate` with `in_flight` left.
        /// With `new_round` its data was sent after the previous round began.
        fn ack(&mut self, dt: Time, rate: Rate, rtt: Time, in_flight: u64, new_round: bool) {
            self.now += dt;
            let prior = if new_round { self.delivered } else { self.delivered.saturating_sub(1) };
            self.delivered += 10 * MSS;
            let ack = AckSignals {
                now: self.now,
                acked_bytes: 10 * MSS,
                rtt: Some(rtt),
                srtt: rtt,
                min_rtt: RTT,
                in_flight,
                delivered: self.delivered,
                delivery_rate: Some(rate),
                prior_delivered: prior,
                ..Default::default()
            };
            self.bbr.on_ack(&ack, &mut self.win);
        }

        /// One round trip: an ACK that starts a new round.
        fn round(&mut self, rate: Rate, in_flight: u64) {
            self.ack(RTT, rate, RTT, in_flight, true);
        }

        /// Startup at 10 Gb/s until the pipe is full, then Drain down to the BDP.
        fn into_probe_bw() -> Driver {
            Driver::into_probe_bw_at(Stack::Rfc, 10.0)
        }

        /// Startup at `g` Gb/s on `stack` until the pipe is full, then Drain down to the BDP.
        fn into_probe_bw_at(stack: Stack, g: f64) -> Driver {
            let mut d = Driver::on(stack);
            while d.bbr.mode() == Mode::Startup {
                d.round(gbps(g), 200 * MSS);
            }
            d.round(gbps(g), d.bbr.target_inflight(1.0));
            assert_eq!(d.bbr.mode(), Mode::ProbeBw);
            d
        }
    }

    /// `bbr_tso_segs_goal` and `bbr_quantization_budget` (net/ipv4/tcp_bbr.c): at a cruising
    /// pacing rate of 0.99 x bandwidth, a TSO goal is the rate's 1/1024 s of segments, at most
    /// 64 KB less 321 bytes, at least 2 segments (1 below 1.2 Mb/s); the window's target is the
    /// BDP in packets plus three goals, rounded up to even. The `rfc` stack keeps 2-segment quanta.
    #[test]
    fn on_linux_the_send_quanta_follow_the_pacing_rate_as_tcp_bbr_c_sizes_them() {
        // (Gb/s, goal): 12.5e6 B/s x 0.99 / 1024 = 12,084 B; 1.25e9 x 0.99 / 1024 > 65,215 B.
        for (g, goal, bdp_packets) in [(0.1, 12, 2), (10.0, 65, 125)] {
            let d = Driver::into_probe_bw_at(Stack::Linux, g);
            assert_ne!(d.bbr.cycle_phase(), Some(0), "a cruising phase");
            assert_eq!(d.bbr.tso_segs_goal(), goal, "{g} Gb/s");
            let packets: u64 = bdp_packets + 3 * goal;
            assert_eq!(d.bbr.target_inflight(1.0), packets.next_multiple_of(2) * MSS, "{g} Gb/s");
            let rfc = Driver::into_probe_bw_at(Stack::Rfc, g);
            assert_eq!(rfc.bbr.target_inflight(1.0), (g * 1.25e8 * 1e-4) as u64 + 6 * MSS, "{g} Gb/s, rfc");
        }
        let mut slow = Driver::into_probe_bw_at(Stack::Linux, 0.001);
        assert_eq!(slow.bbr.tso_segs_goal(), 1, "below 1.2 Mb/s one segment");
        slow.bbr.paced = 1e9;
        assert_eq!(slow.bbr.tso_segs_goal(), 65, "64 KB at most");
    }

    #[test]
    fn startup_exits_after_three_rounds_without_25_percent_growth() {
        let mut d = Driver::new();
        let rates = [1.0, 2.0, 4.0, 8.0, 9.9, 9.0, 8.0];
        for (i, r) in rates.iter().enumerate() {
            d.round(gbps(*r), 200 * MSS);
            assert_eq!(d.bbr.pacing_gain(), if i < 6 { HIGH_GAIN } else { DRAIN_GAIN }, "round {}", i + 1);
            assert_eq!(d.bbr.mode(), if i < 6 { Mode::Startup } else { Mode::Drain }, "round {}", i + 1);
        }
        // 9.9 is 24% above 8: not growth. The estimate is the filter's max.
        assert_eq!(d.bbr.max_bw(), 9.9e9 / 8.0);
        assert_eq!(d.bbr.round_count(), 7);
        // Startup's window grew by every acked byte: 10 + 7 * 10 MSS.
        assert_eq!(d.win.cwnd, 80 * MSS);

        // Growth of 25% restarts the count.
        let mut d = Driver::new();
        for r in [8.0, 9.0, 9.5, 10.0, 10.5, 11.0] {
            d.round(gbps(r), 200 * MSS);
        }
        assert_eq!(d.bbr.mode(), Mode::Startup, "10 is 25% above 8: the third flat round was reset");
        d.round(gbps(11.0), 200 * MSS);
        assert_eq!(d.bbr.mode(), Mode::Drain);
    }

    #[test]
    fn drain_ends_when_in_flight_falls_to_the_bdp() {
        let mut d = Driver::new();
        for _ in 0..4 {
            d.round(gbps(10.0), 250 * MSS);
        }
        assert_eq!(d.bbr.mode(), Mode::Drain);
        // BDP = 10 Gb/s * 100 us = 125 kB, plus 3 send quanta of 2 segments.
        let target = 125 * MSS + 6 * MSS;
        assert_eq!(d.bbr.target_inflight(1.0), target);
        assert_eq!(d.win.ssthresh, target);
        let paced = |d: &Driver| d.win.pacing_rate.unwrap().bps() as f64;
        let wire = TcpConfig::wire_bytes(MSS) as f64 / MSS as f64;
        assert!((paced(&d) - 10e9 * DRAIN_GAIN * 0.99 * wire).abs() < 1e3, "{}", paced(&d));
        for in_flight in [240, 180, 132] {
            d.ack(Time::from_us(10), gbps(10.0), RTT, in_flight * MSS, false);
            assert_eq!(d.bbr.mode(), Mode::Drain, "in flight {in_flight} MSS > target");
        }
        d.ack(Time::from_us(10), gbps(10.0), RTT, target, false);
        assert_eq!(d.bbr.mode(), Mode::ProbeBw);
        assert_eq!(d.bbr.pacing_gain(), PACING_GAIN_CYCLE[PROBE_BW_START_PHASE]);
        assert!((paced(&d) - 10e9 * 0.99 * wire).abs() < 1e3);
    }

    #[test]
    fn probe_bw_cycles_through_the_eight_gains_one_per_min_rtt() {
        let mut d = Driver::into_probe_bw();
        let t0 = d.now;
        // ACKs every 10 us with plenty in flight, so only time moves phases along.
        let mut phases = vec![(Time::ZERO, PROBE_BW_START_PHASE, d.bbr.pacing_gain())];
        while phases.len() < 17 {
            d.ack(Time::from_us(10), gbps(10.0), RTT, 300 * MSS, false);
            let phase = d.bbr.cycle_phase().unwrap();
            if phase != phases.last().unwrap().1 {
                phases.push((d.now - t0, phase, d.bbr.pacing_gain()));
            }
        }
        // A phase ends at the first ACK more than one min RTT after it began: every 110 us,
        // through all eight gains in order, twice.
        for (i, &(t, phase, gain)) in phases.iter().enumerate() {
            assert_eq!(t, Time::from_us(110).saturating_mul(i as u64), "phase {i}");
            assert_eq!(phase, (PROBE_BW_START_PHASE + i) % 8);
            assert_eq!(gain, PACING_GAIN_CYCLE[phase]);
        }
        // The window follows the gain-2 target, with 2 extra packets while probing.
        assert_eq!(d.win.cwnd, 250 * MSS + 6 * MSS);

        // The 1.25 phase lasts until in flight reaches 1.25 BDP; the 0.75 phase ends early
        // once in flight is down to the BDP.
        let mut d = Driver::into_probe_bw();
        while d.bbr.pacing_gain() != 1.25 {
            d.ack(Time::from_us(10), gbps(10.0), RTT, 100 * MSS, false);
        }
        for _ in 0..30 {
            d.ack(Time::from_us(10), gbps(10.0), RTT, 100 * MSS, false);
        }
        assert_eq!(d.bbr.pacing_gain(), 1.25, "not yet 1.25 BDP in flight");
        d.ack(Time::from_us(10), gbps(10.0), RTT, d.bbr.target_inflight(1.25), false);
        assert_eq!(d.bbr.pacing_gain(), 0.75);
        d.ack(Time::from_us(10), gbps(10.0), RTT, 100 * MSS, false);
        assert_eq!(d.bbr.pacing_gain(), 1.0, "queue drained before a full min RTT");
    }

    #[test]
    fn probe_rtt_after_ten_seconds_holds_four_packets_for_200ms_then_returns() {
        let mut d = Driver::into_probe_bw();
        let stamp = RTT; // the first ACK, one RTT in, set the min RTT; no later sample is lower
        let step = Time::from_ms(1);
        let mut cwnd = d.win.cwnd;
        while d.now <= stamp + Time::from_ms(10_000) {
            assert_eq!(d.bbr.mode(), Mode::ProbeBw);
            cwnd = d.win.cwnd;
            // Queueing keeps every later sample above the minimum.
            d.ack(step, gbps(10.0), Time::from_us(150), 200 * MSS, true);
        }
        assert!(cwnd >= 250 * MSS);
        assert_eq!(d.bbr.mode(), Mode::ProbeRtt);
        assert_eq!(d.win.cwnd, 4 * MSS);
        assert_eq!(d.bbr.min_rtt(), Some(Time::from_us(150)), "the stale estimate is replaced");
        // In flight takes a while to fall to 4 packets; the 200 ms start from there.
        d.ack(step, gbps(10.0), Time::from_us(150), 20 * MSS, true);
        assert_eq!(d.bbr.mode(), Mode::ProbeRtt);
        let low = d.now + step;
        let mut rates_seen = 0;
        while d.bbr.mode() == Mode::ProbeRtt {
            // ProbeRTT's low delivery rates must not pull the estimate down.
            d.ack(step, gbps(0.5), RTT, 4 * MSS, true);
            rates_seen += 1;
            assert!(d.win.cwnd <= 4 * MSS || d.bbr.mode() != Mode::ProbeRtt);
        }
        // Out at the first ACK after 200 ms (and at least a round) at the low window.
        assert_eq!(d.now - low, Time::from_ms(201));
        assert!(rates_seen > 10, "more rounds than the bandwidth filter's window");
        assert_eq!(d.bbr.mode(), Mode::ProbeBw);
        assert_eq!(d.bbr.max_bw(), B);
        assert_eq!(d.win.cwnd, d.bbr.target_inflight(2.0), "window back at once, not regrown from 4 packets");
        assert!(d.bbr.target_inflight(2.0) <= cwnd + 2 * MSS);
        assert_eq!(d.bbr.min_rtt(), Some(RTT));
    }

    #[test]
    fn fast_recovery_conserves_packets_then_restores_the_window() {
        let mut d = Driver::into_probe_bw();
        while d.win.cwnd < d.bbr.target_inflight(2.0) {
            d.ack(Time::from_us(1), gbps(10.0), RTT, 100 * MSS, false);
        }
        let cwnd = d.win.cwnd;
        d.bbr.on_congestion(CongestionEvent::FastRetransmit, d.now, &mut d.win);
        assert_eq!(d.win.cwnd, cwnd, "no multiplicative decrease");
        let now = d.now;
        let ack = |in_flight, in_recovery| AckSignals {
            now,
            acked_bytes: MSS,
            in_flight,
            in_recovery,
            delivery_rate: Some(gbps(10.0)),
            delivered: 1_000_000,
            prior_delivered: 1,
            ..Default::default()
        };
        d.bbr.on_ack(&ack(30 * MSS, true), &mut d.win);
        assert_eq!(d.win.cwnd, 31 * MSS, "in flight plus acked");
        d.bbr.on_ack(&ack(20 * MSS, true), &mut d.win);
        assert_eq!(d.win.cwnd, 31 * MSS, "one out per one delivered");
        d.bbr.on_ack(&ack(20 * MSS, false), &mut d.win);
        assert_eq!(d.win.cwnd, cwnd, "restored on leaving recovery");
        // An RTO drops to one segment and restores once the data outstanding then is acked.
        d.bbr.on_congestion(CongestionEvent::Timeout, d.now, &mut d.win);
        assert_eq!(d.win.cwnd, MSS);
        let after = |una| AckSignals { snd_una: una, snd_nxt: 500 * MSS, ..ack(0, false) };
        d.bbr.on_ack(&after(10 * MSS), &mut d.win);
        assert_eq!(d.win.cwnd, 4 * MSS);
        d.bbr.on_ack(&after(500 * MSS), &mut d.win);
        assert_eq!(d.win.cwnd, cwnd);
    }

    #[test]
    fn max_filter_forgets_samples_older_than_its_window() {
        let mut f = MaxFilter::default();
        for (t, v) in [(1, 10.0), (2, 8.0), (5, 6.0), (9, 5.0)] {
            f.update(t, v, 10);
        }
        assert_eq!(f.get(), 10.0);
        f.update(11, 4.0, 10);
        assert_eq!(f.get(), 10.0, "round 1 is still within 10 rounds of 11");
        f.update(12, 4.0, 10);
        assert_eq!(f.get(), 6.0, "round 1 expired; 6 (round 5) is the best left");
        f.update(30, 1.0, 10);
        assert_eq!(f.get(), 1.0);
    }

    #[test]
    fn params() {
        let cc = factory(&toml::Table::new()).unwrap()(&ctx());
        assert_eq!(cc.name(), "bbr");
        assert!(factory(&toml::from_str("cwnd_gain = 3\nmin_rtt_window = \"1s\"").unwrap()).is_ok());
        let err = |s: &str| factory(&toml::from_str(s).unwrap()).err().unwrap();
        assert_eq!(err("cwnd_gain = -2.0"), "cwnd_gain: expected a positive number, got -2");
        assert_eq!(err("bw_window_rounds = 0"), "bw_window_rounds: expected at least 1 round");
        assert_eq!(err("pacing_margin = 1"), "pacing_margin: expected a number in [0, 1), got 1");
        assert_eq!(err("min_rtt_window = \"0s\""), "min_rtt_window: expected a positive duration like \"10s\"");
        let e = err("high_gain = 3");
        assert!(e.contains("unknown field `high_gain`") && e.contains("`cwnd_gain`"), "{e}");
        assert!(err("probe_rtt_time = 200").starts_with("probe_rtt_time: "));
    }
}
