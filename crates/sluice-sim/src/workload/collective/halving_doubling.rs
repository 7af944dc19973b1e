//! Halving-doubling (Rabenseifner's all-reduce; Thakur, Rabenseifner and Gropp, "Optimization of
//! collective communication operations in MPICH", 2005): reduce-scatter by recursive halving,
//! log2(n) steps in which each rank swaps half of what it still reduces with the rank n/2, n/4,
//! ..., 1 away; then all-gather by recursive doubling, the same partners in the other order, the
//! bytes doubling. Each step waits for what the partner sent at the step before. The ranks must
//! be a power of two.

use super::{share, Message};

/// Recursive halving over `n` ranks of a chunk of `bytes`: step j (from 0) pairs ranks n/2^(j+1)
/// apart, each sending bytes/2^(j+1). `first` numbers the messages; the first step waits for
/// `before` (each rank's message received last, if any).
fn halving(n: usize, bytes: u64, out: &mut Vec<Message>, before: Option<&dyn Fn(usize) -> usize>) {
    let steps = n.trailing_zeros() as usize;
    for j in 0..steps {
        let base = out.len();
        let distance = n >> (j + 1);
        for i in 0..n {
            let after = match (j, before) {
                (0, Some(b)) => vec![b(i)],
                (0, None) => Vec::new(),
                // What the partner of the step before sent rank i.
                _ => vec![base - n + (i ^ (distance << 1))],
            };
            out.push(Message { from: i, to: i ^ distance, bytes: share(bytes, 1 << (j + 1), (i & distance != 0) as u64), after });
        }
    }
}

/// Recursive doubling over `n` ranks: step j pairs ranks 2^j apart, each sending bytes 2^j/n.
fn doubling(n: usize, bytes: u64, out: &mut Vec<Message>, before: Option<&dyn Fn(usize) -> usize>) {
    let steps = n.trailing_zeros() as usize;
    for j in 0..steps {
        let base = out.len();
        let distance = 1 << j;
        for i in 0..n {
            let after = match (j, before) {
                (0, Some(b)) => vec![b(i)],
                (0, None) => Vec::new(),
                _ => vec![base - n + (i ^ (distance >> 1))],
            };
            // The shares a rank holds after j steps: 2^j of the n.
            let bytes = (0..distance as u64).map(|p| share(bytes, n as u64, (i as u64 & !(distance as u64 - 1)) + p)).sum();
            out.push(Message { from: i, to: i ^ distance, bytes, after });
        }
    }
}

/// Halving-doubling all-reduce: 2 log2(n) steps.
pub(super) fn all_reduce(n: usize, bytes: u64) -> Vec<Message> {
    let mut out = Vec::new();
    halving(n, bytes, &mut out, None);
    // The last halving step paired ranks 1 apart: rank i's last message came from i ^ 1.
    let last = out.len() - n;
    doubling(n, bytes, &mut out, Some(&|i| last + (i ^ 1)));
    out
}

/// Reduce-scatter by recursive halving: log2(n) steps.
pub(super) fn reduce_scatter(n: usize, bytes: u64) -> Vec<Message> {
    let mut out = Vec::new();
    halving(n, bytes, &mut out, None);
    out
}

/// All-gather by recursive doubling: log2(n) steps.
pub(super) fn all_gather(n: usize, bytes: u64) -> Vec<Message> {
    let mut out = Vec::new();
    doubling(n, bytes, &mut out, None);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partners_halve_then_double_and_each_step_waits_for_the_last_partner() {
        let m = all_reduce(8, 8000);
        assert_eq!(m.len(), 6 * 8);
        let steps: Vec<(usize, u64)> = (0..6).map(|s| (m[s * 8].to, m[s * 8].bytes)).collect();
        // Rank 0's partner and bytes at each step: 4, 2, 1 halving; 1, 2, 4 doubling.
        assert_eq!(steps, [(4, 4000), (2, 2000), (1, 1000), (1, 1000), (2, 2000), (4, 4000)]);
        // Rank 5 at step 1 waits for what rank 1 (its step-0 partner) sent it.
        assert_eq!(m[8 + 5].after, [1]);
        assert_eq!((m[1].from, m[1].to), (1, 5));
        // The first doubling step waits for the last halving step's partner.
        assert_eq!(m[24 + 6].after, [16 + 7]);
        let total: u64 = m.iter().filter(|m| m.from == 3).map(|m| m.bytes).sum();
        assert_eq!(total, 2 * 7 * 1000, "2(n-1)/n of the buffer, as a ring");
    }
}
