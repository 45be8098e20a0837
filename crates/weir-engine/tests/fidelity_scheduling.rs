//! Scheduling rules checked against the Hadoop YARN Fair Scheduler's source (issue 8): AM
//! shares, reservations, the comparators, fifo leaves, start times, running-app limits of 0,
//! the minimum allocation and f32 weights. Each test names the YARN class and method it follows.

mod harness;

use harness::{mem, res, Env};
use weir_engine::JobId;
use weir_model::{ClusterConfig, Resources};

/// FSLeafQueue.canRunAppAM with queueMaxAMShareDefault 0.5: a missing max_am_share is 0.5, so
/// ten jobs on one node do not all start an AM with no room left for any task.
#[test]
fn application_masters_take_at_most_half_the_leaf_by_default() {
    let mut env = Env::new(
        "version: 1\nnodes: [{count: 1, resources: {cpu: 100000, memory: 10240}}]\nqueues: [{name: a}]\n",
    );
    for id in 1..=10 {
        env.submit(id, "a", &[(mem(1024), 1), (mem(1024), 4)]);
    }
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts_am();
    let ams = starts.iter().filter(|s| s.2).count();
    // computeMaxAMResource: ceil(0.5 × fair share 10,240 MiB) = 5,120 MiB of AMs: five.
    assert_eq!(ams, 5, "{starts:?}");
    assert_eq!(starts.len(), 10, "the five running jobs fill the rest with tasks");
    env.nothing_else();
    assert!(env.explain(10).contains("max_am_share 0.5"), "{}", env.explain(10));
}

/// weir's own: a job submitted without an application master (weir serve's jobs, whose tasks are
/// independent processes; rigid parallel jobs of a trace) has no first container to hold to the
/// AM share. With one, a container larger than 0.5 × the leaf's share never starts, as in YARN
/// (FSLeafQueue.canRunAppAM); without one, it starts, and is not marked as an AM.
#[test]
fn a_job_without_an_application_master_is_not_held_to_the_am_share() {
    let yaml = "version: 1\nnodes: [{count: 1, resources: {cpu: 2000, memory: 2048}}]\nqueues: [{name: a}]\n";
    let mut with_am = Env::new(yaml);
    with_am.submit(1, "a", &[(res(1000, 2048), 1)]);
    with_am.schedule();
    with_am.take_runnable();
    assert!(with_am.take_starts_am().is_empty(), "2,048 MiB is over ceil(0.5 × 2,048)");
    assert!(with_am.explain(1).contains("application master"), "{}", with_am.explain(1));

    let mut without = Env::new(yaml);
    without.submit_without_am(1, "a", &[(res(1000, 2048), 1)]);
    without.schedule();
    without.take_runnable();
    assert_eq!(without.take_starts_am(), vec![(1, res(1000, 2048), false)]);
    without.nothing_else();
}

/// FSLeafQueue.canRunAppAM: -1 turns the check off (and then every AM runs, as weir used to).
#[test]
fn minus_one_turns_the_am_share_off() {
    let mut env = Env::new(
        "version: 1\nnodes: [{count: 1, resources: {cpu: 100000, memory: 10240}}]\nqueues: [{name: a, max_am_share: -1}]\n",
    );
    for id in 1..=10 {
        env.submit(id, "a", &[(mem(1024), 1), (mem(1024), 4)]);
    }
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts_am();
    assert_eq!(starts.iter().filter(|s| s.2).count(), 10);
    assert_eq!(starts.len(), 10, "every AM runs and no task does");
}

/// FSLeafQueue.computeMaxAMResource: under a fair parent the leaf's fair share has no cores
/// (FairSharePolicy.computeShares is memory-only), so the cpu limit is 0.5 × the cores free in
/// the cluster at the time of the check.
#[test]
fn under_a_fair_parent_the_am_cpu_limit_comes_from_free_cores() {
    let mut env = Env::new(
        "version: 1\nnodes: [{count: 1, resources: {cpu: 4000, memory: 100000}}]\nqueues: [{name: a}]\n",
    );
    for id in 1..=4 {
        env.submit(id, "a", &[(res(1000, 1024), 1), (res(1000, 1024), 10)]);
    }
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts_am();
    // Job 1's AM: 1,000 ≤ ceil(0.5 × 4,000). Job 2's: 2,000 > ceil(0.5 × 3,000 free). Job 1's
    // tasks take the three cores left.
    assert_eq!(starts.iter().filter(|s| s.2).count(), 1, "{starts:?}");
    assert!(starts.iter().all(|s| s.0 == 1), "{starts:?}");
    assert_eq!(starts.len(), 4);
    assert!(env.explain(2).contains("application master"), "{}", env.explain(2));
}

