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
    /// The date (or any label) this run is for; at most one active run per (workflow,
    /// logical_date). Default: the submission time, `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_date: Option<String>,
    /// Handed to every task as environment variables `WEIR_PARAM_<NAME>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
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
    pub tasks: Vec<Task>,
}

/// One task: one process per attempt, in one container.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    /// `stage/index`, e.g. `map/3`: what `logs` takes.
    pub name: String,
    pub stage: String,
    pub index: u32,
    /// `pending`, `ready` (asked of the engine), `starting`, `running`, `succeeded`, `failed`,
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
}

/// `PUT /v1/routes/{key}` body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteTarget {
    pub cluster: String,
    pub queue: String,
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

/// The OpenAPI 3.1 document of the API, as JSON text (pretty-printed, stable order).
pub fn openapi_json() -> String {
    ApiDoc::openapi().to_pretty_json().unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
