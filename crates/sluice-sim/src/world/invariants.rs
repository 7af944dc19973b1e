//! The run's own checks of itself: conservation of packets, buffer bytes, PFC holdings,
//! hop-record stacks and application bytes, counted independently of the elements that move them.

use crate::ids::FlowId;
use crate::flow::Flow;
use crate::net::link::Flying;
use crate::net::port::Port;
use crate::packet::Packet;
use crate::transport::{ClientEnd, ServerEnd};
use super::World;
use std::collections::HashMap;

/// Packets (not PFC frames) on port `p`'s link.
fn on_wire(p: &Port, flying: &Flying) -> u64 {
    p.link.in_flight.iter().filter(|&&(_, i)| !flying.get(i).is_pfc()).count() as u64
}

/// The packets (not PFC frames) on cut links, which their arrival events carry.
fn on_cut_links(w: &World) -> impl Iterator<Item = &Packet> + '_ {
    w.on_cut_links().map(|(_, i)| w.flying().get(i)).filter(|p| !p.is_pfc())
}

/// Host-sent packets a port holds: queued, on its wire, or waiting in its control queue (the
/// control priority's ACKs and NACKs, beside PFC frames, which no host sent).
fn in_port(p: &Port, flying: &Flying) -> u64 {
    p.queue.len() as u64 + p.control.iter().filter(|c| !c.is_pfc()).count() as u64 + on_wire(p, flying)
}

/// Checks that each partition accounts for its packets by itself: what its hosts sent and what
/// arrived over its cut links is delivered to its hosts, dropped there, sent across a cut link, or
/// still in its queues and on its own links. (Counts moved between partitions leave the run's
/// sums unchanged; only this catches them.) A shard on a thread holds nothing of the
/// partitions it does not run, so this holds for them trivially.
fn partitions_conserve(w: &World) -> Result<(), String> {
    let (net, flying, parts) = (w.fabric(), w.flying(), w.partitions());
    let mut held = vec![0u64; parts.count];
    for p in &net.ports {
        held[parts.of_node[p.node as usize].index()] += in_port(p, flying);
    }
    for sw in &net.switches {
        if let Some(tor) = sw.tor.as_deref() {
            held[parts.of_node[sw.node as usize].index()] += tor.queued().count() as u64;
        }
    }
    let counters = w.partition_counters();
    for (part, c) in counters.iter().enumerate() {
        let entered = c.packets_sent + c.arrived_across;
        let left = c.packets_delivered + c.drops() + c.sent_across;
        if entered != left + held[part] {
            return Err(format!(
                "packet conservation broken in partition {part}: sent {} + arrived across {} != delivered {} + dropped {} + sent across {} + held {}",
                c.packets_sent,
                c.arrived_across,
                c.packets_delivered,
                c.drops(),
                c.sent_across,
                held[part]
            ));
        }
    }
    Ok(())
}

/// What crossed between partitions: packets sent across, arrived across, and still on the cut
/// links (in a shard on a thread: its own share of each).
pub(crate) fn across(w: &World) -> [u64; 3] {
    let (sent, arrived) = w.partition_counters().iter().fold((0, 0), |(s, a), c| (s + c.sent_across, a + c.arrived_across));
    [sent, arrived, on_cut_links(w).count() as u64]
}

/// Checks that what was sent across and has not arrived is on the cut links.
pub(crate) fn across_conserves([sent, arrived, on_cut_links]: [u64; 3]) -> Result<(), String> {
    if sent != arrived + on_cut_links {
        return Err(format!("packet conservation broken across partitions: sent across {sent} != arrived {arrived} + on cut links {on_cut_links}"));
    }
    Ok(())
}

/// Checks conservation: every packet sent is delivered, dropped or still in the network; every
/// switch's buffer holds exactly what its queues hold; every application got each byte once and
/// in order, as counted apart from the transport. A world gathered from threads had its packets
/// checked in each thread's shard before (`world/threads.rs`).
pub fn check_conservation(w: &World) -> Result<(), String> {
    match w.checked_apart() {
        Some(packets) => packets.clone()?,
        None => {
            check_packets(w, true)?;
            if w.partitions().count > 1 {
                partitions_conserve(w)?;
                across_conserves(across(w))?;
            }
        }
    }
    check_flows(w)
}

/// The packet checks of a shard that runs some of the partitions on a thread: each of its
/// partitions conserves alone, and its stores, buffers and hop records add up.
pub(crate) fn check_shard(w: &World) -> Result<(), String> {
    partitions_conserve(w)?;
    check_packets(w, false)
}

