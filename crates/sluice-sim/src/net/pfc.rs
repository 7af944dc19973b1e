//! Priority flow control (IEEE 802.1Qbb), as shared-buffer switches implement it and the HPCC
//! simulator models it: a switch counts, per ingress port and lossless priority, the bytes it
//! holds that arrived there. When they pass a dynamic threshold (the free shared buffer, less
//! every port's headroom, shifted right) it sends a PAUSE frame upstream. The headroom absorbs what
//! is still in flight on the link. Once the bytes fall to the threshold less a resume offset, it
//! sends a resume (a PAUSE of zero quanta). The upstream port, a switch's or a NIC's, stops
//! sending that priority until the pause time runs out or a resume arrives. A pause that runs out
//! while the condition holds is sent again at the next arrival.

use super::qdisc::SharedBuffer;
use crate::packet::{flags, Packet, INITIAL_TTL};
use crate::time::{Rate, Time};

/// Priorities PFC can pause (the 802.1Qbb class-enable vector's 8 bits).
pub const PRIORITIES: usize = 8;

/// Wire bytes of a PAUSE frame: the 64-byte minimum frame plus preamble and inter-frame gap.
pub const FRAME_BYTES: u32 = 84;

/// The largest pause a frame asks for, in quanta of 512 bit times.
pub const MAX_QUANTA: u16 = u16::MAX;

/// How long `quanta` pause a port of `rate`.
pub fn pause_time(quanta: u16, rate: Rate) -> Time {
    rate.tx_time(quanta as u64 * 512 / 8)
}

/// A switch's PFC settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PfcConfig {
    /// Bit `p` set: priority `p` is lossless.
    pub lossless: u8,
    /// The threshold for each local ingress port is the free shared buffer shifted right by
    /// this port's entry.
    pub shift: Vec<u32>,
    /// Bytes each ingress port and lossless priority keeps in reserve for what is in flight
    /// after its PAUSE, by local port.
    pub headroom: Vec<u64>,
    /// Resume once the bytes held are this far below the threshold.
    pub resume_offset: u64,
    /// The pause time a PAUSE frame asks for, in quanta.
    pub quanta: u16,
}

impl PfcConfig {
    /// True if priority `prio` is lossless.
    #[inline]
    pub fn is_lossless(&self, prio: u8) -> bool {
        (prio as usize) < PRIORITIES && self.lossless & (1 << prio) != 0
    }
}

/// One switch's PFC state.
#[derive(Clone, Debug)]
pub struct Pfc {
    /// Settings.
    pub cfg: PfcConfig,
    /// Bytes held per local ingress port and priority.
    held: Vec<[u64; PRIORITIES]>,
    /// When the PAUSE now in force was sent, per local ingress port and priority (None: not
    /// paused).
    paused_at: Vec<[Option<Time>; PRIORITIES]>,
    /// Every port's headroom times the lossless priorities, kept out of the shared pool.
    reserved: u64,
    /// Bytes that arrived on each ingress port and priority since its PAUSE went out: what
    /// was in flight, which the headroom is there to hold.
    after_pause: Vec<[u64; PRIORITIES]>,
    /// Per local ingress port: the most bytes that arrived after a PAUSE (the headroom used).
    pub headroom_peak: Vec<u64>,
}

/// What a switch must send upstream after an arrival or a departure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Nothing.
    None,
    /// A PAUSE for this priority.
    Pause(u8),
    /// A resume for this priority.
    Resume(u8),
}

impl Pfc {
    /// PFC state for a switch with `cfg.headroom.len()` ports.
    pub fn new(cfg: PfcConfig) -> Pfc {
        let ports = cfg.headroom.len();
        let reserved = cfg.headroom.iter().sum::<u64>() * cfg.lossless.count_ones() as u64;
        Pfc {
            cfg,
            held: vec![[0; PRIORITIES]; ports],
            paused_at: vec![[None; PRIORITIES]; ports],
            reserved,
            after_pause: vec![[0; PRIORITIES]; ports],
            headroom_peak: vec![0; ports],
        }
    }

    /// The pause threshold of ingress port `ingress` for the switch's `buffer` as it is now.
    #[inline]
    pub fn threshold(&self, ingress: usize, buffer: &SharedBuffer) -> u64 {
        buffer.size.saturating_sub(self.reserved).saturating_sub(buffer.used) >> self.cfg.shift[ingress]
    }

