//! Exact percentiles by nearest rank over sorted samples.

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// Mean and tail percentiles of a sample set. Over an empty set they are undefined: summary.json
/// shows them as `null` (never 0, which would read as a measured zero) beside `count` = 0.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Samples the figures are over.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// Nearest-rank percentile `p` (0-100] of ascending `sorted` samples; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // The small epsilon keeps 99.9% of 1000 at rank 999 despite binary rounding.
    let rank = (p * sorted.len() as f64 / 100.0 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Stats {
    /// Statistics of `values` (sorted in place).
    pub fn of(values: &mut [f64]) -> Stats {
        if values.is_empty() {
            return Stats::default();
        }
        values.sort_by(f64::total_cmp);
        Stats {
            count: values.len() as u64,
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50: percentile(values, 50.0),
            p95: percentile(values, 95.0),
            p99: percentile(values, 99.0),
            p999: percentile(values, 99.9),
        }
    }
}

impl Stats {
    /// The figures, or None over an empty set.
    pub fn defined(&self) -> Option<&Stats> {
        (self.count > 0).then_some(self)
    }
}

impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let defined = |x: f64| (self.count > 0).then_some(x);
        let mut st = s.serialize_struct("Stats", 6)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("mean", &defined(self.mean))?;
        st.serialize_field("p50", &defined(self.p50))?;
        st.serialize_field("p95", &defined(self.p95))?;
        st.serialize_field("p99", &defined(self.p99))?;
        st.serialize_field("p999", &defined(self.p999))?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut v: Vec<f64> = (1..=1000).rev().map(|x| x as f64).collect();
        let s = Stats::of(&mut v);
        assert_eq!((s.p50, s.p95, s.p99, s.p999), (500.0, 950.0, 990.0, 999.0));
        assert_eq!(s.mean, 500.5);
        assert_eq!(percentile(&[7.0], 99.9), 7.0);
        assert_eq!(Stats::of(&mut []), Stats::default());
    }

    #[test]
    fn statistics_over_nothing_are_null_not_zero() {
        let empty = serde_json::to_value(Stats::of(&mut [])).unwrap();
        assert_eq!(
            empty,
            serde_json::json!({"count": 0, "mean": null, "p50": null, "p95": null, "p99": null, "p999": null})
        );
        let one = serde_json::to_value(Stats::of(&mut [0.0])).unwrap();
        assert_eq!(one["mean"], 0.0, "a measured zero stays a number");
        assert_eq!(one["count"], 1);
    }
}
