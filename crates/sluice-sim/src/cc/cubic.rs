//! CUBIC (RFC 9438): the window follows a cubic function of the time since the last reduction,
//! with a Reno-friendly floor.

use super::hystart::HyStart;
use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::Time;
use crate::transport::tcp::Stack;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("c", "0.4  # cubic scaling constant C in MSS/s^3, > 0"),
    ("beta", "0.7  # multiplicative decrease factor beta_cubic, in (0, 1)"),
    ("fast_convergence", "true  # lower W_max when a loss comes before the previous W_max is regained"),
    ("ecn", "false  # classic ECN (RFC 3168): an ECE reduces the window like a loss, once per window"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    c: f64,
    beta: f64,
    fast_convergence: bool,
    ecn: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params { c: 0.4, beta: 0.7, fast_convergence: true, ecn: false }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.c.is_finite() && p.c > 0.0) {
        return Err(format!("c: expected a positive number, got {}", p.c));
    }
    if !(p.beta > 0.0 && p.beta < 1.0) {
        return Err(format!("beta: expected a number in (0, 1), got {}", p.beta));
    }
    Ok(Arc::new(move |ctx: &FlowContext| {
        let cubic = Cubic::new(p.c, p.beta, p.fast_convergence, p.ecn);
        Box::new(match ctx.stack {
            Stack::Rfc => cubic,
            Stack::Linux => cubic.as_linux(),
        }) as Box<dyn CongestionControl>
    }))
}

/// CUBIC per RFC 9438, with the window held in MSS as `f64` internally and byte-counted ACKs.
///
/// On the `rfc` stack slow start runs until the first loss or ECN mark; on the `linux` stack
/// HyStart ends it as `tcp_cubic.c` does, and an RTO forgets W_max. Time in the cubic
/// function runs from the epoch start, the first ACK in congestion avoidance after a reduction
/// (so recovery time is not counted, as in Linux). ssthresh is `beta * cwnd` rather than
/// `beta * flight_size`.
#[derive(Debug, Clone)]
pub struct Cubic {
    c: f64,
    beta: f64,
    fast_convergence: bool,
    ecn: bool,
    /// Congestion window in MSS; authoritative in congestion avoidance, resynced from the byte
    /// window whenever something else (slow start, a reduction) changed it.
    cwnd: f64,
    /// Window just before the last reduction, after fast convergence (MSS).
    w_max: f64,
    /// Window just before the last reduction (MSS); `alpha` becomes 1 once `w_est` reaches it.
    cwnd_prior: f64,
    /// Plateau of the cubic function: `w_max`, or the epoch's starting window if above it (MSS).
    origin: f64,
    /// Seconds from the epoch start to the plateau.
    k: f64,
    /// Reno-equivalent window estimate (MSS).
    w_est: f64,
    /// Reno-friendly additive increase per RTT (MSS).
    alpha: f64,
    epoch_start: Option<Time>,
    /// Linux's exit from slow start; `None` on the `rfc` stack.
    hystart: Option<HyStart>,
}

impl Cubic {
    /// A CUBIC instance with scaling constant `c` (MSS/s^3) and decrease factor `beta`.
    pub fn new(c: f64, beta: f64, fast_convergence: bool, ecn: bool) -> Self {
        Cubic {
            c,
            beta,
            fast_convergence,
            ecn,
            cwnd: 0.0,
            w_max: 0.0,
            cwnd_prior: 0.0,
            origin: 0.0,
            k: 0.0,
            w_est: 0.0,
            alpha: Self::reno_alpha(beta),
            epoch_start: None,
            hystart: None,
        }
    }

    /// This CUBIC as Linux runs it: HyStart ends slow start, and an RTO resets what the
    /// connection learned (`bictcp_state`), W_max included.
    pub fn as_linux(self) -> Self {
        Cubic { hystart: Some(HyStart::new()), ..self }
    }

    /// alpha_cubic = 3 (1 - beta) / (1 + beta): Reno's average throughput with CUBIC's beta.
    fn reno_alpha(beta: f64) -> f64 {
        3.0 * (1.0 - beta) / (1.0 + beta)
    }

    /// W_cubic(t) = C (t - K)^3 + W_max, in MSS, `t` in seconds from the epoch start.
    fn w_cubic(&self, t: f64) -> f64 {
        self.c * (t - self.k).powi(3) + self.origin
    }

    fn start_epoch(&mut self, now: Time) {
        self.epoch_start = Some(now);
        self.w_est = self.cwnd;
        if self.cwnd < self.w_max {
            self.k = ((self.w_max - self.cwnd) / self.c).cbrt();
            self.origin = self.w_max;
        } else {
            self.k = 0.0;
            self.origin = self.cwnd;
        }
    }
}

