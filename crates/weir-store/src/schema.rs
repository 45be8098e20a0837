//! Versioned migrations, applied in order when a store opens; each in its own transaction with
//! the version bump. The only dialect differences are the auto-increment key and integer
//! widths (`BIGINT` everywhere on PostgreSQL so `Any` decodes every integer as `i64`).

use sqlx::Row;

use crate::{Dialect, Store, StoreError};

/// (version, SQLite statements, PostgreSQL statements)
type Migration = (i64, &'static [&'static str], &'static [&'static str]);

const MIGRATIONS: &[Migration] = &[
    (1, V1_SQLITE, V1_POSTGRES),
    (2, V2_SQLITE, V2_POSTGRES),
    (3, V3, V3),
    (4, V4, V4),
    (6, V6_SQLITE, V6_POSTGRES),
    (7, V7, V7),
    (11, V11_SQLITE, V11_POSTGRES),
    (12, V12, V12),
    (13, V13_SQLITE, V13_POSTGRES),
    (14, V14, V14),
    (15, V15_SQLITE, V15_POSTGRES),
    (16, V16, V16),
    (17, V17_SQLITE, V17_POSTGRES),
    (18, V18, V18),
    (19, V19_SQLITE, V19_POSTGRES),
    (20, V20, V20),
    (21, V21_SQLITE, V21_POSTGRES),
];

/// The newest schema this weir knows.
pub const SCHEMA_VERSION: i64 = 21;

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

/// History for the dashboard and the plan → apply loop: the SLO a run was submitted with, queue
/// usage intervals (`usage.csv`), preemptions carried out, and plan proposals.
macro_rules! v2 {
    ($id:literal) => {
        &[
            "ALTER TABLE runs ADD COLUMN slo_ms BIGINT",
            "CREATE INDEX runs_submitted ON runs (submitted_ms)",
            "CREATE TABLE queue_usage (cluster TEXT NOT NULL, queue TEXT NOT NULL, start_ms BIGINT NOT NULL,
             end_ms BIGINT NOT NULL, cpu BIGINT NOT NULL, memory BIGINT NOT NULL, running_apps BIGINT NOT NULL,
             PRIMARY KEY (cluster, queue, start_ms))",
            "CREATE INDEX queue_usage_time ON queue_usage (cluster, start_ms)",
            "CREATE TABLE preemptions (cluster TEXT NOT NULL, at_ms BIGINT NOT NULL, run_id BIGINT NOT NULL,
             task TEXT NOT NULL, attempt BIGINT NOT NULL, queue TEXT NOT NULL, for_queue TEXT NOT NULL,
             kind TEXT NOT NULL, reason TEXT NOT NULL)",
            "CREATE INDEX preemptions_time ON preemptions (at_ms)",
            concat!(
                "CREATE TABLE proposals (id ",
                $id,
                ", cluster TEXT NOT NULL, created_ms BIGINT NOT NULL, base_version BIGINT NOT NULL,
                 config TEXT NOT NULL, routes TEXT NOT NULL, summary TEXT NOT NULL, state TEXT NOT NULL,
                 decided_ms BIGINT)"
            ),
        ]
    };
}

const V2_SQLITE: &[&str] = v2!("INTEGER PRIMARY KEY AUTOINCREMENT");
const V2_POSTGRES: &[&str] = v2!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

/// Preemption warnings: an attempt in state `preempting` has its reason in `reason` and the time
/// it will be killed in `kill_at_ms` (kept after it ends).
const V3: &[&str] = &["ALTER TABLE attempts ADD COLUMN kill_at_ms BIGINT"];

/// GPUs in the usage history (the dashboard's utilization charts; `usage.csv` has no gpu
/// column). Rows recorded before it hold 0.
const V4: &[&str] = &["ALTER TABLE queue_usage ADD COLUMN gpu BIGINT NOT NULL DEFAULT 0"];
const V1_POSTGRES: &[&str] = v1!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

