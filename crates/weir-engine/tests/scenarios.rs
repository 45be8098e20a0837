//! Engine scenarios, each read as a specification: cluster, inputs, the decisions expected,
//! and nothing else.

mod harness;

use harness::{mem, res, Env};
use weir_engine::{Decision, JobId};
use weir_model::{Duration, QueuePath};

const FOUR_QUEUES: &str = r#"
version: 1
nodes: [{count: 1, resources: {cpu: 40000, memory: 40}}]
queues: [{name: a}, {name: b}, {name: c}, {name: d}]
"#;

#[test]
fn equal_queues_split_the_cluster_and_fill_it() {
    let mut env = Env::new(FOUR_QUEUES);
    env.submit(1, "root.a", &[(mem(1), 100)]);
    env.submit(2, "root.b", &[(mem(1), 100)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 2]);
    // Two active queues alternate: each gets half of the 40 MiB node.
    assert_eq!(env.count_starts(1), 20);
    assert_eq!(env.count_starts(2), 20);
    env.nothing_else();
    assert_eq!(env.snapshot("root.a").instantaneous.memory, 20);
    assert_eq!(env.snapshot("root.c").instantaneous.memory, 0);
    assert_eq!(env.snapshot("root.c").steady.memory, 10);
}

#[test]
fn weights_decide_who_gets_freed_room() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 100000, memory: 30}}]
queues: [{name: a, weight: 2}, {name: b}]
"#,
    );
    env.submit(1, "a", &[(mem(1), 100)]);
    env.submit(2, "b", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 20);
    assert_eq!(env.count_starts(2), 10);
    env.nothing_else();
}

#[test]
fn min_share_is_served_first() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]
queues: [{name: a, min: {memory: 80}}, {name: b}]
"#,
    );
    env.submit(2, "b", &[(mem(1), 200)]);
    env.submit(1, "a", &[(mem(1), 200)]);
    env.schedule();
    env.take_runnable();
    // a is needy until it reaches its min of 80; then both are compared by usage/weight.
    assert_eq!(env.count_starts(1), 80);
    assert_eq!(env.count_starts(2), 20);
    env.nothing_else();
}

#[test]
fn max_caps_a_queue() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]
queues: [{name: a, max: {memory: 30}}, {name: b, max: "50%"}]
"#,
    );
    env.submit(1, "a", &[(mem(1), 200)]);
    env.submit(2, "b", &[(mem(1), 200)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 30);
    assert_eq!(env.count_starts(2), 50);
    env.nothing_else();
    assert!(env.explain(1).contains("root.a is at its max"), "{}", env.explain(1));
}

#[test]
fn no_node_fits_is_explained_not_an_error() {
    let mut env = Env::new(FOUR_QUEUES);
    // The application master (1 MiB) fits; the next container (64 MiB) fits on no node.
    env.submit(1, "a", &[(mem(1), 1), (mem(64), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1]);
    assert_eq!(env.count_starts(1), 1);
    env.nothing_else();
    let why = env.explain(1);
    assert!(why.contains("no node has room for its next container {cpu: 0, memory: 64}"), "{why}");
}

#[test]
fn increments_round_requests_up() {
    let mut env = Env::new(
        r#"
version: 1
scheduler: {increment: {cpu: 1000, memory: 1024}}
nodes: [{count: 1, resources: {cpu: 8000, memory: 8192}}]
queues: [{name: a}]
"#,
    );
    env.submit(1, "a", &[(res(500, 1500), 10)]);
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts();
    assert_eq!(starts.len(), 4, "8192 MiB holds four 2048 MiB containers");
    assert!(starts.iter().all(|s| s.3 == res(1000, 2048)));
    env.nothing_else();
}

#[test]
fn containers_go_to_the_tightest_node() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 8000, memory: 8192}}, {count: 1, resources: {cpu: 8000, memory: 2048}}]
queues: [{name: a}]
"#,
    );
    env.submit(1, "a", &[(res(1000, 2048), 1)]);
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].2 .0, 1, "the 2 GiB node is the best fit");
    env.nothing_else();
}

