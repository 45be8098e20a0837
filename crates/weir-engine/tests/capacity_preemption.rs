//! Capacity mode's proportional preemption (`capacity_preemption.rs`), scenario by scenario.
//! Each names the class or method of YARN's `monitor/capacity/` package whose behaviour it
//! checks. Most set `natural_termination_factor: 1`, `total_preemption_per_round: 1` and
//! `max_ignored_over_capacity: 0`, as `TestProportionalCapacityPreemptionPolicy.setup` does
//! ("report ideal preempt"), so a round takes the whole excess; the others check those knobs.

mod harness;

use std::collections::BTreeMap;

use harness::{mem, Env};
use weir_engine::capacity_preemption::{compute_ideal, IdealInputs, IdealQueue};
use weir_model::Time;

/// One node of 100 MiB, users unbounded within their queue, jobs without AMs unless a test
/// submits one; `knobs` is the rest of `scheduler.preemption`.
fn cluster(knobs: &str, queues: &str) -> Env {
    Env::new(&format!(
        "version: 1\nscheduler:\n  mode: capacity\n  max_am_percent: 1\n  preemption: {{enabled: true{knobs}}}\n\
         nodes: [{{count: 1, resources: {{cpu: 1000000, memory: 100}}}}]\nqueues:\n{queues}"
    ))
}

const IDEAL: &str =
    ", natural_termination_factor: 1, total_preemption_per_round: 1, max_ignored_over_capacity: 0";

/// Three queues a, b, c with these guarantees; b and c hold `b_used` and `c_used` MiB in 1 MiB
/// containers (jobs 2 and 3), then at t=1 a's job 1 asks for `a_asks`.
fn three(knobs: &str, caps: [u32; 3], b_extra: &str, b_used: u32, c_used: u32, a_asks: u32) -> Env {
    let queues = format!(
        "  - {{name: a, capacity: {}, user_limit_factor: -1}}\n  - {{name: b, capacity: {}, user_limit_factor: -1{b_extra}}}\n  - {{name: c, capacity: {}, user_limit_factor: -1}}\n",
        caps[0], caps[1], caps[2]
    );
    let mut env = cluster(knobs, &queues);
    env.submit_without_am(2, "root.b", &[(mem(1), b_used)]);
    env.submit_without_am(3, "root.c", &[(mem(1), c_used)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_starts().len() as u32, b_used + c_used);
    env.nothing_else();
    if a_asks > 0 {
        env.at(1);
        env.submit_without_am(1, "root.a", &[(mem(1), a_asks)]);
        env.schedule();
        env.take_runnable();
        env.nothing_else();
    }
    env
}

/// Marks per victim job.
fn marks_by_job(env: &mut Env) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for (job, _) in env.take_preempts() {
        *out.entry(job).or_insert(0) += 1;
    }
    out
}

/// Run the engine at each wakeup up to `until` seconds, collecting everything it decides.
fn run_until(env: &mut Env, until: u64) {
    while let Some(t) = env.engine.next_wakeup() {
        if t > Time(until * 1000) {
            break;
        }
        env.now = t;
        env.schedule();
    }
}

/// `PreemptableResourceCalculator.computeIdealResourceDistribution`: guarantees 55/25/20,
/// used 0/54/46, a asks for 10: ideal 10/50/40, so 4 MiB come from b and 6 from c — the
/// newest containers first (`FifoCandidatesSelector.preemptFrom`, `sortContainers`) — and
/// are killed `max_wait_before_kill` after the round that marked them
/// (`ProportionalCapacityPreemptionPolicy.preemptOrkillSelectedContainerAfterWait`), when a
/// gets them.
#[test]
fn a_queue_below_its_guarantee_takes_back_from_those_above_in_proportion() {
    let mut env = three(IDEAL, [55, 25, 20], "", 54, 46, 10);
    assert_eq!(env.engine.next_wakeup(), Some(Time(3_000)), "the next round (monitoring_interval 3s)");
    env.at(3);
    env.schedule();
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 4), (3, 6)]));
    env.nothing_else();
    let why = env.explain(2);
    assert!(
        why.contains(
            "preempted by the proportional capacity policy for job-1 of root.a, below its guarantee: this job's \
             queue held 54 MiB, above its ideal allocation of 50 MiB (guarantee 25 MiB)"
        ),
        "{why}"
    );
    assert!(
        env.explain(1).contains("is being preempted from other jobs on its behalf"),
        "{}",
        env.explain(1)
    );

    // Rounds at 6, 9, 12 and 15 s choose the same containers again: nothing new.
    run_until(&mut env, 17);
    env.nothing_else();
    run_until(&mut env, 18);
    let kills = env.take_kills();
    assert_eq!(kills.len(), 10, "killed at 3 + 15 s");
    assert_eq!(env.count_starts(1), 10, "a gets the room in the same pass");
    env.nothing_else();
    assert_eq!(env.usage("root.a"), mem(10));
    assert_eq!(env.usage("root.b"), mem(50));
    assert_eq!(env.usage("root.c"), mem(40));
    // Balanced: the rounds stop.
    run_until(&mut env, 30);
    env.nothing_else();
    assert_eq!(env.engine.next_wakeup(), None);
}

