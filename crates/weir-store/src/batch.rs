//! A worker's batch applied a few statements at a time instead of one or two per change.
//!
//! Each statement is a round trip to the connection — on SQLite a message to sqlx's connection
//! thread and a wake-up each way — and a one-task run took ≈15 of them between its route and its
//! end (BENCHMARKS.md, issue 17's dispatch sections). Here the batch is first cut into
//! **groups**, each of one kind of change, and each group is applied by one multi-row statement
//! per step of that kind (`UPDATE … FROM (VALUES …) … RETURNING` for the compare-and-sets, so the
//! rows returned say exactly which applied; `INSERT … SELECT … FROM (VALUES …)` for the rows
//! they create).
//!
//! The result is the one-by-one application's, change for change (tests compare the two on
//! random batches, `tests/apply_batch.rs`). What makes that hold is how the groups are formed
//! ([`plan`]): a change goes into the first group of its kind that comes after every group
//! holding an earlier change it **conflicts** with — one that touches a row it touches (the
//! run's row, a job's, a task's with its attempts, a job's waiting spells, a queue's usage
//! rows), or, for a route, any row of the run (it creates the jobs and tasks later changes move);
//! a terminal run state closes all of the run's spells. Changes in different groups without a
//! conflict commute (each is a compare-and-set on its own rows, or an insert nothing of the
//! batch reads), and no two changes of a group conflict, so a group's statement sees each of its
//! rows as the one-by-one application would have.
//!
//! Statements come in four sizes (1, 4, 16 and 64 rows; each text prepared once per
//! connection): a group's rows fill the smallest size that holds them, the rest of it padded
//! with rows of NULLs, which match no row and are filtered out of inserts; more than 64 rows take
//! several statements. A group of one change is applied by its own statements (cheaper on
//! SQLite, where an `UPDATE … FROM` and a `RETURNING` each fill a temporary table; BENCHMARKS.md).
//! Every value is bound; a 64-row statement binds at most 64 · 10 parameters, far
//! below either database's limit.

use std::collections::HashMap;

use sqlx::any::{AnyArguments, AnyRow};

use crate::runs::{statement, Multi};
use crate::worker::{apply_one, AttemptKey, Change, TaskKey, Tx};
use crate::{int, opt_int, text, Dialect, StoreError};

type Q = sqlx::query::Query<'static, sqlx::Any, AnyArguments>;

/// What a group applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Route,
    RunState,
    JobState,
    TaskState,
    AttemptStarting,
    AttemptLaunched,
    AttemptEnded,
    AttemptPreempting,
    WaitBegan,
    WaitEnded,
    Usage,
    UsageExtended,
    /// Rare inserts nothing else in a batch reads (preemptions, SLO decisions and models),
    /// applied one by one in their order.
    Each,
}

/// A row (or rows) a change reads or writes, for the conflicts between changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Res<'a> {
    Run(i64),
    Job(i64, u32),
    /// The task's row and its attempts'.
    Task(TaskKey),
    /// The job's waiting spells.
    Waits(i64, u32),
    Queue(&'a str),
}

/// What a change touches: its row, its run's (if any), and whether it touches all of the run's
/// rows (a route) or all of its spells (a terminal run state).
struct Touch<'a> {
    res: Option<Res<'a>>,
    run: Option<i64>,
    whole_run: bool,
    all_waits: bool,
}

fn kind_and_touch(c: &Change) -> (Kind, Touch<'_>) {
    let on = |res: Res<'static>, run: i64| Touch {
        res: Some(res),
        run: Some(run),
        whole_run: false,
        all_waits: false,
    };
    match c {
        Change::Route { run, .. } => (
            Kind::Route,
            Touch { res: Some(Res::Run(*run)), run: Some(*run), whole_run: true, all_waits: false },
        ),
        Change::RunState { run, to, .. } => (
            Kind::RunState,
            Touch {
                res: Some(Res::Run(*run)),
                run: Some(*run),
                whole_run: false,
                all_waits: crate::TERMINAL_RUN_STATES.contains(to),
            },
        ),
        Change::JobState { run, job, .. } => (Kind::JobState, on(Res::Job(*run, *job), *run)),
        Change::TaskState { task, .. } => (Kind::TaskState, on(Res::Task(*task), task.run)),
        Change::AttemptStarting { key, .. } => (Kind::AttemptStarting, on(Res::Task(key.task), key.task.run)),
        Change::AttemptLaunched { key, .. } => (Kind::AttemptLaunched, on(Res::Task(key.task), key.task.run)),
        Change::AttemptEnded { key, .. } => (Kind::AttemptEnded, on(Res::Task(key.task), key.task.run)),
        Change::AttemptPreempting { key, .. } => {
            (Kind::AttemptPreempting, on(Res::Task(key.task), key.task.run))
        }
        Change::WaitBegan(w) => (Kind::WaitBegan, on(Res::Waits(w.run_id, w.job_idx), w.run_id)),
        Change::WaitEnded { run, job, .. } => (Kind::WaitEnded, on(Res::Waits(*run, *job), *run)),
        Change::Usage(row) => (
            Kind::Usage,
            Touch {
                res: Some(Res::Queue(row.queue.as_str())),
                run: None,
                whole_run: false,
                all_waits: false,
            },
        ),
        Change::UsageExtended { queue, .. } => (
            Kind::UsageExtended,
            Touch { res: Some(Res::Queue(queue.as_str())), run: None, whole_run: false, all_waits: false },
        ),
        Change::Preempted(_) | Change::SloDecision(_) | Change::SloModel(_) => {
            (Kind::Each, Touch { res: None, run: None, whole_run: false, all_waits: false })
        }
    }
}

