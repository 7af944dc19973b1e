//! TCP: a sender with SACK loss recovery and RFC 6298 timers, a receiver with in-order
//! reassembly, delayed ACK and ECN echo, and the configuration they share.

mod client;
mod connection;
mod receiver;
mod rate_sample;
mod rto;
mod sack;
mod sender;
mod server;
mod stack;
mod tlp;
mod tlt;
mod tso;

pub use client::{Proposal, TcpClient, TimeWait};
pub use connection::{IntStacks, Route, State};
pub use receiver::{AckPlan, Receiver};
pub use rate_sample::{RateSample, RateSampler};
pub use rto::RttEstimator;
pub use sack::RangeSet;
pub use sender::{AckOutcome, Phase, Segment, Sender, TimeoutRecord};
pub use server::{TcpServer, FIN_TRIES};
pub use stack::{PresetValue, Stack, LINUX_BEHAVIOURS, LINUX_PRESET};
pub use tlp::TailLossProbe;
pub use tlt::{TltCounts, TltSender};

use crate::packet::{ETHERNET_OVERHEAD, IPV4_HEADER, TCP_HEADER};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// The `[transport]` table: TCP settings shared by every flow.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// IP MTU in bytes; MSS = MTU - IP - TCP headers (with timestamps).
    pub mtu: u32,
    /// Initial congestion window in segments.
    pub init_cwnd: u32,
    /// Lower bound of the retransmission timeout.
    pub rto_min: Time,
    /// RTO before the first RTT sample (never below `rto_min`).
    pub rto_init: Time,
    /// Upper bound of the backed-off RTO.
    pub rto_max: Time,
    /// Delayed-ACK timeout; absent means every segment is acknowledged at once.
    pub delayed_ack: Option<Time>,
    /// With delayed ACK, acknowledge at least every this many full segments.
    pub delayed_ack_segments: u32,
    /// Open connections with SYN / SYN-ACK (negotiating in band) and close them with FIN in both
    /// directions; otherwise flows start established and are not negotiated.
    pub handshake: bool,
    /// Hosts without the sluice agent (by ordinal): they take no part in negotiation, so their
    /// SYNs propose nothing and their SYN-ACKs answer nothing, and a class whose client talks
    /// to one falls back (`fallback_peer_silent`).
    pub agentless_hosts: Vec<usize>,
    /// How long the closing client waits in TIME_WAIT (RFC 9293's 2 MSL; Linux uses 60 s).
    pub time_wait: Time,
    /// Mark data ECN-capable when the flow's algorithm uses ECN.
    pub ecn: bool,
    /// Bytes of link framing each frame occupies on the wire beyond its IP packet (Ethernet:
    /// header 14, FCS 4, preamble 8, inter-frame gap 12).
    pub framing: u32,
    /// Duplicate ACKs (or segments' worth of SACKed bytes) that signal a loss.
    pub dupthresh: u32,
    /// Tail Loss Probe (RFC 8985): probe a silent tail after two smoothed RTTs.
    pub tlp: bool,
    /// TLT marking at both ends (set from the scenario's `[tlt]` table, not from `[transport]`).
    #[serde(skip)]
    pub tlt: bool,
    /// Whose TCP the hosts run: the published simulators' or Linux's (`stack.rs`).
    pub stack: Stack,
    /// How much window room lets a segment out.
    #[serde(skip_serializing_if = "SendRule::is_room")]
    pub send_rule: SendRule,
    /// Linux's TSO packets on a NIC with segmentation offload (`tso.rs`): new data goes as
    /// `tcp_write_xmit` lets it, sized by `tcp_tso_autosize` and held back by
    /// `tcp_tso_should_defer`. Needs `stack = "linux"`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tso: bool,
}

/// When the window lets a segment out (`transport.send_rule`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SendRule {
    /// Any room under cwnd lets a full segment out: the window counts in whole segments, a
    /// fraction rounded up (the default, on which sluice's reproductions were checked).
    #[default]
    Room,
    /// Only a segment that fits under cwnd goes (RFC 5681 section 3.1, RFC 6675 step C; ns-3's
    /// `TcpSocketBase::SendPendingData` and htsim's TCP): a fraction of a segment is left
    /// unused. A window under one segment still sends one when nothing is in flight.
    Fit,
}

impl SendRule {
    fn is_room(&self) -> bool {
        *self == SendRule::Room
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mtu: 1500,
            init_cwnd: 10,
            rto_min: Time::from_ms(1),
            rto_init: Time::from_ms(1),
            rto_max: Time::from_ms(1000),
            delayed_ack: None,
            delayed_ack_segments: 2,
            handshake: false,
            agentless_hosts: Vec::new(),
            time_wait: Time::from_ms(60_000),
            ecn: true,
            framing: ETHERNET_OVERHEAD,
            dupthresh: 3,
            tlp: false,
            tlt: false,
            stack: Stack::Rfc,
            send_rule: SendRule::Room,
            tso: false,
        }
    }
}

impl TcpConfig {
    /// Payload bytes per full segment.
    pub fn mss(&self) -> u64 {
        (self.mtu - IPV4_HEADER - TCP_HEADER) as u64
    }

    /// Bytes on the wire for a data segment carrying `payload` bytes, with Ethernet framing
    /// (what algorithms assume when they estimate wire rates).
    pub fn wire_bytes(payload: u64) -> u32 {
        payload as u32 + TCP_HEADER + IPV4_HEADER + ETHERNET_OVERHEAD
    }

    /// Bytes on the wire for a segment carrying `payload` bytes, with this stack's framing.
    pub fn frame(&self, payload: u64) -> u32 {
        payload as u32 + TCP_HEADER + IPV4_HEADER + self.framing
    }

    /// Bytes on the wire to move `size` bytes of data in full segments of `mss` payload bytes
    /// (for ideal FCT); options beyond the base headers come out of `mss`, so each segment's
    /// frame is `mss` plus the base headers plus the options, i.e. the MTU's frame.
    pub fn wire_bytes_at(&self, size: u64, mss: u64) -> u64 {
        let segs = size.div_ceil(mss.max(1)).max(1);
        let per_segment = (self.mss() - mss) + self.frame(0) as u64;
        size + segs * per_segment
    }

    /// Checks ranges; errors name the key under `transport.`.
    pub fn validate(&self) -> Result<(), String> {
        if !(576..=65_535).contains(&self.mtu) {
            return Err(format!("transport.mtu: expected 576 to 65535 bytes, got {}", self.mtu));
        }
        if self.init_cwnd == 0 {
            return Err("transport.init_cwnd: expected at least 1 segment".into());
        }
        if self.rto_min == Time::ZERO {
            return Err("transport.rto_min: expected a positive duration like \"1ms\"".into());
        }
        if self.rto_max < self.rto_min {
            return Err(format!("transport.rto_max: expected at least rto_min ({}), got {}", self.rto_min, self.rto_max));
        }
        if self.delayed_ack_segments == 0 {
            return Err("transport.delayed_ack_segments: expected at least 1".into());
        }
        if self.framing > 1_000 {
            return Err(format!("transport.framing: expected at most 1000 bytes of framing per frame, got {}", self.framing));
        }
        if self.dupthresh == 0 {
            return Err("transport.dupthresh: expected at least 1".into());
        }
        Ok(())
    }
}
