//! Submissions: parse (JSON or YAML, with the path of a malformed field), route, validate with
//! the same `weir-model` rules as `weir validate` (live form: stages carry commands), and store
//! through the group-commit writer — one transaction for every submission that arrived while
//! the previous one was committing — so a 201 always means "committed".

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use weir_api::SubmitRun;
use weir_model::{WorkflowSpec, Workload, WorkloadFile};
use weir_store::{JobStore, NewRun, Submitted};

use crate::auth::covers;
use crate::clusters::Registry;
use crate::config::Limits;
use crate::error::ApiError;

/// Most jobs in one workflow (engine job ids pack run and job index).
pub const MAX_JOBS: usize = 4096;

/// Most submissions in one group commit.
const BATCH: usize = 512;

type Reply = oneshot::Sender<Result<Submitted, ApiError>>;

/// The group-commit writer's mailbox.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<(NewRun, Reply)>,
}

impl Writer {
    pub fn start(store: Arc<dyn JobStore>, metrics: Arc<crate::metrics::Metrics>) -> Writer {
        let (tx, mut rx) = mpsc::channel::<(NewRun, Reply)>(4096);
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                let (runs, replies): (Vec<NewRun>, Vec<Reply>) = batch.into_iter().unzip();
                let t0 = std::time::Instant::now();
                let result = store.submit(&runs).await;
                metrics.observe_store("submit", t0.elapsed());
                match result {
                    Ok(outcomes) => {
                        for (reply, outcome) in replies.into_iter().zip(outcomes) {
                            let _ = reply.send(Ok(outcome));
                        }
                    }
                    Err(e) => {
                        for reply in replies {
                            let _ = reply.send(Err(ApiError::from_store(&e)));
                        }
                    }
                }
            }
        });
        Writer { tx }
    }

    pub async fn submit(&self, run: NewRun) -> Result<Submitted, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((run, reply))
            .await
            .map_err(|_| ApiError::internal("the submission writer has stopped"))?;
        answer.await.map_err(|_| ApiError::internal("the submission writer has stopped"))?
    }
}

/// A submission parsed from the request body.
pub fn parse_body(body: &[u8], yaml: bool) -> Result<SubmitRun, ApiError> {
    if yaml {
        let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
        weir_model::parse_yaml::<SubmitRun>("request", text).map_err(|e| {
            let p = e.problems().into_iter().next();
            let (path, message) = p.map(|p| (p.path, p.message)).unwrap_or_default();
            ApiError::bad_request(format!("malformed YAML: {message}")).field(path)
        })
    } else {
        let de = &mut serde_json::Deserializer::from_slice(body);
        serde_path_to_error::deserialize::<_, SubmitRun>(de).map_err(|e| {
            let path = e.path().to_string();
            ApiError::bad_request(format!("malformed JSON: {}", e.inner())).field(if path == "." {
                String::new()
            } else {
                path
            })
        })
    }
}

/// The workflow of a submission, as the workload-file type, with paths of shape errors.
pub fn workflow_spec(value: &serde_json::Value) -> Result<WorkflowSpec, ApiError> {
    serde_path_to_error::deserialize::<_, WorkflowSpec>(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "workflow".to_string() } else { format!("workflow.{path}") };
        ApiError::bad_request(format!("`{field}`: {}", e.inner())).field(field)
    })
}

/// A validated, routed run ready to store.
pub struct Accepted {
    pub spec: WorkflowSpec,
    pub cluster: String,
    pub queue: String,
    /// The project the run is recorded under (what its viewers see).
    pub project: String,
    /// The project whose submitters may put work in `queue`: the queue's own project, or the
    /// declared project when the cluster's operator mapped that project to that queue (a
    /// `project:P:TIER` route or a placement rule for P).
    pub owner: String,
    pub tier: u8,
    /// The workflow's runtime SLO.
    pub slo_ms: Option<i64>,
}

/// Route and validate a workflow. A route replaces the workflow's own placement. Limits on
/// tasks per stage and per run are checked before anything else is built.
pub fn accept(registry: &Registry, spec: WorkflowSpec, limits: &Limits) -> Result<Accepted, ApiError> {
    accept_on(registry, spec, limits, None)
}

