//! A scenario's traffic on the testbed: endless bulk flows and closed-loop request/response
//! clients, each in its hosts' namespaces, measured per class after a warm-up. Every connection's
//! algorithm, retransmissions and RTOs are read from the kernel (`tcp_info`) before it closes.

use crate::sys::NetnsGuard;
use crate::testbed::netns::Testbed;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One workload of a run, its hosts numbered from 0 as a scenario numbers them.
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    /// An endless flow from each sender to the receiver; measured: bytes received in the window.
    Bulk { class: String, senders: Vec<usize>, receiver: usize, port: u16 },
    /// Each client keeps `outstanding` requests in flight, one persistent connection per slot,
    /// the slots' servers taken in turn; a request's completion is request to last response byte.
    Rpc {
        class: String,
        clients: Vec<usize>,
        servers: Vec<usize>,
        outstanding: usize,
        request: u64,
        response: u64,
        think: Duration,
        port: u16,
    },
}

impl Role {
    /// The class its connections belong to.
    pub fn class(&self) -> &str {
        match self {
            Role::Bulk { class, .. } | Role::Rpc { class, .. } => class,
        }
    }

    /// The port its connections are made to (the agent's policy matches classes on it).
    pub fn port(&self) -> u16 {
        match self {
            Role::Bulk { port, .. } | Role::Rpc { port, .. } => *port,
        }
    }

    /// Each of its connections' two ends as (host, peer host), one pair per connection slot.
    pub fn ends(&self) -> Vec<(usize, usize)> {
        let pairs: Vec<(usize, usize)> = match self {
            Role::Bulk { senders, receiver, .. } => senders.iter().map(|&s| (s, *receiver)).collect(),
            Role::Rpc { clients, servers, outstanding, .. } => clients
                .iter()
                .flat_map(|&c| (0..*outstanding).filter_map(move |slot| server_of(c, slot, servers).map(|s| (c, s))))
                .collect(),
        };
        pairs.into_iter().flat_map(|(a, b)| [(a, b), (b, a)]).collect()
    }
}

/// What one class's connections did in the measured window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassFigures {
    /// Bytes bulk receivers read in the window.
    pub bulk_bytes: u64,
    /// Completion times of the requests issued in the window, nanoseconds, sorted.
    pub completions_ns: Vec<u64>,
    /// Segments the class's connections retransmitted in the window (`tcpi_total_retrans`,
    /// both ends).
    pub retrans_segs: u64,
    /// Their RTOs in the window (`tcpi_total_rto`; None where the kernel predates it, before 6.7).
    pub rtos: Option<u64>,
    /// Connections whose ends were read.
    pub connections: u64,
    /// The algorithms the connections that carried the class's data ran (`TCP_CONGESTION`).
    pub ran: BTreeSet<String>,
}

/// A connection's kernel figures at its end.
#[derive(Clone, Debug, Default)]
struct ConnEnd {
    cc: String,
    retrans: u64,
    rtos: Option<u64>,
}

/// `tcp_info`'s offsets of the fields read here (include/uapi/linux/tcp.h).
const TOTAL_RETRANS_AT: usize = 100;
const TOTAL_RTO_AT: usize = 240;

/// A connection's algorithm, total retransmissions and RTOs.
fn conn_end(s: &TcpStream) -> ConnEnd {
    let fd = s.as_raw_fd();
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes and the kernel writes at most `len`.
    let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len) };
    let len = if rc == 0 { len as usize } else { 0 };
    let u32_at = |at: usize| u32::from_ne_bytes(info[at..at + 4].try_into().expect("4 bytes")) as u64;
    let u16_at = |at: usize| u16::from_ne_bytes(info[at..at + 2].try_into().expect("2 bytes")) as u64;
    let mut name = [0u8; 16];
    let mut nlen = name.len() as libc::socklen_t;
    // SAFETY: as above, for the algorithm's name.
    let rc =
        unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_mut_ptr().cast(), &mut nlen) };
    let cc = if rc == 0 {
        String::from_utf8_lossy(&name[..nlen as usize]).trim_end_matches('\0').to_string()
    } else {
        "?".into()
    };
    ConnEnd {
        cc,
        retrans: if len >= TOTAL_RETRANS_AT + 4 { u32_at(TOTAL_RETRANS_AT) } else { 0 },
        rtos: (len >= TOTAL_RTO_AT + 2).then(|| u16_at(TOTAL_RTO_AT)),
    }
}