/// `TempQueuePerPartition.updatePreemptableExtras` and `computeFixpointAllocation`: what b
/// holds above its guarantee cannot be taken when b disallows preemption (YARN's
/// `disable_preemption`, as written here; weir's `allow_preemption_from: false` and tier rule),
/// so its ideal keeps it and all 10 come from c.
#[test]
fn a_protected_queue_keeps_its_excess_and_the_others_give_all() {
    let mut env = three(IDEAL, [55, 25, 20], ", disable_preemption: true", 54, 46, 10);
    env.at(3);
    env.schedule();
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(3, 10)]));
    env.nothing_else();
}

/// `computeFixpointAllocation` with no demand: guarantees 40/40/20 using 0/60/40, nobody asks —
/// the idle guarantee is lent, nothing is preempted, and no round is scheduled again.
#[test]
fn without_demand_nothing_is_preempted() {
    let mut env = three(IDEAL, [40, 40, 20], "", 60, 40, 0);
    run_until(&mut env, 60);
    env.nothing_else();
    assert_eq!(env.engine.next_wakeup(), None);
}

/// `PreemptableResourceCalculator.calculateResToObtainByPartitionForLeafQueues`: a leaf within
/// guarantee × (1 + max_ignored_over_capacity) loses nothing (the dead zone), even though its
/// ideal is below what it holds.
#[test]
fn the_dead_zone_spares_a_queue_slightly_over_its_guarantee() {
    let queues = "  - {name: a, capacity: 50, user_limit_factor: -1}\n  - {name: b, capacity: 50, user_limit_factor: -1}\n";
    let knobs =
        ", natural_termination_factor: 1, total_preemption_per_round: 1, max_ignored_over_capacity: 0.1";
    let mut env = cluster(knobs, queues);
    env.submit_without_am(1, "root.a", &[(mem(1), 46)]);
    env.submit_without_am(2, "root.b", &[(mem(1), 54)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.request(1, &[(mem(1), 10)]);
    env.schedule();
    run_until(&mut env, 30);
    env.nothing_else();

    // Without the dead zone, b gives back its 4 over the guarantee.
    let knobs =
        ", natural_termination_factor: 1, total_preemption_per_round: 1, max_ignored_over_capacity: 0";
    let mut env = cluster(knobs, queues);
    env.submit_without_am(1, "root.a", &[(mem(1), 46)]);
    env.submit_without_am(2, "root.b", &[(mem(1), 54)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.request(1, &[(mem(1), 10)]);
    env.schedule();
    run_until(&mut env, 3);
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 4)]));
}

/// The pace, with YARN's defaults: `natural_termination_factor` 0.2 asks each round for
/// 0.2 × excess to the nearest MiB (`calculateResToObtainByPartitionForLeafQueues` with
/// `DefaultResourceCalculator.multiplyAndNormalizeUp`): here guarantees 50/30/20 on 100 MiB,
/// used 0/55/45, a asks for 50: b is 25 over its ideal (→ 5), c 25 (→ 5); after those ten are
/// killed, b and c are 20 over (→ 4 each).
#[test]
fn the_natural_termination_factor_takes_a_fifth_of_the_excess_per_round() {
    let mut env = three(", total_preemption_per_round: 1", [50, 30, 20], "", 55, 45, 50);
    env.at(3);
    env.schedule();
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 5), (3, 5)]));
    env.nothing_else();
    run_until(&mut env, 18);
    assert_eq!(env.take_kills().len(), 10);
    assert_eq!(env.count_starts(1), 10);
    env.nothing_else();
    run_until(&mut env, 21);
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 4), (3, 4)]));
}

/// `PreemptableResourceCalculator.computeIdealResourceDistribution`'s scaling factor and
/// `tryPreemptContainerAndDeductResToObtain`'s cap: at most `total_preemption_per_round` of
/// the cluster per round (5 MiB of the 10 needed: b 4 × 0.5 = 2, c 6 × 0.5 = 3).
#[test]
fn total_preemption_per_round_caps_and_scales_a_round() {
    let mut env = three(
        ", natural_termination_factor: 1, total_preemption_per_round: 0.05, max_ignored_over_capacity: 0",
        [55, 25, 20],
        "",
        54,
        46,
        10,
    );
    env.at(3);
    env.schedule();
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 2), (3, 3)]));
}

