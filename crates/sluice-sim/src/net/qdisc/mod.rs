//! Queue disciplines: what a switch port does with an arriving packet. TLT's colour-aware dropping
//! comes first, then admission into the shared buffer (drop-tail with the Broadcom dynamic
//! threshold, plus an optional per-port limit), then ECN marking (DCTCP's step or RED with ns-3's
//! semantics); where admission fails, a port that trims cuts the packet to its header instead of
//! dropping it. A port may have a transmit ring beneath its discipline, which the limit and the
//! marking do not see. Each mechanism is a file; a port composes them in [`Discipline`],
//! configured per port, per link rate, or switch-wide.

mod colour;
mod dynamic_threshold;
mod ecn_step;
mod red;
mod trim;

pub use colour::ColourThreshold;
pub use dynamic_threshold::SharedBuffer;
pub use ecn_step::EcnStep;
pub use red::{Red, RedDecision, RedParams, Spacing};
pub use trim::{Trim, TrimConfig};

use crate::context::DropReason;
use crate::net::queue::PortQueue;
use crate::packet::{Ecn, Packet};
use crate::time::{Bytes, Rate, Time};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// How a port marks ECN-capable packets.
#[derive(Clone, Copy, Debug, Default)]
pub enum Marking {
    /// Never mark.
    #[default]
    Off,
    /// DCTCP's step threshold on the instantaneous queue.
    Step(EcnStep),
    /// RED.
    Red(Red),
}

impl Marking {
    /// True when the port marks at all (what a SYN's "path can mark" bit asks).
    pub fn is_on(&self) -> bool {
        !matches!(self, Marking::Off)
    }
}

/// What a port decides for an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queue the packet, with CE set when `ce`.
    Queue {
        /// Set CE.
        ce: bool,
    },
    /// Drop it.
    Drop(DropReason),
    /// No room, at a port that trims: cut a data packet to its header (the arrival, or by the
    /// port's coin the packet queued last) rather than drop it.
    Trim,
}

/// One port's discipline: its colour threshold, its admission limit and its marking.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Discipline {
    /// ECN marking (first: an idle port reads only its kind).
    pub marking: Marking,
    /// TLT: unimportant packets are dropped before the port's unimportant bytes reach this.
    pub colour: Option<ColourThreshold>,
    /// A cap on the port's queue in bytes (above its ring), besides the shared buffer's dynamic
    /// threshold.
    pub limit: Option<u64>,
    /// Bytes of the port's transmit ring beneath the discipline: the queue's first `ring` bytes
    /// are the ring's, and the limit and the marking judge only what is queued above them.
    pub ring: u64,
    /// Drop, rather than queue, non-ECT packets where an ECT packet would be marked.
    pub drop_non_ect: bool,
    /// Mark as a packet leaves, by the queue it leaves behind, rather than as it arrives.
    pub mark_on_dequeue: bool,
    /// Trim rather than drop (last: only a full queue reads it).
    pub trim: Option<Trim>,
}

