//! Empirical flow-size distributions read from `.cdf` files (`<bytes> <cumulative percent>` per line).

/// The expected form of one point line, quoted in errors.
const POINT_FORM: &str = "`<bytes> <cumulative percent 0-100>`";

/// An empirical flow-size distribution.
#[derive(Clone, Debug)]
pub struct Cdf {
    /// (bytes, cumulative probability 0..1); sizes and probabilities non-decreasing, the last probability 1.
    points: Vec<(f64, f64)>,
}

impl Cdf {
    /// Parses the text of a CDF file; `name` appears in errors (e.g. `websearch.cdf line 7: cumulative percent 95 is below the previous 97; a CDF must be non-decreasing`).
    pub fn parse(text: &str, name: &str) -> Result<Cdf, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        // The previous point's tokens as written, so errors quote the file rather than a reformatted float.
        let mut prev: Option<(f64, f64, &str, &str, usize)> = None;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |msg: String| format!("{name} line {line_no}: {msg}");
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() != 2 {
                return Err(err(format!(
                    "expected 2 fields {POINT_FORM}, got {} (\"{line}\")",
                    fields.len()
                )));
            }
            let (size_s, pct_s) = (fields[0], fields[1]);
            let size = parse_number(size_s).ok_or_else(|| {
                err(format!(
                    "size \"{size_s}\" is not a number; expected {POINT_FORM}"
                ))
            })?;
            if size < 0.0 {
                return Err(err(format!(
                    "size {size_s} is negative; expected a number of bytes >= 0"
                )));
            }
            let largest = crate::time::Bytes::INPUT_MAX.0 as f64;
            if size > largest {
                return Err(err(format!(
                    "size {size_s} is above the largest that works, {largest:.0} bytes (1PB)"
                )));
            }
            let pct = parse_number(pct_s).ok_or_else(|| {
                err(format!(
                    "cumulative percent \"{pct_s}\" is not a number; expected {POINT_FORM}"
                ))
            })?;
            if !(0.0..=100.0).contains(&pct) {
                return Err(err(format!(
                    "cumulative percent {pct_s} is outside 0-100; expected {POINT_FORM}"
                )));
            }
            if let Some((psize, ppct, psize_s, ppct_s, _)) = prev {
                if size < psize {
                    return Err(err(format!(
                        "size {size_s} is below the previous {psize_s}; sizes in a CDF must be non-decreasing"
                    )));
                }
                if pct < ppct {
                    return Err(err(format!(
                        "cumulative percent {pct_s} is below the previous {ppct_s}; a CDF must be non-decreasing"
                    )));
                }
            }
            points.push((size, pct / 100.0));
            prev = Some((size, pct, size_s, pct_s, line_no));
        }
        match prev {
            None => Err(format!(
                "{name} line 1: no points; expected one point a line, {POINT_FORM}, ending at 100 percent"
            )),
            Some((_, pct, _, pct_s, line_no)) if pct != 100.0 => Err(format!(
                "{name} line {line_no}: the last cumulative percent is {pct_s}; a CDF must end at exactly 100"
            )),
            Some(_) => Ok(Cdf { points }),
        }
    }

    /// Draws a size (at least 1 byte) from a uniform u in [0,1).
    pub fn sample_with(&self, u: f64) -> u64 {
        // A zero-byte flow would never complete, so the smallest draw is one byte.
        self.value_at(u).round().max(1.0) as u64
    }

    /// Draws a size using rng.
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.sample_with(rng.gen::<f64>())
    }

    /// The exact mean of the interpolated distribution.
    pub fn mean(&self) -> f64 {
        // Probability below the first point is a point mass at the first size; each
        // interpolated segment is uniform, so it contributes its midpoint times its mass.
        let (x0, p0) = self.points[0];
        let mut sum = x0 * p0;
        for w in self.points.windows(2) {
            let ((a, p), (b, q)) = (w[0], w[1]);
            sum += (a + b) / 2.0 * (q - p);
        }
        sum
    }

    /// Size at cumulative probability q (0..=1), e.g. for percentile bucket edges.
    pub fn quantile(&self, q: f64) -> u64 {
        // Unlike `sample_with`, no 1-byte floor: a bucket edge at 0 bytes is meaningful.
        self.value_at(q).round().max(0.0) as u64
    }

    /// Interpolated size at cumulative probability `q`, clamped into [0,1].
    fn value_at(&self, q: f64) -> f64 {
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        // First point whose cumulative probability exceeds q; q lies in the segment ending there.
        let i = self.points.partition_point(|&(_, p)| p <= q);
        if i == 0 {
            return self.points[0].0;
        }
        if i == self.points.len() {
            return self.points[i - 1].0;
        }
        let ((x0, p0), (x1, p1)) = (self.points[i - 1], self.points[i]);
        // p1 > q >= p0, so the division is safe.
        x0 + (x1 - x0) * (q - p0) / (p1 - p0)
    }
}

