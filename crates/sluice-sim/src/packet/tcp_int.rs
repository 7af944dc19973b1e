//! The TCP-INT option (kind 0x72, 12 bytes): the path's worst INTval, the hop that set it and the
//! summed hop latency, plus the receiver's echo of each.
//!
//! Wire layout, network byte order: kind, length, INTval, INTecr, ID, IDecr, Lat (24 bit),
//! LatEcr (24 bit). INTval bit 7 selects the branch: 0 = link utilization (bits 0-6, shifted right
//! by the switch's `util_shift`), 1 = queue depth (bits 0-6, shifted right by `qdepth_shift`).

use std::fmt;

/// TCP option kind of TCP-INT.
pub const KIND: u8 = 0x72;
/// TCP option length of TCP-INT, kind and length bytes included.
pub const LEN: u8 = 12;
/// Largest value a 24-bit latency field holds.
pub const LAT_MAX: u32 = 0x00ff_ffff;
/// The INTval bit that marks the queue-depth branch.
pub const QDEPTH_FLAG: u8 = 0x80;

/// The decoded option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInt {
    /// The path's maximum INTval so far (0 when the sender adds the option).
    pub int_val: u8,
    /// The INTval the receiver echoes back.
    pub int_ecr: u8,
    /// IP TTL at the hop that raised INTval last.
    pub id: u8,
    /// Echo of `id`.
    pub id_ecr: u8,
    /// Summed hop latency, 24 bits, in the fabric's latency unit.
    pub lat: u32,
    /// Echo of `lat`, 24 bits.
    pub lat_ecr: u32,
}

/// Why bytes are not a TCP-INT option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The kind byte is not 0x72.
    WrongKind(u8),
    /// The length byte is not 12.
    WrongLength(u8),
    /// Fewer bytes than the length byte promises.
    Truncated(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::WrongKind(k) => write!(f, "option kind {k:#04x} is not TCP-INT (0x72)"),
            DecodeError::WrongLength(l) => write!(f, "TCP-INT option length {l}, expected 12"),
            DecodeError::Truncated(n) => write!(f, "TCP-INT option truncated to {n} bytes, expected 12"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl TcpInt {
    /// The 12 wire bytes; latencies above 24 bits saturate.
    pub fn encode(&self) -> [u8; 12] {
        let lat = self.lat.min(LAT_MAX).to_be_bytes();
        let ecr = self.lat_ecr.min(LAT_MAX).to_be_bytes();
        [
            KIND, LEN, self.int_val, self.int_ecr, self.id, self.id_ecr, lat[1], lat[2], lat[3], ecr[1], ecr[2],
            ecr[3],
        ]
    }

    /// Parses an option starting at its kind byte; trailing bytes after the option are ignored.
    pub fn decode(b: &[u8]) -> Result<TcpInt, DecodeError> {
        match b {
            [] | [_] => Err(DecodeError::Truncated(b.len())),
            [k, ..] if *k != KIND => Err(DecodeError::WrongKind(*k)),
            [_, l, ..] if *l != LEN => Err(DecodeError::WrongLength(*l)),
            _ if b.len() < LEN as usize => Err(DecodeError::Truncated(b.len())),
            _ => Ok(TcpInt {
                int_val: b[2],
                int_ecr: b[3],
                id: b[4],
                id_ecr: b[5],
                lat: u32::from_be_bytes([0, b[6], b[7], b[8]]),
                lat_ecr: u32::from_be_bytes([0, b[9], b[10], b[11]]),
            }),
        }
    }
}

/// The INTval one hop reports, before the path maximum is taken.
pub fn hop_int_val(qdepth_bytes: u64, util_percent: u64, cfg: &IntEncoding) -> u8 {
    if qdepth_bytes < cfg.qdepth_threshold {
        (util_percent >> cfg.util_shift).min(0x7f) as u8
    } else {
        QDEPTH_FLAG | (qdepth_bytes >> cfg.qdepth_shift).min(0x7f) as u8
    }
}

/// How INTval encodes queue depth and utilization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntEncoding {
    /// Queue depth (bytes) at and above which the queue branch is reported.
    pub qdepth_threshold: u64,
    /// Right shift applied to queue bytes (13: units of 8 KiB).
    pub qdepth_shift: u32,
    /// Right shift applied to utilization in percent (0: units of 1%).
    pub util_shift: u32,
}

impl Default for IntEncoding {
    fn default() -> Self {
        IntEncoding { qdepth_threshold: 8192, qdepth_shift: 13, util_shift: 0 }
    }
}

/// An INTval as the signal block hands it to congestion control.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IntReading {
    /// The bottleneck hop was not queueing: its link utilization as a fraction (1.0 = line rate).
    Utilization(f64),
    /// The bottleneck hop's queue depth in bytes (lower edge of the reported bucket).
    QueueBytes(u64),
}

impl IntEncoding {
    /// Decodes an INTval into utilization or queue bytes.
    pub fn read(&self, int_val: u8) -> IntReading {
        let v = (int_val & 0x7f) as u64;
        if int_val & QDEPTH_FLAG != 0 {
            IntReading::QueueBytes(v << self.qdepth_shift)
        } else {
            IntReading::Utilization((v << self.util_shift) as f64 / 100.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(int_val: u8, int_ecr: u8, id: u8, id_ecr: u8, lat in 0..=LAT_MAX, lat_ecr in 0..=LAT_MAX) {
            let o = TcpInt { int_val, int_ecr, id, id_ecr, lat, lat_ecr };
            prop_assert_eq!(TcpInt::decode(&o.encode()), Ok(o));
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..20)) {
            if let Ok(o) = TcpInt::decode(&bytes) {
                prop_assert_eq!(&o.encode()[..], &bytes[..12]);
            }
        }
    }

    #[test]
    fn latency_saturates_at_24_bits() {
        let o = TcpInt { lat: 1 << 30, ..TcpInt::default() };
        assert_eq!(TcpInt::decode(&o.encode()).unwrap().lat, LAT_MAX);
    }

    #[test]
    fn hop_value_picks_branch_by_threshold_and_saturates() {
        let cfg = IntEncoding::default();
        assert_eq!(hop_int_val(0, 57, &cfg), 57);
        assert_eq!(hop_int_val(8191, 200, &cfg), 0x7f);
        assert_eq!(hop_int_val(8192, 0, &cfg), 0x81);
        assert_eq!(hop_int_val(64 << 20, 0, &cfg), 0xff);
        assert_eq!(cfg.read(0x81), IntReading::QueueBytes(8192));
        assert_eq!(cfg.read(57), IntReading::Utilization(0.57));
        // Any queue reading outranks any utilization reading in the path maximum.
        assert!(hop_int_val(8192, 0, &cfg) > hop_int_val(0, 100, &cfg));
    }
}
