//! The worker's side: cluster leases with fencing numbers, queued runs to claim, the state a
//! new owner recovers, and fenced batches of compare-and-set state changes.

use crate::runs::{attempt_row, run_columns, run_row};
use crate::{int, AttemptRow, Dialect, JobRow, RunRow, Store, StoreError, TaskRow};

/// Proof of ownership of a cluster: the lease's owner and fencing number. Every write of the
/// worker checks that both are still current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub cluster: String,
    pub owner: String,
    pub fence: i64,
}

/// A cluster's lease as stored: who holds it, its fencing number, when it expires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub owner: String,
    pub fence: i64,
    pub expires_ms: i64,
}

/// One task of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskKey {
    pub run: i64,
    pub job: u32,
    pub stage: u32,
    pub task: u32,
}

/// One attempt (1-based) of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptKey {
    pub task: TaskKey,
    pub attempt: u32,
}

/// A job of a routed run, with its tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    pub idx: u32,
    pub name: String,
    pub tasks: Vec<NewTask>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewTask {
    pub stage_idx: u32,
    pub task_idx: u32,
    pub stage: String,
}

/// One state change of a worker batch. Changes named "compare-and-set" apply only if their
/// precondition holds; [`Store::apply`] reports which did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Compare-and-set `queued → routed`, and create the run's jobs and tasks if it applies.
    Route { run: i64, jobs: Vec<NewJob>, at: i64 },
    /// Compare-and-set: the run is not yet terminal. A terminal state sets `finished_ms`,
    /// frees the (workflow, logical date) for a new run and records `reason`; `running` sets
    /// `started_ms` the first time.
    RunState { run: i64, to: &'static str, at: i64, reason: Option<String> },
    /// Compare-and-set: the job is not yet terminal.
    JobState { run: i64, job: u32, to: &'static str, at: i64 },
    /// Compare-and-set: the task is not yet terminal.
    TaskState { task: TaskKey, to: &'static str, at: i64, exit_code: Option<i32> },
    /// The outbox entry: "starting attempt N of task T", written and committed before the
    /// process is started. Also moves the task to `starting` and counts the attempt.
    AttemptStarting { key: AttemptKey, node: String, stdout: String, stderr: String, at: i64 },
    /// Compare-and-set `starting → running`, recording the backend's launch record.
    AttemptLaunched { key: AttemptKey, launched: String, at: i64 },
    /// Compare-and-set from `starting`, `running` or `preempting` to an end state (`succeeded`, `failed`,
    /// `killed`, `lost`).
    AttemptEnded {
        key: AttemptKey,
        to: &'static str,
        exit_code: Option<i32>,
        at: i64,
        reason: Option<String>,
    },
    /// A usage interval of a leaf queue (`usage.csv`). Never overlaps the queue's earlier rows:
    /// a start before the last row's end is moved up to it.
    Usage(crate::UsageRow),
    /// Compare-and-set: the queue's row starting at `start_ms` still ends at `old_end_ms`; it
    /// now ends at `end_ms` (the same usage went on).
    UsageExtended { queue: String, start_ms: i64, old_end_ms: i64, end_ms: i64 },
    /// A container was taken by preemption.
    Preempted(crate::PreemptionRow),
    /// `Some`: compare-and-set `running → preempting` on the attempt and its task, recording the
    /// warning (reason, kill time). `None`: `preempting → running`, clearing it (a new owner's
    /// engine, rebuilt from the store, no longer plans that kill).
    AttemptPreempting { key: AttemptKey, warning: Option<Warning> },
    /// A job began to wait for a reason (or its reason changed): its open spell, if any, is
    /// closed at `from_ms` and this one opened.
    WaitBegan(crate::WaitRow),
    /// A job no longer waits (it started, or left the engine): its open spell is closed at `at`.
    /// Applies only if a spell was open.
    WaitEnded { run: i64, job: u32, at: i64 },
    /// The SLO controller chose an allocation for a job under a deadline guarantee (or its run
    /// fell back to its tier's rules).
    SloDecision(crate::SloDecisionRow),
    /// The model a guarded run's controller was built from; the first for a run's job stays.
    SloModel(crate::SloModelRow),
}

/// A preemption warning: why the container is taken and when it will be killed (Unix ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub reason: String,
    pub kill_at_ms: i64,
}

/// A run a new owner picks up: its row, jobs, tasks and the attempts still open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveRun {
    pub run: RunRow,
    pub jobs: Vec<JobRow>,
    pub tasks: Vec<TaskRow>,
    /// Attempts in `starting`, `running` or `preempting`.
    pub open_attempts: Vec<AttemptRow>,
    /// Failed attempts per task (so retry limits survive a restart).
    pub failed_attempts: Vec<(TaskKey, u32)>,
}

