//! TLT's window-based marking at a TCP sender (Lim et al., "Toward Timeout-less Transport in
//! Commodity Datacenter Networks", EuroSys 2021, section 4.1, as the public ns-3 code does it):
//!
//! - the last data packet the first window allows is important;
//! - a receiver answers an important packet with an important echo, and the sender's next data
//!   packet after an echo is important, so at most one important data packet is in flight;
//! - when an echo arrives and neither the window nor the application lets new data out, the
//!   sender proactively retransmits, marked important, a piece of its oldest unacknowledged
//!   unimportant bytes: one byte when the unimportant packets sent before the echoed packet (and
//!   after the important one before it) are all acknowledged, a full segment when loss is
//!   probable: one of them is not (the echo overtook it), there were none to tell, or the sender
//!   is in recovery. The full segment then repairs the loss itself. In recovery the echo's
//!   important packet is such a piece even when the window could send, so a lost
//!   retransmission is resent too.
//!
//! Switches drop unimportant packets first, so the important packet survives congestion and its
//! echo keeps the ACK clock running: every loss is found by duplicate ACKs or SACK, not a timeout.
//!
//! Where the published code leaves a case open, sluice chooses: a round's unimportant packets are
//! those sent before its important packet (so its echo must find them acknowledged unless lost),
//! a retransmission timeout restarts marking as for a first window (the public code stops
//! marking after one), and an important packet is acknowledged at once, even under delayed ACK.

use super::sack::RangeSet;
use crate::packet::Colour;

/// Which data packet the sender marks important next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// An important packet is in flight; wait for its echo.
    Echo,
    /// The first window (or the first after a timeout): its last packet is important.
    FirstWindow,
    /// An echo arrived: the next data packet is important.
    Next,
}

/// The TLT state of one sender.
#[derive(Clone, Debug)]
pub struct TltSender {
    pending: Pending,
    /// Every unacknowledged byte sent unimportant.
    unimportant: RangeSet,
    /// Unacknowledged unimportant bytes sent since the last important packet.
    round: RangeSet,
    /// Unacknowledged unimportant bytes sent before the last important packet and after the one
    /// before it: its echo finds them acknowledged unless one was lost.
    prev_round: RangeSet,
    /// Whether any unimportant packet was sent in `round`, and in `prev_round`.
    round_sent: bool,
    prev_round_sent: bool,
    /// What the sender counted.
    pub counts: TltCounts,
}

/// One sender's TLT counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TltCounts {
    /// Data packets sent important, proactive retransmissions included.
    pub important_packets: u64,
    /// Important echoes received.
    pub echoes: u64,
    /// Proactive retransmissions sent.
    pub proactive_retransmissions: u64,
}

impl std::ops::AddAssign for TltCounts {
    fn add_assign(&mut self, o: TltCounts) {
        self.important_packets += o.important_packets;
        self.echoes += o.echoes;
        self.proactive_retransmissions += o.proactive_retransmissions;
    }
}

impl Default for TltSender {
    fn default() -> Self {
        TltSender {
            pending: Pending::FirstWindow,
            unimportant: RangeSet::default(),
            round: RangeSet::default(),
            prev_round: RangeSet::default(),
            round_sent: false,
            prev_round_sent: false,
            counts: TltCounts::default(),
        }
    }
}

impl TltSender {
    /// The colour of data segment `[seq, end)` about to be sent; `last_of_window` says nothing
    /// can follow it now (the window is full or no data is left), `fin` that it carries the FIN.
    pub fn colour_data(&mut self, seq: u64, end: u64, last_of_window: bool, fin: bool) -> Colour {
        let important = match self.pending {
            Pending::Next => true,
            Pending::FirstWindow => last_of_window,
            Pending::Echo => false,
        };
        if important {
            self.sent_important();
            return Colour::Important;
        }
        if fin {
            // A FIN is a control packet: important, but not the round's marked packet.
            return Colour::Control;
        }
        self.unimportant.insert(seq, end);
        self.round.insert(seq, end);
        self.round_sent = true;
        Colour::Unimportant
    }

