//! History for the dashboard, the reports and the plan → apply loop: queue usage intervals
//! (the `usage.csv` schema the planner reads), run records (the `runs.csv` schema), the
//! preemptions carried out, plan proposals, and applying a plan — a cluster's queue settings
//! and its routes in one transaction.
//!
//! Usage rows and preemptions are written by the owning worker inside its fenced batches
//! ([`crate::Change::Usage`], [`crate::Change::UsageExtended`], [`crate::Change::Preempted`]);
//! everything here reads, except [`Store::apply_plan`] and the proposal writes, which are one
//! transaction each.

use crate::worker::Tx;
use crate::{int, opt_int, opt_text, text, RouteRow, Store, StoreError};

/// Why a cluster's configuration changes, recorded with the new version.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ConfigChange {
    /// Who: a token id, `weir` for the server itself.
    pub actor: String,
    /// From what: `plan`, `proposal 7`, `rollback to version 3`, `edit`, `loaded at start`.
    pub source: String,
    /// JSON: what changed from the version before (the server's diff).
    pub diff: String,
    /// JSON: the routes to the cluster after the change (`[{key, cluster, queue}]`); `None`
    /// when they are not known.
    pub routes: Option<String>,
}

/// One recorded version of a cluster's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigVersionRow {
    pub cluster: String,
    pub version: i64,
    pub at_ms: i64,
    pub actor: String,
    pub source: String,
    /// The cluster file (YAML) of this version.
    pub config: String,
    pub routes: Option<String>,
    pub diff: String,
}

/// Record `version` of `cluster` (inside the transaction that made it).
pub(crate) async fn record_version(
    tx: &mut Tx,
    cluster: &str,
    version: i64,
    config: &str,
    change: &ConfigChange,
    now_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO config_versions (cluster, version, at_ms, actor, source, config, routes, diff)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (cluster, version) DO UPDATE SET at_ms = excluded.at_ms, actor = excluded.actor,
         source = excluded.source, config = excluded.config, routes = excluded.routes, diff = excluded.diff",
    )
    .bind(cluster)
    .bind(version)
    .bind(now_ms)
    .bind(change.actor.as_str())
    .bind(change.source.as_str())
    .bind(config)
    .bind(change.routes.as_deref())
    .bind(change.diff.as_str())
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?;
    Ok(())
}

fn version_row(r: &sqlx::any::AnyRow) -> Result<ConfigVersionRow, StoreError> {
    Ok(ConfigVersionRow {
        cluster: text(r, "cluster")?,
        version: int(r, "version")?,
        at_ms: int(r, "at_ms")?,
        actor: text(r, "actor")?,
        source: text(r, "source")?,
        config: text(r, "config")?,
        routes: opt_text(r, "routes")?,
        diff: text(r, "diff")?,
    })
}

/// One interval of constant (or averaged) usage of a leaf queue: a `usage.csv` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub cluster: String,
    pub queue: String,
    /// Unix milliseconds, `start_ms < end_ms`.
    pub start_ms: i64,
    pub end_ms: i64,
    /// Millicores.
    pub cpu: i64,
    /// MiB.
    pub memory: i64,
    /// GPUs (not part of `usage.csv`).
    pub gpu: i64,
    pub running_apps: i64,
}

/// A run as the reports need it (the `runs.csv` columns and what decides its SLO outcome).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecordRow {
    pub id: i64,
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub cluster: String,
    pub queue: String,
    pub state: String,
    pub submitted_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    /// The workflow's runtime SLO when it was submitted.
    pub slo_ms: Option<i64>,
}

/// How long one successful task attempt ran (what a replay draws task durations from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptDuration {
    pub run: i64,
    pub job: u32,
    pub stage: u32,
    pub ms: i64,
}

/// One attempt's span and who ran it (usage per user).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptSpan {
    pub run: i64,
    pub job: u32,
    pub stage: u32,
    pub started_ms: i64,
    /// `None` while it runs.
    pub ended_ms: Option<i64>,
    /// The run's scheduler user (`None` for runs stored before users were recorded).
    pub user: Option<String>,
    pub project: String,
}

