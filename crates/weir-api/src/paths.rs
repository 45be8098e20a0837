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
        explain_run,
        task_logs,
        queues,
        queue,
        list_routes,
        put_route,
        delete_route,
        put_workflow,
        put_cluster_config,
        create_token,
        list_tokens,
        revoke_token,
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
        (status = 409, description = "An active run holds this (workflow, logical_date)", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 503, body = ErrorBody)))]
fn submit_run() {}

/// Runs, newest first.
#[utoipa::path(get, path = "/v1/runs",
    params(("project" = Option<String>, Query), ("workflow" = Option<String>, Query),
        ("state" = Option<String>, Query), ("since" = Option<i64>, Query, description = "submitted at or after (ms)"),
        ("cursor" = Option<String>, Query), ("limit" = Option<u32>, Query, description = "default 100, at most 1000")),
    responses((status = 200, body = RunList), (status = 400, body = ErrorBody)))]
fn list_runs() {}

#[utoipa::path(get, path = "/v1/runs/{id}", params(("id" = i64, Path)),
    responses((status = 200, body = Run), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn get_run() {}

/// Kill a run: queued runs end at once, running tasks get SIGTERM then SIGKILL.
#[utoipa::path(post, path = "/v1/runs/{id}/kill", params(("id" = i64, Path)),
    responses((status = 202, body = RunSummary), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
fn kill_run() {}

#[utoipa::path(get, path = "/v1/runs/{id}/explain", params(("id" = i64, Path)),
    responses((status = 200, body = RunExplanation), (status = 404, body = ErrorBody)))]
fn explain_run() {}

/// A task attempt's output as plain text; `follow=true` streams until the attempt ends.
#[utoipa::path(get, path = "/v1/runs/{id}/tasks/{task}/logs",
    params(("id" = i64, Path), ("task" = String, Path, description = "job.stage.index, or stage.index in a one-job run"),
        ("attempt" = Option<u32>, Query, description = "default: the latest"),
        ("stream" = Option<String>, Query, description = "stdout (default) or stderr"),
        ("follow" = Option<bool>, Query)),
    responses((status = 200, content_type = "text/plain", body = String), (status = 404, body = ErrorBody)))]
fn task_logs() {}

#[utoipa::path(get, path = "/v1/queues", params(("cluster" = Option<String>, Query)),
    responses((status = 200, body = QueuesResponse)))]
fn queues() {}

#[utoipa::path(get, path = "/v1/queues/{path}", params(("path" = String, Path, description = "e.g. root.ads.tier1"),
        ("cluster" = Option<String>, Query)),
    responses((status = 200, body = QueueInfo), (status = 404, body = ErrorBody)))]
fn queue() {}

#[utoipa::path(get, path = "/v1/routes", responses((status = 200, body = RouteList)))]
fn list_routes() {}

#[utoipa::path(put, path = "/v1/routes/{key}", params(("key" = String, Path)), request_body = RouteTarget,
    responses((status = 200, body = Route), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
fn put_route() {}

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
