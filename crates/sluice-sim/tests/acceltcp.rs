//! AccelTCP (Moon et al., NSDI 2020) on the host CPU model: SYN cookies on the NIC keep the host
//! free of half-open state and drop forged handshakes, teardown offload takes the close off the
//! host and survives a lost FIN, a full NIC table makes the host fall back without losing
//! anything, and the key-value experiment's gain over the host stack (paper: 2.3x on one core).

mod common;
use common::run_file;
use sluice_sim::host::cpu::{CpuCosts, Op};
use sluice_sim::packet::{flags, Packet};
use sluice_sim::scenario;
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
flows = [{{ src = 1, dst = 0, size = 100, start = "0us" }}]
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
        let conn = world.flows()[0].tcp().expect("the connection");
        let setup = cycles(&world, Op::Setup);
        if offload {
            assert_eq!(conn.server, State::Listen, "the host keeps no half-open connection");
            assert_eq!(setup + cycles(&world, Op::Rx), 0, "the host did no work for the SYN");
            assert_eq!(world.offloads()[0].as_ref().unwrap().counts.syn_cookies, 1);
        } else {
            assert_eq!(conn.server, State::SynReceived, "the host stack holds a half-open connection");
            assert_eq!(setup, CpuCosts::default().setup);
        }
        // The SYN-ACK reached the client either way; its ACK, the data and its FIN are on the wire.
        assert_eq!(conn.client, State::FinWait1);
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
    world.inject(0, forged);
    assert!(world.flows()[0].tcp().unwrap().server_listening(), "the forged ACK created nothing");
    world.run(&mut |_| {});
    world.check_conservation().unwrap();
    let counts = world.offloads()[0].as_ref().unwrap().counts;
    assert_eq!((counts.bad_cookies, counts.syn_cookies, counts.verified), (1, 1, 1));
    let flow = &world.flows()[0];
    assert_eq!(flow.bytes_delivered(), 100, "the real handshake's connection carried the data");
    assert!(flow.finish.is_some(), "and was acknowledged");
    assert_eq!(flow.tcp().map(|c| c.client), Some(State::TimeWait), "the client got the NIC's FIN");
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
        let closed = f.closed_at.or_else(|| f.tcp().and_then(|c| c.time_wait_since));
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