impl Discipline {
    /// Decides for `pkt` arriving at `now` to a port holding `queue`; `rng` draws RED's coin. A
    /// `lossless` packet (PFC's priority) is held back upstream instead, so only a full buffer
    /// drops it.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &mut self,
        pkt: &Packet,
        queue: &PortQueue,
        buffer: &SharedBuffer,
        lossless: bool,
        rate: Rate,
        now: Time,
        rng: &mut impl Rng,
    ) -> Verdict {
        let len = pkt.wire_bytes as u64;
        if self.colour.is_some_and(|c| c.drops(pkt, queue.unimportant_bytes())) {
            return Verdict::Drop(DropReason::Colour);
        }
        let band_bytes = queue.band_bytes(pkt.prio);
        let room = if lossless {
            buffer.used + len <= buffer.size
        } else {
            self.limit.is_none_or(|l| queue.bytes() + len <= l + self.ring) && buffer.admits(band_bytes, len)
        };
        if !room || self.trim.is_some_and(|t| !t.under_threshold(band_bytes, len)) {
            if let Some(v) = self.full(pkt, lossless, room) {
                return v;
            }
        }
        let ecn_unable = pkt.ecn == Ecn::NotEct && self.drop_non_ect;
        let capable = pkt.ecn == Ecn::Ect || ecn_unable;
        let above_ring = band_bytes.saturating_sub(self.ring);
        let mark = match &mut self.marking {
            _ if self.mark_on_dequeue => false,
            Marking::Off => false,
            Marking::Step(s) => capable && s.marks(above_ring),
            Marking::Red(red) => {
                // Every arrival moves RED's average; only packets it may act on draw the coin.
                let mark = match red.on_arrival(above_ring, len, now, rate) {
                    RedDecision::Pass => false,
                    RedDecision::Forced => capable,
                    RedDecision::Early(p) => capable && rng.gen::<f64>() < p,
                };
                if mark {
                    red.on_mark();
                }
                mark
            }
        };
        match (mark, ecn_unable) {
            (true, true) => Verdict::Drop(DropReason::EcnUnable),
            (ce, _) => Verdict::Queue { ce },
        }
    }

    /// A packet the buffer has no `room` for, or past a trimming threshold: trimmed if it may
    /// be, else dropped for want of room. What may not be trimmed (ACKs, lossless traffic) is
    /// admitted past a threshold by the buffer alone (`None`).
    #[cold]
    fn full(&self, pkt: &Packet, lossless: bool, room: bool) -> Option<Verdict> {
        match self.trim {
            Some(t) if t.eligible(pkt, lossless) => Some(Verdict::Trim),
            _ if !room => Some(Verdict::Drop(DropReason::Buffer)),
            _ => None,
        }
    }

    /// Whether marks are decided as packets leave.
    #[inline]
    pub fn marks_on_dequeue(&self) -> bool {
        self.mark_on_dequeue
    }

    /// Decides whether `pkt`, just taken from `queue` at `now`, leaves CE-marked: the marking
    /// judged on the bytes that stay in its band (the HPCC simulator's switches mark at dequeue,
    /// `SwitchNode::SwitchNotifyDequeue`).
    pub fn mark_departing(&mut self, pkt: &Packet, queue: &PortQueue, rate: Rate, now: Time, rng: &mut impl Rng) -> bool {
        // A header is never marked: a mark it met before it was trimmed stays.
        if pkt.ecn != Ecn::Ect || pkt.is_trimmed() {
            return false;
        }
        let above_ring = queue.band_bytes(pkt.prio).saturating_sub(self.ring);
        match &mut self.marking {
            Marking::Off => false,
            Marking::Step(s) => s.marks(above_ring),
            Marking::Red(red) => {
                let mark = match red.on_arrival(above_ring, pkt.wire_bytes as u64, now, rate) {
                    RedDecision::Pass => false,
                    RedDecision::Forced => true,
                    RedDecision::Early(p) => rng.gen::<f64>() < p,
                };
                if mark {
                    red.on_mark();
                }
                mark
            }
        }
    }

    /// Tells the discipline a packet of `len` bytes left at `now`, `left` bytes behind it: RED's
    /// idle time starts as the queue above the port's ring empties.
    #[inline]
    pub fn dequeued(&mut self, left: u64, len: u64, now: Time) {
        if let Marking::Red(red) = &mut self.marking {
            if left <= self.ring && left + len > self.ring {
                red.on_empty(now);
            }
        }
    }
}

/// The `ecn` keys: ECN marking of a port.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EcnConfig {
    /// "off", "step" (DCTCP) or "red".
    pub mode: String,
    /// Step threshold.
    pub k: Option<Bytes>,
    /// RED lower threshold.
    pub kmin: Option<Bytes>,
    /// RED upper threshold.
    pub kmax: Option<Bytes>,
    /// RED probability at kmax.
    pub pmax: Option<f64>,
    /// RED: EWMA weight of the newest queue sample (default 1: the instantaneous queue).
    pub weight: Option<f64>,
    /// RED: the gentle region from kmax to twice kmax (default false).
    pub gentle: Option<bool>,
    /// RED: "none" (default: each packet independently), "uniform" or "wait" (ns-3's count-based
    /// spacing with Wait off or on).
    pub spacing: Option<String>,
    /// RED: mean packet size for byte-mode counting and idle decay (default 500B, as ns-3).
    pub mean_packet: Option<Bytes>,
    /// When a packet is judged: "enqueue" (default: by the queue it joins) or "dequeue" (by the
    /// queue it leaves behind, as the HPCC simulator's switches do).
    pub mark_at: Option<String>,
    /// What happens to a packet that is not ECN-capable where an ECT one would be marked:
    /// "pass" (default: it is queued) or "drop" (RED's classic behaviour).
    pub non_ect: Option<String>,
}

impl EcnConfig {
    /// Whether non-ECT packets are dropped where ECT ones would be marked.
    pub fn drops_non_ect(&self, prefix: &str) -> Result<bool, String> {
        match self.non_ect.as_deref() {
            None | Some("pass") => Ok(false),
            Some("drop") => Ok(true),
            Some(v) => Err(format!("{prefix}.non_ect: expected \"pass\" or \"drop\", got \"{v}\"")),
        }
    }

