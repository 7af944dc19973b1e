//! AccelTCP (Moon et al., NSDI 2020) on the host CPU model: SYN cookies on the NIC keep the host
//! free of half-open state and drop forged handshakes, teardown offload takes the close off the
//! host and survives a lost FIN, a full NIC table makes the host fall back without losing
//! anything, the key-value experiment's gain over the host stack (paper: 2.3x on one core), and
//! the L7 proxy's gain from splicing over HAProxy on mTCP (paper: 17x on one core, 11.8x on eight).

mod common;
use common::{run_file, run_text};
use sluice_sim::host::cpu::{CpuCosts, Op};
use sluice_sim::ids::{FlowId, HostId};
use sluice_sim::packet::{flags, Packet};
use sluice_sim::scenario;
use sluice_sim::time::Time;
use sluice_sim::transport::tcp::State;
use sluice_sim::world::World;
use std::path::Path;

const KV: &str = "scenarios/acceltcp_kv.toml";

/// One client (host 1) opening one connection to host 0 with a 100-byte request; host 0's CPU is
/// modelled and its NIC offloads when `offload` says so.
fn one_connection(offload: bool, extra: &str) -> String {
    let hosts = if offload { "[0]" } else { "[]" };
    format!(
        r#"
[sim]
seed = 1
[topology]
kind = "star"
hosts = 2
host_rate = "10Gbps"
host_delay = "1us"
[transport]
handshake = true
time_wait = "50us"
[[workloads]]
kind = "flows"
flows = [{{ src = 1, dst = 0, size = "100B", start = "0us" }}]
[cpu]
hosts = [0]
[offload]
hosts = {hosts}
{extra}
"#
    )
}

fn build(text: &str) -> World {
    let loaded = scenario::parse(text, "test.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"));
    scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"))
}

fn cycles(world: &World, op: Op) -> u64 {
    world.cpus()[0].as_ref().expect("host 0's CPU").breakdown().map(|c| c.0[op as usize]).sum()
}

#[test]
fn a_syn_answered_by_the_nic_leaves_the_host_without_state_or_work() {
    // The run ends after the SYN-ACK reached the client (4.3 us from the NIC, 5.3 us from the
    // host stack) and before the client's ACK can reach the server (6.6 us): the handshake is
    // never completed.
    for offload in [false, true] {
        let text = one_connection(offload, "").replace("seed = 1", "seed = 1\nduration = \"6us\"");
        let mut world = build(&text);
        world.run(&mut |_| {});
        world.check_conservation().unwrap();
        let (client, server) = (world.flows()[0].tcp_client().expect("the client end"), world.flows()[0].tcp_server().expect("the server end"));
        let setup = cycles(&world, Op::Setup);
        if offload {
            assert_eq!(server.state, State::Listen, "the host keeps no half-open connection");
            assert_eq!(setup + cycles(&world, Op::Rx), 0, "the host did no work for the SYN");
            assert_eq!(world.offloads()[0].as_ref().unwrap().counts.syn_cookies, 1);
        } else {
            assert_eq!(server.state, State::SynReceived, "the host stack holds a half-open connection");
            assert_eq!(setup, CpuCosts::default().setup);
        }
        // The SYN-ACK reached the client either way; its ACK, the data and its FIN are on the wire.
        assert_eq!(client.state, State::FinWait1);
    }
}

