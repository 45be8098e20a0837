//! weir-api: the serde wire types of weir's HTTP API (`/v1`) and the OpenAPI 3.1 document
//! generated from them.
//!
//! The server, the CLI client and (later) the dashboard share these types; none of them is an
//! engine or store type — the server converts. It never depends on another weir crate (the
//! workflow in a submission travels as a JSON object in the workload-file schema and is parsed
//! and validated by the server), does no I/O and holds no logic beyond (de)serialization.
//!
//! Times are integers: milliseconds since the Unix epoch (`*_ms` fields). Every error is an
//! [`ErrorBody`]: `{"error": {"code", "message", "field"?}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{OpenApi, ToSchema};

mod paths;

pub use paths::ApiDoc;

/// The body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `bad_request`, `invalid`, `unauthorized`, `forbidden`,
    /// `not_found`, `conflict`, `payload_too_large`, `unavailable`, `internal`.
    pub code: String,
    /// What is wrong, for a person.
    pub message: String,
    /// The path of the offending field inside the request, e.g.
    /// `workflow.jobs.extract.stages.map.tasks`, when one field is to blame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For `conflict`: the id of the run that already holds the (workflow, logical date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing_run: Option<i64>,
    /// For `internal`: the id under which the server logged what went wrong (the details stay
    /// in the server's log). Give it to the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<String>,
    /// For `rate_limited` (429): seconds to wait before trying again (also `Retry-After`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u64>,
}

/// `POST /v1/runs`: submit a run of a workflow. Give `workflow` (a workflow in the workload-file
/// schema, whose stages carry a `command`) or `workflow_name` (a registered workflow).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRun {
    /// One workflow as in `workload.yaml`'s `workflows` list: `name`, `queue` or `project`,
    /// `tier`, `jobs` → `stages` with `tasks`, `resources`, `command`, `env`, `max_attempts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub workflow: Option<serde_json::Value>,
    /// The name of a workflow registered with `PUT /v1/workflows/{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_name: Option<String>,
    /// With `workflow_name`: the project whose registered workflow it is. Needed only when
    /// projects the caller may submit to registered workflows of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The date (or any label) this run is for; at most one active run per (project, workflow,
    /// logical_date). Printable characters, at most 128 bytes. Default: the submission time,
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_date: Option<String>,
    /// Handed to every task as environment variables `WEIR_PARAM_<NAME>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// A dry-run: the same workflow with every declared output rewritten to a shadow prefix
    /// (`_weir_dryrun/RUN/…` in the same bucket), compared with the production output of the
    /// same workflow and logical date when it ends; the verdict goes to the migration table
    /// (`GET /v1/migrations`). It never blocks, nor is blocked by, a production run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// With `dry_run`: the cluster to run on (the cluster a migration would move the workflow
    /// to); its placement rules place the workflow. Default: the workflow's route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// `201 Created` for a submission (and what an `Idempotency-Key` replays).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunCreated {
    pub id: i64,
    pub workflow: String,
    pub logical_date: String,
    pub cluster: String,
    /// The leaf queue the run's jobs go to.
    pub queue: String,
    pub state: RunState,
    /// A dry-run (outputs to shadow prefixes, compared with production's when it ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// How a route with several candidates placed it (absent for other routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteDecision>,
}

/// How a route with a policy (`first`, `least_loaded`, `spill`) placed a run when it was
/// submitted. Decided once: a run never moves after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouteDecision {
    /// The route: `workflow:NAME` or `project:PROJECT:TIER`.
    pub key: String,
    /// `first`, `least_loaded` or `spill`.
    pub policy: String,
    /// `first`, `least_loaded`, `within_threshold` (spill: the first candidate starts it in
    /// time), `spilled` (an earlier candidate would not), `all_over_threshold` (none would: the
    /// soonest) or `all_skipped` (every candidate unhealthy, drained or unfit: the first it fits).
    pub reason: String,
    /// Each candidate's load and predicted start, or why it was skipped.
    pub detail: String,
}

/// A run's life: `queued → routed → waiting → running → succeeded | failed | killed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Accepted and stored; no worker has taken it yet.
    Queued,
    /// A worker owns it and has created its jobs.
    Routed,
    /// Its jobs are in the engine, none running yet.
    Waiting,
    Running,
    Succeeded,
    Failed,
    Killed,
}

