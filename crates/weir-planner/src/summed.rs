//! Cluster-level usage of a set of leaves: their usage summed at every moment, and the
//! percentile of that sum.
//!
//! Per-leaf percentiles assume the leaves' peaks never coincide; the capacity that tier-1 work
//! needs is the percentile of the tier-1 leaves' usage *added up over time*: nightly pipelines
//! that all peak at 2 am need the sum of their peaks, staggered ones need much less. The sum is
//! taken per resource (millicores, MiB) and then counted in instances by the dominant
//! resource, so two half-instance leaves running together need one instance, not two.
//!
//! The sweep merges the leaves' time-ordered intervals with a heap keyed by each leaf's next
//! change (start or end of an interval), so it needs no copy of the intervals and no sort:
//! O(n log k) for n intervals over k leaves.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;
use weir_model::Resources;

use crate::percentile::{instances_ceil, TimeHistogram};
use crate::usage::Interval;

/// One summed series over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SummedUsage {
    /// The percentile asked for.
    pub percentile: f64,
    /// The smallest whole number of instances covering `percentile`% of the time the summed
    /// usage was above zero.
    pub instances: u64,
    /// The most instances the sum reached.
    pub peak_instances: u64,
    /// Hours in which any of the leaves was in use.
    pub in_use_hours: f64,
    /// Σ of the leaves' own percentile allocations, for comparison (what per-leaf percentiles
    /// would need if every peak coincided).
    pub per_leaf_sum: u64,
}

/// What the sweep needs of one leaf: its intervals in time order and which sums it feeds.
pub(crate) struct Feed<'a> {
    pub intervals: &'a [Interval],
    /// Bit i set: the leaf counts in sum i.
    pub sums: u8,
}

/// Time histograms (instances of the summed usage) for up to 8 sums at once.
pub(crate) fn sweep(
    feeds: &[Feed],
    from: u64,
    to: u64,
    instance: &Resources,
    sums: usize,
) -> Vec<TimeHistogram> {
    let mut hist = vec![TimeHistogram::new(); sums];
    let mut cpu = vec![0u128; sums];
    let mut mem = vec![0u128; sums];
    // Per leaf: index of the interval at or after the cursor, and whether we are inside it.
    let mut at: Vec<(usize, bool)> = vec![(0, false); feeds.len()];
    let clip = |iv: &Interval| (iv.start.max(from), iv.end.min(to));
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::with_capacity(feeds.len());
    for (leaf, f) in feeds.iter().enumerate() {
        let first = f.intervals.iter().position(|iv| clip(iv).1 > clip(iv).0);
        if let Some(i) = first {
            at[leaf] = (i, false);
            heap.push(Reverse((clip(&f.intervals[i]).0, leaf)));
        }
    }
    let mut prev = from;
    while let Some(Reverse((t, leaf))) = heap.pop() {
        if t > prev {
            for s in 0..sums {
                if cpu[s] > 0 || mem[s] > 0 {
                    let c = u64::try_from(cpu[s]).unwrap_or(u64::MAX);
                    let m = u64::try_from(mem[s]).unwrap_or(u64::MAX);
                    hist[s].add(instances_ceil(c, m, instance), t - prev);
                }
            }
            prev = t;
        }
        let f = &feeds[leaf];
        let (i, inside) = at[leaf];
        let iv = &f.intervals[i];
        let sign_add = !inside;
        for s in 0..sums {
            if f.sums & (1 << s) != 0 {
                if sign_add {
                    cpu[s] += u128::from(iv.cpu);
                    mem[s] += u128::from(iv.memory);
                } else {
                    cpu[s] -= u128::from(iv.cpu);
                    mem[s] -= u128::from(iv.memory);
                }
            }
        }
        if sign_add {
            at[leaf] = (i, true);
            heap.push(Reverse((clip(iv).1, leaf)));
        } else {
            // The next interval with time left in the window (intervals of a leaf never overlap).
            let next = f.intervals[i + 1..].iter().position(|n| clip(n).1 > clip(n).0).map(|k| i + 1 + k);
            if let Some(n) = next {
                at[leaf] = (n, false);
                heap.push(Reverse((clip(&f.intervals[n]).0, leaf)));
            }
        }
    }
    hist
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTANCE: Resources = Resources::new(16_000, 65_536, 0);

    fn iv(start: u64, end: u64, cpu: u64, memory: u64) -> Interval {
        Interval { start, end, cpu, memory, running_apps: 1, line: 0 }
    }

    #[test]
    fn coinciding_peaks_add_up_and_staggered_ones_do_not() {
        // a: 4 instances 0–10, b: 4 instances 0–10 (together) then c: 4 instances 20–30 (alone).
        let a = [iv(0, 10, 64_000, 0)];
        let b = [iv(0, 10, 64_000, 0)];
        let c = [iv(20, 30, 64_000, 0)];
        let feeds = [
            Feed { intervals: &a, sums: 1 },
            Feed { intervals: &b, sums: 1 },
            Feed { intervals: &c, sums: 0b11 },
        ];
        let h = sweep(&feeds, 0, 100, &INSTANCE, 2);
        // Sum 0: 8 instances for 10 ms, 4 for 10 ms; in use 20 ms.
        assert_eq!((h[0].total(), h[0].max()), (20, 8));
        assert_eq!((h[0].percentile(50.0), h[0].percentile(51.0)), (4, 8));
        // Sum 1: c only.
        assert_eq!((h[1].total(), h[1].max()), (10, 4));
    }

    #[test]
    fn resources_add_before_counting_instances_and_the_window_clips() {
        // Two half-instance leaves at once are one instance; abutting intervals leave no gap.
        let a = [iv(0, 10, 8_000, 0), iv(10, 20, 8_000, 0)];
        let b = [iv(5, 15, 0, 32_768)];
        let feeds = [Feed { intervals: &a, sums: 1 }, Feed { intervals: &b, sums: 1 }];
        let h = sweep(&feeds, 2, 18, &INSTANCE, 1);
        assert_eq!(h[0].total(), 16);
        assert_eq!(h[0].max(), 1);
        let h = sweep(&feeds, 30, 40, &INSTANCE, 1);
        assert_eq!(h[0].total(), 0);
    }
}
