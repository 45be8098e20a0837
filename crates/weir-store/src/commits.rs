//! Pending job commits of stages that declare outputs (docs/commit.md): the committer's
//! resumable state per run and stage, written before the job commit touches the object store
//! and after it ends, so that a server killed mid-commit finishes or aborts it after restart.

use crate::{int, text, Fence, Store, StoreError};

/// The job commit of one output of a stage. `phase` is weir-commit's `JobPhase` (`prepared`, `claimed`,
/// `committed`, `aborted`); `state` its `JobCommitState` as JSON (opaque to the store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobCommitRow {
    pub run_id: i64,
    pub job_idx: u32,
    pub stage_idx: u32,
    /// Which of the stage's outputs, from 0 in the order it declares them.
    pub output_idx: u32,
    pub output: String,
    pub phase: String,
    pub state: String,
    /// Why the commit was refused or aborted, when it was.
    pub reason: Option<String>,
    pub updated_ms: i64,
}

impl Store {
    /// Inserts or replaces the row of `(run, job, stage, output)`, **fenced**: only while `fence` still
    /// holds its cluster's lease (checked and written in one transaction; the lease's expiry is
    /// left as it is), else `LeaseLost` and nothing is written.
    pub(crate) async fn put_job_commit(&self, fence: &Fence, row: &JobCommitRow) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        // A no-op update: it matches only the fence's own lease row and locks it until the end
        // of the transaction, so no takeover slips in between the check and the write.
        let held = sqlx::query(
            "UPDATE leases SET expires_ms = expires_ms WHERE cluster = $1 AND owner = $2 AND fence = $3",
        )
        .bind(fence.cluster.as_str())
        .bind(fence.owner.as_str())
        .bind(fence.fence)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        if held.rows_affected() != 1 {
            tx.rollback().await.map_err(StoreError::db)?;
            return Err(StoreError::LeaseLost { cluster: fence.cluster.clone(), fence: fence.fence });
        }
        sqlx::query(
            "INSERT INTO job_commits (run_id, job_idx, stage_idx, output, phase, state, reason, updated_ms,
             output_idx) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (run_id, job_idx, stage_idx, output_idx) DO UPDATE SET output = $4, phase = $5,
             state = $6, reason = $7, updated_ms = $8",
        )
        .bind(row.run_id)
        .bind(i64::from(row.job_idx))
        .bind(i64::from(row.stage_idx))
        .bind(&row.output)
        .bind(&row.phase)
        .bind(&row.state)
        .bind(row.reason.as_deref())
        .bind(row.updated_ms)
        .bind(i64::from(row.output_idx))
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(())
    }

    /// The run's job commits, by job, stage and output.
    pub(crate) async fn job_commits(&self, run: i64) -> Result<Vec<JobCommitRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, output_idx, output, phase, state, reason, updated_ms
             FROM job_commits WHERE run_id = $1 ORDER BY job_idx, stage_idx, output_idx",
        )
        .bind(run)
        .fetch_all(&self.write)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(JobCommitRow {
                    run_id: int(r, "run_id")?,
                    job_idx: int(r, "job_idx")? as u32,
                    stage_idx: int(r, "stage_idx")? as u32,
                    output_idx: int(r, "output_idx")? as u32,
                    output: text(r, "output")?,
                    phase: text(r, "phase")?,
                    state: text(r, "state")?,
                    reason: r
                        .try_get::<Option<String>, _>("reason")
                        .map_err(|e| StoreError::decode("reason", e))?,
                    updated_ms: int(r, "updated_ms")?,
                })
            })
            .collect()
    }
}

use sqlx::Row;
