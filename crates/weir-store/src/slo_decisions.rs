//! The SLO controller's decisions for runs under a deadline guarantee (`guarantee: jockey`,
//! weir-server's `jockey.rs`): every allocation it chose, with the progress and prediction that
//! caused it, and the run's fallback to its tier's rules when its workflow has too little
//! history; and (schema 20) the model each guarded run's controller was built from, so that a
//! restarted worker steps the same one. Written by the owning worker in its fenced batches; read by the run's page and API.

use crate::worker::Tx;
use crate::{int, text, Store, StoreError};

/// One decision. Fractions are kept in millionths (`progress`, `speed`) so that both
/// dialects store and return exact integers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SloDecisionRow {
    pub run_id: i64,
    pub job_idx: u32,
    /// When it was taken (Unix ms, the engine actor's clock).
    pub at_ms: i64,
    /// Since the run's submission.
    pub elapsed_ms: i64,
    /// Progress (the profile's fraction of expected task-seconds done), in millionths.
    pub progress_ppm: i64,
    /// The run's speed against its profile (1,000,000: as the earlier runs), in millionths.
    pub speed_ppm: i64,
    /// Containers guaranteed from now on (0: none, the tier's rules apply).
    pub allocation: u32,
    /// The controller's best allocation this period, before its dead zone and hysteresis.
    pub target: u32,
    /// Predicted completion under `allocation`, from submission (ms); 0 when none.
    pub predicted_ms: i64,
    /// The run's deadline, from submission (ms).
    pub deadline_ms: i64,
    /// Why, in words (`behind: raised`, `fallback: …`).
    pub reason: String,
}

/// Apply [`crate::Change::SloDecision`].
pub(crate) async fn insert(tx: &mut Tx, d: &SloDecisionRow) -> Result<u64, StoreError> {
    sqlx::query(
        "INSERT INTO slo_decisions (run_id, job_idx, at_ms, elapsed_ms, progress_ppm, speed_ppm, allocation,
         target, predicted_ms, deadline_ms, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(d.run_id)
    .bind(i64::from(d.job_idx))
    .bind(d.at_ms)
    .bind(d.elapsed_ms)
    .bind(d.progress_ppm)
    .bind(d.speed_ppm)
    .bind(i64::from(d.allocation))
    .bind(i64::from(d.target))
    .bind(d.predicted_ms)
    .bind(d.deadline_ms)
    .bind(d.reason.as_str())
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)
    .map(|r| r.rows_affected())
}

/// The model a run's controller steps (schema 20): the profile it was built from, as weir-slo
/// writes it (a versioned JSON document; weir-store does not read inside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SloModelRow {
    pub run_id: i64,
    pub job_idx: u32,
    /// When it was built (Unix ms, the engine actor's clock).
    pub built_ms: i64,
    pub profile: String,
}

/// Apply [`crate::Change::SloModel`]: the first model of a run's job stays (a run keeps the
/// model it started with); a later one for the same job changes nothing.
pub(crate) async fn insert_model(tx: &mut Tx, m: &SloModelRow) -> Result<u64, StoreError> {
    sqlx::query(
        "INSERT INTO slo_models (run_id, job_idx, built_ms, profile) VALUES ($1, $2, $3, $4)
         ON CONFLICT (run_id, job_idx) DO NOTHING",
    )
    .bind(m.run_id)
    .bind(i64::from(m.job_idx))
    .bind(m.built_ms)
    .bind(m.profile.as_str())
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)
    .map(|r| r.rows_affected())
}

/// A succeeded attempt's measured duration: end less start (ms), of one task of one stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasuredAttempt {
    pub stage: u32,
    pub task: u32,
    pub ms: i64,
}

impl Store {
    /// The model of the run's job `job`, if its controller was built.
    pub(crate) async fn slo_model(&self, run: i64, job: u32) -> Result<Option<SloModelRow>, StoreError> {
        let row = sqlx::query(
            "SELECT run_id, job_idx, built_ms, profile FROM slo_models WHERE run_id = $1 AND job_idx = $2",
        )
        .bind(run)
        .bind(i64::from(job))
        .fetch_optional(&self.read)
        .await
        .map_err(StoreError::db)?;
        row.map(|r| {
            Ok(SloModelRow {
                run_id: int(&r, "run_id")?,
                job_idx: int(&r, "job_idx")?.clamp(0, i64::from(u32::MAX)) as u32,
                built_ms: int(&r, "built_ms")?,
                profile: text(&r, "profile")?,
            })
        })
        .transpose()
    }

    /// The durations (ms, end less start) of the run's succeeded attempts of job `job`, as
    /// (stage, task, ms) by stage and task: what a restarted controller re-estimates the run's
    /// speed from.
    pub(crate) async fn succeeded_attempt_ms(
        &self,
        run: i64,
        job: u32,
    ) -> Result<Vec<MeasuredAttempt>, StoreError> {
        let rows = sqlx::query(
            "SELECT stage_idx, task_idx, ended_ms - started_ms AS ms FROM attempts
             WHERE run_id = $1 AND job_idx = $2 AND state = 'succeeded' AND ended_ms IS NOT NULL
             ORDER BY stage_idx, task_idx, attempt",
        )
        .bind(run)
        .bind(i64::from(job))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                let idx = |c: &'static str| -> Result<u32, StoreError> {
                    Ok(int(r, c)?.clamp(0, i64::from(u32::MAX)) as u32)
                };
                Ok(MeasuredAttempt { stage: idx("stage_idx")?, task: idx("task_idx")?, ms: int(r, "ms")? })
            })
            .collect()
    }

    /// The run's decisions, by job, in time order.
    pub(crate) async fn slo_decisions(&self, run: i64) -> Result<Vec<SloDecisionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, at_ms, elapsed_ms, progress_ppm, speed_ppm, allocation, target, predicted_ms,
             deadline_ms, reason FROM slo_decisions WHERE run_id = $1 ORDER BY job_idx, at_ms, id",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(SloDecisionRow {
                    run_id: int(r, "run_id")?,
                    job_idx: int(r, "job_idx")?.clamp(0, i64::from(u32::MAX)) as u32,
                    at_ms: int(r, "at_ms")?,
                    elapsed_ms: int(r, "elapsed_ms")?,
                    progress_ppm: int(r, "progress_ppm")?,
                    speed_ppm: int(r, "speed_ppm")?,
                    allocation: int(r, "allocation")?.clamp(0, i64::from(u32::MAX)) as u32,
                    target: int(r, "target")?.clamp(0, i64::from(u32::MAX)) as u32,
                    predicted_ms: int(r, "predicted_ms")?,
                    deadline_ms: int(r, "deadline_ms")?,
                    reason: text(r, "reason")?,
                })
            })
            .collect()
    }
}
