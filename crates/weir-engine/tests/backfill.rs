//! EASY backfilling: the first gang that cannot start gets a reserved start from the walltimes
//! of what runs; later work may start first only if it ends by then or takes room the gang will
//! not use (Mu'alem & Feitelson 2001; Flux's `easy` queue policy, a backfill policy with a
//! reservation depth of 1).

mod harness;

use harness::{res, Env};
use weir_engine::{JobId, Request};
use weir_model::{Duration, Resources, Time};

fn cluster() -> String {
    "version: 1
scheduler: {backfill: easy, queue_max_am_share_default: -1}
nodes: [{count: 4, resources: {cpu: 1000, memory: 1024}}]
queues:
  - {name: hpc, policy: fifo}
"
    .to_string()
}

/// A rigid job of `nodes` one-core tasks asking for `walltime_s` seconds.
fn rigid(nodes: u32, walltime_s: u64) -> Vec<Request> {
    vec![Request::new(res(1000, 1024), nodes).in_gang(1).with_walltime(Duration::from_secs(walltime_s))]
}

#[test]
fn later_jobs_start_first_only_if_they_do_not_delay_the_reserved_start() {
    let mut env = Env::new(&cluster());
    env.submit_requests(1, "hpc", rigid(2, 100));
    env.schedule();
    env.take_runnable();
    let a = env.take_placed();
    assert_eq!(a.len(), 2);
    // B needs all four nodes: they are all free at t=100s, when A is expected to end.
    env.at(1).submit_requests(2, "hpc", rigid(4, 50));
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    assert_eq!(env.engine.easy_reservation(), Some((JobId(2), Time(100_000))));
    assert_eq!(env.engine.placeholder_room(), Resources::ZERO, "the head holds no room under EASY");
    assert!(env.explain(2).contains("EASY backfilling: reserved to start at t=100s"), "{}", env.explain(2));
    // C ends (by its walltime) at t=62s, before B's start: it goes ahead.
    env.at(2).submit_requests(3, "hpc", rigid(1, 60));
    // D would run past t=100s on a node B needs: it waits, though a node is free.
    env.at(3).submit_requests(4, "hpc", rigid(1, 200));
    env.schedule();
    env.take_runnable();
    let c = env.take_placed();
    assert_eq!(c.iter().map(|p| p.0).collect::<Vec<_>>(), vec![3]);
    env.nothing_else();
    assert!(
        env.explain(4).contains("EASY backfilling: job-2 holds the reservation (start at t=100s)"),
        "{}",
        env.explain(4)
    );
    env.at(62).finish_container(c[0].1);
    env.schedule();
    env.nothing_else();
    // A ends on time: B starts at its reserved start, all of it in one pass; D after it.
    env.at(100);
    for p in &a {
        env.finish_container(p.1);
    }
    env.schedule();
    let b = env.take_placed();
    assert_eq!(b.len(), 4);
    assert!(b.iter().all(|p| p.0 == 2));
    env.nothing_else();
}

#[test]
fn room_the_head_will_not_use_is_free_for_long_jobs() {
    let mut env = Env::new(&cluster());
    env.submit_requests(1, "hpc", rigid(2, 100));
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().iter().map(|p| p.2).collect::<Vec<_>>(), vec![0, 1]);
    // B needs three of the four nodes at t=100s; the fourth stays free for backfilling.
    env.at(1).submit_requests(2, "hpc", rigid(3, 50));
    env.at(2).submit_requests(3, "hpc", rigid(1, 1000));
    env.at(3).submit_requests(4, "hpc", rigid(1, 1000));
    env.schedule();
    env.take_runnable();
    let placed = env.take_placed();
    assert_eq!(placed.len(), 1, "one long job fits beside the reservation, not two: {placed:?}");
    assert_eq!(placed[0].0, 3);
    env.nothing_else();
}

#[test]
fn a_head_whose_start_cannot_be_planned_holds_room_instead() {
    let mut env = Env::new(&cluster());
    // A runs without a walltime: nobody knows when its nodes come back.
    env.submit_requests(1, "hpc", vec![Request::new(res(1000, 1024), 2).in_gang(1)]);
    env.schedule();
    env.take_runnable();
    env.take_placed();
    env.at(1).submit_requests(2, "hpc", rigid(4, 50));
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    assert_eq!(env.engine.easy_reservation(), None);
    assert_eq!(env.engine.placeholder_room(), res(2000, 2048));
    assert!(env.explain(2).contains("gang of 4 waits: 2 of 4"), "{}", env.explain(2));
}

#[test]
fn without_backfilling_a_short_job_waits_behind_the_gang() {
    let yaml = cluster().replace("backfill: easy, ", "");
    let mut env = Env::new(&yaml);
    env.submit_requests(1, "hpc", rigid(2, 100));
    env.schedule();
    env.take_runnable();
    env.take_placed();
    env.at(1).submit_requests(2, "hpc", rigid(4, 50));
    env.at(2).submit_requests(3, "hpc", rigid(1, 10));
    env.schedule();
    env.take_runnable();
    // The gang holds both free nodes; the ten-second job, which EASY would have run, waits.
    env.nothing_else();
    assert_eq!(env.engine.easy_reservation(), None);
}

