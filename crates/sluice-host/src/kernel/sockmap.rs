//! The sockmap relay in the kernel (`bpf/proxy.bpf.c`): a sockhash whose stream verdict program
//! redirects every segment arriving on one socket of a pair to the other's egress, and the
//! counts the program keeps. `testbed::proxy` puts connection pairs in it.

use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};

/// The loaded sockhash and its verdict program (sockmap mode).
pub struct KernelRelay {
    obj: Object,
}

impl KernelRelay {
    /// Loads the relay's object and attaches its verdict program to the sockhash.
    pub fn load() -> Result<KernelRelay> {
        crate::sys::require_root("loading the sockmap relay")?;
        let bytes: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/proxy.bpf.o"));
        let open = ObjectBuilder::default().open_memory(bytes).context("opening the proxy BPF object")?;
        let obj = open.load().context("loading the sockmap relay (verifier)")?;
        let map_fd = obj.maps().find(|m| m.name() == "peers").context("the peers map")?.as_fd().as_raw_fd();
        let prog = obj.progs_mut().find(|p| p.name() == "relay").context("the relay program")?;
        prog.attach_sockmap(map_fd).context("attaching the verdict program to the sockhash")?;
        Ok(KernelRelay { obj })
    }

    /// Puts both sockets in the sockhash, each under the key its own arriving segments carry,
    /// mapped to the other.
    pub fn splice(&self, a: &TcpStream, b: &TcpStream) -> Result<()> {
        let map = self.obj.maps().find(|m| m.name() == "peers").context("the peers map")?;
        // The kernel retries a redirect to a socket whose send buffer is full only a jiffy later,
        // which stalls the relay: give both sockets room (root may exceed wmem_max).
        let size: libc::c_int = 8 << 20;
        for s in [a, b] {
            // SAFETY: a live socket, and an option value of the size given.
            let r = unsafe {
                libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, (&size as *const libc::c_int).cast(), 4)
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error()).context("setting the relayed sockets' send buffers");
            }
        }
        for (from, to) in [(a, b), (b, a)] {
            let key = pair_key(from)?;
            map.update(&key, &(to.as_raw_fd() as u32).to_ne_bytes(), MapFlags::ANY).context("inserting a socket into the sockhash")?;
        }
        Ok(())
    }
}

/// What the sockmap relay's verdict program counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelayCounts {
    /// Segments redirected to the peer socket.
    pub redirected: u64,
    /// Segments with data dropped for want of a peer in the map (bytes lost: never expected).
    pub dropped_data: u64,
    /// Empty segments (a FIN) dropped for want of a peer: the proxy had already closed the pair.
    pub dropped_empty: u64,
}

impl KernelRelay {
    /// What the verdict program counted so far.
    pub fn counts(&self) -> Result<RelayCounts> {
        let map = self.obj.maps().find(|m| m.name() == "relay_counts").context("the relay_counts map")?;
        let get = |i: u32| -> Result<u64> {
            let v = map.lookup(&i.to_ne_bytes(), MapFlags::ANY)?.context("a counter")?;
            Ok(u64::from_ne_bytes(v[..8].try_into()?))
        };
        Ok(RelayCounts { redirected: get(0)?, dropped_data: get(1)?, dropped_empty: get(2)? })
    }
}

/// The key `bpf/proxy.bpf.c` reads from a segment arriving on `s`.
fn pair_key(s: &TcpStream) -> Result<[u8; 16]> {
    let (SocketAddr::V4(local), SocketAddr::V4(remote)) = (s.local_addr()?, s.peer_addr()?) else {
        bail!("the sockmap relay handles IPv4 connections only");
    };
    let mut k = [0u8; 16];
    k[0..4].copy_from_slice(&remote.ip().octets());
    k[4..8].copy_from_slice(&local.ip().octets());
    // The kernel loads the 16-bit network-order port into the upper half (on little-endian).
    let rport = if cfg!(target_endian = "little") { (remote.port().to_be() as u32) << 16 } else { remote.port() as u32 };
    k[8..12].copy_from_slice(&rport.to_ne_bytes());
    k[12..16].copy_from_slice(&(local.port() as u32).to_ne_bytes());
    Ok(k)
}
