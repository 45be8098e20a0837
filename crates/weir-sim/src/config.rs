//! How a simulation runs: its seed, horizon, retry bound, application masters, faults and
//! sampling. Everything here is a plain value the host fills in (the CLI from its flags).

use weir_model::{Duration, Resources, Time};

/// Settings of one simulation run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Every random draw (task durations, failures, Poisson arrivals, node faults) derives from it.
    pub seed: u64,
    /// The end of the simulated window: no run is submitted at or after it, and the simulation
    /// stops there. `None` runs until every submitted run has ended; a workload with recurring
    /// or Poisson arrivals needs a horizon.
    pub until: Option<Time>,
    /// Attempts a task gets before its job fails (a preempted or lost attempt does not count).
    pub max_attempts: u32,
    /// Each job's application master: one container of this size, asked for first and held
    /// until the job ends. `None` runs jobs without one.
    pub am: Option<Resources>,
    pub node_failures: Option<NodeFailures>,
    /// How often queue fair shares and cluster use are sampled for averages and charts.
    pub sample_every: Duration,
    /// Check engine and simulator invariants after every step (slow; on in debug builds).
    pub check_invariants: bool,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            seed: 1,
            until: None,
            max_attempts: 4,
            am: Some(Resources::new(1000, 1024, 0)),
            node_failures: None,
            sample_every: Duration::from_secs(60),
            check_invariants: cfg!(debug_assertions),
        }
    }
}

/// Nodes fail at random and come back after a repair time; their containers are lost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeFailures {
    /// Mean time between failures of one node (failures are a Poisson process per node).
    pub mtbf: Duration,
    /// How long a failed node stays out of service.
    pub repair: Duration,
}