impl RunState {
    pub const ALL: [RunState; 7] = [
        RunState::Queued,
        RunState::Routed,
        RunState::Waiting,
        RunState::Running,
        RunState::Succeeded,
        RunState::Failed,
        RunState::Killed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Routed => "routed",
            RunState::Waiting => "waiting",
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Killed => "killed",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, RunState::Succeeded | RunState::Failed | RunState::Killed)
    }
}

/// `GET /v1/runs/{id}`: a run with its jobs and tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Run {
    pub id: i64,
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub logical_date: String,
    pub state: RunState,
    pub cluster: String,
    pub queue: String,
    pub submitted_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// Why it failed or was killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A kill was asked for and is being carried out.
    pub kill_requested: bool,
    /// A dry-run (outputs to shadow prefixes, compared with production's when it ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// How a route with several candidates placed it (absent for other routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteDecision>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// The scheduler user the run counts against (per-user limits): the submitting token's
    /// user, or one it may act as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Tasks of the whole run.
    #[serde(default)]
    pub tasks_total: u64,
    /// Each job lists one page of tasks (`tasks_limit`, default 1,000, in job, stage, index
    /// order); pass this as `tasks_after` for the next page. Absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_tasks_after: Option<String>,
    pub jobs: Vec<Job>,
}

/// One job of a run (a DAG of stages; the unit the scheduler admits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub name: String,
    /// `pending` (its upstream jobs have not finished), `waiting`, `running`, `succeeded`,
    /// `failed`, `killed`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// For a job that waits for containers: the engine's explanation, as of the last snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// Why and how long the job waited before its first task started (or its run ended), one
    /// spell per reason, oldest first; the last has no `to_ms` while the job still waits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<Wait>,
    /// For a job under a deadline guarantee (`guarantee: jockey`): the SLO controller's
    /// allocations over time, oldest first, each with the progress and prediction that caused
    /// it (or one row saying the run fell back to its tier's rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guarantee: Vec<SloDecision>,
    /// All of the job's tasks counted by state (every page has the whole counts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_counts: BTreeMap<String, u64>,
    /// The job's tasks on this page (see `Run::next_tasks_after`).
    pub tasks: Vec<Task>,
}

/// `POST /v1/slo/check` (`weir submit --check-slo`): the admission check for a workflow with
/// an SLO, before submitting it. The body is a submission (`SubmitRun`); nothing is stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SloCheck {
    pub workflow: String,
    /// The cluster its route leads to.
    pub cluster: String,
    /// Whether a new run fits: predicted to meet its deadline at an allocation that fits beside
    /// the guarded runs running on the cluster. Absent when there is no model to ask (too little
    /// history, more than one job): then the run would keep its tier's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted: Option<bool>,
    /// The containers the controller would start the run at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<u32>,
    /// The deadline (the workflow's `slo`), ms from submission.
    pub deadline_ms: i64,
    /// The answer in words, with its numbers.
    pub reason: String,
}

/// One decision of the SLO controller for a job under a deadline guarantee.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SloDecision {
    /// When it was taken, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// Since the run's submission.
    pub elapsed_ms: i64,
    /// The job's progress, 0 to 1 (its profile's expected task-seconds done).
    pub progress: f64,
    /// The run's speed against its profile (above 1: slower than its earlier runs).
    pub speed: f64,
    /// Containers (of the job's largest task) guaranteed from then on; 0: none.
    pub allocation: u32,
    /// The best allocation that period, before the dead zone and hysteresis.
    pub target: u32,
    /// Predicted completion under `allocation`, from submission (ms); 0 when none.
    pub predicted_ms: i64,
    /// The deadline (the workflow's `slo`), from submission (ms).
    pub deadline_ms: i64,
    /// Why: `first decision`, `behind: raised`, `ahead: lowered`, `dead zone: on time, kept`,
    /// `late: kept`, `on track`, or `fallback: …` (no controller; the tier's rules apply).
    pub reason: String,
}

