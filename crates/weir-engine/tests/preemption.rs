//! Fair-share and min-share preemption: who loses what, when, and never below fair share.

mod harness;

use harness::{mem, Env};
use weir_model::{Duration, Time};

fn cluster(threshold: f64, starved_tier: u8, greedy_tier: u8) -> String {
    format!(
        r#"
version: 1
scheduler:
  preemption: {{enabled: true, utilization_threshold: 0.8, kill_wait: 15s}}
tiers:
  1: {{fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: {threshold}}}
  3: {{fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: {threshold}}}
nodes: [{{count: 1, resources: {{cpu: 100000, memory: 100}}}}]
queues:
  - {{name: greedy, tier: {greedy_tier}}}
  - {{name: starved, tier: {starved_tier}}}
"#
    )
}

/// The greedy job fills the node, then the other one arrives wanting half of it.
fn greedy_then_starved(yaml: &str) -> Env {
    let mut env = Env::new(yaml);
    env.submit(1, "greedy", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 100);
    env.at(1);
    env.submit(2, "starved", &[(mem(1), 60)]);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    env.nothing_else();
    env
}

#[test]
fn a_starved_job_gets_exactly_its_fair_share_back() {
    let mut env = greedy_then_starved(&cluster(1.0, 1, 3));
    assert_eq!(env.engine.next_wakeup(), Some(Time(11_000)), "fair-share timeout of 10s");
    env.at(11);
    env.schedule();
    let marked = env.take_preempts();
    // Fair shares are 50/50: the greedy job gives back 50 containers and keeps its 50.
    assert_eq!(marked.len(), 50);
    assert!(marked.iter().all(|m| m.0 == 1));
    env.nothing_else();
    assert!(
        env.explain(1).contains("preempted to restore job-2 of root.starved to its fair share"),
        "{}",
        env.explain(1)
    );
    assert_eq!(env.engine.next_wakeup(), Some(Time(26_000)), "kill_wait of 15s");

    env.at(26);
    env.schedule();
    let killed = env.take_kills();
    assert_eq!(killed.len(), 50);
    assert_eq!(env.count_starts(2), 50, "the freed room goes to the starved job");
    env.nothing_else();
    assert_eq!(env.usage("root.greedy").memory, 50);
    assert_eq!(env.usage("root.starved").memory, 50);

    // Nothing more happens: both are at their fair share.
    env.advance(Duration::from_secs(60));
    env.schedule();
    env.nothing_else();
}

#[test]
fn the_threshold_limits_how_much_is_taken() {
    let mut env = greedy_then_starved(&cluster(0.5, 1, 3));
    env.at(11);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 25, "0.5 × fair share of 50");
    env.nothing_else();
}

#[test]
fn nothing_is_taken_from_tier1() {
    let mut env = greedy_then_starved(&cluster(1.0, 3, 1));
    env.at(11);
    env.schedule();
    env.advance(Duration::from_secs(120));
    env.schedule();
    env.nothing_else();
    assert!(
        env.explain(2).contains("fair-share target {cpu: 0, memory: 50} = min(1 × fair share"),
        "{}",
        env.explain(2)
    );
}

#[test]
fn victims_that_end_by_themselves_are_not_killed() {
    let mut env = greedy_then_starved(&cluster(1.0, 1, 3));
    env.at(11);
    env.schedule();
    let marked = env.take_preempts();
    env.at(12);
    for &(_, c) in &marked[..10] {
        env.finish_container(c);
    }
    env.schedule();
    // Room on the reserved node goes to the starved job at once.
    assert_eq!(env.count_starts(2), 10);
    env.nothing_else();
    env.at(26);
    env.schedule();
    assert_eq!(env.take_kills().len(), 40);
    assert_eq!(env.count_starts(2), 40);
    env.nothing_else();
}

#[test]
fn no_preemption_below_the_utilization_threshold() {
    let mut env = Env::new(&cluster(1.0, 1, 3));
    env.submit(1, "greedy", &[(mem(1), 70)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    // A request that does not fit in the 30 free keeps job 2 starved, but utilization is 70%.
    env.at(1);
    env.submit(2, "starved", &[(mem(40), 1)]);
    env.schedule();
    env.take_runnable();
    env.at(60);
    env.schedule();
    env.nothing_else();
}

#[test]
fn min_share_starvation_preempts_up_to_the_min() {
    let mut env = Env::new(
        r#"
version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 5s}
nodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]
queues:
  - {name: greedy}
  - {name: guaranteed, weight: 0.0001, min: {memory: 30}, min_share_preemption_timeout: 5s}
"#,
    );
    env.submit(1, "greedy", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.submit(2, "guaranteed", &[(mem(1), 50)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    env.at(5);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 30, "up to the min share of 30, not the demand of 50");
    env.nothing_else();
}

#[test]
fn the_newest_containers_of_the_lowest_priority_go_first() {
    let mut env = Env::new(
        r#"
version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.8, kill_wait: 15s}
nodes: [{count: 1, resources: {cpu: 100000, memory: 90}}]
queues:
  - {name: low, priority: 1}
  - {name: high, priority: 5}
  - {name: starved, fair_share_preemption_timeout: 1s, fair_share_preemption_threshold: 1.0}
"#,
    );
    env.submit(1, "low", &[(mem(1), 45)]);
    env.submit(2, "high", &[(mem(1), 45)]);
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts();
    env.at(1);
    env.submit(3, "starved", &[(mem(1), 10)]);
    env.schedule();
    env.take_runnable();
    env.at(2);
    env.schedule();
    let marked = env.take_preempts();
    assert_eq!(marked.len(), 10);
    assert!(marked.iter().all(|m| m.0 == 1), "all from the low-priority job: {marked:?}");
    let newest: Vec<_> = starts.iter().filter(|s| s.0 == 1).rev().take(10).map(|s| s.1).collect();
    let mut got: Vec<_> = marked.iter().map(|m| m.1).collect();
    got.sort();
    let mut want = newest.clone();
    want.sort();
    assert_eq!(got, want, "the newest ten");
}
