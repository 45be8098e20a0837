//! The API's operations, declared for the OpenAPI document. The functions are never called:
//! they carry the `#[utoipa::path]` descriptions that the server's handlers implement.
#![allow(dead_code)]

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::*;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "weir",
        description = "weir's job-submission service: submit workflow runs, follow them to a final \
state, read their logs, see the live queues. Every request but /healthz and /readyz carries \
`Authorization: Bearer <token>`. Every error is {\"error\": {\"code\", \"message\", \"field\"?}}."
    ),
    paths(
        submit_run,
        list_runs,
        get_run,
        kill_run,
        retry_run,
        explain_run,
        slo_check,
        task_logs,
        queues,
        queue,
        nodes,
        list_routes,
        put_route,
        delete_route,
        migration_status,
        approve_migration,
        put_workflow,
        put_cluster_config,
        create_token,
        list_tokens,
        revoke_token,
        usage_csv,
        runs_csv,
        waits_csv,
        slo_report,
        usage_report,
        list_clusters,
        get_cluster_config,
        post_plan,
        replay,
        get_advice,
        advise_now,
        move_by_advice,
        list_proposals,
        apply_proposal,
        dismiss_proposal,
        plan_now,
        config_history,
        rollback,
        metrics,
        audit,
        healthz,
        readyz
    ),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Submit a run. JSON, or the same document as YAML (`Content-Type: application/yaml`).
#[utoipa::path(post, path = "/v1/runs", request_body = SubmitRun,
    params(("Idempotency-Key" = Option<String>, Header,
        description = "Replays the first response to this key for 24 hours")),
    responses(
        (status = 201, description = "Stored (committed) and queued", body = RunCreated),
        (status = 400, description = "Malformed or invalid; `field` names the path", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, description = "An active run of the project holds this (workflow, logical_date)", body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 422, description = "The Idempotency-Key was first used with another request", body = ErrorBody),
        (status = 429, description = "Over the token's submission rate or the project's waiting-run quota; see Retry-After", body = ErrorBody),
        (status = 503, description = "The store is unavailable, or (`backend_unhealthy`) the cluster's backend is unhealthy and its server file says `when_unhealthy: refuse`; see Retry-After", body = ErrorBody)))]
fn submit_run() {}

/// Runs, newest first.
#[utoipa::path(get, path = "/v1/runs",
    params(("project" = Option<String>, Query), ("workflow" = Option<String>, Query),
        ("state" = Option<String>, Query), ("since" = Option<i64>, Query, description = "submitted at or after (ms)"),
        ("cursor" = Option<String>, Query), ("limit" = Option<u32>, Query, description = "default 100, at most 1000")),
    responses((status = 200, body = RunList), (status = 400, body = ErrorBody)))]
fn list_runs() {}

/// A run with its jobs and one page of its tasks; every job carries the counts of all its tasks
/// by state. Another project's run is `404`, as if there were none.
#[utoipa::path(get, path = "/v1/runs/{id}", params(("id" = i64, Path),
        ("tasks_after" = Option<String>, Query, description = "the cursor the previous page gave as next_tasks_after"),
        ("tasks_limit" = Option<u32>, Query, description = "tasks per page, default 1000, at most 10000")),
    responses((status = 200, body = Run), (status = 404, body = ErrorBody)))]
fn get_run() {}

/// Kill a run: queued runs end at once, running tasks get SIGTERM then SIGKILL.
#[utoipa::path(post, path = "/v1/runs/{id}/kill", params(("id" = i64, Path)),
    responses((status = 202, body = RunSummary), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn kill_run() {}

/// Retry a run: submit its stored workflow, parameters and logical date again as a new run,
/// through every check a submission makes (submitter on its project; the new run keeps the
/// run's scheduler user, which the caller must be allowed to act as).
#[utoipa::path(post, path = "/v1/runs/{id}/retry", params(("id" = i64, Path)),
    responses((status = 201, description = "The new run", body = RunCreated),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "A run of the workflow for this logical date is still active", body = ErrorBody)))]
fn retry_run() {}

#[utoipa::path(get, path = "/v1/runs/{id}/explain", params(("id" = i64, Path)),
    responses((status = 200, body = RunExplanation), (status = 404, body = ErrorBody)))]
fn explain_run() {}

