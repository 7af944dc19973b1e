//! Connection splicing on the NIC (AccelTCP, Moon et al., NSDI 2020, section 4.3): a proxy that
//! has read a request's header and connected to a backend asks its NIC to join the two
//! connections. From then on the NIC relays between them without the host: a segment from the
//! client becomes a segment of the backend connection (addresses, ports and sequence numbers
//! rewritten, the TCP checksum updated incrementally), and the backend's ACKs become the
//! client connection's. Congestion control and loss recovery then run end to end between the
//! client and the backend. When the close has gone through both ways the NIC tells the host,
//! which frees both connections.
//!
//! The proxy forwards the byte stream unchanged, so a byte's offset is the same in both
//! connections and only the initial sequence numbers differ. Bytes the host received before the
//! splice it relays itself, so the backend connection may still carry host data below the splice
//! point: the backend's ACKs below it go to the host, which retransmits what it owes, and the
//! first ACK at or past it is also handed to the host (clamped to the splice point), which is then
//! done.

use crate::ids::FlowId;
use crate::packet::wire::{checksum_update, rewritten_words, tcp_checksum};
use crate::packet::{flags, Ecn, Packet};
use crate::transport::tcp::Route;
use std::collections::HashMap;

/// A spliced pair: the client's connection to the proxy and the proxy's to the backend.
struct Splice {
    front: Route,
    back: Route,
    /// The splice point: the first byte the NIC relays (all before it the host relayed).
    at: u64,
    /// The host's backend connection still waits for an ACK reaching the splice point.
    host_owed: bool,
    /// The backend's FIN has gone to the client.
    back_fin: bool,
}

/// What the NIC does with a segment of a spliced connection.
#[derive(Debug, Default)]
pub struct Relayed {
    /// The rewritten segment to send on, if any.
    pub out: Option<Packet>,
    /// A segment the host's own stack must take (its share of the backend's ACKs).
    pub to_host: Option<Packet>,
    /// The close went through: the host may free these (front, back) connections.
    pub closed: Option<(FlowId, FlowId)>,
}

/// A NIC's splice table: an entry per pair until its close has gone through (a FIN the backend
/// sends again after that reaches the proxy's own stack, whose closed end answers it).
#[derive(Default)]
pub struct Splicer {
    /// Entries by client connection.
    entries: HashMap<u32, Splice>,
    /// The client connection of each spliced backend connection.
    front_of: HashMap<u32, u32>,
}

impl Splicer {
    /// Joins the client connection `front` and the backend connection `back` at byte `at`;
    /// `host_owed` when the host has backend data below `at` not yet acknowledged.
    pub fn join(&mut self, front: Route, back: Route, at: u64, host_owed: bool) {
        self.entries.insert(front.flow, Splice { front, back, at, host_owed, back_fin: false });
        self.front_of.insert(back.flow, front.flow);
    }

    /// Pairs whose close has not gone through.
    pub fn active(&self) -> usize {
        self.entries.len()
    }

    /// Looks at a segment reaching the proxy; `None` if it is not for a spliced connection (the
    /// host takes it). `checksums`: keep the TCP checksum field (a capture is on).
    pub fn on_segment(&mut self, pkt: &Packet, checksums: bool) -> Option<Relayed> {
        if self.entries.is_empty() {
            // Every packet at a host whose NIC offloads comes here first: keep the common case
            // free of hashing.
            return None;
        }
        let front = self.front_of.get(&pkt.flow).copied().unwrap_or(pkt.flow);
        let s = self.entries.get_mut(&front)?;
        let mut r = Relayed::default();
        if pkt.flow == s.front.flow && pkt.is_forward() {
            // The client's data, FIN or last ACK, on to the backend.
            r.out = Some(rewrite(pkt, &s.back, true, checksums));
            let last_ack = s.back_fin && pkt.has(flags::ACK) && !pkt.has(flags::FIN) && pkt.payload == 0 && pkt.ack > 0;
            if last_ack {
                r.closed = Some((FlowId(s.front.flow), FlowId(s.back.flow)));
                self.front_of.remove(&s.back.flow);
                self.entries.remove(&front);
            }
        } else if pkt.flow == s.back.flow && !pkt.is_forward() {
            if pkt.ack < s.at {
                // Acknowledges only what the host relayed: the host's own business.
                return Some(Relayed { to_host: Some(*pkt), ..r });
            }
            if s.host_owed {
                s.host_owed = false;
                r.to_host = Some(Packet {
                    ack: s.at,
                    flags: flags::ACK | flags::REVERSE,
                    sack_len: 0,
                    ecn: Ecn::NotEct,
                    payload: 0,
                    int: None,
                    hops: None,
                    ..*pkt
                });
            }
            s.back_fin |= pkt.has(flags::FIN);
            r.out = Some(rewrite(pkt, &s.front, false, checksums));
        } else {
            return None;
        }
        Some(r)
    }
}

/// `pkt` as a segment of the connection `to`, in the same direction (`forward`: client to
/// server). The checksum is updated for the rewritten words only (RFC 1624), when kept.
fn rewrite(pkt: &Packet, to: &Route, forward: bool, checksums: bool) -> Packet {
    let (src, dst, hash) = if forward { (to.src, to.dst, to.hash_fwd) } else { (to.dst, to.src, to.hash_rev) };
    let mut out = Packet { flow: to.flow, src, dst, hash, prio: to.prio, cookie: 0, ..*pkt };
    if checksums {
        // The words come from the frames' own layout, so a field rewritten inconsistently
        // shows as a bad checksum in the capture.
        let words = |p: &Packet| rewritten_words(p).expect("a spliced segment fits an IPv4 packet");
        let old = tcp_checksum(pkt).expect("a spliced segment fits an IPv4 packet");
        out.csum = checksum_update(old, &words(pkt), &words(&out));
    }
    out
}
