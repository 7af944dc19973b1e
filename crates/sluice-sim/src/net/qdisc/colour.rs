//! TLT's colour-aware dropping: a port queues an unimportant packet only while its unimportant
//! bytes plus the packet stay below a threshold, so the buffer beyond it is left to important
//! packets (Lim et al., EuroSys 2021, section 4.2). Important packets go through the port's normal
//! admission.

use crate::packet::Packet;

/// A port's colour threshold in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColourThreshold {
    /// Unimportant bytes the port never reaches.
    pub bytes: u64,
}

impl ColourThreshold {
    /// True when `pkt` must be dropped for its colour at a port holding `unimportant` bytes of
    /// unimportant packets (the public switch model's test: queued plus the packet reaching it).
    #[inline]
    pub fn drops(&self, pkt: &Packet, unimportant: u64) -> bool {
        !pkt.colour.is_important() && unimportant + pkt.wire_bytes as u64 >= self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Colour;

    #[test]
    fn only_unimportant_packets_reaching_the_threshold_drop() {
        let t = ColourThreshold { bytes: 10_000 };
        let data = |colour| Packet { wire_bytes: 1_500, colour, ..Packet::default() };
        assert!(!t.drops(&data(Colour::Unimportant), 8_499));
        assert!(t.drops(&data(Colour::Unimportant), 8_500), "8,500 + 1,500 reaches 10,000");
        for c in [Colour::Important, Colour::Echo, Colour::Control] {
            assert!(!t.drops(&data(c), 1_000_000), "{c:?} is never dropped for its colour");
        }
    }
}
