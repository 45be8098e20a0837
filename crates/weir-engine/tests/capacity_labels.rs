//! Capacity mode's node labels beyond exclusivity and lending (those are in `capacity.rs`): a
//! label's capacities between siblings, user limits within a label's partition, and gangs
//! under a label's max capacity. Each scenario names the YARN class or method it checks.

mod harness;

use harness::{mem, Env};
use weir_engine::{JobId, JobSpec, Request, Selector};
use weir_model::QueuePath;

/// Two nodes of 100 MiB: node 0 without a label, node 1 labelled `gpu` (exclusive).
fn labelled(queues: &str) -> Env {
    Env::new(&format!(
        "version: 1\nscheduler: {{mode: capacity, max_am_percent: 1}}\nnodes:\n  - {{count: 1, resources: {{cpu: 1000000, memory: 100}}}}\n  - {{count: 1, resources: {{cpu: 1000000, memory: 100}}, label: gpu}}\nqueues:\n{queues}"
    ))
}

/// `n` containers of 10 MiB, for the label if one is given.
fn asking(env: &mut Env, label: Option<&str>, n: u32) -> Request {
    let mut r = Request::new(mem(10), n);
    if let Some(l) = label {
        r.selector = env.engine.selector(&Selector { labels: vec![l.into()], gpu_models: vec![] });
    }
    r
}

/// Submit job `id` to `queue` as `user` with these requests (no AM of its own).
fn submit(env: &mut Env, id: u64, queue: &str, user: &str, requests: Vec<Request>) {
    let now = env.now;
    let spec = JobSpec {
        id: JobId(id),
        queue: QueuePath::parse(queue).unwrap(),
        user: user.into(),
        priority: None,
        submit_time: now,
        requests,
        has_am: false,
    };
    env.engine.on_job_submitted(now, spec).unwrap();
}

/// Each start as (job, node), in order.
fn starts(env: &mut Env) -> Vec<(u64, u64)> {
    env.take_starts().into_iter().map(|s| (s.0, s.2 .0)).collect()
}

/// "And nothing else happened" but jobs becoming runnable.
fn done(env: &mut Env) {
    env.take_runnable();
    env.nothing_else();
}

/// A label's capacities decide who gets its nodes, not the queues' default-partition ones:
/// YARN sorts a parent's children for a node of partition P by their used capacity in P
/// (`PriorityUtilizationQueueOrderingPolicy.getAssignmentIterator(partition)`: its
/// `PriorityQueueComparator` compares `getUsedCapacity(partition)`, then the larger
/// `getAbsoluteCapacity(partition)`). a guarantees 80% of the default partition but 20% of
/// gpu's, b the reverse; both ask for gpu only, so gpu's node splits 20/80.
#[test]
fn a_labels_capacities_split_its_nodes_between_siblings() {
    let mut env = labelled(
        "  - {name: a, capacity: 80, user_limit_factor: 10, accessible_labels: {gpu: {capacity: 20}}}\n  - {name: b, capacity: 20, user_limit_factor: 10, accessible_labels: {gpu: {capacity: 80}}}\n",
    );
    let r = asking(&mut env, Some("gpu"), 10);
    submit(&mut env, 1, "root.a", "alice", vec![r]);
    let r = asking(&mut env, Some("gpu"), 10);
    submit(&mut env, 2, "root.b", "bob", vec![r]);
    env.schedule();
    let s = starts(&mut env);
    assert!(s.iter().all(|&(_, node)| node == 1), "{s:?}");
    // b 0/80 = a 0/20: b (larger gpu capacity); a 0 < b 1/8; b 1/8 < a 1/2, 2/8, 3/8; b 4/8 = a
    // 1/2: b; a 1/2 < b 5/8; a full (2/2) so b 6/8, 7/8, 8/8. The node is full.
    let jobs: Vec<u64> = s.iter().map(|s| s.0).collect();
    assert_eq!(jobs, vec![2, 1, 2, 2, 2, 2, 1, 2, 2, 2]);
    done(&mut env);
    assert!(env.explain(1).contains("pending"), "{}", env.explain(1));

    // The same two queues asking for the default partition split the unlabelled node by
    // their default capacities instead: a 8, b 2.
    let r = asking(&mut env, None, 10);
    submit(&mut env, 3, "root.a", "alice", vec![r]);
    let r = asking(&mut env, None, 10);
    submit(&mut env, 4, "root.b", "bob", vec![r]);
    env.schedule();
    let s = starts(&mut env);
    assert!(s.iter().all(|&(_, node)| node == 0), "{s:?}");
    let count = |j: u64| s.iter().filter(|x| x.0 == j).count();
    assert_eq!((count(3), count(4)), (8, 2));
    done(&mut env);
}

