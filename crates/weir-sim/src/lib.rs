//! weir-sim: the cluster simulator. It runs the real weir engine in virtual time, as fast as the
//! machine allows, on workloads from a `workload.yaml` or from a trace.
//!
//! It never reads a clock, spawns threads or depends on tokio; it is deterministic for a seed.
//! Its only I/O-shaped code is in the importers, which take text (or a reader) that the caller
//! opened, so every error can name the file.

pub mod import;
