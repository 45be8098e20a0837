//! What a simulation measures while it runs: time integrals of cluster and queue use, usage
//! intervals for the planner (`usage.csv`), samples for averages and charts, waits, losses.
//!
//! Integrals are exact (integers over piecewise-constant use); fair shares and the time series
//! are sampled every `sample_every`, because shares change with every pass and reading all of
//! them after each one would cost more than the simulation itself.

use weir_engine::Engine;
use weir_model::{Resources, Time};

/// One interval of constant use of one leaf queue: a row of `usage.csv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub start: Time,
    pub end: Time,
    /// The queue's index in the cluster configuration.
    pub queue: usize,
    pub usage: Resources,
    pub running_apps: u32,
}

/// The cluster at one sample time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at: Time,
    pub used: Resources,
    pub total: Resources,
    /// Use by the tier of the workflows holding it (index 0 unused, 1..=3).
    pub by_tier: [Resources; 4],
}

#[derive(Debug, Default)]
pub(crate) struct LeafMetrics {
    since: Time,
    usage: Resources,
    apps: u32,
    dirty: bool,
    /// ∫ usage dt, in resource-milliseconds.
    pub usage_integral: [u128; 3],
    /// Σ of sampled instantaneous fair shares, per resource.
    pub share_sum: [f64; 3],
    /// Submit → first container, in milliseconds, of each job that started.
    pub waits: Vec<u64>,
    /// Containers taken from this queue by preemption.
    pub preempted: u64,
}

#[derive(Debug)]
pub(crate) struct Metrics {
    pub leaves: Vec<LeafMetrics>,
    dirty: Vec<usize>,
    pub usage_rows: Vec<UsageRow>,
    pub used_integral: [u128; 3],
    pub total_integral: [u128; 3],
    pub samples: Vec<Sample>,
    next_sample: Time,
    sample_every: u64,
    /// Use held per tier of the workflows holding it.
    pub by_tier: [Resources; 4],
    pub events: u64,
    pub jobs_submitted: u64,
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    pub tasks_completed: u64,
    pub task_attempts_failed: u64,
    pub preemptions: u64,
    pub preemption_warnings: u64,
    pub node_failures: u64,
    pub containers_lost: u64,
    /// Container-milliseconds of work thrown away by preemption and node failures.
    pub wasted_ms: u128,
    /// ∫ reserved nodes dt, in node-milliseconds.
    pub reserved_node_ms: u128,
}

const KINDS: [fn(&Resources) -> u64; 3] = [|r| r.cpu, |r| r.memory, |r| r.gpu];

impl Metrics {
    pub fn new(queues: usize, sample_every_ms: u64) -> Metrics {
        Metrics {
            leaves: (0..queues).map(|_| LeafMetrics::default()).collect(),
            dirty: Vec::new(),
            usage_rows: Vec::new(),
            used_integral: [0; 3],
            total_integral: [0; 3],
            samples: Vec::new(),
            next_sample: Time::ZERO,
            sample_every: sample_every_ms.max(1),
            by_tier: [Resources::ZERO; 4],
            events: 0,
            jobs_submitted: 0,
            jobs_completed: 0,
            jobs_failed: 0,
            tasks_completed: 0,
            task_attempts_failed: 0,
            preemptions: 0,
            preemption_warnings: 0,
            node_failures: 0,
            containers_lost: 0,
            wasted_ms: 0,
            reserved_node_ms: 0,
        }
    }

    /// The leaf's use or running jobs may have changed in this step.
    pub fn touch(&mut self, leaf: usize) {
        let l = &mut self.leaves[leaf];
        if !l.dirty {
            l.dirty = true;
            self.dirty.push(leaf);
        }
    }

    /// Account for the time from `from` to `to`, during which nothing changed: cluster
    /// integrals and any samples falling due. `engine` shows the state of that span.
    pub fn advance(&mut self, engine: &Engine, leaves: &[usize], from: Time, to: Time) {
        if to <= from {
            return;
        }
        let dt = u128::from(to.as_millis() - from.as_millis());
        let (used, total) = (engine.cluster_used(), engine.cluster_total());
        for (k, get) in KINDS.iter().enumerate() {
            self.used_integral[k] += u128::from(get(&used)) * dt;
            self.total_integral[k] += u128::from(get(&total)) * dt;
        }
        self.reserved_node_ms += u128::from(engine.reservation_stats().active) * dt;
        while self.next_sample < to {
            let at = self.next_sample.max(from);
            self.samples.push(Sample { at, used, total, by_tier: self.by_tier });
            for &leaf in leaves {
                let share = engine.queue_stat(leaf).instantaneous;
                let sum = &mut self.leaves[leaf].share_sum;
                for (k, get) in KINDS.iter().enumerate() {
                    sum[k] += get(&share) as f64;
                }
            }
            self.next_sample = Time(at.as_millis() + self.sample_every);
        }
    }

    /// Close the intervals of the leaves whose use changed at `now`.
    pub fn flush(&mut self, engine: &Engine, now: Time) {
        for leaf in std::mem::take(&mut self.dirty) {
            let stat = engine.queue_stat(leaf);
            self.leaves[leaf].dirty = false;
            self.change(leaf, now, stat.usage, stat.running_apps);
        }
    }

    fn change(&mut self, leaf: usize, now: Time, usage: Resources, apps: u32) {
        let l = &mut self.leaves[leaf];
        if l.usage == usage && l.apps == apps {
            return;
        }
        if now > l.since {
            let dt = u128::from(now.as_millis() - l.since.as_millis());
            for (k, get) in KINDS.iter().enumerate() {
                l.usage_integral[k] += u128::from(get(&l.usage)) * dt;
            }
            if !l.usage.is_zero() || l.apps > 0 {
                self.usage_rows.push(UsageRow {
                    start: l.since,
                    end: now,
                    queue: leaf,
                    usage: l.usage,
                    running_apps: l.apps,
                });
            }
        }
        l.since = now;
        l.usage = usage;
        l.apps = apps;
    }

    /// Close every open interval at the end of the simulation.
    pub fn close(&mut self, end: Time, leaves: &[usize]) {
        for &leaf in leaves {
            self.change(leaf, end, Resources::ZERO, 0);
        }
    }

    pub fn samples_taken(&self) -> usize {
        self.samples.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_close_on_change_and_skip_vacant_spans() {
        let mut m = Metrics::new(2, 60_000);
        let r = Resources::new(1000, 2048, 0);
        m.change(1, Time(0), r, 1);
        m.change(1, Time(5_000), r, 1); // no change: no row
        m.change(1, Time(10_000), Resources::ZERO, 0);
        m.change(1, Time(20_000), r.times(2), 2);
        m.close(Time(25_000), &[1]);
        let rows: Vec<(u64, u64, u64)> =
            m.usage_rows.iter().map(|u| (u.start.as_millis(), u.end.as_millis(), u.usage.cpu)).collect();
        assert_eq!(rows, vec![(0, 10_000, 1000), (20_000, 25_000, 2000)]);
        assert_eq!(m.leaves[1].usage_integral[0], 1000 * 10_000 + 2000 * 5_000);
    }
}
