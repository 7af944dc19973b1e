//! The wire form of a simulated packet: the Ethernet/IPv4/TCP frame it stands for. `trace.pcap`
//! writes these frames (`metrics/pcap.rs`), and a NIC that rewrites headers (splicing) updates
//! their checksum incrementally from them.
//!
//! # Mapping from a [`Packet`] to a frame
//!
//! - **Addresses.** Host ordinal `h` becomes IPv4 `10.0.0.0 + (h + 1)`, i.e. the 24 low bits of
//!   `h + 1` in the last three octets (host 0 is 10.0.0.1, host 255 is 10.0.1.0, host 1000 is
//!   10.0.3.233), and MAC `02:00:00` followed by the same three bytes (locally administered,
//!   unicast). Ordinals up to 16,777,213 map to distinct addresses.
//! - **Ports.** The flow's sender uses source port `10000 + flow % 50000`
//!   ([`client_port`]); the receiver listens on [`SERVICE_PORT`] (5001). [`Packet::is_forward`]
//!   gives the direction: forward packets (SYN, data, FIN) go sender → receiver; ACKs and the
//!   SYN-ACK go back with addresses and ports swapped.
//! - **Sequence numbers.** The simulator counts bytes from 0 in 64 bits. Each side of a flow gets
//!   an initial sequence number ([`isn`], a fixed hash of the flow id and direction) and, as in
//!   real TCP, its SYN consumes one number: the SYN carries `ISN`, the byte at offset `o` has
//!   sequence number `ISN + 1 + o`, modulo 2^32. Acknowledgement numbers and SACK blocks map the
//!   same way in the peer's space, so Wireshark's relative sequence numbers equal the simulator's
//!   offsets. The simulator's FIN does not take a sequence number, so the ACK that answers it
//!   acknowledges the data only.
//! - **Flags.** SYN, FIN, ECE and CWR as set; ACK on every segment but the initial SYN (the
//!   receiver never sends data, so a forward segment acknowledges the peer's SYN: `ISN_r + 1`).
//! - **IP header.** 20 bytes, DF set, identification 0; ECN from [`Packet::ecn`] (Not-ECT `00`,
//!   ECT(0) `10`, CE `11`); DSCP's low three bits are the simulator's switch priority `prio`
//!   (0 = highest), its next two TLT's colour ([`dscp`]), so without TLT `ip.dsfield.dscp == 1`
//!   selects priority 1 and with it `ip.dsfield.dscp >= 8` selects the important packets; TTL
//!   from [`Packet::ttl`].
//! - **TCP options**, each group 4-byte aligned, at most 40 bytes in all:
//!   the SYN and SYN-ACK carry SACK-permitted, timestamps and window scale 14 (`04 02 | 08 0a
//!   TSval TSecr | 01 03 03 0e`); every other segment carries `01 01 | 08 0a TSval TSecr`. TSval
//!   and TSecr are [`Packet::ts`] and [`Packet::ts_echo`] in microseconds, modulo 2^32. Then the
//!   TCP-INT option (kind 0x72, the 12 bytes of [`TcpInt::encode`]) when [`Packet::int`] is set,
//!   then `01 01 | 05 len` SACK blocks, most recent first, as many as still fit (as Linux does,
//!   the oldest are dropped: three beside timestamps alone, one beside TCP-INT too).
//! - **Window.** 65535 in every segment; with the SYN's window scale that is about 1 GiB, so
//!   Wireshark never reports a full window the simulator does not model.
//! - **Payload.** [`Packet::payload`] zero bytes. The IPv4 and TCP checksums are those of the full
//!   frame. By default a record holds the headers only (`incl_len` = header bytes, `orig_len` =
//!   the full frame without FCS), which keeps traces small; Wireshark then checks the IP checksum
//!   but leaves the TCP checksum of segments with payload "unverified". A capture of whole frames writes the
//!   zero payload as well.
//!
//! [`TcpInt::encode`]: crate::packet::tcp_int::TcpInt::encode

use crate::packet::{flags, Caps, Colour, Ecn, Packet};
use crate::time::Time;
use std::io;

/// TCP option kind of the negotiation bits on SYN and SYN-ACK (experimental, RFC 6994).
pub const CAPS_OPTION_KIND: u8 = 253;

