//! Packet capture: simulated packets as real Ethernet/IPv4/TCP frames (their wire form is
//! `packet/wire.rs`) in a pcap file with nanosecond timestamps (magic `0xa1b23c4d`, link type
//! Ethernet, little endian), so Wireshark and tshark read a run like a capture from a real fabric.
//!
//! Timestamps are the simulated time, truncated from picoseconds to nanoseconds, counted from the
//! epoch (a run starting at 0 shows as 1970-01-01).

pub use crate::packet::wire::*;
use crate::packet::Packet;
use crate::time::Time;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

/// Snapshot length in the file header; large enough for any IPv4 frame.
pub const SNAPLEN: u32 = 262_144;

/// How much of each frame a record holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Snap {
    /// Headers only; the payload is counted in the original length but not stored.
    #[default]
    Headers,
    /// The whole frame, zero payload included.
    Full,
}

/// A pcap file being written: one record per captured packet.
pub struct PcapSink<W: Write = BufWriter<File>> {
    writer: PcapWriter<W>,
    snap: Snap,
    buf: Vec<u8>,
    records: u64,
}

fn to_io(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        e => io::Error::other(e),
    }
}

impl PcapSink<BufWriter<File>> {
    /// Creates (truncates) the file at `path` and writes the pcap header; records hold headers.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::create_with(path, Snap::Headers)
    }

    /// Like [`PcapSink::create`], choosing how much of each frame to store.
    pub fn create_with(path: impl AsRef<Path>, snap: Snap) -> io::Result<Self> {
        let path = path.as_ref();
        let file = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))?;
        PcapSink::new(BufWriter::new(file), snap)
    }
}

