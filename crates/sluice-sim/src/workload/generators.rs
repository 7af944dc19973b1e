//! Open-loop traffic generated up front: Poisson arrivals with empirical sizes, permutation,
//! all-to-all and Poisson incast events.

use super::{FlowSpec, SizeSource};
use crate::time::{Rate, Time};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Draws an exponential inter-arrival time with the given mean (for event processes whose count
/// is left to chance).
fn exp_gap(rng: &mut Xoshiro256PlusPlus, mean_s: f64) -> f64 {
    // 1 - u lies in (0, 1], so the logarithm is finite.
    -(1.0 - rng.gen::<f64>()).ln() * mean_s
}

/// Poisson flow arrivals at every source so that each offers `load` of its link rate: the arrival
/// rate is load x rate / mean flow size (payload bytes, as the HPCC traffic generator defines
/// load). Each flow goes to a uniformly chosen destination other than its source.
///
/// A short run of heavy-tailed traffic offers a load far from its target if counts and sizes are
/// both left to chance (10 ms of WebSearch at 64 hosts misses by 10% or more, one standard error).
/// So the generator fixes what it can without changing the traffic's distributions: each source
/// gets its expected number of arrivals (the fraction settled by a coin), placed at independent
/// uniform times in the window, which is a Poisson process conditioned on its count; and the
/// workload's sizes are one stratified sample of the CDF in random order, so every flow's size
/// still follows the CDF exactly while their mean matches it.
pub struct PoissonLoad<'a> {
    /// Source hosts, each with its link rate.
    pub sources: &'a [(usize, Rate)],
    /// Candidate destinations.
    pub destinations: &'a [usize],
    /// Flow sizes.
    pub sizes: &'a SizeSource,
    /// Target fraction of each source's link rate.
    pub load: f64,
    /// First possible arrival.
    pub start: Time,
    /// Arrivals happen in [start, start + duration).
    pub duration: Time,
}

impl PoissonLoad<'_> {
    /// The flows, in per-source order (the caller sorts by start).
    pub fn generate(&self, rng: &mut Xoshiro256PlusPlus) -> Vec<FlowSpec> {
        let mut out = Vec::new();
        let window = self.duration.secs_f64();
        for &(src, rate) in self.sources {
            let expected = self.load * rate.0 as f64 * window / (self.sizes.mean() * 8.0);
            let count = expected.floor() as usize + usize::from(rng.gen::<f64>() < expected.fract());
            let mut times: Vec<f64> = (0..count).map(|_| rng.gen::<f64>() * window).collect();
            times.sort_by(f64::total_cmp);
            for t in times {
                let dst = loop {
                    let d = *self.destinations.choose(rng).expect("destinations are validated non-empty");
                    if d != src {
                        break d;
                    }
                };
                let start = self.start + Time::from_secs_f64(t);
                out.push(FlowSpec { src, dst, size: None, start, ..FlowSpec::default() });
            }
        }
        let n = out.len();
        let mut strata: Vec<usize> = (0..n).collect();
        strata.shuffle(rng);
        for (f, k) in out.iter_mut().zip(strata) {
            f.size = Some(self.sizes.draw_at((k as f64 + rng.gen::<f64>()) / n as f64));
        }
        out
    }
}

/// A random permutation without fixed points: every host sends `size` to a distinct other host.
pub fn permutation(hosts: &[usize], size: u64, start: Time, rng: &mut Xoshiro256PlusPlus) -> Vec<FlowSpec> {
    // Sattolo's algorithm yields a single cycle, so nobody sends to itself.
    let mut target: Vec<usize> = hosts.to_vec();
    for i in (1..target.len()).rev() {
        let j = rng.gen_range(0..i);
        target.swap(i, j);
    }
    hosts
        .iter()
        .zip(&target)
        .map(|(&src, &dst)| FlowSpec { src, dst, size: Some(size), start, ..FlowSpec::default() })
        .collect()
}

/// Every ordered pair of distinct hosts exchanges `size` bytes.
pub fn all_to_all(hosts: &[usize], size: u64, start: Time) -> Vec<FlowSpec> {
    let mut out = Vec::with_capacity(hosts.len() * hosts.len().saturating_sub(1));
    for &src in hosts {
        for &dst in hosts {
            if src != dst {
                out.push(FlowSpec { src, dst, size: Some(size), start, ..FlowSpec::default() });
            }
        }
    }
    out
}

