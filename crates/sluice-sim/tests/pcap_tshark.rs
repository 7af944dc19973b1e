//! Pcap traces read back by tshark with the TCP-INT dissector (`tools/wireshark/tcp_int.lua`):
//! every TCP-INT field, sequence numbers, SACK blocks, ECN and timestamps decode to what was
//! written, and Wireshark finds the IPv4 and TCP checksums good.
//!
//! Needs `tshark` on PATH (Debian: `apt-get install tshark`). Without it the tests fail, unless
//! `SLUICE_SKIP_TSHARK=1` is set, in which case they say why and skip.

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use sluice_sim::metrics::pcap::{client_port, frame_bytes, PcapSink, Snap, SERVICE_PORT};
use sluice_sim::packet::tcp_int::TcpInt;
use sluice_sim::packet::{flags, Ecn, Packet, SackBlock};
use sluice_sim::time::Time;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const MSS: u32 = 1448;
const FLOW: u32 = 77;
const SENDER: u32 = 2;
const RECEIVER: u32 = 300;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// True when tshark can run; false (after saying why) when the run asked to skip it.
fn have_tshark(test: &str) -> bool {
    if Command::new("tshark").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    if std::env::var("SLUICE_SKIP_TSHARK").as_deref() == Ok("1") {
        eprintln!("{test}: skipped: tshark is not on PATH and SLUICE_SKIP_TSHARK=1");
        return false;
    }
    panic!(
        "{test}: tshark is not on PATH. Install it (Debian: apt-get install tshark) or set \
         SLUICE_SKIP_TSHARK=1 to skip the Wireshark checks."
    );
}

/// Runs tshark on `file` with the dissector and checksum validation, printing `fields`
/// separated by `|`, one line per frame.
fn tshark(file: &Path, extra: &[&str], fields: &[&str]) -> Vec<Vec<String>> {
    let lua = repo().join("tools/wireshark/tcp_int.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(file).arg("-X").arg(format!("lua_script:{}", lua.display()));
    cmd.args(["-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE"]);
    cmd.args(["-o", "tcp.relative_sequence_numbers:TRUE", "-T", "fields", "-E", "separator=|"]);
    cmd.args(extra);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(!stderr.contains("Lua"), "the dissector did not load cleanly: {stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().map(|l| l.split('|').map(str::to_string).collect()).collect()
}

/// Parses a tshark number, decimal or `0x` hex.
fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("{s:?} is not a number: {e}"))
}

fn vectors() -> Vec<(String, TcpInt)> {
    let text = std::fs::read_to_string(repo().join("tests/vectors/tcp_int.json")).expect("vectors file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("vectors JSON");
    v["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let hex = t["bytes"].as_str().unwrap();
            let bytes: Vec<u8> =
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (t["name"].as_str().unwrap().to_string(), TcpInt::decode(&bytes).unwrap())
        })
        .collect()
}

fn fwd(seq: u64, payload: u32, int: Option<TcpInt>) -> Packet {
    Packet {
        flow: FLOW,
        src: SENDER,
        dst: RECEIVER,
        seq,
        payload,
        flags: flags::ACK,
        ecn: Ecn::Ect,
        ttl: 60,
        prio: 1,
        ts: Time::from_us(100 + seq / 1000),
        ts_echo: Time::from_us(90),
        int,
        ..Packet::default()
    }
}

fn back(ack: u64, sack: &[(u32, u32)], int: Option<TcpInt>) -> Packet {
    let mut p = Packet {
        flow: FLOW,
        src: RECEIVER,
        dst: SENDER,
        ack,
        flags: flags::ACK | flags::ECE | flags::REVERSE,
        ecn: Ecn::NotEct,
        ttl: 62,
        ts: Time::from_us(200),
        ts_echo: Time::from_us(100),
        sack_len: sack.len() as u8,
        int,
        ..Packet::default()
    };
    for (i, &(s, e)) in sack.iter().enumerate() {
        p.sack[i] = SackBlock { start: s, end: e };
    }
    p
}