/// TCP port the receiver of every flow listens on.
pub const SERVICE_PORT: u16 = 5001;
/// Lowest source port a flow's sender uses.
pub const CLIENT_PORT_BASE: u16 = 10000;
/// Number of distinct sender ports; flow ids that differ by a multiple share a port.
pub const CLIENT_PORTS: u32 = 50000;
/// Window scale the SYN and SYN-ACK announce.
pub const WINDOW_SCALE: u8 = 14;

const ETH_HEADER: usize = 14;
const IP_HEADER: usize = 20;
const TCP_BASE: usize = 20;
const MAX_OPTIONS: usize = 40;

/// The IPv4 address of host ordinal `h`: 10.0.0.0 + (h + 1), see the module doc.
pub fn host_ipv4(h: u32) -> [u8; 4] {
    let n = h.wrapping_add(1).to_be_bytes();
    [10, n[1], n[2], n[3]]
}

/// The MAC address of host ordinal `h`: 02:00:00 and the last three octets of its IPv4 address.
pub fn host_mac(h: u32) -> [u8; 6] {
    let n = h.wrapping_add(1).to_be_bytes();
    [0x02, 0, 0, n[1], n[2], n[3]]
}

/// The source port of a flow's sender.
pub fn client_port(flow: u32) -> u16 {
    CLIENT_PORT_BASE + (flow % CLIENT_PORTS) as u16
}

/// The DSCP a packet carries: its priority (0-7) in the low three bits, its TLT colour above
/// (0 unimportant, 1 important, 2 important echo, 3 control).
pub fn dscp(pkt: &Packet) -> u8 {
    let colour = match pkt.colour {
        Colour::Unimportant => 0,
        Colour::Important => 1,
        Colour::Echo => 2,
        Colour::Control => 3,
    };
    pkt.prio.min(7) | colour << 3
}

