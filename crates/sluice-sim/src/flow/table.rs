//! Every flow's record, by flow id. The world a scenario builds holds one for every flow, at its
//! id; a shard (a thread's share of the partitions, `world/threads.rs`) holds only the records
//! of flows with an end at its hosts, each made when the shard first meets the flow, so memory
//! does not grow with the threads.

use super::Flow;
use crate::ids::FlowId;
use std::ops::{Index, IndexMut};

/// A flow id with no record in a shard.
const ABSENT: u32 = u32::MAX;

/// Flow records by id.
#[derive(Default)]
pub struct FlowTable {
    records: Vec<Flow>,
    /// In a shard: each flow id's place in `records` ([`ABSENT`]: none here). Empty where every
    /// flow's record is at its id, so the whole world's lookups cost what a slice's do.
    place: Vec<u32>,
}

impl FlowTable {
    /// A table with every flow's record at its id, room made for `capacity`.
    pub fn with_capacity(capacity: usize) -> FlowTable {
        FlowTable { records: Vec::with_capacity(capacity), place: Vec::new() }
    }

    /// A shard's table for ids `0..flows`, none of them with a record yet.
    pub fn sparse(flows: usize) -> FlowTable {
        FlowTable { records: Vec::new(), place: vec![ABSENT; flows] }
    }

    /// Whether every id up to [`Self::len`] has its record here.
    #[inline]
    pub fn is_whole(&self) -> bool {
        self.place.is_empty()
    }

    /// The ids the table covers.
    pub fn len(&self) -> usize {
        if self.is_whole() {
            self.records.len()
        } else {
            self.place.len()
        }
    }

    /// Whether the table covers no id.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Flow `f`'s record, if the table holds it.
    #[inline]
    pub fn get(&self, f: FlowId) -> Option<&Flow> {
        if self.is_whole() {
            self.records.get(f.index())
        } else {
            self.place.get(f.index()).and_then(|&i| self.records.get(i as usize))
        }
    }

    /// Flow `f`'s record, mutably, if the table holds it.
    #[inline]
    pub fn get_mut(&mut self, f: FlowId) -> Option<&mut Flow> {
        if self.is_whole() {
            self.records.get_mut(f.index())
        } else {
            let i = *self.place.get(f.index())?;
            self.records.get_mut(i as usize)
        }
    }

    /// Adds the record of the next flow id (a whole table) or of its own id (a shard's).
    pub fn push(&mut self, flow: Flow) {
        if self.is_whole() {
            debug_assert_eq!(flow.id.index(), self.records.len(), "a whole table takes flows in id order");
        } else {
            let place = &mut self.place[flow.id.index()];
            debug_assert_eq!(*place, ABSENT, "a shard makes a flow's record once");
            *place = self.records.len() as u32;
        }
        self.records.push(flow);
    }

    /// The records held: by id in a whole table, in the order a shard met them in a shard's.
    pub fn records(&self) -> &[Flow] {
        &self.records
    }

    /// Takes the records out, leaving the table empty.
    pub fn take_records(&mut self) -> Vec<Flow> {
        self.place.clear();
        std::mem::take(&mut self.records)
    }
}

impl Index<FlowId> for FlowTable {
    type Output = Flow;

    #[inline]
    fn index(&self, f: FlowId) -> &Flow {
        if self.is_whole() {
            &self.records[f.index()]
        } else {
            &self.records[self.place[f.index()] as usize]
        }
    }
}

impl IndexMut<FlowId> for FlowTable {
    #[inline]
    fn index_mut(&mut self, f: FlowId) -> &mut Flow {
        if self.is_whole() {
            &mut self.records[f.index()]
        } else {
            &mut self.records[self.place[f.index()] as usize]
        }
    }
}
