//! Seeded randomness. Every stream (a job run's task durations and failures, a workflow's
//! Poisson arrivals, node faults) has its own generator derived from the seed and the stream's
//! identity, so a draw in one stream never shifts another: two cluster layouts simulated with
//! the same seed give the same task their same duration (common random numbers), which keeps a
//! comparison between layouts about the layouts.

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution as _, Exp, LogNormal};
use rand_pcg::Pcg64Mcg;
use weir_model::Distribution;

pub(crate) type Rng = Pcg64Mcg;

/// The generator of one stream, named by a few integers.
pub(crate) fn stream(seed: u64, ids: &[u64]) -> Rng {
    let mut h = splitmix(seed ^ 0x6a09_e667_f3bc_c908);
    for &id in ids {
        h = splitmix(h ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    Rng::seed_from_u64(h)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One draw, in whole milliseconds, at least 1 (a task always takes some time).
pub(crate) fn duration_ms(d: &Distribution, rng: &mut Rng) -> u64 {
    let ms = match d {
        Distribution::Fixed(x) => x.as_millis(),
        Distribution::Uniform { min, max } => {
            let (lo, hi) = (min.as_millis(), max.as_millis().max(min.as_millis()));
            rng.random_range(lo..=hi)
        }
        Distribution::Exponential { mean } => match Exp::new(1.0 / (mean.as_millis().max(1) as f64)) {
            Ok(exp) => clamp_ms(exp.sample(rng)),
            Err(_) => mean.as_millis(),
        },
        Distribution::LogNormal { mu, sigma } => match LogNormal::new(*mu, *sigma) {
            Ok(ln) => clamp_ms(ln.sample(rng) * 1000.0),
            Err(_) => clamp_ms(mu.exp() * 1000.0),
        },
        Distribution::Empirical(samples) => match samples.len() {
            0 => 1,
            n => samples[rng.random_range(0..n)].as_millis(),
        },
    };
    ms.max(1)
}

/// Seconds or milliseconds as a float, rounded, kept within a century so sums cannot overflow.
fn clamp_ms(x: f64) -> u64 {
    const CENTURY_MS: f64 = 100.0 * 365.0 * 86_400_000.0;
    if x.is_finite() {
        x.round().clamp(1.0, CENTURY_MS) as u64
    } else {
        1
    }
}

/// Uniform in [0, 1).
pub(crate) fn unit(rng: &mut Rng) -> f64 {
    rng.random::<f64>()
}

/// An exponential gap with this mean, in milliseconds, at least 1.
pub(crate) fn exp_gap_ms(mean_ms: f64, rng: &mut Rng) -> u64 {
    match Exp::new(1.0 / mean_ms.max(1.0)) {
        Ok(exp) => clamp_ms(exp.sample(rng)),
        Err(_) => clamp_ms(mean_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::Duration;

    fn mean_of(d: &Distribution, n: usize) -> f64 {
        let mut rng = stream(7, &[1, 2]);
        (0..n).map(|_| duration_ms(d, &mut rng) as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn draws_follow_their_distributions() {
        let s = Duration::from_secs;
        assert_eq!(mean_of(&Distribution::Fixed(s(90)), 10), 90_000.0);
        let uni = mean_of(&Distribution::Uniform { min: s(30), max: s(90) }, 20_000);
        assert!((uni - 60_000.0).abs() < 1_000.0, "{uni}");
        let exp = mean_of(&Distribution::Exponential { mean: s(100) }, 50_000);
        assert!((exp - 100_000.0).abs() < 3_000.0, "{exp}");
        // Median 120 s, p99 600 s: the median of the draws is near 120 s.
        let ln = Distribution::LogNormal { mu: 120f64.ln(), sigma: (600f64.ln() - 120f64.ln()) / 2.326348 };
        let mut rng = stream(3, &[]);
        let mut draws: Vec<u64> = (0..20_001).map(|_| duration_ms(&ln, &mut rng)).collect();
        draws.sort_unstable();
        let median = draws[10_000] as f64;
        assert!((median - 120_000.0).abs() < 6_000.0, "{median}");
        let p99 = draws[19_800] as f64;
        assert!((p99 - 600_000.0).abs() < 60_000.0, "{p99}");
        let emp = Distribution::Empirical(vec![s(1), s(2), s(6)].into());
        let mut rng = stream(3, &[]);
        assert!((0..100).all(|_| [1000, 2000, 6000].contains(&duration_ms(&emp, &mut rng))));
    }

    #[test]
    fn streams_are_independent_and_reproducible() {
        let d = Distribution::Exponential { mean: Duration::from_secs(10) };
        let a: Vec<u64> = (0..5).map(|_| duration_ms(&d, &mut stream(1, &[4, 2]))).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "a fresh stream repeats its first draw");
        let mut x = stream(1, &[4, 2]);
        let mut y = stream(1, &[4, 3]);
        let xs: Vec<u64> = (0..8).map(|_| duration_ms(&d, &mut x)).collect();
        let ys: Vec<u64> = (0..8).map(|_| duration_ms(&d, &mut y)).collect();
        assert_ne!(xs, ys);
        assert!(xs.iter().all(|&v| v >= 1));
    }
}
