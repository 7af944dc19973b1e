//! `sluice proxy` on the real kernel (root: the sockmap relay loads BPF), on loopback: every relay
//! mode carries every byte intact, checked per connection by a count and checksum at the backend,
//! and answers short key-value connections correctly; the sockmap relay redirects in the kernel
//! (its verdict program counts the segments).

use sluice_host::testbed::proxy::{bulk, short, Backend, Mode, Proxy};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn every_relay_mode_carries_every_byte_and_answers_short_connections() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root (BPF): run `cargo test` as root");
    let backend = Backend::start(LO).unwrap();
    for mode in [Mode::Copy, Mode::Splice, Mode::Sockmap] {
        let proxy = Proxy::start(SocketAddr::new(LO, 0), vec![backend.addr], mode).unwrap();
        // Four streams of 64 MB, each checked byte for byte at the backend (bulk fails otherwise).
        let m = bulk(proxy.addr, false, 4, 64 << 20).unwrap();
        // Short connections for half a second: every answer is checked (short fails otherwise).
        let s = short(proxy.addr, false, 4, 0.5).unwrap();
        eprintln!("{mode:?}: {:.2} Gbit/s, {:.0} requests/s", m.units * 8.0 / m.wall_s / 1e9, s.units / s.wall_s);
        assert!(s.units >= 50.0, "{mode:?}: only {} short connections in 0.5 s", s.units);
        assert_eq!(proxy.accepted() as f64, 4.0 + s.units, "{mode:?}: one proxied connection per client connection");
        if mode == Mode::Sockmap {
            let c = proxy.kernel_counts().unwrap();
            eprintln!("sockmap: {c:?}");
            // At least one segment per 64 KB of the streams went through the kernel's redirect.
            assert!(c.redirected >= 4 * 1024, "{c:?}");
            // No segment with data found its socket without a peer.
            assert_eq!(c.dropped_data, 0, "{c:?}");
        }
    }
}

#[test]
fn the_benchmark_names_a_bad_flag_and_its_expected_form() {
    use sluice_host::testbed::cli::{run_proxy, ProxyCmd};
    let bench = |megabytes, seconds, rounds| ProxyCmd::Bench { megabytes, seconds, rounds, mode: vec![] };
    for (cmd, flag, form) in [
        (bench(0, 1.0, 3), "--megabytes", "expected 1 to 1048576"),
        (bench(512, 0.0, 3), "--seconds", "more than 0 and at most 600"),
        (bench(512, f64::NAN, 3), "--seconds", "more than 0 and at most 600"),
        (bench(512, 1.0, 0), "--rounds", "expected 1 to 100"),
    ] {
        let e = format!("{:#}", run_proxy(cmd).unwrap_err());
        assert!(e.starts_with(flag) && e.contains(form), "{e}");
    }
}
