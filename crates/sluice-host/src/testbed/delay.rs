//! A delay line for the testbed, which has no netem: packets from one host to another take a
//! detour, inside the switch's namespace, through a TUN device where a thread holds each for a
//! fixed time before the kernel forwards it on. Policy routing sends a packet into the detour by
//! the port it came in on, so what comes back out of the TUN device goes the ordinary way.
//!
//! It gives a circuit experiment the round trip a real rack-to-rack path has, at millisecond
//! scale, so that the window a fast phase needs is much larger than the one a slow phase keeps.

use crate::sys::{self, run, NetnsGuard};
use crate::testbed::netns::Testbed;
use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running delay line; `stop` (or drop) removes it.
pub struct DelayLine {
    switch: String,
    table: String,
    rule: Vec<String>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64>>>,
}

/// Opens a TUN device named `name` in the calling thread's network namespace.
fn open_tun(name: &str) -> Result<OwnedFd> {
    // SAFETY: a plain open(2) of a path; the result is checked before use.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        bail!("opening /dev/net/tun: {}", std::io::Error::last_os_error());
    }
    // SAFETY: fd is a freshly opened descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes the ifreq we own.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
        bail!("creating TUN device {name}: {}", std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Holds every packet read from `fd` for `delay` and writes it back, until `stop`; returns how
/// many packets it carried.
fn pump(fd: OwnedFd, delay: Duration, stop: &AtomicBool) -> Result<u64> {
    let mut held: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    let mut carried = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while held.front().is_some_and(|(due, _)| *due <= now) {
            let (_, pkt) = held.pop_front().expect("a held packet");
            // SAFETY: writing our own buffer to our own descriptor.
            let n = unsafe { libc::write(fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
            if n < 0 {
                bail!("writing to the delay line: {}", std::io::Error::last_os_error());
            }
            carried += 1;
        }
        // Wait for a packet or the next one due, to the microsecond (a coarser wake would send
        // the held packets on in bursts), and at most a millisecond so `stop` is seen.
        let wait = held.front().map_or(Duration::from_millis(1), |(due, _)| due.saturating_duration_since(now)).min(Duration::from_millis(1));
        let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts = libc::timespec { tv_sec: 0, tv_nsec: wait.subsec_nanos() as libc::c_long };
        // SAFETY: one pollfd and one timespec we own; no signal mask change.
        if unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                bail!("waiting on the delay line: {e}");
            }
        }
        loop {
            // SAFETY: reading into our own buffer from our own non-blocking descriptor.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            held.push_back((Instant::now() + delay, buf[..n as usize].to_vec()));
        }
    }
    Ok(carried)
}

impl DelayLine {
    /// Delays by `delay` every packet host `from` (1 for `<prefix>-h1`) sends to host `to`.
    pub fn start(tb: &Testbed, from: u8, to: u8, delay: Duration) -> Result<DelayLine> {
        sys::require_root("the delay line")?;
        let n = tb.hosts.len() as u8;
        if !(1..=n).contains(&from) || !(1..=n).contains(&to) || from == to {
            bail!("delay line: expected two different hosts from 1 to {n}, got {from} and {to}");
        }
        let sw = tb.switch.clone();
        let dev = format!("dl{from}to{to}");
        let (stop, started) = (Arc::new(AtomicBool::new(false)), std::sync::mpsc::channel());
        let thread = {
            let (sw, dev, stop) = (sw.clone(), dev.clone(), stop.clone());
            std::thread::spawn(move || -> Result<u64> {
                let opened = NetnsGuard::enter(Some(&sw)).and_then(|g| Ok((g, open_tun(&dev)?)));
                let (_g, fd) = match opened {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = started.0.send(Err(format!("{e:#}")));
                        return Ok(0);
                    }
                };
                let _ = started.0.send(Ok(()));
                pump(fd, delay, &stop)
            })
        };
        started.1.recv().context("the delay line's thread")?.map_err(anyhow::Error::msg)?;
        let table = format!("{}", 100 + from as u32 * 16 + to as u32);
        let dst = format!("10.72.{to}.0/24");
        let rule: Vec<String> = ["-n", &sw, "rule", "add", "iif", &format!("p{from}"), "to", &dst, "lookup", &table].map(String::from).into();
        let mut line = DelayLine { switch: sw.clone(), table: table.clone(), rule: Vec::new(), stop, thread: Some(thread) };
        let mtu = tb.mtu.to_string();
        run("ip", &["-n", &sw, "link", "set", &dev, "mtu", &mtu, "up"])?;
        // What comes back out of the TUN device has the sender's address on the wrong side.
        run("ip", &["netns", "exec", &sw, "sysctl", "-qw", &format!("net.ipv4.conf.{dev}.rp_filter=0")])?;
        run("ip", &["netns", "exec", &sw, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"])?;
        run("ip", &["-n", &sw, "route", "add", &dst, "dev", &dev, "table", &table])?;
        run("ip", &rule.iter().map(String::as_str).collect::<Vec<_>>())?;
        line.rule = rule;
        Ok(line)
    }

    /// Removes the detour and returns how many packets it carried.
    pub fn stop(mut self) -> Result<u64> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<u64> {
        if !self.rule.is_empty() {
            let del: Vec<&str> = self.rule.iter().map(|s| if s == "add" { "del" } else { s.as_str() }).collect();
            let _ = run("ip", &del);
            let _ = run("ip", &["-n", &self.switch, "route", "flush", "table", &self.table]);
            self.rule.clear();
        }
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow::anyhow!("the delay line's thread panicked"))?,
            None => Ok(0),
        }
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("delay line: {e:#}");
        }
    }
}
