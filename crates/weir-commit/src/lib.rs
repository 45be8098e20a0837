//! weir-commit: outputs that are complete or absent, on S3-compatible stores and local
//! directories, without renames.
//!
//! A stage's output is a key prefix (`table/dt=2026-11-27/`). Its tasks write through the
//! committer, in two phases (the S3 multipart committer of Netflix, as Pinterest runs it):
//!
//! - **task commit** ([`Committer::put_file`]): each file becomes a multipart upload whose
//!   parts go up in parallel (tunable); the upload id and each part's ETag are recorded in a
//!   staging record under the attempt's staging prefix. Nothing is visible in the output.
//! - **job commit** ([`Committer::job_commit`]), when every task of the stage succeeded: a
//!   create-only claim (`_weir_claim.json`) stops a second run before it touches anything;
//!   every upload is completed and its ETag and size checked; then `_weir_manifest.json`
//!   (files, sizes, ETags, partitions, run id) is written with a create-only put — the commit
//!   point. Readers that honour the manifest ([`Committer::check_output`]) never see a
//!   partial output.
//! - **abort** ([`Committer::abort_job`], [`Committer::abort_attempts`]): every upload is
//!   aborted, whatever was completed is deleted; the [`Committer::sweep`] aborts uploads older
//!   than a limit that no live attempt owns (the lifecycle rule, done by weir).
//!
//! The job commit's progress is a serializable [`JobCommitState`]: a server that crashes
//! mid-commit calls `job_commit` or `abort_job` again with it and the call finishes.
//!
//! This crate never decides when to commit (the server does), never reads weir's store, and
//! never renames or copies objects.

mod backoff;
pub mod compare;
mod config;
mod error;
mod job;
pub mod keys;
mod local_uploads;
mod metrics;
mod reader;
mod record;
mod s3_uploads;
pub mod shadow;
mod store;
mod sweep;
mod task;

pub use compare::{
    compare_outputs, CompareConfig, Comparison, Difference, OutputFormat, OutputSummary, PartitionSummary,
    Verdict,
};
pub use config::{
    vars, CommitConfig, Credentials, RetrySettings, S3Config, StoreConfig, TaskEnv, MIN_PART_SIZE,
};
pub use error::{CommitError, Result};
pub use job::{AbortReport, JobCommitPlan};
pub use metrics::{StoreCounts, StoreMetrics};
pub use record::{
    multipart_etag, Claim, JobCommitState, JobPhase, Manifest, ManifestFile, PartRecord, UploadRecord,
    UploadState, MANIFEST_FORMAT,
};
pub use store::{ObjectInfo, Store, UploadListing, LOCAL_UPLOADS_DIR};
pub use sweep::SweepReport;

/// The committer: a store and its tunables. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Committer {
    store: Store,
    config: CommitConfig,
}

impl Committer {
    /// Opens the store and checks the tunables.
    pub fn new(store: &StoreConfig, config: CommitConfig) -> Result<Committer> {
        config.validate("the committer's settings")?;
        Ok(Committer { store: Store::open(store)?, config })
    }

    /// The committer a task attempt uses, from the environment weir gave it.
    pub fn for_task(env: &TaskEnv) -> Result<Committer> {
        Committer::new(&env.store, env.config.clone())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn config(&self) -> &CommitConfig {
        &self.config
    }
}

pub(crate) use local_uploads::now_ms;
