//! The congestion-control platform: the algorithm trait, the signals it sees, and the registry of
//! named algorithms with typed, validated parameters.

pub use crate::packet::hpcc_int::{HopRecord, HopStack};
pub use crate::packet::tcp_int::IntReading;
use crate::time::{Rate, Time};
use crate::transport::tcp::Stack;
use std::sync::Arc;

mod bbr;
mod constant;
mod cubic;
mod dcqcn;
mod d2tcp;
mod dctcp;
mod dctcp_rate;
mod ecn_int;
mod hpcc;
mod hptcp;
mod hystart;
mod example_aimd;
pub mod negotiation;
mod newreno;
mod nscc;
mod oversubscribed;
pub mod portable;
pub mod presets;
mod rccc;
mod swift;
mod timely;

pub use bbr::Bbr;
pub use cubic::Cubic;
pub use dctcp::Dctcp;
pub use ecn_int::EcnInt;
pub use hpcc::Hpcc;
pub use hptcp::Hptcp;
pub use example_aimd::ExampleAimd;
pub use newreno::NewReno;
pub use nscc::Nscc;
pub use oversubscribed::{OversubscribedCc, OversubscribedParams, Received};
pub use swift::Swift;

/// Everything one ACK tells the sender, gathered by the transport's signal block.
#[derive(Clone, Debug, Default)]
pub struct AckSignals {
    /// When the ACK arrived.
    pub now: Time,
    /// Bytes newly acknowledged by this ACK (cumulative advance plus newly SACKed bytes).
    pub acked_bytes: u64,
    /// Of `acked_bytes`, those the receiver reported as CE-marked (per-packet ECN echo).
    pub ce_bytes: u64,
    /// The ACK carried ECE.
    pub ece: bool,
    /// RTT sample from this ACK, if it acknowledged a segment with a usable timestamp.
    pub rtt: Option<Time>,
    /// Smallest RTT seen on the flow.
    pub min_rtt: Time,
    /// Smoothed RTT (RFC 6298).
    pub srtt: Time,
    /// Bytes in flight after processing this ACK.
    pub in_flight: u64,
    /// Highest cumulatively acknowledged sequence number (bytes) after this ACK.
    pub snd_una: u64,
    /// Next sequence number the sender will send new data from.
    pub snd_nxt: u64,
    /// The sender is in fast recovery or RTO recovery.
    pub in_recovery: bool,
    /// Switch hops the acknowledged data crossed (from its IP TTL), if known.
    pub path_hops: Option<u8>,
    /// The TCP-INT echo this ACK carried, decoded; `None` when the peer or path gave none.
    pub int: Option<IntEcho>,
    /// HPCC's per-hop INT records the receiver echoed (the data packet's path, first switch
    /// first); `None` when the flow carries no HPCC INT or the ACK echoed no stack.
    pub hops: Option<HopStack>,
    /// Bytes delivered (cumulatively acked or SACKed) over the flow's life, after this ACK.
    pub delivered: u64,
    /// Delivery rate of payload bytes measured by this ACK (Linux `tcp_rate.c`); `None` when
    /// the ACK delivered nothing or its interval was too short to trust.
    pub delivery_rate: Option<Rate>,
    /// `delivered` when the most recently sent segment this ACK delivered was sent; a round
    /// trip has passed once it reaches the `delivered` recorded at the round's start.
    pub prior_delivered: u64,
    /// The rate sample came from data sent while the flow had nothing more to send, so it may
    /// understate what the path carries.
    pub is_app_limited: bool,
    /// The ACK answers a probe with no data (UET's RTS): its round trip is a delay sample, but
    /// not one the flow's base RTT may fall to.
    pub probe: bool,
}

/// A decoded TCP-INT echo: what the path's most congested hop reported, and the path latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntEcho {
    /// The bottleneck hop's utilization or queue depth.
    pub reading: IntReading,
    /// Summed queueing and processing latency over the INT-capable hops.
    pub path_latency: Time,
    /// IP TTL at the hop that reported `reading` (0 when no hop raised INTval).
    pub hop_id: u8,
}

/// The sender's window state that algorithms read and write.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Slow-start threshold in bytes.
    pub ssthresh: u64,
    /// Pacing rate the NIC's pacer enforces; `None` sends as the window allows.
    pub pacing_rate: Option<Rate>,
    /// Maximum segment size (payload bytes per packet).
    pub mss: u64,
}

