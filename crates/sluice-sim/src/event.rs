//! The event scheduler: a monotone priority queue over integer time, and cancellable timers by
//! generation counter.
//!
//! Events at one time pop in a canonical order: by the partition whose element scheduled them
//! (its source), then in the order that source scheduled them. A partition's own sequence does not
//! depend on what other partitions do at the same instant (nothing crosses between partitions in
//! less than a cut link's delay), so the order is the same whether the partitions run one after
//! another on one thread or side by side on many. With one partition it is first in, first out.
//!
//! Nearly every event of a packet network falls within microseconds of now (a serialization, a
//! link's delay), so the queue is a timing wheel (a calendar queue of one year): `SLOTS` slots of
//! about a nanosecond, an occupancy bitmap to skip the empty ones, and in each slot a list of its
//! events, sorted when the wheel reaches it. Events beyond the horizon (timeouts, flow arrivals
//! far ahead) wait in a heap and move onto the wheel as it turns. Events pop in exactly the (time,
//! source, source's sequence) order a heap would give.

use crate::time::Time;
use dary_heap::QuaternaryHeap;
use std::cmp::Ordering;

/// log2 of a slot's width in picoseconds: 1.024 ns, so a slot holds few distinct times. (256 ps
/// slots, four times as many, cost about as many instructions and more cache misses; 4 ns slots
/// cost 11% more instructions.)
const SLOT_SHIFT: u32 = 10;
/// Slots on the wheel (a power of two): a horizon of about 4.2 us, past a hop's serialization
/// and propagation; timers wait in the heap. Each slot keeps its buffer, so a wider wheel spreads
/// the events ahead over more memory than the cache holds (16,384 slots: 10 MB more on ws320, and
/// a slower 10,240-host run).
const SLOTS: u64 = 1 << 12;
const MASK: u64 = SLOTS - 1;
/// Bits of a source's sequence number in an event's tie key; the source takes the bits above
/// (up to [`MAX_SOURCES`]), and on the wheel the time within the slot the top 10.
const SEQ_BITS: u32 = 43;
/// Sources an event list tells apart: partitions, and one more for the run's own events.
pub const MAX_SOURCES: usize = 1 << (64 - SLOT_SHIFT - SEQ_BITS);
/// The bits of a wheel entry's key that hold its tie key.
const TIE_MASK: u64 = (1 << (64 - SLOT_SHIFT)) - 1;

/// The absolute slot of time `at` (picoseconds).
#[inline(always)]
fn slot_of(at: u64) -> u64 {
    at >> SLOT_SHIFT
}

/// Time `at`'s place within its slot.
#[inline(always)]
fn within_slot(at: u64) -> u32 {
    (at & ((1 << SLOT_SHIFT) - 1)) as u32
}

/// A deterministic future-event list: events pop in time order, ties by source, then in the
/// order their source scheduled them.
pub struct EventQueue<E> {
    /// The wheel: slot `i` holds events of absolute slot `n` where `n % SLOTS == i` and
    /// `cur <= n < cur + SLOTS`.
    slots: Box<[Slot<E>; SLOTS as usize]>,
    /// One bit per slot: set when the slot holds events.
    occupied: Box<[u64; (SLOTS / 64) as usize]>,
    /// Absolute slot of the current time.
    cur: u64,
    /// Events on the wheel.
    on_wheel: usize,
    /// Events at or beyond `cur + SLOTS`.
    far: QuaternaryHeap<Entry<E>>,
    /// The source whose element is acting now.
    source: usize,
    /// The next tie key of that source: the source above [`SEQ_BITS`], its sequence below.
    tie: u64,
    /// Every source's next tie key, while another acts.
    ties: Vec<u64>,
    now: Time,
    /// The tie key of the event popped last.
    popped_tie: u64,
}

/// One slot's events in insertion order until the wheel reaches the slot, then (`sorted`) in key
/// order; `head` the next to pop.
///
/// A slot ahead only appends: on a large fabric a nanosecond holds a hundred events or more,
/// arriving in no particular order, and keeping them in order as they came cost a search back
/// through them on each insert, and a read of a line that is rarely in cache. One stable sort when
/// the slot comes due costs less, and is nearly free when the events came in order.
struct Slot<E> {
    items: Vec<Timed<E>>,
    head: u32,
    sorted: bool,
}

