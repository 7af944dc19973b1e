//! A reconfigurable datacenter network's circuit side (Mukerjee et al., "Adapting TCP for
//! Reconfigurable Datacenter Networks", NSDI 2020; Etalon): the `[circuit]` table, the circuit
//! schedule (days when rack pairs are joined, nights while the circuit switch reconfigures), and
//! the ToR's virtual output queues, one per destination rack, which both uplinks drain: the
//! circuit uplink only the VOQ of the rack it is joined to now, the packet uplink the others in
//! turn. VOQs grow `tau` before their day (dynamic buffer resizing), and while a pair has a
//! circuit now or within `tau` the ToR sets ECE on ACKs going back to its senders (reTCP's signal).

use super::topology::Graph;
use crate::packet::{flags, Ecn, Packet};
use crate::time::{Rate, Time};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

/// `[circuit]`: the schedule and the ToR VOQs of a `topology.kind = "rdcn"` network.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CircuitConfig {
    /// "strobe" (every rack pair in turn) or "file" (an explicit schedule).
    pub schedule: String,
    /// strobe: how long each circuit configuration lasts.
    pub day: Time,
    /// strobe: the reconfiguration time between days, when no circuit carries anything.
    pub night: Time,
    /// strobe: rotate as in a network of this many racks (default: the racks there are), so a
    /// rack pair gets one day in `strobe_racks - 1`, as Etalon's "fake strobe" does.
    pub strobe_racks: Option<u32>,
    /// file: the schedule's path, relative to the scenario file.
    pub file: Option<String>,
    /// VOQ capacity in packets, outside the prebuffering window.
    pub voq_packets: u32,
    /// VOQ capacity in packets from `tau` before a pair's day to its end (dynamic buffer
    /// resizing); absent: VOQs keep `voq_packets`.
    pub voq_large_packets: Option<u32>,
    /// How long before its day a pair's VOQ grows and its ECE signal turns on.
    pub tau: Time,
    /// CE-mark ECN-capable packets joining a VOQ that holds this many packets or more.
    pub ecn_packets: Option<u32>,
    /// The marking threshold while the VOQ is large (default: `ecn_packets` scaled as the VOQ).
    pub ecn_large_packets: Option<u32>,
    /// Set ECE on ACKs while their pair has a circuit now or within `tau` (default: on when a
    /// class runs `retcp`, as Etalon turns its ECE marker on for reTCP only).
    pub ece_signal: Option<bool>,
}

impl Default for CircuitConfig {
    fn default() -> Self {
        CircuitConfig {
            schedule: "strobe".into(),
            day: Time::from_us(180),
            night: Time::from_us(20),
            strobe_racks: None,
            file: None,
            voq_packets: 16,
            voq_large_packets: None,
            tau: Time::ZERO,
            ecn_packets: None,
            ecn_large_packets: None,
            ece_signal: None,
        }
    }
}

/// A directed circuit: packets from rack `.0` cross to rack `.1`.
pub type Pair = (u16, u16);

/// One configuration of the circuit switch, from `start` until the next one's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// When it begins, within the schedule's period.
    pub start: Time,
    /// The circuits joined; empty during a night.
    pub pairs: Vec<Pair>,
}

/// When each rack pair has a circuit: slots in time order, repeated every `period` if set.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The configurations, the first starting at 0.
    pub slots: Vec<Slot>,
    /// The schedule repeats with this period; `None`: the last slot lasts forever.
    pub period: Option<Time>,
}

/// A day of one pair: its start and end in absolute time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Day {
    /// The circuit is up from here.
    pub start: Time,
    /// Until here.
    pub end: Time,
    /// The slot's running number since time 0 (cycle x slots + index).
    pub number: u64,
}

