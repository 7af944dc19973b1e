//! The small context elements act on the world through while they handle an event: the clock,
//! the event list, the network-wide counters, and the slab and random streams they share. An
//! element never reaches into another element; it schedules an event, counts a drop, or hands a
//! packet to a port.

use crate::event::EventQueue;
use crate::ids::{FlowId, HostId, PartId, PortId};
use crate::net::capture::Capture;
use crate::net::link::Flying;
use crate::packet::hpcc_int::HopSlab;
use crate::packet::Packet;
use crate::time::Time;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Everything that happens, dispatched by the one `match` in `World::step`.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// The head packet on a port's link reaches the far end (the packet's place in the
    /// `Flying` store).
    Arrive(PortId, u32),
    /// A port's serializer finished; it may start the next packet.
    TxDone(PortId),
    /// A flow opens.
    FlowStart(FlowId),
    /// One of a connection's timers (which timer, its generation).
    Timer(FlowId, TimerKind, u32),
    /// A host's pacer allows a flow to send again.
    NicWake(HostId),
    /// A PFC pause a port honours may have run out.
    PauseEnd(PortId),
    /// Record the sampled time series.
    Sample(SampleKind),
    /// The scenario's end time: the run stops here.
    End,
    /// A closed-loop application starts.
    AppStart(u32),
    /// An application's timer (app, tag).
    AppTimer(u32, u32),
    /// The circuit switch changes configuration: a day begins or ends.
    Circuit,
    /// A core of a host's CPU finished its job.
    CpuDone(HostId, u16),
    /// A host NIC's offload timer wheel ticks.
    NicTick(HostId),
    /// A flow's receiver asks its host's pull pacer for credit (UET's RCCC).
    PullRequest(FlowId),
    /// A host's pull pacer grants its next credit.
    PullPace(HostId),
    /// A host's oversubscription control sets the rate its pull pacer grants at.
    PullRate(HostId),
    /// A link fails or comes back: the port that sends on it, and the change's place in the
    /// world's list.
    LinkChange(PortId, u32),
}

/// The timers a connection owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    /// The sender's retransmission timer.
    Rto,
    /// The sender's Tail Loss Probe timer.
    LossProbe,
    /// The receiver's delayed-ACK timer.
    DelayedAck,
    /// The congestion controller's periodic tick.
    CcTick,
    /// The receiver's own retransmission timer, for its FIN.
    PeerRto,
    /// The end of TIME_WAIT.
    TimeWait,
    /// The client's close reaches a server that has none of its own (a TCP connection without a
    /// handshake, a queue pair's responder): one path delay after the client closed.
    PeerClosed,
}

impl TimerKind {
    /// True for the timers of the end that receives the data (the others are the sender's).
    #[inline]
    pub fn at_server(self) -> bool {
        matches!(self, TimerKind::DelayedAck | TimerKind::PeerRto | TimerKind::PeerClosed)
    }
}

/// The time series a run samples periodically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleKind {
    /// Queue depths of chosen ports.
    Queues,
    /// Windows and algorithm state of chosen flows.
    Cwnd,
}

/// Why a packet left the network without reaching its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The shared buffer (or the port's own limit) had no room.
    Buffer,
    /// Random loss on a link.
    LinkLoss,
    /// TTL expired.
    Ttl,
    /// Not ECN-capable where an ECT packet would have been marked, and the port drops those.
    EcnUnable,
    /// An unimportant packet at a port whose unimportant bytes reached TLT's colour threshold.
    Colour,
    /// Sent on a link that is down.
    LinkDown,
    /// A trimmed header, at a port whose header band was full.
    TrimHeader,
}

