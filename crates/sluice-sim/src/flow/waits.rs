//! Flows that wait for flows: the dependency graph of the flows a run knows before it starts. A
//! waiting flow starts a compute delay after the last flow it waits for is done, as its sending
//! host sees it: a flow the host received is done when its last byte arrives, one the host sent
//! when its last byte is acknowledged. Both are events at the waiting flow's own host, so the
//! start is made by the shard that runs that host, in the canonical event order, and a run is the
//! same on any number of threads. A flow that waits for a flow with no end at its host learns of
//! that flow's arrival at once, which couples two hosts at zero delay: the fabric then stays one
//! partition ([`WaitGraph::coupled`]).
//!
//! A wait may also give each flow it waits for a delay of its own (a Chakra trace's compute
//! between a message and the next: [`Wait::delays`]); the flow then starts at the latest of
//! each done time plus its delay, and `compute` after that.
//!
//! The graph is shared read-only by the shards; each shard keeps its own [`Waiting`] counts, and
//! only the shard of a waiting flow's sender ever changes that flow's.

use crate::ids::FlowId;
use crate::time::Time;
use std::sync::Arc;

/// One flow's wait, as a workload states it: the flows (by index) it waits for and the compute
/// delay after the last of them is done.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Wait {
    /// The flows it waits for.
    pub after: Vec<usize>,
    /// Time between the last of them being done and the flow's start.
    pub compute: Time,
    /// Each flow of `after`'s own delay, added to its done time (empty: none has one).
    pub delays: Vec<Time>,
}

/// Lists by flow id, packed: list `f` is `items[start[f]..start[f + 1]]`, each item with its
/// delay in `delays` (kept only where some delay is not zero).
#[derive(Clone, Debug, Default)]
struct Lists {
    start: Vec<u32>,
    items: Vec<FlowId>,
    delays: Vec<Time>,
}

impl Lists {
    /// Packs `lists`, one per flow.
    fn of(lists: &[Vec<(FlowId, Time)>]) -> Lists {
        let mut start = Vec::with_capacity(lists.len() + 1);
        let (mut items, mut delays) = (Vec::new(), Vec::new());
        start.push(0);
        for l in lists {
            items.extend(l.iter().map(|x| x.0));
            delays.extend(l.iter().map(|x| x.1));
            start.push(items.len() as u32);
        }
        if delays.iter().all(|&d| d == Time::ZERO) {
            delays = Vec::new();
        }
        Lists { start, items, delays }
    }

    /// The bounds of list `f` in `items`.
    fn range(&self, f: FlowId) -> std::ops::Range<usize> {
        match (self.start.get(f.index()), self.start.get(f.index() + 1)) {
            (Some(&a), Some(&b)) => a as usize..b as usize,
            _ => 0..0,
        }
    }

    /// List `f` (empty past the last).
    fn get(&self, f: FlowId) -> &[FlowId] {
        &self.items[self.range(f)]
    }

    /// The delay of item `i` of the packed lists.
    fn delay(&self, i: usize) -> Time {
        self.delays.get(i).copied().unwrap_or(Time::ZERO)
    }

    /// Whether some item has a delay.
    fn delayed(&self) -> bool {
        !self.delays.is_empty()
    }
}

/// The dependency graph of a run's flows, by flow id.
#[derive(Clone, Debug, Default)]
pub struct WaitGraph {
    /// Each flow's compute delay (zero for flows that do not wait).
    compute: Vec<Time>,
    /// Each flow's own start time, before which it does not start however early it may.
    not_before: Vec<Time>,
    /// What each flow waits for.
    after: Lists,
    /// The flows that hear of each flow at its arrival (its receiver's, or another host's).
    on_arrival: Lists,
    /// The flows that hear of each flow at its last acknowledgement (its sender's).
    on_ack: Lists,
    /// How many flows wait.
    waiting: usize,
    /// Some flow waits for a flow with no end at its own host.
    coupled: bool,
}

