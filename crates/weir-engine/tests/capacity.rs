//! Capacity mode (`scheduler.mode: capacity`): the Capacity Scheduler's sibling order, elastic
//! capacity up to `max_capacity`, user limits and the AM limit, through the same engine as fair
//! mode. Each scenario names the YARN class or method whose behaviour it checks.

mod harness;

use harness::{mem, Env};
use weir_engine::capacity::{user_limit, UserLimitInputs};
use weir_model::Resources;

/// One node of 100 MiB (cpu plentiful) and the given `queues:` body; AMs unlimited unless the
/// queues say otherwise.
fn cluster(queues: &str) -> Env {
    Env::new(&format!(
        "version: 1\nscheduler: {{mode: capacity, max_am_percent: 1}}\nnodes: [{{count: 1, resources: {{cpu: 1000000, memory: 100}}}}]\nqueues:\n{queues}"
    ))
}

/// "And nothing else happened" but jobs becoming runnable.
fn done(env: &mut Env) {
    env.take_runnable();
    env.nothing_else();
}

/// The job of each start, in order.
fn order(env: &mut Env) -> Vec<u64> {
    env.take_starts().into_iter().map(|s| s.0).collect()
}

/// PriorityUtilizationQueueOrderingPolicy.compare with equal priorities: the lower used
/// capacity (usage / guarantee) first; equal ones go to the larger absolute capacity
/// (PriorityQueueComparator's last rule).
#[test]
fn siblings_are_served_lowest_used_capacity_first() {
    let mut env = cluster("  - {name: a, capacity: 60}\n  - {name: b, capacity: 40}\n");
    env.submit(1, "root.a", &[(mem(10), 10)]);
    env.submit(2, "root.b", &[(mem(10), 10)]);
    env.schedule();
    // a 0/60 = b 0/40: a (larger); then b 0 < a 1/6; a 1/6 < b 1/4; b 1/4 < a 1/3; a 1/3 < b 1/2;
    // a 1/2 = b 1/2: a; b 1/2 < a 2/3; a 2/3 < b 3/4; b 3/4 < a 5/6; a 5/6 < b 1. Full.
    assert_eq!(order(&mut env), vec![1, 2, 1, 2, 1, 1, 2, 1, 2, 1]);
    done(&mut env);
    assert_eq!(env.usage("root.a"), mem(60));
    assert_eq!(env.usage("root.b"), mem(40));
}

