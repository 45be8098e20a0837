//! The weighted water-fill behind every fair share, one resource at a time.
//!
//! YARN's Fair Scheduler (`ComputeFairShares`) finds a weight-to-resource ratio `R` such that
//! `Σ clamp(weight·R, min, max)` fills the pool. `Rounding::Yarn` reproduces it step for step —
//! doubling from 1, 25 bisection steps on integer-truncated sums, shares taken at the upper bound
//! — so weir's shares equal YARN's, including their habit of summing slightly above the pool.
//! `Rounding::Exact` makes the shares sum to the pool exactly (largest remainder).

use weir_model::Rounding;

/// One claimant on a pool: a queue among its siblings, or a job in its leaf.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Claim {
    pub weight: f64,
    pub min: u64,
    /// Already the effective max: at least `min`.
    pub max: u64,
    /// Only for instantaneous shares: an inactive claimant gets nothing.
    pub active: bool,
}

/// A weight as the scheduler holds it: YARN stores weights as Java floats, so under
/// `rounding: yarn` a weight is rounded to f32 first (weights 0.3 and 3 on 10,240 MiB give
/// YARN's 9,309 MiB, not the 9,310 of f64); `exact` keeps f64.
pub fn weight(w: f64, rounding: Rounding) -> f64 {
    match rounding {
        Rounding::Yarn => f64::from(w as f32),
        Rounding::Exact => w,
    }
}

const BISECTION_STEPS: usize = 25;
/// Doubling stops here even if the pool is not reached (weights near zero); never hit in practice.
const MAX_DOUBLINGS: usize = 1100;

/// Fill `out[i]` with the share of `claims[i]` in `pool`. `instantaneous` leaves inactive claims at 0.
pub fn compute(claims: &[Claim], pool: u64, rounding: Rounding, instantaneous: bool, out: &mut [u64]) {
    debug_assert_eq!(claims.len(), out.len());
    let mut taken: u64 = 0;
    let mut free_max: u64 = 0;
    let mut any_free = false;
    for (c, o) in claims.iter().zip(out.iter_mut()) {
        match fixed_share(c, instantaneous) {
            Some(s) => {
                *o = s;
                taken = taken.saturating_add(s);
            }
            None => {
                any_free = true;
                free_max = free_max.saturating_add(c.max);
            }
        }
    }
    if !any_free {
        return;
    }
    let pool = pool.saturating_sub(taken).min(free_max);
    let free = |i: usize| fixed_share(&claims[i], instantaneous).is_none();
    match rounding {
        Rounding::Yarn => yarn(claims, pool, &free, out),
        Rounding::Exact => exact(claims, pool, &free, out),
    }
}

/// YARN's "fixed" claimants: no max, inactive (instantaneous only), or no weight (gets its min).
fn fixed_share(c: &Claim, instantaneous: bool) -> Option<u64> {
    if c.max == 0 || (instantaneous && !c.active) {
        Some(0)
    } else if c.weight <= 0.0 {
        Some(c.min)
    } else {
        None
    }
}

fn share_at(c: &Claim, ratio: f64) -> u64 {
    let s = (c.weight * ratio).max(c.min as f64).min(c.max as f64);
    s as u64
}

/// Where the doubling of the ratio may start instead of 1, with the doublings that takes: the
/// largest power of two a step below pool / Σ weights that still leaves the pool unfilled.
/// The filled amount only grows with the ratio, so every smaller power leaves it unfilled too,
/// and doubling from here stops at the very power doubling from 1 would — in a few steps
/// instead of some thirty.
fn doubling_start(
    claims: &[Claim],
    free: &dyn Fn(usize) -> bool,
    pool: f64,
    unfilled: impl Fn(f64) -> bool,
) -> (f64, usize) {
    let weights: f64 = claims.iter().enumerate().filter(|&(i, _)| free(i)).map(|(_, c)| c.weight).sum();
    if weights > 0.0 && pool > 0.0 {
        let guess = (pool / weights).log2().floor() as i64 - 1;
        if (1..MAX_DOUBLINGS as i64).contains(&guess) {
            let start = 2f64.powi(guess as i32);
            if unfilled(start) {
                return (start, guess as usize);
            }
        }
    }
    (1.0, 0)
}

