//! What a TCP connection's two ends share by definition, not by state: the RFC 9293 states, where
//! packets go, the stacks' TCP-INT settings. The ends themselves are the [`TcpClient`] (the
//! active opener, which sends the data) and the [`TcpServer`] (which receives it); each closes
//! by itself, and they meet only through packets.
//!
//! Sequence numbers are byte offsets of the data from 0; the SYN takes none, each FIN takes one
//! (the client's FIN is byte `size`; the server's follows its response, byte `response` of its own
//! direction).
//!
//! A host's NIC may carry out parts of the server's side (AccelTCP, `host/offload.rs`): answer
//! the SYN statelessly with a cookie ([`TcpServer::syn_ack`], then [`TcpServer::accept_verified`]),
//! and own the close once the application answered ([`TcpServer::hand_over_close`],
//! [`TcpServer::nic_closed`]).

use crate::packet::tcp_int::IntEncoding;
use crate::packet::{flags, Packet, INITIAL_TTL};
use crate::time::Time;

/// One end's state (RFC 9293, section 3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No connection.
    Closed,
    /// The server waits for a SYN.
    Listen,
    /// The client sent its SYN.
    SynSent,
    /// The server answered a SYN.
    SynReceived,
    /// Open.
    Established,
    /// The client sent its FIN.
    FinWait1,
    /// The client's FIN is acknowledged; it waits for the server's.
    FinWait2,
    /// Both FINs were sent and the client's is not yet acknowledged.
    Closing,
    /// The client acknowledged the server's FIN and waits out stray segments.
    TimeWait,
    /// The server received the client's FIN.
    CloseWait,
    /// The server sent its FIN and waits for its acknowledgement.
    LastAck,
}

/// Where a connection's packets go.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    /// Flow id.
    pub flow: u32,
    /// Client host.
    pub src: u32,
    /// Server host.
    pub dst: u32,
    /// ECMP hash of client-to-server packets.
    pub hash_fwd: u32,
    /// ECMP hash of server-to-client packets.
    pub hash_rev: u32,
    /// Switch priority queue.
    pub prio: u8,
    /// Each data packet from the client takes a hash of its own, so switches spread the flow's
    /// packets over every equal-cost path.
    pub spray: bool,
}

impl Route {
    /// The ECMP hash of a sprayed flow's `n`th data packet from the client: one for each
    /// packet (a retransmission counts anew, so it takes a path of its own too).
    #[inline]
    pub fn entropy(&self, n: u32) -> u32 {
        self.hash_fwd ^ n.wrapping_mul(0x9E37_79B9)
    }

    /// The ECMP hash of a packet from the server that answers one sent on entropy `n`, so an
    /// ACK takes a path of its own too.
    #[inline]
    pub fn entropy_rev(&self, n: u32) -> u32 {
        self.hash_rev ^ n.wrapping_mul(0x9E37_79B9)
    }

    /// A packet from the client to the server: addresses, ECMP hash, priority, a fresh TTL.
    #[inline]
    pub fn forward(&self) -> Packet {
        Packet { flow: self.flow, src: self.src, dst: self.dst, hash: self.hash_fwd, ttl: INITIAL_TTL, prio: self.prio, ..Packet::default() }
    }

    /// A packet from the server back to the client, flagged as such.
    #[inline]
    pub fn reverse(&self) -> Packet {
        Packet {
            flow: self.flow,
            src: self.dst,
            dst: self.src,
            hash: self.hash_rev,
            flags: flags::REVERSE,
            ttl: INITIAL_TTL,
            prio: self.prio,
            ..Packet::default()
        }
    }
}

/// The TCP-INT settings of both stacks, as the client's configuration knows them.
#[derive(Clone, Copy, Debug)]
pub struct IntStacks {
    /// INTval encoding and latency unit senders decode echoes with.
    pub encoding: IntEncoding,
    /// Unit of the latency fields.
    pub latency_unit: Time,
    /// The server's stack supports TCP-INT (what a connection without a handshake assumes).
    pub server: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::negotiation::{Negotiation, Offer};
    use crate::cc::{EcnMode, FlowContext};
    use crate::context::{Bench, Event};
    use crate::packet::flags;
    use crate::time::Rate;
    use crate::context::{Cx, TimerKind};
    use crate::transport::tcp::{Proposal, Sender, TcpClient, TcpConfig, TcpServer, FIN_TRIES};
    use crate::transport::{Io, Side};

    /// Both ends of one connection, driven by hand.
    struct TcpConnection {
        client: TcpClient,
        server: TcpServer,
    }

