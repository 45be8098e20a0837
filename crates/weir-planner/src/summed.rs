//! Cluster-level usage of a set of leaves: their usage summed at every moment, and the
//! percentile of that sum.
//!
//! Per-leaf percentiles assume the leaves' peaks never coincide; the capacity that tier-1 work
//! needs is the percentile of the tier-1 leaves' usage *added up over time*: nightly pipelines
//! that all peak at 2 am need the sum of their peaks, staggered ones need much less. The sum is
//! taken per resource (millicores, MiB) and then counted in instances by the dominant
//! resource, so two half-instance leaves running together need one instance, not two.
//!
//! The sweep turns each leaf's rows into changes of its usage and merges the leaves' changes by
//! time, a slice of the window at a time (so each slice's changes stay in cache), on scoped
//! threads: O(n log k) for n rows over k leaves.

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

/// Time histograms (instances of the summed usage) for up to 8 sums at once, the window cut
/// into slices swept on up to `threads` scoped threads (each slice also keeps the intervals it
/// touches close together in cache); the histograms add up, so the result does not depend on
/// the threads.
pub(crate) fn sweep_parallel(
    feeds: &[Feed],
    from: u64,
    to: u64,
    instance: &Resources,
    sums: usize,
    threads: usize,
) -> Vec<TimeHistogram> {
    let rows: usize = feeds.iter().map(|f| f.intervals.len()).sum();
    let slices = (rows / SLICE_ROWS).max(threads).max(1) as u64;
    let span = to.saturating_sub(from);
    let bounds: Vec<(u64, u64)> = (0..slices)
        .map(|k| (from + span * k / slices, from + span * (k + 1) / slices))
        .filter(|(a, b)| b > a)
        .collect();
    let per_thread = bounds.len().div_ceil(threads.max(1)).max(1);
    let parts: Vec<Vec<TimeHistogram>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bounds
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    let mut acc = vec![TimeHistogram::new(); sums];
                    for &(a, b) in chunk {
                        for (x, h) in acc.iter_mut().zip(sweep(feeds, a, b, instance, sums)) {
                            x.merge(&h);
                        }
                    }
                    acc
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let mut out = vec![TimeHistogram::new(); sums];
    for part in parts {
        for (x, h) in out.iter_mut().zip(part) {
            x.merge(&h);
        }
    }
    out
}

/// Rows per slice of the window in [`sweep_parallel`].
const SLICE_ROWS: usize = 1 << 18;

/// One change of a leaf's usage: at `time`, add `cpu` and `memory` to the sums in `sums`.
#[derive(Clone, Copy)]
struct Change {
    time: u64,
    cpu: i64,
    memory: i64,
    sums: u8,
}

/// Time histograms (instances of the summed usage) for up to 8 sums at once over [from, to).
///
/// Each leaf's rows, read in order, become changes of its usage (one per row when rows abut,
/// as most histories' do); the changes of all leaves are sorted by time — a stable sort of
/// already sorted runs, so merging is cheap — and swept once.
pub(crate) fn sweep(
    feeds: &[Feed],
    from: u64,
    to: u64,
    instance: &Resources,
    sums: usize,
) -> Vec<TimeHistogram> {
    let mut changes: Vec<Change> = Vec::new();
    let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    for f in feeds {
        let lo = f.intervals.partition_point(|iv| iv.end <= from);
        let hi = f.intervals.partition_point(|iv| iv.start < to);
        // The usage in force and where it ends.
        let mut held: Option<(u64, i64, i64)> = None;
        for iv in &f.intervals[lo..hi] {
            let (start, end) = (iv.start.max(from), iv.end.min(to));
            if end <= start {
                continue;
            }
            let (cpu, memory) = (signed(iv.cpu), signed(iv.memory));
            match held {
                Some((until, c, m)) if until == start => {
                    changes.push(Change { time: start, cpu: cpu - c, memory: memory - m, sums: f.sums });
                }
                Some((until, c, m)) => {
                    changes.push(Change { time: until, cpu: -c, memory: -m, sums: f.sums });
                    changes.push(Change { time: start, cpu, memory, sums: f.sums });
                }
                None => changes.push(Change { time: start, cpu, memory, sums: f.sums }),
            }
            held = Some((end, cpu, memory));
        }
        if let Some((until, c, m)) = held {
            changes.push(Change { time: until, cpu: -c, memory: -m, sums: f.sums });
        }
    }
    changes.sort_unstable_by_key(|c| c.time);
    let mut hist = vec![TimeHistogram::new(); sums];
    let mut cpu = vec![0i128; sums];
    let mut mem = vec![0i128; sums];
    let mut prev = from;
    for c in &changes {
        if c.time > prev {
            for s in 0..sums {
                if cpu[s] > 0 || mem[s] > 0 {
                    let to_u64 = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
                    hist[s].add(instances_ceil(to_u64(cpu[s]), to_u64(mem[s]), instance), c.time - prev);
                }
            }
            prev = c.time;
        }
        for s in 0..sums {
            if c.sums & (1 << s) != 0 {
                cpu[s] += i128::from(c.cpu);
                mem[s] += i128::from(c.memory);
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

    #[test]
    fn slices_and_threads_give_the_same_histogram() {
        let a: Vec<Interval> =
            (0..500u64).map(|i| iv(i * 7, i * 7 + 5, 1000 * (i % 40), 512 * (i % 13))).collect();
        let b: Vec<Interval> =
            (0..300u64).map(|i| iv(i * 11 + 3, i * 11 + 12, 16_000 * (i % 3), 0)).collect();
        let feeds = [Feed { intervals: &a, sums: 0b11 }, Feed { intervals: &b, sums: 0b10 }];
        let one = sweep(&feeds, 0, 4000, &INSTANCE, 2);
        for threads in [1, 2, 3] {
            assert_eq!(sweep_parallel(&feeds, 0, 4000, &INSTANCE, 2, threads), one, "{threads} threads");
        }
        // Cut into many slices, the sum is still the same.
        let mut acc = vec![TimeHistogram::new(); 2];
        for k in 0..37u64 {
            for (x, h) in acc.iter_mut().zip(sweep(&feeds, k * 4000 / 37, (k + 1) * 4000 / 37, &INSTANCE, 2))
            {
                x.merge(&h);
            }
        }
        assert_eq!(acc, one);
    }
}