/// The measured window: from `warmup` after the start for `secs`.
#[derive(Clone, Copy, Debug)]
struct Window {
    start: Instant,
    from: Duration,
    to: Duration,
}

impl Window {
    fn contains(&self, t: Instant) -> bool {
        let at = t.saturating_duration_since(self.start);
        at >= self.from && at < self.to
    }

    fn over(&self) -> bool {
        self.start.elapsed() >= self.to
    }
}

/// Per class, the figures of every finished piece of a run, and every connection's end, read
/// when the window opens and when it closes (None once it has closed).
struct Tally {
    figures: Mutex<BTreeMap<String, ClassFigures>>,
    ends: Mutex<Option<Vec<End>>>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { figures: Mutex::default(), ends: Mutex::new(Some(Vec::new())) }
    }
}

/// One end of a connection: its class, a handle to read its `tcp_info` by, and the counts it had
/// when the window opened (None: it opened later).
struct End {
    class: String,
    conn: TcpStream,
    carries_data: bool,
    at_start: Option<ConnEnd>,
}

impl Tally {
    fn add(&self, class: &str, f: impl FnOnce(&mut ClassFigures)) {
        f(self.figures.lock().expect("no thread panics holding the tally").entry(class.to_string()).or_default());
    }

    /// Keeps a handle on one end of a connection, to read its counts when the window opens and
    /// when it closes; none once it has closed, so the handle cannot hold the connection open.
    fn open(&self, class: &str, conn: &TcpStream, carries_data: bool) -> Result<()> {
        if let Some(ends) = self.ends.lock().expect("no thread panics holding the ends").as_mut() {
            let conn = conn.try_clone().context("keeping a handle on a connection")?;
            ends.push(End { class: class.to_string(), conn, carries_data, at_start: None });
        }
        Ok(())
    }

    /// The window opens: every connection's counts so far.
    fn window_opens(&self) {
        for e in self.ends.lock().expect("no thread panics holding the ends").iter_mut().flatten() {
            e.at_start = Some(conn_end(&e.conn));
        }
    }

