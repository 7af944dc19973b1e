//! Where a UET packet's fields sit on `Packet`, so that it stays one size for every transport:
//!
//! | field | data | RTS | ACK | NACK | PULL |
//! |---|---|---|---|---|---|
//! | `seq` | first payload byte | | SACK base PSN | NACKed PSN | pull number |
//! | `ack` | PSN | PSN | cumulative PSN (the first missing) | the same | |
//! | `sack[0]` | pull target | pull target | 64-bit SACK bitmap: bit `i` is PSN base + `i` | | |
//! | `sack[1]` | | | the PSN that made the receiver ACK | | |
//! | `sack[2]` | | | bytes received, headers included | the same | |
//! | `cookie` | EV | EV | the EV echoed | the EV echoed | the pull's EV |
//! | `caps` | [`AR`], [`RTX`] | [`RTS`], [`AR`] | [`RTX_ECHO`], [`RTS`] | [`LAST_HOP`] | [`PULL`] |
//!
//! Pull targets and pull numbers count 256-byte quanta ([`QUANTUM`]) from [`INIT_PULL`]; a data
//! packet of a flow without receiver credit carries target 0.
//!
//! `sack_len` stays 0, so code that reads TCP's SACK blocks sees none. `caps` is read by
//! switches only on SYNs, and `cookie` only by NIC offloads, which UET classes do not have.

use crate::packet::{Packet, SackBlock};

/// The sender asks for an ACK now (the last packet, a full window, a retransmission).
pub const AR: u8 = 1 << 0;
/// The packet is a retransmission.
pub const RTX: u8 = 1 << 1;
/// The ACK answers a retransmission.
pub const RTX_ECHO: u8 = 1 << 2;
/// A request to send (a probe with no data that asks the receiver for credit), or the ACK
/// that answers one.
pub const RTS: u8 = 1 << 3;
/// The NACKed packet was trimmed at the last switch before its receiver.
pub const LAST_HOP: u8 = 1 << 4;
/// Credit from the receiver: the pull number it has granted up to.
pub const PULL: u8 = 1 << 5;

/// Bytes in a quantum of credit (`UEC_PULL_QUANTUM`).
pub const QUANTUM: u64 = 256;
/// Where both ends start counting pulls (`INIT_PULL`), so a target never falls below zero.
pub const INIT_PULL: u64 = 100_000_000;

/// Whether `pkt` carries flag `bit`.
#[inline]
pub fn has(pkt: &Packet, bit: u8) -> bool {
    pkt.caps.0 & bit != 0
}

/// A data packet's PSN, or an ACK's or NACK's cumulative PSN.
#[inline]
pub fn psn(pkt: &Packet) -> u64 {
    pkt.ack
}

/// The entropy value a data packet was sent on, or that an ACK or NACK echoes.
#[inline]
pub fn ev(pkt: &Packet) -> u16 {
    pkt.cookie as u16
}

fn get(b: &SackBlock) -> u64 {
    b.start as u64 | (b.end as u64) << 32
}

fn put(v: u64) -> SackBlock {
    SackBlock { start: v as u32, end: (v >> 32) as u32 }
}

/// An ACK's SACK bitmap: bit `i` is PSN `pkt.seq + i`, received.
#[inline]
pub fn bitmap(pkt: &Packet) -> u64 {
    get(&pkt.sack[0])
}

/// The PSN whose arrival made the receiver send this ACK.
#[inline]
pub fn acked_psn(pkt: &Packet) -> u64 {
    get(&pkt.sack[1])
}

/// The receiver's count of bytes received (headers included) when it sent this ACK or NACK.
#[inline]
pub fn recvd_bytes(pkt: &Packet) -> u64 {
    get(&pkt.sack[2])
}

/// The pull target a data packet or RTS carries, in quanta; 0 without receiver credit.
#[inline]
pub fn pull_target(pkt: &Packet) -> u64 {
    get(&pkt.sack[0])
}

/// Sets the pull target of a data packet or RTS.
#[inline]
pub fn set_pull_target(pkt: &mut Packet, target: u64) {
    pkt.sack[0] = put(target);
}

/// Writes an ACK's or NACK's fields.
pub fn set_feedback(pkt: &mut Packet, bitmap: u64, acked_psn: u64, recvd_bytes: u64) {
    pkt.sack[0] = put(bitmap);
    pkt.sack[1] = put(acked_psn);
    pkt.sack[2] = put(recvd_bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixty_four_bit_fields_survive_the_sack_blocks() {
        let mut p = Packet::default();
        set_feedback(&mut p, 1 << 63 | 5, 0x1_2345_6789, u64::MAX - 1);
        assert_eq!((bitmap(&p), acked_psn(&p), recvd_bytes(&p)), (1 << 63 | 5, 0x1_2345_6789, u64::MAX - 1));
        assert_eq!(p.sack_ranges().count(), 0, "TCP's SACK reader sees no blocks");
    }
}