#[test]
fn a_handshake_through_the_nic_gives_a_working_connection_and_a_forged_ack_is_dropped() {
    let mut world = build(&one_connection(true, ""));
    // Before the client's SYN, a segment claiming to complete a handshake with a made-up cookie.
    let forged = Packet {
        flow: 0,
        src: 1,
        dst: 0,
        flags: flags::ACK,
        cookie: 0x5eed_c0de,
        payload: 100,
        wire_bytes: 190,
        ..Packet::default()
    };
    world.inject(HostId(0), forged);
    assert!(world.flows()[0].tcp_server().unwrap().listening(), "the forged ACK created nothing");
    world.run(&mut |_| {});
    world.check_conservation().unwrap();
    let counts = world.offloads()[0].as_ref().unwrap().counts;
    assert_eq!((counts.bad_cookies, counts.syn_cookies, counts.verified), (1, 1, 1));
    let flow = &world.flows()[0];
    assert_eq!(flow.bytes_delivered(), 100, "the real handshake's connection carried the data");
    assert!(flow.finish.is_some(), "and was acknowledged");
    // The client closed into TIME_WAIT (which alone records when it ends).
    assert!(flow.client.is_none() && flow.closed_at.is_some(), "the client got the NIC's FIN");
    // The host's work: the data segment only (its TCB, the copy, the close handed over).
    assert_eq!(cycles(&world, Op::Setup), 0);
    assert_eq!(cycles(&world, Op::Accept), CpuCosts::default().accept);
    assert_eq!(world.cpus()[0].as_ref().unwrap().jobs_done, 1);
}

#[test]
fn teardown_offload_takes_the_close_off_the_host() {
    let world = run_file(KV, &["offload.hosts=[0]"]);
    let counts = world.offloads()[0].as_ref().unwrap().counts;
    let cpu = world.cpus()[0].as_ref().unwrap();
    // One host job per connection (its request); the final ACKs and the FIN timers are the NIC's.
    assert_eq!(cpu.jobs_done, counts.verified, "{counts:?}");
    assert_eq!(counts.teardowns, counts.verified);
    assert_eq!(cycles(&world, Op::Teardown) + cycles(&world, Op::Timer), 0);
    assert_eq!(cycles(&world, Op::Handover), counts.teardowns * CpuCosts::default().handover);
    assert_eq!(counts.fallbacks, 0);
    let answered = world.flows().iter().filter(|f| f.answered.is_some()).count() as u64;
    assert_eq!(answered, world.requests().len() as u64);
}

#[test]
fn the_nic_retransmits_a_lost_fin_and_the_client_sees_an_ordinary_close() {
    // 3% loss on every link: some FINs the NIC sent are lost; its wheel sends them again.
    let world = run_file(KV, &["offload.hosts=[0]", "topology.host_loss=0.03", "sim.duration=40ms"]);
    let counts = world.offloads()[0].as_ref().unwrap().counts;
    assert!(counts.fin_retransmits > 0, "{counts:?}");
    // Every request issued in the first 10 ms (time for five doubling SYN timeouts before the run
    // ends) was answered, and its connection closed at the client as an ordinary close does:
    // the response once, then TIME_WAIT.
    let tx: Vec<_> = world.flows().iter().filter(|f| f.response.is_some() && f.start.0 < 10_000_000_000).collect();
    assert!(tx.len() > 1000);
    for f in &tx {
        assert!(f.answered.is_some(), "flow {} got no response", f.id);
        let closed = f.closed_at.or_else(|| f.tcp_client().and_then(|c| c.time_wait_since));
        assert!(closed.is_some(), "flow {} did not close", f.id);
    }
    let early = world.requests().iter().filter(|r| r.start.0 < 10_000_000_000).count();
    assert_eq!(early, tx.len());
}

#[test]
fn a_full_nic_table_makes_the_host_close_itself_and_loses_nothing() {
    let full = run_file(KV, &["offload.hosts=[0]", "offload.table_entries=2"]);
    let counts = full.offloads()[0].as_ref().unwrap().counts;
    assert!(counts.fallbacks > 0 && counts.teardowns > 0, "{counts:?}");
    assert_eq!(counts.table_peak, 2);
    // Each fallback's close is the host's: its teardown cycles (connections still closing at the
    // end have not paid them yet).
    let costs = CpuCosts::default();
    let torn = cycles(&full, Op::Teardown) / costs.teardown;
    assert!(torn <= counts.fallbacks && torn + 128 >= counts.fallbacks, "{torn} host teardowns, {counts:?}");
    // The host paid for every handover it tried, taken or refused (the last ones may be queued).
    let tried = cycles(&full, Op::Handover) / costs.handover;
    assert!(tried >= counts.teardowns + counts.fallbacks && tried <= counts.teardowns + counts.fallbacks + 128);
    // Nothing lost: every connection that got its response was answered once.
    let answered = full.flows().iter().filter(|f| f.answered.is_some()).count();
    assert_eq!(answered, full.requests().len());
}

