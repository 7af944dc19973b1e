//! The worked example of docs/writing-a-cc.md: additive increase, multiplicative decrease on loss
//! and, optionally, on classic ECN echoes.

use super::{parse_params, AckSignals, CcFactory, CongestionControl, CongestionEvent, EcnMode, FlowContext, Window};
use crate::time::Time;
use serde::Deserialize;
use std::sync::Arc;

pub(super) const PARAMS: &[(&str, &str)] = &[
    ("increase", "1.0  # window growth per round trip, in segments, > 0"),
    ("decrease", "0.5  # the window is multiplied by this on congestion, in (0, 1)"),
    ("ecn", "false  # react to classic ECN echoes (RFC 3168) as to a loss"),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Params {
    increase: f64,
    decrease: f64,
    ecn: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params { increase: 1.0, decrease: 0.5, ecn: false }
    }
}

pub(super) fn factory(params: &toml::Table) -> Result<CcFactory, String> {
    let p: Params = parse_params(params)?;
    if !(p.increase.is_finite() && p.increase > 0.0) {
        return Err(format!("increase: expected a positive number of segments, got {}", p.increase));
    }
    if !(p.decrease > 0.0 && p.decrease < 1.0) {
        return Err(format!("decrease: expected a number in (0, 1), got {}", p.decrease));
    }
    Ok(Arc::new(move |_: &FlowContext| {
        Box::new(ExampleAimd::new(p.increase, p.decrease, p.ecn)) as Box<dyn CongestionControl>
    }))
}

/// AIMD without slow start: `increase` segments more per window acknowledged, times `decrease`
/// on congestion.
#[derive(Debug, Clone)]
pub struct ExampleAimd {
    increase: f64,
    decrease: f64,
    ecn: bool,
    /// Growth below one byte, carried to the next ACK so small increments are not lost.
    carry: f64,
}

impl ExampleAimd {
    /// An instance growing by `increase` segments per round trip and cutting by `decrease`.
    pub fn new(increase: f64, decrease: f64, ecn: bool) -> Self {
        ExampleAimd { increase, decrease, ecn, carry: 0.0 }
    }
}

impl CongestionControl for ExampleAimd {
    fn name(&self) -> &'static str {
        "example_aimd"
    }

    fn ecn_mode(&self) -> EcnMode {
        if self.ecn {
            EcnMode::Classic
        } else {
            EcnMode::Off
        }
    }

    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        if ack.in_recovery {
            return; // the window was just cut; hold it until the loss is repaired
        }
        // A window's worth of acked bytes adds `increase` segments: one round trip's growth.
        self.carry += self.increase * win.mss as f64 * ack.acked_bytes as f64 / win.cwnd as f64;
        let whole = self.carry.floor();
        win.cwnd += whole as u64;
        self.carry -= whole;
    }

    fn on_congestion(&mut self, ev: CongestionEvent, _now: Time, win: &mut Window) {
        win.cwnd = match ev {
            CongestionEvent::Timeout => win.mss,
            CongestionEvent::FastRetransmit | CongestionEvent::Ecn => {
                ((win.cwnd as f64 * self.decrease) as u64).max(win.min_cwnd())
            }
        };
        win.ssthresh = win.cwnd;
    }
}
