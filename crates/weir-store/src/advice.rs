//! The balancing advisor's results (issue 25): each advice the server made, its JSON as
//! weir-planner wrote it, kept so the API and the dashboard show the newest one.

use sqlx::any::AnyRow;

use crate::{int, text, Store, StoreError};

/// One advice: when it was made, over which history, by what, and the advice itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdviceRow {
    pub id: i64,
    pub created_ms: i64,
    /// The span of recorded runs it was made from, ending at `created_ms`.
    pub window_ms: i64,
    /// `schedule` (the daily job) or the token id of whoever asked for it now.
    pub trigger: String,
    /// JSON: `weir_planner::Advice`.
    pub body: String,
}

fn advice_row(r: &AnyRow) -> Result<AdviceRow, StoreError> {
    Ok(AdviceRow {
        id: int(r, "id")?,
        created_ms: int(r, "created_ms")?,
        window_ms: int(r, "window_ms")?,
        trigger: text(r, "trigger_by")?,
        body: text(r, "body")?,
    })
}

impl Store {
    /// Stores an advice; returns its id.
    pub(crate) async fn put_advice(&self, a: &AdviceRow) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "INSERT INTO advice (created_ms, window_ms, trigger_by, body) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(a.created_ms)
        .bind(a.window_ms)
        .bind(a.trigger.as_str())
        .bind(a.body.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let id = int(&row, "id")?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(id)
    }

    /// The newest advice, if any was made.
    pub(crate) async fn latest_advice(&self) -> Result<Option<AdviceRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id, created_ms, window_ms, trigger_by, body FROM advice ORDER BY id DESC LIMIT 1",
        )
        .fetch_optional(&self.read)
        .await
        .map_err(StoreError::db)?;
        row.as_ref().map(advice_row).transpose()
    }
}
