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
    /// The most runs the workload may submit before the horizon, counted before the first
    /// step (Poisson arrivals by their mean). Every run's record is kept for the outputs, so a
    /// typo in a period (`every: 1s` for `1d`) would otherwise end in an out-of-memory.
    pub max_runs: u64,
    /// The most containers (tasks, AMs and gang placeholders) running at once; past it the rest
    /// wait (the engine's container limit). Each costs a few hundred bytes, so a stage of 10^8
    /// tiny tasks on a huge node stays within memory.
    pub max_containers: usize,
}

/// The default [`SimConfig::max_containers`]: the engine's default container limit.
pub const DEFAULT_MAX_CONTAINERS: usize = weir_engine::DEFAULT_CONTAINER_LIMIT;

/// The default [`SimConfig::max_runs`]: a million runs, a few hundred MB of records.
pub const DEFAULT_MAX_RUNS: u64 = 1_000_000;

/// The longest span of virtual time weir simulates: 100 years. A later event (a task of
/// `100000d`, a trace timestamp in the wrong unit, a horizon of `50000d`) is an error naming it,
/// which also keeps every sum of milliseconds far from overflowing.
pub const MAX_SIMULATED: Duration = Duration(100 * 365 * 86_400_000);

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
            max_runs: DEFAULT_MAX_RUNS,
            max_containers: DEFAULT_MAX_CONTAINERS,
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