fn yarn(claims: &[Claim], pool: u64, free: &dyn Fn(usize) -> bool, out: &mut [u64]) {
    let used = |ratio: f64| -> u64 {
        let mut sum: u64 = 0;
        for (i, c) in claims.iter().enumerate() {
            if free(i) {
                sum = sum.saturating_add(share_at(c, ratio));
            }
        }
        sum
    };
    let (mut hi, mut doublings) = doubling_start(claims, free, pool as f64, |r| used(r) < pool);
    while used(hi) < pool && doublings < MAX_DOUBLINGS {
        hi *= 2.0;
        doublings += 1;
    }
    let mut lo = 0.0f64;
    for _ in 0..BISECTION_STEPS {
        let mid = (lo + hi) / 2.0;
        let planned = used(mid);
        if planned == pool {
            hi = mid;
            break;
        } else if planned < pool {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    for (i, c) in claims.iter().enumerate() {
        if free(i) {
            out[i] = share_at(c, hi);
        }
    }
}

fn exact(claims: &[Claim], pool: u64, free: &dyn Fn(usize) -> bool, out: &mut [u64]) {
    let real = |c: &Claim, ratio: f64| (c.weight * ratio).max(c.min as f64).min(c.max as f64);
    let used = |ratio: f64| -> f64 {
        claims.iter().enumerate().filter(|(i, _)| free(*i)).map(|(_, c)| real(c, ratio)).sum()
    };
    let target = pool as f64;
    let (mut hi, mut doublings) = doubling_start(claims, free, target, |r| used(r) < target);
    while used(hi) < target && doublings < MAX_DOUBLINGS {
        hi *= 2.0;
        doublings += 1;
    }
    let mut lo = 0.0f64;
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if used(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // Floor every share, then hand the units still missing to the largest remainders.
    let mut remainders: Vec<(f64, usize)> = Vec::new();
    let mut sum: u64 = 0;
    for (i, c) in claims.iter().enumerate() {
        if free(i) {
            let r = real(c, hi);
            let floor = (r as u64).clamp(c.min.min(c.max), c.max);
            out[i] = floor;
            sum = sum.saturating_add(floor);
            remainders.push((r - floor as f64, i));
        }
    }
    remainders.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut missing = pool.saturating_sub(sum);
    while missing > 0 {
        let mut progressed = false;
        for &(_, i) in &remainders {
            if missing == 0 {
                break;
            }
            if out[i] < claims[i].max {
                out[i] += 1;
                missing -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(weights: &[f64], mins: &[u64], maxes: &[u64]) -> Vec<Claim> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Claim {
                weight: w,
                min: mins.get(i).copied().unwrap_or(0),
                max: maxes.get(i).copied().unwrap_or(u64::MAX).max(mins.get(i).copied().unwrap_or(0)),
                active: true,
            })
            .collect()
    }

    fn check(c: &[Claim], pool: u64, rounding: Rounding, expected: &[u64]) {
        let mut out = vec![0; c.len()];
        compute(c, pool, rounding, false, &mut out);
        assert_eq!(out, expected, "pool {pool} {rounding:?} {c:?}");
    }

    #[test]
    fn yarn_examples() {
        check(&claims(&[1.0; 4], &[], &[]), 40, Rounding::Yarn, &[10, 10, 10, 10]);
        check(&claims(&[1.0; 4], &[], &[100, 50, 11, 3]), 40, Rounding::Yarn, &[13, 13, 11, 3]);
        check(&claims(&[2.0, 1.0, 1.0, 0.5], &[], &[]), 45, Rounding::Yarn, &[20, 10, 10, 5]);
        // Truncation at the upper bound: three equal claims on 10240 each get 3414 (sum 10242).
        check(&claims(&[1.0; 3], &[], &[]), 10240, Rounding::Yarn, &[3414, 3414, 3414]);
    }

    #[test]
    fn exact_sums_to_pool() {
        check(&claims(&[1.0; 3], &[], &[]), 10240, Rounding::Exact, &[3414, 3413, 3413]);
        check(&claims(&[1.0; 4], &[], &[100, 50, 11, 3]), 40, Rounding::Exact, &[13, 13, 11, 3]);
        check(&claims(&[2.0, 1.0, 1.0, 0.5], &[], &[]), 45, Rounding::Exact, &[20, 10, 10, 5]);
    }

    #[test]
    fn fixed_claims() {
        // max 0 -> 0; weight 0 -> its min; the rest split what is left.
        let mut c = claims(&[1.0, 0.0, 1.0], &[0, 7, 0], &[0, u64::MAX, u64::MAX]);
        c[0].max = 0;
        check(&c, 27, Rounding::Yarn, &[0, 7, 20]);
        let mut inactive = claims(&[1.0, 1.0], &[], &[]);
        inactive[1].active = false;
        let mut out = vec![0; 2];
        compute(&inactive, 100, Rounding::Yarn, true, &mut out);
        assert_eq!(out, vec![100, 0]);
        compute(&inactive, 100, Rounding::Yarn, false, &mut out);
        assert_eq!(out, vec![50, 50]);
    }

    #[test]
    fn mins_are_honoured() {
        check(&claims(&[1.0, 1.0], &[80, 0], &[]), 100, Rounding::Yarn, &[80, 20]);
        check(&claims(&[1.0, 1.0], &[80, 0], &[]), 100, Rounding::Exact, &[80, 20]);
    }

    #[test]
    fn pool_capped_by_maxes() {
        check(&claims(&[1.0, 1.0], &[], &[5, 5]), 100, Rounding::Yarn, &[5, 5]);
        check(&claims(&[1.0, 1.0], &[], &[5, 5]), 100, Rounding::Exact, &[5, 5]);
        check(&claims(&[1.0], &[], &[]), 0, Rounding::Yarn, &[0]);
    }

    /// YARN's search as written: doubling from 1, then the bisection. `compute` skips doublings
    /// that cannot reach the pool; the shares must not change.
    fn yarn_from_one(c: &[Claim], pool: u64) -> Vec<u64> {
        let used = |r: f64| c.iter().fold(0u64, |s, x| s.saturating_add(share_at(x, r)));
        let mut hi = 1.0f64;
        let mut n = 0;
        while used(hi) < pool && n < MAX_DOUBLINGS {
            hi *= 2.0;
            n += 1;
        }
        let mut lo = 0.0f64;
        for _ in 0..BISECTION_STEPS {
            let mid = (lo + hi) / 2.0;
            let planned = used(mid);
            if planned == pool {
                hi = mid;
                break;
            } else if planned < pool {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        c.iter().map(|x| share_at(x, hi)).collect()
    }

    #[test]
    fn skipping_doublings_gives_yarns_shares() {
        let mut x: u64 = 99;
        let mut next = |m: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for _ in 0..5_000 {
            let n = 1 + next(30) as usize;
            let c: Vec<Claim> = (0..n)
                .map(|_| {
                    let min = if next(3) == 0 { next(5_000) } else { 0 };
                    let max = if next(3) == 0 { min + next(100_000) } else { u64::MAX };
                    Claim { weight: (1 + next(80)) as f64 / 8.0, min, max, active: true }
                })
                .collect();
            let free_max = c.iter().fold(0u64, |a, x| a.saturating_add(x.max));
            let bits = 1 + next(40);
            let pool = next(1 << bits).min(free_max);
            let mut out = vec![0; n];
            compute(&c, pool, Rounding::Yarn, false, &mut out);
            assert_eq!(out, yarn_from_one(&c, pool), "pool {pool} {c:?}");
        }
    }
}
