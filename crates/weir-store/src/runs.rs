//! Runs as the service layer sees them: group-committed submission with uniqueness and
//! idempotency, reads, listing with cursor paging, and kill requests.

use std::collections::HashMap;
use std::sync::OnceLock;

use sqlx::any::AnyRow;

use crate::{int, opt_int, opt_text, text, Dialect, Store, StoreError};

/// The run states after which nothing changes.
pub const TERMINAL_RUN_STATES: [&str; 3] = ["succeeded", "failed", "killed"];

/// A run to store, validated and routed by the service layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRun {
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub logical_date: String,
    pub cluster: String,
    pub queue: String,
    /// The workflow, JSON in the workload-file schema.
    pub spec: String,
    /// JSON object of parameters.
    pub params: String,
    /// Token id of the submitter.
    pub submitted_by: String,
    /// The scheduler user: the token's user or one it may act as.
    pub user: String,
    /// Where the request came from (the peer address), for the audit log.
    pub client: Option<String>,
    pub submitted_ms: i64,
    /// The workflow's runtime SLO, for the SLO reports.
    pub slo_ms: Option<i64>,
    /// `token id + ":" + Idempotency-Key`, if the request had one.
    pub idempotency_key: Option<String>,
    /// A digest of the request the key came with: the same key with another request is
    /// [`Submitted::KeyReused`], not a replay.
    pub request_hash: String,
    /// Records older than this (ms) are expired and do not replay.
    pub idempotency_after_ms: i64,
    /// A dry-run: its outputs go to shadow prefixes, it is compared with production when it
    /// ends, and it never blocks (nor is blocked by) a production run of the same date.
    pub dry_run: bool,
    /// How a route with a policy placed it (`None`: a one-target route or the default).
    pub route: Option<RunRoute>,
}

/// How a route with a policy placed a run, at submission (it never moves after).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRoute {
    /// The route's key: `workflow:NAME` or `project:PROJECT:TIER`.
    pub key: String,
    /// `first`, `least_loaded` or `spill`.
    pub policy: String,
    /// A short word: `first`, `least_loaded`, `within_threshold`, `spilled`, …
    pub reason: String,
    /// Each candidate's figures, for people.
    pub detail: String,
}

/// What became of one submission of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submitted {
    Created {
        id: i64,
    },
    /// An active run already holds the (workflow, logical date).
    Conflict {
        existing: i64,
    },
    /// The idempotency key was seen: replay the first answer (its status and run).
    Replay {
        status: u16,
        run: i64,
    },
    /// The idempotency key was first used with a different request: nothing was stored.
    KeyReused,
}

/// A stored run, without its jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    pub id: i64,
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub logical_date: String,
    pub state: String,
    pub cluster: String,
    pub queue: String,
    pub spec: String,
    pub params: String,
    pub submitted_by: String,
    /// The scheduler user it was submitted as (`None` for runs stored before users were
    /// recorded: they ran as their workflow's `user`).
    pub user: Option<String>,
    pub submitted_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub kill_requested: bool,
    pub reason: Option<String>,
    /// A dry-run (`weir submit --dry-run`): its outputs went to shadow prefixes.
    pub dry_run: bool,
    /// How a route with a policy placed it.
    pub route: Option<RunRoute>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRow {
    pub run_id: i64,
    pub idx: u32,
    pub name: String,
    pub state: String,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub run_id: i64,
    pub job_idx: u32,
    pub stage_idx: u32,
    pub task_idx: u32,
    pub stage: String,
    pub state: String,
    pub attempts: u32,
    pub node: Option<String>,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub exit_code: Option<i32>,
}

/// How many of a run's tasks of one stage are in one state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskCount {
    pub job_idx: u32,
    pub stage_idx: u32,
    pub stage: String,
    pub state: String,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptRow {
    pub run_id: i64,
    pub job_idx: u32,
    pub stage_idx: u32,
    pub task_idx: u32,
    pub attempt: u32,
    pub cluster: String,
    /// `starting` (intent recorded, process maybe not started), `running`, `preempting` (warned:
    /// it will be killed at `kill_at_ms`, `reason` says why), `succeeded`, `failed`, `killed`,
    /// `lost`.
    pub state: String,
    pub node: Option<String>,
    /// The backend's record of the started process (JSON), once known.
    pub launched: Option<String>,
    pub stdout: String,
    pub stderr: String,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    /// When the engine warned that it takes this attempt's container: the kill time.
    pub kill_at_ms: Option<i64>,
}