/// Runs of one (project, tier, state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCount {
    pub project: String,
    pub tier: u8,
    pub state: String,
    pub runs: i64,
    /// When the oldest of them was submitted (epoch ms).
    pub oldest_submitted_ms: i64,
}

/// A container taken by preemption, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptionRow {
    pub cluster: String,
    pub at_ms: i64,
    pub run_id: i64,
    /// `job.stage.index` of the task whose attempt lost its container.
    pub task: String,
    pub attempt: u32,
    /// The victim's leaf queue.
    pub queue: String,
    /// The queue the container was taken for.
    pub for_queue: String,
    /// `fair_share` or `min_share`.
    pub kind: String,
    /// The engine's sentence.
    pub reason: String,
}

/// A plan waiting for an admin: a cluster file and routes, with its figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposalRow {
    pub id: i64,
    pub cluster: String,
    pub created_ms: i64,
    /// The cluster configuration version it was planned from.
    pub base_version: i64,
    /// The planned cluster file (YAML).
    pub config: String,
    /// JSON list of routes (`{key, cluster, queue}`).
    pub routes: String,
    /// JSON: the plan's summary and validation figures, as the server made them.
    pub summary: String,
    /// `proposed`, `applied`, `dismissed` or `superseded`.
    pub state: String,
    pub decided_ms: Option<i64>,
}

/// What applying a plan did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanApplied {
    /// Stored: the cluster's new configuration version.
    Applied { version: i64 },
    /// The cluster's configuration is no longer the version the plan was made from: nothing
    /// was written.
    Stale { current: i64 },
    /// There is no such cluster: nothing was written.
    NoCluster,
}

fn usage_row(r: &sqlx::any::AnyRow) -> Result<UsageRow, StoreError> {
    Ok(UsageRow {
        cluster: text(r, "cluster")?,
        queue: text(r, "queue")?,
        start_ms: int(r, "start_ms")?,
        end_ms: int(r, "end_ms")?,
        cpu: int(r, "cpu")?,
        memory: int(r, "memory")?,
        gpu: int(r, "gpu")?,
        running_apps: int(r, "running_apps")?,
    })
}

fn proposal_row(r: &sqlx::any::AnyRow) -> Result<ProposalRow, StoreError> {
    Ok(ProposalRow {
        id: int(r, "id")?,
        cluster: text(r, "cluster")?,
        created_ms: int(r, "created_ms")?,
        base_version: int(r, "base_version")?,
        config: text(r, "config")?,
        routes: text(r, "routes")?,
        summary: text(r, "summary")?,
        state: text(r, "state")?,
        decided_ms: opt_int(r, "decided_ms")?,
    })
}

const PROPOSAL_COLUMNS: &str =
    "id, cluster, created_ms, base_version, config, routes, summary, state, decided_ms";

