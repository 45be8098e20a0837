//! Per-token submission rates: a token bucket per token (refilled at
//! `Limits::submissions_per_second`, holding at most `Limits::submission_burst`), in this
//! process's memory. Several server processes on one store each apply the rate: the bound is
//! per process, which is what protects each process's writer; the per-project quota on waiting
//! runs (checked against the store) is the bound across processes.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

use crate::config::Limits;

/// The buckets, by token id. A request of a token seen before takes the map's lock shared and
/// only its own bucket's lock: requests of different tokens do not wait for each other (those
/// of one token do, briefly, which is what keeps its bucket exact). A token's first request
/// takes the map exclusively, to add its bucket.
#[derive(Default)]
pub struct SubmissionRate {
    buckets: RwLock<HashMap<String, Mutex<Bucket>>>,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at_ms: i64,
}

impl Bucket {
    /// Refill for the time since the last take, then take one if there is one.
    fn take(&mut self, rate: f64, burst: f64, now_ms: i64) -> Result<(), u64> {
        let elapsed = (now_ms - self.at_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.at_ms = now_ms.max(self.at_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - self.tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

impl SubmissionRate {
    /// Takes one submission from `token`'s bucket at `now_ms`: `Ok` if there was one, else
    /// `Err(seconds)` until there will be.
    pub fn take(&self, limits: &Limits, token: &str, now_ms: i64) -> Result<(), u64> {
        let rate = limits.submissions_per_second;
        if rate <= 0.0 {
            return Ok(());
        }
        let burst = f64::from(limits.submission_burst.max(1));
        {
            let buckets = self.buckets.read().unwrap_or_else(|p| p.into_inner());
            if let Some(b) = buckets.get(token) {
                return b.lock().unwrap_or_else(|p| p.into_inner()).take(rate, burst, now_ms);
            }
        }
        let mut buckets = self.buckets.write().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > 100_000 {
            // Idle buckets are full; forgetting them changes nothing.
            buckets.retain(|_, b| {
                let b = b.get_mut().unwrap_or_else(|p| p.into_inner());
                (now_ms - b.at_ms) as f64 / 1000.0 * rate < burst
            });
        }
        // Another request of the same token may have added it since the shared lock was let go.
        let b = buckets
            .entry(token.to_string())
            .or_insert_with(|| Mutex::new(Bucket { tokens: burst, at_ms: now_ms }));
        b.get_mut().unwrap_or_else(|p| p.into_inner()).take(rate, burst, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let limits = Limits { submissions_per_second: 2.0, submission_burst: 3, ..Limits::default() };
        let r = SubmissionRate::default();
        for _ in 0..3 {
            assert_eq!(r.take(&limits, "a", 0), Ok(()));
        }
        assert_eq!(r.take(&limits, "a", 0), Err(1));
        // Another token has its own bucket.
        assert_eq!(r.take(&limits, "b", 0), Ok(()));
        // Half a second later one more (2 per second).
        assert_eq!(r.take(&limits, "a", 500), Ok(()));
        assert!(r.take(&limits, "a", 500).is_err());
        // A long pause refills only up to the burst.
        for _ in 0..3 {
            assert_eq!(r.take(&limits, "a", 60_000), Ok(()));
        }
        assert!(r.take(&limits, "a", 60_000).is_err());
    }

    #[test]
    fn concurrent_takes_of_many_tokens_each_get_exactly_their_burst() {
        // 8 threads × 8 tokens, each thread taking 50 times from every token at one instant:
        // each token has 400 attempts against a burst of 20 and no refill, so exactly 20 pass
        // per token however the threads interleave (a lost update would let more through).
        let limits = Limits { submissions_per_second: 1.0, submission_burst: 20, ..Limits::default() };
        let r = SubmissionRate::default();
        let tokens: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
        let passed: Vec<usize> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        let mut ok = vec![0usize; tokens.len()];
                        for _ in 0..50 {
                            for (i, t) in tokens.iter().enumerate() {
                                if r.take(&limits, t, 1_000).is_ok() {
                                    ok[i] += 1;
                                }
                            }
                        }
                        ok
                    })
                })
                .collect();
            let mut sum = vec![0usize; tokens.len()];
            for h in handles {
                for (i, n) in h.join().expect("a taking thread").into_iter().enumerate() {
                    sum[i] += n;
                }
            }
            sum
        });
        assert_eq!(passed, vec![20; 8]);
        // A token never seen before still starts with a full bucket of its own.
        assert_eq!(r.take(&limits, "fresh", 1_000), Ok(()));
        // And one over its burst waits a second for the next (1 per second).
        assert_eq!(r.take(&limits, "t0", 1_000), Err(1));
    }

    #[test]
    fn zero_means_no_limit() {
        let limits = Limits { submissions_per_second: 0.0, ..Limits::default() };
        let r = SubmissionRate::default();
        for _ in 0..10_000 {
            assert_eq!(r.take(&limits, "a", 0), Ok(()));
        }
    }
}