/// Filters of `GET /v1/runs`; runs come newest first, `before` is the paging cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub project: Option<String>,
    /// Only these projects (a caller's readable projects); `None` means any.
    pub projects_in: Option<Vec<String>>,
    pub workflow: Option<String>,
    pub state: Option<String>,
    pub since_ms: Option<i64>,
    pub before: Option<i64>,
    pub limit: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// It was still queued: it is killed now, no worker will take it.
    Killed,
    /// A worker will stop its tasks.
    Requested,
    /// It had already ended.
    AlreadyEnded,
    NotFound,
}

macro_rules! run_columns {
    () => {
        "id, workflow, project, tier, logical_date, state, cluster, queue, spec, params, submitted_by, \
         user_name, submitted_ms, started_ms, finished_ms, kill_requested, reason, dry_run, route_key, \
         route_policy, route_reason, route_detail"
    };
}
pub(crate) use run_columns;

/// `RUNS_INSERT`'s values of one run, in its column order (`key`: the run's active key).
fn bind_run<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    run: &'q NewRun,
    key: Option<&'q str>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    q.bind(run.workflow.as_str())
        .bind(run.project.as_str())
        .bind(i64::from(run.tier))
        .bind(run.logical_date.as_str())
        .bind(key)
        .bind(run.cluster.as_str())
        .bind(run.queue.as_str())
        .bind(run.spec.as_str())
        .bind(run.params.as_str())
        .bind(run.submitted_by.as_str())
        .bind(run.submitted_ms)
        .bind(run.slo_ms)
        .bind(run.user.as_str())
        .bind(run.client.as_deref())
        .bind(i64::from(run.dry_run))
        .bind(run.route.as_ref().map(|r| r.key.as_str()))
        .bind(run.route.as_ref().map(|r| r.policy.as_str()))
        .bind(run.route.as_ref().map(|r| r.reason.as_str()))
        .bind(run.route.as_ref().map(|r| r.detail.as_str()))
}