/// PriorityUtilizationQueueOrderingPolicy.compare with different priorities: while both are
/// under their guarantee the higher priority goes first; once it reaches its guarantee, the
/// one still under goes first.
#[test]
fn a_higher_priority_sibling_goes_first_until_its_guarantee() {
    let mut env = cluster("  - {name: a, capacity: 50, priority: 1}\n  - {name: b, capacity: 50}\n");
    env.submit(1, "root.a", &[(mem(10), 10)]);
    env.submit(2, "root.b", &[(mem(10), 10)]);
    env.schedule();
    assert_eq!(order(&mut env), vec![1, 1, 1, 1, 1, 2, 2, 2, 2, 2]);
    done(&mut env);

    // Without the priority the two alternate (equal capacity: ties to the name).
    let mut env = cluster("  - {name: a, capacity: 50}\n  - {name: b, capacity: 50}\n");
    env.submit(1, "root.a", &[(mem(10), 10)]);
    env.submit(2, "root.b", &[(mem(10), 10)]);
    env.schedule();
    assert_eq!(order(&mut env), vec![1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
}

/// Elastic capacity (LeafQueue/AbstractCSQueue.canAssignToThisQueue against the absolute max
/// capacity): an idle sibling's guarantee is lent up to `max_capacity`, never past it.
#[test]
fn a_queue_grows_into_idle_capacity_up_to_its_max_capacity() {
    let mut env = cluster(
        "  - {name: a, capacity: 40, max_capacity: 70, user_limit_factor: 10}\n  - {name: b, capacity: 60}\n",
    );
    env.submit(1, "root.a", &[(mem(10), 10)]);
    env.schedule();
    assert_eq!(env.count_starts(1), 7, "40 guaranteed + 30 lent = max_capacity 70");
    done(&mut env);
    assert_eq!(env.usage("root.a"), mem(70));
    assert!(env.explain(1).contains("pending because root.a is at its max"), "{}", env.explain(1));
    // b's own work still gets the rest.
    env.submit(2, "root.b", &[(mem(10), 10)]);
    env.schedule();
    assert_eq!(env.count_starts(2), 3);
}

/// UsersManager.computeUserLimit with the default user_limit_factor 1 and min_user_percent
/// 100: one user may take the queue's whole capacity, and FIFO serves the oldest job first
/// (FifoComparator), so a second user waits — the behaviour the Capacity Scheduler's
/// documentation warns of.
#[test]
fn with_the_defaults_the_first_user_takes_the_whole_queue() {
    let mut env = cluster("  - {name: a, capacity: 100}\n");
    env.submit_as(1, "root.a", "alice", None, &[(mem(10), 10)]);
    env.at(1);
    env.submit_as(2, "root.a", "bob", None, &[(mem(10), 10)]);
    env.schedule();
    assert_eq!(env.count_starts(1), 10);
    done(&mut env);
}

/// UsersManager.computeUserLimit with min_user_percent 50 and two active users: the limit is
/// max(ceil(active users' usage / 2), 100 × 50%) = 50 MiB, and
/// AbstractLeafQueue.canAssignToUser blocks a user only while it holds more than the limit
/// (a `>` check), so alice gets one container past it: 60, bob the remaining 40.
#[test]
fn min_user_percent_shares_the_queue_between_active_users() {
    let mut env = cluster("  - {name: a, capacity: 100, min_user_percent: 50}\n");
    env.submit_as(1, "root.a", "alice", None, &[(mem(10), 10)]);
    env.at(1);
    env.submit_as(2, "root.a", "bob", None, &[(mem(10), 10)]);
    env.schedule();
    let starts = order(&mut env);
    assert_eq!(starts, vec![1, 1, 1, 1, 1, 1, 2, 2, 2, 2]);
    done(&mut env);
}

/// UsersManager.computeUserLimit's cap: a user may hold at most capacity × user_limit_factor
/// (40 × 0.5 = 20 MiB; one container past it by the `>` check), even with the cluster idle.
#[test]
fn user_limit_factor_caps_one_user_below_the_queue() {
    let mut env =
        cluster("  - {name: a, capacity: 40, user_limit_factor: 0.5}\n  - {name: b, capacity: 60}\n");
    env.submit_as(1, "root.a", "alice", None, &[(mem(10), 10)]);
    env.schedule();
    assert_eq!(env.count_starts(1), 3);
    done(&mut env);
    let why = env.explain(1);
    assert!(why.contains("pending because user alice holds"), "{why}");
    assert!(why.contains("over the user limit"), "{why}");
    // Another user of the same queue is not held back by alice's limit.
    env.submit_as(2, "root.a", "bob", None, &[(mem(10), 1)]);
    env.schedule();
    assert_eq!(env.count_starts(2), 1);
}

/// AbstractLeafQueue.calculateAndGetAMResourceLimitPerPartition: AMs may hold max_am_percent
/// of what the queue may use (here its max capacity, the whole 100 MiB): 10 MiB, so the second
/// job's 10 MiB AM waits while the first runs.
#[test]
fn the_am_limit_holds_back_a_second_application_master() {
    let mut env = Env::new(
        "version: 1\nscheduler: {mode: capacity}\nnodes: [{count: 1, resources: {cpu: 1000000, memory: 100}}]\nqueues:\n  - {name: a, capacity: 100}\n",
    );
    env.submit_as(1, "root.a", "alice", None, &[(mem(10), 2)]);
    env.at(1);
    env.submit_as(2, "root.a", "bob", None, &[(mem(10), 2)]);
    env.schedule();
    assert_eq!(env.count_starts(1), 2, "the AM and its container");
    done(&mut env);
    let why = env.explain(2);
    assert!(why.contains("over the AM limit"), "{why}");
}

fn inputs() -> UserLimitInputs {
    UserLimitInputs {
        capacity: mem(1000),
        max_capacity: mem(4000),
        used: Resources::ZERO,
        active_used: Resources::ZERO,
        active_weights: 1.0,
        min_user_percent: 100.0,
        user_limit_factor: 1.0,
        minimum_allocation: Resources::ZERO,
        user_weight: 1.0,
    }
}

/// UsersManager.computeUserLimit, worked by hand.
#[test]
fn the_user_limit_formula_by_hand() {
    // Under the guarantee: current capacity = the capacity 1000; max(ceil(600 / 2), 1000 × 100%)
    // = 1000, capped at 1000 × 1.
    let under = UserLimitInputs { used: mem(600), active_used: mem(600), active_weights: 2.0, ..inputs() };
    assert_eq!(user_limit(&under), mem(1000));

    // Over it, with a 128 MiB minimum allocation: consumed = 1500 rounded up = 1536 ≥ 1000, so
    // current capacity = 1536 + 128 = 1664; max(ceil((1500 + 128) / 3) = 543,
    // ceil(floor(1664 × 25) / 100) = 416) = 543; cap 1000 × 2 = 2000; rounded up to 128: 640.
    let over = UserLimitInputs {
        used: mem(1500),
        active_used: mem(1500),
        active_weights: 3.0,
        min_user_percent: 25.0,
        user_limit_factor: 2.0,
        minimum_allocation: mem(128),
        ..inputs()
    };
    assert_eq!(user_limit(&over), mem(640));
    // A user of weight 1.5: floor(640 × 1.5) = 960, down to a multiple of 128: 896.
    assert_eq!(user_limit(&UserLimitInputs { user_weight: 1.5, ..over }), mem(896));

    // One user at 3000 of a 1000 queue: the limit follows usage (3000 + 0), capped by
    // capacity × factor 1 = 1000, or with factor -1 by the max capacity 4000 only.
    let busy = UserLimitInputs { used: mem(3000), active_used: mem(3000), ..inputs() };
    assert_eq!(user_limit(&busy), mem(1000));
    assert_eq!(user_limit(&UserLimitInputs { user_limit_factor: -1.0, ..busy }), mem(3000));
}

/// `max-parallel-apps`: above it a job waits (and is promoted when a slot frees, as in fair
/// mode); explain names capacity mode's setting.
#[test]
fn max_parallel_apps_makes_jobs_wait() {
    let mut env = cluster("  - {name: a, capacity: 100, max_parallel_apps: 1, user_limit_factor: 10}\n");
    env.submit(1, "root.a", &[(mem(10), 1)]);
    env.submit(2, "root.a", &[(mem(10), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1]);
    assert_eq!(env.count_starts(1), 1);
    done(&mut env);
    assert!(
        env.explain(2).contains("pending because root.a is at max_parallel_apps 1"),
        "{}",
        env.explain(2)
    );
    env.finish_job(1);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
}

/// Take every logged rejection, as (job, reason).
fn rejections(env: &mut Env) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    env.log.retain(|d| match d {
        weir_engine::Decision::JobRejected { job, reason } => {
            out.push((job.0, reason.clone()));
            false
        }
        _ => true,
    });
    out
}

/// AbstractLeafQueue.validateSubmitApplication: a leaf with `max_applications` jobs (running
/// and waiting for a `max_parallel_apps` slot alike) rejects the next submission with the
/// reason; once one ends, it takes one again.
#[test]
fn a_leaf_at_max_applications_rejects_submissions() {
    let mut env = cluster("  - {name: a, capacity: 100, max_applications: 2, max_parallel_apps: 1}\n");
    env.submit(1, "root.a", &[(mem(10), 1)]);
    env.submit(2, "root.a", &[(mem(10), 1)]);
    env.submit(3, "root.a", &[(mem(10), 1)]);
    env.schedule();
    let rejected = rejections(&mut env);
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].0, 3);
    assert!(rejected[0].1.contains("root.a already has 2 jobs, its max_applications 2"), "{}", rejected[0].1);
    assert_eq!(env.take_runnable(), vec![1], "job 2 waits for max_parallel_apps, and counts");
    env.finish_job(1);
    env.submit(4, "root.a", &[(mem(10), 1)]);
    env.schedule();
    assert!(rejections(&mut env).is_empty());
}

