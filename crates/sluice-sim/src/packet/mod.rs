//! Packets as plain values: the header fields the simulator acts on, and the bytes they occupy on
//! the wire. The TCP-INT option codec and HPCC's per-hop records are submodules.

use crate::time::Time;

pub mod hpcc_int;
pub mod tcp_int;
pub mod wire;

/// Bytes of Ethernet framing a frame occupies on the wire beyond its IP packet: header 14, FCS 4,
/// preamble and start delimiter 8, inter-frame gap 12.
pub const ETHERNET_OVERHEAD: u32 = 38;
/// IPv4 header bytes (no options).
pub const IPV4_HEADER: u32 = 20;
/// TCP header bytes including the 12-byte timestamp option (10 bytes padded), as Linux sends.
pub const TCP_HEADER: u32 = 32;
/// Bytes one SACK option with `n` blocks adds to a TCP header (kind, length, 8 per block, padded).
pub const fn sack_option_bytes(n: u32) -> u32 {
    if n == 0 {
        0
    } else {
        (2 + 8 * n).div_ceil(4) * 4
    }
}

/// TCP flag bits.
pub mod flags {
    /// Synchronize: opens a connection.
    pub const SYN: u8 = 1 << 0;
    /// The acknowledgement field is valid.
    pub const ACK: u8 = 1 << 1;
    /// The sender has finished sending.
    pub const FIN: u8 = 1 << 2;
    /// ECN echo: the receiver saw CE.
    pub const ECE: u8 = 1 << 3;
    /// Congestion window reduced: the sender reacted to ECE.
    pub const CWR: u8 = 1 << 4;
    /// Not a TCP flag: an RDMA NACK (the AETH syndrome of a sequence error): the receiver
    /// expects `ack`; with IRN, `sack[0]` names the packet that arrived instead.
    pub const NACK: u8 = 1 << 5;
    /// Not a TCP flag: an IEEE 802.1Qbb PFC frame for priority `prio`, pausing it for
    /// `pause_quanta` (0: resume). It belongs to no flow and stops at the next node.
    pub const PFC: u8 = 1 << 6;
    /// Not a TCP flag: the packet travels from the flow's server back to its client.
    pub const REVERSE: u8 = 1 << 7;
}

/// Bits the fabric sets on a packet (`Packet::fabric`).
pub mod fabric {
    /// A switch cut the packet to its header (`net/qdisc/trim.rs`): its payload is gone, its
    /// sequence number and length say which data it carried.
    pub const TRIMMED: u8 = 1 << 0;
    /// The largest TTL a trimmed header records in the bits above [`TRIMMED`].
    pub const TTL_MAX: u8 = 127;
}

/// The negotiation bits a SYN and its SYN-ACK carry (the open CC draft's in-band negotiation):
/// what the sender proposes, what the switches on the path offer, what the receiver supports. On
/// the wire they are a TCP option (`docs/pcap.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps(pub u8);

impl Caps {
    /// The sender's algorithm wants TCP-INT (on a SYN).
    pub const WANTS_INT: u8 = 1 << 0;
    /// The receiver takes part in negotiation (on a SYN-ACK, where the sender's wants are
    /// cleared): a stack without it answers with no option at all.
    pub const ANSWERED: u8 = 1 << 0;
    /// The sender's algorithm wants HPCC per-hop records.
    pub const WANTS_HOP_RECORDS: u8 = 1 << 1;
    /// The sender's algorithm wants per-packet ECN marks.
    pub const WANTS_ECN: u8 = 1 << 2;
    /// At least one switch on the path stamps INT (set by such a switch).
    pub const PATH_ANY_INT: u8 = 1 << 3;
    /// Every switch on the path stamps INT (set by the sender, cleared by a legacy switch).
    pub const PATH_ALL_INT: u8 = 1 << 4;
    /// Every switch on the path marks ECN (set by the sender, cleared by a switch that does not).
    pub const PATH_ECN: u8 = 1 << 5;
    /// The receiver's stack supports TCP-INT (on the SYN-ACK).
    pub const PEER_INT: u8 = 1 << 6;
    /// The client's algorithm wants each CE mark echoed on its own (DCTCP's receiver), on the
    /// client's segments after the SYN: the server echoes marks as the algorithm negotiation
    /// settled on asks.
    pub const ECHO_EACH_MARK: u8 = 1 << 7;
    /// The client proposes (on a SYN, where marks are not yet echoed): a stack without the agent
    /// sends no option at all.
    pub const PROPOSED: u8 = 1 << 7;

    /// True if `bit` is set.
    #[inline]
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    /// Sets `bit`.
    #[inline]
    pub fn set(&mut self, bit: u8) {
        self.0 |= bit;
    }
    /// Clears `bit`.
    #[inline]
    pub fn clear(&mut self, bit: u8) {
        self.0 &= !bit;
    }
}

/// The IP ECN codepoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ecn {
    /// Not ECN-capable transport.
    #[default]
    NotEct,
    /// ECN-capable transport.
    Ect,
    /// Congestion experienced (set by a switch).
    Ce,
}

/// A packet's TLT colour, carried in its DSCP: which packets a switch may drop first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Colour {
    /// Data whose loss the ACK clock detects; also every packet of a run without TLT.
    #[default]
    Unimportant,
    /// The data packet whose loss would stall the flow until a timeout (at most one in flight).
    Important,
    /// The ACK that answers an important packet.
    Echo,
    /// SYN, SYN-ACK, FIN and pure ACKs.
    Control,
}

