//! C(p, a) against remaining times known in closed form, and Amdahl's S + P/a.

mod common;

use common::{fixed_stage, profile};
use weir_slo::{Amdahl, Indicator, JobState, RemainingTable, TableConfig};

const SEC: u64 = 1000;

#[test]
fn one_stage_of_fixed_tasks_has_the_closed_form_remaining_time() {
    // N tasks of d seconds on a containers run in waves of a: with k tasks done (k a multiple
    // of a, as every wave ends together), (N - k)/a waves of d are left — at most, just as
    // the wave after k starts; less as it runs.
    let (n, d) = (6u32, 10u64);
    let p = profile(vec![fixed_stage("s", vec![], n, d)]);
    let config = TableConfig { max_allocation: 6, runs: 3, buckets: n, indicator: Indicator::Work, seed: 5 };
    let table = RemainingTable::build(&p, &config).unwrap_or_else(|e| panic!("{e}"));
    for a in 1..=6u32 {
        for done in 0..n {
            // Progress done/n is reached only at a wave's end; lookups fall back to the last one.
            let reached = done / a * a;
            let waves = (n - reached).div_ceil(a);
            let progress = f64::from(done) / f64::from(n);
            assert_eq!(
                table.remaining(progress, a, 1.0),
                u64::from(waves) * d * SEC,
                "max of C({progress}, {a})"
            );
            // The median is within the last wave's span.
            let median = table.remaining(progress, a, 0.5);
            assert!(
                median > u64::from(waves - 1) * d * SEC && median <= u64::from(waves) * d * SEC,
                "{median}"
            );
        }
    }
}

#[test]
fn two_stages_behind_a_barrier_add_up() {
    // 4 tasks of 10 s, then 2 of 30 s: at a = 2, 20 s + 30 s from the start; at a = 4, 10 + 30;
    // at a = 1, 40 + 60.
    let p = profile(vec![fixed_stage("map", vec![], 4, 10), fixed_stage("reduce", vec![0], 2, 30)]);
    let config = TableConfig { max_allocation: 4, runs: 2, buckets: 10, indicator: Indicator::Work, seed: 1 };
    let table = RemainingTable::build(&p, &config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(table.remaining(0.0, 2, 1.0), 50 * SEC);
    assert_eq!(table.remaining(0.0, 4, 1.0), 40 * SEC);
    assert_eq!(table.remaining(0.0, 1, 1.0), 100 * SEC);
    // Map done (40 of 100 task-seconds): the reduce stage's 30 s at any a ≥ 2.
    assert_eq!(table.remaining(0.4, 2, 1.0), 30 * SEC);
    // An allocation past the table reads its largest.
    assert_eq!(table.remaining(0.0, 9, 1.0), 40 * SEC);
}

#[test]
fn tables_are_deterministic_for_a_seed_and_survive_json() {
    let mut p = profile(vec![fixed_stage("s", vec![], 8, 10)]);
    p.stages[0].duration_ms = vec![1000, 2000, 4000, 8000, 12000, 20000, 25000, 40000, 50000, 50000, 60000];
    p.stages[0].mean_ms = 10_000.0;
    p.stages[0].failure_probability = 0.1;
    let config =
        TableConfig { max_allocation: 4, runs: 10, buckets: 5, indicator: Indicator::CriticalPath, seed: 9 };
    let a = RemainingTable::build(&p, &config).unwrap_or_else(|e| panic!("{e}"));
    let b = RemainingTable::build(&p, &config).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a, b);
    let back = RemainingTable::from_json("t.json", &a.to_json()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, a);
    let other =
        RemainingTable::build(&p, &TableConfig { seed: 10, ..config }).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(other, a, "another seed draws other durations");
    // More containers never predict longer at the same progress (the 99th percentile).
    for a1 in 1..4 {
        assert!(a.remaining(0.0, a1, 0.99) >= a.remaining(0.0, a1 + 1, 0.99));
    }
}

#[test]
fn amdahl_is_the_critical_path_plus_the_work_over_the_allocation() {
    let p = profile(vec![fixed_stage("map", vec![], 4, 10), fixed_stage("reduce", vec![0], 2, 30)]);
    let mut state = JobState::new(&p);
    state.started = true;
    // S = 10 + 30, P = 40 + 60 task-seconds.
    assert_eq!(Amdahl::remaining(&p, &state, 1), (40 + 100) * SEC);
    assert_eq!(Amdahl::remaining(&p, &state, 4), (40 + 25) * SEC);
    // Map done: S = 30, P = 60.
    state.done = vec![4, 0];
    assert_eq!(Amdahl::remaining(&p, &state, 2), (30 + 30) * SEC);
    // Before the first task, the initialization latency is ahead too.
    let mut with_init = p.clone();
    with_init.init_ms = 7 * SEC;
    assert_eq!(Amdahl::remaining(&with_init, &JobState::new(&with_init), 4), (7 + 40 + 25) * SEC);
}

#[test]
fn a_bad_table_file_is_refused_naming_the_field() {
    let p = profile(vec![fixed_stage("s", vec![], 2, 1)]);
    let config = TableConfig { max_allocation: 2, runs: 1, buckets: 2, indicator: Indicator::Work, seed: 1 };
    let t = RemainingTable::build(&p, &config).unwrap_or_else(|e| panic!("{e}"));
    let text = t.to_json().replacen("\"version\":1", "\"version\":7", 1);
    let e = RemainingTable::from_json("j.table.json", &text).expect_err("version 7").to_string();
    assert!(e.starts_with("j.table.json: version: 7"), "{e}");
    let e = RemainingTable::build(&p, &TableConfig { runs: 0, ..config }).expect_err("no runs").to_string();
    assert!(e.contains("= 2, 0, 2: each must be at least 1"), "{e}");
}
