//! An output-queued switch, as one element owning its pipeline: ingress (TTL, the ingress port
//! known), routing (ECMP over equal-cost next hops), admission and marking by each egress port's
//! queue discipline, egress (TCP-INT stamping and HPCC hop records on INT-capable switches), and
//! dequeue when a port's serializer frees up. Its ports live in the world's port arena; the world
//! hands the switch the slice that is its own. A ToR of a reconfigurable network also has a
//! circuit side (`circuit::Tor`): packets for other racks wait in its VOQs, which its two uplinks
//! drain.

use crate::ids::PortId;
use super::circuit::{Admit, Tor, Uplink};
use super::pfc::{self, Pfc, Signal};
use super::port::Port;
use super::qdisc::{Marking, SharedBuffer, Verdict};
use super::routing::{ecmp_pick, Routes};
use crate::context::{Cx, DropReason, Event};
use crate::packet::hpcc_int::HopRecord;
use crate::packet::tcp_int::{hop_int_val, IntEncoding, TcpInt, LAT_MAX};
use crate::packet::{Caps, Ecn, Packet, CONTROL_PRIO};
use crate::time::Time;
use rand::Rng;

/// One switch; its ports are the world's ports `first_port..first_port + n`.
#[derive(Clone, Debug)]
pub struct Switch {
    /// The switch's node id.
    pub node: u32,
    /// Global id of the switch's port 0.
    pub first_port: u32,
    /// Shared packet buffer.
    pub buffer: SharedBuffer,
    /// Per-switch salt so ECMP choices are independent across tiers (avoids polarization).
    pub salt: u32,
    /// TCP-INT stamping; `None` on legacy switches.
    pub int: Option<IntStamping>,
    /// Priority flow control, when the fabric runs it.
    pub pfc: Option<Pfc>,
    /// The VOQs and uplinks of a reconfigurable network's ToR.
    pub tor: Option<Box<Tor>>,
}

impl Switch {
    /// The global id of local port `local`.
    #[inline]
    fn port_id(&self, local: usize) -> PortId {
        PortId(self.first_port + local as u32)
    }

    /// Ingress: `pkt` arrives on local port `ingress`; route it and hand it to its egress port.
    /// The pipeline takes the packet by reference and copies it only into a queue or onto the
    /// wire (a copy at each stage cost about 8% of a fat tree's instructions).
    pub fn receive(&mut self, ingress: u16, pkt: &mut Packet, ports: &mut [Port], routes: &Routes, cx: &mut Cx) {
        pkt.ttl = pkt.ttl.saturating_sub(1);
        if pkt.ttl == 0 {
            cx.drop_packet(pkt, DropReason::Ttl);
            return;
        }
        pkt.ingress = ingress;
        if let Some(dst) = self.tor.as_ref().and_then(|t| t.remote_rack(pkt.dst)) {
            self.to_rack(dst, pkt, ports, cx);
            return;
        }
        let egress = self.route(pkt, routes).expect("topology checks keep every host reachable from every switch");
        if pkt.is_syn() {
            self.offer(&mut pkt.caps, &ports[egress]);
        }
        self.enqueue(egress, pkt, ports, cx);
    }

    /// The local port `pkt` leaves by, by ECMP over the equal-cost next hops towards its
    /// destination (`None` only at a node that cannot reach it).
    #[inline(always)]
    pub fn route(&self, pkt: &Packet, routes: &Routes) -> Option<usize> {
        let hops = routes.next_hops(self.node as usize, pkt.dst as usize);
        hops.get(ecmp_pick(pkt.hash, self.salt, hops.len())).map(|&p| p as usize)
    }

