//! A one-way wire: propagation delay, random loss, and the packets on it in arrival order; and
//! the store the packets on all wires live in while they fly.

use crate::ids::PartId;
use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// One direction of a physical link. Arrivals are FIFO (constant delay behind one serializer), so
/// packets wait here in order with their arrival times, and only the head packet has an arrival
/// event in the queue: the event list holds one entry per busy link, not one per packet. A link
/// between partitions schedules every packet's arrival as it is sent instead, and keeps no queue:
/// the packet is the far partition's once it is sent.
#[derive(Clone, Debug, Default)]
pub struct Link {
    /// Propagation delay.
    pub delay: Time,
    /// Probability that a packet is corrupted and lost on this wire.
    pub loss: f64,
    /// The link is down: everything sent on it is lost (`net/failure.rs`).
    pub down: bool,
    /// It may lose what is sent on it: it is down or has a loss probability. One flag, so a
    /// sound link costs the serializer a single test.
    pub lossy: bool,
    /// The link joins two partitions.
    pub cut: bool,
    /// The partition at its far end.
    pub far_part: PartId,
    /// Packets on the wire (their places in the `Flying` store) with their arrival times,
    /// earliest first; always empty on a cut link, whose arrival events carry its packets.
    pub in_flight: VecDeque<(Time, u32)>,
}

impl Link {
    /// A sound wire of propagation `delay` that loses each packet with probability `loss`.
    pub fn new(delay: Time, loss: f64) -> Link {
        Link { delay, loss, lossy: loss > 0.0, ..Link::default() }
    }

    /// Takes the link down, or brings it back up.
    pub fn set_down(&mut self, down: bool) {
        self.down = down;
        self.lossy = down || self.loss > 0.0;
    }
}

/// The packets on the wires, each in a place that stays put while it flies.
///
/// A freed place is the next one taken, so a switch forwarding a packet writes it back into the
/// cache lines it just read it from, and a wire holds 16-byte handles rather than the packets:
/// writing each packet into its next wire's ring, a line not touched for a whole flight, was two
/// thirds of a fat tree's cache misses on writes. (The `slab` crate keeps the same free list, but
/// gives no address of a place without reading it, which the event loop's prefetch needs.)
#[derive(Debug, Default)]
pub struct Flying {
    places: Vec<Packet>,
    free: Vec<u32>,
}

impl Flying {
    /// Stores `pkt` and returns its place.
    #[inline]
    pub fn put(&mut self, pkt: &Packet) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.places[i as usize] = *pkt;
                i
            }
            None => {
                self.places.push(*pkt);
                (self.places.len() - 1) as u32
            }
        }
    }

    /// Takes the packet out of place `i`, which becomes free.
    #[inline]
    pub fn take(&mut self, i: u32) -> Packet {
        self.free.push(i);
        self.places[i as usize]
    }

    /// The packet in place `i` (a place that holds one).
    pub fn get(&self, i: u32) -> &Packet {
        &self.places[i as usize]
    }

    /// Where place `i` is in memory, for a prefetch; no read.
    #[inline(always)]
    pub fn address(&self, i: u32) -> Option<*const Packet> {
        self.places.get(i as usize).map(|p| p as *const Packet)
    }

    /// Packets stored.
    pub fn len(&self) -> usize {
        self.places.len() - self.free.len()
    }

    /// True when no packet is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_place_is_taken_next_and_packets_come_back_whole() {
        let mut f = Flying::default();
        let (mut a, mut b) = (Packet::default(), Packet::default());
        a.seq = 1;
        b.seq = 2;
        let (ia, ib) = (f.put(&a), f.put(&b));
        assert_ne!(ia, ib);
        assert_eq!(f.len(), 2);
        assert_eq!(f.take(ia).seq, 1);
        assert_eq!(f.len(), 1);
        assert_eq!(f.put(&a), ia, "the place just freed is reused");
        assert_eq!(f.get(ib).seq, 2);
        assert_eq!(f.take(ib).seq, 2);
        assert_eq!(f.take(ia).seq, 1);
        assert!(f.is_empty());
    }
}