impl Store {
    /// Take the lease on `cluster` if it is free, expired, or already ours; the fencing number
    /// moves on whenever the owner changes. `None`: another owner holds it.
    pub(crate) async fn acquire_lease(
        &self,
        cluster: &str,
        owner: &str,
        dead_owner: Option<&str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<Fence>, StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("INSERT INTO leases (cluster, owner, fence, expires_ms) VALUES ($1, '', 0, 0) ON CONFLICT DO NOTHING")
            .bind(cluster)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        let row = sqlx::query(
            "UPDATE leases SET owner = $2, fence = fence + 1, expires_ms = $3
             WHERE cluster = $1 AND (expires_ms <= $4 OR owner = $2 OR owner = $5) RETURNING fence",
        )
        .bind(cluster)
        .bind(owner)
        .bind(now_ms + lease_ms)
        .bind(now_ms)
        .bind(dead_owner.unwrap_or(owner))
        .fetch_optional(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let fence = row.map(|r| int(&r, "fence")).transpose()?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(fence.map(|fence| Fence { cluster: cluster.to_string(), owner: owner.to_string(), fence }))
    }

    /// Give the lease up (a clean shutdown), so another worker need not wait for it to expire.
    pub(crate) async fn release_lease(&self, fence: &Fence) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE leases SET expires_ms = 0 WHERE cluster = $1 AND owner = $2 AND fence = $3")
            .bind(fence.cluster.as_str())
            .bind(fence.owner.as_str())
            .bind(fence.fence)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)
    }

    pub(crate) async fn lease(&self, cluster: &str) -> Result<Option<Lease>, StoreError> {
        let row = sqlx::query("SELECT owner, fence, expires_ms FROM leases WHERE cluster = $1")
            .bind(cluster)
            .fetch_optional(&self.read)
            .await
            .map_err(StoreError::db)?;
        row.map(|r| {
            Ok(Lease {
                owner: crate::text(&r, "owner")?,
                fence: int(&r, "fence")?,
                expires_ms: int(&r, "expires_ms")?,
            })
        })
        .transpose()
    }

    /// Up to `limit` queued runs of the cluster, oldest first. On PostgreSQL rows another
    /// transaction holds locked (a kill being committed) are skipped rather than waited for
    /// (`FOR UPDATE SKIP LOCKED`; SQLite has no row locks and rejects the clause). What makes
    /// a claim exclusive is not this read but the lease and the compare-and-set
    /// [`Change::Route`] in the worker's fenced batch.
    pub(crate) async fn queued_runs(&self, cluster: &str, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        const SQLITE: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE cluster = $1 AND state = 'queued' ORDER BY id LIMIT $2"
        );
        const POSTGRES: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE cluster = $1 AND state = 'queued' ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
        );
        let q = match self.dialect {
            Dialect::Sqlite => SQLITE,
            Dialect::Postgres => POSTGRES,
        };
        let rows = sqlx::query(q)
            .bind(cluster)
            .bind(i64::from(limit))
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
        rows.iter().map(run_row).collect()
    }

    /// Every unfinished, routed run of the cluster with its jobs, tasks and open attempts:
    /// what a new owner rebuilds its engine from.
    pub(crate) async fn active_runs(&self, cluster: &str) -> Result<Vec<ActiveRun>, StoreError> {
        const RUNS: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE cluster = $1 AND state IN ('routed', 'waiting', 'running') ORDER BY id"
        );
        let runs = sqlx::query(RUNS).bind(cluster).fetch_all(&self.read).await.map_err(StoreError::db)?;
        let mut out = Vec::with_capacity(runs.len());
        for r in &runs {
            let run = run_row(r)?;
            let jobs = self.jobs(run.id).await?;
            let tasks = self.tasks(run.id).await?;
            let failed = sqlx::query(
                "SELECT job_idx, stage_idx, task_idx, COUNT(*) AS n FROM attempts WHERE run_id = $1 AND state = 'failed'
                 GROUP BY job_idx, stage_idx, task_idx",
            )
            .bind(run.id)
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
            let mut failed_attempts = Vec::with_capacity(failed.len());
            for f in &failed {
                let key = TaskKey {
                    run: run.id,
                    job: int(f, "job_idx")? as u32,
                    stage: int(f, "stage_idx")? as u32,
                    task: int(f, "task_idx")? as u32,
                };
                failed_attempts.push((key, int(f, "n")? as u32));
            }
            out.push(ActiveRun { run, jobs, tasks, open_attempts: Vec::new(), failed_attempts });
        }
        let open = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, task_idx, attempt, cluster, state, node, launched, stdout, stderr,
             started_ms, ended_ms, exit_code, reason, kill_at_ms FROM attempts
             WHERE cluster = $1 AND state IN ('starting', 'running', 'preempting') ORDER BY run_id, attempt",
        )
        .bind(cluster)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        for a in &open {
            let a = attempt_row(a)?;
            if let Ok(i) = out.binary_search_by_key(&a.run_id, |r| r.run.id) {
                out[i].open_attempts.push(a);
            }
        }
        Ok(out)
    }

    /// Unfinished runs of the cluster whose kill was requested.
    pub(crate) async fn kill_requests(&self, cluster: &str) -> Result<Vec<i64>, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM runs WHERE cluster = $1 AND kill_requested = 1
             AND state IN ('routed', 'waiting', 'running')",
        )
        .bind(cluster)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(|r| int(r, "id")).collect()
    }

    /// Apply a worker's batch in one transaction, after checking and renewing its lease
    /// (`expires_ms = lease_until_ms`). Returns, per change, whether it applied (a
    /// compare-and-set whose precondition failed did not), as applying the changes one after
    /// the other would have; the changes go in groups of one kind, a few multi-row statements
    /// per group (`batch.rs`). [`StoreError::LeaseLost`]: nothing was written.
    pub(crate) async fn apply(
        &self,
        fence: &Fence,
        lease_until_ms: i64,
        changes: &[Change],
    ) -> Result<Vec<bool>, StoreError> {
        let mut tx = self.begin_fenced(fence, lease_until_ms).await?;
        let applied = crate::batch::apply(&mut tx, self.dialect, &fence.cluster, changes).await?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(applied)
    }

    /// A transaction whose first statement renewed the cluster's lease by owner and fence;
    /// [`StoreError::LeaseLost`] (and nothing written) if it could not.
    async fn begin_fenced(&self, fence: &Fence, lease_until_ms: i64) -> Result<Tx, StoreError> {
        let mut tx = self.begin().await?;
        if !renew(&mut tx, fence, lease_until_ms).await? {
            tx.rollback().await.map_err(StoreError::db)?;
            return Err(StoreError::LeaseLost { cluster: fence.cluster.clone(), fence: fence.fence });
        }
        Ok(tx)
    }

    /// [`Store::apply`] as it was before batches were grouped (`batch.rs`): one or two
    /// statements per change, in order. The reference the grouped application is tested
    /// against; not for the server.
    #[doc(hidden)]
    pub async fn apply_each(
        &self,
        fence: &Fence,
        lease_until_ms: i64,
        changes: &[Change],
    ) -> Result<Vec<bool>, StoreError> {
        let mut tx = self.begin_fenced(fence, lease_until_ms).await?;
        let mut applied = Vec::with_capacity(changes.len());
        for change in changes {
            applied.push(apply_one(&mut tx, &fence.cluster, change).await?);
        }
        tx.commit().await.map_err(StoreError::db)?;
        Ok(applied)
    }

    /// Publish the cluster's queue snapshot (JSON), fenced like every worker write.
    pub(crate) async fn publish_snapshot(
        &self,
        fence: &Fence,
        lease_until_ms: i64,
        body: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        let renewed =
            sqlx::query("UPDATE leases SET expires_ms = $4 WHERE cluster = $1 AND owner = $2 AND fence = $3")
                .bind(fence.cluster.as_str())
                .bind(fence.owner.as_str())
                .bind(fence.fence)
                .bind(lease_until_ms)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db)?;
        if renewed.rows_affected() != 1 {
            tx.rollback().await.map_err(StoreError::db)?;
            return Err(StoreError::LeaseLost { cluster: fence.cluster.clone(), fence: fence.fence });
        }
        sqlx::query(
            "INSERT INTO snapshots (cluster, body, taken_ms) VALUES ($1, $2, $3)
             ON CONFLICT (cluster) DO UPDATE SET body = excluded.body, taken_ms = excluded.taken_ms",
        )
        .bind(fence.cluster.as_str())
        .bind(body)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)
    }
}

