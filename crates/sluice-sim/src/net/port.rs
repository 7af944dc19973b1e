//! An egress port: a serializer at line rate in front of a link, with its queue, its queue
//! discipline and counters. It puts packets on its wire itself.

use crate::ids::PortId;
use super::link::Link;
use super::pfc::{pause_time, PauseState};
use super::qdisc::Discipline;
use super::queue::PortQueue;
use crate::context::{Cx, DropReason, Event};
use crate::packet::Packet;
use crate::time::{Rate, Time};
use rand::Rng;
use std::collections::VecDeque;

/// One egress port of a node, owning the outgoing direction of its link.
///
/// Laid out so that a packet crossing an idle port touches its first four cache lines only: the
/// serializer and counters; the wire and the meter; the queue's byte count; the marking.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Port {
    /// The serializer is busy until then.
    pub busy_until: Time,
    /// Line rate.
    pub rate: Rate,
    /// Bytes sent on the wire.
    pub tx_bytes: u64,
    /// Packets sent on the wire.
    pub tx_packets: u64,
    /// The PFC pauses this port honours, and its counts.
    pub pause: PauseState,
    /// Node this port belongs to.
    pub node: u32,
    /// Node at the far end of the link.
    pub peer_node: u32,
    /// Global id of the port at the far end facing back (the ingress port of what this sends).
    pub peer_port: u32,
    /// Local port number at the node.
    pub local: u16,
    /// A transmit-done event is scheduled.
    pub tx_event_pending: bool,
    /// The outgoing wire.
    pub link: Link,
    /// Recent transmit rate, kept on ports of INT-capable switches.
    pub meter: Option<TxMeter>,
    /// Packets waiting to be serialized.
    pub queue: PortQueue,
    /// Admission limits and ECN marking for this port's queue.
    pub discipline: Discipline,
    /// PFC frames waiting for the serializer, sent before any queued packet.
    pub control: VecDeque<Packet>,
    /// Line rate as built, which a failure's slowdown (`net/failure.rs`) leaves alone: what a
    /// flow's ideal path and a port's utilization are worked out from, whichever partition asks.
    pub built_rate: Rate,
}

/// Transmit rate over a sliding window, from two fixed windows: the current one and the previous
/// one weighted by how much of it still overlaps the sliding window.
#[derive(Clone, Copy, Debug)]
pub struct TxMeter {
    window: Time,
    start: Time,
    cur: u64,
    prev: u64,
}

impl TxMeter {
    /// A meter over `window` (positive).
    pub fn new(window: Time) -> TxMeter {
        TxMeter { window, start: Time::ZERO, cur: 0, prev: 0 }
    }

    fn roll(&mut self, now: Time) {
        if now < self.start + self.window {
            return;
        }
        let k = (now - self.start).0 / self.window.0;
        self.prev = if k == 1 { self.cur } else { 0 };
        self.cur = 0;
        self.start += Time(k * self.window.0);
    }

    /// Counts `bytes` leaving at `now`.
    pub fn on_tx(&mut self, now: Time, bytes: u64) {
        self.roll(now);
        self.cur += bytes;
    }

    /// Utilization of `rate` over the window ending at `now` (1.0 = line rate).
    pub fn utilization(&mut self, now: Time, rate: Rate) -> f64 {
        self.roll(now);
        let into = (now - self.start).0 as f64 / self.window.0 as f64;
        let bytes = self.prev as f64 * (1.0 - into) + self.cur as f64;
        bytes * 8.0 / (rate.0 as f64 * self.window.secs_f64())
    }
}

crate::ids::indexed_by!(PortId => Port);

impl Port {
    /// An idle port.
    pub fn new(node: u32, local: u16, peer_node: u32, rate: Rate, link: Link, bands: usize) -> Port {
        Port {
            node,
            local,
            peer_node,
            peer_port: u32::MAX,
            rate,
            built_rate: rate,
            link,
            queue: PortQueue::new(bands),
            discipline: Discipline::default(),
            busy_until: Time::ZERO,
            tx_event_pending: false,
            tx_bytes: 0,
            tx_packets: 0,
            meter: None,
            control: VecDeque::new(),
            pause: PauseState::default(),
        }
    }

    /// A PFC frame reached this port (the port facing the frame's sender): it pauses or resumes the
    /// frame's priority. Returns when to look again if it paused (unless a resume or a refresh comes
    /// first), or `None` if it resumed, so what waited may go now.
    pub fn take_pfc_frame(&mut self, frame: &Packet, now: Time) -> Option<Time> {
        let duration = pause_time(frame.pause_quanta, self.rate);
        self.pause.on_frame(frame.prio, duration, now);
        (frame.pause_quanta > 0).then(|| now + duration)
    }