/// The initial sequence number of one side of a flow: `forward` for the sender's, else the
/// receiver's. A fixed mix of the flow id, so traces are deterministic.
pub fn isn(flow: u32, forward: bool) -> u32 {
    // The 64-bit finalizer of SplitMix64: every input bit affects every output bit.
    let mut z = ((flow as u64) << 1 | forward as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// The wire sequence number of byte offset `off` in a side whose SYN carried `isn`.
fn wire_seq(isn: u32, off: u64) -> u32 {
    isn.wrapping_add(1).wrapping_add(off as u32)
}

/// Microseconds modulo 2^32, the TCP timestamp clock.
fn ts_us(t: Time) -> u32 {
    (t.0 / 1_000_000) as u32
}

/// The one's-complement sum of `bytes` as big-endian 16-bit words, added to `sum`, not folded.
fn sum_words(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for w in &mut chunks {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

/// Folds a sum to 16 bits and complements it: the Internet checksum.
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Appends the TCP options of `pkt` to `out`; returns their length (a multiple of 4, ≤ 40).
fn push_options(pkt: &Packet, syn: bool, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let (tsval, tsecr) = (ts_us(pkt.ts).to_be_bytes(), ts_us(pkt.ts_echo).to_be_bytes());
    if syn {
        out.extend_from_slice(&[4, 2, 8, 10]);
    } else {
        out.extend_from_slice(&[1, 1, 8, 10]);
    }
    out.extend_from_slice(&tsval);
    out.extend_from_slice(&tsecr);
    if syn {
        out.extend_from_slice(&[1, 3, 3, WINDOW_SCALE]);
        // Negotiation bits as an experimental option (RFC 6994, ExID "SL"), NOP-padded, from a
        // stack that negotiates: a proposal on the SYN, an answer on the SYN-ACK.
        let present = if pkt.has(flags::ACK) { Caps::ANSWERED } else { Caps::PROPOSED };
        if pkt.caps.has(present) {
            out.extend_from_slice(&[CAPS_OPTION_KIND, 5, 0x53, 0x4c, pkt.caps.0, 1, 1, 1]);
        }
    }
    if let Some(int) = pkt.int {
        out.extend_from_slice(&int.encode());
    }
    let room = MAX_OPTIONS - (out.len() - start);
    let blocks = (pkt.sack_len as usize).min(room.saturating_sub(4) / 8);
    if blocks > 0 {
        // The reverse direction's ACK and SACK blocks live in the sender's sequence space.
        let peer_isn = isn(pkt.flow, !pkt.is_forward());
        out.extend_from_slice(&[1, 1, 5, 2 + 8 * blocks as u8]);
        for (s, e) in pkt.sack_ranges().take(blocks) {
            out.extend_from_slice(&wire_seq(peer_isn, s).to_be_bytes());
            out.extend_from_slice(&wire_seq(peer_isn, e).to_be_bytes());
        }
    }
    out.len() - start
}

/// Appends the Ethernet, IPv4 and TCP headers of `pkt` to `out` (cleared first). Returns the full
/// frame length without FCS, payload included.
pub fn build(pkt: &Packet, out: &mut Vec<u8>) -> io::Result<u32> {
    out.clear();
    if pkt.is_pfc() {
        return Ok(pfc_frame(pkt, out));
    }
    let fwd = pkt.is_forward();
    let initial_syn = pkt.has(flags::SYN) && !pkt.has(flags::ACK);
    let (sport, dport) =
        if fwd { (client_port(pkt.flow), SERVICE_PORT) } else { (SERVICE_PORT, client_port(pkt.flow)) };
    let (own_isn, peer_isn) = (isn(pkt.flow, fwd), isn(pkt.flow, !fwd));

    // Ethernet.
    out.extend_from_slice(&host_mac(pkt.dst));
    out.extend_from_slice(&host_mac(pkt.src));
    out.extend_from_slice(&0x0800u16.to_be_bytes());

    // IPv4, total length and checksum filled in below.
    let ip = out.len();
    let ecn = match pkt.ecn {
        Ecn::NotEct => 0b00,
        Ecn::Ect => 0b10,
        Ecn::Ce => 0b11,
    };
    out.extend_from_slice(&[0x45, (dscp(pkt) << 2) | ecn, 0, 0, 0, 0, 0x40, 0, pkt.ttl, 6, 0, 0]);
    let (src, dst) = (host_ipv4(pkt.src), host_ipv4(pkt.dst));
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);

    // TCP, data offset and checksum filled in below.
    let tcp = out.len();
    let seq = if pkt.has(flags::SYN) { own_isn } else { wire_seq(own_isn, pkt.seq) };
    let ack = if initial_syn { 0 } else { wire_seq(peer_isn, pkt.ack) };
    let mut tcp_flags = 0u8;
    for (bit, wire) in [(flags::FIN, 0x01), (flags::SYN, 0x02), (flags::ECE, 0x40), (flags::CWR, 0x80)] {
        if pkt.has(bit) {
            tcp_flags |= wire;
        }
    }
    if !initial_syn {
        tcp_flags |= 0x10;
    }
    out.extend_from_slice(&sport.to_be_bytes());
    out.extend_from_slice(&dport.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&ack.to_be_bytes());
    out.extend_from_slice(&[0, tcp_flags, 0xff, 0xff, 0, 0, 0, 0]);
    let opt_len = push_options(pkt, pkt.has(flags::SYN), out);
    let tcp_header = TCP_BASE + opt_len;
    out[tcp + 12] = ((tcp_header / 4) as u8) << 4;

    // A trimmed packet is its headers alone on the wire; its sequence number still names the
    // data it carried.
    let payload = if pkt.is_trimmed() { 0 } else { pkt.payload as usize };
    let tcp_len = tcp_header + payload;
    let ip_len = IP_HEADER + tcp_len;
    let ip_len16 = u16::try_from(ip_len).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("flow {}: a {}-byte payload does not fit an IPv4 packet", pkt.flow, pkt.payload),
        )
    })?;
    out[ip + 2..ip + 4].copy_from_slice(&ip_len16.to_be_bytes());
    let ip_sum = fold(sum_words(0, &out[ip..ip + IP_HEADER]));
    out[ip + 10..ip + 12].copy_from_slice(&ip_sum.to_be_bytes());

    // Pseudo-header: addresses, protocol and TCP length. The zero payload adds nothing to the sum.
    // A NIC that rewrote the header carries its incrementally updated checksum instead.
    let pseudo = sum_words(sum_words(0, &src), &dst) + 6 + tcp_len as u32;
    let tcp_sum = if pkt.csum != 0 { pkt.csum } else { fold(sum_words(pseudo, &out[tcp..])) };
    out[tcp + 16..tcp + 18].copy_from_slice(&tcp_sum.to_be_bytes());
    Ok((ETH_HEADER + ip_len) as u32)
}