    /// A packet for another rack joins that rack's VOQ, and whichever uplink is free takes what
    /// it may.
    fn to_rack(&mut self, dst: u16, pkt: &mut Packet, ports: &mut [Port], cx: &mut Cx) {
        let tor = self.tor.as_deref_mut().expect("only a ToR has racks");
        if pkt.is_syn() {
            // The VOQs mark only if configured; the uplink ports' own disciplines never see it.
            let int = self.int.is_some();
            Self::offer_caps(&mut pkt.caps, int, tor.marks_ecn());
        }
        match tor.admit(dst, *pkt, cx.now) {
            (Admit::Full(pkt), _) => cx.drop_packet(&pkt, DropReason::Buffer),
            (Admit::Queued, marked) => {
                cx.counters.ecn_marks += marked as u64;
                self.serve_uplinks(ports, cx);
            }
        }
    }

    /// Starts each idle uplink of a ToR on the next packet it may send, and makes sure a busy
    /// one wakes when it frees up if it has more to do.
    pub fn serve_uplinks(&mut self, ports: &mut [Port], cx: &mut Cx) {
        let Some(tor) = self.tor.as_deref() else { return };
        let uplinks = [(Uplink::Circuit, tor.circuit_port as usize), (Uplink::Packet, tor.packet_port as usize)];
        for (uplink, local) in uplinks {
            self.serve(uplink, local, ports, cx);
        }
    }

    fn serve(&mut self, uplink: Uplink, local: usize, ports: &mut [Port], cx: &mut Cx) {
        let now = cx.now;
        let tor = self.tor.as_deref_mut().expect("only a ToR has uplinks");
        if ports[local].idle(now) {
            // Nothing it may send now: a new packet or the next day wakes it.
            let Some(mut pkt) = tor.next_for(uplink, now, ports[local].rate) else { return };
            self.egress(local, &mut pkt, ports, cx);
        }
        let tor = self.tor.as_deref().expect("only a ToR has uplinks");
        // A circuit that ends before the port frees up is looked at again at its next day.
        if tor.has_work(uplink, ports[local].busy_until) {
            ports[local].wake_when_free(self.port_id(local), cx);
        }
    }

    /// Bytes waiting for `port`: its queue, or at a ToR's uplink, everything in the VOQs the
    /// two uplinks share.
    pub fn queued_bytes(&self, port: &Port) -> u64 {
        match self.tor.as_deref() {
            Some(t) if port.local == t.packet_port || port.local == t.circuit_port => t.queued().map(|p| p.wire_bytes as u64).sum(),
            _ => port.queue.bytes(),
        }
    }

    /// In-band negotiation: a SYN collects what the switches on its path provide. Each switch
    /// says whether it stamps INT and clears "every hop stamps INT" and "every hop marks ECN"
    /// where it does not.
    fn offer(&self, caps: &mut Caps, egress: &Port) {
        Self::offer_caps(caps, self.int.is_some(), egress.discipline.marking.is_on());
    }

    fn offer_caps(caps: &mut Caps, int: bool, marks_ecn: bool) {
        if int {
            caps.set(Caps::PATH_ANY_INT);
        } else {
            caps.clear(Caps::PATH_ALL_INT);
        }
        if !marks_ecn {
            caps.clear(Caps::PATH_ECN);
        }
    }

    /// Admission and marking at egress port `local`, then the queue (or the wire, if idle).
    fn enqueue(&mut self, local: usize, pkt: &mut Packet, ports: &mut [Port], cx: &mut Cx) {
        let now = cx.now;
        let port = &mut ports[local];
        pkt.enq_at = now;
        if pkt.prio == CONTROL_PRIO {
            self.send_control(local, *pkt, ports, cx);
            return;
        }
        let red = matches!(port.discipline.marking, Marking::Red(_));
        // Control packets waiting for the serializer go first, even if it frees as this arrives.
        let free = port.idle(now) && port.control.is_empty() && port.queue.is_empty() && !port.pause.is_paused(pkt.prio, now);
        if free && !red {
            self.egress(local, pkt, ports, cx);
            return;
        }
        if pkt.is_trimmed() && port.queue.has_header_band() {
            self.queue_header(local, pkt, ports, cx);
            return;
        }
        let lossless = self.pfc.as_ref().is_some_and(|p| p.cfg.is_lossless(pkt.prio));
        match port.discipline.admit(pkt, &port.queue, &self.buffer, lossless, port.rate, now, &mut cx.rng.ecn) {
            Verdict::Drop(reason) => cx.drop_packet(pkt, reason),
            Verdict::Queue { ce } => self.queue(local, pkt, ce, free, lossless, ports, cx),
            Verdict::Trim => self.trim(local, pkt, ports, cx),
        }
    }