/// A connection: handshake, one data segment per TCP-INT vector, a CE-marked segment, two ACKs
/// with SACK blocks (one with a TCP-INT echo), and a FIN.
fn trace() -> Vec<(Time, Packet)> {
    let syn = Packet {
        flow: FLOW,
        src: SENDER,
        dst: RECEIVER,
        flags: flags::SYN | flags::ECE | flags::CWR,
        ttl: 64,
        ts: Time::from_us(90),
        ..Packet::default()
    };
    let syn_ack = Packet {
        flow: FLOW,
        src: RECEIVER,
        dst: SENDER,
        flags: flags::SYN | flags::ACK | flags::ECE | flags::REVERSE,
        ttl: 62,
        ts: Time::from_us(95),
        ts_echo: Time::from_us(90),
        ..Packet::default()
    };
    let mut pkts = vec![syn, syn_ack];
    let vs = vectors();
    for (i, (_, int)) in vs.iter().enumerate() {
        pkts.push(fwd(i as u64 * MSS as u64, MSS, Some(*int)));
    }
    let n = vs.len() as u64;
    let mut ce = fwd(n * MSS as u64, MSS, None);
    ce.ecn = Ecn::Ce;
    pkts.push(ce);
    let echo = vs.iter().find(|(name, _)| name == "ack_echo").expect("ack_echo vector").1;
    // Three SACK blocks beside TCP-INT: only the first fits.
    pkts.push(back(MSS as u64, &[(MSS, 2 * MSS), (3 * MSS, 4 * MSS), (5 * MSS, 6 * MSS)], Some(echo)));
    pkts.push(back(MSS as u64, &[(MSS, 2 * MSS), (3 * MSS, 4 * MSS), (5 * MSS, 6 * MSS)], None));
    let mut fin = fwd((n + 1) * MSS as u64, 100, None);
    fin.flags |= flags::FIN;
    pkts.push(fin);
    // 3 s + 1 µs + 7 ns apart, with picoseconds that the trace truncates.
    pkts.into_iter().enumerate().map(|(i, p)| (Time(3_000_001_007_250 * (i as u64 + 1)), p)).collect()
}

fn write(path: &Path, snap: Snap) -> Vec<(Time, Packet)> {
    let t = trace();
    let mut sink = PcapSink::create_with(path, snap).unwrap();
    for (at, p) in &t {
        sink.record(*at, p).unwrap();
    }
    sink.finish().unwrap();
    t
}

const INT_FIELDS: [&str; 10] = [
    "tcp_int.intval",
    "tcp_int.qdepth_flag",
    "tcp_int.value",
    "tcp_int.ecr",
    "tcp_int.ecr_qdepth_flag",
    "tcp_int.ecr_value",
    "tcp_int.id",
    "tcp_int.id_ecr",
    "tcp_int.lat",
    "tcp_int.lat_ecr",
];

fn expected_int(o: &Option<TcpInt>) -> Vec<String> {
    match o {
        None => vec![String::new(); INT_FIELDS.len()],
        Some(o) => [
            o.int_val as u32,
            (o.int_val >> 7) as u32,
            (o.int_val & 0x7f) as u32,
            o.int_ecr as u32,
            (o.int_ecr >> 7) as u32,
            (o.int_ecr & 0x7f) as u32,
            o.id as u32,
            o.id_ecr as u32,
            o.lat,
            o.lat_ecr,
        ]
        .iter()
        .map(|v| v.to_string())
        .collect(),
    }
}

