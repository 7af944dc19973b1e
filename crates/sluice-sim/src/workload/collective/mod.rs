//! `kind = "collective"`: a collective operation over a group of hosts in rank order (all-reduce,
//! reduce-scatter, all-gather, all-to-all, broadcast), expanded into messages that wait for one
//! another: all a collective needs is flows that wait for flows (`flow/waits.rs`). Each algorithm
//! (`ring.rs`, `halving_doubling.rs`, `tree.rs`, `direct.rs`) writes the messages of one chunk
//! and what each waits for within it; this file repeats that schedule for each chunk and each
//! iteration. A chunk's message waits for the same message of the chunk before to be
//! acknowledged (one chunk at a time on each pair's connection: the pipeline), and a rank starts
//! its next iteration `compute` after its part of the last is done: every message it receives
//! last has arrived and every one it sends last is acknowledged. Every wait is on a message the
//! waiting rank sent or received, so a collective runs on any number of threads.
//!
//! Sizes follow NCCL's tests (`nccl-tests/doc/PERFORMANCE.md`): `size` is each rank's buffer for
//! all-reduce and broadcast, the whole gathered (or scattered) buffer for all-gather and
//! reduce-scatter, and each rank's whole send buffer for all-to-all. Algorithm bandwidth is
//! size / time, and bus bandwidth scales it by the op's factor ([`Op::bus_factor`]) so that it
//! compares with the link rate whatever the op and the rank count.

mod direct;
mod halving_doubling;
mod ring;
mod tree;

use super::{FlowSpec, Generated, WorkloadConfig};
use crate::flow::waits::Wait;
use crate::time::Time;

/// A collective operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Every rank ends with the reduction of every rank's buffer.
    AllReduce,
    /// Each rank ends with its share of the reduction.
    ReduceScatter,
    /// Each rank ends with every rank's share.
    AllGather,
    /// Each rank sends a share of its buffer to every other.
    AllToAll,
    /// The root's buffer reaches every rank.
    Broadcast,
}

impl Op {
    /// The op's name in scenarios and outputs.
    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::ReduceScatter => "reduce_scatter",
            Op::AllGather => "all_gather",
            Op::AllToAll => "all_to_all",
            Op::Broadcast => "broadcast",
        }
    }

    /// The algorithms the op runs as, its default first.
    pub fn algorithms(self) -> &'static [Algorithm] {
        match self {
            Op::AllReduce => &[Algorithm::Ring, Algorithm::HalvingDoubling, Algorithm::DoubleBinaryTree],
            Op::ReduceScatter | Op::AllGather => &[Algorithm::Ring, Algorithm::HalvingDoubling],
            Op::AllToAll => &[Algorithm::Direct],
            Op::Broadcast => &[Algorithm::Ring],
        }
    }

    /// NCCL's bus bandwidth factor for `n` ranks (`nccl-tests/doc/PERFORMANCE.md`): what a rank's
    /// link carries per byte of `size`, so that bus bandwidth reads against the link rate.
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::ReduceScatter | Op::AllGather | Op::AllToAll => (n - 1.0) / n,
            Op::Broadcast => 1.0,
        }
    }
}

/// How an op is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Neighbours in rank order, in n - 1 steps per phase (broadcast: a pipelined chain).
    Ring,
    /// Recursive halving, then recursive doubling, between partners log2(n) apart.
    HalvingDoubling,
    /// NCCL's two complementary binary trees, each carrying half the buffer.
    DoubleBinaryTree,
    /// Every pair at once.
    Direct,
}

impl Algorithm {
    /// The algorithm's name in scenarios and outputs.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::HalvingDoubling => "halving_doubling",
            Algorithm::DoubleBinaryTree => "double_binary_tree",
            Algorithm::Direct => "direct",
        }
    }
}

/// One message of a chunk's schedule: between ranks, its bytes, and the messages of the same
/// chunk (by index in the schedule) it waits for, each one its sender received.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Sending rank.
    pub from: usize,
    /// Receiving rank.
    pub to: usize,
    /// Bytes.
    pub bytes: u64,
    /// Messages of the chunk it waits for.
    pub after: Vec<usize>,
}

