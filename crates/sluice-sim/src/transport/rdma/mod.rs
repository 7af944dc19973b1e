//! RDMA: a RoCEv2-style reliable-connected queue pair driven by the NIC, as the second transport
//! beside TCP. Messages are cut into MTU packets with sequence numbers, paced by a per-QP rate
//! limiter at the rate the congestion controller sets, acknowledged per packet (or every N), and
//! repaired by go-back-N (the commodity default) or IRN's selective repeat. Receivers answer
//! CE-marked packets with congestion notification packets (CNPs), at most one per interval.
//!
//! The algorithms are the same registry the TCP sender uses: a CNP reaches the algorithm as a
//! congestion event (`CongestionEvent::Ecn`), an ACK as the usual signal block, so `hpcc` is one
//! implementation on both transports.

mod qp;

pub use qp::{QueuePair, Requester, Responder};

use crate::packet::{ETHERNET_OVERHEAD, IPV4_HEADER};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// UDP 8 + InfiniBand base transport header 12 + invariant CRC 4: what RoCEv2 adds to a packet
/// beyond its IP header.
pub const ROCE_HEADER: u32 = 8 + 12 + 4;
/// The ACK extended transport header (syndrome and MSN) every ACK, NACK and CNP carries.
pub const AETH: u32 = 4;

/// Loss recovery of a queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recovery {
    /// Go-back-N: the receiver drops out-of-order packets and NACKs the one it expects; the
    /// sender resends everything from there (what commodity RoCE NICs do).
    Gbn,
    /// IRN (Mittal et al., SIGCOMM 2018): the receiver keeps out-of-order packets and NACKs with
    /// the cumulative ACK and the packet that arrived; the sender resends only the holes, with a
    /// low timeout when few packets are in flight and in-flight packets capped at one BDP.
    Irn,
    /// Selective repeat as IRN's, without its BDP cap and with a single timeout (`rto`, 4 ms by
    /// default): the TLT paper's "SACK" for RDMA (its simulator's IRN with `IRN_NO_BDPFC`).
    Sack,
}

/// How a responder tells the requester's algorithm that packets arrived CE-marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CnpMode {
    /// A separate CNP, at most one per queue pair per `cnp_interval` (the DCQCN paper's
    /// notification point, and what Mellanox NICs do: 50 us).
    Paced,
    /// Every ACK (or NACK) of a CE-marked packet carries the CNP flag, and the requester takes
    /// each as a CNP (the HPCC paper's simulator, `rdma-hw.cc`).
    EveryAck,
}

/// Where ACKs, NACKs and CNPs queue in switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AckPriority {
    /// In their queue pair's class queue, behind its data and held by its PFC pauses.
    Data,
    /// Ahead of every data queue, outside buffer admission and PFC (the HPCC simulator's switch
    /// attribute `AckHighPrio`, which its `run.py` leaves off).
    Control,
}

/// How queue pairs mark TLT's important packets (`tlt.rdma_marking`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TltMarking {
    /// Window-based where the queue pair repairs selectively (IRN, SACK), rate-based with
    /// go-back-N: the choice of the TLT paper's RDMA simulator for DCQCN.
    #[default]
    Auto,
    /// The last packet of each message, the first of each retransmission and every `tlt.every`-th.
    Rate,
    /// As on TCP: one important packet in flight, echoed by the responder; an echo that finds
    /// nothing new to send forces a piece of the oldest unacknowledged unimportant bytes out.
    Window,
}

/// TLT as queue pairs run it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaTlt {
    /// Rate-based marking: also every this many packets (0: never periodically).
    pub every: u32,
    /// Which marking.
    pub marking: TltMarking,
}

/// What one class's queue pairs do where sources differ: the `[rdma]` keys, else the class's
/// parameter set, else the NIC defaults (paced CNPs, ACKs with their data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassNic {
    /// How CE marks reach the requester.
    pub cnp: CnpMode,
    /// Where control packets queue.
    pub ack_priority: AckPriority,
}

impl Default for ClassNic {
    fn default() -> Self {
        ClassNic { cnp: CnpMode::Paced, ack_priority: AckPriority::Data }
    }
}

impl Recovery {
    /// The name a scenario gives it.
    pub fn name(self) -> &'static str {
        match self {
            Recovery::Gbn => "gbn",
            Recovery::Irn => "irn",
            Recovery::Sack => "sack",
        }
    }
}