/// The admission check for deadlines (`weir submit --check-slo`, docs/slo.md): the body is a
/// submission; nothing is stored. The workflow's model, built from its earlier runs on the
/// cluster its route leads to, gives the containers a new run would start at; the answer says
/// whether they fit beside the guarded runs live there, and whether any allocation meets the
/// deadline. `admitted` is absent when there is no model (too little history).
#[utoipa::path(post, path = "/v1/slo/check", request_body = SubmitRun,
    responses((status = 200, body = SloCheck), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
fn slo_check() {}

/// A task attempt's output as plain text, streamed from disk; `offset`/`length` or `tail` pick
/// a byte range (`X-Log-Size` says how long the file is); `follow=true` streams until the
/// attempt ends.
#[utoipa::path(get, path = "/v1/runs/{id}/tasks/{task}/logs",
    params(("id" = i64, Path), ("task" = String, Path, description = "job.stage.index, or stage.index in a one-job run"),
        ("attempt" = Option<u32>, Query, description = "default: the latest"),
        ("stream" = Option<String>, Query, description = "stdout (default) or stderr"),
        ("offset" = Option<u64>, Query, description = "first byte (default 0)"),
        ("length" = Option<u64>, Query, description = "at most this many bytes (default: to the end)"),
        ("tail" = Option<u64>, Query, description = "the last N bytes (instead of offset)"),
        ("follow" = Option<bool>, Query)),
    responses((status = 200, content_type = "text/plain", body = String), (status = 404, body = ErrorBody)))]
fn task_logs() {}

#[utoipa::path(get, path = "/v1/queues", params(("cluster" = Option<String>, Query)),
    responses((status = 200, body = QueuesResponse)))]
fn queues() {}

#[utoipa::path(get, path = "/v1/queues/{path}", params(("path" = String, Path, description = "e.g. root.ads.tier1"),
        ("cluster" = Option<String>, Query)),
    responses((status = 200, body = QueueInfo), (status = 404, body = ErrorBody),
        (status = 503, description = "The queue is in the cluster file but its engine has not published yet (Retry-After)", body = ErrorBody)))]
fn queue() {}

/// Every node of every cluster with what is allocated on it. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/nodes", params(("cluster" = Option<String>, Query)),
    responses((status = 200, body = NodesResponse), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn nodes() {}

#[utoipa::path(get, path = "/v1/routes", responses((status = 200, body = RouteList)))]
fn list_routes() {}

#[utoipa::path(put, path = "/v1/routes/{key}", params(("key" = String, Path)), request_body = RouteTarget,
    responses((status = 200, body = Route), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
fn put_route() {}

/// The migration table: each dry-run's verdict, newest first; only the workflows of projects the
/// caller may view.
#[utoipa::path(get, path = "/v1/migrations", params(("workflow" = Option<String>, Query)),
    responses((status = 200, body = MigrationStatus)))]
fn migration_status() {}

/// Approve moving a workflow to the cluster its dry-run ran on: its newest verdict there must be
/// `identical` or `equivalent`; the route `workflow:NAME` then points at that cluster and the
/// dry-run's queue. Changes a route: needs the admin role on every project (as `PUT /v1/routes`).
#[utoipa::path(post, path = "/v1/migrations/{workflow}/approve", params(("workflow" = String, Path)),
    request_body = ApproveMigration,
    responses((status = 200, body = MigrationApproved), (status = 403, body = ErrorBody),
        (status = 404, description = "No dry-run verdict of the workflow on that cluster", body = ErrorBody),
        (status = 409, description = "The newest verdict there is `different`", body = ErrorBody)))]
fn approve_migration() {}

#[utoipa::path(delete, path = "/v1/routes/{key}", params(("key" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
fn delete_route() {}

/// Register (or replace) a workflow so runs can be submitted by name.
#[utoipa::path(put, path = "/v1/workflows/{name}", params(("name" = String, Path)),
    request_body(content = Object, description = "a workflow in the workload-file schema"),
    responses((status = 204), (status = 400, body = ErrorBody)))]
fn put_workflow() {}

/// Reload a cluster's queue tree from a cluster file (YAML). Validated first: a bad file
/// changes nothing.
#[utoipa::path(put, path = "/v1/clusters/{name}/config", params(("name" = String, Path)),
    request_body(content = String, content_type = "application/yaml"),
    responses((status = 200, body = ClusterConfigApplied), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn put_cluster_config() {}

#[utoipa::path(post, path = "/v1/tokens", request_body = CreateToken,
    responses((status = 201, body = TokenCreated), (status = 403, body = ErrorBody)))]
fn create_token() {}

#[utoipa::path(get, path = "/v1/tokens", responses((status = 200, body = TokenList)))]
fn list_tokens() {}

#[utoipa::path(delete, path = "/v1/tokens/{id}", params(("id" = String, Path)),
    responses((status = 204), (status = 404, body = ErrorBody)))]
fn revoke_token() {}