/// An IEEE 802.1Qbb PFC frame (MAC control, opcode 0x0101) pausing `pkt.prio` for
/// `pkt.pause_quanta`, padded to the 60-byte minimum; returns its length.
fn pfc_frame(pkt: &Packet, out: &mut Vec<u8>) -> u32 {
    out.extend_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
    out.extend_from_slice(&[0x02, 0, 0, 0, 0xff, 0xfe]);
    out.extend_from_slice(&0x8808u16.to_be_bytes());
    out.extend_from_slice(&0x0101u16.to_be_bytes());
    let prio = pkt.prio.min(7);
    out.extend_from_slice(&(1u16 << prio).to_be_bytes());
    for p in 0..8 {
        let quanta = if p == prio { pkt.pause_quanta } else { 0 };
        out.extend_from_slice(&quanta.to_be_bytes());
    }
    out.resize(60, 0);
    60
}

/// The Ethernet, IPv4 and TCP header bytes of `pkt`, and the full frame length (payload
/// included, FCS excluded). Fails when the payload does not fit an IPv4 packet.
pub fn frame_bytes(pkt: &Packet) -> io::Result<(Vec<u8>, u32)> {
    let mut out = Vec::with_capacity(ETH_HEADER + IP_HEADER + TCP_BASE + MAX_OPTIONS);
    let len = build(pkt, &mut out)?;
    Ok((out, len))
}

/// The TCP checksum of `pkt`'s frame as its sender puts it on the wire (or as a NIC that
/// rewrote it carries it).
pub fn tcp_checksum(pkt: &Packet) -> io::Result<u16> {
    let (f, _) = frame_bytes(pkt)?;
    let tcp = ETH_HEADER + IP_HEADER;
    Ok(u16::from_be_bytes([f[tcp + 16], f[tcp + 17]]))
}

/// The 16-bit words of `pkt`'s frame a splicing NIC rewrites, as the TCP checksum sums them: the
/// addresses (in the pseudo-header), the ports, the sequence and acknowledgement numbers and
/// the SACK blocks' edges.
pub fn rewritten_words(pkt: &Packet) -> io::Result<Vec<u16>> {
    let (f, _) = frame_bytes(pkt)?;
    let word = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
    let ip = ETH_HEADER;
    let tcp = ip + IP_HEADER;
    let mut words: Vec<u16> = (ip + 12..ip + 20).step_by(2).chain((tcp..tcp + 12).step_by(2)).map(word).collect();
    let end = tcp + ((f[tcp + 12] >> 4) as usize) * 4;
    let mut at = tcp + TCP_BASE;
    while at < end {
        match f[at] {
            0 => break,
            1 => at += 1,
            kind => {
                let len = (f[at + 1] as usize).max(2);
                if kind == 5 {
                    words.extend((at + 2..at + len).step_by(2).map(word));
                }
                at += len;
            }
        }
    }
    Ok(words)
}

/// Updates checksum `hc` for 16-bit words changed from `old` to `new` (RFC 1624, eqn. 3:
/// HC' = ~(~HC + ~m + m')), without summing the rest of the segment again.
pub fn checksum_update(hc: u16, old: &[u16], new: &[u16]) -> u16 {
    let mut sum = !hc as u32;
    for &m in old {
        sum += !m as u32;
    }
    for &m in new {
        sum += m as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::SackBlock;

    #[test]
    fn an_incremental_update_gives_the_checksum_of_the_rewritten_frame() {
        let mut sack = [SackBlock::default(); crate::packet::MAX_SACK_BLOCKS];
        sack[0] = SackBlock { start: 2896, end: 4344 };
        let old = Packet {
            flow: 7,
            src: 3,
            dst: 9,
            ack: 1448,
            sack,
            sack_len: 1,
            flags: flags::ACK | flags::REVERSE,
            ..Packet::default()
        };
        let new = Packet { flow: 4242, src: 0, dst: 260, ..old };
        let (from, to) = (rewritten_words(&old).unwrap(), rewritten_words(&new).unwrap());
        assert_eq!(from.len(), 10 + 4, "addresses, ports, sequence and ACK numbers, one SACK block");
        let updated = checksum_update(tcp_checksum(&old).unwrap(), &from, &to);
        assert_ne!(updated, tcp_checksum(&old).unwrap());
        assert_eq!(updated, tcp_checksum(&new).unwrap());
    }
}