/// Packet counters, one set per partition (the run's are their sum, [`Counters::add`]).
///
/// Sized to a power of two, as [`Streams`] is: the world finds its partition's set for every
/// event, and a shift finds it in one instruction where another size takes several.
#[derive(Clone, Debug, Default)]
#[repr(align(256))]
pub struct Counters {
    /// Packets put on a wire by a host.
    pub packets_sent: u64,
    /// Packets that reached their destination host.
    pub packets_delivered: u64,
    /// Drops at a full buffer.
    pub drops_buffer: u64,
    /// Drops by random link loss.
    pub drops_link_loss: u64,
    /// Drops by TTL expiry.
    pub drops_ttl: u64,
    /// Non-ECT packets dropped where an ECT packet would have been marked.
    pub drops_ecn_unable: u64,
    /// Unimportant packets dropped at TLT's colour threshold.
    pub drops_colour: u64,
    /// Packets sent on a link that was down.
    pub drops_link_down: u64,
    /// Trimmed headers dropped at a full header band.
    pub drops_trim_header: u64,
    /// Data packets a full queue cut to their headers on arrival.
    pub trims: u64,
    /// Queued data packets cut to their headers to make room for an arrival (the coin).
    pub trim_evictions: u64,
    /// Trimmed headers that reached a host whose transport takes none, which discarded them.
    pub trim_headers_discarded: u64,
    /// CE marks set by switches.
    pub ecn_marks: u64,
    /// Data segments sent (first transmissions and retransmissions).
    pub data_packets: u64,
    /// PFC PAUSE frames (not resumes) switches sent.
    pub pfc_pauses: u64,
    /// Packets (not PFC frames) put on links to another partition.
    pub sent_across: u64,
    /// Packets (not PFC frames) that arrived over links from another partition.
    pub arrived_across: u64,
    /// What the Ultra Ethernet transport's ends counted.
    pub uet: UetCounters,
}

/// What UET's senders and receivers counted: the reference simulator's summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct UetCounters {
    /// Packets of new data sent.
    pub new: u64,
    /// Packets resent.
    pub rtx: u64,
    /// RTSs sent: probes that ask the receiver for credit or an ACK.
    pub rts: u64,
    /// ACKs that reached their sender.
    pub acks: u64,
    /// NACKs that reached their sender.
    pub nacks: u64,
    /// Of those, NACKs for packets already acknowledged or already queued to resend.
    pub nacks_ignored: u64,
    /// PULLs (receiver credit) that reached their sender.
    pub pulls: u64,
    /// Data packets that reached a receiver that had them (the reference's "spurious").
    pub spurious: u64,
    /// Trimmed headers a receiver answered with a NACK.
    pub headers_nacked: u64,
}

impl UetCounters {
    fn add(&mut self, o: &UetCounters) {
        let UetCounters { new, rtx, rts, acks, nacks, nacks_ignored, pulls, spurious, headers_nacked } = o;
        self.new += new;
        self.rtx += rtx;
        self.rts += rts;
        self.pulls += pulls;
        self.acks += acks;
        self.nacks += nacks;
        self.nacks_ignored += nacks_ignored;
        self.spurious += spurious;
        self.headers_nacked += headers_nacked;
    }
}

impl Counters {
    /// Adds `o`'s counts to these (a partition's to the run's).
    pub fn add(&mut self, o: &Counters) {
        let Counters {
            packets_sent,
            packets_delivered,
            drops_buffer,
            drops_link_loss,
            drops_ttl,
            drops_ecn_unable,
            drops_colour,
            drops_link_down,
            drops_trim_header,
            trims,
            trim_evictions,
            trim_headers_discarded,
            ecn_marks,
            data_packets,
            pfc_pauses,
            sent_across,
            arrived_across,
            uet,
        } = o;
        self.packets_sent += packets_sent;
        self.packets_delivered += packets_delivered;
        self.drops_buffer += drops_buffer;
        self.drops_link_loss += drops_link_loss;
        self.drops_ttl += drops_ttl;
        self.drops_ecn_unable += drops_ecn_unable;
        self.drops_colour += drops_colour;
        self.drops_link_down += drops_link_down;
        self.drops_trim_header += drops_trim_header;
        self.trims += trims;
        self.trim_evictions += trim_evictions;
        self.trim_headers_discarded += trim_headers_discarded;
        self.ecn_marks += ecn_marks;
        self.data_packets += data_packets;
        self.pfc_pauses += pfc_pauses;
        self.sent_across += sent_across;
        self.arrived_across += arrived_across;
        self.uet.add(uet);
    }

    /// All drops.
    pub fn drops(&self) -> u64 {
        self.drops_buffer + self.drops_link_loss + self.drops_ttl + self.drops_ecn_unable + self.drops_colour + self.drops_link_down + self.drops_trim_header
    }
}

/// Independent random streams, one per purpose, so adding a use of one never shifts another, and
/// one set per partition, so a partition's draws do not depend on another's.
#[derive(Clone)]
#[repr(align(128))]
pub struct Streams {
    /// Link loss draws.
    pub loss: Xoshiro256PlusPlus,
    /// RED marking draws.
    pub ecn: Xoshiro256PlusPlus,
    /// Trimming's coin: the arrival or the packet queued last.
    pub trim: Xoshiro256PlusPlus,
}

