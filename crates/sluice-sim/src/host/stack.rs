//! Every host's stack as an element: what its NIC and kernel do with a packet that arrives, a
//! connection timer that fires, a CPU core that finishes a job, an offload tick; and the host's
//! share of carrying out what a transport reported. What concerns applications and the run's
//! flow table the host hands back as a [`ReportFrom`] (the report itself stays in [`Hosts::report`],
//! so a packet moves no record around), which the world takes to the workload runtime between
//! [`Hosts::take_report`] and [`Hosts::settle`].

use super::cpu::{Cpu, Cycles, Op};
use super::nic::Nic;
use super::offload::Offload;
use super::pull::{PullPacer, Turn};
use super::splice::Relayed;
use super::telemetry::{TelemetryLog, TelemetryRow};
use crate::context::{stream, Cx, Event, TimerKind};
use crate::flow::FlowTable;
use crate::ids::{FlowId, HostId, PartId};
use crate::net::port::Port;
use crate::packet::{flags, Packet};
use crate::time::Time;
use crate::transport::tcp::State;
use crate::transport::uet::PULL_QUANTA;
use crate::transport::{ClientEnd, Io, ServerEnd, Side};
use crate::workload::proxy::{RelayEnd, Splicing};

/// Bytes of the interim response a proxy sends when it is ready for a request's body
/// (`HTTP/1.1 100 Continue` and its blank line).
const CONTINUE_BYTES: u32 = 25;

/// What a host acts on beyond itself: the flows' transports and records, the ports (each NIC
/// sends on its own) and the context every element acts through.
pub struct HostCx<'a> {
    /// Every flow, by id.
    pub flows: &'a mut FlowTable,
    /// Every port, by global id.
    pub ports: &'a mut [Port],
    /// Clock, events, counters, slabs.
    pub cx: Cx<'a>,
    /// Each host's partition, for what one end tells the other across the fabric.
    pub host_part: &'a [PartId],
}

/// A transport's report that the world carries on with: flow `flow`'s, at host `host` (the
/// report is [`Hosts::report`]).
#[derive(Clone, Copy, Debug)]
pub struct ReportFrom {
    /// The flow.
    pub flow: FlowId,
    /// The host whose stack reported.
    pub host: HostId,
}

/// What a packet arriving at a host came to.
pub enum Arrival {
    /// The stack took it; the report, if one is due now (not after a modelled CPU's job).
    Stack(Option<ReportFrom>),
    /// The NIC relayed it on a spliced connection; the world settles the splice.
    Spliced(Box<Relayed>),
}

/// Every host's stack: NICs, CPUs where modelled, NIC offloads where present.
pub struct Hosts {
    /// Each host's NIC.
    pub nics: Vec<Nic>,
    /// Each host's CPU, where it is modelled; empty when no host's is, so the packet path checks
    /// a length only.
    pub cpus: Vec<Option<Box<Cpu>>>,
    /// Each host's NIC offload, where it has one; empty when no host has one.
    pub offloads: Vec<Option<Box<Offload>>>,
    /// Each host's pull pacer, from its first flow under UET's receiver credit; empty until then.
    pub pacers: Vec<Option<Box<PullPacer>>>,
    /// TCP-INT echoes senders decoded.
    pub telemetry: TelemetryLog,
    /// The current report of a transport, reused so a packet allocates nothing.
    io: Io,
    /// Segment size, for a proxy's per-segment relay cost.
    mss: u64,
    /// The run's seed, from which each host's oversubscription control draws its jitter.
    seed: u64,
}

impl Hosts {
    /// Hosts with `nics`, no CPU or offload yet, logging telemetry to `telemetry`, drawing
    /// what they draw from the run's `seed`.
    pub fn new(nics: Vec<Nic>, telemetry: TelemetryLog, mss: u64, seed: u64) -> Hosts {
        Hosts { nics, cpus: Vec::new(), offloads: Vec::new(), pacers: Vec::new(), telemetry, io: Io::default(), mss, seed }
    }

