//! Egress queues: strict-priority bands, shared-buffer admission with dynamic thresholds, and
//! ECN marking (DCTCP step threshold or RED).

use crate::packet::Packet;
use crate::time::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a switch decides to set CE on ECN-capable packets, from the egress queue length at enqueue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EcnMarking {
    /// Never mark.
    Off,
    /// Mark every packet that finds the queue above `k` bytes (DCTCP).
    Step {
        /// Threshold in bytes.
        k: u64,
    },
    /// RED on the instantaneous queue: probability rises linearly from 0 at `kmin` to `pmax` at `kmax`, 1 above.
    Red {
        /// Lower threshold in bytes.
        kmin: u64,
        /// Upper threshold in bytes.
        kmax: u64,
        /// Marking probability at `kmax`.
        pmax: f64,
    },
}

impl EcnMarking {
    /// Whether to mark a packet arriving to `queue_bytes`, given a uniform draw `u` in [0, 1).
    #[inline]
    pub fn should_mark(&self, queue_bytes: u64, u: impl FnOnce() -> f64) -> bool {
        match *self {
            EcnMarking::Off => false,
            EcnMarking::Step { k } => queue_bytes > k,
            EcnMarking::Red { kmin, kmax, pmax } => {
                if queue_bytes <= kmin {
                    false
                } else if queue_bytes > kmax {
                    true
                } else {
                    let p = pmax * (queue_bytes - kmin) as f64 / (kmax - kmin).max(1) as f64;
                    u() < p
                }
            }
        }
    }
}

/// The `ecn` keys of the `[switch]` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EcnConfig {
    /// "off", "step" (DCTCP) or "red".
    pub mode: String,
    /// Step threshold.
    pub k: Option<Bytes>,
    /// RED lower threshold.
    pub kmin: Option<Bytes>,
    /// RED upper threshold.
    pub kmax: Option<Bytes>,
    /// RED probability at kmax.
    pub pmax: Option<f64>,
    /// What happens to a packet that is not ECN-capable where an ECT one would be marked:
    /// "pass" (default: it is queued) or "drop" (RED's classic behaviour).
    pub non_ect: Option<String>,
}

impl EcnConfig {
    /// Whether non-ECT packets are dropped where ECT ones would be marked.
    pub fn drops_non_ect(&self, prefix: &str) -> Result<bool, String> {
        match self.non_ect.as_deref() {
            None | Some("pass") => Ok(false),
            Some("drop") => Ok(true),
            Some(v) => Err(format!("{prefix}.non_ect: expected \"pass\" or \"drop\", got \"{v}\"")),
        }
    }

    /// Validates and converts; errors name the key under `prefix`.
    pub fn marking(&self, prefix: &str) -> Result<EcnMarking, String> {
        let need = |v: Option<Bytes>, key: &str| v.map(|b| b.0).ok_or_else(|| format!("{prefix}.{key}: required for mode = \"{}\"", self.mode));
        let reject = |present: bool, key: &str| {
            if present {
                Err(format!("{prefix}.{key}: not used by mode = \"{}\"", self.mode))
            } else {
                Ok(())
            }
        };
        match self.mode.as_str() {
            // Thresholds may stay in place when marking is switched off (e.g. by --set).
            "off" | "" => Ok(EcnMarking::Off),
            "step" => {
                reject(self.kmin.is_some() || self.kmax.is_some() || self.pmax.is_some(), "kmin/kmax/pmax")?;
                Ok(EcnMarking::Step { k: need(self.k, "k")? })
            }
            "red" => {
                reject(self.k.is_some(), "k")?;
                let (kmin, kmax) = (need(self.kmin, "kmin")?, need(self.kmax, "kmax")?);
                let pmax = self.pmax.ok_or_else(|| format!("{prefix}.pmax: required for mode = \"red\""))?;
                if kmin >= kmax {
                    return Err(format!("{prefix}.kmin: expected kmin < kmax, got {kmin} >= {kmax} bytes"));
                }
                if !(pmax > 0.0 && pmax <= 1.0) {
                    return Err(format!("{prefix}.pmax: expected a probability in (0, 1], got {pmax}"));
                }
                Ok(EcnMarking::Red { kmin, kmax, pmax })
            }
            m => Err(format!("{prefix}.mode: expected \"off\", \"step\" or \"red\", got \"{m}\"")),
        }
    }
}