/// Poisson incast events: each event picks a receiver and `fan_in` distinct senders among
/// `hosts`, each sending `per_sender` flows of `size`; events arrive so that the receivers' links
/// carry `load` on average (rate per event = load x sum of receiver link rates / (fan_in x
/// per_sender x size x 8)).
#[allow(clippy::too_many_arguments)]
pub fn poisson_incast(
    hosts: &[(usize, Rate)],
    fan_in: usize,
    per_sender: usize,
    size: u64,
    load: f64,
    start: Time,
    duration: Time,
    rng: &mut Xoshiro256PlusPlus,
) -> Vec<FlowSpec> {
    let capacity: f64 = hosts.iter().map(|h| h.1 .0 as f64).sum();
    let gap = (fan_in as f64 * per_sender as f64 * size as f64 * 8.0) / (load * capacity);
    let end = start.secs_f64() + duration.secs_f64();
    let mut out = Vec::new();
    let mut t = start.secs_f64() + exp_gap(rng, gap);
    while t < end {
        let (receiver, _) = *hosts.choose(rng).expect("hosts are validated non-empty");
        let others: Vec<usize> = hosts.iter().map(|h| h.0).filter(|&h| h != receiver).collect();
        for &src in others.choose_multiple(rng, fan_in) {
            for _ in 0..per_sender {
                out.push(FlowSpec { src, dst: receiver, size: Some(size), start: Time::from_secs_f64(t), ..FlowSpec::default() });
            }
        }
        t += exp_gap(rng, gap);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn permutation_is_a_derangement_covering_every_host() {
        let hosts: Vec<usize> = (0..37).collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let flows = permutation(&hosts, 1000, Time::ZERO, &mut rng);
        let mut dsts: Vec<usize> = flows.iter().map(|f| f.dst).collect();
        assert!(flows.iter().all(|f| f.src != f.dst));
        dsts.sort();
        assert_eq!(dsts, hosts);
    }

    #[test]
    fn all_to_all_has_every_ordered_pair_once() {
        let flows = all_to_all(&[0, 1, 2, 3], 10, Time::ZERO);
        assert_eq!(flows.len(), 12);
        let mut pairs: Vec<(usize, usize)> = flows.iter().map(|f| (f.src, f.dst)).collect();
        pairs.dedup();
        assert_eq!(pairs.len(), 12);
    }

    #[test]
    fn poisson_incast_offers_its_load() {
        let hosts: Vec<(usize, Rate)> = (0..16).map(|h| (h, Rate(10_000_000_000))).collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let dur = Time::from_secs_f64(0.2);
        let flows = poisson_incast(&hosts, 8, 1, 64_000, 0.2, Time::ZERO, dur, &mut rng);
        let offered = flows.iter().map(|f| f.size.unwrap() as f64 * 8.0).sum::<f64>() / (0.2 * 16.0 * 1e10);
        // About 1250 events: the Poisson count's relative standard error is under 3%.
        assert!((offered - 0.2).abs() / 0.2 < 0.09, "offered {offered}");
        assert!(flows.chunks(8).all(|c| c.iter().all(|f| f.dst == c[0].dst && f.src != f.dst)));
    }
}

#[cfg(test)]
mod poisson_tests {
    use super::*;
    use crate::workload::cdf::{self, Cdf};
    use rand::SeedableRng;
    use std::sync::Arc;

    #[test]
    fn arrivals_are_uniform_in_the_window_with_exponential_gaps() {
        let sources = [(0usize, Rate(100_000_000_000))];
        let sizes = SizeSource::Fixed(10_000);
        let g = PoissonLoad {
            sources: &sources,
            destinations: &[1, 2, 3],
            sizes: &sizes,
            load: 0.5,
            start: Time::ZERO,
            duration: Time::from_secs_f64(0.1),
        };
        let flows = g.generate(&mut Xoshiro256PlusPlus::seed_from_u64(4));
        // 0.5 x 100 Gb/s x 0.1 s / 80 kbit = 62,500 arrivals.
        assert_eq!(flows.len(), 62_500);
        let gaps: Vec<f64> = flows.windows(2).map(|w| (w[1].start - w[0].start).secs_f64()).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        // An exponential's coefficient of variation is 1; a regular process's would be 0.
        assert!((sd / mean - 1.0).abs() < 0.03, "gap CV {}", sd / mean);
        assert!(flows.iter().all(|f| f.dst != 0));
    }

    #[test]
    fn stratified_sizes_keep_the_distribution() {
        let web = Arc::new(cdf::resolve("websearch", std::path::Path::new(".")).unwrap());
        let sizes = SizeSource::Cdf(web.clone());
        let sources: Vec<(usize, Rate)> = (0..8).map(|h| (h, Rate(10_000_000_000))).collect();
        let g = PoissonLoad {
            sources: &sources,
            destinations: &[0, 1, 2, 3, 4, 5, 6, 7],
            sizes: &sizes,
            load: 0.5,
            start: Time::ZERO,
            duration: Time::from_secs_f64(2.0),
        };
        let flows = g.generate(&mut Xoshiro256PlusPlus::seed_from_u64(5));
        let mut s: Vec<u64> = flows.iter().map(|f| f.size.unwrap()).collect();
        s.sort();
        // Each decile of the sample sits at the CDF's decile (within one stratum's width).
        for d in 1..10 {
            let q = Cdf::quantile(&web, d as f64 / 10.0) as f64;
            let got = s[s.len() * d / 10] as f64;
            assert!((got - q).abs() <= 0.01 * q + 1500.0, "decile {d}: {got} vs {q}");
        }
    }
}