    /// True when the serializer is free at `now`.
    #[inline]
    pub fn idle(&self, now: Time) -> bool {
        self.busy_until <= now
    }

    /// Starts serializing `pkt` on this port (global id `id`) now; it arrives at the far end
    /// after serialization plus propagation, unless the link loses it.
    #[inline]
    pub fn transmit(&mut self, id: PortId, pkt: &Packet, cx: &mut Cx) {
        let now = cx.now;
        if let Some(cap) = cx.capture.as_deref_mut() {
            cap.on_wire(id.0, pkt, now, cx.events.popped_tie());
        }
        let bytes = pkt.wire_bytes as u64;
        let done = now + self.rate.tx_time(bytes);
        self.busy_until = done;
        self.tx_bytes += bytes;
        self.tx_packets += 1;
        if self.link.lossy && self.loses(pkt, cx) {
            return;
        }
        let arrival = done + self.link.delay;
        let place = cx.flying.put(pkt);
        // Across a cut link every packet's arrival is scheduled here, by the sender's partition:
        // whether the link is empty depends on the far partition's progress.
        if self.link.cut {
            // Its arrival event alone carries it: the wire's queue belongs to this partition,
            // and the far one takes the packet.
            cx.counters.sent_across += !pkt.is_pfc() as u64;
            cx.schedule_to(self.link.far_part, arrival, Event::Arrive(id, place));
            return;
        }
        if self.link.in_flight.is_empty() {
            cx.schedule(arrival, Event::Arrive(id, place));
        }
        self.link.in_flight.push_back((arrival, place));
    }

    /// Whether the wire loses `pkt`, which it drops and counts if so. Everything is lost on a
    /// link that is down; otherwise each packet is with the link's probability, except PFC
    /// frames: the model keeps the pause protocol itself reliable.
    #[cold]
    fn loses(&self, pkt: &Packet, cx: &mut Cx) -> bool {
        let reason = if self.link.down {
            DropReason::LinkDown
        } else if !pkt.is_pfc() && cx.rng.loss.gen::<f64>() < self.link.loss {
            DropReason::LinkLoss
        } else {
            return false;
        };
        cx.drop_packet(pkt, reason);
        true
    }

    /// Makes sure a transmit-done event will wake this port when its serializer frees up.
    #[inline]
    pub fn wake_when_free(&mut self, id: PortId, cx: &mut Cx) {
        if !self.tx_event_pending {
            self.tx_event_pending = true;
            cx.schedule(self.busy_until, Event::TxDone(id));
        }
    }

    /// Bytes serialized onto the wire by `t`: a frame still in service at `t` counts only for
    /// the part already sent.
    pub fn bytes_serialized_by(&self, t: Time) -> u64 {
        let rest = self.busy_until.saturating_sub(t).0 as u128;
        let unsent = (self.rate.0 as u128 * rest).div_ceil(8_000_000_000_000) as u64;
        self.tx_bytes.saturating_sub(unsent)
    }

    /// Fraction of line rate (as built) used over [0, `over`]: bytes serialized x 8 / (rate x
    /// time).
    pub fn utilization(&self, over: Time) -> f64 {
        let capacity = self.built_rate.0 as f64 * over.secs_f64();
        if capacity > 0.0 {
            self.bytes_serialized_by(over) as f64 * 8.0 / capacity
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_spans_seven_cache_lines_with_its_queue_in_the_first_four() {
        // An idle port's packet touches the first four lines only (the type's comment).
        assert_eq!(std::mem::size_of::<Port>(), 448);
        assert!(std::mem::offset_of!(Port, queue) < 256);
    }

    #[test]
    fn meter_reads_line_rate_when_saturated_and_decays_when_idle() {
        let rate = Rate(10_000_000_000);
        let mut m = TxMeter::new(Time::from_secs_f64(10e-6));
        // 1250 B every 1 us is exactly 10 Gb/s.
        let mut t = Time::ZERO;
        for _ in 0..100 {
            m.on_tx(t, 1250);
            t += Time::from_secs_f64(1e-6);
        }
        let u = m.utilization(t, rate);
        assert!((u - 1.0).abs() < 0.11, "{u}");
        let half_later = t + Time::from_secs_f64(5e-6);
        assert!((m.utilization(half_later, rate) - 0.5).abs() < 0.11);
        assert_eq!(m.utilization(t + Time::from_secs_f64(30e-6), rate), 0.0);
    }
}