    /// What the transport of the last [`ReportFrom`] reported.
    #[inline]
    pub fn report(&self) -> &Io {
        &self.io
    }

    /// Takes the current report out while another transport reports (a proxy opening a backend
    /// connection in the middle of carrying out the client's report).
    pub fn set_aside(&mut self) -> Io {
        std::mem::take(&mut self.io)
    }

    /// Puts back a report [`Self::set_aside`] took.
    pub fn restore(&mut self, io: Io) {
        self.io = io;
    }

    /// A packet reaches host `h`: its NIC's offload relays it, or its stack takes it.
    #[inline]
    pub fn receive(&mut self, h: HostId, pkt: Packet, s: &mut HostCx) -> Arrival {
        s.cx.counters.packets_delivered += 1;
        if let Some(pacer) = self.pacers.get_mut(h.index()).and_then(Option::as_deref_mut) {
            let flow = &s.flows[FlowId(pkt.flow)];
            if flow.dst == h && matches!(flow.server, Some(ServerEnd::Uet(_))) {
                pacer.count(&pkt);
            }
        }
        if pkt.is_trimmed() && !matches!(s.flows[FlowId(pkt.flow)].server, Some(ServerEnd::Uet(_))) {
            // TCP and RDMA take no trimmed headers: to them the data is lost, which their ACK
            // clocks and timers recover as any loss. A UET receiver NACKs them.
            s.cx.counters.trim_headers_discarded += 1;
            s.cx.release(&pkt);
            return Arrival::Stack(None);
        }
        let capture = s.cx.capture.is_some();
        if let Some(off) = self.offloads.get_mut(h.index()).and_then(Option::as_deref_mut) {
            if let Some(r) = off.relay(&pkt, capture) {
                return Arrival::Spliced(Box::new(r));
            }
        }
        Arrival::Stack(self.stack_rx(h, pkt, s))
    }

    /// The stack of host `h` (its NIC's offload first) takes a packet.
    #[inline]
    pub fn stack_rx(&mut self, h: HostId, pkt: Packet, s: &mut HostCx) -> Option<ReportFrom> {
        let f = FlowId(pkt.flow);
        let flow = &mut s.flows[f];
        let side = if h == flow.dst { Side::Server } else { Side::Client };
        if !flow.is_open(side) {
            // A closed end takes nothing more; a client in TIME_WAIT acknowledges a FIN again.
            s.cx.release(&pkt);
            if pkt.has(flags::FIN) && side == Side::Client {
                if let Some(ack) = flow.time_wait_answer(&pkt, s.cx.now) {
                    self.nics[h].ctrl.push_back(ack);
                    self.nic_send(h, s);
                }
            }
            return None;
        }
        self.io.reset();
        if side == Side::Server && nic_takes(&mut self.offloads, h, f, &pkt, &mut self.io, s) {
            return Some(ReportFrom { flow: f, host: h });
        }
        let flow = &mut s.flows[f];
        match side {
            Side::Client => flow.client.as_mut().expect("an open end").on_packet(&pkt, &mut self.io, &mut s.cx),
            Side::Server => flow.server.as_mut().expect("an open end").on_packet(&pkt, &mut self.io, &mut s.cx),
        }
        self.after_stack(h, f, true, s)
    }