impl Schedule {
    /// The strobe: in a network of `virtual_racks`, configuration k joins rack i to rack
    /// (i + k + 1) mod `virtual_racks`, for k in 0..virtual_racks - 1; each day is followed by a
    /// night. Only the pairs of the `racks` that exist are kept.
    pub fn strobe(racks: u16, virtual_racks: u16, day: Time, night: Time) -> Schedule {
        let n = virtual_racks as u32;
        let mut slots = Vec::new();
        for k in 0..n - 1 {
            let start = Time((day.0 + night.0) * k as u64);
            let pairs = (0..racks as u32).map(|i| (i, (i + k + 1) % n)).filter(|&(_, j)| j < racks as u32);
            slots.push(Slot { start, pairs: pairs.map(|(i, j)| (i as u16, j as u16)).collect() });
            slots.push(Slot { start: start + day, pairs: Vec::new() });
        }
        Schedule { slots, period: Some(Time((day.0 + night.0) * (n as u64 - 1))) }
    }

    /// Reads a schedule file: one configuration per line, `<time> <src>-><dst> ...` (no pairs: a
    /// night), times rising from 0; a last line `<time> repeat` makes it periodic. `#` comments.
    pub fn parse(text: &str, name: &str, racks: u16) -> Result<Schedule, String> {
        let mut slots: Vec<Slot> = Vec::new();
        let mut period = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |msg: String| format!("{name}:{}: {msg}", i + 1);
            if period.is_some() {
                return Err(at("nothing may follow the `repeat` line".into()));
            }
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            let start = Time::parse(first).map_err(|e| at(format!("{e} (expected a time like \"180us\" first)")))?;
            match slots.last() {
                None if start != Time::ZERO => return Err(at(format!("the first configuration must start at 0, not {first}"))),
                Some(prev) if start <= prev.start => {
                    return Err(at(format!("{first} is not after the previous line's {}; times must rise", prev.start)))
                }
                _ => {}
            }
            let rest: Vec<&str> = words.collect();
            if rest == ["repeat"] {
                if slots.is_empty() {
                    return Err(at("`repeat` needs configurations before it".into()));
                }
                period = Some(start);
                continue;
            }
            let mut pairs: Vec<Pair> = Vec::new();
            for w in rest {
                let pair = w.split_once("->").and_then(|(a, b)| Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?)));
                let Some((a, b)) = pair else {
                    return Err(at(format!("\"{w}\" is not a circuit; expected <source rack>-><destination rack> like 0->1, or `repeat`")));
                };
                if a >= racks || b >= racks {
                    return Err(at(format!("{w}: racks are 0 to {}", racks - 1)));
                }
                if a == b {
                    return Err(at(format!("{w}: a circuit joins two different racks")));
                }
                if pairs.iter().any(|&(s, d)| s == a || d == b) {
                    return Err(at(format!("{w}: a rack sends on one circuit and receives on one circuit at a time")));
                }
                pairs.push((a, b));
            }
            slots.push(Slot { start, pairs });
        }
        if slots.is_empty() {
            return Err(format!("{name}: no configurations; expected lines like \"0us 0->1 1->2\""));
        }
        Ok(Schedule { slots, period })
    }

    /// The slot in force at `t`, as (running number, absolute start, absolute end).
    fn slot_at(&self, t: Time) -> (u64, Time, Time) {
        let (cycle, within) = match self.period {
            Some(p) => (t.0 / p.0, Time(t.0 % p.0)),
            None => (0, t),
        };
        let i = self.slots.partition_point(|s| s.start <= within) - 1;
        let base = Time(cycle * self.period.map_or(0, |p| p.0));
        let end = match (self.slots.get(i + 1), self.period) {
            (Some(next), _) => base + next.start,
            (None, Some(p)) => base + p,
            (None, None) => Time::MAX,
        };
        (cycle * self.slots.len() as u64 + i as u64, base + self.slots[i].start, end)
    }

    fn slot(&self, number: u64) -> &Slot {
        &self.slots[(number % self.slots.len() as u64) as usize]
    }

    /// The day rack `src` has at `t`, with the rack it is joined to.
    pub fn day_of(&self, src: u16, t: Time) -> Option<(u16, Day)> {
        let (number, start, end) = self.slot_at(t);
        let &(_, dst) = self.slot(number).pairs.iter().find(|p| p.0 == src)?;
        Some((dst, Day { start, end, number }))
    }

    /// True while `pair` has a circuit at `t` or gets one within `ahead` after it.
    pub fn up_within(&self, pair: Pair, t: Time, ahead: Time) -> bool {
        let (mut number, _, mut end) = self.slot_at(t);
        if self.slot(number).pairs.contains(&pair) {
            return true;
        }
        // Walk the configurations that begin by t + ahead (at most one period's worth).
        let horizon = t + ahead;
        for _ in 0..self.slots.len() {
            if end > horizon || end == Time::MAX {
                return false;
            }
            number += 1;
            if self.slot(number).pairs.contains(&pair) {
                return true;
            }
            let (_, _, next_end) = self.slot_at(end);
            end = next_end;
        }
        false
    }

    /// The first configuration change after `t`, if any.
    pub fn next_change(&self, t: Time) -> Option<Time> {
        let (_, _, end) = self.slot_at(t);
        (end != Time::MAX).then_some(end)
    }

    /// Every day of every pair that begins before `until`, in time order.
    pub fn days(&self, until: Time) -> Vec<(Pair, Day)> {
        let mut out = Vec::new();
        let mut t = Time::ZERO;
        while t < until {
            let (number, start, end) = self.slot_at(t);
            for &pair in &self.slot(number).pairs {
                out.push((pair, Day { start, end, number }));
            }
            if end == Time::MAX {
                break;
            }
            t = end;
        }
        out
    }
}

