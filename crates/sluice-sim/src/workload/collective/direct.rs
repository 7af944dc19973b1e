//! All-to-all, direct: every rank sends its share for every other rank at once, nothing waiting
//! (NCCL's all-to-all is the same set of point-to-point sends).

use super::{share, Message};

/// Every ordered pair of `n` ranks, a share of `bytes` each (a rank's own share stays home).
pub(super) fn all_to_all(n: usize, bytes: u64) -> Vec<Message> {
    let mut out = Vec::with_capacity(n * (n - 1));
    for i in 0..n {
        for j in (0..n).filter(|&j| j != i) {
            out.push(Message { from: i, to: j, bytes: share(bytes, n as u64, j as u64), after: Vec::new() });
        }
    }
    out
}