    /// Queues an admitted packet at local port `local` (or sends it, if the port is `free`),
    /// CE-marked when `ce`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn queue(&mut self, local: usize, pkt: &mut Packet, ce: bool, free: bool, lossless: bool, ports: &mut [Port], cx: &mut Cx) {
        if ce {
            pkt.ecn = Ecn::Ce;
            cx.counters.ecn_marks += 1;
        }
        if free {
            self.egress(local, pkt, ports, cx);
            return;
        }
        let port = &mut ports[local];
        let (len, ingress, prio) = (pkt.wire_bytes as u64, pkt.ingress as usize, pkt.prio);
        self.buffer.take(len);
        port.queue.push(*pkt);
        port.wake_when_free(self.port_id(local), cx);
        if let (true, Some(pfc)) = (lossless, self.pfc.as_mut()) {
            let pause = pfc::pause_time(pfc.cfg.quanta, ports[ingress].rate);
            let signal = pfc.on_enqueue(ingress, prio, len, &self.buffer, cx.now, pause);
            self.signal_upstream(ingress, signal, ports, cx);
        }
    }

    /// The data queue at local port `local` is full and the port trims: with even odds (when
    /// its coin is on) the arrival takes the place of the packet queued last in its band, which
    /// is trimmed instead, if that packet may be and the arrival then fits; otherwise the
    /// arrival is trimmed. Either way a header joins the header band.
    #[cold]
    fn trim(&mut self, local: usize, pkt: &mut Packet, ports: &mut [Port], cx: &mut Cx) {
        let port = &mut ports[local];
        let trim = port.discipline.trim.expect("only a port that trims says Trim");
        if trim.coin && cx.rng.trim.gen_bool(0.5) {
            let pfc = self.pfc.as_ref();
            let lossless = |p: &Packet| pfc.is_some_and(|pfc| pfc.cfg.is_lossless(p.prio));
            if let Some(mut victim) = port.queue.pop_tail_if(pkt.prio, |v| trim.eligible(v, lossless(v))) {
                self.buffer.give_back(victim.wire_bytes as u64);
                let (rate, now) = (port.rate, cx.now);
                // Judged again with the victim gone: marking sees the queue the arrival joins.
                match port.discipline.admit(pkt, &port.queue, &self.buffer, false, rate, now, &mut cx.rng.ecn) {
                    Verdict::Queue { ce } => {
                        cx.counters.trim_evictions += 1;
                        trim.cut(&mut victim);
                        self.queue_header(local, &mut victim, ports, cx);
                        self.queue(local, pkt, ce, false, false, ports, cx);
                        return;
                    }
                    // The arrival is larger than the victim: the victim stays.
                    _ => {
                        self.buffer.take(victim.wire_bytes as u64);
                        port.queue.push(victim);
                    }
                }
            }
        }
        cx.counters.trims += 1;
        trim.cut(pkt);
        self.queue_header(local, pkt, ports, cx);
    }

    /// A trimmed header joins the header band of local port `local`, ahead of its data, unless
    /// the band is at its cap or the buffer is full.
    fn queue_header(&mut self, local: usize, pkt: &mut Packet, ports: &mut [Port], cx: &mut Cx) {
        let port = &mut ports[local];
        let len = pkt.wire_bytes as u64;
        let cap = port.discipline.trim.map_or(0, |t| t.header_cap);
        if port.queue.header_bytes() + len > cap || self.buffer.used + len > self.buffer.size {
            cx.drop_packet(pkt, DropReason::TrimHeader);
            return;
        }
        if port.idle(cx.now) && port.queue.is_empty() {
            self.egress(local, pkt, ports, cx);
            return;
        }
        self.buffer.take(len);
        port.queue.push_header(*pkt);
        port.wake_when_free(self.port_id(local), cx);
    }

    /// Sends a PAUSE or resume out of local port `ingress`, to the node that feeds it, ahead of
    /// any queued packet.
    fn signal_upstream(&mut self, ingress: usize, signal: Signal, ports: &mut [Port], cx: &mut Cx) {
        let frame = match (signal, self.pfc.as_ref()) {
            (Signal::Pause(prio), Some(pfc)) => pfc::frame(prio, pfc.cfg.quanta),
            (Signal::Resume(prio), Some(_)) => pfc::frame(prio, 0),
            _ => return,
        };
        if frame.pause_quanta > 0 {
            ports[ingress].pause.count_sent(frame.prio);
            cx.counters.pfc_pauses += 1;
        }
        self.send_control(ingress, frame, ports, cx);
    }

    /// Sends `pkt` out of local port `local` ahead of any queued packet: a PFC frame, or a
    /// packet of the control priority.
    fn send_control(&mut self, local: usize, pkt: Packet, ports: &mut [Port], cx: &mut Cx) {
        let id = self.port_id(local);
        let port = &mut ports[local];
        if port.idle(cx.now) && port.control.is_empty() {
            port.transmit(id, &pkt, cx);
        } else {
            port.control.push_back(pkt);
        }
        port.wake_when_free(id, cx);
    }

    /// The serializer of local port `local` is free: send its next PFC frame, or its next queued
    /// packet of a priority not paused, if any.
    pub fn dequeue(&mut self, local: usize, ports: &mut [Port], cx: &mut Cx) {
        let now = cx.now;
        let id = self.port_id(local);
        let port = &mut ports[local];
        port.tx_event_pending = false;
        if let Some(tor) = self.tor.as_deref() {
            let uplink = if local == tor.circuit_port as usize {
                Some(Uplink::Circuit)
            } else {
                (local == tor.packet_port as usize).then_some(Uplink::Packet)
            };
            if let Some(uplink) = uplink {
                self.serve(uplink, local, ports, cx);
                return;
            }
        }
        let port = &mut ports[local];
        if !port.idle(now) {
            // An early wake (a resume arrived while the serializer was busy).
            port.wake_when_free(id, cx);
            return;
        }
        if let Some(frame) = port.control.pop_front() {
            port.transmit(id, &frame, cx);
            if !port.control.is_empty() || !port.queue.is_empty() {
                port.wake_when_free(id, cx);
            }
            return;
        }
        // Everything queued may be paused: the resume, or the pause running out, wakes the port.
        let Some(mut pkt) = port.queue.pop_unpaused(port.pause.mask(now)) else { return };
        let len = pkt.wire_bytes as u64;
        self.buffer.give_back(len);
        if port.discipline.marks_on_dequeue() && port.discipline.mark_departing(&pkt, &port.queue, port.rate, now, &mut cx.rng.ecn) {
            pkt.ecn = Ecn::Ce;
            cx.counters.ecn_marks += 1;
        }
        port.discipline.dequeued(port.queue.bytes(), len, now);
        if !port.queue.is_empty() {
            port.queue.prefetch_head();
        }
        if let Some(pfc) = self.pfc.as_mut().filter(|p| p.cfg.is_lossless(pkt.prio)) {
            let signal = pfc.on_dequeue(pkt.ingress as usize, pkt.prio, len, &self.buffer);
            self.signal_upstream(pkt.ingress as usize, signal, ports, cx);
        }
        self.egress(local, &mut pkt, ports, cx);
        let port = &mut ports[local];
        if !port.queue.is_empty() || !port.control.is_empty() {
            port.wake_when_free(id, cx);
        }
    }

    /// A resume arrived, or a pause ran out, at local port `local`: send what waited.
    pub fn unpaused(&mut self, local: usize, ports: &mut [Port], cx: &mut Cx) {
        let port = &mut ports[local];
        if !port.queue.is_empty() && port.idle(cx.now) {
            port.tx_event_pending = true;
            cx.schedule(cx.now, Event::TxDone(self.port_id(local)));
        }
    }

    /// Egress: TCP-INT stamping and HPCC hop records on capable switches, then the wire.
    fn egress(&mut self, local: usize, pkt: &mut Packet, ports: &mut [Port], cx: &mut Cx) {
        let now = cx.now;
        let port = &mut ports[local];
        // Only ports of INT-capable switches have a meter.
        if let Some(meter) = port.meter.as_mut() {
            meter.on_tx(now, pkt.wire_bytes as u64);
            if let (Some(st), Some(opt)) = (&self.int, pkt.int.as_mut()) {
                let util = meter.utilization(now, port.rate);
                st.stamp(opt, port.queue.bytes(), util, pkt.ttl, now - pkt.enq_at);
            }
            // Data collects records; an ACK's stack is the echo and passes untouched. As in HPCC's
            // switch, txBytes excludes this packet and qlen is what stays queued behind it.
            if let (Some(h), true) = (pkt.hops, pkt.payload > 0 && !pkt.is_trimmed()) {
                let rec = HopRecord { qlen: port.queue.bytes(), tx_bytes: port.tx_bytes, ts: now, rate: port.rate };
                cx.hops.push(h, rec);
            }
        }
        port.transmit(self.port_id(local), pkt, cx);
    }
}

