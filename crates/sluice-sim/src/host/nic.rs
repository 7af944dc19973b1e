//! A host NIC, the OpenCC congestion-control engine: a control queue served first, then the
//! scheduler across the host's flows (strict priority, round robin within), each flow held back
//! by its CC's pacer and the application's rate limiter, and segmentation by the flow's transport.

use crate::ids::{FlowId, HostId, PortId};
use super::scheduler::Scheduler;
use crate::context::{Cx, Event};
use crate::flow::{Flow, FlowTable};
use crate::net::port::Port;
use crate::packet::Packet;
use crate::time::Time;
use std::collections::VecDeque;

/// One host's NIC.
#[derive(Debug, Default)]
pub struct Nic {
    /// The host's ordinal.
    pub host: HostId,
    /// Global id of the host's single egress port.
    pub port: PortId,
    /// ACKs and handshake packets, sent before any data.
    pub ctrl: VecDeque<Packet>,
    /// Flows that may have data to send: priority bands, round robin within each.
    pub active: Scheduler,
    /// A pacing wake-up is scheduled for this time.
    pub wake_at: Option<Time>,
}

impl Nic {
    /// Puts `flow` on the scheduler, if it is not there already.
    #[inline]
    pub fn activate(&mut self, flow: &mut Flow) {
        if !flow.in_active {
            flow.in_active = true;
            self.active.push(flow.prio, flow.id);
        }
    }

    /// Puts the host's next packet on the wire if the port is free: control first, then data.
    pub fn send(&mut self, port: &mut Port, flows: &mut FlowTable, cx: &mut Cx) {
        let now = cx.now;
        if !port.idle(now) {
            port.wake_when_free(self.port, cx);
            return;
        }
        if port.tx_event_pending {
            return;
        }
        // PFC: priorities the switch above paused wait, control packets included.
        let paused = port.pause.mask(now);
        let ctrl = match paused {
            0 => self.ctrl.pop_front(),
            _ => self.ctrl.iter().position(|p| !is_paused(paused, p.prio)).and_then(|i| self.ctrl.remove(i)),
        };
        let (pkt, data_from) = match ctrl {
            Some(p) => (p, None),
            None => match self.next_data_packet(flows, paused, cx) {
                Some((p, f)) => (p, Some(f)),
                None => return,
            },
        };
        cx.counters.packets_sent += 1;
        port.transmit(self.port, &pkt, cx);
        // Wake at the end of serialization only if there is more to send; otherwise the next
        // ACK or flow start calls `send`, which schedules the wake if the port is still busy.
        if self.has_backlog(flows, data_from) {
            port.wake_when_free(self.port, cx);
        }
    }

    /// Whether a control packet is queued or an active flow's window lets it send. The flow that
    /// sent the last data packet (`data_from`, active again) is asked first: it is in cache and
    /// most often the one with more to send, where the others' state is a miss each.
    fn has_backlog(&self, flows: &FlowTable, data_from: Option<FlowId>) -> bool {
        let sendable = |f: FlowId| flows[f].client.as_ref().is_some_and(|t| t.has_sendable());
        !self.ctrl.is_empty() || data_from.is_some_and(sendable) || self.active.iter().any(sendable)
    }

    /// The scheduler: the highest-priority band with a flow ready to send and not paused by PFC,
    /// round robin within it, skipping flows their pacer or rate limiter holds back (and waking
    /// for the earliest). Returns the packet and its flow.
    fn next_data_packet(&mut self, flows: &mut FlowTable, paused: u8, cx: &mut Cx) -> Option<(Packet, FlowId)> {
        let mut earliest: Option<Time> = None;
        for band in 0..self.active.bands() {
            if is_paused(paused, band as u8) {
                continue;
            }
            if let Some(pkt) = self.next_in_band(band, flows, cx, &mut earliest) {
                return Some(pkt);
            }
        }
        if let Some(t) = earliest {
            if self.wake_at.is_none_or(|w| w > t) {
                self.wake_at = Some(t);
                cx.schedule(t, Event::NicWake(self.host));
            }
        }
        None
    }

    /// One round-robin pass over a priority band; notes the earliest time a held flow may send.
    fn next_in_band(&mut self, band: usize, flows: &mut FlowTable, cx: &mut Cx, earliest: &mut Option<Time>) -> Option<(Packet, FlowId)> {
        let now = cx.now;
        for _ in 0..self.active.band_len(band) {
            let f = self.active.pop(band)?;
            let flow = &mut flows[f];
            let Some(t) = flow.client.as_mut() else {
                flow.in_active = false;
                continue;
            };
            let ready = t.ready_at(now);
            if ready > now {
                if t.has_sendable() {
                    *earliest = Some(earliest.map_or(ready, |e| e.min(ready)));
                    self.active.push(band as u8, f);
                } else {
                    flow.in_active = false;
                }
                continue;
            }
            let Some(pkt) = t.next_packet(cx) else {
                flow.in_active = false;
                continue;
            };
            if t.mid_packet() {
                self.active.push_front(band as u8, f);
            } else {
                self.active.push(band as u8, f);
            }
            return Some((pkt, f));
        }
        None
    }

    /// Bytes waiting at the NIC: control packets, and data the active flows' windows let out
    /// now (what a queue sample of the host's port reports).
    pub fn backlog_bytes(&self, flows: &FlowTable) -> u64 {
        let ctrl: u64 = self.ctrl.iter().map(|p| p.wire_bytes as u64).sum();
        // Saturating: an endless flow with an open window (a rate-based algorithm's) has no end.
        let data = self.active.iter().filter_map(|f| flows[f].client.as_ref().map(|t| t.sendable_bytes())).fold(0u64, u64::saturating_add);
        ctrl.saturating_add(data)
    }
}

crate::ids::indexed_by!(HostId => Nic);

/// True if priority `prio` has its bit in the `paused` mask.
#[inline]
fn is_paused(paused: u8, prio: u8) -> bool {
    prio < 8 && paused & (1 << prio) != 0
}