/// AbstractLeafQueue.validateSubmitApplication with maxApplicationsPerUser =
/// min(max_applications, max_applications × min_user_percent / 100 × user_limit_factor):
/// 10 × 50% × 1 = 5 jobs per user; another user still gets in.
#[test]
fn a_user_at_its_share_of_max_applications_is_rejected() {
    let mut env = cluster("  - {name: a, capacity: 100, max_applications: 10, min_user_percent: 50}\n");
    for id in 1..=6 {
        env.submit_as(id, "root.a", "alice", None, &[(mem(1), 1)]);
    }
    env.schedule();
    let rejected = rejections(&mut env);
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].0, 6);
    assert!(rejected[0].1.contains("user alice already has 5 jobs in root.a"), "{}", rejected[0].1);
    env.submit_as(7, "root.a", "bob", None, &[(mem(1), 1)]);
    env.schedule();
    assert!(rejections(&mut env).is_empty());
    assert_eq!(weir_engine::capacity::max_applications_per_user(10, 50.0, 1.0), 5);
    assert_eq!(weir_engine::capacity::max_applications_per_user(10, 100.0, 3.0), 10, "capped at the leaf's");
    assert_eq!(weir_engine::capacity::max_applications_per_user(10, 100.0, -1.0), 10);
    assert_eq!(weir_engine::capacity::max_applications_per_user(1000, 30.0, 0.5), 150);
}