    /// What the stack did with a packet (`rx`) or a timer is reported now, or, on a host with a
    /// modelled CPU, when the core its flow maps to has done the work. A close the application
    /// made then goes to the NIC if it offloads teardown (the host pays for the handover whether
    /// or not the NIC's table has room).
    #[inline]
    fn after_stack(&mut self, h: HostId, f: FlowId, rx: bool, s: &mut HostCx) -> Option<ReportFrom> {
        match self.cpus.get_mut(h.index()).and_then(Option::as_deref_mut) {
            None => {
                self.offload_close(h, f, s);
                Some(ReportFrom { flow: f, host: h })
            }
            Some(cpu) => {
                let io = std::mem::take(&mut self.io);
                let hand_over = io.work.answered && self.offloads.get(h.index()).and_then(Option::as_ref).is_some_and(|o| o.teardown);
                let mut cycles = cpu.costs.of(rx, &io, hand_over);
                if let Some(&RelayEnd::Front { relay, .. }) = s.flows[f].relay.as_deref() {
                    // A proxy's request work is parsing the header, not answering on the close;
                    // what it reads it writes on to the backend.
                    cycles.0[Op::App as usize] = 0;
                    if let Some((start, n)) = io.delivered {
                        let connects = start < relay.header && start + n >= relay.header;
                        cycles.merge(&cpu.costs.relay(n, n.div_ceil(self.mss), connects));
                    }
                }
                cpu.submit(f, io, cycles, &mut s.cx);
                None
            }
        }
    }

    /// A core of host `h` finished its job: what the job's packet or timer made the host do is
    /// reported now, the application's close going to the NIC first if it offloads teardown.
    #[cold]
    pub fn cpu_done(&mut self, h: HostId, core: usize, s: &mut HostCx) -> Option<ReportFrom> {
        let cpu = self.cpus.get_mut(h.index()).and_then(Option::as_deref_mut).expect("a CPU event for a host with a CPU");
        let job = cpu.finish(core, &mut s.cx)?;
        self.io = job.io;
        self.offload_close(h, job.flow, s);
        Some(ReportFrom { flow: job.flow, host: h })
    }

    /// Lets flow `f`'s client act (`act`) at its host `h` and returns its report, or nothing if
    /// the client is closed.
    pub fn with_client(&mut self, f: FlowId, h: HostId, s: &mut HostCx, act: impl FnOnce(&mut ClientEnd, &mut Io, &mut Cx)) -> Option<ReportFrom> {
        let c = s.flows[f].client.as_mut()?;
        self.io.reset();
        act(c, &mut self.io, &mut s.cx);
        Some(ReportFrom { flow: f, host: h })
    }

    /// Lets flow `f`'s server act, its report in [`Self::report`]; false if the server is closed.
    fn server_acts(&mut self, f: FlowId, s: &mut HostCx, act: impl FnOnce(&mut ServerEnd, &mut Io, &mut Cx)) -> bool {
        let Some(t) = s.flows[f].server.as_mut() else { return false };
        self.io.reset();
        act(t, &mut self.io, &mut s.cx);
        true
    }

    /// Runs a connection timer. The server's own timers (delayed ACK, FIN retransmission) are
    /// work for its host's CPU, where one is modelled.
    pub fn timer(&mut self, f: FlowId, kind: TimerKind, gen: u32, s: &mut HostCx) -> Option<ReportFrom> {
        let (src, dst) = (s.flows[f].src, s.flows[f].dst);
        if !kind.at_server() {
            return self.with_client(f, src, s, |c, io, cx| c.on_timer(kind, gen, io, cx));
        }
        let acted = self.server_acts(f, s, |t, io, cx| t.on_timer(kind, gen, io, cx));
        // The peer's close is no work for the server's CPU: the connection is over.
        if kind == TimerKind::PeerClosed || !self.cpus.get(dst.index()).is_some_and(Option::is_some) {
            return acted.then_some(ReportFrom { flow: f, host: dst });
        }
        if !acted || (self.io.replies.is_empty() && !self.io.closed) {
            // Gone, or a stale or rescheduled timer: no work.
            return None;
        }
        self.after_stack(dst, f, false, s)
    }

    /// If flow `f`'s server application closed (its FIN in the report), host `h`'s NIC may take
    /// the close over.
    #[inline]
    fn offload_close(&mut self, h: HostId, f: FlowId, s: &mut HostCx) {
        if !self.io.work.answered {
            return;
        }
        let Some(off) = self.offloads.get_mut(h.index()).and_then(Option::as_deref_mut) else { return };
        let Some(server) = s.flows[f].server.as_mut().and_then(ServerEnd::tcp_mut) else { return };
        if let Some(at) = off.hand_over(server, f.0, &self.io.replies, s.cx.now) {
            s.cx.schedule(at, Event::NicTick(h));
        }
    }