/// `part` of `parts` equal shares of `bytes`, the remainder spread over the first shares.
pub(crate) fn share(bytes: u64, parts: u64, part: u64) -> u64 {
    bytes / parts + u64::from(part < bytes % parts)
}

/// A collective workload, checked.
#[derive(Clone, Debug)]
pub struct Collective {
    /// The op.
    pub op: Op,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Host ordinals in rank order.
    pub ranks: Vec<usize>,
    /// Bytes, as NCCL's tests count them.
    pub size: u64,
    /// Chunks each message is cut into.
    pub chunks: u32,
    /// Times the collective runs.
    pub iterations: u32,
    /// Compute time between a rank's iterations.
    pub compute: Time,
    /// Broadcast's root rank.
    pub root: usize,
    /// When the first iteration starts.
    pub start: Time,
}

/// One iteration of a collective as run: what `collectives.csv` reports a row of.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectiveRun {
    /// The workload's key ("workloads[2]").
    pub workload: String,
    /// The op.
    pub op: Op,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Ranks.
    pub ranks: usize,
    /// Bytes, as NCCL's tests count them.
    pub size: u64,
    /// Chunks per message.
    pub chunks: u32,
    /// The iteration, from 0.
    pub iteration: u32,
    /// Its messages: indices into the workload's flows, flow ids once the scenario has the run's.
    pub flows: Vec<usize>,
}

impl Collective {
    /// Reads the collective keys of `w` at `key`, over `ranks` with `size` bytes from `start`.
    pub fn parse(w: &WorkloadConfig, key: &str, ranks: Vec<usize>, size: u64, start: Time) -> Result<Collective, String> {
        let op = match w.op.as_deref() {
            Some("all_reduce") => Op::AllReduce,
            Some("reduce_scatter") => Op::ReduceScatter,
            Some("all_gather") => Op::AllGather,
            Some("all_to_all") => Op::AllToAll,
            Some("broadcast") => Op::Broadcast,
            Some(other) => {
                return Err(format!(
                    "{key}.op: expected \"all_reduce\", \"reduce_scatter\", \"all_gather\", \"all_to_all\" or \"broadcast\", got \"{other}\""
                ))
            }
            None => return Err(format!("{key}.op: required for kind = \"collective\"")),
        };
        let allowed = op.algorithms();
        let algorithm = match w.algorithm.as_deref() {
            None => allowed[0],
            Some(a) => *allowed.iter().find(|x| x.name() == a).ok_or_else(|| {
                let names: Vec<String> = allowed.iter().map(|x| format!("\"{}\"", x.name())).collect();
                format!("{key}.algorithm: {} runs as {}, got \"{a}\"", op.name(), names.join(" or "))
            })?,
        };
        let n = ranks.len();
        if algorithm == Algorithm::HalvingDoubling && !n.is_power_of_two() {
            return Err(format!(
                "{key}.hosts: halving_doubling pairs ranks by halves, so it needs a power-of-two number of ranks; got {n} (ring runs on any number)"
            ));
        }
        let chunks = match w.chunks.unwrap_or(1) {
            0 => return Err(format!("{key}.chunks: expected at least 1 chunk")),
            c => c,
        };
        let iterations = match w.iterations.unwrap_or(1) {
            0 => return Err(format!("{key}.iterations: expected at least 1 iteration")),
            i => i,
        };
        let root = match (w.root, op) {
            (Some(_), op) if op != Op::Broadcast => {
                return Err(format!("{key}.root: only a broadcast has a root; {} has none", op.name()))
            }
            (Some(r), _) if r >= n => {
                return Err(format!("{key}.root: rank {r} does not exist; the collective has ranks 0 to {} (indices into hosts)", n - 1))
            }
            (r, _) => r.unwrap_or(0),
        };
        let c = Collective { op, algorithm, ranks, size, chunks, iterations, compute: w.compute.unwrap_or_default(), root, start };
        // Every message carries at least a byte: the smallest chunk's smallest share has one.
        let smallest = size / chunks as u64;
        if smallest == 0 || c.schedule(smallest).iter().any(|m| m.bytes == 0) {
            return Err(format!(
                "{key}.size: {size} bytes in {chunks} {} leave some of the {} messages of {} empty; give at least {} bytes",
                if chunks == 1 { "chunk" } else { "chunks" },
                c.schedule(1).len(),
                c.describe(),
                c.smallest_size()
            ));
        }
        Ok(c)
    }

