//! The Job (or, for a Spark stage, the SparkApplication) that runs one attempt: built as plain data so that tests check every field against
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

/// The spark-operator's custom resource (`sparkoperator.k8s.io/v1beta2`, kind
/// `SparkApplication`) that runs a Spark stage's attempt.
pub const SPARK_GROUP: &str = "sparkoperator.k8s.io";
pub const SPARK_VERSION: &str = "v1beta2";
pub const SPARK_KIND: &str = "SparkApplication";

/// The SparkApplication for a Spark stage's attempt (`spark`: the stage's application), in the
/// YuniKorn queue `queue` when the scheduler is YuniKorn (the operator's batch-scheduler
/// integration: `spec.batchScheduler: yunikorn` and `spec.batchSchedulerOptions.queue`).
/// Fields as the operator's API documents them (`SparkApplicationSpec`: `type`, `mode`,
/// `image`, `sparkVersion`, `mainApplicationFile`, `mainClass`, `arguments`, `sparkConf`,
/// `restartPolicy`, `driver`/`executor` with `cores`, `coreLimit`, `memory`, `instances`; the
/// driver's `coreRequest`).
/// `Err` names what is missing.
pub fn spark_application(
    config: &KubeConfig,
    launch: &TaskLaunch,
    spark: &weir_model::SparkSpec,
    name: &str,
    queue: Option<&str>,
) -> Result<Value, String> {
    let image = config.spark_image.as_deref().ok_or(
        "the stage is a Spark application and the backend has no `spark_image` (an image with Spark) to run it in",
    )?;
    if matches!(config.scheduler, Scheduler::Kueue) {
        return Err(
            "Kueue does not admit SparkApplications: run Spark stages on a cluster whose scheduler is \
                    yunikorn or default"
                .into(),
        );
    }
    let python = spark.main.ends_with(".py");
    // A path is a file in the image; a URI (local://, s3a://, https://…) is passed as it is.
    let uri = |f: &str| if f.contains("://") { f.to_string() } else { format!("local://{f}") };
    let main_file = if python {
        uri(&spark.main)
    } else {
        uri(spark.jar.as_deref().ok_or("a JVM Spark application needs its `jar`")?)
    };
    let r = launch.resources;
    let labels = json!({ ATTEMPT_LABEL: name });
    let env: Vec<Value> = launch.env.iter().map(|(k, v)| json!({ "name": k, "value": v })).collect();
    // The driver pod asks for exactly the task's millicores: `coreRequest` (the operator's
    // `DriverSpec.CoreRequest`, api/v1beta2/sparkapplication_types.go, passed to Spark as
    // `spark.kubernetes.driver.request.cores`, which Spark's `BasicDriverFeatureStep` prefers
    // over `spark.driver.cores` for the pod's CPU request; the operator's YuniKorn task group
    // takes it over `cores` too, internal/scheduler/yunikorn/resourceusage `cpuRequest`).
    // `cores` stays a whole number (the CRD's int32, minimum 1): it is `spark.driver.cores`, the
    // driver's own thread count, rounded up; `coreLimit` caps it at the grant.
    let mut driver = json!({
        "cores": r.cpu.div_ceil(1000).max(1),
        "coreRequest": format!("{}m", r.cpu.max(1)),
        "coreLimit": format!("{}m", r.cpu.max(1)),
        "memory": format!("{}m", r.memory.max(1)),
        "labels": labels.clone(),
        "env": env,
    });
    if let Some(sa) = &config.spark_service_account {
        driver["serviceAccount"] = json!(sa);
    }
    let conf = |k: &str| spark.conf.get(k).cloned();
    let mut executor = json!({
        "instances": spark.executors.unwrap_or(1).max(1),
        "cores": conf("spark.executor.cores").and_then(|c| c.trim().parse::<u64>().ok()).unwrap_or(1),
        "memory": conf("spark.executor.memory").unwrap_or_else(|| "1g".into()),
        "labels": labels.clone(),
    });
    if let Some(sa) = &config.spark_service_account {
        executor["serviceAccount"] = json!(sa);
    }
    let mut spec = json!({
        "type": if python { "Python" } else { "Java" },
        "mode": "cluster",
        "image": image,
        "sparkVersion": config.spark_version,
        "mainApplicationFile": main_file,
        "arguments": spark.args,
        "sparkConf": spark.conf,
        // weir retries attempts itself: the operator must not.
        "restartPolicy": { "type": "Never" },
        "driver": driver,
        "executor": executor,
    });
    if !python {
        spec["mainClass"] = json!(spark.main);
    }
    if matches!(config.scheduler, Scheduler::Yunikorn) {
        spec["batchScheduler"] = json!("yunikorn");
        if let Some(q) = queue {
            spec["batchSchedulerOptions"] = json!({ "queue": q });
        }
    }
    Ok(json!({
        "apiVersion": format!("{SPARK_GROUP}/{SPARK_VERSION}"),
        "kind": SPARK_KIND,
        "metadata": {
            "name": name,
            "namespace": config.namespace,
            "labels": labels,
            "annotations": { ATTEMPT_ANNOTATION: launch.attempt.as_str() },
        },
        "spec": spec,
    }))
}
