//! Checks and settings that need the topology or the flows: circuits, CPUs and NIC offloads,
//! host and flow references, links too slow for the run, flows too big for it.

use super::*;
use crate::flow::build::ClassRuntime;
use crate::host::cpu::CpuConfig;
use crate::host::offload::OffloadConfig;
use crate::net::circuit::CircuitParts;
use crate::ids::PortId;
use crate::net::failure::LinkChange;
use crate::net::naming::resolve_ports;
use crate::net::topology::Graph;
use crate::time::{Bytes, Rate, Time};
use crate::transport::tcp::TcpConfig;
use crate::workload::kind::Workload;
use crate::workload::FlowSpec;
use std::path::Path;

/// The circuit side of an `rdcn` network (absent elsewhere, where a `[circuit]` table is an error).
pub(super) fn circuit_parts(sc: &Scenario, base_dir: &Path, classes: &[ClassRuntime]) -> Result<Option<CircuitParts>, String> {
    let t = &sc.topology;
    if t.kind != "rdcn" {
        return match sc.circuit {
            Some(_) => Err(format!("circuit: only for topology.kind = \"rdcn\", not \"{}\"", t.kind)),
            None => Ok(None),
        };
    }
    let cfg = sc.circuit.clone().unwrap_or_default();
    // The topology was built, so its counts are there and positive.
    let (racks, hosts_per_rack) = (t.racks.unwrap_or(2), t.hosts_per_rack.unwrap_or(1));
    if racks > u16::MAX as u32 {
        return Err(format!("topology.racks: at most {} racks, got {racks}", u16::MAX));
    }
    let schedule = cfg.build_schedule(racks as u16, base_dir)?;
    if pfc_or_non_tcp(sc) {
        return Err("circuit: the circuit network carries TCP; PFC, RDMA and UET classes are not supported on it".into());
    }
    let ece_signal = cfg.ece_signal.unwrap_or_else(|| classes.iter().any(|c| c.cc == "retcp"));
    Ok(Some(CircuitParts { schedule: std::sync::Arc::new(schedule), racks: racks as u16, hosts_per_rack, sizing: cfg.sizing()?, ece_signal }))
}

/// `[cpu]`, checked: hosts that exist, at least one core, a clock and costs that make sense.
pub(super) fn cpu_config(sc: &Scenario, hosts: usize) -> Result<Option<CpuConfig>, String> {
    let Some(c) = &sc.cpu else { return Ok(None) };
    host_ordinals(&c.hosts, "cpu.hosts", hosts)?;
    if !(1..=1024).contains(&c.cores) {
        return Err(format!("cpu.cores: expected 1 to 1024 cores, got {}", c.cores));
    }
    if !(c.ghz.is_finite() && (0.01..=100.0).contains(&c.ghz)) {
        return Err(format!("cpu.ghz: expected a clock rate between 0.01 and 100 GHz, got {}", c.ghz));
    }
    let k = &c.costs;
    let cycles = [k.setup, k.accept, k.rx_packet, k.tx_packet, k.request, k.teardown, k.timer, k.handover];
    if cycles.iter().any(|&n| n > 1_000_000_000) || !(k.per_byte.is_finite() && (0.0..=1e6).contains(&k.per_byte)) {
        return Err("cpu.costs: expected whole numbers of cycles up to 10^9 per operation (per_byte: 0 to 10^6)".into());
    }
    Ok(Some(c.clone()))
}

/// `[offload]`, checked: hosts that exist, a table, a timer and a wheel slot.
pub(super) fn offload_config(sc: &Scenario, hosts: usize) -> Result<Option<OffloadConfig>, String> {
    let Some(o) = &sc.offload else { return Ok(None) };
    host_ordinals(&o.hosts, "offload.hosts", hosts)?;
    if let Some(c) = sc.classes.values().find(|c| c.transport != ClassTransport::Tcp) {
        return Err(format!("offload: AccelTCP's offloads act on TCP connections; {} classes are not supported with it", c.transport.name().to_uppercase()));
    }
    if (o.teardown || o.splice) && (o.table_entries == 0 || o.table_entries > 1 << 24) {
        return Err(format!("offload.table_entries: expected 1 to 16777216 connections, got {}", o.table_entries));
    }
    if o.rto == Time::ZERO || o.rto > Time::from_ms(60_000) {
        return Err(format!("offload.rto: expected a timeout above 0 and at most 60s, got {}", o.rto));
    }
    if o.wheel_slot == Time::ZERO || o.wheel_slot > o.rto {
        return Err(format!("offload.wheel_slot: expected a slot above 0 and at most offload.rto ({}), got {}", o.rto, o.wheel_slot));
    }
    if (o.setup || o.teardown) && !sc.transport.handshake {
        return Err("offload: setup and teardown offloads act on the handshake and the close, so they need transport.handshake = true".into());
    }
    Ok(Some(o.clone()))
}

/// Host ordinals listed under `key` must exist.
pub(super) fn host_ordinals(list: &[usize], key: &str, hosts: usize) -> Result<(), String> {
    match list.iter().find(|&&h| h >= hosts) {
        Some(h) => Err(format!("{key}: host {h} does not exist; the topology has hosts 0 to {}", hosts - 1)),
        None => Ok(()),
    }
}

pub(super) fn pfc_or_non_tcp(sc: &Scenario) -> bool {
    sc.pfc.enabled || sc.classes.values().any(|c| c.transport != ClassTransport::Tcp)
}