/// One waiting spell of a job: a span of time it waited for one reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Wait {
    /// When the spell began, milliseconds since the Unix epoch.
    pub from_ms: i64,
    /// When it ended; absent while the job still waits for this reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// The rule that held the job back: `queue_max_running_apps`, `user_max_running_apps`,
    /// `queue_max_resources`, `am_share`, `container_limit`, `gang_waiting_for_room`,
    /// `no_room` (no capacity where its fair share lets it go), `inputs` (its inputs are not
    /// complete yet), `backend_unhealthy`, or `not_taken_up` (queued while no server drove its
    /// cluster; recorded, like a `backend_unhealthy` wait before the worker took it up, when the
    /// run is taken up).
    pub reason: String,
    /// The queue the rule applies to (`user NAME` for a user limit); empty when none.
    pub queue: String,
    /// The limit, with its unit (`3`, `8 cores, 32 GiB`); empty when none.
    pub limit: String,
    /// More about it in words: the runs holding the queue's slots, the cluster's use, the
    /// backend's state; a tier-1 job waiting behind lower tiers says so first.
    pub detail: String,
    /// The reason as a phrase: `root.analytics at max_running_apps 3`.
    pub summary: String,
}

/// One task: one process per attempt, in one container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    /// `stage/index`, e.g. `map/3`: what `logs` takes.
    pub name: String,
    pub stage: String,
    pub index: u32,
    /// `pending`, `ready` (asked of the engine), `starting`, `running`, `preempting` (running,
    /// warned that its container will be taken: see `preemption`), `succeeded`, `failed`,
    /// `killed`.
    pub state: String,
    /// Attempts started so far.
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// Exit code of the last attempt that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// While the task is `preempting`: why its container is taken and when it will be killed.
    /// The task was told too: the file named by its `WEIR_PREEMPT_NOTICE` holds the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionWarning>,
}

/// A preemption warning: the scheduler takes this task's container at `kill_at_ms` (SIGTERM,
/// then SIGKILL after the kill grace) unless the task ends first. A preempted attempt does not
/// count against the task's `max_attempts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreemptionWarning {
    /// The engine's reason, e.g. `preempted to restore job 7 of root.hi to its fair share`.
    pub reason: String,
    pub kill_at_ms: i64,
}

/// One line of `GET /v1/runs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunSummary {
    pub id: i64,
    pub workflow: String,
    pub project: String,
    pub tier: u8,
    pub logical_date: String,
    pub state: RunState,
    pub cluster: String,
    pub queue: String,
    pub submitted_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// A dry-run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `GET /v1/runs`: newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `GET /v1/queues`: the live queue tree of every cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueuesResponse {
    pub clusters: Vec<ClusterQueues>,
}

/// `GET /v1/nodes`: every cluster's nodes and what is allocated on them, as the engine saw
/// them at its last published snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodesResponse {
    pub clusters: Vec<ClusterNodes>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterNodes {
    pub cluster: String,
    /// When the owning worker took this snapshot; absent if no worker has published one yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of_ms: Option<i64>,
    pub nodes: Vec<NodeInfo>,
}

/// One node: capacity, what containers hold on it, what is free.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeInfo {
    /// The engine's node id, e.g. `n3`.
    pub id: String,
    /// The target's own name for the node (a Slurm node, a Kubernetes node, a Spark worker)
    /// when the cluster's nodes come from its backend (`nodes: from_backend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `running` (accepting containers), `full` (nothing more fits: no core or no memory
    /// free) or `preempting` (containers on it are marked for preemption).
    pub state: String,
    pub capacity: Resources,
    pub used: Resources,
    pub free: Resources,
    /// Containers (task attempts) running on it.
    pub containers: u32,
    /// Resources of its containers marked for preemption.
    pub marked: Resources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClusterQueues {
    pub cluster: String,
    /// When the owning worker took this snapshot; absent if no worker has published one yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of_ms: Option<i64>,
    pub total: Resources,
    pub used: Resources,
    /// Depth first, root first.
    pub queues: Vec<QueueInfo>,
}

/// Resources: `cpu` in millicores, `memory` in MiB, `gpu` a count. Unbounded is `u64::MAX`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Resources {
    pub cpu: u64,
    pub memory: u64,
    pub gpu: u64,
}

/// One queue: settings, usage, demand, steady and instantaneous fair share, apps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueInfo {
    pub path: String,
    pub leaf: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    pub weight: f64,
    pub min: Resources,
    pub max: Resources,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running_apps: Option<u32>,
    pub usage: Resources,
    /// Usage plus what its jobs asked for and have not got.
    pub demand: Resources,
    pub steady_fair_share: Resources,
    pub instantaneous_fair_share: Resources,
    pub running_apps: u32,
    pub pending_apps: u32,
}

