//! DCTCP (RFC 8257): estimates the fraction of CE-marked bytes per window and cuts the window in
//! proportion to it, at most once per window of data.

use super::newreno::reno_grow;
use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::Time;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("g", "0.0625  # gain of the alpha moving average (1/16), in (0, 1]"),
    ("alpha_init", "1.0  # initial alpha, the estimated marked fraction, in [0, 1]"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    g: f64,
    alpha_init: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params { g: 1.0 / 16.0, alpha_init: 1.0 }
    }
}

/// DCTCP's parameters, checked.
pub(super) fn params(params: &toml::Table) -> Result<(f64, f64), String> {
    let p: Params = parse_params(params)?;
    if !(p.g > 0.0 && p.g <= 1.0) {
        return Err(format!("g: expected a number in (0, 1], got {}", p.g));
    }
    if !(0.0..=1.0).contains(&p.alpha_init) {
        return Err(format!("alpha_init: expected a number in [0, 1], got {}", p.alpha_init));
    }
    Ok((p.g, p.alpha_init))
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let (g, alpha_init) = self::params(params)?;
    Ok(Arc::new(move |_: &FlowContext| Box::new(Dctcp::new(g, alpha_init)) as Box<dyn CongestionControl>))
}

/// DCTCP per RFC 8257 with per-packet ECN echo.
///
/// The observation window for alpha starts at the first ACK, ends once `snd_una` reaches the
/// `snd_nxt` recorded at its start, and the next one begins there. A CE-marked ACK outside
/// recovery cuts the window by `alpha / 2` unless a cut was already made for data still
/// unacknowledged. Growth is NewReno's; loss is handled like NewReno.
#[derive(Debug, Clone)]
pub struct Dctcp {
    g: f64,
    alpha: f64,
    /// Bytes acked in the current observation window.
    acked: u64,
    /// Of those, bytes the receiver echoed as CE-marked.
    ce: u64,
    /// The observation window ends when `snd_una` reaches this (`None` before the first ACK).
    window_end: Option<u64>,
    /// No further ECN cut until `snd_una` reaches this (`snd_nxt` at the last cut).
    cwr_end: u64,
    /// Congestion-avoidance byte accumulator (see `reno_grow`).
    bytes_acked: u64,
}

impl Dctcp {
    /// A DCTCP instance with moving-average gain `g` and initial `alpha`.
    pub fn new(g: f64, alpha: f64) -> Self {
        Dctcp { g, alpha, acked: 0, ce: 0, window_end: None, cwr_end: 0, bytes_acked: 0 }
    }

    /// The current estimate of the fraction of marked bytes.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Updates the marked-fraction estimate; at the end of an observation window folds its F in.
    fn observe(&mut self, ack: &AckSignals) {
        let end = *self.window_end.get_or_insert(ack.snd_nxt);
        self.acked += ack.acked_bytes;
        self.ce += ack.ce_bytes;
        if ack.snd_una >= end {
            if self.acked > 0 {
                let f = self.ce as f64 / self.acked as f64;
                self.alpha = (1.0 - self.g) * self.alpha + self.g * f;
            }
            self.acked = 0;
            self.ce = 0;
            self.window_end = Some(ack.snd_nxt);
        }
    }

    /// Cuts the window in proportion to `alpha`.
    fn reduce(&mut self, alpha: f64, win: &mut Window) {
        self.bytes_acked = 0;
        win.ssthresh = ((win.cwnd as f64 * (1.0 - alpha / 2.0)) as u64).max(win.min_cwnd());
        win.cwnd = win.ssthresh;
    }

    /// DCTCP's ACK handling with a second congestion estimate in [0, 1] (0: none): a positive one
    /// counts as a mark, and a cut uses the larger of it and alpha. ECN+INT builds on this.
    pub(super) fn on_ack_with(&mut self, ack: &AckSignals, win: &mut Window, other: f64) {
        self.on_ack_penalty(ack, win, other > 0.0, |alpha| alpha.max(other));
    }