impl Window {
    /// The smallest window a sender keeps (RFC 5681: one segment after a timeout, two otherwise).
    pub fn min_cwnd(&self) -> u64 {
        2 * self.mss
    }
}

/// A congestion signal that is not a plain ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionEvent {
    /// Loss detected by duplicate ACKs or SACK; the sender enters fast recovery.
    FastRetransmit,
    /// The retransmission timer expired.
    Timeout,
    /// A congestion notification: a classic ECN echo (ECE), reacted to at most once per window
    /// on TCP, or an RDMA CNP, passed on as it arrives.
    Ecn,
}

/// How the algorithm wants ECN to be handled by the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnMode {
    /// Packets are not ECN-capable.
    Off,
    /// RFC 3168: ECE until CWR; the transport calls `on_congestion(Ecn)` once per window.
    Classic,
    /// DCTCP-style: the receiver echoes each packet's CE mark; `ce_bytes` carries the count.
    PerPacket,
}

/// What an algorithm knows about its flow when it is created.
#[derive(Clone, Copy, Debug)]
pub struct FlowContext {
    /// Maximum segment size in bytes.
    pub mss: u64,
    /// Initial window in bytes.
    pub init_cwnd: u64,
    /// The sender's host link rate.
    pub link_rate: Rate,
    /// Round-trip propagation plus serialization delay of the flow's path with no queueing.
    pub base_rtt: Time,
    /// Bytes the flow carries; `None` for an endless one.
    pub size: Option<u64>,
    /// When the flow should have completed (its start plus the application's deadline).
    pub deadline: Option<Time>,
    /// What a UET flow knows of its network; `None` on TCP and RDMA.
    pub uet: Option<UetFlow>,
    /// The host TCP stack the flow's algorithm runs in (`transport.stack`).
    pub stack: Stack,
}

/// The network facts UET's algorithms are scaled by, the same for every flow of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UetFlow {
    /// The longest unloaded round trip in the fabric: one MTU out, one ACK back.
    pub network_rtt: Time,
    /// Some switch port trims packets instead of dropping them.
    pub trimming: bool,
    /// Packet bytes, the UET header included.
    pub mtu: u64,
    /// How much more the hosts under a ToR can send than its uplinks carry (1: not at all).
    pub oversubscription: f64,
}

/// Why a packet is lost, as a transport that tells packets apart reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossCause {
    /// A switch trimmed it and the receiver sent back a NACK.
    Trimmed,
    /// Its retransmission timer expired.
    Timeout,
}

/// One lost packet: what a UET sender hands its algorithm on a NACK or a timeout.
#[derive(Clone, Copy, Debug)]
pub struct LossSignals {
    /// When the loss was learned.
    pub now: Time,
    /// How it was learned.
    pub cause: LossCause,
    /// The lost packet's bytes, its header included.
    pub bytes: u64,
    /// The NACK's round trip, from the lost packet's send; `None` for a timeout.
    pub rtt: Option<Time>,
    /// The packet was trimmed at the last switch before its receiver.
    pub last_hop: bool,
    /// The trimmed packet had been CE-marked.
    pub ece: bool,
    /// Bytes in flight before the loss is taken out.
    pub in_flight: u64,
}

/// A UET flow whose receiver grants it credit (RCCC): the sender sends only while it holds
/// some, and the receiver's host paces the credit out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverCredit {
    /// Bytes of credit the sender starts with and never holds more of: the speculative window
    /// (`_configured_maxwnd`).
    pub cap: u64,
    /// The algorithm's window also limits sending (NSCC and RCCC together); otherwise credit
    /// alone does.
    pub windowed: bool,
    /// The receiving host scales its credit rate by what the fabric's core tells
    /// (`cc/oversubscribed.rs`), with these constants.
    pub oversubscribed: Option<OversubscribedParams>,
}

/// The transports an algorithm runs on, as a set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transports(u8);

impl Transports {
    /// TCP, on the simulator's stack and in the kernel.
    pub const TCP: Transports = Transports(1);
    /// RDMA queue pairs (RoCE).
    pub const RDMA: Transports = Transports(2);
    /// The Ultra Ethernet transport.
    pub const UET: Transports = Transports(4);
    /// TCP and RDMA: the window- and rate-based algorithms that read ACKs and CNPs.
    pub const TCP_RDMA: Transports = Transports(1 | 2);