    /// Host `h`'s offload timer wheel ticks: FINs not yet acknowledged go out again; returns the
    /// flows whose close the NIC gave up on, for [`Self::nic_closed`].
    #[cold]
    pub fn nic_tick(&mut self, h: HostId, s: &mut HostCx) -> Vec<FlowId> {
        let off = self.offloads.get_mut(h.index()).and_then(Option::as_deref_mut).expect("a NIC tick for a host with an offload");
        let now = s.cx.now;
        if off.tick_at != Some(now) {
            return Vec::new(); // superseded by an earlier tick
        }
        let (mut resend, mut gave_up) = (Vec::new(), Vec::new());
        if let Some(at) = off.tick(now, &mut resend, &mut gave_up) {
            s.cx.schedule(at, Event::NicTick(h));
        }
        self.nics[h].ctrl.extend(resend);
        gave_up.into_iter().map(FlowId).collect()
    }

    /// Host `h`'s NIC gave up on flow `f`'s close: the connection ends.
    #[cold]
    pub fn nic_closed(&mut self, h: HostId, f: FlowId, s: &mut HostCx) -> ReportFrom {
        self.io.reset();
        if let Some(server) = s.flows[f].server.as_mut().and_then(ServerEnd::tcp_mut) {
            server.nic_closed(&mut self.io, &mut s.cx);
        }
        ReportFrom { flow: f, host: h }
    }

    /// The end `side` of spliced flow `f` at host `h` is closed: the NIC saw the close go
    /// through end to end.
    #[cold]
    pub fn spliced_closed(&mut self, h: HostId, f: FlowId, side: Side, s: &mut HostCx) -> Option<ReportFrom> {
        match side {
            Side::Client => self.with_client(f, h, s, |c, io, _| {
                if let Some(c) = c.tcp_mut() {
                    c.spliced_closed(io);
                }
            }),
            Side::Server => {
                let acted = self.server_acts(f, s, |t, io, cx| {
                    if let Some(server) = t.tcp_mut() {
                        server.spliced_closed(io, cx);
                    }
                });
                acted.then_some(ReportFrom { flow: f, host: h })
            }
        }
    }

    /// Host `h`'s CPU, where modelled, pays for handing a spliced pair over to or back from its
    /// NIC.
    #[cold]
    pub fn handover(&mut self, h: HostId, front: FlowId, s: &mut HostCx) {
        if let Some(cpu) = self.cpus.get(h.index()).and_then(Option::as_deref) {
            let mut cycles = Cycles::default();
            cycles.add(Op::Handover, cpu.costs.handover);
            self.job(h, front, cycles, s);
        }
    }

    /// Once the backend connection of the client connection `front` is established, the proxy on
    /// host `h` asks its NIC to splice the two (if the NIC splices, the table has room, and
    /// nothing of the request waits beyond a gap, which the NIC could no longer hand the host),
    /// else relays on the host, and tells the client to send the body (`100 Continue`).
    pub fn relay_ready(&mut self, h: HostId, front: FlowId, s: &mut HostCx) {
        let Some(&RelayEnd::Front { back: Some(b), .. }) = s.flows[front].relay.as_deref() else { return };
        // Both ends are the proxy host's own: the client connection's server, the backend's client.
        let (Some(server), Some(client)) = (s.flows[front].tcp_server(), s.flows[b].tcp_client()) else { return };
        if client.state != State::Established || server.state != State::Established {
            return;
        }
        let size = s.flows[front].size.unwrap_or(u64::MAX);
        let spliced = self.offloads.get_mut(h.index()).and_then(Option::as_deref_mut).is_some_and(|o| o.try_splice(server, client, size));
        let splicing = if spliced { Splicing::Spliced } else { Splicing::OnHost };
        let go = (server.receiver.rcv_nxt < size).then(|| server.interim_response(CONTINUE_BYTES));
        if let Some(RelayEnd::Front { splicing: st, .. }) = s.flows[front].relay.as_deref_mut() {
            *st = splicing;
        }
        let mut cycles = Cycles::default();
        if let Some(cpu) = self.cpus.get(h.index()).and_then(Option::as_deref) {
            if splicing == Splicing::Spliced {
                cycles.add(Op::Handover, cpu.costs.handover);
            }
            if go.is_some() {
                cycles.add(Op::Tx, cpu.costs.tx_packet);
            }
        }
        self.job(h, front, cycles, s);
        if let Some(p) = go {
            self.nics[h].ctrl.push_back(p);
        }
    }

