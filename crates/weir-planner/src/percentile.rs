//! The Percentile algorithm: the smallest whole value whose intervals cover p% of the in-use time.
//!
//! Pinterest's description sorts the in-use intervals by instances used and walks them until p%
//! of the in-use time is covered, then rounds the instance count up. Because coverage only grows
//! with the threshold, the smallest *whole* count covering p% is the ceiling of the exact
//! percentile value. So instead of sorting every interval, each leaf keeps a histogram of in-use
//! time per whole instance count (`ceil(instances)`): adding an interval is O(1), the percentile
//! is one pass over the distinct counts, and 43 million intervals need no sort at all.

use std::collections::BTreeMap;

use weir_model::Resources;

use crate::usage::Interval;

/// Counts below this live in a dense array; larger ones (rare) in an ordered map.
const DENSE: usize = 2048;

/// Milliseconds spent at each whole value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeHistogram {
    dense: Vec<u64>,
    sparse: BTreeMap<u64, u64>,
    total: u64,
}

impl TimeHistogram {
    pub fn new() -> TimeHistogram {
        TimeHistogram::default()
    }

    pub fn add(&mut self, value: u64, millis: u64) {
        if millis == 0 {
            return;
        }
        self.total += millis;
        if value < DENSE as u64 {
            let v = value as usize;
            if v >= self.dense.len() {
                self.dense.resize(v + 1, 0);
            }
            self.dense[v] += millis;
        } else {
            *self.sparse.entry(value).or_insert(0) += millis;
        }
    }

    /// Add every value's time of `other`.
    pub fn merge(&mut self, other: &TimeHistogram) {
        for (v, &t) in other.dense.iter().enumerate() {
            self.add(v as u64, t);
        }
        for (&v, &t) in &other.sparse {
            self.add(v, t);
        }
    }

    /// Total time added.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The largest value with any time (0 when empty).
    pub fn max(&self) -> u64 {
        self.sparse
            .keys()
            .next_back()
            .copied()
            .or_else(|| self.dense.iter().rposition(|&t| t > 0).map(|v| v as u64))
            .unwrap_or(0)
    }

    /// The smallest value `v` such that the time spent at values `<= v` is at least `percent`%
    /// of the total; 0 when the histogram is empty. `percent` is in (0, 100]; the comparison is
    /// exact (integer arithmetic on `percent` in millionths), so hand-computed boundaries hold.
    pub fn percentile(&self, percent: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let micro = (percent.clamp(0.0, 100.0) * 1e6).round() as u128;
        let need = |covered: u64| u128::from(covered) * 100_000_000 >= micro * u128::from(self.total);
        let mut covered = 0u64;
        for (v, &t) in self.dense.iter().enumerate() {
            covered += t;
            if t > 0 && need(covered) {
                return v as u64;
            }
        }
        for (&v, &t) in &self.sparse {
            covered += t;
            if need(covered) {
                return v;
            }
        }
        self.max()
    }
}

/// What one leaf did over the planning window, accumulated interval by interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeafUsage {
    /// In-use time (instances > 0) per whole instance count, `ceil(instances)`.
    pub instances: TimeHistogram,
    /// In-use time per number of running applications.
    pub running_apps: TimeHistogram,
    /// Σ length × cpu over the window, in millicore-milliseconds.
    pub cpu_ms: u128,
    /// Σ length × memory, in MiB-milliseconds.
    pub memory_ms: u128,
    /// Σ length × the dominant resource's amount, split by which resource dominated, so that
    /// instance-hours stay exact integers until the end.
    dominant_cpu_ms: u128,
    dominant_memory_ms: u128,
}

impl LeafUsage {
    /// Add one interval clipped to `[from, to)`, with usage measured in `instance`s.
    pub fn add(&mut self, iv: &Interval, from: u64, to: u64, instance: &Resources) {
        let start = iv.start.max(from);
        let end = iv.end.min(to);
        if end <= start {
            return;
        }
        let len = end - start;
        let count = instances_ceil(iv.cpu, iv.memory, instance);
        if count == 0 {
            return; // vacant
        }
        self.instances.add(count, len);
        self.running_apps.add(u64::from(iv.running_apps), len);
        self.cpu_ms += u128::from(len) * u128::from(iv.cpu);
        self.memory_ms += u128::from(len) * u128::from(iv.memory);
        if cpu_dominates(iv.cpu, iv.memory, instance) {
            self.dominant_cpu_ms += u128::from(len) * u128::from(iv.cpu);
        } else {
            self.dominant_memory_ms += u128::from(len) * u128::from(iv.memory);
        }
    }

    /// Time the leaf was in use (not vacant), in milliseconds.
    pub fn in_use_ms(&self) -> u64 {
        self.instances.total()
    }

    /// Instance-milliseconds used: Σ length × max(cpu/instance.cpu, memory/instance.memory).
    pub fn instance_ms(&self, instance: &Resources) -> f64 {
        let part = |sum: u128, unit: u64| if unit == 0 { 0.0 } else { sum as f64 / unit as f64 };
        part(self.dominant_cpu_ms, instance.cpu) + part(self.dominant_memory_ms, instance.memory)
    }
}

/// `ceil(max(cpu / instance.cpu, memory / instance.memory))`; a zero component of `instance`
/// is not counted.
pub fn instances_ceil(cpu: u64, memory: u64, instance: &Resources) -> u64 {
    let c = if instance.cpu == 0 { 0 } else { cpu.div_ceil(instance.cpu) };
    let m = if instance.memory == 0 { 0 } else { memory.div_ceil(instance.memory) };
    c.max(m)
}

