//! weir-store: the job store of `weir serve` — runs, jobs, tasks, task attempts, cluster
//! leases, tokens, dashboard sessions, routes, registered workflows, cluster configurations and
//! queue snapshots —
//! in SQLite (one file, WAL, the default) or PostgreSQL, through one code path (sqlx `Any` with
//! a small [`Dialect`] switch).
//!
//! It is the only crate with SQL, and it holds no scheduling policy: it stores what the server
//! decided. Everything is integers (milliseconds since the Unix epoch) and text, which both
//! databases and `Any` agree on. Versioned migrations are applied when a [`Store`] opens.
//!
//! The server knows only the [`JobStore`] trait (object-safe: it holds an `Arc<dyn JobStore>`);
//! the binary opens a [`Store`] and hands it over ([`open`] does both). The trait's
//! documentation states, method by method, what each guarantees. The two that carry the
//! service's guarantees:
//! - [`JobStore::submit`] commits a whole batch of submissions in one transaction (group
//!   commit): either every run of the batch is stored, with its idempotency record, or none is.
//! - [`JobStore::apply`] commits a worker's batch of state changes in one transaction that
//!   first checks (and renews) the worker's lease on the cluster by its fencing number: a worker
//!   that lost its lease writes nothing. State changes in it are compare-and-set: a change whose
//!   precondition no longer holds is skipped and reported as not applied, never forced.
//!
//! There is no in-memory implementation: tests run against real SQLite files and a real
//! PostgreSQL, where the failures are real.

mod advice;
mod audit;
mod auth;
mod batch;
mod commits;
mod dry_runs;
mod error;
mod history;
mod job_store;
mod runs;
mod schema;
mod sessions;
mod slo_decisions;
mod waits;
mod warning;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor, Row};

pub use advice::AdviceRow;
pub use audit::{AuditEntry, AuditFilter, AuditRow};
pub use auth::{ClusterRow, RouteRow, SnapshotRow, TokenRow};
pub use commits::JobCommitRow;
pub use dry_runs::{Approval, DryRunVerdictRow, MigrationApproval};
pub use error::StoreError;
pub use history::{
    AttemptDuration, AttemptSpan, ConfigChange, ConfigVersionRow, PlanApplied, PreemptionRow, ProposalRow,
    RunCount, RunRecordRow, UsageRow,
};
pub use job_store::{BoxFuture, JobStore};
pub use runs::{
    AttemptRow, JobRow, KillOutcome, NewRun, RunFilter, RunRoute, RunRow, Submitted, TaskCount, TaskRow,
    TERMINAL_RUN_STATES,
};
pub use sessions::SessionRow;
pub use slo_decisions::{MeasuredAttempt, SloDecisionRow, SloModelRow};
pub use waits::{RunWaitRow, WaitRow};
pub use worker::{ActiveRun, AttemptKey, Change, Fence, Lease, NewJob, NewTask, TaskKey, Warning};

/// Which SQL the store speaks where the two databases differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// Opens the store at `url` (see [`Store::open`]) as the trait object the server takes.
pub async fn open(url: &str) -> Result<Arc<dyn JobStore>, StoreError> {
    Ok(Arc::new(Store::open(url).await?))
}

/// An open store: a pool of connections and the dialect. It implements [`JobStore`].
///
/// On SQLite, writes go through a single connection (SQLite has one writer; in-process
/// queuing beats lock retries), reads through a small pool.
#[derive(Clone, Debug)]
pub struct Store {
    dialect: Dialect,
    read: AnyPool,
    write: AnyPool,
}