    /// Whether `t` is in the set.
    pub fn has(self, t: Transports) -> bool {
        self.0 & t.0 == t.0
    }
}

/// One congestion-control algorithm instance, owning the state of one flow.
pub trait CongestionControl: Send {
    /// The registry name of the algorithm.
    fn name(&self) -> &'static str;
    /// How ECN must be handled for this flow.
    fn ecn_mode(&self) -> EcnMode {
        EcnMode::Off
    }
    /// Whether the algorithm consumes TCP-INT echoes (the flow then negotiates the option).
    fn needs_int(&self) -> bool {
        false
    }
    /// Whether the algorithm reads the delivery-rate fields of `AckSignals` (`delivered`,
    /// `delivery_rate`, `prior_delivered`, `is_app_limited`); only then does the sender run the
    /// per-segment delivery-rate estimator.
    fn needs_delivery_rate(&self) -> bool {
        false
    }
    /// Whether the algorithm consumes HPCC per-hop INT records (the flow then negotiates them:
    /// both stacks and every switch on the path must support INT).
    fn needs_hop_records(&self) -> bool {
        false
    }
    /// Called once when the flow's sender is created, to start from a window or pacing rate other
    /// than the transport's initial window (HPCC starts at line rate).
    fn init(&mut self, _win: &mut Window) {}
    /// Called on every ACK that acknowledges new data or carries signals.
    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window);
    /// Called on loss detection, RTO, or a classic ECN echo.
    fn on_congestion(&mut self, ev: CongestionEvent, now: Time, win: &mut Window);
    /// Called by a transport that reports each lost packet (UET: a trim's NACK or a timeout);
    /// by default a trim is a fast retransmit and a timeout a timeout.
    fn on_loss(&mut self, loss: &LossSignals, win: &mut Window) {
        let ev = match loss.cause {
            LossCause::Trimmed => CongestionEvent::FastRetransmit,
            LossCause::Timeout => CongestionEvent::Timeout,
        };
        self.on_congestion(ev, loss.now, win)
    }
    /// Where the algorithm runs with UET's receiver credit (RCCC), how much the sender may hold.
    fn receiver_credit(&self) -> Option<ReceiverCredit> {
        None
    }
    /// Called at the interval the algorithm asked for with `tick_interval`.
    fn on_tick(&mut self, _now: Time, _win: &mut Window) {}
    /// A timer period for `on_tick`, if the algorithm needs one.
    fn tick_interval(&self) -> Option<Time> {
        None
    }
    /// The algorithm's state variables by name (DCTCP's alpha, HPCC's U and W_c, BBR's mode
    /// and bandwidth estimate...), sampled into `cwnd.csv` so a run can be checked against the
    /// algorithm's paper.
    fn state(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Takes new parameters mid-flow, its state carrying on (the open CC draft's 7.2: parameters
    /// changed after setup). Only the portable algorithms can, as in the kernel.
    fn set_params(&mut self, _params: &toml::Table) -> Result<(), String> {
        Err(format!("{}'s parameters are fixed once a flow starts; the portable algorithms (newreno, dctcp, ecn_int, retcp) take changes", self.name()))
    }
}

/// A class's parameters changed at a time (`[[events]]`): flows of the class running its
/// algorithm take `params` at their first ACK at or after `at`, and flows that start later are
/// built with them.
#[derive(Clone)]
pub struct ParamChange {
    /// When the change happens.
    pub at: Time,
    /// The class's whole parameter table from then on.
    pub params: toml::Table,
    /// Builds the algorithm with those parameters.
    pub factory: CcFactory,
}

/// Builds one algorithm instance per flow with parameters validated once.
pub type CcFactory = Arc<dyn Fn(&FlowContext) -> Box<dyn CongestionControl> + Send + Sync>;

/// A registered algorithm: its name, aliases, what it is, and its parameters.
pub struct AlgorithmInfo {
    /// The stable registry name.
    pub name: &'static str,
    /// Other accepted names.
    pub aliases: &'static [&'static str],
    /// One line on what it is.
    pub summary: &'static str,
    /// Parameters with their defaults, as `name = default  # meaning` lines.
    pub params: &'static [(&'static str, &'static str)],
    /// The transports it runs on.
    pub transports: Transports,
    build: fn(&toml::Table) -> Result<CcFactory, String>,
}

