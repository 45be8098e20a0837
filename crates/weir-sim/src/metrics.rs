//! What a simulation measures while it runs: time integrals of cluster and queue use, usage
//! intervals for the planner (`usage.csv`), samples for averages and charts, waits, losses.
//!
//! Integrals are exact (integers over piecewise-constant use); fair shares and the time series
//! are sampled every `sample_every`, because shares change with every pass and reading all of
//! them after each one would cost more than the simulation itself.
//!
//! Memory does not grow with simulated time: the time series keeps at most [`MAX_SAMPLES`]
//! points (past that, neighbouring points are averaged in pairs and each later point stands
//! for twice as many samples), and a span in which nothing changes is sampled in one step
//! however many samples fall in it. A run of 190 simulated years once needed 10 GB here.

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
    /// Resources asked for and not yet given (the root queue's pending demand).
    pub pending: Resources,
    /// Containers preempted since the start (a point's last sample's count).
    pub preempted: u64,
    /// GPUs in thousandths — `cpu`: allocated (fractions of shared GPUs included), `memory`:
    /// idle room the workload's typical GPU task could not use (FGD fragmentation), `gpu`: the
    /// cluster's GPUs — or all zero when the cluster or the workload has none. (The three
    /// figures ride in a `Resources` so that the series averages them with the rest.)
    pub gpu_milli: Resources,
}

#[derive(Debug, Default)]
pub(crate) struct LeafMetrics {
    since: Time,
    usage: Resources,
    apps: u32,
    dirty: bool,
    /// ∫ usage dt, in resource-milliseconds.
    pub usage_integral: [u128; 3],
    /// Σ of sampled instantaneous fair shares, per resource (exact).
    pub share_sum: [u128; 3],
    /// Its jobs' waits (submit → first container) and delays (→ every container of the first
    /// request granted) as they get there, and response times and bounded slowdowns as they
    /// complete: milliseconds (slowdowns in millionths), in bounded memory.
    pub jobs: crate::stats::Times,
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
    /// ∫ GPUs in use (fractions included) and ∫ GPUs, in thousandths × ms.
    pub gpu_milli_integral: [u128; 2],
    pub series: Series,
    /// Samples taken (each counted in every leaf's `share_sum`).
    samples_taken: u64,
    next_sample: Time,
    sample_every: u64,
    /// Use held per tier of the workflows holding it.
    pub by_tier: [Resources; 4],
    pub events: u64,
    pub jobs_submitted: u64,
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    /// Whether any workflow had a gang job or stage.
    pub saw_gangs: bool,
    pub tasks_started: u64,
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
    /// ∫ room held by gang placeholders dt, per resource.
    pub placeholder_integral: [u128; 3],
    /// Gangs that started, and tasks ended because another task of their gang failed or was
    /// lost (the gang restarts whole).
    pub gangs_started: u64,
    pub gang_restarts_tasks: u64,
    /// GPU task kinds of the workload and their shares, for the FGD fragmentation measure
    /// (`None` when the cluster or the workload has no GPUs).
    pub gpu_mix: Option<Vec<(weir_engine::Request, f64)>>,
    pub gpu: GpuIntegrals,
}

/// The cluster-wide integrals at one moment: what a replay that ends at its last progress
/// (`EndReason::NoProgress`) goes back to, so the idle steps that showed no progress would come
/// do not dilute utilization.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Integrals {
    used: [u128; 3],
    total: [u128; 3],
    gpu_milli: [u128; 2],
    placeholder: [u128; 3],
    reserved_node_ms: u128,
}

