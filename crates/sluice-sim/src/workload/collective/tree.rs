//! Double binary tree all-reduce, as NCCL builds it (`src/graph/trees.cc`, `ncclGetBtree` and
//! `ncclGetDtree`; Sanders, Speck and Träff, "Two-tree algorithms for full bandwidth broadcast,
//! reduction and scan", 2009): two binary trees over the ranks, the second the first mirrored
//! (an even count) or shifted by one (odd), so that a rank inner in one is mostly a leaf in the
//! other. Each tree carries half the chunk: every rank sends its partial sum up once it has its
//! children's, and the result comes down, each rank forwarding to its children once its parent's
//! arrives (the root once its children's have).

use super::{share, Message};

/// Rank `rank`'s parent in NCCL's binary tree over `n` ranks (rank 0 the root): the rank that
/// clears its lowest set bit and sets the one above, or only clears it past the last rank.
fn btree_parent(n: usize, rank: usize) -> Option<usize> {
    if rank == 0 {
        return None;
    }
    let bit = 1 << rank.trailing_zeros();
    let up = (rank ^ bit) | (bit << 1);
    Some(if up >= n { rank ^ bit } else { up })
}

/// Each rank's parent in tree `t` (0 or 1) of NCCL's double binary tree.
pub(super) fn parents(n: usize, t: usize) -> Vec<Option<usize>> {
    (0..n)
        .map(|r| match t {
            0 => btree_parent(n, r),
            _ if n % 2 == 0 => btree_parent(n, n - 1 - r).map(|p| n - 1 - p),
            _ => btree_parent(n, (r + n - 1) % n).map(|p| (p + 1) % n),
        })
        .collect()
}

/// Reduce up then broadcast down both trees, each with half of a chunk of `bytes`.
pub(super) fn all_reduce(n: usize, bytes: u64) -> Vec<Message> {
    let mut out = Vec::new();
    for t in 0..2 {
        let half = share(bytes, 2, t as u64);
        let parent = parents(n, t);
        let children: Vec<Vec<usize>> = (0..n).map(|v| (0..n).filter(|&c| parent[c] == Some(v)).collect()).collect();
        // Leaves first, so that a rank's children's messages come before its own.
        let mut order: Vec<usize> = (0..n).collect();
        let depth = |mut v: usize| {
            let mut d = 0;
            while let Some(p) = parent[v] {
                (v, d) = (p, d + 1);
            }
            d
        };
        order.sort_by_key(|&v| (std::cmp::Reverse(depth(v)), v));
        let mut up = vec![usize::MAX; n];
        for &v in &order {
            if let Some(p) = parent[v] {
                up[v] = out.len();
                out.push(Message { from: v, to: p, bytes: half, after: children[v].iter().map(|&c| up[c]).collect() });
            }
        }
        // Down from the root, parents before children.
        let mut down = vec![usize::MAX; n];
        for &v in order.iter().rev() {
            for &c in &children[v] {
                let after = match parent[v] {
                    None => children[v].iter().map(|&k| up[k]).collect(),
                    Some(_) => vec![down[v]],
                };
                down[c] = out.len();
                out.push(Message { from: v, to: c, bytes: half, after });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trees_are_nccls_and_each_rank_is_a_leaf_in_one() {
        // n = 8: 0 <- 4 <- {2, 6}, 2 <- {1, 3}, 6 <- {5, 7}; the mirror 7 <- 3 <- {1, 5}, 1 <- {0, 2}, 5 <- {4, 6}.
        let t0 = parents(8, 0);
        assert_eq!(t0, [None, Some(2), Some(4), Some(2), Some(0), Some(6), Some(4), Some(6)]);
        let t1 = parents(8, 1);
        assert_eq!(t1, [Some(1), Some(3), Some(1), Some(7), Some(5), Some(3), Some(5), None]);
        let inner = |p: &[Option<usize>], r: usize| p.contains(&Some(r));
        assert!((0..8).all(|r| !(inner(&t0, r) && inner(&t1, r))), "no rank is inner in both");
        // An odd count shifts the tree by one.
        assert_eq!(parents(5, 1), [Some(1), None, Some(3), Some(0), Some(3)]);
        let m = all_reduce(8, 1000);
        assert_eq!(m.len(), 2 * 2 * 7);
        assert!(m.iter().all(|m| m.bytes == 500));
        // Rank 2 sends up once 1 and 3 reached it; 4 sends down to 2 once 0's message came.
        let up2 = m.iter().position(|x| (x.from, x.to) == (2, 4)).unwrap();
        let from = |i: &usize| (m[*i].from, m[*i].to);
        assert_eq!(m[up2].after.iter().map(from).collect::<Vec<_>>(), [(1, 2), (3, 2)]);
        let down2 = m.iter().position(|x| (x.from, x.to) == (4, 2)).unwrap();
        assert_eq!(m[down2].after.iter().map(from).collect::<Vec<_>>(), [(0, 4)]);
        let root = m.iter().position(|x| (x.from, x.to) == (0, 4)).unwrap();
        assert_eq!(m[root].after.iter().map(from).collect::<Vec<_>>(), [(4, 0)]);
    }
}