    /// Bytes held for ingress port `ingress` and priority `prio`.
    pub fn held(&self, ingress: usize, prio: u8) -> u64 {
        self.held[ingress][prio as usize]
    }

    /// A lossless packet of `len` bytes from `ingress` was queued at `now` into `buffer`. Pauses
    /// the ingress when past the threshold, again once an earlier pause of `pause` has half run
    /// out.
    pub fn on_enqueue(&mut self, ingress: usize, prio: u8, len: u64, buffer: &SharedBuffer, now: Time, pause: Time) -> Signal {
        let p = prio as usize;
        self.held[ingress][p] += len;
        if self.paused_at[ingress][p].is_some() {
            self.after_pause[ingress][p] += len;
            self.headroom_peak[ingress] = self.headroom_peak[ingress].max(self.after_pause[ingress][p]);
        }
        let over = self.held[ingress][p] > self.threshold(ingress, buffer);
        let stale = self.paused_at[ingress][p].is_none_or(|at| now >= at + Time(pause.0 / 2));
        if over && stale {
            if self.paused_at[ingress][p].is_none() {
                self.after_pause[ingress][p] = 0;
            }
            self.paused_at[ingress][p] = Some(now);
            return Signal::Pause(prio);
        }
        Signal::None
    }

    /// A lossless packet of `len` bytes that came in on `ingress` left `buffer`. Resumes the
    /// ingress once far enough below the threshold.
    pub fn on_dequeue(&mut self, ingress: usize, prio: u8, len: u64, buffer: &SharedBuffer) -> Signal {
        let p = prio as usize;
        self.held[ingress][p] -= len;
        let held = self.held[ingress][p];
        if self.paused_at[ingress][p].is_some() && (held == 0 || held + self.cfg.resume_offset <= self.threshold(ingress, buffer)) {
            self.paused_at[ingress][p] = None;
            return Signal::Resume(prio);
        }
        Signal::None
    }

    /// Bytes held over every ingress and priority (for the conservation check).
    pub fn held_total(&self) -> u64 {
        self.held.iter().flatten().sum()
    }
}

/// A PAUSE (or, with 0 quanta, resume) frame for `prio`.
pub fn frame(prio: u8, quanta: u16) -> Packet {
    Packet { flags: flags::PFC, prio, pause_quanta: quanta, wire_bytes: FRAME_BYTES, ttl: INITIAL_TTL, ..Packet::default() }
}

/// How one egress port honours the PAUSE frames it receives, and what it has been paused.
#[derive(Clone, Debug, Default)]
pub struct PauseState {
    /// The latest time any priority is paused until: the common case, no pause, in one test.
    latest: Time,
    /// Allocated at the first frame the port sends or receives: most ports never see one.
    log: Option<Box<PauseLog>>,
}

/// A port's pauses, per priority.
#[derive(Clone, Debug, Default)]
struct PauseLog {
    /// Paused until then.
    until: [Time; PRIORITIES],
    /// When the pause in force began.
    since: [Time; PRIORITIES],
    /// Paused time of pauses already over.
    paused: [Time; PRIORITIES],
    /// PAUSE frames (not resumes) received.
    received: [u64; PRIORITIES],
    /// PAUSE frames (not resumes) the port sent upstream for its own ingress.
    sent: [u64; PRIORITIES],
}

impl PauseState {
    /// True if priority `prio` may not be sent at `now`.
    #[inline]
    pub fn is_paused(&self, prio: u8, now: Time) -> bool {
        self.latest > now && self.log.as_ref().is_some_and(|l| l.until.get(prio as usize).is_some_and(|&u| u > now))
    }

    /// A bit per priority paused at `now`.
    #[inline]
    pub fn mask(&self, now: Time) -> u8 {
        match &self.log {
            Some(l) if self.latest > now => (0..PRIORITIES).filter(|&p| l.until[p] > now).fold(0, |m, p| m | 1 << p),
            _ => 0,
        }
    }

    /// A frame for `prio` asking `duration` (zero: resume) arrived at `now`.
    pub fn on_frame(&mut self, prio: u8, duration: Time, now: Time) {
        let p = prio as usize;
        if p >= PRIORITIES {
            return;
        }
        let l = self.log.get_or_insert_with(Box::default);
        if l.until[p] > now {
            l.paused[p] += now - l.since[p];
        } else {
            l.paused[p] += l.until[p].saturating_sub(l.since[p]);
        }
        l.since[p] = now;
        l.until[p] = now + duration;
        if duration > Time::ZERO {
            l.received[p] += 1;
        }
        self.latest = l.until.iter().copied().max().unwrap_or(Time::ZERO);
    }

