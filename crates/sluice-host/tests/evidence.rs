//! A testbed run's evidence against what TCP itself proves (as root, on a netns testbed): every
//! segment the switch's buffer dropped was retransmitted by a sender, a byte buffer never holds
//! more than its bytes, the offloads asked for are the ones in effect (and with them a packet
//! limit holds many frames), and a run whose cores were saturated is flagged.
//!
//! The tests take one lock: testbeds and their namespaces are machine-wide.

mod common;

use common::{in_netns, sink};
use sluice_host::testbed::evidence::{Evidence, Recorder, CPU_BOUND};
use sluice_host::testbed::netns::{self, Offloads, Testbed, TestbedOptions};
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the test lock and checks what the tests need, failing (never skipping) without it.
fn prerequisites() -> MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    assert!(nix::unistd::geteuid().is_root(), "these tests need root (netns, tc): run `cargo test` as root");
    assert!(Path::new("/sys/kernel/btf/vmlinux").exists(), "kernel BTF missing at /sys/kernel/btf/vmlinux");
    g
}

/// A testbed, brought down on drop.
struct TestbedGuard(Testbed);

impl TestbedGuard {
    fn up(o: TestbedOptions) -> TestbedGuard {
        let _ = netns::down(&o.prefix);
        TestbedGuard(netns::up(&o).expect("testbed up"))
    }
}

impl Drop for TestbedGuard {
    fn drop(&mut self) {
        if let Err(e) = netns::down(&self.0.prefix) {
            eprintln!("cleanup: testbed down: {e:#}");
        }
    }
}



/// Sends for `secs` to dst:port, then closes; the bytes written.
fn source(ns: &str, dst: Ipv4Addr, port: u16, secs: f64) -> JoinHandle<u64> {
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::from((dst, port)), Duration::from_secs(5)).expect("connect");
        // CUBIC, whatever the machine's default (a namespace inherits it).
        let cc = b"cubic";
        // SAFETY: a live socket, and an option value of the length given.
        let rc = unsafe { libc::setsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as libc::socklen_t) };
        assert_eq!(rc, 0, "setting CUBIC: {}", std::io::Error::last_os_error());
        let buf = vec![0x5au8; 1 << 16];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut n = 0u64;
        while Instant::now() < end {
            n += s.write(&buf).expect("write") as u64;
        }
        n
    })
}

/// Two senders (h1, h2) into h3 for `secs`, recorded from before the first byte to after the
/// last one arrived; the evidence and the bytes h3 received.
fn two_into_one(tb: &Testbed, secs: f64) -> (Evidence, u64) {
    let rec = Recorder::start(tb, Duration::from_millis(2)).expect("recording");
    let received = sink(&tb.hosts[2].netns, 5201, 2);
    let sent: Vec<_> = (0..2).map(|i| source(&tb.hosts[i].netns, tb.hosts[2].addr, 5201, secs)).collect();
    let sent: u64 = sent.into_iter().map(|s| s.join().unwrap()).sum();
    let received: u64 = received.join().unwrap().iter().sum();
    assert_eq!(received, sent, "every byte written arrived");
    (rec.finish().expect("evidence"), received)
}