impl WaitGraph {
    /// The graph of `waits` (one per flow, by id; `None`: the flow starts at its own time) over
    /// flows with `ends` (sender, receiver, own start time). Every index must name a flow and the
    /// graph must have no circle: the scenario checks both first ([`find_circle`]).
    pub fn new(waits: &[Option<Wait>], ends: &[(usize, usize, Time)]) -> WaitGraph {
        let n = ends.len();
        let mut compute = vec![Time::ZERO; n];
        let mut after = vec![Vec::new(); n];
        let (mut on_arrival, mut on_ack) = (vec![Vec::new(); n], vec![Vec::new(); n]);
        let (mut waiting, mut coupled) = (0, false);
        for (f, w) in waits.iter().enumerate() {
            let Some(w) = w.as_ref().filter(|w| !w.after.is_empty()) else { continue };
            waiting += 1;
            compute[f] = w.compute;
            let host = ends[f].0;
            // A flow named twice is waited for once, with the longest of its delays.
            let mut deps: Vec<(usize, Time)> =
                w.after.iter().enumerate().map(|(i, &a)| (a, w.delays.get(i).copied().unwrap_or(Time::ZERO))).collect();
            deps.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
            deps.dedup_by_key(|d| d.0);
            for (a, delay) in deps {
                after[f].push((FlowId(a as u32), Time::ZERO));
                if ends[a].0 == host {
                    on_ack[a].push((FlowId(f as u32), delay));
                } else {
                    coupled |= ends[a].1 != host;
                    on_arrival[a].push((FlowId(f as u32), delay));
                }
            }
        }
        WaitGraph {
            compute,
            not_before: ends.iter().map(|e| e.2).collect(),
            after: Lists::of(&after),
            on_arrival: Lists::of(&on_arrival),
            on_ack: Lists::of(&on_ack),
            waiting,
            coupled,
        }
    }

    /// Whether flow `f` waits for others.
    pub fn waits(&self, f: FlowId) -> bool {
        !self.after.get(f).is_empty()
    }

    /// The flows `f` waits for.
    pub fn after(&self, f: FlowId) -> &[FlowId] {
        self.after.get(f)
    }

    /// How many flows wait.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Whether some flow waits for a flow that neither starts nor ends at its own host.
    pub fn coupled(&self) -> bool {
        self.coupled
    }
}

/// How a flow is done, as the host that sees it sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// Its last byte arrived at the receiver.
    Arrived,
    /// Its sender had its last byte acknowledged.
    Acknowledged,
}

/// A shard's progress through the graph: how many flows each waiting flow still waits for.
#[derive(Clone, Debug)]
pub struct Waiting {
    graph: Arc<WaitGraph>,
    /// Flows each flow still waits for.
    left: Vec<u32>,
    /// The latest done time plus delay each flow heard so far (kept only when some wait has
    /// delays: otherwise the last one heard is the latest).
    latest: Vec<Time>,
    /// When each flow that stopped waiting starts.
    due: Vec<Option<Time>>,
    /// Flows this shard saw stop waiting.
    released: usize,
}

impl Waiting {
    /// Every waiting flow waiting for all it waits for.
    pub fn new(graph: Arc<WaitGraph>) -> Waiting {
        let n = graph.compute.len();
        let left = (0..n).map(|f| graph.after(FlowId(f as u32)).len() as u32).collect();
        let delayed = graph.on_arrival.delayed() || graph.on_ack.delayed();
        let latest = if delayed { vec![Time::ZERO; n] } else { Vec::new() };
        Waiting { graph, left, latest, due: vec![None; n], released: 0 }
    }

    /// The graph.
    pub fn graph(&self) -> &WaitGraph {
        &self.graph
    }

