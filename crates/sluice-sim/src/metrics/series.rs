//! Sampled time series (queue depth per port, congestion window per flow) and per-port totals.

use super::ns;
use crate::world::World;
use std::io::{self, Write};

/// Writes `queues.csv` (`t_ns,node,port,bytes`).
pub fn write_queues_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "t_ns,node,port,bytes")?;
    for s in world.queue_samples() {
        let port = &world.ports()[s.port as usize];
        writeln!(out, "{},{},{},{}", ns(s.t), world.node_name(port.node), port.local, s.bytes)?;
    }
    Ok(())
}

/// Writes `cwnd.csv` (`t_ns,flow,cwnd_bytes`).
pub fn write_cwnd_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "t_ns,flow,cwnd_bytes")?;
    for s in world.cwnd_samples() {
        writeln!(out, "{},{},{}", ns(s.t), s.flow, s.cwnd)?;
    }
    Ok(())
}

/// Writes `requests.csv` (`class,start_ns,end_ns,latency_ns`): every completed request (or
/// incast round) of closed-loop traffic, in completion order.
pub fn write_requests_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "class,start_ns,end_ns,latency_ns")?;
    for r in world.requests() {
        writeln!(out, "{},{},{},{}", world.classes()[r.class].name, ns(r.start), ns(r.end), ns(r.end - r.start))?;
    }
    Ok(())
}

/// Writes `utilization.csv` (`node,port,tx_bytes,utilization`): every port's bytes sent over the
/// run and their share of its line rate.
pub fn write_utilization_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "node,port,tx_bytes,utilization")?;
    for p in world.ports() {
        writeln!(out, "{},{},{},{:.4}", world.node_name(p.node), p.local, p.tx_bytes, p.utilization(world.now()))?;
    }
    Ok(())
}