/// The `[rdma]` table: settings every RDMA queue pair shares.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RdmaConfig {
    /// Payload bytes per packet (the RoCE path MTU; the HPCC paper uses 1000).
    pub mtu: u32,
    /// Acknowledge every this many in-order packets (and always a message's last packet).
    pub ack_interval: u32,
    /// Loss recovery: "gbn", "irn" or "sack".
    pub recovery: Recovery,
    /// How CE marks reach the requester: "paced" or "every_ack" (default: the class's
    /// parameter set's, else "paced").
    pub cnp: Option<CnpMode>,
    /// With `cnp = "paced"`: at most one CNP per queue pair per this interval (50 us in
    /// Mellanox NICs).
    pub cnp_interval: Time,
    /// Where ACKs, NACKs and CNPs queue in switches: "data" or "control" (default: the class's
    /// parameter set's, else "data").
    pub ack_priority: Option<AckPriority>,
    /// Retransmission timeout (IRN's RTO_high); default 4 ms for go-back-N and SACK (a commodity
    /// NIC's ACK timeout: on a lossless fabric a pause must not look like a loss; the TLT paper's
    /// simulator gives SACK 4 ms) and 320 us for IRN (the IRN paper's RTO_high).
    pub rto: Option<Time>,
    /// IRN's RTO_low, used while at most `rto_low_packets` packets are in flight.
    pub rto_low: Time,
    /// In-flight packets up to which IRN uses `rto_low`.
    pub rto_low_packets: u32,
    /// IRN's cap on packets in flight; default one bandwidth-delay product of the flow's path.
    pub irn_window: Option<u32>,
    /// A go-back-N receiver NACKs the same expected packet again only after this long.
    pub nack_interval: Time,
    /// Bytes of link framing per frame beyond the IP packet (Ethernet: 38).
    pub framing: u32,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            mtu: 1000,
            ack_interval: 1,
            recovery: Recovery::Gbn,
            cnp: None,
            cnp_interval: Time::from_us(50),
            ack_priority: None,
            rto: None,
            rto_low: Time::from_us(100),
            rto_low_packets: 3,
            irn_window: None,
            nack_interval: Time::from_us(500),
            framing: ETHERNET_OVERHEAD,
        }
    }
}

impl RdmaConfig {
    /// The retransmission timeout in use (IRN's RTO_high).
    pub fn rto(&self) -> Time {
        self.rto.unwrap_or(match self.recovery {
            Recovery::Gbn | Recovery::Sack => Time::from_ms(4),
            Recovery::Irn => Time::from_us(320),
        })
    }

    /// The NIC behaviour of a class whose parameter set suggests `suggested`: keys set in
    /// `[rdma]` win.
    pub fn class_nic(&self, suggested: ClassNic) -> ClassNic {
        ClassNic { cnp: self.cnp.unwrap_or(suggested.cnp), ack_priority: self.ack_priority.unwrap_or(suggested.ack_priority) }
    }

    /// Bytes on the wire of a data packet with `payload` bytes.
    pub fn frame(&self, payload: u64) -> u32 {
        payload as u32 + IPV4_HEADER + ROCE_HEADER + self.framing
    }

    /// Bytes on the wire of an ACK, NACK or CNP.
    pub fn ack_frame(&self) -> u32 {
        IPV4_HEADER + ROCE_HEADER + AETH + self.framing
    }

    /// Bytes on the wire to move `size` bytes in MTU packets (for ideal FCT).
    pub fn wire_bytes(&self, size: u64) -> u64 {
        let packets = size.div_ceil(self.mtu as u64).max(1);
        size + packets * self.frame(0) as u64
    }

    /// Checks ranges; errors name the key under `rdma.`.
    pub fn validate(&self) -> Result<(), String> {
        if !(256..=9_000).contains(&self.mtu) {
            return Err(format!("rdma.mtu: expected 256 to 9000 payload bytes per packet, got {}", self.mtu));
        }
        if self.ack_interval == 0 {
            return Err("rdma.ack_interval: expected at least 1 packet".into());
        }
        if self.cnp_interval == Time::ZERO {
            return Err("rdma.cnp_interval: expected a positive duration like \"50us\" (for a CNP on every marked packet's ACK, set rdma.cnp = \"every_ack\")".into());
        }
        for (key, t) in [("rto", self.rto()), ("rto_low", self.rto_low), ("nack_interval", self.nack_interval)] {
            if t == Time::ZERO {
                return Err(format!("rdma.{key}: expected a positive duration like \"100us\""));
            }
        }
        if self.recovery == Recovery::Irn && self.rto_low > self.rto() {
            return Err(format!("rdma.rto_low: expected at most rdma.rto ({}), got {}", self.rto(), self.rto_low));
        }
        if self.irn_window == Some(0) {
            return Err("rdma.irn_window: expected at least 1 packet".into());
        }
        if self.framing > 1_000 {
            return Err(format!(
                "rdma.framing: expected at most 1000 bytes of framing per frame, got {}",
                self.framing
            ));
        }
        Ok(())
    }
}
