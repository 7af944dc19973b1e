//! HPCC as published (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019,
//! Algorithm 1), on TCP, driven by per-hop INT records.
//!
//! Every data packet collects, at each switch it leaves, the egress port's queue length, its
//! cumulative transmitted bytes, a timestamp and the line rate B; the receiver echoes the stack on
//! its ACK. Per ACK, for each hop i against the previous ACK's records L:
//! txRate = Δ txBytes / Δ ts and u'_i = min(qlen, L.qlen) / (B x T) + txRate / B, the hop's
//! normalized inflight. The most loaded hop's u' enters an EWMA U with weight τ / T, where τ is
//! that hop's Δ ts capped at the base RTT T. ComputeWnd: if U >= eta or incStage >= maxStage,
//! W = Wc / (U / eta) + W_AI, else W = Wc + W_AI; the reference window Wc takes W (and incStage
//! resets or counts up) once per RTT, when the ACK passes the snd_nxt recorded at the last update.
//! The flow starts at line rate (W_init = B_NIC x T) and is paced at W / T; W stays within
//! [one MSS, W_init], as the reference implementation caps the rate at line rate. A flow shorter
//! than W_init is therefore sent whole in its first RTT, before any record returns. When every
//! hop reads zero the first hop's interval weighs the EWMA (Algorithm 1 leaves τ unset there), so
//! U decays on an idle path.
//!
//! On TCP: fast retransmit halves the window and a timeout sets it to min(W / 2, W_init), as
//! HPTCP does. An ACK without records (it echoed no stack, or no switch wrote one) holds the
//! window: HPCC has no other signal to act on. The first ACK with records only stores them, and
//! so does one whose hop count differs from the last (the path changed, so the per-hop
//! differences would compare different ports).

use super::{
    parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, FlowContext, HopRecord, HopStack, Window,
};
use crate::time::{Rate, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("eta", "0.95  # target utilization eta, in (0, 1]"),
    ("max_stage", "5  # additive-increase rounds before a multiplicative step (0: every update multiplicative)"),
    ("w_ai", "W_init x (1 - eta) / 10  # additive increase W_AI in bytes per RTT, positive"),
    ("rate_ai", "unset  # additive increase as a rate, W_AI = rate_ai x T (the HPCC simulator's RATE_AI); instead of w_ai"),
];

/// Flows the default W_AI lets share a link at the target (the paper's W_init (1 - eta) / N).
const DEFAULT_AI_FLOWS: f64 = 10.0;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    eta: f64,
    max_stage: u32,
    w_ai: Option<f64>,
    rate_ai: Option<Rate>,
}

impl Default for Params {
    fn default() -> Self {
        Params { eta: 0.95, max_stage: 5, w_ai: None, rate_ai: None }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.eta > 0.0 && p.eta <= 1.0) {
        return Err(format!("eta: expected a number in (0, 1], got {}", p.eta));
    }
    if p.w_ai.is_some() && p.rate_ai.is_some() {
        return Err("rate_ai: expected either w_ai (bytes per RTT) or rate_ai (a rate), not both".into());
    }
    if p.rate_ai == Some(Rate(0)) {
        return Err("rate_ai: expected a positive rate like \"40Mbps\"".into());
    }
    if let Some(w) = p.w_ai {
        if !(w > 0.0 && w.is_finite()) {
            return Err(format!("w_ai: expected a positive number of bytes, got {w}"));
        }
    }
    Ok(Arc::new(move |ctx: &FlowContext| {
        Box::new(Hpcc::new(ctx, p.eta, p.max_stage, w_ai(&p, ctx))) as Box<dyn CongestionControl>
    }))
}

/// W_AI in bytes as the parameters give it, `None` for the default.
fn w_ai(p: &Params, ctx: &FlowContext) -> Option<f64> {
    p.w_ai.or(p.rate_ai.map(|r| r.0 as f64 / 8.0 * ctx.base_rtt.secs_f64()))
}