/// The batch's groups, in the order they are applied: each a kind and the indices of its
/// changes, in the batch's order.
fn plan(changes: &[Change]) -> Vec<(Kind, Vec<usize>)> {
    let mut groups: Vec<(Kind, Vec<usize>)> = Vec::new();
    // The last group holding a change on each row; on any row of each run; a route of each
    // run; a spell of each run; a terminal state of each run.
    let mut last: HashMap<Res<'_>, usize> = HashMap::new();
    let mut last_of_run: HashMap<i64, usize> = HashMap::new();
    let mut last_whole: HashMap<i64, usize> = HashMap::new();
    let mut last_wait_of_run: HashMap<i64, usize> = HashMap::new();
    let mut last_all_waits: HashMap<i64, usize> = HashMap::new();
    for (i, c) in changes.iter().enumerate() {
        let (kind, t) = kind_and_touch(c);
        let mut after: Option<usize> = None;
        let mut bump = |g: Option<&usize>| after = after.max(g.copied());
        if let Some(res) = &t.res {
            bump(last.get(res));
        }
        if let Some(run) = t.run {
            bump(last_whole.get(&run));
            if t.whole_run {
                bump(last_of_run.get(&run));
            }
            if t.all_waits {
                bump(last_wait_of_run.get(&run));
            }
            if matches!(t.res, Some(Res::Waits(..))) {
                bump(last_all_waits.get(&run));
            }
        }
        let from = after.map_or(0, |g| g + 1);
        let g = match (from..groups.len()).find(|&g| groups[g].0 == kind) {
            Some(g) => g,
            None => {
                groups.push((kind, Vec::new()));
                groups.len() - 1
            }
        };
        groups[g].1.push(i);
        if let Some(res) = t.res {
            last.insert(res, g);
        }
        if let Some(run) = t.run {
            let e = last_of_run.entry(run).or_insert(g);
            *e = (*e).max(g);
            if t.whole_run {
                last_whole.insert(run, g);
            }
            if t.all_waits {
                last_all_waits.insert(run, g);
            }
            if matches!(t.res, Some(Res::Waits(..))) {
                let e = last_wait_of_run.entry(run).or_insert(g);
                *e = (*e).max(g);
            }
        }
    }
    groups
}

/// Apply `changes` in `tx` (the lease already checked): per change, whether it applied, as
/// applying them one by one in order would have said.
pub(crate) async fn apply(
    tx: &mut Tx,
    dialect: Dialect,
    cluster: &str,
    changes: &[Change],
) -> Result<Vec<bool>, StoreError> {
    let mut applied = vec![false; changes.len()];
    for (kind, members) in plan(changes) {
        if let [i] = members[..] {
            // One change: its own statements are cheaper than the multi-row ones (on SQLite an
            // `UPDATE … FROM` and a `RETURNING` each fill a temporary table), for as many round
            // trips.
            applied[i] = apply_one(tx, cluster, &changes[i]).await?;
            continue;
        }
        let g = Group { tx: &mut *tx, dialect, cluster, changes, members: &members, applied: &mut applied };
        match kind {
            Kind::Route => g.route().await?,
            Kind::RunState => g.run_state().await?,
            Kind::JobState => g.job_state().await?,
            Kind::TaskState => g.task_state().await?,
            Kind::AttemptStarting => g.attempt_starting().await?,
            Kind::AttemptLaunched => g.attempt_launched().await?,
            Kind::AttemptEnded => g.attempt_ended().await?,
            Kind::AttemptPreempting => g.attempt_preempting().await?,
            Kind::WaitBegan => g.wait_began().await?,
            Kind::WaitEnded => g.wait_ended().await?,
            Kind::Usage => g.usage().await?,
            Kind::UsageExtended => g.usage_extended().await?,
            Kind::Each => {
                for &i in &members {
                    applied[i] = apply_one(tx, cluster, &changes[i]).await?;
                }
            }
        }
    }
    Ok(applied)
}

/// The statement sizes a group's rows are padded to: few texts per statement (each one
/// prepared and kept per connection, and the connection's cache holds 100), at most three
/// padding rows per real one.
const SIZES: [usize; 4] = [1, 4, 16, 64];

