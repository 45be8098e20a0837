//! The Job that runs one attempt: built as plain data so that tests check every field against
//! what the Job API, Kueue and YuniKorn document.

use serde_json::{json, Value};
use weir_backend::TaskLaunch;

use crate::config::{KubeConfig, Scheduler};

/// The label that carries weir's attempt id; `recover` lists Jobs by it after a restart.
pub const ATTEMPT_LABEL: &str = "weir.io/attempt";
/// The annotation that carries the attempt id exactly (a label value cannot hold every id).
pub const ATTEMPT_ANNOTATION: &str = "weir.io/attempt-id";
/// Kueue reads the LocalQueue of a Job from this label (Kueue docs, "Run a Kubernetes Job":
/// `kueue.x-k8s.io/queue-name`), and admits a Job by unsuspending it.
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// YuniKorn's pod annotations for the application id and the queue, and the older labels it
/// still reads (YuniKorn k8shim, pkg/common/constants: `AnnotationApplicationID`,
/// `AnnotationQueueName`, `LabelApplicationID`, `LabelQueueName`).
pub const YUNIKORN_APP_ANNOTATION: &str = "yunikorn.apache.org/app-id";
pub const YUNIKORN_QUEUE_ANNOTATION: &str = "yunikorn.apache.org/queue";
pub const YUNIKORN_APP_LABEL: &str = "applicationId";
pub const YUNIKORN_QUEUE_LABEL: &str = "queue";
/// YuniKorn's gang annotations (same file: `AnnotationTaskGroupName`, `AnnotationTaskGroups`).
pub const YUNIKORN_TASK_GROUP_NAME: &str = "yunikorn.apache.org/task-group-name";
pub const YUNIKORN_TASK_GROUPS: &str = "yunikorn.apache.org/task-groups";

/// The Job's name for an attempt: a DNS-1123 label (lowercase alphanumerics and `-`, at most
/// 63 characters), or `None` when the attempt id cannot be made into one without losing it.
pub fn job_name(attempt: &str) -> Option<String> {
    let name = format!("weir-{}", attempt.to_ascii_lowercase().replace(['_', '.', ':', '/'], "-"));
    let ok = name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.ends_with('-');
    ok.then_some(name)
}

/// The Job for `launch` in the target queue `queue` (Kueue LocalQueue or YuniKorn queue).
pub fn job(config: &KubeConfig, launch: &TaskLaunch, name: &str, queue: Option<&str>) -> Value {
    let attempt = launch.attempt.as_str();
    let mut labels = json!({ ATTEMPT_LABEL: name });
    let mut pod_labels = labels.clone();
    let mut pod_annotations = json!({});
    let mut suspend = false;
    match (&config.scheduler, queue) {
        (Scheduler::Kueue, Some(q)) => {
            labels[KUEUE_QUEUE_LABEL] = json!(q);
            // Created suspended: Kueue admits it by setting `suspend: false`.
            suspend = true;
        }
        (Scheduler::Yunikorn, q) => {
            if let Some(q) = q {
                pod_labels[YUNIKORN_QUEUE_LABEL] = json!(q);
                pod_annotations[YUNIKORN_QUEUE_ANNOTATION] = json!(q);
            }
            pod_labels[YUNIKORN_APP_LABEL] = json!(name);
            pod_annotations[YUNIKORN_APP_ANNOTATION] = json!(name);
        }
        _ => {}
    }
    let env: Vec<Value> = launch.env.iter().map(|(k, v)| json!({ "name": k, "value": v })).collect();
    let r = launch.resources;
    let mut requests = json!({ "cpu": format!("{}m", r.cpu), "memory": format!("{}Mi", r.memory) });
    if r.gpu > 0 {
        requests["nvidia.com/gpu"] = json!(r.gpu.to_string());
    }
    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "containers": [{
            "name": "task",
            "image": config.image,
            "command": ["/bin/sh", "-c", launch.command],
            "env": env,
            "resources": { "requests": requests.clone(), "limits": requests.clone() },
        }],
    });
    if matches!(config.scheduler, Scheduler::Yunikorn) {
        pod_spec["schedulerName"] = json!("yunikorn");
        if config.gang {
            // The Job's one pod is a gang of one: YuniKorn reserves it (placeholders) before
            // it runs. A Spark stage's executors get their own group in a SparkApplication.
            pod_annotations[YUNIKORN_TASK_GROUP_NAME] = json!("task");
            pod_annotations[YUNIKORN_TASK_GROUPS] = json!(task_groups(&[("task", 1, &requests)]).to_string());
        }
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": config.namespace,
            "labels": labels,
            "annotations": { ATTEMPT_ANNOTATION: attempt },
        },
        "spec": {
            // weir retries; the Job never does.
            "backoffLimit": 0,
            "suspend": suspend,
            "template": {
                "metadata": { "labels": pod_labels, "annotations": pod_annotations },
                "spec": pod_spec,
            },
        },
    })
}

/// The value of YuniKorn's `task-groups` annotation: a JSON list of `{name, minMember,
/// minResource}` (YuniKorn docs, "Gang Scheduling": each group's name, its minimum member count
/// and the resources of one member).
pub fn task_groups(groups: &[(&str, u32, &Value)]) -> Value {
    Value::Array(
        groups
            .iter()
            .map(|(name, min, res)| json!({ "name": name, "minMember": min, "minResource": res }))
            .collect(),
    )
}
