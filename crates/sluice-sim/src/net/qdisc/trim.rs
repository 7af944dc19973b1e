//! Packet trimming (Ultra Ethernet, and NDP before it): where a full queue would drop a data
//! packet, it cuts the packet to its header instead and sends the header ahead of the queue, so
//! the receiver learns of the loss a queue's wait earlier than any timeout. The UEC reference's
//! switch (`CompositeQueue` in uet-htsim) trims when the data queue would pass its size, and then
//! tosses a coin: heads, the arrival is queued and the packet queued last is trimmed instead.

use crate::packet::{fabric, Packet, CONTROL_PRIO};
use crate::time::Bytes;
use serde::{Deserialize, Serialize};

/// A port's trimming, as built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    /// Wire bytes of a trimmed header.
    pub header: u32,
    /// Trim once the data band a packet joins would pass this many bytes; `None`: only where
    /// the buffer would otherwise drop it.
    pub threshold: Option<u64>,
    /// Header bytes the port queues at most; headers beyond it are dropped.
    pub header_cap: u64,
    /// Toss a coin between the arrival and the packet queued last (the reference's choice);
    /// otherwise always trim the arrival.
    pub coin: bool,
}

impl Trim {
    /// Whether `pkt` may be trimmed: data (so not a PFC frame or a pure ACK), not trimmed yet,
    /// and not of the control priority or a lossless one (PFC holds those upstream instead).
    #[inline]
    pub fn eligible(&self, pkt: &Packet, lossless: bool) -> bool {
        pkt.payload > 0 && !pkt.is_trimmed() && pkt.prio != CONTROL_PRIO && !lossless
    }

    /// Whether a data band holding `band_bytes` may take `len` more under the threshold.
    #[inline]
    pub fn under_threshold(&self, band_bytes: u64, len: u64) -> bool {
        self.threshold.is_none_or(|t| band_bytes + len <= t)
    }

    /// Cuts `pkt` to its header in place. Its sequence number, length and CE mark stay, so the
    /// receiver knows which data it lost and whether that data met congestion on the way, and
    /// the header records its TTL here, so the receiver knows whether this was the last hop.
    pub fn cut(&self, pkt: &mut Packet) {
        pkt.wire_bytes = self.header;
        pkt.fabric = fabric::TRIMMED | (pkt.ttl.min(fabric::TTL_MAX) << 1);
    }
}

/// `[switch.trim]`, and `trim` in a rate's or a port's table (which replaces it as a whole).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrimConfig {
    /// Trim at these ports (default true: `false` in a rate's or a port's table turns it off
    /// there).
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Wire bytes of a trimmed header (default 64B, the reference's `-trimsize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Bytes>,
    /// Trim once the data queue a packet joins would pass this (the reference's queue size);
    /// absent: only where the buffer would drop the packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<Bytes>,
    /// Header bytes a port queues at most (default twice the threshold, or twice the port's
    /// `buffer`, as the reference caps its header queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_queue: Option<Bytes>,
    /// Which packet a full queue trims: "coin" (default: the arrival or the packet queued last,
    /// even odds, as the reference) or "arrival".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim: Option<String>,
}

fn enabled() -> bool {
    true
}

/// A trimmed header's default size: the reference's `-trimsize`.
pub const DEFAULT_HEADER: u64 = 64;

