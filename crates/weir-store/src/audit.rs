//! The audit log: who changed what, when and from where. Submissions are recorded in their own
//! transaction (a 201 and its audit row commit together); every other change is recorded by
//! the service layer right after it, with its outcome (`ok`, `denied`, …). Rows are never
//! updated or deleted by weir.

use crate::worker::Tx;
use crate::{int, opt_text, text, Store, StoreError};

/// One audited action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    pub at_ms: i64,
    /// The token that acted (its id, never its secret); `-` when none was given.
    pub token_id: String,
    /// What was done: `submit`, `kill`, `route.put`, `token.create`, `cluster.put`, …
    pub action: String,
    /// What it was done to: `run 42`, `route workflow:etl`, `token t1a2b`, `cluster default`.
    pub target: String,
    /// The project the target belongs to, when it belongs to one.
    pub project: Option<String>,
    /// The peer address of the request.
    pub client: Option<String>,
    /// `created`, `ok`, `conflict`, `denied`, `invalid`, …
    pub outcome: String,
    /// Free text: what changed, in words.
    pub detail: Option<String>,
}

/// A stored entry: an entry and its id (ids grow with time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRow {
    pub id: i64,
    pub entry: AuditEntry,
}

/// Which entries to read: newest first, below `before` (the paging cursor), at most `limit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub token_id: Option<String>,
    pub action: Option<String>,
    pub since_ms: Option<i64>,
    pub before: Option<i64>,
    pub limit: u32,
}

/// An audit insert's values of `e`, in the column order of `append_in`'s statement.
pub(crate) fn bind_entry<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    e: &'q AuditEntry,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    q.bind(e.at_ms)
        .bind(e.token_id.as_str())
        .bind(e.action.as_str())
        .bind(e.target.as_str())
        .bind(e.project.as_deref())
        .bind(e.client.as_deref())
        .bind(e.outcome.as_str())
        .bind(e.detail.as_deref())
}

pub(crate) async fn append_in(tx: &mut Tx, e: &AuditEntry) -> Result<(), StoreError> {
    bind_entry(
        sqlx::query(
            "INSERT INTO audit (at_ms, token_id, action, target, project, client, outcome, detail)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        ),
        e,
    )
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?;
    Ok(())
}

impl Store {
    pub(crate) async fn append_audit(&self, e: &AuditEntry) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        append_in(&mut tx, e).await?;
        tx.commit().await.map_err(StoreError::db)
    }

    pub(crate) async fn audit(&self, f: &AuditFilter) -> Result<Vec<AuditRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, at_ms, token_id, action, target, project, client, outcome, detail FROM audit
             WHERE ($1 IS NULL OR token_id = $1) AND ($2 IS NULL OR action = $2) AND ($3 IS NULL OR at_ms >= $3)
               AND ($4 IS NULL OR id < $4)
             ORDER BY id DESC LIMIT $5",
        )
        .bind(f.token_id.as_deref())
        .bind(f.action.as_deref())
        .bind(f.since_ms)
        .bind(f.before)
        .bind(i64::from(f.limit.max(1)))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(AuditRow {
                    id: int(r, "id")?,
                    entry: AuditEntry {
                        at_ms: int(r, "at_ms")?,
                        token_id: text(r, "token_id")?,
                        action: text(r, "action")?,
                        target: text(r, "target")?,
                        project: opt_text(r, "project")?,
                        client: opt_text(r, "client")?,
                        outcome: text(r, "outcome")?,
                        detail: opt_text(r, "detail")?,
                    },
                })
            })
            .collect()
    }
}