/// Requests per second of a run.
fn per_s(world: &World) -> f64 {
    let r = world.requests();
    let (first, last) = (r.iter().map(|q| q.start).min().unwrap(), r.iter().map(|q| q.end).max().unwrap());
    r.len() as f64 / (last - first).secs_f64()
}

#[test]
fn one_saturated_core_serves_its_clock_over_its_cycles_per_request() {
    for offload in ["[]", "[0]"] {
        let world = run_file(KV, &[&format!("offload.hosts={offload}")]);
        let cpu = world.cpus()[0].as_ref().unwrap();
        let busy: u64 = cpu.breakdown().map(|c| c.total()).sum();
        let bound = 2.4e9 / (busy as f64 / world.requests().len() as f64);
        let rate = per_s(&world);
        assert!((rate / bound - 1.0).abs() < 0.03, "offload {offload}: {rate:.0} req/s against {bound:.0}");
    }
}

#[test]
fn acceltcp_serves_more_key_value_requests_per_core_than_the_host_stack() {
    // Paper (Fig. 12, Redis on one core with USR): 2.3x. Within 2x in magnitude: 1.15x to 4.6x.
    let host = per_s(&run_file(KV, &[]));
    let accel = per_s(&run_file(KV, &["offload.hosts=[0]"]));
    let gain = accel / host;
    assert!((1.15..=4.6).contains(&gain), "AccelTCP {accel:.0} req/s, host stack {host:.0}: {gain:.2}x");
    // The same with 8 cores, where 512 connections in flight keep them busy.
    let eight = ["cpu.cores=8", "workloads.0.outstanding=64"];
    let host8 = per_s(&run_file(KV, &eight));
    let accel8 = per_s(&run_file(KV, &[eight[0], eight[1], "offload.hosts=[0]"]));
    assert!(host8 > 6.0 * host, "8 cores: {host8:.0} req/s against one core's {host:.0}");
    assert!((1.15..=4.6).contains(&(accel8 / host8)), "8 cores: {:.2}x", accel8 / host8);
}

const PROXY: &str = "scenarios/acceltcp_proxy.toml";

/// The proxy scenario, smaller: two clients with two requests each through host 0 to backends
/// 9 and 10, 20 KB bodies, for 1 ms; `more` overrides on top.
fn small_proxy(more: &[&str]) -> World {
    let mut o = vec![
        "workloads.0.clients=[1,2]",
        "workloads.0.backends=[9,10]",
        "workloads.0.outstanding=2",
        "workloads.0.body_size=\"20KB\"",
        "workloads.0.duration=\"1ms\"",
        "sim.duration=\"5ms\"",
    ];
    o.extend_from_slice(more);
    run_file(PROXY, &o)
}

/// (front, back) flow pairs of every proxied request, with whether the NIC spliced them.
fn proxied(world: &World) -> Vec<(FlowId, FlowId, bool)> {
    use sluice_sim::workload::proxy::RelayEnd;
    let pairs = world.flows().iter().filter_map(|f| match f.relay.as_deref() {
        Some(&RelayEnd::Front { back: Some(b), .. }) => Some((f.id, b, f.spliced_to().is_some())),
        _ => None,
    });
    pairs.collect()
}