#[test]
fn tshark_decodes_every_field_and_finds_checksums_good() {
    if !have_tshark("tshark_decodes_every_field_and_finds_checksums_good") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.pcap");
    let trace = write(&file, Snap::Full);

    let mut fields = INT_FIELDS.to_vec();
    fields.extend([
        "tcp.checksum.status",
        "ip.checksum.status",
        "frame.time_epoch",
        "ip.src",
        "ip.dst",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.seq",
        "tcp.ack",
        "tcp.len",
        "tcp.flags",
        "ip.dsfield.ecn",
        "ip.dsfield.dscp",
        "ip.ttl",
        "tcp.options.timestamp.tsval",
        "tcp.options.sack_le",
        "tcp.options.sack_re",
        "tcp.analysis.flags",
        "frame.len",
    ]);
    let rows = tshark(&file, &[], &fields);
    assert_eq!(rows.len(), trace.len(), "one line per frame");
    let k = INT_FIELDS.len();
    for (i, ((t, p), row)) in trace.iter().zip(&rows).enumerate() {
        let ctx = format!("frame {} ({row:?})", i + 1);
        assert_eq!(row.len(), fields.len(), "{ctx}");
        let got_int: Vec<String> =
            row[..k].iter().map(|s| if s.is_empty() { s.clone() } else { num(s).to_string() }).collect();
        assert_eq!(got_int, expected_int(&p.int), "TCP-INT fields, {ctx}");
        assert_eq!(row[k], "1", "TCP checksum Good, {ctx}");
        assert_eq!(row[k + 1], "1", "IPv4 checksum Good, {ctx}");
        let ns = t.ns();
        assert_eq!(row[k + 2], format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000), "timestamp, {ctx}");
        let (client, server) = (format!("10.0.0.{}", SENDER + 1), "10.0.1.45".to_string());
        let fwd = p.is_forward();
        let (src, dst) = if fwd { (&client, &server) } else { (&server, &client) };
        assert_eq!((&row[k + 3], &row[k + 4]), (src, dst), "addresses, {ctx}");
        let (sp, dp) = (client_port(FLOW).to_string(), SERVICE_PORT.to_string());
        let (sp, dp) = if fwd { (&sp, &dp) } else { (&dp, &sp) };
        assert_eq!((&row[k + 5], &row[k + 6]), (sp, dp), "ports, {ctx}");
        // Relative sequence numbers are the simulator's offsets, plus one for the SYN.
        let syn = p.has(flags::SYN);
        assert_eq!(num(&row[k + 7]), if syn { 0 } else { p.seq + 1 }, "seq, {ctx}");
        let initial_syn = syn && !p.has(flags::ACK);
        assert_eq!(num(&row[k + 8]), if initial_syn { 0 } else { p.ack + 1 }, "ack, {ctx}");
        assert_eq!(num(&row[k + 9]), p.payload as u64, "len, {ctx}");
        let mut wire = if initial_syn { 0 } else { 0x10 };
        for (b, w) in [(flags::FIN, 1), (flags::SYN, 2), (flags::ECE, 0x40), (flags::CWR, 0x80)] {
            if p.has(b) {
                wire |= w;
            }
        }
        assert_eq!(num(&row[k + 10]), wire, "flags, {ctx}");
        let ecn = match p.ecn {
            Ecn::NotEct => 0,
            Ecn::Ect => 2,
            Ecn::Ce => 3,
        };
        assert_eq!(num(&row[k + 11]), ecn, "ECN, {ctx}");
        assert_eq!(num(&row[k + 12]), p.prio as u64, "DSCP, {ctx}");
        assert_eq!(num(&row[k + 13]), p.ttl as u64, "TTL, {ctx}");
        assert_eq!(num(&row[k + 14]), p.ts.0 / 1_000_000, "TSval, {ctx}");
        // SACK edges, relative like sequence numbers; beside TCP-INT only one block fits.
        let blocks: Vec<(u64, u64)> = p.sack_ranges().take(if p.int.is_some() { 1 } else { 3 }).collect();
        let le: Vec<String> = blocks.iter().map(|b| (b.0 + 1).to_string()).collect();
        let re: Vec<String> = blocks.iter().map(|b| (b.1 + 1).to_string()).collect();
        assert_eq!((row[k + 15].clone(), row[k + 16].clone()), (le.join(","), re.join(",")), "SACK, {ctx}");
        // A consistent stream: no retransmission, lost segment or out-of-order flags on data.
        if fwd {
            assert_eq!(row[k + 17], "", "TCP analysis flags on a forward segment, {ctx}");
        }
        assert_eq!(num(&row[k + 18]), frame_bytes(p).unwrap().1 as u64, "frame length, {ctx}");
    }
    // The vectors cover both INTval branches.
    let branches: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert!(branches.contains(&"0") && branches.contains(&"1"), "{branches:?}");
}

