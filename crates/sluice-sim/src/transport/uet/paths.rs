//! How a UET sender picks each data packet's entropy value (EV), which switches hash to choose
//! among equal-cost paths: the reference's policies (uet-htsim, `uec_mp.cpp` and
//! `buffer_reps.cpp`). Oblivious sprays over every EV in turn; bitmap skips EVs that met
//! congestion, loss or a timeout; REPS reuses EVs whose packets came back clean; mixed (the
//! reference's default) reuses clean EVs first and falls back to the bitmap.
//!
//! The reference draws from the process-wide `rand()`; here each flow draws from its own
//! generator, so a flow's EVs depend on neither other flows nor the thread count.

use crate::time::Time;
use rand::Rng;
use std::collections::VecDeque;

/// What a packet's fate says of the path its EV took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// Acknowledged without a CE mark.
    Good,
    /// Acknowledged with a CE mark (or NACKed for a trim at the last hop, with one).
    Ecn,
    /// NACKed: trimmed before the last hop.
    Nack,
    /// Its retransmission timer fired.
    Timeout,
}

/// The bitmap's penalty saturates here (`uec_mp.cpp`, `UecMpBitmap::processEv`).
pub const MAX_PENALTY: u8 = 15;
/// Clean EVs REPS remembers (`repsBufferSize`, `buffer_reps.h`).
pub const REPS_BUFFER: usize = 8;
/// How long REPS stays frozen after a timeout (`exit_freeze_after`, 10 ms).
pub const REPS_FREEZE: Time = Time(10_000_000_000);
/// Random EVs REPS draws after a freeze ends (`explore_counter`).
pub const REPS_EXPLORE: u8 = 16;

/// The EV space: `paths` values (a power of two), the low bits a policy chooses, and random
/// upper bits fixed per flow (`_path_random`, `uec_mp.cpp:14, 52`).
#[derive(Clone, Copy, Debug)]
struct Space {
    paths: u32,
    mask: u16,
    upper: u16,
}

impl Space {
    fn new(paths: u32, rng: &mut impl Rng) -> Space {
        debug_assert!(paths.is_power_of_two() && paths <= 1 << 16, "{paths} paths");
        let mask = (paths - 1) as u16;
        Space { paths, mask, upper: rng.gen_range(0..0xFFFFu16) & !mask }
    }

    /// A uniformly random EV of the space's low bits (no upper bits: REPS's own draws).
    fn random(&self, rng: &mut impl Rng) -> u16 {
        rng.gen_range(0..self.paths) as u16
    }
}

/// A walk over every low-bit value in an order that changes each round: the `idx ^ xor`
/// permutation both oblivious and bitmap use.
#[derive(Clone, Debug)]
struct Rounds {
    space: Space,
    idx: u32,
    xor: u16,
}

impl Rounds {
    fn new(space: Space, rng: &mut impl Rng) -> Rounds {
        Rounds { space, idx: 0, xor: rng.gen_range(0..space.paths) as u16 }
    }

    fn current(&self) -> u16 {
        (self.idx as u16 ^ self.xor) & self.space.mask
    }

    /// The next value; a new round draws a new permutation.
    fn advance(&mut self, rng: &mut impl Rng) {
        self.idx += 1;
        if self.idx == self.space.paths {
            self.idx = 0;
            self.xor = rng.gen::<u16>() & self.space.mask;
        }
    }
}

/// Every EV in turn, each round a new permutation; feedback is ignored (`UecMpOblivious`).
#[derive(Clone, Debug)]
pub struct Oblivious {
    rounds: Rounds,
}

impl Oblivious {
    fn next(&mut self, rng: &mut impl Rng) -> u16 {
        let ev = self.rounds.current() | self.rounds.space.upper;
        self.rounds.advance(rng);
        ev
    }
}

/// Oblivious order, skipping EVs with a penalty: 1 for a CE mark, 4 for a NACK, 15 for a
/// timeout, saturating at 15; an EV with penalty N is passed over on its next N turns
/// (`UecMpBitmap`).
#[derive(Clone, Debug)]
pub struct Bitmap {
    rounds: Rounds,
    penalty: Box<[u8]>,
}

impl Bitmap {
    fn new(space: Space, rng: &mut impl Rng) -> Bitmap {
        Bitmap { rounds: Rounds::new(space, rng), penalty: vec![0; space.paths as usize].into() }
    }

