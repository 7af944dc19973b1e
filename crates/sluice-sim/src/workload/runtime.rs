//! The application runtime: the closed-loop applications of a run, what they hear (a flow or a
//! message delivered in full, a transaction answered, a timer) and the requests they completed.
//! What an application asks for in return ([`AppIo`]: flows to open, messages to send, timers)
//! the world carries out, since opening a flow builds a transport at a host.

use crate::ids::FlowId;
use super::app::{App, AppIo, Request};
use crate::flow::Flow;
use crate::time::Time;
use crate::transport::ClientEnd;
use std::collections::HashMap;

/// The applications of a run.
pub struct Runtime {
    /// Every application, by index.
    pub apps: Vec<Box<dyn App>>,
    /// Requests (and incast rounds) completed, in completion order.
    pub requests: Vec<Request>,
    /// Persistent connections by (source, destination, class).
    pub connections: HashMap<(usize, usize, usize), FlowId>,
    /// The applications' reused record of what they ask for.
    io: AppIo,
}

impl Runtime {
    /// A runtime for `apps`.
    pub fn new(apps: Vec<Box<dyn App>>) -> Runtime {
        Runtime { apps, requests: Vec::new(), connections: HashMap::new(), io: AppIo::default() }
    }

    /// Application `a` starts.
    pub fn start(&mut self, a: u32, now: Time) -> AppIo {
        let mut io = std::mem::take(&mut self.io);
        self.apps[a as usize].start(now, &mut io);
        io
    }

    /// Application `a`'s timer `tag` fires.
    pub fn timer(&mut self, a: u32, tag: u32, now: Time) -> AppIo {
        let mut io = std::mem::take(&mut self.io);
        self.apps[a as usize].on_timer(tag, now, &mut io);
        io
    }

    /// Tells the flow's application what the receiver now has in full: the whole flow, or on a
    /// persistent connection each message up to the bytes delivered in order. Returns the
    /// application and what it asks for, if it heard.
    pub fn delivered(&mut self, flow: &mut Flow, now: Time) -> Option<(u32, AppIo)> {
        let delivered = flow.bytes_delivered();
        let transaction = flow.response.is_some();
        let (Some((a, flow_tag)), false) = (flow.app, transaction) else {
            // A transaction's application hears of the response instead.
            if flow.rx_done.is_none() && flow.size == Some(delivered) {
                flow.rx_done = Some(now);
            }
            return None;
        };
        let persistent = flow.client.as_ref().is_some_and(ClientEnd::is_persistent);
        let complete = if persistent {
            flow.messages.front().is_some_and(|&(end, _)| end <= delivered)
        } else {
            flow.rx_done.is_none() && flow.size == Some(delivered)
        };
        if !complete {
            return None;
        }
        let mut io = std::mem::take(&mut self.io);
        if persistent {
            while let Some(&(end, tag)) = flow.messages.front() {
                if end > delivered {
                    break;
                }
                flow.messages.pop_front();
                self.apps[a as usize].on_delivered(tag, now, &mut io);
            }
        } else {
            flow.rx_done = Some(now);
            self.apps[a as usize].on_delivered(flow_tag, now, &mut io);
        }
        Some((a, io))
    }

    /// A transaction's response reached its client: the application that opened it hears.
    pub fn answered(&mut self, flow: &mut Flow, now: Time) -> Option<(u32, AppIo)> {
        if flow.answered.is_some() {
            return None;
        }
        flow.answered = Some(now);
        let (a, tag) = flow.app?;
        let mut io = std::mem::take(&mut self.io);
        self.apps[a as usize].on_delivered(tag, now, &mut io);
        Some((a, io))
    }

    /// Takes back an application's record once the world carried it out, keeping its completed
    /// requests.
    pub fn give_back(&mut self, mut io: AppIo) {
        self.requests.append(&mut io.completed);
        self.io = io;
    }

    /// Whether every application is done opening flows.
    pub fn done(&self) -> bool {
        self.apps.iter().all(|a| a.done())
    }
}
