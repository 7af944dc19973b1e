//! The TCP sender: what to send next, ACK processing with SACK-based loss recovery (RFC 6675
//! style), RTO (RFC 6298), classic and per-packet ECN, all driving one congestion controller.

use super::rate_sample::{RateSample, RateSampler};
use super::rto::RttEstimator;
use super::sack::RangeSet;
use super::tlp::TailLossProbe;
use super::tlt::TltSender;
use super::tso::{Tso, XmitState};
use super::{SendRule, Stack, TcpConfig};
use crate::cc::{AckSignals, CongestionControl, CongestionEvent, EcnMode, IntEcho, ParamChange, Window};
use crate::packet::hpcc_int::HopStack;
use crate::packet::tcp_int::IntEncoding;
use crate::event::TimerSlot;
use crate::packet::{flags, Colour, Packet};
use crate::time::Time;

/// Where the sender is in the connection's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the SYN-ACK.
    SynSent,
    /// Sending data.
    Established,
    /// Every byte (and the FIN) is acknowledged.
    Done,
}

/// A segment the sender wants on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First byte.
    pub seq: u64,
    /// Payload bytes.
    pub len: u64,
    /// TCP flags to set.
    pub flags: u8,
    /// This resends bytes sent before.
    pub retransmit: bool,
    /// TLT colour.
    pub colour: Colour,
}

/// An RTO expiry, kept so tests and traces can check timer behaviour.
#[derive(Clone, Copy, Debug)]
pub struct TimeoutRecord {
    /// When the timer fired.
    pub fired: Time,
    /// The sender's last transmission before it fired.
    pub last_tx: Time,
}

/// What an ACK changed.
#[derive(Clone, Copy, Debug, Default)]
pub struct AckOutcome {
    /// Bytes newly acknowledged (cumulatively or by SACK).
    pub newly_acked: u64,
    /// The cumulative ACK advanced (RFC 6298 restarts the timer only then).
    pub una_advanced: bool,
    /// The window may allow more to be sent.
    pub may_send: bool,
    /// The whole flow is now acknowledged.
    pub completed: bool,
}

/// Sender half of a TCP connection.
pub struct Sender {
    /// Connection phase.
    pub phase: Phase,
    /// Data bytes to send; `None` for an endless bulk flow.
    size: Option<u64>,
    /// A persistent connection: the application appends messages, so it never sends FIN or ends.
    persistent: bool,
    /// Bytes the application has written so far (a relay writes what it has received); new
    /// data stops here.
    written: u64,
    /// Oldest unacknowledged byte.
    pub una: u64,
    /// Next new byte to send (the highest sent so far).
    pub nxt: u64,
    /// Window state shared with the algorithm.
    pub win: Window,
    /// The flow's congestion controller.
    pub cc: Box<dyn CongestionControl>,
    ecn_mode: EcnMode,
    /// How much window room lets a segment out.
    send_rule: SendRule,
    /// ECN is on in this stack (`transport.ecn`): algorithms that want it get it.
    ecn_allowed: bool,
    /// The initial window in bytes, for an algorithm that replaces the first one.
    init_cwnd: u64,
    use_fin: bool,
    dupthresh: u64,
    sacked: RangeSet,
    dupacks: u32,
    /// Fast or RTO recovery lasts until `una` reaches this.
    recovery_end: Option<u64>,
    /// After an RTO every unSACKed byte below this is presumed lost (0 outside RTO recovery).
    lost_mark: u64,
    /// Retransmission of holes continues from here.
    retx_next: u64,
    syn_sent: bool,
    /// No further ECN reduction until `una` passes this (once per window).
    ecn_cwr_end: u64,
    send_cwr: bool,
    /// RTT estimator and RTO.
    pub rtt: RttEstimator,
    /// Delivery-rate estimator, for an algorithm that reads its samples.
    pub rate: Option<RateSampler>,
    /// The retransmission timer.
    pub rto_timer: TimerSlot,
    /// Earliest time the pacer lets the next segment out.
    pub pace_next: Time,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// RTO expiries.
    pub timeouts: Vec<TimeoutRecord>,
    /// Time of the last transmission.
    pub last_tx: Time,
    /// TCP-INT in use: how to decode echoes, and the latency unit.
    int: Option<(IntEncoding, Time)>,
    /// The echo the last ACK carried, decoded.
    pub last_echo: Option<IntEcho>,
    /// Segments carry HPCC's INT header.
    hop_records: bool,
    /// TLT marking, when the run uses TLT.
    pub tlt: Option<TltSender>,
    /// Tail Loss Probe, when `transport.tlp` is on.
    pub tlp: Option<TailLossProbe>,
    /// A delivered probe showed every unacknowledged byte below this lost (0: none).
    probe_lost_below: u64,
    /// Its class's parameter changes still to come, and when the next one is due (`Time::MAX`:
    /// none): the first ACK at or after it hands the algorithm the new parameters.
    changes: Option<std::sync::Arc<[ParamChange]>>,
    next_change_at: Time,
    /// Linux's TSO packets (`transport.tso`): what `tcp_write_xmit` let go.
    tso: Option<Box<Tso>>,
}

