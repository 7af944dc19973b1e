//! Closed-loop request/response clients: each client keeps a number of requests outstanding; a
//! request is a flow to a server, the response a flow back once the server has the whole request,
//! and the client waits a think time before issuing the next. Each request and response is a new
//! connection, or a message on a persistent connection per client, server and direction, or
//! both travel on one connection per request (a transaction: the server answers on its FIN, as a
//! key-value server closing after each reply does).

use super::app::{App, AppIo, Request};
use super::{Classify, FlowSpec, Qos, SizeSource};
use crate::time::Time;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The configuration of one client population.
pub struct RpcConfig {
    /// Client host ordinals.
    pub clients: Vec<usize>,
    /// Server host ordinals (each request picks one uniformly, never the client itself).
    pub servers: Vec<usize>,
    /// Requests each client keeps outstanding.
    pub outstanding: usize,
    /// Request sizes.
    pub request: SizeSource,
    /// Response sizes.
    pub response: SizeSource,
    /// How requests and responses travel.
    pub connections: Connections,
    /// Wait between a response arriving and the next request on that slot.
    pub think_time: Time,
    /// When clients start.
    pub start: Time,
    /// No request is issued at or after this time.
    pub stop: Time,
    /// Picks the class of each flow from its endpoints.
    pub class: Classify,
    /// QoS of every flow.
    pub qos: Qos,
}

/// How an RPC population's requests and responses travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connections {
    /// A new connection for every request and every response.
    PerRequest,
    /// Messages on one long-lived connection per client, server and direction.
    Persistent,
    /// One connection per request; the server answers on its FIN.
    Transaction,
}

/// Where one outstanding-request slot is.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// The request flow is on its way to `server`.
    Requesting { server: usize, since: Time },
    /// The response flow is on its way back.
    Responding { since: Time },
    /// Waiting out the think time.
    Thinking,
    /// Retired after the stop time (or not started).
    Idle,
}

/// A population of closed-loop clients.
pub struct RpcClients {
    cfg: RpcConfig,
    rng: Xoshiro256PlusPlus,
    /// Slot `i` belongs to client `i / outstanding`.
    slots: Vec<Slot>,
    started: bool,
}

impl RpcClients {
    /// Clients with their own random stream for server choice and sizes.
    pub fn new(cfg: RpcConfig, rng: Xoshiro256PlusPlus) -> RpcClients {
        let slots = vec![Slot::Idle; cfg.clients.len() * cfg.outstanding];
        RpcClients { cfg, rng, slots, started: false }
    }

    fn client(&self, slot: usize) -> usize {
        self.cfg.clients[slot / self.cfg.outstanding]
    }

    /// Sends a request or response: a new connection, or a message on the persistent one.
    fn transfer(&self, spec: FlowSpec, tag: u32, io: &mut AppIo) {
        if self.cfg.connections == Connections::Persistent {
            io.send.push((spec, tag));
        } else {
            io.open.push((spec, tag));
        }
    }

    /// Issues the next request on `slot`, unless the stop time has passed.
    fn issue(&mut self, slot: usize, now: Time, io: &mut AppIo) {
        if now >= self.cfg.stop {
            self.slots[slot] = Slot::Idle;
            return;
        }
        let client = self.client(slot);
        let choices = self.cfg.servers.iter().filter(|&&s| s != client).count();
        let pick = self.rng.gen_range(0..choices);
        let server = *self.cfg.servers.iter().filter(|&&s| s != client).nth(pick).expect("pick < choices");
        let size = self.cfg.request.draw(&mut self.rng);
        let class = (self.cfg.class)(client, server);
        let mut spec = FlowSpec { src: client, dst: server, size: Some(size), start: now, class, qos: self.cfg.qos, response: None, relay: None };
        if self.cfg.connections == Connections::Transaction {
            // The answer comes back on the same connection: the next delivery is the response.
            spec.response = Some(self.cfg.response.draw(&mut self.rng) as u32);
            self.transfer(spec, slot as u32, io);
            self.slots[slot] = Slot::Responding { since: now };
            return;
        }
        self.transfer(spec, slot as u32, io);
        self.slots[slot] = Slot::Requesting { server, since: now };
    }
}

impl App for RpcClients {
    fn start_time(&self) -> Time {
        self.cfg.start
    }

    fn start(&mut self, now: Time, io: &mut AppIo) {
        self.started = true;
        for slot in 0..self.slots.len() {
            self.issue(slot, now, io);
        }
    }

    fn on_delivered(&mut self, tag: u32, now: Time, io: &mut AppIo) {
        let slot = tag as usize;
        match self.slots[slot] {
            Slot::Requesting { server, since } => {
                let size = self.cfg.response.draw(&mut self.rng);
                let client = self.client(slot);
                let class = (self.cfg.class)(server, client);
                let spec = FlowSpec { src: server, dst: client, size: Some(size), start: now, class, qos: self.cfg.qos, response: None, relay: None };
                self.transfer(spec, tag, io);
                self.slots[slot] = Slot::Responding { since };
            }
            Slot::Responding { since } => {
                let class = (self.cfg.class)(self.client(slot), self.cfg.servers[0]);
                io.completed.push(Request { class, start: since, end: now });
                if self.cfg.think_time == Time::ZERO {
                    self.issue(slot, now, io);
                } else {
                    self.slots[slot] = Slot::Thinking;
                    io.timers.push((now + self.cfg.think_time, tag));
                }
            }
            Slot::Thinking | Slot::Idle => debug_assert!(false, "a delivery for a slot with no flow"),
        }
    }

    fn on_timer(&mut self, tag: u32, now: Time, io: &mut AppIo) {
        self.issue(tag as usize, now, io);
    }

    fn done(&self) -> bool {
        self.started && self.slots.iter().all(|s| matches!(s, Slot::Idle))
    }
}