#[utoipa::path(get, path = "/healthz", security(), responses((status = 200, body = Health)))]
fn healthz() {}

/// Ready when the store answers.
#[utoipa::path(get, path = "/readyz", security(),
    responses((status = 200, body = Health), (status = 503, body = ErrorBody)))]
fn readyz() {}

/// The recorded queue usage of a cluster as `usage.csv` (`start,end,queue,cpu,memory,running_apps,gpu`,
/// Unix ms), the history `weir plan` reads: at most one row per queue per `--usage-resolution`,
/// each the average over its span. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/usage",
    params(("cluster" = Option<String>, Query, description = "default: the only cluster, or `default`"),
        ("since" = Option<i64>, Query, description = "Unix ms; default until minus window"),
        ("until" = Option<i64>, Query, description = "Unix ms; default now"),
        ("window" = Option<String>, Query, description = "e.g. 30d (the default)")),
    responses((status = 200, content_type = "text/csv", body = String), (status = 403, body = ErrorBody)))]
fn usage_csv() {}

/// Runs submitted in the window that the caller may read, as `runs.csv`
/// (`workflow,tier,queue,submit,start,end,slo,met,status`, as `weir simulate` writes it).
#[utoipa::path(get, path = "/v1/runs.csv",
    params(("cluster" = Option<String>, Query), ("since" = Option<i64>, Query), ("until" = Option<i64>, Query),
        ("window" = Option<String>, Query, description = "default 30d")),
    responses((status = 200, content_type = "text/csv", body = String)))]
fn runs_csv() {}

/// What the jobs of runs submitted in the window waited for, per leaf and reason, as
/// `waits.csv` (`leaf,tier,reason,queue,limit,spells,runs,waited_ms`; `queue` is the queue the
/// limit belongs to, `waited_ms` the part of the spells inside the window): the history
/// `weir plan --server` reads beside the usage. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/waits.csv",
    params(("cluster" = Option<String>, Query, description = "default: the only cluster, or `default`"),
        ("since" = Option<i64>, Query), ("until" = Option<i64>, Query),
        ("window" = Option<String>, Query, description = "default 30d")),
    responses((status = 200, content_type = "text/csv", body = String), (status = 403, body = ErrorBody)))]
fn waits_csv() {}

/// SLO success per tier and per workflow over runs submitted in the window (default 7d), for
/// the projects the caller may read.
#[utoipa::path(get, path = "/v1/reports/slo",
    params(("cluster" = Option<String>, Query), ("since" = Option<i64>, Query), ("until" = Option<i64>, Query),
        ("window" = Option<String>, Query)),
    responses((status = 200, body = SloReport), (status = 400, body = ErrorBody)))]
fn slo_report() {}

/// Usage against allocation per queue and tier over the window (default 1d), and the
/// planner's verdict on the recorded history. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/reports/usage",
    params(("cluster" = Option<String>, Query), ("since" = Option<i64>, Query), ("until" = Option<i64>, Query),
        ("window" = Option<String>, Query)),
    responses((status = 200, body = UsageReport), (status = 403, body = ErrorBody)))]
fn usage_report() {}

/// The clusters the server manages, each with its backend's state as this server's worker
/// last saw it (`starting`, `healthy`, `unhealthy` with the reason, `standby` when another
/// server holds the cluster's lease); no backend on a server that runs no worker.
#[utoipa::path(get, path = "/v1/clusters", responses((status = 200, body = ClusterList)))]
fn list_clusters() {}

/// The cluster file in force (YAML); its version in the `Weir-Config-Version` header.
#[utoipa::path(get, path = "/v1/clusters/{name}/config", params(("name" = String, Path)),
    responses((status = 200, content_type = "application/yaml", body = String), (status = 404, body = ErrorBody)))]
fn get_cluster_config() {}

/// Apply a plan (global admin): the cluster's queue settings and, if given, exactly the routes
/// to it, in one transaction; `dry_run` only checks and shows the changes. A plan that names an
/// unknown queue, leaves one out, changes the nodes, has capacities that do not fit, or routes
/// to a queue that is not a leaf is refused (400) and nothing changes; one made from another
/// configuration version gets 409; one without `base_version`, one whose validation is worse
/// for tier 1, one without validation (unless `unvalidated`) or one made from less recorded
/// history than the server's minimum (unless `force`) gets 422. Each applied version is
/// recorded in the cluster's history.
#[utoipa::path(post, path = "/v1/clusters/{name}/plan", params(("name" = String, Path)), request_body = PlanRequest,
    responses((status = 200, body = PlanDiff), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)))]
fn post_plan() {}

