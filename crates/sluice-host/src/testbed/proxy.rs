//! `sluice proxy`: an L7 proxy in the CONNECT style with three relay modes, and the benchmark
//! that measures what each costs the host.
//!
//! A client sends one header line naming nothing but its wish to be relayed (`CONNECT\n`); the
//! proxy picks the next backend round robin, connects, answers `OK\n`, and relays both directions
//! until each side has closed its half:
//!
//! - `copy`: a userspace loop, `read` into a buffer and `write` it out (what an ordinary proxy does);
//! - `splice`: `splice(2)` from the socket into a pipe and from the pipe into the other socket, so
//!   the bytes stay in the kernel;
//! - `sockmap`: both sockets go into a BPF sockhash whose stream verdict program redirects every
//!   arriving segment to the other socket's egress (`bpf/proxy.bpf.c`): the kernel's L4 switch,
//!   with no wake-up of the proxy per segment. The host-side analogue of AccelTCP's splicing on
//!   the NIC.
//!
//! The client waits for `OK` before it sends, so nothing arrives before the relay is in place.

use crate::kernel::sockmap::{KernelRelay, RelayCounts};
use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How the proxy moves bytes between the two connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// `read` and `write` through a userspace buffer.
    Copy,
    /// `splice(2)` through a pipe.
    Splice,
    /// A BPF sockhash redirect in the kernel.
    Sockmap,
}

/// The header a client sends, and the proxy's answer once the relay is ready.
const CONNECT: &[u8] = b"CONNECT\n";
const READY: &[u8] = b"OK\n";

/// A running proxy.
pub struct Proxy {
    /// The address clients connect to.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    relay: Option<Arc<KernelRelay>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy on `listen` relaying to `backends` in `mode`.
    pub fn start(listen: SocketAddr, backends: Vec<SocketAddr>, mode: Mode) -> Result<Proxy> {
        if backends.is_empty() {
            bail!("--backend: expected at least one backend address");
        }
        let relay = match mode {
            Mode::Sockmap => Some(Arc::new(KernelRelay::load()?)),
            _ => None,
        };
        let listener = TcpListener::bind(listen).with_context(|| format!("--listen {listen}: cannot bind"))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (s, n, kernel) = (stop.clone(), accepted.clone(), relay.clone());
        let thread = thread::spawn(move || {
            let mut next = 0usize;
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        n.fetch_add(1, Ordering::Relaxed);
                        let backend = backends[next % backends.len()];
                        next += 1;
                        let relay = relay.clone();
                        thread::spawn(move || {
                            if let Err(e) = serve(client, backend, mode, relay.as_deref()) {
                                eprintln!("sluice proxy: {e:#}");
                            }
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => thread::sleep(Duration::from_micros(200)),
                    Err(e) => eprintln!("sluice proxy: accept: {e}"),
                }
            }
        });
        Ok(Proxy { addr, stop, accepted, relay: kernel, thread: Some(thread) })
    }

    /// In sockmap mode: what the kernel's verdict program counted.
    pub fn kernel_counts(&self) -> Option<RelayCounts> {
        self.relay.as_ref().and_then(|r| r.counts().ok())
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One client: its header, the backend connection, the answer, then the relay.
fn serve(mut client: TcpStream, backend: SocketAddr, mode: Mode, relay: Option<&KernelRelay>) -> Result<()> {
    client.set_nonblocking(false)?;
    let mut header = [0u8; CONNECT.len()];
    client.read_exact(&mut header).context("reading the client's header")?;
    if header != CONNECT {
        bail!("a client sent {:?} instead of CONNECT", String::from_utf8_lossy(&header));
    }
    let server = TcpStream::connect(backend).with_context(|| format!("connecting to backend {backend}"))?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
    }
    let base = match relay {
        Some(r) => {
            r.splice(&client, &server)?;
            Some((tcp_info(&client)?, tcp_info(&server)?))
        }
        None => None,
    };
    client.write_all(READY)?;
    match base {
        Some(base) => wait_for_closes(&client, &server, base),
        None => relay_loop(&client, &server, mode),
    }
}

/// What carries one direction's bytes: a userspace buffer (copy mode) or a pipe (splice mode).
enum Channel {
    Buffer(Vec<u8>),
    Pipe([RawFd; 2]),
}

impl Channel {
    fn new(mode: Mode) -> std::io::Result<Channel> {
        if mode != Mode::Splice {
            return Ok(Channel::Buffer(vec![0; 1 << 16]));
        }
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Channel::Pipe(fds))
    }

