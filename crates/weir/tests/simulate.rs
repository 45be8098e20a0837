//! `weir simulate` as a user runs it: the built-in example, the story in examples/story, trace
//! replays, determinism of every output file, and errors that name what is wrong.

mod common;

use std::fs;
use std::path::Path;

use common::{text, weir, Scratch};
use serde_json::Value;

fn simulate(out: &Path, args: &[&str]) -> (String, String) {
    let out_s = out.display().to_string();
    let mut all = vec!["simulate", "--out", &out_s];
    all.extend_from_slice(args);
    let o = weir(&all);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "weir {all:?} failed:\n{stderr}");
    (stdout, stderr)
}

fn summary(dir: &Path) -> Value {
    let s = fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&s).expect("summary.json is JSON")
}

fn tier_ratio(s: &Value, tier: &str) -> f64 {
    s["tiers"][tier]["slo_success_ratio"].as_f64().unwrap_or_else(|| panic!("tier {tier}: {}", s["tiers"]))
}

#[test]
fn the_built_in_example_writes_every_output() {
    let dir = Scratch::new("sim-example");
    let (stdout, _) = simulate(&dir.0, &["--until", "2d"]);
    assert!(stdout.contains("simulated 2d on 40 nodes"), "{stdout}");
    assert!(stdout.contains("tier  runs"), "{stdout}");
    let s = summary(&dir.0);
    for field in [
        "jobs_submitted",
        "jobs_completed",
        "jobs_failed",
        "runs",
        "events",
        "simulated_seconds",
        "wall_seconds",
        "utilization",
        "preemptions",
        "wasted_container_seconds",
        "tiers",
        "queues",
    ] {
        assert!(s.get(field).is_some(), "summary.json lacks {field}");
    }
    assert_eq!(s["simulated_seconds"], 172_800.0);
    assert!(s["jobs_completed"].as_u64().expect("count") > 100);
    let cpu = s["utilization"]["cpu"].as_f64().expect("utilization");
    assert!(cpu > 0.1 && cpu < 1.0, "{cpu}");
    for t in ["1", "2", "3"] {
        for f in ["runs", "slo_met", "slo_success_ratio", "workflows", "slo_successful_workflows"] {
            assert!(s["tiers"][t].get(f).is_some(), "tiers.{t}.{f}");
        }
    }
    let q = &s["queues"][0];
    for f in [
        "queue",
        "usage_avg",
        "fair_share_avg",
        "wait_p50",
        "wait_p99",
        "delay_p50",
        "delay_p99",
        "preempted",
    ] {
        assert!(q.get(f).is_some(), "queues[0].{f}");
    }
    let runs = fs::read_to_string(dir.0.join("runs.csv")).expect("runs.csv");
    assert!(runs.starts_with(
        "workflow,tier,queue,submit,start,end,slo,met,status,wait,delay,response,bounded_slowdown\n"
    ));
    assert_eq!(runs.lines().count() as u64 - 1, s["runs"].as_u64().expect("runs"));
    // Every run's delay (until its jobs held all they asked for) is at least its wait (to its
    // first container), and a completed run's slowdown is at least 1.
    for row in runs.lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        let (wait, delay, slowdown) = (f[9], f[10], f[12]);
        if let (Ok(wait), Ok(delay)) = (wait.parse::<u64>(), delay.parse::<u64>()) {
            assert!(delay >= wait, "{row}");
        }
        if f[8] == "completed" {
            assert!(slowdown.parse::<f64>().expect("slowdown") >= 1.0, "{row}");
        }
    }
    let jobs = fs::read_to_string(dir.0.join("jobs.csv")).expect("jobs.csv");
    assert!(jobs.starts_with("job,workflow,job_name,tier,queue,submit,first_container,all_granted,end,"));
    assert_eq!(jobs.lines().count() as u64 - 1, s["jobs_submitted"].as_u64().expect("jobs"));
    for f in ["wait", "delay", "response", "bounded_slowdown"] {
        assert!(s["job_figures"][f]["p99"].is_number(), "job_figures.{f}: {}", s["job_figures"]);
        assert!(s["run_figures"][f]["mean"].is_number(), "run_figures.{f}");
    }
    let (wait, delay) = (&s["job_figures"]["wait"]["p99"], &s["job_figures"]["delay"]["p99"]);
    assert!(delay.as_f64() >= wait.as_f64(), "delay p99 {delay} below wait p99 {wait}");
    assert!(stdout.contains("delay (until all asked for was granted) p50"), "{stdout}");
    let usage = fs::read_to_string(dir.0.join("usage.csv")).expect("usage.csv");
    assert!(usage.starts_with("start,end,queue,cpu,memory,running_apps,gpu\n"));
    assert!(usage.lines().count() > 100);
    let report = fs::read_to_string(dir.0.join("report.html")).expect("report.html");
    assert!(report.contains("<svg") && report.contains("SLO success per tier"));
    for part in [
        "Each point covers",
        "cpu (max)",
        "Pending work and preemptions over time",
        "Containers preempted per bucket",
    ] {
        assert!(report.contains(part), "report.html lacks {part:?}");
    }
    assert!(!report.contains("<script"), "self-contained, no scripts");
}

