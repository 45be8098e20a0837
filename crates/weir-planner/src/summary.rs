//! Usage/capacity per queue, per tier and for the cluster; the tier-order check; the verdict.
//!
//! Usage is instance-hours used (dominant resource), core-hours and GiB-hours; capacity is the
//! allocated instances × the window's hours (× the instance's cpu or memory for those ratios).
//! For the cluster verdict, capacity is the cluster's own size.

use std::collections::BTreeMap;

use serde::Serialize;
use weir_model::{ClusterConfig, Resources};

use crate::percentile::LeafUsage;
use crate::plan::{Used, Window};
use crate::settings::PlanSettings;
use crate::summed::SummedUsage;

/// Exact sums of usage, and the allocation they are measured against.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub instance_ms: f64,
    pub cpu_ms: u128,
    pub memory_ms: u128,
    pub allocated: u64,
}

impl Totals {
    pub fn of_leaf(u: &LeafUsage, allocated: u64, instance: &Resources) -> Totals {
        Totals { instance_ms: u.instance_ms(instance), cpu_ms: u.cpu_ms, memory_ms: u.memory_ms, allocated }
    }

    pub fn plus(&self, o: &Totals) -> Totals {
        Totals {
            instance_ms: self.instance_ms + o.instance_ms,
            cpu_ms: self.cpu_ms + o.cpu_ms,
            memory_ms: self.memory_ms + o.memory_ms,
            allocated: self.allocated + o.allocated,
        }
    }

    pub fn used(&self) -> Used {
        Used {
            instance_hours: self.instance_ms / 3_600_000.0,
            cpu_core_hours: self.cpu_ms as f64 / 1000.0 / 3_600_000.0,
            memory_gib_hours: self.memory_ms as f64 / 1024.0 / 3_600_000.0,
        }
    }

    /// Usage over `allocated` instances for `window_ms`.
    pub fn ratios(&self, window_ms: u64, instance: &Resources) -> Ratios {
        self.ratios_against(self.allocated as f64, window_ms, instance)
    }

    fn ratios_against(&self, instances: f64, window_ms: u64, instance: &Resources) -> Ratios {
        let capacity = instances * window_ms as f64;
        let ratio =
            |used: f64, unit: u64| (capacity > 0.0 && unit > 0).then(|| used / (capacity * unit as f64));
        Ratios {
            instances: (capacity > 0.0).then(|| self.instance_ms / capacity),
            cpu: ratio(self.cpu_ms as f64, instance.cpu),
            memory: ratio(self.memory_ms as f64, instance.memory),
        }
    }
}

/// usage/capacity for instances (dominant resource), cpu and memory; `null` without capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Ratios {
    pub instances: Option<f64>,
    pub cpu: Option<f64>,
    pub memory: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TierSummary {
    pub tier: u8,
    pub percentile: f64,
    /// Leaves planned from history (in use or vacant).
    pub leaves: usize,
    pub instances: u64,
    pub used: Used,
    pub usage_capacity: Ratios,
}