impl Store {
    /// Usage rows of `cluster` that overlap `[since_ms, until_ms)`, by queue then start.
    pub(crate) async fn usage(
        &self,
        cluster: &str,
        since_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT cluster, queue, start_ms, end_ms, cpu, memory, gpu, running_apps FROM queue_usage
             WHERE cluster = $1 AND start_ms < $3 AND end_ms > $2 ORDER BY queue, start_ms",
        )
        .bind(cluster)
        .bind(since_ms)
        .bind(until_ms)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(usage_row).collect()
    }

    /// Runs submitted in `[since_ms, until_ms)`, of one cluster or all, of one project scope
    /// (a project and its sub-projects, through `run_scopes`) or all, oldest first.
    pub(crate) async fn run_records(
        &self,
        cluster: Option<&str>,
        scope: Option<&str>,
        since_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<RunRecordRow>, StoreError> {
        const ALL: &str =
            "SELECT id, workflow, project, tier, cluster, queue, state, submitted_ms, started_ms,
             finished_ms, slo_ms FROM runs
             WHERE ($1 IS NULL OR cluster = $1) AND submitted_ms >= $2 AND submitted_ms < $3 ORDER BY id";
        const SCOPED: &str =
            "SELECT id, workflow, project, tier, cluster, queue, state, submitted_ms, started_ms,
             finished_ms, slo_ms FROM run_scopes JOIN runs ON runs.id = run_scopes.run_id
             WHERE run_scopes.scope = $4 AND ($1 IS NULL OR cluster = $1) AND submitted_ms >= $2
               AND submitted_ms < $3 ORDER BY id";
        let q = if scope.is_some() { SCOPED } else { ALL };
        let mut query = sqlx::query(q).bind(cluster).bind(since_ms).bind(until_ms);
        if let Some(s) = scope {
            query = query.bind(s);
        }
        let rows = query.fetch_all(&self.read).await.map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(RunRecordRow {
                    id: int(r, "id")?,
                    workflow: text(r, "workflow")?,
                    project: text(r, "project")?,
                    tier: int(r, "tier")?.clamp(0, 255) as u8,
                    cluster: text(r, "cluster")?,
                    queue: text(r, "queue")?,
                    state: text(r, "state")?,
                    submitted_ms: int(r, "submitted_ms")?,
                    started_ms: opt_int(r, "started_ms")?,
                    finished_ms: opt_int(r, "finished_ms")?,
                    slo_ms: opt_int(r, "slo_ms")?,
                })
            })
            .collect()
    }

    /// Every attempt that succeeded for runs of `cluster` submitted in `[since_ms, until_ms)`,
    /// and how long it ran. What a replay of the recorded runs draws its task durations from.
    pub(crate) async fn attempt_durations(
        &self,
        cluster: &str,
        since_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<AttemptDuration>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.run_id AS run_id, a.job_idx AS job_idx, a.stage_idx AS stage_idx, a.ended_ms - a.started_ms AS ms
             FROM attempts a JOIN runs r ON r.id = a.run_id
             WHERE r.cluster = $1 AND r.submitted_ms >= $2 AND r.submitted_ms < $3 AND a.state = 'succeeded'
             ORDER BY a.run_id, a.job_idx, a.stage_idx, a.task_idx",
        )
        .bind(cluster)
        .bind(since_ms)
        .bind(until_ms)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(AttemptDuration {
                    run: int(r, "run_id")?,
                    job: int(r, "job_idx")? as u32,
                    stage: int(r, "stage_idx")? as u32,
                    ms: int(r, "ms")?,
                })
            })
            .collect()
    }

    /// [`Store::attempt_durations`] of one workflow's successful runs only (what the SLO
    /// controller's profile of the workflow is built from).
    pub(crate) async fn workflow_attempt_durations(
        &self,
        cluster: &str,
        workflow: &str,
        since_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<AttemptDuration>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.run_id AS run_id, a.job_idx AS job_idx, a.stage_idx AS stage_idx, a.ended_ms - a.started_ms AS ms
             FROM attempts a JOIN runs r ON r.id = a.run_id
             WHERE r.cluster = $1 AND r.workflow = $2 AND r.state = 'succeeded' AND r.submitted_ms >= $3
             AND r.submitted_ms < $4 AND a.state = 'succeeded'
             ORDER BY a.run_id, a.job_idx, a.stage_idx, a.task_idx",
        )
        .bind(cluster)
        .bind(workflow)
        .bind(since_ms)
        .bind(until_ms)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(AttemptDuration {
                    run: int(r, "run_id")?,
                    job: int(r, "job_idx")? as u32,
                    stage: int(r, "stage_idx")? as u32,
                    ms: int(r, "ms")?,
                })
            })
            .collect()
    }

    /// Every attempt (any state, running ones with no end) of runs submitted in
    /// `[since_ms, until_ms)`, with the run's scheduler user and project: what usage per user
    /// is counted from. At most `limit`, oldest runs first.
    pub(crate) async fn attempt_spans(
        &self,
        since_ms: i64,
        until_ms: i64,
        limit: u32,
    ) -> Result<Vec<AttemptSpan>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.run_id AS run_id, a.job_idx AS job_idx, a.stage_idx AS stage_idx, a.started_ms AS started_ms,
             a.ended_ms AS ended_ms, r.user_name AS user_name, r.project AS project
             FROM runs r JOIN attempts a ON a.run_id = r.id
             WHERE r.submitted_ms >= $1 AND r.submitted_ms < $2
             ORDER BY a.run_id, a.job_idx, a.stage_idx, a.task_idx, a.attempt LIMIT $3",
        )
        .bind(since_ms)
        .bind(until_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(AttemptSpan {
                    run: int(r, "run_id")?,
                    job: int(r, "job_idx")? as u32,
                    stage: int(r, "stage_idx")? as u32,
                    started_ms: int(r, "started_ms")?,
                    ended_ms: opt_int(r, "ended_ms")?,
                    user: opt_text(r, "user_name")?,
                    project: text(r, "project")?,
                })
            })
            .collect()
    }

    /// Runs by (project, tier, state): those submitted since `since_ms` and every run not yet
    /// ended.
    pub(crate) async fn run_counts(&self, since_ms: i64) -> Result<Vec<RunCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT project, tier, state, COUNT(*) AS n, MIN(submitted_ms) AS oldest FROM runs
             WHERE submitted_ms >= $1 OR state NOT IN ('succeeded', 'failed', 'killed')
             GROUP BY project, tier, state ORDER BY project, tier, state",
        )
        .bind(since_ms)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(RunCount {
                    project: text(r, "project")?,
                    tier: int(r, "tier")?.clamp(0, 255) as u8,
                    state: text(r, "state")?,
                    runs: int(r, "n")?,
                    oldest_submitted_ms: int(r, "oldest")?,
                })
            })
            .collect()
    }

    /// Preemptions of `cluster` (or every cluster) since `since_ms`, newest first, at most
    /// `limit`.
    pub(crate) async fn preemptions(
        &self,
        cluster: Option<&str>,
        since_ms: i64,
        limit: u32,
    ) -> Result<Vec<PreemptionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT cluster, at_ms, run_id, task, attempt, queue, for_queue, kind, reason FROM preemptions
             WHERE ($1 IS NULL OR cluster = $1) AND at_ms >= $2 ORDER BY at_ms DESC LIMIT $3",
        )
        .bind(cluster)
        .bind(since_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(PreemptionRow {
                    cluster: text(r, "cluster")?,
                    at_ms: int(r, "at_ms")?,
                    run_id: int(r, "run_id")?,
                    task: text(r, "task")?,
                    attempt: int(r, "attempt")?.clamp(0, i64::from(u32::MAX)) as u32,
                    queue: text(r, "queue")?,
                    for_queue: text(r, "for_queue")?,
                    kind: text(r, "kind")?,
                    reason: text(r, "reason")?,
                })
            })
            .collect()
    }

    /// Apply a plan to `cluster`: its configuration becomes `config` and the routes to it
    /// become exactly `routes`. **One transaction**, compare-and-set on the configuration
    /// version: if the cluster is no longer at `base_version`, nothing is written. The version
    /// moves on only if the text changed (as [`Store::put_cluster`]).
    pub(crate) async fn apply_plan(
        &self,
        cluster: &str,
        base_version: i64,
        config: &str,
        routes: &[RouteRow],
        change: &ConfigChange,
        now_ms: i64,
    ) -> Result<PlanApplied, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query("SELECT config, version FROM clusters WHERE name = $1")
            .bind(cluster)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        let Some(row) = row else {
            tx.rollback().await.map_err(StoreError::db)?;
            return Ok(PlanApplied::NoCluster);
        };
        let current = int(&row, "version")?;
        if current != base_version {
            tx.rollback().await.map_err(StoreError::db)?;
            return Ok(PlanApplied::Stale { current });
        }
        let version = if text(&row, "config")? == config { current } else { current + 1 };
        sqlx::query("UPDATE clusters SET config = $2, version = $3, updated_ms = $4 WHERE name = $1")
            .bind(cluster)
            .bind(config)
            .bind(version)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        sqlx::query("DELETE FROM routes WHERE cluster = $1")
            .bind(cluster)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        for r in routes {
            crate::auth::upsert_route(&mut tx, r, now_ms).await?;
        }
        if version != current {
            record_version(&mut tx, cluster, version, config, change, now_ms).await?;
        }
        tx.commit().await.map_err(StoreError::db)?;
        Ok(PlanApplied::Applied { version })
    }

    /// Store a proposal in its `state` (`proposed`, or `refused` when its validation failed);
    /// earlier proposals of the cluster still waiting become `superseded`. One transaction.
    /// Returns the new proposal's id.
    pub(crate) async fn put_proposal(&self, p: &ProposalRow) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE proposals SET state = 'superseded', decided_ms = $2 WHERE cluster = $1 AND state = 'proposed'")
            .bind(p.cluster.as_str())
            .bind(p.created_ms)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        let row = sqlx::query(
            "INSERT INTO proposals (cluster, created_ms, base_version, config, routes, summary, state)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .bind(p.cluster.as_str())
        .bind(p.created_ms)
        .bind(p.base_version)
        .bind(p.config.as_str())
        .bind(p.routes.as_str())
        .bind(p.summary.as_str())
        .bind(p.state.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let id = int(&row, "id")?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(id)
    }

    /// The newest proposals (of one cluster or all), newest first.
    pub(crate) async fn proposals(
        &self,
        cluster: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ProposalRow>, StoreError> {
        const Q: &str =
            "SELECT id, cluster, created_ms, base_version, config, routes, summary, state, decided_ms
             FROM proposals WHERE ($1 IS NULL OR cluster = $1) ORDER BY id DESC LIMIT $2";
        debug_assert!(Q.contains(PROPOSAL_COLUMNS));
        let rows = sqlx::query(Q)
            .bind(cluster)
            .bind(i64::from(limit))
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
        rows.iter().map(proposal_row).collect()
    }

    pub(crate) async fn proposal(&self, id: i64) -> Result<Option<ProposalRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id, cluster, created_ms, base_version, config, routes, summary, state, decided_ms
             FROM proposals WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.read)
        .await
        .map_err(StoreError::db)?;
        row.as_ref().map(proposal_row).transpose()
    }

    /// Compare-and-set a proposal from `proposed` to `to` (`applied`, `dismissed`); `false`
    /// if it was no longer waiting.
    pub(crate) async fn decide_proposal(&self, id: i64, to: &str, now_ms: i64) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(
            "UPDATE proposals SET state = $2, decided_ms = $3 WHERE id = $1 AND state = 'proposed'",
        )
        .bind(id)
        .bind(to)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?
        .rows_affected();
        tx.commit().await.map_err(StoreError::db)?;
        Ok(n == 1)
    }

    /// When the newest proposal of `cluster` was made, if any.
    pub(crate) async fn last_proposal_ms(&self, cluster: &str) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query("SELECT MAX(created_ms) AS at FROM proposals WHERE cluster = $1")
            .bind(cluster)
            .fetch_one(&self.read)
            .await
            .map_err(StoreError::db)?;
        opt_int(&row, "at")
    }

    /// The recorded versions of `cluster`'s configuration, newest first.
    pub(crate) async fn config_versions(
        &self,
        cluster: &str,
        limit: u32,
    ) -> Result<Vec<ConfigVersionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT cluster, version, at_ms, actor, source, config, routes, diff FROM config_versions
             WHERE cluster = $1 ORDER BY version DESC LIMIT $2",
        )
        .bind(cluster)
        .bind(i64::from(limit))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(version_row).collect()
    }

    /// One recorded version of `cluster`'s configuration.
    pub(crate) async fn config_version(
        &self,
        cluster: &str,
        version: i64,
    ) -> Result<Option<ConfigVersionRow>, StoreError> {
        let row = sqlx::query(
            "SELECT cluster, version, at_ms, actor, source, config, routes, diff FROM config_versions
             WHERE cluster = $1 AND version = $2",
        )
        .bind(cluster)
        .bind(version)
        .fetch_optional(&self.read)
        .await
        .map_err(StoreError::db)?;
        row.as_ref().map(version_row).transpose()
    }

    /// When this store began recording `cluster`: its first recorded configuration version,
    /// usage row or run, whichever is earliest.
    pub(crate) async fn recording_since(&self, cluster: &str) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(t) AS at FROM (
               SELECT MIN(at_ms) AS t FROM config_versions WHERE cluster = $1
               UNION ALL SELECT MIN(start_ms) AS t FROM queue_usage WHERE cluster = $1
               UNION ALL SELECT MIN(submitted_ms) AS t FROM runs WHERE cluster = $1) AS firsts",
        )
        .bind(cluster)
        .fetch_one(&self.read)
        .await
        .map_err(StoreError::db)?;
        opt_int(&row, "at")
    }
}