/// AbstractLeafQueue.validateSubmitApplication and ParentQueue.validateSubmitApplication: a
/// stopped queue, or a leaf under a stopped parent (stopped too, as YARN's state is
/// inherited), takes no new jobs; its siblings do.
#[test]
fn a_stopped_queue_rejects_new_jobs() {
    let mut env = cluster(
        "  - {name: a, capacity: 50, state: stopped, children: [{name: x, capacity: 100}]}\n  - {name: b, capacity: 40, state: stopped}\n  - {name: c, capacity: 10}\n",
    );
    env.submit(1, "root.a.x", &[(mem(10), 1)]);
    env.submit(2, "root.b", &[(mem(10), 1)]);
    env.submit(3, "root.c", &[(mem(10), 1)]);
    env.schedule();
    let rejected = rejections(&mut env);
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(rejected[0].1.contains("root.a.x is stopped: it takes no new jobs"), "{}", rejected[0].1);
    assert!(rejected[1].1.contains("root.b is stopped"), "{}", rejected[1].1);
    assert_eq!(env.take_runnable(), vec![3]);
}

/// `ordering: fair` (FairOrderingPolicy.FairComparator: the app using the least memory first,
/// ties by start time, then FifoComparator's application id). Three jobs of ten 10 MiB
/// containers take turns; under `fifo` (FifoOrderingPolicy) the first takes the whole queue.
#[test]
fn a_fair_ordered_leaf_serves_the_job_using_least_first() {
    let mut env = cluster("  - {name: a, capacity: 100, ordering: fair}\n");
    for id in 1..=3 {
        env.submit_without_am(id, "root.a", &[(mem(10), 10)]);
    }
    env.schedule();
    // 0/0/0: 1 (earliest); 10/0/0: 2; 10/10/0: 3; all at 10: 1, 2, 3; ... until 100 MiB.
    assert_eq!(order(&mut env), vec![1, 2, 3, 1, 2, 3, 1, 2, 3, 1]);
    done(&mut env);

    let mut env = cluster("  - {name: a, capacity: 100}\n");
    for id in 1..=3 {
        env.submit_without_am(id, "root.a", &[(mem(10), 10)]);
    }
    env.schedule();
    assert_eq!(order(&mut env), vec![1; 10], "fifo: the earliest job first, whole");
    done(&mut env);
}