/// The percentile must fall and usage/capacity rise from each tier to the next.
#[derive(Clone, Debug, Serialize)]
pub struct TierOrder {
    pub ok: bool,
    pub steps: Vec<TierStep>,
    /// One sentence per violation.
    pub violations: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TierStep {
    pub from: u8,
    pub to: u8,
    pub percentile_falls: bool,
    /// `null` when either tier has no allocation to measure against.
    pub ratio_rises: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The summed tier-1 (or tier-1 and tier-2) usage at its percentile exceeds the cluster.
    Grow,
    /// The cluster's usage/capacity is below the shrink floor.
    Shrink,
    Keep,
    /// The history cannot support a verdict (too short a window, rows larger than the cluster).
    None,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Grow => "grow",
            Verdict::Shrink => "shrink",
            Verdict::Keep => "keep",
            Verdict::None => "none",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ClusterSummary {
    pub verdict: Verdict,
    /// The numbers behind the verdict, in one sentence.
    pub reason: String,
    /// The cluster's size in instances (the binding resource).
    pub instances: f64,
    /// Σ allocations of the leaves planned from history.
    pub allocated: u64,
    /// Σ of the tier-1 and tier-2 leaves' own allocations (as if every peak coincided).
    pub tier1_tier2_allocated: u64,
    /// The summed usage of the tier-1 leaves, at tier 1's percentile: what capacity must cover.
    pub tier1_summed: SummedUsage,
    /// The summed usage of the tier-1 and tier-2 leaves, at tier 2's percentile.
    pub tier1_2_summed: SummedUsage,
    pub used: Used,
    /// Usage over the cluster's own size for the window.
    pub usage_capacity: Ratios,
    /// Usage over the allocated instances.
    pub allocated_usage_capacity: Ratios,
    pub shrink_floor: f64,
}

/// Tier summaries, the tier-order check and the cluster summary from per-leaf
/// `(tier, totals, allocated)`.
pub fn summarize(
    cfg: &ClusterConfig,
    s: &PlanSettings,
    window: &Window,
    leaves: &[(u8, Totals, u64)],
    summed: (SummedUsage, SummedUsage),
    withhold: Option<&str>,
) -> (BTreeMap<u8, TierSummary>, TierOrder, ClusterSummary) {
    let ms = window.millis();
    let mut tiers = BTreeMap::new();
    for tier in 1..=3u8 {
        let mine: Vec<&(u8, Totals, u64)> = leaves.iter().filter(|l| l.0 == tier).collect();
        let t = mine.iter().fold(Totals::default(), |acc, l| acc.plus(&l.1));
        tiers.insert(
            tier,
            TierSummary {
                tier,
                percentile: s.percentile_for(Some(tier)),
                leaves: mine.len(),
                instances: t.allocated,
                used: t.used(),
                usage_capacity: t.ratios(ms, &s.instance),
            },
        );
    }

    let mut steps = Vec::new();
    let mut violations = Vec::new();
    for (from, to) in [(1u8, 2u8), (2, 3)] {
        let (a, b) = (&tiers[&from], &tiers[&to]);
        let percentile_falls = b.percentile < a.percentile;
        if !percentile_falls {
            violations.push(format!(
                "the tier-{to} percentile ({}) is not below tier {from}'s ({})",
                b.percentile, a.percentile
            ));
        }
        let ratio_rises = match (a.usage_capacity.instances, b.usage_capacity.instances) {
            (Some(x), Some(y)) => Some(y >= x),
            _ => None,
        };
        if ratio_rises == Some(false) {
            violations.push(format!(
                "tier-{to} usage/capacity ({:.3}) is below tier {from}'s ({:.3}): tier {to} has more headroom",
                b.usage_capacity.instances.unwrap_or(0.0),
                a.usage_capacity.instances.unwrap_or(0.0)
            ));
        }
        steps.push(TierStep { from, to, percentile_falls, ratio_rises });
    }
    let order = TierOrder { ok: violations.is_empty(), steps, violations };

    let all = leaves.iter().fold(Totals::default(), |acc, l| acc.plus(&l.1));
    let total = cfg.total_resources();
    let size = cluster_instances(&total, &s.instance);
    let tier12 = tiers[&1].instances + tiers[&2].instances;
    let usage_capacity = Ratios {
        instances: (size > 0.0 && ms > 0).then(|| all.instance_ms / (size * ms as f64)),
        cpu: (total.cpu > 0 && ms > 0).then(|| all.cpu_ms as f64 / (total.cpu as f64 * ms as f64)),
        memory: (total.memory > 0 && ms > 0)
            .then(|| all.memory_ms as f64 / (total.memory as f64 * ms as f64)),
    };
    let used_avg = if ms > 0 { all.instance_ms / ms as f64 } else { 0.0 };
    let ratio = usage_capacity.instances.unwrap_or(0.0);
    let (t1, t12) = summed;
    let (verdict, reason) = if let Some(why) = withhold {
        (Verdict::None, format!("no verdict: {why}"))
    } else if t1.instances as f64 > size || t12.instances as f64 > size {
        let (which, sum) =
            if t1.instances as f64 > size { ("tier-1", &t1) } else { ("tier-1 and tier-2", &t12) };
        (
            Verdict::Grow,
            format!(
                "the {which} leaves' usage added up needs {} instances at the {}th percentile, more than the cluster's {}",
                sum.instances,
                fmt_num(sum.percentile),
                fmt_num(size)
            ),
        )
    } else if ratio < s.shrink_floor {
        (
            Verdict::Shrink,
            format!(
                "cluster usage/capacity is {ratio:.3}, below the shrink floor {} ({} of {} instances used on average)",
                s.shrink_floor,
                fmt_num(used_avg),
                fmt_num(size)
            ),
        )
    } else {
        (
            Verdict::Keep,
            format!(
                "the tier-1 and tier-2 leaves' usage added up fits ({} of {} instances at the {}th percentile) and \
                 usage/capacity {ratio:.3} is at least the shrink floor {}",
                t12.instances,
                fmt_num(size),
                fmt_num(t12.percentile),
                s.shrink_floor
            ),
        )
    };
    let cluster = ClusterSummary {
        verdict,
        reason,
        instances: size,
        allocated: all.allocated,
        tier1_tier2_allocated: tier12,
        tier1_summed: t1,
        tier1_2_summed: t12,
        used: all.used(),
        usage_capacity,
        allocated_usage_capacity: all.ratios(ms, &s.instance),
        shrink_floor: s.shrink_floor,
    };
    (tiers, order, cluster)
}

/// How many instances the cluster's resources make: the binding resource decides.
pub fn cluster_instances(total: &Resources, instance: &Resources) -> f64 {
    let parts = [(total.cpu, instance.cpu), (total.memory, instance.memory)];
    parts
        .iter()
        .filter(|(_, unit)| *unit > 0)
        .map(|&(t, unit)| t as f64 / unit as f64)
        .fold(f64::INFINITY, f64::min)
}

/// A number with at most one decimal, without a trailing `.0`.
pub fn fmt_num(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}