impl Colour {
    /// True for every colour a switch must not drop before the unimportant ones.
    #[inline]
    pub fn is_important(self) -> bool {
        self != Colour::Unimportant
    }
}

/// A SACK block as offsets from the ACK number, so it fits in 8 bytes like the wire format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlock {
    /// Start of the block relative to the cumulative ACK.
    pub start: u32,
    /// End (exclusive) of the block relative to the cumulative ACK.
    pub end: u32,
}

/// IP TTL every host sends with; switches decrement it, so a receiver reads the hops a packet
/// crossed as `INITIAL_TTL - ttl`.
pub const INITIAL_TTL: u8 = 64;

/// The priority above the eight data priorities: a switch sends such a packet ahead of every
/// queued one, outside buffer admission, PFC and ECN marking (the HPCC simulator's queue 0, where
/// `ACK_HIGH_PRIO` puts RDMA ACKs).
pub const CONTROL_PRIO: u8 = 8;

/// Maximum SACK blocks an ACK carries (three fit beside the timestamp option).
pub const MAX_SACK_BLOCKS: usize = 3;

/// One packet in flight. Sequence numbers are 64-bit byte offsets into the flow's data.
///
/// Aligned to a cache line, so a packet in a store, a queue or a ring spans two lines, not three.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
pub struct Packet {
    /// The flow this packet belongs to (both directions share it).
    pub flow: u32,
    /// Source host ordinal.
    pub src: u32,
    /// Destination host ordinal.
    pub dst: u32,
    /// Flow hash for ECMP (distinct per direction).
    pub hash: u32,
    /// First data byte carried.
    pub seq: u64,
    /// Cumulative acknowledgement (next byte expected), valid with `flags::ACK`.
    pub ack: u64,
    /// Payload bytes.
    pub payload: u32,
    /// Bytes this packet occupies on the wire, headers and framing included.
    pub wire_bytes: u32,
    /// TCP flags (`flags::*`).
    pub flags: u8,
    /// IP ECN codepoint.
    pub ecn: Ecn,
    /// IP time to live.
    pub ttl: u8,
    /// Switch priority queue (0 = highest).
    pub prio: u8,
    /// TLT colour (DSCP).
    pub colour: Colour,
    /// On a PFC frame: the pause time in quanta of 512 bit times at the link's rate (0 resumes).
    pub pause_quanta: u16,
    /// On an ACK: the switch hops the acknowledged data crossed, echoed by the receiver.
    pub hops_echo: Option<u8>,
    /// Negotiation bits, on SYN and SYN-ACK.
    pub caps: Caps,
    /// A SYN cookie: set by a NIC answering a SYN statelessly (the SYN-ACK's initial sequence
    /// number), echoed on the client's segments so the NIC can verify the handshake's ACK.
    pub cookie: u32,
    /// The local port the packet entered the current switch on.
    pub ingress: u16,
    /// Number of valid entries in `sack`.
    pub sack_len: u8,
    /// SACK blocks, most recent first.
    pub sack: [SackBlock; MAX_SACK_BLOCKS],
    /// Sender timestamp (TSval).
    pub ts: Time,
    /// Echoed timestamp (TSecr).
    pub ts_echo: Time,
    /// The TCP-INT option, when the sender added one.
    pub int: Option<tcp_int::TcpInt>,
    /// When the packet entered the current switch's queue (for INT residence latency).
    pub enq_at: Time,
    /// HPCC per-hop INT records in the world's slab: stamped by switches on a data packet, echoed
    /// on an ACK; `None` for flows without HPCC INT.
    pub hops: Option<hpcc_int::HopIdx>,
    /// The TCP checksum a NIC that rewrote the header carries, updated incrementally; 0: the
    /// frame's own, as its sender computed it (a carried 0 is recomputed, to the same value).
    pub csum: u16,
    /// What the fabric did to the packet (`fabric::*`).
    pub fabric: u8,
}

impl Packet {
    /// True if the given flag bit is set.
    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// True for a SYN (not a SYN-ACK).
    #[inline]
    pub fn is_syn(&self) -> bool {
        self.flags & (flags::SYN | flags::ACK) == flags::SYN
    }

    /// True for a PFC frame.
    #[inline]
    pub fn is_pfc(&self) -> bool {
        self.has(flags::PFC)
    }

    /// True for a data packet a switch cut to its header.
    #[inline]
    pub fn is_trimmed(&self) -> bool {
        self.fabric & fabric::TRIMMED != 0
    }

    /// A trimmed header's TTL where it was cut (switches count TTL down before they queue).
    pub fn trim_ttl(&self) -> u8 {
        self.fabric >> 1
    }

    /// True for packets that travel from the flow's sender to its receiver.
    #[inline]
    pub fn is_forward(&self) -> bool {
        !self.has(flags::REVERSE)
    }

    /// The SACK blocks carried, as absolute sequence ranges.
    pub fn sack_ranges(&self) -> impl Iterator<Item = (u64, u64)> + Clone + '_ {
        self.sack[..self.sack_len as usize]
            .iter()
            .map(|b| (self.ack + b.start as u64, self.ack + b.end as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sack_option_sizes_match_rfc2018_padding() {
        assert_eq!(sack_option_bytes(0), 0);
        assert_eq!(sack_option_bytes(1), 12);
        assert_eq!(sack_option_bytes(3), 28);
    }

    #[test]
    fn packet_value_stays_small() {
        // Packets are moved by value through queues; keep them within two cache lines.
        assert_eq!(std::mem::size_of::<Packet>(), 128);
    }
}
