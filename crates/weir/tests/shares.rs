//! `weir shares`, run as a real process: the Fair Scheduler's fair-share examples through
//! `--json`, the table, the built-in example cluster and the errors.

mod common;

use common::{text, weir, Scratch};
use serde_json::Value;

/// `weir shares --json` on a cluster file written from `yaml`: (queue, steady MiB, instantaneous MiB).
fn shares(test: &str, yaml: &str, active: &str) -> Vec<(String, u64, u64)> {
    let scratch = Scratch::new(&format!("shares-{test}"));
    let file = scratch.file("cluster.yaml", yaml);
    let mut args = vec!["shares", "--cluster", file.as_str(), "--json"];
    if !active.is_empty() {
        args.extend(["--active", active]);
    }
    let out = weir(&args);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    json["queues"]
        .as_array()
        .expect("a queues array")
        .iter()
        .map(|q| {
            let mem = |k: &str| q[k]["memory"].as_u64().expect("memory in MiB");
            (q["queue"].as_str().expect("queue name").to_string(), mem("steady"), mem("instantaneous"))
        })
        .collect()
}

fn one_node(memory: &str, rounding: &str, queues: &str) -> String {
    format!(
        "version: 1\nscheduler: {{mode: fair, rounding: {rounding}}}\n\
         nodes: [{{count: 1, resources: {{cpu: 64000, memory: {memory}}}}}]\nqueues: {queues}\n"
    )
}

fn column(rows: &[(String, u64, u64)], f: fn(&(String, u64, u64)) -> u64) -> Vec<u64> {
    rows.iter().skip(1).map(f).collect()
}

#[test]
fn four_equal_queues_split_the_pool_evenly() {
    let rows = shares("equal", &one_node("40", "yarn", "[{name: a}, {name: b}, {name: c}, {name: d}]"), "");
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["root", "root.a", "root.b", "root.c", "root.d"]);
    assert_eq!(rows[0], ("root".to_string(), 40, 40));
    assert_eq!(column(&rows, |r| r.1), [10, 10, 10, 10]);
    // Nothing is active, so below root every instantaneous share is zero.
    assert_eq!(column(&rows, |r| r.2), [0, 0, 0, 0]);
}

#[test]
fn maxes_cap_queues_and_the_others_share_the_rest() {
    let queues = "[{name: a, max: {memory: 100}}, {name: b, max: {memory: 50}}, \
                  {name: c, max: {memory: 11}}, {name: d, max: {memory: 3}}]";
    let rows = shares("maxes", &one_node("40", "yarn", queues), "");
    assert_eq!(column(&rows, |r| r.1), [13, 13, 11, 3]);
}

#[test]
fn weights_divide_the_pool() {
    let queues = "[{name: a, weight: 2}, {name: b}, {name: c}, {name: d, weight: 0.5}]";
    let rows = shares("weights", &one_node("45", "yarn", queues), "");
    assert_eq!(column(&rows, |r| r.1), [20, 10, 10, 5]);
}

#[test]
fn yarn_rounding_gives_three_active_queues_3414_each_and_exact_rounding_sums_to_the_pool() {
    let queues = "[{name: a}, {name: b}, {name: c}, {name: idle}]";
    let rows = shares("yarn", &one_node("10240", "yarn", queues), "root.a,root.b,root.c");
    assert_eq!(column(&rows, |r| r.2), [3414, 3414, 3414, 0]);

    let rows = shares("exact", &one_node("10240", "exact", queues), "a,b,c");
    let inst = column(&rows, |r| r.2);
    assert_eq!(inst.iter().sum::<u64>(), 10240);
    assert!(inst[..3].iter().all(|&m| m == 3413 || m == 3414), "{inst:?}");
    assert_eq!(inst[3], 0);
}

#[test]
fn hierarchical_weights_steady_and_instantaneous() {
    let yaml = "version: 1
nodes: [{count: 1, resources: {cpu: 64000, memory: 16g}}]
queues:
  - {name: parentA, weight: 8, children: [{name: a1}, {name: a2}, {name: a3}, {name: a4}]}
  - {name: parentB, weight: 1, children: [{name: b1}, {name: b2}]}
  - {name: default, weight: 1}
";
    let rows = shares("hierarchy", yaml, "parentA.a1,parentA.a2,parentB.b1,default");
    let pool = 16384.0;
    let pct = |name: &str, steady: bool| {
        let row = rows.iter().find(|r| r.0 == name).unwrap_or_else(|| panic!("no row {name}"));
        let v = if steady { row.1 } else { row.2 };
        (v as f64 / pool * 1000.0).round() / 10.0
    };
    for leaf in ["a1", "a2", "a3", "a4"] {
        assert_eq!(pct(&format!("root.parentA.{leaf}"), true), 20.0, "steady {leaf}");
    }
    assert_eq!(pct("root.parentB.b1", true), 5.0);
    assert_eq!(pct("root.parentB.b2", true), 5.0);
    assert_eq!(pct("root.default", true), 10.0);
    assert_eq!(pct("root.parentA.a1", false), 40.0);
    assert_eq!(pct("root.parentA.a2", false), 40.0);
    assert_eq!(pct("root.parentA.a3", false), 0.0);
    assert_eq!(pct("root.parentB.b1", false), 10.0);
    assert_eq!(pct("root.parentB.b2", false), 0.0);
    assert_eq!(pct("root.default", false), 10.0);
}

