//! The Ultra Ethernet transport (UET), as the UEC's reference simulator (uet-htsim, `uec.cpp`)
//! models it: the NIC sends each packet on an entropy value (EV) its path policy chooses
//! (`paths.rs`), the receiver accepts packets in any order and acknowledges them with a
//! cumulative PSN and a 64-bit SACK bitmap, a trimmed packet comes back as a NACK and is resent
//! at once, and one retransmission timer per connection resends the earliest packet sent.
//!
//! - **Packets and bytes.** A packet carries up to `mtu - 64` bytes of payload behind a 64-byte
//!   UET header; windows, in-flight bytes and NACKed sizes count the header, not the Ethernet
//!   framing (`framing`) that the wire adds.
//! - **PSNs.** Each data packet has a packet sequence number, its index in the flow; a
//!   retransmission keeps it. The receiver delivers bytes in order by their offsets.
//! - **Acknowledgements.** The first packet, every `sack_threshold` bytes, every CE-marked,
//!   ack-requested or duplicate packet is acknowledged at once; there is no delayed-ACK timer.
//!   The sender takes its in-flight bytes down by the receiver's count of bytes received.
//! - **Congestion control** is a registered algorithm that runs on UET (`nscc`, `rccc`,
//!   `constant`): it sets the window, and may ask for receiver credit (RCCC), which the
//!   receiver's host paces out in PULLs (`host/pull.rs`); the transport sends while the window
//!   holds the next packet and, under credit, some credit is left.
//!
//! On `Packet`, a UET packet is carried in the fields `wire.rs` names.

pub mod paths;
mod receiver;
mod sack;
mod sender;
pub mod wire;

pub use receiver::{UetReceiver, PULL_QUANTA};
pub use sender::UetSender;

use crate::auto::Auto;
use crate::cc::CongestionControl;
use crate::net::fabric::{longest_one_way, Fabric};
use crate::net::topology::Graph;
use crate::net::qdisc::Trim;
use crate::time::{Bytes, Rate, Time};
use crate::transport::tcp::Route;
use paths::PathPolicy;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// The UET header every packet carries, data or control (`_hdr_size`, `uec.cpp:28`).
pub const HEADER: u32 = 64;
/// Bytes of an ACK or NACK before framing (`ACKSIZE`, `uecpacket.h:30`).
pub const ACK_BYTES: u32 = 64;
/// Most PSNs a sender has outstanding: the receiver's bitmap holds no more
/// (`uecMaxInFlightPkts`, `uec.h:25`).
pub const MAX_OUTSTANDING: u64 = 1 << 14;

/// What a lost packet's timeout tells the path policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutFeedback {
    /// The reference's choice: the EV is not known, and EV 0 is penalised (`UNKNOWN_EV`).
    #[default]
    Unknown,
    /// The lost packet's own EV is penalised.
    Packet,
}

/// `[uet]`: the Ultra Ethernet transport's settings, for every UET class.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UetConfig {
    /// Packet bytes with the 64-byte UET header, before framing.
    pub mtu: u32,
    /// Ethernet framing each packet adds on the wire (preamble, header, FCS, gap).
    pub framing: u32,
    /// The receiver acknowledges at least every this many bytes received.
    pub sack_threshold: Bytes,
    /// How the sender picks each packet's entropy value: "oblivious", "bitmap", "reps",
    /// "reps_legacy" or "mixed".
    pub load_balancing_algo: String,
    /// Entropy values a flow spreads over (a power of two).
    pub paths: u32,
    /// The retransmission timeout; "auto": 15 µs plus six queues of `Q` bytes at line rate.
    pub rto: Auto<Time>,
    /// The longest unloaded round trip the algorithms scale by; "auto" measures the fabric.
    pub network_rtt: Auto<Time>,
    /// The algorithm starts at its flow's own unloaded RTT instead of the network's longest.
    pub accurate_base_rtt: bool,
    /// Which EV a timeout penalises.
    pub timeout_feedback: TimeoutFeedback,
}

