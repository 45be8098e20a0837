//! Waiting spells: each span of time a job of a run waited in its cluster's engine, with the
//! reason (a code, the queue and limit it names, a detail line). Written by the owning worker in
//! its fenced batches; a new spell of a job closes the one still open, a run's end closes all
//! of its spells, so at most one spell per job is ever open.

use crate::worker::Tx;
use crate::{int, opt_int, text, Store, StoreError};

/// One waiting spell of a job. `to_ms` is `None` while the job still waits for that reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitRow {
    pub run_id: i64,
    pub job_idx: u32,
    pub from_ms: i64,
    pub to_ms: Option<i64>,
    /// The rule's code (`queue_max_running_apps`, `user_max_running_apps`, `no_room`, …).
    pub reason: String,
    /// The queue (or `user NAME`) the rule applies to; empty when none.
    pub queue: String,
    /// The limit, as text with its unit (`3`, `cpu 4 cores, memory 16 GiB`); empty when none.
    pub limit: String,
    /// One line more (the run or job it waited behind, a backend's state); may be empty.
    pub detail: String,
}

/// A spell with what the SLO page needs of its run: tier, workflow, SLO, when it was
/// submitted and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWaitRow {
    pub wait: WaitRow,
    pub workflow: String,
    pub tier: u8,
    pub state: String,
    pub submitted_ms: i64,
    pub finished_ms: Option<i64>,
    pub slo_ms: Option<i64>,
}

/// Apply [`crate::Change::WaitBegan`]: close the job's open spell at `from_ms`, open this one.
pub(crate) async fn began(tx: &mut Tx, w: &WaitRow) -> Result<u64, StoreError> {
    ended(tx, w.run_id, w.job_idx, w.from_ms).await?;
    sqlx::query(
        "INSERT INTO job_waits (run_id, job_idx, from_ms, to_ms, reason, queue, limit_text, detail)
         VALUES ($1, $2, $3, NULL, $4, $5, $6, $7)",
    )
    .bind(w.run_id)
    .bind(i64::from(w.job_idx))
    .bind(w.from_ms)
    .bind(w.reason.as_str())
    .bind(w.queue.as_str())
    .bind(w.limit.as_str())
    .bind(w.detail.as_str())
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)
    .map(|r| r.rows_affected())
}

/// Apply [`crate::Change::WaitEnded`]: close the job's open spell (if any) at `at` (never
/// before it began). The number of spells closed.
pub(crate) async fn ended(tx: &mut Tx, run: i64, job: u32, at: i64) -> Result<u64, StoreError> {
    sqlx::query(
        "UPDATE job_waits SET to_ms = CASE WHEN from_ms > $3 THEN from_ms ELSE $3 END
         WHERE run_id = $1 AND job_idx = $2 AND to_ms IS NULL",
    )
    .bind(run)
    .bind(i64::from(job))
    .bind(at)
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)
    .map(|r| r.rows_affected())
}

/// A run ended: close every spell of it still open.
pub(crate) async fn run_ended(tx: &mut Tx, run: i64, at: i64) -> Result<u64, StoreError> {
    sqlx::query(
        "UPDATE job_waits SET to_ms = CASE WHEN from_ms > $2 THEN from_ms ELSE $2 END
         WHERE run_id = $1 AND to_ms IS NULL",
    )
    .bind(run)
    .bind(at)
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)
    .map(|r| r.rows_affected())
}

fn wait_row(r: &sqlx::any::AnyRow) -> Result<WaitRow, StoreError> {
    Ok(WaitRow {
        run_id: int(r, "run_id")?,
        job_idx: int(r, "job_idx")?.clamp(0, i64::from(u32::MAX)) as u32,
        from_ms: int(r, "from_ms")?,
        to_ms: opt_int(r, "to_ms")?,
        reason: text(r, "reason")?,
        queue: text(r, "queue")?,
        limit: text(r, "limit_text")?,
        detail: text(r, "detail")?,
    })
}

impl Store {
    /// The run's spells, by job, then in time order.
    pub(crate) async fn waits(&self, run: i64) -> Result<Vec<WaitRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, from_ms, to_ms, reason, queue, limit_text, detail FROM job_waits
             WHERE run_id = $1 ORDER BY job_idx, from_ms, id",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(wait_row).collect()
    }

    /// Spells of runs submitted at or after `since_ms`, with their runs, at most `limit`
    /// (newest runs first).
    pub(crate) async fn waits_since(&self, since_ms: i64, limit: u32) -> Result<Vec<RunWaitRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT w.run_id, w.job_idx, w.from_ms, w.to_ms, w.reason, w.queue, w.limit_text, w.detail,
             r.workflow, r.tier, r.state, r.submitted_ms, r.finished_ms, r.slo_ms
             FROM job_waits w JOIN runs r ON r.id = w.run_id
             WHERE r.submitted_ms >= $1 ORDER BY w.run_id DESC, w.job_idx, w.from_ms, w.id LIMIT $2",
        )
        .bind(since_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(RunWaitRow {
                    wait: wait_row(r)?,
                    workflow: text(r, "workflow")?,
                    tier: int(r, "tier")?.clamp(0, 255) as u8,
                    state: text(r, "state")?,
                    submitted_ms: int(r, "submitted_ms")?,
                    finished_ms: opt_int(r, "finished_ms")?,
                    slo_ms: opt_int(r, "slo_ms")?,
                })
            })
            .collect()
    }
}