impl CircuitConfig {
    /// The schedule for `racks` racks; errors name the key or the file's line.
    pub fn build_schedule(&self, racks: u16, base_dir: &Path) -> Result<Schedule, String> {
        match self.schedule.as_str() {
            "strobe" => {
                if self.file.is_some() {
                    return Err("circuit.file: only for schedule = \"file\"".into());
                }
                if self.day == Time::ZERO {
                    return Err("circuit.day: expected a positive duration like \"180us\"".into());
                }
                let virtual_racks = self.strobe_racks.unwrap_or(racks as u32);
                if virtual_racks < racks as u32 || virtual_racks < 2 || virtual_racks > u16::MAX as u32 {
                    return Err(format!(
                        "circuit.strobe_racks: expected at least the {racks} racks there are (and 2), got {virtual_racks}"
                    ));
                }
                Ok(Schedule::strobe(racks, virtual_racks as u16, self.day, self.night))
            }
            "file" => {
                let file = self.file.as_deref().ok_or("circuit.file: required for schedule = \"file\"")?;
                if self.strobe_racks.is_some() {
                    return Err("circuit.strobe_racks: only for schedule = \"strobe\"".into());
                }
                let path = base_dir.join(file);
                let text = std::fs::read_to_string(&path).map_err(|e| format!("circuit.file: cannot read \"{}\": {e}", path.display()))?;
                Schedule::parse(&text, file, racks).map_err(|e| format!("circuit.file: {e}"))
            }
            other => Err(format!("circuit.schedule: unknown schedule \"{other}\"; expected \"strobe\" or \"file\"")),
        }
    }

    /// VOQ sizing as the ToRs apply it; errors name the key.
    pub fn sizing(&self) -> Result<Sizing, String> {
        if self.voq_packets == 0 {
            return Err("circuit.voq_packets: expected at least 1 packet".into());
        }
        let large = self.voq_large_packets.unwrap_or(self.voq_packets);
        if large < self.voq_packets {
            return Err(format!("circuit.voq_large_packets: expected at least voq_packets = {}, got {large}", self.voq_packets));
        }
        if self.ecn_large_packets.is_some() && self.ecn_packets.is_none() {
            return Err("circuit.ecn_large_packets: set ecn_packets too".into());
        }
        let ecn = self.ecn_packets.map(|k| {
            let scaled = (k as u64 * large as u64).div_ceil(self.voq_packets as u64) as u32;
            (k, self.ecn_large_packets.unwrap_or(scaled))
        });
        Ok(Sizing { small: self.voq_packets, large, tau: self.tau, ecn })
    }
}

/// What the world builds the ToRs' circuit sides from.
#[derive(Clone, Debug)]
pub struct CircuitParts {
    /// The schedule every ToR follows.
    pub schedule: Arc<Schedule>,
    /// Racks, and hosts in each.
    pub racks: u16,
    /// Hosts in each rack.
    pub hosts_per_rack: u32,
    /// VOQ sizing.
    pub sizing: Sizing,
    /// ToRs set ECE on ACKs while their pair's circuit is up or near.
    pub ece_signal: bool,
}