    fn next(&mut self, rng: &mut impl Rng) -> u16 {
        let mut e = self.rounds.current();
        let (mut first, mut skipped) = (true, 0);
        // Only the first penalised EV met pays a turn off; a call gives up after a whole round.
        while self.penalty[e as usize] > 0 {
            if first {
                self.penalty[e as usize] -= 1;
                first = false;
            }
            skipped += 1;
            if skipped > self.rounds.space.paths {
                break;
            }
            self.rounds.advance(rng);
            e = self.rounds.current();
        }
        self.rounds.advance(rng);
        e | self.rounds.space.upper
    }

    fn feedback(&mut self, ev: u16, fb: Feedback) {
        let add = match fb {
            Feedback::Good => return,
            Feedback::Ecn => 1,
            Feedback::Nack => 4,
            Feedback::Timeout => MAX_PENALTY,
        };
        let p = &mut self.penalty[(ev & self.rounds.space.mask) as usize];
        *p = p.saturating_add(add).min(MAX_PENALTY);
    }
}

/// Recycled entropy (REPS, `UecMpReps` over `CircularBufferREPS`): EVs whose packets came back
/// clean are sent again, oldest first; with none, a random one. A timeout freezes the buffer for
/// 10 ms, cycling through what it holds; the first feedback after that empties it and the next
/// 16 EVs are random.
#[derive(Clone, Debug)]
pub struct Reps {
    space: Space,
    buf: [u16; REPS_BUFFER],
    valid: [bool; REPS_BUFFER],
    head: usize,
    count: usize,
    fresh: usize,
    frozen_head: usize,
    frozen_until: Option<Time>,
    explore: u8,
}

impl Reps {
    fn new(space: Space) -> Reps {
        Reps { space, buf: [0; REPS_BUFFER], valid: [false; REPS_BUFFER], head: 0, count: 0, fresh: 0, frozen_head: 0, frozen_until: None, explore: 0 }
    }

    fn next(&mut self, rng: &mut impl Rng) -> u16 {
        if self.explore > 0 {
            self.explore -= 1;
            return self.space.random(rng);
        }
        if self.frozen_until.is_some() {
            if self.count == 0 {
                return self.space.random(rng);
            }
            let i = self.frozen_head;
            self.take(i);
            self.frozen_head = (self.frozen_head + 1) % self.count;
            return self.buf[i];
        }
        if self.count == 0 || self.fresh == 0 {
            return self.space.random(rng);
        }
        let i = (self.head + REPS_BUFFER - self.fresh) % REPS_BUFFER;
        self.take(i);
        self.buf[i]
    }

    /// Marks slot `i` used.
    fn take(&mut self, i: usize) {
        if self.valid[i] {
            self.valid[i] = false;
            self.fresh -= 1;
        }
    }

    fn feedback(&mut self, ev: u16, fb: Feedback, now: Time) {
        if fb == Feedback::Timeout && self.frozen_until.is_none() && self.explore == 0 {
            self.frozen_until = Some(now + REPS_FREEZE);
        }
        if self.frozen_until.is_some_and(|until| now > until) {
            *self = Reps { explore: REPS_EXPLORE, ..Reps::new(self.space) };
        }
        if fb == Feedback::Good {
            if !self.valid[self.head] {
                self.fresh += 1;
            }
            self.buf[self.head] = ev;
            self.valid[self.head] = true;
            self.head = (self.head + 1) % REPS_BUFFER;
            self.count = (self.count + 1).min(REPS_BUFFER);
        }
    }
}

/// The reference's older REPS (`UecMpRepsLegacy`): the first window's EVs in turn (1, 2, ...),
/// then clean EVs from an unbounded queue in the order they came back, else random ones.
#[derive(Clone, Debug)]
pub struct RepsLegacy {
    space: Space,
    recycled: VecDeque<u16>,
    crt: u32,
}

impl RepsLegacy {
    fn new(space: Space) -> RepsLegacy {
        RepsLegacy { space, recycled: VecDeque::new(), crt: 0 }
    }

    fn next(&mut self, sent: u64, cwnd_packets: u64, rng: &mut impl Rng) -> u16 {
        if sent < cwnd_packets.min(self.space.paths as u64) {
            self.crt = (self.crt + 1) % self.space.paths;
            return self.crt as u16;
        }
        self.recycled.pop_front().unwrap_or_else(|| self.space.random(rng))
    }