/// The distributions bundled with sluice, by the name a scenario uses (see data/workloads/README.md).
pub const BUNDLED: [(&str, &str); 4] = [
    ("websearch", include_str!("../../../../data/workloads/websearch.cdf")),
    ("fb_hadoop", include_str!("../../../../data/workloads/fb_hadoop.cdf")),
    ("ali_storage", include_str!("../../../../data/workloads/ali_storage.cdf")),
    ("google_rpc", include_str!("../../../../data/workloads/google_rpc.cdf")),
];

/// Resolves a bundled name ("websearch") or a CDF file path relative to `base_dir`.
pub fn resolve(spec: &str, base_dir: &std::path::Path) -> Result<Cdf, String> {
    if let Some((name, text)) = BUNDLED.iter().find(|(n, _)| *n == spec) {
        return Cdf::parse(text, &format!("{name}.cdf"));
    }
    let path = base_dir.join(spec);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let names: Vec<&str> = BUNDLED.iter().map(|b| b.0).collect();
        format!("cannot read CDF \"{}\": {e}; expected a bundled name ({}) or a file of `<bytes> <cumulative percent>` lines", path.display(), names.join(", "))
    })?;
    Cdf::parse(&text, &path.display().to_string())
}

/// Parses a finite decimal number; rejects "inf" and "NaN", which `f64::from_str` would accept.
fn parse_number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    const PUBLISHED_MEANS: [(&str, &str, f64); 4] = [
        (
            "websearch.cdf",
            include_str!("../../../../data/workloads/websearch.cdf"),
            1_711_250.0,
        ),
        (
            "fb_hadoop.cdf",
            include_str!("../../../../data/workloads/fb_hadoop.cdf"),
            120_421.0,
        ),
        (
            "ali_storage.cdf",
            include_str!("../../../../data/workloads/ali_storage.cdf"),
            40_870.0,
        ),
        (
            "google_rpc.cdf",
            include_str!("../../../../data/workloads/google_rpc.cdf"),
            2_892.0,
        ),
    ];

    #[test]
    fn bundled_means_match_published() {
        for (name, text, published) in PUBLISHED_MEANS {
            let cdf = Cdf::parse(text, name).unwrap();
            let m = cdf.mean();
            assert!(
                (m - published).abs() / published < 0.005,
                "{name}: mean {m} vs published {published}"
            );
        }
    }

    /// Standard deviation of the interpolated distribution (uniform within each segment).
    fn std_dev(cdf: &Cdf) -> f64 {
        let (x0, p0) = cdf.points[0];
        let mut m2 = x0 * x0 * p0;
        for w in cdf.points.windows(2) {
            let ((a, p), (b, q)) = (w[0], w[1]);
            m2 += (a * a + a * b + b * b) / 3.0 * (q - p);
        }
        (m2 - cdf.mean() * cdf.mean()).sqrt()
    }

    const N: usize = 100_000;

    #[test]
    fn bundled_stratified_sample_means_match_published() {
        // One seeded draw in each of N equal probability strata: this checks the sampler
        // against the published mean without the heavy tails' sampling noise.
        for (name, text, published) in PUBLISHED_MEANS {
            let cdf = Cdf::parse(text, name).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5eed);
            let total: f64 = (0..N)
                .map(|i| cdf.sample_with((i as f64 + rng.gen::<f64>()) / N as f64) as f64)
                .sum();
            let m = total / N as f64;
            assert!(
                (m - published).abs() / published < 0.02,
                "{name}: sample mean {m} vs published {published}"
            );
        }
    }

    #[test]
    fn bundled_iid_sample_means_match_published() {
        // Independent draws: google_rpc's tail (0.001% of flows up to 15 MB) gives its
        // 100,000-draw mean a standard error near 7%, so the bound is 2% or 5 standard
        // errors, whichever is wider.
        for (name, text, published) in PUBLISHED_MEANS {
            let cdf = Cdf::parse(text, name).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5eed);
            let total: f64 = (0..N).map(|_| cdf.sample(&mut rng) as f64).sum();
            let m = total / N as f64;
            let tol = (0.02f64).max(5.0 * std_dev(&cdf) / published / (N as f64).sqrt());
            assert!(
                (m - published).abs() / published < tol,
                "{name}: sample mean {m} vs published {published}"
            );
        }
    }

    #[test]
    fn interpolates_between_points() {
        let cdf = Cdf::parse("0 0\n100 50\n300 100\n", "t.cdf").unwrap();
        assert_eq!(cdf.sample_with(0.25), 50);
        assert_eq!(cdf.sample_with(0.75), 200);
        assert_eq!(cdf.sample_with(0.0), 1);
        assert_eq!(cdf.quantile(0.0), 0);
        assert_eq!(cdf.quantile(0.5), 100);
        assert_eq!(cdf.quantile(1.0), 300);
        assert_eq!(cdf.mean(), 0.5 * 50.0 + 0.5 * 200.0);
        // Out-of-range draws clamp instead of panicking.
        assert_eq!(cdf.sample_with(1.5), 300);
        assert_eq!(cdf.sample_with(f64::NAN), 1);
    }

    #[test]
    fn mass_below_first_point_sits_at_first_size() {
        let cdf = Cdf::parse("# comment\n\n1000 40\n2000 100\n", "t.cdf").unwrap();
        assert_eq!(cdf.sample_with(0.1), 1000);
        assert_eq!(cdf.sample_with(0.7), 1500);
        assert!((cdf.mean() - (0.4 * 1000.0 + 0.6 * 1500.0)).abs() < 1e-9);
    }

    #[test]
    fn flat_and_vertical_segments() {
        // A repeated size is a step (point mass); a repeated percent is a zero-mass gap.
        let cdf = Cdf::parse("0 0\n100 0\n100 50\n200 50\n400 100\n", "t.cdf").unwrap();
        assert_eq!(cdf.sample_with(0.3), 100);
        assert_eq!(cdf.sample_with(0.75), 300);
        assert!((cdf.mean() - (0.5 * 100.0 + 0.5 * 300.0)).abs() < 1e-9);
    }

    fn expect_err(text: &str, line: usize, needle: &str) {
        let e = Cdf::parse(text, "bad.cdf").unwrap_err();
        assert!(
            e.starts_with(&format!("bad.cdf line {line}: ")),
            "wrong line in: {e}"
        );
        assert!(e.contains(needle), "missing {needle:?} in: {e}");
    }

    #[test]
    fn rejects_malformed_files() {
        expect_err(
            "0 0\n100 97\n200 95\n300 100\n",
            3,
            "cumulative percent 95 is below the previous 97",
        );
        expect_err(
            "0 0\n200 50\n100 60\n300 100\n",
            3,
            "size 100 is below the previous 200",
        );
        expect_err("0 0\n# c\n100 101\n", 3, "outside 0-100");
        expect_err("0 -1\n100 100\n", 1, "outside 0-100");
        expect_err("0 0\n-5 10\n100 100\n", 2, "negative");
        expect_err("", 1, "no points");
        expect_err("# only a comment\n\n", 1, "no points");
        expect_err("0 0\n1k 50\n2000 100\n", 2, "\"1k\" is not a number");
        expect_err("0 0\n1000 half\n2000 100\n", 2, "\"half\" is not a number");
        expect_err("0 0\n1000 inf\n", 2, "not a number");
        expect_err("0 0\n1000\n2000 100\n", 2, "expected 2 fields");
        expect_err("0 0\n1000 50 7\n2000 100\n", 2, "expected 2 fields");
        expect_err(
            "0 0\n1000 50\n2000 99.9\n\n# trailer\n",
            3,
            "last cumulative percent is 99.9",
        );
    }
}
