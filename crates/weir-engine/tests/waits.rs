//! The cheap wait queries a host samples: `wait_reason` (the rule that holds a job back, its
//! queue and limit) and `start_position` (where the job stands in the order jobs will start).
//! Each case checks the code against the sentence `explain` gives for the same job.

mod harness;

use harness::{mem, Env};
use weir_engine::{JobId, StartPosition, WaitReason};
use weir_model::QueuePath;

fn path(p: &str) -> QueuePath {
    QueuePath::parse(p).expect("path")
}

const TIERED: &str = r#"
version: 1
scheduler: {promotion: priority}
nodes: [{count: 1, resources: {cpu: 100000, memory: 1000}}]
queues:
  - name: ads
    max_running_apps: 3
    children:
      - {name: tier1, tier: 1}
      - {name: tier3, tier: 3}
"#;

/// Ten tier-3 jobs fill root.ads (max_running_apps 3) before a tier-1 job arrives: the tier-1
/// job and the seven other tier-3 jobs wait on root.ads's limit, and the tier-1 job is first in
/// the promotion order (`promotion: priority`), the tier-3 jobs behind it in submit order.
#[test]
fn jobs_held_by_a_running_app_limit_name_the_queue_and_their_place_in_promotion_order() {
    let mut env = Env::new(TIERED);
    for id in 1..=10 {
        env.at(id);
        env.submit(id, "root.ads.tier3", &[(mem(1), 1)]);
    }
    env.at(20);
    env.submit(100, "root.ads.tier1", &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1, 2, 3]);
    env.take_starts();

    let reason = env.engine.wait_reason(JobId(100)).expect("job").expect("waits");
    assert_eq!(reason, WaitReason::QueueMaxRunningApps { queue: path("root.ads"), limit: 3 });
    assert_eq!(reason.code(), "queue_max_running_apps");
    assert_eq!(reason.subject(), "root.ads");
    assert!(env.explain(100).contains("root.ads is at max_running_apps 3"));

    let first = env.engine.start_position(JobId(100)).expect("job").expect("waits");
    assert_eq!(
        first,
        StartPosition { position: 1, of: 8, ahead: vec![], scope: path("root.ads"), promotion: true }
    );
    let sixth = env.engine.start_position(JobId(8)).expect("job").expect("waits");
    assert_eq!((sixth.position, sixth.of), (6, 8));
    assert_eq!(sixth.ahead, vec![JobId(7), JobId(6), JobId(5), JobId(4), JobId(100)], "nearest first");

    // A running job with nothing more to ask for does not wait.
    assert_eq!(env.engine.wait_reason(JobId(1)).expect("job"), None);
    assert_eq!(env.engine.start_position(JobId(1)).expect("job"), None);

    // The tier-1 job is promoted into the slot job 1 frees: it no longer waits on the limit.
    env.finish_job(1);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![100]);
    assert_eq!(env.engine.wait_reason(JobId(100)).expect("job"), None);
    assert_eq!(env.engine.start_position(JobId(4)).expect("job").map(|p| (p.position, p.of)), Some((1, 7)));
    assert!(env.engine.wait_reason(JobId(999)).is_err(), "an unknown job is malformed input");
}

#[test]
fn a_user_at_its_limit_waits_in_the_order_under_the_root() {
    let mut env = Env::new(
        "version: 1\nscheduler: {user_max_running_apps: 1}\nnodes: [{count: 1, resources: {cpu: 100000, memory: 1000}}]\nqueues: [{name: a}, {name: b}]\n",
    );
    env.submit_as(1, "a", "ann", None, &[(mem(1), 1)]);
    env.submit_as(2, "b", "ann", None, &[(mem(1), 1)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![1]);
    assert!(env.explain(2).contains("user ann is at user_max_running_apps 1"));
    let reason = env.engine.wait_reason(JobId(2)).expect("job").expect("waits");
    assert_eq!(reason, WaitReason::UserMaxRunningApps { user: "ann".into(), limit: 1 });
    assert_eq!(reason.subject(), "user ann");
    let p = env.engine.start_position(JobId(2)).expect("job").expect("waits");
    assert_eq!((p.position, p.of, p.scope.to_string()), (1, 1, "root".to_string()));
}

/// A runnable job whose next container would take its queue over its max waits on that max
/// (YARN's `FSQueue.assignContainer` checks `maxShare` before any node); one that no limit
/// holds back and finds no node waits for room, second in its fifo leaf's order.
#[test]
fn runnable_jobs_wait_on_a_queue_max_or_for_room() {
    let mut env = Env::new(
        r#"
version: 1
scheduler: {queue_max_am_share_default: -1, reservable_nodes: 0}
nodes: [{count: 1, resources: {cpu: 100000, memory: 90}}]
queues: [{name: capped, max: {memory: 30}}, {name: open, policy: fifo}]
"#,
    );
    env.submit(1, "root.capped", &[(mem(20), 2)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 1);
    let capped = env.engine.wait_reason(JobId(1)).expect("job").expect("waits");
    assert!(env.explain(1).contains("root.capped is at its max"), "{}", env.explain(1));
    assert_eq!(capped.code(), "queue_max_resources");
    assert!(
        matches!(capped, WaitReason::QueueMax { ref queue, max } if *queue == path("root.capped") && max.memory == 30)
    );

    env.at(1);
    env.submit(2, "root.open", &[(mem(80), 1)]);
    env.at(2);
    env.submit(3, "root.open", &[(mem(80), 1)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(2), 0, "80 MiB does not fit in the 70 left");
    assert!(env.explain(3).contains("no node has room"), "{}", env.explain(3));
    assert_eq!(
        env.engine.wait_reason(JobId(3)).expect("job"),
        Some(WaitReason::NoRoom { queue: path("root.open") })
    );
    let p = env.engine.start_position(JobId(3)).expect("job").expect("waits");
    assert_eq!((p.position, p.of, p.ahead.clone(), p.promotion), (2, 2, vec![JobId(2)], false));
}
