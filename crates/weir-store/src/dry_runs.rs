//! The migration table: each dry-run's verdict (its shadow output compared with production's),
//! the cluster it ran on, the differences, and the approval that moves the workflow there.
//!
//! A run is a dry-run when `runs.dry_run` is 1 (schema 15); its verdict row is written once
//! when it ends (again after a crash: the row is replaced by run id, its approval kept). An
//! approval, the route it moves and its audit row commit in one transaction.

use sqlx::any::AnyRow;

use crate::audit::AuditEntry;
use crate::auth::RouteRow;
use crate::runs::{run_columns, run_row, RunRow};
use crate::{int, opt_int, opt_text, text, Store, StoreError};

/// One dry-run's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunVerdictRow {
    /// Assigned by the store (0 in a row to record).
    pub id: i64,
    /// The dry-run run.
    pub run_id: i64,
    pub workflow: String,
    pub project: String,
    pub logical_date: String,
    /// The cluster the dry-run ran on: where approving moves the workflow.
    pub cluster: String,
    /// The leaf queue it ran in there: the approved route's queue.
    pub queue: String,
    /// The production run whose output it was compared with (from its manifest), when known.
    pub production_run: Option<String>,
    /// `identical`, `equivalent` (within tolerance) or `different`.
    pub verdict: String,
    /// JSON: the differences listed by the comparison (a list, empty when identical), or the
    /// reason no comparison could be made.
    pub differences: String,
    pub at_ms: i64,
    /// The token that approved the move, and when.
    pub approved_by: Option<String>,
    pub approved_ms: Option<i64>,
}

/// Approve moving `workflow` to `cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationApproval {
    pub workflow: String,
    pub cluster: String,
    /// The approving token's id.
    pub actor: String,
    pub client: Option<String>,
    pub at_ms: i64,
}

/// What an approval did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// The newest verdict of the workflow on the cluster is approved (or already was) and the
    /// route `workflow:NAME` now points at the cluster and the dry-run's queue.
    Approved { verdict: DryRunVerdictRow, route: RouteRow },
    /// No dry-run of the workflow on that cluster has a verdict: nothing changed.
    NoVerdict,
    /// Its newest verdict there is `different`: nothing changed.
    Different { verdict: DryRunVerdictRow },
}

macro_rules! columns {
    () => {
        "id, run_id, workflow, project, logical_date, cluster, queue, production_run, verdict, \
         differences, at_ms, approved_by, approved_ms"
    };
}

fn verdict_row(r: &AnyRow) -> Result<DryRunVerdictRow, StoreError> {
    Ok(DryRunVerdictRow {
        id: int(r, "id")?,
        run_id: int(r, "run_id")?,
        workflow: text(r, "workflow")?,
        project: text(r, "project")?,
        logical_date: text(r, "logical_date")?,
        cluster: text(r, "cluster")?,
        queue: text(r, "queue")?,
        production_run: opt_text(r, "production_run")?,
        verdict: text(r, "verdict")?,
        differences: text(r, "differences")?,
        at_ms: int(r, "at_ms")?,
        approved_by: opt_text(r, "approved_by")?,
        approved_ms: opt_int(r, "approved_ms")?,
    })
}

