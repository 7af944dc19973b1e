//! A one-way wire: propagation delay, random loss, and the packets on it in arrival order.

use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// One direction of a physical link. Arrivals are FIFO (constant delay behind one serializer), so
/// packets wait here in order with their arrival times, and only the head packet has an arrival
/// event in the queue: the event list holds one entry per busy link, not one per packet.
#[derive(Debug, Default)]
pub struct Link {
    /// Propagation delay.
    pub delay: Time,
    /// Probability that a packet is corrupted and lost on this wire.
    pub loss: f64,
    /// Packets on the wire with their arrival times, earliest first.
    pub in_flight: VecDeque<(Time, Packet)>,
}