/// How big a VOQ may grow, and where it marks, as its pair's circuit nears.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sizing {
    /// Capacity in packets away from the pair's day.
    pub small: u32,
    /// Capacity from `tau` before the day to its end.
    pub large: u32,
    /// How far ahead of a day the VOQ grows and the ECE signal starts.
    pub tau: Time,
    /// ECN marking thresholds in packets (small, large), if the VOQs mark.
    pub ecn: Option<(u32, u32)>,
}

/// One virtual output queue: packets for one destination rack.
#[derive(Clone, Debug, Default)]
pub struct Voq {
    packets: VecDeque<Packet>,
    /// A data packet has joined it: its pair has demand and its days count for utilization.
    pub carried_data: bool,
    /// Packets refused for want of room.
    pub drops: u64,
}

impl Voq {
    /// Packets queued.
    pub fn len(&self) -> usize {
        self.packets.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
    /// The queued packets, head first.
    pub fn iter(&self) -> impl Iterator<Item = &Packet> {
        self.packets.iter()
    }
}

/// Bytes one uplink carried in one day of the circuit switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayBytes {
    /// The slot's running number.
    pub number: u64,
    /// The destination rack.
    pub dst: u16,
    /// Wire bytes sent over the circuit.
    pub bytes: u64,
}

/// Which uplink a ToR sends a packet out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uplink {
    /// To the electrical packet switch.
    Packet,
    /// To the optical circuit switch.
    Circuit,
}

/// What the ToR did with a packet headed for another rack.
#[derive(Clone, Debug)]
pub enum Admit {
    /// Queued in its VOQ.
    Queued,
    /// The VOQ was full.
    Full(Packet),
}

/// A rack's top-of-rack switch's circuit side: its VOQs and the two uplinks that drain them.
#[derive(Clone, Debug)]
pub struct Tor {
    /// This ToR's rack.
    pub rack: u16,
    /// Hosts per rack: host h is in rack h / hosts_per_rack.
    pub hosts_per_rack: u32,
    /// Local port towards the packet switch.
    pub packet_port: u16,
    /// Local port towards the circuit switch.
    pub circuit_port: u16,
    /// One VOQ per destination rack (this rack's own stays empty).
    pub voqs: Vec<Voq>,
    /// The packet uplink's round-robin position.
    next_rr: usize,
    schedule: Arc<Schedule>,
    sizing: Sizing,
    /// Set ECE on ACKs whose pair's circuit is up or near.
    ece_signal: bool,
    /// Latency through the ToR of each data packet sent on an uplink (arrival to the end of its
    /// serialization), ns.
    pub latencies_ns: Vec<u32>,
    /// Circuit bytes per day, in day order.
    pub circuit_days: Vec<DayBytes>,
}

impl Tor {
    /// A ToR of rack `rack` among `racks`, with its uplinks at local ports `packet_port` and
    /// `circuit_port`.
    pub fn new(rack: u16, racks: u16, hosts_per_rack: u32, uplinks: (u16, u16), schedule: Arc<Schedule>, sizing: Sizing, ece_signal: bool) -> Tor {
        Tor {
            rack,
            hosts_per_rack,
            packet_port: uplinks.0,
            circuit_port: uplinks.1,
            voqs: (0..racks).map(|_| Voq::default()).collect(),
            next_rr: 0,
            schedule,
            sizing,
            ece_signal,
            latencies_ns: Vec::new(),
            circuit_days: Vec::new(),
        }
    }

    /// The rack of host `dst` when it is not this one.
    #[inline]
    pub fn remote_rack(&self, dst: u32) -> Option<u16> {
        let r = (dst / self.hosts_per_rack) as u16;
        (r != self.rack).then_some(r)
    }

    /// True when the pair from this rack to `dst` is in its prebuffering window or its day.
    fn near_day(&self, dst: u16, now: Time) -> bool {
        self.sizing.large > self.sizing.small && self.schedule.up_within((self.rack, dst), now, self.sizing.tau)
    }