pub(crate) type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// Check and renew the lease `fence` proves (`expires_ms = lease_until_ms`): false if it is no
/// longer that owner's with that fencing number.
async fn renew(tx: &mut Tx, fence: &Fence, lease_until_ms: i64) -> Result<bool, StoreError> {
    let renewed =
        sqlx::query("UPDATE leases SET expires_ms = $4 WHERE cluster = $1 AND owner = $2 AND fence = $3")
            .bind(fence.cluster.as_str())
            .bind(fence.owner.as_str())
            .bind(fence.fence)
            .bind(lease_until_ms)
            .execute(&mut **tx)
            .await
            .map_err(StoreError::db)?;
    Ok(renewed.rows_affected() == 1)
}

/// Apply one change (one or two statements): the reference [`crate::batch`] is tested against,
/// and how the rare kinds it does not group are applied.
pub(crate) async fn apply_one(tx: &mut Tx, cluster: &str, change: &Change) -> Result<bool, StoreError> {
    let affected = match change {
        Change::Usage(_) | Change::UsageExtended { .. } | Change::Preempted(_) => {
            apply_history(tx, cluster, change).await?
        }
        Change::AttemptPreempting { key, warning } => {
            crate::warning::apply(tx, key, warning.as_ref()).await?
        }
        Change::WaitBegan(w) => crate::waits::began(tx, w).await?,
        Change::WaitEnded { run, job, at } => crate::waits::ended(tx, *run, *job, *at).await?,
        Change::SloDecision(d) => crate::slo_decisions::insert(tx, d).await?,
        Change::SloModel(m) => crate::slo_decisions::insert_model(tx, m).await?,
        Change::Route { run, jobs, at: _ } => {
            let n = sqlx::query("UPDATE runs SET state = 'routed' WHERE id = $1 AND state = 'queued'")
                .bind(*run)
                .execute(&mut **tx)
                .await
                .map_err(StoreError::db)?
                .rows_affected();
            if n == 1 {
                for job in jobs {
                    sqlx::query("INSERT INTO jobs (run_id, idx, name, state) VALUES ($1, $2, $3, 'pending')")
                        .bind(*run)
                        .bind(i64::from(job.idx))
                        .bind(job.name.as_str())
                        .execute(&mut **tx)
                        .await
                        .map_err(StoreError::db)?;
                    for t in &job.tasks {
                        sqlx::query(
                            "INSERT INTO tasks (run_id, job_idx, stage_idx, task_idx, stage, state)
                             VALUES ($1, $2, $3, $4, $5, 'pending')",
                        )
                        .bind(*run)
                        .bind(i64::from(job.idx))
                        .bind(i64::from(t.stage_idx))
                        .bind(i64::from(t.task_idx))
                        .bind(t.stage.as_str())
                        .execute(&mut **tx)
                        .await
                        .map_err(StoreError::db)?;
                    }
                }
            }
            n
        }
        Change::RunState { run, to, at, reason } => {
            let terminal = crate::TERMINAL_RUN_STATES.contains(to);
            let q = if terminal {
                "UPDATE runs SET state = $2, finished_ms = $3, active_key = NULL, reason = COALESCE($4, reason)
                 WHERE id = $1 AND state NOT IN ('succeeded', 'failed', 'killed')"
            } else {
                "UPDATE runs SET state = $2, started_ms = CASE WHEN $2 = 'running' THEN COALESCE(started_ms, $3)
                 ELSE started_ms END, reason = COALESCE($4, reason)
                 WHERE id = $1 AND state NOT IN ('succeeded', 'failed', 'killed')"
            };
            let n = sqlx::query(q)
                .bind(*run)
                .bind(*to)
                .bind(*at)
                .bind(reason.as_deref())
                .execute(&mut **tx)
                .await
                .map_err(StoreError::db)?
                .rows_affected();
            if n == 1 && terminal {
                crate::waits::run_ended(tx, *run, *at).await?;
            }
            n
        }
        Change::JobState { run, job, to, at } => sqlx::query(
            "UPDATE jobs SET state = $3,
             started_ms = CASE WHEN $3 = 'running' THEN COALESCE(started_ms, $4) ELSE started_ms END,
             finished_ms = CASE WHEN $3 IN ('succeeded', 'failed', 'killed') THEN $4 ELSE finished_ms END
             WHERE run_id = $1 AND idx = $2 AND state NOT IN ('succeeded', 'failed', 'killed')",
        )
        .bind(*run)
        .bind(i64::from(*job))
        .bind(*to)
        .bind(*at)
        .execute(&mut **tx)
        .await
        .map_err(StoreError::db)?
        .rows_affected(),
        Change::TaskState { task, to, at, exit_code } => sqlx::query(
            "UPDATE tasks SET state = $5, exit_code = COALESCE($7, exit_code),
             finished_ms = CASE WHEN $5 IN ('succeeded', 'failed', 'killed') THEN $6 ELSE finished_ms END
             WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4
             AND state NOT IN ('succeeded', 'failed', 'killed')",
        )
        .bind(task.run)
        .bind(i64::from(task.job))
        .bind(i64::from(task.stage))
        .bind(i64::from(task.task))
        .bind(*to)
        .bind(*at)
        .bind(exit_code.map(i64::from))
        .execute(&mut **tx)
        .await
        .map_err(StoreError::db)?
        .rows_affected(),
        Change::AttemptStarting { key, node, stdout, stderr, at } => {
            let t = key.task;
            let n = sqlx::query(
                "UPDATE tasks SET state = 'starting', attempts = $5, node = $6,
                 started_ms = COALESCE(started_ms, $7)
                 WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4
                 AND state NOT IN ('succeeded', 'failed', 'killed') AND attempts < $5",
            )
            .bind(t.run)
            .bind(i64::from(t.job))
            .bind(i64::from(t.stage))
            .bind(i64::from(t.task))
            .bind(i64::from(key.attempt))
            .bind(node.as_str())
            .bind(*at)
            .execute(&mut **tx)
            .await
            .map_err(StoreError::db)?
            .rows_affected();
            if n == 1 {
                sqlx::query(
                    "INSERT INTO attempts (run_id, job_idx, stage_idx, task_idx, attempt, cluster, state, node,
                     stdout, stderr, started_ms) VALUES ($1, $2, $3, $4, $5, $6, 'starting', $7, $8, $9, $10)",
                )
                .bind(t.run)
                .bind(i64::from(t.job))
                .bind(i64::from(t.stage))
                .bind(i64::from(t.task))
                .bind(i64::from(key.attempt))
                .bind(cluster)
                .bind(node.as_str())
                .bind(stdout.as_str())
                .bind(stderr.as_str())
                .bind(*at)
                .execute(&mut **tx)
                .await
                .map_err(StoreError::db)?;
            }
            n
        }
        Change::AttemptLaunched { key, launched, at: _ } => {
            let t = key.task;
            let n = sqlx::query(
                "UPDATE attempts SET state = 'running', launched = $6
                 WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4 AND attempt = $5
                 AND state = 'starting'",
            )
            .bind(t.run)
            .bind(i64::from(t.job))
            .bind(i64::from(t.stage))
            .bind(i64::from(t.task))
            .bind(i64::from(key.attempt))
            .bind(launched.as_str())
            .execute(&mut **tx)
            .await
            .map_err(StoreError::db)?
            .rows_affected();
            if n == 1 {
                sqlx::query(
                    "UPDATE tasks SET state = 'running' WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3
                     AND task_idx = $4 AND state = 'starting'",
                )
                .bind(t.run)
                .bind(i64::from(t.job))
                .bind(i64::from(t.stage))
                .bind(i64::from(t.task))
                .execute(&mut **tx)
                .await
                .map_err(StoreError::db)?;
            }
            n
        }
        Change::AttemptEnded { key, to, exit_code, at, reason } => {
            let t = key.task;
            sqlx::query(
                "UPDATE attempts SET state = $6, exit_code = $7, ended_ms = $8, reason = $9
                 WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4 AND attempt = $5
                 AND state IN ('starting', 'running', 'preempting')",
            )
            .bind(t.run)
            .bind(i64::from(t.job))
            .bind(i64::from(t.stage))
            .bind(i64::from(t.task))
            .bind(i64::from(key.attempt))
            .bind(*to)
            .bind(exit_code.map(i64::from))
            .bind(*at)
            .bind(reason.as_deref())
            .execute(&mut **tx)
            .await
            .map_err(StoreError::db)?
            .rows_affected()
        }
    };
    Ok(affected == 1)
}

async fn apply_history(tx: &mut Tx, cluster: &str, change: &Change) -> Result<u64, StoreError> {
    match change {
        Change::Usage(row) => crate::history::insert_usage(tx, cluster, row).await,
        Change::UsageExtended { queue, start_ms, old_end_ms, end_ms } => {
            crate::history::extend_usage(tx, cluster, queue, *start_ms, *old_end_ms, *end_ms).await
        }
        Change::Preempted(p) => crate::history::insert_preemption(tx, p).await,
        _ => Ok(0),
    }
}
