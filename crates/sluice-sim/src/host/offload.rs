//! AccelTCP's stateful offloads on the NIC (Moon et al., NSDI 2020), the packet-processing block
//! of the OpenCC engine:
//!
//! - **setup**: the NIC answers a SYN with a SYN-ACK whose initial sequence number is a SYN
//!   cookie and keeps no state; the host sees the connection only once the client's ACK echoes a
//!   valid cookie, so half-open connections and SYN floods cost the host nothing. A segment with
//!   a wrong cookie is dropped and counted.
//! - **teardown**: once the application answered and closed, the host hands the connection to
//!   the NIC, which keeps its FIN (with the response it carries) in a table entry, retransmits it
//!   on its own timer wheel, and completes the close when the client acknowledges it.
//! - **splicing** (`host/splice.rs`): a proxy joins a client connection and a backend
//!   connection, and the NIC relays between them.
//! - a finite connection table (the NIC's SRAM), shared by closes and splices: when it is full the
//!   host closes or relays the connection itself, and the fallback is counted.

use super::splice::Splicer;
use crate::context::Cx;
use crate::packet::{flags, Packet};
use crate::time::Time;
use crate::transport::tcp::{TcpClient, TcpServer};
use crate::transport::Io;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// `[offload]`: which hosts' NICs offload what, and the NIC's table and timer.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct OffloadConfig {
    /// Hosts whose NIC offloads (default: none).
    pub hosts: Vec<usize>,
    /// Answer SYNs with SYN cookies on the NIC.
    pub setup: bool,
    /// Carry out the server's close on the NIC.
    pub teardown: bool,
    /// Join a proxy's client and backend connections on the NIC when the proxy asks.
    pub splice: bool,
    /// The host's stack creates a quasi-TCB at the handshake and the full TCB only when a second
    /// request arrives (AccelTCP's lazy TCB).
    pub lazy_tcb: bool,
    /// Connections the NIC's table holds at once.
    pub table_entries: usize,
    /// The NIC's FIN retransmission timeout (doubling per try).
    pub rto: Time,
    /// The timer wheel's slot width: retransmissions fire at the end of their slot.
    pub wheel_slot: Time,
}

impl Default for OffloadConfig {
    fn default() -> Self {
        OffloadConfig {
            hosts: Vec::new(),
            setup: true,
            teardown: true,
            splice: true,
            lazy_tcb: false,
            table_entries: 16_384,
            rto: Time::from_ms(1),
            wheel_slot: Time::from_us(10),
        }
    }
}

/// How many times the NIC sends a FIN before it gives up (as the host would).
pub const FIN_TRIES: u32 = 8;

/// What the NIC counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OffloadCounts {
    /// SYN-ACKs the NIC sent with a cookie.
    pub syn_cookies: u64,
    /// Handshakes the NIC verified and handed to the host.
    pub verified: u64,
    /// Segments dropped for a wrong cookie.
    pub bad_cookies: u64,
    /// Closes the NIC took over.
    pub teardowns: u64,
    /// FINs the NIC sent again.
    pub fin_retransmits: u64,
    /// Closes the host did and splices it relayed itself because the table was full.
    pub fallbacks: u64,
    /// The most table entries in use at once.
    pub table_peak: u64,
    /// Connection pairs the NIC spliced.
    pub spliced: u64,
    /// Segments the NIC rewrote between spliced connections.
    pub relayed: u64,
    /// Splices the proxy did not ask for because a connection carries per-hop options.
    pub splice_refused: u64,
}

/// A close the NIC carries out: the FIN to send again, its tries and deadline.
struct Closing {
    fin: Packet,
    tries: u32,
    deadline: Time,
}

/// Slots of the timer wheel: one bit each in the occupancy map.
const WHEEL_SLOTS: usize = 64;

/// One host's NIC offload.
pub struct Offload {
    /// What this NIC offloads.
    pub setup: bool,
    /// See [`OffloadConfig::teardown`].
    pub teardown: bool,
    /// See [`OffloadConfig::splice`].
    pub splice: bool,
    /// See [`OffloadConfig::lazy_tcb`].
    pub lazy_tcb: bool,
    /// Spliced connection pairs.
    pub splicer: Splicer,
    capacity: usize,
    rto: Time,
    slot: Time,
    secret: u64,
    table: HashMap<u32, Closing>,
    /// Flows due in each wheel slot (slot index = deadline / slot width mod the wheel size).
    wheel: Vec<Vec<u32>>,
    /// Bit i set: wheel slot i holds a flow.
    occupied: u64,
    /// The wheel tick scheduled, if any.
    pub tick_at: Option<Time>,
    /// Counters.
    pub counts: OffloadCounts,
}

