//! A one-way wire: propagation delay, random loss, and the packets on it in arrival order.

use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// One direction of a physical link. Arrivals are FIFO (constant delay behind one serializer),
/// so packets wait here in order and an arrival event only names the link.
#[derive(Debug, Default)]
pub struct Link {
    /// Propagation delay.
    pub delay: Time,
    /// Probability that a packet is corrupted and lost on this wire.
    pub loss: f64,
    /// Packets on the wire, earliest arrival first.
    pub in_flight: VecDeque<Packet>,
}