/// `rows` rows as statements: (first row, rows, statement size), the size one of [`SIZES`]
/// (all of them sizes `runs::statement` makes).
fn parts(rows: usize) -> Vec<(usize, usize, usize)> {
    let max = SIZES[SIZES.len() - 1];
    let mut out = Vec::new();
    let mut at = 0;
    while at < rows {
        let n = (rows - at).min(max);
        let size = SIZES.iter().copied().find(|&c| c >= n).unwrap_or(max);
        out.push((at, n, size));
        at += n;
    }
    out
}

/// Execute `m` over `items`, padded (see the module's documentation): `head` (if any) is bound
/// first, then each row by `bind` (`None`: a padding row of NULLs of the same types), then
/// `tail`. Every row the statements return.
async fn exec<T>(
    tx: &mut Tx,
    dialect: Dialect,
    m: &'static Multi,
    items: &[T],
    head: Option<&str>,
    tail: Option<&str>,
    bind: impl Fn(Q, Option<&T>) -> Q,
) -> Result<Vec<AnyRow>, StoreError> {
    let mut out = Vec::new();
    for (at, n, size) in parts(items.len()) {
        let mut q = sqlx::query(statement(m, size, dialect));
        if let Some(h) = head {
            q = q.bind(h.to_string());
        }
        for r in 0..size {
            q = bind(q, if r < n { Some(&items[at + r]) } else { None });
        }
        if let Some(t) = tail {
            q = q.bind(t.to_string());
        }
        out.extend(q.fetch_all(&mut **tx).await.map_err(StoreError::db)?);
    }
    Ok(out)
}

fn task_key(r: &AnyRow) -> Result<TaskKey, StoreError> {
    Ok(TaskKey {
        run: int(r, "run_id")?,
        job: int(r, "job_idx")? as u32,
        stage: int(r, "stage_idx")? as u32,
        task: int(r, "task_idx")? as u32,
    })
}

fn attempt_key(r: &AnyRow) -> Result<AttemptKey, StoreError> {
    Ok(AttemptKey { task: task_key(r)?, attempt: int(r, "attempt")? as u32 })
}

/// How many returned rows carry each key.
fn counts<K: std::hash::Hash + Eq>(
    rows: &[AnyRow],
    key: impl Fn(&AnyRow) -> Result<K, StoreError>,
) -> Result<HashMap<K, u32>, StoreError> {
    let mut out = HashMap::with_capacity(rows.len());
    for r in rows {
        *out.entry(key(r)?).or_insert(0) += 1;
    }
    Ok(out)
}

fn bind_task(q: Q, t: Option<&TaskKey>) -> Q {
    q.bind(t.map(|t| t.run))
        .bind(t.map(|t| i64::from(t.job)))
        .bind(t.map(|t| i64::from(t.stage)))
        .bind(t.map(|t| i64::from(t.task)))
}

fn bind_attempt(q: Q, k: Option<&AttemptKey>) -> Q {
    bind_task(q, k.map(|k| &k.task)).bind(k.map(|k| i64::from(k.attempt)))
}

macro_rules! task_match {
    () => {
        "tasks.run_id = v.column1 AND tasks.job_idx = v.column2 AND tasks.stage_idx = v.column3
         AND tasks.task_idx = v.column4"
    };
}
macro_rules! attempt_match {
    () => {
        "attempts.run_id = v.column1 AND attempts.job_idx = v.column2 AND attempts.stage_idx = v.column3
         AND attempts.task_idx = v.column4 AND attempts.attempt = v.column5"
    };
}
macro_rules! task_returning {
    () => {
        " RETURNING tasks.run_id, tasks.job_idx, tasks.stage_idx, tasks.task_idx"
    };
}
macro_rules! attempt_returning {
    () => {
        " RETURNING attempts.run_id, attempts.job_idx, attempts.stage_idx, attempts.task_idx, attempts.attempt"
    };
}

static ROUTE: Multi =
    Multi::new("UPDATE runs SET state = 'routed' WHERE state = 'queued' AND id IN (", "?", ") RETURNING id");
