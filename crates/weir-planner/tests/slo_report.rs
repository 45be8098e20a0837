//! The SLO report over run records gives exactly the figures `weir simulate` puts in
//! `summary.json`'s tiers, on the records of a real simulation: one set of definitions for the
//! live server's dashboard and the simulator.

use weir_model::{ClusterConfig, Time, Workload};
use weir_planner::{slo_report, RunEnd, RunOutcome};
use weir_sim::{SimConfig, Simulation};

fn read(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_report_matches_the_simulators_tier_summary() {
    // The ad-hoc layout of the story misses many tier-1 SLOs, so every figure is exercised.
    let cluster = ClusterConfig::from_yaml("cluster-adhoc.yaml", &read("examples/story/cluster-adhoc.yaml"))
        .expect("cluster");
    let workload = Workload::from_yaml("workload.yaml", &read("examples/story/workload.yaml"), &cluster)
        .expect("workload");
    let until = Time(2 * 86_400_000);
    let config = SimConfig { seed: 7, until: Some(until), ..SimConfig::default() };
    let outcome = Simulation::new(cluster, workload, config).expect("sim").finish().expect("finish");
    let runs: Vec<RunOutcome> = outcome
        .runs
        .iter()
        .map(|r| {
            let wf = &outcome.workload.workflows[r.workflow as usize];
            RunOutcome {
                workflow: wf.name.clone(),
                tier: wf.tier,
                submit_ms: r.submit.as_millis(),
                end_ms: r.end.map(|t| t.as_millis()),
                end: match (r.failed, r.end) {
                    (true, _) => RunEnd::Failed,
                    (false, Some(_)) => RunEnd::Succeeded,
                    (false, None) => RunEnd::Unfinished,
                },
                slo_ms: wf.slo.map(|d| d.as_millis()),
            }
        })
        .collect();
    let report = slo_report(&runs, until.as_millis());
    let mut checked_misses = false;
    for t in &report.tiers {
        let s = &outcome.summary.tiers[&t.tier.to_string()];
        let f = &t.figures;
        assert_eq!(f.runs, s.runs, "tier {} runs", t.tier);
        assert_eq!(f.runs_with_slo, s.runs_with_slo, "tier {} runs with an SLO outcome", t.tier);
        assert_eq!(f.slo_met, s.slo_met, "tier {} met", t.tier);
        assert_eq!(f.slo_success_ratio, s.slo_success_ratio, "tier {} ratio", t.tier);
        assert_eq!(t.workflows, s.workflows, "tier {} workflows", t.tier);
        assert_eq!(t.slo_successful_workflows, s.slo_successful_workflows, "tier {} successful", t.tier);
        let secs = |ms: Option<u64>| ms.map(|v| v as f64 / 1000.0);
        assert_eq!(secs(f.runtime_p50_ms), s.runtime_p50, "tier {} p50", t.tier);
        assert_eq!(secs(f.runtime_p99_ms), s.runtime_p99, "tier {} p99", t.tier);
        checked_misses |= f.slo_met < f.runs_with_slo;
    }
    assert!(checked_misses, "the scenario should miss some SLOs: {:?}", report.tiers);
    assert!(report.tiers[0].figures.runs_with_slo > 0);
}