/// An event on the wheel, keyed by its time's place within its slot (the slot's position on the
/// wheel gives the rest), then its source and the source's sequence number, in one word.
#[derive(Clone, Copy)]
struct Timed<E> {
    key: u64,
    ev: E,
    /// The partition whose element the event concerns (in what would be padding).
    target: u16,
}

#[derive(Clone, Copy)]
struct Entry<E> {
    key: u128,
    ev: E,
    target: u16,
}
impl<E> Entry<E> {
    fn slot(&self) -> u64 {
        slot_of((self.key >> 64) as u64)
    }
}
impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed, so the far heap (a max-heap) yields the earliest first.
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key)
    }
}
impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}
impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            slots: (0..SLOTS)
                .map(|_| Slot { items: Vec::new(), head: 0, sorted: false })
                .collect::<Box<[_]>>()
                .try_into()
                .ok()
                .expect("SLOTS slots"),
            occupied: Box::new([0; (SLOTS / 64) as usize]),
            cur: 0,
            on_wheel: 0,
            far: QuaternaryHeap::new(),
            source: 0,
            tie: 0,
            ties: vec![0],
            now: Time::ZERO,
            popped_tie: 0,
        }
    }
    pub fn now(&self) -> Time {
        self.now
    }

    /// The tie key of the event popped last: with [`Self::now`], its place in the canonical
    /// order, by which logs kept apart (one per thread) merge into the one list's order.
    #[inline]
    pub fn popped_tie(&self) -> u64 {
        self.popped_tie
    }

    /// Makes `source` (below [`MAX_SOURCES`]) the one whose element acts now: what is pushed
    /// next is its.
    #[inline]
    pub fn set_source(&mut self, source: usize) {
        debug_assert!(source < MAX_SOURCES);
        if source != self.source {
            self.switch_source(source);
        }
    }

    #[inline]
    fn switch_source(&mut self, source: usize) {
        if self.ties.len() <= source {
            self.ties = (0..MAX_SOURCES as u64).map(|s| s << SEQ_BITS).collect();
        }
        self.ties[self.source] = self.tie;
        self.source = source;
        self.tie = self.ties[source];
    }

    /// Schedules `ev` at `at` for an element of the acting source's own partition.
    #[inline]
    pub fn push(&mut self, at: Time, ev: E) {
        self.push_to(at, ev, self.source);
    }

    /// Schedules `ev` at `at` for an element of partition `target` (another partition's only
    /// across a cut link, at least a lookahead ahead).
    #[inline]
    pub fn push_to(&mut self, at: Time, ev: E, target: usize) {
        let tie = self.next_tie();
        self.push_keyed(at, tie, ev, target);
    }

    /// The acting source's next tie key, for an event it schedules on another partition's list.
    #[inline(always)]
    pub fn next_tie(&mut self) -> u64 {
        let tie = self.tie;
        // 2^43 events of one source before its sequence would run into the next source's.
        self.tie += 1;
        tie
    }

    /// Schedules an event with the tie key its source took ([`Self::next_tie`]).
    #[inline(always)]
    pub fn push_keyed(&mut self, at: Time, tie: u64, ev: E, target: usize) {
        let at = at.max(self.now).0;
        let target = target as u16;
        if slot_of(at) - self.cur < SLOTS {
            self.to_wheel(at, tie, ev, target);
        } else {
            self.far.push(Entry { key: (at as u128) << 64 | tie as u128, ev, target });
        }
    }
    #[inline(always)]
    fn to_wheel(&mut self, at: u64, tie: u64, ev: E, target: u16) {
        let i = (slot_of(at) & MASK) as usize;
        let slot = &mut self.slots[i];
        let e = Timed { key: (within_slot(at) as u64) << (64 - SLOT_SHIFT) | tie, ev, target };
        if slot.sorted {
            Self::insert_in_order(slot, e);
        } else {
            slot.items.push(e);
        }
        self.occupied[i >> 6] |= 1 << (i & 63);
        self.on_wheel += 1;
    }

    /// Inserts `e` into the slot being popped, after the last entry not later than it, shifting
    /// the later ones up one place from the end; never before the slot's head, as what was popped
    /// is gone: an event for now that another source's event at now scheduled comes next. An
    /// event for the current slot is mostly for now, so the place is usually at or near the end,
    /// and this costs fewer instructions than a bisection or `Vec::insert`'s call to `memmove`.
    #[inline]
    fn insert_in_order(slot: &mut Slot<E>, e: Timed<E>) {
        let items = &mut slot.items;
        items.push(e);
        let mut k = items.len() - 1;
        while k > slot.head as usize && items[k - 1].key > e.key {
            items[k] = items[k - 1];
            k -= 1;
        }
        items[k] = e;
    }
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.pop_for().map(|(at, ev, _)| (at, ev))
    }

    /// Pops the next event with the partition it concerns.
    #[inline(always)]
    pub fn pop_for(&mut self) -> Option<(Time, E, usize)> {
        self.pop_until(Time(u64::MAX))
    }

    /// Pops the next event, with the partition it concerns, if it is due no later than `limit`.
    /// The wheel never turns past `limit`'s slot, so what is pushed later for `limit` or after
    /// still finds its place.
    #[inline(always)]
    pub fn pop_until(&mut self, limit: Time) -> Option<(Time, E, usize)> {
        let last = slot_of(limit.0);
        let mut i = (self.cur & MASK) as usize;
        // The current slot often has more (synchronized traffic): then it is next, with no search.
        if self.occupied[i >> 6] & (1 << (i & 63)) == 0 {
            if self.on_wheel == 0 {
                let next = self.far.peek()?.slot();
                if next > last {
                    return None;
                }
                self.turn_to(next);
            }
            let next = self.next_occupied();
            if next > last {
                return None;
            }
            if next != self.cur {
                self.turn_to(next);
            }
            i = (self.cur & MASK) as usize;
        }
        let slot = &mut self.slots[i];
        if !slot.sorted {
            // Keys are unique; a run already in order costs one pass.
            slot.items.sort_by_key(|t| t.key);
            slot.sorted = true;
        }
        let e = slot.items[slot.head as usize];
        let at = Time(self.cur << SLOT_SHIFT | e.key >> (64 - SLOT_SHIFT));
        if at > limit {
            return None;
        }
        slot.head += 1;
        if slot.head as usize == slot.items.len() {
            slot.items.clear();
            slot.head = 0;
            slot.sorted = false;
            self.occupied[i >> 6] &= !(1 << (i & 63));
        }
        self.on_wheel -= 1;
        self.now = at;
        self.popped_tie = e.key & TIE_MASK;
        Some((at, e.ev, e.target as usize))
    }

    /// When the next event is due, if any, without taking it or turning the wheel.
    pub fn next_time(&self) -> Option<Time> {
        if self.on_wheel == 0 {
            return self.far.peek().map(|e| Time((e.key >> 64) as u64));
        }
        let next = self.next_occupied();
        let slot = &self.slots[(next & MASK) as usize];
        let first = slot.items[slot.head as usize..].iter().map(|t| t.key).min()?;
        Some(Time(next << SLOT_SHIFT | first >> (64 - SLOT_SHIFT)))
    }

    /// The next two events to pop, as far as they are in the current slot (a cheap look ahead,
    /// for prefetching what they will touch; `None` says nothing about the rest of the wheel).
    /// Before the first pop sorts the slot, they are a guess: the first two that came.
    #[inline(always)]
    pub fn next_two_in_slot(&self) -> (Option<E>, Option<E>) {
        let slot = &self.slots[(self.cur & MASK) as usize];
        match slot.items.get(slot.head as usize..) {
            Some([a, b, ..]) => (Some(a.ev), Some(b.ev)),
            Some([a]) => (Some(a.ev), None),
            _ => (None, None),
        }
    }

    /// Absolute number of the first occupied slot at or after `cur` (the wheel is not empty).
    #[inline]
    fn next_occupied(&self) -> u64 {
        let start = self.cur & MASK;
        let words = self.occupied.len();
        let w0 = (start >> 6) as usize;
        let first = self.occupied[w0] & (!0u64 << (start & 63));
        if first != 0 {
            return self.cur + (((w0 as u64) << 6 | first.trailing_zeros() as u64) - start);
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            let bits = if k == words { self.occupied[w] & !(!0u64 << (start & 63)) } else { self.occupied[w] };
            if bits != 0 {
                let idx = (w as u64) << 6 | bits.trailing_zeros() as u64;
                return self.cur + ((idx + SLOTS - start) & MASK);
            }
        }
        unreachable!("next_occupied on an empty wheel")
    }

    /// Moves the wheel to absolute slot `to` and brings onto it the far events now within reach.
    fn turn_to(&mut self, to: u64) {
        self.cur = to;
        while let Some(e) = self.far.peek() {
            if e.slot() - self.cur >= SLOTS {
                break;
            }
            let e = self.far.pop().expect("peeked");
            self.to_wheel((e.key >> 64) as u64, e.key as u64, e.ev, e.target);
        }
    }

    /// Every pending event, in no particular order (for the run's checks).
    pub fn iter(&self) -> impl Iterator<Item = &E> + '_ {
        let wheel = self.slots.iter().flat_map(|s| s.items[s.head as usize..].iter().map(|t| &t.ev));
        wheel.chain(self.far.iter().map(|e| &e.ev))
    }

    pub fn len(&self) -> usize {
        self.on_wheel + self.far.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A timer that can be re-armed and cancelled without touching the queue.
///
/// Re-arming to a later deadline does not schedule a new event: when the pending one fires early
/// the owner re-schedules it for the deadline. Only an earlier deadline needs a new event, which
/// gets a new generation so the old one is recognised as stale. An RTO re-armed on every ACK
/// therefore costs one queue entry per RTO period, not one per ACK.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerSlot {
    gen: u32,
    deadline: Option<Time>,
    pending: Option<Time>,
}

