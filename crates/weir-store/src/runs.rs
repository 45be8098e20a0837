//! Runs as the service layer sees them: group-committed submission with uniqueness and
//! idempotency, reads, listing with cursor paging, and kill requests.

use sqlx::any::AnyRow;

use crate::{int, opt_int, opt_text, text, Store, StoreError};

/// The run states after which nothing changes.
pub const TERMINAL_RUN_STATES: [&str; 3] = ["succeeded", "failed", "killed"];

/// A run to store, validated and routed by the service layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRun {
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub logical_date: String,
    pub cluster: String,
    pub queue: String,
    /// The workflow, JSON in the workload-file schema.
    pub spec: String,
    /// JSON object of parameters.
    pub params: String,
    /// Token id of the submitter.
    pub submitted_by: String,
    pub submitted_ms: i64,
    /// `token id + ":" + Idempotency-Key`, if the request had one.
    pub idempotency_key: Option<String>,
    /// Records older than this (ms) are expired and do not replay.
    pub idempotency_after_ms: i64,
}

/// What became of one submission of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    Created {
        id: i64,
    },
    /// An active run already holds the (workflow, logical date).
    Conflict {
        existing: i64,
    },
    /// The idempotency key was seen: replay the first answer (its status and run).
    Replay {
        status: u16,
        run: i64,
    },
}

/// A stored run, without its jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    pub id: i64,
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub logical_date: String,
    pub state: String,
    pub cluster: String,
    pub queue: String,
    pub spec: String,
    pub params: String,
    pub submitted_by: String,
    pub submitted_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub kill_requested: bool,
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRow {
    pub run_id: i64,
    pub idx: u32,
    pub name: String,
    pub state: String,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub run_id: i64,
    pub job_idx: u32,
    pub stage_idx: u32,
    pub task_idx: u32,
    pub stage: String,
    pub state: String,
    pub attempts: u32,
    pub node: Option<String>,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub exit_code: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRow {
    pub run_id: i64,
    pub job_idx: u32,
    pub stage_idx: u32,
    pub task_idx: u32,
    pub attempt: u32,
    pub cluster: String,
    /// `starting` (intent recorded, process maybe not started), `running`, `succeeded`,
    /// `failed`, `killed`, `lost`.
    pub state: String,
    pub node: Option<String>,
    /// The backend's record of the started process (JSON), once known.
    pub launched: Option<String>,
    pub stdout: String,
    pub stderr: String,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
}

/// Filters of `GET /v1/runs`; runs come newest first, `before` is the paging cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub project: Option<String>,
    /// Only these projects (a caller's readable projects); `None` means any.
    pub projects_in: Option<Vec<String>>,
    pub workflow: Option<String>,
    pub state: Option<String>,
    pub since_ms: Option<i64>,
    pub before: Option<i64>,
    pub limit: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// It was still queued: it is killed now, no worker will take it.
    Killed,
    /// A worker will stop its tasks.
    Requested,
    /// It had already ended.
    AlreadyEnded,
    NotFound,
}

macro_rules! run_columns {
    () => {
        "id, workflow, project, tier, logical_date, state, cluster, queue, spec, params, submitted_by, \
         submitted_ms, started_ms, finished_ms, kill_requested, reason"
    };
}
pub(crate) use run_columns;

pub(crate) fn run_row(r: &AnyRow) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        id: int(r, "id")?,
        workflow: text(r, "workflow")?,
        project: text(r, "project")?,
        tier: int(r, "tier")?.clamp(0, 255) as u8,
        logical_date: text(r, "logical_date")?,
        state: text(r, "state")?,
        cluster: text(r, "cluster")?,
        queue: text(r, "queue")?,
        spec: text(r, "spec")?,
        params: text(r, "params")?,
        submitted_by: text(r, "submitted_by")?,
        submitted_ms: int(r, "submitted_ms")?,
        started_ms: opt_int(r, "started_ms")?,
        finished_ms: opt_int(r, "finished_ms")?,
        kill_requested: int(r, "kill_requested")? != 0,
        reason: opt_text(r, "reason")?,
    })
}

pub(crate) fn job_row(r: &AnyRow) -> Result<JobRow, StoreError> {
    Ok(JobRow {
        run_id: int(r, "run_id")?,
        idx: int(r, "idx")? as u32,
        name: text(r, "name")?,
        state: text(r, "state")?,
        started_ms: opt_int(r, "started_ms")?,
        finished_ms: opt_int(r, "finished_ms")?,
    })
}

