//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015), as
//! RoCE NICs implement it and the HPCC simulator's Mellanox mode models it. Rate-based: the
//! queue pair sends at the current rate R_C and the window stays open, unless `window = true`
//! caps bytes in flight at one bandwidth-delay product of the path scaled by R_C / line rate (the
//! simulators' `HAS_WIN` with `VAR_WIN`, which the TLT paper's RDMA simulator turns on).
//!
//! - **Reaction to a CNP** (the transport's `CongestionEvent::Ecn`): the first CNP sets R_C to
//!   `rate_on_first_cnp` of itself and starts the alpha timer and the rate-decrease check, which
//!   runs every `decrease_interval` from then on (1 ns after the alpha update due at the same
//!   time); a check that finds a CNP arrived since the last one cuts the rate: R_T = R_C (unless
//!   `clamp_target` is off and no increase happened since the last cut), R_C = max(min_rate,
//!   R_C (1 - alpha / 2)), and the increase stages restart. This is the NIC's periodic check
//!   (Mellanox's `rate_reduce_monitor_period`) as the HPCC simulator models it
//!   (`RdmaHw::CheckRateDecreaseMlx`).
//! - **Alpha**: every `alpha_interval`, alpha = (1 - g) alpha + g if a CNP arrived in the
//!   interval, else (1 - g) alpha.
//! - **Increase**: the rate timer (every `rate_timer` after a cut) and the byte counter (every
//!   `byte_counter` bytes acknowledged) each count stages. While both are below
//!   `fast_recovery` stages: fast recovery, R_C = (R_T + R_C) / 2; when one passes it: additive
//!   increase, R_T += rate_ai first; when both do: hyper increase, R_T += rate_hai first.
//!   `byte_counter = "0B"` disables the byte counter, as the HPCC simulator's Mellanox mode does.
//!
//! The byte counter counts acknowledged bytes: the algorithm sees ACKs, not transmissions, and
//! at a steady rate the two differ by one round trip of bytes. The timers run in time order at
//! the first ACK, CNP or tick at or after they fall due, and the algorithm asks to be ticked at
//! the next of them, so each takes effect when it falls due.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::{Bytes, Rate, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("g", "0.00390625  # alpha's EWMA gain (1/256)"),
    ("alpha_interval", "\"55us\"  # alpha update period K"),
    ("rate_timer", "\"55us\"  # increase timer period T"),
    ("byte_counter", "\"10MB\"  # increase every this many bytes (\"0B\": timer only)"),
    ("fast_recovery", "5  # stages of fast recovery F"),
    ("rate_ai", "\"40Mbps\"  # additive increase step R_AI"),
    ("rate_hai", "\"200Mbps\"  # hyper increase step R_HAI"),
    ("min_rate", "\"100Mbps\"  # the rate never falls below this"),
    ("decrease_interval", "\"4us\"  # at most one cut per this interval"),
    ("rate_on_first_cnp", "1.0  # fraction of its rate the first CNP leaves a flow"),
    ("clamp_target", "true  # every cut sets the target rate to the current rate"),
    ("window", "false  # also cap bytes in flight at BDP x rate / line rate"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    g: f64,
    alpha_interval: Time,
    rate_timer: Time,
    byte_counter: Bytes,
    fast_recovery: u32,
    rate_ai: Rate,
    rate_hai: Rate,
    min_rate: Rate,
    decrease_interval: Time,
    rate_on_first_cnp: f64,
    clamp_target: bool,
    window: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            g: 1.0 / 256.0,
            alpha_interval: Time::from_us(55),
            rate_timer: Time::from_us(55),
            byte_counter: Bytes(10_000_000),
            fast_recovery: 5,
            rate_ai: Rate(40_000_000),
            rate_hai: Rate(200_000_000),
            min_rate: Rate(100_000_000),
            decrease_interval: Time::from_us(4),
            rate_on_first_cnp: 1.0,
            clamp_target: true,
            window: false,
        }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.g > 0.0 && p.g <= 1.0) {
        return Err(format!("g: expected a number in (0, 1], got {}", p.g));
    }
    if !(p.rate_on_first_cnp > 0.0 && p.rate_on_first_cnp <= 1.0) {
        return Err(format!(
            "rate_on_first_cnp: expected a fraction of the rate in (0, 1], got {}",
            p.rate_on_first_cnp
        ));
    }
    for (key, t) in
        [("alpha_interval", p.alpha_interval), ("rate_timer", p.rate_timer), ("decrease_interval", p.decrease_interval)]
    {
        if t == Time::ZERO {
            return Err(format!("{key}: expected a positive duration like \"55us\""));
        }
    }
    let p = Arc::new(p);
    Ok(Arc::new(move |ctx: &FlowContext| {
        let bdp = p.window.then(|| ctx.link_rate.bytes_in(ctx.base_rtt).max(ctx.mss));
        Box::new(Dcqcn::new(p.clone(), ctx.link_rate, bdp, ctx.mss)) as Box<dyn CongestionControl>
    }))
}