    /// Queues work of `cycles` for flow `f` on host `h`'s CPU, where it is modelled, with no
    /// outcome of its own: it only keeps the core busy.
    fn job(&mut self, h: HostId, f: FlowId, cycles: Cycles, s: &mut HostCx) {
        let Some(cpu) = self.cpus.get_mut(h.index()).and_then(Option::as_deref_mut) else { return };
        if cycles.total() == 0 {
            return;
        }
        cpu.submit(f, Io::default(), cycles, &mut s.cx);
    }

    /// Lets host `h`'s NIC put its next packet on the wire.
    #[inline]
    pub fn nic_send(&mut self, h: HostId, s: &mut HostCx) {
        let nic = &mut self.nics[h];
        let port = &mut s.ports[nic.port];
        nic.send(port, s.flows, &mut s.cx);
    }

    /// Puts flow `f` on its client's NIC scheduler.
    pub fn activate(&mut self, f: FlowId, s: &mut HostCx) {
        let flow = &mut s.flows[f];
        self.nics[flow.src].activate(flow);
    }

    /// The host's first share of carrying out `c`: replies to its NIC, a TCP-INT echo to the
    /// telemetry log, delivered bytes to the flow's record.
    #[inline]
    pub fn take_report(&mut self, c: ReportFrom, s: &mut HostCx) {
        let (f, io) = (c.flow, &mut self.io);
        if !io.replies.is_empty() {
            self.nics[c.host].ctrl.extend(io.replies.drain(..));
        }
        if io.echo {
            if let Some(snd) = s.flows[f].sender() {
                if let Some(echo) = snd.last_echo {
                    let row = TelemetryRow { t: s.cx.now, flow: f.0, srtt: snd.rtt.srtt(), cwnd: snd.win.cwnd, echo };
                    self.telemetry.record(row, s.cx.events.popped_tie());
                }
            }
        }
        if let Some((start, len)) = io.delivered {
            s.flows[f].app_receive(start, len);
        }
    }

    /// Flow `f`'s receiver at host `h` wants credit: it joins the host's pull pacer, which
    /// starts now if it was stopped. The host's first flow that runs the oversubscription
    /// control starts it.
    #[cold]
    pub fn request_pull(&mut self, h: HostId, f: FlowId, s: &mut HostCx) {
        if self.pacers.is_empty() {
            self.pacers.resize_with(self.nics.len(), || None);
        }
        let rate = s.ports[self.nics[h].port].built_rate;
        let pacer = self.pacers[h.index()].get_or_insert_with(|| Box::new(PullPacer::new(rate)));
        let now = s.cx.now;
        if pacer.control.is_none() {
            if let Some(params) = s.flows[f].server.as_ref().and_then(|e| e.uet()).and_then(|r| r.oversubscribed()) {
                // Each host's jitter is its own, whatever the partitions and threads.
                let rng = stream(self.seed ^ (h.0 as u64 + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F), 6);
                pacer.start_control(params, rng);
            }
        }
        let started = pacer.request(f, now);
        if started.pacer {
            s.cx.schedule(now, Event::PullPace(h));
        }
        if let Some(at) = started.control {
            s.cx.schedule(at, Event::PullRate(h));
        }
    }