#[test]
fn finished_containers_free_room_for_the_most_deserving() {
    let mut env = Env::new(FOUR_QUEUES);
    env.submit(1, "a", &[(mem(10), 4)]);
    env.schedule();
    env.take_runnable();
    let first = env.take_starts();
    assert_eq!(first.len(), 4);
    env.submit(2, "b", &[(mem(10), 4)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    env.nothing_else();
    env.finish_container(first[0].1);
    env.finish_container(first[1].1);
    env.schedule();
    assert_eq!(env.count_starts(2), 2);
    env.nothing_else();
}

#[test]
fn unknown_and_parent_queues_are_rejected() {
    let mut env = Env::new(
        r#"
version: 1
nodes: [{count: 1, resources: {cpu: 8000, memory: 8192}}]
queues: [{name: org, children: [{name: leaf}]}]
"#,
    );
    env.submit(1, "root.org", &[(mem(1), 1)]);
    env.submit(2, "root.nope", &[(mem(1), 1)]);
    env.schedule();
    let rejected: Vec<_> = env.log.drain(..).collect();
    assert!(
        matches!(&rejected[0], Decision::JobRejected { job: JobId(1), reason } if reason.contains("not a leaf"))
    );
    assert!(
        matches!(&rejected[1], Decision::JobRejected { job: JobId(2), reason } if reason.contains("no queue root.nope"))
    );
    assert_eq!(rejected.len(), 2);
}

#[test]
fn input_errors_are_errors() {
    let mut env = Env::new(FOUR_QUEUES);
    env.submit(1, "a", &[(mem(1), 1)]);
    let dup = weir_engine::JobSpec {
        id: JobId(1),
        queue: QueuePath::parse("a").unwrap(),
        user: "u".into(),
        priority: None,
        submit_time: env.now,
        requests: vec![],
        has_am: true,
    };
    assert!(env.engine.on_job_submitted(env.now, dup).is_err());
    assert!(env.engine.on_job_finished(env.now, JobId(99)).is_err());
    env.advance(Duration::from_secs(5));
    env.schedule();
    assert!(env.engine.on_job_finished(weir_model::Time(0), JobId(1)).is_err(), "time went backwards");

    // A batch of nodes with a duplicate id (within the batch or with a known node) adds nothing.
    let node = |id| weir_engine::NodeSpec::new(weir_engine::NodeId(id), mem(8));
    let before = env.engine.node_count();
    assert!(env.engine.on_nodes_added(env.now, vec![node(100), node(100)]).is_err());
    assert!(env.engine.on_nodes_added(env.now, vec![node(101), node(0)]).is_err());
    assert_eq!(env.engine.node_count(), before);
    env.engine.on_nodes_added(env.now, vec![node(100), node(101)]).expect("two new nodes");
    assert_eq!(env.engine.node_count(), before + 2);
}

#[test]
fn a_subtree_whose_requests_all_fail_in_different_ways_is_passed_over() {
    // Once jobs 1 and 2 have failed, leaves c and d are skipped as at least as large; yet org's
    // smallest request per resource, (200 mCPU, 2 MiB), is dominated by neither failure, and
    // the pass must still move on to `other`. (No AM-share check: the point is room.)
    let mut env = Env::new(
        r#"
version: 1
scheduler: {queue_max_am_share_default: -1}
nodes: [{count: 1, resources: {cpu: 1000, memory: 10}}]
queues:
  - {name: org, children: [{name: a}, {name: b}, {name: c}, {name: d}]}
  - {name: other}
"#,
    );
    env.submit(1, "org.a", &[(res(2000, 1), 1)]);
    env.submit(2, "org.b", &[(res(100, 20), 1)]);
    env.submit(3, "other", &[(res(100, 1), 50)]);
    env.submit(4, "org.c", &[(res(2000, 2), 1)]);
    env.submit(5, "org.d", &[(res(200, 20), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 2, 3, 4, 5]);
    assert_eq!(env.count_starts(3), 10);
    env.nothing_else();
    assert!(env.explain(1).contains("room"), "{}", env.explain(1));
}

/// Issue 13: sums of pending demand stay exact. Requests that would push the total past 64 bits
/// are refused with an error, and everything accepted is counted exactly (the invariant check
/// after every step recomputes every sum).
#[test]
fn demand_that_cannot_be_counted_is_refused_and_the_rest_stays_exact() {
    let quarter = 1u64 << 62;
    let mut env = Env::new(&format!(
        "version: 1\nscheduler: {{queue_max_am_share_default: -1}}\nnodes: [{{count: 1, resources: {{cpu: 1000, memory: {quarter}}}}}]\nqueues: [{{name: a}}, {{name: b}}]\n"
    ));
    env.submit(1, "a", &[(mem(quarter), 2)]);
    env.submit(2, "b", &[(mem(quarter), 1)]);
    let spec = weir_engine::JobSpec {
        id: JobId(3),
        queue: QueuePath::parse("a").unwrap(),
        user: "u".into(),
        priority: None,
        submit_time: env.now,
        requests: vec![weir_engine::Request::new(mem(quarter), 1)],
        has_am: true,
    };
    let err = env.engine.on_job_submitted(env.now, spec).unwrap_err();
    assert!(matches!(err, weir_engine::EngineError::DemandOverflow { job: JobId(3) }), "{err}");
    let more = vec![weir_engine::Request::new(mem(quarter), 1)];
    assert!(env.engine.on_requests_added(env.now, JobId(1), more).is_err());
    // Placing, finishing and asking again keep every sum exact.
    env.schedule();
    env.take_runnable();
    let started = env.take_starts();
    assert_eq!(started.len(), 1);
    env.at(1);
    env.finish_container(started[0].1);
    env.request(2, &[(mem(quarter), 1)]);
    env.schedule();
    env.finish_job(1);
    env.schedule();
    // A node that would make the cluster's total overflow is refused too.
    let node = weir_engine::NodeSpec::new(weir_engine::NodeId(9), mem(u64::MAX - 1));
    assert!(env.engine.on_node_added(env.now, node).is_err());
}
