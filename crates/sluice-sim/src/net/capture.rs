//! A capture tap on ports: keeps the packets that start on chosen wires (or that chosen flows'
//! hosts send) for `trace.pcap`, up to a limit.

use crate::packet::Packet;
use crate::time::Time;

/// What to capture into `trace.pcap`.
#[derive(Clone, Debug)]
pub struct CaptureSpec {
    /// Per global port id: capture every packet that starts on its wire.
    pub ports: Vec<bool>,
    /// Flows whose packets are captured at their hosts' NICs.
    pub flows: Vec<u32>,
    /// Keep at most this many packets.
    pub max_packets: u64,
    /// Whole frames rather than headers.
    pub full_frames: bool,
}

/// Packets captured during the run, written to `trace.pcap` afterwards.
#[derive(Debug, Default)]
pub struct Capture {
    /// Per global port id: captured.
    ports: Vec<bool>,
    /// Per global port id: the port is a host's NIC.
    host_ports: Vec<bool>,
    /// Per flow id: captured at its hosts' NICs.
    flows: Vec<bool>,
    max_packets: u64,
    /// Whole frames rather than headers.
    pub full_frames: bool,
    /// (time the packet started on the wire, the packet).
    pub packets: Vec<(Time, Packet)>,
    /// Packets past `max_packets`, not kept.
    pub overflow: u64,
}

impl Capture {
    /// A tap for `spec`; `host_ports` says which global ports are NICs.
    pub fn new(spec: CaptureSpec, host_ports: Vec<bool>) -> Capture {
        let mut flows = Vec::new();
        for &f in &spec.flows {
            if flows.len() <= f as usize {
                flows.resize(f as usize + 1, false);
            }
            flows[f as usize] = true;
        }
        Capture { ports: spec.ports, host_ports, flows, max_packets: spec.max_packets, full_frames: spec.full_frames, ..Capture::default() }
    }

    /// Sees `pkt` start on the wire of port `port` at `now`.
    #[inline]
    pub fn on_wire(&mut self, port: u32, pkt: &Packet, now: Time) {
        let p = port as usize;
        let wanted = self.ports[p] || (self.host_ports[p] && self.flows.get(pkt.flow as usize).copied().unwrap_or(false));
        if !wanted {
            return;
        }
        if (self.packets.len() as u64) < self.max_packets {
            self.packets.push((now, *pkt));
        } else {
            self.overflow += 1;
        }
    }
}