    impl TcpConnection {
        fn on_packet(&mut self, side: Side, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
            match side {
                Side::Client => self.client.on_packet(pkt, io, cx),
                Side::Server => self.server.on_packet(pkt, io, cx),
            }
        }
        fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
            match kind.at_server() {
                false => self.client.on_timer(kind, gen, io, cx),
                true => self.server.on_timer(kind, gen, io, cx),
            }
        }
        fn closes_at(&self) -> Option<Time> {
            self.client.closes_at()
        }
    }

    impl Bench {
        /// Moves the clock past `dt`.
        fn later(&mut self, dt: Time) {
            self.now += dt;
        }
        /// Gives `pkt` to `side` and returns what the connection reported.
        fn deliver(&mut self, c: &mut TcpConnection, side: Side, pkt: &Packet) -> Io {
            let mut io = Io::default();
            c.on_packet(side, pkt, &mut io, &mut self.cx());
            io
        }
        /// Runs pending timers of `kind` at their times until one acts (stale ones do nothing).
        fn fire(&mut self, c: &mut TcpConnection, kind: TimerKind) -> Io {
            loop {
                let (t, ev) = self.q.pop().expect("a pending timer");
                if let Event::Timer(_, k, gen) = ev {
                    if k == kind {
                        self.now = t;
                        let server = c.server.state;
                        let mut io = Io::default();
                        c.on_timer(k, gen, &mut io, &mut self.cx());
                        if io.activate || !io.replies.is_empty() || c.server.state != server {
                            return io;
                        }
                    }
                }
            }
        }
    }

    fn connection(size: u64) -> TcpConnection {
        let cfg = TcpConfig { handshake: true, time_wait: Time::from_us(50), ..TcpConfig::default() };
        let ctx = FlowContext { mss: cfg.mss(), init_cwnd: 10 * cfg.mss(), link_rate: Rate::gbps(10), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc };
        let reno = crate::cc::factory("newreno", &toml::Table::new()).unwrap();
        let sender = Sender::new(&cfg, Some(size), reno(&ctx));
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        let int = IntStacks { encoding: IntEncoding::default(), latency_unit: Time(1000), server: false };
        let offer = Offer { needs_int: false, needs_ecn: false, needs_hop_records: false };
        let proposal = Proposal { offer, local_int: false, fallback: (reno, ctx), int_all_flows: false };
        let client = TcpClient::new(&cfg, route, sender, int, proposal, None);
        TcpConnection { client, server: TcpServer::new(&cfg, route, EcnMode::Off, false) }
    }

    /// Opens a connection through its handshake and sends its one data segment, which carries
    /// the client's FIN; returns that segment.
    fn open_and_send(b: &mut Bench, c: &mut TcpConnection) -> Packet {
        let mut io = Io::default();
        c.client.open(&mut io, &mut b.cx());
        assert_eq!(c.client.state, State::SynSent);
        let syn = c.client.next_packet(&mut b.cx()).unwrap();
        assert!(syn.is_syn());
        b.later(Time::from_us(5));
        let syn_ack = b.deliver(c, Side::Server, &syn).replies.pop().unwrap();
        assert_eq!(c.server.state, State::SynReceived);
        b.later(Time::from_us(5));
        b.deliver(c, Side::Client, &syn_ack);
        assert_eq!((c.client.state, c.client.negotiation), (State::Established, Negotiation::Accepted));
        let data = c.client.next_packet(&mut b.cx()).unwrap();
        assert!(data.has(flags::FIN) && data.payload == 1000);
        assert_eq!(c.client.state, State::FinWait1);
        data
    }

    #[test]
    fn a_lost_server_fin_is_sent_again_and_the_connection_closes() {
        let (mut b, mut c) = (Bench::new(), connection(1000));
        let data = open_and_send(&mut b, &mut c);
        b.later(Time::from_us(5));
        let io = b.deliver(&mut c, Side::Server, &data);
        assert_eq!(io.delivered, Some((0, 1000)));
        let fin_ack = io.replies[0];
        assert!(fin_ack.has(flags::FIN) && fin_ack.ack == 1001 && !fin_ack.is_forward());
        assert_eq!(c.server.state, State::LastAck);
        // The FIN|ACK is lost: the server's own timer sends it again.
        let sent_at = b.now;
        let io = b.fire(&mut c, TimerKind::PeerRto);
        assert!(b.now > sent_at);
        let again = io.replies[0];
        assert_eq!((again.flags, again.ack), (fin_ack.flags, fin_ack.ack));
        b.later(Time::from_us(5));
        let io = b.deliver(&mut c, Side::Client, &again);
        assert!(io.completed, "the FIN|ACK acknowledges the last byte too");
        assert_eq!(c.client.state, State::TimeWait);
        let ack = io.replies[0];
        assert!(ack.is_forward() && ack.ack == 1 && !ack.has(flags::FIN));
        let client_acked_at = b.now;
        b.later(Time::from_us(5));
        let io = b.deliver(&mut c, Side::Server, &ack);
        assert_eq!(c.server.state, State::Closed);
        assert!(io.closed);
        assert_eq!(c.closes_at(), Some(client_acked_at + Time::from_us(50)));
    }

    #[test]
    fn a_lost_client_fin_is_retransmitted_with_the_data() {
        let (mut b, mut c) = (Bench::new(), connection(1000));
        let _lost = open_and_send(&mut b, &mut c);
        // The segment with the data and the FIN is lost: the RTO sends both again.
        let io = b.fire(&mut c, TimerKind::Rto);
        assert!(io.activate);
        let again = c.client.next_packet(&mut b.cx()).unwrap();
        assert!(again.has(flags::FIN) && again.seq == 0 && again.payload == 1000);
        assert_eq!(c.client.sender.retransmits, 1);
        let fin_ack = b.deliver(&mut c, Side::Server, &again).replies[0];
        let ack = b.deliver(&mut c, Side::Client, &fin_ack).replies[0];
        let io = b.deliver(&mut c, Side::Server, &ack);
        assert!(io.closed && c.server.state == State::Closed && c.client.state == State::TimeWait);
    }

    #[test]
    fn a_server_that_never_hears_back_gives_up_after_its_retries() {
        let (mut b, mut c) = (Bench::new(), connection(1000));
        let data = open_and_send(&mut b, &mut c);
        b.deliver(&mut c, Side::Server, &data);
        let mut sent = 1;
        loop {
            let io = b.fire(&mut c, TimerKind::PeerRto);
            if c.server.state == State::Closed {
                break;
            }
            sent += io.replies.len();
        }
        assert_eq!(sent as u32, FIN_TRIES, "the first FIN and its retransmissions");
    }
}