static JOBS_INSERT: Multi = Multi::new(
    "INSERT INTO jobs (run_id, idx, name, state) SELECT v.column1, v.column2, v.column3, 'pending' FROM (VALUES ",
    "(?, ?, ?)",
    ") AS v WHERE v.column1 IS NOT NULL",
);
static TASKS_INSERT: Multi = Multi::new(
    "INSERT INTO tasks (run_id, job_idx, stage_idx, task_idx, stage, state)
     SELECT v.column1, v.column2, v.column3, v.column4, v.column5, 'pending' FROM (VALUES ",
    "(?, ?, ?, ?, ?)",
    ") AS v WHERE v.column1 IS NOT NULL",
);
static RUN_STATE: Multi = Multi::new(
    "UPDATE runs SET state = v.column2,
     started_ms = CASE WHEN v.column2 = 'running' THEN COALESCE(runs.started_ms, v.column3) ELSE runs.started_ms END,
     finished_ms = CASE WHEN v.column2 IN ('succeeded', 'failed', 'killed') THEN v.column3 ELSE runs.finished_ms END,
     active_key = CASE WHEN v.column2 IN ('succeeded', 'failed', 'killed') THEN NULL ELSE runs.active_key END,
     reason = COALESCE(v.column4, runs.reason)
     FROM (VALUES ",
    "(?, ?, ?, ?)",
    ") AS v WHERE runs.id = v.column1 AND runs.state NOT IN ('succeeded', 'failed', 'killed') RETURNING runs.id",
);
/// A run ended: close its spells still open (never before they began).
static WAITS_RUN_ENDED: Multi = Multi::new(
    "UPDATE job_waits SET to_ms = CASE WHEN job_waits.from_ms > v.column2 THEN job_waits.from_ms ELSE v.column2 END
     FROM (VALUES ",
    "(?, ?)",
    ") AS v WHERE job_waits.run_id = v.column1 AND job_waits.to_ms IS NULL",
);
static JOB_STATE: Multi = Multi::new(
    "UPDATE jobs SET state = v.column3,
     started_ms = CASE WHEN v.column3 = 'running' THEN COALESCE(jobs.started_ms, v.column4) ELSE jobs.started_ms END,
     finished_ms = CASE WHEN v.column3 IN ('succeeded', 'failed', 'killed') THEN v.column4 ELSE jobs.finished_ms END
     FROM (VALUES ",
    "(?, ?, ?, ?)",
    ") AS v WHERE jobs.run_id = v.column1 AND jobs.idx = v.column2
     AND jobs.state NOT IN ('succeeded', 'failed', 'killed') RETURNING jobs.run_id, jobs.idx",
);
static TASK_STATE: Multi = Multi::new(
    "UPDATE tasks SET state = v.column5, exit_code = COALESCE(v.column7, tasks.exit_code),
     finished_ms = CASE WHEN v.column5 IN ('succeeded', 'failed', 'killed') THEN v.column6 ELSE tasks.finished_ms END
     FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?)",
    concat!(
        ") AS v WHERE ",
        task_match!(),
        " AND tasks.state NOT IN ('succeeded', 'failed', 'killed')",
        task_returning!()
    ),
);
static TASKS_STARTING: Multi = Multi::new(
    "UPDATE tasks SET state = 'starting', attempts = v.column5, node = v.column6,
     started_ms = COALESCE(tasks.started_ms, v.column7) FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?)",
    concat!(
        ") AS v WHERE ",
        task_match!(),
        " AND tasks.state NOT IN ('succeeded', 'failed', 'killed') AND tasks.attempts < v.column5",
        task_returning!()
    ),
);
static ATTEMPTS_INSERT: Multi = Multi::new(
    "INSERT INTO attempts (run_id, job_idx, stage_idx, task_idx, attempt, cluster, state, node, stdout, stderr,
     started_ms) SELECT v.column1, v.column2, v.column3, v.column4, v.column5, ?, 'starting', v.column6,
     v.column7, v.column8, v.column9 FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    ") AS v WHERE v.column1 IS NOT NULL",
);
static ATTEMPTS_LAUNCHED: Multi = Multi::new(
    "UPDATE attempts SET state = 'running', launched = v.column6 FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?)",
    concat!(") AS v WHERE ", attempt_match!(), " AND attempts.state = 'starting'", attempt_returning!()),
);
static TASKS_RUNNING: Multi = Multi::new(
    "UPDATE tasks SET state = 'running' FROM (VALUES ",
    "(?, ?, ?, ?)",
    concat!(") AS v WHERE ", task_match!(), " AND tasks.state = 'starting'"),
);
static ATTEMPTS_ENDED: Multi = Multi::new(
    "UPDATE attempts SET state = v.column6, exit_code = v.column7, ended_ms = v.column8, reason = v.column9
     FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    concat!(
        ") AS v WHERE ",
        attempt_match!(),
        " AND attempts.state IN ('starting', 'running', 'preempting')",
        attempt_returning!()
    ),
);
/// `running ⇄ preempting` (column 9: the state it moves from).
static ATTEMPTS_PREEMPTING: Multi = Multi::new(
    "UPDATE attempts SET state = v.column6, reason = v.column7, kill_at_ms = v.column8 FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    concat!(") AS v WHERE ", attempt_match!(), " AND attempts.state = v.column9", attempt_returning!()),
);
static TASKS_PREEMPTING: Multi = Multi::new(
    "UPDATE tasks SET state = v.column5 FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?)",
    concat!(") AS v WHERE ", task_match!(), " AND tasks.state = v.column6"),
);
/// Close a job's open spell at `column3` (never before it began).
static WAITS_ENDED: Multi = Multi::new(
    "UPDATE job_waits SET to_ms = CASE WHEN job_waits.from_ms > v.column3 THEN job_waits.from_ms ELSE v.column3 END
     FROM (VALUES ",
    "(?, ?, ?)",
    ") AS v WHERE job_waits.run_id = v.column1 AND job_waits.job_idx = v.column2 AND job_waits.to_ms IS NULL
     RETURNING job_waits.run_id, job_waits.job_idx",
);
static WAITS_INSERT: Multi = Multi::new(
    "INSERT INTO job_waits (run_id, job_idx, from_ms, reason, queue, limit_text, detail)
     SELECT v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7 FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?)",
    ") AS v WHERE v.column1 IS NOT NULL",
);
static USAGE_LAST: Multi = Multi::new(
    "SELECT queue, MAX(end_ms) AS e FROM queue_usage WHERE cluster = ? AND queue IN (",
    "?",
    ") GROUP BY queue",
);
static USAGE_INSERT: Multi = Multi::new(
    "INSERT INTO queue_usage (cluster, queue, start_ms, end_ms, cpu, memory, gpu, running_apps)
     SELECT ?, v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7 FROM (VALUES ",
    "(?, ?, ?, ?, ?, ?, ?)",
    ") AS v WHERE v.column1 IS NOT NULL ON CONFLICT DO NOTHING RETURNING queue",
);
static USAGE_EXTENDED: Multi = Multi::new(
    "UPDATE queue_usage SET end_ms = v.column4 FROM (VALUES ",
    "(?, ?, ?, ?)",
    ") AS v WHERE queue_usage.queue = v.column1 AND queue_usage.start_ms = v.column2
     AND queue_usage.end_ms = v.column3 AND queue_usage.cluster = ? RETURNING queue_usage.queue",
);

/// One group being applied: its changes (by index into the batch) and where their results go.
struct Group<'g> {
    tx: &'g mut Tx,
    dialect: Dialect,
    cluster: &'g str,
    changes: &'g [Change],
    members: &'g [usize],
    applied: &'g mut [bool],
}

