//! Dashboard sessions: a random session id (kept by the browser in a cookie) mapped to the
//! token that logged in. The store keeps neither secret: a session row holds the SHA-256 of the
//! session id and the token's hash (as the `tokens` table does), so reading the database gives
//! no one a usable cookie or token.

use crate::{int, text, Store, StoreError};

/// One dashboard session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRow {
    /// Hex SHA-256 of the session id the cookie carries.
    pub id_hash: String,
    /// The hash of the token that logged in (`tokens.hash`).
    pub token_hash: String,
    pub created_ms: i64,
    /// The session is not found from this time on.
    pub expires_ms: i64,
}

impl Store {
    /// Stores a session and forgets every session expired by `created_ms`. One transaction.
    pub(crate) async fn create_session(&self, s: &SessionRow) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM sessions WHERE expires_ms <= $1")
            .bind(s.created_ms)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        sqlx::query(
            "INSERT INTO sessions (id_hash, token_hash, created_ms, expires_ms) VALUES ($1, $2, $3, $4)",
        )
        .bind(s.id_hash.as_str())
        .bind(s.token_hash.as_str())
        .bind(s.created_ms)
        .bind(s.expires_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)
    }

    /// The session with this id hash, if it has not expired at `now_ms`.
    pub(crate) async fn session(&self, id_hash: &str, now_ms: i64) -> Result<Option<SessionRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id_hash, token_hash, created_ms, expires_ms FROM sessions
             WHERE id_hash = $1 AND expires_ms > $2",
        )
        .bind(id_hash)
        .bind(now_ms)
        .fetch_optional(&self.read)
        .await
        .map_err(StoreError::db)?;
        row.map(|r| {
            Ok(SessionRow {
                id_hash: text(&r, "id_hash")?,
                token_hash: text(&r, "token_hash")?,
                created_ms: int(&r, "created_ms")?,
                expires_ms: int(&r, "expires_ms")?,
            })
        })
        .transpose()
    }

    /// Ends a session (logout); `false` if there was none.
    pub(crate) async fn delete_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let n = sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?
            .rows_affected();
        tx.commit().await.map_err(StoreError::db)?;
        Ok(n == 1)
    }
}