/// A switch's shared packet buffer with Broadcom-style dynamic thresholds: a queue may grow
/// while it holds less than `alpha` times the buffer still free.
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
}

/// Strict-priority bands of one egress port (band 0 is served first).
#[derive(Debug, Default)]
pub struct PortQueue {
    bands: Vec<VecDeque<Packet>>,
    band_bytes: Vec<u64>,
    bytes: u64,
}

impl PortQueue {
    /// A queue with `bands` priority levels.
    pub fn new(bands: usize) -> PortQueue {
        PortQueue { bands: (0..bands.max(1)).map(|_| VecDeque::new()).collect(), band_bytes: vec![0; bands.max(1)], bytes: 0 }
    }

    /// Bytes queued over all bands.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes queued in the band a packet of priority `prio` joins.
    #[inline]
    pub fn band_bytes(&self, prio: u8) -> u64 {
        self.band_bytes[self.band(prio)]
    }

    #[inline]
    fn band(&self, prio: u8) -> usize {
        (prio as usize).min(self.bands.len() - 1)
    }

    /// True when nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // Every packet occupies wire bytes, so the byte count alone tells.
        self.bytes == 0
    }

    /// Appends a packet to its band.
    #[inline]
    pub fn push(&mut self, p: Packet) {
        let b = self.band(p.prio);
        self.band_bytes[b] += p.wire_bytes as u64;
        self.bytes += p.wire_bytes as u64;
        self.bands[b].push_back(p);
    }

    /// Removes the head of the highest-priority non-empty band.
    #[inline]
    pub fn pop(&mut self) -> Option<Packet> {
        for (b, q) in self.bands.iter_mut().enumerate() {
            if let Some(p) = q.pop_front() {
                self.band_bytes[b] -= p.wire_bytes as u64;
                self.bytes -= p.wire_bytes as u64;
                return Some(p);
            }
        }
        None
    }

    /// Packets queued over all bands.
    pub fn len(&self) -> usize {
        self.bands.iter().map(|b| b.len()).sum()
    }

    /// Every queued packet, band by band (for end-of-run accounting).
    pub fn iter(&self) -> impl Iterator<Item = &Packet> {
        self.bands.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_priority_serves_band_zero_first() {
        let mut q = PortQueue::new(2);
        q.push(Packet { prio: 1, wire_bytes: 100, seq: 1, ..Packet::default() });
        q.push(Packet { prio: 0, wire_bytes: 50, seq: 2, ..Packet::default() });
        q.push(Packet { prio: 7, wire_bytes: 10, seq: 3, ..Packet::default() });
        assert_eq!(q.bytes(), 160);
        assert_eq!(q.band_bytes(1), 110, "priorities beyond the last band share it");
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|p| p.seq)).collect();
        assert_eq!(order, vec![2, 1, 3]);
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn dynamic_threshold_shrinks_as_buffer_fills() {
        let mut b = SharedBuffer { size: 1000, used: 0, alpha: 1.0 };
        assert!(b.admits(0, 500));
        assert!(!b.admits(0, 1001));
        b.used = 600;
        assert!(b.admits(300, 100), "400 <= 1.0 * 400 free");
        assert!(!b.admits(301, 100));
    }

    #[test]
    fn red_and_step_marking() {
        let step = EcnMarking::Step { k: 1000 };
        assert!(!step.should_mark(1000, || 0.0));
        assert!(step.should_mark(1001, || 0.0));
        let red = EcnMarking::Red { kmin: 100, kmax: 200, pmax: 0.5 };
        assert!(!red.should_mark(100, || 0.0));
        assert!(red.should_mark(150, || 0.24), "p = 0.25 at the midpoint");
        assert!(!red.should_mark(150, || 0.26));
        assert!(red.should_mark(201, || 0.99));
        let cfg = EcnConfig { mode: "red".into(), kmin: Some(Bytes(5)), kmax: Some(Bytes(5)), pmax: Some(0.1), k: None, non_ect: None };
        assert!(cfg.marking("switch.ecn").unwrap_err().contains("switch.ecn.kmin"));
    }
}