/// `ordering: fair` follows usage as it changes (FairOrderingPolicy.containerReleased
/// reorders the app): a job that lost containers goes before one that kept them, whatever
/// their submit times.
#[test]
fn a_fair_ordered_leaf_reorders_when_a_job_releases_containers() {
    let mut env = cluster("  - {name: a, capacity: 100, ordering: fair}\n");
    env.submit_without_am(1, "root.a", &[(mem(10), 10)]);
    env.submit_without_am(2, "root.a", &[(mem(10), 10)]);
    env.schedule();
    let starts = env.take_starts();
    assert_eq!(starts.iter().map(|s| s.0).collect::<Vec<_>>(), vec![1, 2, 1, 2, 1, 2, 1, 2, 1, 2]);
    done(&mut env);
    // Job 2 gives back three containers (20 MiB left), job 1 keeps 50: each of the three free
    // slots goes to job 2 (at 20, 30 and 40 it uses less than job 1's 50), none to job 1.
    for c in starts.iter().filter(|s| s.0 == 2).take(3) {
        env.finish_container(c.1);
    }
    env.schedule();
    assert_eq!(order(&mut env), vec![2, 2, 2]);
    done(&mut env);
}

/// `size_based_weight` (FairOrderingPolicy.getMagnitude with sizeBasedWeight: memory used /
/// log2(1 + demand), demand = used + pending as ResourceUsage.getCachedDemand adds them): a
/// large job is not held back by a small one as long as plain usage would hold it.
/// Job 1 asks 5 × 20 MiB (demand 100, log2(101) = 6.658), job 2 4 × 5 MiB (demand 20,
/// log2(21) = 4.392).
#[test]
fn size_based_weight_divides_usage_by_the_log_of_demand() {
    let run = |yaml: &str| {
        let mut env = cluster(yaml);
        env.submit_without_am(1, "root.a", &[(mem(20), 5)]);
        env.submit_without_am(2, "root.a", &[(mem(5), 4)]);
        env.schedule();
        let o = order(&mut env);
        done(&mut env);
        o
    };
    // Plain usage: 0/0 → 1 (earlier); 20/0, 20/5, 20/10, 20/15 → 2; 20/20 → 1 (earlier); then 1.
    assert_eq!(run("  - {name: a, capacity: 100, ordering: fair}\n"), vec![1, 2, 2, 2, 2, 1, 1, 1]);
    // Weighted: 0/0 → 1; 3.004/0 → 2; 3.004/1.138 → 2; 3.004/2.277 → 2; 3.004/3.416 → 1;
    // 6.008/3.416 → 2 (its last); then 1.
    assert_eq!(
        run("  - {name: a, capacity: 100, ordering: fair, size_based_weight: true}\n"),
        vec![1, 2, 2, 2, 1, 2, 1, 1]
    );
}

/// The key behind `size_based_weight` orders as FairOrderingPolicy.getMagnitude does.
#[test]
fn size_weighted_usage_orders_as_the_magnitude() {
    use weir_engine::capacity::size_weighted_usage;
    // 20 / log2(101) = 3.004 < 15 / log2(21) = 3.416.
    assert!(size_weighted_usage(20, 100) < size_weighted_usage(15, 20));
    // Nothing used goes first whatever the demand; more used, same demand, goes later.
    assert!(size_weighted_usage(0, 1_000_000) < size_weighted_usage(1, 1_000_000));
    assert!(size_weighted_usage(10, 30) < size_weighted_usage(11, 30));
    // Same use, larger demand: smaller magnitude.
    assert!(size_weighted_usage(10, 1000) < size_weighted_usage(10, 30));
}

