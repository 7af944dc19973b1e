//! The TCP receiver: in-order reassembly and delivery, cumulative ACK with SACK blocks, delayed
//! ACK, and the ECN echo (classic ECE-until-CWR, or per-packet for DCTCP).

use super::sack::RangeSet;
use super::TcpConfig;
use crate::cc::EcnMode;
use crate::event::TimerSlot;
use crate::packet::hpcc_int::HopIdx;
use crate::packet::tcp_int::TcpInt;
use crate::packet::{
    flags, sack_option_bytes, Colour, Ecn, Packet, SackBlock, INITIAL_TTL, MAX_SACK_BLOCKS,
};
use crate::time::Time;

/// What the receiver wants done after a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPlan {
    /// Send an ACK now.
    Now,
    /// Wait; arm the delayed-ACK timer for this deadline if it is not armed.
    Delay(Time),
}

/// Receiver half of a TCP connection.
pub struct Receiver {
    /// Next byte expected in order.
    pub rcv_nxt: u64,
    ooo: RangeSet,
    /// Most recently received out-of-order block (reported first, RFC 2018).
    recent_block: Option<(u64, u64)>,
    ecn_mode: EcnMode,
    /// Classic ECN: echo ECE until the sender's CWR.
    ece_latched: bool,
    /// Per-packet ECN: CE state of the segments awaiting a delayed ACK.
    pending_ce: bool,
    unacked_segments: u32,
    delayed_ack: Option<Time>,
    delayed_ack_segments: u32,
    /// Wire bytes of an ACK without options.
    bare_frame: u32,
    /// The delayed-ACK timer.
    pub delack_timer: TimerSlot,
    ts_recent: Time,
    /// Switch hops the last data segment crossed, echoed on ACKs (Swift scales its target by it).
    hops: Option<u8>,
    /// When TCP-INT is echoed: the option of the latest data segment, reflected on the next ACK.
    pub int_echo: Option<Option<TcpInt>>,
    /// ACKs carry HPCC's INT header (the flow's data does).
    pub hop_records: bool,
    /// The hop records of the latest data segment not yet echoed; the world moves them onto the
    /// next ACK (or frees them when newer records replace them).
    pub hops_held: Option<HopIdx>,
    /// TLT: ACKs are important (control), and the one answering an important packet is its echo.
    tlt: bool,
    /// An important packet arrived that the next ACK echoes.
    echo_due: bool,
}

impl Receiver {
    /// A receiver expecting byte 0.
    pub fn new(cfg: &TcpConfig, ecn_mode: EcnMode) -> Receiver {
        Receiver {
            rcv_nxt: 0,
            ooo: RangeSet::default(),
            recent_block: None,
            ecn_mode,
            ece_latched: false,
            pending_ce: false,
            unacked_segments: 0,
            delayed_ack: cfg.delayed_ack,
            delayed_ack_segments: cfg.delayed_ack_segments,
            bare_frame: cfg.frame(0),
            delack_timer: TimerSlot::default(),
            ts_recent: Time::ZERO,
            hops: None,
            int_echo: None,
            hop_records: false,
            hops_held: None,
            tlt: cfg.tlt,
            echo_due: false,
        }
    }

    /// The ECN handling the client settled on at connection setup.
    pub fn set_ecn_mode(&mut self, mode: EcnMode) {
        self.ecn_mode = mode;
    }