fn to_bytes(segments: f64, mss: u64) -> u64 {
    (segments * mss as f64).round() as u64
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn ecn_mode(&self) -> EcnMode {
        if self.ecn {
            EcnMode::Classic
        } else {
            EcnMode::Off
        }
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        if let Some(h) = self.hystart.as_mut() {
            h.on_ack(ack, win, self.epoch_start);
        }
        if ack.in_recovery || ack.acked_bytes == 0 {
            return;
        }
        let mut acked = ack.acked_bytes;
        if win.cwnd < win.ssthresh {
            let inc = acked.min(win.ssthresh - win.cwnd);
            win.cwnd += inc;
            acked -= inc;
            if acked == 0 {
                return;
            }
        }
        if to_bytes(self.cwnd, win.mss) != win.cwnd {
            self.cwnd = win.cwnd as f64 / win.mss as f64;
        }
        let start = match self.epoch_start {
            Some(s) => s,
            None => {
                self.start_epoch(ack.now);
                ack.now
            }
        };
        let t = ack.now.saturating_sub(start).secs_f64();
        let rtt = if ack.srtt > Time::ZERO { ack.srtt } else { ack.min_rtt }.secs_f64();
        let segments = acked as f64 / win.mss as f64;

        self.w_est += self.alpha * segments / self.cwnd;
        if self.w_est >= self.cwnd_prior {
            self.alpha = 1.0;
        }
        if self.w_cubic(t) < self.w_est {
            // Reno-friendly region: at least as fast as Reno with the same beta would be.
            self.cwnd = self.cwnd.max(self.w_est);
        } else {
            // Concave or convex region: close the gap to where the curve will be in one RTT.
            let target = self.w_cubic(t + rtt).clamp(self.cwnd, 1.5 * self.cwnd);
            self.cwnd = (self.cwnd + (target - self.cwnd) * segments / self.cwnd).min(target);
        }
        win.cwnd = to_bytes(self.cwnd, win.mss);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, now: Time, win: &mut Window) {
        let cwnd = win.cwnd as f64 / win.mss as f64;
        self.epoch_start = None;
        self.alpha = Self::reno_alpha(self.beta);
        self.cwnd_prior = cwnd;
        self.w_max = if self.fast_convergence && cwnd < self.w_max { cwnd * (1.0 + self.beta) / 2.0 } else { cwnd };
        win.ssthresh = to_bytes(cwnd * self.beta, win.mss).max(win.min_cwnd());
        if let (Some(h), CongestionEvent::Timeout) = (self.hystart.as_mut(), ev) {
            // tcp_enter_loss takes ssthresh from the window first, then bictcp_state resets.
            h.on_timeout(now);
            self.w_max = 0.0;
        }
        win.cwnd = match ev {
            CongestionEvent::Timeout => win.mss,
            CongestionEvent::FastRetransmit | CongestionEvent::Ecn => win.ssthresh,
        };
        self.cwnd = win.cwnd as f64 / win.mss as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn cubic() -> Cubic {
        Cubic::new(0.4, 0.7, true, false)
    }

    /// A CUBIC flow that has just lost a packet at 100 MSS, out of recovery at time zero.
    fn after_loss_at_100() -> (Cubic, Window) {
        let mut cc = cubic();
        let mut w = Window { cwnd: 100 * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS };
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        (cc, w)
    }

    fn ack(now: Time, acked: u64, srtt: Time) -> AckSignals {
        AckSignals { now, acked_bytes: acked, srtt, min_rtt: srtt, ..Default::default() }
    }

    fn mss(w: &Window) -> f64 {
        w.cwnd as f64 / MSS as f64
    }

    #[test]
    fn reduction_is_beta_with_fast_convergence() {
        let (mut cc, mut w) = after_loss_at_100();
        assert_eq!((w.cwnd, w.ssthresh), (70 * MSS, 70 * MSS));
        assert_eq!(cc.w_max, 100.0);
        // A second loss at 90 MSS, below the previous W_max: fast convergence releases bandwidth.
        w.cwnd = 90 * MSS;
        cc.on_congestion(CongestionEvent::Ecn, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (63 * MSS, 63 * MSS));
        assert!((cc.w_max - 90.0 * 0.85).abs() < 1e-9);
        // Without fast convergence W_max is the window at the loss.
        let mut cc = Cubic::new(0.4, 0.7, false, false);
        cc.w_max = 100.0;
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!(cc.w_max, 63.0);
    }

    #[test]
    fn timeout_collapses_to_one_segment_then_slow_starts_to_ssthresh() {
        let mut cc = cubic();
        let mut w = Window { cwnd: 100 * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS };
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (MSS, 70 * MSS));
        cc.on_ack(&ack(Time::from_us(1), 80 * MSS, Time::from_us(100)), &mut w);
        assert!(w.cwnd >= 70 * MSS && w.cwnd < 72 * MSS, "cwnd {}", w.cwnd);
    }

    /// With ACKs sparse enough that the Reno estimate stays far below the curve (one 1-MSS ACK
    /// every 2 ms, srtt 100 us), the window follows W_cubic: back at W_max = 100 MSS at
    /// t = K = cbrt(100 * 0.3 / 0.4) = 4.217 s, concave before K and convex after.
    #[test]
    fn window_follows_the_cubic_curve_back_to_w_max_at_k() {
        let (mut cc, mut w) = after_loss_at_100();
        let k = (100.0f64 * 0.3 / 0.4).cbrt();
        assert!((k - 4.217).abs() < 1e-3);
        let step = Time::from_ms(2);
        let rtt = Time::from_us(100);
        let mut at = Vec::new(); // cwnd at t = K-2, K-1, K, K+1, K+2 seconds
        let mut now = Time::ZERO;
        for sample in [k - 2.0, k - 1.0, k, k + 1.0, k + 2.0] {
            while now.secs_f64() < sample {
                cc.on_ack(&ack(now, MSS, rtt), &mut w);
                now += step;
            }
            at.push(mss(&w));
        }
        assert!(cc.w_est < 90.0, "Reno estimate {} should stay below the curve", cc.w_est);
        assert!((at[2] - 100.0).abs() < 2.0, "cwnd at K: {} MSS", at[2]);
        let growth: Vec<f64> = at.windows(2).map(|p| p[1] - p[0]).collect();
        assert!(growth[0] > growth[1] && growth[1] > 0.0, "concave approach to W_max: {at:?}");
        assert!(growth[3] > growth[2] && growth[2] > 0.0, "convex probing beyond W_max: {at:?}");
        // And at K+2 s the window is near W_cubic(K+2) = 100 + 0.4 * 8 = 103.2 MSS.
        assert!((at[4] - 103.2).abs() < 1.0, "{at:?}");
    }

    /// With a full ACK clock at a 100 us RTT the cubic curve barely moves in a few RTTs, so the
    /// Reno-friendly estimate sets the window: +alpha_cubic = 0.529 MSS per RTT up to the window
    /// before the loss, then +1 MSS per RTT.
    #[test]
    fn reno_friendly_region_dominates_at_datacenter_rtts() {
        let (mut cc, mut w) = after_loss_at_100();
        let rtt = Time::from_us(100);
        let mut now = Time::ZERO;
        let mut per_rtt = Vec::new();
        for _ in 0..80 {
            let before = mss(&w);
            let acks = w.cwnd / MSS;
            for i in 0..acks {
                cc.on_ack(&ack(now + Time(rtt.ps() * i / acks), MSS, rtt), &mut w);
            }
            now += rtt;
            per_rtt.push(mss(&w) - before);
        }
        let alpha = 3.0 * 0.3 / 1.7;
        for g in &per_rtt[..50] {
            assert!((g - alpha).abs() < 0.02, "growth per RTT {g}, expected {alpha}");
        }
        assert!(cc.w_cubic(now.secs_f64()) < 71.0);
        // 70 + 0.529 * 57 = 100: from then on Reno's own slope.
        for g in &per_rtt[60..] {
            assert!((g - 1.0).abs() < 0.02, "growth per RTT {g}, expected 1");
        }
    }

    #[test]
    fn no_growth_in_recovery() {
        let (mut cc, mut w) = after_loss_at_100();
        let mut a = ack(Time::from_ms(1), 10 * MSS, Time::from_us(100));
        a.in_recovery = true;
        cc.on_ack(&a, &mut w);
        assert_eq!(w.cwnd, 70 * MSS);
        assert_eq!(cc.epoch_start, None);
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
        assert_eq!((f(&ctx).name(), f(&ctx).ecn_mode()), ("cubic", EcnMode::Off));
        let f = factory(&toml::from_str("c = 1\nbeta = 0.5\nfast_convergence = false\necn = true").unwrap()).unwrap();
        assert_eq!(f(&ctx).ecn_mode(), EcnMode::Classic);
        let err = |s: &str| factory(&toml::from_str(s).unwrap()).err().unwrap();
        assert_eq!(err("beta = 1.0"), "beta: expected a number in (0, 1), got 1");
        assert_eq!(err("c = 0"), "c: expected a positive number, got 0");
        assert!(err("C = 0.4").contains("unknown field `C`"));
        assert!(err("beta = \"0.7\"").starts_with("beta: "));
    }
}
