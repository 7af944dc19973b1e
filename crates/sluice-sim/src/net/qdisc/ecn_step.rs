//! DCTCP's step marking: CE on every ECN-capable packet that finds the queue above `k` bytes.

/// A step threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcnStep {
    /// Threshold in bytes.
    pub k: u64,
}

impl EcnStep {
    /// Whether a packet arriving to `queue_bytes` is marked.
    #[inline]
    pub fn marks(&self, queue_bytes: u64) -> bool {
        queue_bytes > self.k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_strictly_above_k() {
        let s = EcnStep { k: 1000 };
        assert!(!s.marks(1000));
        assert!(s.marks(1001));
    }
}
