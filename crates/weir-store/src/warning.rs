//! Preemption warnings on attempts: `running ⇄ preempting`, on the attempt and its task.

use crate::worker::{AttemptKey, Tx, Warning};
use crate::StoreError;

/// Applies [`crate::Change::AttemptPreempting`]; the number of attempts changed (0 or 1). The
/// task follows only if the attempt did.
pub(crate) async fn apply(
    tx: &mut Tx,
    key: &AttemptKey,
    warning: Option<&Warning>,
) -> Result<u64, StoreError> {
    let t = key.task;
    let (from, to) = if warning.is_some() { ("running", "preempting") } else { ("preempting", "running") };
    let n = sqlx::query(
        "UPDATE attempts SET state = $6, reason = $7, kill_at_ms = $8
         WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4 AND attempt = $5
         AND state = $9",
    )
    .bind(t.run)
    .bind(i64::from(t.job))
    .bind(i64::from(t.stage))
    .bind(i64::from(t.task))
    .bind(i64::from(key.attempt))
    .bind(to)
    .bind(warning.map(|w| w.reason.as_str()))
    .bind(warning.map(|w| w.kill_at_ms))
    .bind(from)
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?
    .rows_affected();
    if n == 1 {
        sqlx::query(
            "UPDATE tasks SET state = $5 WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3
             AND task_idx = $4 AND state = $6",
        )
        .bind(t.run)
        .bind(i64::from(t.job))
        .bind(i64::from(t.stage))
        .bind(i64::from(t.task))
        .bind(to)
        .bind(from)
        .execute(&mut **tx)
        .await
        .map_err(StoreError::db)?;
    }
    Ok(n)
}