impl<W: Write> PcapSink<W> {
    /// Writes the pcap header to `w` and returns a sink recording into it.
    pub fn new(w: W, snap: Snap) -> io::Result<Self> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            // Fixed, not native, so the same run gives the same bytes on every machine.
            endianness: Endianness::Little,
        };
        let writer = PcapWriter::with_header(w, header).map_err(to_io)?;
        Ok(PcapSink { writer, snap, buf: Vec::with_capacity(128), records: 0 })
    }

    /// Appends one record: `pkt` as seen at simulated time `t`.
    pub fn record(&mut self, t: Time, pkt: &Packet) -> io::Result<()> {
        let len = build(pkt, &mut self.buf)?;
        if self.snap == Snap::Full {
            self.buf.resize(len as usize, 0);
        }
        let rec = PcapPacket::new(Duration::from_nanos(t.ns()), len, &self.buf);
        self.writer.write_packet(&rec).map_err(to_io)?;
        self.records += 1;
        Ok(())
    }

    /// Number of records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> io::Result<W> {
        let mut w = self.writer.into_writer();
        w.flush()?;
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::tcp_int::TcpInt;
    use crate::packet::{flags, Caps, Ecn, SackBlock};

    /// A data packet from host 3 to host 7 of flow 42 carrying TCP-INT.
    fn data(seq: u64, payload: u32) -> Packet {
        Packet {
            flow: 42,
            src: 3,
            dst: 7,
            seq,
            payload,
            flags: flags::ACK,
            ecn: Ecn::Ect,
            ttl: 61,
            prio: 2,
            ts: Time::from_us(1_500),
            ts_echo: Time::from_us(1_200),
            int: Some(TcpInt { int_val: 0x85, int_ecr: 0, id: 61, id_ecr: 0, lat: 0xabcdef, lat_ecr: 0 }),
            ..Packet::default()
        }
    }

    /// The ACK of `data`'s flow, with `n` SACK blocks and an INT echo when `int`.
    fn ack(cum: u64, n: u8, int: bool) -> Packet {
        let mut p = Packet {
            flow: 42,
            src: 7,
            dst: 3,
            ack: cum,
            flags: flags::ACK | flags::ECE | flags::REVERSE,
            ttl: 64,
            ts: Time::from_us(1_600),
            ts_echo: Time::from_us(1_500),
            sack_len: n,
            int: int.then_some(TcpInt { int_ecr: 0x85, id_ecr: 61, lat_ecr: 0xabcdef, ..TcpInt::default() }),
            ..Packet::default()
        };
        for i in 0..n as u32 {
            p.sack[i as usize] = SackBlock { start: 3000 * (i + 1), end: 3000 * (i + 1) + 1448 };
        }
        p
    }

    /// An independent Internet checksum check: the 16-bit one's-complement sum of a correctly
    /// checksummed region is 0xffff.
    fn ones_sum(chunks: &[&[u8]]) -> u16 {
        let bytes: Vec<u8> = chunks.concat();
        let mut s: u64 = 0;
        for i in (0..bytes.len()).step_by(2) {
            let hi = bytes[i] as u64;
            let lo = *bytes.get(i + 1).unwrap_or(&0) as u64;
            s += hi << 8 | lo;
        }
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    fn tcp_of(f: &[u8]) -> &[u8] {
        let off = ((f[14 + 32] >> 4) as usize) * 4;
        &f[34..34 + off]
    }

    /// The TCP options as (kind, bytes including kind and length), NOPs skipped.
    fn options(f: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let o = &tcp_of(f)[20..];
        let (mut i, mut v) = (0, Vec::new());
        while i < o.len() {
            match o[i] {
                0 => break,
                1 => i += 1,
                k => {
                    let l = o[i + 1] as usize;
                    v.push((k, o[i..i + l].to_vec()));
                    i += l;
                }
            }
        }
        v
    }

    fn be32(b: &[u8]) -> u32 {
        u32::from_be_bytes(b[..4].try_into().unwrap())
    }

    #[test]
    fn a_pfc_frame_is_an_802_1qbb_mac_control_frame() {
        let (bytes, len) = frame_bytes(&crate::net::pfc::frame(3, 0x1234)).unwrap();
        assert_eq!((len, bytes.len()), (60, 60));
        assert_eq!(&bytes[..6], &[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01], "the MAC control address");
        assert_eq!(&bytes[12..16], &[0x88, 0x08, 0x01, 0x01], "MAC control, opcode PFC");
        assert_eq!(&bytes[16..18], &[0x00, 0x08], "class-enable vector: priority 3");
        assert_eq!(&bytes[18 + 2 * 3..18 + 2 * 4], &[0x12, 0x34], "priority 3's pause time");
        assert!(bytes[18..18 + 6].iter().all(|&b| b == 0));
    }

    #[test]
    fn checksums_verify_over_the_zero_filled_frame() {
        for p in [data(0, 1448), data(1448, 1), data(0, 0), ack(2896, 3, false), ack(0, 1, true)] {
            let (h, len) = frame_bytes(&p).unwrap();
            let mut full = h.clone();
            full.resize(len as usize, 0);
            assert_eq!(ones_sum(&[&full[14..34]]), 0xffff, "IPv4 header checksum");
            let tcp_len = (len - 34) as u16;
            let pseudo = [&full[26..34], &[0, 6], &tcp_len.to_be_bytes()[..]].concat();
            assert_eq!(ones_sum(&[&pseudo, &full[34..]]), 0xffff, "TCP checksum, payload {}", p.payload);
        }
        // The payload length enters through the pseudo-header, so it changes the checksum.
        let (a, _) = frame_bytes(&data(0, 1448)).unwrap();
        let (b, _) = frame_bytes(&data(0, 0)).unwrap();
        assert_ne!(a[50..52], b[50..52]);
    }

    #[test]
    fn a_trimmed_packet_is_its_headers_alone_with_the_sequence_number_of_its_data() {
        let whole = data(2896, 1448);
        let trimmed = Packet { fabric: crate::packet::fabric::TRIMMED, wire_bytes: 64, ..whole };
        let (w, wlen) = frame_bytes(&whole).unwrap();
        let (t, tlen) = frame_bytes(&trimmed).unwrap();
        assert_eq!(wlen - tlen, 1448, "the payload is gone");
        assert_eq!(tlen as usize, t.len(), "nothing but headers");
        assert_eq!(w[38..42], t[38..42], "the same sequence number");
        assert_eq!(u16::from_be_bytes([t[16], t[17]]) as u32, tlen - 14, "IP total length");
        let pseudo = [&t[26..34], &[0, 6], &((tlen - 34) as u16).to_be_bytes()[..]].concat();
        assert_eq!(ones_sum(&[&pseudo, &t[34..]]), 0xffff, "TCP checksum");
    }

    #[test]
    fn headers_carry_addresses_ports_ecn_ttl_and_lengths() {
        let (f, len) = frame_bytes(&data(0, 1448)).unwrap();
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 8]); // host 7
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 4]); // host 3
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(f[14], 0x45);
        assert_eq!(f[15], 2 << 2 | 0b10, "DSCP 2, ECT(0)");
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 20 + 44 + 1448);
        assert_eq!(f[22], 61);
        assert_eq!(f[23], 6);
        assert_eq!(&f[26..30], &[10, 0, 0, 4]);
        assert_eq!(&f[30..34], &[10, 0, 0, 8]);
        assert_eq!(u16::from_be_bytes([f[34], f[35]]), 10042);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), SERVICE_PORT);
        assert_eq!(len, 14 + 20 + 44 + 1448);
        assert_eq!(f.len(), 14 + 20 + 44);

        let mut ce = data(0, 10);
        ce.ecn = Ecn::Ce;
        assert_eq!(frame_bytes(&ce).unwrap().0[15] & 3, 0b11);
        ce.ecn = Ecn::NotEct;
        assert_eq!(frame_bytes(&ce).unwrap().0[15] & 3, 0b00);

        // The ACK goes back with addresses and ports swapped.
        let (a, _) = frame_bytes(&ack(0, 0, false)).unwrap();
        assert_eq!(&a[26..34], &[10, 0, 0, 8, 10, 0, 0, 4]);
        assert_eq!(u16::from_be_bytes([a[34], a[35]]), SERVICE_PORT);
        assert_eq!(u16::from_be_bytes([a[36], a[37]]), 10042);
        assert_eq!(host_ipv4(255), [10, 0, 1, 0]);
        assert_eq!(host_mac(0x12345), [2, 0, 0, 1, 0x23, 0x46]);
    }

    #[test]
    fn data_offset_and_option_layout() {
        let (f, _) = frame_bytes(&data(0, 100)).unwrap();
        let t = tcp_of(&f);
        assert_eq!(t.len(), 44, "20 + timestamps 12 + TCP-INT 12");
        assert_eq!(&t[20..24], &[1, 1, 8, 10]);
        assert_eq!(be32(&t[24..]), 1_500);
        assert_eq!(be32(&t[28..]), 1_200);
        assert_eq!(t[32], 0x72);
        assert_eq!(t[13], 0x10, "ACK only");

        let (f, _) = frame_bytes(&ack(100, 0, false)).unwrap();
        assert_eq!(tcp_of(&f).len(), 32, "timestamps only, as Linux sends");
        assert_eq!(f[34 + 13], 0x10 | 0x40, "ACK + ECE");
    }

    #[test]
    fn int_option_round_trips_from_the_frame() {
        for p in [data(0, 1448), ack(10, 1, true)] {
            let (f, _) = frame_bytes(&p).unwrap();
            let opts = options(&f);
            let int = opts.iter().find(|(k, _)| *k == 0x72).expect("TCP-INT option present");
            assert_eq!(int.1.len(), 12);
            assert_eq!(TcpInt::decode(&int.1), Ok(p.int.unwrap()));
        }
        let mut plain = data(0, 1);
        plain.int = None;
        assert!(options(&frame_bytes(&plain).unwrap().0).iter().all(|(k, _)| *k != 0x72));
    }

    #[test]
    fn sequence_numbers_follow_the_handshake() {
        let (si, ri) = (isn(42, true), isn(42, false));
        assert_ne!(si, ri);
        let syn = Packet { flow: 42, src: 3, dst: 7, flags: flags::SYN, ttl: 64, caps: Caps(Caps::PROPOSED), ..Packet::default() };
        let (f, _) = frame_bytes(&syn).unwrap();
        let t = tcp_of(&f);
        assert_eq!((be32(&t[4..]), be32(&t[8..]), t[13]), (si, 0, 0x02));
        let kinds: Vec<u8> = options(&f).iter().map(|o| o.0).collect();
        assert_eq!(kinds, [4, 8, 3, CAPS_OPTION_KIND], "SACK-permitted, timestamps, window scale, negotiation");
        // A stack without the agent proposes nothing, and its SYN carries no option.
        let silent = Packet { caps: Caps::default(), ..syn };
        let kinds: Vec<u8> = options(&frame_bytes(&silent).unwrap().0).iter().map(|o| o.0).collect();
        assert_eq!(kinds, [4, 8, 3], "no negotiation option without a proposal");

        let synack = Packet { flow: 42, src: 7, dst: 3, flags: flags::SYN | flags::ACK | flags::REVERSE, ..Packet::default() };
        let (f, _) = frame_bytes(&synack).unwrap();
        let t = tcp_of(&f);
        assert_eq!((be32(&t[4..]), be32(&t[8..]), t[13]), (ri, si.wrapping_add(1), 0x12));
        assert_eq!(u16::from_be_bytes([t[0], t[1]]), SERVICE_PORT);

        // First data byte follows the SYN; the data segment acknowledges the SYN-ACK.
        let (f, _) = frame_bytes(&data(0, 1448)).unwrap();
        assert_eq!((be32(&tcp_of(&f)[4..]), be32(&tcp_of(&f)[8..])), (si.wrapping_add(1), ri.wrapping_add(1)));
        let (f, _) = frame_bytes(&data(5u64 << 32 | 7, 1448)).unwrap();
        assert_eq!(be32(&tcp_of(&f)[4..]), si.wrapping_add(8), "offsets wrap modulo 2^32");
        let (f, _) = frame_bytes(&ack(2896, 0, false)).unwrap();
        assert_eq!(be32(&tcp_of(&f)[8..]), si.wrapping_add(2897));
        assert_eq!(be32(&tcp_of(&f)[4..]), ri.wrapping_add(1));
    }

    #[test]
    fn sack_blocks_that_do_not_fit_are_dropped() {
        let si = isn(42, true);
        // Timestamps (12) + three blocks (28) fill all 40 option bytes.
        let (f, _) = frame_bytes(&ack(1000, 3, false)).unwrap();
        assert_eq!(tcp_of(&f).len(), 60);
        let sack = options(&f).into_iter().find(|o| o.0 == 5).unwrap().1;
        assert_eq!(sack.len(), 2 + 3 * 8);
        assert_eq!(be32(&sack[2..]), si.wrapping_add(1 + 4000));
        assert_eq!(be32(&sack[6..]), si.wrapping_add(1 + 5448));
        assert_eq!(be32(&sack[18..]), si.wrapping_add(1 + 10000), "oldest block last");

        // With TCP-INT (12) beside timestamps only the most recent block fits.
        let (f, _) = frame_bytes(&ack(1000, 3, true)).unwrap();
        assert_eq!(tcp_of(&f).len(), 56);
        let opts = options(&f);
        let sack = &opts.iter().find(|o| o.0 == 5).unwrap().1;
        assert_eq!(sack.len(), 10);
        assert_eq!(be32(&sack[2..]), si.wrapping_add(1 + 4000));
        assert!(opts.iter().any(|o| o.0 == 0x72));
    }

    #[test]
    fn oversized_payload_is_an_error() {
        assert!(frame_bytes(&data(0, 65_535 - 64)).is_ok());
        let e = frame_bytes(&data(0, 65_535 - 63)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn file_header_and_records_carry_nanoseconds_and_lengths() {
        let le = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap());
        let mut sink = PcapSink::new(Vec::new(), Snap::Headers).unwrap();
        // 2.000000123 s and 456 ps: the picoseconds are truncated.
        sink.record(Time(2_000_000_123_456), &data(0, 1448)).unwrap();
        sink.record(Time::from_ns(7), &ack(1448, 0, false)).unwrap();
        assert_eq!(sink.records(), 2);
        let out = sink.finish().unwrap();

        assert_eq!(le(&out[0..]), 0xa1b2_3c4d, "nanosecond magic");
        assert_eq!(le(&out[20..]), 1, "link type Ethernet");
        assert_eq!(le(&out[16..]), SNAPLEN);
        let r = &out[24..];
        assert_eq!((le(&r[0..]), le(&r[4..])), (2, 123));
        assert_eq!(le(&r[8..]), 14 + 20 + 44, "incl_len: headers only");
        assert_eq!(le(&r[12..]), 14 + 20 + 44 + 1448, "orig_len: the whole frame");
        assert_eq!(&r[16..16 + 78], &frame_bytes(&data(0, 1448)).unwrap().0[..]);
        let r = &r[16 + 78..];
        assert_eq!((le(&r[0..]), le(&r[4..])), (0, 7));
        assert_eq!((le(&r[8..]), le(&r[12..])), (66, 66));
        assert_eq!(r.len(), 16 + 66);

        let mut full = PcapSink::new(Vec::new(), Snap::Full).unwrap();
        full.record(Time::ZERO, &data(0, 1448)).unwrap();
        let out = full.finish().unwrap();
        assert_eq!((le(&out[32..]), le(&out[36..])), (1526, 1526));
        assert!(out[24 + 16 + 78..].iter().all(|&b| b == 0));
        assert_eq!(out.len(), 24 + 16 + 1526);
    }
}