/// Flow ids listed under `key` must name flows: ids below the count of flows known up front, or,
/// when applications open flows during the run, below `limits.flows`.
pub(super) fn flow_ids_exist(ids: &[u32], key: &str, known: usize, apps: bool, limits: &Limits) -> Result<(), String> {
    let bound = if apps { limits.flows.max(known as u64) } else { known as u64 };
    match ids.iter().position(|&f| f as u64 >= bound) {
        None => Ok(()),
        Some(i) if apps => Err(format!(
            "{key}[{i}]: flow {} cannot exist; the scenario makes at most limits.flows = {bound} flows (ids 0 to {})",
            ids[i],
            bound.saturating_sub(1)
        )),
        Some(i) => Err(format!(
            "{key}[{i}]: flow {} does not exist; the scenario has {} (ids 0 to {})",
            ids[i],
            crate::words::count(known as u64, "flow", "flows"),
            known.saturating_sub(1)
        )),
    }
}

/// Every link must carry at least one full frame of `frame` bytes within the run, or nothing it
/// reports means much.
pub(super) fn slow_links(graph: &Graph, kind: &str, frame: u64, duration: Time) -> Result<(), String> {
    let hosts = graph.hosts();
    for l in &graph.links {
        let takes = l.rate.tx_time(frame);
        if takes <= duration {
            continue;
        }
        let host_link = hosts.contains(&l.a) || hosts.contains(&l.b);
        let key = match kind {
            "hpcc_file" | "htsim_file" => "topology.file",
            _ if host_link => "topology.host_rate",
            "dumbbell" => "topology.core_rate",
            "leaf_spine" => "topology.fabric_rate",
            _ => "topology.agg_rate",
        };
        return Err(format!(
            "{key}: at {} one full {frame}-byte frame takes {takes}, longer than the whole run (sim.duration = {duration}); use a faster link or a longer run",
            l.rate
        ));
    }
    Ok(())
}

/// A flow's transmission at its sender's rate must end within the representable time, or its
/// ideal completion time (and slowdown) would be wrong.
pub(super) fn sizes_fit_in_time(flows: &[FlowSpec], host_rates: &[crate::time::Rate], tcp: &TcpConfig, key: &str, workload: &Workload) -> Result<(), String> {
    for f in flows {
        let (Some(size), Some(&rate)) = (f.size, host_rates.get(f.src)) else { continue };
        let t = rate.tx_time(tcp.wire_bytes_at(size.min(Bytes::INPUT_MAX.0), tcp.mss()));
        if size > Bytes::INPUT_MAX.0 || t.checked_add(f.start).is_none_or(|end| end > Time::INPUT_MAX) {
            let field = workload.size_key();
            let largest = rate.bytes_in(Time::INPUT_MAX.saturating_sub(f.start)).min(Bytes::INPUT_MAX.0) * 95 / 100;
            return Err(format!(
                "{key}.{field}: a flow of {size} bytes from host {} starting at {} does not finish sending at {rate} within {}; the largest size that works there is about {largest} bytes",
                f.src,
                f.start,
                Time::INPUT_MAX
            ));
        }
    }
    Ok(())
}


/// `[[failures]]`, checked: each names a link of the topology by its two ends, and one link's
/// failures do not overlap in time. Returns both directions' changes.
pub(super) fn link_failures(sc: &Scenario, graph: &Graph, names: &[String]) -> Result<Vec<LinkChange>, String> {
    if !sc.failures.is_empty() && sc.topology.kind == "rdcn" {
        return Err("failures: not supported on topology.kind = \"rdcn\", whose uplinks follow the circuit schedule".into());
    }
    let mut out = Vec::new();
    // Each port a failure changes, the time it spans, and the failure.
    let mut spans: Vec<(PortId, Time, Time, usize)> = Vec::new();
    for (i, f) in sc.failures.iter().enumerate() {
        let key = format!("failures[{i}]");
        let form = "expected a link by its two ends, as \"sw0->sw4\" or \"h3->sw0\"";
        let Some((a, b)) = f.link.split_once("->") else {
            return Err(format!("{key}.link: {form}, got \"{}\"", f.link));
        };
        let (a, b) = (a.trim(), b.trim());
        let end = |x: &str, y: &str| -> Result<(PortId, Rate), String> {
            let port = resolve_ports(names, graph, &format!("{x}->{y}")).map_err(|e| format!("{key}.link: {e}; {form}"))?[0];
            let node = |n: &str| names.iter().position(|m| m == n);
            let (x, y) = (node(x), node(y));
            let link = graph.links.iter().find(|l| (Some(l.a), Some(l.b)) == (x, y) || (Some(l.b), Some(l.a)) == (x, y));
            Ok((PortId(port), link.expect("a port between them means a link").rate))
        };
        let ends = [end(a, b)?, end(b, a)?];
        let changes = f.changes(&key, ends)?;
        let (from, to) = (f.at.unwrap_or(Time::ZERO), f.until.unwrap_or(Time::MAX));
        for c in changes.iter().filter(|c| c.at == from) {
            if let Some(&(.., j)) = spans.iter().find(|&&(port, since, till, _)| port == c.port && from < till && since < to) {
                return Err(format!("{key}.link: {a}->{b} already fails in failures[{j}] over part of the same time; give one link's failures separate times"));
            }
        }
        spans.extend(changes.iter().filter(|c| c.at == from).map(|c| (c.port, from, to, i)));
        out.extend(changes);
    }
    Ok(out)
}
