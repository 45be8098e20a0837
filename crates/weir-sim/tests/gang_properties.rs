//! Random rigid-job logs (SWF-shaped, sizes up to the whole machine, offered at 1 to 3 times its
//! capacity) under each backfill mode and every leaf order (fair; fifo by submission, shortest
//! or largest job first), with the default gang timeout: every
//! job completes, no gang starts piecemeal, and no state with placeholders held while nothing
//! runs outlasts a gang timeout (the simulator checks the last two after every step). Under
//! EASY and conservative backfilling with an arrival order no job starts later than a start
//! reserved for it. Issue 18's livelock showed up here as
//! replays that stopped "no progress" under `policy: fair`.

use std::collections::BTreeMap;

use weir_model::{ClusterConfig, Time};
use weir_sim::import::{import, ImportOptions, NodeFit, TraceKind, WalltimeFrom};
use weir_sim::synth_swf::SwfModel;
use weir_sim::{EndReason, SimConfig, Simulation};

fn cluster(policy: &str, backfill: &str) -> ClusterConfig {
    let yaml = format!(
        "version: 1
scheduler: {{backfill: {backfill}}}
nodes: [{{count: 16, resources: {{cpu: 1000, memory: 2048}}}}]
queues: [{{name: default, policy: {policy}}}]
"
    );
    ClusterConfig::from_yaml("c.yaml", &yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// Every log of `seeds` × `loads` under each of `modes`, and each leaf order.
fn check(seeds: std::ops::RangeInclusive<u64>, loads: &[f64], modes: &[(&str, WalltimeFrom)]) {
    for seed in seeds {
        for &load in loads {
            let text = SwfModel { jobs: 80, processors: 16, load, seed }.swf();
            for policy in ["fair", "fifo", "fifo, job_order: shortest", "fifo, job_order: largest"] {
                for &(backfill, walltime) in modes {
                    let c = cluster(policy, backfill);
                    let options =
                        ImportOptions { fit: NodeFit::of(&c), walltime, ..ImportOptions::default() };
                    let w = import(TraceKind::Swf, "r.swf", text.as_bytes(), &options).expect("imports");
                    let jobs = w.workload.workflows.len() as u64;
                    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
                    let case = format!("seed {seed} load {load} {policy} {backfill} {walltime:?}");
                    let mut sim =
                        Simulation::new(c, w.workload, config).unwrap_or_else(|e| panic!("{case}: {e}"));
                    let mut reserved: BTreeMap<u32, Time> = BTreeMap::new();
                    while sim.step().unwrap_or_else(|e| panic!("{case}: {e}")) {
                        let engine = sim.engine();
                        for (job, at) in
                            engine.easy_reservation().into_iter().chain(engine.conservative_reservations())
                        {
                            let wf = sim.workflow_of(job).expect("a simulated job");
                            let e = reserved.entry(wf).or_insert(at);
                            *e = (*e).min(at);
                        }
                    }
                    let o = sim.finish().unwrap_or_else(|e| panic!("{case}: {e}"));
                    let s = &o.summary;
                    assert_eq!((s.runs_completed, s.ending.reason), (jobs, EndReason::Completed), "{case}");
                    assert_eq!(
                        s.gangs.as_ref().expect("gangs").started,
                        jobs,
                        "{case}: each gang started once"
                    );
                    // A reservation binds while its job stays ahead of later ones. Under shortest- or
                    // largest-first a later job can overtake it, so only arrival orders promise it.
                    let reorders = policy.contains("job_order");
                    for (wf, at) in reserved.iter().filter(|_| !reorders) {
                        let run = o.runs.iter().find(|r| r.workflow == *wf).expect("run");
                        let start = run.start.expect("started");
                        assert!(start <= *at, "{case}: workflow {wf} reserved for {at}, started {start}");
                    }
                }
            }
        }
    }
}

#[test]
fn every_random_rigid_log_completes_without_backfilling_and_under_easy() {
    let modes =
        [("none", WalltimeFrom::Trace), ("easy", WalltimeFrom::Trace), ("easy", WalltimeFrom::Runtime)];
    check(1..=4, &[1.0, 1.5, 2.0, 3.0], &modes);
}

#[test]
fn every_random_rigid_log_completes_under_conservative_backfilling() {
    let modes = [("conservative", WalltimeFrom::Trace), ("conservative", WalltimeFrom::Runtime)];
    check(1..=2, &[1.0, 2.0, 3.0], &modes);
}