    /// Takes in a data (or FIN) segment. When a per-packet-ECN receiver must first acknowledge
    /// earlier segments under their old CE state, that ACK is returned in the first slot; the
    /// last slot is the data it hands the application in order, as (first byte, bytes).
    pub fn on_segment(&mut self, pkt: &Packet, now: Time) -> (Option<Packet>, AckPlan, (u64, u64)) {
        let ce = pkt.ecn == Ecn::Ce;
        let mut early = None;
        if self.ecn_mode == EcnMode::PerPacket && self.unacked_segments > 0 && ce != self.pending_ce {
            // DCTCP receiver state machine: the CE state changed while an ACK was being held.
            early = Some(self.build_ack(pkt));
        }
        match self.ecn_mode {
            EcnMode::Classic => {
                if pkt.has(flags::CWR) {
                    self.ece_latched = false;
                }
                if ce {
                    self.ece_latched = true;
                }
            }
            EcnMode::PerPacket => self.pending_ce = ce,
            EcnMode::Off => {}
        }
        if let (Some(echo), Some(o)) = (self.int_echo.as_mut(), pkt.int) {
            *echo = Some(o);
        }
        self.hops = Some(INITIAL_TTL.saturating_sub(pkt.ttl));

        let (start, end) = (pkt.seq, pkt.seq + pkt.payload as u64);
        let in_order = start <= self.rcv_nxt && end > self.rcv_nxt;
        let mut filled_hole = false;
        let before = self.rcv_nxt;
        if in_order {
            self.ts_recent = pkt.ts;
            self.rcv_nxt = end;
            while let Some(e) = self.ooo.take_at(self.rcv_nxt) {
                self.rcv_nxt = self.rcv_nxt.max(e);
                filled_hole = true;
            }
        } else if start > self.rcv_nxt {
            self.ooo.insert(start, end);
            self.recent_block = self.ooo.containing(start);
        }
        self.unacked_segments += 1;
        let important = self.tlt && pkt.colour == Colour::Important;
        self.echo_due |= important;

        let immediate = important
            || !in_order
            || filled_hole
            || !self.ooo.is_empty()
            || pkt.has(flags::FIN)
            || self.delayed_ack.is_none()
            || self.unacked_segments >= self.delayed_ack_segments;
        let plan = match (immediate, self.delayed_ack) {
            (false, Some(d)) => AckPlan::Delay(now + d),
            _ => AckPlan::Now,
        };
        (early, plan, (before, self.rcv_nxt - before))
    }

    /// Builds the ACK for the current state in reply to `data` (the packet that triggered it).
    pub fn build_ack(&mut self, data: &Packet) -> Packet {
        let mut ack = Packet {
            flow: data.flow,
            src: data.dst,
            dst: data.src,
            ack: self.rcv_nxt,
            flags: flags::ACK | flags::REVERSE,
            ttl: 64,
            prio: data.prio,
            ts_echo: self.ts_recent,
            hops_echo: self.hops,
            ..Packet::default()
        };
        let ece = match self.ecn_mode {
            EcnMode::Classic => self.ece_latched,
            EcnMode::PerPacket => self.pending_ce,
            EcnMode::Off => false,
        };
        if ece {
            ack.flags |= flags::ECE;
        }
        if self.tlt {
            ack.colour = if std::mem::take(&mut self.echo_due) { Colour::Echo } else { Colour::Control };
        }
        let mut n = 0;
        let mut push = |blk: (u64, u64), ack: &mut Packet| {
            if n < MAX_SACK_BLOCKS && blk.0 > ack.ack && !ack.sack[..n].iter().any(|b| ack.ack + b.start as u64 == blk.0) {
                let off = |s: u64| (s - ack.ack).min(u32::MAX as u64) as u32;
                ack.sack[n] = SackBlock { start: off(blk.0), end: off(blk.1) };
                n += 1;
            }
        };
        if let Some(b) = self.recent_block.and_then(|b| self.ooo.containing(b.0)) {
            push(b, &mut ack);
        }
        for &b in self.ooo.ranges().iter().rev() {
            push(b, &mut ack);
        }
        ack.sack_len = n as u8;
        ack.wire_bytes = self.bare_frame + sack_option_bytes(n as u32);
        if let Some(seen) = self.int_echo {
            let o = seen.unwrap_or_default();
            ack.int = Some(TcpInt { int_ecr: o.int_val, id_ecr: o.id, lat_ecr: o.lat, ..TcpInt::default() });
            ack.wire_bytes += crate::packet::tcp_int::LEN as u32;
        }
        if self.hop_records {
            ack.wire_bytes += crate::packet::hpcc_int::HEADER_BYTES;
        }
        self.unacked_segments = 0;
        self.delack_timer.cancel();
        ack
    }