impl Store {
    /// Records (or, for a run that has one, replaces) a dry-run's verdict; an approval already
    /// given is kept. Returns the row's id. One transaction.
    pub(crate) async fn record_dry_run_verdict(&self, v: &DryRunVerdictRow) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "INSERT INTO dry_run_verdicts (run_id, workflow, project, logical_date, cluster, queue,
             production_run, verdict, differences, at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (run_id) DO UPDATE SET production_run = excluded.production_run,
             verdict = excluded.verdict, differences = excluded.differences, at_ms = excluded.at_ms
             RETURNING id",
        )
        .bind(v.run_id)
        .bind(v.workflow.as_str())
        .bind(v.project.as_str())
        .bind(v.logical_date.as_str())
        .bind(v.cluster.as_str())
        .bind(v.queue.as_str())
        .bind(v.production_run.as_deref())
        .bind(v.verdict.as_str())
        .bind(v.differences.as_str())
        .bind(v.at_ms)
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let id = int(&row, "id")?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(id)
    }

    /// Verdicts, newest first: of one workflow, or of all; at most `limit`.
    pub(crate) async fn dry_run_verdicts(
        &self,
        workflow: Option<&str>,
        limit: u32,
    ) -> Result<Vec<DryRunVerdictRow>, StoreError> {
        let rows = match workflow {
            Some(w) => {
                sqlx::query(concat!(
                    "SELECT ",
                    columns!(),
                    " FROM dry_run_verdicts WHERE workflow = $1 ORDER BY id DESC LIMIT $2"
                ))
                .bind(w)
                .bind(i64::from(limit))
                .fetch_all(&self.read)
                .await
            }
            None => {
                sqlx::query(concat!(
                    "SELECT ",
                    columns!(),
                    " FROM dry_run_verdicts ORDER BY id DESC LIMIT $1"
                ))
                .bind(i64::from(limit))
                .fetch_all(&self.read)
                .await
            }
        }
        .map_err(StoreError::db)?;
        rows.iter().map(verdict_row).collect()
    }

    /// The dry-runs of `cluster` that are over (succeeded, failed or killed) and have no verdict
    /// yet, oldest first: a server stopped between a dry-run's end and its verdict.
    pub(crate) async fn dry_runs_without_verdict(&self, cluster: &str) -> Result<Vec<RunRow>, StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE cluster = $1 AND dry_run = 1 AND state IN ('succeeded', 'failed', 'killed')
             AND NOT EXISTS (SELECT 1 FROM dry_run_verdicts v WHERE v.run_id = runs.id) ORDER BY id"
        );
        let rows = sqlx::query(Q).bind(cluster).fetch_all(&self.read).await.map_err(StoreError::db)?;
        rows.iter().map(run_row).collect()
    }

    /// Approves the newest verdict of the workflow on the cluster, unless it is `different`,
    /// and moves the route `workflow:NAME` to that cluster and the dry-run's queue; the
    /// approval, the route and an audit row (`migrate.approve`) commit together.
    pub(crate) async fn approve_migration(&self, a: &MigrationApproval) -> Result<Approval, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM dry_run_verdicts WHERE workflow = $1 AND cluster = $2 ORDER BY id DESC LIMIT 1"
        ))
        .bind(a.workflow.as_str())
        .bind(a.cluster.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let Some(row) = row else {
            tx.rollback().await.map_err(StoreError::db)?;
            return Ok(Approval::NoVerdict);
        };
        let mut verdict = verdict_row(&row)?;
        if verdict.verdict == "different" {
            tx.rollback().await.map_err(StoreError::db)?;
            return Ok(Approval::Different { verdict });
        }
        if verdict.approved_ms.is_none() {
            sqlx::query("UPDATE dry_run_verdicts SET approved_by = $2, approved_ms = $3 WHERE id = $1")
                .bind(verdict.id)
                .bind(a.actor.as_str())
                .bind(a.at_ms)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::db)?;
            verdict.approved_by = Some(a.actor.clone());
            verdict.approved_ms = Some(a.at_ms);
        }
        let route = RouteRow {
            key: format!("workflow:{}", a.workflow),
            cluster: verdict.cluster.clone(),
            queue: verdict.queue.clone(),
        };
        crate::auth::upsert_route(&mut tx, &route, a.at_ms).await?;
        crate::audit::append_in(
            &mut tx,
            &AuditEntry {
                at_ms: a.at_ms,
                token_id: a.actor.clone(),
                action: "migrate.approve".into(),
                target: format!("route {}", route.key),
                project: Some(verdict.project.clone()),
                client: a.client.clone(),
                outcome: "ok".into(),
                detail: Some(format!(
                    "to {}/{} after dry-run run {} ({})",
                    route.cluster, route.queue, verdict.run_id, verdict.verdict
                )),
            },
        )
        .await?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(Approval::Approved { verdict, route })
    }
}