/// HPCC state for one flow.
#[derive(Debug, Clone)]
pub struct Hpcc {
    eta: f64,
    max_stage: u32,
    /// Base RTT T.
    base_rtt: Time,
    link_rate: Rate,
    /// W_init = B_NIC x T, bytes: the line-rate window, also the largest.
    w_init: f64,
    w_ai: f64,
    /// Reference window Wc, bytes.
    wc: f64,
    /// Smoothed normalized inflight U.
    u: f64,
    inc_stage: u32,
    /// Wc is next updated once the cumulative ACK passes this.
    last_update_seq: u64,
    /// The records of the last ACK that carried some (L in Algorithm 1).
    prev: Option<HopStack>,
}

impl Hpcc {
    /// A flow starting at line rate; `w_ai` in bytes, `None` for W_init (1 - eta) / 10.
    pub fn new(ctx: &FlowContext, eta: f64, max_stage: u32, w_ai: Option<f64>) -> Self {
        let w_init = ctx.link_rate.0 as f64 / 8.0 * ctx.base_rtt.secs_f64();
        Hpcc {
            eta,
            max_stage,
            base_rtt: ctx.base_rtt,
            link_rate: ctx.link_rate,
            w_init,
            w_ai: w_ai.unwrap_or(w_init * (1.0 - eta) / DEFAULT_AI_FLOWS),
            wc: w_init,
            u: 0.0,
            inc_stage: 0,
            last_update_seq: 0,
            prev: None,
        }
    }

    /// The smoothed normalized inflight U.
    pub fn load(&self) -> f64 {
        self.u
    }

    /// The reference window Wc in bytes.
    pub fn reference_window(&self) -> f64 {
        self.wc
    }

    /// The additive-increase step W_AI in bytes.
    pub fn w_ai(&self) -> f64 {
        self.w_ai
    }

    /// MeasureInflight: folds the most loaded hop's normalized inflight into U and returns it;
    /// `None` (U unchanged) when there is no previous record of the same path or no hop's
    /// timestamp advanced.
    fn measure_inflight(&mut self, hops: &[HopRecord]) -> Option<f64> {
        let prev = self.prev.as_ref()?.hops();
        if prev.len() != hops.len() {
            return None;
        }
        let t = self.base_rtt.secs_f64();
        let mut most: Option<(f64, Time)> = None;
        for (cur, old) in hops.iter().zip(prev) {
            // A stale or repeated record gives no rate; the other hops still count.
            if cur.ts <= old.ts {
                continue;
            }
            let dt = cur.ts - old.ts;
            let b = cur.rate.0 as f64;
            let tx_rate = cur.tx_bytes.saturating_sub(old.tx_bytes) as f64 * 8.0 / dt.secs_f64();
            let u = cur.qlen.min(old.qlen) as f64 * 8.0 / (b * t) + tx_rate / b;
            if most.is_none_or(|(m, _)| u > m) {
                most = Some((u, dt));
            }
        }
        let (u, dt) = most?;
        let k = dt.min(self.base_rtt).0 as f64 / self.base_rtt.0.max(1) as f64;
        self.u = (1.0 - k) * self.u + k * u;
        Some(self.u)
    }

    /// ComputeWnd: the multiplicative step towards eta when loaded (or after `max_stage`
    /// additive rounds), else one additive step; Wc and incStage move only when `update_wc`.
    fn compute_wnd(&mut self, u: f64, update_wc: bool, min_w: f64) -> f64 {
        let multiplicative = u >= self.eta || self.inc_stage >= self.max_stage;
        let w = if multiplicative { self.wc / (u / self.eta).max(1e-9) + self.w_ai } else { self.wc + self.w_ai };
        let w = w.clamp(min_w, self.w_init.max(min_w));
        if update_wc {
            self.inc_stage = if multiplicative { 0 } else { self.inc_stage + 1 };
            self.wc = w;
        }
        w
    }