    fn feedback(&mut self, ev: u16, fb: Feedback) {
        if fb == Feedback::Good {
            self.recycled.push_back(ev);
        }
    }
}

/// The reference's default (`UecMpMixed`): a clean EV from REPS legacy's queue if there is one,
/// else the bitmap's next; both hear every feedback.
#[derive(Clone, Debug)]
pub struct Mixed {
    bitmap: Bitmap,
    legacy: RepsLegacy,
}

/// A path-selection policy and its state.
#[derive(Clone, Debug)]
pub enum PathPolicy {
    /// Every EV in turn.
    Oblivious(Oblivious),
    /// Every EV in turn, skipping penalised ones.
    Bitmap(Bitmap),
    /// Recycled clean EVs, frozen after a timeout.
    Reps(Reps),
    /// The first window in turn, then recycled clean EVs.
    RepsLegacy(RepsLegacy),
    /// Recycled clean EVs, else the bitmap.
    Mixed(Box<Mixed>),
}

/// The policies by the names the reference's `-load_balancing_algo` takes.
pub const POLICIES: &[&str] = &["oblivious", "bitmap", "reps", "reps_legacy", "mixed"];

impl PathPolicy {
    /// Policy `name` over `paths` EVs (a power of two), drawing from the flow's `rng`; `None`
    /// for a name not in [`POLICIES`].
    pub fn new(name: &str, paths: u32, rng: &mut impl Rng) -> Option<PathPolicy> {
        let space = Space::new(paths, rng);
        Some(match name {
            "oblivious" => PathPolicy::Oblivious(Oblivious { rounds: Rounds::new(space, rng) }),
            "bitmap" => PathPolicy::Bitmap(Bitmap::new(space, rng)),
            "reps" => PathPolicy::Reps(Reps::new(space)),
            "reps_legacy" => PathPolicy::RepsLegacy(RepsLegacy::new(space)),
            "mixed" => PathPolicy::Mixed(Box::new(Mixed { bitmap: Bitmap::new(space, rng), legacy: RepsLegacy::new(space) })),
            _ => return None,
        })
    }

    /// The EV of the next data packet; `sent` packets have gone so far and the window holds
    /// `cwnd_packets`.
    pub fn next(&mut self, sent: u64, cwnd_packets: u64, rng: &mut impl Rng) -> u16 {
        match self {
            PathPolicy::Oblivious(p) => p.next(rng),
            PathPolicy::Bitmap(p) => p.next(rng),
            PathPolicy::Reps(p) => p.next(rng),
            PathPolicy::RepsLegacy(p) => p.next(sent, cwnd_packets, rng),
            PathPolicy::Mixed(m) => match m.legacy.recycled.pop_front() {
                Some(ev) => ev,
                None => m.bitmap.next(rng),
            },
        }
    }