/// Cookies carry the time in units of this (Linux counts minutes; 64 s keeps it a shift).
const COOKIE_EPOCH: Time = Time(64_000_000_000);

impl Offload {
    /// The offload of host `host` (the host number seeds its cookie secret).
    pub fn new(host: u32, cfg: &OffloadConfig, seed: u64) -> Offload {
        Offload {
            setup: cfg.setup,
            teardown: cfg.teardown,
            splice: cfg.splice,
            lazy_tcb: cfg.lazy_tcb,
            splicer: Splicer::default(),
            capacity: cfg.table_entries,
            rto: cfg.rto,
            slot: cfg.wheel_slot,
            secret: mix(seed ^ (host as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            table: HashMap::new(),
            wheel: vec![Vec::new(); WHEEL_SLOTS],
            occupied: 0,
            tick_at: None,
            counts: OffloadCounts::default(),
        }
    }

    /// Looks at a segment for `server` (a connection's server end) before the host does: answers a SYN with
    /// a cookie, verifies the cookie of the handshake's ACK (a verified one goes on to the host,
    /// which creates the connection as it takes the segment), and takes the client's ACK of a FIN
    /// the NIC owns. True when the NIC consumed the segment; its outcome is then in `io`.
    pub fn on_segment(&mut self, server: &mut TcpServer, pkt: &Packet, io: &mut Io, cx: &mut Cx) -> bool {
        let now = cx.now;
        if self.setup && server.listening() {
            if pkt.is_syn() {
                io.replies.push(server.syn_ack(pkt, self.cookie(pkt, now)));
                self.counts.syn_cookies += 1;
                return true;
            }
            if !self.verify(pkt, now) {
                return true;
            }
            server.accept_verified();
            return false;
        }
        if self.owns(pkt.flow) {
            if server.acks_fin(pkt) {
                self.closed(pkt.flow);
                server.nic_closed(io, cx);
            }
            // Anything else (the client's retransmitted data) is answered by the NIC's FIN timer.
            return true;
        }
        false
    }

    /// The application closed `server` (flow `flow`'s end) with the FIN among `replies`, about
    /// to go out: a NIC that offloads teardown takes the close over if its table has room (else
    /// the host keeps it). Returns the wheel tick to schedule, if one is needed.
    pub fn hand_over(&mut self, server: &mut TcpServer, flow: u32, replies: &[Packet], now: Time) -> Option<Time> {
        if !self.teardown {
            return None;
        }
        let fin = replies.iter().rev().find(|p| p.has(flags::FIN)).copied()?;
        let tick = self.take_close(flow, fin, now).ok()?;
        server.hand_over_close();
        tick
    }

    /// The SYN cookie for the connection `syn` opens, at `now`: a keyed hash of the flow and its
    /// endpoints in the top 27 bits, the time epoch (mod 32) in the low 5.
    pub fn cookie(&self, syn: &Packet, now: Time) -> u32 {
        self.cookie_at(syn, now.0 / COOKIE_EPOCH.0)
    }

    fn cookie_at(&self, p: &Packet, epoch: u64) -> u32 {
        let (client, server) = if p.is_forward() { (p.src, p.dst) } else { (p.dst, p.src) };
        let key = self.secret
            ^ (p.flow as u64)
            ^ (client as u64) << 24
            ^ (server as u64) << 44
            ^ epoch.wrapping_mul(0xd6e8_feb8_6659_fd93);
        ((mix(key) as u32) & !0x1f) | (epoch & 0x1f) as u32
    }

    /// True if the cookie a client's segment echoes is one this NIC issued in the current or
    /// the previous epoch.
    pub fn verify(&mut self, pkt: &Packet, now: Time) -> bool {
        let epoch = now.0 / COOKIE_EPOCH.0;
        let issued = (pkt.cookie & 0x1f) as u64;
        let ok = [epoch, epoch.wrapping_sub(1)]
            .into_iter()
            .any(|e| e & 0x1f == issued && self.cookie_at(pkt, e) == pkt.cookie);
        if ok {
            self.counts.verified += 1;
        } else {
            self.counts.bad_cookies += 1;
        }
        ok
    }

    /// Takes over the close of `flow` whose FIN is `fin`, sent now; false (a fallback) if the
    /// table is full. Returns the wheel tick to schedule, if the wheel was idle.
    pub fn take_close(&mut self, flow: u32, fin: Packet, now: Time) -> Result<Option<Time>, ()> {
        if !self.room() {
            return Err(());
        }
        self.counts.teardowns += 1;
        let deadline = now + self.rto;
        self.table.insert(flow, Closing { fin, tries: 1, deadline });
        self.note_peak();
        self.file(flow, deadline);
        Ok(self.next_tick(now))
    }

    /// True if the table has an entry free; else counts a fallback.
    fn room(&mut self) -> bool {
        let room = self.table.len() + self.splicer.active() < self.capacity;
        if !room {
            self.counts.fallbacks += 1;
        }
        room
    }

    fn note_peak(&mut self) {
        let used = (self.table.len() + self.splicer.active()) as u64;
        self.counts.table_peak = self.counts.table_peak.max(used);
    }

    /// A proxy asks to join its end of the client connection, `front` (a request of `size`
    /// bytes), and its end of the backend connection, `back`, both established, at the client's
    /// next byte. True if the NIC splices them. It does not when it does not splice at all, when
    /// a connection carries options switches rewrite per hop (counted), when the request is all
    /// read or part of it waits beyond a gap (the NIC could no longer hand those bytes to the
    /// host), or when the table is full (a fallback). The host relays the ones it does not.
    pub fn try_splice(&mut self, front: &TcpServer, back: &TcpClient, size: u64) -> bool {
        if !self.splice {
            return false;
        }
        if front.carries_path_options() || back.carries_path_options() {
            self.counts.splice_refused += 1;
            return false;
        }
        let at = front.receiver.rcv_nxt;
        if at >= size || front.receiver.has_out_of_order() || !self.room() {
            return false;
        }
        // The host's own backend data below the splice point may still be unacknowledged.
        self.splicer.join(front.route(), back.route(), at, back.sender.una < at);
        self.counts.spliced += 1;
        self.note_peak();
        true
    }

    /// A segment of a spliced connection reaches the NIC: see [`Splicer::on_segment`].
    pub fn relay(&mut self, pkt: &Packet, checksums: bool) -> Option<super::splice::Relayed> {
        let r = self.splicer.on_segment(pkt, checksums)?;
        self.counts.relayed += r.out.is_some() as u64;
        Some(r)
    }

    /// True if the NIC carries out `flow`'s close.
    fn owns(&self, flow: u32) -> bool {
        self.table.contains_key(&flow)
    }

    /// The client acknowledged the FIN of a close the NIC owns: the entry goes.
    pub fn closed(&mut self, flow: u32) {
        self.table.remove(&flow);
    }

    /// The wheel slot (absolute) whose end is the first at or after `t`.
    fn slot_of(&self, t: Time) -> u64 {
        t.0.div_ceil(self.slot.0)
    }

    fn file(&mut self, flow: u32, deadline: Time) {
        let s = (self.slot_of(deadline) % WHEEL_SLOTS as u64) as usize;
        self.wheel[s].push(flow);
        self.occupied |= 1 << s;
    }

    /// The next tick after `now`: the end of the first occupied slot, found in the bitmap.
    /// Entries a whole turn of the wheel or more away stay in their slot until their turn.
    fn next_tick(&mut self, now: Time) -> Option<Time> {
        if self.occupied == 0 {
            return None;
        }
        let a = now.0 / self.slot.0 + 1;
        let d = self.occupied.rotate_right((a % WHEEL_SLOTS as u64) as u32).trailing_zeros() as u64;
        let at = Time((a + d) * self.slot.0);
        if self.tick_at.is_some_and(|t| t <= at && t > now) {
            return None;
        }
        self.tick_at = Some(at);
        Some(at)
    }

    /// The wheel ticks at `now` (a time [`Offload::tick_at`] named): the FINs due in this slot
    /// are sent again (pushed to `resend`), or given up after [`FIN_TRIES`] (their flows pushed
    /// to `gave_up`). Returns the next tick to schedule.
    pub fn tick(&mut self, now: Time, resend: &mut Vec<Packet>, gave_up: &mut Vec<u32>) -> Option<Time> {
        self.tick_at = None;
        let s = (self.slot_of(now) % WHEEL_SLOTS as u64) as usize;
        let mut later = Vec::new();
        for flow in std::mem::take(&mut self.wheel[s]) {
            let Some(c) = self.table.get_mut(&flow) else { continue };
            if c.deadline > now {
                later.push(flow);
                continue;
            }
            if c.tries >= FIN_TRIES {
                self.table.remove(&flow);
                gave_up.push(flow);
                continue;
            }
            c.tries += 1;
            c.deadline = now + Time(self.rto.0.saturating_mul(1 << (c.tries - 1).min(16)));
            let mut fin = c.fin;
            fin.ts = now;
            resend.push(fin);
            self.counts.fin_retransmits += 1;
            let d = c.deadline;
            self.file(flow, d);
        }
        self.wheel[s].extend(later);
        if self.wheel[s].is_empty() {
            self.occupied &= !(1 << s);
        }
        self.next_tick(now)
    }

    /// Entries in use.
    pub fn in_use(&self) -> usize {
        self.table.len()
    }
}

/// SplitMix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::flags;

    fn syn(flow: u32) -> Packet {
        Packet { flow, src: 1, dst: 2, flags: flags::SYN, ..Packet::default() }
    }

    #[test]
    fn a_cookie_verifies_only_for_its_connection_and_epoch() {
        let mut nic = Offload::new(2, &OffloadConfig::default(), 1);
        let now = Time::from_ms(5);
        let cookie = nic.cookie(&syn(9), now);
        let ack = Packet { flow: 9, src: 1, dst: 2, flags: flags::ACK, cookie, ..Packet::default() };
        assert!(nic.verify(&ack, now + Time::from_us(30)));
        // The previous epoch's cookies still hold; older ones do not.
        assert!(nic.verify(&ack, now + COOKIE_EPOCH));
        assert!(!nic.verify(&ack, now + Time(2 * COOKIE_EPOCH.0)));
        let forged = Packet { cookie: cookie ^ 0x100, ..ack };
        assert!(!nic.verify(&forged, now));
        let other_flow = Packet { flow: 10, ..ack };
        assert!(!nic.verify(&other_flow, now));
        // Another NIC's secret gives other cookies.
        let mut other = Offload::new(3, &OffloadConfig::default(), 1);
        assert!(!other.verify(&ack, now));
        assert_eq!((nic.counts.verified, nic.counts.bad_cookies), (2, 3));
    }

    #[test]
    fn the_wheel_resends_a_fin_at_its_deadline_doubling_then_gives_up() {
        let cfg = OffloadConfig { rto: Time::from_us(100), wheel_slot: Time::from_us(10), ..OffloadConfig::default() };
        let mut nic = Offload::new(0, &cfg, 1);
        let fin = Packet { flow: 4, flags: flags::FIN | flags::ACK, ..Packet::default() };
        let first = nic.take_close(4, fin, Time::from_us(3)).unwrap().unwrap();
        assert_eq!(first, Time::from_us(110), "the deadline 103 us rounded up to its slot");
        let (mut resend, mut gave_up) = (Vec::new(), Vec::new());
        let mut at = first;
        let mut times = Vec::new();
        while let Some(next) = nic.tick(at, &mut resend, &mut gave_up) {
            times.push(at.ns() / 1000);
            at = next;
        }
        times.push(at.ns() / 1000);
        // Sent at 3 us, then at 110, 310, 710, ... (the timeout doubling per try).
        assert_eq!(resend.len() as u32, FIN_TRIES - 1);
        assert_eq!(&times[..3], &[110, 310, 710]);
        assert_eq!(gave_up, vec![4]);
        assert!(!nic.owns(4));
    }

    #[test]
    fn a_full_table_refuses_and_counts_the_fallback() {
        let cfg = OffloadConfig { table_entries: 2, ..OffloadConfig::default() };
        let mut nic = Offload::new(0, &cfg, 1);
        let fin = Packet::default();
        assert!(nic.take_close(1, fin, Time::ZERO).is_ok());
        assert!(nic.take_close(2, fin, Time::ZERO).is_ok());
        assert!(nic.take_close(3, fin, Time::ZERO).is_err());
        nic.closed(1);
        assert!(nic.take_close(3, fin, Time::ZERO).is_ok());
        assert_eq!((nic.counts.fallbacks, nic.counts.teardowns, nic.counts.table_peak), (1, 3, 2));
    }
}
