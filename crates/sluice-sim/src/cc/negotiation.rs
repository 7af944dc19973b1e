//! Connection-setup negotiation (the open CC architecture): the SYN proposes the class's algorithm
//! family and what it needs from the peer and the path; the answer says what the peer supports.
//! When something needed is missing, the flow falls back to the class's fallback algorithm.

/// What a proposed algorithm needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offer {
    /// TCP-INT echoes from the peer and INT-capable switches on the path.
    pub needs_int: bool,
    /// ECN marks on the path (per-packet echo, DCTCP-style).
    pub needs_ecn: bool,
    /// HPCC per-hop records: INT on both stacks and on every switch of the path.
    pub needs_hop_records: bool,
}

impl Offer {
    /// What `cc` needs: per-packet ECN marks only where the transport uses ECN (`ecn`).
    pub fn of(cc: &dyn crate::cc::CongestionControl, ecn: bool) -> Offer {
        Offer {
            needs_int: cc.needs_int(),
            needs_ecn: ecn && cc.ecn_mode() == crate::cc::EcnMode::PerPacket,
            needs_hop_records: cc.needs_hop_records(),
        }
    }

    /// The proposal's bits on a SYN (`Caps::WANTS_*`), as a host's agent writes them too.
    pub fn wants(self) -> u8 {
        use crate::packet::Caps;
        let mut b = 0;
        if self.needs_int {
            b |= Caps::WANTS_INT;
        }
        if self.needs_hop_records {
            b |= Caps::WANTS_HOP_RECORDS;
        }
        if self.needs_ecn {
            b |= Caps::WANTS_ECN;
        }
        b
    }
}

/// What the two hosts and the path between them support.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// The receiver answered the proposal (its stack negotiates: a host with the agent).
    pub answered: bool,
    /// The sender's stack speaks TCP-INT.
    pub local_int: bool,
    /// The receiver's stack speaks TCP-INT.
    pub peer_int: bool,
    /// At least one switch on the path stamps TCP-INT.
    pub path_int: bool,
    /// Every switch on the path is INT-capable (none legacy).
    pub path_all_int: bool,
    /// Every switch on the path marks ECN.
    pub path_ecn: bool,
}

/// A flow's negotiation outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Negotiation {
    /// The proposed algorithm runs.
    Accepted,
    /// No handshake, so no negotiation: the class's algorithm runs as configured.
    NotNegotiated,
    /// Fell back: the sender's own stack lacks TCP-INT.
    LocalLacksInt,
    /// Fell back: the receiver did not answer with TCP-INT support.
    PeerLacksInt,
    /// Fell back: no INT-capable switch on the path.
    PathLacksInt,
    /// Fell back: a switch on the path does not mark ECN.
    PathLacksEcn,
    /// Fell back: per-hop records were needed but a switch on the path is a legacy (non-INT) one.
    PathHasLegacyInt,
    /// Fell back: the receiver answered without the option (no agent there, or the path
    /// stripped it), so nothing the proposal needs is known to be there.
    PeerSilent,
}

impl Negotiation {
    /// Every outcome, in report order.
    pub const ALL: [Negotiation; 8] = [
        Negotiation::Accepted,
        Negotiation::NotNegotiated,
        Negotiation::LocalLacksInt,
        Negotiation::PeerLacksInt,
        Negotiation::PathLacksInt,
        Negotiation::PathLacksEcn,
        Negotiation::PathHasLegacyInt,
        Negotiation::PeerSilent,
    ];

    /// The label in `flows.csv` and `summary.json`.
    pub fn label(self) -> &'static str {
        match self {
            Negotiation::Accepted => "accepted",
            Negotiation::NotNegotiated => "not_negotiated",
            Negotiation::LocalLacksInt => "fallback_local_no_int",
            Negotiation::PeerLacksInt => "fallback_peer_no_int",
            Negotiation::PathLacksInt => "fallback_path_no_int",
            Negotiation::PathLacksEcn => "fallback_path_no_ecn",
            Negotiation::PathHasLegacyInt => "fallback_path_legacy_int",
            Negotiation::PeerSilent => "fallback_peer_silent",
        }
    }
}