    /// An important data packet left: wait for its echo, and start a round.
    fn sent_important(&mut self) {
        self.pending = Pending::Echo;
        self.counts.important_packets += 1;
        self.prev_round = std::mem::take(&mut self.round);
        self.prev_round_sent = std::mem::take(&mut self.round_sent);
    }

    /// True when an echo arrived and the next data packet, important, has not gone yet.
    #[inline]
    pub fn wants_important(&self) -> bool {
        self.pending == Pending::Next
    }

    /// The proactive retransmission when nothing new may be sent: a piece `[seq, end)` of the
    /// oldest unacknowledged unimportant bytes below `nxt` (outside recovery, those of the
    /// previous round first), of one
    /// byte or `mss` bytes; `[una, nxt)` when no unimportant byte is outstanding. The piece
    /// counts as sent important.
    pub fn proactive(&mut self, una: u64, nxt: u64, mss: u64, in_recovery: bool) -> (u64, u64) {
        let loss_probable = in_recovery || !self.prev_round_sent || !self.prev_round.is_empty();
        let size = if loss_probable { mss } else { 1 };
        // In recovery the oldest hole holds the cumulative ACK back (its retransmission may have
        // been lost); otherwise the previous round's missing bytes are the probable losses.
        let source = if in_recovery || self.prev_round.is_empty() { &self.unimportant } else { &self.prev_round };
        let (start, end) = source.ranges().first().copied().unwrap_or((una, nxt));
        let piece = (start, end.min(start + size).min(nxt));
        for set in [&mut self.unimportant, &mut self.round, &mut self.prev_round] {
            set.remove(piece.0, piece.1);
        }
        self.sent_important();
        self.counts.proactive_retransmissions += 1;
        piece
    }

    /// An ACK arrived: `echo` if it answers an important packet; `una` and the SACKed ranges
    /// acknowledge unimportant bytes.
    pub fn on_ack(&mut self, echo: bool, una: u64, sacked: impl Iterator<Item = (u64, u64)> + Clone) {
        if echo {
            self.counts.echoes += 1;
            self.pending = Pending::Next;
        }
        for set in [&mut self.unimportant, &mut self.round, &mut self.prev_round] {
            set.remove_below(una);
            for (s, e) in sacked.clone() {
                set.remove(s, e);
            }
        }
    }

    /// A retransmission timeout: the window restarts, and so does marking.
    pub fn on_timeout(&mut self) {
        self.pending = Pending::FirstWindow;
    }

    /// The next data packet is important, with no echo to wait for: a queue pair's first packet
    /// and its first after a timeout, as the TLT simulator's NIC marks them.
    pub fn mark_next(&mut self) {
        self.pending = Pending::Next;
    }