/// Whether cpu is the dominant resource: cpu/instance.cpu >= memory/instance.memory.
fn cpu_dominates(cpu: u64, memory: u64, instance: &Resources) -> bool {
    if instance.cpu == 0 {
        return false;
    }
    if instance.memory == 0 {
        return true;
    }
    u128::from(cpu) * u128::from(instance.memory) >= u128::from(memory) * u128::from(instance.cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTANCE: Resources = Resources::new(16_000, 65_536, 0);

    /// Plan one leaf from `(length ms, cpu millicores)` intervals laid end to end.
    fn allocate(intervals: &[(u64, u64)], percent: f64) -> u64 {
        let mut usage = LeafUsage::default();
        let mut t = 0;
        for &(len, cpu) in intervals {
            let iv = Interval { start: t, end: t + len, cpu, memory: 0, running_apps: 1, line: 0 };
            usage.add(&iv, 0, u64::MAX, &INSTANCE);
            t += len;
        }
        usage.instances.percentile(percent)
    }

    const CORE16: u64 = 16_000;

    #[test]
    fn the_articles_example_allocates_the_instances_of_the_interval_reaching_the_threshold() {
        // In use 240 h; 95% is 228 h. Sorted: 1 instance 100 h, 2 instances 100 h, 3 instances
        // 30 h (230 h covered ≥ 228 h), 8 instances 10 h. Allocation: 3.
        let h = 3_600_000;
        let intervals =
            [(100 * h, CORE16), (30 * h, 3 * CORE16), (10 * h, 8 * CORE16), (100 * h, 2 * CORE16)];
        assert_eq!(allocate(&intervals, 95.0), 3);
        assert_eq!(allocate(&intervals, 100.0), 8);
        // 200/240 = 83.3% is covered by 2 instances, so 80% and 83.3% need 2 and 85% needs 3.
        assert_eq!(allocate(&intervals, 80.0), 2);
        assert_eq!(allocate(&intervals, 200.0 / 240.0 * 100.0), 2);
        assert_eq!(allocate(&intervals, 85.0), 3);
    }

    #[test]
    fn vacant_time_does_not_count_and_all_vacant_allocates_nothing() {
        // 90 ms vacant, 10 ms at 2 instances: every percentile of in-use time is 2.
        assert_eq!(allocate(&[(90, 0), (10, 2 * CORE16)], 50.0), 2);
        assert_eq!(allocate(&[(90, 0), (10, 2 * CORE16)], 1.0), 2);
        assert_eq!(allocate(&[(100, 0), (5, 0)], 95.0), 0);
        assert_eq!(allocate(&[], 95.0), 0);
    }

    #[test]
    fn a_single_interval_allocates_its_own_rounded_up_count() {
        assert_eq!(allocate(&[(1, 1)], 95.0), 1);
        assert_eq!(allocate(&[(7, 2 * CORE16 + 1)], 70.0), 3);
        assert_eq!(allocate(&[(7, 2 * CORE16)], 100.0), 2);
    }

    #[test]
    fn ties_at_a_value_count_together_and_exact_boundaries_hold() {
        // Two separate intervals at 4 instances (25 ms each) and 50 ms at 1: 1 instance covers
        // exactly 50%, so p = 50 needs 1 and anything above needs 4.
        let intervals = [(25, 4 * CORE16), (50, CORE16), (25, 4 * CORE16)];
        assert_eq!(allocate(&intervals, 50.0), 1);
        assert_eq!(allocate(&intervals, 50.000001), 4);
        // 95% of 100 ms is exactly 95 ms: 95 ms at 1 instance is enough.
        assert_eq!(allocate(&[(95, CORE16), (5, 9 * CORE16)], 95.0), 1);
        assert_eq!(allocate(&[(94, CORE16), (6, 9 * CORE16)], 95.0), 9);
    }

    #[test]
    fn the_dominant_resource_decides_and_large_counts_still_sort() {
        let mut usage = LeafUsage::default();
        // 1 core but 3.5 instances of memory: 4 instances. Then 10,000 instances of cpu.
        let a = Interval { start: 0, end: 10, cpu: 1000, memory: 65_536 * 7 / 2, running_apps: 2, line: 0 };
        let b = Interval { start: 10, end: 11, cpu: CORE16 * 10_000, memory: 0, running_apps: 9, line: 0 };
        usage.add(&a, 0, 100, &INSTANCE);
        usage.add(&b, 0, 100, &INSTANCE);
        assert_eq!(usage.instances.percentile(90.0), 4);
        assert_eq!(usage.instances.percentile(100.0), 10_000);
        assert_eq!(usage.running_apps.percentile(100.0), 9);
        assert_eq!(usage.in_use_ms(), 11);
        assert!((usage.instance_ms(&INSTANCE) - (10.0 * 3.5 + 10_000.0)).abs() < 1e-9);
    }

    #[test]
    fn intervals_are_clipped_to_the_window() {
        let mut usage = LeafUsage::default();
        let iv = Interval { start: 0, end: 100, cpu: CORE16, memory: 0, running_apps: 1, line: 0 };
        usage.add(&iv, 40, 70, &INSTANCE);
        assert_eq!(usage.in_use_ms(), 30);
        usage.add(&iv, 100, 200, &INSTANCE);
        assert_eq!(usage.in_use_ms(), 30);
    }
}
