//! A reconfigurable network's figures: how much of each circuit day the circuit spent sending
//! (`circuit.csv`, and `circuit.utilization` in summary.json over the pairs that had data to
//! send), and the latency of data packets through the ToRs.

use super::{csv_writer, ns, Stats};
use crate::time::Time;
use crate::world::World;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The `circuit` section of summary.json.
#[derive(Clone, Debug, Serialize)]
pub struct CircuitSummary {
    /// Of the day time of pairs whose VOQ carried data, in days wholly within the run, the
    /// fraction the circuit spent sending; `null` when there were none.
    pub utilization: Option<f64>,
    /// The days that figure is over.
    pub days: u64,
    /// Wire bytes every circuit carried.
    pub circuit_bytes: u64,
    /// Packets refused by full VOQs.
    pub voq_drops: u64,
    /// Data packets' latency through the ToR (arrival to the end of their serialization on an
    /// uplink), ns.
    pub latency_ns: Stats,
}

/// One circuit day of one pair.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DayRow {
    /// Start of the day.
    pub start: Time,
    /// Its end, or the run's end if that came first.
    pub end: Time,
    /// Source rack.
    pub src: u16,
    /// Destination rack.
    pub dst: u16,
    /// Wire bytes the circuit carried.
    pub bytes: u64,
    /// Fraction of the day spent sending.
    pub busy: f64,
    /// The pair's VOQ carried data and the day ended within the run: it counts for utilization.
    pub counted: bool,
}

/// Every day that began within the run, for every pair, in time order.
pub fn day_rows(world: &World) -> Vec<DayRow> {
    let Some(c) = world.circuit() else { return Vec::new() };
    let now = world.now();
    let tors: BTreeMap<u16, _> = world.switches().iter().filter_map(|s| s.tor.as_deref().map(|t| (t.rack, (s, t)))).collect();
    let mut rows = Vec::new();
    for ((src, dst), day) in c.schedule.days(now) {
        let Some(&(sw, tor)) = tors.get(&src) else { continue };
        let rate = world.ports()[(sw.first_port + tor.circuit_port as u32) as usize].rate;
        let bytes = tor.circuit_days.iter().find(|d| d.number == day.number).map_or(0, |d| d.bytes);
        let end = day.end.min(now);
        let len = (end - day.start).0;
        // A frame still on the wire when the run ended counts whole; the fraction stays at most 1.
        let busy = if len > 0 { (rate.tx_time(bytes).0 as f64 / len as f64).min(1.0) } else { 0.0 };
        let counted = day.end <= now && tor.voqs[dst as usize].carried_data;
        rows.push(DayRow { start: day.start, end, src, dst, bytes, busy, counted });
    }
    rows
}

/// The circuit figures of a reconfigurable network's run.
pub fn summarize(world: &World) -> Option<CircuitSummary> {
    world.circuit()?;
    let rows = day_rows(world);
    let counted: Vec<&DayRow> = rows.iter().filter(|r| r.counted).collect();
    let day_time: f64 = counted.iter().map(|r| (r.end - r.start).0 as f64).sum();
    let busy_time: f64 = counted.iter().map(|r| r.busy * (r.end - r.start).0 as f64).sum();
    let tors = || world.switches().iter().filter_map(|s| s.tor.as_deref());
    let mut latencies: Vec<f64> = tors().flat_map(|t| t.latencies_ns.iter().map(|&l| l as f64)).collect();
    Some(CircuitSummary {
        utilization: (day_time > 0.0).then(|| busy_time / day_time),
        days: counted.len() as u64,
        circuit_bytes: rows.iter().map(|r| r.bytes).sum(),
        voq_drops: tors().flat_map(|t| t.voqs.iter().map(|v| v.drops)).sum(),
        latency_ns: Stats::of(&mut latencies),
    })
}

/// Writes `circuit.csv` (`start_ns,end_ns,src_rack,dst_rack,circuit_bytes,busy,counted`): one
/// row per day of each pair, with the fraction of it the circuit spent sending.
pub fn write_circuit_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["start_ns", "end_ns", "src_rack", "dst_rack", "circuit_bytes", "busy", "counted"])?;
    for r in day_rows(world) {
        let (src, dst, bytes) = (r.src.to_string(), r.dst.to_string(), r.bytes.to_string());
        w.write_record([ns(r.start), ns(r.end), src, dst, bytes, format!("{:.4}", r.busy), (r.counted as u8).to_string()])?;
    }
    w.flush()
}