/// Insert one usage interval (the worker's fenced batch). Rows never overlap for one queue:
/// one that starts before the queue's last row ends is moved up to that end, or dropped if
/// nothing is left of it.
pub(crate) async fn insert_usage(tx: &mut Tx, cluster: &str, row: &UsageRow) -> Result<u64, StoreError> {
    let last = sqlx::query("SELECT MAX(end_ms) AS e FROM queue_usage WHERE cluster = $1 AND queue = $2")
        .bind(cluster)
        .bind(row.queue.as_str())
        .fetch_one(&mut **tx)
        .await
        .map_err(StoreError::db)?;
    let start = opt_int(&last, "e")?.map_or(row.start_ms, |e| e.max(row.start_ms));
    if start >= row.end_ms {
        return Ok(0);
    }
    let n = sqlx::query(
        "INSERT INTO queue_usage (cluster, queue, start_ms, end_ms, cpu, memory, gpu, running_apps)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
    )
    .bind(cluster)
    .bind(row.queue.as_str())
    .bind(start)
    .bind(row.end_ms)
    .bind(row.cpu)
    .bind(row.memory)
    .bind(row.gpu)
    .bind(row.running_apps)
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?
    .rows_affected();
    Ok(n)
}

/// Move the end of the queue's row that starts at `start_ms` and ends at `old_end_ms` to
/// `end_ms` (compare-and-set on the old end).
pub(crate) async fn extend_usage(
    tx: &mut Tx,
    cluster: &str,
    queue: &str,
    start_ms: i64,
    old_end_ms: i64,
    end_ms: i64,
) -> Result<u64, StoreError> {
    let n = sqlx::query(
        "UPDATE queue_usage SET end_ms = $5 WHERE cluster = $1 AND queue = $2 AND start_ms = $3 AND end_ms = $4",
    )
    .bind(cluster)
    .bind(queue)
    .bind(start_ms)
    .bind(old_end_ms)
    .bind(end_ms)
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?
    .rows_affected();
    Ok(n)
}

/// Record a preemption (the worker's fenced batch).
pub(crate) async fn insert_preemption(tx: &mut Tx, p: &PreemptionRow) -> Result<u64, StoreError> {
    let n = sqlx::query(
        "INSERT INTO preemptions (cluster, at_ms, run_id, task, attempt, queue, for_queue, kind, reason)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(p.cluster.as_str())
    .bind(p.at_ms)
    .bind(p.run_id)
    .bind(p.task.as_str())
    .bind(i64::from(p.attempt))
    .bind(p.queue.as_str())
    .bind(p.for_queue.as_str())
    .bind(p.kind.as_str())
    .bind(p.reason.as_str())
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?
    .rows_affected();
    Ok(n)
}
