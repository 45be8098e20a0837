//! Gangs: all of a gang's containers start in one pass or none does; room is held for it as it
//! frees up (placeholders), released after the gang timeout (YuniKorn's placeholder timeout,
//! `objects/application.go`: `defaultPlaceholderTimeout`, `timeoutPlaceholderProcessing`);
//! preemption takes a whole gang or, where gangs are protected, none of it.

mod harness;

use harness::{res, Env};
use weir_engine::{JobId, Request};
use weir_model::{Duration, Resources};

/// Four nodes of one core each; two FIFO leaves; no AM-share check (a job's first container is
/// no application master in these HPC-style tests).
fn cluster(extra: &str) -> String {
    format!(
        "version: 1
scheduler: {{gang_timeout: 10m, queue_max_am_share_default: -1{extra}}}
nodes: [{{count: 4, resources: {{cpu: 1000, memory: 1024}}}}]
queues:
  - {{name: hpc, policy: fifo}}
  - {{name: other, policy: fifo}}
"
    )
}

fn core() -> Resources {
    res(1000, 1024)
}

fn gang(n: u32, g: u32) -> Request {
    Request::new(core(), n).in_gang(g)
}

#[test]
fn a_gang_starts_whole_in_one_pass_and_holds_room_until_then() {
    let mut env = Env::new(&cluster(""));
    env.submit_requests(1, "hpc", vec![Request::new(core(), 2)]);
    env.schedule();
    let busy = env.take_placed();
    assert_eq!(busy.len(), 2);
    env.take_runnable();
    env.at(1).submit_requests(2, "hpc", vec![gang(4, 1)]);
    env.schedule();
    env.take_runnable();
    // Two of four fit: nothing starts; the two free cores are held for the gang.
    env.nothing_else();
    assert_eq!(env.engine.placeholder_room(), res(2000, 2048));
    assert_eq!(env.usage("root.hpc"), res(4000, 4096), "placeholders count as the gang's usage");
    let why = env.explain(2);
    assert!(
        why.contains("gang of 4 waits: 2 of 4 containers fit (all start together or none does); it holds room for 2 of them (placeholders) since t=1s"),
        "{why}"
    );
    // A later job of the same size cannot take the held room.
    env.at(2).submit_requests(3, "hpc", vec![Request::new(core(), 1)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    // One core frees: the gang takes it as a placeholder, still nothing starts.
    env.at(3).finish_container(busy[0].1);
    env.schedule();
    env.nothing_else();
    // The last core frees: all four start in this pass.
    env.at(4).finish_container(busy[1].1);
    env.schedule();
    let started = env.take_placed();
    assert_eq!(started.len(), 4);
    assert!(started.iter().all(|s| s.0 == 2));
    let mut nodes: Vec<u64> = started.iter().map(|s| s.2).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, vec![0, 1, 2, 3]);
    assert_eq!(env.engine.placeholder_room(), Resources::ZERO);
    env.nothing_else();
}

#[test]
fn a_gang_that_fits_starts_at_once() {
    let mut env = Env::new(&cluster(""));
    env.submit_requests(1, "hpc", vec![gang(3, 7), Request::new(core(), 1).in_gang(7)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().len(), 4);
    env.nothing_else();
}

#[test]
fn placeholders_are_released_after_the_gang_timeout_and_the_gang_goes_to_the_back() {
    let mut env = Env::new(&cluster(""));
    env.submit_requests(1, "hpc", vec![Request::new(core(), 2)]);
    env.schedule();
    env.take_placed();
    env.at(1).submit_requests(2, "hpc", vec![gang(4, 1)]);
    env.at(2).submit_requests(3, "hpc", vec![Request::new(core(), 1)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    // The timeout is due 10 minutes after the first placeholder, taken at t=2s.
    assert_eq!(env.engine.next_wakeup(), Some(weir_model::Time(2_000 + 600_000)));
    env.advance(Duration::from_secs(599));
    env.schedule();
    assert!(env.explain(2).contains("gang of 4 waits: 2 of 4"), "{}", env.explain(2));
    env.nothing_else();
    env.at(602).schedule();
    // Released: job 3, now ahead of the re-queued gang, starts on one freed core; the gang holds
    // the other again.
    let started = env.take_placed();
    assert_eq!(started.iter().map(|s| s.0).collect::<Vec<_>>(), vec![3]);
    assert_eq!(env.engine.gang_timeouts(), 1);
    assert_eq!(env.engine.placeholder_room(), res(1000, 1024));
    env.nothing_else();
}

#[test]
fn a_gang_larger_than_its_queue_max_says_so() {
    let yaml =
        cluster("").replace("{name: hpc, policy: fifo}", "{name: hpc, policy: fifo, max: {cpu: 3000}}");
    let mut env = Env::new(&yaml);
    env.submit_requests(1, "hpc", vec![gang(4, 1)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    assert_eq!(
        env.engine.placeholder_room(),
        Resources::ZERO,
        "a gang its queue can never hold takes nothing"
    );
    assert!(env.explain(1).contains("pending because root.hpc is at its max"), "{}", env.explain(1));
}

#[test]
fn preempting_one_container_of_a_gang_takes_the_whole_gang() {
    // The gang's queue has weight 0 (a fair share of 0, so taking all of it is allowed); the
    // other two cores are in a queue preemption never takes from.
    let yaml = "version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 5s}
nodes: [{count: 4, resources: {cpu: 1000, memory: 1024}}]
queues:
  - {name: batch, allow_preemption_from: true, weight: 0, max_am_share: -1}
  - {name: keep, allow_preemption_from: false, max_am_share: -1}
  - {name: prod, fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: 1.0, max_am_share: -1}
";
    let mut env = Env::new(yaml);
    env.submit_requests(1, "batch", vec![gang(2, 1)]);
    env.submit_requests(2, "keep", vec![Request::new(core(), 2)]);
    env.schedule();
    env.take_runnable();
    let placed = env.take_placed();
    let gang_containers: Vec<_> = placed.iter().filter(|p| p.0 == 1).map(|p| p.1).collect();
    assert_eq!(gang_containers.len(), 2);
    env.at(1).submit_requests(3, "prod", vec![Request::new(core(), 1)]);
    env.schedule();
    env.take_runnable();
    env.at(12).schedule();
    // One core would do, but taking one container of the gang takes both.
    let mut marked: Vec<_> = env.take_preempts().into_iter().map(|m| m.1).collect();
    marked.sort();
    let mut want = gang_containers.clone();
    want.sort();
    assert_eq!(marked, want);
    env.at(17).schedule();
    let mut killed: Vec<_> = env.take_kills().into_iter().map(|k| k.1).collect();
    killed.sort();
    assert_eq!(killed, want);
    assert_eq!(env.take_placed().iter().map(|p| p.0).collect::<Vec<_>>(), vec![3]);
}

#[test]
fn a_protected_gang_is_never_a_victim() {
    let yaml = "version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 5s}
nodes: [{count: 4, resources: {cpu: 1000, memory: 1024}}]
queues:
  - {name: batch, allow_preemption_from: true, gang_preemption: protected, weight: 0, max_am_share: -1}
  - {name: prod, fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: 1.0, max_am_share: -1}
";
    let mut env = Env::new(yaml);
    env.submit_requests(1, "batch", vec![gang(4, 1)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().len(), 4);
    env.at(1).submit_requests(2, "prod", vec![Request::new(core(), 2)]);
    env.schedule();
    env.take_runnable();
    for t in [12, 40, 80] {
        env.at(t).schedule();
        assert!(env.take_preempts().is_empty(), "a protected gang lost a container at t={t}");
    }
}

#[test]
fn a_lost_placeholder_is_asked_for_again_and_never_reported() {
    let mut env = Env::new(&cluster(""));
    env.submit_requests(1, "hpc", vec![Request::new(core(), 1)]);
    env.schedule();
    env.take_placed();
    env.take_runnable();
    env.at(1).submit_requests(2, "hpc", vec![gang(4, 1)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.engine.placeholder_room(), res(3000, 3072));
    // Node 1 holds a placeholder; removing it loses no container the host knows of.
    let lost = env.engine.on_node_removed(env.now, weir_engine::NodeId(1)).expect("node");
    assert!(lost.is_empty(), "{lost:?}");
    assert_eq!(env.engine.placeholder_room(), res(2000, 2048));
    let e = env.engine.explain(JobId(2)).expect("job");
    assert_eq!(e.pending_containers, 2, "two still wanted, two held");
    env.engine.check_invariants().expect("invariants");
}

#[test]
fn the_container_limit_bounds_what_starts() {
    let mut env = Env::new(&cluster(""));
    env.engine.set_container_limit(3);
    env.submit_requests(1, "hpc", vec![Request::new(res(100, 100), 10)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().len(), 3);
    assert!(env.explain(1).contains("holds its limit of 3 containers"), "{}", env.explain(1));
    // A gang that would pass the limit waits whole.
    env.submit_requests(2, "other", vec![Request::new(res(100, 100), 2).in_gang(1)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
}

/// Four one-core nodes under a `fair` leaf with the default 15-minute gang timeout; four gangs of
/// four each hold one node (issue 18's `livelock.swf`).
fn four_gangs_each_holding_a_node() -> (Env, Vec<weir_engine::ContainerId>) {
    let mut env = Env::new(
        "version: 1
scheduler: {queue_max_am_share_default: -1}
nodes: [{count: 4, resources: {cpu: 1000, memory: 1024}}]
queues: [{name: hpc}]
",
    );
    env.submit_requests(1, "hpc", vec![Request::new(core(), 4)]);
    env.schedule();
    let busy: Vec<_> = env.take_placed().into_iter().map(|p| p.1).collect();
    env.take_runnable();
    for (i, id) in (5..9).enumerate() {
        env.at(1 + i as u64).submit_requests(id, "hpc", vec![gang(4, 1)]);
    }
    env.schedule();
    env.take_runnable();
    for (i, c) in busy.iter().enumerate() {
        env.at(10 * (i as u64 + 1)).finish_container(*c);
        env.schedule();
        env.nothing_else();
    }
    (env, busy)
}

#[test]
fn a_timeout_hands_the_room_on_and_gangs_in_a_fair_leaf_never_livelock() {
    let (mut env, _) = four_gangs_each_holding_a_node();
    // Every node is held, one by each gang (the fair order serves the gang holding least).
    assert_eq!(env.engine.placeholder_room(), res(4000, 4096));
    let why = env.explain(8);
    assert!(why.contains("nodes 0–2 held by placeholders of jobs 5, 6, 7"), "{why}");
    // Job 5's placeholders time out at 10 s + 15 min; before issue 18 the fair order gave its
    // node straight back to it (its usage fell to zero), for ever. Nothing runs, so this is a
    // deadlock: every placeholder goes back and the most senior gang other than the one just
    // released, job 6, starts whole.
    env.at(910).schedule();
    let started = env.take_placed();
    assert_eq!(started.len(), 4);
    assert!(started.iter().all(|s| s.0 == 6), "{started:?}");
    assert_eq!(env.engine.gang_timeouts(), 1);
    assert_eq!(env.engine.placeholder_room(), Resources::ZERO);
}

#[test]
fn a_released_gang_takes_no_placeholders_until_another_gang_starts() {
    let mut env = Env::new(
        "version: 1
scheduler: {queue_max_am_share_default: -1, gang_timeout: 10m}
nodes: [{count: 4, resources: {cpu: 1000, memory: 1024}}]
queues: [{name: hpc}]
",
    );
    // Two cores run for ever; jobs 2 and 3 are gangs of three.
    env.submit_requests(1, "hpc", vec![Request::new(core(), 2)]);
    env.schedule();
    env.take_placed();
    env.take_runnable();
    env.at(1).submit_requests(2, "hpc", vec![gang(3, 1)]);
    env.schedule();
    env.take_runnable();
    env.at(2).submit_requests(3, "hpc", vec![gang(3, 1)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    // Job 2 holds both free cores; job 3 nothing.
    assert_eq!(env.engine.placeholder_room(), res(2000, 2048));
    // At job 2's timeout its room goes to job 3 (the most senior other gang), and job 2 waits.
    env.at(601).schedule();
    env.nothing_else();
    assert_eq!(env.engine.gang_timeouts(), 1);
    assert_eq!(env.engine.placeholder_room(), res(2000, 2048));
    let why = env.explain(2);
    assert!(why.contains("its placeholders timed out and no gang has started since"), "{why}");
    assert!(
        env.explain(3).contains("it holds room for 2 of them (placeholders) since t=601s"),
        "{}",
        env.explain(3)
    );
}
