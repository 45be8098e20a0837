//! Tokens (stored as hashes), routes, registered workflows, cluster configurations and the
//! queue snapshots workers publish.

use crate::{int, opt_int, opt_text, text, Store, StoreError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRow {
    pub id: String,
    pub name: String,
    /// Hex SHA-256 of the secret.
    pub hash: String,
    /// JSON list of grants.
    pub grants: String,
    pub created_ms: i64,
    pub revoked_ms: Option<i64>,
    /// The scheduler user its submissions run as (`None`: tokens made before users were
    /// recorded; the service uses the token's id).
    pub user: Option<String>,
    /// JSON list of other users its submissions may name (`[]`: none).
    pub act_as: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteRow {
    pub key: String,
    pub cluster: String,
    pub queue: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterRow {
    pub name: String,
    /// The cluster file (YAML).
    pub config: String,
    /// Moves on with every change, so an owner sees that it must reload.
    pub version: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRow {
    pub cluster: String,
    pub body: String,
    pub taken_ms: i64,
}

fn token_row(r: &sqlx::any::AnyRow) -> Result<TokenRow, StoreError> {
    Ok(TokenRow {
        id: text(r, "id")?,
        name: text(r, "name")?,
        hash: text(r, "hash")?,
        grants: text(r, "grants")?,
        created_ms: int(r, "created_ms")?,
        revoked_ms: opt_int(r, "revoked_ms")?,
        user: opt_text(r, "user_name")?,
        act_as: opt_text(r, "act_as")?.unwrap_or_else(|| "[]".to_string()),
    })
}

impl Store {
    pub(crate) async fn create_token(&self, token: &TokenRow) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO tokens (id, name, hash, grants, created_ms, user_name, act_as)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(token.id.as_str())
        .bind(token.name.as_str())
        .bind(token.hash.as_str())
        .bind(token.grants.as_str())
        .bind(token.created_ms)
        .bind(token.user.as_deref())
        .bind(token.act_as.as_str())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)
    }

    /// The token with this hash, revoked or not.
    pub(crate) async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRow>, StoreError> {
        const Q: &str =
            "SELECT id, name, hash, grants, created_ms, revoked_ms, user_name, act_as FROM tokens WHERE hash = $1";
        let row = sqlx::query(Q).bind(hash).fetch_optional(&self.read).await.map_err(StoreError::db)?;
        row.as_ref().map(token_row).transpose()
    }

    pub(crate) async fn tokens(&self) -> Result<Vec<TokenRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, name, hash, grants, created_ms, revoked_ms, user_name, act_as FROM tokens
             ORDER BY created_ms, id",
        )
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(token_row).collect()
    }

    /// Revoke a token; `false` if there is no live token with this id.
    pub(crate) async fn revoke_token(&self, id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let n = sqlx::query("UPDATE tokens SET revoked_ms = $2 WHERE id = $1 AND revoked_ms IS NULL")
            .bind(id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?
            .rows_affected();
        // Its dashboard sessions end with it (they would find no live token anyway).
        sqlx::query("DELETE FROM sessions WHERE token_hash IN (SELECT hash FROM tokens WHERE id = $1)")
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(n == 1)
    }

    pub(crate) async fn routes(&self) -> Result<Vec<RouteRow>, StoreError> {
        let rows = sqlx::query("SELECT key, cluster, queue FROM routes ORDER BY key")
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(RouteRow { key: text(r, "key")?, cluster: text(r, "cluster")?, queue: text(r, "queue")? })
            })
            .collect()
    }

    pub(crate) async fn put_route(&self, route: &RouteRow, now_ms: i64) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        upsert_route(&mut tx, route, now_ms).await?;
        tx.commit().await.map_err(StoreError::db)
    }

    pub(crate) async fn delete_route(&self, key: &str) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let n = sqlx::query("DELETE FROM routes WHERE key = $1")
            .bind(key)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?
            .rows_affected();
        tx.commit().await.map_err(StoreError::db)?;
        Ok(n == 1)
    }

    pub(crate) async fn put_workflow(
        &self,
        project: &str,
        name: &str,
        spec: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO workflows (project, name, spec, updated_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (project, name) DO UPDATE SET spec = excluded.spec, updated_ms = excluded.updated_ms",
        )
        .bind(project)
        .bind(name)
        .bind(spec)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)
    }

    pub(crate) async fn workflows_named(&self, name: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query("SELECT project, spec FROM workflows WHERE name = $1 ORDER BY project")
            .bind(name)
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
        rows.iter().map(|r| Ok((text(r, "project")?, text(r, "spec")?))).collect()
    }

    /// Store a cluster's configuration; the version moves on only if the text changed.
    pub(crate) async fn put_cluster(
        &self,
        name: &str,
        config: &str,
        change: &crate::ConfigChange,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let mut tx = self.begin().await?;
        let before = sqlx::query("SELECT version FROM clusters WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::db)?
            .map(|r| int(&r, "version"))
            .transpose()?;
        sqlx::query(
            "INSERT INTO clusters (name, config, version, updated_ms) VALUES ($1, $2, 1, $3)
             ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_ms = excluded.updated_ms,
             version = CASE WHEN clusters.config = excluded.config THEN clusters.version
                       ELSE clusters.version + 1 END",
        )
        .bind(name)
        .bind(config)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let v = sqlx::query("SELECT version FROM clusters WHERE name = $1")
            .bind(name)
            .fetch_one(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        let version = int(&v, "version")?;
        if before != Some(version) {
            crate::history::record_version(&mut tx, name, version, config, change, now_ms).await?;
        }
        tx.commit().await.map_err(StoreError::db)?;
        Ok(version)
    }

    pub(crate) async fn clusters(&self) -> Result<Vec<ClusterRow>, StoreError> {
        let rows = sqlx::query("SELECT name, config, version FROM clusters ORDER BY name")
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(ClusterRow {
                    name: text(r, "name")?,
                    config: text(r, "config")?,
                    version: int(r, "version")?,
                })
            })
            .collect()
    }

    pub(crate) async fn cluster(&self, name: &str) -> Result<Option<ClusterRow>, StoreError> {
        let row = sqlx::query("SELECT name, config, version FROM clusters WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.read)
            .await
            .map_err(StoreError::db)?;
        row.map(|r| {
            Ok(ClusterRow {
                name: text(&r, "name")?,
                config: text(&r, "config")?,
                version: int(&r, "version")?,
            })
        })
        .transpose()
    }

    pub(crate) async fn snapshots(&self) -> Result<Vec<SnapshotRow>, StoreError> {
        let rows = sqlx::query("SELECT cluster, body, taken_ms FROM snapshots ORDER BY cluster")
            .fetch_all(&self.read)
            .await
            .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(SnapshotRow {
                    cluster: text(r, "cluster")?,
                    body: text(r, "body")?,
                    taken_ms: int(r, "taken_ms")?,
                })
            })
            .collect()
    }
}

/// Insert `route`, or replace the route with its key, inside the caller's transaction (a single
/// route's `put_route`, or a plan's routes applied with its configuration).
pub(crate) async fn upsert_route(
    tx: &mut crate::worker::Tx,
    route: &RouteRow,
    now_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO routes (key, cluster, queue, updated_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO UPDATE SET cluster = excluded.cluster, queue = excluded.queue,
         updated_ms = excluded.updated_ms",
    )
    .bind(route.key.as_str())
    .bind(route.cluster.as_str())
    .bind(route.queue.as_str())
    .bind(now_ms)
    .execute(&mut **tx)
    .await
    .map_err(StoreError::db)?;
    Ok(())
}
