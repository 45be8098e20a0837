//! Backoff for the retries weir-commit makes itself (ListMultipartUploads); object_store's
//! client does the same for every other request.

use std::time::Duration;

use crate::config::RetrySettings;

/// The wait before retry `n` (1-based): a random time up to `init × 2^(n-1)`, capped at the
/// maximum ("full jitter": concurrent clients that failed together do not retry together).
pub(crate) fn delay(settings: &RetrySettings, n: usize) -> Duration {
    let exp = settings.init_backoff_ms.saturating_mul(1u64 << (n.saturating_sub(1)).min(30));
    let cap = exp.min(settings.max_backoff_ms).max(1);
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("the OS random source works");
    Duration::from_millis(u64::from_le_bytes(b) % (cap + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_under_the_cap() {
        let s =
            RetrySettings { max_retries: 5, init_backoff_ms: 10, max_backoff_ms: 50, retry_timeout_ms: 1 };
        for n in 1..40 {
            let bound = (10u64 << (n - 1).min(30)).min(50);
            assert!(delay(&s, n) <= Duration::from_millis(bound), "retry {n}");
        }
    }
}
