//! Sampled time series (queue depth per port, congestion window per flow), per-port totals and
//! the port map.

use super::{csv_writer, ns};
use crate::world::World;
use std::io::{self, Write};

/// A port by the names scenarios use: its node, an arrow, the node at the far end (`sw6->h13`).
pub fn port_name(world: &World, port: u32) -> String {
    let p = &world.ports()[port as usize];
    format!("{}->{}", world.node_name(p.node), world.node_name(p.peer_node))
}

/// Writes `ports.csv` (`port,node,peer,rate_bps`): every port by name, the node it sends from,
/// the node it sends to and its line rate.
pub fn write_ports_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["port", "node", "peer", "rate_bps"])?;
    for (i, p) in world.ports().iter().enumerate() {
        w.write_record([
            port_name(world, i as u32),
            world.node_name(p.node).to_string(),
            world.node_name(p.peer_node).to_string(),
            p.built_rate.bps().to_string(),
        ])?;
    }
    w.flush()
}

/// Writes `queues.csv` (`t_ns,node,port,bytes`): `port` names the port as ports.csv and
/// scenarios do (`sw6->h13`).
pub fn write_queues_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["t_ns", "node", "port", "bytes"])?;
    for s in world.queue_samples() {
        let port = &world.ports()[s.port as usize];
        w.write_record([ns(s.t), world.node_name(port.node).to_string(), port_name(world, s.port), s.bytes.to_string()])?;
    }
    w.flush()
}

/// Writes `cwnd.csv` (`t_ns,flow,cwnd_bytes`).
pub fn write_cwnd_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["t_ns", "flow", "cwnd_bytes"])?;
    for s in world.cwnd_samples() {
        w.write_record([ns(s.t), s.flow.to_string(), s.cwnd.to_string()])?;
    }
    w.flush()
}

/// Writes `requests.csv` (`class,start_ns,end_ns,latency_ns`): every completed request (or
/// incast round) of closed-loop traffic, in completion order.
pub fn write_requests_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["class", "start_ns", "end_ns", "latency_ns"])?;
    for r in world.requests() {
        w.write_record([world.classes()[r.class].name.clone(), ns(r.start), ns(r.end), ns(r.end - r.start)])?;
    }
    w.flush()
}

/// Writes `pfc.csv` (`port,priority,pauses_sent,pauses_received,paused_ns`): for every port and
/// priority that sent or honoured a PAUSE, the PAUSE frames the port sent upstream (for its own
/// ingress), those it received, and the time it held that priority back.
pub fn write_pfc_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["port", "priority", "pauses_sent", "pauses_received", "paused_ns"])?;
    for (i, p) in world.ports().iter().enumerate() {
        for prio in 0..crate::net::pfc::PRIORITIES as u8 {
            let (sent, received) = (p.pause.sent(prio), p.pause.received(prio));
            if sent > 0 || received > 0 {
                w.write_record([
                    port_name(world, i as u32),
                    prio.to_string(),
                    sent.to_string(),
                    received.to_string(),
                    ns(p.pause.paused_time(prio, world.now())),
                ])?;
            }
        }
    }
    w.flush()
}

/// Writes `utilization.csv` (`node,port,tx_bytes,utilization`): every port, by name as in
/// ports.csv, with its bytes sent over the run and their share of its line rate.
pub fn write_utilization_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["node", "port", "tx_bytes", "utilization"])?;
    for (i, p) in world.ports().iter().enumerate() {
        w.write_record([
            world.node_name(p.node).to_string(),
            port_name(world, i as u32),
            p.tx_bytes.to_string(),
            format!("{:.4}", p.utilization(world.now())),
        ])?;
    }
    w.flush()
}
