//! DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015), as
//! RoCE NICs implement it and the HPCC simulator's Mellanox mode models it. Rate-based: the
//! window stays open and the queue pair sends at the current rate R_C.
//!
//! - **Reaction to a CNP** (the transport's `CongestionEvent::Ecn`): the first CNP cuts R_C to
//!   `rate_on_first_cnp` of line rate and starts the alpha timer; later ones are remembered, and
//!   at most once per `decrease_interval` the rate is cut: R_T = R_C (unless `clamp_target` is
//!   off and no increase happened since the last cut), R_C = max(min_rate, R_C (1 - alpha / 2)),
//!   and the increase stages restart.
//! - **Alpha**: every `alpha_interval`, alpha = (1 - g) alpha + g if a CNP arrived in the
//!   interval, else (1 - g) alpha.
//! - **Increase**: the rate timer (every `rate_timer` after a cut) and the byte counter (every
//!   `byte_counter` bytes acknowledged) each count stages. While both are below
//!   `fast_recovery` stages: fast recovery, R_C = (R_T + R_C) / 2; when one passes it: additive
//!   increase, R_T += rate_ai first; when both do: hyper increase, R_T += rate_hai first.
//!   `byte_counter = "0B"` disables the byte counter, as the HPCC simulator's Mellanox mode does.
//!
//! The byte counter counts acknowledged bytes: the algorithm sees ACKs, not transmissions, and
//! at a steady rate the two differ by one round trip of bytes. A pending cut is applied at the
//! first ACK, CNP or tick after its decrease interval has passed, so it is never later than one
//! packet's ACK after the NIC's periodic check would apply it.

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
    ("rate_on_first_cnp", "1.0  # fraction of line rate the first CNP sets"),
    ("clamp_target", "true  # every cut sets the target rate to the current rate"),
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
            "rate_on_first_cnp: expected a fraction of line rate in (0, 1], got {}",
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
    Ok(Arc::new(move |ctx: &FlowContext| Box::new(Dcqcn::new(p.clone(), ctx.link_rate)) as Box<dyn CongestionControl>))
}

/// DCQCN's reaction point for one queue pair.
pub struct Dcqcn {
    p: Arc<Params>,
    line_rate: f64,
    /// Current rate R_C and target rate R_T, bit/s.
    rate: f64,
    target: f64,
    alpha: f64,
    /// A CNP arrived since the last alpha update, and since the last cut.
    cnp_for_alpha: bool,
    cnp_for_cut: bool,
    first_cnp_seen: bool,
    last_cut: Option<Time>,
    next_alpha: Time,
    next_rate_timer: Option<Time>,
    timer_stage: u32,
    byte_stage: u32,
    bytes: u64,
    now: Time,
}

impl Dcqcn {
    fn new(p: Arc<Params>, line_rate: Rate) -> Dcqcn {
        let line = line_rate.0 as f64;
        Dcqcn {
            p,
            line_rate: line,
            rate: line,
            target: line,
            alpha: 1.0,
            cnp_for_alpha: false,
            cnp_for_cut: false,
            first_cnp_seen: false,
            last_cut: None,
            next_alpha: Time::MAX,
            next_rate_timer: None,
            timer_stage: 0,
            byte_stage: 0,
            bytes: 0,
            now: Time::ZERO,
        }
    }

    fn apply(&self, win: &mut Window) {
        win.pacing_rate = Some(Rate(self.rate.round().max(1.0) as u64));
    }

    /// Cuts the rate if a CNP is pending and the decrease interval allows.
    fn maybe_cut(&mut self, now: Time) {
        if !self.cnp_for_cut || self.last_cut.is_some_and(|t| now < t + self.p.decrease_interval) {
            return;
        }
        if self.p.clamp_target || self.timer_stage > 0 || self.byte_stage > 0 {
            self.target = self.rate;
        }
        self.rate = (self.rate * (1.0 - self.alpha / 2.0)).max(self.p.min_rate.0 as f64);
        self.cnp_for_cut = false;
        self.last_cut = Some(now);
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

    /// Runs the timers that came due by `now`.
    fn run_timers(&mut self, now: Time) {
        while self.next_alpha <= now {
            let g = self.p.g;
            self.alpha = (1.0 - g) * self.alpha + if self.cnp_for_alpha { g } else { 0.0 };
            self.cnp_for_alpha = false;
            self.next_alpha += self.p.alpha_interval;
        }
        while let Some(t) = self.next_rate_timer.filter(|&t| t <= now) {
            self.increase();
            self.timer_stage += 1;
            self.next_rate_timer = Some(t + self.p.rate_timer);
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
        // Rate-based: the window stays open (on TCP too), the rate alone holds the flow back.
        win.cwnd = u64::MAX / 4;
        self.apply(win);
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        self.now = ack.now;
        self.run_timers(ack.now);
        self.maybe_cut(ack.now);
        let bc = self.p.byte_counter.0;
        if bc > 0 && self.last_cut.is_some() {
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
            self.rate = self.rate.min(self.p.rate_on_first_cnp * self.line_rate);
            self.target = self.rate;
        }
        self.maybe_cut(now);
        self.apply(win);
    }

    fn on_tick(&mut self, now: Time, win: &mut Window) {
        self.now = now;
        self.run_timers(now);
        self.maybe_cut(now);
        self.apply(win);
    }

    fn tick_interval(&self) -> Option<Time> {
        // Wake for the next alpha update or rate-timer stage (or, idle, every alpha interval).
        let next = self.next_alpha.min(self.next_rate_timer.unwrap_or(Time::MAX));
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
        let d = Dcqcn::new(Arc::new(Params::default()), Rate::gbps(25));
        let win = Window { cwnd: u64::MAX, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 };
        (d, win)
    }

    #[test]
    fn the_first_cnp_halves_the_rate_and_later_ones_wait_for_the_decrease_interval() {
        let (mut d, mut w) = dcqcn();
        d.on_congestion(CongestionEvent::Ecn, Time::from_us(10), &mut w);
        // alpha starts at 1: R_C = 25G (1 - 1/2).
        assert_eq!(w.pacing_rate, Some(Rate(12_500_000_000)));
        d.on_congestion(CongestionEvent::Ecn, Time::from_us(11), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(12_500_000_000)), "within 4 us: no second cut");
        let ack = AckSignals { now: Time::from_us(14), ..AckSignals::default() };
        d.on_ack(&ack, &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(6_250_000_000)), "the pending CNP cuts at 4 us");
    }

    #[test]
    fn alpha_decays_without_cnps_and_fast_recovery_halves_the_gap_to_the_target() {
        let (mut d, mut w) = dcqcn();
        d.on_congestion(CongestionEvent::Ecn, Time::ZERO, &mut w);
        // One rate-timer period later: fast recovery, R_C = (12.5 + 25) / 2 G.
        d.on_tick(Time::from_us(55), &mut w);
        assert_eq!(w.pacing_rate, Some(Rate(18_750_000_000)));
        assert!((d.alpha - (1.0 - 1.0 / 256.0)).abs() < 1e-12, "alpha {}", d.alpha);
        // Five stages of fast recovery, then additive increase raises the target above line
        // rate, clamped: the rate converges to line rate.
        for k in 2..=20 {
            d.on_tick(Time::from_us(55 * k), &mut w);
        }
        assert!(w.pacing_rate.unwrap().0 > 24_990_000_000, "{:?}", w.pacing_rate);
    }
}