/// [`accept`], on `cluster` when one is named (a dry-run on the cluster a migration would move
/// the workflow to): the workflow's route if it leads there, else that cluster's placement
/// rules for the workflow's own `queue` or `project`.
pub fn accept_on(
    registry: &Registry,
    spec: WorkflowSpec,
    limits: &Limits,
    cluster: Option<&str>,
) -> Result<Accepted, ApiError> {
    let tier = spec.tier.unwrap_or(3);
    let routed = registry.route(&spec.name, spec.project.as_deref(), tier);
    let routed = match cluster {
        None => routed,
        Some(c) if routed.as_ref().is_some_and(|r| r.cluster == c) => routed,
        Some(c) if registry.cluster(c).is_some() => {
            Some(crate::clusters::Routed { cluster: c.to_string(), queue: None, by_project: None })
        }
        Some(c) => return Err(ApiError::invalid(format!("no cluster `{c}`")).field("cluster")),
    };
    accept_routed(registry, spec, limits, routed).map(|(a, _)| a)
}

/// [`accept`] where the route is already chosen (`None`: there is none); also the workflow
/// as validated for that cluster.
pub fn accept_routed(
    registry: &Registry,
    mut spec: WorkflowSpec,
    limits: &Limits,
    routed: Option<crate::clusters::Routed>,
) -> Result<(Accepted, weir_model::Workflow), ApiError> {
    check_size(&spec, limits)?;
    let routed = routed.ok_or_else(|| {
        ApiError::invalid("no route for this workflow and no default cluster (name one `default`)")
    })?;
    let loaded = registry.cluster(&routed.cluster).ok_or_else(|| {
        ApiError::invalid(format!("the route names cluster `{}`, which is not loaded", routed.cluster))
    })?;
    let declared_project = spec.project.clone().map(|p| p.strip_prefix("root.").unwrap_or(&p).to_string());
    if let Some(q) = &routed.queue {
        spec.queue = Some(q.clone());
        spec.project = None;
    }
    if spec.jobs.len() > MAX_JOBS {
        return Err(
            ApiError::invalid(format!("a workflow has at most {MAX_JOBS} jobs")).field("workflow.jobs")
        );
    }
    let file = WorkloadFile { version: 1, workflows: vec![spec.clone()] };
    let workload =
        Workload::live_from_file("workflow", &file, &loaded.config).map_err(|e| invalid(&spec.name, e))?;
    let wf = &workload.workflows[0];
    let queue = wf.queue.to_string();
    let queue_project = project_of_queue(&queue);
    // Placed for this project by the operator: a project route, or a placement rule.
    let mapped_by_operator = |p: &str| {
        routed.by_project.as_deref() == Some(p)
            || (routed.queue.is_none()
                && loaded
                    .config
                    .place(p, wf.tier)
                    .rule
                    .is_some_and(|_| loaded.config.place(p, wf.tier).queue == wf.queue))
    };
    let (project, owner) = match declared_project {
        None => (queue_project.clone(), queue_project),
        Some(p) if covers(&queue_project, &p) => (p, queue_project),
        Some(p) if mapped_by_operator(&p) => (p.clone(), p),
        Some(p) => {
            return Err(ApiError::invalid(format!(
                "project `{p}` does not own queue {queue} (it belongs to project `{queue_project}`): a run \
                 runs in a queue of its own project, or where the operator placed the project"
            ))
            .field("workflow.project"))
        }
    };
    let slo_ms = wf.slo.map(|d| d.as_millis() as i64);
    let accepted = Accepted { cluster: routed.cluster, queue, project, owner, tier: wf.tier, slo_ms, spec };
    Ok((accepted, wf.clone()))
}