/// What the owner must do when a timer event pops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerFire {
    /// The event is stale (cancelled or superseded): ignore it.
    Stale,
    /// The deadline moved later: schedule the same generation again at this time.
    Reschedule(Time, u32),
    /// The timer expired now.
    Expired,
}

impl TimerSlot {
    /// Sets the deadline; returns `Some((time, gen))` when the caller must schedule an event.
    #[must_use]
    pub fn arm(&mut self, at: Time) -> Option<(Time, u32)> {
        self.deadline = Some(at);
        match self.pending {
            Some(p) if p <= at => None,
            _ => {
                self.gen = self.gen.wrapping_add(1);
                self.pending = Some(at);
                Some((at, self.gen))
            }
        }
    }

    /// Cancels the timer; its pending event becomes stale.
    pub fn cancel(&mut self) {
        self.deadline = None;
    }

    /// The current deadline, if armed.
    pub fn deadline(&self) -> Option<Time> {
        self.deadline
    }

    /// Interprets a timer event of generation `gen` popped at `now`.
    pub fn fire(&mut self, now: Time, gen: u32) -> TimerFire {
        if gen != self.gen || self.pending.is_none() {
            return TimerFire::Stale;
        }
        self.pending = None;
        match self.deadline {
            None => TimerFire::Stale,
            Some(d) if d > now => {
                self.pending = Some(d);
                TimerFire::Reschedule(d, gen)
            }
            Some(_) => {
                self.deadline = None;
                TimerFire::Expired
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_fifo_among_ties() {
        let mut q = EventQueue::new();
        q.push(Time(30), 'c');
        q.push(Time(10), 'a');
        q.push(Time(30), 'd');
        q.push(Time(10), 'b');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
        assert_eq!(q.now(), Time(30));
    }

    #[test]
    fn interleaved_pushes_keep_time_order_and_fifo_ties() {
        // Pushes between pops, at the current time and later, as a run makes them.
        let mut q = EventQueue::new();
        q.push(Time(10), 0);
        q.push(Time(1_000_000), 1);
        let mut out = Vec::new();
        while let Some((t, e)) = q.pop() {
            out.push((t.0, e));
            if e < 6 {
                q.push(t, 10 + e);
                q.push(Time(t.0 + 7), e + 2);
            }
        }
        let times: Vec<u64> = out.iter().map(|p| p.0).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{out:?}");
        assert_eq!(out[..3], [(10, 0), (10, 10), (17, 2)]);
        assert_eq!(out.len(), 2 + 2 * 6);
    }

    #[test]
    fn matches_a_sorted_reference_across_the_horizon() {
        // Random interleavings of pushes (same slot, within the wheel, beyond it, far beyond,
        // in the past) from three sources and pops against a reference that pops the least
        // (time, source, source's sequence) left.
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeMap;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let horizon = SLOTS << SLOT_SHIFT;
        let mut q = EventQueue::new();
        let mut reference = BTreeMap::new();
        let (mut seqs, mut popped) = ([0u64; 3], 0u32);
        for step in 0..200_000u32 {
            if rng.gen_bool(0.52) || reference.is_empty() {
                let now = q.now().0;
                let at = match rng.gen_range(0..6) {
                    0 => now,
                    1 => now + rng.gen_range(0..1u64 << SLOT_SHIFT),
                    2 => now + rng.gen_range(0..horizon),
                    3 => now + rng.gen_range(horizon - 100..horizon + 100),
                    4 => now + rng.gen_range(horizon..50 * horizon),
                    _ => now.saturating_sub(rng.gen_range(0..1000)),
                };
                let src = rng.gen_range(0..3);
                q.set_source(src);
                q.push(Time(at), step);
                reference.insert((at.max(now), src, seqs[src]), step);
                seqs[src] += 1;
            } else {
                let (&(t, src, s), &ev) = reference.iter().next().unwrap();
                reference.remove(&(t, src, s));
                assert_eq!(q.pop(), Some((Time(t), ev)), "pop {popped}");
                popped += 1;
            }
            assert_eq!(q.len(), reference.len());
        }
        while let Some(((t, _, _), ev)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((Time(t), ev)));
        }
        assert_eq!(q.pop(), None);
        assert!(popped > 50_000);
    }

    #[test]
    fn ties_pop_by_source_then_in_each_source_s_order_however_pushes_interleave() {
        // Two partitions push at the same times in two different interleavings (as two threads
        // would); the pops are the same.
        let order = |interleave: &[(usize, char)]| {
            let mut q = EventQueue::new();
            for &(src, ev) in interleave {
                q.set_source(src);
                q.push(Time(50), ev);
                q.push(Time(5000 << SLOT_SHIFT), ev.to_ascii_uppercase());
            }
            std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect::<String>()
        };
        let a = order(&[(1, 'a'), (0, 'x'), (1, 'b'), (0, 'y')]);
        let b = order(&[(0, 'x'), (0, 'y'), (1, 'a'), (1, 'b')]);
        assert_eq!(a, "xyabXYAB");
        assert_eq!(a, b);
    }

    #[test]
    fn an_event_for_now_from_a_lower_source_comes_next_and_nothing_pops_twice() {
        let mut q = EventQueue::new();
        q.set_source(1);
        q.push(Time(50), 'a');
        q.push(Time(50), 'b');
        assert_eq!(q.pop(), Some((Time(50), 'a')));
        // Source 0 acts at now, below the popped 'a': its event is the next to pop.
        q.set_source(0);
        q.push(Time(50), 'x');
        q.push(Time(50), 'y');
        let rest: String = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(rest, "xyb");
    }

    #[test]
    fn pop_until_stops_at_its_limit_and_later_pushes_still_find_their_place() {
        let mut q = EventQueue::new();
        let far = Time(20 * (SLOTS << SLOT_SHIFT));
        q.push(Time(100), 1);
        q.push(Time(9000), 3);
        q.push(far, 4);
        assert_eq!(q.pop_until(Time(5000)), Some((Time(100), 1, 0)));
        assert_eq!(q.pop_until(Time(5000)), None);
        assert_eq!(q.next_time(), Some(Time(9000)));
        // Pushed for the limit after the refusal: the next to pop, then the rest in order.
        q.push(Time(5000), 2);
        assert_eq!(q.pop_until(Time(5000)), Some((Time(5000), 2, 0)));
        assert_eq!(q.pop_until(far - Time(1)), Some((Time(9000), 3, 0)));
        assert_eq!(q.pop_until(far - Time(1)), None);
        assert_eq!(q.next_time(), Some(far));
        assert_eq!(q.pop(), Some((far, 4)));
        assert_eq!(q.next_time(), None);
    }

    #[test]
    fn past_events_are_clamped_to_now() {
        let mut q = EventQueue::new();
        q.push(Time(100), 1);
        q.pop();
        q.push(Time(5), 2);
        assert_eq!(q.pop(), Some((Time(100), 2)));
    }

    #[test]
    fn timer_rearm_later_reuses_event_and_cancel_makes_it_stale() {
        let mut t = TimerSlot::default();
        let (at, g) = t.arm(Time(100)).unwrap();
        assert_eq!(at, Time(100));
        assert_eq!(t.arm(Time(150)), None, "a later deadline needs no new event");
        assert_eq!(t.fire(Time(100), g), TimerFire::Reschedule(Time(150), g));
        assert_eq!(t.fire(Time(150), g), TimerFire::Expired);

        let (_, g1) = t.arm(Time(200)).unwrap();
        let (_, g2) = t.arm(Time(180)).unwrap();
        assert_ne!(g1, g2);
        assert_eq!(t.fire(Time(180), g1), TimerFire::Stale);
        t.cancel();
        assert_eq!(t.fire(Time(180), g2), TimerFire::Stale);
    }
}
