//! The views on the agent's telemetry records (`kernel::events`), decoded with the simulator's
//! INT codec: trace lines, a flow table, log2 histograms, and the Prometheus exporter.

use crate::kernel::events::{consume, Event};
use crate::kernel::{pins, sockops};
use crate::service::status;
use anyhow::{anyhow, bail, Result};
use sluice_platform::prometheus::{Exposition, Kind};
use sluice_sim::packet::tcp_int::{IntEncoding, IntReading};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A decoded INTval, as text.
pub fn reading_text(v: u8, enc: &IntEncoding) -> String {
    match enc.read(v) {
        IntReading::QueueBytes(b) => format!("queue {b}B"),
        IntReading::Utilization(u) => format!("util {:.0}%", u * 100.0),
    }
}

/// One trace line.
pub fn trace_line(e: &Event, enc: &IntEncoding) -> String {
    format!(
        "{:.6} {} > {} out[{} hop {} lat {}ns] in[{} hop {} lat {}ns] srtt {}us cwnd {}",
        e.ts_ns as f64 / 1e9,
        e.local,
        e.remote,
        reading_text(e.int_ecr, enc),
        e.id_ecr,
        e.lat_ecr,
        reading_text(e.int_val, enc),
        e.id,
        e.lat,
        e.srtt_us,
        e.snd_cwnd
    )
}

/// `sluice host trace`: a line per record.
pub fn trace(duration: Option<Duration>, echo_only: bool, out: &mut dyn Write) -> Result<u64> {
    let enc = IntEncoding::default();
    let mut n = 0;
    let mut err = None;
    consume(
        duration,
        |e| {
            if echo_only && !e.has_echo() {
                return;
            }
            n += 1;
            if let Err(x) = writeln!(out, "{}", trace_line(e, &enc)) {
                err.get_or_insert(x);
            }
        },
        || {},
    )?;
    match err {
        // A closed pipe (e.g. `| head`) ends the trace quietly.
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(n),
    }
}

/// What the flow table keeps per connection.
#[derive(Debug, Clone, Default)]
pub struct FlowRow {
    /// Records seen.
    pub events: u64,
    /// Latest record.
    pub last: Option<Event>,
    /// Largest queue the echo reported, bytes.
    pub max_queue: u64,
}

/// Flows keyed by (local, remote).
pub type Flows = BTreeMap<(SocketAddr, SocketAddr), FlowRow>;

/// Folds a record into the flow table.
pub fn flows_update(flows: &mut Flows, e: &Event, enc: &IntEncoding) {
    let row = flows.entry((e.local, e.remote)).or_default();
    row.events += 1;
    if let IntReading::QueueBytes(q) = enc.read(e.int_ecr) {
        row.max_queue = row.max_queue.max(q);
    }
    row.last = Some(*e);
}

/// The flow table as text.
pub fn flows_table(flows: &Flows, enc: &IntEncoding) -> String {
    let mut s = format!(
        "{:<22} {:<22} {:>12} {:>4} {:>10} {:>12} {:>9} {:>6} {:>8}\n",
        "local", "remote", "path", "hop", "lat_ns", "max_queue_B", "srtt_us", "cwnd", "events"
    );
    for ((l, r), row) in flows {
        let Some(e) = row.last else { continue };
        let _ = writeln!(
            s,
            "{:<22} {:<22} {:>12} {:>4} {:>10} {:>12} {:>9} {:>6} {:>8}",
            l.to_string(),
            r.to_string(),
            reading_text(e.int_ecr, enc),
            e.id_ecr,
            e.lat_ecr,
            row.max_queue,
            e.srtt_us,
            e.snd_cwnd,
            row.events
        );
    }
    s
}

/// `sluice host flows`: the table, redrawn every second on a terminal; printed once at the end otherwise.
pub fn flows(duration: Option<Duration>, out: &mut dyn Write) -> Result<Flows> {
    let enc = IntEncoding::default();
    let table = std::cell::RefCell::new(Flows::new());
    let live = std::io::IsTerminal::is_terminal(&std::io::stdout());
    consume(
        duration,
        |e| flows_update(&mut table.borrow_mut(), e, &enc),
        || {
            if live {
                print!("\x1b[H\x1b[2J{}", flows_table(&table.borrow(), &enc));
                let _ = std::io::stdout().flush();
            }
        },
    )?;
    let t = table.into_inner();
    write!(out, "{}", flows_table(&t, &enc))?;
    Ok(t)
}

/// A field `hist` can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistField {
    /// Queue bytes the echoed INTval reports (queue-branch readings only).
    Qdepth,
    /// Utilization percent the echoed INTval reports (utilization-branch readings only).
    Util,
    /// Echoed path latency (the hop latency with one switch), ns.
    Lat,
    /// Smoothed RTT, µs.
    Rtt,
    /// Congestion window, segments.
    Cwnd,
}

