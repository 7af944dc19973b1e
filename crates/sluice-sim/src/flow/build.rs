//! How a flow's two ends are built: from its class (a TCP client and server or an RDMA requester
//! and responder, and the algorithm), the transport settings and the path its packets take,
//! which sizes the algorithm's base round trip and the flow record's ideal completion time.

use crate::ids::{FlowId, HostId};
use super::Flow;
use crate::cc::{CcFactory, FlowContext, UetFlow};
use crate::context::stream;
use crate::net::fabric::{longest_walk, path_rtt, Fabric};
use crate::net::port::Port;
use crate::net::switch::IntStamping;
use crate::packet::tcp_int::IntEncoding;
use crate::time::{Rate, Time};
use crate::transport::pacer::TokenBucket;
use crate::transport::rdma::{ClassNic, QueuePair, RdmaConfig, RdmaTlt};
use crate::transport::tcp::{IntStacks, Proposal, Route, Sender, Stack, TcpClient, TcpConfig, TcpServer};
use crate::transport::uet::paths::PathPolicy;
use crate::transport::uet::{self, UetConfig, UetNetwork};
use crate::transport::{ClassTransport, ClientEnd, ServerEnd};
use crate::workload::FlowSpec;

/// A traffic class as the run uses it.
pub struct ClassRuntime {
    /// Class name.
    pub name: String,
    /// Algorithm registry name.
    pub cc: String,
    /// Builds the algorithm for each flow.
    pub factory: CcFactory,
    /// Switch priority queue.
    pub priority: u8,
    /// The algorithm flows fall back to when negotiation fails, and its builder.
    pub fallback: (String, CcFactory),
    /// The transport the class's flows run on.
    pub transport: ClassTransport,
    /// Each data packet takes an ECMP hash of its own.
    pub spray: bool,
    /// What its queue pairs' NICs do where sources differ.
    pub nic: ClassNic,
    /// Its parameter changes during the run (`[[events]]`), in time order.
    pub changes: std::sync::Arc<[crate::cc::ParamChange]>,
}

impl ClassRuntime {
    /// The algorithm's builder for a flow that starts at `start` (the last change made by then),
    /// and the changes still to come for it.
    pub fn at(&self, start: Time) -> (&CcFactory, Option<std::sync::Arc<[crate::cc::ParamChange]>>) {
        let made = self.changes.iter().take_while(|c| c.at <= start).count();
        let factory = self.changes[..made].last().map_or(&self.factory, |c| &c.factory);
        let later = (made < self.changes.len()).then(|| self.changes[made..].into());
        (factory, later)
    }
}

/// TCP-INT as the run uses it.
#[derive(Clone, Debug)]
pub struct IntRuntime {
    /// Stamping per switch ordinal; `None` for legacy switches.
    pub switches: Vec<Option<IntStamping>>,
    /// The fabric-wide encoding senders decode echoes with.
    pub encoding: IntEncoding,
    /// Unit of the latency fields.
    pub latency_unit: Time,
    /// Transmit-rate window of INT switch ports.
    pub util_window: Time,
    /// Every flow carries the option.
    pub all_flows: bool,
    /// Per host ordinal: the stack supports TCP-INT.
    pub host_supports: Vec<bool>,
}

/// Builds each flow's transport.
pub struct TransportBuilder {
    /// Classes by index; `default` is always present.
    pub classes: Vec<ClassRuntime>,
    /// TCP settings.
    pub tcp: TcpConfig,
    /// RDMA queue-pair settings, and TLT's marking when TLT is on.
    pub rdma: (RdmaConfig, Option<RdmaTlt>),
    /// TCP-INT as the run uses it.
    pub int: IntRuntime,
    /// Per host ordinal: its NIC offload builds a server's state only once the handshake ends.
    pub lazy_tcb: Vec<bool>,
    /// The Ultra Ethernet transport's settings and what its flows know of the fabric, when a
    /// class runs on it.
    pub uet: Option<(UetConfig, UetNetwork)>,
    /// The run's seed, which each UET flow's path choices are drawn from.
    pub seed: u64,
}

