//! HPCC's per-hop INT records (Li et al., SIGCOMM 2019): each INT-capable switch a data packet
//! leaves appends {queue length, cumulative transmitted bytes, timestamp, link rate} of its egress
//! port; the receiver copies the stack onto its ACK.
//!
//! Packets move by value through queues, so the records do not live in [`Packet`](super::Packet):
//! a packet holds a [`HopIdx`] into the world's [`HopSlab`], an arena of stacks recycled through
//! a free list. A stack is allocated when the sender emits a data segment, moves with the packet,
//! then onto the ACK that echoes it, and is freed when the sender has read it or when a packet
//! holding it is dropped, so the slab never grows past the stacks in flight.
//!
//! Wire size: HPCC's implementation (the ns-3 `IntHeader` of the HPCC simulator) reserves a
//! fixed-size header on every data packet and ACK: a 2-byte hop count plus five 8-byte hop slots
//! (time 24 bits, bytes 20 bits, queue 17 bits, rate 3 bits), [`HEADER_BYTES`] = 42. The space is
//! reserved by the sender rather than grown per hop, so a packet's size never changes inside the
//! network (shared-buffer accounting charges at enqueue and credits at dequeue the same bytes) and
//! the header counts the same on every path. It is a shim inside the IP packet, too long for TCP's
//! 40 bytes of option space, so it comes out of the MSS to keep frames within the MTU. The
//! simulator keeps each field at full precision; only its size on the wire follows the packing.
//! Past the fifth hop the reference implementation wraps around and overwrites the first slots;
//! here the first five stay and the rest are counted, so a record always names the hop it says.

use crate::time::{Rate, Time};
use std::num::NonZeroU32;

/// Hops a stack records; later hops are counted in [`HopStack::unrecorded`] but not recorded.
pub const MAX_HOPS: usize = 5;
/// Bytes per hop slot on the wire.
pub const HOP_BYTES: u32 = 8;
/// Bytes of the hop-count field.
pub const COUNT_BYTES: u32 = 2;
/// Bytes the header adds to every data packet and ACK of a flow carrying HPCC INT (42).
pub const HEADER_BYTES: u32 = COUNT_BYTES + HOP_BYTES * MAX_HOPS as u32;

/// What one switch egress port reported as a data packet left it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopRecord {
    /// Bytes queued at the port after the packet left its queue.
    pub qlen: u64,
    /// Bytes the port had transmitted before this packet (cumulative since the start).
    pub tx_bytes: u64,
    /// When the packet started on the wire.
    pub ts: Time,
    /// The port's line rate B.
    pub rate: Rate,
}

/// Up to [`MAX_HOPS`] records in path order, and how many hops beyond them went unrecorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopStack {
    len: u8,
    unrecorded: u8,
    records: [HopRecord; MAX_HOPS],
}

impl HopStack {
    /// The recorded hops, first switch first.
    pub fn hops(&self) -> &[HopRecord] {
        &self.records[..self.len as usize]
    }

    /// INT-capable hops past the fifth, which found no free slot (saturating at 255).
    pub fn unrecorded(&self) -> u8 {
        self.unrecorded
    }

    /// Appends one hop's record, or counts it when the slots are full.
    pub fn push(&mut self, rec: HopRecord) {
        if (self.len as usize) < MAX_HOPS {
            self.records[self.len as usize] = rec;
            self.len += 1;
        } else {
            self.unrecorded = self.unrecorded.saturating_add(1);
        }
    }

    /// A stack holding `hops` (the first [`MAX_HOPS`] of them recorded), for tests and tools.
    pub fn from_hops(hops: &[HopRecord]) -> HopStack {
        let mut s = HopStack::default();
        for &h in hops {
            s.push(h);
        }
        s
    }
}

/// A handle to a stack in the [`HopSlab`]; `NonZeroU32` so `Option<HopIdx>` costs 4 bytes in a
/// packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HopIdx(NonZeroU32);

impl HopIdx {
    fn slot(self) -> usize {
        self.0.get() as usize - 1
    }
}

/// The world's arena of hop stacks with a free list: no allocation once it has grown to the
/// number of stacks in flight at once.
#[derive(Debug, Default)]
pub struct HopSlab {
    stacks: Vec<HopStack>,
    /// Whether each slot is handed out; catches a double free or a read after free in debug
    /// builds.
    live: Vec<bool>,
    free: Vec<u32>,
    in_use: usize,
}

impl HopSlab {
    /// An empty stack.
    pub fn alloc(&mut self) -> HopIdx {
        self.in_use += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.stacks[s as usize] = HopStack::default();
                self.live[s as usize] = true;
                s as usize
            }
            None => {
                self.stacks.push(HopStack::default());
                self.live.push(true);
                self.stacks.len() - 1
            }
        };
        HopIdx(NonZeroU32::new(slot as u32 + 1).expect("fewer than 2^32 - 1 stacks"))
    }

    /// A stack holding `stack`'s records: one that crossed from another thread's slab.
    pub fn put(&mut self, stack: HopStack) -> HopIdx {
        let i = self.alloc();
        self.stacks[i.slot()] = stack;
        i
    }

    /// Returns a stack to the free list.
    pub fn free(&mut self, i: HopIdx) {
        let s = i.slot();
        debug_assert!(self.live[s], "hop stack {s} freed twice");
        self.live[s] = false;
        self.free.push(s as u32);
        self.in_use -= 1;
    }

    /// The stack behind a handle.
    pub fn get(&self, i: HopIdx) -> &HopStack {
        debug_assert!(self.live[i.slot()], "hop stack {} read after free", i.slot());
        &self.stacks[i.slot()]
    }

    /// Appends a hop's record to a stack.
    pub fn push(&mut self, i: HopIdx, rec: HopRecord) {
        debug_assert!(self.live[i.slot()], "hop stack {} written after free", i.slot());
        self.stacks[i.slot()].push(rec);
    }

    /// Stacks handed out and not yet freed.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Slots the slab has grown to (its high-water mark).
    pub fn capacity(&self) -> usize {
        self.stacks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(q: u64) -> HopRecord {
        HopRecord { qlen: q, tx_bytes: q * 10, ts: Time(q), rate: Rate(100) }
    }

    #[test]
    fn header_is_hpcc_s_42_bytes() {
        assert_eq!(HEADER_BYTES, 42);
    }

    #[test]
    fn a_stack_records_five_hops_and_counts_the_rest() {
        let s = HopStack::from_hops(&(1..=7).map(rec).collect::<Vec<_>>());
        assert_eq!(s.hops().len(), 5);
        assert_eq!(s.hops()[4], rec(5));
        assert_eq!(s.unrecorded(), 2);
    }

    #[test]
    fn freed_slots_are_reused_cleared() {
        let mut slab = HopSlab::default();
        let a = slab.alloc();
        let b = slab.alloc();
        slab.push(a, rec(1));
        slab.free(a);
        assert_eq!(slab.in_use(), 1);
        let c = slab.alloc();
        assert_eq!(c, a, "the free list hands the slot back");
        assert!(slab.get(c).hops().is_empty(), "a reused stack starts empty");
        slab.free(b);
        slab.free(c);
        assert_eq!((slab.in_use(), slab.capacity()), (0, 2));
    }

    #[test]
    fn an_optional_handle_costs_four_bytes() {
        assert_eq!(std::mem::size_of::<Option<HopIdx>>(), 4);
    }
}