#[test]
fn the_same_seed_gives_byte_identical_files() {
    let a = Scratch::new("sim-det-a");
    let b = Scratch::new("sim-det-b");
    let c = Scratch::new("sim-det-c");
    let args = ["--until", "1d", "--seed", "7", "--node-mtbf", "5d"];
    simulate(&a.0, &args);
    simulate(&b.0, &args);
    simulate(&c.0, &["--until", "1d", "--seed", "8", "--node-mtbf", "5d"]);
    for f in ["runs.csv", "jobs.csv", "usage.csv", "pending.csv", "report.html"] {
        let x = fs::read(a.0.join(f)).expect("file");
        assert!(x == fs::read(b.0.join(f)).expect("file"), "{f} differs between two runs with one seed");
    }
    let mut x = summary(&a.0);
    let mut y = summary(&b.0);
    x["wall_seconds"] = Value::Null;
    y["wall_seconds"] = Value::Null;
    assert_eq!(x, y);
    assert_ne!(
        fs::read(a.0.join("runs.csv")).ok(),
        fs::read(c.0.join("runs.csv")).ok(),
        "another seed, other runs"
    );
}

#[test]
fn the_story_tiered_layout_meets_tier1_slos_the_ad_hoc_one_misses() {
    let adhoc = Scratch::new("story-adhoc");
    let tiered = Scratch::new("story-tiered");
    let workload = ["--workload", "examples/story/workload.yaml", "--until", "7d"];
    let mut a = vec!["--cluster", "examples/story/cluster-adhoc.yaml"];
    a.extend_from_slice(&workload);
    let mut t = vec!["--cluster", "examples/story/cluster-tiered.yaml"];
    t.extend_from_slice(&workload);
    simulate(&adhoc.0, &a);
    simulate(&tiered.0, &t);
    let (sa, st) = (summary(&adhoc.0), summary(&tiered.0));
    let (ra, rt) = (tier_ratio(&sa, "1"), tier_ratio(&st, "1"));
    assert!(rt > ra + 0.3, "tier-1 SLO success: tiered {rt}, ad hoc {ra}");
    assert!(rt >= 0.9, "tiered layout: {rt}");
    assert_eq!(sa["preemptions"], 0, "the ad-hoc layout never preempts");
    assert_eq!(sa["jobs_submitted"], st["jobs_submitted"], "same workload");
}

#[test]
fn traces_replay_and_report_what_they_skipped() {
    let dir = Scratch::new("sim-sls");
    let (_, stderr) = simulate(
        &dir.0,
        &[
            "--trace",
            "sls:../shared/traces/yarn-sls/inputsls.json",
            "--queue-map",
            "sls_queue_1=root.ads.ranking.tier1",
        ],
    );
    assert!(stderr.contains("inputsls.json: "), "{stderr}");
    let s = summary(&dir.0);
    assert_eq!(s["runs"], 2);
    assert_eq!(s["runs_completed"], 2);
    let runs = fs::read_to_string(dir.0.join("runs.csv")).expect("runs.csv");
    assert!(runs.contains(",1,root.ads.ranking.tier1,"), "mapped queue, tier from the leaf:\n{runs}");
    assert!(runs.contains(",root.default,"), "unmapped jobs go to --queue:\n{runs}");

    let dir = Scratch::new("sim-alibaba");
    let (_, stderr) = simulate(
        &dir.0,
        &[
            "--trace",
            "alibaba2018:../shared/traces/alibaba-2018-dag/selected_DAGs.csv",
            "--load-scale",
            "0.03",
            "--time-scale",
            "10",
            "--queue",
            "root.search.relevance.tier3",
        ],
    );
    assert!(stderr.contains("55874 rows read"), "{stderr}");
    assert!(stderr.contains("skipped rows:"), "{stderr}");
    let s = summary(&dir.0);
    let runs = s["runs"].as_u64().expect("runs");
    assert!((30..=100).contains(&runs), "about 3% of 2,119 jobs: {runs}");
    assert_eq!(s["runs_completed"], runs);
}