impl Default for UetConfig {
    fn default() -> Self {
        UetConfig {
            mtu: 4150,
            framing: crate::packet::ETHERNET_OVERHEAD,
            sack_threshold: Bytes(16_384),
            load_balancing_algo: "mixed".into(),
            paths: 64,
            rto: Auto::Auto,
            network_rtt: Auto::Auto,
            accurate_base_rtt: false,
            timeout_feedback: TimeoutFeedback::Unknown,
        }
    }
}

impl UetConfig {
    /// Whether every setting is the default (the run's echo then leaves `[uet]` out).
    pub fn is_default(&self) -> bool {
        *self == UetConfig::default()
    }

    /// Payload bytes per packet.
    pub fn mss(&self) -> u64 {
        (self.mtu - HEADER) as u64
    }

    /// Wire bytes of a data packet carrying `payload` bytes.
    pub fn frame(&self, payload: u64) -> u32 {
        payload as u32 + HEADER + self.framing
    }

    /// Wire bytes of an ACK or NACK.
    pub fn ack_frame(&self) -> u32 {
        ACK_BYTES + self.framing
    }

    /// Wire bytes of a flow of `size` bytes: its payload, and a header and framing a packet.
    pub fn wire_bytes(&self, size: u64) -> u64 {
        size + size.div_ceil(self.mss()).max(1) * (HEADER + self.framing) as u64
    }

    /// Checks each setting, naming its key.
    pub fn validate(&self) -> Result<(), String> {
        if !(256..=9_216).contains(&self.mtu) {
            return Err(format!("uet.mtu: expected 256 to 9216 bytes per packet, the 64-byte UET header included, got {}", self.mtu));
        }
        if self.framing > 1_000 {
            return Err(format!("uet.framing: expected at most 1000 bytes of framing per packet, got {}", self.framing));
        }
        if !(1..=1_000_000).contains(&self.sack_threshold.0) {
            return Err(format!("uet.sack_threshold: expected 1B to 1MB, got {}", self.sack_threshold));
        }
        if !paths::POLICIES.contains(&self.load_balancing_algo.as_str()) {
            return Err(format!(
                "uet.load_balancing_algo: expected \"oblivious\", \"bitmap\", \"reps\", \"reps_legacy\" or \"mixed\", got \"{}\"{}",
                self.load_balancing_algo,
                crate::words::did_you_mean(&self.load_balancing_algo, paths::POLICIES.iter().copied())
            ));
        }
        if !(self.paths.is_power_of_two() && self.paths <= 1 << 15) {
            return Err(format!("uet.paths: expected a power of two from 1 to 32768 entropy values, got {}", self.paths));
        }
        for (key, v) in [("rto", self.rto), ("network_rtt", self.network_rtt)] {
            if v == Auto::Set(Time::ZERO) {
                return Err(format!("uet.{key}: expected \"auto\" or a positive duration like \"100us\""));
            }
        }
        Ok(())
    }
}

/// What every UET flow of a run shares, measured on the fabric once it is built.
#[derive(Clone, Copy, Debug)]
pub struct UetNetwork {
    /// The longest unloaded round trip: one MTU out and one ACK back on the longest path.
    pub network_rtt: Time,
    /// Some switch port trims.
    pub trimming: bool,
    /// The queue the retransmission timeout allows for, in bytes (`Q`).
    pub queue_bytes: u64,
    /// How much more the hosts can send than the fabric's core carries.
    pub oversubscription: f64,
}

/// How long a sender's timers wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// The retransmission timeout.
    pub rto: Time,
    /// The least time between two RTSs: the network RTT.
    pub rts_gap: Time,
}

/// A connection's two ends.
pub struct Connection {
    /// The sending end (the reference's `UecSrc`).
    pub sender: UetSender,
    /// The receiving end (`UecSink`).
    pub receiver: UetReceiver,
}

/// One flow's connection: `size` bytes (`None`: endless) on `route`, under `cc` (whose
/// receiver credit, if it asks for it, both ends run), with `timers`, and whose EVs `paths`
/// picks from `rng`.
pub fn connection(
    cfg: &UetConfig,
    route: Route,
    size: Option<u64>,
    cc: Box<dyn CongestionControl>,
    timers: Timers,
    paths: PathPolicy,
    rng: Xoshiro256PlusPlus,
) -> Connection {
    let credit = cc.receiver_credit();
    Connection {
        sender: UetSender::new(cfg, route, size, cc, timers, paths, rng),
        receiver: UetReceiver::new(cfg, route, credit),
    }
}