/// A routing rule: a workflow, or a project at a tier, goes to a cluster and leaf queue.
/// Unrouted submissions fall back to the cluster file's placement rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// `workflow:NAME` or `project:PROJECT:TIER` (e.g. `project:ads.ranking:1`).
    pub key: String,
    pub cluster: String,
    /// A leaf queue of that cluster.
    pub queue: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouteList {
    pub routes: Vec<Route>,
    /// The server file's routes with several candidates and a policy; such a route wins over
    /// one of `routes` with the same key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_routes: Vec<PolicyRoute>,
}

/// A route of the server file with candidates in order of preference and a policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PolicyRoute {
    pub key: String,
    /// `first`, `least_loaded` or `spill`.
    pub policy: String,
    /// `spill`: how long the first candidate may keep a new run waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_after_seconds: Option<u64>,
    pub candidates: Vec<RouteTarget>,
}

/// `PUT /v1/routes/{key}` body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteTarget {
    pub cluster: String,
    pub queue: String,
}

/// One dry-run's verdict in the migration table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MigrationVerdict {
    /// The dry-run run.
    pub run_id: i64,
    pub workflow: String,
    pub project: String,
    pub logical_date: String,
    /// The cluster the dry-run ran on: where approving moves the workflow.
    pub cluster: String,
    /// The leaf queue it ran in there: the approved route's queue.
    pub queue: String,
    /// The production run whose output it was compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub production_run: Option<String>,
    /// `identical`, `equivalent` (within tolerance) or `different`.
    pub verdict: String,
    /// The differences the comparison listed (each `{output, partition, what, shadow,
    /// production, tolerated}`), empty when identical.
    #[schema(value_type = Object)]
    pub differences: serde_json::Value,
    pub at_ms: i64,
    /// The token that approved the move, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_ms: Option<i64>,
}

/// `GET /v1/migrations`: the migration table, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MigrationStatus {
    pub verdicts: Vec<MigrationVerdict>,
}

/// `POST /v1/migrations/{workflow}/approve` body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveMigration {
    /// The cluster to move the workflow to: its newest dry-run there must be `identical` or
    /// `equivalent`.
    pub cluster: String,
}

/// What an approval did: the verdict approved and the workflow's route now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MigrationApproved {
    pub verdict: MigrationVerdict,
    pub route: Route,
}

/// A role: `viewer` reads, `submitter` also submits and kills, `admin` also manages tokens,
/// routes and clusters. `project: "*"` gives it on every project.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    pub project: String,
    pub role: Role,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Submitter,
    Admin,
}

/// `POST /v1/tokens`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    pub name: String,
    pub grants: Vec<Grant>,
    /// The scheduler user its runs count against (per-user running-app limits). Default: the
    /// token's id. Letters, digits, `.`, `_`, `-`, `@`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Other users a submission with this token may name in the workflow's `user` field (a
    /// service account submitting for several people). `*`: any user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub act_as: Vec<String>,
}

/// The secret is shown once, here; the server keeps only its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreated {
    pub id: String,
    pub name: String,
    pub token: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    pub id: String,
    pub name: String,
    pub grants: Vec<Grant>,
    /// The scheduler user its runs count against.
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub act_as: Vec<String>,
    pub created_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenInfo>,
}

/// `PUT /v1/clusters/{name}/config` answer: the queue tree in force after the reload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterConfigApplied {
    pub cluster: String,
    pub queues: usize,
    pub leaves: usize,
}

/// A cluster's backend in `GET /v1/clusters`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BackendInfo {
    /// `local`, `slurm`, … as the server file sets it.
    pub kind: String,
    /// `starting`, `healthy`, `unhealthy` (it could not be set up or its last check failed; the
    /// cluster's runs wait) or `standby` (another server process holds the cluster's lease).
    pub state: String,
    /// Why it is unhealthy or on standby, or the last error seen while healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What the target reports of its version (Slurm: `22.05.8 (v0.0.38)`); empty when nothing.
    #[serde(default)]
    pub version: String,
    /// The nodes the target reports; absent for the local backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u64>,
    /// When it was last checked, milliseconds since the Unix epoch.
    pub checked_ms: i64,
    /// A cluster whose nodes come from its backend (`nodes: from_backend`): the nodes weir's
    /// engine counts now, by the target's names (refreshed while the server runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_names: Vec<String>,
    /// … and the nodes it counted before that are gone or unusable now, as `name (state)`
    /// (`n3 (idle+drain)`, `n4 (gone)`); their tasks were lost and rescheduled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes_gone: Vec<String>,
}