    /// Host `h`'s oversubscription control ends an interval and sets its pacer's rate.
    #[cold]
    pub fn pull_rate(&mut self, h: HostId, s: &mut HostCx) {
        let pacer = self.pacers[h.index()].as_deref_mut().expect("a rate event for a host with a pacer");
        if let Some(at) = pacer.control_tick(s.cx.now) {
            s.cx.schedule(at, Event::PullRate(h));
        }
    }

    /// Host `h`'s pull pacer sends its next PULL, to the next flow in turn, and waits as long
    /// as the credit it granted takes on the line; a flow whose receiver has closed leaves.
    pub fn pull_pace(&mut self, h: HostId, s: &mut HostCx) {
        let pacer = self.pacers[h.index()].as_deref_mut().expect("a pull event for a host with a pacer");
        let (pull, granted) = loop {
            let Some(turn) = pacer.turn() else {
                pacer.stop();
                return;
            };
            let (Turn::Pull(f) | Turn::SlowPull(f)) = turn;
            let Some(r) = s.flows[f].server.as_mut().and_then(|e| e.uet_mut()) else { continue };
            let (pull, granted) = r.pull(matches!(turn, Turn::SlowPull(_)).then_some(PULL_QUANTA));
            let wants = r.wants_credit();
            if let (Turn::Pull(_), false) = (turn, wants) {
                r.leave_pull_queue();
            }
            pacer.requeue(turn, wants, r.takes_slow_pulls());
            break (pull, granted);
        };
        s.cx.schedule(pacer.next_at(s.cx.now, granted), Event::PullPace(h));
        self.nics[h].ctrl.push_back(pull);
        self.nic_send(h, s);
    }

    /// The host's last share of carrying out `c`, after the applications heard: release a closed
    /// connection, let a client with an interim response write the rest, wake the client's NIC,
    /// and let this host's NIC send.
    #[inline]
    pub fn settle(&mut self, c: ReportFrom, s: &mut HostCx) {
        let (h, io) = (c.host, &mut self.io);
        let flow = &mut s.flows[c.flow];
        if io.closed {
            let side = if h == flow.dst { Side::Server } else { Side::Client };
            if side == Side::Client && flow.client.as_ref().is_some_and(|c| !c.peer_closes_itself()) {
                // The server has no close of its own: the client's reaches it one path delay
                // later (at least the lookahead of any cut link on the path, so it never
                // reaches across partitions sooner than a packet could). The client knows this
                // from its own configuration; it reads nothing of the server.
                let at = s.cx.now + Time(flow.base_rtt.0 / 2);
                s.cx.schedule_to(s.host_part[flow.dst], at, Event::Timer(c.flow, TimerKind::PeerClosed, 0));
            }
            flow.close_end(side);
        }
        if io.interim {
            // The server is ready for the rest: the client's application writes it.
            if let Some(c) = flow.tcp_client_mut() {
                c.sender.set_written(u64::MAX);
                io.activate = true;
            }
        }
        if io.activate && flow.is_open(Side::Client) {
            let src = flow.src;
            self.nics[src].activate(flow);
            if src != h {
                self.nic_send(src, s);
            }
        }
        self.nic_send(h, s);
    }
}

/// Host `h`'s NIC offload, if it has one, looks at `pkt` for flow `f`'s server first; true if it
/// consumed it (its answer in `io`).
#[inline]
fn nic_takes(offloads: &mut [Option<Box<Offload>>], h: HostId, f: FlowId, pkt: &Packet, io: &mut Io, s: &mut HostCx) -> bool {
    let Some(off) = offloads.get_mut(h.index()).and_then(Option::as_deref_mut) else { return false };
    let Some(server) = s.flows[f].server.as_mut().and_then(ServerEnd::tcp_mut) else { return false };
    let consumed = off.on_segment(server, pkt, io, &mut s.cx);
    if consumed {
        s.cx.release(pkt);
    }
    consumed
}