impl UetNetwork {
    /// What `fabric`, built from `graph`, gives every UET flow under `cfg`.
    pub fn measure(graph: &Graph, fabric: &Fabric, cfg: &UetConfig) -> UetNetwork {
        let trims: Vec<&Trim> = fabric.ports.iter().filter(|p| fabric.is_switch(p.node)).filter_map(|p| p.discipline.trim.as_ref()).collect();
        // The reference's `calculate_rtt`: one full packet out and one ACK back on the longest path.
        let measured = longest_one_way(fabric, cfg.frame(cfg.mss()) as u64) + longest_one_way(fabric, cfg.ack_frame() as u64);
        let network_rtt = cfg.network_rtt.or(measured);
        let rate = fabric.host_ports.iter().map(|p| fabric.ports[p.index()].built_rate).max().unwrap_or(Rate::gbps(100));
        // Where switches trim, a queue holds up to its trimming threshold; otherwise the
        // reference's default queue, five BDPs of whole packets (`main_uec.cpp:41`).
        let mtu = cfg.mtu as u64;
        let queue_bytes = match trims.iter().filter_map(|t| t.threshold).max() {
            Some(q) => q,
            None => 5 * rate.bytes_in(network_rtt).div_ceil(mtu) * mtu,
        };
        UetNetwork { network_rtt, trimming: !trims.is_empty(), queue_bytes, oversubscription: graph.oversubscription() }
    }

    /// A flow's retransmission timeout at its host's `rate`: `uet.rto`, or 15 µs and six
    /// queues' worth of bytes ("two priority queues, three hops for incast", `main_uec.cpp:695`).
    pub fn rto(&self, cfg: &UetConfig, rate: Rate) -> Time {
        cfg.rto.or(Time::from_us(15) + rate.tx_time(6 * self.queue_bytes))
    }