/// DCQCN's reaction point for one queue pair.
pub struct Dcqcn {
    p: Arc<Params>,
    line_rate: f64,
    /// With `window`: the path's bandwidth-delay product, bytes.
    bdp: Option<u64>,
    mss: u64,
    /// Current rate R_C and target rate R_T, bit/s.
    rate: f64,
    target: f64,
    alpha: f64,
    /// A CNP arrived since the last alpha update, and since the last cut.
    cnp_for_alpha: bool,
    cnp_for_cut: bool,
    first_cnp_seen: bool,
    cut_since_start: bool,
    next_alpha: Time,
    /// The next rate-decrease check (`Time::MAX` before the first CNP).
    next_decrease: Time,
    next_rate_timer: Option<Time>,
    timer_stage: u32,
    byte_stage: u32,
    bytes: u64,
    now: Time,
}

impl Dcqcn {
    fn new(p: Arc<Params>, line_rate: Rate, bdp: Option<u64>, mss: u64) -> Dcqcn {
        let line = line_rate.0 as f64;
        Dcqcn {
            p,
            line_rate: line,
            bdp,
            mss,
            rate: line,
            target: line,
            alpha: 1.0,
            cnp_for_alpha: false,
            cnp_for_cut: false,
            first_cnp_seen: false,
            cut_since_start: false,
            next_alpha: Time::MAX,
            next_decrease: Time::MAX,
            next_rate_timer: None,
            timer_stage: 0,
            byte_stage: 0,
            bytes: 0,
            now: Time::ZERO,
        }
    }

    fn apply(&self, win: &mut Window) {
        win.pacing_rate = Some(Rate(self.rate.round().max(1.0) as u64));
        if let Some(bdp) = self.bdp {
            win.cwnd = ((bdp as f64 * self.rate / self.line_rate) as u64).max(self.mss);
        }
    }

    /// The rate-decrease check at `now`: a cut if a CNP arrived since the last check.
    fn check_decrease(&mut self, now: Time) {
        if !self.cnp_for_cut {
            return;
        }
        if self.p.clamp_target || self.timer_stage > 0 || self.byte_stage > 0 {
            self.target = self.rate;
        }
        self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.p.min_rate.0 as f64);
        self.cnp_for_cut = false;
        self.cut_since_start = true;
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes = 0;
        self.next_rate_timer = Some(now + self.p.rate_timer);
    }

    /// One increase event: fast recovery, additive or hyper increase by the stages completed
    /// (with the byte counter off, the timer's alone, as the HPCC simulator's Mellanox mode).
    fn increase(&mut self) {
        let f = self.p.fast_recovery;
        let hi = self.timer_stage.max(self.byte_stage);
        let lo = if self.p.byte_counter.0 == 0 { hi } else { self.timer_stage.min(self.byte_stage) };
        if hi >= f {
            self.target += if lo > f { self.p.rate_hai.0 } else { self.p.rate_ai.0 } as f64;
            self.target = self.target.min(self.line_rate);
        }
        self.rate = ((self.rate + self.target) / 2.0).min(self.line_rate);
    }

    /// Runs the timers that came due by `now`, earliest first (alpha, then the decrease check,
    /// then the rate timer where they fall together).
    fn run_timers(&mut self, now: Time) {
        loop {
            let rate_timer = self.next_rate_timer.unwrap_or(Time::MAX);
            let next = self.next_alpha.min(self.next_decrease).min(rate_timer);
            if next > now {
                return;
            }
            if self.next_alpha == next {
                let g = self.p.g;
                self.alpha = (1.0 - g) * self.alpha + if self.cnp_for_alpha { g } else { 0.0 };
                self.cnp_for_alpha = false;
                self.next_alpha += self.p.alpha_interval;
            } else if self.next_decrease == next {
                self.next_decrease += self.p.decrease_interval;
                self.check_decrease(next);
            } else {
                self.increase();
                self.timer_stage += 1;
                self.next_rate_timer = Some(next + self.p.rate_timer);
            }
        }
    }
}