/// One entry of the audit log (`GET /v1/audit`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    pub at_ms: i64,
    /// The token that acted (its id; `-` when the request carried none).
    pub token: String,
    /// `submit`, `kill`, `route.put`, `route.delete`, `workflow.put`, `token.create`,
    /// `token.revoke`, `cluster.put`, `plan.apply`, `proposal.apply`, `auth.failed`, …
    pub action: String,
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The peer address of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// `created`, `ok`, `conflict`, `denied`, `invalid`, `not_found`, …
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `GET /v1/audit`: newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    /// Pass as `cursor` for older entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `GET /v1/runs/{id}/explain`: why each unfinished job of a run is where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunExplanation {
    pub id: i64,
    pub state: RunState,
    pub jobs: Vec<JobExplanation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobExplanation {
    pub job: String,
    pub state: String,
    /// The engine's sentences, most important first.
    pub explanation: String,
}

/// `GET /healthz`, `GET /readyz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// `GET /v1/clusters`: the clusters the server manages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterList {
    pub clusters: Vec<ClusterInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterInfo {
    pub name: String,
    /// Moves on with every change of the cluster file; a plan names the version it was made from.
    pub version: i64,
    pub nodes: u64,
    pub total: Resources,
    pub queues: usize,
    pub leaves: usize,
    /// The cluster's backend as this server last saw it; absent from a server that runs no
    /// worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendInfo>,
}

/// `POST /v1/clusters/{name}/plan`: apply a plan — the cluster's queue settings and the routes
/// to it — or, with `dry_run`, only check it and show what would change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The planned cluster file (YAML), e.g. `weir plan`'s `cluster.yaml`. It must keep the
    /// cluster's nodes and queue tree: a plan changes queue settings, not the tree.
    pub config: String,
    /// The routes to this cluster after the plan, exactly (routes to it not listed are
    /// removed). Absent: the routes are left as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<Route>>,
    /// The cluster configuration version the plan was made from (`GET
    /// /v1/clusters/{name}/config` answers it in `Weir-Config-Version`); if the cluster has
    /// changed since, nothing is applied (409). Required to apply; a dry run without it is
    /// checked against the current version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_version: Option<i64>,
    /// Check and show the changes; apply nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Tier 1 in the plan's validation replay (`weir plan --validate`'s validate.json): a plan
    /// worse for tier 1 on the planned settings than on the current ones is refused (422).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<PlanValidation>,
    /// Apply a plan that has no `validation` (otherwise refused, 422).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unvalidated: bool,
    /// The window of this server's recorded history the plan was made from. The server
    /// measures how much of it it actually recorded; a plan from less than its minimum
    /// (`weir serve --plan-min-history`) is refused (422) unless `force`. Absent (a plan made
    /// from files): the answer carries a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryWindow>,
    /// Apply a plan made from less recorded history than the server's minimum.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// Tier 1 on the current and on the planned settings, as a validation replay measured it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanValidation {
    pub current: Tier1Figures,
    pub planned: Tier1Figures,
}

/// Tier 1's SLO figures in one replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Tier1Figures {
    /// SLO-successful tier-1 runs / tier-1 runs; absent without tier-1 runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_success_ratio: Option<f64>,
    #[serde(default)]
    pub slo_successful_workflows: u64,
}

/// `[since_ms, until_ms)`, Unix milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryWindow {
    pub since_ms: i64,
    pub until_ms: i64,
}