#[test]
fn spliced_requests_reach_the_backend_whole_and_the_host_only_sets_them_up() {
    let world = small_proxy(&["offload.hosts=[0]"]);
    let pairs = proxied(&world);
    assert!(pairs.len() >= 8 && pairs.iter().all(|p| p.2), "every request spliced: {pairs:?}");
    let size = 128 + 20_000;
    for &(front, back, _) in &pairs {
        let (fa, fb) = (&world.flows()[front], &world.flows()[back]);
        if fa.finish.is_none() {
            continue;
        }
        assert_eq!(fb.bytes_delivered(), size, "request {front}: the backend got every byte");
        assert_eq!(fa.bytes_delivered(), 128, "request {front}: the proxy's application read the header only");
        // The run stops as the last request completes, before its last ACK reaches the backend.
        if fb.finish.is_some_and(|t| t + Time::from_us(20) < world.now()) {
            let freed = |f: &sluice_sim::flow::Flow| f.client.is_none() && f.server.is_none();
            assert!(freed(fa) && freed(fb), "request {front}: both connections closed and freed at both ends");
        }
    }
    let counts = world.offloads()[0].as_ref().unwrap().counts;
    assert_eq!(counts.spliced, pairs.len() as u64);
    // The body's segments and the backend's ACKs all went through the NIC: at least one data
    // segment per MSS of body per request.
    assert!(counts.relayed >= pairs.len() as u64 * (20_000 / 1448), "{counts:?}");
    // The host read only the header: its copies are the header's, twice, per request.
    let copies = cycles(&world, Op::Copy) as f64 / pairs.len() as f64;
    assert!(copies <= 2.0 * 128.0 * CpuCosts::default().per_byte + 1.0, "{copies} copy cycles per request");
}

