//! An egress queue: strict-priority bands of packets, with byte counts per band and of the
//! unimportant (TLT) packets queued.

use crate::packet::{Colour, Packet};
use crate::prefetch::prefetch;
use std::collections::VecDeque;

/// Strict-priority bands of one egress port (band 0 is served first).
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct PortQueue {
    // First: the byte count is all an idle port reads, and `Port` lays the queue out early.
    bytes: u64,
    unimportant: u64,
    bands: Vec<VecDeque<Packet>>,
    band_bytes: Vec<u64>,
}

impl PortQueue {
    /// A queue with `bands` priority levels.
    pub fn new(bands: usize) -> PortQueue {
        PortQueue { bands: (0..bands.max(1)).map(|_| VecDeque::new()).collect(), band_bytes: vec![0; bands.max(1)], bytes: 0, unimportant: 0 }
    }

    /// Bytes queued over all bands.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes of unimportant packets queued over all bands (what TLT's colour threshold bounds).
    #[inline]
    pub fn unimportant_bytes(&self) -> u64 {
        self.unimportant
    }

    /// Bytes queued in the band a packet of priority `prio` joins.
    #[inline]
    pub fn band_bytes(&self, prio: u8) -> u64 {
        self.band_bytes[self.band(prio)]
    }

    #[inline]
    fn band(&self, prio: u8) -> usize {
        (prio as usize).min(self.bands.len() - 1)
    }

    /// True when nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // Every packet occupies wire bytes, so the byte count alone tells.
        self.bytes == 0
    }

    /// Appends a packet to its band.
    #[inline]
    pub fn push(&mut self, p: Packet) {
        let b = self.band(p.prio);
        self.band_bytes[b] += p.wire_bytes as u64;
        self.bytes += p.wire_bytes as u64;
        if p.colour == Colour::Unimportant {
            self.unimportant += p.wire_bytes as u64;
        }
        self.bands[b].push_back(p);
    }

    /// Removes the head of the highest-priority non-empty band.
    #[inline]
    pub fn pop(&mut self) -> Option<Packet> {
        for (b, q) in self.bands.iter_mut().enumerate() {
            if let Some(p) = q.pop_front() {
                self.band_bytes[b] -= p.wire_bytes as u64;
                self.bytes -= p.wire_bytes as u64;
                if p.colour == Colour::Unimportant {
                    self.unimportant -= p.wire_bytes as u64;
                }
                return Some(p);
            }
        }
        None
    }

    /// Removes the head of the highest-priority non-empty band whose bit in `paused` is clear.
    #[inline]
    pub fn pop_unpaused(&mut self, paused: u8) -> Option<Packet> {
        if paused == 0 {
            return self.pop();
        }
        let b = (0..self.bands.len()).find(|&b| !self.bands[b].is_empty() && !self.band_paused(b, paused))?;
        let p = self.bands[b].pop_front()?;
        self.band_bytes[b] -= p.wire_bytes as u64;
        self.bytes -= p.wire_bytes as u64;
        if p.colour == Colour::Unimportant {
            self.unimportant -= p.wire_bytes as u64;
        }
        Some(p)
    }

    /// A band is paused when the priority its head packet carries is (the last band holds every
    /// priority from its own up, so it is held by its head's).
    fn band_paused(&self, b: usize, paused: u8) -> bool {
        self.bands[b].front().is_some_and(|p| (p.prio as usize) < 8 && paused & (1 << p.prio) != 0)
    }

    /// Starts loading the packet `pop` will return next. A switch calls it as it sends the
    /// current head: the next leaves a serialization later, and in a large fabric a queued
    /// packet has long left the cache.
    #[inline]
    pub fn prefetch_head(&self) {
        if let Some(p) = self.bands.iter().find_map(VecDeque::front) {
            prefetch(p);
        }
    }

    /// Packets queued over all bands.
    pub fn len(&self) -> usize {
        self.bands.iter().map(|b| b.len()).sum()
    }

    /// Every queued packet, band by band (for end-of-run accounting).
    pub fn iter(&self) -> impl Iterator<Item = &Packet> {
        self.bands.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_priorities_are_skipped() {
        let mut q = PortQueue::new(2);
        q.push(Packet { prio: 0, wire_bytes: 100, seq: 1, ..Packet::default() });
        q.push(Packet { prio: 1, wire_bytes: 50, seq: 2, ..Packet::default() });
        assert_eq!(q.pop_unpaused(0b01).map(|p| p.seq), Some(2), "priority 0 paused: band 1 goes");
        assert_eq!(q.pop_unpaused(0b01).map(|p| p.seq), None);
        assert_eq!(q.pop_unpaused(0).map(|p| p.seq), Some(1));
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn strict_priority_serves_band_zero_first() {
        let mut q = PortQueue::new(2);
        q.push(Packet { prio: 1, wire_bytes: 100, seq: 1, ..Packet::default() });
        q.push(Packet { prio: 0, wire_bytes: 50, seq: 2, ..Packet::default() });
        q.push(Packet { prio: 7, wire_bytes: 10, seq: 3, ..Packet::default() });
        assert_eq!(q.bytes(), 160);
        assert_eq!(q.band_bytes(1), 110, "priorities beyond the last band share it");
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|p| p.seq)).collect();
        assert_eq!(order, vec![2, 1, 3]);
        assert_eq!(q.bytes(), 0);
    }
}