/// Tenancy (issue 17): a run's scheduler user and the scopes it can be listed under, the
/// request an idempotency key was first used with, tokens' users, registered workflows and
/// active runs per project, and the audit log.
///
/// - `runs.user_name`: the user the engine's per-user limits count (the token's user, or one
///   it may act as). Older runs keep NULL (they ran as their workflow's `user` field).
/// - `run_scopes`: one row per project scope a run is listed under (its project and every
///   ancestor: `ads`, `ads.ranking`), so a project's listing is an index range, not a scan.
/// - `idempotency.request_hash`: a key reused with another request is refused, not replayed.
/// - `tokens.user_name` / `tokens.act_as`: who the token submits as, and whom else it may name.
/// - `runs.active_key` gains the project: one project's run cannot block another's date.
/// - `workflows` keyed by (project, name); earlier rows keep the spec's own `project` (or '').
macro_rules! v6 {
    ($id:literal, $nl:literal, $workflows:expr) => {
        &[
            "ALTER TABLE runs ADD COLUMN user_name TEXT",
            "CREATE TABLE run_scopes (scope TEXT NOT NULL, run_id BIGINT NOT NULL, PRIMARY KEY (scope, run_id))",
            "INSERT INTO run_scopes (scope, run_id) SELECT project, id FROM runs",
            "ALTER TABLE idempotency ADD COLUMN request_hash TEXT",
            "ALTER TABLE tokens ADD COLUMN user_name TEXT",
            "ALTER TABLE tokens ADD COLUMN act_as TEXT",
            concat!(
                "UPDATE runs SET active_key = project || ",
                $nl,
                " || active_key WHERE active_key IS NOT NULL"
            ),
            $workflows[0],
            $workflows[1],
            $workflows[2],
            $workflows[3],
            concat!(
                "CREATE TABLE audit (id ",
                $id,
                ", at_ms BIGINT NOT NULL, token_id TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
                 project TEXT, client TEXT, outcome TEXT NOT NULL, detail TEXT)"
            ),
            "CREATE INDEX audit_time ON audit (at_ms)",
            "CREATE INDEX runs_project_state ON runs (project, state)",
        ]
    };
}

const V6_SQLITE: &[&str] = v6!(
    "INTEGER PRIMARY KEY AUTOINCREMENT",
    "char(10)",
    [
        "CREATE TABLE workflows_v6 (project TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,
         updated_ms BIGINT NOT NULL, PRIMARY KEY (project, name))",
        "INSERT INTO workflows_v6 (project, name, spec, updated_ms)
         SELECT COALESCE(json_extract(spec, '$.project'), ''), name, spec, updated_ms FROM workflows",
        "DROP TABLE workflows",
        "ALTER TABLE workflows_v6 RENAME TO workflows"
    ]
);
const V6_POSTGRES: &[&str] = v6!(
    "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    "chr(10)",
    [
        "ALTER TABLE workflows ADD COLUMN project TEXT NOT NULL DEFAULT ''",
        "UPDATE workflows SET project = COALESCE(spec::json->>'project', '')",
        "ALTER TABLE workflows DROP CONSTRAINT workflows_pkey",
        "ALTER TABLE workflows ADD PRIMARY KEY (project, name)"
    ]
);

/// Dashboard sessions (issue 17): the browser's cookie carries a random session id, never the
/// token; a row maps the id's SHA-256 to the hash of the token that logged in, until it expires
/// or the visitor logs out. Revoking a token deletes its sessions.
const V7: &[&str] = &[
    "CREATE TABLE sessions (id_hash TEXT PRIMARY KEY, token_hash TEXT NOT NULL, created_ms BIGINT NOT NULL,
     expires_ms BIGINT NOT NULL)",
    "CREATE INDEX sessions_expiry ON sessions (expires_ms)",
    "CREATE INDEX sessions_token ON sessions (token_hash)",
];