pub(crate) fn task_row(r: &AnyRow) -> Result<TaskRow, StoreError> {
    Ok(TaskRow {
        run_id: int(r, "run_id")?,
        job_idx: int(r, "job_idx")? as u32,
        stage_idx: int(r, "stage_idx")? as u32,
        task_idx: int(r, "task_idx")? as u32,
        stage: text(r, "stage")?,
        state: text(r, "state")?,
        attempts: int(r, "attempts")? as u32,
        node: opt_text(r, "node")?,
        started_ms: opt_int(r, "started_ms")?,
        finished_ms: opt_int(r, "finished_ms")?,
        exit_code: opt_int(r, "exit_code")?.map(|c| c as i32),
    })
}

pub(crate) fn attempt_row(r: &AnyRow) -> Result<AttemptRow, StoreError> {
    Ok(AttemptRow {
        run_id: int(r, "run_id")?,
        job_idx: int(r, "job_idx")? as u32,
        stage_idx: int(r, "stage_idx")? as u32,
        task_idx: int(r, "task_idx")? as u32,
        attempt: int(r, "attempt")? as u32,
        cluster: text(r, "cluster")?,
        state: text(r, "state")?,
        node: opt_text(r, "node")?,
        launched: opt_text(r, "launched")?,
        stdout: text(r, "stdout")?,
        stderr: text(r, "stderr")?,
        started_ms: int(r, "started_ms")?,
        ended_ms: opt_int(r, "ended_ms")?,
        exit_code: opt_int(r, "exit_code")?.map(|c| c as i32),
        reason: opt_text(r, "reason")?,
    })
}

pub(crate) fn active_key(workflow: &str, logical_date: &str) -> String {
    format!("{workflow}\n{logical_date}")
}

