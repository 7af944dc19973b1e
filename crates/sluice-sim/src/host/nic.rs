//! A host NIC: control packets first, then data from active flows in round robin, each flow held
//! back by its pacer. This is where the CC engine's scheduler and pacer live.

use super::scheduler::Scheduler;
use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// One host's NIC.
#[derive(Debug, Default)]
pub struct Nic {
    /// The host's node id.
    pub node: u32,
    /// Global id of the host's single egress port.
    pub port: u32,
    /// ACKs and handshake packets, sent before any data.
    pub ctrl: VecDeque<Packet>,
    /// Flows that may have data to send: priority bands, round robin within each.
    pub active: Scheduler,
    /// A pacing wake-up is scheduled for this time.
    pub wake_at: Option<Time>,
}

impl Nic {
    /// Bytes of control packets waiting.
    pub fn ctrl_bytes(&self) -> u64 {
        self.ctrl.iter().map(|p| p.wire_bytes as u64).sum()
    }
}