impl Store {
    /// Open (and create, for SQLite) the store at `url` — `sqlite:///path/to/weir.db` or
    /// `postgres://user@host:port/db` — and bring its schema up to date.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Dialect::Postgres
        } else {
            return Err(StoreError::Url { url: url.to_string() });
        };
        let store = match dialect {
            Dialect::Sqlite => {
                let url = if url.contains('?') { url.to_string() } else { format!("{url}?mode=rwc") };
                let write = sqlite_pool(&url, 1).await?;
                // The first connection turns WAL on (it sticks to the file) before readers open.
                let read = sqlite_pool(&url, 4).await?;
                Store { dialect, read, write }
            }
            Dialect::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(16)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect(url)
                    .await
                    .map_err(StoreError::connect)?;
                Store { dialect, read: pool.clone(), write: pool }
            }
        };
        schema::migrate(&store).await?;
        Ok(store)
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The store answers a trivial query (for `/readyz`).
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.read).await.map_err(StoreError::db)?;
        Ok(())
    }

    /// Begin a write transaction. On SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`), so a transaction never fails half-way for want of it.
    async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        match self.dialect {
            Dialect::Sqlite => self.write.begin_with("BEGIN IMMEDIATE").await.map_err(StoreError::db),
            Dialect::Postgres => self.write.begin().await.map_err(StoreError::db),
        }
    }

    /// Close every connection: every later call fails as unavailable (tests of the 503 path).
    pub async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }
}

pub(crate) async fn sqlite_pool(url: &str, size: u32) -> Result<AnyPool, StoreError> {
    AnyPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                // synchronous=FULL: a commit is on disk before it is acknowledged (durable
                // acknowledgement), at one fsync per transaction — hence group commit.
                // temp_store=MEMORY: a multi-row statement's statement journal and its
                // `RETURNING` rows stay in memory; on files, most submission batches spilled
                // them to a temporary file (an open, writes and an unlink per batch: most of
                // the system time submissions still cost; BENCHMARKS.md). Nothing durable is
                // kept there.
                for pragma in [
                    "PRAGMA journal_mode=WAL",
                    "PRAGMA synchronous=FULL",
                    "PRAGMA busy_timeout=10000",
                    "PRAGMA temp_store=MEMORY",
                ] {
                    conn.execute(pragma).await?;
                }
                Ok(())
            })
        })
        .connect(url)
        .await
        .map_err(StoreError::connect)
}

/// Column readers that turn a decoding problem into a [`StoreError`] naming the column.
pub(crate) fn int(row: &AnyRow, col: &'static str) -> Result<i64, StoreError> {
    row.try_get::<i64, _>(col).map_err(|e| StoreError::decode(col, e))
}

pub(crate) fn opt_int(row: &AnyRow, col: &'static str) -> Result<Option<i64>, StoreError> {
    row.try_get::<Option<i64>, _>(col).map_err(|e| StoreError::decode(col, e))
}

pub(crate) fn text(row: &AnyRow, col: &'static str) -> Result<String, StoreError> {
    row.try_get::<String, _>(col).map_err(|e| StoreError::decode(col, e))
}

pub(crate) fn opt_text(row: &AnyRow, col: &'static str) -> Result<Option<String>, StoreError> {
    row.try_get::<Option<String>, _>(col).map_err(|e| StoreError::decode(col, e))
}

/// Create a fresh PostgreSQL database next to the one `url` names and return its URL (tests
/// give each server its own database on one throwaway PostgreSQL).
pub async fn create_postgres_database(url: &str, name: &str) -> Result<String, StoreError> {
    sqlx::any::install_default_drivers();
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err(StoreError::Url { url: format!("{url} (database name `{name}`)") });
    }
    let pool = AnyPoolOptions::new().max_connections(1).connect(url).await.map_err(StoreError::connect)?;
    let statement = format!("CREATE DATABASE {name}");
    pool.execute(sqlx::AssertSqlSafe(statement)).await.map_err(StoreError::db)?;
    pool.close().await;
    let base = match url.rfind('/') {
        Some(i) if url[..i].ends_with(|c: char| c != '/') => &url[..i],
        _ => url,
    };
    Ok(format!("{base}/{name}"))
}