/// FSAppAttempt.assignContainer (isAmRunning) and FSLeafQueue.addAMResourceUsage: a lost AM
/// is replaced by an AM — checked against the AM share and counted as AM usage — not by an
/// ordinary container.
#[test]
fn a_lost_application_master_is_replaced_by_an_application_master() {
    let mut env = Env::new(
        "version: 1\nnodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]\nqueues: [{name: a, max_am_share: 0.1}]\n",
    );
    env.submit(1, "a", &[(mem(10), 1), (mem(5), 1)]);
    env.schedule();
    env.take_runnable();
    let first = env.take_starts();
    assert_eq!(first.len(), 2, "job 1's AM and its task");
    env.at(1);
    env.submit(2, "a", &[(mem(10), 1)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    assert!(env.explain(2).contains("max_am_share 0.1"), "AM room is 10 MiB: {}", env.explain(2));
    // Job 1's AM is lost and asked for again: job 2 (no usage; job 1 still runs its task)
    // takes the AM room first, and
    // job 1's new AM must wait for it like any other AM.
    env.at(2);
    env.finish_container(first[0].1);
    env.request_am(1, mem(10));
    env.schedule();
    assert_eq!(env.take_starts_am(), vec![(2, mem(10), true)]);
    env.nothing_else();
    assert!(env.explain(1).contains("its application master ({cpu: 0, memory: 10})"), "{}", env.explain(1));
}

const RESERVE: &str = r#"
version: 1
scheduler: {queue_max_am_share_default: -1}
nodes: [{count: 1, resources: {cpu: 100000, memory: 8192}}]
queues: [{name: small}, {name: big}]
"#;

/// FSAppAttempt.assignContainer → reserve (isReservable: below its fair share) and
/// FSQueue.assignContainerPreCheck (nobody else on a reserved node): a 6 GiB container is not
/// starved by a stream of 1 GiB ones.
#[test]
fn a_large_container_reserves_a_node_and_gets_it_when_enough_has_drained() {
    let mut env = Env::new(RESERVE);
    env.submit(1, "small", &[(mem(1024), 100)]);
    env.schedule();
    env.take_runnable();
    let small = env.take_starts();
    assert_eq!(small.len(), 8);
    env.at(1);
    env.submit(2, "big", &[(mem(6144), 2)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    env.nothing_else();
    assert_eq!(env.reserved(), vec![(0, 2)], "the big job holds the node");
    assert!(env.explain(2).contains("node-0 is reserved for it"), "{}", env.explain(2));
    // Small containers end; their room is kept for the big one (weir used to hand it back to
    // the small job at once, for hours).
    env.at(2);
    for s in &small[..3] {
        env.finish_container(s.1);
    }
    env.schedule();
    env.nothing_else();
    env.at(3);
    for s in &small[3..6] {
        env.finish_container(s.1);
    }
    env.schedule();
    // Its first container, so its application master.
    assert_eq!(env.take_starts_am(), vec![(2, mem(6144), true)]);
    env.nothing_else();
    // Fulfilled: the reservation ended with the container. The big job is now above its fair
    // share (4,096 MiB), so it reserves nothing more (isReservable); the small one, at 2,048
    // MiB, is below its share and its next container finds no room: it reserves the node.
    assert_eq!(env.reserved(), vec![(0, 1)]);
    let stats = env.engine.reservation_stats();
    assert_eq!((stats.made, stats.fulfilled, stats.released, stats.active), (2, 1, 0, 1));
}

/// FSAppAttempt.isValidReservation: a reservation the job can no longer use is let go, and the
/// node is everyone's again.
#[test]
fn a_reservation_is_dropped_when_the_job_no_longer_wants_the_container() {
    let mut env = Env::new(RESERVE);
    env.submit(1, "small", &[(mem(1024), 100)]);
    env.schedule();
    env.take_runnable();
    let small = env.take_starts();
    env.at(1);
    env.submit(2, "big", &[(mem(6144), 2)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.reserved(), vec![(0, 2)]);
    env.at(2);
    env.engine.on_requests_cleared(env.now, JobId(2)).unwrap();
    env.finish_container(small[0].1);
    env.schedule();
    assert!(env.reserved().is_empty());
    assert_eq!(env.count_starts(1), 1, "the small job gets the freed room");
    env.nothing_else();
    assert_eq!(env.engine.reservation_stats().released, 1);
}

/// FSAppAttempt.reservationExceedsThreshold: a job reserves at most
/// ceil(nodes × reservable-nodes) nodes (0.05 × 40 = 2), one per attempt.
#[test]
fn a_job_reserves_at_most_its_share_of_the_nodes() {
    let mut env = Env::new(
        "version: 1\nscheduler: {queue_max_am_share_default: -1}\nnodes: [{count: 40, resources: {cpu: 100000, memory: 100}}]\nqueues: [{name: small}, {name: big}]\n",
    );
    env.submit(1, "small", &[(mem(10), 400)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 400);
    env.at(1);
    env.submit(2, "big", &[(mem(60), 5)]);
    for t in 1..5 {
        env.at(t);
        env.schedule();
    }
    env.take_runnable();
    env.nothing_else();
    let reserved = env.reserved();
    assert_eq!(reserved.len(), 2, "{reserved:?}");
    assert!(reserved.iter().all(|r| r.1 == 2));
}

/// FairSharePolicy.FairShareComparator.compareMinShareUsage: needy queues compare usage over
/// min(min share, demand), so a queue whose demand is below its min share fills more slowly
/// than weir's usage / min share made it.
#[test]
fn needy_queues_compare_usage_over_min_share_capped_by_demand() {
    let mut env = Env::new(
        "version: 1\nscheduler: {queue_max_am_share_default: -1}\nnodes: [{count: 1, resources: {cpu: 100000, memory: 50}}]\nqueues: [{name: a, min: {memory: 80}}, {name: b, min: {memory: 80}}]\n",
    );
    env.submit(1, "a", &[(mem(1), 20)]);
    env.submit(2, "b", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    // a at u/20, b at u/80: one for a per four for b.
    assert_eq!((env.count_starts(1), env.count_starts(2)), (10, 40));
    env.nothing_else();
}

/// FairShareComparator.compareFairShareUsage: two weight-0 queues compare usage (weir used to
/// give everything to the first by name).
#[test]
fn two_weight_zero_queues_share_by_usage() {
    let mut env = Env::new(
        "version: 1\nscheduler: {queue_max_am_share_default: -1}\nnodes: [{count: 1, resources: {cpu: 100000, memory: 10}}]\nqueues: [{name: z1, weight: 0}, {name: z2, weight: 0}]\n",
    );
    env.submit(1, "z1", &[(mem(1), 100)]);
    env.submit(2, "z2", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    assert_eq!((env.count_starts(1), env.count_starts(2)), (5, 5));
}

/// DominantResourceFairnessComparatorN: a queue is needy only while its dominant resource is
/// below its min share of that resource — no demand cap, no other resource — so a memory min
/// share does not let a cpu-heavy queue take every core.
#[test]
fn a_memory_min_share_does_not_let_a_cpu_heavy_queue_take_every_core() {
    let mut env = Env::new(
        r#"
version: 1
scheduler: {root_policy: drf, queue_max_am_share_default: -1}
nodes: [{count: 1, resources: {cpu: 100000, memory: 102400}}]
queues:
  - {name: memmin, policy: drf, min: {memory: 51200}}
  - {name: other, policy: drf}
"#,
    );
    env.submit(1, "memmin", &[(res(10000, 1024), 100)]);
    env.submit(2, "other", &[(res(1000, 1024), 100)]);
    env.schedule();
    env.take_runnable();
    let (cpu_heavy, light) = (env.count_starts(1), env.count_starts(2));
    // weir used to count memmin needy (memory below min(min, demand)) until every core was gone:
    // 10 and 0. By dominant shares the cores are split about evenly.
    assert_eq!((cpu_heavy, light), (5, 50));
    env.nothing_else();
}

/// FifoPolicy (app priority is always 1 in the Fair Scheduler, FSAppAttempt.getPriority):
/// `fifo` is submit order; weir's priority order is `policy: priority`.
#[test]
fn fifo_leaves_go_by_submit_time_and_priority_leaves_by_priority() {
    for (policy, winner) in [("fifo", 1), ("priority", 2)] {
        let mut env = Env::new(&format!(
            "version: 1\nscheduler: {{queue_max_am_share_default: -1}}\nnodes: [{{count: 1, resources: {{cpu: 100000, memory: 10}}}}]\nqueues: [{{name: a, policy: {policy}}}]\n"
        ));
        env.submit_as(1, "a", "u", Some(1), &[(mem(1), 10)]);
        env.at(1);
        env.submit_as(2, "a", "u", Some(100), &[(mem(1), 10)]);
        env.schedule();
        env.take_runnable();
        assert_eq!(env.count_starts(winner), 10, "{policy}");
        env.nothing_else();
    }
}

/// FSAppAttempt.getStartTime is the attempt's creation (submission), not when it became
/// runnable: of two jobs with equal usage, the one submitted first goes first even if a
/// running-app limit held it back longer.
#[test]
fn ties_break_on_submit_time_not_on_when_a_job_became_runnable() {
    let mut env = Env::new(
        "version: 1\nscheduler: {user_max_running_apps: 1, queue_max_am_share_default: -1, reservable_nodes: 0}\nnodes: [{count: 1, resources: {cpu: 100000, memory: 10}}]\nqueues: [{name: a}, {name: other}]\n",
    );
    env.submit_as(9, "other", "carol", None, &[(mem(1), 9)]);
    env.submit_as(1, "a", "alice", None, &[(mem(1), 1)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.submit_as(2, "a", "alice", None, &[(mem(1), 5)]);
    env.at(2);
    env.submit_as(3, "a", "bob", None, &[(mem(1), 5)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![3], "alice's second job waits for her first");
    env.nothing_else();
    env.at(3);
    env.finish_job(1);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    assert_eq!(env.count_starts(2), 1, "submitted at 1s, before job 3 (2s), though runnable at 3s");
    env.nothing_else();
}

/// AllocationFileQueueParser: maxRunningApps 0 is a valid queue that admits nothing.
#[test]
fn a_queue_with_max_running_apps_zero_admits_nothing() {
    let mut env = Env::new(
        "version: 1\nnodes: [{count: 1, resources: {cpu: 100000, memory: 10}}]\nqueues: [{name: closed, max_running_apps: 0}, {name: open}]\n",
    );
    env.submit(1, "closed", &[(mem(1), 1)]);
    env.submit(2, "open", &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    assert!(env.explain(1).contains("root.closed is at max_running_apps 0"), "{}", env.explain(1));
}

/// SchedulerUtils.normalizeRequest (FairScheduler.getNormalizedResource): at least the minimum
/// allocation, then a multiple of the increment.
#[test]
fn requests_round_up_to_the_minimum_allocation_and_the_increment() {
    let mut env = Env::new(
        "version: 1\nscheduler: {minimum_allocation: {cpu: 1000, memory: 1024}, increment: {cpu: 500, memory: 512}}\nnodes: [{count: 1, resources: {cpu: 100000, memory: 100000}}]\nqueues: [{name: a}]\n",
    );
    env.submit(1, "a", &[(res(100, 100), 1), (res(1200, 1100), 1)]);
    env.schedule();
    env.take_runnable();
    let sizes: Vec<Resources> = env.take_starts().iter().map(|s| s.3).collect();
    assert_eq!(sizes, vec![res(1000, 1024), res(1500, 1536)]);
}

/// ComputeFairShares.computeShare multiplies a Java float weight: under rounding: yarn the
/// weights 0.3 and 3 on 10,240 MiB give YARN's 931 and 9,309 (f64 weights gave 9,310).
#[test]
fn yarn_rounding_uses_float_weights() {
    for rounding in ["yarn", "exact"] {
        let cfg = ClusterConfig::from_yaml(
            "t.yaml",
            &format!("version: 1\nscheduler: {{rounding: {rounding}}}\nnodes: [{{count: 1, resources: {{cpu: 1000, memory: 10240}}}}]\nqueues: [{{name: a, weight: 0.3}}, {{name: b, weight: 3}}]\n"),
        )
        .unwrap();
        let shares = weir_engine::shares_for(&cfg, &[]);
        let got: Vec<u64> = shares.iter().skip(1).map(|s| s.steady.memory).collect();
        if rounding == "yarn" {
            assert_eq!(got, [931, 9309]);
        } else {
            assert_eq!(got.iter().sum::<u64>(), 10240, "exact shares sum to the pool: {got:?}");
        }
    }
}

/// FairSharePolicy.FairShareComparator: siblings that compare equal on everything else (and a
/// queue's start time is always 0, FSQueue.getStartTime) go by name, whatever order the file
/// lists them in. (The engine compares each queue's name rank among its siblings, worked out
/// once: this checks the rank follows the names, not the file.)
#[test]
fn equal_siblings_are_served_by_name_not_by_file_order() {
    let mut env = Env::new(
        "version: 1\nscheduler: {queue_max_am_share_default: -1}\nnodes: [{count: 1, resources: {cpu: 100000, memory: 1024}}]\nqueues:\n  - {name: zeta}\n  - {name: alpha}\n  - {name: mid, children: [{name: b}, {name: a}]}\n",
    );
    env.submit(1, "zeta", &[(mem(1024), 1)]);
    env.submit(2, "alpha", &[(mem(1024), 1)]);
    env.submit(3, "mid.b", &[(mem(1024), 1)]);
    env.submit(4, "mid.a", &[(mem(1024), 1)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_starts().iter().map(|s| s.0).collect::<Vec<_>>(), vec![2]);
    env.nothing_else();
    // alpha's job leaves; among zeta and mid (whose subtree ties on usage), mid comes first by
    // name, and inside it a before b.
    env.finish_job(2);
    env.schedule();
    assert_eq!(env.take_starts().iter().map(|s| s.0).collect::<Vec<_>>(), vec![4]);
}