    /// A flow's timers at its host's `rate`: the RTO, and RTSs a network RTT apart.
    pub fn timers(&self, cfg: &UetConfig, rate: Rate) -> Timers {
        Timers { rto: self.rto(cfg, rate), rts_gap: self.network_rtt }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{FlowContext, UetFlow};
    use crate::context::{stream, Bench, Event, UetCounters};
    use crate::packet::fabric;
    use crate::transport::Io;
    use rand::{Rng, SeedableRng};

    /// A connection of `size` bytes under NSCC at 100 Gb/s.
    fn nscc_connection(size: u64, policy: &str) -> Connection {
        let net = UetFlow { network_rtt: Time::from_us(14), trimming: true, mtu: 4150, oversubscription: 1.0 };
        let ctx = FlowContext { mss: 4086, init_cwnd: 0, link_rate: Rate::gbps(100), base_rtt: net.network_rtt, size: Some(size), deadline: None, uet: Some(net), stack: crate::transport::tcp::Stack::Rfc };
        let cc = crate::cc::factory("nscc", &toml::Table::new()).unwrap()(&ctx);
        let mut rng = stream(11, 5);
        let paths = PathPolicy::new(policy, 64, &mut rng).unwrap();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        let timers = Timers { rto: Time::from_us(100), rts_gap: net.network_rtt };
        connection(&UetConfig::default(), route, Some(size), cc, timers, paths, rng)
    }

    /// Runs `c` through a channel that trims `trim` of the data packets, loses `lose` of every
    /// packet (data, ACKs and NACKs) and reverses adjacent pairs with odds `reorder`; returns
    /// the bytes delivered, checked to come in order exactly once, and what the ends counted.
    fn run(c: &mut Connection, trim: f64, lose: f64, reorder: f64, seed: u64) -> (u64, UetCounters) {
        let mut b = Bench::new();
        let mut chan = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut delivered = 0;
        for _ in 0..1_000_000 {
            let mut sent = Vec::new();
            while let Some(p) = c.sender.next_packet(&mut b.cx()) {
                sent.push(p);
                b.now += Time(332_000);
            }
            if sent.is_empty() {
                let Some((t, ev)) = b.q.pop() else { break };
                b.now = b.now.max(t);
                if let Event::Timer(_, kind, gen) = ev {
                    c.sender.on_timer(kind, gen, &mut Io::default(), &mut b.cx());
                }
                continue;
            }
            for i in 1..sent.len() {
                if chan.gen_bool(reorder) {
                    sent.swap(i - 1, i);
                }
            }
            b.now += Time::from_us(5);
            let mut replies = Vec::new();
            for mut p in sent {
                if chan.gen_bool(lose) {
                    continue;
                }
                if chan.gen_bool(trim) {
                    p.fabric = fabric::TRIMMED | (p.ttl << 1);
                }
                let mut io = Io::default();
                c.receiver.on_packet(&p, &mut io, &mut b.cx());
                if let Some((start, n)) = io.delivered {
                    assert_eq!(start, delivered, "bytes come in order, once");
                    delivered += n;
                }
                replies.extend(io.replies);
            }
            b.now += Time::from_us(5);
            for a in replies.into_iter().filter(|_| !chan.gen_bool(lose)) {
                let mut io = Io::default();
                c.sender.on_packet(&a, &mut io, &mut b.cx());
                if io.closed {
                    return (delivered, b.counters.uet);
                }
            }
        }
        (delivered, b.counters.uet)
    }

    #[test]
    fn every_byte_arrives_once_in_order_through_trims_losses_and_reordering() {
        for (seed, policy) in [(1, "mixed"), (2, "oblivious"), (3, "bitmap"), (4, "reps"), (5, "reps_legacy")] {
            let mut c = nscc_connection(2_000_000, policy);
            let (delivered, n) = run(&mut c, 0.10, 0.02, 0.2, seed);
            assert_eq!(delivered, 2_000_000, "{policy}");
            assert_eq!(c.receiver.rcv_nxt, 2_000_000);
            assert_eq!(n.new, 490);
            // Each NACK the sender took queued a packet, and each queued packet was resent.
            assert!(n.headers_nacked > 20 && n.rtx >= n.nacks - n.nacks_ignored, "{policy}: {n:?}");
            assert!(!c.sender.timeouts.is_empty(), "{policy}: lost tails need the timer");
        }
    }

    #[test]
    fn a_clean_channel_sends_each_packet_once_with_no_timer() {
        let mut c = nscc_connection(2_000_000, "mixed");
        let (delivered, n) = run(&mut c, 0.0, 0.0, 0.0, 9);
        assert_eq!(delivered, 2_000_000);
        assert_eq!((n.new, n.rtx, n.spurious), (490, 0, 0));
        assert!(c.sender.timeouts.is_empty());
    }

    #[test]
    fn bad_settings_are_refused_by_key() {
        let err = |f: fn(&mut UetConfig)| {
            let mut c = UetConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(err(|c| c.paths = 100), "uet.paths: expected a power of two from 1 to 32768 entropy values, got 100");
        assert_eq!(
            err(|c| c.load_balancing_algo = "rep".into()),
            "uet.load_balancing_algo: expected \"oblivious\", \"bitmap\", \"reps\", \"reps_legacy\" or \"mixed\", got \"rep\"; did you mean `reps`?"
        );
        assert!(err(|c| c.mtu = 100).starts_with("uet.mtu: expected 256 to 9216"));
        assert!(err(|c| c.rto = Auto::Set(Time::ZERO)).starts_with("uet.rto: "));
        assert_eq!(UetConfig::default().wire_bytes(2_000_000), 2_000_000 + 490 * (64 + 38));
    }

    #[test]
    fn ev_choices_are_the_flows_own() {
        let evs = |seed: u64| {
            let mut rng = stream(seed, 5);
            let mut p = PathPolicy::new("oblivious", 64, &mut rng).unwrap();
            (0..64).map(|i| p.next(i, 10, &mut rng)).collect::<Vec<u16>>()
        };
        assert_eq!(evs(3), evs(3));
        assert_ne!(evs(3), evs(4));
    }
}