#[test]
fn bad_input_is_named() {
    let dir = Scratch::new("sim-bad");
    let out = dir.0.display().to_string();
    let fail = |args: &[&str]| {
        let mut all = vec!["simulate", "--out", &out];
        all.extend_from_slice(args);
        let o = weir(&all);
        assert!(!o.status.success(), "{args:?} should fail");
        text(&o.stderr)
    };
    let e = fail(&["--trace", "parquet:x.pq"]);
    assert!(e.contains("parquet"), "{e}");
    let e = fail(&["--trace", "swf:no/such/file.swf"]);
    assert!(e.contains("no/such/file.swf"), "{e}");
    let bad = dir.file("w.yaml", "version: 1\nworkflows:\n  - {name: w, queue: root.nope, jobs: []}\n");
    let e = fail(&["--workload", &bad]);
    assert!(e.contains("w.yaml") && e.contains("workflows.w"), "{e}");
    let e = fail(&["--tier-mix", "10,90", "--trace", "sls:../shared/traces/yarn-sls/inputsls.json"]);
    assert!(e.contains("--tier-mix"), "{e}");
    let e = fail(&["--am", "lots"]);
    assert!(e.contains("--am lots"), "{e}");
    let e = fail(&["--until", "a week"]);
    assert!(e.contains("a week"), "{e}");
}

/// Issue 13's inputs through the command: each is refused at once with the limit and the way
/// to raise it (their memory and time are in BENCHMARKS.md, "Hostile inputs").
#[test]
fn hostile_input_is_refused_with_the_limit() {
    let dir = Scratch::new("sim-hostile");
    let out = dir.0.display().to_string();
    let fail = |args: &[&str]| {
        let mut all = vec!["simulate", "--out", &out];
        all.extend_from_slice(args);
        let o = weir(&all);
        assert!(!o.status.success(), "{args:?} should fail");
        text(&o.stderr)
    };
    let cluster = dir.file(
        "c.yaml",
        "version: 1\nnodes:\n  - count: 4294967295\n    resources: {cpu: 8000, memory: 32g}\nqueues:\n  - {name: default}\n",
    );
    let e = fail(&["--cluster", &cluster]);
    assert!(e.contains("c.yaml: nodes[0].count: 4294967295 nodes is more than the 200000"), "{e}");
    let small = dir.file("s.yaml", "version: 1\nnodes:\n  - {count: 4, resources: {cpu: 8000, memory: 32g}}\nqueues:\n  - {name: default}\n");
    let every = |period: &str| {
        format!(
            "version: 1\nworkflows:\n  - name: tick\n    queue: root.default\n    every: {period}\n    jobs:\n      - name: j\n        stages:\n          - {{name: s, tasks: 1, resources: {{cpu: 100, memory: 100}}, duration: {{fixed: 1s}}}}\n"
        )
    };
    let w = dir.file("ms.yaml", &every("1ms"));
    let e = fail(&["--cluster", &small, "--workload", &w]);
    assert!(
        e.contains("workflows.tick.every: 1ms is shorter than the shortest period weir accepts, 1s"),
        "{e}"
    );
    let w = dir.file("s1.yaml", &every("1s"));
    let e = fail(&["--cluster", &small, "--workload", &w, "--until", "30d"]);
    assert!(e.contains("about 2592000 runs") && e.contains("--max-runs"), "{e}");
    let e = fail(&["--cluster", &small, "--workload", &w, "--until", "40000d"]);
    assert!(e.contains("the horizon (--until) falls at 40000 days"), "{e}");
    let amp: String = (0..26)
        .map(|i| format!("{{\"job.start.ms\":0,\"job.count\":10000,\"job.tasks\":[{{\"duration.ms\":1000}}],\"job.id\":\"j{i}\"}}\n"))
        .collect();
    let trace = format!("sls:{}", dir.file("amp.json", &amp));
    let e = fail(&["--cluster", &small, "--trace", &trace]);
    assert!(e.contains("more than 250000 jobs (by line 26") && e.contains("--max-jobs"), "{e}");
}

#[test]
fn pending_csv_and_explain_say_why_jobs_are_unfinished() {
    let dir = Scratch::new("sim-pending");
    let (stdout, _) = simulate(&dir.0, &["--until", "6h", "--no-report"]);
    assert!(
        stdout.contains("pending.csv") && !stdout.contains("report.html"),
        "--no-report writes none: {stdout}"
    );
    assert!(!dir.0.join("report.html").exists());
    let s = summary(&dir.0);
    for f in ["made", "fulfilled", "released", "active_at_end", "reserved_nodes_avg"] {
        assert!(s["reservations"].get(f).is_some(), "reservations.{f}");
    }
    assert!(stdout.contains("reservations "), "{stdout}");
    let pending = fs::read_to_string(dir.0.join("pending.csv")).expect("pending.csv");
    let mut lines = pending.lines();
    assert_eq!(
        lines.next(),
        Some(
            "job,workflow,job_name,tier,queue,submit,status,running_containers,pending_containers,usage_cpu,usage_memory,fair_share_cpu,fair_share_memory,pending_cpu,pending_memory,explanation"
        )
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len() as u64, s["jobs_unfinished"].as_u64().expect("count"));
    assert!(!rows.is_empty(), "six hours in, some jobs are still going");
    let job = rows[0].split(',').next().expect("job column");
    // The same run again (same seed), explaining that job.
    let again = Scratch::new("sim-pending-explain");
    let (stdout, _) =
        simulate(&again.0, &["--until", "6h", "--no-report", "--explain", job, "--explain", "99999999"]);
    assert!(stdout.contains(&format!("job-{job} in root.")), "{stdout}");
    assert!(stdout.contains("job-99999999: no such job"), "{stdout}");
}

