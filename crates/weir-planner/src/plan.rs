//! Planning a cluster from its usage history: per leaf, the Percentile allocation (raised to the
//! SLO floor), `max_running_apps`, then weights up the tree and the planned cluster file.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, QueuePath, QueueSpec, Workload};

use crate::error::PlanError;
use crate::percentile::LeafUsage;
use crate::plan_checks::{oversized, ABSURD_FACTOR};
use crate::settings::PlanSettings;
use crate::slo::{slo_floors, SloFloor};
use crate::summary::{cluster_instances, summarize, ClusterSummary, Ratios, TierOrder, TierSummary, Totals};
use crate::summed::{sweep_parallel, Feed, SummedUsage};
use crate::usage::{Interval, UsageHistory};

/// What [`plan`] needs.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    pub cluster: &'a ClusterConfig,
    pub history: &'a UsageHistory,
    /// Names the history in errors (usually its file name).
    pub history_name: &'a str,
    pub settings: &'a PlanSettings,
    /// Workflows with SLOs raise their queues' allocations to the SLO floor.
    pub workload: Option<&'a Workload>,
    /// Worker threads for the per-leaf pass (1 = the calling thread only). The result does
    /// not depend on it.
    pub threads: usize,
}

/// The plan: per-queue settings, the usage/capacity report and the planned cluster.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub window: Window,
    pub settings: PlanSettings,
    /// Every queue below root, depth-first as in the cluster file.
    pub queues: Vec<QueuePlan>,
    /// Per tier (leaves without a tier count as tier 3).
    pub tiers: BTreeMap<u8, TierSummary>,
    /// Whether the percentile falls and usage/capacity rises from tier 1 to tier 3.
    pub tier_order: TierOrder,
    pub cluster: ClusterSummary,
    /// Queues of the history that are not leaves of the cluster, and why; their rows are ignored.
    pub ignored_history: Vec<IgnoredQueue>,
    /// What makes the history a weak basis for this plan (short window, rows larger than the
    /// cluster, leaves that keep their share), one sentence each.
    pub warnings: Vec<String>,
    /// The cluster with the new weights and `max_running_apps`.
    #[serde(skip)]
    pub planned: ClusterConfig,
}

/// The span of the history planned from, in the history's milliseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Window {
    pub start_ms: u64,
    pub end_ms: u64,
    pub hours: f64,
}