    /// The capacity in packets of the VOQ to `dst` at `now`.
    pub fn capacity(&self, dst: u16, now: Time) -> u32 {
        if self.near_day(dst, now) {
            self.sizing.large
        } else {
            self.sizing.small
        }
    }

    /// Admits a packet for rack `dst` into its VOQ: marks it when ECN is on and the VOQ is past
    /// its threshold, and sets ECE on an ACK whose data comes over a circuit that is up or near.
    pub fn admit(&mut self, dst: u16, mut pkt: Packet, now: Time) -> (Admit, bool) {
        // A SYN-ACK's ECE belongs to ECN negotiation: only established ACKs carry the signal.
        if self.ece_signal && pkt.payload == 0 && pkt.has(flags::ACK) && !pkt.has(flags::SYN) {
            // The ACK goes back to rack `dst`, whose data reach this rack over (dst, rack).
            if self.schedule.up_within((dst, self.rack), now, self.sizing.tau) {
                pkt.flags |= flags::ECE;
            }
        }
        let near = self.near_day(dst, now);
        let voq = &mut self.voqs[dst as usize];
        let cap = if near { self.sizing.large } else { self.sizing.small };
        if voq.len() >= cap as usize {
            voq.drops += 1;
            return (Admit::Full(pkt), false);
        }
        let mut marked = false;
        if let Some((small, large)) = self.sizing.ecn {
            let k = if near { large } else { small };
            if voq.len() >= k as usize && pkt.ecn != Ecn::NotEct {
                pkt.ecn = Ecn::Ce;
                marked = true;
            }
        }
        voq.carried_data |= pkt.payload > 0;
        pkt.enq_at = now;
        voq.packets.push_back(pkt);
        (Admit::Queued, marked)
    }

    /// The next packet `uplink` may start at `now` on a wire of `rate`: the circuit takes the
    /// head of the joined rack's VOQ if it can finish within the day; the packet uplink takes
    /// the others in turn.
    pub fn next_for(&mut self, uplink: Uplink, now: Time, rate: Rate) -> Option<Packet> {
        match uplink {
            Uplink::Circuit => {
                let (dst, day) = self.schedule.day_of(self.rack, now)?;
                let voq = &mut self.voqs[dst as usize];
                let head = voq.packets.front()?;
                let bytes = head.wire_bytes as u64;
                if now + rate.tx_time(bytes) > day.end {
                    return None;
                }
                match self.circuit_days.last_mut() {
                    Some(d) if d.number == day.number => d.bytes += bytes,
                    _ => self.circuit_days.push(DayBytes { number: day.number, dst, bytes }),
                }
                let pkt = voq.packets.pop_front();
                self.record(pkt, now, rate)
            }
            Uplink::Packet => {
                let i = self.next_packet_voq(now)?;
                self.next_rr = (i + 1) % self.voqs.len();
                let pkt = self.voqs[i].packets.pop_front();
                self.record(pkt, now, rate)
            }
        }
    }

    /// Records a data packet's latency through the ToR as it starts on a wire of `rate`.
    fn record(&mut self, pkt: Option<Packet>, now: Time, rate: Rate) -> Option<Packet> {
        let p = pkt?;
        if p.payload > 0 {
            let done = now + rate.tx_time(p.wire_bytes as u64);
            self.latencies_ns.push(((done - p.enq_at).0 / 1000).min(u32::MAX as u64) as u32);
        }
        Some(p)
    }

    /// The VOQ the packet uplink serves next: the next non-empty one in turn, passing over the
    /// one the circuit drains now (as Etalon's ToR turns the packet path of that VOQ off).
    fn next_packet_voq(&self, now: Time) -> Option<usize> {
        let on_circuit = self.schedule.day_of(self.rack, now).map(|(dst, _)| dst as usize);
        let n = self.voqs.len();
        (0..n).map(|k| (self.next_rr + k) % n).find(|&i| !self.voqs[i].is_empty() && Some(i) != on_circuit)
    }

