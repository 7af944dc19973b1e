//! Sets of byte ranges: the sender's SACK scoreboard and the receiver's out-of-order map.

/// Disjoint, sorted, non-adjacent half-open byte ranges with a running byte count.
#[derive(Clone, Debug, Default)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
    bytes: u64,
}

impl RangeSet {
    /// Total bytes covered.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when no range is held.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges in increasing order.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// End of the highest range.
    pub fn high(&self) -> Option<u64> {
        self.ranges.last().map(|r| r.1)
    }

    /// Adds `[start, end)`; returns the bytes not covered before.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        // First range that ends at or after `start` (could merge with it).
        let i = self.ranges.partition_point(|r| r.1 < start);
        let mut j = i;
        let (mut s, mut e) = (start, end);
        let mut covered = 0;
        while j < self.ranges.len() && self.ranges[j].0 <= end {
            let r = self.ranges[j];
            covered += r.1.min(end).saturating_sub(r.0.max(start));
            s = s.min(r.0);
            e = e.max(r.1);
            j += 1;
        }
        let added = (end - start) - covered;
        self.bytes += added;
        self.ranges.splice(i..j, std::iter::once((s, e)));
        added
    }

    /// Drops everything below `seq`; returns the bytes removed.
    pub fn remove_below(&mut self, seq: u64) -> u64 {
        let mut removed = 0;
        let full = self.ranges.partition_point(|r| r.1 <= seq);
        for r in &self.ranges[..full] {
            removed += r.1 - r.0;
        }
        self.ranges.drain(..full);
        if let Some(first) = self.ranges.first_mut() {
            if first.0 < seq {
                removed += seq - first.0;
                first.0 = seq;
            }
        }
        self.bytes -= removed;
        removed
    }

    /// Removes `[start, end)`; returns the bytes removed.
    pub fn remove(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let i = self.ranges.partition_point(|r| r.1 <= start);
        let j = i + self.ranges[i..].partition_point(|r| r.0 < end);
        if i == j {
            return 0;
        }
        let (first, last) = (self.ranges[i], self.ranges[j - 1]);
        let removed = self.bytes_in(start, end);
        let kept = [(first.0, start.min(first.1)), (end.max(last.0), last.1)];
        self.ranges.splice(i..j, kept.into_iter().filter(|r| r.0 < r.1));
        self.bytes -= removed;
        removed
    }

    /// If a range starts exactly at `seq`, removes it and returns its end.
    pub fn take_at(&mut self, seq: u64) -> Option<u64> {
        match self.ranges.first() {
            Some(&(s, e)) if s <= seq => {
                self.ranges.remove(0);
                self.bytes -= e - s;
                Some(e.max(seq))
            }
            _ => None,
        }
    }

    /// Bytes covered inside `[from, to)`.
    pub fn bytes_in(&self, from: u64, to: u64) -> u64 {
        if from >= to {
            return 0;
        }
        let i = self.ranges.partition_point(|r| r.1 <= from);
        self.ranges[i..]
            .iter()
            .take_while(|r| r.0 < to)
            .map(|r| r.1.min(to) - r.0.max(from))
            .sum()
    }

    /// The first gap at or after `from` that lies below `limit`, clipped to `limit`.
    pub fn next_gap(&self, from: u64, limit: u64) -> Option<(u64, u64)> {
        let mut pos = from;
        let i = self.ranges.partition_point(|r| r.1 <= pos);
        for r in &self.ranges[i..] {
            if pos >= limit {
                return None;
            }
            if r.0 > pos {
                return Some((pos, r.0.min(limit)));
            }
            pos = pos.max(r.1);
        }
        (pos < limit).then_some((pos, limit))
    }

    /// The lowest sequence above which at least `bytes` are covered (RFC 6675's IsLost boundary):
    /// holes below it have `bytes` of SACKed data above them.
    pub fn boundary_with_above(&self, bytes: u64) -> Option<u64> {
        let mut acc = 0;
        for r in self.ranges.iter().rev() {
            let need = bytes - acc;
            if r.1 - r.0 >= need {
                return Some(r.1 - need);
            }
            acc += r.1 - r.0;
        }
        None
    }

    /// The range containing `seq`, if any.
    pub fn containing(&self, seq: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|r| r.1 <= seq);
        self.ranges.get(i).copied().filter(|r| r.0 <= seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_counts_new_bytes() {
        let mut s = RangeSet::default();
        assert_eq!(s.insert(10, 20), 10);
        assert_eq!(s.insert(30, 40), 10);
        assert_eq!(s.insert(15, 35), 10);
        assert_eq!(s.ranges(), &[(10, 40)]);
        assert_eq!(s.insert(40, 50), 10, "adjacent ranges merge");
        assert_eq!(s.ranges(), &[(10, 50)]);
        assert_eq!(s.bytes(), 40);
        assert_eq!(s.insert(0, 100), 60);
        assert_eq!(s.bytes(), 100);
    }

    #[test]
    fn remove_gap_and_boundary() {
        let mut s = RangeSet::default();
        s.insert(10, 20);
        s.insert(30, 40);
        s.insert(50, 60);
        assert_eq!(s.bytes_in(15, 55), 5 + 10 + 5);
        assert_eq!(s.next_gap(0, 100), Some((0, 10)));
        assert_eq!(s.next_gap(10, 100), Some((20, 30)));
        assert_eq!(s.next_gap(60, 100), Some((60, 100)));
        assert_eq!(s.next_gap(20, 25), Some((20, 25)));
        assert_eq!(s.next_gap(55, 58), None);
        // 15 bytes above 35: the boundary sits 5 bytes into (30, 40).
        assert_eq!(s.boundary_with_above(15), Some(35));
        assert_eq!(s.boundary_with_above(20), Some(30));
        assert_eq!(s.boundary_with_above(31), None);
        assert_eq!(s.remove_below(35), 10 + 5);
        assert_eq!(s.ranges(), &[(35, 40), (50, 60)]);
        assert_eq!(s.bytes(), 15);
        assert_eq!(s.take_at(35), Some(40));
        assert_eq!(s.take_at(45), None);
    }

    #[test]
    fn remove_cuts_inside_and_across_ranges() {
        let mut s = RangeSet::default();
        s.insert(10, 20);
        s.insert(30, 40);
        s.insert(50, 60);
        assert_eq!(s.remove(12, 14), 2);
        assert_eq!(s.ranges(), &[(10, 12), (14, 20), (30, 40), (50, 60)]);
        assert_eq!(s.remove(15, 55), 5 + 10 + 5);
        assert_eq!(s.ranges(), &[(10, 12), (14, 15), (55, 60)]);
        assert_eq!(s.remove(20, 50), 0);
        assert_eq!(s.remove(0, 100), 2 + 1 + 5);
        assert!(s.is_empty() && s.bytes() == 0);
    }
}