    /// The window closes: what each connection retransmitted and timed out since it opened, and
    /// the algorithm it ran.
    fn window_closes(&self) {
        let ends = self.ends.lock().expect("no thread panics holding the ends").take();
        for e in ends.into_iter().flatten() {
            let (now, then) = (conn_end(&e.conn), e.at_start.unwrap_or_default());
            self.add(&e.class, |c| {
                c.retrans_segs += now.retrans.saturating_sub(then.retrans);
                let rtos = now.rtos.map(|n| n.saturating_sub(then.rtos.unwrap_or(0)));
                c.rtos = match (c.connections, c.rtos, rtos) {
                    (0, _, b) => b,
                    (_, Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
                c.connections += 1;
                if e.carries_data {
                    c.ran.insert(now.cc);
                }
            });
        }
    }
}

/// Runs `roles` on the testbed for `warmup` + `secs` and returns each class's figures from the
/// window after the warm-up, and what `measure` returns: it runs beside the traffic, given the
/// window's first and last instant, so it can record the same window (the fabric's counters).
/// Every listener is up before any connection is made, and every connection before the clock
/// starts; every thread is joined.
pub fn run<R: Send>(
    tb: &Testbed,
    roles: &[Role],
    warmup: Duration,
    secs: Duration,
    measure: impl FnOnce(Instant, Instant) -> Result<R> + Send,
) -> Result<(BTreeMap<String, ClassFigures>, R)> {
    let host = |h: usize| -> Result<(String, Ipv4Addr)> {
        let x = tb.hosts.get(h).ok_or_else(|| anyhow!("host {h}: the testbed has {} hosts", tb.hosts.len()))?;
        Ok((x.netns.clone(), x.addr))
    };
    let tally = Arc::new(Tally::default());
    // Connections open in the set-up allowance, so a slow start-up eats into it, never the window.
    let start = Instant::now() + SET_UP;
    let window = Window { start, from: warmup, to: warmup + secs };
    let mut threads: Vec<JoinHandle<Result<()>>> = Vec::new();
    for role in roles {
        for (h, expected) in listening(role) {
            let (ns, addr) = host(h)?;
            let listener = {
                let _in = NetnsGuard::enter(Some(&ns))?;
                TcpListener::bind(SocketAddrV4::new(addr, role.port()))
                    .with_context(|| format!("listening on {addr}:{} in {ns}", role.port()))?
            };
            let (tally, role) = (tally.clone(), role.clone());
            threads.push(std::thread::spawn(move || accept(listener, expected, role, window, tally)));
        }
    }
    for role in roles {
        for (from, to) in connecting(role) {
            let ((ns, _), (_, dst)) = (host(from)?, host(to)?);
            let (tally, role) = (tally.clone(), role.clone());
            threads.push(std::thread::spawn(move || {
                let conn = {
                    let _in = NetnsGuard::enter(Some(&ns))?;
                    TcpStream::connect(SocketAddrV4::new(dst, role.port()))
                        .with_context(|| format!("connecting from {ns} to {dst}:{}", role.port()))?
                };
                match role {
                    Role::Bulk { class, .. } => send(conn, &class, window, &tally),
                    Role::Rpc { class, request, response, think, .. } => {
                        ask(conn, &class, request, response, think, window, &tally)
                    }
                }
            }));
        }
    }
    let (from, to) = (start + window.from, start + window.to);
    let measured = std::thread::scope(|s| {
        let counts = s.spawn(|| {
            std::thread::sleep(from.saturating_duration_since(Instant::now()));
            tally.window_opens();
            std::thread::sleep(to.saturating_duration_since(Instant::now()));
            tally.window_closes();
        });
        let measured = s.spawn(|| measure(from, to)).join().map_err(|_| anyhow!("the window's measurement panicked"));
        counts.join().map_err(|_| anyhow!("the window's connection counts panicked"))?;
        measured
    });
    let mut first_error = None;
    for t in threads {
        let r = t.join().map_err(|_| anyhow!("a testbed traffic thread panicked")).and_then(|r| r);
        if let (Err(e), None) = (r, &first_error) {
            first_error = Some(e);
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let measured = measured??;
    let figures = Arc::try_unwrap(tally)
        .map_err(|_| anyhow!("traffic threads still hold the tally"))?
        .figures
        .into_inner()
        .expect("no poisoned tally");
    Ok((figures, measured))
}

/// Time allowed for every connection to open before the clock starts.
const SET_UP: Duration = Duration::from_millis(300);

/// The hosts a role listens on, each with the connections it is to accept.
fn listening(role: &Role) -> Vec<(usize, usize)> {
    let mut on: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, to) in connecting(role) {
        *on.entry(to).or_default() += 1;
    }
    on.into_iter().collect()
}

/// A role's connections, (from, to) host pairs: each bulk sender to the receiver; each client's
/// slot to its server.
fn connecting(role: &Role) -> Vec<(usize, usize)> {
    match role {
        Role::Bulk { senders, receiver, .. } => senders.iter().map(|s| (*s, *receiver)).collect(),
        Role::Rpc { clients, servers, outstanding, .. } => clients
            .iter()
            .flat_map(|c| (0..*outstanding).filter_map(move |slot| server_of(*c, slot, servers).map(|s| (*c, s))))
            .collect(),
    }
}

/// The server a client's slot uses: the other servers in turn from the client's number (None
/// when the client is the only server).
pub fn server_of(client: usize, slot: usize, servers: &[usize]) -> Option<usize> {
    let others: Vec<usize> = servers.iter().copied().filter(|s| *s != client).collect();
    (!others.is_empty()).then(|| others[(client + slot) % others.len()])
}

/// Accepts a listener's `expected` connections and serves each on a thread of its own.
fn accept(listener: TcpListener, expected: usize, role: Role, w: Window, tally: Arc<Tally>) -> Result<()> {
    let mut served = Vec::new();
    for _ in 0..expected {
        let (conn, _) = listener.accept().with_context(|| format!("accepting on port {}", role.port()))?;
        let (tally, role) = (tally.clone(), role.clone());
        served.push(std::thread::spawn(move || match role {
            Role::Bulk { class, .. } => sink(conn, &class, w, &tally),
            Role::Rpc { class, request, response, .. } => serve(conn, &class, request, response, &tally),
        }));
    }
    for t in served {
        t.join().map_err(|_| anyhow!("a testbed traffic thread panicked"))??;
    }
    Ok(())
}

/// Waits for the clock to start.
fn wait_start(w: Window) {
    std::thread::sleep(w.start.saturating_duration_since(Instant::now()));
}

/// Sends a bulk flow from the start to the end of the window, then closes it.
fn send(mut conn: TcpStream, class: &str, w: Window, tally: &Tally) -> Result<()> {
    conn.set_write_timeout(Some(Duration::from_millis(100)))?;
    tally.open(class, &conn, true)?;
    let data = vec![0x5au8; 1 << 20];
    wait_start(w);
    while !w.over() {
        match conn.write(&data) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e).context("sending a bulk flow"),
        }
    }
    conn.shutdown(std::net::Shutdown::Write).context("closing a bulk flow")?;
    Ok(())
}

/// One client slot: a request, its whole response, the think time, until the window ends;
/// requests issued in the window are measured.
fn ask(
    mut conn: TcpStream,
    class: &str,
    request: u64,
    response: u64,
    think: Duration,
    w: Window,
    tally: &Tally,
) -> Result<()> {
    conn.set_nodelay(true)?;
    tally.open(class, &conn, true)?;
    let ask = vec![0x01u8; request as usize];
    let mut times = Vec::new();
    wait_start(w);
    while !w.over() {
        let t = Instant::now();
        conn.write_all(&ask).context("sending a request")?;
        if !read_exactly(&mut conn, response)? {
            bail!("a server of class {class} closed before answering");
        }
        if w.contains(t) {
            times.push(t.elapsed().as_nanos() as u64);
        }
        std::thread::sleep(think);
    }
    tally.add(class, |c| {
        c.completions_ns.extend(times);
        c.completions_ns.sort_unstable();
    });
    Ok(())
}

/// Reads a bulk connection to its end, counting the bytes that arrive in the window.
fn sink(mut conn: TcpStream, class: &str, w: Window, tally: &Tally) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    tally.open(class, &conn, false)?;
    let deadline = w.start + w.to + Duration::from_secs(10);
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if w.contains(Instant::now()) => got += n as u64,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e).context("reading a bulk flow"),
        }
        if Instant::now() > deadline {
            bail!("a bulk flow of class {class} did not end 10 s after the run");
        }
    }
    tally.add(class, |c| c.bulk_bytes += got);
    Ok(())
}

/// Answers each `request`-byte request with `response` bytes until the client closes.
fn serve(mut conn: TcpStream, class: &str, request: u64, response: u64, tally: &Tally) -> Result<()> {
    conn.set_nodelay(true)?;
    tally.open(class, &conn, true)?;
    let answer = vec![0xa5u8; response as usize];
    while read_exactly(&mut conn, request)? {
        conn.write_all(&answer).context("answering a request")?;
    }
    Ok(())
}

/// Reads `n` bytes; false at the end of the stream before any.
fn read_exactly(conn: &mut TcpStream, mut n: u64) -> Result<bool> {
    let mut buf = [0u8; 1 << 16];
    let whole = n;
    while n > 0 {
        let got = conn.read(&mut buf[..n.min(1 << 16) as usize]).context("reading a message")?;
        if got == 0 {
            if n == whole {
                return Ok(false);
            }
            bail!("the peer closed in the middle of a message");
        }
        n -= got as u64;
    }
    Ok(true)
}
