//! The CC engine's scheduler across a host's flows: strict priority between classes (the class's
//! `priority`, 0 first), round robin among the flows of one priority.

use crate::ids::FlowId;
use std::collections::VecDeque;

/// Active flows in priority bands.
#[derive(Debug, Default)]
pub struct Scheduler {
    bands: Vec<VecDeque<FlowId>>,
}

impl Scheduler {
    /// Queues flow `f` at the back of band `prio`.
    pub fn push(&mut self, prio: u8, f: FlowId) {
        let b = prio as usize;
        if self.bands.len() <= b {
            self.bands.resize_with(b + 1, VecDeque::new);
        }
        self.bands[b].push_back(f);
    }

    /// Queues flow `f` at the front of band `prio`, to be served again before the others.
    pub fn push_front(&mut self, prio: u8, f: FlowId) {
        let b = prio as usize;
        if self.bands.len() <= b {
            self.bands.resize_with(b + 1, VecDeque::new);
        }
        self.bands[b].push_front(f);
    }

    /// Number of priority bands in use.
    pub fn bands(&self) -> usize {
        self.bands.len()
    }

    /// Flows waiting in band `b`.
    pub fn band_len(&self, b: usize) -> usize {
        self.bands[b].len()
    }

    /// Takes the flow at the front of band `b`.
    pub fn pop(&mut self, b: usize) -> Option<FlowId> {
        self.bands[b].pop_front()
    }

    /// Every queued flow, highest priority first.
    pub fn iter(&self) -> impl Iterator<Item = FlowId> + '_ {
        self.bands.iter().flatten().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_keep_priority_order_and_fifo_within() {
        let mut s = Scheduler::default();
        s.push(2, FlowId(7));
        s.push(0, FlowId(1));
        s.push(0, FlowId(2));
        let ids = |s: &Scheduler| s.iter().map(|f| f.0).collect::<Vec<_>>();
        assert_eq!(ids(&s), [1, 2, 7]);
        assert_eq!(s.pop(0), Some(FlowId(1)));
        s.push(0, FlowId(1));
        assert_eq!(ids(&s), [2, 1, 7]);
        assert_eq!((s.bands(), s.band_len(1)), (3, 0));
    }
}