/// `preemptOrkillSelectedContainerAfterWait`: a marked container is killed only when a round
/// at least `max_wait_before_kill` after the mark chooses it again. When the demand goes away
/// first, the marks lapse and nothing is killed.
#[test]
fn marks_lapse_when_the_need_passes_before_the_wait() {
    let mut env = three(IDEAL, [55, 25, 20], "", 54, 46, 10);
    env.at(3);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 10);
    env.at(5);
    env.engine.on_requests_cleared(env.now, weir_engine::JobId(1)).unwrap();
    env.schedule();
    run_until(&mut env, 60);
    env.nothing_else();
    assert_eq!(env.usage("root.b"), mem(54));
    assert!(!env.explain(1).contains("on its behalf"), "{}", env.explain(1));
}

/// `FifoCandidatesSelector.selectCandidates`: jobs in reverse order (the newest first,
/// `getPreemptionIterator`), and application masters set aside and taken last
/// (`preemptAMContainers`).
#[test]
fn the_newest_job_loses_first_and_application_masters_last() {
    let queues = "  - {name: a, capacity: 50, user_limit_factor: -1}\n  - {name: b, capacity: 50, user_limit_factor: -1}\n";
    let mut env = cluster(IDEAL, queues);
    env.submit(2, "root.b", &[(mem(1), 70)]);
    env.at(1);
    env.submit(3, "root.b", &[(mem(1), 30)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_starts().len(), 100);
    env.at(2);
    env.submit_without_am(1, "root.a", &[(mem(1), 40)]);
    env.schedule();
    env.take_runnable();
    env.at(3);
    env.schedule();
    // b must give 40: job 3's 29 non-AM containers, then job 2's newest 11; both AMs stay.
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 11), (3, 29)]));
    let snap = env.engine.check_invariants();
    assert!(snap.is_ok());
}

