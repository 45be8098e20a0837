//! Per-token submission rates: a token bucket per token (refilled at
//! `Limits::submissions_per_second`, holding at most `Limits::submission_burst`), in this
//! process's memory. Several server processes on one store each apply the rate: the bound is
//! per process, which is what protects each process's writer; the per-project quota on waiting
//! runs (checked against the store) is the bound across processes.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::config::Limits;

/// The buckets, by token id.
#[derive(Default)]
pub struct SubmissionRate {
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at_ms: i64,
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
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > 100_000 {
            // Idle buckets are full; forgetting them changes nothing.
            buckets.retain(|_, b| (now_ms - b.at_ms) as f64 / 1000.0 * rate < burst);
        }
        let b = buckets.entry(token.to_string()).or_insert(Bucket { tokens: burst, at_ms: now_ms });
        let elapsed = (now_ms - b.at_ms).max(0) as f64 / 1000.0;
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at_ms = now_ms.max(b.at_ms);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - b.tokens) / rate).ceil().max(1.0) as u64)
        }
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
    fn zero_means_no_limit() {
        let limits = Limits { submissions_per_second: 0.0, ..Limits::default() };
        let r = SubmissionRate::default();
        for _ in 0..10_000 {
            assert_eq!(r.take(&limits, "a", 0), Ok(()));
        }
    }
}
