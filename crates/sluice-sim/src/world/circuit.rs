//! A reconfigurable network's day changes: each ToR this world runs serves its uplinks for the
//! new day, acting for its own partition.

use super::World;
use crate::context::{Cx, Event};
use crate::time::Time;

impl World {
    /// The circuit schedule turns to its next day.
    #[inline(never)]
    pub(super) fn circuit_day(&mut self, now: Time) {
        for s in 0..self.net.switches.len() {
            let node = self.net.switches[s].node as usize;
            if self.net.switches[s].tor.is_none() || !self.own[self.parts.of_node[node].index()] {
                continue;
            }
            // Each ToR acts for its own partition.
            if self.parts.count > 1 {
                self.act_as(self.parts.of_node[node].index());
            }
            let sw = &mut self.net.switches[s];
            let ports = &mut self.net.ports[sw.first_port as usize..self.net.port_base[node + 1] as usize];
            let mut cx = cx!(self, now);
            sw.serve_uplinks(ports, &mut cx);
        }
        self.act_as(self.global);
        if let Some(next) = self.circuit.as_ref().and_then(|c| c.schedule.next_change(now)) {
            self.q.push(next, Event::Circuit);
        }
    }
}