/// Two nodes of 100 MiB: node 0 without a label, node 1 labelled `gpu`; `scheduler` and
/// `queues:` bodies given.
fn labelled(scheduler: &str, queues: &str) -> Env {
    Env::new(&format!(
        "version: 1\nscheduler: {{mode: capacity, max_am_percent: 1{scheduler}}}\nnodes:\n  - {{count: 1, resources: {{cpu: 1000000, memory: 100}}}}\n  - {{count: 1, resources: {{cpu: 1000000, memory: 100}}, label: gpu}}\nqueues:\n{queues}"
    ))
}

fn asking(env: &mut Env, label: Option<&str>, n: u32) -> Vec<weir_engine::Request> {
    let mut r = weir_engine::Request::new(mem(10), n);
    if let Some(l) = label {
        r.selector =
            env.engine.selector(&weir_engine::Selector { labels: vec![l.into()], gpu_models: vec![] });
    }
    vec![r]
}

/// The nodes of each start, in order.
fn nodes_of(env: &mut Env) -> Vec<u64> {
    env.take_starts().into_iter().map(|s| s.2 .0).collect()
}

/// An exclusive partition (YARN's default for a node label): a request for no label never
/// runs on its nodes (RegularContainerAllocator with SchedulingMode.RESPECT_PARTITION_EXCLUSIVITY);
/// a request for the label runs only there.
#[test]
fn an_exclusive_label_runs_only_requests_for_it() {
    let mut env = labelled("", "  - {name: a, capacity: 100, user_limit_factor: 10}\n");
    let plain = asking(&mut env, None, 30);
    env.submit_requests(1, "root.a", plain);
    env.schedule();
    assert_eq!(nodes_of(&mut env), vec![0; 10], "the labelled node is not for it");
    assert!(env.explain(1).contains("default partition"), "{}", env.explain(1));
    let gpu = asking(&mut env, Some("gpu"), 30);
    env.submit_requests(2, "root.a", gpu);
    env.schedule();
    assert_eq!(nodes_of(&mut env), vec![1; 10]);
    done(&mut env);
}

/// A non-exclusive label lends its idle room to requests for no label
/// (SchedulingMode.IGNORE_PARTITION_EXCLUSIVITY); weir fills unlabelled nodes first.
#[test]
fn a_non_exclusive_label_lends_its_room_after_the_unlabelled_nodes() {
    let mut env = labelled(
        ", node_labels: {gpu: {exclusive: false}}",
        "  - {name: a, capacity: 100, user_limit_factor: 10}\n",
    );
    let plain = asking(&mut env, None, 15);
    env.submit_requests(1, "root.a", plain);
    env.schedule();
    let mut expected = vec![0; 10];
    expected.extend([1; 5]);
    assert_eq!(nodes_of(&mut env), expected);
    done(&mut env);
}

/// `default_label` (`default-node-label-expression`, applied to requests without one) and
/// `accessible_labels` (a request for a label the queue may not use is refused:
/// SchedulerUtils.validateResourceRequest's InvalidLabelResourceRequestException).
#[test]
fn a_default_label_applies_and_an_inaccessible_label_is_refused() {
    let mut env = labelled(
        "",
        "  - {name: a, capacity: 50, default_label: gpu, accessible_labels: {gpu: {capacity: 100}}}\n  - {name: b, capacity: 50, accessible_labels: {}}\n",
    );
    let plain = asking(&mut env, None, 3);
    env.submit_requests(1, "root.a", plain);
    let gpu = asking(&mut env, Some("gpu"), 3);
    env.submit_requests(2, "root.b", gpu);
    env.schedule();
    assert_eq!(nodes_of(&mut env), vec![1; 3], "a's default label sends its job to the gpu node");
    let rejected = rejections(&mut env);
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].0, 2);
    assert!(
        rejected[0].1.contains("root.b may not use node label `gpu` (its accessible_labels: none)"),
        "{rejected:?}"
    );
    done(&mut env);
}

