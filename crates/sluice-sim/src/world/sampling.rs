//! Queue-depth and window samples, taken by the run's own events on the elements each shard runs.

use crate::ids::FlowId;
use super::World;
use crate::context::{Event, SampleKind};
use crate::net::fabric::Role;
use crate::time::Time;

/// One queue-depth sample.
#[derive(Clone, Copy, Debug)]
pub struct QueueSample {
    /// Sample time.
    pub t: Time,
    /// Global port id.
    pub port: u32,
    /// Bytes queued (at a host: control packets and the data its flows' windows let out).
    pub bytes: u64,
}

/// One congestion-window sample, with the algorithm's named state.
#[derive(Clone, Debug)]
pub struct CwndSample {
    /// Sample time.
    pub t: Time,
    /// Flow id.
    pub flow: u32,
    /// Window in bytes.
    pub cwnd: u64,
    /// The algorithm's state variables at that time, in the order it names them.
    pub state: Vec<(&'static str, f64)>,
}

/// How `fct_buckets.csv` groups flows by size.
#[derive(Clone, Debug, PartialEq)]
pub enum Bucketing {
    /// Equal-count buckets of this percent of the flows each.
    Percent(f64),
    /// Explicit ascending upper edges in bytes.
    Edges(Vec<u64>),
}

impl Default for Bucketing {
    fn default() -> Self {
        Bucketing::Percent(5.0)
    }
}


impl World {
    /// Samples the queues asked for, at the ports this world runs.
    #[inline(never)]
    pub(super) fn sample_queues(&mut self, now: Time) {
        for &p in &self.queue_ports {
            let port = &self.net.ports[p as usize];
            if !self.own[self.parts.of_node[port.node as usize].index()] {
                continue;
            }
            let bytes = match self.net.roles[port.node as usize] {
                Role::Switch(s) => self.net.switches[s as usize].queued_bytes(port),
                Role::Host(h) => self.hosts.nics[h].backlog_bytes(&self.flows),
            };
            self.queue_samples.push(QueueSample { t: now, port: p, bytes });
        }
        self.q.push(now + self.queue_interval, Event::Sample(SampleKind::Queues));
    }

    /// Samples the windows of the flows asked for whose clients this world runs.
    #[inline(never)]
    pub(super) fn sample_cwnd(&mut self, now: Time) {
        for i in 0..self.cwnd_flows.len() {
            let f = FlowId(self.cwnd_flows[i]);
            if !self.own[self.host_part[self.src_of(f)].index()] {
                continue;
            }
            let started = self.specs.get(f.index()).is_none_or(|spec| spec.start <= now);
            if started {
                // Its start may come later in this instant: its window is the initial one.
                self.connect_now(f);
            }
            // A shard has no record of a flow it has not met, one that has not started.
            let Some(flow) = self.flows.get(f) else { continue };
            if let (true, None, Some(t)) = (flow.start <= now, flow.finish, flow.client.as_ref()) {
                let (win, cc) = t.congestion();
                self.cwnd_samples.push(CwndSample { t: now, flow: f.0, cwnd: win.cwnd, state: cc.state() });
            }
        }
        self.q.push(now + self.cwnd_interval, Event::Sample(SampleKind::Cwnd));
    }
}