/// The user limit within a label's partition: `UsersManager.computeUserLimit` runs per
/// partition (`lQueue.getEffectiveCapacity(nodePartition)`,
/// `totalResUsageForActiveUsers.getUsed(nodePartition)`), and `AbstractLeafQueue.canAssignToUser`
/// compares the user's usage in that partition (`user.getUsed(nodePartition)`). a holds 50% of
/// gpu: with user_limit_factor 1 alice may hold 50 MiB there (one container past it by the `>`
/// check: 60), bob takes the rest; alice's gpu containers do not count against her
/// default-partition limit, where she may still take a's whole guarantee.
#[test]
fn a_user_limit_applies_within_a_labels_partition() {
    let mut env = labelled(
        "  - {name: a, capacity: 50, accessible_labels: {gpu: {capacity: 50, max_capacity: 100}}}\n  - {name: b, capacity: 50, accessible_labels: {gpu: {capacity: 50}}}\n",
    );
    let r = asking(&mut env, Some("gpu"), 10);
    submit(&mut env, 1, "root.a", "alice", vec![r]);
    env.schedule();
    assert_eq!(starts(&mut env), vec![(1, 1); 6], "50 MiB of gpu's 100, plus one past it");
    done(&mut env);
    let why = env.explain(1);
    assert!(why.contains("pending because user alice holds {cpu: 0, memory: 60} in root.a, over the user limit {cpu: 0, memory: 50}"), "{why}");
    assert!(why.contains("over the user limit"), "{why}");

    // Another user of a gets the rest of the gpu node: the limit is alice's, not the queue's.
    env.at(1);
    let r = asking(&mut env, Some("gpu"), 10);
    submit(&mut env, 2, "root.a", "bob", vec![r]);
    env.schedule();
    assert_eq!(starts(&mut env), vec![(2, 1); 4]);
    done(&mut env);

    // alice's default-partition requests see her default-partition usage (none), not her 60
    // MiB of gpu: a's guarantee of 50 plus one container.
    env.at(2);
    let r = asking(&mut env, None, 10);
    submit(&mut env, 3, "root.a", "alice", vec![r]);
    env.schedule();
    assert_eq!(starts(&mut env), vec![(3, 0); 6]);
    done(&mut env);
}

/// A gang for a label is checked whole against the queue's max capacity in the label's
/// partition (`AbstractCSQueue.canAssignToThisQueue` with the partition's
/// `getQueueMaxResource(partition)`, for everything the gang adds): 8 × 10 MiB past a's 60
/// MiB max of gpu waits whole — no container and no placeholder — while a gang of 5 starts.
#[test]
fn a_gang_past_a_labels_max_capacity_waits_whole() {
    let mut env = labelled(
        "  - {name: a, capacity: 50, user_limit_factor: 10, accessible_labels: {gpu: {capacity: 50, max_capacity: 60}}}\n  - {name: b, capacity: 50, accessible_labels: {gpu: {capacity: 50}}}\n",
    );
    let g = asking(&mut env, Some("gpu"), 8).in_gang(1);
    submit(&mut env, 1, "root.a", "alice", vec![g]);
    env.schedule();
    assert!(starts(&mut env).is_empty(), "nothing of the gang starts");
    done(&mut env);
    assert_eq!(env.usage("root.a"), mem(0), "and it holds no room (no placeholders)");
    let why = env.explain(1);
    assert!(why.contains("root.a is at its max capacity in node label gpu's partition: 60 MiB"), "{why}");

    env.at(1);
    let g = asking(&mut env, Some("gpu"), 5).in_gang(1);
    submit(&mut env, 2, "root.a", "alice", vec![g]);
    env.schedule();
    assert_eq!(starts(&mut env), vec![(2, 1); 5], "50 MiB fits under the 60 MiB max");
    done(&mut env);
    // Job 1 still waits whole: 50 + 80 is past 60.
    assert_eq!(env.usage("root.a"), mem(50));
}