    /// DCTCP's ACK handling where a cut takes `penalty(alpha) / 2` of the window; `signal`
    /// counts as a mark. D2TCP and ECN+INT build on this.
    pub(super) fn on_ack_penalty(&mut self, ack: &AckSignals, win: &mut Window, signal: bool, penalty: impl FnOnce(f64) -> f64) {
        self.observe(ack);
        if ack.in_recovery {
            return;
        }
        let signalled = ack.ce_bytes > 0 || ack.ece || signal;
        if signalled && ack.snd_una >= self.cwr_end {
            self.reduce(penalty(self.alpha), win);
            self.cwr_end = ack.snd_nxt;
            return;
        }
        reno_grow(&mut self.bytes_acked, ack.acked_bytes, win);
    }

    /// DCTCP's reaction to loss, timeout or a classic ECN echo.
    pub(super) fn on_congestion_event(&mut self, ev: CongestionEvent, win: &mut Window) {
        match ev {
            // Only reached if a transport handles DCTCP's marks as classic ECN; it paces these.
            CongestionEvent::Ecn => self.reduce(self.alpha, win),
            CongestionEvent::FastRetransmit | CongestionEvent::Timeout => {
                self.bytes_acked = 0;
                win.ssthresh = (win.cwnd / 2).max(win.min_cwnd());
                win.cwnd = if ev == CongestionEvent::Timeout { win.mss } else { win.ssthresh };
            }
        }
    }
}

impl CongestionControl for Dctcp {
    fn state(&self) -> Vec<(&'static str, f64)> {
        vec![("alpha", self.alpha)]
    }

