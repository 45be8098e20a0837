//! Who gets the next container: the Fair Scheduler's comparators.
//!
//! `fair` looks at memory only: claimants with no demand go last; "needy" ones (usage below
//! min(min share, demand)) go first, lowest usage/min-share first; then lowest usage/weight
//! (weight 0 last); then earlier start. `drf` does the same on dominant shares (usage over the
//! cluster, per resource, largest first, divided by weight, compared lexicographically). The
//! caller breaks remaining ties by name (queues) or id (jobs).

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

pub(crate) fn compare(policy: Policy, a: &Standing, b: &Standing, cluster: &Resources) -> Ordering {
    match policy {
        Policy::Drf => drf(a, b, cluster),
        // A parent queue never has fifo (validation forbids it); jobs use `compare_fifo`.
        Policy::Fair | Policy::Fifo | Policy::Priority => fair(a, b),
    }
}

fn fair(a: &Standing, b: &Standing) -> Ordering {
    let zero = |s: &Standing| s.demand.memory == 0;
    zero(a).cmp(&zero(b)).then_with(|| {
        let needy = |s: &Standing| s.usage.memory < s.min.memory.min(s.demand.memory);
        let (na, nb) = (needy(a), needy(b));
        let by_ratio = if na && nb {
            let r = |s: &Standing| s.usage.memory as f64 / s.min.memory.max(1) as f64;
            r(a).total_cmp(&r(b))
        } else if na != nb {
            nb.cmp(&na)
        } else {
            weight_ratio(a.usage.memory as f64, a.weight)
                .total_cmp(&weight_ratio(b.usage.memory as f64, b.weight))
        };
        by_ratio.then(a.start.cmp(&b.start))
    })
}

fn weight_ratio(usage: f64, weight: f64) -> f64 {
    if weight > 0.0 {
        usage / weight
    } else {
        f64::INFINITY
    }
}

fn drf(a: &Standing, b: &Standing, cluster: &Resources) -> Ordering {
    let zero = |s: &Standing| s.demand.is_zero();
    zero(a).cmp(&zero(b)).then_with(|| {
        let needy = |s: &Standing| {
            ResourceKind::ALL.iter().any(|&k| s.usage.get(k) < s.min.get(k).min(s.demand.get(k)))
        };
        let (na, nb) = (needy(a), needy(b));
        let by_ratio = if na && nb {
            let r = |s: &Standing| {
                ResourceKind::ALL
                    .iter()
                    .filter(|&&k| s.min.get(k) > 0)
                    .map(|&k| s.usage.get(k) as f64 / s.min.get(k) as f64)
                    .fold(0.0, f64::max)
            };
            r(a).total_cmp(&r(b))
        } else if na != nb {
            nb.cmp(&na)
        } else {
            let (da, db) = (dominant(a, cluster), dominant(b, cluster));
            da.iter()
                .zip(db.iter())
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        };
        by_ratio.then(a.start.cmp(&b.start))
    })
}

/// Usage over the cluster per resource, largest first, divided by weight.
fn dominant(s: &Standing, cluster: &Resources) -> [f64; 3] {
    let mut v = [0.0; 3];
    for (i, &k) in ResourceKind::ALL.iter().enumerate() {
        let c = cluster.get(k);
        v[i] = if c == 0 { 0.0 } else { weight_ratio(s.usage.get(k) as f64 / c as f64, s.weight) };
    }
    v.sort_by(|x, y| y.total_cmp(x));
    v
}

/// Whether `usage` is below `target` under a policy: on memory (`fair`) or on dominant shares (`drf`).
pub(crate) fn below(policy: Policy, usage: &Resources, target: &Resources, cluster: &Resources) -> bool {
    match policy {
        Policy::Drf => {
            let share = |r: &Resources| {
                ResourceKind::ALL
                    .iter()
                    .filter(|&&k| cluster.get(k) > 0)
                    .map(|&k| r.get(k) as f64 / cluster.get(k) as f64)
                    .fold(0.0, f64::max)
            };
            share(usage) < share(target)
        }
        Policy::Fair | Policy::Fifo | Policy::Priority => usage.memory < target.memory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(usage_mem: u64, demand_mem: u64, min_mem: u64, weight: f64) -> Standing {
        Standing {
            usage: Resources::new(0, usage_mem, 0),
            demand: Resources::new(0, demand_mem, 0),
            min: Resources::new(0, min_mem, 0),
            weight,
            start: 0,
        }
    }

    #[test]
    fn fair_order() {
        let c = Resources::new(0, 100, 0);
        let cmp = |a, b| compare(Policy::Fair, &a, &b, &c);
        // Zero demand goes last.
        assert_eq!(cmp(s(0, 0, 0, 1.0), s(50, 60, 0, 1.0)), Ordering::Greater);
        // Needy before the rest, even with more usage.
        assert_eq!(cmp(s(30, 60, 40, 1.0), s(10, 60, 0, 1.0)), Ordering::Less);
        // Among needy: lower usage/min first.
        assert_eq!(cmp(s(30, 60, 40, 1.0), s(10, 60, 20, 1.0)), Ordering::Greater);
        // Otherwise usage/weight.
        assert_eq!(cmp(s(30, 60, 0, 3.0), s(20, 60, 0, 1.0)), Ordering::Less);
        // Weight 0 last.
        assert_eq!(cmp(s(0, 60, 0, 0.0), s(50, 60, 0, 1.0)), Ordering::Greater);
    }

    #[test]
    fn drf_order_uses_dominant_share() {
        let cluster = Resources::new(100, 100, 0);
        let a = Standing {
            usage: Resources::new(50, 10, 0),
            demand: Resources::new(60, 20, 0),
            min: Resources::ZERO,
            weight: 1.0,
            start: 0,
        };
        let b = Standing {
            usage: Resources::new(20, 30, 0),
            demand: Resources::new(60, 40, 0),
            min: Resources::ZERO,
            weight: 1.0,
            start: 0,
        };
        assert_eq!(compare(Policy::Drf, &a, &b, &cluster), Ordering::Greater);
        assert_eq!(compare(Policy::Fair, &a, &b, &cluster), Ordering::Less);
    }
}