impl Streams {
    /// The streams of partition `part` of a run with `seed` (partition 0's are the run's own
    /// when it has one).
    pub fn new(seed: u64, part: usize) -> Streams {
        let seed = seed ^ (part as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        Streams { loss: stream(seed, 1), ecn: stream(seed, 2), trim: stream(seed, 3) }
    }
}

/// A seeded generator for one purpose, independent of the others.
pub fn stream(seed: u64, purpose: u64) -> Xoshiro256PlusPlus {
    use rand::SeedableRng;
    Xoshiro256PlusPlus::seed_from_u64(seed ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// An event for another partition's list, keyed by the partition that scheduled it, while
/// partitions take turns window by window.
#[derive(Clone, Copy, Debug)]
pub struct CrossEvent {
    /// The partition whose list takes it.
    pub part: PartId,
    /// When it is due.
    pub at: Time,
    /// Its tie key in the scheduling partition's sequence.
    pub tie: u64,
    /// The event.
    pub ev: Event,
}

/// What an element may do to the world while it handles an event.
pub struct Cx<'a> {
    /// The current time.
    pub now: Time,
    /// The acting element's partition.
    pub part: PartId,
    /// The event list.
    pub events: &'a mut EventQueue<Event>,
    /// Where partitions take turns on lists of their own: what is scheduled for another
    /// partition, handed over when the acting one's turn ends. `None`: one list for all.
    pub across: Option<&'a mut Vec<CrossEvent>>,
    /// Network-wide counters.
    pub counters: &'a mut Counters,
    /// HPCC per-hop record stacks.
    pub hops: &'a mut HopSlab,
    /// The packets on the wires.
    pub flying: &'a mut Flying,
    /// Random streams.
    pub rng: &'a mut Streams,
    /// The packet capture, when the scenario asked for one.
    pub capture: Option<&'a mut Capture>,
}

impl Cx<'_> {
    /// Schedules `ev` at `at`.
    #[inline]
    pub fn schedule(&mut self, at: Time, ev: Event) {
        self.events.push(at, ev);
    }

    /// Schedules `ev` at `at` for an element of partition `part`, across a cut link. Always
    /// inlined: every packet a port sends comes here, and a call costs 0.5% of a run.
    #[inline(always)]
    pub fn schedule_to(&mut self, part: PartId, at: Time, ev: Event) {
        if self.across.is_some() && part != self.part {
            return self.schedule_across(part, at, ev);
        }
        self.events.push_to(at, ev, part.index());
    }

    /// Keeps `ev` for partition `part`'s own list, with the acting partition's tie key, until
    /// the acting partition's turn ends.
    #[cold]
    #[inline(never)]
    fn schedule_across(&mut self, part: PartId, at: Time, ev: Event) {
        let tie = self.events.next_tie();
        self.across.as_deref_mut().expect("partitions take turns").push(CrossEvent { part, at, tie, ev });
    }

    /// Counts a packet lost for `reason` and frees what it holds.
    pub fn drop_packet(&mut self, pkt: &Packet, reason: DropReason) {
        let c = &mut *self.counters;
        match reason {
            DropReason::Buffer => c.drops_buffer += 1,
            DropReason::LinkLoss => c.drops_link_loss += 1,
            DropReason::Ttl => c.drops_ttl += 1,
            DropReason::EcnUnable => c.drops_ecn_unable += 1,
            DropReason::Colour => c.drops_colour += 1,
            DropReason::LinkDown => c.drops_link_down += 1,
            DropReason::TrimHeader => c.drops_trim_header += 1,
        }
        self.release(pkt);
    }

    /// Frees the hop records a packet holds, when it is dropped or consumed.
    #[inline]
    pub fn release(&mut self, pkt: &Packet) {
        if let Some(h) = pkt.hops {
            self.hops.free(h);
        }
    }
}

/// What an element acts on outside any world: the clock, the event list, counters, the hop slab
/// and random streams, for unit tests.
#[cfg(test)]
pub(crate) struct Bench {
    pub q: EventQueue<Event>,
    pub counters: Counters,
    pub hops: HopSlab,
    pub flying: Flying,
    pub rng: Streams,
    pub now: Time,
}

#[cfg(test)]
impl Bench {
    pub fn new() -> Bench {
        Bench { q: EventQueue::new(), counters: Counters::default(), hops: HopSlab::default(), flying: Flying::default(), rng: Streams::new(1, 0), now: Time::ZERO }
    }

    pub fn cx(&mut self) -> Cx<'_> {
        Cx { now: self.now, part: PartId(0), events: &mut self.q, across: None, counters: &mut self.counters, hops: &mut self.hops, flying: &mut self.flying, rng: &mut self.rng, capture: None }
    }
}
