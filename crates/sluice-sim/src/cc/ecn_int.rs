//! ECN+INT: DCTCP whose congestion estimate also follows the bottleneck queue depth that TCP-INT
//! echoes. The smoothed queue over a target gives alpha_int; the window is cut by
//! max(alpha_dctcp, alpha_int) / 2 at most once per window. Without echoes (legacy switches) or
//! with an idle path it is exactly DCTCP.

use super::dctcp::Dctcp;
use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, IntReading, Window};
use crate::time::{Bytes, Time};
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("g", "0.0625  # DCTCP's alpha gain, in (0, 1]"),
    ("alpha_init", "1.0  # DCTCP's initial alpha, in [0, 1]"),
    ("g_int", "0.125  # gain of the queue-depth moving average, in (0, 1]"),
    ("qdepth_target", "\"32KB\"  # smoothed queue depth at which alpha_int reaches 1"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    g: f64,
    alpha_init: f64,
    g_int: f64,
    qdepth_target: Bytes,
}

impl Default for Params {
    fn default() -> Self {
        Params { g: 1.0 / 16.0, alpha_init: 1.0, g_int: 0.125, qdepth_target: Bytes(32_000) }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    for (key, v, lo_open) in [("g", p.g, true), ("g_int", p.g_int, true), ("alpha_init", p.alpha_init, false)] {
        let ok = if lo_open { v > 0.0 && v <= 1.0 } else { (0.0..=1.0).contains(&v) };
        if !ok {
            let range = if lo_open { "(0, 1]" } else { "[0, 1]" };
            return Err(format!("{key}: expected a number in {range}, got {v}"));
        }
    }
    if p.qdepth_target.0 == 0 {
        return Err("qdepth_target: expected a positive size like \"32KB\"".into());
    }
    Ok(Arc::new(move |_: &FlowContext| {
        Box::new(EcnInt { dctcp: Dctcp::new(p.g, p.alpha_init), g_int: p.g_int, target: p.qdepth_target.0 as f64, qdepth_s: 0.0 })
            as Box<dyn CongestionControl>
    }))
}

/// ECN+INT state: DCTCP plus the smoothed echoed queue depth.
#[derive(Debug, Clone)]
pub struct EcnInt {
    dctcp: Dctcp,
    g_int: f64,
    target: f64,
    qdepth_s: f64,
}

impl EcnInt {
    /// The INT-derived congestion estimate, in [0, 1].
    pub fn alpha_int(&self) -> f64 {
        (self.qdepth_s / self.target).min(1.0)
    }
}

impl CongestionControl for EcnInt {
    fn name(&self) -> &'static str {
        "ecn_int_ref"
    }

    fn ecn_mode(&self) -> EcnMode {
        EcnMode::PerPacket
    }

    fn needs_int(&self) -> bool {
        true
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        if let Some(echo) = ack.int {
            let q = match echo.reading {
                IntReading::QueueBytes(b) => b as f64,
                IntReading::Utilization(_) => 0.0,
            };
            self.qdepth_s = (1.0 - self.g_int) * self.qdepth_s + self.g_int * q;
        }
        // Only a queue the current echo still reports triggers a cut; the smoothed depth sets its size.
        let queued = matches!(ack.int, Some(e) if matches!(e.reading, IntReading::QueueBytes(_)));
        let other = if queued { self.alpha_int().max(f64::MIN_POSITIVE) } else { 0.0 };
        self.dctcp.on_ack_with(ack, win, other);
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        self.dctcp.on_congestion_event(ev, win);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::IntEcho;

    fn ack(una: u64, int: Option<IntReading>) -> AckSignals {
        AckSignals {
            acked_bytes: 1000,
            snd_una: una,
            snd_nxt: una + 10_000,
            int: int.map(|reading| IntEcho { reading, path_latency: Time::ZERO, hop_id: 0 }),
            ..Default::default()
        }
    }

    fn win() -> Window {
        Window { cwnd: 100_000, ssthresh: 50_000, pacing_rate: None, mss: 1000 }
    }

    #[test]
    fn without_echo_or_queue_it_is_dctcp() {
        let params = toml::Table::new();
        let (a, b) = (factory(&params).unwrap(), super::super::dctcp::factory(&params).unwrap());
        let ctx = FlowContext { mss: 1000, init_cwnd: 10_000, link_rate: crate::time::Rate(10_000_000_000), base_rtt: Time(10_000_000), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc };
        let (mut x, mut y) = (a(&ctx), b(&ctx));
        let (mut wx, mut wy) = (win(), win());
        for i in 1..200u64 {
            let mut s = ack(i * 1000, if i % 2 == 0 { Some(IntReading::Utilization(0.7)) } else { None });
            s.ce_bytes = if i % 17 == 0 { 1000 } else { 0 };
            x.on_ack(&s, &mut wx);
            s.int = None;
            y.on_ack(&s, &mut wy);
            assert_eq!(wx.cwnd, wy.cwnd, "ack {i}");
        }
    }

    #[test]
    fn an_echoed_queue_cuts_by_alpha_int_without_any_mark() {
        let mut cc = EcnInt { dctcp: Dctcp::new(1.0 / 16.0, 0.0), g_int: 1.0, target: 32_000.0, qdepth_s: 0.0 };
        let mut w = win();
        cc.on_ack(&ack(1000, Some(IntReading::QueueBytes(16_000))), &mut w);
        // alpha_int = 16 KB / 32 KB = 0.5: the window loses a quarter.
        assert_eq!(w.cwnd, 75_000);
        // Once per window: a second queue report before snd_una passes snd_nxt does not cut again.
        cc.on_ack(&ack(2000, Some(IntReading::QueueBytes(32_000))), &mut w);
        assert!(w.cwnd >= 75_000);
    }
}