    fn apply(&self, w: f64, win: &mut Window) {
        let w = w.clamp(win.mss as f64, self.w_init.max(win.mss as f64));
        win.cwnd = w.round() as u64;
        let bits_per_s = w * 8.0 / self.base_rtt.secs_f64();
        win.pacing_rate = Some(Rate((bits_per_s as u64).clamp(1, self.link_rate.0)));
    }
}

impl CongestionControl for Hpcc {
    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("u", self.u), ("wc_bytes", self.wc), ("inc_stage", self.inc_stage as f64)]
    }

    fn name(&self) -> &'static str {
        "hpcc"
    }

    fn needs_hop_records(&self) -> bool {
        true
    }

    fn init(&mut self, win: &mut Window) {
        self.apply(self.wc, win);
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        let Some(stack) = ack.hops.as_ref().filter(|s| !s.hops().is_empty()) else { return };
        let first = self.prev.is_none();
        let u = self.measure_inflight(stack.hops());
        self.prev = Some(*stack);
        if first {
            // The reference implementation's first RTT: store L and start counting RTTs.
            self.last_update_seq = ack.snd_nxt;
        }
        let Some(u) = u else { return };
        if ack.in_recovery {
            return;
        }
        let update_wc = ack.snd_una > self.last_update_seq;
        let w = self.compute_wnd(u, update_wc, win.mss as f64);
        if update_wc {
            self.last_update_seq = ack.snd_nxt;
        }
        self.apply(w, win);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        self.wc = super::hptcp::window_after_loss(ev, win.cwnd as f64, self.w_init);
        self.inc_stage = 0;
        self.apply(self.wc, win);
        win.ssthresh = win.cwnd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 100 Gb/s x 10 us: W_init = 125 KB, default W_AI = 125 KB x 0.05 / 10 = 625 B.
    const B: Rate = Rate(100_000_000_000);
    const BDP: f64 = 125_000.0;

    fn ctx() -> FlowContext {
        FlowContext { mss: 1000, init_cwnd: 10_000, link_rate: B, base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc }
    }

    fn window() -> Window {
        Window { cwnd: 10_000, ssthresh: u64::MAX, pacing_rate: None, mss: 1000 }
    }

    /// A record at `t_us` of a 100 Gb/s port that has sent `tx` bytes and holds `q` bytes.
    fn hop(t_us: f64, tx: u64, q: u64) -> HopRecord {
        HopRecord { qlen: q, tx_bytes: tx, ts: Time::from_secs_f64(t_us * 1e-6), rate: B }
    }

    fn ack(una: u64, nxt: u64, hops: &[HopRecord]) -> AckSignals {
        AckSignals {
            snd_una: una,
            snd_nxt: nxt,
            acked_bytes: 1000,
            hops: Some(HopStack::from_hops(hops)),
            ..Default::default()
        }
    }

    fn hpcc() -> Hpcc {
        Hpcc::new(&ctx(), 0.95, 5, None)
    }

    #[test]
    fn starts_at_line_rate_with_the_papers_additive_step() {
        let mut cc = hpcc();
        let mut w = window();
        cc.init(&mut w);
        assert_eq!(w.cwnd, 125_000);
        assert_eq!(w.pacing_rate, Some(B));
        assert!((cc.w_ai() - 625.0).abs() < 1e-9);
    }

    #[test]
    fn inflight_is_the_most_loaded_hops_queue_plus_rate_smoothed_over_a_base_rtt() {
        let mut cc = hpcc();
        // Hop 0 sends at half line rate with no queue: u' = 0.5. Hop 1 sends at line rate and
        // holds min(25 KB, 50 KB) = 25 KB: u' = 25 KB / 125 KB + 1 = 1.2.
        cc.prev = Some(HopStack::from_hops(&[hop(0.0, 0, 0), hop(0.0, 1_000_000, 50_000)]));
        // 10 us later (tau = T: full weight): 62.5 KB and 125 KB sent.
        let u = cc.measure_inflight(&[hop(10.0, 62_500, 0), hop(10.0, 1_125_000, 25_000)]).unwrap();
        assert!((u - 1.2).abs() < 1e-9, "{u}");
        // 2.5 us later the hop-1 port sent 31.25 KB (line rate) and went idle: u' = 1.0 at weight
        // tau / T = 0.25. Hop 0 is idle (u' = 0), so hop 1's tau is the one used.
        cc.prev = Some(HopStack::from_hops(&[hop(10.0, 62_500, 0), hop(10.0, 1_125_000, 25_000)]));
        let u = cc.measure_inflight(&[hop(12.5, 62_500, 0), hop(12.5, 1_156_250, 0)]).unwrap();
        assert!((u - (0.75 * 1.2 + 0.25 * 1.0)).abs() < 1e-9, "{u}");
        // A gap longer than T weighs at most 1.
        cc.prev = Some(HopStack::from_hops(&[hop(0.0, 0, 10_000)]));
        let u = cc.measure_inflight(&[hop(100.0, 625_000, 20_000)]).unwrap();
        assert!((u - (10_000.0 / BDP + 0.5)).abs() < 1e-9, "{u}");
        // A changed hop count, or no record that moved, measures nothing.
        assert_eq!(cc.measure_inflight(&[hop(200.0, 0, 0), hop(200.0, 0, 0)]), None);
        cc.prev = Some(HopStack::from_hops(&[hop(5.0, 0, 0)]));
        assert_eq!(cc.measure_inflight(&[hop(5.0, 100, 0)]), None);
    }

    #[test]
    fn compute_wnd_adds_for_max_stage_rounds_then_steps_multiplicatively() {
        let mut cc = hpcc();
        cc.wc = 50_000.0;
        // Below eta: additive, and only an RTT boundary moves Wc and the stage.
        assert_eq!(cc.compute_wnd(0.5, false, 1000.0), 50_625.0);
        assert_eq!((cc.wc, cc.inc_stage), (50_000.0, 0));
        for stage in 1..=5 {
            let w = cc.compute_wnd(0.5, true, 1000.0);
            assert_eq!((w, cc.inc_stage), (50_000.0 + 625.0 * stage as f64, stage));
        }
        // After maxStage additive rounds the multiplicative step runs even below eta:
        // W = Wc / (0.5 / 0.95) + W_AI, and the stage resets.
        let wc = cc.wc;
        let w = cc.compute_wnd(0.5, true, 1000.0);
        assert!((w - (wc * 0.95 / 0.5 + 625.0)).abs() < 1e-6, "{w}");
        assert_eq!((cc.wc, cc.inc_stage), (w, 0));
        // Above eta: W = Wc / (U / eta) + W_AI.
        cc.wc = 100_000.0;
        let w = cc.compute_wnd(1.9, true, 1000.0);
        assert!((w - (100_000.0 / 2.0 + 625.0)).abs() < 1e-6, "{w}");
        // W stays within [MSS, W_init].
        cc.wc = 124_800.0;
        assert!((cc.compute_wnd(0.1, false, 1000.0) - BDP).abs() < 1e-6);
        cc.wc = 1000.0;
        assert_eq!(cc.compute_wnd(1000.0, false, 1000.0), 1000.0);
    }

    #[test]
    fn wc_moves_once_per_rtt_and_the_window_is_paced_at_w_over_t() {
        let mut cc = hpcc();
        let mut w = window();
        cc.init(&mut w);
        // First ACK: records stored, window held; the RTT ends once snd_una passes 200 KB.
        cc.on_ack(&ack(1000, 200_000, &[hop(0.0, 0, 0)]), &mut w);
        assert_eq!(w.cwnd, 125_000);
        // A standing queue of one BDP at line rate: U = 2 at full weight, W = Wc x 0.95 / 2 + W_AI,
        // but Wc waits for the RTT boundary.
        let loaded = |t: f64| hop(t, (t * 12_500.0) as u64, 125_000);
        cc.on_ack(&ack(2000, 200_000, &[loaded(10.0)]), &mut w);
        let expect = BDP * 0.95 / 2.0 + 625.0;
        assert!((cc.load() - 1.0).abs() < 1e-9, "queue min(0, 125 KB) = 0 on the first step: {}", cc.load());
        cc.on_ack(&ack(3000, 200_000, &[loaded(20.0)]), &mut w);
        assert!((cc.load() - 2.0).abs() < 1e-9, "{}", cc.load());
        assert!((w.cwnd as f64 - expect).abs() < 1.0, "{} vs {expect}", w.cwnd);
        assert!((cc.reference_window() - BDP).abs() < 1e-6, "Wc waits for the RTT boundary");
        let rate = w.pacing_rate.unwrap().0 as f64;
        assert!((rate - expect * 8.0 / 10e-6).abs() < 1e3, "{rate}");
        cc.on_ack(&ack(200_001, 400_000, &[loaded(30.0)]), &mut w);
        assert!((cc.reference_window() - expect).abs() < 1.0);
        // ACKs without records hold the window.
        let before = w;
        cc.on_ack(&AckSignals { snd_una: 500_000, snd_nxt: 600_000, ..Default::default() }, &mut w);
        cc.on_ack(&ack(500_000, 600_000, &[]), &mut w);
        assert_eq!((w.cwnd, w.pacing_rate), (before.cwnd, before.pacing_rate));
    }

    #[test]
    fn loss_halves_and_a_timeout_restarts_from_at_most_w_init() {
        let mut cc = hpcc();
        let mut w = Window { cwnd: 100_000, ..window() };
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (50_000, 50_000));
        w.cwnd = 125_000;
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        assert_eq!(w.cwnd, 62_500);
        assert_eq!(cc.reference_window(), 62_500.0);
    }

    #[test]
    fn bad_parameters_name_the_key() {
        let err = |s: &str| factory(&s.parse::<toml::Table>().unwrap()).err().unwrap();
        assert!(err("eta = 0.0").starts_with("eta: expected a number in (0, 1]"), "{}", err("eta = 0.0"));
        assert!(err("eta = 1.5").starts_with("eta:"));
        assert!(err("w_ai = 100\nrate_ai = \"40Mbps\"").starts_with("rate_ai: expected either w_ai"));
        assert!(err("rate_ai = \"0bps\"").starts_with("rate_ai: expected a positive rate"), "{}", err("rate_ai = \"0bps\""));
        assert!(err("max_stage = -1").starts_with("max_stage:"), "{}", err("max_stage = -1"));
        assert!(err("w_ai = -5").starts_with("w_ai: expected a positive number of bytes"), "{}", err("w_ai = -5"));
        assert!(err("w_ai = 0").starts_with("w_ai:"));
        assert!(err("wai = 5").contains("unknown field `wai`"), "{}", err("wai = 5"));
        assert!(factory(&"eta = 1.0\nmax_stage = 1\nw_ai = 1500".parse::<toml::Table>().unwrap()).is_ok());
    }

    #[test]
    fn rate_ai_is_a_window_step_over_the_base_rtt_and_max_stage_0_is_always_multiplicative() {
        // The HPCC simulator adds RATE_AI to the rate each update; as a window that is RATE_AI x T.
        let p: Params = parse_params(&"rate_ai = \"40Mbps\"\nmax_stage = 0".parse::<toml::Table>().unwrap()).unwrap();
        let ctx = FlowContext { mss: 1000, init_cwnd: 10_000, link_rate: Rate::gbps(100), base_rtt: Time::from_us(12), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc };
        let mut cc = Hpcc::new(&ctx, p.eta, p.max_stage, w_ai(&p, &ctx));
        assert!((cc.w_ai() - 60.0).abs() < 1e-9, "{}", cc.w_ai());
        // Below eta, stage 0: run.py's MI_THRESH 0 takes the multiplicative step at once.
        cc.wc = 50_000.0;
        let w = cc.compute_wnd(0.5, true, 1000.0);
        assert!((w - (50_000.0 / (0.5 / 0.95) + 60.0)).abs() < 1e-6, "{w}");
        assert_eq!(cc.inc_stage, 0);
    }
}