pub(crate) fn run_row(r: &AnyRow) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        id: int(r, "id")?,
        workflow: text(r, "workflow")?,
        project: text(r, "project")?,
        tier: int(r, "tier")?.clamp(0, 255) as u8,
        logical_date: text(r, "logical_date")?,
        state: text(r, "state")?,
        cluster: text(r, "cluster")?,
        queue: text(r, "queue")?,
        spec: text(r, "spec")?,
        params: text(r, "params")?,
        submitted_by: text(r, "submitted_by")?,
        user: opt_text(r, "user_name")?,
        submitted_ms: int(r, "submitted_ms")?,
        started_ms: opt_int(r, "started_ms")?,
        finished_ms: opt_int(r, "finished_ms")?,
        kill_requested: int(r, "kill_requested")? != 0,
        reason: opt_text(r, "reason")?,
        dry_run: int(r, "dry_run")? != 0,
        route: match opt_text(r, "route_key")? {
            Some(key) => Some(RunRoute {
                key,
                policy: opt_text(r, "route_policy")?.unwrap_or_default(),
                reason: opt_text(r, "route_reason")?.unwrap_or_default(),
                detail: opt_text(r, "route_detail")?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

pub(crate) fn job_row(r: &AnyRow) -> Result<JobRow, StoreError> {
    Ok(JobRow {
        run_id: int(r, "run_id")?,
        idx: int(r, "idx")? as u32,
        name: text(r, "name")?,
        state: text(r, "state")?,
        started_ms: opt_int(r, "started_ms")?,
        finished_ms: opt_int(r, "finished_ms")?,
    })
}

pub(crate) fn task_row(r: &AnyRow) -> Result<TaskRow, StoreError> {
    Ok(TaskRow {
        run_id: int(r, "run_id")?,
        job_idx: int(r, "job_idx")? as u32,
        stage_idx: int(r, "stage_idx")? as u32,
        task_idx: int(r, "task_idx")? as u32,
        stage: text(r, "stage")?,
        state: text(r, "state")?,
        attempts: int(r, "attempts")? as u32,
        node: opt_text(r, "node")?,
        started_ms: opt_int(r, "started_ms")?,
        finished_ms: opt_int(r, "finished_ms")?,
        exit_code: opt_int(r, "exit_code")?.map(|c| c as i32),
    })
}

pub(crate) fn attempt_row(r: &AnyRow) -> Result<AttemptRow, StoreError> {
    Ok(AttemptRow {
        run_id: int(r, "run_id")?,
        job_idx: int(r, "job_idx")? as u32,
        stage_idx: int(r, "stage_idx")? as u32,
        task_idx: int(r, "task_idx")? as u32,
        attempt: int(r, "attempt")? as u32,
        cluster: text(r, "cluster")?,
        state: text(r, "state")?,
        node: opt_text(r, "node")?,
        launched: opt_text(r, "launched")?,
        stdout: text(r, "stdout")?,
        stderr: text(r, "stderr")?,
        started_ms: int(r, "started_ms")?,
        ended_ms: opt_int(r, "ended_ms")?,
        exit_code: opt_int(r, "exit_code")?.map(|c| c as i32),
        reason: opt_text(r, "reason")?,
        kill_at_ms: opt_int(r, "kill_at_ms")?,
    })
}

/// What makes a run unique while it is active: one project's (workflow, logical date) never
/// blocks another project's.
pub(crate) fn active_key(project: &str, workflow: &str, logical_date: &str) -> String {
    format!("{project}\n{workflow}\n{logical_date}")
}

/// A run's active key: a dry-run's is its own, so a dry-run and a production run of the same
/// (workflow, date) run side by side (the dry-run writes only shadow outputs), while two
/// dry-runs of it do not.
fn run_active_key(run: &NewRun) -> String {
    let key = active_key(&run.project, &run.workflow, &run.logical_date);
    if run.dry_run {
        format!("dry-run\n{key}")
    } else {
        key
    }
}

/// The scopes a run of `project` is listed under: the project and each of its ancestors
/// (`ads.ranking.x` → `ads`, `ads.ranking`, `ads.ranking.x`), as a grant on a project covers
/// its sub-projects.
pub(crate) fn scopes(project: &str) -> Vec<String> {
    let mut out: Vec<String> =
        project.match_indices('.').map(|(i, _)| project[..i].to_string()).filter(|s| !s.is_empty()).collect();
    out.push(project.to_string());
    out
}

/// Rows per multi-row statement: a batch of n rows is sent as chunks of these sizes (64s, then
/// the binary digits of the rest), so each statement's text is one of seven, prepared once and
/// kept in the connection's statement cache, and a chunk's parameters (at most 64 · 19) stay far
/// below either database's limit.
pub(crate) const CHUNKS: [usize; 7] = [64, 32, 16, 8, 4, 2, 1];

/// `items` in chunks of the sizes in [`CHUNKS`], in order.
fn chunked<T>(items: &[T]) -> Vec<&[T]> {
    let mut out = Vec::new();
    let mut rest = items;
    while !rest.is_empty() {
        let n = CHUNKS.iter().copied().find(|&c| c <= rest.len()).unwrap_or(1);
        let (part, tail) = rest.split_at(n);
        out.push(part);
        rest = tail;
    }
    out
}

/// A statement with a list of `row`s (each `?` a parameter, as are any in `head` and `tail`), in
/// one text per chunk size and dialect.
pub(crate) struct Multi {
    head: &'static str,
    row: &'static str,
    tail: &'static str,
    /// The texts for SQLite (`?`), then for PostgreSQL (`$1`, `$2`, …).
    texts: [OnceLock<Vec<String>>; 2],
}

impl Multi {
    pub(crate) const fn new(head: &'static str, row: &'static str, tail: &'static str) -> Multi {
        Multi { head, row, tail, texts: [OnceLock::new(), OnceLock::new()] }
    }
}

/// The text of `m` for `rows` rows (one of [`CHUNKS`]). On PostgreSQL the parameters are
/// `$1`, `$2`, … numbered through (head, rows, tail); on SQLite they stay anonymous `?`s, bound
/// in order: sqlx looks up each parameter's name before binding it, and SQLite finds a numbered
/// name by a scan of the statement's list of names, so a 64-row insert's 1,280 `$N`s cost a
/// quadratic ~800,000 steps per execution (a tenth of the store thread's work at 32 clients).
pub(crate) fn statement(m: &'static Multi, rows: usize, dialect: Dialect) -> &'static str {
    let numbered = dialect == Dialect::Postgres;
    let texts = m.texts[usize::from(numbered)].get_or_init(|| {
        CHUNKS
            .iter()
            .map(|&n| {
                let mut sql = String::new();
                let mut param = 0;
                let mut push = |part: &str, sql: &mut String| {
                    for c in part.chars() {
                        if c == '?' && numbered {
                            param += 1;
                            sql.push_str(&format!("${param}"));
                        } else {
                            sql.push(c);
                        }
                    }
                };
                push(m.head, &mut sql);
                for r in 0..n {
                    if r > 0 {
                        sql.push_str(", ");
                    }
                    push(m.row, &mut sql);
                }
                push(m.tail, &mut sql);
                sql
            })
            .collect()
    });
    let i = CHUNKS.iter().position(|&c| c == rows).expect("a chunk size");
    &texts[i]
}

static IDEMPOTENCY_READ: Multi = Multi::new(
    "SELECT key, run_id, status, created_ms, request_hash FROM idempotency WHERE key IN (",
    "?",
    ")",
);
static IDEMPOTENCY_DELETE: Multi = Multi::new("DELETE FROM idempotency WHERE key IN (", "?", ")");
static RUNS_INSERT: Multi = Multi::new(
    "INSERT INTO runs (workflow, project, tier, logical_date, active_key, state, cluster, queue, spec, params,
     submitted_by, submitted_ms, slo_ms, user_name, client, dry_run, route_key, route_policy, route_reason,
     route_detail) VALUES ",
    "(?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    " ON CONFLICT DO NOTHING RETURNING id, active_key",
);
static ACTIVE_READ: Multi = Multi::new("SELECT id, active_key FROM runs WHERE active_key IN (", "?", ")");
static SCOPES_INSERT: Multi = Multi::new("INSERT INTO run_scopes (scope, run_id) VALUES ", "(?, ?)", "");
static IDEMPOTENCY_INSERT: Multi = Multi::new(
    "INSERT INTO idempotency (key, run_id, status, created_ms, request_hash) VALUES ",
    "(?, ?, ?, ?, ?)",
    " ON CONFLICT DO NOTHING",
);
static AUDIT_INSERT: Multi = Multi::new(
    "INSERT INTO audit (at_ms, token_id, action, target, project, client, outcome, detail) VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?)",
    "",
);

/// The audit row of a submission refused because `existing` holds its (workflow, date); a
/// created run's comes from the trigger `runs_submitted`, in the same words.
fn conflict_entry(run: &NewRun, existing: i64) -> crate::audit::AuditEntry {
    crate::audit::AuditEntry {
        at_ms: run.submitted_ms,
        token_id: run.submitted_by.clone(),
        action: "submit".to_string(),
        target: format!("run {existing}"),
        project: Some(run.project.clone()),
        client: run.client.clone(),
        outcome: "conflict".to_string(),
        detail: Some(format!(
            "workflow {} logical date {} as user {} to {}/{}",
            run.workflow, run.logical_date, run.user, run.cluster, run.queue
        )),
    }
}

/// An idempotency key as a batch sees it: stored before, or first used by a run of the batch.
enum KeyRecord {
    Stored { run: i64, status: u16, created_ms: i64, hash: Option<String> },
    Batch(usize),
}

/// What becomes of one run of a batch, worked out before the statements run.
enum Plan {
    /// Answered without storing anything (a replay, or a key reused with another request).
    Done(Submitted),
    /// Inserted, unless a stored active run holds its active key.
    Insert,
    /// An earlier run of the batch holds its active key: a conflict with that run's run.
    ConflictWith(usize),
    /// An earlier run of the batch used its idempotency key with the same request: its answer.
    ReplayOf(usize),
}

impl Store {
    /// Store a batch of submissions in one transaction (group commit): all of them or none.
    /// Within the batch, each is checked in order against idempotency records and against
    /// the active runs (including those earlier in the same batch).
    ///
    /// The batch is written with multi-row statements (see [`CHUNKS`]), not a statement per
    /// run: each statement is a round trip to the connection (on SQLite, a message to sqlx's
    /// connection thread and a wake-up each way), which had made the 32-client submission rate
    /// a third lower than before the audit log. The order-dependent checks are worked out here
    /// from what the statements return: a run whose idempotency key or active key an earlier run
    /// of the same batch holds takes its answer from that run, as if they had been stored one
    /// after the other.
    pub(crate) async fn submit(&self, runs: &[NewRun]) -> Result<Vec<Submitted>, StoreError> {
        if let [run] = runs {
            if run.idempotency_key.is_none() && !run.project.contains('.') {
                return Ok(vec![self.submit_alone(run).await?]);
            }
        }
        let mut tx = self.begin().await?;
        // The idempotency records of the batch's keys, as stored.
        let mut keys: Vec<&str> = runs.iter().filter_map(|r| r.idempotency_key.as_deref()).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut records: HashMap<&str, KeyRecord> = HashMap::new();
        for part in chunked(&keys) {
            let mut q = sqlx::query(statement(&IDEMPOTENCY_READ, part.len(), self.dialect));
            for k in part {
                q = q.bind(*k);
            }
            for r in q.fetch_all(&mut *tx).await.map_err(StoreError::db)? {
                let key = text(&r, "key")?;
                let Some(k) = part.iter().find(|k| **k == key) else { continue };
                let record = KeyRecord::Stored {
                    run: int(&r, "run_id")?,
                    status: int(&r, "status")?.clamp(0, 999) as u16,
                    created_ms: int(&r, "created_ms")?,
                    hash: opt_text(&r, "request_hash")?,
                };
                records.insert(k, record);
            }
        }
        // Each run's plan, in order, as if the batch were stored one run after the other.
        let mut plans: Vec<Plan> = Vec::with_capacity(runs.len());
        let mut expired: Vec<&str> = Vec::new();
        let mut holders: HashMap<String, usize> = HashMap::new();
        let mut active_keys: Vec<Option<String>> = vec![None; runs.len()];
        for (i, run) in runs.iter().enumerate() {
            if let Some(key) = run.idempotency_key.as_deref() {
                match records.get(key) {
                    Some(KeyRecord::Stored { run: first, status, created_ms, hash })
                        if *created_ms >= run.idempotency_after_ms =>
                    {
                        // Records from before request hashes were kept replay as before.
                        plans.push(Plan::Done(if hash.as_ref().is_some_and(|h| *h != run.request_hash) {
                            Submitted::KeyReused
                        } else {
                            Submitted::Replay { status: *status, run: *first }
                        }));
                        continue;
                    }
                    Some(KeyRecord::Stored { .. }) => expired.push(key),
                    Some(KeyRecord::Batch(j)) => {
                        let j = *j;
                        plans.push(if runs[j].request_hash != run.request_hash {
                            Plan::Done(Submitted::KeyReused)
                        } else {
                            Plan::ReplayOf(j)
                        });
                        continue;
                    }
                    None => {}
                }
                records.insert(key, KeyRecord::Batch(i));
            }
            let key = run_active_key(run);
            match holders.get(&key) {
                Some(&j) => plans.push(Plan::ConflictWith(j)),
                None => {
                    holders.insert(key.clone(), i);
                    plans.push(Plan::Insert);
                }
            }
            active_keys[i] = Some(key);
        }
        if !expired.is_empty() {
            for part in chunked(&expired) {
                let mut q = sqlx::query(statement(&IDEMPOTENCY_DELETE, part.len(), self.dialect));
                for k in part {
                    q = q.bind(*k);
                }
                q.execute(&mut *tx).await.map_err(StoreError::db)?;
            }
        }
        // The runs, in one multi-row insert per chunk; the trigger `runs_submitted` (schema
        // 11) adds each created run's own project scope and its audit row.
        let inserts: Vec<usize> = (0..runs.len()).filter(|i| matches!(plans[*i], Plan::Insert)).collect();
        let mut created: HashMap<String, i64> = HashMap::with_capacity(inserts.len());
        for part in chunked(&inserts) {
            let mut q = sqlx::query(statement(&RUNS_INSERT, part.len(), self.dialect));
            for &i in part {
                let (run, key) = (&runs[i], active_keys[i].as_deref());
                q = bind_run(q, run, key);
            }
            for r in q.fetch_all(&mut *tx).await.map_err(StoreError::db)? {
                created.insert(text(&r, "active_key")?, int(&r, "id")?);
            }
        }
        // Those not inserted conflict with the run that holds their active key.
        let refused: Vec<&str> = inserts
            .iter()
            .filter_map(|&i| active_keys[i].as_deref())
            .filter(|k| !created.contains_key(*k))
            .collect();
        let mut existing: HashMap<String, i64> = HashMap::new();
        for part in chunked(&refused) {
            let mut q = sqlx::query(statement(&ACTIVE_READ, part.len(), self.dialect));
            for k in part {
                q = q.bind(*k);
            }
            for r in q.fetch_all(&mut *tx).await.map_err(StoreError::db)? {
                existing.insert(text(&r, "active_key")?, int(&r, "id")?);
            }
        }
        // Every run's answer, in order (a run answered like an earlier one comes after it).
        let mut out: Vec<Submitted> = Vec::with_capacity(runs.len());
        for (i, plan) in plans.iter().enumerate() {
            let outcome = match plan {
                Plan::Done(s) => s.clone(),
                Plan::Insert => {
                    let key = active_keys[i].as_deref().unwrap_or_default();
                    match created.get(key) {
                        Some(&id) => Submitted::Created { id },
                        // No holder found: it ended between the two statements (PostgreSQL's
                        // read committed); the conflict is reported against an unknown run 0
                        // rather than retried inside the batch.
                        None => Submitted::Conflict { existing: existing.get(key).copied().unwrap_or(0) },
                    }
                }
                Plan::ConflictWith(j) => match out[*j] {
                    Submitted::Created { id } => Submitted::Conflict { existing: id },
                    ref other => other.clone(),
                },
                Plan::ReplayOf(j) => match out[*j] {
                    Submitted::Created { id } => Submitted::Replay { status: 201, run: id },
                    Submitted::Conflict { existing } => Submitted::Replay { status: 409, run: existing },
                    ref other => other.clone(),
                },
            };
            out.push(outcome);
        }
        // A dotted project's ancestors' scopes (the trigger added the project's own).
        let ancestors: Vec<(String, i64)> = runs
            .iter()
            .zip(&out)
            .filter_map(|(run, o)| match o {
                Submitted::Created { id } => Some(
                    scopes(&run.project).into_iter().filter(|s| *s != run.project).map(move |s| (s, *id)),
                ),
                _ => None,
            })
            .flatten()
            .collect();
        for part in chunked(&ancestors) {
            let mut q = sqlx::query(statement(&SCOPES_INSERT, part.len(), self.dialect));
            for (scope, id) in part {
                q = q.bind(scope.as_str()).bind(*id);
            }
            q.execute(&mut *tx).await.map_err(StoreError::db)?;
        }
        // The idempotency records of the runs that were stored or refused as conflicts.
        let recorded: Vec<(usize, i64, i64)> = plans
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                matches!(p, Plan::Insert | Plan::ConflictWith(_)) && runs[*i].idempotency_key.is_some()
            })
            .filter_map(|(i, _)| match out[i] {
                Submitted::Created { id } => Some((i, id, 201)),
                Submitted::Conflict { existing } => Some((i, existing, 409)),
                _ => None,
            })
            .collect();
        for part in chunked(&recorded) {
            let mut q = sqlx::query(statement(&IDEMPOTENCY_INSERT, part.len(), self.dialect));
            for &(i, id, status) in part {
                let run = &runs[i];
                q = q
                    .bind(run.idempotency_key.as_deref())
                    .bind(id)
                    .bind(status)
                    .bind(run.submitted_ms)
                    .bind(run.request_hash.as_str());
            }
            q.execute(&mut *tx).await.map_err(StoreError::db)?;
        }
        // Conflicts are audited here (a created run's audit row came with it).
        let conflicts: Vec<crate::audit::AuditEntry> = runs
            .iter()
            .zip(&plans)
            .zip(&out)
            .filter(|((_, p), _)| matches!(p, Plan::Insert | Plan::ConflictWith(_)))
            .filter_map(|((run, _), o)| match o {
                Submitted::Conflict { existing } => Some(conflict_entry(run, *existing)),
                _ => None,
            })
            .collect();
        for part in chunked(&conflicts) {
            let mut q = sqlx::query(statement(&AUDIT_INSERT, part.len(), self.dialect));
            for e in part {
                q = crate::audit::bind_entry(q, e);
            }
            q.execute(&mut *tx).await.map_err(StoreError::db)?;
        }
        tx.commit().await.map_err(StoreError::db)?;
        Ok(out)
    }

    /// A batch of one run without an idempotency key, of a project without ancestors: one
    /// statement, atomic on its own (the run, its scope and its audit row, by the trigger), so
    /// no transaction is opened around it — two round trips fewer (`BEGIN`, `COMMIT`) on the
    /// path of every one-at-a-time submission. A conflict writes nothing but its audit row.
    async fn submit_alone(&self, run: &NewRun) -> Result<Submitted, StoreError> {
        let key = run_active_key(run);
        let inserted =
            bind_run(sqlx::query(statement(&RUNS_INSERT, 1, self.dialect)), run, Some(key.as_str()))
                // Every row fetched, not the first: the statement then runs to its end, where it
                // commits, and a failed commit is an error here (a statement dropped after its first
                // row would commit when reset, and sqlx ignores what that reset returns).
                .fetch_all(&self.write)
                .await
                .map_err(StoreError::db)?;
        if let Some(r) = inserted.first() {
            return Ok(Submitted::Created { id: int(r, "id")? });
        }
        let holder = sqlx::query(statement(&ACTIVE_READ, 1, self.dialect))
            .bind(key.as_str())
            .fetch_optional(&self.write)
            .await
            .map_err(StoreError::db)?;
        // No holder: it ended in between; the conflict is against an unknown run 0, as in a batch.
        let existing = match holder {
            Some(r) => int(&r, "id")?,
            None => 0,
        };
        self.append_audit(&conflict_entry(run, existing)).await?;
        Ok(Submitted::Conflict { existing })
    }

    pub(crate) async fn run(&self, id: i64) -> Result<Option<RunRow>, StoreError> {
        const Q: &str = concat!("SELECT ", run_columns!(), " FROM runs WHERE id = $1");
        let row = sqlx::query(Q).bind(id).fetch_optional(&self.read).await.map_err(StoreError::db)?;
        row.as_ref().map(run_row).transpose()
    }

    pub(crate) async fn jobs(&self, run: i64) -> Result<Vec<JobRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, idx, name, state, started_ms, finished_ms FROM jobs WHERE run_id = $1 ORDER BY idx",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(job_row).collect()
    }

    pub(crate) async fn tasks(&self, run: i64) -> Result<Vec<TaskRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, task_idx, stage, state, attempts, node, started_ms, finished_ms,
             exit_code FROM tasks WHERE run_id = $1 ORDER BY job_idx, stage_idx, task_idx",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(task_row).collect()
    }

    pub(crate) async fn tasks_page(
        &self,
        run: i64,
        after: Option<(u32, u32, u32)>,
        limit: u32,
    ) -> Result<Vec<TaskRow>, StoreError> {
        // (job, stage, task) > after, written out: row-value comparison is not in every SQLite.
        let (j, s, t) =
            after.map(|(j, s, t)| (i64::from(j), i64::from(s), i64::from(t))).unwrap_or((-1, -1, -1));
        let rows = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, task_idx, stage, state, attempts, node, started_ms, finished_ms,
             exit_code FROM tasks WHERE run_id = $1
               AND (job_idx > $2 OR (job_idx = $2 AND (stage_idx > $3 OR (stage_idx = $3 AND task_idx > $4))))
             ORDER BY job_idx, stage_idx, task_idx LIMIT $5",
        )
        .bind(run)
        .bind(j)
        .bind(s)
        .bind(t)
        .bind(i64::from(limit.max(1)))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(task_row).collect()
    }

    pub(crate) async fn task_counts(&self, run: i64) -> Result<Vec<TaskCount>, StoreError> {
        let rows = sqlx::query(
            "SELECT job_idx, stage_idx, MIN(stage) AS stage, state, COUNT(*) AS n FROM tasks WHERE run_id = $1
             GROUP BY job_idx, stage_idx, state ORDER BY job_idx, stage_idx, state",
        )
        .bind(run)
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter()
            .map(|r| {
                Ok(TaskCount {
                    job_idx: int(r, "job_idx")? as u32,
                    stage_idx: int(r, "stage_idx")? as u32,
                    stage: text(r, "stage")?,
                    state: text(r, "state")?,
                    count: int(r, "n")?.max(0) as u64,
                })
            })
            .collect()
    }

    pub(crate) async fn waiting_runs(&self, project: &str) -> Result<u64, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM runs WHERE project = $1 AND state IN ('queued', 'routed', 'waiting')",
        )
        .bind(project)
        .fetch_one(&self.read)
        .await
        .map_err(StoreError::db)?;
        Ok(int(&row, "n")?.max(0) as u64)
    }

    /// Every attempt of one task, oldest first.
    pub(crate) async fn attempts(
        &self,
        run: i64,
        job: u32,
        stage: u32,
        task: u32,
    ) -> Result<Vec<AttemptRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, job_idx, stage_idx, task_idx, attempt, cluster, state, node, launched, stdout, stderr,
             started_ms, ended_ms, exit_code, reason, kill_at_ms FROM attempts
             WHERE run_id = $1 AND job_idx = $2 AND stage_idx = $3 AND task_idx = $4 ORDER BY attempt",
        )
        .bind(run)
        .bind(i64::from(job))
        .bind(i64::from(stage))
        .bind(i64::from(task))
        .fetch_all(&self.read)
        .await
        .map_err(StoreError::db)?;
        rows.iter().map(attempt_row).collect()
    }

    /// Runs matching `filter`, newest first, at most `filter.limit`. A caller limited to some
    /// projects reads each project's scope through `run_scopes`' index (newest first, at most
    /// `limit` rows each), so its cost does not grow with other projects' runs.
    pub(crate) async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        const ALL: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE ($1 IS NULL OR project = $1) AND ($2 IS NULL OR workflow = $2)
              AND ($3 IS NULL OR state = $3) AND ($4 IS NULL OR submitted_ms >= $4) AND ($5 IS NULL OR id < $5)
              ORDER BY id DESC LIMIT $6"
        );
        const SCOPED: &str = concat!(
            "SELECT ",
            run_columns!(),
            " FROM run_scopes JOIN runs ON runs.id = run_scopes.run_id WHERE run_scopes.scope = $7
              AND ($1 IS NULL OR project = $1) AND ($2 IS NULL OR workflow = $2)
              AND ($3 IS NULL OR state = $3) AND ($4 IS NULL OR submitted_ms >= $4)
              AND ($5 IS NULL OR run_scopes.run_id < $5)
              ORDER BY run_scopes.run_id DESC LIMIT $6"
        );
        let want = filter.limit.max(1) as usize;
        let query = |q: &'static str| {
            sqlx::query(q)
                .bind(filter.project.as_deref())
                .bind(filter.workflow.as_deref())
                .bind(filter.state.as_deref())
                .bind(filter.since_ms)
                .bind(filter.before)
                .bind(want as i64)
        };
        let Some(scopes) = &filter.projects_in else {
            let rows = query(ALL).fetch_all(&self.read).await.map_err(StoreError::db)?;
            return rows.iter().map(run_row).collect();
        };
        // A scope inside another one the caller has adds nothing.
        let mut own: Vec<&String> = scopes.iter().collect();
        own.sort();
        own.dedup();
        let covered =
            |s: &str| own.iter().any(|o| s.strip_prefix(o.as_str()).is_some_and(|r| r.starts_with('.')));
        let mut out: Vec<RunRow> = Vec::new();
        for scope in own.iter().filter(|s| !covered(s)) {
            let rows =
                query(SCOPED).bind(scope.as_str()).fetch_all(&self.read).await.map_err(StoreError::db)?;
            for r in &rows {
                out.push(run_row(r)?);
            }
        }
        out.sort_by_key(|r| std::cmp::Reverse(r.id));
        out.dedup_by_key(|r| r.id);
        out.truncate(want);
        Ok(out)
    }

    /// Ask for a run to be killed. A queued run is killed at once (compare-and-set on its
    /// state, so a worker claiming it at the same moment either gets it first or not at all).
    pub(crate) async fn request_kill(&self, id: i64, now_ms: i64) -> Result<KillOutcome, StoreError> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(
            "UPDATE runs SET state = 'killed', finished_ms = $2, active_key = NULL, kill_requested = 1,
             reason = 'killed before it started' WHERE id = $1 AND state = 'queued'",
        )
        .bind(id)
        .bind(now_ms)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        if done.rows_affected() == 1 {
            tx.commit().await.map_err(StoreError::db)?;
            return Ok(KillOutcome::Killed);
        }
        let asked = sqlx::query(
            "UPDATE runs SET kill_requested = 1 WHERE id = $1 AND state NOT IN ('succeeded', 'failed', 'killed')",
        )
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::db)?;
        let outcome = if asked.rows_affected() == 1 {
            KillOutcome::Requested
        } else {
            let exists = sqlx::query("SELECT id FROM runs WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::db)?;
            if exists.is_some() {
                KillOutcome::AlreadyEnded
            } else {
                KillOutcome::NotFound
            }
        };
        tx.commit().await.map_err(StoreError::db)?;
        Ok(outcome)
    }

    /// Forget idempotency records created before `before_ms`.
    pub(crate) async fn expire_idempotency(&self, before_ms: i64) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let r = sqlx::query("DELETE FROM idempotency WHERE created_ms < $1")
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::db)?;
        tx.commit().await.map_err(StoreError::db)?;
        Ok(r.rows_affected())
    }
}