impl TransportBuilder {
    /// Flow `id` of `spec`, with its record filled in and its connection built.
    pub fn flow(&self, spec: &FlowSpec, id: FlowId, fabric: &Fabric) -> Flow {
        let (id, src, dst) = (id.0, spec.src as u32, spec.dst as u32);
        let hash_fwd = flow_hash(src, dst, id, false);
        let hash_rev = flow_hash(dst, src, id, true);
        let class = &self.classes[spec.class];
        let link_rate = fabric.ports[fabric.host_ports[spec.src]].built_rate;
        match class.transport {
            ClassTransport::Rdma => return self.queue_pair(spec, id, fabric, hash_fwd, hash_rev, link_rate),
            ClassTransport::Uet => return self.uet(spec, id, fabric, hash_fwd, hash_rev, link_rate),
            ClassTransport::Tcp => {}
        }
        let mss = self.tcp.mss();
        let deadline = spec.qos.deadline.map(|d| spec.start + d);
        let mut ctx = FlowContext { mss, init_cwnd: self.tcp.init_cwnd as u64 * mss, link_rate, base_rtt: Time::ZERO, size: spec.size, deadline, uet: None, stack: self.tcp.stack };
        // What the algorithm needs decides the options its segments carry, and so the flow's
        // real MSS, which its base RTT and ideal FCT are measured at.
        let (factory, later) = class.at(spec.start);
        let (needs_int, needs_hops) = {
            let probe = factory(&ctx);
            (probe.needs_int(), probe.needs_hop_records())
        };
        let both_int = self.int.host_supports[spec.src] && self.int.host_supports[spec.dst];
        let mut flow_mss = mss;
        if both_int && (needs_int || self.int.all_flows) {
            flow_mss -= crate::packet::tcp_int::LEN as u64;
        }
        if both_int && needs_hops {
            flow_mss -= crate::packet::hpcc_int::HEADER_BYTES as u64;
        }
        // The algorithm's T is the path's round trip at full frames of the configured MTU, as
        // the HPCC simulator computes it; the flow's record uses its own first frame.
        let frame_at = |m: u64| self.tcp.frame(spec.size.unwrap_or(m).min(m)) as u64;
        let route = Route { flow: id, src, dst, hash_fwd, hash_rev, prio: class.priority, spray: class.spray };
        ctx.base_rtt = self.path_rtt(fabric, &route, frame_at(mss));
        let base_rtt = if flow_mss == mss { ctx.base_rtt } else { self.path_rtt(fabric, &route, frame_at(flow_mss)) };
        let mut sender = Sender::new(&self.tcp, spec.size, factory(&ctx));
        if let Some(later) = later {
            sender.schedule_changes(later);
        }
        let offer = crate::cc::negotiation::Offer::of(sender.cc.as_ref(), self.tcp.ecn);
        let int = IntStacks {
            encoding: self.int.encoding,
            latency_unit: self.int.latency_unit,
            server: self.int.host_supports[spec.dst],
        };
        let proposal = Proposal {
            offer,
            local_int: self.int.host_supports[spec.src],
            fallback: (class.fallback.1.clone(), ctx),
            int_all_flows: self.int.all_flows,
        };
        // A burst of two full frames lets the limiter keep a window-limited flow busy.
        let limiter = spec.qos.target_rate.map(|r| TokenBucket::new(r, 2 * self.tcp.frame(mss) as u64));
        // The server starts out echoing marks as the class's algorithm asks; after negotiation,
        // the client's segments say how.
        let mut server = TcpServer::new(&self.tcp, route, sender.ecn_mode(), self.int.host_supports[spec.dst]);
        if let Some(r) = spec.response {
            server.set_response(r);
        }
        if self.lazy_tcb.get(spec.dst).copied().unwrap_or(false) {
            server.set_lazy_tcb();
        }
        let mut client = TcpClient::new(&self.tcp, route, sender, int, proposal, limiter);
        if self.tcp.agentless_hosts.contains(&spec.src) {
            client.set_silent();
        }
        if self.tcp.agentless_hosts.contains(&spec.dst) {
            server.set_silent();
        }
        let ends = (ClientEnd::Tcp(Box::new(client)), ServerEnd::Tcp(Box::new(server)));
        let mut flow = Flow::new(FlowId(id), HostId(src), HostId(dst), spec.class as u16, class.priority, spec.size, spec.start, ends);
        flow.base_rtt = base_rtt;
        if let Some(s) = spec.size {
            flow.ideal_fct = base_rtt + link_rate.tx_time(self.tcp.wire_bytes_at(s, flow_mss));
        }
        flow
    }