#[test]
fn the_nic_rewrites_sequence_numbers_and_checksums_correctly_on_the_wire() {
    use sluice_sim::metrics::pcap::{client_port, PcapSink, Snap};
    use std::process::Command;
    if Command::new("tshark").arg("--version").output().map_or(true, |o| !o.status.success()) {
        assert_eq!(std::env::var("SLUICE_SKIP_TSHARK").as_deref(), Ok("1"), "tshark is not on PATH (apt-get install tshark)");
        return;
    }
    // Everything into and out of the proxy, whole frames.
    let world = small_proxy(&[
        "offload.hosts=[0]",
        "output.pcap.ports=[\"h0\", \"sw0->h0\"]",
        "output.pcap.full_frames=true",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.pcap");
    let mut sink = PcapSink::create_with(&file, Snap::Full).unwrap();
    for (t, p) in &world.capture().unwrap().packets {
        sink.record(*t, p).unwrap();
    }
    sink.finish().unwrap();
    let fields = ["tcp.checksum.status", "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.len", "ip.src", "ip.dst"];
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(&file).args(["-o", "tcp.check_checksum:TRUE", "-o", "tcp.relative_sequence_numbers:TRUE"]);
    cmd.args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Vec<String>> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| l.split('|').map(str::to_string).collect()).collect();
    assert!(rows.len() > 500, "{} frames", rows.len());
    let bad: Vec<_> = rows.iter().filter(|r| r[0] != "1").collect();
    assert!(bad.is_empty(), "{} frames with a TCP checksum not good, e.g. {:?}", bad.len(), bad.first());
    // (source port, destination port) -> the (relative sequence number, length) of its data.
    let data = |sport: u16, dport: u16| -> std::collections::BTreeSet<(u64, u64)> {
        let (s, d) = (sport.to_string(), dport.to_string());
        rows.iter()
            .filter(|r| r[1] == s && r[2] == d && r[4] != "0")
            .map(|r| (r[3].parse().unwrap(), r[4].parse().unwrap()))
            .collect()
    };
    let size = 128 + 20_000;
    let pairs: Vec<_> = proxied(&world).into_iter().filter(|&(f, _, _)| world.flows()[f].finish.is_some()).collect();
    assert!(pairs.len() >= 4);
    for (front, back, _) in pairs {
        let service = sluice_sim::metrics::pcap::SERVICE_PORT;
        let (from_client, to_backend) = (data(client_port(front.0), service), data(client_port(back.0), service));
        // Every segment from the client went on to the backend at the same position of the
        // stream, which the backend's own sequence numbers (relative to its SYN) show.
        let missing: Vec<_> = from_client.difference(&to_backend).collect();
        assert!(missing.is_empty(), "request {front}: segments not relayed in place: {missing:?}");
        // And the backend got the whole stream, bytes 1..=size relative to its SYN, no gap.
        let mut next = 1;
        for &(seq, len) in &to_backend {
            assert!(seq <= next, "request {front}: a gap at relative byte {next}");
            next = next.max(seq + len);
        }
        assert_eq!(next, size + 1, "request {front}");
    }
}

#[test]
fn a_full_nic_table_makes_the_proxy_relay_on_its_host_and_loses_nothing() {
    let world = small_proxy(&["offload.hosts=[0]", "offload.table_entries=1"]);
    let pairs = proxied(&world);
    let spliced = pairs.iter().filter(|p| p.2).count() as u64;
    let counts = world.offloads()[0].as_ref().unwrap().counts;
    assert!(spliced > 0 && spliced < pairs.len() as u64, "{spliced} of {} spliced", pairs.len());
    assert!(counts.fallbacks > 0 && counts.table_peak == 1, "{counts:?}");
    for &(front, back, _) in &pairs {
        if world.flows()[front].finish.is_some() {
            assert_eq!(world.flows()[back].bytes_delivered(), 128 + 20_000, "request {front}");
        }
    }
    // Every request issued completed (4 slots, so at most 4 still running at the end).
    assert!(world.requests().len() + 4 >= pairs.len(), "{} of {}", world.requests().len(), pairs.len());
}

#[test]
fn spliced_connections_recover_from_loss_end_to_end() {
    let world = small_proxy(&["offload.hosts=[0]", "topology.host_loss=0.01", "sim.duration=\"20ms\""]);
    let pairs = proxied(&world);
    let retransmits: u64 = pairs.iter().filter(|p| p.2).map(|p| world.flows()[p.0].retransmits()).sum();
    assert!(retransmits > 0, "the clients retransmitted through the splice");
    for &(front, back, _) in &pairs {
        assert!(world.flows()[front].finish.is_some(), "request {front} did not finish");
        assert_eq!(world.flows()[back].bytes_delivered(), 128 + 20_000, "request {front}");
    }
}

/// Gbit/s a proxy (host 0) relayed over a run: the bytes its backend connections delivered. Not
/// requests per second: when the host relays, the backend's FIN reaching the proxy counts the
/// request again.
fn relayed_gbps(world: &World) -> f64 {
    let bytes: u64 = world.flows().iter().filter(|f| f.src == HostId(0)).map(|f| f.bytes_delivered()).sum();
    bytes as f64 * 8.0 / world.now().secs_f64() / 1e9
}

#[test]
fn splicing_lets_one_proxy_core_relay_at_line_rate() {
    // With the default costs (the key-value experiment's mTCP split), one 2.4 GHz core relays 64 KB
    // requests on its host at about 1.9 cycles per byte, near 10 Gbit/s; spliced, the proxy's
    // 40 Gbit/s link is the limit: 3.7x (docs/acceltcp.md). Asserted: spliced within 80% of the
    // link, the host relay 8 to 12 Gbit/s, the gain 3x to 4.5x. The run ends as the workload
    // stops issuing, so the relay is busy all along.
    let to_the_end = "sim.duration=\"10ms\"";
    let host = relayed_gbps(&run_file(PROXY, &[to_the_end]));
    let accel_world = run_file(PROXY, &[to_the_end, "offload.hosts=[0]"]);
    let accel = relayed_gbps(&accel_world);
    assert!(accel > 0.8 * 40.0, "spliced: {accel:.1} Gbit/s");
    assert!((8.0..=12.0).contains(&host), "host relay: {host:.1} Gbit/s");
    assert!((3.0..=4.5).contains(&(accel / host)), "spliced {accel:.1} Gbit/s, host {host:.1}: {:.2}x", accel / host);
    let cpu = accel_world.cpus()[0].as_ref().unwrap();
    let busy: u64 = cpu.breakdown().map(|c| c.total()).sum();
    assert!((busy as f64) < 0.5 * 2.4e6 * 10.0, "the spliced proxy's core is mostly idle");
}

const PROXY_MTCP: &str = "scenarios/acceltcp_proxy_mtcp.toml";

#[test]
fn against_mtcp_haproxy_splicing_gains_what_the_paper_reports_on_one_and_eight_cores() {
    // Paper (section 6, HAProxy, SpecWeb2009-like objects, 2 x 40 GbE at the proxy): HAProxy on
    // mTCP relays 4.3 Gbit/s on one core and 6.2 on eight; on AccelTCP 73.1 on both, 17.0x and
    // 11.8x. The scenario's cost per byte is calibrated to the one-core figure with 64 KB objects
    // (an assumed mean), the eight-core override to the eight-core figure: the model's cores share
    // nothing, so one core's cost would relay 8x (docs/acceltcp.md). Asserted: the gains within 2x
    // of the paper's (8.5x to 34x, 5.9x to 23.6x); the calibrated host relay within 10% of the
    // paper's rate; and what the calibration does not set, the spliced proxy relaying above 80% of
    // its 80 Gbit/s link on one core as on eight (paper: 73.1 on both), its cores under 80% busy.
    let eight = ["cpu.cores=8", "cpu.costs.per_byte=11.7"];
    for (cores, extra, paper_host) in [(1, &[][..], 4.3), (8, &eight[..], 6.2)] {
        let paper_gain = 73.1 / paper_host;
        let host = relayed_gbps(&run_file(PROXY_MTCP, extra));
        let accel_world = run_file(PROXY_MTCP, &[extra, &["offload.hosts=[0]"]].concat());
        let accel = relayed_gbps(&accel_world);
        let gain = accel / host;
        assert!(
            (host / paper_host - 1.0).abs() < 0.1,
            "{cores} cores: host relay {host:.2} Gbit/s, paper {paper_host}"
        );
        assert!(accel > 0.8 * 80.0, "{cores} cores: spliced {accel:.1} Gbit/s");
        assert!(
            (paper_gain / 2.0..=paper_gain * 2.0).contains(&gain),
            "{cores} cores: spliced {accel:.1} Gbit/s over host {host:.2}: {gain:.1}x, paper {paper_gain:.1}x"
        );
        let cpu = accel_world.cpus()[0].as_ref().unwrap();
        let busy: u64 = cpu.breakdown().map(|c| c.total()).sum();
        let had = 2.4e9 * cores as f64 * accel_world.now().secs_f64();
        assert!(
            (busy as f64) < 0.8 * had,
            "{cores} cores: the spliced proxy's cores were {:.0}% busy",
            100.0 * busy as f64 / had
        );
    }
}

#[test]
fn a_lazy_tcb_costs_a_quasi_tcb_until_a_second_request_arrives() {
    let costs = CpuCosts::default();
    // One segment (one transaction): the host only ever holds a quasi-TCB.
    let one = run_text(&one_connection(true, "lazy_tcb = true"), &[]);
    assert_eq!(one.flows()[0].bytes_delivered(), 100);
    assert_eq!(cycles(&one, Op::Accept), costs.quasi_tcb);
    // Data past the first segment is a second request: the full TCB is created then.
    let more = run_text(&one_connection(true, "lazy_tcb = true").replace("size = \"100B\"", "size = \"4000B\""), &[]);
    assert_eq!(more.flows()[0].bytes_delivered(), 4000);
    assert_eq!(cycles(&more, Op::Accept), costs.quasi_tcb + costs.accept);
    // Without it, the full TCB at the handshake, as before.
    assert_eq!(cycles(&run_text(&one_connection(true, ""), &[]), Op::Accept), costs.accept);
}
