//! Who gets the next container: the Fair Scheduler's comparators, step for step.
//!
//! `fair` (`FairSharePolicy.FairShareComparator`) looks at memory only: claimants with no demand
//! go last; "needy" ones (usage below min(min share, demand)) go first, lowest
//! usage / min(min share, demand) first; ties and the rest by usage / weight (two weight-0
//! claimants: by usage; one weight 0: the other first); then earlier start; the caller breaks
//! what is left by name (queues) or id (jobs).
//!
//! `drf` (`DominantResourceFairnessPolicy.DominantResourceFairnessComparatorN`): a claimant is
//! needy when its dominant resource (largest usage / cluster, ties to memory, then cpu) is below
//! its min share of that resource — no demand cap; needy first; among needy, usage / min share
//! per resource, compared in the order of the usage ratios, largest first; otherwise usage /
//! cluster / weight in that same order; then start. Ratios are Java floats (f32), as in YARN.

use std::cmp::Ordering;

use weir_model::{Policy, ResourceKind, Resources};

/// What the comparators need to know about a queue or a job.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Standing {
    pub usage: Resources,
    pub demand: Resources,
    pub min: Resources,
    pub weight: f64,
    pub start: u64,
}

/// YARN's resource order (memory, vcores, then other types): it decides ties between equal
/// usage ratios.
const YARN_ORDER: [ResourceKind; 3] = [ResourceKind::Memory, ResourceKind::Cpu, ResourceKind::Gpu];

pub(crate) fn compare(policy: Policy, a: &Standing, b: &Standing, cluster: &Resources) -> Ordering {
    match policy {
        Policy::Drf => drf(a, b, cluster),
        // A parent queue never has fifo or priority (validation forbids it); jobs in such a
        // leaf are ordered by `ready.rs`'s keys.
        Policy::Fair | Policy::Fifo | Policy::Priority => fair(a, b),
    }
}

/// Java's `(int) Math.signum(x - y)` on doubles: NaN compares equal.
fn signum(x: f64, y: f64) -> Ordering {
    x.partial_cmp(&y).unwrap_or(Ordering::Equal)
}

fn fair(a: &Standing, b: &Standing) -> Ordering {
    // compareDemand: no memory demand goes last.
    let zero = |s: &Standing| s.demand.memory == 0;
    zero(a)
        .cmp(&zero(b))
        .then_with(|| {
            // compareMinShareUsage: min share capped by demand.
            let min = |s: &Standing| s.min.memory.min(s.demand.memory);
            let needy = |s: &Standing| s.usage.memory < min(s);
            match (needy(a), needy(b)) {
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (false, false) => Ordering::Equal,
                (true, true) => {
                    let r = |s: &Standing| {
                        let m = min(s);
                        if m > 1 {
                            s.usage.memory as f64 / m as f64
                        } else {
                            s.usage.memory as f64
                        }
                    };
                    signum(r(a), r(b))
                }
            }
        })
        .then_with(|| fair_share_usage(a, b))
        .then(a.start.cmp(&b.start))
}

/// A claimant's place under `fair`, worked out once: comparing two keys with [`FairKey::cmp`]
/// gives exactly what [`compare`] gives for their standings under `fair`, but the divisions are
/// made once per claimant instead of once per comparison (a parent's best child is found by
/// comparing each child with the best so far).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FairKey {
    no_demand: bool,
    not_needy: bool,
    /// usage / min(min share, demand) when needy (usage when that min is 0 or 1), else 0.
    need: f64,
    usage: f64,
    weight: f64,
    /// usage / weight.
    per_weight: f64,
    start: u64,
}

impl FairKey {
    pub(crate) fn of(s: &Standing) -> FairKey {
        let min = s.min.memory.min(s.demand.memory);
        let needy = s.usage.memory < min;
        let usage = s.usage.memory as f64;
        let need = match (needy, min > 1) {
            (false, _) => 0.0,
            (true, true) => usage / min as f64,
            (true, false) => usage,
        };
        FairKey {
            no_demand: s.demand.memory == 0,
            not_needy: !needy,
            need,
            usage,
            weight: s.weight,
            per_weight: usage / s.weight,
            start: s.start,
        }
    }

    /// The `fair` comparator's order (see `fair`), step for step.
    pub(crate) fn cmp(&self, b: &FairKey) -> Ordering {
        let a = self;
        a.no_demand
            .cmp(&b.no_demand)
            .then(a.not_needy.cmp(&b.not_needy))
            .then_with(|| if a.not_needy { Ordering::Equal } else { signum(a.need, b.need) })
            .then_with(|| {
                let (wa, wb) = (a.weight, b.weight);
                if wa > 0.0 && wb > 0.0 {
                    signum(a.per_weight, b.per_weight)
                } else if wa == wb {
                    signum(a.usage, b.usage)
                } else {
                    signum(-wa, -wb)
                }
            })
            .then(a.start.cmp(&b.start))
    }
}