/// The run's task count, refused above the limits (before validation builds anything from it).
fn check_size(spec: &WorkflowSpec, limits: &Limits) -> Result<u64, ApiError> {
    let mut total: u64 = 0;
    for job in &spec.jobs {
        for stage in &job.stages {
            let n = u64::from(stage.tasks);
            if n > limits.max_tasks_per_stage {
                return Err(ApiError::invalid(format!(
                    "{n} tasks: a stage has at most {} (the server's max_tasks_per_stage)",
                    limits.max_tasks_per_stage
                ))
                .field(format!("workflow.jobs.{}.stages.{}.tasks", job.name, stage.name)));
            }
            total = total.saturating_add(n);
        }
    }
    if total > limits.max_tasks_per_run {
        return Err(ApiError::invalid(format!(
            "{total} tasks in all: a run has at most {} (the server's max_tasks_per_run)",
            limits.max_tasks_per_run
        ))
        .field("workflow.jobs"));
    }
    Ok(total)
}

/// The longest logical date accepted, in bytes.
pub const MAX_LOGICAL_DATE: usize = 128;

/// The longest single value (command, environment value) a task can be handed: Linux refuses
/// to `exec` with an argument or environment string longer than 32 pages (`MAX_ARG_STRLEN`).
const MAX_ARG: usize = 128 * 1024 - 1;

/// The most environment (names, values and separators together) a task is handed, well below
/// what `exec` accepts (a quarter of the stack limit, at least 128 KiB·32).
const MAX_ENV: usize = 1024 * 1024;

/// Refuses at submission what could not reach a task: a run that would be accepted and then
/// fail every attempt at `exec` (exit 127, empty logs). Names and the logical date become
/// environment variables (`WEIR_WORKFLOW`, `WEIR_JOB`, `WEIR_STAGE`, `WEIR_LOGICAL_DATE`), so
/// they must be printable; values must fit `exec`'s limits.
pub fn check_reachable(
    spec: &WorkflowSpec,
    logical_date: &str,
    params: &BTreeMap<String, String>,
) -> Result<(), ApiError> {
    let printable = |s: &str| !s.chars().any(char::is_control);
    if logical_date.len() > MAX_LOGICAL_DATE {
        return Err(ApiError::invalid(format!(
            "{} bytes: a logical date has at most {MAX_LOGICAL_DATE}",
            logical_date.len()
        ))
        .field("logical_date"));
    }
    if logical_date.is_empty() || !printable(logical_date) {
        return Err(ApiError::invalid("a logical date is printable text (no control characters), not empty")
            .field("logical_date"));
    }
    let name = |path: String, n: &str| -> Result<(), ApiError> {
        if printable(n) && n.len() <= 256 {
            Ok(())
        } else {
            Err(ApiError::invalid("a name is printable text (no control characters), at most 256 bytes")
                .field(path))
        }
    };
    name("workflow.name".into(), &spec.name)?;
    if let Some(u) = &spec.user {
        name("workflow.user".into(), u)?;
    }
    let env_total: usize = params.iter().map(|(k, v)| k.len() + v.len() + 12).sum();
    for (k, v) in params {
        if v.len() > MAX_ARG {
            return Err(ApiError::invalid(format!("{} bytes: a parameter has at most {MAX_ARG}", v.len()))
                .field(format!("params.{k}")));
        }
    }
    for job in &spec.jobs {
        name(format!("workflow.jobs.{}.name", job.name), &job.name)?;
        for stage in &job.stages {
            let here = format!("workflow.jobs.{}.stages.{}", job.name, stage.name);
            name(format!("{here}.name"), &stage.name)?;
            if stage.command.as_ref().is_some_and(|c| c.len() > MAX_ARG) {
                return Err(ApiError::invalid(format!(
                    "a command has at most {MAX_ARG} bytes (the system's limit on one argument); \
                     put a longer script in a file"
                ))
                .field(format!("{here}.command")));
            }
            for (kind, uris) in [
                ("outputs", stage.outputs.iter().map(|o| &o.uri).collect::<Vec<_>>()),
                ("inputs", stage.inputs.iter().map(|i| &i.uri).collect()),
            ] {
                let mut parsed = Vec::new();
                for (i, uri) in uris.into_iter().enumerate() {
                    parsed.push(
                        weir_model::substitute(uri, logical_date, params)
                            .and_then(|u| weir_model::parse_object_uri(&u))
                            .map_err(|why| ApiError::invalid(why).field(format!("{here}.{kind}[{i}].uri")))?,
                    );
                }
                // Outputs filled in with this run's date and parameters must stay apart.
                if let Some((a, b)) = weir_model::overlapping_outputs(&parsed).filter(|_| kind == "outputs") {
                    return Err(ApiError::invalid(format!(
                        "`{}` overlaps outputs[{a}] `{}` once filled in: each output is a prefix of its own",
                        parsed[b], parsed[a]
                    ))
                    .field(format!("{here}.outputs[{b}].uri")));
                }
            }
            let mut stage_env = env_total;
            for (k, v) in &stage.env {
                if v.len() > MAX_ARG {
                    return Err(ApiError::invalid(format!(
                        "{} bytes: an environment value has at most {MAX_ARG}",
                        v.len()
                    ))
                    .field(format!("{here}.env.{k}")));
                }
                stage_env += k.len() + v.len() + 2;
            }
            stage_env += spec.name.len() + job.name.len() + stage.name.len() + logical_date.len();
            if stage_env > MAX_ENV {
                return Err(ApiError::invalid(format!(
                    "its tasks' environment (env and params) would be {stage_env} bytes; at most {MAX_ENV}"
                ))
                .field(format!("{here}.env")));
            }
        }
    }
    Ok(())
}