impl<'g> Group<'g> {
    /// The group's changes with their indices.
    fn each(&self) -> impl Iterator<Item = (usize, &'g Change)> + 'g {
        let (members, changes) = (self.members, self.changes);
        members.iter().map(move |&i| (i, &changes[i]))
    }

    async fn route(self) -> Result<(), StoreError> {
        let runs: Vec<i64> = self
            .each()
            .filter_map(|(_, c)| if let Change::Route { run, .. } = c { Some(*run) } else { None })
            .collect();
        let rows = exec(self.tx, self.dialect, &ROUTE, &runs, None, None, |q, r| q.bind(r.copied())).await?;
        let routed = counts(&rows, |r| int(r, "id"))?;
        let mut jobs: Vec<(i64, i64, &str)> = Vec::new();
        let mut tasks: Vec<(i64, i64, i64, i64, &str)> = Vec::new();
        let (members, changes) = (self.members, self.changes);
        for &i in members {
            let Change::Route { run, jobs: new, .. } = &changes[i] else { continue };
            let ok = routed.get(run) == Some(&1);
            self.applied[i] = ok;
            if !ok {
                continue;
            }
            for j in new {
                jobs.push((*run, i64::from(j.idx), j.name.as_str()));
                for t in &j.tasks {
                    tasks.push((
                        *run,
                        i64::from(j.idx),
                        i64::from(t.stage_idx),
                        i64::from(t.task_idx),
                        t.stage.as_str(),
                    ));
                }
            }
        }
        exec(self.tx, self.dialect, &JOBS_INSERT, &jobs, None, None, |q, j| {
            q.bind(j.map(|j| j.0)).bind(j.map(|j| j.1)).bind(j.map(|j| j.2.to_string()))
        })
        .await?;
        exec(self.tx, self.dialect, &TASKS_INSERT, &tasks, None, None, |q, t| {
            q.bind(t.map(|t| t.0))
                .bind(t.map(|t| t.1))
                .bind(t.map(|t| t.2))
                .bind(t.map(|t| t.3))
                .bind(t.map(|t| t.4.to_string()))
        })
        .await?;
        Ok(())
    }

    async fn run_state(self) -> Result<(), StoreError> {
        let items: Vec<(usize, i64, &'static str, i64, Option<&str>)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::RunState { run, to, at, reason } => Some((i, *run, *to, *at, reason.as_deref())),
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &RUN_STATE, &items, None, None, |q, c| {
            q.bind(c.map(|c| c.1))
                .bind(c.map(|c| c.2.to_string()))
                .bind(c.map(|c| c.3))
                .bind(c.and_then(|c| c.4.map(str::to_string)))
        })
        .await?;
        let moved = counts(&rows, |r| int(r, "id"))?;
        let mut ended: Vec<(i64, i64)> = Vec::new();
        for &(i, run, to, at, _) in &items {
            let ok = moved.get(&run) == Some(&1);
            self.applied[i] = ok;
            if ok && crate::TERMINAL_RUN_STATES.contains(&to) {
                ended.push((run, at));
            }
        }
        exec(self.tx, self.dialect, &WAITS_RUN_ENDED, &ended, None, None, |q, e| {
            q.bind(e.map(|e| e.0)).bind(e.map(|e| e.1))
        })
        .await?;
        Ok(())
    }

    async fn job_state(self) -> Result<(), StoreError> {
        let items: Vec<(usize, i64, u32, &'static str, i64)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::JobState { run, job, to, at } => Some((i, *run, *job, *to, *at)),
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &JOB_STATE, &items, None, None, |q, c| {
            q.bind(c.map(|c| c.1))
                .bind(c.map(|c| i64::from(c.2)))
                .bind(c.map(|c| c.3.to_string()))
                .bind(c.map(|c| c.4))
        })
        .await?;
        let moved = counts(&rows, |r| Ok((int(r, "run_id")?, int(r, "idx")?)))?;
        for &(i, run, job, _, _) in &items {
            self.applied[i] = moved.get(&(run, i64::from(job))) == Some(&1);
        }
        Ok(())
    }

    async fn task_state(self) -> Result<(), StoreError> {
        let items: Vec<(usize, TaskKey, &'static str, i64, Option<i32>)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::TaskState { task, to, at, exit_code } => Some((i, *task, *to, *at, *exit_code)),
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &TASK_STATE, &items, None, None, |q, c| {
            bind_task(q, c.map(|c| &c.1))
                .bind(c.map(|c| c.2.to_string()))
                .bind(c.map(|c| c.3))
                .bind(c.and_then(|c| c.4.map(i64::from)))
        })
        .await?;
        let moved = counts(&rows, task_key)?;
        for &(i, task, ..) in &items {
            self.applied[i] = moved.get(&task) == Some(&1);
        }
        Ok(())
    }

    async fn attempt_starting(self) -> Result<(), StoreError> {
        let items: Vec<(usize, AttemptKey, &str, &str, &str, i64)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::AttemptStarting { key, node, stdout, stderr, at } => {
                    Some((i, *key, node.as_str(), stdout.as_str(), stderr.as_str(), *at))
                }
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &TASKS_STARTING, &items, None, None, |q, c| {
            bind_attempt(q, c.map(|c| &c.1)).bind(c.map(|c| c.2.to_string())).bind(c.map(|c| c.5))
        })
        .await?;
        let moved = counts(&rows, task_key)?;
        let mut started = Vec::with_capacity(items.len());
        for c in &items {
            let ok = moved.get(&c.1.task) == Some(&1);
            self.applied[c.0] = ok;
            if ok {
                started.push(c);
            }
        }
        exec(self.tx, self.dialect, &ATTEMPTS_INSERT, &started, Some(self.cluster), None, |q, c| {
            bind_attempt(q, c.map(|c| &c.1))
                .bind(c.map(|c| c.2.to_string()))
                .bind(c.map(|c| c.3.to_string()))
                .bind(c.map(|c| c.4.to_string()))
                .bind(c.map(|c| c.5))
        })
        .await?;
        Ok(())
    }