/// Checks that the wire store holds what the wires do, that every packet sent is delivered,
/// dropped or still in the network (`whole`: the world runs every partition), that buffers hold
/// what their queues do, and that every hop-record stack in use is held.
fn check_packets(w: &World, whole: bool) -> Result<(), String> {
    let net = w.fabric();
    let flying = w.flying();
    let c = w.counters();
    let on_wires = net.ports.iter().map(|p| p.link.in_flight.len()).sum::<usize>() + w.on_cut_links().count();
    if flying.len() != on_wires {
        return Err(format!("wire store broken: {} packets stored != {} on the wires", flying.len(), on_wires));
    }
    let in_voqs = net.switches.iter().filter_map(|s| s.tor.as_deref()).map(|t| t.queued().count() as u64).sum::<u64>();
    let in_network: u64 = net.ports.iter().map(|p| in_port(p, flying)).sum::<u64>() + in_voqs + on_cut_links(w).count() as u64;
    if whole && c.packets_sent != c.packets_delivered + c.drops() + in_network {
        return Err(format!(
            "packet conservation broken: sent {} != delivered {} + dropped {} + in network {}",
            c.packets_sent,
            c.packets_delivered,
            c.drops(),
            in_network
        ));
    }
    for sw in &net.switches {
        let n = sw.node as usize;
        let ports = &net.ports[net.port_base[n] as usize..net.port_base[n + 1] as usize];
        let queued: u64 = ports.iter().map(|p| p.queue.bytes()).sum();
        if queued != sw.buffer.used {
            return Err(format!(
                "buffer accounting broken at {}: {} bytes used != {} bytes queued",
                net.node_names[n], sw.buffer.used, queued
            ));
        }
        if let Some(pfc) = &sw.pfc {
            let lossless: u64 =
                ports.iter().flat_map(|p| p.queue.iter()).filter(|p| pfc.cfg.is_lossless(p.prio)).map(|p| p.wire_bytes as u64).sum();
            if lossless != pfc.held_total() {
                return Err(format!(
                    "PFC accounting broken at {}: {} bytes held by ingress != {} lossless bytes queued",
                    net.node_names[n],
                    pfc.held_total(),
                    lossless
                ));
            }
        }
    }
    // Every hop-record stack in use is held by a packet in the network or a NIC queue, or by
    // a receiver about to echo it; anything else leaked or was freed twice.
    let voqs = net.switches.iter().filter_map(|s| s.tor.as_deref()).flat_map(|t| t.queued());
    let queued = net.ports.iter().flat_map(|p| p.queue.iter().chain(p.link.in_flight.iter().map(|&(_, i)| flying.get(i)))).chain(voqs);
    let queued = queued.chain(w.on_cut_links().map(|(_, i)| flying.get(i)));
    // Replies a host's CPU has not finished producing are held by the host.
    let cpu_jobs = || w.cpus().iter().flatten().flat_map(|c| c.jobs());
    let held_by_packets = queued
        .chain(w.nics().iter().flat_map(|n| n.ctrl.iter()))
        .chain(cpu_jobs().flat_map(|j| j.io.replies.iter()))
        .filter(|p| p.hops.is_some())
        .count();
    let held_by_receivers = w.flows().iter().filter(|f| f.server.as_ref().is_some_and(ServerEnd::holds_hop_stack)).count();
    if held_by_packets + held_by_receivers != w.hop_slab().in_use() {
        return Err(format!(
            "hop-record conservation broken: {} stacks in use != {} held by packets and receivers",
            w.hop_slab().in_use(),
            held_by_packets + held_by_receivers
        ));
    }
    Ok(())
}

/// Checks that every application got each byte once and in order, as counted apart from the
/// transport, and no more than the sender saw acknowledged.
fn check_flows(w: &World) -> Result<(), String> {
    let mut in_cpu: HashMap<FlowId, u64> = HashMap::new();
    for j in w.cpus().iter().flatten().flat_map(|c| c.jobs()) {
        *in_cpu.entry(j.flow).or_default() += j.io.delivered.map_or(0, |d| d.1);
    }
    // Bytes a host's CPU is still handing over count as delivered.
    let got_by = |f: &Flow| f.bytes_delivered() + in_cpu.get(&f.id).copied().unwrap_or(0);
    for f in w.flows() {
        if let Some(fault) = f.delivery_fault() {
            return Err(fault.to_string());
        }
        let got = got_by(f);
        // A spliced client connection's bytes end at the proxy's application below the splice
        // point and at the backend's above it.
        let end_to_end = f.spliced_to().map_or(got, |b| got.max(got_by(&w.flows()[b.index()])));
        if let Some(in_order) = f.server.as_ref().map(ServerEnd::received) {
            if got != in_order {
                return Err(format!("flow {}: the application got {got} bytes but the receiver holds {in_order} in order", f.id));
            }
        }
        if let Some(acked) = f.client.as_ref().map(ClientEnd::acknowledged) {
            if acked > end_to_end {
                return Err(format!("flow {}: sender saw {acked} acknowledged but the application got {end_to_end}", f.id));
            }
        }
        if let Some(size) = f.size {
            if got > size {
                return Err(format!("flow {}: delivered {got} of {size} bytes", f.id));
            }
            if f.finish.is_some() && end_to_end != size {
                return Err(format!("flow {}: finished with {end_to_end} of {size} bytes delivered", f.id));
            }
        }
    }
    Ok(())
}