/// Every algorithm sluice knows, in the order `sluice list` shows them.
pub static REGISTRY: &[AlgorithmInfo] = &[
    AlgorithmInfo {
        name: "newreno",
        aliases: &["reno"],
        summary: "NewReno (RFC 5681/6582): slow start, AIMD, halving on loss (portable: also runs in the kernel)",
        params: portable::NEWRENO_PARAMS,
        transports: Transports::TCP_RDMA,
        build: portable::newreno_factory,
    },
    AlgorithmInfo {
        name: "cubic",
        aliases: &[],
        summary: "CUBIC (RFC 9438): cubic window growth with a Reno-friendly region, beta 0.7",
        params: cubic::PARAMS,
        transports: Transports::TCP_RDMA,
        build: cubic::factory,
    },
    AlgorithmInfo {
        name: "dctcp",
        aliases: &[],
        summary: "DCTCP (RFC 8257): per-packet ECN echo, alpha-scaled decrease once per window (portable)",
        params: portable::DCTCP_PARAMS,
        transports: Transports::TCP_RDMA,
        build: portable::dctcp_factory,
    },
    AlgorithmInfo {
        name: "ecn_int",
        aliases: &[],
        summary: "ECN+INT: DCTCP whose alpha is at least the TCP-INT-echoed queue depth over a target (portable)",
        params: portable::ECN_INT_PARAMS,
        transports: Transports::TCP_RDMA,
        build: portable::ecn_int_factory,
    },
    AlgorithmInfo {
        name: "retcp",
        aliases: &[],
        summary: "reTCP: Reno whose window is multiplied by alpha when the circuit signal (ECE) turns on, divided when it turns off (portable)",
        params: portable::RETCP_PARAMS,
        transports: Transports::TCP_RDMA,
        build: portable::retcp_factory,
    },
    AlgorithmInfo {
        name: "hptcp",
        aliases: &[],
        summary: "HPTCP: HPCC's window control on TCP, driven by the aggregated TCP-INT value; paced",
        params: hptcp::PARAMS,
        transports: Transports::TCP_RDMA,
        build: hptcp::factory,
    },
    AlgorithmInfo {
        name: "hpcc",
        aliases: &[],
        summary: "HPCC (SIGCOMM 2019): per-hop INT records, window from the most loaded hop's inflight; paced",
        params: hpcc::PARAMS,
        transports: Transports::TCP_RDMA,
        build: hpcc::factory,
    },
    AlgorithmInfo {
        name: "bbr",
        aliases: &[],
        summary: "BBR v1 (Linux tcp_bbr.c): paced at a max-filtered delivery rate, window 2 BDP",
        params: bbr::PARAMS,
        transports: Transports::TCP_RDMA,
        build: bbr::factory,
    },
    AlgorithmInfo {
        name: "swift",
        aliases: &[],
        summary: "Swift (SIGCOMM 2020): delay AIMD against a hop- and flow-scaled target delay",
        params: swift::PARAMS,
        transports: Transports::TCP_RDMA,
        build: swift::factory,
    },
    AlgorithmInfo {
        name: "dcqcn",
        aliases: &[],
        summary: "DCQCN (SIGCOMM 2015): rate cut by alpha/2 on CNPs, fast recovery, additive and hyper increase (RDMA)",
        params: dcqcn::PARAMS,
        transports: Transports::TCP_RDMA,
        build: dcqcn::factory,
    },
    AlgorithmInfo {
        name: "timely",
        aliases: &[],
        summary: "TIMELY (SIGCOMM 2015): rate from the RTT gradient between T_low and T_high (RDMA)",
        params: timely::PARAMS,
        transports: Transports::TCP_RDMA,
        build: timely::factory,
    },
    AlgorithmInfo {
        name: "dctcp_rate",
        aliases: &[],
        summary: "DCTCP on a rate-based NIC (the HPCC simulator's hardware DCTCP): rate cut by alpha/2 (RDMA)",
        params: dctcp_rate::PARAMS,
        transports: Transports::TCP_RDMA,
        build: dctcp_rate::factory,
    },
    AlgorithmInfo {
        name: "newreno_ref",
        aliases: &[],
        summary: "the Rust NewReno the portable one replaced, kept as a reference",
        params: newreno::PARAMS,
        transports: Transports::TCP_RDMA,
        build: newreno::factory,
    },
    AlgorithmInfo {
        name: "d2tcp",
        aliases: &[],
        summary: "D2TCP (SIGCOMM 2012): DCTCP whose cut alpha^d / 2 weighs the deadline's imminence d (0.5-2); d = 1 without a deadline",
        params: d2tcp::PARAMS,
        transports: Transports::TCP_RDMA,
        build: d2tcp::factory,
    },
    AlgorithmInfo {
        name: "dctcp_ref",
        aliases: &[],
        summary: "the floating-point Rust DCTCP the portable one replaced, kept as a reference",
        params: dctcp::PARAMS,
        transports: Transports::TCP_RDMA,
        build: dctcp::factory,
    },
    AlgorithmInfo {
        name: "ecn_int_ref",
        aliases: &[],
        summary: "the floating-point Rust ECN+INT the portable one replaced, kept as a reference",
        params: ecn_int::PARAMS,
        transports: Transports::TCP_RDMA,
        build: ecn_int::factory,
    },
    AlgorithmInfo {
        name: "example_aimd",
        aliases: &[],
        summary: "the worked example of docs/writing-a-cc.md: AIMD without slow start",
        params: example_aimd::PARAMS,
        transports: Transports::TCP_RDMA,
        build: example_aimd::factory,
    },
    AlgorithmInfo {
        name: "nscc",
        aliases: &[],
        summary: "NSCC (Ultra Ethernet): window from queueing delay against a target and ECN, quick adapt, cut by each trimmed packet (UET)",
        params: nscc::PARAMS,
        transports: Transports::UET,
        build: nscc::factory,
    },
    AlgorithmInfo {
        name: "rccc",
        aliases: &[],
        summary: "RCCC (Ultra Ethernet): the receiver's host paces credit at line rate; the sender sends on credit alone (UET)",
        params: rccc::PARAMS,
        transports: Transports::UET,
        build: rccc::factory,
    },
    AlgorithmInfo {
        name: "constant",
        aliases: &[],
        summary: "a window that never moves, to test UET's delivery alone (UET)",
        params: constant::PARAMS,
        transports: Transports::UET,
        build: constant::factory,
    },
];

