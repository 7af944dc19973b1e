//! An egress queue: strict-priority bands of packets, with byte counts per band and of the
//! unimportant (TLT) packets queued. A port that trims has one more band, ahead of the others,
//! for the headers it trims (`net/qdisc/trim.rs`).

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
    bands: Box<[VecDeque<Packet>]>,
    band_bytes: Box<[u64]>,
    /// The band each priority joins: its own, the last for those past it, and behind a header
    /// band one further on. A look-up, since every packet finds its band several times.
    band_of: [u8; 16],
}

impl PortQueue {
    /// A queue with `bands` priority levels.
    pub fn new(bands: usize) -> PortQueue {
        PortQueue::with_bands(bands.max(1), 0)
    }

    /// A queue with `bands` priority levels behind a band of trimmed headers, served first.
    pub fn with_header_band(bands: usize) -> PortQueue {
        PortQueue::with_bands(bands.max(1) + 1, 1)
    }

    fn with_bands(n: usize, first: usize) -> PortQueue {
        let band_of = std::array::from_fn(|prio| (prio + first).min(n - 1) as u8);
        PortQueue { bands: (0..n).map(|_| VecDeque::new()).collect(), band_bytes: vec![0; n].into(), bytes: 0, unimportant: 0, band_of }
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
        debug_assert!(prio < 16, "priority {prio}");
        self.band_of[prio as usize & 15] as usize
    }

    /// Bytes of trimmed headers queued (0 without a header band).
    #[inline]
    pub fn header_bytes(&self) -> u64 {
        if self.has_header_band() {
            self.band_bytes[0]
        } else {
            0
        }
    }

    /// Whether the queue has a band for trimmed headers.
    #[inline]
    pub fn has_header_band(&self) -> bool {
        self.band_of[0] == 1
    }

    /// Appends a trimmed header to the header band (a queue that has one).
    pub fn push_header(&mut self, p: Packet) {
        debug_assert!(self.has_header_band(), "a header queued at a port that does not trim");
        self.add(0, &p);
        self.bands[0].push_back(p);
    }

    /// Takes the packet queued last in the band a packet of priority `prio` joins, if `take`
    /// accepts it (what a trimming port's coin may trim instead of the arrival).
    pub fn pop_tail_if(&mut self, prio: u8, take: impl FnOnce(&Packet) -> bool) -> Option<Packet> {
        let b = self.band(prio);
        if !self.bands[b].back().is_some_and(take) {
            return None;
        }
        let p = self.bands[b].pop_back()?;
        self.remove(b, &p);
        Some(p)
    }

    #[inline]
    fn add(&mut self, b: usize, p: &Packet) {
        self.band_bytes[b] += p.wire_bytes as u64;
        self.bytes += p.wire_bytes as u64;
        if p.colour == Colour::Unimportant {
            self.unimportant += p.wire_bytes as u64;
        }
    }

    #[inline]
    fn remove(&mut self, b: usize, p: &Packet) {
        self.band_bytes[b] -= p.wire_bytes as u64;
        self.bytes -= p.wire_bytes as u64;
        if p.colour == Colour::Unimportant {
            self.unimportant -= p.wire_bytes as u64;
        }
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
        self.add(b, &p);
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
        self.remove(b, &p);
        Some(p)
    }

    /// A band is paused when the priority its head packet carries is (the last band holds every
    /// priority from its own up, so it is held by its head's). Trimmed headers never are: only
    /// lossless priorities are paused, and those are never trimmed.
    fn band_paused(&self, b: usize, paused: u8) -> bool {
        self.bands[b].front().is_some_and(|p| (p.prio as usize) < 8 && paused & (1 << p.prio) != 0 && !p.is_trimmed())
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
    fn headers_go_first_and_the_coin_takes_the_newest_of_the_arrival_band() {
        let mut q = PortQueue::with_header_band(2);
        assert_eq!(std::mem::size_of::<PortQueue>(), 64);
        q.push(Packet { prio: 0, wire_bytes: 1000, seq: 1, ..Packet::default() });
        q.push(Packet { prio: 1, wire_bytes: 1000, seq: 2, ..Packet::default() });
        q.push(Packet { prio: 0, wire_bytes: 900, seq: 3, ..Packet::default() });
        let mut h = Packet { prio: 0, wire_bytes: 64, seq: 4, fabric: crate::packet::fabric::TRIMMED, ..Packet::default() };
        q.push_header(h);
        assert_eq!((q.header_bytes(), q.band_bytes(0), q.band_bytes(1), q.bytes()), (64, 1900, 1000, 2964));
        assert!(q.pop_tail_if(0, |p| p.seq == 1).is_none(), "only the newest may be taken");
        let tail = q.pop_tail_if(0, |_| true).unwrap();
        assert_eq!((tail.seq, q.band_bytes(0), q.bytes()), (3, 1000, 2064));
        h.seq = 5;
        q.push_header(h);
        // Priority 0 paused: the headers still go, ahead of everything.
        let order: Vec<u64> = std::iter::from_fn(|| q.pop_unpaused(0b01).map(|p| p.seq)).collect();
        assert_eq!(order, vec![4, 5, 2]);
        assert_eq!(q.pop().map(|p| p.seq), Some(1));
        assert_eq!((q.bytes(), q.header_bytes()), (0, 0));
        assert_eq!(PortQueue::new(1).header_bytes(), 0);
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
