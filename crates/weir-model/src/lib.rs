//! weir-model: the vocabulary every weir crate shares — resources, time, queue paths — and the
//! cluster and workload files with their validation.
//!
//! It never does I/O: callers read files and hand over text with the file's name, so every error
//! can name the file, the path inside it and what is wrong. Key types: [`Resources`], [`Time`],
//! [`Duration`], [`QueuePath`], [`ClusterFile`] (as written) and [`ClusterConfig`] (validated,
//! with inherited settings and placement rules resolved), [`WorkloadFile`] (as written) and
//! [`Workload`] (workflows → jobs → stages, validated against a cluster: every workflow placed in
//! a leaf queue, every task able to fit on some node, job and stage DAGs in topological order).

pub mod access;
pub mod capacity;
mod capacity_labels;
mod capacity_validation;
pub mod cluster;
pub mod cluster_file;
mod cluster_limits;
mod cluster_validation;
mod dag;
pub mod error;
pub mod placement;
pub mod queue_path;
pub mod resources;
mod stage_io;
mod stage_placement;
pub mod time;
pub mod workload;
pub mod workload_file;
mod workload_validation;
mod workload_warnings;
mod yaml_errors;

pub use access::{AclSpec, PlacementRuleKind, PlacementRuleSpec, UserSpec};
pub use capacity::{CapacityQueue, CapacitySpec, LabelShare, LeafOrdering, QueueState};

/// First characters a name may not have: a spreadsheet opening a CSV file that holds it
/// (`usage.csv`, `runs.csv`) would run the cell as a formula (CSV injection).
pub const FORMULA_STARTS: [char; 4] = ['=', '+', '-', '@'];
pub use cluster::{
    CapacityPreemption, ClusterConfig, Limit, NodeGroup, PreemptionConfig, QueueConfig, QueueIndex,
    SchedulerConfig, TierDefaults, MAX_NODES,
};
pub use cluster_file::{
    Backfill, ClusterFile, GangPreemption, JobOrder, Mode, PlacementSpec, Policy, Promotion, QueueSpec,
    Rounding,
};
pub use error::{parse_yaml, ModelError, Problem};
pub use placement::{Placement, PlacementRule};
pub use queue_path::QueuePath;
pub use resources::{PartialResources, ResourceKind, Resources};
pub use stage_io::{
    check_uri_template, overlapping_outputs, parse_object_uri, substitute, InputRequire, InputSpec,
    ObjectUri, OutputFormat, OutputSpec, MAX_OUTPUTS_PER_STAGE,
};
pub use time::{Duration, Time};
pub use workload::{
    Arrival, Distribution, JobTemplate, Stage, TaskPlacement, Workflow, Workload, MIN_PERIOD,
};
pub use workload_file::{
    ArrivalsSpec, DistributionSpec, GuaranteeSpec, JobSpec, SparkSpec, StageSpec, WorkflowSpec, WorkloadFile,
};