/// Finds an algorithm by name or alias.
pub fn lookup(name: &str) -> Option<&'static AlgorithmInfo> {
    REGISTRY.iter().find(|a| a.name == name || a.aliases.contains(&name))
}

/// The names a user may write, for error messages.
pub fn known_names() -> String {
    REGISTRY.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

/// Why `name` names no algorithm: the names there are, and the one it most likely meant.
pub fn unknown(name: &str) -> String {
    let names = REGISTRY.iter().flat_map(|a| std::iter::once(a.name).chain(a.aliases.iter().copied()));
    format!("unknown congestion control \"{name}\"; expected one of: {}{}", known_names(), crate::words::did_you_mean(name, names))
}

/// Why `name` names no algorithm a Linux host runs: the portable ones and the kernel's own that
/// the registry models (a host's checks then say which of those its kernel has).
pub fn unknown_on_host(name: &str) -> String {
    let names = portable::PORTABLE.iter().chain(&portable::KERNEL_BUILT_IN).copied();
    format!("unknown congestion control \"{name}\"; a host runs one of: {}{}", names.clone().collect::<Vec<_>>().join(", "), crate::words::did_you_mean(name, names))
}

/// Validates `params` for algorithm `name` and returns a per-flow constructor.
pub fn factory(name: &str, params: &toml::Table) -> Result<CcFactory, String> {
    let info = lookup(name).ok_or_else(|| unknown(name))?;
    (info.build)(params)
}

/// Deserializes an algorithm's parameter table, naming the offending key on error.
pub(crate) fn parse_params<T: serde::de::DeserializeOwned>(params: &toml::Table) -> Result<T, String> {
    let v = toml::Value::Table(params.clone());
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let msg = crate::words::in_words(e.inner().message().trim());
        if path == "." || path.is_empty() {
            msg
        } else {
            format!("{path}: {msg}")
        }
    })
}