/// Decides whether the offer stands; the first missing need names the outcome. A receiver that
/// did not answer gets the legacy default whatever the offer (draft 7.1): the algorithm was not
/// agreed, whether or not it needs anything of the peer.
pub fn negotiate(offer: Offer, support: Support) -> Negotiation {
    if !support.answered {
        return Negotiation::PeerSilent;
    }
    if offer.needs_int || offer.needs_hop_records {
        if !support.local_int {
            return Negotiation::LocalLacksInt;
        }
        if !support.peer_int {
            return Negotiation::PeerLacksInt;
        }
        if !support.path_int {
            return Negotiation::PathLacksInt;
        }
    }
    // One summary value survives legacy hops, per-hop records do not: HPCC cannot see a
    // bottleneck at a hop that writes no record.
    if offer.needs_hop_records && !support.path_all_int {
        return Negotiation::PathHasLegacyInt;
    }
    if offer.needs_ecn && !support.path_ecn {
        return Negotiation::PathLacksEcn;
    }
    Negotiation::Accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Support = Support { answered: true, local_int: true, peer_int: true, path_int: true, path_all_int: true, path_ecn: true };

    #[test]
    fn a_missing_need_names_the_fallback_and_unneeded_features_do_not_matter() {
        let int = Offer { needs_int: true, needs_ecn: true, needs_hop_records: false };
        assert_eq!(negotiate(int, ALL), Negotiation::Accepted);
        assert_eq!(negotiate(int, Support { peer_int: false, ..ALL }), Negotiation::PeerLacksInt);
        assert_eq!(negotiate(int, Support { path_int: false, ..ALL }), Negotiation::PathLacksInt);
        assert_eq!(negotiate(int, Support { path_ecn: false, ..ALL }), Negotiation::PathLacksEcn);
        assert_eq!(negotiate(int, Support { path_all_int: false, ..ALL }), Negotiation::Accepted, "TCP-INT needs one INT hop");
        let plain = Offer { needs_int: false, needs_ecn: false, needs_hop_records: false };
        let none = Support { answered: true, local_int: false, peer_int: false, path_int: false, path_all_int: false, path_ecn: false };
        assert_eq!(negotiate(plain, none), Negotiation::Accepted);
        assert_eq!(negotiate(plain, Support { answered: false, ..ALL }), Negotiation::PeerSilent, "no answer, no agreement");
    }

    #[test]
    fn hop_records_need_both_stacks_and_every_switch() {
        let hpcc = Offer { needs_int: false, needs_ecn: false, needs_hop_records: true };
        assert_eq!(negotiate(hpcc, ALL), Negotiation::Accepted);
        assert_eq!(negotiate(hpcc, Support { local_int: false, ..ALL }), Negotiation::LocalLacksInt);
        assert_eq!(negotiate(hpcc, Support { peer_int: false, ..ALL }), Negotiation::PeerLacksInt);
        let no_int = Support { path_int: false, path_all_int: false, ..ALL };
        assert_eq!(negotiate(hpcc, no_int), Negotiation::PathLacksInt);
        assert_eq!(negotiate(hpcc, Support { path_all_int: false, ..ALL }), Negotiation::PathHasLegacyInt);
        assert_eq!(negotiate(hpcc, Support { path_ecn: false, ..ALL }), Negotiation::Accepted, "HPCC needs no ECN");
    }

    /// The downgrade defence (docs/security.md): whatever an answer claims, a flow runs its
    /// class's algorithm only when the answer holds everything that algorithm needs, and a
    /// missing or stripped answer always yields the fallback; the outcome is one of the two, so
    /// no answer can select an algorithm the class does not list.
    #[test]
    fn no_answer_selects_more_than_it_proves_and_a_stripped_one_falls_back() {
        for o in 0u8..8 {
            let offer = Offer { needs_int: o & 1 != 0, needs_ecn: o & 2 != 0, needs_hop_records: o & 4 != 0 };
            for b in 0u8..64 {
                let bit = |i: u8| b & (1 << i) != 0;
                let support = Support { answered: bit(0), local_int: bit(1), peer_int: bit(2), path_int: bit(3), path_all_int: bit(4), path_ecn: bit(5) };
                let n = negotiate(offer, support);
                assert_eq!(n == Negotiation::PeerSilent, !support.answered, "{offer:?} {support:?}");
                if n == Negotiation::Accepted {
                    let int_ok = support.local_int && support.peer_int && support.path_int;
                    assert!(!offer.needs_int || int_ok, "{offer:?} accepted without TCP-INT: {support:?}");
                    assert!(!offer.needs_hop_records || (int_ok && support.path_all_int), "{offer:?} {support:?}");
                    assert!(!offer.needs_ecn || support.path_ecn, "{offer:?} accepted without ECN: {support:?}");
                }
                assert_ne!(n, Negotiation::NotNegotiated, "a handshake always negotiates");
            }
        }
    }
}