    async fn attempt_launched(self) -> Result<(), StoreError> {
        let items: Vec<(usize, AttemptKey, &str)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::AttemptLaunched { key, launched, .. } => Some((i, *key, launched.as_str())),
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &ATTEMPTS_LAUNCHED, &items, None, None, |q, c| {
            bind_attempt(q, c.map(|c| &c.1)).bind(c.map(|c| c.2.to_string()))
        })
        .await?;
        let moved = counts(&rows, attempt_key)?;
        let mut tasks = Vec::with_capacity(items.len());
        for &(i, key, _) in &items {
            let ok = moved.get(&key) == Some(&1);
            self.applied[i] = ok;
            if ok {
                tasks.push(key.task);
            }
        }
        exec(self.tx, self.dialect, &TASKS_RUNNING, &tasks, None, None, bind_task).await?;
        Ok(())
    }

    async fn attempt_ended(self) -> Result<(), StoreError> {
        type Item<'a> = (usize, AttemptKey, &'static str, Option<i32>, i64, Option<&'a str>);
        let items: Vec<Item<'_>> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::AttemptEnded { key, to, exit_code, at, reason } => {
                    Some((i, *key, *to, *exit_code, *at, reason.as_deref()))
                }
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &ATTEMPTS_ENDED, &items, None, None, |q, c| {
            bind_attempt(q, c.map(|c| &c.1))
                .bind(c.map(|c| c.2.to_string()))
                .bind(c.and_then(|c| c.3.map(i64::from)))
                .bind(c.map(|c| c.4))
                .bind(c.and_then(|c| c.5.map(str::to_string)))
        })
        .await?;
        let moved = counts(&rows, attempt_key)?;
        for &(i, key, ..) in &items {
            self.applied[i] = moved.get(&key) == Some(&1);
        }
        Ok(())
    }

    async fn attempt_preempting(self) -> Result<(), StoreError> {
        // (index, attempt, from, to, reason, kill time)
        type Item<'a> = (usize, AttemptKey, &'static str, &'static str, Option<&'a str>, Option<i64>);
        let items: Vec<Item<'_>> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::AttemptPreempting { key, warning } => {
                    let (from, to) =
                        if warning.is_some() { ("running", "preempting") } else { ("preempting", "running") };
                    let w = warning.as_ref();
                    Some((i, *key, from, to, w.map(|w| w.reason.as_str()), w.map(|w| w.kill_at_ms)))
                }
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &ATTEMPTS_PREEMPTING, &items, None, None, |q, c| {
            bind_attempt(q, c.map(|c| &c.1))
                .bind(c.map(|c| c.3.to_string()))
                .bind(c.and_then(|c| c.4.map(str::to_string)))
                .bind(c.and_then(|c| c.5))
                .bind(c.map(|c| c.2.to_string()))
        })
        .await?;
        let moved = counts(&rows, attempt_key)?;
        let mut tasks: Vec<(TaskKey, &'static str, &'static str)> = Vec::with_capacity(items.len());
        for &(i, key, from, to, ..) in &items {
            let ok = moved.get(&key) == Some(&1);
            self.applied[i] = ok;
            if ok {
                tasks.push((key.task, to, from));
            }
        }
        exec(self.tx, self.dialect, &TASKS_PREEMPTING, &tasks, None, None, |q, t| {
            bind_task(q, t.map(|t| &t.0)).bind(t.map(|t| t.1.to_string())).bind(t.map(|t| t.2.to_string()))
        })
        .await?;
        Ok(())
    }

    async fn wait_began(self) -> Result<(), StoreError> {
        let items: Vec<(usize, &crate::WaitRow)> = self
            .each()
            .filter_map(|(i, c)| if let Change::WaitBegan(w) = c { Some((i, w)) } else { None })
            .collect();
        let close: Vec<(i64, u32, i64)> =
            items.iter().map(|(_, w)| (w.run_id, w.job_idx, w.from_ms)).collect();
        exec(self.tx, self.dialect, &WAITS_ENDED, &close, None, None, |q, c| {
            q.bind(c.map(|c| c.0)).bind(c.map(|c| i64::from(c.1))).bind(c.map(|c| c.2))
        })
        .await?;
        exec(self.tx, self.dialect, &WAITS_INSERT, &items, None, None, |q, c| {
            let w = c.map(|c| c.1);
            q.bind(w.map(|w| w.run_id))
                .bind(w.map(|w| i64::from(w.job_idx)))
                .bind(w.map(|w| w.from_ms))
                .bind(w.map(|w| w.reason.clone()))
                .bind(w.map(|w| w.queue.clone()))
                .bind(w.map(|w| w.limit.clone()))
                .bind(w.map(|w| w.detail.clone()))
        })
        .await?;
        // An insert always adds its row.
        for (i, _) in items {
            self.applied[i] = true;
        }
        Ok(())
    }

    async fn wait_ended(self) -> Result<(), StoreError> {
        let items: Vec<(usize, i64, u32, i64)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::WaitEnded { run, job, at } => Some((i, *run, *job, *at)),
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &WAITS_ENDED, &items, None, None, |q, c| {
            q.bind(c.map(|c| c.1)).bind(c.map(|c| i64::from(c.2))).bind(c.map(|c| c.3))
        })
        .await?;
        let closed = counts(&rows, |r| Ok((int(r, "run_id")?, int(r, "job_idx")?)))?;
        for &(i, run, job, _) in &items {
            self.applied[i] = closed.get(&(run, i64::from(job))) == Some(&1);
        }
        Ok(())
    }

    async fn usage(self) -> Result<(), StoreError> {
        let items: Vec<(usize, &crate::UsageRow)> = self
            .each()
            .filter_map(|(i, c)| if let Change::Usage(u) = c { Some((i, u)) } else { None })
            .collect();
        let queues: Vec<&str> = items.iter().map(|(_, u)| u.queue.as_str()).collect();
        let rows = exec(self.tx, self.dialect, &USAGE_LAST, &queues, Some(self.cluster), None, |q, name| {
            q.bind(name.map(|n| n.to_string()))
        })
        .await?;
        let mut last: HashMap<String, Option<i64>> = HashMap::with_capacity(rows.len());
        for r in &rows {
            last.insert(text(r, "queue")?, opt_int(r, "e")?);
        }
        // A start before the queue's last row's end moves up to it; what is left empty is not
        // written (and did not apply).
        let mut rows_in: Vec<(&str, i64, &crate::UsageRow)> = Vec::with_capacity(items.len());
        for &(_, u) in &items {
            let start = last.get(&u.queue).copied().flatten().map_or(u.start_ms, |e| e.max(u.start_ms));
            if start < u.end_ms {
                rows_in.push((u.queue.as_str(), start, u));
            }
        }
        let rows = exec(self.tx, self.dialect, &USAGE_INSERT, &rows_in, Some(self.cluster), None, |q, c| {
            q.bind(c.map(|c| c.0.to_string()))
                .bind(c.map(|c| c.1))
                .bind(c.map(|c| c.2.end_ms))
                .bind(c.map(|c| c.2.cpu))
                .bind(c.map(|c| c.2.memory))
                .bind(c.map(|c| c.2.gpu))
                .bind(c.map(|c| c.2.running_apps))
        })
        .await?;
        let inserted = counts(&rows, |r| text(r, "queue"))?;
        for &(i, u) in &items {
            self.applied[i] = inserted.get(&u.queue) == Some(&1);
        }
        Ok(())
    }

    async fn usage_extended(self) -> Result<(), StoreError> {
        let items: Vec<(usize, &str, i64, i64, i64)> = self
            .each()
            .filter_map(|(i, c)| match c {
                Change::UsageExtended { queue, start_ms, old_end_ms, end_ms } => {
                    Some((i, queue.as_str(), *start_ms, *old_end_ms, *end_ms))
                }
                _ => None,
            })
            .collect();
        let rows = exec(self.tx, self.dialect, &USAGE_EXTENDED, &items, None, Some(self.cluster), |q, c| {
            q.bind(c.map(|c| c.1.to_string())).bind(c.map(|c| c.2)).bind(c.map(|c| c.3)).bind(c.map(|c| c.4))
        })
        .await?;
        let moved = counts(&rows, |r| text(r, "queue"))?;
        for &(i, queue, ..) in &items {
            self.applied[i] = moved.get(queue) == Some(&1);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::CHUNKS;
    use crate::worker::{NewJob, NewTask};

    fn task(run: i64, task: u32) -> TaskKey {
        TaskKey { run, job: 0, stage: 0, task }
    }

    fn kinds(changes: &[Change]) -> Vec<(Kind, Vec<usize>)> {
        plan(changes)
    }

    #[test]
    fn parts_fill_the_smallest_size_and_pad_the_rest() {
        assert_eq!(parts(0), vec![]);
        assert_eq!(parts(1), vec![(0, 1, 1)]);
        assert_eq!(parts(3), vec![(0, 3, 4)]);
        assert_eq!(parts(5), vec![(0, 5, 16)]);
        assert_eq!(parts(64), vec![(0, 64, 64)]);
        assert_eq!(parts(130), vec![(0, 64, 64), (64, 64, 64), (128, 2, 4)]);
        assert!(SIZES.iter().all(|s| CHUNKS.contains(s)));
    }

    #[test]
    fn one_task_runs_of_a_pass_share_one_group_per_kind() {
        let mut changes = Vec::new();
        for run in 1..=3 {
            let key = AttemptKey { task: task(run, 0), attempt: 1 };
            changes.push(Change::Route {
                run,
                jobs: vec![NewJob {
                    idx: 0,
                    name: "j".into(),
                    tasks: vec![NewTask { stage_idx: 0, task_idx: 0, stage: "s".into() }],
                }],
                at: 1,
            });
            changes.push(Change::AttemptStarting {
                key,
                node: "n".into(),
                stdout: "o".into(),
                stderr: "e".into(),
                at: 1,
            });
            changes.push(Change::JobState { run, job: 0, to: "running", at: 1 });
            changes.push(Change::RunState { run, to: "running", at: 1, reason: None });
        }
        let groups = kinds(&changes);
        assert_eq!(
            groups,
            vec![
                (Kind::Route, vec![0, 4, 8]),
                (Kind::AttemptStarting, vec![1, 5, 9]),
                (Kind::JobState, vec![2, 6, 10]),
                (Kind::RunState, vec![3, 7, 11]),
            ]
        );
    }

    #[test]
    fn changes_on_one_row_stay_in_order_and_apart() {
        let key = AttemptKey { task: task(1, 0), attempt: 1 };
        let ended = Change::AttemptEnded { key, to: "failed", exit_code: Some(1), at: 2, reason: None };
        let changes = vec![
            ended.clone(),
            Change::TaskState { task: key.task, to: "failed", at: 2, exit_code: Some(1) },
            ended,
            // Another task of the same run does not wait for them.
            Change::AttemptEnded {
                key: AttemptKey { task: task(1, 1), attempt: 1 },
                to: "succeeded",
                exit_code: Some(0),
                at: 2,
                reason: None,
            },
        ];
        assert_eq!(
            kinds(&changes),
            vec![(Kind::AttemptEnded, vec![0, 3]), (Kind::TaskState, vec![1]), (Kind::AttemptEnded, vec![2])]
        );
    }

    #[test]
    fn a_terminal_run_state_comes_after_its_runs_spells_and_before_later_ones() {
        let wait = |job, from_ms| {
            Change::WaitBegan(crate::WaitRow {
                run_id: 1,
                job_idx: job,
                from_ms,
                to_ms: None,
                reason: "no_room".into(),
                queue: String::new(),
                limit: String::new(),
                detail: String::new(),
            })
        };
        let changes = vec![
            wait(0, 1),
            Change::RunState { run: 1, to: "running", at: 1, reason: None },
            Change::RunState { run: 2, to: "killed", at: 1, reason: None },
            wait(1, 1),
            Change::RunState { run: 1, to: "killed", at: 2, reason: None },
            Change::WaitEnded { run: 1, job: 0, at: 3 },
        ];
        assert_eq!(
            kinds(&changes),
            vec![
                (Kind::WaitBegan, vec![0, 3]),
                (Kind::RunState, vec![1, 2]),
                (Kind::RunState, vec![4]),
                (Kind::WaitEnded, vec![5]),
            ]
        );
    }
}
