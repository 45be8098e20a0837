//! The comparators against the cases YARN's sources spell out.

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

fn cmp(a: Standing, b: Standing) -> Ordering {
    compare(Policy::Fair, &a, &b, &Resources::new(0, 100, 0))
}

#[test]
fn fair_order() {
    // Zero demand goes last.
    assert_eq!(cmp(s(0, 0, 0, 1.0), s(50, 60, 0, 1.0)), Ordering::Greater);
    // Needy before the rest, even with more usage.
    assert_eq!(cmp(s(30, 60, 40, 1.0), s(10, 60, 0, 1.0)), Ordering::Less);
    // Among needy: lower usage / min first.
    assert_eq!(cmp(s(30, 60, 40, 1.0), s(10, 60, 20, 1.0)), Ordering::Greater);
    // Otherwise usage/weight.
    assert_eq!(cmp(s(30, 60, 0, 3.0), s(20, 60, 0, 1.0)), Ordering::Less);
    // Weight 0 after a positive weight.
    assert_eq!(cmp(s(0, 60, 0, 0.0), s(50, 60, 0, 1.0)), Ordering::Greater);
}

/// FairSharePolicy.FairShareComparator.compareMinShareUsage divides usage by
/// min(min share, demand), not by the min share alone.
#[test]
fn needy_ratio_is_against_the_min_share_capped_by_demand() {
    // a: 10 of min 100 but demand 20 → 0.5; b: 30 of min 100, demand 100 → 0.3. b first.
    assert_eq!(cmp(s(10, 20, 100, 1.0), s(30, 100, 100, 1.0)), Ordering::Greater);
}

/// FairShareComparator: equal needy ratios fall through to compareFairShareUsage before the
/// start time (weir used to go to the start time at once).
#[test]
fn equal_needy_ratios_then_usage_over_weight_then_start() {
    let mut a = s(20, 100, 40, 1.0);
    let mut b = s(40, 100, 80, 4.0);
    a.start = 1;
    b.start = 2;
    // Both at 0.5 of their min; usage/weight 20 vs 10: b first despite starting later.
    assert_eq!(cmp(a, b), Ordering::Greater);
}

/// compareFairShareUsage: two weight-0 claimants compare usage (weir used to let the first by
/// name take everything).
#[test]
fn two_weight_zero_claimants_compare_usage() {
    assert_eq!(cmp(s(30, 60, 0, 0.0), s(10, 60, 0, 0.0)), Ordering::Greater);
    assert_eq!(cmp(s(10, 60, 0, 0.0), s(30, 60, 0, 0.0)), Ordering::Less);
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

/// DominantResourceFairnessComparatorN: needy means the dominant resource is below its min
/// share. A memory-only min share does not make a cpu-dominant queue needy (weir used to call
/// it needy while any resource was below min(min share, demand)).
#[test]
fn drf_needy_looks_at_the_dominant_resource_only() {
    let cluster = Resources::new(100_000, 100_000, 0);
    let cpu_heavy = Standing {
        usage: Resources::new(60_000, 1_000, 0),
        demand: Resources::new(90_000, 2_000, 0),
        min: Resources::new(0, 50_000, 0),
        weight: 1.0,
        start: 0,
    };
    let other = Standing {
        usage: Resources::new(10_000, 10_000, 0),
        demand: Resources::new(50_000, 50_000, 0),
        min: Resources::ZERO,
        weight: 1.0,
        start: 0,
    };
    assert_eq!(compare(Policy::Drf, &cpu_heavy, &other, &cluster), Ordering::Greater);
    // Below its min on the dominant resource (no demand cap): needy, served first.
    let mem_heavy = Standing { usage: Resources::new(1_000, 30_000, 0), ..cpu_heavy };
    assert_eq!(compare(Policy::Drf, &mem_heavy, &other, &cluster), Ordering::Less);
}

#[test]
fn policy_min_is_whole_not_componentwise() {
    let cluster = Resources::new(100, 100, 0);
    let a = Resources::new(90, 10, 0);
    let b = Resources::new(10, 20, 0);
    assert_eq!(smaller(Policy::Fair, a, b, &cluster), a, "memory decides");
    assert_eq!(smaller(Policy::Drf, a, b, &cluster), b, "dominant share decides");
}

/// `FairKey` (each child's key worked out once, in `best_fair_child`) orders claimants exactly
/// as the `fair` comparator does, ties included: the engine's decisions do not change.
mod fair_key {
    use super::*;
    use proptest::prelude::*;

    fn standing() -> impl Strategy<Value = Standing> {
        // Small values so that ties (equal ratios, zero demand, min 0 or 1) are common.
        let mem = prop_oneof![0u64..4, 0u64..40, Just(1u64 << 40)];
        let weight = prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(1.0),
            Just(0.5),
            Just(3.0),
            Just(f64::INFINITY),
            0.0f64..10.0
        ];
        (mem.clone(), mem.clone(), mem, weight, 0u64..3).prop_map(|(u, d, m, w, start)| Standing {
            usage: Resources::new(7, u, 0),
            demand: Resources::new(9, d, 0),
            min: Resources::new(5, m, 0),
            weight: w,
            start,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn keys_compare_as_the_comparator_does(a in standing(), b in standing()) {
            let cluster = Resources::new(100, 100, 0);
            let by_keys = FairKey::of(&a).cmp(&FairKey::of(&b));
            prop_assert_eq!(by_keys, compare(Policy::Fair, &a, &b, &cluster));
        }

        /// Packed keys (the ordered child sets' keys) order as the comparator does, for the
        /// weights validation lets through (finite or not, never below 0).
        #[test]
        fn packed_keys_compare_as_the_comparator_does(a in standing(), b in standing()) {
            let cluster = Resources::new(100, 100, 0);
            let by_packed = FairKey::of(&a).packed().cmp(&FairKey::of(&b).packed());
            prop_assert_eq!(by_packed, compare(Policy::Fair, &a, &b, &cluster));
        }
    }

    #[test]
    fn the_spelled_out_cases_agree() {
        let pairs = [
            (s(0, 0, 0, 1.0), s(50, 60, 0, 1.0)),
            (s(30, 60, 40, 1.0), s(10, 60, 0, 1.0)),
            (s(30, 60, 40, 1.0), s(10, 60, 20, 1.0)),
            (s(30, 60, 0, 3.0), s(20, 60, 0, 1.0)),
            (s(0, 60, 0, 0.0), s(50, 60, 0, 1.0)),
            (s(10, 20, 100, 1.0), s(30, 100, 100, 1.0)),
        ];
        for (a, b) in pairs {
            assert_eq!(FairKey::of(&a).cmp(&FairKey::of(&b)), cmp(a, b), "{a:?} {b:?}");
            assert_eq!(FairKey::of(&b).cmp(&FairKey::of(&a)), cmp(b, a), "{b:?} {a:?}");
        }
    }
}