impl CongestionControl for Dcqcn {
    fn name(&self) -> &'static str {
        "dcqcn"
    }

    fn ecn_mode(&self) -> EcnMode {
        EcnMode::Classic
    }

    fn init(&mut self, win: &mut Window) {
        // Rate-based: without `window` the window stays open (on TCP too), the rate alone holds
        // the flow back.
        win.cwnd = u64::MAX / 4;
        self.apply(win);
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        self.now = ack.now;
        self.run_timers(ack.now);
        let bc = self.p.byte_counter.0;
        if bc > 0 && self.cut_since_start {
            self.bytes += ack.acked_bytes;
            while self.bytes >= bc {
                self.bytes -= bc;
                self.increase();
                self.byte_stage += 1;
            }
        }
        self.apply(win);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, now: Time, win: &mut Window) {
        // DCQCN reacts to CNPs only; the transport repairs losses without touching the rate.
        if ev != CongestionEvent::Ecn {
            return;
        }
        self.now = now;
        self.run_timers(now);
        self.cnp_for_alpha = true;
        self.cnp_for_cut = true;
        if !self.first_cnp_seen {
            self.first_cnp_seen = true;
            self.alpha = 1.0;
            self.cnp_for_alpha = false;
            self.next_alpha = now + self.p.alpha_interval;
            // 1 ns after the alpha update due at the same time, as the reference schedules it.
            self.next_decrease = now + self.p.decrease_interval + Time::from_ns(1);
            self.rate *= self.p.rate_on_first_cnp;
            self.target = self.rate;
        }
        self.apply(win);
    }

    fn on_tick(&mut self, now: Time, win: &mut Window) {
        self.now = now;
        self.run_timers(now);
        self.apply(win);
    }

    fn tick_interval(&self) -> Option<Time> {
        // Wake for the next timer (or, before the first CNP, every alpha interval).
        let next = self.next_alpha.min(self.next_decrease).min(self.next_rate_timer.unwrap_or(Time::MAX));
        Some(if next == Time::MAX { self.p.alpha_interval } else { next.saturating_sub(self.now).max(Time(1)) })
    }

    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("alpha", self.alpha), ("rate_bps", self.rate), ("target_bps", self.target)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dcqcn() -> (Dcqcn, Window) {
        let d = Dcqcn::new(Arc::new(Params::default()), Rate::gbps(25), None, 1000);
        let win = Window { cwnd: u64::MAX, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        (d, win)
    }

    #[test]
    fn window_follows_the_rate_when_asked_and_stays_open_otherwise() {
        // The TLT simulator's DCQCN: window = BDP x rate / line rate (HAS_WIN, VAR_WIN).
        let ctx = FlowContext { mss: 1000, init_cwnd: 10_000, link_rate: Rate::gbps(40), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc };
        let table: toml::Table = toml::from_str("window = true\ng = 1.0\nrate_on_first_cnp = 0.5").unwrap();
        let mut cc = factory(&table).unwrap()(&ctx);
        let mut win = Window { cwnd: 0, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        cc.init(&mut win);
        assert_eq!(win.cwnd, 50_000, "one BDP at line rate");
        cc.on_congestion(CongestionEvent::Ecn, Time::from_us(1), &mut win);
        assert_eq!(win.cwnd, 25_000, "half the rate, half the window");
        let (mut d, mut w) = dcqcn();
        d.init(&mut w);
        assert_eq!(w.cwnd, u64::MAX / 4, "no window by default");
    }

    #[test]
    fn cuts_wait_for_the_periodic_check_after_the_first_cnp() {
        let (mut d, mut w) = dcqcn();
        d.on_congestion(CongestionEvent::Ecn, Time::from_us(10), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(25_000_000_000)), "the first CNP only starts the timers");
        d.on_congestion(CongestionEvent::Ecn, Time::from_us(11), &mut w);
        assert_eq!(d.tick_interval(), Some(Time::from_us(3) + Time::from_ns(1)), "woken for the check");
        let at = |t: Time| AckSignals { now: t, ..AckSignals::default() };
        d.on_ack(&at(Time::from_us(14)), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(25_000_000_000)), "the check runs 4 us + 1 ns after the first CNP");
        d.on_ack(&at(Time::from_us(14) + Time::from_ns(1)), &mut w);
        // alpha starts at 1: R_C = 25G (1 - 1/2).
        assert_eq!(w.pacing_rate, Some(Rate(12_500_000_000)));
        d.on_ack(&at(Time::from_us(18) + Time::from_ns(1)), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(12_500_000_000)), "no CNP since the last check: no cut");
        d.on_congestion(CongestionEvent::Ecn, Time::from_us(19), &mut w);
        d.on_tick(Time::from_us(22) + Time::from_ns(1), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(6_250_000_000)), "a CNP since the last check: cut at the next");
    }

    #[test]
    fn alpha_decays_without_cnps_and_fast_recovery_halves_the_gap_to_the_target() {
        let (mut d, mut w) = dcqcn();
        d.on_congestion(CongestionEvent::Ecn, Time::ZERO, &mut w);
        let cut = Time::from_us(4) + Time::from_ns(1);
        d.on_tick(cut, &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(12_500_000_000)));
        // One rate-timer period after the cut: fast recovery, R_C = (12.5 + 25) / 2 G.
        d.on_tick(cut + Time::from_us(55), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(18_750_000_000)));
        assert!((d.alpha - (1.0 - 1.0 / 256.0)).abs() < 1e-12, "alpha {}", d.alpha);
        // Five stages of fast recovery, then additive increase raises the target above line
        // rate, clamped: the rate converges to line rate.
        for k in 2..=20 {
            d.on_tick(cut + Time::from_us(55 * k), &mut w);
        }
        assert!(w.pacing_rate.unwrap().0 > 24_990_000_000, "{:?}", w.pacing_rate);
    }
}
