//! weir-model: the vocabulary every weir crate shares — resources, time, queue paths — and the
//! cluster file with its validation.
//!
//! It never does I/O: callers read files and hand over text with the file's name, so every error
//! can name the file, the path inside it and what is wrong. Key types: [`Resources`], [`Time`],
//! [`Duration`], [`QueuePath`], [`ClusterFile`] (as written) and [`ClusterConfig`] (validated,
//! with inherited settings resolved), [`Workload`] (workflows → jobs → stages, validated).

pub mod cluster;
pub mod cluster_file;
pub mod error;
pub mod queue_path;
pub mod resources;
pub mod time;
pub mod workload;

pub use cluster::{
    ClusterConfig, Limit, NodeGroup, PreemptionConfig, QueueConfig, QueueIndex, SchedulerConfig, TierDefaults,
};
pub use cluster_file::{ClusterFile, Mode, Policy, Promotion, QueueSpec, Rounding};
pub use error::{parse_yaml, ModelError, Problem};
pub use queue_path::QueuePath;
pub use resources::{PartialResources, ResourceKind, Resources};
pub use time::{Duration, Time};
pub use workload::{Arrival, Distribution, JobTemplate, Stage, Workflow, Workload};