    /// The op and algorithm, in words.
    pub fn describe(&self) -> String {
        format!("{} by {}", self.op.name(), self.algorithm.name())
    }

    /// The messages of one chunk of `bytes` bytes.
    pub fn schedule(&self, bytes: u64) -> Vec<Message> {
        let n = self.ranks.len();
        match (self.op, self.algorithm) {
            (Op::AllReduce, Algorithm::Ring) => ring::all_reduce(n, bytes),
            (Op::ReduceScatter, Algorithm::Ring) => ring::reduce_scatter(n, bytes),
            (Op::AllGather, Algorithm::Ring) => ring::all_gather(n, bytes),
            (Op::Broadcast, _) => ring::broadcast(n, self.root, bytes),
            (Op::AllReduce, Algorithm::HalvingDoubling) => halving_doubling::all_reduce(n, bytes),
            (Op::ReduceScatter, Algorithm::HalvingDoubling) => halving_doubling::reduce_scatter(n, bytes),
            (Op::AllGather, Algorithm::HalvingDoubling) => halving_doubling::all_gather(n, bytes),
            (Op::AllReduce, Algorithm::DoubleBinaryTree) => tree::all_reduce(n, bytes),
            (Op::AllToAll, _) => direct::all_to_all(n, bytes),
            (op, a) => unreachable!("{} by {} is refused when read", op.name(), a.name()),
        }
    }

    /// The fewest bytes that give every message of every chunk at least one.
    fn smallest_size(&self) -> u64 {
        let mut b = 1;
        while self.schedule(b).iter().any(|m| m.bytes == 0) {
            b *= 2;
        }
        b * self.chunks as u64
    }

    /// Flows the collective makes.
    pub fn flow_count(&self) -> u64 {
        self.schedule(1 << 20).len() as u64 * self.chunks as u64 * self.iterations as u64
    }