/// A leaf's pending demand counts only up to each user's headroom under the user limit
/// (`AbstractLeafQueue.getTotalPendingResourcesConsideringUserLimit`): with
/// user_limit_factor 0.2, a's one user may hold 11 MiB (20 × 0.55 → a limit of 11), so a is owed
/// 11, not 30.
#[test]
fn pending_demand_counts_only_within_the_user_limit() {
    let queues = "  - {name: a, capacity: 55, user_limit_factor: 0.2}\n  - {name: b, capacity: 45, user_limit_factor: -1}\n";
    let mut env = cluster(IDEAL, queues);
    env.submit_without_am(2, "root.b", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.submit_without_am(1, "root.a", &[(mem(1), 30)]);
    env.schedule();
    env.take_runnable();
    env.at(3);
    env.schedule();
    assert_eq!(marks_by_job(&mut env), BTreeMap::from([(2, 11)]));
}

/// The ideal-allocation computation by hand (`computeFixpointAllocation`, `TempQueuePerPartition.offer`
/// with the leaf cap max(guaranteed, used)): a two-level tree where a parent under its
/// guarantee shields an over-guarantee child from a sibling subtree's demand only up to the
/// parent's own guarantee.
#[test]
fn ideal_allocation_by_hand() {
    // root(100) → p (60: p1 30, p2 30), q (40). Used: p1 50, p2 0, q 50; pending: p2 20, q 0.
    let leaf = |g: u64, used: u64, pending: u64| IdealQueue {
        guaranteed: g,
        max: 100,
        used,
        pending,
        leaf: true,
        ..IdealQueue::default()
    };
    let parent = |g: u64, used: u64, pending: u64| IdealQueue {
        guaranteed: g,
        max: 100,
        used,
        pending,
        ..IdealQueue::default()
    };
    let mut queues =
        vec![parent(100, 100, 20), parent(60, 50, 20), leaf(30, 50, 0), leaf(30, 0, 20), leaf(40, 50, 0)];
    let children = vec![vec![1, 4], vec![2, 3], vec![], vec![], vec![]];
    compute_ideal(IdealInputs {
        queues: &mut queues,
        children: &children,
        total_preemption_allowed: 100,
        max_ignored_over_capacity: 0.0,
        natural_termination_factor: 1.0,
    });
    // Root level: p starts at 50 (under 60), q at 40; 10 left go to p (most under-served,
    // wants 70): p 60, q 40 → q gives 10.
    assert_eq!((queues[1].ideal, queues[4].ideal), (60, 40));
    assert_eq!(queues[4].to_obtain, 10);
    // p's 60: p1 starts at its guarantee 30, p2 at 0; p2 takes its 20 (under its guarantee),
    // p1 the other 10: p1 gives back 10.
    assert_eq!((queues[2].ideal, queues[3].ideal), (40, 20));
    assert_eq!(queues[2].to_obtain, 10);
    assert_eq!(queues[3].to_obtain, 0);
}

/// One random scenario: three leaves with guarantees `caps` (percent, summing to 100) and max
/// capacities, some protected; jobs of 1 MiB containers arrive at `arrivals` (second, leaf,
/// containers); the engine runs at each arrival and each wakeup for 60 s. Returns the decision
/// log, after checking at every pass that no queue holds more than its max capacity and that
/// nothing is marked in a leaf holding no more than its guarantee.
fn random_run(
    caps: [u64; 3],
    maxes: [u64; 3],
    protected: [bool; 3],
    arrivals: &[(u64, usize, u32)],
) -> Vec<String> {
    let names = ["a", "b", "c"];
    let mut queues = String::new();
    for i in 0..3 {
        queues += &format!(
            "  - {{name: {}, capacity: {}, max_capacity: {}, user_limit_factor: -1, allow_preemption_from: {}}}\n",
            names[i],
            caps[i],
            maxes[i].max(caps[i]).max(1),
            !protected[i]
        );
    }
    let mut env = cluster(", total_preemption_per_round: 0.5, natural_termination_factor: 0.5", &queues);
    let mut log = Vec::new();
    let mut next = 0;
    let mut id = 0;
    // The leaf of job N at index N - 1.
    let mut leaf_of: Vec<usize> = Vec::new();
    let mut t = 0u64;
    while t <= 60_000 {
        while next < arrivals.len() && arrivals[next].0 * 1000 <= t {
            let (_, leaf, n) = arrivals[next];
            id += 1;
            leaf_of.push(leaf);
            env.submit_without_am(id, &format!("root.{}", names[leaf]), &[(mem(1), n)]);
            next += 1;
        }
        env.now = Time(t);
        // What each leaf holds before the pass: marks of this pass are taken against it.
        let before: Vec<u64> = names.iter().map(|n| env.usage(&format!("root.{n}")).memory).collect();
        env.schedule();
        for d in env.log.drain(..) {
            if let weir_engine::Decision::PreemptContainer { job, .. } = &d {
                let i = leaf_of[job.0 as usize - 1];
                assert!(
                    before[i] > caps[i],
                    "marked in root.{} holding {} of its guarantee {}",
                    names[i],
                    before[i],
                    caps[i]
                );
                assert!(!protected[i], "marked in protected root.{}", names[i]);
            }
            log.push(format!("{t} {d:?}"));
        }
        for i in 0..3 {
            let used = env.usage(&format!("root.{}", names[i])).memory;
            assert!(used <= maxes[i].max(caps[i]).max(1), "root.{} holds {used} over its max", names[i]);
        }
        let wake = env.engine.next_wakeup().map_or(u64::MAX, |w| w.0);
        let arrive = arrivals.get(next).map_or(u64::MAX, |a| a.0 * 1000);
        t = wake.min(arrive).max(t + 1);
    }
    log
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Properties of the proportional policy (`ProportionalCapacityPreemptionPolicy`): no queue
    /// ever holds more than its max capacity, a queue at or under its guarantee is never a
    /// victim (`TempQueuePerPartition.assignPreemption` keeps min(used + pending, guaranteed)),
    /// a protected queue never is, and the same inputs give the same decisions.
    #[test]
    fn preemption_respects_guarantees_and_maxes_and_is_deterministic(
        split in (0u64..=100, 0u64..=100),
        maxes in proptest::array::uniform3(1u64..=100),
        protected in proptest::array::uniform3(proptest::bool::weighted(0.3)),
        arrivals in proptest::collection::vec((0u64..40, 0usize..3, 1u32..80), 1..8),
    ) {
        let (x, y) = (split.0.min(split.1), split.0.max(split.1));
        let caps = [x, y - x, 100 - y];
        let mut arrivals = arrivals;
        arrivals.sort();
        let first = random_run(caps, maxes, protected, &arrivals);
        let second = random_run(caps, maxes, protected, &arrivals);
        proptest::prop_assert_eq!(first, second);
    }
}

/// The property test's scenario does preempt: c fills the cluster, then a asks for its
/// guarantee; its checks hold while containers are marked and killed.
#[test]
fn the_random_scenario_runner_sees_preemption() {
    let log = random_run([50, 30, 20], [100, 100, 100], [false, false, false], &[(0, 2, 100), (5, 0, 60)]);
    assert!(log.iter().any(|l| l.contains("PreemptContainer")), "{log:#?}");
    assert!(log.iter().any(|l| l.contains("KillContainer")), "{log:#?}");
}
