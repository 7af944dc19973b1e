//! Telemetry records from the agent's ring buffer (`struct int_event`, bpf/agent.bpf.c): their
//! layout, and a loop that feeds each to a view until a duration passes or SIGINT/SIGTERM.

use crate::kernel::pins;
use anyhow::{anyhow, Result};
use libbpf_rs::{MapHandle, RingBufferBuilder};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One record from the agent (`struct int_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Kernel monotonic time, ns.
    pub ts_ns: u64,
    /// This host's end of the connection.
    pub local: SocketAddr,
    /// The peer's end.
    pub remote: SocketAddr,
    /// INTval that arrived on the segment: the path towards this host.
    pub int_val: u8,
    /// Hop ID (TTL) that raised it.
    pub id: u8,
    /// Path latency towards this host, ns.
    pub lat: u32,
    /// INTval the peer echoed: the path from this host.
    pub int_ecr: u8,
    /// Echoed hop ID.
    pub id_ecr: u8,
    /// Echoed path latency from this host, ns.
    pub lat_ecr: u32,
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// MSS, bytes.
    pub mss: u32,
    /// Bytes of the segment, TCP header included.
    pub skb_len: u32,
}

/// Size of `struct int_event`.
pub const EVENT_SIZE: usize = 72;

fn addr(b: &[u8], port: u16) -> SocketAddr {
    let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap());
    let ip = v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6));
    SocketAddr::new(ip, port)
}

impl Event {
    /// Parses a ring-buffer record.
    pub fn parse(b: &[u8]) -> Option<Event> {
        if b.len() < EVENT_SIZE {
            return None;
        }
        let u16_at = |o: usize| u16::from_ne_bytes(b[o..o + 2].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        Some(Event {
            ts_ns: u64::from_ne_bytes(b[0..8].try_into().unwrap()),
            local: addr(&b[8..24], u16_at(40)),
            remote: addr(&b[24..40], u16_at(42)),
            int_val: b[44],
            id: b[45],
            int_ecr: b[46],
            id_ecr: b[47],
            lat: u32_at(48),
            lat_ecr: u32_at(52),
            srtt_us: u32_at(56),
            snd_cwnd: u32_at(60),
            mss: u32_at(64),
            skb_len: u32_at(68),
        })
    }

    /// Whether the segment carried an echo, i.e. telemetry of the path from this host.
    pub fn has_echo(&self) -> bool {
        self.int_ecr != 0 || self.id_ecr != 0 || self.lat_ecr != 0
    }
}

/// Set by SIGINT/SIGTERM so the views stop and print what they have.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_stop_handler() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let a = SigAction::new(SigHandler::Handler(on_signal), SaFlags::empty(), SigSet::empty());
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let _ = sigaction(Signal::SIGINT, &a);
        let _ = sigaction(Signal::SIGTERM, &a);
    }
}

/// Feeds every record to `f` for `duration` (None: until SIGINT), calling `tick` about once a second.
pub fn consume(duration: Option<Duration>, mut f: impl FnMut(&Event), mut tick: impl FnMut()) -> Result<()> {
    let map = MapHandle::from_pinned_path(pins::pin("int_events"))
        .map_err(|e| anyhow!("the host agent is not loaded (run `sluice host load`): {e}"))?;
    install_stop_handler();
    STOP.store(false, Ordering::SeqCst);
    let mut b = RingBufferBuilder::new();
    let events = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let sink = events.clone();
    b.add(&map, move |data: &[u8]| {
        if let Some(e) = Event::parse(data) {
            sink.borrow_mut().push(e);
        }
        0
    })?;
    let rb = b.build()?;
    let start = Instant::now();
    let mut last_tick = Instant::now();
    loop {
        let left = duration.map(|d| d.saturating_sub(start.elapsed()));
        if left == Some(Duration::ZERO) || STOP.load(Ordering::SeqCst) {
            break;
        }
        let wait = left.unwrap_or(Duration::from_millis(100)).min(Duration::from_millis(100));
        // EINTR from the stop signal is not an error.
        if let Err(e) = rb.poll(wait) {
            if !STOP.load(Ordering::SeqCst) {
                return Err(e.into());
            }
        }
        for e in events.borrow_mut().drain(..) {
            f(&e);
        }
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            tick();
        }
    }
    rb.consume()?;
    for e in events.borrow_mut().drain(..) {
        f(&e);
    }
    Ok(())
}