    /// True when `uplink` has something it could send at `now`.
    pub fn has_work(&self, uplink: Uplink, now: Time) -> bool {
        match uplink {
            Uplink::Packet => self.next_packet_voq(now).is_some(),
            Uplink::Circuit => self.schedule.day_of(self.rack, now).is_some_and(|(dst, _)| !self.voqs[dst as usize].is_empty()),
        }
    }

    /// Every packet queued in the VOQs.
    pub fn queued(&self) -> impl Iterator<Item = &Packet> {
        self.voqs.iter().flat_map(|v| v.iter())
    }

    /// True when the VOQs CE-mark.
    pub fn marks_ecn(&self) -> bool {
        self.sizing.ecn.is_some()
    }

    /// The schedule the ToR follows.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }
}

/// The circuit side of node `n` when it is a ToR of the reconfigurable network `c`: the ToRs
/// follow the hosts, and the packet and circuit switches follow the ToRs.
pub fn tor_of(c: &CircuitParts, graph: &Graph, n: usize, ports: &[(usize, usize)]) -> Option<Box<Tor>> {
    let first_tor = graph.hosts().len();
    let rack = n.checked_sub(first_tor).filter(|&r| r < c.racks as usize)?;
    let (eps, ocs) = (first_tor + c.racks as usize, first_tor + c.racks as usize + 1);
    let local = |peer: usize| ports.iter().position(|&(_, p)| p == peer).map(|i| i as u16);
    let uplinks = (local(eps)?, local(ocs)?);
    let tor = Tor::new(rack as u16, c.racks, c.hosts_per_rack, uplinks, c.schedule.clone(), c.sizing, c.ece_signal);
    Some(Box::new(tor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Time {
        Time::from_us(n)
    }

    #[test]
    fn strobe_gives_the_test_pair_one_day_in_seven() {
        let s = Schedule::strobe(3, 8, us(180), us(20));
        assert_eq!(s.period, Some(us(1400)));
        let days: Vec<_> = s.days(us(2800)).into_iter().filter(|(p, _)| *p == (0, 1)).map(|(_, d)| (d.start, d.end)).collect();
        assert_eq!(days, vec![(us(0), us(180)), (us(1400), us(1580))]);
        assert_eq!(s.day_of(0, us(179)).map(|(d, _)| d), Some(1));
        assert_eq!(s.day_of(0, us(180)), None, "night");
        assert_eq!(s.day_of(0, us(200)).map(|(d, _)| d), Some(2), "day 2 joins 0 to 2");
        // 2 -> 0 is (2 + k + 1) mod 8 = 0 at k = 5.
        assert_eq!(s.day_of(2, us(1000)).map(|(d, _)| d), Some(0));
    }

    #[test]
    fn up_within_looks_ahead_exactly_tau() {
        let s = Schedule::strobe(3, 8, us(180), us(20));
        assert!(s.up_within((0, 1), us(100), Time::ZERO), "in its day");
        assert!(!s.up_within((0, 1), us(180), Time::ZERO), "the night after it");
        assert!(!s.up_within((0, 1), us(1400) - us(150) - Time(1), us(150)));
        assert!(s.up_within((0, 1), us(1400) - us(150), us(150)), "exactly tau before the next day");
        assert!(s.up_within((0, 1), us(200), us(1200)));
        assert!(!s.up_within((0, 1), us(200), us(1199)));
        assert_eq!(s.next_change(us(10)), Some(us(180)));
        assert_eq!(s.next_change(us(1399)), Some(us(1400)));
    }

    #[test]
    fn schedule_file_parses_and_errors_name_the_line() {
        let s = Schedule::parse("# demo\n0us 0->1 1->2\n180us\n200us 1->0 # back\n380us\n400us repeat\n", "s.txt", 3).unwrap();
        assert_eq!(s.period, Some(us(400)));
        assert_eq!(s.day_of(1, us(650)).map(|(d, day)| (d, day.start, day.end)), Some((0, us(600), us(780))));
        let err = |t: &str| Schedule::parse(t, "s.txt", 3).unwrap_err();
        assert_eq!(err("0us 0->1\n10us 0->3\n"), "s.txt:2: 0->3: racks are 0 to 2");
        assert_eq!(err("0us 0->1\n10us 0-1\n"), "s.txt:2: \"0-1\" is not a circuit; expected <source rack>-><destination rack> like 0->1, or `repeat`");
        assert!(err("0us 0->1 0->2\n").starts_with("s.txt:1: 0->2: a rack sends on one circuit"));
        assert!(err("0us 0->1\n0us\n").starts_with("s.txt:2: 0us is not after"));
        assert!(err("5us 0->1\n").starts_with("s.txt:1: the first configuration must start at 0"));
        assert!(err("0us 1->1\n").starts_with("s.txt:1: 1->1: a circuit joins two different racks"));
        assert!(err("0us\n10us repeat\n20us 0->1\n").starts_with("s.txt:3: nothing may follow"));
        assert!(err("soon 0->1\n").starts_with("s.txt:1: "));
        assert!(err("\n# nothing\n").starts_with("s.txt: no configurations"));
    }

    fn data(dst: u32, seq: u64) -> Packet {
        Packet { dst, seq, payload: 8948, wire_bytes: 9038, ecn: Ecn::Ect, ..Packet::default() }
    }

    #[test]
    fn the_circuit_drains_only_the_joined_voq_and_only_within_its_day() {
        let s = Arc::new(Schedule::strobe(3, 8, us(180), us(20)));
        let sizing = Sizing { small: 4, large: 4, tau: Time::ZERO, ecn: None };
        let mut tor = Tor::new(0, 3, 16, (0, 1), s, sizing, false);
        let rate = Rate::gbps(80);
        for seq in 0..5 {
            let (a, _) = tor.admit(2, data(32, seq), Time::ZERO);
            assert_eq!(matches!(a, Admit::Queued), seq < 4, "capacity 4 packets");
        }
        assert_eq!(tor.voqs[2].drops, 1);
        assert!(tor.next_for(Uplink::Circuit, us(10), rate).is_none(), "joined to rack 1, whose VOQ is empty");
        assert!(tor.next_for(Uplink::Circuit, us(190), rate).is_none(), "night");
        let p = tor.next_for(Uplink::Circuit, us(200), rate).expect("day 2 joins rack 0 to rack 2");
        assert_eq!(p.seq, 0);
        // A 9,038-byte frame takes 0.9 us at 80 Gb/s: not started unless it ends by 380 us.
        assert!(tor.next_for(Uplink::Circuit, us(380) - Time(900_000), rate).is_none());
        assert!(tor.next_for(Uplink::Circuit, us(379), rate).is_some());
        assert_eq!(tor.circuit_days, vec![DayBytes { number: 2, dst: 2, bytes: 2 * 9038 }]);
        assert_eq!(tor.latencies_ns.len(), 2);
        assert_eq!(tor.next_for(Uplink::Packet, us(400), Rate::gbps(10)).map(|p| p.seq), Some(2));
    }

    #[test]
    fn voqs_grow_tau_before_their_day_and_ece_marks_acks() {
        let s = Arc::new(Schedule::strobe(3, 8, us(180), us(20)));
        let sizing = Sizing { small: 16, large: 50, tau: us(150), ecn: None };
        let tor = Tor::new(0, 3, 16, (0, 1), s.clone(), sizing, true);
        assert_eq!(tor.capacity(1, us(100)), 50, "in its day");
        assert_eq!(tor.capacity(1, us(180)), 16, "shrinks when the day ends");
        assert_eq!(tor.capacity(1, us(1250) - Time(1)), 16);
        assert_eq!(tor.capacity(1, us(1250)), 50, "tau = 150 us before the day at 1,400 us");
        // Rack 1's ToR marks ACKs going back to rack 0 while (0, 1) is up or near.
        let mut back = Tor::new(1, 3, 16, (0, 1), s, sizing, true);
        let ack = Packet { dst: 3, flags: flags::ACK, wire_bytes: 90, ..Packet::default() };
        back.admit(0, ack.clone(), us(50));
        back.admit(0, ack.clone(), us(600));
        back.admit(0, ack, us(1300));
        let ece: Vec<bool> = back.voqs[0].iter().map(|p| p.has(flags::ECE)).collect();
        assert_eq!(ece, vec![true, false, true]);
    }
}