impl TrimConfig {
    /// The trimming this table gives a port whose queue limit is `limit` and whose largest frame
    /// is `frame` bytes; `None` when it is off. Errors name the key under `prefix`; `port` names
    /// the port for the one error that needs it.
    pub fn trim(&self, prefix: &str, port: &str, limit: Option<u64>, frame: u64) -> Result<Option<Trim>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let header = self.header.map_or(DEFAULT_HEADER, |b| b.0);
        if header == 0 || header > frame {
            return Err(format!("{prefix}.header: expected a size between 1 byte and one full frame ({frame} bytes), got {header} bytes"));
        }
        if let Some(t) = self.threshold.map(|b| b.0).filter(|&t| t < frame) {
            return Err(format!("{prefix}.threshold: trimming on a queue too small for one full frame ({frame} bytes), got {t} bytes"));
        }
        let header_cap = match (self.header_queue, self.threshold.or(limit.map(Bytes))) {
            (Some(q), _) => q.0,
            (None, Some(t)) => 2 * t.0,
            (None, None) => {
                return Err(format!(
                    "{prefix}.header_queue: required, since port {port} has neither trim.threshold nor a buffer limit to default to (twice either)"
                ))
            }
        };
        if header_cap < header {
            return Err(format!("{prefix}.header_queue: trimming on a queue too small for one header ({header} bytes), got {header_cap} bytes"));
        }
        let coin = match self.victim.as_deref() {
            None | Some("coin") => true,
            Some("arrival") => false,
            Some(v) => return Err(format!("{prefix}.victim: expected \"coin\" or \"arrival\", got \"{v}\"")),
        };
        Ok(Some(Trim { header: header as u32, threshold: self.threshold.map(|b| b.0), header_cap, coin }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(threshold: Option<u64>, header_queue: Option<u64>, victim: Option<&str>) -> TrimConfig {
        TrimConfig { enabled: true, header: None, threshold: threshold.map(Bytes), header_queue: header_queue.map(Bytes), victim: victim.map(Into::into) }
    }

    #[test]
    fn defaults_follow_the_reference() {
        let t = cfg(Some(20_000), None, None).trim("switch.trim", "sw0->sw1", None, 1538).unwrap().unwrap();
        assert_eq!(t, Trim { header: 64, threshold: Some(20_000), header_cap: 40_000, coin: true });
        // Without a threshold the header queue is twice the port's limit.
        let t = cfg(None, None, Some("arrival")).trim("switch.trim", "sw0->sw1", Some(9_000), 1538).unwrap().unwrap();
        assert_eq!((t.threshold, t.header_cap, t.coin), (None, 18_000, false));
        let off = TrimConfig { enabled: false, ..cfg(None, None, None) };
        assert_eq!(off.trim("switch.trim", "sw0->sw1", None, 1538), Ok(None));
    }

    #[test]
    fn bad_tables_are_refused_at_their_key() {
        let err = |c: TrimConfig| c.trim("switch.ports.\"sw0->sw1\".trim", "sw0->sw1", None, 1538).unwrap_err();
        assert_eq!(
            err(cfg(Some(20_000), Some(40), None)),
            "switch.ports.\"sw0->sw1\".trim.header_queue: trimming on a queue too small for one header (64 bytes), got 40 bytes"
        );
        assert_eq!(
            err(cfg(Some(1_000), None, None)),
            "switch.ports.\"sw0->sw1\".trim.threshold: trimming on a queue too small for one full frame (1538 bytes), got 1000 bytes"
        );
        assert!(err(cfg(None, None, None)).starts_with("switch.ports.\"sw0->sw1\".trim.header_queue: required, since port sw0->sw1 has neither"));
        assert_eq!(err(cfg(Some(20_000), None, Some("tail"))), "switch.ports.\"sw0->sw1\".trim.victim: expected \"coin\" or \"arrival\", got \"tail\"");
        let big = TrimConfig { header: Some(Bytes(2_000)), ..cfg(Some(20_000), None, None) };
        assert!(err(big).contains("trim.header: expected a size between 1 byte and one full frame (1538 bytes), got 2000 bytes"));
    }

    #[test]
    fn only_data_not_yet_trimmed_may_be_trimmed_and_a_cut_keeps_what_the_receiver_needs() {
        let t = Trim { header: 64, threshold: Some(10_000), header_cap: 20_000, coin: true };
        let data = Packet { payload: 1460, wire_bytes: 1538, seq: 7_300, ecn: crate::packet::Ecn::Ce, ..Packet::default() };
        assert!(t.eligible(&data, false));
        assert!(!t.eligible(&data, true), "a lossless priority is paused upstream, never trimmed");
        assert!(!t.eligible(&Packet { payload: 0, wire_bytes: 90, ..data }, false), "a pure ACK");
        assert!(!t.eligible(&Packet { prio: CONTROL_PRIO, ..data }, false));
        let mut cut = data;
        t.cut(&mut cut);
        assert_eq!((cut.wire_bytes, cut.payload, cut.seq, cut.ecn), (64, 1460, 7_300, crate::packet::Ecn::Ce));
        assert!(cut.is_trimmed() && !t.eligible(&cut, false), "a header is not trimmed again");
        assert!(t.under_threshold(8_462, 1538) && !t.under_threshold(8_463, 1538));
    }
}