/// How an INT-capable switch stamps the TCP-INT option at egress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntStamping {
    /// INTval encoding: queue threshold and shifts.
    pub encoding: IntEncoding,
    /// Unit of the Lat field.
    pub lat_unit: Time,
    /// Processing latency the hop adds besides queueing.
    pub processing: Time,
}

impl IntStamping {
    /// Raises the option's INTval to this hop's value (setting ID to the packet's TTL here when it
    /// raises it) and adds the hop's residence time to Lat, saturating at 24 bits.
    pub fn stamp(&self, opt: &mut TcpInt, qdepth: u64, util: f64, ttl: u8, residence: Time) {
        let v = hop_int_val(qdepth, (util * 100.0).round() as u64, &self.encoding);
        if v > opt.int_val {
            opt.int_val = v;
            opt.id = ttl;
        }
        let add = (residence + self.processing).0 / self.lat_unit.0;
        opt.lat = (opt.lat as u64 + add).min(LAT_MAX as u64) as u32;
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecmp_spreads_flows_evenly() {
        let n = 4;
        let mut counts = [0u32; 4];
        for flow in 0..40_000u32 {
            counts[ecmp_pick(flow.wrapping_mul(2_654_435_761), 7, n)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(ecmp_pick(123, 1, 1), 0);
    }
}

#[cfg(test)]
mod int_tests {
    use super::*;

    #[test]
    fn three_hops_keep_the_max_its_hop_and_the_latency_sum() {
        let st = IntStamping { encoding: IntEncoding::default(), lat_unit: Time(1000), processing: Time(500_000) };
        let mut opt = TcpInt::default();
        // hop 1 (TTL 63): 40% utilized, 1 us queueing; hop 2 (TTL 62): 64 KiB queued, 5 us;
        // hop 3 (TTL 61): 90% utilized, idle queue.
        st.stamp(&mut opt, 0, 0.40, 63, Time(1_000_000));
        st.stamp(&mut opt, 64 << 10, 0.95, 62, Time(5_000_000));
        st.stamp(&mut opt, 0, 0.90, 61, Time::ZERO);
        assert_eq!(opt.int_val, 0x80 | 8);
        assert_eq!(opt.id, 62);
        // 1 + 5 + 0 us queueing plus 3 x 0.5 us processing, in ns.
        assert_eq!(opt.lat, 7_500);
    }
}
