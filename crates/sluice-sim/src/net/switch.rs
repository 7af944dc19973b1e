//! An output-queued switch: shared buffer, ECN marking policy, ECMP next-hop choice, and TCP-INT
//! stamping.

use super::queue::{EcnMarking, SharedBuffer};
use crate::packet::tcp_int::{hop_int_val, IntEncoding, TcpInt, LAT_MAX};
use crate::time::Time;

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
    /// TCP-INT stamping; `None` on legacy switches.
    pub int: Option<IntStamping>,
}

/// How an INT-capable switch stamps the TCP-INT option at egress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntStamping {
    /// INTval encoding: queue threshold and shifts.
    pub encoding: IntEncoding,
    /// Unit of the Lat field.
    pub lat_unit: Time,
    /// Processing latency the hop adds besides queueing.
    pub processing: Time,
}

impl IntStamping {
    /// Raises the option's INTval to this hop's value (setting ID to the packet's TTL here when it
    /// raises it) and adds the hop's residence time to Lat, saturating at 24 bits.
    pub fn stamp(&self, opt: &mut TcpInt, qdepth: u64, util: f64, ttl: u8, residence: Time) {
        let v = hop_int_val(qdepth, (util * 100.0).round() as u64, &self.encoding);
        if v > opt.int_val {
            opt.int_val = v;
            opt.id = ttl;
        }
        let add = (residence + self.processing).0 / self.lat_unit.0;
        opt.lat = (opt.lat as u64 + add).min(LAT_MAX as u64) as u32;
    }
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

#[cfg(test)]
mod int_tests {
    use super::*;

    #[test]
    fn three_hops_keep_the_max_its_hop_and_the_latency_sum() {
        let st = IntStamping { encoding: IntEncoding::default(), lat_unit: Time(1000), processing: Time(500_000) };
        let mut opt = TcpInt::default();
        // hop 1 (TTL 63): 40% utilized, 1 us queueing; hop 2 (TTL 62): 64 KiB queued, 5 us;
        // hop 3 (TTL 61): 90% utilized, idle queue.
        st.stamp(&mut opt, 0, 0.40, 63, Time(1_000_000));
        st.stamp(&mut opt, 64 << 10, 0.95, 62, Time(5_000_000));
        st.stamp(&mut opt, 0, 0.90, 61, Time::ZERO);
        assert_eq!(opt.int_val, 0x80 | 8);
        assert_eq!(opt.id, 62);
        // 1 + 5 + 0 us queueing plus 3 x 0.5 us processing, in ns.
        assert_eq!(opt.lat, 7_500);
    }
}