    /// Flow `f` is done as `how` says at `now`: adds each flow that waited for nothing else, with
    /// its start time, to `ready`, in the graph's order.
    pub fn done(&mut self, f: FlowId, how: Done, now: Time, ready: &mut Vec<(Time, FlowId)>) {
        let graph = Arc::clone(&self.graph);
        let lists = match how {
            Done::Arrived => &graph.on_arrival,
            Done::Acknowledged => &graph.on_ack,
        };
        for i in lists.range(f) {
            let w = lists.items[i];
            let left = &mut self.left[w.index()];
            if *left == 0 {
                continue;
            }
            *left -= 1;
            let mut heard = now;
            if let Some(latest) = self.latest.get_mut(w.index()) {
                *latest = (*latest).max(now + lists.delay(i));
                heard = *latest;
            }
            if *left == 0 {
                let at = (heard + graph.compute[w.index()]).max(graph.not_before[w.index()]);
                self.due[w.index()] = Some(at);
                self.released += 1;
                ready.push((at, w));
            }
        }
    }

    /// When flow `f` starts, if it waited and stopped waiting.
    pub fn start_of(&self, f: FlowId) -> Option<Time> {
        self.due.get(f.index()).copied().flatten()
    }

    /// Flows this shard saw stop waiting.
    pub fn released(&self) -> usize {
        self.released
    }

    /// Flows that still wait.
    pub fn still_waiting(&self) -> usize {
        self.graph.waiting - self.released
    }

    /// Takes flow `f`'s progress from `other`, the shard that ran its sender.
    pub fn take_flow(&mut self, other: &Waiting, f: FlowId) {
        let i = f.index();
        if self.left[i] > 0 && other.left[i] == 0 {
            self.released += 1;
        }
        self.left[i] = other.left[i];
        self.due[i] = other.due[i];
        if let (Some(l), Some(&o)) = (self.latest.get_mut(i), other.latest.get(i)) {
            *l = o;
        }
    }

    /// The flows still waiting, each with the flows it waits for that `done` says are not done.
    pub fn stuck(&self, done: impl Fn(FlowId) -> bool) -> Vec<(FlowId, Vec<FlowId>)> {
        (0..self.left.len())
            .filter(|&f| self.left[f] > 0)
            .map(|f| {
                let f = FlowId(f as u32);
                (f, self.graph.after(f).iter().copied().filter(|&a| !done(a)).collect())
            })
            .collect()
    }
}

