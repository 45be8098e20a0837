//! weir-engine: the scheduler, a pure state machine in the manner of sans-IO protocol libraries.
//!
//! The host owns time and I/O; the engine owns policy. Hosts feed inputs stamped with `now`
//! (`on_node_added`, `on_job_submitted`, `on_requests_added`, `on_container_finished`,
//! `on_job_finished`, …), call [`Engine::schedule`] to get [`Decision`]s, and call again at
//! [`Engine::next_wakeup`] at the latest. Queries — [`Engine::queues`], [`Engine::explain`] — are
//! pure. The simulator (virtual time) and the server (real time) are two drivers of one engine.
//!
//! It never reads a clock, does I/O, uses randomness or spawns threads. It is deterministic: the
//! same inputs give the same decisions, bit for bit; hash maps serve lookups only, never an
//! iteration that could decide anything, and every tie breaks on an explicit key.
//!
//! Semantics are the Hadoop YARN Fair Scheduler's (fair shares, ordering, running-app limits,
//! AM share, fair-share and min-share preemption) plus weir's tiers; see the module docs of
//! `fair_share`, `order`, `admission`, `placement` and `preemption`. Beyond YARN: gangs that
//! start whole (`gang`, YuniKorn's placeholders and timeout), EASY backfilling (`backfill`),
//! GPU fractions on one physical GPU and node selectors by label and GPU model (`nodes`), the
//! FGD paper's GPU fragmentation (`fragmentation`), and a bound on live containers.

mod admission;
mod backfill;
pub mod capacity;
mod capacity_labels;
pub mod capacity_preemption;
mod capacity_shares;
mod capacity_users;
mod conservative;
mod containers;
mod decision;
mod engine;
mod error;
mod explain;
mod fair_children;
pub mod fair_share;
mod fragmentation;
mod gang;
mod guarantee;
mod ids;
mod input;
mod invariants;
mod jobs;
mod nodes;
mod order;
mod placement;
mod preemption;
mod ready;
mod reservation;
mod shares;
mod sorted;
mod starvation;
mod state;
mod wait;

pub use capacity_shares::CapacityShare;
pub use decision::{Decision, PreemptReason, Starvation};
pub use engine::{Engine, DEFAULT_CONTAINER_LIMIT};
pub use error::EngineError;
pub use explain::{Explanation, JobStatus, QueueSnapshot, QueueStat};
pub use fragmentation::GpuFragmentation;
pub use ids::{ContainerId, JobId, NodeId};
pub use input::{Input, JobSpec, NodeSpec, Request, Selector, SelectorId};
pub use invariants::NodeSnapshot;
pub use reservation::ReservationStats;
pub use shares::{shares_for, QueueShares};
pub use wait::{StartPosition, WaitReason, AHEAD_LISTED};
