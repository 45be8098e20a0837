//! [`JobStore`]: the store as the server sees it — the contract every implementation keeps.
//!
//! The server (its service layer and its worker) holds an `Arc<dyn JobStore>` and never names
//! an implementation; the binary opens one ([`Store`](crate::Store): SQLite or PostgreSQL
//! through one code path) and hands it over. Methods return boxed futures so that the trait is
//! object-safe, as weir-backend's `Backend` is.
//!
//! Three kinds of guarantee are stated method by method:
//! - **Atomicity.** Every write is one transaction: all of it or nothing. A write that returns
//!   an error changed nothing, whatever the error.
//! - **Fencing.** Every write of a worker acting for a cluster ([`JobStore::apply`],
//!   [`JobStore::publish_snapshot`]) first checks, in the same transaction, that the caller's
//!   [`Fence`] (lease owner and fencing number) is still the cluster's current one, and renews
//!   the lease. A stale owner gets [`StoreError::LeaseLost`] and wrote nothing.
//! - **Compare-and-set.** State changes apply only if the state they start from still holds
//!   ("`UPDATE … WHERE state = 'queued'`"). One whose precondition failed is skipped and reported
//!   as not applied, never forced and never an error: someone else moved the row first, so two
//!   workers can never both start one task.
//!
//! Reads see committed data only; a read is not a lock (what makes a worker's claim exclusive
//! is its lease and the compare-and-set in its fenced batch, not the read that found the work).

use std::future::Future;
use std::pin::Pin;

use crate::{
    ActiveRun, AdviceRow, Approval, AttemptDuration, AttemptRow, AttemptSpan, AuditEntry, AuditFilter,
    AuditRow, Change, ClusterRow, ConfigChange, ConfigVersionRow, DryRunVerdictRow, Fence, JobRow,
    KillOutcome, Lease, MigrationApproval, NewRun, PlanApplied, PreemptionRow, ProposalRow, RouteRow,
    RunCount, RunFilter, RunRecordRow, RunRow, RunWaitRow, SessionRow, SloDecisionRow, SnapshotRow,
    StoreError, Submitted, TaskCount, TaskRow, TokenRow, UsageRow, WaitRow,
};

/// A boxed future, so that [`JobStore`] stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The job store: runs, jobs, tasks, task attempts (the outbox), cluster leases, tokens, routes,
/// registered workflows, cluster configurations and queue snapshots. See the module
/// documentation for the atomicity, fencing and compare-and-set guarantees every
/// implementation keeps.
///
/// Errors: [`StoreError::is_unavailable`] tells "the database is unreachable or failing"
/// (retrying later may help; the API answers 503) from everything else.
pub trait JobStore: Send + Sync {
    /// Which database this is (`"sqlite"`, `"postgres"`), for logs and benchmarks.
    fn kind(&self) -> &'static str;

    /// The store answers a trivial query (`/readyz`). Writes nothing.
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>>;

    // ---- Runs, as the service layer sees them ----

    /// Stores a batch of submissions (group commit). **One transaction: all or nothing** —
    /// either every run of the batch is stored with its idempotency record, or none is.
    ///
    /// Within the batch each submission is checked in order, against earlier ones of the same
    /// batch too: an unexpired idempotency record for its key answers [`Submitted::Replay`]
    /// with the first answer if the request is the same (same [`NewRun::request_hash`]), and
    /// [`Submitted::KeyReused`] if not; an active (non-terminal) run of the same project
    /// holding the same (workflow, logical date) answers [`Submitted::Conflict`]; otherwise the
    /// run is created `queued` ([`Submitted::Created`]) with its listing scopes. At most one
    /// active run per (project, workflow, logical date) exists at any moment, whatever the
    /// concurrency (a unique key, not a read followed by a write). Each submission's audit
    /// entry is written in the same transaction.
    fn submit<'a>(&'a self, runs: &'a [NewRun]) -> BoxFuture<'a, Result<Vec<Submitted>, StoreError>>;

    /// One run without its jobs, `None` if there is no such run.
    fn run(&self, id: i64) -> BoxFuture<'_, Result<Option<RunRow>, StoreError>>;

