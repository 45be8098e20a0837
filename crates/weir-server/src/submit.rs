//! Submissions: parse (JSON or YAML, with the path of a malformed field), route, validate with
//! the same `weir-model` rules as `weir validate` (live form: stages carry commands), and store
//! through the group-commit writer — one transaction for every submission that arrived while
//! the previous one was committing — so a 201 always means "committed".

use std::collections::BTreeMap;

use tokio::sync::{mpsc, oneshot};
use weir_api::SubmitRun;
use weir_model::{WorkflowSpec, Workload, WorkloadFile};
use weir_store::{NewRun, Store, Submitted};

use crate::clusters::Registry;
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
    pub fn start(store: Store) -> Writer {
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
                match store.submit(&runs).await {
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
    pub project: String,
    pub tier: u8,
}

/// Route and validate a workflow. A route replaces the workflow's own placement.
pub fn accept(registry: &Registry, mut spec: WorkflowSpec) -> Result<Accepted, ApiError> {
    let tier = spec.tier.unwrap_or(3);
    let routed = registry.route(&spec.name, spec.project.as_deref(), tier).ok_or_else(|| {
        ApiError::invalid("no route for this workflow and no default cluster (name one `default`)")
    })?;
    let loaded = registry.cluster(&routed.cluster).ok_or_else(|| {
        ApiError::invalid(format!("the route names cluster `{}`, which is not loaded", routed.cluster))
    })?;
    let declared_project = spec.project.clone();
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
    let project = declared_project.unwrap_or_else(|| project_of_queue(&queue));
    Ok(Accepted { cluster: routed.cluster, queue, project, tier: wf.tier, spec })
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