/// Validation problems as one 400: the first problem's path is the field; every problem is in
/// the message. Paths read `workflow.jobs.<job>.stages.<stage>.<field>`.
fn invalid(name: &str, e: weir_model::ModelError) -> ApiError {
    let prefix = format!("workflows.{name}");
    let problems: Vec<(String, String)> = e
        .problems()
        .into_iter()
        .map(|p| {
            let path = match p.path.strip_prefix(&prefix) {
                Some(rest) => format!("workflow{rest}"),
                None => p.path.clone(),
            };
            (path, p.message)
        })
        .collect();
    let message = problems.iter().map(|(p, m)| format!("{p}: {m}")).collect::<Vec<_>>().join("; ");
    let field = problems.first().map(|(p, _)| p.clone()).unwrap_or_default();
    ApiError::invalid(message).field(field)
}

/// The project a queue belongs to, for authorization: the path without `root.` and without a
/// last `tierN` segment (`root.ads.ranking.tier1` → `ads.ranking`).
pub fn project_of_queue(queue: &str) -> String {
    let path = queue.strip_prefix("root.").unwrap_or(queue);
    match path.rsplit_once('.') {
        Some((parent, last)) if last.starts_with("tier") && last[4..].chars().all(|c| c.is_ascii_digit()) => {
            parent.to_string()
        }
        _ => path.to_string(),
    }
}

/// Parameters as task environment names must stay usable.
pub fn check_params(params: &BTreeMap<String, String>) -> Result<(), ApiError> {
    for (k, v) in params {
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ApiError::invalid(format!("parameter name `{k}` must be letters, digits and `_`"))
                .field(format!("params.{k}")));
        }
        if v.contains('\0') {
            return Err(
                ApiError::invalid("a parameter must not contain a NUL byte").field(format!("params.{k}"))
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_of_queues() {
        assert_eq!(project_of_queue("root.ads.ranking.tier1"), "ads.ranking");
        assert_eq!(project_of_queue("root.default"), "default");
        assert_eq!(project_of_queue("root.ml.tierx"), "ml.tierx");
    }

    #[test]
    fn malformed_json_names_the_field() {
        let e = parse_body(br#"{"logical_date": 5}"#, false).err().map(|e| e.body.error);
        assert_eq!(e.and_then(|e| e.field), Some("logical_date".to_string()));
        let e = parse_body(br#"{"workflow": {}, "bogus": 1}"#, false).err().map(|e| e.body.error);
        assert_eq!(e.and_then(|e| e.field), Some("bogus".to_string()));
    }
}