#[test]
fn every_segment_the_buffer_dropped_was_retransmitted() {
    let _g = prerequisites();
    let buffer = 15_000;
    let tb = TestbedGuard::up(TestbedOptions {
        prefix: "slev1".into(),
        rate_bps: 100_000_000,
        queue_bytes: Some(buffer),
        ce_threshold: 0,
        ..TestbedOptions::default()
    });
    let (e, received) = two_into_one(&tb.0, 2.0);
    println!("{}", e.text());
    let port = |p: &str| e.ports.iter().find(|f| f.port == p).unwrap();
    let (to_receiver, to_senders) = (port("p3"), [port("p1"), port("p2")]);
    // Two CUBIC senders into a 10-frame buffer overflow it; the ACKs' ports never fill.
    assert!(to_receiver.sent.drops > 0, "no drop at p3: {to_receiver:?}");
    assert!(to_senders.iter().all(|p| p.sent.drops == 0 && p.device_drops == 0), "drops towards the senders: {to_senders:?}");
    // Every byte arrived, so every dropped segment was sent again at least once (RetransSegs
    // counts segments, and the buffer and the devices dropped frames of one segment each).
    let retrans: u64 = e.hosts[..2].iter().map(|h| h.counters["Tcp.RetransSegs"]).sum();
    let dropped = to_receiver.sent.drops + to_receiver.device_drops + e.hosts[..2].iter().map(|h| h.device_drops).sum::<u64>();
    assert!(retrans >= dropped, "{retrans} retransmissions for {dropped} drops");
    // Each sender's connection was sampled running CUBIC, and what its last sample counts as
    // retransmitted is within what its host counted by the end.
    for (i, h) in e.hosts[..2].iter().enumerate() {
        let samples: Vec<_> = e.connections.iter().filter(|c| c.host == h.host && c.remote.ends_with(":5201")).collect();
        assert!(samples.len() >= 10, "{}: {} samples of its connection in 2 s", h.host, samples.len());
        assert!(samples.iter().all(|c| c.cc == "cubic" && c.cwnd > 0 && c.rtt_us > 0.0), "sender {i}: {samples:?}");
        let last = samples.last().unwrap().retrans_total;
        assert!(last > 0 && last <= h.counters["Tcp.RetransSegs"], "sender {i}: {last} retransmitted by its last sample, {} by the host", h.counters["Tcp.RetransSegs"]);
    }
    // A byte buffer holds at most its bytes: the sampled queue never exceeds it, and it filled.
    assert!(to_receiver.queue_max <= buffer, "queue {} B in a {buffer} B buffer", to_receiver.queue_max);
    assert!(to_receiver.queue_max >= buffer / 2, "the queue peaked at {} B of {buffer} B", to_receiver.queue_max);
    // What the port sent is what arrived, with 66 bytes of headers a frame of at most 1448.
    let frames = to_receiver.sent.packets;
    assert!(to_receiver.sent.bytes >= received + frames * 54, "{} B sent in {frames} frames for {received} B", to_receiver.sent.bytes);
    assert!(to_receiver.sent.bytes <= received * 106 / 100, "{} B sent for {received} B", to_receiver.sent.bytes);
    assert!(e.offloads.iter().all(|o| !o.tso && !o.tx_checksum && !o.gro), "offloads off: {:?}", e.offloads);
    assert_eq!(e.cpu_busy.len(), std::thread::available_parallelism().unwrap().get(), "a share per core");
}

#[test]
fn the_switch_queues_frames_whatever_the_offloads() {
    let _g = prerequisites();
    // A 10-packet buffer holds 10 frames with offloads off and as Linux ships a NIC alike: there
    // the hosts' TCP builds packets of many segments, but the host's device cuts them into
    // frames (GSO, where a NIC's TSO would) and the switch's ports do not merge them (no GRO).
    // A veth with TSO on would hand the switch 64 KB packets, and the limit would hold
    // several times the bytes.
    let frames = 10 * (1500 + 14);
    for (offloads, prefix) in [(Offloads::Off, "slev2"), (Offloads::Linux, "slev3")] {
        let tb = TestbedGuard::up(TestbedOptions { prefix: prefix.into(), rate_bps: 200_000_000, queue_packets: 10, offloads, ..TestbedOptions::default() });
        let (e, _) = two_into_one(&tb.0, 1.0);
        println!("{}", e.text());
        let p3 = e.ports.iter().find(|f| f.port == "p3").unwrap();
        assert!(p3.queue_max <= frames, "{offloads:?}: {} B queued in 10 packets", p3.queue_max);
        assert!(p3.queue_max > frames / 2, "{offloads:?}: the buffer never filled ({} B)", p3.queue_max);
        let (hosts, ports): (Vec<_>, Vec<_>) = e.offloads.iter().partition(|o| o.device.ends_with("/eth0"));
        match offloads {
            Offloads::Off => {
                assert!(e.offloads.iter().all(|o| !o.tso && !o.tx_checksum && !o.gro), "offloads off: {:?}", e.offloads);
            }
            Offloads::Linux => {
                assert!(hosts.iter().all(|o| !o.tso && o.gso && o.gro && o.tx_checksum), "hosts' offloads: {hosts:?}");
                assert!(ports.iter().all(|o| !o.gro && o.tx_checksum), "switch ports' offloads: {ports:?}");
            }
        }
    }
}

#[test]
fn a_run_whose_cores_were_saturated_is_flagged() {
    let _g = prerequisites();
    let tb = TestbedGuard::up(TestbedOptions { prefix: "slev4".into(), hosts: 2, ..TestbedOptions::default() });
    let rec = Recorder::start(&tb.0, Duration::from_millis(20)).expect("recording");
    // A spinning thread per core: the testbed's packets would wait for a core as they would
    // never wait on a switch.
    let until = Instant::now() + Duration::from_millis(1500);
    let spinners: Vec<_> = (0..std::thread::available_parallelism().unwrap().get())
        .map(|_| {
            std::thread::spawn(move || {
                let mut x = 0u64;
                while Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                x
            })
        })
        .collect();
    for s in spinners {
        s.join().unwrap();
    }
    let e = rec.finish().expect("evidence");
    assert!(e.cpu_bound, "not flagged; busy per core {:?}", e.cpu_busy);
    assert!(e.cpu_busy.iter().all(|&b| b >= CPU_BOUND), "busy per core {:?}", e.cpu_busy);
    assert!(e.text().contains("CPU-BOUND"), "{}", e.text());
}
