//! An output-queued switch: shared buffer, ECN marking policy, and ECMP next-hop choice.

use super::queue::{EcnMarking, SharedBuffer};

/// Per-switch state; its ports live in the world's port arena.
#[derive(Debug)]
pub struct Switch {
    /// The switch's node id.
    pub node: u32,
    /// Shared packet buffer.
    pub buffer: SharedBuffer,
    /// ECN marking at enqueue.
    pub ecn: EcnMarking,
    /// Drop, rather than queue, non-ECT packets where ECT ones would be marked.
    pub drop_non_ect: bool,
    /// Per-switch salt so ECMP choices are independent across tiers (avoids polarization).
    pub salt: u32,
}

/// Picks one of `n` equal-cost next hops for a flow hash at a switch with `salt`.
#[inline]
pub fn ecmp_pick(hash: u32, salt: u32, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    // A 32-bit finalizer (murmur3 fmix) spreads the combined bits before the modulo.
    let mut h = hash ^ salt.rotate_left(16) ^ salt;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    ((h as u64 * n as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecmp_spreads_flows_evenly() {
        let n = 4;
        let mut counts = [0u32; 4];
        for flow in 0..40_000u32 {
            counts[ecmp_pick(flow.wrapping_mul(2_654_435_761), 7, n)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(ecmp_pick(123, 1, 1), 0);
    }
}