/// A submission in one statement (issue 17's benchmark bar): a trigger on `runs` adds the run's
/// own project scope to `run_scopes` and its `submit` row to `audit`, in the same statement as
/// the run — each separate statement was a round trip to the store's connection thread, and the
/// two had made a one-client submission ~30% slower. `runs.client` keeps the peer address the
/// audit row names. The ancestors' scopes of a dotted project (`ads.ranking` → `ads`) are still
/// added by the submitting code; a conflict, a replay or a refusal (no run inserted) is audited
/// by the code as before.
macro_rules! v11_audit {
    () => {
        "INSERT INTO run_scopes (scope, run_id) VALUES (NEW.project, NEW.id);
         INSERT INTO audit (at_ms, token_id, action, target, project, client, outcome, detail)
         VALUES (NEW.submitted_ms, NEW.submitted_by, 'submit', 'run ' || NEW.id, NEW.project, NEW.client,
                 'created', 'workflow ' || NEW.workflow || ' logical date ' || NEW.logical_date || ' as user '
                 || COALESCE(NEW.user_name, '') || ' to ' || NEW.cluster || '/' || NEW.queue);"
    };
}
///
/// Fewer B-tree writes per submission too: `runs_project (project, id)` goes (listings by
/// project read `run_scopes`, and `runs_project_state` serves equality on the project); on
/// SQLite, `run_scopes` becomes a `WITHOUT ROWID` table (its primary key is the table: one
/// B-tree, not a table and an index), and `audit` keys by the plain rowid instead of
/// `AUTOINCREMENT` (which updates `sqlite_sequence` on every insert; audit rows are never
/// deleted, so ids still only grow).
const V11_SQLITE: &[&str] = &[
    "ALTER TABLE runs ADD COLUMN client TEXT",
    "DROP INDEX runs_project",
    "CREATE TABLE run_scopes_v11 (scope TEXT NOT NULL, run_id BIGINT NOT NULL, PRIMARY KEY (scope, run_id))
     WITHOUT ROWID",
    "INSERT INTO run_scopes_v11 (scope, run_id) SELECT scope, run_id FROM run_scopes",
    "DROP TABLE run_scopes",
    "ALTER TABLE run_scopes_v11 RENAME TO run_scopes",
    "CREATE TABLE audit_v11 (id INTEGER PRIMARY KEY, at_ms BIGINT NOT NULL, token_id TEXT NOT NULL,
     action TEXT NOT NULL, target TEXT NOT NULL, project TEXT, client TEXT, outcome TEXT NOT NULL, detail TEXT)",
    "INSERT INTO audit_v11 (id, at_ms, token_id, action, target, project, client, outcome, detail)
     SELECT id, at_ms, token_id, action, target, project, client, outcome, detail FROM audit",
    "DROP TABLE audit",
    "ALTER TABLE audit_v11 RENAME TO audit",
    "CREATE INDEX audit_time ON audit (at_ms)",
    concat!("CREATE TRIGGER runs_submitted AFTER INSERT ON runs BEGIN ", v11_audit!(), " END"),
];
const V11_POSTGRES: &[&str] = &[
    "ALTER TABLE runs ADD COLUMN client TEXT",
    "DROP INDEX runs_project",
    concat!(
        "CREATE OR REPLACE FUNCTION weir_run_submitted() RETURNS trigger LANGUAGE plpgsql AS $weir$ BEGIN ",
        v11_audit!(),
        " RETURN NULL; END $weir$"
    ),
    "CREATE TRIGGER runs_submitted AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION weir_run_submitted()",
];

/// Every version of every cluster's configuration: who made it, when, from what (a plan, a
/// proposal, a rollback, an edit), the diff from the version before, the file and the routes
/// to the cluster after it. The versions in force before this table existed are kept as they
/// are, without their routes.
const V12: &[&str] = &[
    "CREATE TABLE config_versions (cluster TEXT NOT NULL, version BIGINT NOT NULL, at_ms BIGINT NOT NULL,
     actor TEXT NOT NULL, source TEXT NOT NULL, config TEXT NOT NULL, routes TEXT, diff TEXT NOT NULL,
     PRIMARY KEY (cluster, version))",
    "INSERT INTO config_versions (cluster, version, at_ms, actor, source, config, routes, diff)
     SELECT name, version, updated_ms, 'weir', 'in force when the history began', config, NULL, '[]'
     FROM clusters",
];

/// Waiting spells (issue 26): why each job of a run waited, and for how long.
macro_rules! v13 {
    ($id:literal) => {
        &[
            concat!(
                "CREATE TABLE job_waits (id ",
                $id,
                ", run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL, from_ms BIGINT NOT NULL, to_ms BIGINT,
                 reason TEXT NOT NULL, queue TEXT NOT NULL, limit_text TEXT NOT NULL, detail TEXT NOT NULL)"
            ),
            "CREATE INDEX job_waits_run ON job_waits (run_id, job_idx, from_ms)",
        ]
    };
}
const V13_SQLITE: &[&str] = v13!("INTEGER PRIMARY KEY AUTOINCREMENT");
const V13_POSTGRES: &[&str] = v13!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

