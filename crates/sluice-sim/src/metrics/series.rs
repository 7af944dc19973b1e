//! Sampled time series: queue depth per port and congestion window per flow.

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
