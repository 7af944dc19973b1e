//! Run outputs: per-flow records (`flows.csv`), the summary (`summary.json`), percentiles, and
//! sampled time series.

mod buckets;
mod cc_state;
pub mod chakra;
pub mod circuit;
pub mod collectives;
pub mod cpu;
mod headline;
pub mod pcap;
mod percentiles;
mod run_dir;
mod series;
mod summary;
pub mod telemetry;

pub use cc_state::{write_cc_state_csv, CC_STATE_HEADER};
pub use buckets::{write_fct_buckets_csv, Bucketing, FCT_BUCKETS_HEADER};
pub use headline::headline;
pub use percentiles::{percentile, Stats};
pub use run_dir::{describe, prepare_run_dir, warnings, write_run, Provenance, OWNED_FILES};
pub use series::{port_name, write_cwnd_csv, write_pfc_csv, write_ports_csv, write_queues_csv, write_requests_csv, write_utilization_csv};
pub use summary::{is_fallback, summarize, Fallbacks, FlowCounts, FlowState, PfcSummary, Summary, WaitingFlow};

use crate::time::Time;
use crate::world::World;
use std::io::{self, Write};
use std::path::Path;

/// The exact header of `flows.csv` (a stable contract), then sluice's own columns.
pub const FLOWS_CSV_HEADER: &str =
    "id,src,dst,class,cc,size_bytes,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown,retransmits,timeouts,negotiation,bytes_delivered,goodput_bps";

/// Formats a time as nanoseconds, with picosecond decimals only when needed.
pub fn ns(t: Time) -> String {
    let (whole, frac) = (t.0 / 1_000, t.0 % 1_000);
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{frac:03}").trim_end_matches('0').to_string()
    }
}

/// A CSV writer over `out`: quoting, so a class or node name with a comma stays one field.
pub(crate) fn csv_writer(out: &mut dyn Write) -> csv::Writer<&mut dyn Write> {
    csv::WriterBuilder::new().has_headers(false).from_writer(out)
}

/// Writes `flows.csv`: one row per flow in id order. After the contract's columns,
/// `bytes_delivered` is what reached the receiving application and `goodput_bps` that over the
/// flow's completion time, or for an unfinished or endless flow over its time from start to the
/// end of the run (empty when that is zero).
pub fn write_flows_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(FLOWS_CSV_HEADER.split(','))?;
    for f in world.flows() {
        let class = &world.classes()[f.class as usize];
        let size = f.size.map(|s| s.to_string()).unwrap_or_default();
        let (finish, fct, slowdown) = match f.finish {
            Some(end) => {
                let fct = end - f.start;
                let sd = (fct.0 as f64 / f.ideal_fct.0.max(1) as f64).max(1.0);
                (ns(end), ns(fct), format!("{sd:.4}"))
            }
            None => (String::new(), String::new(), String::new()),
        };
        let ideal = if f.size.is_some() { ns(f.ideal_fct) } else { String::new() };
        let span = f.finish.unwrap_or(world.now()).saturating_sub(f.start).secs_f64();
        let delivered = f.bytes_delivered();
        let goodput = if span > 0.0 { format!("{:.1}", delivered as f64 * 8.0 / span) } else { String::new() };
        w.write_record([
            f.id.to_string(),
            f.src.to_string(),
            f.dst.to_string(),
            class.name.clone(),
            f.cc_name().to_string(),
            size,
            ns(f.start),
            finish,
            fct,
            ideal,
            slowdown,
            f.retransmits().to_string(),
            f.timeouts().len().to_string(),
            f.negotiation().label().to_string(),
            delivered.to_string(),
            goodput,
        ])?;
    }
    w.flush()
}

/// Writes every output the run produced into `dir`: flows.csv, summary.json, and the sampled
/// series the scenario asked for. Returns the summary.
pub fn write_outputs(world: &World, dir: &Path, wall_s: f64) -> io::Result<Summary> {
    std::fs::create_dir_all(dir)?;
    let mut w = io::BufWriter::new(std::fs::File::create(dir.join("flows.csv"))?);
    write_flows_csv(world, &mut w)?;
    w.flush()?;
    let summary = summarize(world, wall_s);
    let json = serde_json::to_string_pretty(&summary).map_err(io::Error::other)?;
    std::fs::write(dir.join("summary.json"), json + "\n")?;
    let mut w = io::BufWriter::new(std::fs::File::create(dir.join("fct_buckets.csv"))?);
    write_fct_buckets_csv(world, world.bucketing(), &mut w)?;
    w.flush()?;
    let mut w = io::BufWriter::new(std::fs::File::create(dir.join("utilization.csv"))?);
    write_utilization_csv(world, &mut w)?;
    w.flush()?;
    let mut w = io::BufWriter::new(std::fs::File::create(dir.join("ports.csv"))?);
    write_ports_csv(world, &mut w)?;
    w.flush()?;
    if world.pfc_enabled() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("pfc.csv"))?);
        write_pfc_csv(world, &mut w)?;
        w.flush()?;
    }
    if world.circuit().is_some() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("circuit.csv"))?);
        circuit::write_circuit_csv(world, &mut w)?;
        w.flush()?;
    }
    if !world.collectives().is_empty() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("collectives.csv"))?);
        collectives::write_collectives_csv(world, &mut w)?;
        w.flush()?;
    }
    if world.cpus().iter().any(Option::is_some) {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("cpu.csv"))?);
        cpu::write_cpu_csv(world, &mut w)?;
        w.flush()?;
    }
    if let Some(cap) = world.capture() {
        let snap = if cap.full_frames { pcap::Snap::Full } else { pcap::Snap::Headers };
        let mut sink = pcap::PcapSink::create_with(dir.join("trace.pcap"), snap)?;
        for (t, pkt) in &cap.packets {
            sink.record(*t, pkt)?;
        }
        sink.finish()?;
    }
    if !world.telemetry().rows().is_empty() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("telemetry.csv"))?);
        world.telemetry().write_csv(&mut w)?;
        w.flush()?;
    }
    if !world.queue_samples().is_empty() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("queues.csv"))?);
        write_queues_csv(world, &mut w)?;
        w.flush()?;
    }
    if !world.requests().is_empty() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("requests.csv"))?);
        write_requests_csv(world, &mut w)?;
        w.flush()?;
    }
    if !world.cwnd_samples().is_empty() {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("cwnd.csv"))?);
        write_cwnd_csv(world, &mut w)?;
        w.flush()?;
    }
    if cc_state::has_cc_state(world) {
        let mut w = io::BufWriter::new(std::fs::File::create(dir.join("cc_state.csv"))?);
        write_cc_state_csv(world, &mut w)?;
        w.flush()?;
    }
    Ok(summary)
}
