//! What the fuzz targets share: the small cluster and workload that the other half of a
//! structured input is paired with, and a short, bounded simulation, so that every input that
//! parses is carried into the engine and the simulator, where the deeper bugs are.
//!
//! Bounds keep each input to a fraction of a second: a day of simulated time, 200 runs, 20,000
//! steps, clusters of at most 1,000 nodes. Invariant checks run after every step, so a broken
//! engine or simulator invariant is a crash the fuzzer reports.

use weir_model::{ClusterConfig, Duration, Time, Workload};
use weir_sim::{SimConfig, SimError, Simulation};

pub const CLUSTER: &str = include_str!("../../examples/cluster-small.yaml");

/// A workload for `CLUSTER`: one recurring and one one-off workflow.
pub const WORKLOAD: &str = "version: 1
workflows:
  - name: hourly
    queue: root.a
    every: 1h
    slo: 30m
    jobs:
      - name: j
        stages:
          - {name: m, tasks: 12, resources: {cpu: 1000, memory: 2g}, duration: {exponential: {mean: 5m}}}
          - {name: r, after: [m], tasks: 2, resources: {cpu: 2000, memory: 4g}, duration: {fixed: 3m}}
  - name: once
    queue: root.b
    jobs:
      - name: j
        stages:
          - {name: s, tasks: 40, resources: {cpu: 500, memory: 1g}, duration: {uniform: {min: 1m, max: 20m}}}
";

const STEPS: u32 = 20_000;
const MAX_NODES: u64 = 1_000;

pub fn cluster() -> ClusterConfig {
    ClusterConfig::from_yaml("cluster-small.yaml", CLUSTER).expect("the example cluster is valid")
}

/// Simulate up to a day and `STEPS` steps. Errors a user can cause are fine; an internal error
/// (an engine input the simulator built wrongly, a broken invariant) is a bug and panics.
pub fn simulate_briefly(cluster: ClusterConfig, workload: Workload) {
    if cluster.node_count() > MAX_NODES {
        return;
    }
    let config = SimConfig {
        until: Some(Time(Duration::from_secs(86_400).as_millis())),
        max_runs: 200,
        check_invariants: true,
        ..SimConfig::default()
    };
    let mut sim = match Simulation::new(cluster, workload, config) {
        Ok(sim) => sim,
        Err(e) => return not_internal(e),
    };
    for _ in 0..STEPS {
        match sim.step() {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return not_internal(e),
        }
    }
}

fn not_internal(e: SimError) {
    if let SimError::Internal { .. } = e {
        panic!("{e}");
    }
}