    /// Whether any byte sent unimportant is still unacknowledged: only then may a proactive
    /// retransmission repair something (a queue pair forces one only then, as that NIC does).
    pub fn has_unimportant(&self) -> bool {
        !self.unimportant.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    /// A sender that sent a first window of `n` segments, the last one important.
    fn after_first_window(n: u64) -> TltSender {
        let mut t = TltSender::default();
        for i in 0..n {
            let c = t.colour_data(i * MSS, (i + 1) * MSS, i + 1 == n, false);
            assert_eq!(c == Colour::Important, i + 1 == n, "segment {i}");
        }
        t
    }

    #[test]
    fn after_an_echo_the_next_data_packet_is_important_and_only_it() {
        let mut t = after_first_window(4);
        assert!(!t.wants_important());
        t.on_ack(true, 4 * MSS, std::iter::empty());
        assert!(t.wants_important());
        assert_eq!(t.colour_data(4 * MSS, 5 * MSS, false, false), Colour::Important);
        assert_eq!(t.colour_data(5 * MSS, 6 * MSS, true, false), Colour::Unimportant);
        assert_eq!(t.colour_data(6 * MSS, 7 * MSS, true, true), Colour::Control, "a FIN is control");
        assert_eq!(t.counts, TltCounts { important_packets: 2, echoes: 1, proactive_retransmissions: 0 });
    }

    #[test]
    fn proactive_piece_is_one_byte_after_a_clean_round_and_a_segment_after_a_loss() {
        // First window: 0-2 unimportant, 3 important; its echo acknowledges all four.
        let mut t = after_first_window(4);
        t.on_ack(true, 4 * MSS, std::iter::empty());
        // 4 goes important, then 5 and 6 unimportant; 4's echo makes 7 important.
        assert_eq!(t.colour_data(4 * MSS, 5 * MSS, false, false), Colour::Important);
        t.colour_data(5 * MSS, 6 * MSS, false, false);
        t.colour_data(6 * MSS, 7 * MSS, false, false);
        t.on_ack(true, 5 * MSS, std::iter::empty());
        assert_eq!(t.colour_data(7 * MSS, 8 * MSS, false, false), Colour::Important);
        t.colour_data(8 * MSS, 9 * MSS, true, false);
        // 7's echo finds 5 and 6 (sent between 4 and 7) acknowledged: one byte of 8.
        t.on_ack(true, 8 * MSS, std::iter::empty());
        assert_eq!(t.proactive(8 * MSS, 9 * MSS, MSS, false), (8 * MSS, 8 * MSS + 1));
        // 8 was lost: the piece's echo finds the rest of it missing, so the next piece is that.
        t.on_ack(true, 8 * MSS + 1, std::iter::empty());
        assert_eq!(t.proactive(8 * MSS + 1, 9 * MSS, MSS, false), (8 * MSS + 1, 9 * MSS));
        assert_eq!(t.counts, TltCounts { important_packets: 5, echoes: 4, proactive_retransmissions: 2 });
    }

    #[test]
    fn a_round_without_unimportant_packets_makes_loss_probable() {
        let mut t = after_first_window(4);
        t.on_ack(true, 4 * MSS, std::iter::empty());
        t.colour_data(4 * MSS, 5 * MSS, true, false);
        // Nothing went unimportant between 3 and 4, so nothing tells that no loss happened.
        t.on_ack(true, 4 * MSS, std::iter::empty());
        assert_eq!(t.proactive(4 * MSS, 5 * MSS, MSS, false), (4 * MSS, 5 * MSS));
    }

    #[test]
    fn in_recovery_the_piece_is_a_full_segment_of_the_oldest_hole() {
        // Holes at 1 and 2; segment 4 important, 5 unimportant and lost, 6 important.
        let setup = || {
            let mut t = after_first_window(4);
            t.on_ack(true, MSS, [(3 * MSS, 4 * MSS)].into_iter());
            t.colour_data(4 * MSS, 5 * MSS, false, false);
            t.colour_data(5 * MSS, 6 * MSS, false, false);
            t.on_ack(true, MSS, [(3 * MSS, 5 * MSS)].into_iter());
            t.colour_data(6 * MSS, 7 * MSS, false, false);
            t.on_ack(true, MSS, [(3 * MSS, 5 * MSS), (6 * MSS, 7 * MSS)].into_iter());
            t
        };
        assert_eq!(setup().proactive(MSS, 7 * MSS, MSS, true), (MSS, 2 * MSS), "in recovery, the hole at una");
        assert_eq!(setup().proactive(MSS, 7 * MSS, MSS, false), (5 * MSS, 6 * MSS), "outside it, the previous round's loss");
    }

    #[test]
    fn proactive_falls_back_to_una_when_no_unimportant_byte_is_outstanding() {
        let mut t = after_first_window(1);
        t.on_ack(true, 0, std::iter::empty());
        assert_eq!(t.proactive(0, MSS, MSS, false), (0, MSS), "nothing unimportant outstanding: from una");
    }
}