    /// True while segments beyond a gap wait for it to fill.
    pub fn has_out_of_order(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// True when an ACK is being held back by delayed ACK.
    pub fn has_unacked(&self) -> bool {
        self.unacked_segments > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(seq: u64, len: u32, ecn: Ecn) -> Packet {
        Packet { seq, payload: len, ecn, flags: flags::ACK, ts: Time(seq + 1), ..Packet::default() }
    }

    #[test]
    fn reassembles_in_order_and_reports_sack_blocks() {
        let mut r = Receiver::new(&TcpConfig::default(), EcnMode::Off);
        let (_, _, d) = r.on_segment(&data(0, 100, Ecn::NotEct), Time(1));
        assert_eq!(d, (0, 100));
        let (_, plan, _) = r.on_segment(&data(200, 100, Ecn::NotEct), Time(2));
        assert_eq!(plan, AckPlan::Now);
        r.on_segment(&data(400, 100, Ecn::NotEct), Time(3));
        let a = r.build_ack(&data(400, 100, Ecn::NotEct));
        assert_eq!(a.ack, 100);
        let blocks: Vec<_> = a.sack_ranges().collect();
        assert_eq!(blocks, vec![(400, 500), (200, 300)], "most recent block first");
        let (_, _, d) = r.on_segment(&data(100, 100, Ecn::NotEct), Time(4));
        assert_eq!((r.rcv_nxt, d), (300, (100, 200)), "the hole's fill releases the block behind it");
        let (_, _, d) = r.on_segment(&data(0, 100, Ecn::NotEct), Time(5));
        assert_eq!(d.1, 0, "duplicates are not delivered twice");
    }

    #[test]
    fn per_packet_ecn_acks_early_when_ce_changes_under_delayed_ack() {
        let cfg = TcpConfig { delayed_ack: Some(Time::from_us(10)), delayed_ack_segments: 2, ..TcpConfig::default() };
        let mut r = Receiver::new(&cfg, EcnMode::PerPacket);
        let (early, plan, _) = r.on_segment(&data(0, 100, Ecn::Ect), Time(1));
        assert!(early.is_none());
        assert!(matches!(plan, AckPlan::Delay(_)));
        let (early, plan, _) = r.on_segment(&data(100, 100, Ecn::Ce), Time(2));
        let early = early.expect("CE change forces an ACK of the held segment");
        assert!(!early.has(flags::ECE));
        assert_eq!(plan, AckPlan::Delay(Time(2) + Time::from_us(10)));
        let a = r.build_ack(&data(100, 100, Ecn::Ce));
        assert!(a.has(flags::ECE));
        assert_eq!(a.ack, 200);
    }

    #[test]
    fn echoes_the_hops_the_data_crossed() {
        let mut r = Receiver::new(&TcpConfig::default(), EcnMode::Off);
        assert_eq!(r.build_ack(&data(0, 0, Ecn::NotEct)).hops_echo, None);
        let seg = Packet { ttl: INITIAL_TTL - 3, ..data(0, 100, Ecn::NotEct) };
        r.on_segment(&seg, Time(1));
        assert_eq!(r.build_ack(&seg).hops_echo, Some(3));
    }

    #[test]
    fn an_important_packet_is_acknowledged_at_once_with_an_echo() {
        let cfg = TcpConfig { delayed_ack: Some(Time::from_us(10)), delayed_ack_segments: 2, tlt: true, ..TcpConfig::default() };
        let mut r = Receiver::new(&cfg, EcnMode::Off);
        let (_, plan, _) = r.on_segment(&data(0, 100, Ecn::NotEct), Time(1));
        assert!(matches!(plan, AckPlan::Delay(_)), "an unimportant segment waits for delayed ACK");
        let imp = Packet { colour: Colour::Important, ..data(100, 100, Ecn::NotEct) };
        let (_, plan, _) = r.on_segment(&imp, Time(2));
        assert_eq!(plan, AckPlan::Now);
        assert_eq!(r.build_ack(&imp).colour, Colour::Echo);
        r.on_segment(&data(200, 100, Ecn::NotEct), Time(3));
        assert_eq!(r.build_ack(&imp).colour, Colour::Control, "one echo per important packet");
    }

    #[test]
    fn classic_ecn_echoes_until_cwr() {
        let mut r = Receiver::new(&TcpConfig::default(), EcnMode::Classic);
        r.on_segment(&data(0, 100, Ecn::Ce), Time(1));
        assert!(r.build_ack(&data(0, 100, Ecn::Ce)).has(flags::ECE));
        r.on_segment(&data(100, 100, Ecn::Ect), Time(2));
        assert!(r.build_ack(&data(100, 100, Ecn::Ect)).has(flags::ECE));
        let mut cwr = data(200, 100, Ecn::Ect);
        cwr.flags |= flags::CWR;
        r.on_segment(&cwr, Time(3));
        assert!(!r.build_ack(&cwr).has(flags::ECE));
    }
}