#[test]
fn the_table_lists_every_queue_of_the_example_depth_first() {
    let out = weir(&["shares", "--cluster", "examples/cluster-small.yaml", "--active", "all"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("queue"), "{stdout}");
    let queues: Vec<&str> = lines[1..4].iter().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(queues, ["root", "root.a", "root.b"]);
    // Weights 3:1:1 of 128 GiB, no min or max binding: a gets 60%, b and default 20% each.
    assert!(lines[2].contains("60.0%"), "{stdout}");
    assert!(lines[3].contains("20.0%") && lines[4].contains("20.0%"), "{stdout}");
}

#[test]
fn without_a_cluster_file_the_built_in_example_is_used() {
    let out = weir(&["shares", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("built-in example cluster"));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let queues = json["queues"].as_array().expect("queues");
    assert_eq!(queues.len(), 1 + 48, "root and the 48 queues under it");
    assert_eq!(queues[0]["steady"]["memory"].as_u64(), Some(40 * 65536));
    assert!(queues.iter().any(|q| q["queue"] == "root.ads.ranking.tier1"));
}

#[test]
fn active_names_that_are_not_leaves_of_the_cluster_are_errors() {
    let out = weir(&["shares", "--cluster", "examples/cluster.yaml", "--active", "root.nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "weir: --active: no queue root.nope in examples/cluster.yaml\n");

    let out = weir(&["shares", "--cluster", "examples/cluster.yaml", "--active", "root.ads"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("root.ads is not a leaf"), "{}", text(&out.stderr));

    let out = weir(&["shares", "--cluster", "examples/missing.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read examples/missing.yaml"), "{}", text(&out.stderr));
}

/// Capacity mode: the table shows each queue's capacity and max capacity as configured and as
/// a share of the cluster (absolute capacity = parent's × capacity; absolute max = parent's max
/// × max capacity), and `--json` carries them per queue.
#[test]
fn capacity_mode_shows_configured_and_absolute_capacities() {
    let scratch = Scratch::new("shares-capacity");
    let file = scratch.file(
        "cluster.yaml",
        "version: 1\nscheduler: {mode: capacity}\nnodes: [{count: 10, resources: {cpu: 10000, memory: 10240}}]\n\
         queues:\n  - {name: ads, capacity: 55, max_capacity: 80, children: [{name: tier1, capacity: 70}, {name: tier3, capacity: 30, max_capacity: 50}]}\n  - {name: search, capacity: 45}\n",
    );
    let out = weir(&["shares", "--cluster", file.as_str()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let table = text(&out.stdout);
    let row = |q: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(q))
            .unwrap_or_else(|| panic!("no row {q} in\n{table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // queue, capacity, abs, guaranteed memory, cpu, max cap, abs, max memory, cpu
    assert_eq!(row("root.ads")[1..], ["55", "55.0%", "56320", "55000", "80", "80.0%", "81920", "80000"]);
    assert_eq!(row("root.ads.tier1")[1..3], ["70", "38.5%"]);
    assert_eq!(row("root.ads.tier3")[5..7], ["50", "40.0%"], "50% of ads' 80%");
    let out = weir(&["shares", "--cluster", file.as_str(), "--json"]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let search = json["queues"].as_array().unwrap().iter().find(|q| q["queue"] == "root.search").unwrap();
    assert_eq!(search["capacity"]["configured"], "45");
    assert_eq!(search["capacity"]["guaranteed"]["memory"], 46080);
}

/// Capacity mode with `--workload --at`: used and pending come from a simulation of the
/// workload, and the ideal allocation is the proportional policy's
/// (`PreemptableResourceCalculator.computeIdealResourceDistribution`,
/// `TempQueuePerPartition.assignPreemption`, `calculateResToObtainByPartitionForLeafQueues`).
/// b (guarantee 50 GiB) fills the 100 GiB node with a job of 200 tasks of 1 GiB (its AM, 1 GiB,
/// and 99 tasks); at 10m a's job arrives and asks for its AM and 10 tasks (11 GiB). Worked by
/// hand: a's ideal is its 11,264 MiB of demand, b gets the rest (91,136 MiB); b would give back
/// 11,264, scaled to total_preemption_per_round 0.1 × 102,400 = 10,240; b is past its dead zone
/// (51,200 × 1.1), so a round asks 10,240 × natural_termination_factor 0.2 = 2,048.
#[test]
fn capacity_mode_with_a_workload_shows_used_pending_and_the_ideal_allocation() {
    let scratch = Scratch::new("shares-capacity-state");
    let cluster = scratch.file(
        "cluster.yaml",
        "version: 1\nscheduler: {mode: capacity}\nnodes: [{count: 1, resources: {cpu: 400000, memory: 100g}}]\n\
         queues:\n  - {name: a, capacity: 50}\n  - {name: b, capacity: 50, user_limit_factor: 2}\n",
    );
    let workload = scratch.file(
        "workload.yaml",
        "version: 1\nworkflows:\n\
         \x20 - name: fill\n    queue: root.b\n    start: 0s\n    jobs:\n      - name: j\n        stages:\n\
         \x20         - {name: s, tasks: 200, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1h}}\n\
         \x20 - name: late\n    queue: root.a\n    start: 10m\n    jobs:\n      - name: j\n        stages:\n\
         \x20         - {name: s, tasks: 10, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 1h}}\n",
    );
    let out = weir(&[
        "shares",
        "--cluster",
        cluster.as_str(),
        "--workload",
        workload.as_str(),
        "--at",
        "11m",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let state = |q: &str| {
        let row = json["queues"].as_array().unwrap().iter().find(|r| r["queue"] == q).unwrap();
        let s = &row["capacity"]["state"];
        [
            s["used"]["memory"].as_u64().unwrap(),
            s["pending"]["memory"].as_u64().unwrap(),
            s["ideal_memory"].as_u64().unwrap(),
            s["over_ideal_memory"].as_u64().unwrap(),
            s["round_memory"].as_u64().unwrap(),
        ]
    };
    assert_eq!(state("root.a"), [0, 11 * 1024, 11 * 1024, 0, 0]);
    assert_eq!(state("root.b"), [102_400, 101 * 1024, 91_136, 10_240, 2048]);
    assert_eq!(state("root")[2], 102_400, "root's ideal is the cluster");

    // The table has the same figures in its last columns.
    let out =
        weir(&["shares", "--cluster", cluster.as_str(), "--workload", workload.as_str(), "--at", "11m"]);
    let table = text(&out.stdout);
    let b: Vec<&str> = table.lines().find(|l| l.starts_with("root.b ")).unwrap().split_whitespace().collect();
    assert_eq!(b[b.len() - 5..], ["102400", "103424", "91136", "10240", "2048"], "{table}");
    assert!(table.contains("this round"), "{table}");

    // A fair-mode cluster has no such figures: said, not ignored.
    let fair = scratch.file(
        "fair.yaml",
        "version: 1\nnodes: [{count: 1, resources: {cpu: 1000, memory: 1g}}]\nqueues: [{name: a}, {name: b}]\n",
    );
    let out = weir(&["shares", "--cluster", fair.as_str(), "--workload", workload.as_str(), "--at", "1m"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("is in fair mode"), "{}", text(&out.stderr));
}

/// Capacity mode with node labels: each queue's capacity and max capacity in each label's
/// partition, as configured, as a share of the partition and in its memory
/// (CapacitySchedulerConfiguration.getLabeledQueueCapacity / getLabeledQueueMaximumCapacity,
/// multiplied down the tree as YARN's absolute capacities per partition).
#[test]
fn capacity_mode_shows_each_queues_share_of_each_label() {
    let scratch = Scratch::new("shares-labels");
    let file = scratch.file(
        "cluster.yaml",
        "version: 1\nscheduler: {mode: capacity}\nnodes:\n  - {count: 8, resources: {cpu: 10000, memory: 10240}}\n  - {count: 2, resources: {cpu: 10000, memory: 10240}, label: gpu}\n\
         queues:\n  - {name: ml, capacity: 50, accessible_labels: {gpu: {capacity: 80, max_capacity: 90}}, children: [{name: train, capacity: 100, accessible_labels: {gpu: {capacity: 100}}}]}\n  - {name: etl, capacity: 50, accessible_labels: {gpu: {capacity: 20}}}\n",
    );
    let out = weir(&["shares", "--cluster", file.as_str(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let gpu = |q: &str| {
        json["queues"].as_array().unwrap().iter().find(|r| r["queue"] == q).unwrap()["capacity"]["labels"]
            ["gpu"]
            .clone()
    };
    // train: 100% of ml's 80% of the 20 GiB partition = 16,384 MiB; max 100% of ml's 90%.
    assert_eq!(gpu("root.ml.train")["guaranteed"]["memory"], 16384);
    assert_eq!(gpu("root.ml.train")["max"]["memory"], 18432);
    assert_eq!(gpu("root.etl")["guaranteed"]["memory"], 4096);
    let out = weir(&["shares", "--cluster", file.as_str()]);
    let table = text(&out.stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with("root.ml.train ") && l.contains(" gpu "))
        .unwrap_or_else(|| panic!("{table}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[2..], ["100", "80.0%", "16384", "100", "90.0%", "18432"], "{table}");
}