    /// A run's jobs in index order (none until a worker routed the run).
    fn jobs(&self, run: i64) -> BoxFuture<'_, Result<Vec<JobRow>, StoreError>>;

    /// A run's tasks ordered by (job, stage, task).
    fn tasks(&self, run: i64) -> BoxFuture<'_, Result<Vec<TaskRow>, StoreError>>;

    /// Every attempt of one task, oldest first.
    fn attempts(
        &self,
        run: i64,
        job: u32,
        stage: u32,
        task: u32,
    ) -> BoxFuture<'_, Result<Vec<AttemptRow>, StoreError>>;

    /// Runs matching `filter`, newest first (by id), at most `filter.limit`; `filter.before` is
    /// the paging cursor (ids below it).
    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<Vec<RunRow>, StoreError>>;

    /// Asks for a run to be killed. One transaction. A `queued` run is killed at once by
    /// compare-and-set on its state (a worker claiming it at the same moment either routes it
    /// first — then the kill is only requested — or finds it killed); a run a worker holds is
    /// marked for its worker to stop; a finished run is left alone.
    fn request_kill(&self, id: i64, now_ms: i64) -> BoxFuture<'_, Result<KillOutcome, StoreError>>;

    /// Forgets idempotency records created before `before_ms`; returns how many. One
    /// transaction.
    fn expire_idempotency(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>>;

    // ---- The worker's side: leases, claims, recovery, fenced batches ----

    /// Takes the lease on `cluster` until `now_ms + lease_ms` if it is free, expired, or
    /// already `owner`'s. One transaction. The fencing number moves on with every grant, so a
    /// previous holder's [`Fence`] stops working at once. `None`: another owner holds it.
    /// `dead_owner`, when given, is an earlier owner the caller knows has stopped (the same
    /// data directory's previous process, gone): its lease is taken at once, not after expiry.
    fn acquire_lease<'a>(
        &'a self,
        cluster: &'a str,
        owner: &'a str,
        dead_owner: Option<&'a str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Fence>, StoreError>>;

    /// Gives the lease up (a clean stop), so that another worker need not wait for it to
    /// expire. Only if `fence` is still current; otherwise nothing changes.
    fn release_lease<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The current holder, fencing number and expiry of a cluster's lease, if it ever had one.
    fn lease<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Option<Lease>, StoreError>>;

    /// Up to `limit` queued runs of the cluster, oldest first. A read, not a claim: the claim
    /// is the compare-and-set [`Change::Route`] in the owner's fenced [`JobStore::apply`].
    fn queued_runs<'a>(
        &'a self,
        cluster: &'a str,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<RunRow>, StoreError>>;

    /// Every routed, unfinished run of the cluster with its jobs, tasks, open attempts
    /// (`starting` or `running`) and failed-attempt counts: what a new owner rebuilds from.
    fn active_runs<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Vec<ActiveRun>, StoreError>>;

    /// Unfinished runs of the cluster whose kill was requested.
    fn kill_requests<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Vec<i64>, StoreError>>;

    /// Applies a worker's batch. **One transaction: all or nothing**, **fenced**: it first
    /// checks `fence` is the cluster's current lease and renews it to `lease_until_ms`
    /// ([`StoreError::LeaseLost`] otherwise, and nothing was written). Each [`Change`] is a
    /// **compare-and-set** (its documentation states the precondition); the result says, per
    /// change in order, whether it applied. A change that did not apply wrote nothing.
    fn apply<'a>(
        &'a self,
        fence: &'a Fence,
        lease_until_ms: i64,
        changes: &'a [Change],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>>;

    /// Replaces the cluster's queue snapshot (JSON). **Fenced** like [`JobStore::apply`], one
    /// transaction.
    fn publish_snapshot<'a>(
        &'a self,
        fence: &'a Fence,
        lease_until_ms: i64,
        body: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Every cluster's latest queue snapshot, by cluster name.
    fn snapshots(&self) -> BoxFuture<'_, Result<Vec<SnapshotRow>, StoreError>>;

    // ---- Tokens, routes, registered workflows, cluster configurations ----

    /// Stores a new token (its hash, never the secret). One transaction; a duplicate id or
    /// hash is an error and stores nothing.
    fn create_token<'a>(&'a self, token: &'a TokenRow) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The token with this hash, revoked or not.
    fn token_by_hash<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<TokenRow>, StoreError>>;

    /// Every token, oldest first.
    fn tokens(&self) -> BoxFuture<'_, Result<Vec<TokenRow>, StoreError>>;

    /// Revokes a live token (compare-and-set: not yet revoked) and deletes its dashboard
    /// sessions, in one transaction; `false` if there is no live token with this id.
    fn revoke_token<'a>(&'a self, id: &'a str, now_ms: i64) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Stores a dashboard session (hashes only) and forgets every session expired by its
    /// `created_ms`. One transaction; a duplicate id hash is an error and stores nothing.
    fn create_session<'a>(&'a self, session: &'a SessionRow) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The session with this id hash, if it has not expired at `now_ms`.
    fn session<'a>(
        &'a self,
        id_hash: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<SessionRow>, StoreError>>;

    /// Ends a session (logout); `false` if there was none. One transaction.
    fn delete_session<'a>(&'a self, id_hash: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// The routing table, by key.
    fn routes(&self) -> BoxFuture<'_, Result<Vec<RouteRow>, StoreError>>;

    /// Creates or replaces one route. One transaction.
    fn put_route<'a>(&'a self, route: &'a RouteRow, now_ms: i64) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Deletes one route; `false` if there was none.
    fn delete_route<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Registers (or replaces) a project's workflow by name (JSON in the workload-file
    /// schema). One transaction. Another project's workflow of the same name is untouched.
    fn put_workflow<'a>(
        &'a self,
        project: &'a str,
        name: &'a str,
        spec: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Every registered workflow of this name, as (project, JSON), by project. Workflows
    /// registered before they were kept per project have the project their JSON names, or ``.
    fn workflows_named<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>>;

    /// One page of a run's tasks in (job, stage, task) order: those after `after` (exclusive),
    /// at most `limit`.
    fn tasks_page<'a>(
        &'a self,
        run: i64,
        after: Option<(u32, u32, u32)>,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<TaskRow>, StoreError>>;

    /// A run's tasks counted by (job, stage, state).
    fn task_counts(&self, run: i64) -> BoxFuture<'_, Result<Vec<TaskCount>, StoreError>>;

    /// Runs of `project` (exactly) that have not started yet (`queued`, `routed`, `waiting`).
    fn waiting_runs<'a>(&'a self, project: &'a str) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Appends one entry to the audit log. One transaction.
    fn append_audit<'a>(&'a self, entry: &'a AuditEntry) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Audit entries matching `filter`, newest first.
    fn audit<'a>(&'a self, filter: &'a AuditFilter) -> BoxFuture<'a, Result<Vec<AuditRow>, StoreError>>;

    /// Stores a cluster's configuration (the cluster file's text) and returns its version.
    /// One transaction; the version moves on only if the text changed, so owners reload only
    /// on a real change.
    /// A new version is recorded in the configuration history with `change`.
    fn put_cluster<'a>(
        &'a self,
        name: &'a str,
        config: &'a str,
        change: &'a ConfigChange,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<i64, StoreError>>;

    /// Every cluster's configuration, by name.
    fn clusters(&self) -> BoxFuture<'_, Result<Vec<ClusterRow>, StoreError>>;

    /// One cluster's configuration.
    fn cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<ClusterRow>, StoreError>>;
    // ---- History, reports and the plan → apply loop (history.rs) ----
    // Usage rows and preemptions are written by the owning worker inside its fenced
    // [`JobStore::apply`] batches (`Change::Usage`, `Change::UsageExtended`,
    // `Change::Preempted`); these read them.

    /// Usage rows of `cluster` overlapping `[since_ms, until_ms)`, by queue then start. Rows
    /// of one queue never overlap.
    fn usage<'a>(
        &'a self,
        cluster: &'a str,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<UsageRow>, StoreError>>;

    /// Runs submitted in `[since_ms, until_ms)`, of one cluster or all, oldest first.
    /// `scope`: only runs of that project and its sub-projects (an index range, not a scan of
    /// every project's runs).
    fn run_records<'a>(
        &'a self,
        cluster: Option<&'a str>,
        scope: Option<&'a str>,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<RunRecordRow>, StoreError>>;

    /// How long every successful attempt of the runs of `cluster` submitted in
    /// `[since_ms, until_ms)` ran: what a replay draws task durations from.
    fn attempt_durations<'a>(
        &'a self,
        cluster: &'a str,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<AttemptDuration>, StoreError>>;

    /// [`JobStore::attempt_durations`] of the successful runs of one workflow only: what the
    /// SLO controller's profile of the workflow is built from.
    fn workflow_attempt_durations<'a>(
        &'a self,
        cluster: &'a str,
        workflow: &'a str,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<AttemptDuration>, StoreError>>;

    /// Every attempt of runs submitted in `[since_ms, until_ms)` with the run's user and
    /// project, at most `limit`: what usage per user is counted from.
    fn attempt_spans(
        &self,
        since_ms: i64,
        until_ms: i64,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<AttemptSpan>, StoreError>>;

    /// Runs by (project, tier, state): those submitted since `since_ms` and every run not yet
    /// ended.
    fn run_counts(&self, since_ms: i64) -> BoxFuture<'_, Result<Vec<RunCount>, StoreError>>;

    /// Preemptions of one cluster or all since `since_ms`, newest first, at most `limit`.
    fn preemptions<'a>(
        &'a self,
        cluster: Option<&'a str>,
        since_ms: i64,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<PreemptionRow>, StoreError>>;

    /// The run's waiting spells, by job, then in time order (the worker writes them with
    /// [`Change::WaitBegan`] and [`Change::WaitEnded`]; a run's end closes its open ones).
    fn waits(&self, run: i64) -> BoxFuture<'_, Result<Vec<WaitRow>, StoreError>>;

    /// The SLO controller's decisions for the run, by job, in time order (the worker writes
    /// them with [`Change::SloDecision`]).
    fn slo_decisions(&self, run: i64) -> BoxFuture<'_, Result<Vec<SloDecisionRow>, StoreError>>;

    /// The model the controller of the run's job `job` was built from (written with
    /// [`Change::SloModel`]), if any.
    fn slo_model(&self, run: i64, job: u32) -> BoxFuture<'_, Result<Option<crate::SloModelRow>, StoreError>>;

    /// The durations of the run's succeeded attempts of job `job`, by stage and task.
    fn succeeded_attempt_ms(
        &self,
        run: i64,
        job: u32,
    ) -> BoxFuture<'_, Result<Vec<crate::MeasuredAttempt>, StoreError>>;

    /// Stores a stage's job commit state (docs/commit.md), replacing the earlier row of the
    /// same run, job and stage. **Fenced**: refused with `LeaseLost` (nothing written) once
    /// `fence` no longer holds its cluster's lease; one transaction.
    fn put_job_commit<'a>(
        &'a self,
        fence: &'a Fence,
        row: &'a crate::JobCommitRow,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The run's job commits, by job and stage.
    fn job_commits(&self, run: i64) -> BoxFuture<'_, Result<Vec<crate::JobCommitRow>, StoreError>>;

    /// Waiting spells of the runs submitted since `since_ms`, with their runs, newest runs
    /// first, at most `limit` spells.
    fn waits_since(&self, since_ms: i64, limit: u32) -> BoxFuture<'_, Result<Vec<RunWaitRow>, StoreError>>;

    /// Applies a plan: the cluster's configuration becomes `config` and the routes to it become
    /// exactly `routes`. **One transaction: all or nothing**, **compare-and-set** on the
    /// configuration version: a cluster no longer at `base_version` is left alone
    /// ([`PlanApplied::Stale`]). The version moves on only if the text changed.
    fn apply_plan<'a>(
        &'a self,
        cluster: &'a str,
        base_version: i64,
        config: &'a str,
        routes: &'a [RouteRow],
        change: &'a ConfigChange,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<PlanApplied, StoreError>>;

    /// The recorded versions of a cluster's configuration (who, when, from what, the diff),
    /// newest first.
    fn config_versions<'a>(
        &'a self,
        cluster: &'a str,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<ConfigVersionRow>, StoreError>>;

    /// One recorded version of a cluster's configuration.
    fn config_version<'a>(
        &'a self,
        cluster: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Option<ConfigVersionRow>, StoreError>>;

    /// When the store began recording a cluster: its first configuration version, usage row or
    /// run, whichever is earliest; `None` if nothing of it is recorded.
    fn recording_since<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Option<i64>, StoreError>>;

    /// Stores a proposal in its state; the cluster's earlier waiting proposals become
    /// `superseded`. One transaction. Returns the new id.
    fn put_proposal<'a>(&'a self, proposal: &'a ProposalRow) -> BoxFuture<'a, Result<i64, StoreError>>;

    /// The newest proposals of one cluster or all, newest first.
    fn proposals<'a>(
        &'a self,
        cluster: Option<&'a str>,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<ProposalRow>, StoreError>>;

    fn proposal(&self, id: i64) -> BoxFuture<'_, Result<Option<ProposalRow>, StoreError>>;

    /// Compare-and-set a proposal from `proposed` to `to`; `false` if it was no longer waiting.
    fn decide_proposal<'a>(
        &'a self,
        id: i64,
        to: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// When the cluster's newest proposal was made.
    fn last_proposal_ms<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Option<i64>, StoreError>>;

    /// Stores the balancing advisor's advice. Returns its id.
    fn put_advice<'a>(&'a self, advice: &'a AdviceRow) -> BoxFuture<'a, Result<i64, StoreError>>;

    /// The newest advice, if any.
    fn latest_advice(&self) -> BoxFuture<'_, Result<Option<AdviceRow>, StoreError>>;

    /// Records a dry-run's verdict in the migration table, or replaces the verdict of the
    /// same run (recorded again after a crash); an approval already given is kept. One
    /// transaction. Returns the row's id.
    fn record_dry_run_verdict<'a>(
        &'a self,
        verdict: &'a DryRunVerdictRow,
    ) -> BoxFuture<'a, Result<i64, StoreError>>;

    /// The dry-runs of `cluster` that are over and have no verdict yet, oldest first (a server
    /// stopped between a dry-run's end and its verdict; recovery records them).
    fn dry_runs_without_verdict<'a>(
        &'a self,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Vec<RunRow>, StoreError>>;

    /// The migration table, newest verdicts first: one workflow's, or every workflow's.
    fn dry_run_verdicts<'a>(
        &'a self,
        workflow: Option<&'a str>,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<DryRunVerdictRow>, StoreError>>;

    /// Approves moving a workflow to a cluster: its newest verdict there must exist and not
    /// be `different`; then the approval, the route `workflow:NAME` (to the cluster and the
    /// dry-run's queue) and an audit row commit in one transaction. Otherwise nothing changes.
    fn approve_migration<'a>(
        &'a self,
        approval: &'a MigrationApproval,
    ) -> BoxFuture<'a, Result<Approval, StoreError>>;
}