/// Lent room is taken back for the label's own requests: a non-exclusive partition's nodes go
/// to requests for its label first (YARN offers them RESPECT_PARTITION_EXCLUSIVITY before
/// IGNORE_PARTITION_EXCLUSIVITY), and the proportional policy preempts what borrowed the room
/// (ProportionalCapacityPreemptionPolicy, per partition: the borrower holds more than its
/// guarantee there — here none). a guarantees the default partition, b the gpu one.
#[test]
fn lent_room_is_taken_back_for_the_labels_own_requests() {
    let mut env = labelled(
        ", node_labels: {gpu: {exclusive: false}}, preemption: {enabled: true, monitoring_interval: 3s, max_wait_before_kill: 15s}",
        "  - {name: a, capacity: 100, user_limit_factor: 10, accessible_labels: {gpu: {capacity: 0}}}\n  - {name: b, capacity: 0, max_applications: 10, accessible_labels: {gpu: {capacity: 100}}}\n",
    );
    let plain = asking(&mut env, None, 20);
    env.submit_requests(1, "root.a", plain);
    env.schedule();
    let starts = env.take_starts();
    let on = |n: u64| starts.iter().filter(|s| s.2 .0 == n).map(|s| s.1).collect::<Vec<_>>();
    assert_eq!((on(0).len(), on(1).len()), (10, 10), "node 0 first, then the lent gpu node");
    done(&mut env);

    env.at(1);
    let gpu = asking(&mut env, Some("gpu"), 3);
    env.submit_requests(2, "root.b", gpu);
    env.schedule();
    assert!(env.take_preempts().is_empty(), "no round before 3s");
    done(&mut env);

    env.at(3);
    env.schedule();
    let marked = env.take_preempts();
    // The three newest containers of job 1 on the gpu node (its last three starts).
    let newest: Vec<_> = on(1).into_iter().rev().take(3).collect();
    assert_eq!(marked.iter().map(|m| m.1).collect::<Vec<_>>(), newest);
    assert!(marked.iter().all(|m| m.0 == 1));
    assert!(env.explain(1).contains("non-exclusive node label lent"), "{}", env.explain(1));
    done(&mut env);

    // After max_wait_before_kill, the next round kills them and job 2 takes their room.
    env.at(18);
    env.schedule();
    let kills: Vec<_> = env.take_kills().into_iter().map(|k| k.1).collect();
    assert_eq!(kills.len(), 3);
    assert!(newest.iter().all(|c| kills.contains(c)));
    assert_eq!(nodes_of(&mut env), vec![1; 3]);
    done(&mut env);
}

/// A queue's max capacity in a label's partition caps what its requests for the label hold
/// there (AbstractCSQueue.canAssignToThisQueue for the partition: the queue's max resource of
/// that partition); the rest of the partition goes to a sibling.
#[test]
fn a_label_max_capacity_caps_requests_for_the_label() {
    let mut env = labelled(
        "",
        "  - {name: a, capacity: 50, user_limit_factor: 10, accessible_labels: {gpu: {capacity: 50, max_capacity: 60}}}\n  - {name: b, capacity: 50, user_limit_factor: 10, accessible_labels: {gpu: {capacity: 50}}}\n",
    );
    let gpu = asking(&mut env, Some("gpu"), 10);
    env.submit_requests(1, "root.a", gpu);
    env.schedule();
    assert_eq!(nodes_of(&mut env), vec![1; 6], "60% of the 100 MiB partition");
    assert!(
        env.explain(1)
            .contains("root.a is at its max capacity in node label gpu's partition: 60 MiB (using 60 MiB"),
        "{}",
        env.explain(1)
    );
    let gpu = asking(&mut env, Some("gpu"), 10);
    env.submit_requests(2, "root.b", gpu);
    env.schedule();
    assert_eq!(env.take_starts().iter().filter(|s| s.0 == 2).count(), 4, "b takes the other 40");
    done(&mut env);
}