/// What a plan changes (and, unless a dry run, changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PlanDiff {
    pub cluster: String,
    pub base_version: i64,
    /// The configuration version after applying; absent on a dry run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    pub applied: bool,
    /// Queue settings that change, field by field, in tree order.
    pub queues: Vec<SettingChange>,
    /// Routes to this cluster that appear, change or go.
    pub routes: Vec<RouteChange>,
    /// How much recorded history the plan was made from, in ms (absent when the plan does
    /// not say which window of this server's history it came from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_ms: Option<i64>,
    /// What the operator should know before applying: a plan from files whose history the
    /// server cannot measure, an unvalidated plan, a short history applied with `force`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `GET /v1/clusters/{name}/history`: the recorded versions of a cluster's configuration,
/// newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConfigHistory {
    pub cluster: String,
    /// The version in force.
    pub current: i64,
    pub versions: Vec<ConfigVersion>,
}

/// One version of a cluster's configuration: who made it, when, from what, what changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConfigVersion {
    pub version: i64,
    pub at_ms: i64,
    /// The token that made it (`weir` for the server itself).
    pub actor: String,
    /// `plan`, `proposal N`, `rollback to version N`, `edit`, `loaded at start`.
    pub source: String,
    /// Queue settings that changed from the version before.
    pub queues: Vec<SettingChange>,
    /// Routes that changed with it.
    pub routes: Vec<RouteChange>,
    /// Whether the routes to the cluster at this version are known (a rollback restores them).
    pub routes_known: bool,
}

/// `POST /v1/clusters/{name}/history/{version}/rollback`: bring an earlier version back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The version in force the rollback is made against; if the cluster has changed since,
    /// nothing is changed (409). Default: whatever is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_version: Option<i64>,
    /// Show what would change; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SettingChange {
    /// A queue path, or `scheduler` / `tiers` / `placement` for cluster-wide settings.
    pub queue: String,
    pub field: String,
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouteChange {
    pub key: String,
    /// `cluster:queue` before; absent for a new route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `cluster:queue` after; absent for a removed route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// `GET /v1/reports/slo`: SLO success per tier and per workflow over a window — the
/// definitions `weir simulate` uses (a run's outcome is known once it ends, or once it is past
/// its deadline; a workflow is SLO-successful at ≥ 90%).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SloReport {
    /// Runs submitted in `[since_ms, until_ms)` count.
    pub since_ms: i64,
    pub until_ms: i64,
    pub tiers: Vec<TierSlo>,
    pub workflows: Vec<WorkflowSlo>,
    /// What the runs that missed their SLO, or have less than a quarter of it left, waited for
    /// before their jobs started: by tier and reason, the longest wait first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_causes: Vec<WaitCause>,
    /// Runs not ended that are predicted to miss their deadline now, tier 1 first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub at_risk: Vec<AtRiskRun>,
    /// Met and missed runs per tier and day (UTC, by submission), oldest day first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trend: Vec<TierDay>,
}

/// A run predicted to miss its deadline: its remaining time is the median its workflow's
/// earlier successful runs in the window took once started (without any, it is at risk with
/// less than a quarter of its SLO left).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AtRiskRun {
    pub id: i64,
    pub workflow: String,
    pub tier: u8,
    pub state: String,
    pub deadline_ms: i64,
    /// Predicted end minus the deadline, in milliseconds; absent without earlier runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_by_ms: Option<i64>,
    /// Why, in words ("not started on root.ads at max_running_apps 1 for 40s; …").
    pub reason: String,
}

/// One tier's runs with an outcome on one day.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TierDay {
    pub tier: u8,
    /// The day's start, Unix milliseconds (UTC midnight).
    pub day_ms: i64,
    pub met: u64,
    pub missed: u64,
}