    /// The port sent a PAUSE frame for `prio` upstream.
    pub fn count_sent(&mut self, prio: u8) {
        if let Some(n) = self.log.get_or_insert_with(Box::default).sent.get_mut(prio as usize) {
            *n += 1;
        }
    }

    /// PAUSE frames for `prio` the port received.
    pub fn received(&self, prio: u8) -> u64 {
        self.log.as_ref().and_then(|l| l.received.get(prio as usize).copied()).unwrap_or(0)
    }

    /// PAUSE frames for `prio` the port sent upstream.
    pub fn sent(&self, prio: u8) -> u64 {
        self.log.as_ref().and_then(|l| l.sent.get(prio as usize).copied()).unwrap_or(0)
    }

    /// Time priority `prio` has been paused by `now`.
    pub fn paused_time(&self, prio: u8, now: Time) -> Time {
        let p = prio as usize;
        match &self.log {
            Some(l) if p < PRIORITIES => l.paused[p] + l.until[p].min(now).saturating_sub(l.since[p]),
            _ => Time::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pfc() -> Pfc {
        Pfc::new(PfcConfig { lossless: 1, shift: vec![3; 4], headroom: vec![10_000; 4], resume_offset: 3_000, quanta: MAX_QUANTA })
    }

    #[test]
    fn pauses_past_the_threshold_and_resumes_below_it_less_the_offset() {
        let mut p = pfc();
        let pause = Time::from_us(100);
        let mut b = SharedBuffer { size: 1_000_000, used: 0, alpha: 1.0 };
        // 960,000 bytes shared after the 4 x 10,000 headroom: threshold (960,000 - used) / 8.
        assert_eq!(p.threshold(2, &b), 120_000);
        let mut signal = Signal::None;
        while signal == Signal::None {
            b.used += 1_000;
            signal = p.on_enqueue(2, 0, 1_000, &b, Time::ZERO, pause);
        }
        assert_eq!(signal, Signal::Pause(0));
        let before = SharedBuffer { used: b.used - 1_000, ..b };
        assert!(p.held(2, 0) > p.threshold(2, &b) && p.held(2, 0) - 1_000 <= p.threshold(2, &before));
        assert_eq!(p.headroom_peak[2], 0, "nothing arrived after the pause yet");
        // Another arrival before half the pause ran out sends nothing; after it, a refresh.
        b.used += 1_000;
        assert_eq!(p.on_enqueue(2, 0, 1_000, &b, Time::from_us(49), pause), Signal::None);
        b.used += 1_000;
        assert_eq!(p.on_enqueue(2, 0, 1_000, &b, Time::from_us(50), pause), Signal::Pause(0));
        assert_eq!(p.headroom_peak[2], 2_000, "two packets arrived after the first pause");
        let mut signal = Signal::None;
        while signal == Signal::None {
            b.used -= 1_000;
            signal = p.on_dequeue(2, 0, 1_000, &b);
        }
        assert_eq!(signal, Signal::Resume(0));
        assert!(p.held(2, 0) + 3_000 <= p.threshold(2, &b));
    }

    #[test]
    fn a_port_pauses_until_the_time_or_the_resume_and_counts_it() {
        let mut s = PauseState::default();
        s.on_frame(3, Time::from_us(10), Time::from_us(100));
        assert!(s.is_paused(3, Time::from_us(105)) && !s.is_paused(2, Time::from_us(105)));
        assert_eq!(s.mask(Time::from_us(105)), 1 << 3);
        // Refreshed at 108 for 10 more, resumed at 112.
        s.on_frame(3, Time::from_us(10), Time::from_us(108));
        s.on_frame(3, Time::ZERO, Time::from_us(112));
        assert!(!s.is_paused(3, Time::from_us(112)));
        assert_eq!(s.paused_time(3, Time::from_us(200)), Time::from_us(12));
        assert_eq!((s.received(3), s.received(2)), (2, 0));
        // 65,535 x 512 bits at 100 Gb/s: 335.5 us.
        let t = pause_time(MAX_QUANTA, Rate::gbps(100));
        assert!(t.0.abs_diff(Time::from_secs_f64(65_535.0 * 512.0 / 100e9).0) <= 1_000, "{t}");
    }
}
