//! The fair-share examples of the Fair Scheduler, through `shares_for` and through a live engine.

mod harness;

use harness::{mem, Env};
use weir_model::{ClusterConfig, QueuePath};

fn shares(yaml: &str, active: &[&str]) -> Vec<(String, u64, u64)> {
    let cfg = ClusterConfig::from_yaml("t.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
    let active: Vec<usize> =
        active.iter().map(|p| cfg.find(&QueuePath::parse(p).unwrap()).expect("leaf")).collect();
    weir_engine::shares_for(&cfg, &active)
        .into_iter()
        .map(|s| (s.queue.to_string(), s.steady.memory, s.instantaneous.memory))
        .collect()
}

fn one_node(memory: u64, queues: &str) -> String {
    format!(
        "version: 1\nnodes: [{{count: 1, resources: {{cpu: 64000, memory: {memory}}}}}]\nqueues: {queues}\n"
    )
}

fn steady(rows: &[(String, u64, u64)]) -> Vec<u64> {
    rows.iter().skip(1).map(|r| r.1).collect()
}

#[test]
fn equal_weights() {
    let rows = shares(&one_node(40, "[{name: a}, {name: b}, {name: c}, {name: d}]"), &[]);
    assert_eq!(steady(&rows), vec![10, 10, 10, 10]);
    assert_eq!(rows[0], ("root".to_string(), 40, 40));
}

#[test]
fn maxes_cap_and_the_rest_share() {
    let rows = shares(
        &one_node(
            40,
            "[{name: a, max: {memory: 100}}, {name: b, max: {memory: 50}}, {name: c, max: {memory: 11}}, {name: d, max: {memory: 3}}]",
        ),
        &[],
    );
    assert_eq!(steady(&rows), vec![13, 13, 11, 3]);
}

#[test]
fn weights() {
    let rows =
        shares(&one_node(45, "[{name: a, weight: 2}, {name: b}, {name: c}, {name: d, weight: 0.5}]"), &[]);
    assert_eq!(steady(&rows), vec![20, 10, 10, 5]);
}

#[test]
fn yarn_rounding_sums_above_the_pool() {
    let q = "[{name: a}, {name: b}, {name: c}, {name: idle}]";
    let rows = shares(&one_node(10240, q), &["a", "b", "c"]);
    let inst: Vec<u64> = rows.iter().skip(1).map(|r| r.2).collect();
    assert_eq!(inst, vec![3414, 3414, 3414, 0]);
    let exact = one_node(10240, q).replace("version: 1\n", "version: 1\nscheduler: {rounding: exact}\n");
    let rows = shares(&exact, &["a", "b", "c"]);
    let inst: Vec<u64> = rows.iter().skip(1).map(|r| r.2).collect();
    assert_eq!(inst.iter().sum::<u64>(), 10240);
    assert_eq!(inst, vec![3414, 3413, 3413, 0]);
}

const HIERARCHY: &str = r#"
version: 1
nodes: [{count: 1, resources: {cpu: 16000, memory: 16384}}]
queues:
  - name: parentA
    weight: 8
    children: [{name: A1}, {name: A2}, {name: A3}, {name: A4}]
  - name: parentB
    weight: 1
    children: [{name: B1}, {name: B2}]
  - {name: default, weight: 1}
"#;

#[test]
fn hierarchical_steady_and_instantaneous() {
    let rows = shares(HIERARCHY, &["parentA.A1", "parentA.A2", "parentB.B1", "default"]);
    let pct = |q: &str, inst: bool| {
        let r = rows.iter().find(|r| r.0 == q).unwrap();
        let v = if inst { r.2 } else { r.1 };
        (v as f64 / 16384.0 * 100.0).round() as u64
    };
    for a in ["A1", "A2", "A3", "A4"] {
        assert_eq!(pct(&format!("root.parentA.{a}"), false), 20);
    }
    for b in ["B1", "B2"] {
        assert_eq!(pct(&format!("root.parentB.{b}"), false), 5);
    }
    assert_eq!(pct("root.parentA.A1", true), 40);
    assert_eq!(pct("root.parentA.A2", true), 40);
    assert_eq!(pct("root.parentA.A3", true), 0);
    assert_eq!(pct("root.parentB.B1", true), 10);
    assert_eq!(pct("root.parentB.B2", true), 0);
    assert_eq!(pct("root.default", true), 10);
}

#[test]
fn the_engine_computes_the_same_shares() {
    let mut env = Env::new(HIERARCHY);
    for (id, q) in [(1, "parentA.A1"), (2, "parentA.A2"), (3, "parentB.B1"), (4, "default")] {
        env.submit(id, q, &[(mem(1), 1)]);
    }
    env.schedule();
    let expected = shares(HIERARCHY, &["parentA.A1", "parentA.A2", "parentB.B1", "default"]);
    let got: Vec<(String, u64, u64)> = env
        .engine
        .queues()
        .into_iter()
        .map(|q| (q.queue.to_string(), q.steady.memory, q.instantaneous.memory))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn fixed_queues_max_zero_and_weight_zero() {
    let rows = shares(
        &one_node(
            100,
            "[{name: off, max: {memory: 0}}, {name: floor, weight: 0, min: {memory: 30}}, {name: rest}]",
        ),
        &[],
    );
    assert_eq!(steady(&rows), vec![0, 30, 70]);
}

/// Each job's fair share as `explain` reports it (memory).
fn job_shares(env: &Env, jobs: &[u64]) -> Vec<u64> {
    jobs.iter().map(|&j| env.engine.explain(weir_engine::JobId(j)).expect("job").fair_share.memory).collect()
}

#[test]
fn a_leaf_splits_its_share_among_its_jobs_as_they_come_and_go() {
    // 10 MiB among the runnable jobs of one leaf: under exact rounding the earliest jobs get the
    // units left over; under YARN's each gets the bisection's upper bound, 4 (ComputeFairShares on
    // weight-1 apps: the shares sum above the pool, as for queues).
    let exact =
        one_node(10, "[{name: a}]").replace("version: 1\n", "version: 1\nscheduler: {rounding: exact}\n");
    let mut env = Env::new(&exact);
    for id in 1..=3 {
        env.at(id).submit(id, "a", &[(mem(100), 1)]);
    }
    env.schedule();
    assert_eq!(job_shares(&env, &[1, 2, 3]), vec![4, 3, 3]);
    env.at(4).submit(4, "a", &[(mem(100), 1)]);
    env.schedule();
    assert_eq!(job_shares(&env, &[1, 2, 3, 4]), vec![3, 3, 2, 2]);
    env.finish_job(1);
    env.schedule();
    assert_eq!(job_shares(&env, &[2, 3, 4]), vec![4, 3, 3]);
    let mut yarn = Env::new(&one_node(10, "[{name: a}]"));
    for id in 1..=3 {
        yarn.at(id).submit(id, "a", &[(mem(100), 1)]);
    }
    yarn.schedule();
    assert_eq!(job_shares(&yarn, &[1, 2, 3]), vec![4, 4, 4]);
    // A fifo leaf gives the whole share to its earliest job, whoever came and went.
    let mut fifo = Env::new(&one_node(10, "[{name: a, policy: fifo}]"));
    for (t, id) in [(1, 3), (2, 1), (3, 2)] {
        fifo.at(t).submit(id, "a", &[(mem(100), 1)]);
    }
    fifo.schedule();
    assert_eq!(job_shares(&fifo, &[1, 2, 3]), vec![0, 0, 10]);
    fifo.finish_job(3);
    fifo.schedule();
    assert_eq!(job_shares(&fifo, &[1, 2]), vec![10, 0]);
}
