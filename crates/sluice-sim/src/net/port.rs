//! An egress port: a serializer at line rate in front of a link, with its queue and counters.

use super::link::Link;
use super::queue::PortQueue;
use crate::time::{Rate, Time};

/// One egress port of a node, owning the outgoing direction of its link.
#[derive(Debug)]
pub struct Port {
    /// Node this port belongs to.
    pub node: u32,
    /// Local port number at the node.
    pub local: u16,
    /// Node at the far end of the link.
    pub peer_node: u32,
    /// Line rate.
    pub rate: Rate,
    /// The outgoing wire.
    pub link: Link,
    /// Packets waiting to be serialized.
    pub queue: PortQueue,
    /// The serializer is busy until then.
    pub busy_until: Time,
    /// A transmit-done event is scheduled.
    pub tx_event_pending: bool,
    /// Bytes sent on the wire.
    pub tx_bytes: u64,
    /// Packets sent on the wire.
    pub tx_packets: u64,
}

impl Port {
    /// An idle port.
    pub fn new(node: u32, local: u16, peer_node: u32, rate: Rate, link: Link, bands: usize) -> Port {
        Port {
            node,
            local,
            peer_node,
            rate,
            link,
            queue: PortQueue::new(bands),
            busy_until: Time::ZERO,
            tx_event_pending: false,
            tx_bytes: 0,
            tx_packets: 0,
        }
    }

    /// True when the serializer is free at `now`.
    #[inline]
    pub fn idle(&self, now: Time) -> bool {
        self.busy_until <= now
    }

    /// Fraction of line rate used over [0, `over`]: bytes sent x 8 / (rate x time).
    pub fn utilization(&self, over: Time) -> f64 {
        let capacity = self.rate.0 as f64 * over.secs_f64();
        if capacity > 0.0 {
            self.tx_bytes as f64 * 8.0 / capacity
        } else {
            0.0
        }
    }
}