    /// Moves what `from` has to `to`: the count moved, 0 at the end of `from`'s stream.
    fn move_some(&mut self, from: &TcpStream, mut to: &TcpStream) -> std::io::Result<usize> {
        let fds = match self {
            Channel::Buffer(buf) => {
                let n = (&mut &*from).read(buf)?;
                to.write_all(&buf[..n])?;
                return Ok(n);
            }
            Channel::Pipe(fds) => *fds,
        };
        let flags = libc::SPLICE_F_MOVE;
        // SAFETY: plain descriptors and null offsets (sockets and pipes have none).
        let n = unsafe { libc::splice(from.as_raw_fd(), std::ptr::null_mut(), fds[1], std::ptr::null_mut(), 1 << 16, flags) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut left = n as usize;
        while left > 0 {
            // SAFETY: as above.
            let m = unsafe { libc::splice(fds[0], std::ptr::null_mut(), to.as_raw_fd(), std::ptr::null_mut(), left, flags) };
            if m < 0 {
                return Err(std::io::Error::last_os_error());
            }
            left -= m as usize;
        }
        Ok(n as usize)
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        if let Channel::Pipe(fds) = self {
            // SAFETY: the pipe's descriptors are ours and closed once.
            unsafe {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
        }
    }
}

/// Relays both directions through a channel of `mode` until each side has closed its half,
/// passing each close on.
fn relay_loop(a: &TcpStream, b: &TcpStream, mode: Mode) -> Result<()> {
    let mut channels = [Channel::new(mode)?, Channel::new(mode)?];
    let mut open = [true, true];
    while open[0] || open[1] {
        let mut fds = [poll_fd(a, open[0]), poll_fd(b, open[1])];
        // SAFETY: `fds` holds two initialised pollfd entries.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        for (i, (from, to)) in [(a, b), (b, a)].into_iter().enumerate() {
            if open[i] && fds[i].revents != 0 && channels[i].move_some(from, to)? == 0 {
                open[i] = false;
                let _ = to.shutdown(Shutdown::Write);
            }
        }
    }
    Ok(())
}

fn poll_fd(s: &TcpStream, open: bool) -> libc::pollfd {
    // A closed direction's descriptor is skipped (negative fd).
    libc::pollfd { fd: if open { s.as_raw_fd() } else { -1 }, events: libc::POLLIN, revents: 0 }
}

/// Sockmap mode: the kernel moves the bytes; the proxy passes each side's close on once that
/// side's peer has closed and the other socket has delivered every byte of its stream. (The
/// kernel sends a redirected segment from a work queue, so a close passed on at once could
/// overtake it.) Poll wakes the proxy on a peer's close; TCP_INFO's state confirms it.
fn wait_for_closes(a: &TcpStream, b: &TcpStream, base: (TcpInfo, TcpInfo)) -> Result<()> {
    // Counts from the moment the relay began: the proxy's own answer then went to the client.
    let (a0, b0) = base;
    let answer = READY.len() as u64;
    let mut watch = [true, true];
    let mut shut = [false, false];
    while !(shut[0] && shut[1]) {
        let mut fds = [rdhup_fd(a, watch[0]), rdhup_fd(b, watch[1])];
        // Waiting for the last bytes to be acknowledged: look again in 20 us.
        let soon = libc::timespec { tv_sec: 0, tv_nsec: 20_000 };
        let timeout = if watch[0] && watch[1] { std::ptr::null() } else { &soon as *const libc::timespec };
        // SAFETY: `fds` holds two initialised pollfd entries; `timeout` is null or points to `soon`.
        if unsafe { libc::ppoll(fds.as_mut_ptr(), 2, timeout, std::ptr::null()) } < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        for i in 0..2 {
            // Once woken, a socket is looked at on a timer: its events may stay set.
            watch[i] &= fds[i].revents == 0;
        }
        let (ta, tb) = (tcp_info(a)?, tcp_info(b)?);
        // The kernel counts a FIN in the bytes received and acknowledged: one more than the data.
        // Client to backend: all the client's data since the relay began, acknowledged by the backend.
        if ta.peer_closed && !shut[0] && tb.acked - b0.acked + 1 >= ta.received - a0.received {
            shut[0] = true;
            let _ = b.shutdown(Shutdown::Write);
        }
        // Backend to client: the proxy's answer and all the backend's data.
        if tb.peer_closed && !shut[1] && ta.acked - a0.acked + 1 >= tb.received - b0.received + answer {
            shut[1] = true;
            let _ = a.shutdown(Shutdown::Write);
        }
    }
    Ok(())
}

/// What `TCP_INFO` tells of a socket: whether its peer has closed, and its byte counts.
#[derive(Clone, Copy)]
struct TcpInfo {
    peer_closed: bool,
    acked: u64,
    received: u64,
}

fn tcp_info(s: &TcpStream) -> Result<TcpInfo> {
    let mut buf = [0u8; 232];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` has room for `len` bytes, which getsockopt does not exceed.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr().cast(), &mut len) };
    if rc != 0 || len < 136 {
        bail!("TCP_INFO without byte counts (Linux 4.1 or later has them)");
    }
    // struct tcp_info: tcpi_state at byte 0, tcpi_bytes_acked at 120, tcpi_bytes_received at 128.
    let at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().expect("8 bytes"));
    // The kernel's TCP states (include/net/tcp_states.h) in which the peer's FIN has arrived or
    // all is over: TIME_WAIT 6, CLOSE 7, CLOSE_WAIT 8, LAST_ACK 9, CLOSING 11.
    let peer_closed = matches!(buf[0], 6 | 7 | 8 | 9 | 11);
    Ok(TcpInfo { peer_closed, acked: at(120), received: at(128) })
}

fn rdhup_fd(s: &TcpStream, watch: bool) -> libc::pollfd {
    libc::pollfd { fd: if watch { s.as_raw_fd() } else { -1 }, events: libc::POLLRDHUP, revents: 0 }
}

/// Connects to a proxy and asks for a relay: the stream is ready for the body when this returns.
pub fn connect_through(proxy: SocketAddr) -> Result<TcpStream> {
    let mut s = TcpStream::connect(proxy).with_context(|| format!("connecting to the proxy at {proxy}"))?;
    s.set_nodelay(true)?;
    s.write_all(CONNECT)?;
    let mut ok = [0u8; READY.len()];
    s.read_exact(&mut ok).context("waiting for the proxy's OK")?;
    if ok != READY {
        bail!("the proxy answered {:?}", String::from_utf8_lossy(&ok));
    }
    Ok(s)
}

/// Busy CPU time of the whole machine so far (all CPUs, user and system, interrupts included),
/// from `/proc/stat`, in seconds.
pub fn machine_cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().context("/proc/stat is empty")?;
    // user nice system idle iowait irq softirq steal (guest time, after these, is within user).
    let v: Vec<u64> = line.split_whitespace().skip(1).take(8).filter_map(|x| x.parse().ok()).collect();
    let busy: u64 = v.iter().enumerate().filter(|&(i, _)| i != 3 && i != 4).map(|(_, x)| x).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(busy as f64 / hz)
}

/// A stream's deterministic payload: byte i of stream `seed` is a hash of the stream and
/// i mod `PERIOD`. The period is prime, so no shift by a segment or write size repeats it; a
/// stream is made by copying from a table, which keeps the clients' own cost out of what the
/// benchmark measures.
pub struct Pattern(Vec<u8>);

/// The pattern's period in bytes: a prime above the 64 KB the clients write at once.
const PERIOD: usize = 65_537;

impl Pattern {
    /// The pattern of stream `seed`.
    pub fn new(seed: u64) -> Pattern {
        let byte = |i: usize| {
            let x = (i as u64 ^ seed.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            (x >> 56) as u8
        };
        // One period, then enough of the next for any write of up to 64 KB to be one slice.
        Pattern((0..PERIOD + (1 << 16)).map(|i| byte(i % PERIOD)).collect())
    }

    /// The `len` (at most 64 KB) bytes of the stream from `offset`.
    pub fn at(&self, offset: u64, len: usize) -> &[u8] {
        let start = (offset % PERIOD as u64) as usize;
        &self.0[start..start + len]
    }
}

/// CRC-32 over a byte stream, to check that a relay kept every byte in order (SIMD-fast, so the
/// checking backend is not what limits the relay).
pub type Checksum = crc32fast::Hasher;

/// The backend's answer to a key-value request: a memcached-style 2-byte value, padded to 40 bytes.
const ANSWER: [u8; 40] = {
    let text = b"VALUE k 0 2\r\nxx\r\nEND\r\n";
    let mut a = [0u8; 40];
    let mut i = 0;
    while i < text.len() {
        a[i] = text[i];
        i += 1;
    }
    a
};

/// A backend for the benchmark: for each connection it reads the stream to its end, answering
/// with the stream's byte count and checksum, or, for a request line, with a 40-byte response.
pub struct Backend {
    /// Its address.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Backend {
    /// Starts a backend on an ephemeral port of `ip`.
    pub fn start(ip: std::net::IpAddr) -> Result<Backend> {
        let listener = TcpListener::bind((ip, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => {
                        thread::spawn(move || {
                            let _ = sink(c);
                        });
                    }
                    Err(_) => thread::sleep(Duration::from_micros(200)),
                }
            }
        });
        Ok(Backend { addr, stop, thread: Some(thread) })
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The backend's side of one connection.
fn sink(mut c: TcpStream) -> std::io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_nodelay(true)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut sum = Checksum::new();
    let mut n = 0u64;
    loop {
        let k = c.read(&mut buf)?;
        if k == 0 {
            break;
        }
        if n == 0 && buf[..k].starts_with(b"get ") {
            // A key-value request: answer and close.
            c.write_all(&ANSWER)?;
            return Ok(());
        }
        sum.update(&buf[..k]);
        n += k as u64;
    }
    let mut answer = [0u8; 16];
    answer[..8].copy_from_slice(&n.to_be_bytes());
    answer[8..].copy_from_slice(&u64::from(sum.finalize()).to_be_bytes());
    c.write_all(&answer)
}

/// What one benchmark run measured.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Measured {
    /// Bytes (bulk) or requests (short connections) completed.
    pub units: f64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Busy CPU seconds of the whole machine over the run.
    pub cpu_s: f64,
}

/// One mode's figures over several rounds of (bulk, short connections) runs: medians, and the
/// range of the CPU per byte.
#[derive(Clone, Copy, Debug)]
pub struct BenchFigures {
    /// Bulk throughput, Gbit/s.
    pub gbit_per_s: f64,
    /// The machine's busy CPU seconds per GB streamed: (median, least, most).
    pub cpu_per_gb: (f64, f64, f64),
    /// Short connections per second.
    pub requests_per_s: f64,
    /// The machine's busy CPU microseconds per short connection.
    pub cpu_us_per_request: f64,
}

impl BenchFigures {
    /// The medians of `runs` (at least one).
    pub fn median(runs: &[(Measured, Measured)]) -> BenchFigures {
        let of = |f: &dyn Fn(&(Measured, Measured)) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            (v[v.len() / 2], v[0], v[v.len() - 1])
        };
        BenchFigures {
            gbit_per_s: of(&|(b, _)| b.units * 8.0 / b.wall_s / 1e9).0,
            cpu_per_gb: of(&|(b, _)| b.cpu_s / (b.units / 1e9)),
            requests_per_s: of(&|(_, s)| s.units / s.wall_s).0,
            cpu_us_per_request: of(&|(_, s)| s.cpu_s / s.units.max(1.0) * 1e6).0,
        }
    }
}

/// Streams `bytes` of the pattern over each of `streams` connections (through the proxy at
/// `via`, or straight to the backend), checking each stream's count and checksum at the backend.
pub fn bulk(via: SocketAddr, direct: bool, streams: usize, bytes: u64) -> Result<Measured> {
    let cpu0 = machine_cpu_seconds()?;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..streams as u64)
        .map(|seed| {
            thread::spawn(move || -> Result<()> {
                let mut s = if direct { TcpStream::connect(via)? } else { connect_through(via)? };
                let pattern = Pattern::new(seed);
                let mut sum = Checksum::new();
                let mut sent = 0u64;
                while sent < bytes {
                    let chunk = pattern.at(sent, (bytes - sent).min(1 << 16) as usize);
                    s.write_all(chunk)?;
                    sum.update(chunk);
                    sent += chunk.len() as u64;
                }
                s.shutdown(Shutdown::Write)?;
                let mut answer = [0u8; 16];
                s.read_exact(&mut answer).context("reading the backend's count and checksum")?;
                let (n, got) = (u64::from_be_bytes(answer[..8].try_into()?), u64::from_be_bytes(answer[8..].try_into()?));
                let want = u64::from(sum.finalize());
                if n != bytes || got != want {
                    bail!("stream {seed}: the backend got {n} bytes with checksum {got:#x}; sent {bytes} with {want:#x}");
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    let wall_s = t0.elapsed().as_secs_f64();
    Ok(Measured { units: (streams as u64 * bytes) as f64, wall_s, cpu_s: machine_cpu_seconds()? - cpu0 })
}

/// `clients` closed-loop clients, each opening one connection per request for `seconds`: a
/// 32-byte GET, the backend's 40-byte answer, the close.
pub fn short(via: SocketAddr, direct: bool, clients: usize, seconds: f64) -> Result<Measured> {
    let cpu0 = machine_cpu_seconds()?;
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(seconds);
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            thread::spawn(move || -> Result<u64> {
                let mut done = 0;
                while Instant::now() < end {
                    let mut s = if direct { TcpStream::connect(via)? } else { connect_through(via)? };
                    s.write_all(b"get key:0000000000000001\r\n\0\0\0\0\0\0")?;
                    let mut answer = [0u8; 40];
                    s.read_exact(&mut answer).context("reading the answer")?;
                    if answer != ANSWER {
                        bail!("a wrong answer: {:?}", String::from_utf8_lossy(&answer));
                    }
                    done += 1;
                }
                Ok(done)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    let wall_s = t0.elapsed().as_secs_f64();
    Ok(Measured { units: total as f64, wall_s, cpu_s: machine_cpu_seconds()? - cpu0 })
}