    /// Validates and converts; errors name the key under `prefix`.
    pub fn marking(&self, prefix: &str) -> Result<Marking, String> {
        let need = |v: Option<Bytes>, key: &str| {
            v.map(|b| b.0).ok_or_else(|| format!("{prefix}.{key}: required for mode = \"{}\"", self.mode))
        };
        let reject = |present: bool, key: &str| {
            if present {
                Err(format!("{prefix}.{key}: not used by mode = \"{}\"", self.mode))
            } else {
                Ok(())
            }
        };
        let red_keys = self.kmin.is_some()
            || self.kmax.is_some()
            || self.pmax.is_some()
            || self.weight.is_some()
            || self.gentle.is_some()
            || self.spacing.is_some()
            || self.mean_packet.is_some();
        match self.mode.as_str() {
            // Thresholds may stay in place when marking is switched off (e.g. by --set).
            "off" | "" => Ok(Marking::Off),
            "step" => {
                reject(red_keys, "kmin/kmax/pmax/weight/gentle/spacing/mean_packet")?;
                Ok(Marking::Step(EcnStep { k: need(self.k, "k")? }))
            }
            "red" => {
                reject(self.k.is_some(), "k")?;
                let (kmin, kmax) = (need(self.kmin, "kmin")?, need(self.kmax, "kmax")?);
                let pmax = self.pmax.ok_or_else(|| format!("{prefix}.pmax: required for mode = \"red\""))?;
                if kmin >= kmax {
                    return Err(format!("{prefix}.kmin: expected kmin < kmax, got {kmin} >= {kmax} bytes"));
                }
                if !(pmax > 0.0 && pmax <= 1.0) {
                    return Err(format!("{prefix}.pmax: expected a probability in (0, 1], got {pmax}"));
                }
                let weight = self.weight.unwrap_or(1.0);
                if !(weight > 0.0 && weight <= 1.0) {
                    return Err(format!("{prefix}.weight: expected a number in (0, 1], got {weight}"));
                }
                let spacing = match self.spacing.as_deref() {
                    None | Some("none") => Spacing::None,
                    Some("uniform") => Spacing::Uniform,
                    Some("wait") => Spacing::Wait,
                    Some(v) => return Err(format!("{prefix}.spacing: expected \"none\", \"uniform\" or \"wait\", got \"{v}\"")),
                };
                let mean_packet = self.mean_packet.map_or(500, |b| b.0);
                if mean_packet == 0 {
                    return Err(format!("{prefix}.mean_packet: expected a positive size like \"500B\""));
                }
                let gentle = self.gentle.unwrap_or(false);
                Ok(Marking::Red(Red::new(RedParams { kmin, kmax, pmax, weight, gentle, spacing, mean_packet })))
            }
            m => Err(format!("{prefix}.mode: expected \"off\", \"step\" or \"red\", got \"{m}\"")),
        }
    }

    /// Whether marks are decided at dequeue.
    pub fn marks_on_dequeue(&self, prefix: &str) -> Result<bool, String> {
        match self.mark_at.as_deref() {
            None | Some("enqueue") => Ok(false),
            Some("dequeue") if self.drops_non_ect(prefix)? => {
                Err(format!("{prefix}.mark_at: \"dequeue\" cannot drop non-ECT packets; use non_ect = \"pass\" or mark_at = \"enqueue\""))
            }
            Some("dequeue") => Ok(true),
            Some(v) => Err(format!("{prefix}.mark_at: expected \"enqueue\" or \"dequeue\", got \"{v}\"")),
        }
    }

    /// The discipline this configuration gives a port, with an optional queue limit.
    pub fn discipline(&self, prefix: &str, limit: Option<u64>) -> Result<Discipline, String> {
        Ok(Discipline {
            colour: None,
            limit,
            ring: 0,
            marking: self.marking(prefix)?,
            drop_non_ect: self.drops_non_ect(prefix)?,
            mark_on_dequeue: self.marks_on_dequeue(prefix)?,
            trim: None,
        })
    }
}