impl std::str::FromStr for HistField {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "qdepth" => HistField::Qdepth,
            "util" => HistField::Util,
            "lat" | "latency" => HistField::Lat,
            "rtt" => HistField::Rtt,
            "cwnd" => HistField::Cwnd,
            _ => bail!("histogram field {s:?}: expected one of qdepth, util, lat, rtt, cwnd"),
        })
    }
}

impl HistField {
    /// The field's value in a record, if the record has one.
    pub fn value(self, e: &Event, enc: &IntEncoding) -> Option<u64> {
        match self {
            HistField::Qdepth => match enc.read(e.int_ecr) {
                IntReading::QueueBytes(b) if e.has_echo() => Some(b),
                _ => None,
            },
            HistField::Util => match enc.read(e.int_ecr) {
                IntReading::Utilization(u) if e.has_echo() => Some((u * 100.0).round() as u64),
                _ => None,
            },
            HistField::Lat => e.has_echo().then_some(e.lat_ecr as u64),
            HistField::Rtt => Some(e.srtt_us as u64),
            HistField::Cwnd => Some(e.snd_cwnd as u64),
        }
    }

    fn unit(self) -> &'static str {
        match self {
            HistField::Qdepth => "bytes",
            HistField::Util => "percent",
            HistField::Lat => "ns",
            HistField::Rtt => "us",
            HistField::Cwnd => "segments",
        }
    }
}

/// A log2 histogram: bucket k counts values in [2^(k-1), 2^k), bucket 0 counts zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log2Hist {
    /// Counts per bucket (65 of them).
    pub buckets: Vec<u64>,
    /// Values recorded.
    pub count: u64,
}

impl Default for Log2Hist {
    fn default() -> Self {
        Log2Hist { buckets: vec![0; 65], count: 0 }
    }
}

impl Log2Hist {
    /// Records a value.
    pub fn add(&mut self, v: u64) {
        self.buckets[(64 - v.leading_zeros()) as usize] += 1;
        self.count += 1;
    }

    /// The histogram drawn with bars, one line per non-empty bucket range.
    pub fn render(&self, unit: &str) -> String {
        let mut s = String::new();
        let Some(hi) = self.buckets.iter().rposition(|&c| c > 0) else {
            return "  (no samples)\n".to_string();
        };
        let lo = self.buckets.iter().position(|&c| c > 0).unwrap_or(0);
        let max = *self.buckets.iter().max().unwrap_or(&1);
        let _ = writeln!(s, "  {:>24} : {:<10} distribution", unit, "count");
        for k in lo..=hi {
            let (a, b) = if k == 0 { (0u64, 0u64) } else { (1u64 << (k - 1), (1u128 << k).saturating_sub(1).min(u64::MAX as u128) as u64) };
            let bar = "*".repeat(((self.buckets[k] * 40) / max.max(1)) as usize);
            let _ = writeln!(s, "  {:>11} -> {:<11}: {:<10} |{:<40}|", a, b, self.buckets[k], bar);
        }
        s
    }
}

/// `sluice host hist`: histograms of one field, overall or per hop ID.
pub fn hist(field: HistField, per_hop: bool, duration: Option<Duration>, out: &mut dyn Write) -> Result<BTreeMap<Option<u8>, Log2Hist>> {
    let enc = IntEncoding::default();
    let mut h: BTreeMap<Option<u8>, Log2Hist> = BTreeMap::new();
    consume(
        duration,
        |e| {
            if let Some(v) = field.value(e, &enc) {
                h.entry(per_hop.then_some(e.id_ecr)).or_default().add(v);
            }
        },
        || {},
    )?;
    if h.is_empty() {
        writeln!(out, "{field:?}: no samples")?;
    }
    for (hop, hist) in &h {
        match hop {
            Some(id) => writeln!(out, "hop {id} (TTL at the hop that raised INTval):")?,
            None => writeln!(out, "{field:?}:")?,
        }
        write!(out, "{}", hist.render(field.unit()))?;
    }
    Ok(h)
}

/// The flows and the agent's counters as Prometheus metrics.
pub fn flow_metrics(flows: &Flows, counters: &[u64], enc: &IntEncoding, e: &mut Exposition) {
    e.family("sluice_agent_total", Kind::Counter, "Counters of the TCP-INT host agent.");
    for (n, v) in sockops::COUNTERS.iter().zip(counters) {
        e.sample("sluice_agent_total", &[("counter", n)], v);
    }
    type Gauge = (&'static str, &'static str, fn(&Event, &IntEncoding) -> Option<f64>);
    let gauges: [Gauge; 6] = [
        ("sluice_flow_queue_bytes", "Queue depth the path from this host reports (0 when it reports utilization).", |e, enc| {
            Some(match enc.read(e.int_ecr) {
                IntReading::QueueBytes(b) => b as f64,
                _ => 0.0,
            })
        }),
        ("sluice_flow_utilization_ratio", "Link utilization the path reports (when not queueing).", |e, enc| match enc.read(e.int_ecr) {
            IntReading::Utilization(u) => Some(u),
            _ => None,
        }),
        ("sluice_flow_path_latency_seconds", "Summed hop latency of the path from this host.", |e, _| Some(e.lat_ecr as f64 / 1e9)),
        ("sluice_flow_hop_id", "TTL at the hop that raised INTval.", |e, _| Some(e.id_ecr as f64)),
        ("sluice_flow_srtt_seconds", "Smoothed RTT.", |e, _| Some(e.srtt_us as f64 / 1e6)),
        ("sluice_flow_cwnd_segments", "Congestion window.", |e, _| Some(e.snd_cwnd as f64)),
    ];
    for (name, help, f) in gauges {
        e.family(name, Kind::Gauge, help);
        for ((l, r), row) in flows {
            if let Some(v) = row.last.as_ref().and_then(|ev| f(ev, enc)) {
                e.sample(name, &[("local", &l.to_string()), ("remote", &r.to_string())], v);
            }
        }
    }
}

