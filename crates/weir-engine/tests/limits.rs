//! Running-app limits, promotion order and the application-master share.

mod harness;

use harness::{mem, Env};

fn tiered(promotion: &str) -> String {
    format!(
        r#"
version: 1
scheduler: {{promotion: {promotion}}}
nodes: [{{count: 1, resources: {{cpu: 100000, memory: 1000}}}}]
queues:
  - name: ads
    max_running_apps: 3
    children:
      - {{name: tier1, tier: 1}}
      - {{name: tier3, tier: 3}}
"#
    )
}

#[test]
fn a_late_tier1_job_is_promoted_before_earlier_tier3_jobs() {
    let mut env = Env::new(&tiered("priority"));
    for id in 1..=10 {
        env.at(id);
        env.submit(id, "root.ads.tier3", &[(mem(1), 1)]);
    }
    env.at(20);
    env.submit(100, "root.ads.tier1", &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 2, 3]);
    env.take_starts();
    env.nothing_else();
    assert!(
        env.explain(100).contains("pending because root.ads is at max_running_apps 3"),
        "{}",
        env.explain(100)
    );

    env.at(30);
    env.finish_job(1);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![100], "tier 1 jumps the seven tier-3 jobs that came first");
    assert_eq!(env.count_starts(100), 1);
    env.nothing_else();

    env.finish_job(2);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![4], "then tier 3 in submit order");
    env.take_starts();
    env.nothing_else();
}

#[test]
fn fifo_promotion_is_yarns_submit_order() {
    let mut env = Env::new(&tiered("fifo"));
    for id in 1..=10 {
        env.at(id);
        env.submit(id, "root.ads.tier3", &[(mem(1), 1)]);
    }
    env.at(20);
    env.submit(100, "root.ads.tier1", &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 2, 3]);
    env.take_starts();
    env.finish_job(1);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![4], "the tier-1 job waits behind every earlier job");
}

#[test]
fn promotion_only_admits_jobs_whose_whole_path_has_room() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 100000, memory: 1000}}]
queues:
  - name: org
    max_running_apps: 2
    children:
      - {name: x, max_running_apps: 1}
      - {name: y}
"#,
    );
    env.submit(1, "org.x", &[(mem(1), 1)]);
    env.submit(2, "org.y", &[(mem(1), 1)]);
    env.submit(3, "org.x", &[(mem(1), 1)]);
    env.submit(4, "org.y", &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 2]);
    env.take_starts();
    // y's job ends: org has room, but job 3 in x is still blocked by x's own limit of 1.
    env.finish_job(2);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![4]);
    env.take_starts();
    env.nothing_else();
    assert!(
        env.explain(3).contains("root.org.x is at max_running_apps 1")
            || env.explain(3).contains("root.org is at max_running_apps 2")
    );
}

#[test]
fn user_limit_holds_jobs_back() {
    let mut env = Env::new(
        r#"
version: 1
scheduler: {user_max_running_apps: 1}
nodes: [{count: 1, resources: {cpu: 100000, memory: 1000}}]
queues: [{name: a}, {name: b}]
"#,
    );
    env.submit_as(1, "a", "ann", None, &[(mem(1), 1)]);
    env.submit_as(2, "b", "ann", None, &[(mem(1), 1)]);
    env.submit_as(3, "b", "bob", None, &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 3]);
    env.take_starts();
    assert!(env.explain(2).contains("user ann is at user_max_running_apps 1"), "{}", env.explain(2));
    env.finish_job(1);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
}

#[test]
fn am_share_limits_application_masters() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]
queues: [{name: a, max_am_share: 0.25}]
"#,
    );
    // Each job's first container is its AM: 10 MiB. A fair share of 100 allows 25 MiB of AMs.
    for id in 1..=4 {
        env.submit(id, "a", &[(mem(10), 2)]);
    }
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts();
    let jobs_started: std::collections::BTreeSet<u64> = starts.iter().map(|s| s.0).collect();
    assert_eq!(jobs_started.len(), 2, "only two 10 MiB AMs fit under 25 MiB: {starts:?}");
    assert_eq!(starts.len(), 4, "the two started jobs also get their second container");
    env.nothing_else();
    let waiting = (1..=4).find(|j| !jobs_started.contains(j)).unwrap();
    assert!(env.explain(waiting).contains("max_am_share 0.25"), "{}", env.explain(waiting));
}

#[test]
fn a_long_run_of_jobs_that_fail_in_a_pass_is_passed_over_and_tried_again_in_the_next() {
    // Forty jobs at the front of a fifo leaf each ask for more than the leaf's max: every one
    // fails in every pass (a lookup walks past them, and sets them aside once it has walked
    // past many). The jobs behind them are still served in the same pass, and the forty are
    // back in their lane, in order, when the pass ends (`check_invariants` after every step).
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 100000, memory: 10000}}]
queues: [{name: a, policy: fifo, max: {memory: 120}}]
"#,
    );
    for id in 1..=40 {
        env.at(id);
        env.submit_without_am(id, "root.a", &[(mem(200), 1)]);
    }
    env.at(50);
    env.submit_without_am(41, "root.a", &[(mem(50), 3)]);
    env.at(51);
    env.submit_without_am(42, "root.a", &[(mem(10), 1)]);
    env.schedule();
    let starts = env.take_starts();
    let jobs: Vec<u64> = starts.iter().map(|s| s.0).collect();
    assert_eq!(jobs, vec![41, 41, 42], "two of 41's three fit under the max, then 42's");
    env.take_runnable();
    env.nothing_else();
    assert!(env.explain(1).contains("max"), "{}", env.explain(1));

    env.at(60);
    env.finish_container(starts[0].1);
    env.schedule();
    assert_eq!(env.take_starts().iter().map(|s| s.0).collect::<Vec<_>>(), vec![41]);
    env.nothing_else();
    assert!(env.explain(1).contains("max"), "{}", env.explain(1));
}