/// `[switch.rates."<rate>"]` and `[switch.ports."<port>"]`: ECN and a queue limit for ports of one
/// link rate or one named port, over the switch-wide `[switch.ecn]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// ECN marking for these ports (replaces the switch-wide table as a whole).
    pub ecn: Option<EcnConfig>,
    /// A cap on each such port's queue, besides the shared buffer's dynamic threshold.
    pub buffer: Option<Bytes>,
    /// Bytes of each such port's transmit ring beneath its discipline (default none): `buffer`
    /// and the ECN marking judge only the queue above it (a ring without byte queue limits;
    /// ns-3's device queue beneath its queue discs).
    pub ring: Option<Bytes>,
    /// TLT's colour threshold for these ports, over `tlt.threshold`.
    pub tlt_threshold: Option<Bytes>,
    /// Trimming at these ports (replaces `[switch.trim]` as a whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<TrimConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ect(len: u32) -> Packet {
        Packet { wire_bytes: len, ecn: Ecn::Ect, ..Packet::default() }
    }

    /// A one-band queue holding `bytes` in packets of `colour`.
    fn queue(bytes: u32, colour: crate::packet::Colour) -> PortQueue {
        let mut q = PortQueue::new(1);
        if bytes > 0 {
            q.push(Packet { wire_bytes: bytes, colour, ..Packet::default() });
        }
        q
    }

    #[test]
    fn marking_at_dequeue_judges_the_queue_left_behind() {
        // The HPCC simulator marks as a packet leaves, by the bytes still queued behind it.
        let buffer = SharedBuffer { size: 100_000, used: 0, alpha: 1.0 };
        let mut d = Discipline { marking: Marking::Step(EcnStep { k: 1000 }), mark_on_dequeue: true, ..Discipline::default() };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let (r, u) = (Rate::gbps(10), crate::packet::Colour::Unimportant);
        assert_eq!(d.admit(&ect(1000), &queue(5000, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: false }, "no mark on arrival");
        assert!(d.mark_departing(&ect(1000), &queue(1500, u), r, Time(0), &mut rng), "1500 bytes stay behind");
        assert!(!d.mark_departing(&ect(1000), &queue(500, u), r, Time(0), &mut rng), "the queue drained below k");
        assert!(!d.mark_departing(&Packet { wire_bytes: 1000, ..Packet::default() }, &queue(1500, u), r, Time(0), &mut rng), "not ECT");
        let cfg = |at: &str, non_ect: &str| EcnConfig {
            mode: "step".into(),
            k: Some(Bytes(1000)),
            mark_at: Some(at.into()),
            non_ect: Some(non_ect.into()),
            ..EcnConfig::default()
        };
        assert!(cfg("dequeue", "pass").discipline("switch.ecn", None).unwrap().marks_on_dequeue());
        assert!(!cfg("enqueue", "pass").discipline("switch.ecn", None).unwrap().marks_on_dequeue());
        assert_eq!(
            cfg("departure", "pass").discipline("switch.ecn", None).unwrap_err(),
            "switch.ecn.mark_at: expected \"enqueue\" or \"dequeue\", got \"departure\""
        );
        assert!(cfg("dequeue", "drop").discipline("switch.ecn", None).unwrap_err().starts_with("switch.ecn.mark_at: \"dequeue\" cannot drop"));
    }

    #[test]
    fn admission_then_marking() {
        let buffer = SharedBuffer { size: 10_000, used: 0, alpha: 1.0 };
        let mut d = Discipline { colour: None, limit: Some(3000), marking: Marking::Step(EcnStep { k: 1000 }), ..Discipline::default() };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let r = Rate::gbps(10);
        let u = crate::packet::Colour::Unimportant;
        assert_eq!(d.admit(&ect(1000), &queue(500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: false });
        assert_eq!(d.admit(&ect(1000), &queue(1500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: true });
        assert_eq!(d.admit(&ect(1000), &queue(2500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Drop(DropReason::Buffer), "port limit");
        let not_ect = Packet { wire_bytes: 100, ..Packet::default() };
        assert_eq!(d.admit(&not_ect, &queue(1500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: false });
        d.drop_non_ect = true;
        assert_eq!(d.admit(&not_ect, &queue(1500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Drop(DropReason::EcnUnable));
    }

    #[test]
    fn a_ring_beneath_the_discipline_is_not_judged() {
        // ns-3's 100-packet device queue under a queue disc: marking and the limit see the bytes
        // above the ring only.
        let buffer = SharedBuffer { size: 100_000, used: 0, alpha: 1.0 };
        let mut d = Discipline { limit: Some(3000), ring: 5000, marking: Marking::Step(EcnStep { k: 1000 }), ..Discipline::default() };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let (r, u) = (Rate::gbps(10), crate::packet::Colour::Unimportant);
        assert_eq!(d.admit(&ect(1000), &queue(5500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: false }, "500 above");
        assert_eq!(d.admit(&ect(1000), &queue(6500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: true }, "1500 above");
        assert_eq!(d.admit(&ect(1000), &queue(7000, u), &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: true }, "3000 with it");
        assert_eq!(d.admit(&ect(1000), &queue(7500, u), &buffer, false, r, Time(0), &mut rng), Verdict::Drop(DropReason::Buffer), "the limit");
        let cfg: PortConfig = toml::from_str("ring = \"150200B\"").unwrap();
        assert_eq!(cfg.ring, Some(Bytes(150_200)));
    }

    #[test]
    fn colour_threshold_drops_unimportant_first_and_composes_with_marking() {
        use crate::packet::Colour;
        let buffer = SharedBuffer { size: 100_000, used: 0, alpha: 1.0 };
        let colour = Some(ColourThreshold { bytes: 4_000 });
        let mut d = Discipline { colour, limit: None, marking: Marking::Step(EcnStep { k: 1_000 }), ..Discipline::default() };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let r = Rate::gbps(10);
        let important = Packet { colour: Colour::Important, ..ect(1000) };
        // 3,000 unimportant bytes queued: one more unimportant packet would reach 4,000.
        let q = queue(3000, Colour::Unimportant);
        assert_eq!(d.admit(&ect(1000), &q, &buffer, false, r, Time(0), &mut rng), Verdict::Drop(DropReason::Colour));
        assert_eq!(d.admit(&important, &q, &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: true }, "marked like any packet");
        // Important bytes do not count toward the threshold.
        let q = queue(50_000, Colour::Important);
        assert_eq!(d.admit(&ect(1000), &q, &buffer, false, r, Time(0), &mut rng), Verdict::Queue { ce: true });
        // Past the shared buffer an important packet is dropped as any other.
        let full = SharedBuffer { size: 100_000, used: 99_500, alpha: 1.0 };
        assert_eq!(d.admit(&important, &queue(0, Colour::Unimportant), &full, false, r, Time(0), &mut rng), Verdict::Drop(DropReason::Buffer));
    }

    #[test]
    fn a_port_never_holds_the_colour_threshold_in_unimportant_bytes() {
        use crate::packet::Colour;
        use rand::Rng;
        let threshold = 20_000;
        let buffer = SharedBuffer { size: 1_000_000, used: 0, alpha: 1.0 };
        let mut d = Discipline { colour: Some(ColourThreshold { bytes: threshold }), ..Discipline::default() };
        let mut q = PortQueue::new(1);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let (mut dropped, mut important_queued, mut most) = (0, 0, 0);
        for _ in 0..100_000 {
            // Arrivals outpace departures two to one, one packet in ten important.
            if rng.gen_bool(1.0 / 3.0) {
                q.pop();
                continue;
            }
            let colour = if rng.gen_bool(0.1) { Colour::Important } else { Colour::Unimportant };
            let p = Packet { wire_bytes: rng.gen_range(64..=1538), colour, ..Packet::default() };
            match d.admit(&p, &q, &buffer, false, Rate::gbps(10), Time(0), &mut rng) {
                Verdict::Queue { .. } => {
                    important_queued += (colour == Colour::Important) as u32;
                    q.push(p);
                }
                Verdict::Drop(reason) => {
                    assert_eq!((reason, colour), (DropReason::Colour, Colour::Unimportant));
                    dropped += 1;
                }
                Verdict::Trim => panic!("no port here trims"),
            }
            assert!(q.unimportant_bytes() < threshold, "{} unimportant bytes queued", q.unimportant_bytes());
            most = most.max(q.bytes());
        }
        assert!(dropped > 1_000 && important_queued > 5_000, "{dropped} dropped, {important_queued} important queued");
        assert!(most > threshold, "important packets queue past the threshold ({most} bytes at most)");
    }

    #[test]
    fn config_errors_name_the_key() {
        let cfg = EcnConfig { mode: "red".into(), kmin: Some(Bytes(5)), kmax: Some(Bytes(5)), pmax: Some(0.1), ..EcnConfig::default() };
        assert!(cfg.marking("switch.ecn").unwrap_err().contains("switch.ecn.kmin"));
        let cfg = EcnConfig { spacing: Some("often".into()), kmax: Some(Bytes(9)), ..cfg };
        assert!(cfg.marking("switch.ports.\"sw0->h1\".ecn").unwrap_err().starts_with("switch.ports.\"sw0->h1\".ecn.spacing"));
        let step = EcnConfig { mode: "step".into(), k: Some(Bytes(1)), gentle: Some(true), ..EcnConfig::default() };
        assert!(step.marking("switch.ecn").is_err());
    }
}