/// `sluice host export`: serves Prometheus text on `listen` at any path until stopped.
pub fn export(listen: &str, duration: Option<Duration>) -> Result<()> {
    let server = tiny_http::Server::http(listen).map_err(|e| anyhow!("listening on {listen:?} (expected ADDR:PORT, e.g. 127.0.0.1:9372): {e}"))?;
    let flows = Arc::new(Mutex::new(Flows::new()));
    let f2 = flows.clone();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let server = Arc::new(server);
    let s2 = server.clone();
    let http = std::thread::spawn(move || {
        let enc = IntEncoding::default();
        while !d2.load(Ordering::SeqCst) {
            let Ok(Some(req)) = s2.recv_timeout(Duration::from_millis(200)) else { continue };
            let counters = pins::read_counters("agent_counters", sockops::COUNTERS.len()).unwrap_or_default();
            let mut e = Exposition::new();
            flow_metrics(&f2.lock().unwrap(), &counters, &enc, &mut e);
            status::policy_metrics(&mut e);
            let body = e.into_text();
            let header = tiny_http::Header::from_bytes("Content-Type", "text/plain; version=0.0.4").expect("static header");
            let _ = req.respond(tiny_http::Response::from_string(body).with_header(header));
        }
    });
    eprintln!("serving Prometheus metrics on http://{listen}/metrics");
    let enc = IntEncoding::default();
    let r = consume(duration, |e| flows_update(&mut flows.lock().unwrap(), e, &enc), || {});
    done.store(true, Ordering::SeqCst);
    let _ = http.join();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::events::EVENT_SIZE;

    #[test]
    fn log2_buckets_hold_their_ranges() {
        let mut h = Log2Hist::default();
        for v in [0, 1, 2, 3, 4, 1023, 1024] {
            h.add(v);
        }
        assert_eq!(h.buckets[0], 1);
        assert_eq!(h.buckets[1], 1); // 1
        assert_eq!(h.buckets[2], 2); // 2, 3
        assert_eq!(h.buckets[3], 1); // 4
        assert_eq!(h.buckets[10], 1); // 1023
        assert_eq!(h.buckets[11], 1); // 1024
        assert_eq!(h.count, 7);
        assert!(h.render("bytes").contains("1024 -> 2047"));
    }

    #[test]
    fn records_parse_with_mapped_ipv4() {
        let mut b = vec![0u8; EVENT_SIZE];
        b[0..8].copy_from_slice(&5u64.to_ne_bytes());
        b[18] = 0xff;
        b[19] = 0xff;
        b[20..24].copy_from_slice(&[10, 72, 1, 1]);
        b[34] = 0xff;
        b[35] = 0xff;
        b[36..40].copy_from_slice(&[10, 72, 3, 1]);
        b[40..42].copy_from_slice(&40000u16.to_ne_bytes());
        b[42..44].copy_from_slice(&5201u16.to_ne_bytes());
        b[46] = 0x82;
        b[52..56].copy_from_slice(&1234u32.to_ne_bytes());
        let e = Event::parse(&b).unwrap();
        assert_eq!(e.local.to_string(), "10.72.1.1:40000");
        assert_eq!(e.remote.to_string(), "10.72.3.1:5201");
        assert!(e.has_echo());
        let enc = IntEncoding::default();
        assert_eq!(HistField::Qdepth.value(&e, &enc), Some(16384));
        assert_eq!(HistField::Lat.value(&e, &enc), Some(1234));
        assert!(trace_line(&e, &enc).contains("out[queue 16384B hop 0 lat 1234ns]"));
        let mut flows = Flows::new();
        flows_update(&mut flows, &e, &enc);
        let mut p = Exposition::new();
        flow_metrics(&flows, &[1, 2], &enc, &mut p);
        let p = p.into_text();
        assert!(p.contains("sluice_flow_queue_bytes{local=\"10.72.1.1:40000\",remote=\"10.72.3.1:5201\"} 16384"));
        assert!(p.contains("sluice_agent_total{counter=\"opt_written\"} 2"));
    }
}