    /// Flow `id` of an RDMA class, as a queue pair; its algorithm's T is the path's round trip
    /// at full packets, and IRN's cap one bandwidth-delay product of it.
    fn queue_pair(&self, spec: &FlowSpec, id: u32, fabric: &Fabric, hash_fwd: u32, hash_rev: u32, link_rate: Rate) -> Flow {
        let (src, dst) = (spec.src as u32, spec.dst as u32);
        let class = &self.classes[spec.class];
        let (cfg, tlt) = &self.rdma;
        let mtu = cfg.mtu as u64;
        let route = Route { flow: id, src, dst, hash_fwd, hash_rev, prio: class.priority, spray: class.spray };
        let rtt = |frame: u64| path_rtt(fabric, src, dst, hash_fwd, hash_rev, route.spray, frame, cfg.ack_frame() as u64);
        let full = rtt(cfg.frame(mtu) as u64);
        let ctx = FlowContext { mss: mtu, init_cwnd: link_rate.bytes_in(full).max(mtu), link_rate, base_rtt: full, size: None, deadline: None, uet: None, stack: Stack::Rfc };
        let first = cfg.frame(spec.size.unwrap_or(mtu).min(mtu)) as u64;
        let base_rtt = rtt(first);
        let mut qp = QueuePair::new(cfg, class.nic, *tlt, route, spec.size, (class.factory)(&ctx), link_rate, link_rate.bytes_in(full));
        if !(self.int.host_supports[spec.src] && self.int.host_supports[spec.dst]) {
            // Per-hop records need INT at both ends, as on TCP; there is no handshake to ask.
            qp = qp.without_hop_records();
        }
        let ideal = spec.size.map(|s| base_rtt + link_rate.tx_time(cfg.wire_bytes(s)));
        let (requester, responder) = qp.into_ends();
        let ends = (ClientEnd::Rdma(Box::new(requester)), ServerEnd::Rdma(Box::new(responder)));
        let mut flow = Flow::new(FlowId(id), HostId(src), HostId(dst), spec.class as u16, class.priority, spec.size, spec.start, ends);
        flow.base_rtt = base_rtt;
        if let Some(t) = ideal {
            flow.ideal_fct = t;
        }
        flow
    }

    /// Flow `id` of a UET class. Its algorithm scales by the network's longest round trip (or,
    /// with `uet.accurate_base_rtt`, by its own pair's longest), and its record's base RTT is
    /// the longest of its equal-cost paths, as its packets spread over all of them.
    fn uet(&self, spec: &FlowSpec, id: u32, fabric: &Fabric, hash_fwd: u32, hash_rev: u32, link_rate: Rate) -> Flow {
        let (src, dst) = (spec.src as u32, spec.dst as u32);
        let class = &self.classes[spec.class];
        let (cfg, net) = self.uet.as_ref().expect("a UET class has the run's UET settings");
        let route = Route { flow: id, src, dst, hash_fwd, hash_rev, prio: class.priority, spray: false };
        let mss = cfg.mss();
        let base_rtt = if cfg.accurate_base_rtt {
            let frame = |bytes: u64| move |p: &Port| p.link.delay + p.built_rate.tx_time(bytes);
            let (data, ack) = (frame(cfg.frame(mss) as u64), frame(cfg.ack_frame() as u64));
            longest_walk(fabric, src, dst, data, data) + longest_walk(fabric, dst, src, ack, ack)
        } else {
            net.network_rtt
        };
        let uet = UetFlow { network_rtt: net.network_rtt, trimming: net.trimming, mtu: cfg.mtu as u64, oversubscription: net.oversubscription };
        let ctx = FlowContext { mss, init_cwnd: 0, link_rate, base_rtt, size: spec.size, deadline: None, uet: Some(uet), stack: Stack::Rfc };
        // Each flow draws its path choices from a stream of its own, so they do not depend on
        // other flows, partitions or threads.
        let mut rng = stream(self.seed ^ (id as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407), 5);
        let paths = PathPolicy::new(&cfg.load_balancing_algo, cfg.paths, &mut rng).expect("uet.load_balancing_algo is checked");
        let conn = uet::connection(cfg, route, spec.size, (class.factory)(&ctx), net.timers(cfg, link_rate), paths, rng);
        let ends = (ClientEnd::Uet(Box::new(conn.sender)), ServerEnd::Uet(Box::new(conn.receiver)));
        let mut flow = Flow::new(FlowId(id), HostId(src), HostId(dst), spec.class as u16, class.priority, spec.size, spec.start, ends);
        let first = cfg.frame(spec.size.unwrap_or(mss).min(mss)) as u64;
        flow.base_rtt = path_rtt(fabric, src, dst, hash_fwd, hash_rev, true, first, cfg.ack_frame() as u64);
        if let Some(s) = spec.size {
            flow.ideal_fct = flow.base_rtt + link_rate.tx_time(cfg.wire_bytes(s));
        }
        flow
    }

    /// The round trip of `route`'s paths at `frame` bytes with TCP's ACK frame.
    fn path_rtt(&self, fabric: &Fabric, route: &Route, frame: u64) -> Time {
        path_rtt(fabric, route.src, route.dst, route.hash_fwd, route.hash_rev, route.spray, frame, self.tcp.frame(0) as u64)
    }
}

/// Mixes a flow's endpoints and id into an ECMP hash (stands in for the 5-tuple).
pub fn flow_hash(src: u32, dst: u32, id: u32, reverse: bool) -> u32 {
    let mut x = ((src as u64) << 40) ^ ((dst as u64) << 20) ^ id as u64 ^ ((reverse as u64) << 63);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x as u32
}