#[test]
fn the_reservation_takes_the_nodes_being_released_and_leaves_idle_ones_to_backfill() {
    let mut env = Env::new(&cluster());
    // A short job takes the first nodes, A the last two; the short one ends at once.
    env.submit_requests(1, "hpc", rigid(2, 1));
    env.submit_requests(4, "hpc", rigid(2, 100));
    env.schedule();
    env.take_runnable();
    let placed = env.take_placed();
    let a: Vec<_> = placed.iter().filter(|p| p.0 == 4).copied().collect();
    let mut busy: Vec<u64> = a.iter().map(|p| p.2).collect();
    busy.sort_unstable();
    assert_eq!(busy, [2, 3]);
    for p in placed.iter().filter(|p| p.0 == 1) {
        env.at(1).finish_container(p.1);
    }
    env.finish_job(1);
    // B needs three nodes: two idle now, A's two free at t=100s. The reservation takes A's two
    // and one idle node, so the other idle node is not needed by B at all.
    env.at(1).submit_requests(2, "hpc", rigid(3, 50));
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    assert_eq!(env.engine.easy_reservation(), Some((JobId(2), Time(100_000))));
    // A long job may start at once on that spare idle node (before: on no node, when the
    // reservation claimed both idle nodes first).
    env.at(2).submit_requests(3, "hpc", rigid(1, 10_000));
    env.schedule();
    env.take_runnable();
    let d = env.take_placed();
    assert_eq!(d.len(), 1, "A runs on nodes {busy:?}");
    assert!(!busy.contains(&d[0].2));
    env.nothing_else();
    // B still starts at its reserved time.
    env.at(100);
    for p in &a {
        env.finish_container(p.1);
    }
    env.schedule();
    let b = env.take_placed();
    assert_eq!((b.len(), b.iter().all(|p| p.0 == 2)), (3, true));
}

#[test]
fn a_fifo_leaf_can_order_jobs_shortest_or_largest_first() {
    for (order, first) in [("submit", 2), ("shortest", 3), ("largest", 4)] {
        let mut env = Env::new(&format!(
            "version: 1
scheduler: {{queue_max_am_share_default: -1}}
nodes: [{{count: 4, resources: {{cpu: 1000, memory: 1024}}}}]
queues:
  - {{name: hpc, policy: fifo, job_order: {order}}}
"
        ));
        env.submit_requests(1, "hpc", rigid(4, 100));
        env.schedule();
        env.take_runnable();
        let a = env.take_placed();
        // Three jobs wait: 2 (first, 2 nodes, 50 s), 3 (1 node, 10 s), 4 (3 nodes, 500 s).
        env.at(1).submit_requests(2, "hpc", rigid(2, 50));
        env.at(2).submit_requests(3, "hpc", rigid(1, 10));
        env.at(3).submit_requests(4, "hpc", rigid(3, 500));
        env.schedule();
        env.take_runnable();
        env.at(100);
        for p in &a {
            env.finish_container(p.1);
        }
        env.finish_job(1);
        env.schedule();
        let started = env.take_placed();
        assert_eq!(started.first().map(|p| p.0), Some(first), "{order}: {started:?}");
    }
}

#[test]
fn conservative_backfilling_protects_every_reservation_not_only_the_head() {
    for mode in ["easy", "conservative"] {
        let mut env = Env::new(&format!(
            "version: 1
scheduler: {{backfill: {mode}, queue_max_am_share_default: -1}}
nodes: [{{count: 4, resources: {{cpu: 1000, memory: 1024}}}}]
queues:
  - {{name: hpc, policy: fifo}}
"
        ));
        env.submit_requests(1, "hpc", rigid(2, 100));
        env.schedule();
        env.take_runnable();
        let a = env.take_placed();
        // B (3 nodes) is the head, reserved at t=100; C (all 4 nodes, 10 s) waits behind it.
        env.at(1).submit_requests(2, "hpc", rigid(3, 50));
        env.at(2).submit_requests(3, "hpc", rigid(4, 10));
        env.schedule();
        env.take_runnable();
        env.nothing_else();
        if mode == "conservative" {
            let booked = env.engine.conservative_reservations();
            assert_eq!(booked, vec![(JobId(2), Time(100_000)), (JobId(3), Time(150_000))]);
        }
        // D: one node for 1,000 s. B does not need the fourth node, so EASY starts D there —
        // and C, which needs every node, waits until D ends. Conservative keeps C's slot.
        env.at(3).submit_requests(4, "hpc", rigid(1, 1000));
        env.schedule();
        env.take_runnable();
        let d = env.take_placed();
        match mode {
            "easy" => assert_eq!(d.iter().map(|p| p.0).collect::<Vec<_>>(), vec![4], "EASY backfills D"),
            _ => assert!(d.is_empty(), "D would delay C: {d:?}"),
        }
        env.nothing_else();
        if mode == "conservative" {
            env.at(100);
            for p in &a {
                env.finish_container(p.1);
            }
            env.finish_job(1);
            env.schedule();
            let b = env.take_placed();
            assert_eq!(b.iter().filter(|p| p.0 == 2).count(), 3, "B at its reserved start");
            // B ends on time: C starts at its reserved start, then D.
            env.at(150);
            for p in &b {
                env.finish_container(p.1);
            }
            env.finish_job(2);
            env.schedule();
            let c = env.take_placed();
            assert_eq!(c.iter().filter(|p| p.0 == 3).count(), 4, "C at t=150 as reserved: {c:?}");
        }
    }
}