impl Sender {
    /// Adds the TCP-INT option to every segment from now on (its 12 bytes come out of the MSS, as
    /// Linux reserves option space) and decodes echoes with `encoding`.
    pub fn enable_int(&mut self, encoding: IntEncoding, latency_unit: Time) {
        if self.int.is_none() {
            self.win.mss -= crate::packet::tcp_int::LEN as u64;
        }
        self.int = Some((encoding, latency_unit));
    }

    /// True when segments carry the TCP-INT option.
    pub fn int_enabled(&self) -> bool {
        self.int.is_some()
    }

    /// The registry name of the algorithm the flow runs.
    pub fn cc_name(&self) -> &'static str {
        self.cc.name()
    }

    /// Whether the flow's algorithm consumes TCP-INT.
    pub fn cc_needs_int(&self) -> bool {
        self.cc.needs_int()
    }

    /// Whether the flow's algorithm consumes HPCC per-hop records.
    pub fn cc_needs_hop_records(&self) -> bool {
        self.cc.needs_hop_records()
    }

    /// Adds HPCC's INT header to every segment from now on; its bytes come out of the MSS, since
    /// the header sits inside the IP packet the MTU bounds.
    pub fn enable_hop_records(&mut self) {
        if !self.hop_records {
            self.win.mss -= crate::packet::hpcc_int::HEADER_BYTES as u64;
        }
        self.hop_records = true;
    }

    /// True when segments carry HPCC's INT header (data segments collect per-hop records).
    #[inline]
    pub fn hop_records_enabled(&self) -> bool {
        self.hop_records
    }

    /// A sender for `size` bytes (or endless), starting in SYN-SENT when `cfg.handshake`.
    pub fn new(cfg: &TcpConfig, size: Option<u64>, mut cc: Box<dyn CongestionControl>) -> Sender {
        let mss = cfg.mss();
        let ecn_mode = if cfg.ecn { cc.ecn_mode() } else { EcnMode::Off };
        let init_cwnd = cfg.init_cwnd as u64 * mss;
        let mut win = Window { cwnd: init_cwnd, ssthresh: u64::MAX, pacing_rate: None, mss };
        cc.init(&mut win);
        let rate = cc.needs_delivery_rate().then(RateSampler::default);
        Sender {
            phase: if cfg.handshake { Phase::SynSent } else { Phase::Established },
            size,
            persistent: false,
            written: u64::MAX,
            una: 0,
            nxt: 0,
            win,
            cc,
            ecn_mode,
            send_rule: cfg.send_rule,
            ecn_allowed: cfg.ecn,
            init_cwnd,
            use_fin: cfg.handshake,
            dupthresh: cfg.dupthresh as u64,
            sacked: RangeSet::default(),
            dupacks: 0,
            recovery_end: None,
            lost_mark: 0,
            retx_next: 0,
            syn_sent: false,
            ecn_cwr_end: 0,
            send_cwr: false,
            rtt: match cfg.stack {
                Stack::Rfc => RttEstimator::new(cfg.rto_min, cfg.rto_init, cfg.rto_max),
                Stack::Linux => RttEstimator::linux(cfg.rto_min, cfg.rto_init, cfg.rto_max),
            },
            rate,
            rto_timer: TimerSlot::default(),
            pace_next: Time::ZERO,
            retransmits: 0,
            timeouts: Vec::new(),
            last_tx: Time::ZERO,
            int: None,
            last_echo: None,
            hop_records: false,
            tlt: cfg.tlt.then(TltSender::default),
            tlp: cfg.tlp.then(|| match cfg.stack {
                Stack::Rfc => TailLossProbe::new(cfg.delayed_ack.unwrap_or(Time::ZERO)),
                Stack::Linux => TailLossProbe::linux(cfg.rto_min),
            }),
            probe_lost_below: 0,
            changes: None,
            next_change_at: Time::MAX,
            tso: cfg.tso.then(|| {
                let mut t = Box::<Tso>::default();
                t.kick();
                t
            }),
        }
    }

    /// Hands the algorithm each of `changes` (in time order) at its first ACK at or after the
    /// change's time.
    pub fn schedule_changes(&mut self, changes: std::sync::Arc<[ParamChange]>) {
        self.next_change_at = changes.first().map_or(Time::MAX, |c| c.at);
        self.changes = Some(changes);
    }

    /// Applies the changes due at `now` and arms the next.
    #[cold]
    fn take_changes(&mut self, now: Time) {
        let Some(changes) = self.changes.take() else { return };
        let due = changes.iter().take_while(|c| c.at <= now).count();
        if let Some(c) = changes[..due].last() {
            // Checked when the scenario was: the class runs a portable algorithm.
            let taken = self.cc.set_params(&c.params);
            debug_assert!(taken.is_ok(), "{taken:?}");
        }
        self.next_change_at = changes.get(due).map_or(Time::MAX, |c| c.at);
        if due < changes.len() {
            self.changes = Some(changes[due..].into());
        }
    }

    /// Runs `cc` instead of the algorithm the flow started with (negotiation fell back), from the
    /// initial window, before any data was sent.
    pub fn replace_cc(&mut self, mut cc: Box<dyn CongestionControl>) {
        // A fallback keeps its own defaults: the class's changes are for the class's algorithm.
        self.changes = None;
        self.next_change_at = Time::MAX;
        self.ecn_mode = if self.ecn_allowed { cc.ecn_mode() } else { EcnMode::Off };
        self.win = Window { cwnd: self.init_cwnd, ssthresh: u64::MAX, pacing_rate: None, mss: self.win.mss };
        cc.init(&mut self.win);
        if cc.needs_delivery_rate() {
            self.rate.get_or_insert_with(RateSampler::default);
        } else {
            self.rate = None;
        }
        self.cc = cc;
    }

    /// Keeps the connection open for messages the application appends with [`Sender::append`].
    pub fn make_persistent(&mut self) {
        self.persistent = true;
        self.use_fin = false;
    }

    /// True for a persistent connection.
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    /// Queues `bytes` more data on a persistent connection. The window carries over from the
    /// last message (Linux with `tcp_slow_start_after_idle = 0`, the usual datacenter setting).
    pub fn append(&mut self, bytes: u64) {
        debug_assert!(self.persistent, "only persistent connections take more data");
        self.size = Some(self.size.unwrap_or(0) + bytes);
        if let Some(t) = self.tso.as_mut() {
            t.kick();
        }
    }

    /// The application has written the first `bytes` of the data so far: a relay forwarding
    /// what it has received. The FIN still goes with the last byte of the whole size.
    pub fn set_written(&mut self, bytes: u64) {
        self.written = bytes;
        if let Some(t) = self.tso.as_mut() {
            t.kick();
        }
    }

    /// The end of the data that may go now: the size, or what the application wrote if less.
    fn data_end(&self) -> u64 {
        self.size.unwrap_or(u64::MAX).min(self.written)
    }

    /// The ECN handling negotiated for this flow.
    pub fn ecn_mode(&self) -> EcnMode {
        self.ecn_mode
    }

    /// True while in fast or RTO recovery.
    pub fn in_recovery(&self) -> bool {
        self.recovery_end.is_some()
    }

    /// Bytes the flow must deliver, if bounded.
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Holes below this are presumed lost (None outside recovery).
    fn loss_limit(&self) -> Option<u64> {
        self.recovery_end?;
        let sack_limit = self.sacked.boundary_with_above(self.dupthresh * self.win.mss).unwrap_or(self.una);
        Some(sack_limit.max(self.lost_mark).max(self.probe_lost_below).max(self.una))
    }

    /// Bytes presumed in the network (RFC 6675 "pipe").
    pub fn in_flight(&self) -> u64 {
        match self.loss_limit() {
            None => self.nxt - self.una - self.sacked.bytes(),
            Some(limit) => {
                let above = (self.nxt - limit) - self.sacked.bytes_in(limit, self.nxt);
                let retx_end = self.retx_next.min(limit).max(self.una);
                let retransmitted = (retx_end - self.una) - self.sacked.bytes_in(self.una, retx_end);
                above + retransmitted
            }
        }
    }

    /// New bytes the window lets out now that are not sent yet.
    pub fn sendable_bytes(&self) -> u64 {
        if self.phase != Phase::Established {
            return 0;
        }
        let room = self.win.cwnd.saturating_sub(self.in_flight());
        room.min(self.data_end().saturating_sub(self.nxt))
    }

    /// True if `next_segment` could return something now, ignoring pacing.
    pub fn has_sendable(&self) -> bool {
        match self.phase {
            Phase::SynSent => !self.syn_sent,
            Phase::Done => false,
            Phase::Established => {
                self.window_allows_more() || self.tlt_proactive_due() || self.tlp.as_ref().is_some_and(TailLossProbe::is_due)
            }
        }
    }

    /// True if the window lets a retransmission of a lost hole or new data out now.
    fn window_allows_more(&self) -> bool {
        let pipe = self.in_flight();
        if pipe > 0 && pipe >= self.win.cwnd {
            return false;
        }
        let hole = || self.loss_limit().and_then(|l| self.sacked.next_gap(self.retx_next.max(self.una), l));
        let tso_lets = || self.tso.as_ref().is_none_or(|t| t.may_send());
        if self.send_rule == SendRule::Room {
            return pipe < self.win.cwnd && ((self.nxt < self.data_end() && tso_lets()) || hole().is_some());
        }
        match hole() {
            Some((s, e)) => self.fits(pipe, (e - s).min(self.win.mss)),
            None => {
                let new = self.data_end().saturating_sub(self.nxt).min(self.win.mss);
                new > 0 && self.fits(pipe, new) && tso_lets()
            }
        }
    }

    /// Whether Linux's TSO lets the next new segment go now (always, without `transport.tso`).
    #[inline]
    fn tso_allows(&mut self, pipe: u64, now: Time) -> bool {
        self.tso.is_none() || self.tso_take(pipe, now)
    }

    /// Runs `tcp_write_xmit` if an ACK or a write asked for it, and takes a segment of what it
    /// let go.
    #[inline(never)]
    fn tso_take(&mut self, pipe: u64, now: Time) -> bool {
        let state = XmitState {
            now,
            nxt: self.nxt,
            data_end: self.data_end(),
            fin_at_end: self.use_fin && self.size.is_some_and(|s| s == self.data_end()),
            cwnd: self.win.cwnd,
            ssthresh: self.win.ssthresh,
            pipe,
            mss: self.win.mss,
            in_recovery: self.recovery_end.is_some(),
            last_tx: self.last_tx,
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            pacing_rate: self.win.pacing_rate,
        };
        let Some(t) = self.tso.as_deref_mut() else { return true };
        t.write_xmit(&state);
        t.take()
    }

    /// The NIC is part-way through one of Linux's TSO packets of this flow.
    #[inline]
    pub fn mid_tso_packet(&self) -> bool {
        self.tso.as_ref().is_some_and(|t| t.mid_packet())
    }

    /// Whether a segment of `len` bytes may go with `pipe` bytes in flight (`SendRule`).
    #[inline]
    fn fits(&self, pipe: u64, len: u64) -> bool {
        match self.send_rule {
            SendRule::Room => pipe < self.win.cwnd,
            SendRule::Fit => pipe == 0 || pipe + len <= self.win.cwnd,
        }
    }

    /// True when TLT owes an important packet after an echo and data is outstanding: if the
    /// window sends nothing, a proactive retransmission goes instead.
    fn tlt_proactive_due(&self) -> bool {
        self.nxt > self.una && self.tlt.as_ref().is_some_and(TltSender::wants_important)
    }

    /// When the Tail Loss Probe should fire from now, if it should be armed: data outstanding,
    /// outside recovery, an RTT measured, no probe in flight.
    pub fn probe_timeout(&self) -> Option<Time> {
        let t = self.tlp.as_ref()?;
        let open = self.phase == Phase::Established && self.nxt > self.una && self.recovery_end.is_none();
        let srtt = self.rtt.srtt();
        (open && srtt > Time::ZERO && t.may_arm()).then(|| t.timeout(srtt, self.rtt.rto(), self.in_flight() <= self.win.mss))
    }

    /// The probe timer expired: the next segment is the probe, if one is still wanted.
    pub fn on_probe_timer(&mut self) {
        if self.probe_timeout().is_some() {
            if let Some(t) = self.tlp.as_mut() {
                t.fire();
            }
        }
    }

    /// The probe: a new segment when there is new data (whatever the window), else the last
    /// segment sent, again.
    fn loss_probe(&mut self, end: u64) -> Segment {
        let seg = if self.nxt < end {
            let len = (end - self.nxt).min(self.win.mss);
            self.nxt += len;
            Segment { seq: self.nxt - len, len, flags: flags::ACK, retransmit: false, colour: Colour::Unimportant }
        } else {
            let seq = self.nxt.saturating_sub(self.win.mss).max(self.una);
            self.retransmits += 1;
            Segment { seq, len: self.nxt - seq, flags: flags::ACK, retransmit: true, colour: Colour::Unimportant }
        };
        if let Some(t) = self.tlp.as_mut() {
            t.sent(seg.seq);
        }
        seg
    }

    /// The next segment the window allows, advancing send state; `None` if nothing may go.
    pub fn next_segment(&mut self, now: Time) -> Option<Segment> {
        match self.phase {
            Phase::Done => return None,
            Phase::SynSent => {
                if self.syn_sent {
                    return None;
                }
                self.syn_sent = true;
                self.last_tx = now;
                let colour = if self.tlt.is_some() { Colour::Control } else { Colour::Unimportant };
                return Some(Segment { seq: 0, len: 0, flags: flags::SYN, retransmit: false, colour });
            }
            Phase::Established => {}
        }
        let pipe = self.in_flight();
        let end = self.size.unwrap_or(u64::MAX);
        let new_end = self.data_end();
        let idle = self.nxt == self.una;
        let mut seg = None;
        // TLT in recovery: the important packet an echo asks for resends the oldest unimportant
        // bytes not acknowledged, which covers a lost retransmission (the public code's choice).
        let proactive_first = self.recovery_end.is_some() && self.tlt_proactive_due();
        if self.tlp.as_ref().is_some_and(TailLossProbe::is_due) {
            seg = Some(self.loss_probe(new_end));
        } else if pipe < self.win.cwnd && !proactive_first {
            // A hole to resend goes first; while it does not fit, nothing goes.
            let mut hole = false;
            if let Some(limit) = self.loss_limit() {
                if let Some((s, e)) = self.sacked.next_gap(self.retx_next.max(self.una), limit) {
                    let len = (e - s).min(self.win.mss);
                    hole = true;
                    if self.fits(pipe, len) {
                        self.retx_next = s + len;
                        self.retransmits += 1;
                        seg = Some(Segment { seq: s, len, flags: flags::ACK, retransmit: true, colour: Colour::Unimportant });
                    }
                }
            }
            let len = new_end.saturating_sub(self.nxt).min(self.win.mss);
            if !hole && len > 0 && self.fits(pipe, len) && self.tso_allows(pipe, now) {
                seg = Some(Segment { seq: self.nxt, len, flags: flags::ACK, retransmit: false, colour: Colour::Unimportant });
                self.nxt += len;
            }
        }
        if let Some(seg) = seg.as_mut() {
            if self.use_fin && seg.seq + seg.len == end {
                seg.flags |= flags::FIN;
            }
            if self.tlt.is_some() {
                let last = !self.window_allows_more();
                let fin = seg.flags & flags::FIN != 0;
                seg.colour = self.tlt.as_mut().map_or(Colour::Unimportant, |t| t.colour_data(seg.seq, seg.seq + seg.len, last, fin));
            }
        } else if self.tlt_proactive_due() {
            let in_recovery = self.recovery_end.is_some();
            let (una, nxt, mss) = (self.una, self.nxt, self.win.mss);
            let (s, e) = self.tlt.as_mut().map_or((una, una), |t| t.proactive(una, nxt, mss, in_recovery));
            let fin = if self.use_fin && e == end { flags::FIN } else { 0 };
            seg = Some(Segment { seq: s, len: e - s, flags: flags::ACK | fin, retransmit: true, colour: Colour::Important });
        }
        let Some(mut seg) = seg else {
            if self.nxt >= new_end {
                if let Some(r) = self.rate.as_mut() {
                    r.on_app_limited(pipe);
                }
            }
            return None;
        };
        if let Some(r) = self.rate.as_mut() {
            r.on_send(seg.seq, seg.len, now, idle);
        }
        if self.send_cwr && !seg.retransmit {
            seg.flags |= flags::CWR;
            self.send_cwr = false;
        }
        self.last_tx = now;
        Some(seg)
    }

    /// Processes an ACK (or SYN-ACK) arriving at `now`.
    pub fn on_ack(&mut self, pkt: &Packet, now: Time) -> AckOutcome {
        self.on_ack_with_hops(pkt, None, now)
    }

    /// Processes an ACK that echoed HPCC per-hop records (`hops`, read from the world's slab).
    pub fn on_ack_with_hops(&mut self, pkt: &Packet, hops: Option<&HopStack>, now: Time) -> AckOutcome {
        let mut out = AckOutcome::default();
        self.last_echo = None;
        if self.phase == Phase::SynSent {
            if pkt.has(flags::SYN) && pkt.has(flags::ACK) {
                self.phase = Phase::Established;
                if now >= pkt.ts_echo {
                    self.rtt.sample(now - pkt.ts_echo, self.una, self.nxt);
                }
                self.rtt.reset_backoff();
                self.rto_timer.cancel();
                out.may_send = true;
            }
            return out;
        }
        if self.phase != Phase::Established || !pkt.has(flags::ACK) {
            return out;
        }

        let ack = pkt.ack.min(self.nxt);
        let advanced = ack > self.una;
        let mut newly = 0;
        if advanced {
            newly += (ack - self.una) - self.sacked.remove_below(ack);
            self.una = ack;
            if let Some(r) = self.rate.as_mut() {
                r.on_cumulative(ack, now);
            }
            self.dupacks = 0;
            self.rtt.reset_backoff();
            if now >= pkt.ts_echo {
                self.rtt.sample(now - pkt.ts_echo, self.una, self.nxt);
            }
        }
        let mut newly_sacked = 0;
        for (s, e) in pkt.sack_ranges() {
            let e = e.min(self.nxt);
            if e > self.una {
                let sacked = self.sacked.insert(s.max(self.una), e);
                if let (true, Some(r)) = (sacked > 0, self.rate.as_mut()) {
                    r.on_sacked(s.max(self.una), e, now);
                }
                newly_sacked += sacked;
            }
        }
        newly += newly_sacked;
        // RFC 6675's duplicate ACK: one that SACKs new bytes (every receiver here sends SACK). The
        // answer to a duplicate segment, such as TLT's proactive retransmission, tells nothing
        // new and is not a sign of loss.
        if !advanced && ack == self.una && pkt.payload == 0 && self.nxt > self.una && newly_sacked > 0 {
            self.dupacks += 1;
        }
        if let Some(t) = self.tlt.as_mut() {
            t.on_ack(pkt.colour == Colour::Echo, self.una, pkt.sack_ranges());
        }
        let (una, sacked) = (self.una, &self.sacked);
        if let Some(p) = self.tlp.as_mut().and_then(|t| t.delivered(|p| p < una || sacked.containing(p).is_some())) {
            // RACK's rule for the probe: what was sent before it and is still missing is lost.
            if sacked.bytes_in(una, p) < p.saturating_sub(una) {
                self.probe_lost_below = p;
            }
        }

        if let Some(end) = self.recovery_end {
            if self.una >= end {
                self.recovery_end = None;
                self.lost_mark = 0;
                self.probe_lost_below = 0;
            }
        }
        let loss_evidence = self.dupacks as u64 >= self.dupthresh
            || self.sacked.bytes() >= self.dupthresh * self.win.mss
            || self.probe_lost_below > self.una;
        if self.recovery_end.is_none() && self.nxt > self.una && loss_evidence {
            self.recovery_end = Some(self.nxt);
            self.retx_next = self.una;
            self.cc.on_congestion(CongestionEvent::FastRetransmit, now, &mut self.win);
        }

        let ece = pkt.has(flags::ECE);
        if self.ecn_mode == EcnMode::Classic && ece && self.recovery_end.is_none() && self.una >= self.ecn_cwr_end {
            self.cc.on_congestion(CongestionEvent::Ecn, now, &mut self.win);
            self.ecn_cwr_end = self.nxt;
            self.send_cwr = true;
        }
        let min_rtt = self.rtt.min_rtt();
        let (delivered, rs) = self.rate.as_mut().map_or((0, RateSample::default()), |r| (r.delivered(), r.sample(min_rtt)));
        let mut signals = AckSignals {
            now,
            acked_bytes: newly,
            ce_bytes: if self.ecn_mode == EcnMode::PerPacket && ece { newly } else { 0 },
            ece,
            rtt: if advanced && now >= pkt.ts_echo { Some(now - pkt.ts_echo) } else { None },
            min_rtt: self.rtt.min_rtt(),
            srtt: self.rtt.srtt(),
            in_flight: self.in_flight(),
            snd_una: self.una,
            snd_nxt: self.nxt,
            // After a timeout the window slow-starts back (RFC 5681); only fast recovery holds it.
            in_recovery: self.recovery_end.is_some() && self.lost_mark == 0,
            path_hops: pkt.hops_echo,
            int: match (self.int, pkt.int) {
                (Some((enc, unit)), Some(o)) => Some(IntEcho {
                    reading: enc.read(o.int_ecr),
                    path_latency: Time(o.lat_ecr as u64 * unit.0),
                    hop_id: o.id_ecr,
                }),
                _ => None,
            },
            hops: None,
            delivered,
            delivery_rate: rs.delivery_rate,
            prior_delivered: rs.prior_delivered,
            is_app_limited: rs.is_app_limited,
            probe: false,
        };
        if let Some(h) = hops {
            // Copied only for flows that carry records, so other flows build no 168-byte stack.
            signals.hops = Some(*h);
        }
        self.last_echo = signals.int;
        if now >= self.next_change_at {
            self.take_changes(now);
        }
        self.cc.on_ack(&signals, &mut self.win);
        if let Some(t) = self.tso.as_mut() {
            t.acked(self.una);
            t.kick();
        }

        if !self.persistent && self.size.is_some_and(|s| self.una >= s) {
            self.phase = Phase::Done;
            self.rto_timer.cancel();
            out.completed = true;
        }
        out.newly_acked = newly;
        out.una_advanced = advanced;
        out.may_send = newly > 0 || self.recovery_end.is_some() || self.tlt_proactive_due();
        out
    }

    /// Handles an RTO expiry: back off, presume everything outstanding lost, restart from `una`.
    pub fn on_timeout(&mut self, now: Time) {
        self.timeouts.push(TimeoutRecord { fired: now, last_tx: self.last_tx });
        self.rtt.back_off();
        self.cc.on_congestion(CongestionEvent::Timeout, now, &mut self.win);
        if let Some(t) = self.tlt.as_mut() {
            t.on_timeout();
        }
        if let Some(t) = self.tlp.as_mut() {
            t.on_timeout();
        }
        if let Some(t) = self.tso.as_mut() {
            t.reset();
        }
        self.probe_lost_below = 0;
        match self.phase {
            Phase::SynSent => self.syn_sent = false,
            Phase::Established => {
                self.recovery_end = Some(self.nxt);
                self.lost_mark = self.nxt;
                self.retx_next = self.una;
                self.dupacks = 0;
            }
            Phase::Done => {}
        }
    }

    /// True when the retransmission timer should run (data or SYN outstanding).
    pub fn needs_timer(&self) -> bool {
        match self.phase {
            Phase::SynSent => self.syn_sent,
            Phase::Established => self.nxt > self.una,
            Phase::Done => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{self, FlowContext};
    use crate::time::Rate;

    fn sender(size: u64) -> Sender {
        sender_with(size, TcpConfig { init_cwnd: 10, ..TcpConfig::default() })
    }

    fn sender_with(size: u64, cfg: TcpConfig) -> Sender {
        let ctx = FlowContext { mss: cfg.mss(), init_cwnd: 10 * cfg.mss(), link_rate: Rate::gbps(10), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: crate::transport::tcp::Stack::Rfc };
        let algo = cc::factory("newreno", &toml::Table::new()).unwrap()(&ctx);
        Sender::new(&cfg, Some(size), algo)
    }

    fn ack(n: u64, sack: &[(u64, u64)]) -> Packet {
        let mut p = Packet { ack: n, flags: flags::ACK, ..Packet::default() };
        for (i, &(s, e)) in sack.iter().enumerate() {
            p.sack[i] = crate::packet::SackBlock { start: (s - n) as u32, end: (e - n) as u32 };
        }
        p.sack_len = sack.len() as u8;
        p
    }

    #[test]
    fn sends_a_window_then_stops() {
        let mut s = sender(100 * 1448);
        let mut n = 0;
        while s.next_segment(Time::ZERO).is_some() {
            n += 1;
        }
        assert_eq!(n, 10);
        assert_eq!(s.in_flight(), 10 * 1448);
    }

    #[test]
    fn the_send_rule_decides_what_a_fraction_of_a_segment_does() {
        // A window of 4.5 segments: "room" sends 5 (the fifth goes while 4 are in flight), "fit"
        // sends 4; with a 200-byte tail left, "fit" sends it into the half segment of room.
        let burst = |rule: SendRule, size: u64| {
            let mut s = sender_with(size, TcpConfig { send_rule: rule, ..TcpConfig::default() });
            s.win.cwnd = 4 * 1448 + 724;
            let mut sent = Vec::new();
            while let Some(seg) = s.next_segment(Time::ZERO) {
                sent.push(seg.len);
            }
            sent
        };
        assert_eq!(burst(SendRule::Room, 100 * 1448), vec![1448; 5]);
        assert_eq!(burst(SendRule::Fit, 100 * 1448), vec![1448; 4]);
        assert_eq!(burst(SendRule::Fit, 4 * 1448 + 200), vec![1448, 1448, 1448, 1448, 200]);
        // Under one segment, "fit" still sends one when nothing is in flight.
        let mut s = sender_with(100 * 1448, TcpConfig { send_rule: SendRule::Fit, ..TcpConfig::default() });
        s.win.cwnd = 1000;
        assert_eq!(s.next_segment(Time::ZERO).map(|seg| seg.len), Some(1448));
        assert_eq!(s.next_segment(Time::ZERO), None);
    }

    #[test]
    fn sack_triggers_retransmission_of_the_hole_only() {
        let mss = 1448;
        let mut s = sender(100 * mss);
        while s.next_segment(Time::ZERO).is_some() {}
        // Segment 0 lost; 1..=3 SACKed: three segments above the hole mark it lost.
        let out = s.on_ack(&ack(0, &[(mss, 4 * mss)]), Time(1));
        assert!(s.in_recovery());
        assert!(out.may_send);
        // NewReno halves: cwnd 5 MSS; pipe = 6 segments not SACKed above the hole... minus the lost one.
        assert_eq!(s.win.cwnd, 5 * mss);
        assert_eq!(s.in_flight(), 6 * mss);
        assert_eq!(s.next_segment(Time(2)), None, "pipe 6 >= cwnd 5: wait");
        // Three more SACKs shrink the pipe; the hole is retransmitted first.
        s.on_ack(&ack(0, &[(mss, 7 * mss)]), Time(3));
        let seg = s.next_segment(Time(4)).unwrap();
        assert_eq!((seg.seq, seg.len, seg.retransmit), (0, mss, true));
        let seg = s.next_segment(Time(4)).unwrap();
        assert_eq!(seg.seq, 10 * mss, "after the hole, new data");
        // The retransmission arrives: recovery ends once una passes the recovery point.
        s.on_ack(&ack(10 * mss, &[]), Time(5));
        assert!(!s.in_recovery());
        assert_eq!(s.retransmits, 1);
    }

    #[test]
    fn timeout_resends_from_una_with_one_segment_window() {
        let mss = 1448;
        let mut s = sender(100 * mss);
        while s.next_segment(Time::ZERO).is_some() {}
        s.on_timeout(Time(1_000));
        assert_eq!(s.win.cwnd, mss);
        assert_eq!(s.in_flight(), 0);
        let seg = s.next_segment(Time(1_001)).unwrap();
        assert_eq!((seg.seq, seg.retransmit), (0, true));
        assert_eq!(s.next_segment(Time(1_001)), None);
        assert_eq!(s.timeouts.len(), 1);
    }

    #[test]
    fn a_tail_loss_probe_resends_the_last_segment_and_its_sack_starts_recovery() {
        let mss = 1448;
        let mut s = sender_with(4 * mss, TcpConfig { init_cwnd: 10, tlp: true, ..TcpConfig::default() });
        while s.next_segment(Time::ZERO).is_some() {}
        // The first segment's ACK gives SRTT = 20 us; the other three are lost.
        let first = Packet { ts_echo: Time::ZERO, ..ack(mss, &[]) };
        s.on_ack(&first, Time::from_us(20));
        assert_eq!(s.probe_timeout(), Some(Time::from_us(40)), "two SRTT");
        s.on_probe_timer();
        let probe = s.next_segment(Time::from_us(60)).unwrap();
        assert_eq!((probe.seq, probe.len, probe.retransmit), (3 * mss, mss, true), "the last segment again");
        assert_eq!(s.probe_timeout(), None, "one probe per episode");
        // Its SACK shows everything sent before it lost: recovery resends the first hole at once.
        s.on_ack(&ack(mss, &[(3 * mss, 4 * mss)]), Time::from_us(80));
        assert!(s.in_recovery());
        let seg = s.next_segment(Time::from_us(80)).unwrap();
        assert_eq!((seg.seq, seg.retransmit), (mss, true));
        let seg = s.next_segment(Time::from_us(80)).unwrap();
        assert_eq!((seg.seq, seg.retransmit), (2 * mss, true));
    }
}