/// Job commits of stages with outputs (issue 24): the committer's resumable state per run and
/// stage, so that a job commit interrupted by a crash is finished or aborted after restart.
const V14: &[&str] =
    &["CREATE TABLE job_commits (run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL, stage_idx BIGINT NOT NULL,
     output TEXT NOT NULL, phase TEXT NOT NULL, state TEXT NOT NULL, reason TEXT, updated_ms BIGINT NOT NULL,
     PRIMARY KEY (run_id, job_idx, stage_idx))"];

/// Dry-runs and the migration table (issue 24): a run may be a dry-run (its outputs go to
/// shadow prefixes); each dry-run's verdict, the cluster it ran on and its approval.
macro_rules! v15 {
    ($id:literal) => {
        &[
            "ALTER TABLE runs ADD COLUMN dry_run BIGINT NOT NULL DEFAULT 0",
            concat!(
                "CREATE TABLE dry_run_verdicts (id ",
                $id,
                ", run_id BIGINT NOT NULL UNIQUE, workflow TEXT NOT NULL, project TEXT NOT NULL,
                 logical_date TEXT NOT NULL, cluster TEXT NOT NULL, queue TEXT NOT NULL, production_run TEXT,
                 verdict TEXT NOT NULL, differences TEXT NOT NULL, at_ms BIGINT NOT NULL, approved_by TEXT,
                 approved_ms BIGINT)"
            ),
            "CREATE INDEX dry_run_verdicts_workflow ON dry_run_verdicts (workflow, cluster, id)",
        ]
    };
}
const V15_SQLITE: &[&str] = v15!("INTEGER PRIMARY KEY AUTOINCREMENT");
const V15_POSTGRES: &[&str] = v15!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

/// Load-aware routing (issue 25): how a run submitted through a route with a policy was
/// placed — the route's key, its policy, the reason and the figures behind it. Runs routed
/// otherwise (and every run from before) have none.
const V16: &[&str] = &[
    "ALTER TABLE runs ADD COLUMN route_key TEXT",
    "ALTER TABLE runs ADD COLUMN route_policy TEXT",
    "ALTER TABLE runs ADD COLUMN route_reason TEXT",
    "ALTER TABLE runs ADD COLUMN route_detail TEXT",
];

/// Several outputs per stage (issue 24): a job commit row per output of a stage, numbered in
/// the order the stage declares them; the rows from before are each stage's output 0. (The
/// table is rebuilt: SQLite cannot change a primary key in place.)
const V18: &[&str] = &[
    "CREATE TABLE job_commits_v18 (run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL, stage_idx BIGINT NOT NULL,
     output_idx BIGINT NOT NULL DEFAULT 0, output TEXT NOT NULL, phase TEXT NOT NULL, state TEXT NOT NULL,
     reason TEXT, updated_ms BIGINT NOT NULL, PRIMARY KEY (run_id, job_idx, stage_idx, output_idx))",
    "INSERT INTO job_commits_v18 (run_id, job_idx, stage_idx, output_idx, output, phase, state, reason, updated_ms)
     SELECT run_id, job_idx, stage_idx, 0, output, phase, state, reason, updated_ms FROM job_commits",
    "DROP TABLE job_commits",
    "ALTER TABLE job_commits_v18 RENAME TO job_commits",
];

/// The balancing advisor's results (issue 25): each advice the server made, as JSON.
macro_rules! v19 {
    ($id:literal) => {
        &[concat!(
            "CREATE TABLE advice (id ",
            $id,
            ", created_ms BIGINT NOT NULL, window_ms BIGINT NOT NULL, trigger_by TEXT NOT NULL, body TEXT NOT NULL)"
        )]
    };
}
const V19_SQLITE: &[&str] = v19!("INTEGER PRIMARY KEY AUTOINCREMENT");
const V19_POSTGRES: &[&str] = v19!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