    /// What came of a packet sent on `ev`, heard at `now`.
    pub fn feedback(&mut self, ev: u16, fb: Feedback, now: Time) {
        match self {
            PathPolicy::Oblivious(_) => {}
            PathPolicy::Bitmap(p) => p.feedback(ev, fb),
            PathPolicy::Reps(p) => p.feedback(ev, fb, now),
            PathPolicy::RepsLegacy(p) => p.feedback(ev, fb),
            PathPolicy::Mixed(m) => {
                m.bitmap.feedback(ev, fb);
                m.legacy.feedback(ev, fb);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn rng(seed: u64) -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(seed)
    }

    fn policy(name: &str, paths: u32, seed: u64) -> (PathPolicy, Xoshiro256PlusPlus) {
        let mut r = rng(seed);
        (PathPolicy::new(name, paths, &mut r).unwrap(), r)
    }

    #[test]
    fn oblivious_permutes_every_round_and_keeps_its_upper_bits() {
        let (mut p, mut r) = policy("oblivious", 64, 1);
        let evs: Vec<u16> = (0..64 * 4).map(|_| p.next(0, 0, &mut r)).collect();
        let upper = evs[0] & !63;
        assert!(evs.iter().all(|e| e & !63 == upper), "the upper bits stay the flow's");
        let mut rounds = Vec::new();
        for round in evs.chunks(64) {
            let mut low: Vec<u16> = round.iter().map(|e| e & 63).collect();
            rounds.push(low.clone());
            low.sort();
            assert_eq!(low, (0..64).collect::<Vec<_>>(), "each round is a permutation");
        }
        assert!(rounds.windows(2).any(|w| w[0] != w[1]), "rounds draw new orders");
        // Feedback changes nothing.
        let (mut a, mut ra) = policy("oblivious", 64, 9);
        let (mut b, mut rb) = policy("oblivious", 64, 9);
        b.feedback(3, Feedback::Timeout, Time::ZERO);
        assert!((0..200).all(|_| a.next(0, 0, &mut ra) == b.next(0, 0, &mut rb)));
    }

    #[test]
    fn the_bitmap_skips_a_penalised_ev_on_exactly_its_next_n_turns() {
        let penalty = |p: &PathPolicy, ev: u16| match p {
            PathPolicy::Bitmap(b) => b.penalty[ev as usize],
            _ => unreachable!(),
        };
        for (fb, n) in [(Feedback::Ecn, 1), (Feedback::Nack, 4), (Feedback::Timeout, 15)] {
            let (mut p, mut r) = policy("bitmap", 8, 3);
            let ev = p.next(0, 0, &mut r) & 7;
            p.feedback(ev, fb, Time::ZERO);
            p.feedback(ev, Feedback::Good, Time::ZERO);
            assert_eq!(penalty(&p, ev), n, "{fb:?}; a good ACK lifts nothing");
            // Each turn that meets it takes one off and passes it over, until none is left.
            let mut turns = 0;
            while penalty(&p, ev) > 0 {
                let before = penalty(&p, ev);
                assert_ne!(p.next(0, 0, &mut r) & 7, ev, "{fb:?}: sent while penalised");
                turns += (penalty(&p, ev) < before) as u8;
            }
            assert_eq!(turns, n, "{fb:?}");
            assert!((0..9).any(|_| p.next(0, 0, &mut r) & 7 == ev), "{fb:?}: back within a round");
        }
        // Penalties add up and saturate at 15.
        let (mut p, _) = policy("bitmap", 8, 3);
        p.feedback(2, Feedback::Ecn, Time::ZERO);
        p.feedback(2, Feedback::Nack, Time::ZERO);
        assert_eq!(penalty(&p, 2), 5);
        for _ in 0..3 {
            p.feedback(2, Feedback::Nack, Time::ZERO);
        }
        assert_eq!(penalty(&p, 2), MAX_PENALTY);
    }

    #[test]
    fn a_bitmap_with_every_ev_penalised_still_answers() {
        let (mut p, mut r) = policy("bitmap", 4, 5);
        for ev in 0..4 {
            p.feedback(ev, Feedback::Timeout, Time::ZERO);
        }
        // Each call takes one turn off the first penalised EV it meets, at most one, and gives
        // up after a round: while every EV is penalised, the penalties drain by one a call.
        let penalties = |p: &PathPolicy| match p {
            PathPolicy::Bitmap(b) => b.penalty.to_vec(),
            _ => unreachable!(),
        };
        let mut total = 4 * MAX_PENALTY as u32;
        for _ in 0..200 {
            let all = penalties(&p).iter().all(|&x| x > 0);
            p.next(0, 0, &mut r);
            let now: u32 = penalties(&p).iter().map(|&x| x as u32).sum();
            assert!(now + 1 == total || (!all && now == total), "{total} -> {now}");
            total = now;
        }
        assert_eq!(total, 0, "every penalty drains");
    }

    #[test]
    fn reps_recycles_clean_evs_oldest_first_and_forgets_marked_ones() {
        let (mut p, mut r) = policy("reps", 256, 7);
        for ev in [10, 11, 12] {
            p.feedback(ev, Feedback::Good, Time::ZERO);
        }
        p.feedback(13, Feedback::Ecn, Time::ZERO);
        p.feedback(14, Feedback::Nack, Time::ZERO);
        assert_eq!([p.next(0, 0, &mut r), p.next(0, 0, &mut r), p.next(0, 0, &mut r)], [10, 11, 12]);
        // Nothing fresh: random draws, none of the used ones by necessity.
        let randoms: Vec<u16> = (0..50).map(|_| p.next(0, 0, &mut r)).collect();
        assert!(randoms.iter().any(|e| ![10, 11, 12].contains(e)));
        // A ninth clean EV overwrites the oldest slot.
        let (mut p, mut r) = policy("reps", 256, 7);
        for ev in 100..109 {
            p.feedback(ev, Feedback::Good, Time::ZERO);
        }
        let got: Vec<u16> = (0..8).map(|_| p.next(0, 0, &mut r)).collect();
        assert_eq!(got, (101..109).collect::<Vec<_>>());
    }

    #[test]
    fn a_timeout_freezes_reps_on_what_it_holds_until_ten_ms_later_then_it_explores() {
        let (mut p, mut r) = policy("reps", 256, 11);
        for ev in [20, 21, 22] {
            p.feedback(ev, Feedback::Good, Time::ZERO);
        }
        let t0 = Time::from_us(5);
        p.feedback(99, Feedback::Timeout, t0);
        // Frozen: it cycles through its three entries, used or not.
        let cycle: Vec<u16> = (0..7).map(|_| p.next(0, 0, &mut r)).collect();
        assert_eq!(cycle, [20, 21, 22, 20, 21, 22, 20]);
        // Feedback before the freeze ends keeps it; the first after empties the buffer.
        p.feedback(30, Feedback::Good, t0 + REPS_FREEZE);
        assert!(matches!(&p, PathPolicy::Reps(s) if s.frozen_until.is_some()));
        p.feedback(31, Feedback::Good, t0 + REPS_FREEZE + Time(1));
        let PathPolicy::Reps(s) = &p else { unreachable!() };
        assert!(s.frozen_until.is_none() && s.explore == REPS_EXPLORE && s.count == 1, "{s:?}");
        // Sixteen random EVs first, then the one clean EV heard since.
        for _ in 0..REPS_EXPLORE {
            p.next(0, 0, &mut r);
        }
        assert_eq!(p.next(0, 0, &mut r), 31);
    }

    #[test]
    fn reps_legacy_walks_the_first_window_then_recycles_then_draws() {
        let (mut p, mut r) = policy("reps_legacy", 64, 2);
        let first: Vec<u16> = (0..4).map(|sent| p.next(sent, 4, &mut r)).collect();
        assert_eq!(first, [1, 2, 3, 4]);
        p.feedback(3, Feedback::Good, Time::ZERO);
        p.feedback(1, Feedback::Good, Time::ZERO);
        p.feedback(2, Feedback::Ecn, Time::ZERO);
        assert_eq!([p.next(4, 4, &mut r), p.next(5, 4, &mut r)], [3, 1]);
        let drawn = p.next(6, 4, &mut r);
        assert!(drawn < 64);
    }

    #[test]
    fn mixed_sends_recycled_evs_first_and_the_bitmap_hears_everything() {
        let (mut p, mut r) = policy("mixed", 8, 4);
        p.feedback(5, Feedback::Good, Time::ZERO);
        assert_eq!(p.next(0, 0, &mut r), 5, "a clean EV goes again first");
        // A penalised EV is skipped by the bitmap it falls back to.
        p.feedback(6, Feedback::Timeout, Time::ZERO);
        let evs: Vec<u16> = (0..8 * 10).map(|_| p.next(0, 0, &mut r) & 7).collect();
        assert_eq!(evs.iter().filter(|&&e| e == 6).count(), 0, "{evs:?}");
    }

    #[test]
    fn one_seed_one_sequence_and_unknown_names_have_no_policy() {
        for name in POLICIES {
            let (mut a, mut ra) = policy(name, 64, 42);
            let (mut b, mut rb) = policy(name, 64, 42);
            let (mut c, mut rc) = policy(name, 64, 43);
            let sa: Vec<u16> = (0..100).map(|i| a.next(i, 16, &mut ra)).collect();
            let sb: Vec<u16> = (0..100).map(|i| b.next(i, 16, &mut rb)).collect();
            let sc: Vec<u16> = (0..100).map(|i| c.next(i, 16, &mut rc)).collect();
            assert_eq!(sa, sb, "{name}");
            assert_ne!(sa, sc, "{name}: another flow draws otherwise");
        }
        assert!(PathPolicy::new("ecmp", 64, &mut rng(1)).is_none());
    }
}