/// Sums over the samples of the cluster's GPU state (thousandths of a GPU).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct GpuIntegrals {
    pub samples: u64,
    pub total: u64,
    pub allocated_sum: u128,
    pub idle_sum: u128,
    pub fragmented_sum: f64,
    /// Σ fragmented / idle over the samples with idle room, and how many there were.
    pub ratio_sum: f64,
    pub ratio_samples: u64,
    pub ratio_max: f64,
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
            gpu_milli_integral: [0; 2],
            series: Series::default(),
            samples_taken: 0,
            next_sample: Time::ZERO,
            sample_every: sample_every_ms.max(1),
            by_tier: [Resources::ZERO; 4],
            events: 0,
            jobs_submitted: 0,
            jobs_completed: 0,
            jobs_failed: 0,
            saw_gangs: false,
            tasks_started: 0,
            tasks_completed: 0,
            task_attempts_failed: 0,
            preemptions: 0,
            preemption_warnings: 0,
            node_failures: 0,
            containers_lost: 0,
            wasted_ms: 0,
            reserved_node_ms: 0,
            placeholder_integral: [0; 3],
            gangs_started: 0,
            gang_restarts_tasks: 0,
            gpu_mix: None,
            gpu: GpuIntegrals::default(),
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
        // Room held by gang placeholders is not in use: it is counted apart.
        let held = engine.placeholder_room();
        let (used, total) = (engine.cluster_used() - held, engine.cluster_total());
        for (k, get) in KINDS.iter().enumerate() {
            self.used_integral[k] += u128::from(get(&used)) * dt;
            self.total_integral[k] += u128::from(get(&total)) * dt;
            self.placeholder_integral[k] += u128::from(get(&held)) * dt;
        }
        // GPUs in thousandths, so that a pod on half a GPU counts half (utilization.gpu).
        let gpu_used = engine.gpu_milli_used().saturating_sub(held.gpu * 1000);
        self.gpu_milli_integral[0] += u128::from(gpu_used) * dt;
        self.gpu_milli_integral[1] += u128::from(total.gpu * 1000) * dt;
        self.reserved_node_ms += u128::from(engine.reservation_stats().active) * dt;
        if self.next_sample >= to {
            return;
        }
        // Samples fall at `first`, `first + every`, … before `to`; nothing changes in between,
        // so they are all alike and taken at once.
        let first = self.next_sample.max(from);
        let every = self.sample_every;
        let n = (to.as_millis() - first.as_millis() - 1) / every + 1;
        let pending = engine.queue_stat(0).pending;
        let frag = self.gpu_mix.as_ref().map(|mix| engine.gpu_fragmentation(mix));
        let gpu_milli = frag
            .map_or(Resources::ZERO, |f| Resources::new(f.allocated, f.fragmented.round() as u64, f.total));
        let sample = Sample {
            at: first,
            used,
            total,
            by_tier: self.by_tier,
            pending,
            preempted: self.preemptions,
            gpu_milli,
        };
        self.series.add(sample, n, every);
        for &leaf in leaves {
            let share = engine.queue_stat(leaf).instantaneous;
            let sum = &mut self.leaves[leaf].share_sum;
            for (k, get) in KINDS.iter().enumerate() {
                sum[k] += u128::from(get(&share)) * u128::from(n);
            }
        }
        if let Some(f) = frag {
            let g = &mut self.gpu;
            g.samples += n;
            g.total = f.total;
            g.allocated_sum += u128::from(f.allocated) * u128::from(n);
            g.idle_sum += u128::from(f.idle) * u128::from(n);
            g.fragmented_sum += f.fragmented * n as f64;
            if f.idle > 0 {
                let ratio = f.fragmented / f.idle as f64;
                g.ratio_sum += ratio * n as f64;
                g.ratio_samples += n;
                g.ratio_max = g.ratio_max.max(ratio);
            }
        }
        self.samples_taken += n;
        self.next_sample = Time(first.as_millis().saturating_add(n.saturating_mul(every)));
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

    pub fn samples_taken(&self) -> u64 {
        self.samples_taken
    }

    /// A number that grows whenever work moves: a task starts, ends or fails, a job is
    /// submitted or ends.
    pub fn integrals(&self) -> Integrals {
        Integrals {
            used: self.used_integral,
            total: self.total_integral,
            gpu_milli: self.gpu_milli_integral,
            placeholder: self.placeholder_integral,
            reserved_node_ms: self.reserved_node_ms,
        }
    }

    pub fn restore(&mut self, i: Integrals) {
        self.used_integral = i.used;
        self.total_integral = i.total;
        self.gpu_milli_integral = i.gpu_milli;
        self.placeholder_integral = i.placeholder;
        self.reserved_node_ms = i.reserved_node_ms;
    }

    pub fn progress(&self) -> u64 {
        self.tasks_started
            + self.tasks_completed
            + self.task_attempts_failed
            + self.jobs_submitted
            + self.jobs_completed
            + self.jobs_failed
    }
}

/// Most points a simulation keeps for its charts (20 MB). A run sampled every minute keeps
/// every sample for its first 91 days.
pub const MAX_SAMPLES: usize = 1 << 17;

/// The sampled time series: each point the mean of `stride` consecutive samples, `stride`
/// doubling whenever the points reach [`MAX_SAMPLES`].
#[derive(Debug)]
pub(crate) struct Series {
    points: Vec<Sample>,
    stride: u64,
    /// The point being filled: its first sample's time, samples so far, and their sums.
    at: Time,
    count: u64,
    sums: [[u128; 3]; 8],
    /// The preemption count of the point's last sample.
    preempted: u64,
}

impl Default for Series {
    fn default() -> Series {
        Series { points: Vec::new(), stride: 1, at: Time::ZERO, count: 0, sums: [[0; 3]; 8], preempted: 0 }
    }
}

/// The resources a sample holds, in a fixed order: used, total, use by tier 0..=3, pending, GPUs.
fn parts(s: &Sample) -> [Resources; 8] {
    [s.used, s.total, s.by_tier[0], s.by_tier[1], s.by_tier[2], s.by_tier[3], s.pending, s.gpu_milli]
}

fn mean(sum: &[u128; 3], n: u64) -> Resources {
    let n = u128::from(n.max(1));
    let m = |k: usize| u64::try_from(sum[k] / n).unwrap_or(u64::MAX);
    Resources::new(m(0), m(1), m(2))
}