/// The runs submitted in the window (default 30d) as a workload file (YAML) to replay in the
/// simulator: each workflow with `at` its submissions and `empirical` durations as recorded.
#[utoipa::path(get, path = "/v1/replay",
    params(("cluster" = Option<String>, Query), ("since" = Option<i64>, Query), ("until" = Option<i64>, Query),
        ("window" = Option<String>, Query)),
    responses((status = 200, content_type = "application/yaml", body = String), (status = 403, body = ErrorBody)))]
fn replay() {}

/// The newest advice of the balancing advisor (the server file's `advise:` job, or `POST
/// /v1/advice`): the advised moves, each with its route key, whether the server file routes
/// the workflow (then the move is a file edit) and the newest dry-run on the target. 404
/// before any advice was made. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/advice",
    responses((status = 200, body = AdviceReport), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn get_advice() {}

/// Advise now (global admin): replay every cluster's recorded runs over the advisor's window,
/// store the advice and return it. 422 when the server has fewer than two clusters.
#[utoipa::path(post, path = "/v1/advice",
    responses((status = 200, body = AdviceReport), (status = 403, body = ErrorBody), (status = 422, body = ErrorBody)))]
fn advise_now() {}

/// Make an advised move of the newest advice (global admin): set the workflow's route to the
/// target cluster and queue, as `PUT /v1/routes/{key}` does, audited. 409 when the server file
/// routes the workflow (edit that file instead); 404 when the newest advice has no such move.
#[utoipa::path(post, path = "/v1/advice/moves/{workflow}", params(("workflow" = String, Path), ("to" = Option<String>, Query)),
    responses((status = 200, body = Route), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
fn move_by_advice() {}

/// Plans the scheduled planner (`weir serve --auto-plan`) made, with their validation figures
/// and what each would change now. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/proposals", params(("cluster" = Option<String>, Query)),
    responses((status = 200, body = ProposalList)))]
fn list_proposals() {}

/// Apply a waiting proposal (global admin), with the checks of `POST /v1/clusters/{name}/plan`.
#[utoipa::path(post, path = "/v1/proposals/{id}/apply", params(("id" = i64, Path)),
    responses((status = 200, body = PlanDiff), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
fn apply_proposal() {}

/// Prometheus metrics (OpenMetrics text): queue gauges, run, SLO, preemption and task counters,
/// latency histograms. Needs a viewer grant on `*`.
/// The audit log, newest first: who submitted, killed, changed routes, clusters, tokens, or
/// applied plans and proposals, when and from where; failed authentications too. Global admins
/// only.
#[utoipa::path(get, path = "/v1/audit",
    params(("token" = Option<String>, Query), ("action" = Option<String>, Query),
        ("since" = Option<i64>, Query, description = "at or after (ms)"),
        ("cursor" = Option<String>, Query), ("limit" = Option<u32>, Query, description = "default 100, at most 1000")),
    responses((status = 200, body = AuditList), (status = 403, body = ErrorBody)))]
fn audit() {}

#[utoipa::path(get, path = "/metrics",
    responses((status = 200, content_type = "application/openmetrics-text", body = String), (status = 403, body = ErrorBody)))]
fn metrics() {}

/// Dismiss a waiting proposal (global admin): it stays in the list as `dismissed`.
#[utoipa::path(post, path = "/v1/proposals/{id}/dismiss", params(("id" = i64, Path)),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
fn dismiss_proposal() {}

/// Plan now (global admin): the scheduled planner's work for one cluster, at once, over
/// `weir serve --auto-plan`'s window (default 7 days). Answers the new proposal; 422 with the
/// reason in words when there is no history to plan from.
#[utoipa::path(post, path = "/v1/clusters/{name}/proposals", params(("name" = String, Path)),
    responses((status = 201, body = Proposal), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
fn plan_now() {}

/// Every recorded version of a cluster's configuration, newest first: who made it, when,
/// from which plan, proposal, rollback or edit, and what changed. Needs a viewer grant on `*`.
#[utoipa::path(get, path = "/v1/clusters/{name}/history", params(("name" = String, Path)),
    responses((status = 200, body = ConfigHistory), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn config_history() {}

/// Roll a cluster back to an earlier version of its configuration (global admin): its file
/// and, when recorded, the routes to it, through the checks of a plan (the queue tree must be
/// the current one). Recorded in the history as a new version.
#[utoipa::path(post, path = "/v1/clusters/{name}/history/{version}/rollback",
    params(("name" = String, Path), ("version" = i64, Path)), request_body = RollbackRequest,
    responses((status = 200, body = PlanDiff), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
fn rollback() {}
