//! What a transport's report leads to: its host's stack, then the applications and the proxy,
//! then back to the host, in one fixed order; and what applications ask for.

use crate::ids::{FlowId, HostId};
use super::World;
use crate::context::{Cx, Event};
use crate::flow::waits::Done;
use crate::host::splice::Relayed;
use crate::host::stack::{ReportFrom, HostCx};
use crate::time::Time;
use crate::transport::{ClientEnd, Side};
use crate::workload::app::AppIo;
use crate::workload::proxy::{self, RelayEnd, Splicing};

impl World {
    /// Carries out what a transport reported: the host's share first (replies, telemetry, the
    /// bytes for the record), then the applications' and the flow table's (delivery, the proxy,
    /// a transaction's answer, completion), then the host's last share (release, waking NICs).
    pub(super) fn carry_out(&mut self, c: Option<ReportFrom>, now: Time) {
        let Some(c) = c else { return };
        let (f, h) = (c.flow, c.host);
        self.hosts.take_report(c, &mut host_cx!(self, now));
        let report = self.hosts.report();
        let (delivered, response, completed) = (report.delivered.is_some(), report.response, report.completed);
        if delivered {
            // Whether this delivery completes the flow, for the flows that wait for it.
            let arriving = self.waits.is_some() && self.flows[f].rx_done.is_none();
            if let Some((a, io)) = self.runtime.delivered(&mut self.flows[f], now) {
                self.apply_app_io(a, io, now);
            }
            if arriving && self.flows[f].rx_done.is_some() {
                self.release(f, Done::Arrived, now);
            }
        }
        if self.flows[f].relay.is_some() {
            // The proxy may open the backend connection, whose report comes in between.
            let outer = self.hosts.set_aside();
            self.relay_step(f, h, now);
            self.hosts.restore(outer);
        }
        // Only a flow that expects a response (a transaction) takes the server's FIN as one: the
        // backend's FIN on a proxy's relayed connection is not a second completion.
        if response && self.flows[f].response.is_some() {
            if let Some((a, io)) = self.runtime.answered(&mut self.flows[f], now) {
                self.apply_app_io(a, io, now);
            }
        }
        let flow = &mut self.flows[f];
        if completed && flow.finish.is_none() {
            flow.finish = Some(now);
            if flow.size.is_some() && !flow.client.as_ref().is_some_and(ClientEnd::is_persistent) {
                self.unfinished -= 1;
            }
            if self.waits.is_some() {
                self.release(f, Done::Acknowledged, now);
            }
            self.stop_if_done();
        }
        self.hosts.settle(c, &mut host_cx!(self, now));
    }

    /// Host `h`'s NIC relayed a segment of a spliced connection: the rewritten segment goes on,
    /// a close seen end to end closes the proxy's ends of both connections, and the host takes
    /// the share that is its own.
    #[cold]
    pub(super) fn spliced(&mut self, h: HostId, r: Box<Relayed>, now: Time) {
        if let Some(out) = r.out {
            self.hosts.nics[h].ctrl.push_back(out);
        }
        if let Some((front, back)) = r.closed {
            for (f, side) in [(front, Side::Server), (back, Side::Client)] {
                let c = self.hosts.spliced_closed(h, f, side, &mut host_cx!(self, now));
                self.carry_out(c, now);
            }
            self.hosts.handover(h, front, &mut host_cx!(self, now));
        }
        match r.to_host {
            Some(own) => {
                let c = self.hosts.stack_rx(h, own, &mut host_cx!(self, now));
                self.carry_out(c, now);
            }
            None => self.hosts.nic_send(h, &mut host_cx!(self, now)),
        }
    }

    /// The proxy on host `h` acts on a change to flow `f`, one of a request's connections: writes
    /// on, connects to the backend, asks its NIC to splice.
    pub(super) fn relay_step(&mut self, f: FlowId, h: HostId, now: Time) {
        let Some(step) = proxy::relay_step(&mut self.flows, f, h, now) else { return };
        if let Some(b) = step.write {
            self.hosts.activate(b, &mut host_cx!(self, now));
        }
        if let Some(spec) = step.connect {
            let b = self.add_flow(&spec);
            proxy::attach_backend(&mut self.flows, step.front, b);
            let c = self.hosts.with_client(b, h, &mut host_cx!(self, now), |c, io, cx| c.open(io, cx));
            self.carry_out(c, now);
        }
        if step.waiting {
            self.hosts.relay_ready(h, step.front, &mut host_cx!(self, now));
        }
    }

    /// Flow `f` is done as `how` says: the flows that waited for nothing else start after their
    /// compute delay, at their own host (a flow waits only for what its host sees, or the fabric
    /// is one partition), so each start is this shard's to make.
    #[cold]
    fn release(&mut self, f: FlowId, how: Done, now: Time) {
        let mut ready = std::mem::take(&mut self.released);
        self.waits.as_deref_mut().expect("a run with waits").done(f, how, now, &mut ready);
        for (at, w) in ready.drain(..) {
            self.q.push(at, Event::FlowStart(w));
        }
        self.released = ready;
    }

    /// Carries out what an application asked for: new flows, messages, timers, completed requests.
    pub(super) fn apply_app_io(&mut self, a: u32, mut io: AppIo, now: Time) {
        for (spec, tag) in io.open.drain(..) {
            let f = self.add_flow(&spec);
            let flow = &mut self.flows[f];
            match spec.relay {
                // The proxy hears of the request; the client hears when the backend has it.
                Some(relay) => {
                    flow.relay =
                        Some(Box::new(RelayEnd::Front { relay, app: (a, tag), back: None, splicing: Splicing::Waiting }));
                    if flow.size.is_some_and(|s| s > relay.header) {
                        // The client sends the header and waits for the proxy's `100 Continue`.
                        if let Some(c) = flow.tcp_client_mut() {
                            c.sender.set_written(relay.header);
                        }
                    }
                }
                None => flow.app = Some((a, tag)),
            }
            self.q.push(spec.start.max(now), Event::FlowStart(f));
        }
        for (spec, tag) in io.send.drain(..) {
            let size = spec.size.expect("messages have a size");
            let key = (spec.src, spec.dst, spec.class);
            let live = self.runtime.connections.get(&key).copied().filter(|&f| self.flows[f].client.is_some());
            if let Some(f) = live {
                let flow = &mut self.flows[f];
                let t = flow.client.as_mut().expect("a live connection has a client");
                let (new_size, established) = t.append(size);
                flow.size = new_size;
                flow.messages.push_back((flow.size.expect("a persistent connection has a size"), tag));
                if established {
                    let src = flow.src;
                    let s = &mut host_cx!(self, now);
                    self.hosts.activate(f, s);
                    self.hosts.nic_send(src, s);
                }
            } else {
                let f = self.add_flow(&spec);
                // A connection outlives its messages: the run ends without waiting for it.
                self.unfinished -= 1;
                let flow = &mut self.flows[f];
                flow.client.as_mut().expect("a new connection has a client").make_persistent();
                flow.app = Some((a, 0));
                flow.messages.push_back((size, tag));
                self.runtime.connections.insert(key, f);
                self.q.push(spec.start.max(now), Event::FlowStart(f));
            }
        }
        for (at, tag) in io.timers.drain(..) {
            self.q.push(at, Event::AppTimer(a, tag));
        }
        self.runtime.give_back(io);
        self.stop_if_done();
    }
}