/// One reason behind missed and at-risk deadlines of one tier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WaitCause {
    pub tier: u8,
    /// The rule's code, as in [`Wait::reason`].
    pub reason: String,
    pub queue: String,
    pub limit: String,
    /// Time waited for it by the tier's missed and at-risk runs, in milliseconds.
    pub waited_ms: i64,
    /// Missed runs that waited for it.
    pub missed_runs: u64,
    /// Runs not ended, with less than a quarter of their SLO left, that waited for it.
    pub at_risk_runs: u64,
    /// Up to three of their workflows.
    pub workflows: Vec<String>,
    /// `tier 1 waited 41m 00s on root.analytics at max_running_apps 3`.
    pub summary: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SloFigures {
    /// Runs that ended (succeeded or failed).
    pub runs: u64,
    /// Runs with a known SLO outcome.
    pub runs_with_slo: u64,
    pub slo_met: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_success_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_p50_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_p99_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TierSlo {
    pub tier: u8,
    #[serde(flatten)]
    pub figures: SloFigures,
    /// Workflows with a known SLO outcome, and those meeting it in ≥ 90% of their runs.
    pub workflows: u64,
    pub slo_successful_workflows: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowSlo {
    pub workflow: String,
    pub tier: u8,
    #[serde(flatten)]
    pub figures: SloFigures,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_successful: Option<bool>,
}

/// `GET /v1/reports/usage`: a cluster's usage against its allocation over a window, per queue
/// and per tier, in instances of the cluster's instance type (dominant resource), with the
/// planner's verdict on the recorded history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageReport {
    pub cluster: String,
    pub since_ms: i64,
    pub until_ms: i64,
    /// Where the server's record of this window begins: `since_ms`, or later when the server
    /// began recording this cluster inside the window. Allocations and ratios count
    /// `[recorded_since_ms, until_ms)`.
    #[serde(default)]
    pub recorded_since_ms: i64,
    /// The instance the figures count in (the cluster's most common node).
    pub instance: Resources,
    /// The cluster's size in instances.
    pub cluster_instances: f64,
    pub tiers: Vec<UsageFigures>,
    /// Leaf queues, in tree order.
    pub queues: Vec<UsageFigures>,
    pub total: UsageFigures,
    /// `grow`, `shrink`, `keep` or `none`.
    pub verdict: String,
    /// The numbers behind the verdict, or why there is none.
    pub verdict_reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageFigures {
    /// A queue path, `tier N`, or `cluster`.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    /// Instance-hours used in the window.
    pub used_instance_hours: f64,
    /// Instance-hours allocated: the steady fair share (in instances) over the window.
    pub allocated_instance_hours: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_capacity: Option<f64>,
}

/// `GET /v1/proposals`: plans the server's scheduled planner made, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProposalList {
    pub proposals: Vec<Proposal>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Proposal {
    pub id: i64,
    pub cluster: String,
    pub created_ms: i64,
    pub base_version: i64,
    /// `proposed`, `applied`, `dismissed`, `superseded`.
    pub state: String,
    /// The plan's verdict and validation figures.
    #[schema(value_type = Object)]
    pub summary: serde_json::Value,
    /// What applying it would change now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<PlanDiff>,
}

/// `GET /v1/advice`: the newest advice of the balancing advisor (docs/advise.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdviceReport {
    pub id: i64,
    pub created_ms: i64,
    /// The span of recorded runs it was made from, ending at `created_ms`.
    pub window_ms: i64,
    /// `schedule`, or the token id of whoever asked for it.
    pub trigger: String,
    /// The advised moves, the best first, with what makes each one.
    pub moves: Vec<AdvisedMove>,
    /// The advisor's figures as `weir advise --json` writes them: every cluster before and
    /// after, every move tried with its simulated before/after.
    #[schema(value_type = Object)]
    pub advice: serde_json::Value,
}

/// One advised move.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdvisedMove {
    pub workflow: String,
    pub from: String,
    pub to: String,
    /// The leaf it would run in on `to`.
    pub queue: String,
    /// Why it is advised: the simulated imbalance and tier-1 SLO success before and after.
    pub why: String,
    /// The route key a move sets (`workflow:NAME`).
    pub route_key: String,
    /// Where the workflow's route points now (`CLUSTER/QUEUE`), if a route set through the API
    /// names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routed_now: Option<String>,
    /// The server file routes it (a policy route of its workflow or project key, which wins
    /// over routes set through the API): the move is an edit of that file, not a route change.
    pub in_server_file: bool,
    /// Its route already sends it to `to`/`queue`: nothing left to do.
    pub done: bool,
    /// Kept when the advised moves were tried together (the advice's end state has it).
    pub together: bool,
    /// The newest dry-run of the workflow on `to`, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRunBeside>,
}

/// A dry-run's verdict shown beside a move.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DryRunBeside {
    pub run_id: i64,
    pub logical_date: String,
    /// `identical`, `equivalent` or `different`.
    pub verdict: String,
    pub at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
}

/// The OpenAPI 3.1 document of the API, as JSON text (pretty-printed, stable order).
pub fn openapi_json() -> String {
    ApiDoc::openapi().to_pretty_json().unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
