//! FCT and slowdown by flow-size bucket (`fct_buckets.csv`), overall and per class.
//!
//! By default the buckets hold equal numbers of flows: sorted by size, each bucket is the next 5%
//! of completed flows, as the HPCC simulator's analysis script groups them, so tables compare.
//! Explicit byte edges can be given instead.

use super::percentile;
use crate::world::World;
use std::io::{self, Write};

/// The header of `fct_buckets.csv`.
pub const FCT_BUCKETS_HEADER: &str = "class,bucket_lo_bytes,bucket_hi_bytes,count,fct_mean_ns,fct_p50_ns,fct_p99_ns,\
slowdown_mean,slowdown_p50,slowdown_p95,slowdown_p99,slowdown_p999";

pub use crate::world::Bucketing;

/// One completed flow as bucketing sees it: size, FCT in ns, slowdown.
type Done = (u64, f64, f64);

/// Writes the table: rows for "all" then each class with completed flows.
pub fn write_fct_buckets_csv(world: &World, how: &Bucketing, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{FCT_BUCKETS_HEADER}")?;
    let done = |class: Option<usize>| -> Vec<Done> {
        let mut v: Vec<Done> = world
            .flows()
            .iter()
            .filter(|f| class.is_none_or(|c| f.class as usize == c))
            .filter_map(|f| {
                let (size, end) = (f.size?, f.finish?);
                let fct = (end - f.start).0 as f64 / 1e3;
                Some((size, fct, (fct * 1e3 / f.ideal_fct.0.max(1) as f64).max(1.0)))
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        v
    };
    write_rows(out, "all", &done(None), how)?;
    for (i, c) in world.classes().iter().enumerate() {
        let d = done(Some(i));
        if !d.is_empty() {
            write_rows(out, &c.name, &d, how)?;
        }
    }
    Ok(())
}

/// Splits size-sorted flows into buckets and writes one row per non-empty bucket.
fn write_rows(out: &mut dyn Write, class: &str, flows: &[Done], how: &Bucketing) -> io::Result<()> {
    let groups: Vec<(u64, u64, &[Done])> = match how {
        Bucketing::Percent(step) => {
            let n = flows.len();
            let mut v = Vec::new();
            let mut lo_pct = 0.0;
            while lo_pct < 100.0 - 1e-9 {
                let hi_pct = (lo_pct + step).min(100.0);
                let (a, b) = ((lo_pct / 100.0 * n as f64) as usize, (hi_pct / 100.0 * n as f64) as usize);
                if b > a {
                    let lo = if a == 0 { 0 } else { flows[a - 1].0 };
                    v.push((lo, flows[b - 1].0, &flows[a..b]));
                }
                lo_pct = hi_pct;
            }
            v
        }
        Bucketing::Edges(edges) => {
            let mut v = Vec::new();
            let mut lo = 0u64;
            let mut start = 0;
            for &hi in edges.iter().chain(std::iter::once(&u64::MAX)) {
                let end = start + flows[start..].partition_point(|f| f.0 <= hi);
                if end > start {
                    v.push((lo, hi, &flows[start..end]));
                }
                (lo, start) = (hi, end);
            }
            v
        }
    };
    for (lo, hi, g) in groups {
        let mut fct: Vec<f64> = g.iter().map(|f| f.1).collect();
        let mut sd: Vec<f64> = g.iter().map(|f| f.2).collect();
        fct.sort_by(f64::total_cmp);
        sd.sort_by(f64::total_cmp);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let hi = if hi == u64::MAX { String::new() } else { hi.to_string() };
        writeln!(
            out,
            "{class},{lo},{hi},{},{:.1},{:.1},{:.1},{:.4},{:.4},{:.4},{:.4},{:.4}",
            g.len(),
            mean(&fct),
            percentile(&fct, 50.0),
            percentile(&fct, 99.0),
            mean(&sd),
            percentile(&sd, 50.0),
            percentile(&sd, 95.0),
            percentile(&sd, 99.0),
            percentile(&sd, 99.9)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(flows: &[Done], how: &Bucketing) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        write_rows(&mut out, "all", flows, how).unwrap();
        String::from_utf8(out).unwrap().lines().map(|l| l.split(',').map(String::from).collect()).collect()
    }

    #[test]
    fn percent_buckets_hold_equal_counts_in_size_order() {
        let flows: Vec<Done> = (1..=100).map(|i| (i * 1000, i as f64, 1.0 + i as f64 / 100.0)).collect();
        let r = rows(&flows, &Bucketing::Percent(5.0));
        assert_eq!(r.len(), 20);
        assert!(r.iter().all(|row| row[3] == "5"));
        assert_eq!((r[0][1].as_str(), r[0][2].as_str()), ("0", "5000"));
        assert_eq!((r[19][1].as_str(), r[19][2].as_str()), ("95000", "100000"));
        // The last bucket's p50 slowdown is that of its 3rd of 5 flows (98 KB).
        assert_eq!(r[19][8], "1.9800");
    }

    #[test]
    fn edge_buckets_split_at_inclusive_upper_edges() {
        let flows: Vec<Done> = [100u64, 1000, 1001, 50_000, 2_000_000].iter().map(|&s| (s, 1.0, 1.0)).collect();
        let r = rows(&flows, &Bucketing::Edges(vec![1000, 100_000]));
        let counts: Vec<&str> = r.iter().map(|row| row[3].as_str()).collect();
        assert_eq!(counts, ["2", "2", "1"]);
        assert_eq!(r[2][2], "", "the last bucket is open-ended");
    }
}