/// The SQLite/PostgreSQL store keeps the contract through one code path; the inherent methods
/// (in `runs.rs`, `worker.rs`, `auth.rs`) hold the SQL.
impl JobStore for crate::Store {
    fn kind(&self) -> &'static str {
        match self.dialect() {
            crate::Dialect::Sqlite => "sqlite",
            crate::Dialect::Postgres => "postgres",
        }
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(crate::Store::ping(self))
    }

    fn submit<'a>(&'a self, runs: &'a [NewRun]) -> BoxFuture<'a, Result<Vec<Submitted>, StoreError>> {
        Box::pin(crate::Store::submit(self, runs))
    }

    fn run(&self, id: i64) -> BoxFuture<'_, Result<Option<RunRow>, StoreError>> {
        Box::pin(crate::Store::run(self, id))
    }

    fn jobs(&self, run: i64) -> BoxFuture<'_, Result<Vec<JobRow>, StoreError>> {
        Box::pin(crate::Store::jobs(self, run))
    }

    fn tasks(&self, run: i64) -> BoxFuture<'_, Result<Vec<TaskRow>, StoreError>> {
        Box::pin(crate::Store::tasks(self, run))
    }

    fn attempts(
        &self,
        run: i64,
        job: u32,
        stage: u32,
        task: u32,
    ) -> BoxFuture<'_, Result<Vec<AttemptRow>, StoreError>> {
        Box::pin(crate::Store::attempts(self, run, job, stage, task))
    }

    fn list_runs<'a>(&'a self, filter: &'a RunFilter) -> BoxFuture<'a, Result<Vec<RunRow>, StoreError>> {
        Box::pin(crate::Store::list_runs(self, filter))
    }

    fn request_kill(&self, id: i64, now_ms: i64) -> BoxFuture<'_, Result<KillOutcome, StoreError>> {
        Box::pin(crate::Store::request_kill(self, id, now_ms))
    }

    fn expire_idempotency(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(crate::Store::expire_idempotency(self, before_ms))
    }

    fn acquire_lease<'a>(
        &'a self,
        cluster: &'a str,
        owner: &'a str,
        dead_owner: Option<&'a str>,
        now_ms: i64,
        lease_ms: i64,
    ) -> BoxFuture<'a, Result<Option<Fence>, StoreError>> {
        Box::pin(crate::Store::acquire_lease(self, cluster, owner, dead_owner, now_ms, lease_ms))
    }

    fn release_lease<'a>(&'a self, fence: &'a Fence) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::release_lease(self, fence))
    }

    fn lease<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Option<Lease>, StoreError>> {
        Box::pin(crate::Store::lease(self, cluster))
    }

    fn queued_runs<'a>(
        &'a self,
        cluster: &'a str,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<RunRow>, StoreError>> {
        Box::pin(crate::Store::queued_runs(self, cluster, limit))
    }

    fn active_runs<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Vec<ActiveRun>, StoreError>> {
        Box::pin(crate::Store::active_runs(self, cluster))
    }

    fn kill_requests<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Vec<i64>, StoreError>> {
        Box::pin(crate::Store::kill_requests(self, cluster))
    }

    fn apply<'a>(
        &'a self,
        fence: &'a Fence,
        lease_until_ms: i64,
        changes: &'a [Change],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>> {
        Box::pin(crate::Store::apply(self, fence, lease_until_ms, changes))
    }

    fn publish_snapshot<'a>(
        &'a self,
        fence: &'a Fence,
        lease_until_ms: i64,
        body: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::publish_snapshot(self, fence, lease_until_ms, body, now_ms))
    }

    fn snapshots(&self) -> BoxFuture<'_, Result<Vec<SnapshotRow>, StoreError>> {
        Box::pin(crate::Store::snapshots(self))
    }

    fn create_token<'a>(&'a self, token: &'a TokenRow) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::create_token(self, token))
    }

    fn token_by_hash<'a>(&'a self, hash: &'a str) -> BoxFuture<'a, Result<Option<TokenRow>, StoreError>> {
        Box::pin(crate::Store::token_by_hash(self, hash))
    }

    fn tokens(&self) -> BoxFuture<'_, Result<Vec<TokenRow>, StoreError>> {
        Box::pin(crate::Store::tokens(self))
    }

    fn revoke_token<'a>(&'a self, id: &'a str, now_ms: i64) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(crate::Store::revoke_token(self, id, now_ms))
    }

    fn create_session<'a>(&'a self, session: &'a SessionRow) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::create_session(self, session))
    }

    fn session<'a>(
        &'a self,
        id_hash: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<Option<SessionRow>, StoreError>> {
        Box::pin(crate::Store::session(self, id_hash, now_ms))
    }

    fn delete_session<'a>(&'a self, id_hash: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(crate::Store::delete_session(self, id_hash))
    }

    fn routes(&self) -> BoxFuture<'_, Result<Vec<RouteRow>, StoreError>> {
        Box::pin(crate::Store::routes(self))
    }

    fn put_route<'a>(&'a self, route: &'a RouteRow, now_ms: i64) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::put_route(self, route, now_ms))
    }

    fn delete_route<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(crate::Store::delete_route(self, key))
    }

    fn put_workflow<'a>(
        &'a self,
        project: &'a str,
        name: &'a str,
        spec: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::put_workflow(self, project, name, spec, now_ms))
    }

    fn workflows_named<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, StoreError>> {
        Box::pin(crate::Store::workflows_named(self, name))
    }

    fn tasks_page<'a>(
        &'a self,
        run: i64,
        after: Option<(u32, u32, u32)>,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<TaskRow>, StoreError>> {
        Box::pin(crate::Store::tasks_page(self, run, after, limit))
    }

    fn task_counts(&self, run: i64) -> BoxFuture<'_, Result<Vec<TaskCount>, StoreError>> {
        Box::pin(crate::Store::task_counts(self, run))
    }

    fn waiting_runs<'a>(&'a self, project: &'a str) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(crate::Store::waiting_runs(self, project))
    }

    fn append_audit<'a>(&'a self, entry: &'a AuditEntry) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::append_audit(self, entry))
    }

    fn audit<'a>(&'a self, filter: &'a AuditFilter) -> BoxFuture<'a, Result<Vec<AuditRow>, StoreError>> {
        Box::pin(crate::Store::audit(self, filter))
    }

    fn put_cluster<'a>(
        &'a self,
        name: &'a str,
        config: &'a str,
        change: &'a ConfigChange,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<i64, StoreError>> {
        Box::pin(crate::Store::put_cluster(self, name, config, change, now_ms))
    }

    fn clusters(&self) -> BoxFuture<'_, Result<Vec<ClusterRow>, StoreError>> {
        Box::pin(crate::Store::clusters(self))
    }

    fn cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<ClusterRow>, StoreError>> {
        Box::pin(crate::Store::cluster(self, name))
    }
    fn usage<'a>(
        &'a self,
        cluster: &'a str,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<UsageRow>, StoreError>> {
        Box::pin(crate::Store::usage(self, cluster, since_ms, until_ms))
    }

    fn run_records<'a>(
        &'a self,
        cluster: Option<&'a str>,
        scope: Option<&'a str>,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<RunRecordRow>, StoreError>> {
        Box::pin(crate::Store::run_records(self, cluster, scope, since_ms, until_ms))
    }

    fn attempt_durations<'a>(
        &'a self,
        cluster: &'a str,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<AttemptDuration>, StoreError>> {
        Box::pin(crate::Store::attempt_durations(self, cluster, since_ms, until_ms))
    }

    fn workflow_attempt_durations<'a>(
        &'a self,
        cluster: &'a str,
        workflow: &'a str,
        since_ms: i64,
        until_ms: i64,
    ) -> BoxFuture<'a, Result<Vec<AttemptDuration>, StoreError>> {
        Box::pin(crate::Store::workflow_attempt_durations(self, cluster, workflow, since_ms, until_ms))
    }

    fn attempt_spans(
        &self,
        since_ms: i64,
        until_ms: i64,
        limit: u32,
    ) -> BoxFuture<'_, Result<Vec<AttemptSpan>, StoreError>> {
        Box::pin(crate::Store::attempt_spans(self, since_ms, until_ms, limit))
    }

    fn run_counts(&self, since_ms: i64) -> BoxFuture<'_, Result<Vec<RunCount>, StoreError>> {
        Box::pin(crate::Store::run_counts(self, since_ms))
    }

    fn preemptions<'a>(
        &'a self,
        cluster: Option<&'a str>,
        since_ms: i64,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<PreemptionRow>, StoreError>> {
        Box::pin(crate::Store::preemptions(self, cluster, since_ms, limit))
    }

    fn waits(&self, run: i64) -> BoxFuture<'_, Result<Vec<WaitRow>, StoreError>> {
        Box::pin(crate::Store::waits(self, run))
    }

    fn slo_decisions(&self, run: i64) -> BoxFuture<'_, Result<Vec<SloDecisionRow>, StoreError>> {
        Box::pin(crate::Store::slo_decisions(self, run))
    }

    fn slo_model(&self, run: i64, job: u32) -> BoxFuture<'_, Result<Option<crate::SloModelRow>, StoreError>> {
        Box::pin(crate::Store::slo_model(self, run, job))
    }

    fn succeeded_attempt_ms(
        &self,
        run: i64,
        job: u32,
    ) -> BoxFuture<'_, Result<Vec<crate::MeasuredAttempt>, StoreError>> {
        Box::pin(crate::Store::succeeded_attempt_ms(self, run, job))
    }

    fn put_job_commit<'a>(
        &'a self,
        fence: &'a Fence,
        row: &'a crate::JobCommitRow,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(crate::Store::put_job_commit(self, fence, row))
    }

    fn job_commits(&self, run: i64) -> BoxFuture<'_, Result<Vec<crate::JobCommitRow>, StoreError>> {
        Box::pin(crate::Store::job_commits(self, run))
    }

    fn waits_since(&self, since_ms: i64, limit: u32) -> BoxFuture<'_, Result<Vec<RunWaitRow>, StoreError>> {
        Box::pin(crate::Store::waits_since(self, since_ms, limit))
    }

    fn apply_plan<'a>(
        &'a self,
        cluster: &'a str,
        base_version: i64,
        config: &'a str,
        routes: &'a [RouteRow],
        change: &'a ConfigChange,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<PlanApplied, StoreError>> {
        Box::pin(crate::Store::apply_plan(self, cluster, base_version, config, routes, change, now_ms))
    }

    fn config_versions<'a>(
        &'a self,
        cluster: &'a str,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<ConfigVersionRow>, StoreError>> {
        Box::pin(crate::Store::config_versions(self, cluster, limit))
    }

    fn config_version<'a>(
        &'a self,
        cluster: &'a str,
        version: i64,
    ) -> BoxFuture<'a, Result<Option<ConfigVersionRow>, StoreError>> {
        Box::pin(crate::Store::config_version(self, cluster, version))
    }

    fn recording_since<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Option<i64>, StoreError>> {
        Box::pin(crate::Store::recording_since(self, cluster))
    }

    fn put_proposal<'a>(&'a self, proposal: &'a ProposalRow) -> BoxFuture<'a, Result<i64, StoreError>> {
        Box::pin(crate::Store::put_proposal(self, proposal))
    }

    fn proposals<'a>(
        &'a self,
        cluster: Option<&'a str>,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<ProposalRow>, StoreError>> {
        Box::pin(crate::Store::proposals(self, cluster, limit))
    }

    fn proposal(&self, id: i64) -> BoxFuture<'_, Result<Option<ProposalRow>, StoreError>> {
        Box::pin(crate::Store::proposal(self, id))
    }

    fn decide_proposal<'a>(
        &'a self,
        id: i64,
        to: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(crate::Store::decide_proposal(self, id, to, now_ms))
    }

    fn last_proposal_ms<'a>(&'a self, cluster: &'a str) -> BoxFuture<'a, Result<Option<i64>, StoreError>> {
        Box::pin(crate::Store::last_proposal_ms(self, cluster))
    }

    fn put_advice<'a>(&'a self, advice: &'a AdviceRow) -> BoxFuture<'a, Result<i64, StoreError>> {
        Box::pin(crate::Store::put_advice(self, advice))
    }

    fn latest_advice(&self) -> BoxFuture<'_, Result<Option<AdviceRow>, StoreError>> {
        Box::pin(crate::Store::latest_advice(self))
    }

    fn record_dry_run_verdict<'a>(
        &'a self,
        verdict: &'a DryRunVerdictRow,
    ) -> BoxFuture<'a, Result<i64, StoreError>> {
        Box::pin(crate::Store::record_dry_run_verdict(self, verdict))
    }

    fn dry_runs_without_verdict<'a>(
        &'a self,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Vec<RunRow>, StoreError>> {
        Box::pin(crate::Store::dry_runs_without_verdict(self, cluster))
    }

    fn dry_run_verdicts<'a>(
        &'a self,
        workflow: Option<&'a str>,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<DryRunVerdictRow>, StoreError>> {
        Box::pin(crate::Store::dry_run_verdicts(self, workflow, limit))
    }

    fn approve_migration<'a>(
        &'a self,
        approval: &'a MigrationApproval,
    ) -> BoxFuture<'a, Result<Approval, StoreError>> {
        Box::pin(crate::Store::approve_migration(self, approval))
    }
}