/// A job the engine rejects (capacity mode's `max_applications`, AbstractLeafQueue's
/// validateSubmitApplication) fails its run at once; the simulation goes on and the other runs
/// are unaffected.
#[test]
fn runs_rejected_at_max_applications_fail_and_the_simulation_goes_on() {
    let root = common::workspace();
    let dir = Scratch::new("sim-rejected");
    let cluster = std::fs::read_to_string(root.join("examples/demo/cluster-capacity.yaml")).unwrap().replace(
        "{name: tier3, tier: 3, capacity: 25, user_limit_factor: -1}",
        "{name: tier3, tier: 3, capacity: 25, user_limit_factor: -1, max_applications: 1}",
    );
    let cluster = dir.file("cluster.yaml", &cluster);
    let out = dir.0.join("out");
    let o = weir(&[
        "simulate",
        "--cluster",
        &cluster,
        "--workload",
        root.join("examples/demo/workload.yaml").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let status = |queue: &str, s: &str| {
        runs.lines().filter(|l| l.contains(queue) && l.contains(&format!(",{s},"))).count()
    };
    assert!(status("root.analytics.tier3", "failed") > 0, "{runs}");
    assert!(status("root.analytics.tier3", "completed") >= 1, "{runs}");
    assert_eq!(status("root.analytics.tier1", "failed"), 0, "{runs}");
    assert!(status("root.analytics.tier1", "completed") > 0, "{runs}");
}

/// Capacity mode's node labels in `weir simulate`: ml's jobs go to the gpu partition by its
/// `default_label` and complete there (their 8 GiB tasks fit only on the gpu node: the
/// unlabelled nodes have 4 GiB); etl's plain jobs complete in the default partition; a
/// stage of etl asking for `gpu`, which etl may not use (its `accessible_labels` are empty),
/// gets its job rejected (SchedulerUtils.validateResourceRequest), so its run fails while the
/// others go on.
#[test]
fn node_labels_in_capacity_mode_simulate_end_to_end() {
    let dir = Scratch::new("sim-labels");
    let cluster = dir.file(
        "cluster.yaml",
        "version: 1\nscheduler: {mode: capacity}\nnodes:\n  - {count: 2, resources: {cpu: 8000, memory: 4g}}\n  - {count: 1, resources: {cpu: 8000, memory: 16g}, label: gpu}\n\
         queues:\n  - {name: ml, capacity: 50, default_label: gpu, accessible_labels: {gpu: {capacity: 100}}}\n  - {name: etl, capacity: 50, accessible_labels: {}}\n",
    );
    let stage = |memory: &str, labels: &str| {
        format!("          - {{name: s, tasks: 4, resources: {{cpu: 1000, memory: {memory}}}, duration: {{fixed: 10m}}{labels}}}\n")
    };
    let workload = dir.file(
        "workload.yaml",
        &format!(
            "version: 1\nworkflows:\n  - name: train\n    queue: root.ml\n    jobs:\n      - name: j\n        stages:\n{}\
             \x20 - name: plain\n    queue: root.etl\n    jobs:\n      - name: j\n        stages:\n{}\
             \x20 - name: wrong-label\n    queue: root.etl\n    jobs:\n      - name: j\n        stages:\n{}",
            stage("8g", ""),
            stage("1g", ""),
            stage("1g", ", node_labels: [gpu]")
        ),
    );
    let out = dir.0.join("out");
    let o = weir(&[
        "simulate",
        "--cluster",
        &cluster,
        "--workload",
        &workload,
        "--out",
        out.to_str().unwrap(),
        "--no-report",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Said before the run, at the stage's path.
    assert!(
        text(&o.stderr).contains(
            "workflows.wrong-label.jobs.j.stages.s.node_labels: root.etl may not use node label `gpu`"
        ),
        "{}",
        text(&o.stderr)
    );
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let status = |name: &str| {
        let line =
            runs.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("no run {name} in\n{runs}"));
        if line.contains(",completed,") {
            "completed"
        } else if line.contains(",failed,") {
            "failed"
        } else {
            "other"
        }
    };
    assert_eq!(status("train"), "completed", "{runs}");
    assert_eq!(status("plain"), "completed", "{runs}");
    assert_eq!(status("wrong-label"), "failed", "{runs}");
}
