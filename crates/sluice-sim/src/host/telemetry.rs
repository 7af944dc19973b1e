//! Signal collection at the NIC: the TCP-INT echoes senders receive, as rows per flow over time
//! and run-wide histograms (written out by `metrics`).

use crate::cc::{IntEcho, IntReading};
use crate::time::Time;
use hdrhistogram::Histogram;

/// One echo as a sender saw it.
#[derive(Clone, Copy, Debug)]
pub struct TelemetryRow {
    /// When the ACK arrived.
    pub t: Time,
    /// Flow id.
    pub flow: u32,
    /// Smoothed RTT then.
    pub srtt: Time,
    /// Congestion window after the ACK.
    pub cwnd: u64,
    /// The echoed INT value and path latency.
    pub echo: IntEcho,
}

/// Records echoes: every one into the histograms, at most one per flow per interval as a row.
pub struct TelemetryLog {
    pub(crate) interval: Time,
    /// Flows to write rows for (`None`: all).
    flows: Option<Vec<u32>>,
    last_row: Vec<Option<Time>>,
    pub(crate) rows: Vec<TelemetryRow>,
    /// The tie key of the event that took each row, by which logs kept apart merge.
    ties: Vec<u64>,
    pub(crate) hists: [Histogram<u64>; 5],
}

impl TelemetryLog {
    /// Rows every `interval` per flow (0: every echo) for `flows` (`None`: all flows).
    pub fn new(interval: Time, flows: Option<Vec<u32>>) -> TelemetryLog {
        let h = || Histogram::new(3).expect("3 significant digits is a valid precision");
        TelemetryLog { interval, flows, last_row: Vec::new(), rows: Vec::new(), ties: Vec::new(), hists: [h(), h(), h(), h(), h()] }
    }

    /// A log like this one, with nothing logged: a shard's (`world/threads.rs`).
    pub fn empty_like(&self) -> TelemetryLog {
        TelemetryLog::new(self.interval, self.flows.clone())
    }

    /// Takes in the logs the other threads of a run kept: rows in the order one event list
    /// takes them (time, then the event's tie key), and every echo in the histograms.
    pub fn merge(&mut self, others: impl IntoIterator<Item = TelemetryLog>) {
        let mut all: Vec<(u64, TelemetryRow)> = self.ties.drain(..).zip(self.rows.drain(..)).collect();
        for log in others {
            all.extend(log.ties.into_iter().zip(log.rows));
            for (h, o) in self.hists.iter_mut().zip(&log.hists) {
                h.add(o).expect("auto-resizing histograms of one precision add");
            }
        }
        all.sort_by_key(|&(tie, row)| (row.t, tie));
        (self.ties, self.rows) = all.into_iter().unzip();
    }

    /// Takes one echo, in the event with tie key `tie`.
    pub fn record(&mut self, row: TelemetryRow, tie: u64) {
        let (q, u) = match row.echo.reading {
            IntReading::QueueBytes(b) => (Some(b), None),
            IntReading::Utilization(f) => (None, Some((f * 1000.0).round() as u64)),
        };
        let values = [q, u, Some(row.echo.path_latency.0 / 1000), Some(row.srtt.0 / 1000), Some(row.cwnd)];
        for (h, v) in self.hists.iter_mut().zip(values) {
            if let Some(v) = v {
                // The histograms resize to any value, so recording cannot fail.
                h.record(v).expect("an auto-resizing histogram takes any value");
            }
        }
        if self.flows.as_ref().is_some_and(|f| !f.contains(&row.flow)) {
            return;
        }
        let f = row.flow as usize;
        if self.last_row.len() <= f {
            self.last_row.resize(f + 1, None);
        }
        if self.last_row[f].is_none_or(|t| row.t >= t + self.interval) {
            self.last_row[f] = Some(row.t);
            self.rows.push(row);
            self.ties.push(tie);
        }
    }
}