    /// The collective's messages as flows (class and QoS left to the caller), what each waits
    /// for, and each iteration's record; `key` names the workload.
    pub fn expand(&self, key: &str) -> Generated {
        let n = self.ranks.len();
        let chunks = self.chunks as u64;
        let mut flows = Vec::new();
        let mut waits: Vec<Option<Wait>> = Vec::new();
        let mut runs = Vec::new();
        // What each rank's next iteration waits for: the last iteration's messages it received
        // or sent last.
        let mut done_at: Vec<Vec<usize>> = vec![Vec::new(); n];
        // Chunks differ by a byte at most: two schedules serve them all.
        let (big, small) = (share(self.size, chunks, 0), share(self.size, chunks, chunks - 1));
        let (big, small) = (self.schedule(big), if small == big { Vec::new() } else { self.schedule(small) });
        for iteration in 0..self.iterations {
            let first = flows.len();
            for c in 0..chunks {
                let schedule = if c < self.size % chunks || small.is_empty() { &big } else { &small };
                let base = flows.len();
                for (m, msg) in schedule.iter().enumerate() {
                    let mut after: Vec<usize> = msg.after.iter().map(|&a| base + a).collect();
                    let mut compute = Time::ZERO;
                    if c > 0 {
                        // One chunk at a time: the same message of the chunk before, acknowledged.
                        after.push(base + m - schedule.len());
                    } else if msg.after.is_empty() && iteration > 0 {
                        after.extend_from_slice(&done_at[msg.from]);
                        compute = self.compute;
                    }
                    flows.push(FlowSpec { src: self.ranks[msg.from], dst: self.ranks[msg.to], size: Some(msg.bytes), start: self.start, ..FlowSpec::default() });
                    waits.push((!after.is_empty()).then_some(Wait { after, compute, delays: Vec::new() }));
                }
                if c + 1 == chunks {
                    // A rank is done once the last chunk's messages it receives and none of its
                    // own waits for have arrived, and every one it sends is acknowledged (an
                    // earlier chunk's message is acknowledged before the same one of the next
                    // starts).
                    let mut waited = vec![false; schedule.len()];
                    for msg in schedule {
                        for &a in &msg.after {
                            waited[a] = true;
                        }
                    }
                    for d in &mut done_at {
                        d.clear();
                    }
                    for (m, msg) in schedule.iter().enumerate() {
                        if !waited[m] {
                            done_at[msg.to].push(base + m);
                        }
                        done_at[msg.from].push(base + m);
                    }
                }
            }
            runs.push(CollectiveRun {
                workload: key.to_string(),
                op: self.op,
                algorithm: self.algorithm,
                ranks: n,
                size: self.size,
                chunks: self.chunks,
                iteration,
                flows: (first..flows.len()).collect(),
            });
        }
        Generated { flows, waits, collectives: runs, ..Generated::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(keys: &str, ranks: usize) -> Result<Collective, String> {
        let w: WorkloadConfig = toml::from_str(&format!("kind = \"collective\"\n{keys}")).unwrap();
        let size = w.size.map_or(1 << 20, |b| b.0);
        Collective::parse(&w, "workloads[0]", (0..ranks).collect(), size, Time::ZERO)
    }

    #[test]
    fn each_op_takes_its_own_algorithms_and_keys() {
        assert_eq!(parse("", 4).unwrap_err(), "workloads[0].op: required for kind = \"collective\"");
        assert_eq!(
            parse("op = \"all_to_all\"\nalgorithm = \"ring\"", 4).unwrap_err(),
            "workloads[0].algorithm: all_to_all runs as \"direct\", got \"ring\""
        );
        assert_eq!(
            parse("op = \"all_gather\"\nalgorithm = \"tree\"", 4).unwrap_err(),
            "workloads[0].algorithm: all_gather runs as \"ring\" or \"halving_doubling\", got \"tree\""
        );
        assert!(parse("op = \"all_reduce\"\nalgorithm = \"halving_doubling\"", 6).unwrap_err().starts_with("workloads[0].hosts: halving_doubling"));
        assert!(parse("op = \"all_reduce\"\nroot = 1", 4).unwrap_err().starts_with("workloads[0].root: only a broadcast has a root"));
        assert!(parse("op = \"broadcast\"\nroot = 4", 4).unwrap_err().starts_with("workloads[0].root: rank 4 does not exist"));
        assert_eq!(parse("op = \"all_reduce\"\nchunks = 0", 4).unwrap_err(), "workloads[0].chunks: expected at least 1 chunk");
        // 8 ranks cut 100 bytes in 16 chunks of 8 shares: some messages would carry nothing.
        let err = parse("op = \"all_reduce\"\nsize = \"100B\"\nchunks = 16", 8).unwrap_err();
        assert_eq!(err, "workloads[0].size: 100 bytes in 16 chunks leave some of the 112 messages of all_reduce by ring empty; give at least 128 bytes");
        let c = parse("op = \"all_reduce\"\nsize = \"128B\"\nchunks = 16\niterations = 2", 8).unwrap();
        assert_eq!(c.flow_count(), 2 * 16 * 112);
    }

    #[test]
    fn chunks_go_one_at_a_time_and_iterations_wait_for_each_rank_s_part() {
        let c = parse("op = \"broadcast\"\nsize = \"3000B\"\nchunks = 3\niterations = 2\ncompute = \"7us\"", 3).unwrap();
        let g = c.expand("workloads[0]");
        // Per chunk: 0 -> 1, then 1 -> 2 once 1 has it.
        assert_eq!(g.flows.len(), 2 * 3 * 2);
        assert_eq!(g.waits[0], None);
        assert_eq!(g.waits[1].as_ref().unwrap().after, [0]);
        assert_eq!(g.waits[2].as_ref().unwrap().after, [0], "chunk 1's first message: chunk 0's, acknowledged");
        assert_eq!(g.waits[3].as_ref().unwrap().after, [2, 1]);
        // Iteration 1's first message: the root is done once its last chunk's send is acknowledged.
        let next = g.waits[6].as_ref().unwrap();
        assert_eq!((next.after.as_slice(), next.compute), ([4].as_slice(), Time::from_us(7)));
        assert_eq!(g.collectives.len(), 2);
        assert_eq!(g.collectives[1].flows, (6..12).collect::<Vec<_>>());
        assert!(g.flows.iter().all(|f| f.size == Some(1000)));
    }
}