/// A [`FairKey`] as plain integers, for ordered sets: comparing two packed keys gives exactly
/// what [`FairKey::cmp`] gives (for the weights a queue can have: finite or infinite, never
/// negative or NaN, which validation refuses), so a parent's children can sit in a `BTreeSet`
/// in the order the descent wants them (`fair_children.rs`). Words: the need ratio's bits when
/// needy, 2^63 when not, 2^63 + 1 with no demand (which is never needy); weight 0 as the top
/// bit above usage / weight (usage for a weight of 0); the start time. A non-negative float's
/// bits order as the float and never reach the top bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PackedKey([u64; 3]);

/// Order-preserving bits of a float that is not negative and not NaN (-0 counts as 0).
fn nonneg_bits(x: f64) -> u64 {
    if x <= 0.0 {
        0
    } else {
        x.to_bits()
    }
}

#[cfg(test)]
impl PackedKey {
    pub(crate) fn from_words(words: [u64; 3]) -> PackedKey {
        PackedKey(words)
    }
}

impl FairKey {
    pub(crate) fn packed(&self) -> PackedKey {
        let zero_weight = self.weight <= 0.0 || self.weight.is_nan();
        let need = match (self.no_demand, self.not_needy) {
            (true, _) => (1 << 63) + 1,
            (false, true) => 1 << 63,
            (false, false) => nonneg_bits(self.need),
        };
        let by_weight = if zero_weight { self.usage } else { self.per_weight };
        PackedKey([need, (u64::from(zero_weight) << 63) | nonneg_bits(by_weight), self.start])
    }
}

/// compareFairShareUsage: usage / weight; with a weight 0 on either side, equal weights compare
/// usage and otherwise the non-zero weight goes first.
fn fair_share_usage(a: &Standing, b: &Standing) -> Ordering {
    let (wa, wb) = (a.weight, b.weight);
    let (ua, ub) = (a.usage.memory as f64, b.usage.memory as f64);
    if wa > 0.0 && wb > 0.0 {
        signum(ua / wa, ub / wb)
    } else if wa == wb {
        signum(ua, ub)
    } else {
        signum(-wa, -wb)
    }
}

/// One resource of a DRF claimant: (usage / cluster, that / weight, usage / min share).
type Ratios = [[f32; 3]; 3];

/// The ratios in YARN's resource order, and the dominant resource's position in it.
fn ratios(s: &Standing, cluster: &Resources) -> (Ratios, usize) {
    let mut r = [[0f32; 3]; 3];
    let mut dominant = 0;
    for (i, &k) in YARN_ORDER.iter().enumerate() {
        // A resource the cluster does not have (no gpu) counts as unused, never as NaN, so that
        // the sort below sees a total order.
        let total = cluster.get(k);
        let share = if total == 0 { 0.0 } else { s.usage.get(k) as f32 / total as f32 };
        let min_ratio = s.usage.get(k) as f32 / s.min.get(k) as f32;
        r[i] = [share, share / s.weight as f32, min_ratio];
        if share > r[dominant][0] {
            dominant = i;
        }
    }
    (r, dominant)
}

fn drf(a: &Standing, b: &Standing, cluster: &Resources) -> Ordering {
    let (mut ra, da) = ratios(a, cluster);
    let (mut rb, db) = ratios(b, cluster);
    let needy = |s: &Standing, d: usize| s.usage.get(YARN_ORDER[d]) < s.min.get(YARN_ORDER[d]);
    let by = |ra: &mut Ratios, rb: &mut Ratios, index: usize| {
        // Stable sort by usage ratio, largest first (Java's Arrays.sort on objects is stable).
        let desc = |x: &[f32; 3], y: &[f32; 3]| y[0].partial_cmp(&x[0]).unwrap_or(Ordering::Equal);
        ra.sort_by(desc);
        rb.sort_by(desc);
        ra.iter()
            .zip(rb.iter())
            .map(|(x, y)| signum(f64::from(x[index]), f64::from(y[index])))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    };
    let res = match (needy(a, da), needy(b, db)) {
        (false, false) => by(&mut ra, &mut rb, 1),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (true, true) => by(&mut ra, &mut rb, 2),
    };
    res.then(a.start.cmp(&b.start))
}

/// Whether `usage` is below `target` under a policy's resource calculator: memory (`fair`,
/// `fifo`, `priority`: YARN's DefaultResourceCalculator) or the dominant share (`drf`).
pub(crate) fn below(policy: Policy, usage: &Resources, target: &Resources, cluster: &Resources) -> bool {
    match policy {
        Policy::Drf => dominant_share(usage, cluster) < dominant_share(target, cluster),
        Policy::Fair | Policy::Fifo | Policy::Priority => usage.memory < target.memory,
    }
}

/// The smaller of two resource vectors under a policy's calculator (YARN's `Resources.min`),
/// whole: not componentwise.
pub(crate) fn smaller(policy: Policy, a: Resources, b: Resources, cluster: &Resources) -> Resources {
    if below(policy, &b, &a, cluster) {
        b
    } else {
        a
    }
}

fn dominant_share(r: &Resources, cluster: &Resources) -> f64 {
    ResourceKind::ALL
        .iter()
        .filter(|&&k| cluster.get(k) > 0)
        .map(|&k| r.get(k) as f64 / cluster.get(k) as f64)
        .fold(0.0, f64::max)
}

#[cfg(test)]
#[path = "order_tests.rs"]
mod tests;
