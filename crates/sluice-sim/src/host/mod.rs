//! Hosts: the NIC that carries the CC engine (scheduling across flows, pacing).

pub mod nic;
pub mod pacer;
