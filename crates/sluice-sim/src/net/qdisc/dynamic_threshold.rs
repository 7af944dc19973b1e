//! Drop-tail admission into a switch's shared buffer with Broadcom-style dynamic thresholds: a
//! queue may grow while it holds less than `alpha` times the buffer still free.

/// A switch's shared packet buffer.
#[derive(Clone, Debug)]
pub struct SharedBuffer {
    /// Total bytes.
    pub size: u64,
    /// Bytes held by all queues.
    pub used: u64,
    /// Dynamic-threshold factor.
    pub alpha: f64,
}

impl SharedBuffer {
    /// Whether a queue holding `queue_bytes` may take `len` more bytes.
    #[inline]
    pub fn admits(&self, queue_bytes: u64, len: u64) -> bool {
        let free = self.size.saturating_sub(self.used);
        len <= free && (queue_bytes + len) as f64 <= self.alpha * free as f64
    }

    /// Takes `len` bytes for an admitted packet.
    #[inline]
    pub fn take(&mut self, len: u64) {
        self.used += len;
    }

    /// Gives back `len` bytes when a packet leaves its queue.
    #[inline]
    pub fn give_back(&mut self, len: u64) {
        debug_assert!(self.used >= len, "buffer accounting: giving back {len} of {} bytes used", self.used);
        self.used -= len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_threshold_shrinks_as_buffer_fills() {
        let mut b = SharedBuffer { size: 1000, used: 0, alpha: 1.0 };
        assert!(b.admits(0, 500));
        assert!(!b.admits(0, 1001));
        b.take(600);
        assert!(b.admits(300, 100), "400 <= 1.0 * 400 free");
        assert!(!b.admits(301, 100));
        b.give_back(600);
        assert_eq!(b.used, 0);
    }
}