impl Store {
    /// Store a batch of submissions in one transaction (group commit): all of them or none.
    /// Within the batch, each is checked in order against idempotency records and against
    /// the active runs (including those earlier in the same batch).
    pub async fn submit(&self, runs: &[NewRun]) -> Result<Vec<Submitted>, StoreError> {
        let mut tx = self.begin().await?;
        let mut out = Vec::with_capacity(runs.len());
        for run in runs {
            if let Some(key) = &run.idempotency_key {
                let seen = sqlx::query("SELECT run_id, status, created_ms FROM idempotency WHERE key = $1")
                    .bind(key.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(StoreError::db)?;
                if let Some(r) = seen {
                    if int(&r, "created_ms")? >= run.idempotency_after_ms {
                        let status = int(&r, "status")?.clamp(0, 999) as u16;
                        out.push(Submitted::Replay { status, run: int(&r, "run_id")? });
                        continue;
                    }
                    sqlx::query("DELETE FROM idempotency WHERE key = $1")
                        .bind(key.as_str())
                        .execute(&mut *tx)
                        .await
                        .map_err(StoreError::db)?;
                }
            }
            let key = active_key(&run.workflow, &run.logical_date);
            let inserted = sqlx::query(
                "INSERT INTO runs (workflow, project, tier, logical_date, active_key, state, cluster, queue,
                 spec, params, submitted_by, submitted_ms) VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8, $9, $10, $11)
                 ON CONFLICT DO NOTHING RETURNING id",
            )
            .bind(run.workflow.as_str())
            .bind(run.project.as_str())
            .bind(i64::from(run.tier))
            .bind(run.logical_date.as_str())
            .bind(key.as_str())
            .bind(run.cluster.as_str())
            .bind(run.queue.as_str())
            .bind(run.spec.as_str())
            .bind(run.params.as_str())
            .bind(run.submitted_by.as_str())
            .bind(run.submitted_ms)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::db)?;
            let (outcome, status, id) = match inserted {
                Some(r) => {
                    let id = int(&r, "id")?;
                    (Submitted::Created { id }, 201, id)
                }
                None => {
                    let existing = sqlx::query("SELECT id FROM runs WHERE active_key = $1")
                        .bind(key.as_str())
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(StoreError::db)?;
                    // No row: the holder ended between the two statements (PostgreSQL's read
                    // committed); report the conflict against an unknown run as run 0 rather
                    // than retry inside the batch.
                    let existing = match existing {
                        Some(r) => int(&r, "id")?,
                        None => 0,
                    };
                    (Submitted::Conflict { existing }, 409, existing)
                }
            };
            if let Some(k) = &run.idempotency_key {
                sqlx::query(
                    "INSERT INTO idempotency (key, run_id, status, created_ms) VALUES ($1, $2, $3, $4)
                     ON CONFLICT DO NOTHING",
                )
                .bind(k.as_str())
                .bind(id)
                .bind(i64::from(status))
                .bind(run.submitted_ms)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db)?;
            }
            out.push(outcome);
        }
        tx.commit().await.map_err(StoreError::db)?;
        Ok(out)
    }

    pub async fn run(&self, id: i64) -> Result<Option<RunRow>, StoreError> {
        const Q: &str = concat!("SELECT ", run_columns!(), " FROM runs WHERE id = $1");
        let row = sqlx::query(Q).bind(id).fetch_optional(&self.read).await.map_err(StoreError::db)?;
        row.as_ref().map(run_row).transpose()
    }

    pub async fn jobs(&self, run: i64) -> Result<Vec<JobRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, idx, name, state, started_ms, finished_ms FROM jobs WHERE run_id = $1 ORDER BY idx",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(job_row).collect()
    }

    pub async fn tasks(&self, run: i64) -> Result<Vec<TaskRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, task_idx, stage, state, attempts, node, started_ms, finished_ms,
             exit_code FROM tasks WHERE run_id = $1 ORDER BY job_idx, stage_idx, task_idx",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(task_row).collect()
    }

    /// Every attempt of one task, oldest first.
    pub async fn attempts(
        &self,
        run: i64,
        job: u32,
        stage: u32,
        task: u32,
    ) -> Result<Vec<AttemptRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, task_idx, attempt, cluster, state, node, launched, stdout, stderr,
             started_ms, ended_ms, exit_code, reason FROM attempts
             WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4 ORDER BY attempt",
        )
        .bind(run)
        .bind(i64::from(job))
        .bind(i64::from(stage))
        .bind(i64::from(task))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(attempt_row).collect()
    }

    /// Runs matching `filter`, newest first, at most `filter.limit`.
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE ($1 IS NULL OR project = $1) AND ($2 IS NULL OR workflow = $2)
              AND ($3 IS NULL OR state = $3) AND ($4 IS NULL OR submitted_ms >= $4) AND ($5 IS NULL OR id < $5)
              ORDER BY id DESC LIMIT $6"
        );
        // A caller limited to some projects pages through the whole list, keeping theirs.
        let mut out = Vec::new();
        let mut before = filter.before;
        let want = filter.limit.max(1) as usize;
        loop {
            let rows = sqlx::query(Q)
                .bind(filter.project.as_deref())
                .bind(filter.workflow.as_deref())
                .bind(filter.state.as_deref())
                .bind(filter.since_ms)
                .bind(before)
                .bind(want as i64)
                .fetch_all(&self.read)
                .await
                .map_err(StoreError::db)?;
            let fetched = rows.len();
            for r in &rows {
                let run = run_row(r)?;
                before = Some(run.id);
                if filter.projects_in.as_ref().is_none_or(|ps| ps.contains(&run.project)) {
                    out.push(run);
                    if out.len() == want {
                        return Ok(out);
                    }
                }
            }
            if fetched < want {
                return Ok(out);
            }
        }
    }

    /// Ask for a run to be killed. A queued run is killed at once (compare-and-set on its
    /// state, so a worker claiming it at the same moment either gets it first or not at all).
    pub async fn request_kill(&self, id: i64, now_ms: i64) -> Result<KillOutcome, StoreError> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(
            "UPDATE runs SET state = 'killed', finished_ms = $2, active_key = NULL, kill_requested = 1,
             reason = 'killed before it started' WHERE id = $1 AND state = 'queued'",
        )
        .bind(id)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        if done.rows_affected() == 1 {
            tx.commit().await.map_err(StoreError::db)?;
            return Ok(KillOutcome::Killed);
        }
        let asked = sqlx::query(
            "UPDATE runs SET kill_requested = 1 WHERE id = $1 AND state NOT IN ('succeeded', 'failed', 'killed')",
        )
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let outcome = if asked.rows_affected() == 1 {
            KillOutcome::Requested
        } else {
            let exists = sqlx::query("SELECT id FROM runs WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db)?;
            if exists.is_some() {
                KillOutcome::AlreadyEnded
            } else {
                KillOutcome::NotFound
            }
        };
        tx.commit().await.map_err(StoreError::db)?;
        Ok(outcome)
    }

    /// Forget idempotency records created before `before_ms`.
    pub async fn expire_idempotency(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let r = sqlx::query("DELETE FROM idempotency WHERE created_ms < $1")
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(r.rows_affected())
    }
}
