//! Ring algorithms: ranks pass shares to their successor in rank order. A chunk is cut in n
//! shares; at step k rank i sends share (i - k) mod n to rank i + 1, once it has what rank i - 1
//! sent it at step k - 1. Reduce-scatter is the first n - 1 steps (each rank ends with one share
//! reduced), all-gather the same pattern carrying finished shares, and all-reduce both: 2(n - 1)
//! steps of a share each (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms", 2009;
//! NCCL's ring). Broadcast is a chain from the root through the ranks after it.

use super::{share, Message};

/// `steps` ring steps over `n` ranks of a chunk of `bytes`.
fn steps(n: usize, bytes: u64, steps: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(steps * n);
    for k in 0..steps {
        for i in 0..n {
            let part = (i + n * steps - k) % n;
            // What rank i got at the step before: rank i - 1's message then.
            let after = if k == 0 { Vec::new() } else { vec![(k - 1) * n + (i + n - 1) % n] };
            out.push(Message { from: i, to: (i + 1) % n, bytes: share(bytes, n as u64, part as u64), after });
        }
    }
    out
}

/// Ring all-reduce: reduce-scatter then all-gather, 2(n - 1) steps.
pub(super) fn all_reduce(n: usize, bytes: u64) -> Vec<Message> {
    steps(n, bytes, 2 * (n - 1))
}

/// Ring reduce-scatter: n - 1 steps.
pub(super) fn reduce_scatter(n: usize, bytes: u64) -> Vec<Message> {
    steps(n, bytes, n - 1)
}

/// Ring all-gather: n - 1 steps.
pub(super) fn all_gather(n: usize, bytes: u64) -> Vec<Message> {
    steps(n, bytes, n - 1)
}

/// A chain from `root` through the ranks after it in rank order, each forwarding what it got.
pub(super) fn broadcast(n: usize, root: usize, bytes: u64) -> Vec<Message> {
    (0..n - 1)
        .map(|k| Message {
            from: (root + k) % n,
            to: (root + k + 1) % n,
            bytes,
            after: if k == 0 { Vec::new() } else { vec![k - 1] },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_sends_every_share_but_its_own_in_each_phase_once_it_has_it() {
        let n = 4;
        let m = all_reduce(n, 4000);
        assert_eq!(m.len(), 2 * (n - 1) * n);
        assert!(m.iter().all(|m| m.to == (m.from + 1) % n && m.bytes == 1000));
        // Step 2, rank 0 waits for step 1's message from rank 3.
        assert_eq!(m[2 * n].after, [n + 3]);
        assert_eq!(m[n + 3].to, 0);
        // A share that does not divide: the first shares take the remainder.
        let sizes: Vec<u64> = reduce_scatter(3, 10)[..3].iter().map(|m| m.bytes).collect();
        assert_eq!(sizes, [4, 3, 3], "rank i sends share i at step 0");
        let chain = broadcast(4, 2, 7);
        let hops: Vec<(usize, usize)> = chain.iter().map(|m| (m.from, m.to)).collect();
        assert_eq!(hops, [(2, 3), (3, 0), (0, 1)]);
        assert_eq!(chain[2].after, [1]);
    }
}
