//! `weir simulate` says when work is left unfinished and why, warns about replays into capped
//! queues, and flags waits of years.

mod common;

use std::fs;

use common::{text, weir, Scratch};
use serde_json::Value;

/// One SWF line: job `id` submitted at `submit` s, running `runtime` s on `procs` processors.
fn swf_line(id: u64, submit: u64, runtime: u64, procs: u64) -> String {
    format!("{id} {submit} -1 {runtime} {procs} -1 -1 {procs} -1 -1 1 1 1 -1 -1 -1 -1 -1\n")
}

fn summary(dir: &std::path::Path) -> Value {
    let s = fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&s).expect("json")
}

#[test]
fn a_replay_into_a_capped_queue_warns_and_waits_of_years_are_flagged() {
    let dir = Scratch::new("ending-capped");
    // 400 one-day jobs into the example cluster's root.default (10%, 20 apps at once).
    let trace: String = (0..400).map(|i| swf_line(i + 1, i, 86_400, 64)).collect();
    let trace = format!("swf:{}", dir.file("t.swf", &trace));
    let out = dir.0.join("out").display().to_string();
    let o = weir(&["simulate", "--trace", &trace, "--am", "none", "--out", &out, "--no-report"]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: the trace's jobs go to root.default (--queue), which is capped: max 10% of the cluster (root.default), max_running_apps 20 (root.default)"),
        "{stderr}"
    );
    // 64 cores each, 10% of 640 cores: one job at a time, 400 days end to end.
    assert!(stdout.contains("warning: a job waited 399d") && stdout.contains("(1.1 years)"), "{stdout}");
    let s = summary(&dir.0.join("out"));
    assert_eq!(s["ending"]["reason"], "completed");
    assert!(s["job_figures"]["delay"]["max"].as_f64().expect("max") > 365.0 * 86_400.0);
}

#[test]
fn unfinished_work_is_named_on_the_terminal_and_in_the_summary() {
    let dir = Scratch::new("ending-stuck");
    let cluster = dir.file(
        "c.yaml",
        "version: 1\nnodes:\n  - {count: 2, resources: {cpu: 4000, memory: 16g}}\nqueues:\n  - {name: open}\n  - {name: shut, max: {cpu: 0, memory: 0}}\n",
    );
    let workload = dir.file(
        "w.yaml",
        "version: 1\nworkflows:\n  - name: ok\n    queue: root.open\n    jobs:\n      - name: j\n        stages:\n          - {name: s, tasks: 2, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 30s}}\n  - name: never\n    queue: root.shut\n    jobs:\n      - name: j\n        stages:\n          - {name: s, tasks: 1, resources: {cpu: 1000, memory: 1g}, duration: {fixed: 30s}}\n",
    );
    let out = dir.0.join("out").display().to_string();
    let o = weir(&[
        "simulate",
        "--cluster",
        &cluster,
        "--workload",
        &workload,
        "--until",
        "30d",
        "--out",
        &out,
        "--no-report",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    // Said before the run: the cap of nothing, and the work it will hold back.
    assert!(stderr.contains("c.yaml: queues.shut.max: max {cpu: 0, memory: 0"), "{stderr}");
    assert!(stderr.contains("w.yaml: workflows.never.jobs.j.stages.s.resources: a task of"), "{stderr}");
    let v = weir(&["validate", "--cluster", &cluster, &workload]);
    assert!(v.status.success(), "warnings do not fail validation");
    assert!(
        text(&v.stderr).contains("warning: workflows.never.jobs.j.stages.s.resources"),
        "{}",
        text(&v.stderr)
    );
    assert!(
        stdout.contains(
            "unfinished work (no progress possible): the replay stopped early: 1 run (1 job) could make no progress"
        ),
        "{stdout}"
    );
    assert!(stderr.contains("warning: the replay stopped early (no_progress)"), "{stderr}");
    // The waits measured are of the placed jobs; the one never placed is named beside them.
    assert!(
        stdout.contains("jobs: wait mean 0s p50 0s p99 0s (and 1 job never placed, not in these figures)"),
        "{stdout}"
    );
    assert!(stdout.contains("root.shut: pending because root.shut is at its max"), "{stdout}");
    let s = summary(&dir.0.join("out"));
    assert_eq!(s["ending"]["reason"], "no_progress");
    assert_eq!(s["ending"]["complete"], false);
    assert_eq!(s["jobs_never_placed"], 1);
    assert_eq!(s["makespan"], 30.0);
    assert_eq!(s["ending"]["unfinished_by_reason"][0]["jobs"], 1);
    assert_eq!(s["runs_unfinished"], 1);
    // It stopped where it got stuck, not at the 30-day horizon.
    assert!(s["simulated_seconds"].as_f64().expect("seconds") < 3600.0, "{}", s["simulated_seconds"]);
}