#[test]
fn headers_only_trace_keeps_lengths_and_fields() {
    if !have_tshark("headers_only_trace_keeps_lengths_and_fields") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.pcap");
    let trace = write(&file, Snap::Headers);
    let mut fields = INT_FIELDS.to_vec();
    fields.extend(["frame.len", "frame.cap_len", "ip.checksum.status", "tcp.checksum.status", "tcp.len"]);
    let rows = tshark(&file, &[], &fields);
    assert_eq!(rows.len(), trace.len());
    let k = INT_FIELDS.len();
    for ((_, p), row) in trace.iter().zip(&rows) {
        let (headers, full) = frame_bytes(p).unwrap();
        let got_int: Vec<String> =
            row[..k].iter().map(|s| if s.is_empty() { s.clone() } else { num(s).to_string() }).collect();
        assert_eq!(got_int, expected_int(&p.int), "{row:?}");
        assert_eq!((num(&row[k]), num(&row[k + 1])), (full as u64, headers.len() as u64), "{row:?}");
        assert_eq!(row[k + 2], "1", "IPv4 checksum Good: {row:?}");
        // Wireshark verifies the TCP checksum only when the whole segment was captured.
        assert_eq!(row[k + 3], if p.payload == 0 { "1" } else { "2" }, "TCP checksum status: {row:?}");
        assert_eq!(num(&row[k + 4]), p.payload as u64, "{row:?}");
    }
}

/// Recomputes the TCP checksum of a full frame (IPv4 header without options).
fn fix_tcp_checksum(f: &mut [u8]) {
    f[50] = 0;
    f[51] = 0;
    let tcp_len = (f.len() - 34) as u32;
    let mut s: u32 = 6 + tcp_len;
    let mut add = |b: &[u8]| {
        for w in b.chunks(2) {
            s += (w[0] as u32) << 8 | *w.get(1).unwrap_or(&0) as u32;
        }
    };
    add(&f[26..34]);
    add(&f[34..]);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    let c = !(s as u16);
    f[50..52].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn dissector_flags_a_wrong_length() {
    if !have_tshark("dissector_flags_a_wrong_length") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.pcap");
    let int = TcpInt { int_val: 0x42, int_ecr: 0, id: 59, id_ecr: 0, lat: 0x01_0203, lat_ecr: 0 };
    let (good, len) = frame_bytes(&fwd(0, 0, Some(int))).unwrap();
    assert_eq!(len as usize, good.len());
    // The TCP-INT option sits after the 12 timestamp bytes: claim 10 bytes and pad with NOPs.
    let opt = 34 + 20 + 12;
    assert_eq!(good[opt], 0x72);
    let mut bad = good.clone();
    bad[opt + 1] = 10;
    bad[opt + 10] = 1;
    bad[opt + 11] = 1;
    fix_tcp_checksum(&mut bad);

    let header =
        PcapHeader { datalink: DataLink::ETHERNET, ts_resolution: TsResolution::NanoSecond, ..Default::default() };
    let mut w = PcapWriter::with_header(std::fs::File::create(&file).unwrap(), header).unwrap();
    for f in [&good, &bad] {
        w.write_packet(&PcapPacket::new(Duration::from_nanos(1), f.len() as u32, f)).unwrap();
    }
    drop(w);

    let fields = [
        "tcp_int.len",
        "tcp_int.intval",
        "tcp_int.id",
        "tcp_int.lat",
        "tcp_int.lat_ecr",
        "tcp.checksum.status",
        "_ws.expert.message",
    ];
    let rows = tshark(&file, &[], &fields);
    assert_eq!(rows.len(), 2);
    // The well-formed option raises no expert info; the short one does, and still shows the
    // fields its ten bytes hold.
    assert_eq!(rows[0][0], "12");
    assert_eq!((num(&rows[0][1]), num(&rows[0][2]), num(&rows[0][3]), num(&rows[0][4])), (0x42, 59, 0x01_0203, 0));
    assert_eq!(rows[0][5], "1");
    assert!(!rows[0][6].contains("TCP-INT"), "{:?}", rows[0]);
    assert_eq!(rows[1][0], "10");
    assert!(rows[1][6].contains("TCP-INT option length 10, expected 12"), "{:?}", rows[1]);
    assert_eq!((num(&rows[1][1]), num(&rows[1][2]), num(&rows[1][3])), (0x42, 59, 0x01_0203));
    assert_eq!(rows[1][4], "", "LatEcr lies beyond a 10-byte option");
    assert_eq!(rows[1][5], "1");

    let only_bad = tshark(&file, &["-Y", "tcp_int.len_bad"], &["frame.number"]);
    assert_eq!(only_bad, vec![vec!["2".to_string()]]);
}