/// Deadline guarantees (issue 23): the SLO controller's decisions for runs of workflows with
/// `guarantee: jockey` — every allocation it chose, with the progress and prediction behind it.
macro_rules! v17 {
    ($id:literal) => {
        &[
            concat!(
                "CREATE TABLE slo_decisions (id ",
                $id,
                ", run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL, at_ms BIGINT NOT NULL, elapsed_ms BIGINT NOT NULL,
                 progress_ppm BIGINT NOT NULL, speed_ppm BIGINT NOT NULL, allocation BIGINT NOT NULL,
                 target BIGINT NOT NULL, predicted_ms BIGINT NOT NULL, deadline_ms BIGINT NOT NULL, reason TEXT NOT NULL)"
            ),
            "CREATE INDEX slo_decisions_run ON slo_decisions (run_id, job_idx, at_ms)",
        ]
    };
}
const V17_SQLITE: &[&str] = v17!("INTEGER PRIMARY KEY AUTOINCREMENT");
const V17_POSTGRES: &[&str] = v17!("BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY");

/// Deadline guarantees across restarts (issue 23): the model a guarded run's controller was
/// built from (weir-slo's versioned profile, JSON), kept for the run's life so that a
/// restarted or moved worker steps the same model, not one rebuilt from a history that has
/// moved on since.
const V20: &[&str] = &["CREATE TABLE slo_models (run_id BIGINT NOT NULL, job_idx BIGINT NOT NULL,
     built_ms BIGINT NOT NULL, profile TEXT NOT NULL, PRIMARY KEY (run_id, job_idx))"];

/// One B-tree fewer per submission on SQLite: `audit_time` goes. SQLite's planner never used
/// it: the audit listing's filters are `($n IS NULL OR column = $n)` terms, which cannot drive
/// an index, and it reads newest first by id (`EXPLAIN QUERY PLAN`: `SCAN audit`, with or
/// without the index, `since` given or not), so the listing's plan and answers are the same
/// without it — while every submission's commit wrote one more page to the WAL for it.
/// PostgreSQL keeps it: its per-execution plans turn a given `since` into an index range.
const V21_SQLITE: &[&str] = &["DROP INDEX IF EXISTS audit_time"];
const V21_POSTGRES: &[&str] = &[];

pub(crate) async fn migrate(store: &Store) -> Result<(), StoreError> {
    migrate_to(store, SCHEMA_VERSION).await
}