impl Window {
    pub fn millis(&self) -> u64 {
        self.end_ms - self.start_ms
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueStatus {
    /// A leaf planned from its history.
    Planned,
    /// A leaf whose history shows no use in the window: it gets 0 instances (weight 0, served
    /// last) unless an SLO floor says otherwise.
    Vacant,
    /// A leaf the history does not mention: it keeps its share of the cluster (its weight is
    /// restated in the plan's unit) and its other settings.
    NoHistory,
    /// A parent: its weight is the sum of its children's.
    Parent,
}

#[derive(Clone, Debug, Serialize)]
pub struct QueuePlan {
    pub queue: String,
    /// The leaf's tier as configured (`null` for parents and untiered leaves).
    pub tier: Option<u8>,
    pub status: QueueStatus,
    /// The percentile used (leaves only).
    pub percentile: Option<f64>,
    /// Allocated instances: the plan for a leaf, the sum over planned leaves for a parent.
    pub instances: u64,
    /// The percentile's allocation before the SLO floor.
    pub percentile_instances: u64,
    /// Σ instance-hours of one run / SLO hours over the leaf's SLO-bound workflows.
    pub slo_floor: Option<f64>,
    /// The most instances the leaf used at any time in the window (rounded up).
    pub peak_instances: u64,
    pub weight: f64,
    pub previous_weight: f64,
    /// The queue's steady share of the cluster (dominant resource) before and after the plan.
    pub share: f64,
    pub previous_share: f64,
    pub max_running_apps: Option<u32>,
    pub previous_max_running_apps: Option<u32>,
    pub in_use_hours: f64,
    pub used: Used,
    pub usage_capacity: Ratios,
}

/// Usage over the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Used {
    pub instance_hours: f64,
    pub cpu_core_hours: f64,
    pub memory_gib_hours: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct IgnoredQueue {
    pub queue: String,
    pub reason: &'static str,
    pub rows: usize,
}

impl Plan {
    /// The row of `queue` (a path such as `root.a.b`).
    pub fn queue(&self, queue: &str) -> Option<&QueuePlan> {
        self.queues.iter().find(|q| q.queue == queue)
    }
}

/// One leaf's result before the tree is assembled.
struct LeafResult {
    status: QueueStatus,
    usage: LeafUsage,
    percentile_instances: u64,
    instances: u64,
    max_running_apps: u32,
}

/// Plan `input.cluster` from `input.history`.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanError> {
    let cfg = input.cluster;
    let s = input.settings;
    let (first, last) = input
        .history
        .span()
        .ok_or_else(|| PlanError::EmptyHistory { file: input.history_name.to_string() })?;
    let start = first.max(last.saturating_sub(s.window.as_millis()));
    let window = Window { start_ms: start, end_ms: last, hours: (last - start) as f64 / 3_600_000.0 };

    // Which history series feed which leaf.
    let mut feeds: Vec<Vec<usize>> = vec![Vec::new(); cfg.queues.len()];
    let mut ignored = Vec::new();
    for (id, (name, intervals)) in input.history.queues().enumerate() {
        let reason = match QueuePath::parse(name).map(|p| cfg.find(&p)) {
            None => Some("not a queue path"),
            Some(None) => Some("not a queue of the cluster"),
            Some(Some(ix)) if !cfg.queues[ix].is_leaf() => Some("not a leaf queue"),
            Some(Some(ix)) => {
                feeds[ix].push(id);
                None
            }
        };
        if let Some(reason) = reason {
            ignored.push(IgnoredQueue { queue: name.to_string(), reason, rows: intervals.len() });
        }
    }
    ignored.sort_by(|a: &IgnoredQueue, b: &IgnoredQueue| a.queue.cmp(&b.queue));
    if feeds.iter().all(Vec::is_empty) {
        return Err(PlanError::NoMatchingQueues {
            file: input.history_name.to_string(),
            count: ignored.len(),
            examples: ignored.iter().take(5).map(|q| q.queue.clone()).collect(),
        });
    }
    let mut warnings = Vec::new();
    if !ignored.is_empty() {
        let rows: usize = ignored.iter().map(|q| q.rows).sum();
        warnings.push(format!(
            "{} queue{} of the history ({rows} rows) are not leaves of the cluster and were ignored: {}",
            ignored.len(),
            if ignored.len() == 1 { "" } else { "s" },
            ignored.iter().take(5).map(|q| q.queue.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    // Each leaf's intervals in time order (sorted once here when rows came out of order).
    let series: Vec<Cow<[Interval]>> = feeds
        .iter()
        .map(|f| match f.as_slice() {
            [] => Cow::Borrowed(&[][..]),
            [one] => match input.history.series(*one) {
                (ivs, true) => Cow::Borrowed(ivs),
                (ivs, false) => Cow::Owned(sorted(ivs.to_vec())),
            },
            many => {
                Cow::Owned(sorted(many.iter().flat_map(|&id| input.history.series(id).0).copied().collect()))
            }
        })
        .collect();
    let mut withhold = None;
    let covered = window.millis();
    if covered < s.window.as_millis() {
        warnings.push(format!(
            "the history covers {:.1} h, less than the {} window: the plan describes that span only",
            window.hours, s.window
        ));
    }
    if covered < s.verdict_min_window.as_millis() {
        withhold = Some(format!(
            "the history covers {:.1} h, less than the {} a verdict needs (verdict_min_window)",
            window.hours, s.verdict_min_window
        ));
    }
    if let Some((factor, w)) = oversized(cfg, &series, input.history_name, &window) {
        // A cluster that shrank leaves rows a little above its size; rows many times larger mean
        // another cluster or wrong units, and then no verdict can be trusted.
        if factor > ABSURD_FACTOR {
            withhold.get_or_insert(w.clone());
        }
        warnings.push(w);
    }

    let floors = input.workload.map(|w| slo_floors(w, &s.instance)).unwrap_or_default();
    let leaves: Vec<usize> = (0..cfg.queues.len()).filter(|&i| cfg.queues[i].is_leaf()).collect();
    let work = |i: usize| {
        plan_leaf(input, &window, &series[i], !feeds[i].is_empty(), i, floors.get(&cfg.queues[i].path))
    };
    let results: Vec<Option<LeafResult>> = run_parallel(&leaves, input.threads.max(1), work)?;
    let mut by_queue: Vec<Option<LeafResult>> = (0..cfg.queues.len()).map(|_| None).collect();
    for (&i, r) in leaves.iter().zip(results) {
        by_queue[i] = r;
    }
    if by_queue.iter().flatten().all(|r| r.usage.in_use_ms() == 0) {
        return Err(PlanError::NoUsage { file: input.history_name.to_string(), hours: window.hours });
    }

    // One unit for every weight: planned leaves weigh their allocated instances; a leaf without
    // history keeps its share of the cluster, restated on the same scale.
    let n = cfg.queues.len();
    let total = cfg.total_resources();
    let share_of = |shares: &[weir_engine::QueueShares], i: usize| dominant_share(&shares[i].steady, &total);
    let before = weir_engine::shares_for(cfg, &[]);
    let planned_sum: f64 = by_queue.iter().flatten().map(|r| r.instances as f64).sum();
    let kept_share: f64 =
        leaves.iter().filter(|&&i| by_queue[i].is_none()).map(|&i| share_of(&before, i)).sum();
    let size = cluster_instances(&total, &s.instance);
    let scale = if planned_sum > 0.0 && kept_share < 0.999 { planned_sum / (1.0 - kept_share) } else { size };
    let mut weight: Vec<f64> = cfg.queues.iter().map(|q| q.weight).collect();
    let mut instances = vec![0u64; n];
    let mut totals = vec![Totals::default(); n];
    for i in (1..n).rev() {
        let q = &cfg.queues[i];
        if let Some(r) = &by_queue[i] {
            weight[i] = r.instances as f64;
            instances[i] = r.instances;
            totals[i] = Totals::of_leaf(&r.usage, r.instances, &s.instance);
        } else if q.is_leaf() {
            weight[i] = round_weight(share_of(&before, i) * scale);
        } else {
            weight[i] = q.children.iter().map(|&c| weight[c]).sum();
            instances[i] = q.children.iter().map(|&c| instances[c]).sum();
            totals[i] = q.children.iter().fold(Totals::default(), |acc, &c| acc.plus(&totals[c]));
        }
    }
    if kept_share > 0.0 {
        warnings.push(format!(
            "{} leaves have no history and keep their {:.1}% of the cluster; the planned leaves share the other {:.1}% \
             (about {} instances for the {} they are allocated) in proportion to their allocations",
            leaves.iter().filter(|&&i| by_queue[i].is_none()).count(),
            kept_share * 100.0,
            (1.0 - kept_share).max(0.0) * 100.0,
            crate::summary::fmt_num((1.0 - kept_share).max(0.0) * size),
            planned_sum
        ));
    }

    // The tier-1 and the tier-1+2 leaves' usage added up over time.
    let tier = |i: usize| cfg.queues[i].tier.unwrap_or(3);
    let summed_feeds: Vec<Feed> = leaves
        .iter()
        .filter(|&&i| by_queue[i].is_some() && tier(i) <= 2)
        .map(|&i| Feed { intervals: &series[i], sums: if tier(i) == 1 { 0b11 } else { 0b10 } })
        .collect();
    let hists =
        sweep_parallel(&summed_feeds, window.start_ms, window.end_ms, &s.instance, 2, input.threads.max(1));
    let summed_at = |h: &crate::percentile::TimeHistogram, tiers: &[u8], percentile: f64| SummedUsage {
        percentile,
        instances: h.percentile(percentile),
        peak_instances: h.max(),
        in_use_hours: h.total() as f64 / 3_600_000.0,
        per_leaf_sum: leaves
            .iter()
            .filter(|&&i| tiers.contains(&tier(i)))
            .filter_map(|&i| by_queue[i].as_ref())
            .map(|r| r.instances)
            .sum(),
    };
    let summed = (
        summed_at(&hists[0], &[1], s.percentile_for(Some(1))),
        summed_at(&hists[1], &[1, 2], s.percentile_for(Some(2))),
    );

    let build = |weight: &[f64]| {
        let mut file = cfg.file.clone();
        if cfg.scheduler.mode == weir_model::Mode::Capacity {
            apply_capacity(&mut file.queues, &QueuePath::root(), cfg, weight, &by_queue);
        } else {
            apply(&mut file.queues, &QueuePath::root(), cfg, weight, &by_queue);
        }
        ClusterConfig::from_file("planned cluster", file)
            .map_err(|source| PlanError::PlannedCluster { source })
    };
    let mut planned = build(&weight)?;
    // min and max clamp shares level by level, so weights in proportion to the kept shares can
    // still move them; correct the kept leaves' weights until their shares hold (a few rounds).
    let kept: Vec<usize> = leaves.iter().copied().filter(|&i| by_queue[i].is_none()).collect();
    for _ in 0..KEEP_ROUNDS {
        let now = weir_engine::shares_for(&planned, &[]);
        let mut worst: f64 = 0.0;
        for &i in &kept {
            let (want, got) = (share_of(&before, i), share_of(&now, i));
            if want > 0.0 && got > 0.0 {
                worst = worst.max((got / want - 1.0).abs());
                weight[i] = round_weight(weight[i] * want / got);
            }
        }
        if worst < 0.005 {
            break;
        }
        for i in (1..n).rev() {
            if !cfg.queues[i].is_leaf() {
                weight[i] = cfg.queues[i].children.iter().map(|&c| weight[c]).sum();
            }
        }
        planned = build(&weight)?;
    }

    let after = weir_engine::shares_for(&planned, &[]);
    let mut queues = Vec::with_capacity(n.saturating_sub(1));
    for i in 1..n {
        let q = &cfg.queues[i];
        let r = by_queue[i].as_ref();
        let status = match r {
            Some(r) => r.status,
            None if q.is_leaf() => QueueStatus::NoHistory,
            None => QueueStatus::Parent,
        };
        let usage = r.map(|r| &r.usage);
        queues.push(QueuePlan {
            queue: q.path.to_string(),
            tier: q.tier,
            status,
            percentile: q.is_leaf().then(|| s.percentile_for(q.tier)),
            instances: instances[i],
            percentile_instances: r.map_or(0, |r| r.percentile_instances),
            slo_floor: floors.get(&q.path).map(|f| f.instances),
            peak_instances: usage.map_or(0, |u| u.instances.max()),
            weight: weight[i],
            previous_weight: q.weight,
            share: share_of(&after, i),
            previous_share: share_of(&before, i),
            max_running_apps: planned.queues[i].max_running_apps,
            previous_max_running_apps: q.max_running_apps,
            in_use_hours: usage.map_or(0.0, |u| u.in_use_ms() as f64 / 3_600_000.0),
            used: totals[i].used(),
            usage_capacity: totals[i].ratios(window.millis(), &s.instance),
        });
    }

    let (tiers, tier_order, cluster) =
        summarize(cfg, s, &window, &by_queue_totals(cfg, &by_queue, &totals), summed, withhold.as_deref());
    Ok(Plan {
        window,
        settings: s.clone(),
        queues,
        tiers,
        tier_order,
        cluster,
        ignored_history: ignored,
        warnings,
        planned,
    })
}

/// (tier, totals, allocated) of every leaf planned from history.
fn by_queue_totals(
    cfg: &ClusterConfig,
    by_queue: &[Option<LeafResult>],
    totals: &[Totals],
) -> Vec<(u8, Totals, u64)> {
    (0..cfg.queues.len())
        .filter_map(|i| {
            by_queue[i].as_ref().map(|r| (cfg.queues[i].tier.unwrap_or(3), totals[i].clone(), r.instances))
        })
        .collect()
}

fn plan_leaf(
    input: &PlanInput,
    window: &Window,
    intervals: &[Interval],
    has_history: bool,
    leaf: usize,
    floor: Option<&SloFloor>,
) -> Result<Option<LeafResult>, PlanError> {
    if !has_history {
        return Ok(None);
    }
    let s = input.settings;
    let q = &input.cluster.queues[leaf];
    let mut usage = LeafUsage::default();
    let mut prev: Option<&Interval> = None;
    for iv in intervals.iter().filter(|iv| iv.end > iv.start) {
        if let Some(p) = prev.filter(|p| iv.start < p.end) {
            return Err(PlanError::Overlap {
                file: input.history_name.to_string(),
                queue: q.path.to_string(),
                first_start: p.start,
                first_end: p.end,
                first_line: p.line,
                second_start: iv.start,
                second_end: iv.end,
                second_line: iv.line,
            });
        }
        prev = Some(iv);
        usage.add(iv, window.start_ms, window.end_ms, &s.instance);
    }
    let percentile = s.percentile_for(q.tier);
    let percentile_instances = usage.instances.percentile(percentile);
    let floor = floor.map_or(0, |f| round_up(f.instances));
    let apps = usage.running_apps.percentile(percentile);
    let max_running_apps =
        u32::try_from(round_up(apps as f64 * (1.0 + s.max_running_apps_headroom))).unwrap_or(u32::MAX).max(1);
    Ok(Some(LeafResult {
        status: if usage.in_use_ms() == 0 { QueueStatus::Vacant } else { QueueStatus::Planned },
        percentile_instances,
        instances: percentile_instances.max(floor),
        max_running_apps,
        usage,
    }))
}

/// Rounds of correcting the weights of leaves that keep their share (each one a fair-share
/// computation of the planned tree; a count, not a clock).
const KEEP_ROUNDS: usize = 12;

/// A queue's steady share of the cluster by its dominant resource.
fn dominant_share(steady: &weir_model::Resources, total: &weir_model::Resources) -> f64 {
    let part = |v: u64, t: u64| if t == 0 { 0.0 } else { v as f64 / t as f64 };
    part(steady.cpu, total.cpu).max(part(steady.memory, total.memory))
}

/// A weight with four significant digits: exact enough to keep shares, short enough to read.
fn round_weight(w: f64) -> f64 {
    if !(w.is_finite() && w > 0.0) {
        return 0.0;
    }
    let digits = 3 - w.log10().floor() as i32;
    let f = 10f64.powi(digits);
    (w * f).round() / f
}

fn sorted(mut v: Vec<Interval>) -> Vec<Interval> {
    v.sort_unstable_by_key(|iv| (iv.start, iv.end));
    v
}

/// Round up, but treat values within 1e-9 of a whole number as that number, so that
/// 10 × 1.2 = 12.000000000000002 stays 12.
pub fn round_up(x: f64) -> u64 {
    if !x.is_finite() || x <= 0.0 {
        return 0;
    }
    let r = x.round();
    if (x - r).abs() < 1e-9 {
        r as u64
    } else {
        x.ceil() as u64
    }
}

/// Map `work` over `items` on up to `threads` scoped threads, keeping `items`' order; the first
/// error (in item order) wins, so the outcome does not depend on scheduling.
fn run_parallel<T: Send, F>(items: &[usize], threads: usize, work: F) -> Result<Vec<T>, PlanError>
where
    F: Fn(usize) -> Result<T, PlanError> + Sync,
{
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(|&i| work(i)).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let parts: Vec<Vec<Result<T, PlanError>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                let work = &work;
                scope.spawn(move || part.iter().map(|&i| work(i)).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    parts.into_iter().flatten().collect()
}

/// Write the new weights and `max_running_apps` into the cluster file's queue tree.
fn apply(
    specs: &mut [QueueSpec],
    parent: &QueuePath,
    cfg: &ClusterConfig,
    weight: &[f64],
    by_queue: &[Option<LeafResult>],
) {
    for spec in specs {
        let path = parent.child(&spec.name);
        let Some(ix) = cfg.find(&path) else { continue };
        if let Some(r) = &by_queue[ix] {
            spec.weight = Some(weight[ix]);
            spec.max_running_apps = Some(r.max_running_apps);
        } else if spec.children.is_empty() {
            spec.weight = Some(weight[ix]);
        } else {
            spec.weight = Some(weight[ix]);
            apply(&mut spec.children, &path, cfg, weight, by_queue);
        }
    }
}

/// Capacity mode: the new weights as `capacity` percents that sum to exactly 100 among siblings
/// (hundredths handed out by largest remainder, ties to the earlier sibling), and
/// `max_running_apps` as `max_parallel_apps`. A `max_capacity` percent below the new capacity
/// is raised to it; an absolute one is dropped (the tree is now in percents).
fn apply_capacity(
    specs: &mut [QueueSpec],
    parent: &QueuePath,
    cfg: &ClusterConfig,
    weight: &[f64],
    by_queue: &[Option<LeafResult>],
) {
    use weir_model::CapacitySpec;
    let ixs: Vec<Option<usize>> = specs.iter().map(|s| cfg.find(&parent.child(&s.name))).collect();
    let w: Vec<f64> = ixs.iter().map(|ix| ix.map_or(0.0, |i| weight[i].max(0.0))).collect();
    let sum: f64 = w.iter().sum();
    let exact: Vec<f64> = if sum > 0.0 {
        w.iter().map(|x| x / sum * 10_000.0).collect()
    } else {
        vec![10_000.0 / specs.len().max(1) as f64; specs.len()]
    };
    let mut hundredths: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let mut order: Vec<usize> = (0..specs.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    let missing = 10_000u64.saturating_sub(hundredths.iter().sum());
    for &i in order.iter().take(missing as usize) {
        hundredths[i] += 1;
    }
    for (i, spec) in specs.iter_mut().enumerate() {
        let Some(ix) = ixs[i] else { continue };
        let percent = hundredths[i] as f64 / 100.0;
        spec.weight = None;
        spec.capacity = Some(CapacitySpec::Percent(percent));
        spec.max_capacity = match spec.max_capacity.take() {
            Some(CapacitySpec::Percent(m)) => Some(CapacitySpec::Percent(m.max(percent))),
            _ => None,
        };
        if let Some(r) = &by_queue[ix] {
            spec.max_running_apps = None;
            spec.max_parallel_apps = Some(r.max_running_apps);
        } else if !spec.children.is_empty() {
            let path = parent.child(&spec.name);
            apply_capacity(&mut spec.children, &path, cfg, weight, by_queue);
        }
    }
}