    fn name(&self) -> &'static str {
        "dctcp_ref"
    }

    fn ecn_mode(&self) -> EcnMode {
        EcnMode::PerPacket
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        self.on_ack_with(ack, win, 0.0);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        self.on_congestion_event(ev, win);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    /// Drives `cc` through one observation window: `n` one-MSS ACKs from `una`, with new data
    /// sent as each ACK arrives (`snd_nxt` stays `n` MSS ahead), of which `marked` carry CE.
    /// Returns the new `una`.
    fn window(cc: &mut Dctcp, w: &mut Window, una: u64, n: u64, marked: impl Fn(u64) -> bool) -> u64 {
        for i in 1..=n {
            let ce = marked(i);
            let snd_una = una + i * MSS;
            let ack = AckSignals {
                acked_bytes: MSS,
                ce_bytes: if ce { MSS } else { 0 },
                ece: ce,
                snd_una,
                snd_nxt: snd_una + n * MSS,
                ..Default::default()
            };
            cc.on_ack(&ack, w);
        }
        una + n * MSS
    }

    fn win(cwnd: u64) -> Window {
        Window { cwnd, ssthresh: u64::MAX, pacing_rate: None, mss: MSS }
    }

    /// Starts the observation window as if `n` MSS were in flight from sequence 0.
    fn started(g: f64, alpha: f64, n: u64) -> Dctcp {
        let mut cc = Dctcp::new(g, alpha);
        cc.window_end = Some(n * MSS);
        cc
    }

    #[test]
    fn alpha_converges_to_one_when_everything_is_marked() {
        let mut cc = started(1.0 / 16.0, 0.0, 10);
        let mut w = win(10 * MSS);
        let mut una = 0;
        let mut expect = 0.0f64;
        for _ in 0..100 {
            w.cwnd = 10 * MSS; // keep the window size fixed; only alpha is under test
            una = window(&mut cc, &mut w, una, 10, |_| true);
            expect = expect * (15.0 / 16.0) + 1.0 / 16.0;
            assert!((cc.alpha() - expect).abs() < 1e-12, "{} vs {expect}", cc.alpha());
        }
        assert!(cc.alpha() > 0.998, "{}", cc.alpha());
    }

    #[test]
    fn alpha_decays_by_one_minus_g_per_unmarked_window() {
        let mut cc = started(1.0 / 16.0, 1.0, 10);
        let mut w = win(10 * MSS);
        let mut una = 0;
        for k in 1..=20 {
            una = window(&mut cc, &mut w, una, 10, |_| false);
            assert!((cc.alpha() - (15.0f64 / 16.0).powi(k)).abs() < 1e-12);
        }
        assert_eq!(w.cwnd, 210 * MSS, "slow start with no marks: +10 MSS per window of 10 ACKs");
    }

    #[test]
    fn alpha_tracks_the_marked_fraction() {
        let mut cc = started(0.5, 0.0, 10);
        let mut w = win(10 * MSS);
        let mut una = 0;
        for _ in 0..60 {
            w.cwnd = 10 * MSS;
            una = window(&mut cc, &mut w, una, 10, |i| i % 4 == 0); // 2 of 10 marked
        }
        assert!((cc.alpha() - 0.2).abs() < 1e-9, "{}", cc.alpha());
    }

    #[test]
    fn cuts_by_half_alpha_once_per_window() {
        let mut cc = started(1.0 / 16.0, 0.5, 100);
        let mut w = win(100 * MSS);
        w.ssthresh = 0; // congestion avoidance

        // Every ACK marked: one cut at the first ACK, to 100 * (1 - 0.25) = 75 MSS, then none
        // until the data outstanding at the cut (up to snd_nxt = 201 MSS) is acked.
        let mut cuts = Vec::new();
        let mut cwnd = w.cwnd;
        for i in 1..=300u64 {
            let ack = AckSignals {
                acked_bytes: MSS,
                ce_bytes: MSS,
                ece: true,
                snd_una: i * MSS,
                snd_nxt: (i + 100) * MSS,
                ..Default::default()
            };
            let alpha = cc.alpha();
            cc.on_ack(&ack, &mut w);
            if w.cwnd < cwnd {
                cuts.push(i);
                assert_eq!(w.cwnd, ((cwnd as f64) * (1.0 - alpha / 2.0)) as u64);
                assert_eq!(w.ssthresh, w.cwnd);
            }
            cwnd = w.cwnd;
        }
        assert_eq!(cuts, vec![1, 101, 201]);
        // alpha only moved at window ends (ACKs 100, 200, 300): 0.5 -> 0.53125 -> ...
        let a1 = 0.5 * 15.0 / 16.0 + 1.0 / 16.0;
        let a2 = a1 * 15.0 / 16.0 + 1.0 / 16.0;
        let a3 = a2 * 15.0 / 16.0 + 1.0 / 16.0;
        assert!((cc.alpha() - a3).abs() < 1e-12);
    }

    #[test]
    fn grows_like_newreno_and_handles_loss_like_newreno() {
        let mut cc = Dctcp::new(1.0 / 16.0, 1.0);
        let mut w = win(20 * MSS);
        w.ssthresh = 20 * MSS;
        window(&mut cc, &mut w, 0, 20, |_| false);
        assert_eq!(w.cwnd, 21 * MSS);
        cc.on_congestion(CongestionEvent::FastRetransmit, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (10 * MSS + MSS / 2, 10 * MSS + MSS / 2));
        cc.on_congestion(CongestionEvent::Timeout, Time::ZERO, &mut w);
        assert_eq!((w.cwnd, w.ssthresh), (MSS, 5 * MSS + MSS / 4));
        // No growth and no ECN cut in recovery.
        let ack = AckSignals {
            acked_bytes: MSS,
            ce_bytes: MSS,
            ece: true,
            in_recovery: true,
            snd_una: 30 * MSS,
            snd_nxt: 40 * MSS,
            ..Default::default()
        };
        cc.on_ack(&ack, &mut w);
        assert_eq!(w.cwnd, MSS);
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
        let cc = factory(&toml::Table::new()).unwrap()(&ctx);
        assert_eq!((cc.name(), cc.ecn_mode()), ("dctcp_ref", EcnMode::PerPacket));
        assert!(factory(&toml::from_str("g = 1\nalpha_init = 0").unwrap()).is_ok());
        let err = |s: &str| factory(&toml::from_str(s).unwrap()).err().unwrap();
        assert_eq!(err("g = 0"), "g: expected a number in (0, 1], got 0");
        assert_eq!(err("g = 2"), "g: expected a number in (0, 1], got 2");
        assert_eq!(err("g = 1.5"), "g: expected a number in (0, 1], got 1.5");
        assert_eq!(err("g = nan"), "g: expected a number in (0, 1], got NaN");
        assert_eq!(err("alpha_init = -0.1"), "alpha_init: expected a number in [0, 1], got -0.1");
        let e = err("gain = 0.1");
        assert!(e.contains("unknown field `gain`") && e.contains("`g`"), "{e}");
        assert!(err("g = \"1/16\"").starts_with("g: "));
    }
}