/// Applies the migrations up to `target` (tests stop at an older schema to check upgrades).
pub(crate) async fn migrate_to(store: &Store, target: i64) -> Result<(), StoreError> {
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
    // Every listed migration not recorded yet, not only those above the newest recorded: a
    // store that went through a build with migration N+1 but not N (two lines of work that
    // each added one, merged apart) still gets N.
    let applied: std::collections::BTreeSet<i64> = sqlx::query("SELECT version FROM weir_schema")
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::db)?
        .iter()
        .map(|r| r.try_get::<i64, _>("version"))
        .collect::<Result<_, _>>()
        .map_err(|e| StoreError::decode("weir_schema.version", e))?;
    for &(version, sqlite, postgres) in MIGRATIONS.iter().filter(|m| !applied.contains(&m.0) && m.0 <= target)
    {
        let statements = match store.dialect {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        };
        for &statement in statements {
            sqlx::query(statement).execute(&mut *tx).await.map_err(StoreError::db)?;
        }
        if version == 6 {
            // SQL alone gave each run its own project's scope; the ancestors come from here.
            let rows = sqlx::query("SELECT id, project FROM runs WHERE project LIKE '%.%'")
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::db)?;
            for r in &rows {
                let (id, project) = (crate::int(r, "id")?, crate::text(r, "project")?);
                for scope in crate::runs::scopes(&project).into_iter().filter(|s| *s != project) {
                    sqlx::query(
                        "INSERT INTO run_scopes (scope, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    )
                    .bind(scope)
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::db)?;
                }
            }
        }
        sqlx::query("INSERT INTO weir_schema (version) VALUES ($1)")
            .bind(version)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
    }
    tx.commit().await.map_err(StoreError::db)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty SQLite store in a fresh folder named `name` (the folder, to remove at the end).
    async fn empty_store(name: &str) -> (std::path::PathBuf, Store) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let url = format!("sqlite://{}/weir.db?mode=rwc", dir.display());
        sqlx::any::install_default_drivers();
        let pool = crate::sqlite_pool(&url, 1).await.expect("pool");
        (dir, Store { dialect: Dialect::Sqlite, read: pool.clone(), write: pool })
    }

    /// A store of schema 4 with a run of a sub-project still active, an ended run and a
    /// workflow registered by name only, upgraded to the newest schema: the active run keeps
    /// its uniqueness under its project, both runs are listed under every scope of their
    /// project, and the workflow keeps the project its JSON names.
    #[tokio::test]
    async fn an_older_store_upgrades_with_its_runs_and_workflows() {
        let (dir, store) = empty_store("weir-schema").await;
        migrate_to(&store, 4).await.expect("schema 4");
        for (project, key, state) in
            [("ads.ranking", Some("nightly\nd1"), "running"), ("search", None, "succeeded")]
        {
            sqlx::query(
                "INSERT INTO runs (workflow, project, tier, logical_date, active_key, state, cluster, queue, spec,
                 params, submitted_by, submitted_ms) VALUES ('nightly', $1, 1, 'd1', $2, $3, 'c', 'q', '{}', '{}', 't', 0)",
            )
            .bind(project)
            .bind(key)
            .bind(state)
            .execute(&store.write)
            .await
            .expect("old run");
        }
        sqlx::query(
            "INSERT INTO workflows (name, spec, updated_ms) VALUES ('nightly', '{\"project\": \"ads\"}', 0)",
        )
        .execute(&store.write)
        .await
        .expect("old workflow");
        migrate(&store).await.expect("upgrade");
        // Runs from before dry-runs existed (schema 15) are production runs.
        let runs =
            store.list_runs(&crate::RunFilter { limit: 10, ..Default::default() }).await.expect("runs");
        assert_eq!(runs.iter().map(|r| r.dry_run).collect::<Vec<_>>(), [false, false]);
        let key: String = sqlx::query("SELECT active_key FROM runs WHERE project = 'ads.ranking'")
            .fetch_one(&store.read)
            .await
            .and_then(|r| r.try_get("active_key"))
            .expect("key");
        assert_eq!(key, "ads.ranking\nnightly\nd1");
        let mut scopes: Vec<String> = sqlx::query("SELECT scope FROM run_scopes ORDER BY scope")
            .fetch_all(&store.read)
            .await
            .expect("scopes")
            .iter()
            .map(|r| r.try_get::<String, _>("scope").unwrap_or_default())
            .collect();
        scopes.sort();
        assert_eq!(scopes, ["ads", "ads.ranking", "search"]);
        assert_eq!(
            store.workflows_named("nightly").await.expect("workflows"),
            vec![("ads".to_string(), "{\"project\": \"ads\"}".to_string())]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store that went through a build with the newest migration but not the one before it
    /// (two lines of work, each adding one, merged apart) still gets the one it missed.
    #[tokio::test]
    async fn a_migration_skipped_by_an_out_of_order_build_is_applied_later() {
        let (dir, store) = empty_store("weir-schema-gap").await;
        // Migration 19 missed, 20 applied (later ones, not applied yet, come with the upgrade).
        let at = |v: i64| MIGRATIONS.iter().find(|m| m.0 == v).expect("a listed migration");
        let (missed, newest) = (at(19), at(20));
        migrate_to(&store, missed.0 - 1).await.expect("before the missed one");
        for statement in newest.1 {
            sqlx::query(*statement).execute(&store.write).await.expect("the newest migration");
        }
        sqlx::query("INSERT INTO weir_schema (version) VALUES ($1)")
            .bind(newest.0)
            .execute(&store.write)
            .await
            .expect("recorded");
        assert!(sqlx::query("SELECT body FROM advice").execute(&store.read).await.is_err());
        migrate(&store).await.expect("upgrade");
        let versions: Vec<i64> = sqlx::query("SELECT version FROM weir_schema ORDER BY version")
            .fetch_all(&store.read)
            .await
            .expect("versions")
            .iter()
            .map(|r| r.try_get("version").expect("version"))
            .collect();
        assert_eq!(versions, MIGRATIONS.iter().map(|m| m.0).collect::<Vec<_>>());
        sqlx::query("SELECT body FROM advice").execute(&store.read).await.expect("19 applied");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store of schema 6 (tokens, no sessions) upgrades to the newest: its tokens stay and
    /// dashboard sessions can be stored and found.
    #[tokio::test]
    async fn a_schema_6_store_gains_dashboard_sessions() {
        let (dir, store) = empty_store("weir-schema7").await;
        migrate_to(&store, 6).await.expect("schema 6");
        assert!(sqlx::query("SELECT 1 FROM sessions").execute(&store.read).await.is_err());
        sqlx::query(
            "INSERT INTO tokens (id, name, hash, grants, created_ms, user_name, act_as)
             VALUES ('admin', 'admin', 'h', '[]', 0, 'admin', '[]')",
        )
        .execute(&store.write)
        .await
        .expect("old token");
        migrate(&store).await.expect("upgrade");
        let v: i64 = sqlx::query("SELECT MAX(version) AS v FROM weir_schema")
            .fetch_one(&store.read)
            .await
            .and_then(|r| r.try_get("v"))
            .expect("version");
        assert_eq!(v, SCHEMA_VERSION);
        assert!(store.token_by_hash("h").await.expect("token").is_some());
        let s =
            crate::SessionRow { id_hash: "s".into(), token_hash: "h".into(), created_ms: 1, expires_ms: 10 };
        store.create_session(&s).await.expect("session");
        assert_eq!(store.session("s", 5).await.expect("read"), Some(s));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store of schema 11 upgrades with its clusters' configurations as the first entries of
    /// their history (who and what made them is not known: said so); new versions follow.
    #[tokio::test]
    async fn a_schema_11_store_starts_its_configuration_history_with_what_is_in_force() {
        let (dir, store) = empty_store("weir-schema12").await;
        migrate_to(&store, 11).await.expect("schema 11");
        sqlx::query("INSERT INTO clusters (name, config, version, updated_ms) VALUES ('c', 'version: 1 # four', 4, 77)")
            .execute(&store.write)
            .await
            .expect("old cluster");
        migrate(&store).await.expect("upgrade");
        let history = store.config_versions("c", 10).await.expect("history");
        assert_eq!(history.len(), 1);
        let v = &history[0];
        assert_eq!(
            (v.version, v.at_ms, v.actor.as_str(), v.source.as_str(), v.config.as_str(), v.routes.as_deref()),
            (4, 77, "weir", "in force when the history began", "version: 1 # four", None)
        );
        let change =
            crate::ConfigChange { actor: "t".into(), source: "edit".into(), diff: "{}".into(), routes: None };
        assert_eq!(store.put_cluster("c", "version: 1 # five", &change, 80).await.expect("put"), 5);
        let versions: Vec<i64> =
            store.config_versions("c", 10).await.expect("history").iter().map(|v| v.version).collect();
        assert_eq!(versions, [5, 4]);
        assert_eq!(store.recording_since("c").await.expect("since"), Some(77));
        assert_eq!(store.recording_since("nope").await.expect("since"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A job commit row from before migration 18 becomes output 0 of its stage, and a second
    /// output of the same stage gets a row of its own.
    #[tokio::test]
    async fn a_schema_16_job_commit_becomes_output_0_of_its_stage() {
        let (dir, store) = empty_store("weir-schema18").await;
        migrate_to(&store, 16).await.expect("schema 16");
        sqlx::query(
            "INSERT INTO job_commits (run_id, job_idx, stage_idx, output, phase, state, reason, updated_ms)
             VALUES (7, 0, 1, 's3://lake/t/', 'prepared', '{}', NULL, 5)",
        )
        .execute(&store.write)
        .await
        .expect("old row");
        migrate(&store).await.expect("upgrade");
        let rows = store.job_commits(7).await.expect("rows");
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].stage_idx, rows[0].output_idx, rows[0].phase.as_str()), (1, 0, "prepared"));
        let fence = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        let second = crate::JobCommitRow { output_idx: 1, output: "s3://audit/u/".into(), ..rows[0].clone() };
        store.put_job_commit(&fence, &second).await.expect("second output");
        assert_eq!(store.job_commits(7).await.expect("rows"), vec![rows[0].clone(), second]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
