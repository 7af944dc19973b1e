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
#[derive(Clone, Debug, Default)]
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
    /// The packets kept (with the time each started on the wire), in the order one event list
    /// sends them.
    pub packets: Vec<(Time, Packet)>,
    /// The tie key of the event that sent each packet kept, by which packets that partitions
    /// sent apart are put in order.
    ties: Vec<u64>,
    /// Packets past `max_packets`, not kept.
    pub overflow: u64,
    /// Partitions take turns window by window: packets come in turn order within a window, and
    /// are put in order, and past `max_packets` cut, at its end ([`Self::settle`]).
    windowed: bool,
    /// Packets kept before the current window.
    settled: usize,
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

    /// Partitions take turns window by window from now on.
    pub fn by_windows(&mut self) {
        self.windowed = true;
    }

    /// A window ended: puts its packets in order and keeps the first `max_packets` of the run.
    pub fn settle(&mut self) {
        if self.packets.len() > self.settled {
            self.sort_from(self.settled);
            self.cut();
            self.settled = self.packets.len();
        }
    }

    /// Puts the packets from `from` on in order: by time, then the sending event's tie key.
    fn sort_from(&mut self, from: usize) {
        let mut tail: Vec<(u64, (Time, Packet))> = self.ties.drain(from..).zip(self.packets.drain(from..)).collect();
        tail.sort_by_key(|&(tie, (t, _))| (t, tie));
        for (tie, p) in tail {
            self.ties.push(tie);
            self.packets.push(p);
        }
    }

    /// Keeps the first `max_packets`, counting the rest.
    fn cut(&mut self) {
        let over = self.packets.len().saturating_sub(self.max_packets as usize);
        self.packets.truncate(self.max_packets as usize);
        self.ties.truncate(self.max_packets as usize);
        self.overflow += over as u64;
    }

    /// Takes in the captures the other threads of a run kept, each settled, and keeps the first
    /// `max_packets` of them all in the order one event list sends them.
    pub fn merge(&mut self, others: impl IntoIterator<Item = Capture>) {
        for c in others {
            self.overflow += c.overflow;
            self.packets.extend(c.packets);
            self.ties.extend(c.ties);
        }
        self.sort_from(0);
        self.cut();
        self.settled = self.packets.len();
    }

    /// Sees `pkt` start on the wire of port `port` at `now`, in the event with tie key `tie`.
    #[inline]
    pub fn on_wire(&mut self, port: u32, pkt: &Packet, now: Time, tie: u64) {
        let p = port as usize;
        let wanted = self.ports[p] || (self.host_ports[p] && self.flows.get(pkt.flow as usize).copied().unwrap_or(false));
        if !wanted {
            return;
        }
        // By windows, a packet may come before one kept in this window until it settles; once
        // the run's first `max_packets` are settled, none can.
        let room = if self.windowed { self.settled < self.max_packets as usize } else { (self.packets.len() as u64) < self.max_packets };
        match room {
            true => {
                self.packets.push((now, *pkt));
                self.ties.push(tie);
            }
            false => self.overflow += 1,
        }
    }
}
