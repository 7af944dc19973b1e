//! TCP-INT telemetry as senders receive it: rows per flow over time (`telemetry.csv`) and
//! run-wide histograms of every echo (`summary.json` `telemetry`).

use super::ns;
use crate::cc::IntReading;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::{self, Write};

/// The header of `telemetry.csv`.
pub const TELEMETRY_HEADER: &str = "t_ns,flow,srtt_ns,cwnd_bytes,util,qdepth_bytes,path_latency_ns,hop_id";

pub use crate::host::telemetry::{TelemetryLog, TelemetryRow};

/// Names of the histogrammed fields, in the log's histogram order.
const FIELDS: [&str; 5] = ["qdepth_bytes", "util_permille", "path_latency_ns", "srtt_ns", "cwnd_bytes"];

impl TelemetryLog {
    /// The rows recorded.
    pub fn rows(&self) -> &[TelemetryRow] {
        &self.rows
    }

    /// Writes `telemetry.csv`; `util` is a fraction of line rate on the utilization branch and
    /// `qdepth_bytes` the queue on the queue branch (the other is empty).
    pub fn write_csv(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{TELEMETRY_HEADER}")?;
        for r in &self.rows {
            let (util, q) = match r.echo.reading {
                IntReading::QueueBytes(b) => (String::new(), b.to_string()),
                IntReading::Utilization(f) => (format!("{f:.2}"), String::new()),
            };
            writeln!(
                out,
                "{},{},{},{},{util},{q},{},{}",
                ns(r.t),
                r.flow,
                ns(r.srtt),
                r.cwnd,
                ns(r.echo.path_latency),
                r.echo.hop_id
            )?;
        }
        Ok(())
    }

    /// The histograms for `summary.json`; `None` when no echo arrived.
    pub fn summary(&self) -> Option<TelemetrySummary> {
        let echoes = self.hists[3].len();
        if echoes == 0 {
            return None;
        }
        let fields = FIELDS.iter().zip(&self.hists).map(|(name, h)| (name.to_string(), FieldHistogram::of(h))).collect();
        Some(TelemetrySummary { echoes, fields })
    }
}

/// Run-wide telemetry histograms.
#[derive(Clone, Debug, Serialize)]
pub struct TelemetrySummary {
    /// Echoes received by all senders.
    pub echoes: u64,
    /// One histogram per field: queue (bytes, queue-branch echoes), utilization (per mille,
    /// utilization-branch echoes), path latency (ns), srtt (ns), cwnd (bytes).
    #[serde(flatten)]
    pub fields: std::collections::BTreeMap<String, FieldHistogram>,
}

/// One field's distribution: summary figures (to 3 significant digits) and log2 buckets.
#[derive(Clone, Debug, Serialize)]
pub struct FieldHistogram {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
    /// `[upper bound, count]` per power-of-two bucket: [0, 1], (1, 2], (2, 4], ...
    pub log2: Vec<(u64, u64)>,
}

impl FieldHistogram {
    fn of(h: &Histogram<u64>) -> FieldHistogram {
        let log2 = if h.is_empty() {
            Vec::new()
        } else {
            h.iter_log(1, 2.0).map(|v| (v.value_iterated_to(), v.count_since_last_iteration())).collect()
        };
        FieldHistogram { count: h.len(), mean: h.mean(), p50: h.value_at_quantile(0.5), p99: h.value_at_quantile(0.99), max: h.max(), log2 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::IntEcho;
    use crate::time::Time;

    fn row(t_us: u64, flow: u32, reading: IntReading) -> TelemetryRow {
        TelemetryRow {
            t: Time(t_us * 1_000_000),
            flow,
            srtt: Time(10_000_000),
            cwnd: 15_000,
            echo: IntEcho { reading, path_latency: Time(3_000_000), hop_id: 62 },
        }
    }

    #[test]
    fn rows_are_thinned_per_flow_but_histograms_see_every_echo() {
        let mut log = TelemetryLog::new(Time(10_000_000), None);
        for t in 0..100 {
            log.record(row(t, t as u32 % 2, IntReading::QueueBytes(16_384)), t);
        }
        // One row per flow every 10 us over 100 us.
        assert_eq!(log.rows().len(), 20);
        let s = log.summary().unwrap();
        assert_eq!(s.echoes, 100);
        assert_eq!(s.fields["qdepth_bytes"].count, 100);
        assert_eq!(s.fields["util_permille"].count, 0);
        // Histogram values are exact to 3 significant digits.
        assert!(s.fields["path_latency_ns"].p50.abs_diff(3000) <= 3);
        let total: u64 = s.fields["qdepth_bytes"].log2.iter().map(|b| b.1).sum();
        assert_eq!(total, 100);
        let mut csv = Vec::new();
        log.write_csv(&mut csv).unwrap();
        let text = String::from_utf8(csv).unwrap();
        assert_eq!(text.lines().nth(1), Some("0,0,10000,15000,,16384,3000,62"));
    }
}
