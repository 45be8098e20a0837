//! Versioned migrations, applied in order when a store opens; each in its own transaction with
//! the version bump. The only dialect differences are the auto-increment key and integer
//! widths (`BIGINT` everywhere on PostgreSQL so `Any` decodes every integer as `i64`).

use sqlx::Row;

use crate::{Dialect, Store, StoreError};

/// (version, SQLite statements, PostgreSQL statements)
type Migration = (i64, &'static [&'static str], &'static [&'static str]);

const MIGRATIONS: &[Migration] = &[(1, V1_SQLITE, V1_POSTGRES)];

/// The newest schema this weir knows.
pub const SCHEMA_VERSION: i64 = 1;

macro_rules! v1 {
    ($id:literal) => {
        &[
            concat!(
                "CREATE TABLE runs (id ",
                $id,
                ", workflow TEXT NOT NULL, project TEXT NOT NULL, tier BIGINT NOT NULL,
                 logical_date TEXT NOT NULL, active_key TEXT UNIQUE, state TEXT NOT NULL,
                 cluster TEXT NOT NULL, queue TEXT NOT NULL, spec TEXT NOT NULL, params TEXT NOT NULL,
                 submitted_by TEXT NOT NULL, submitted_ms BIGINT NOT NULL, started_ms BIGINT,
                 finished_ms BIGINT, kill_requested BIGINT NOT NULL DEFAULT 0, reason TEXT)"
            ),
            "CREATE INDEX runs_cluster_state ON runs (cluster, state)",
            "CREATE INDEX runs_workflow ON runs (workflow, id)",
            "CREATE INDEX runs_project ON runs (project, id)",
            "CREATE TABLE idempotency (key TEXT PRIMARY KEY, run_id BIGINT NOT NULL, status BIGINT NOT NULL,
             created_ms BIGINT NOT NULL)",
            "CREATE TABLE jobs (run_id BIGINT NOT NULL, idx BIGINT NOT NULL, name TEXT NOT NULL,
             state TEXT NOT NULL, started_ms BIGINT, finished_ms BIGINT, PRIMARY KEY (run_id, idx))",
            "CREATE TABLE tasks (run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL, stage_idx BIGINT NOT NULL,
             task_idx BIGINT NOT NULL, stage TEXT NOT NULL, state TEXT NOT NULL,
             attempts BIGINT NOT NULL DEFAULT 0, node TEXT, started_ms BIGINT, finished_ms BIGINT,
             exit_code BIGINT, PRIMARY KEY (run_id, job_idx, stage_idx, task_idx))",
            "CREATE TABLE attempts (run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL, stage_idx BIGINT NOT NULL,
             task_idx BIGINT NOT NULL, attempt BIGINT NOT NULL, cluster TEXT NOT NULL, state TEXT NOT NULL,
             node TEXT, launched TEXT, stdout TEXT NOT NULL, stderr TEXT NOT NULL,
             started_ms BIGINT NOT NULL, ended_ms BIGINT, exit_code BIGINT, reason TEXT,
             PRIMARY KEY (run_id, job_idx, stage_idx, task_idx, attempt))",
            "CREATE INDEX attempts_open ON attempts (cluster, state)",
            "CREATE TABLE leases (cluster TEXT PRIMARY KEY, owner TEXT NOT NULL, fence BIGINT NOT NULL,
             expires_ms BIGINT NOT NULL)",
            "CREATE TABLE tokens (id TEXT PRIMARY KEY, name TEXT NOT NULL, hash TEXT NOT NULL UNIQUE,
             grants TEXT NOT NULL, created_ms BIGINT NOT NULL, revoked_ms BIGINT)",
            "CREATE TABLE routes (key TEXT PRIMARY KEY, cluster TEXT NOT NULL, queue TEXT NOT NULL,
             updated_ms BIGINT NOT NULL)",
            "CREATE TABLE workflows (name TEXT PRIMARY KEY, spec TEXT NOT NULL, updated_ms BIGINT NOT NULL)",
            "CREATE TABLE clusters (name TEXT PRIMARY KEY, config TEXT NOT NULL, version BIGINT NOT NULL,
             updated_ms BIGINT NOT NULL)",
            "CREATE TABLE snapshots (cluster TEXT PRIMARY KEY, body TEXT NOT NULL, taken_ms BIGINT NOT NULL)",
        ]
    };
}

const V1_SQLITE: &[&str] = v1!("INTEGER PRIMARY KEY AUTOINCREMENT");
const V1_POSTGRES: &[&str] = v1!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

pub(crate) async fn migrate(store: &Store) -> Result<(), StoreError> {
    let mut tx = store.begin().await?;
    if store.dialect == Dialect::Postgres {
        // Two servers starting at once on one database: one migrates, the other waits.
        sqlx::query("SELECT pg_advisory_xact_lock(7301)").execute(&mut *tx).await.map_err(StoreError::db)?;
    }
    sqlx::query("CREATE TABLE IF NOT EXISTS weir_schema (version BIGINT NOT NULL)")
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
    let current: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) AS v FROM weir_schema")
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::db)?
        .try_get::<i64, _>("v")
        .map_err(|e| StoreError::decode("weir_schema.version", e))?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew { found: current, known: SCHEMA_VERSION });
    }
    for &(version, sqlite, postgres) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        let statements = match store.dialect {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        };
        for &statement in statements {
            sqlx::query(statement).execute(&mut *tx).await.map_err(StoreError::db)?;
        }
        sqlx::query("INSERT INTO weir_schema (version) VALUES ($1)")
            .bind(version)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
    }
    tx.commit().await.map_err(StoreError::db)
}