impl Series {
    /// `n` samples alike but for their times, `every` milliseconds apart from `sample.at`.
    pub fn add(&mut self, sample: Sample, mut n: u64, every: u64) {
        let mut at = sample.at;
        // Until the first halving every sample is a point of its own (the common case: a week
        // at 60 s is 10,080 samples), so no sums are needed.
        while n > 0 && self.stride == 1 {
            self.points.push(Sample { at, ..sample });
            n -= 1;
            at = Time(at.as_millis().saturating_add(every));
            if self.points.len() >= MAX_SAMPLES {
                self.halve();
            }
        }
        let parts = parts(&sample);
        while n > 0 {
            if self.count == 0 {
                self.at = at;
            }
            let m = n.min(self.stride - self.count);
            for (sum, r) in self.sums.iter_mut().zip(&parts) {
                for (k, get) in KINDS.iter().enumerate() {
                    sum[k] += u128::from(get(r)) * u128::from(m);
                }
            }
            self.count += m;
            self.preempted = sample.preempted;
            n -= m;
            at = Time(at.as_millis().saturating_add(m.saturating_mul(every)));
            if self.count == self.stride {
                self.close_point();
                if self.points.len() >= MAX_SAMPLES {
                    self.halve();
                }
            }
        }
    }

    fn close_point(&mut self) {
        let count = self.count;
        let m = self.sums.map(|s| mean(&s, count));
        self.points.push(Sample {
            at: self.at,
            used: m[0],
            total: m[1],
            by_tier: [m[2], m[3], m[4], m[5]],
            pending: m[6],
            preempted: self.preempted,
            gpu_milli: m[7],
        });
        self.count = 0;
        self.sums = [[0; 3]; 8];
    }

    /// Average neighbouring points in pairs: half the points, each for twice the samples.
    fn halve(&mut self) {
        let pair = |a: &Sample, b: &Sample| {
            let avg = |x: Resources, y: Resources| {
                Resources::new(
                    ((u128::from(x.cpu) + u128::from(y.cpu)) / 2) as u64,
                    ((u128::from(x.memory) + u128::from(y.memory)) / 2) as u64,
                    ((u128::from(x.gpu) + u128::from(y.gpu)) / 2) as u64,
                )
            };
            Sample {
                at: a.at,
                used: avg(a.used, b.used),
                total: avg(a.total, b.total),
                by_tier: [0, 1, 2, 3].map(|t| avg(a.by_tier[t], b.by_tier[t])),
                pending: avg(a.pending, b.pending),
                // A count since the start: the later point's.
                preempted: b.preempted,
                gpu_milli: avg(a.gpu_milli, b.gpu_milli),
            }
        };
        self.points = self.points.chunks(2).map(|c| pair(&c[0], c.get(1).unwrap_or(&c[0]))).collect();
        self.stride *= 2;
    }

    /// The points, the last one averaging however many samples it had.
    pub fn finish(mut self) -> Vec<Sample> {
        if self.count > 0 {
            self.close_point();
        }
        self.points
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

    fn sample(at: u64, cpu: u64) -> Sample {
        let r = Resources::new(cpu, 0, 0);
        Sample {
            at: Time(at),
            used: r,
            total: Resources::new(100, 0, 0),
            by_tier: [r; 4],
            pending: r,
            preempted: 0,
            gpu_milli: Resources::ZERO,
        }
    }

    #[test]
    fn a_short_series_keeps_every_sample() {
        let mut s = Series::default();
        s.add(sample(0, 3), 2, 10);
        s.add(sample(20, 5), 1, 10);
        let got: Vec<(u64, u64)> = s.finish().iter().map(|p| (p.at.as_millis(), p.used.cpu)).collect();
        assert_eq!(got, [(0, 3), (10, 3), (20, 5)]);
    }

    #[test]
    fn a_long_series_halves_into_exact_means() {
        let mut s = Series::default();
        // MAX_SAMPLES samples of 0, then as many of 8, then 3 × MAX_SAMPLES of 4: three halvings.
        let n = MAX_SAMPLES as u64;
        s.add(sample(0, 0), n, 1);
        s.add(sample(n, 8), n, 1);
        s.add(sample(2 * n, 4), 3 * n, 1);
        assert_eq!(s.stride, 8);
        let points = s.finish();
        assert_eq!(points.len() as u64, 5 * n / 8);
        let cpu: Vec<u64> = points.iter().map(|p| p.used.cpu).collect();
        assert!(cpu[..MAX_SAMPLES / 8].iter().all(|&c| c == 0));
        assert!(cpu[MAX_SAMPLES / 8..MAX_SAMPLES / 4].iter().all(|&c| c == 8));
        assert!(cpu[MAX_SAMPLES / 4..].iter().all(|&c| c == 4));
        // Each point starts where its first sample was taken.
        assert_eq!(points[1].at, Time(8));
        assert_eq!(points.last().map(|p| p.at), Some(Time(5 * n - 8)));
    }
}