/// A circle in a dependency graph given as each node's list of nodes it waits for, if there is
/// one: its nodes in order, each waiting for the next and the last for the first. The circle
/// found is the one reached from the lowest node that cannot start, so the answer is the same
/// every time.
pub fn find_circle(after: &[Vec<usize>]) -> Option<Vec<usize>> {
    // Kahn's order: what is left once every node that can start has, lies on or behind a circle.
    let n = after.len();
    let mut left: Vec<usize> = after.iter().map(Vec::len).collect();
    let mut heard: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (f, deps) in after.iter().enumerate() {
        for &d in deps {
            heard[d].push(f);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&f| left[f] == 0).collect();
    while let Some(d) = ready.pop() {
        for &f in &heard[d] {
            left[f] -= 1;
            if left[f] == 0 {
                ready.push(f);
            }
        }
    }
    let first = (0..n).find(|&f| left[f] > 0)?;
    // Walking from a node left over along what it still waits for meets a node twice.
    let mut seen = vec![usize::MAX; n];
    let mut path = Vec::new();
    let mut at = first;
    while seen[at] == usize::MAX {
        seen[at] = path.len();
        path.push(at);
        at = *after[at].iter().find(|&&d| left[d] > 0).expect("a node left over waits for another left over");
    }
    Some(path.split_off(seen[at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(after: &[usize], compute_us: u64) -> Option<Wait> {
        Some(Wait { after: after.to_vec(), compute: Time::from_us(compute_us), delays: Vec::new() })
    }

    #[test]
    fn a_flow_starts_its_compute_delay_after_the_last_it_waits_for_as_its_host_sees_it() {
        // 0: h0->h1; 1: h2->h1; 2: h1->h3 waits for both (arrivals at h1); 3: h1->h0 waits for 2
        // (acknowledged at h1).
        let z = Time::ZERO;
        let ends = [(0, 1, z), (2, 1, z), (1, 3, z), (1, 0, Time::from_us(40))];
        let graph = Arc::new(WaitGraph::new(&[None, None, wait(&[0, 1], 5), wait(&[2], 0)], &ends));
        assert!(!graph.coupled() && graph.waiting() == 2);
        let mut w = Waiting::new(graph);
        let mut ready = Vec::new();
        w.done(FlowId(0), Done::Arrived, Time::from_us(10), &mut ready);
        w.done(FlowId(0), Done::Acknowledged, Time::from_us(12), &mut ready);
        assert!(ready.is_empty(), "flow 2 still waits for flow 1");
        w.done(FlowId(1), Done::Arrived, Time::from_us(20), &mut ready);
        assert_eq!(ready, [(Time::from_us(25), FlowId(2))]);
        w.done(FlowId(2), Done::Arrived, Time::from_us(30), &mut ready);
        assert_eq!(ready.len(), 1, "h1 sent flow 2: only its acknowledgement counts");
        w.done(FlowId(2), Done::Acknowledged, Time::from_us(31), &mut ready);
        assert_eq!(ready[1], (Time::from_us(40), FlowId(3)), "not before its own start");
        assert_eq!((w.still_waiting(), w.start_of(FlowId(2))), (0, Some(Time::from_us(25))));
    }

    #[test]
    fn each_flow_waited_for_may_add_its_own_delay_and_the_latest_sum_wins() {
        // 2 (h1->h0) waits for 0 (arrives at h1) plus 30 us and for 1 (sent by h1) plus 5 us,
        // then computes 2 us; 0 is named twice, and the longer delay counts.
        let z = Time::ZERO;
        let ends = [(0, 1, z), (1, 2, z), (1, 0, z)];
        let wait = Wait {
            after: vec![0, 1, 0],
            compute: Time::from_us(2),
            delays: vec![Time::from_us(10), Time::from_us(5), Time::from_us(30)],
        };
        let mut w = Waiting::new(Arc::new(WaitGraph::new(&[None, None, Some(wait)], &ends)));
        let mut ready = Vec::new();
        w.done(FlowId(0), Done::Arrived, Time::from_us(10), &mut ready);
        w.done(FlowId(1), Done::Acknowledged, Time::from_us(20), &mut ready);
        // 10 + 30 beats 20 + 5, though 1 was done last.
        assert_eq!(ready, [(Time::from_us(42), FlowId(2))]);
    }

    #[test]
    fn waiting_for_a_flow_of_two_other_hosts_couples_them() {
        let graph = WaitGraph::new(&[None, wait(&[0], 0)], &[(0, 1, Time::ZERO), (2, 3, Time::ZERO)]);
        assert!(graph.coupled());
        let mut w = Waiting::new(Arc::new(graph));
        assert_eq!(w.stuck(|_| false), [(FlowId(1), vec![FlowId(0)])]);
        let mut ready = Vec::new();
        w.done(FlowId(0), Done::Arrived, Time::ZERO, &mut ready);
        assert_eq!(ready, [(Time::ZERO, FlowId(1))]);
    }

    #[test]
    fn a_circle_is_named_from_its_lowest_node() {
        assert_eq!(find_circle(&[vec![], vec![0], vec![1]]), None);
        // 0 waits for 3, 3 for 2, 2 for 1... but 1 waits for nothing; 4 and 5 wait for each other.
        assert_eq!(find_circle(&[vec![3], vec![], vec![1], vec![2], vec![5], vec![4, 0]]), Some(vec![4, 5]));
        assert_eq!(find_circle(&[vec![2], vec![0], vec![1]]), Some(vec![0, 2, 1]));
        assert_eq!(find_circle(&[vec![0]]), Some(vec![0]), "a flow that waits for itself");
    }
}
