//! Contract tests of the Kubernetes backend against a stateful fake API server (tests/fake):
//! no Kubernetes API server can run where these tests run, so the fake answers as the API
//! server documents it would, and each test checks the requests the backend sent.

mod fake;

use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use weir_backend::{Adopted, AttemptId, Backend, BackendError, Exit, Recovered, TaskExit, TaskLaunch};
use weir_backend_kube::{KubeBackend, KubeConfig, KubeError, Scheduler};

fn config(scheduler: Scheduler) -> KubeConfig {
    KubeConfig {
        namespace: "batch".into(),
        image: "python:3.12-slim".into(),
        scheduler,
        queues: [("ads".to_string(), "team-ads".to_string())].into(),
        default_queue: Some("shared".into()),
        gang: false,
        poll_ms: 5,
        spark_image: None,
        spark_version: weir_backend_kube::config::default_spark_version(),
        spark_service_account: None,
    }
}

fn launch(id: &str, queue: &str) -> TaskLaunch {
    TaskLaunch {
        attempt: AttemptId::new(id).unwrap(),
        command: "echo hi".into(),
        env: [("WEIR_QUEUE".to_string(), queue.to_string())].into(),
        workdir: "/work".into(),
        resources: weir_model::Resources { cpu: 1500, memory: 512, gpu: 0 },
        user: None,
        stdout: "/logs/a/stdout".into(),
        stderr: "/logs/a/stderr".into(),
        spark: None,
    }
}

fn backend(scheduler: Scheduler) -> (KubeBackend, fake::Shared, UnboundedReceiver<TaskExit>) {
    let (client, state) = fake::client(&["batch"]);
    let (tx, rx) = unbounded_channel();
    (KubeBackend::new(config(scheduler), client, tx), state, rx)
}

/// Waits until `cond` holds of the fake's state (no wall-clock assertion: a bound on waiting).
async fn until(state: &fake::Shared, what: &str, cond: impl Fn(&fake::State) -> bool) {
    for _ in 0..3000 {
        if cond(&state.lock().unwrap()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

async fn next_exit(rx: &mut UnboundedReceiver<TaskExit>) -> TaskExit {
    tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("an exit is reported").unwrap()
}

#[tokio::test]
async fn a_kueue_job_is_created_suspended_with_its_local_queue_and_runs_to_completion() {
    let (b, state, mut exits) = backend(Scheduler::Kueue);
    let launched = b.start(&launch("run-1/0/0/2/1", "ads")).await.unwrap();
    assert_eq!(launched.backend, "kubernetes");
    assert_eq!(launched.boot_id, "uid-1", "the record keeps the Job's uid");

    let create = state.lock().unwrap().seen.iter().find(|s| s.method == "POST").cloned().unwrap();
    assert_eq!(create.path, "/apis/batch/v1/namespaces/batch/jobs");
    let job = &create.body;
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["name"], "weir-run-1-0-0-2-1");
    assert_eq!(job["metadata"]["namespace"], "batch");
    // Kueue (docs "Run a Kubernetes Job"): the LocalQueue in the `kueue.x-k8s.io/queue-name`
    // label, the Job created with `spec.suspend: true`; Kueue admits it by unsuspending it.
    assert_eq!(
        job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-ads",
        "weir queue ads → LocalQueue"
    );
    assert_eq!(job["spec"]["suspend"], true);
    assert_eq!(job["metadata"]["labels"]["weir.io/attempt"], "weir-run-1-0-0-2-1");
    assert_eq!(job["metadata"]["annotations"]["weir.io/attempt-id"], "run-1/0/0/2/1");
    // weir retries attempts itself: the Job must not (Job API: `backoffLimit`).
    assert_eq!(job["spec"]["backoffLimit"], 0);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never", "a Job's pods must be Never or OnFailure");
    let c = &pod["containers"][0];
    assert_eq!(c["command"], json!(["/bin/sh", "-c", "echo hi"]));
    assert_eq!(c["image"], "python:3.12-slim");
    assert_eq!(c["resources"]["requests"], json!({"cpu": "1500m", "memory": "512Mi"}));
    assert_eq!(c["resources"]["limits"], json!({"cpu": "1500m", "memory": "512Mi"}));
    assert_eq!(c["env"], json!([{"name": "WEIR_QUEUE", "value": "ads"}]));

    state.lock().unwrap().end_job("weir-run-1-0-0-2-1", 0);
    let exit = next_exit(&mut exits).await;
    assert_eq!(exit.attempt.as_str(), "run-1/0/0/2/1");
    assert_eq!(exit.exit, Exit::Code(0));
    assert_eq!(b.logs(&launched.attempt).await.unwrap(), "hello from the pod\n");
}

#[tokio::test]
async fn a_failed_job_reports_its_containers_exit_code() {
    let (b, state, mut exits) = backend(Scheduler::Kueue);
    b.start(&launch("run-2/0/0/0/1", "other")).await.unwrap();
    let body = state.lock().unwrap().seen.iter().find(|s| s.method == "POST").unwrap().body.clone();
    assert_eq!(
        body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "shared",
        "unmapped queue → default_queue"
    );
    state.lock().unwrap().end_job("weir-run-2-0-0-0-1", 3);
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Code(3));
}

#[tokio::test]
async fn starting_an_attempt_twice_is_already_started_from_the_409() {
    let (b, state, _exits) = backend(Scheduler::Default);
    b.start(&launch("run-3/0/0/0/1", "ads")).await.unwrap();
    let again = b.start(&launch("run-3/0/0/0/1", "ads")).await;
    assert!(matches!(again, Err(BackendError::AlreadyStarted { .. })), "{again:?}");
    assert_eq!(state.lock().unwrap().jobs.len(), 1);
}

#[tokio::test]
async fn kill_deletes_the_job_with_the_grace_and_background_propagation() {
    let (b, state, mut exits) = backend(Scheduler::Kueue);
    let launched = b.start(&launch("run-4/0/0/0/1", "ads")).await.unwrap();
    b.kill(&launched, Duration::from_secs(30)).await.unwrap();
    let del = state.lock().unwrap().seen.iter().find(|s| s.method == "DELETE").cloned().unwrap();
    assert_eq!(del.path, "/apis/batch/v1/namespaces/batch/jobs/weir-run-4-0-0-0-1");
    // DeleteOptions (meta/v1): `gracePeriodSeconds`; `propagationPolicy: Background` so the
    // garbage collector deletes the Job's pods too (the Job API's default for batch/v1 clients
    // is to orphan them).
    assert_eq!(del.body["gracePeriodSeconds"], 30);
    assert_eq!(del.body["propagationPolicy"], "Background");
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Killed);
    // Killing again, the Job gone (404), is not an error.
    b.kill(&launched, Duration::from_secs(30)).await.unwrap();
}

#[tokio::test]
async fn a_job_deleted_by_someone_else_is_lost_not_succeeded() {
    let (b, state, mut exits) = backend(Scheduler::Default);
    b.start(&launch("run-5/0/0/0/1", "ads")).await.unwrap();
    state.lock().unwrap().delete_job("weir-run-5-0-0-0-1");
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Lost);
}

#[tokio::test]
async fn a_restarted_backend_re_adopts_its_jobs_by_the_attempt_label() {
    let (client, state) = fake::client(&["batch"]);
    let (tx, _rx) = unbounded_channel();
    let first = KubeBackend::new(config(Scheduler::Kueue), client.clone(), tx);
    let launched = first.start(&launch("run-6/0/0/0/1", "ads")).await.unwrap();
    first.start(&launch("run-6/0/0/0/2", "ads")).await.unwrap();
    drop(first); // the server dies; the Jobs run on

    let (tx, mut exits) = unbounded_channel();
    let second = KubeBackend::new(config(Scheduler::Kueue), client, tx);
    // The record was stored: adopt by name and uid.
    assert_eq!(second.adopt(&launched).await.unwrap(), Adopted::Running);
    // The record was never stored: recover lists by the attempt label.
    let found = second.recover(&AttemptId::new("run-6/0/0/0/2").unwrap()).await.unwrap();
    let Recovered::Running(rec) = found else { panic!("{found:?}") };
    assert_eq!(rec.boot_id, "uid-2");
    let listed = state.lock().unwrap().seen.iter().any(|s| {
        s.method == "GET"
            && s.path.ends_with("/jobs")
            && s.query.contains("labelSelector=weir.io%2Fattempt%3Dweir-run-6-0-0-0-2")
    });
    assert!(listed, "recover lists by the attempt label");
    assert_eq!(second.recover(&AttemptId::new("run-6/0/0/0/9").unwrap()).await.unwrap(), Recovered::NotFound);
    // Nothing was created twice.
    assert_eq!(state.lock().unwrap().seen.iter().filter(|s| s.method == "POST").count(), 2);

    state.lock().unwrap().end_job("weir-run-6-0-0-0-1", 0);
    state.lock().unwrap().end_job("weir-run-6-0-0-0-2", 1);
    let mut ends = [next_exit(&mut exits).await, next_exit(&mut exits).await];
    ends.sort_by(|a, b| a.attempt.as_str().cmp(b.attempt.as_str()));
    assert_eq!(ends[0].exit, Exit::Code(0));
    assert_eq!(ends[1].exit, Exit::Code(1));
}

#[tokio::test]
async fn adopting_a_job_re_created_under_the_same_name_is_lost() {
    let (b, state, _exits) = backend(Scheduler::Default);
    let mut launched = b.start(&launch("run-7/0/0/0/1", "ads")).await.unwrap();
    launched.boot_id = "uid-of-an-older-job".into();
    assert_eq!(b.adopt(&launched).await.unwrap(), Adopted::Ended(Exit::Lost));
    state.lock().unwrap().end_job("weir-run-7-0-0-0-1", 0);
}

#[tokio::test]
async fn yunikorn_pods_carry_the_queue_app_id_and_task_groups() {
    let (client, state) = fake::client(&["batch"]);
    let (tx, _rx) = unbounded_channel();
    let mut c = config(Scheduler::Yunikorn);
    c.queues.insert("ads".into(), "root.ads".into());
    c.gang = true;
    let b = KubeBackend::new(c, client, tx);
    b.start(&launch("run-8/0/0/0/1", "ads")).await.unwrap();
    let job = state.lock().unwrap().seen.iter().find(|s| s.method == "POST").unwrap().body.clone();
    let meta = &job["spec"]["template"]["metadata"];
    // YuniKorn k8shim pkg/common/constants: AnnotationApplicationID, AnnotationQueueName,
    // LabelApplicationID ("applicationId"), LabelQueueName ("queue"), AnnotationTaskGroupName,
    // AnnotationTaskGroups; SchedulerName "yunikorn".
    assert_eq!(meta["annotations"]["yunikorn.apache.org/queue"], "root.ads");
    assert_eq!(meta["annotations"]["yunikorn.apache.org/app-id"], "weir-run-8-0-0-0-1");
    assert_eq!(meta["labels"]["queue"], "root.ads");
    assert_eq!(meta["labels"]["applicationId"], "weir-run-8-0-0-0-1");
    assert_eq!(job["spec"]["template"]["spec"]["schedulerName"], "yunikorn");
    assert_eq!(job["spec"]["suspend"], false, "only Kueue admits by unsuspending");
    assert!(job["metadata"]["labels"].get("kueue.x-k8s.io/queue-name").is_none());
    assert_eq!(meta["annotations"]["yunikorn.apache.org/task-group-name"], "task");
    let groups: serde_json::Value =
        serde_json::from_str(meta["annotations"]["yunikorn.apache.org/task-groups"].as_str().unwrap())
            .unwrap();
    // YuniKorn docs, "Gang Scheduling": name, minMember, minResource per task group.
    assert_eq!(
        groups,
        json!([{"name": "task", "minMember": 1, "minResource": {"cpu": "1500m", "memory": "512Mi"}}])
    );
}

#[tokio::test]
async fn health_names_a_missing_namespace() {
    let (client, _state) = fake::client(&["default"]);
    let (tx, _rx) = unbounded_channel();
    let b = KubeBackend::new(config(Scheduler::Default), client, tx);
    let err = b.health().await.unwrap_err();
    assert!(matches!(err, KubeError::NoNamespace(ref ns) if ns == "batch"), "{err:?}");
    assert_eq!(err.to_string(), "namespace \"batch\" does not exist (backend.namespace)");
}

#[tokio::test]
async fn health_reports_the_version_when_all_is_well() {
    let (b, _state, _rx) = backend(Scheduler::Default);
    assert_eq!(b.health().await.unwrap(), "v1.33.1");
}

#[tokio::test]
async fn an_unreachable_api_is_an_unhealthy_cluster_and_a_retryable_start_error() {
    let (tx, _rx) = unbounded_channel();
    let b = KubeBackend::new(config(Scheduler::Default), fake::unreachable_client(), tx);
    let err = b.health().await.unwrap_err();
    assert!(matches!(err, KubeError::Unreachable(_)), "{err:?}");
    let start = b.start(&launch("run-9/0/0/0/1", "ads")).await;
    assert!(matches!(start, Err(BackendError::Unreachable { .. })), "{start:?}");
}

#[tokio::test]
async fn capacity_comes_from_the_node_lists_allocatable() {
    let (b, state, _rx) = backend(Scheduler::Default);
    state.lock().unwrap().nodes = vec![
        json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "3920m", "memory": "16318040Ki", "nvidia.com/gpu": "2"}}}),
        json!({"metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}),
        json!({"metadata": {"name": "cordoned"}, "spec": {"unschedulable": true}, "status": {"allocatable": {"cpu": "4"}}}),
    ];
    let nodes = b.nodes().await.unwrap();
    assert_eq!(nodes.len(), 2, "an unschedulable node is not capacity");
    assert_eq!(nodes[0].name, "n1");
    assert_eq!(nodes[0].resources, weir_model::Resources { cpu: 3920, memory: 15935, gpu: 2 });
    assert_eq!(nodes[1].resources, weir_model::Resources { cpu: 4000, memory: 8192, gpu: 0 });
}

/// What the server publishes for the Clusters page and `GET /v1/clusters` (`Backend::health`).
#[tokio::test]
async fn the_servers_health_view_carries_version_nodes_and_the_reason() {
    let (b, state, _rx) = backend(Scheduler::Default);
    state.lock().unwrap().nodes =
        vec![json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}})];
    let h = Backend::health(&b).await;
    assert_eq!((h.healthy, h.version.as_str(), h.nodes, h.error), (true, "v1.33.1", Some(1), None));
    let (client, _state) = fake::client(&["default"]);
    let (tx, _rx) = unbounded_channel();
    let missing = KubeBackend::new(config(Scheduler::Default), client, tx);
    let h = Backend::health(&missing).await;
    assert!(
        !h.healthy && h.error.as_deref() == Some("namespace \"batch\" does not exist (backend.namespace)"),
        "{h:?}"
    );
}

/// A Spark stage's launch: a PySpark word count with two executors.
fn spark_launch(id: &str, queue: &str) -> TaskLaunch {
    let mut l = launch(id, queue);
    l.spark = Some(weir_model::SparkSpec {
        main: "/opt/jobs/wordcount.py".into(),
        jar: None,
        args: vec!["s3a://bucket/words.txt".into()],
        conf: [("spark.executor.memory".to_string(), "2g".to_string())].into(),
        executors: Some(2),
    });
    l
}

fn spark_backend(scheduler: Scheduler) -> (KubeBackend, fake::Shared, UnboundedReceiver<TaskExit>) {
    let (client, state) = fake::client(&["batch"]);
    let (tx, rx) = unbounded_channel();
    let mut c = config(scheduler);
    c.queues.insert("ads".into(), "root.ads".into());
    c.spark_image = Some("apache/spark:4.0.0-python3".into());
    c.spark_service_account = Some("spark".into());
    (KubeBackend::new(c, client, tx), state, rx)
}

/// A Spark stage on a YuniKorn cluster runs as a SparkApplication (spark-operator's
/// `sparkoperator.k8s.io/v1beta2` API, `SparkApplicationSpec`) in the YuniKorn queue through the
/// operator's batch-scheduler integration (`batchScheduler: yunikorn`,
/// `batchSchedulerOptions.queue`), and its end is the operator's `applicationState`.
#[tokio::test]
async fn a_spark_stage_runs_as_a_sparkapplication_in_its_yunikorn_queue() {
    let (b, state, mut exits) = spark_backend(Scheduler::Yunikorn);
    let launched = b.start(&spark_launch("run-20/0/0/0/1", "ads")).await.unwrap();
    assert_eq!(launched.boot_id, "SparkApplication/uid-1", "the record names the kind and keeps the uid");
    let create = state.lock().unwrap().seen.iter().find(|s| s.method == "POST").cloned().unwrap();
    assert_eq!(create.path, "/apis/sparkoperator.k8s.io/v1beta2/namespaces/batch/sparkapplications");
    let app = &create.body;
    assert_eq!(app["apiVersion"], "sparkoperator.k8s.io/v1beta2");
    assert_eq!(app["kind"], "SparkApplication");
    assert_eq!(app["metadata"]["name"], "weir-run-20-0-0-0-1");
    assert_eq!(app["metadata"]["labels"]["weir.io/attempt"], "weir-run-20-0-0-0-1");
    assert_eq!(app["metadata"]["annotations"]["weir.io/attempt-id"], "run-20/0/0/0/1");
    let spec = &app["spec"];
    assert_eq!(spec["type"], "Python");
    assert_eq!(spec["mode"], "cluster");
    assert_eq!(spec["image"], "apache/spark:4.0.0-python3");
    assert_eq!(spec["sparkVersion"], "4.0.0");
    assert_eq!(
        spec["mainApplicationFile"], "local:///opt/jobs/wordcount.py",
        "a path is a file in the image"
    );
    assert_eq!(spec["arguments"], json!(["s3a://bucket/words.txt"]));
    assert_eq!(spec["sparkConf"], json!({"spark.executor.memory": "2g"}));
    // weir retries attempts itself: the operator must not (RestartPolicy type Never).
    assert_eq!(spec["restartPolicy"], json!({"type": "Never"}));
    // The driver gets the task's container, 1500 millicores: its pod requests exactly that
    // (`coreRequest`, spark-operator's `DriverSpec.CoreRequest`, which becomes
    // `spark.kubernetes.driver.request.cores` and wins over `cores` in Spark's
    // `BasicDriverFeatureStep` and in the operator's YuniKorn `cpuRequest`), limited to it;
    // `cores`, a whole number in the CRD, is the driver's thread count (1.5 rounded up).
    assert_eq!(spec["driver"]["coreRequest"], "1500m", "the pod asks for what weir granted");
    assert_eq!(spec["driver"]["coreLimit"], "1500m");
    assert_eq!(spec["driver"]["cores"], 2);
    assert_eq!(spec["driver"]["memory"], "512m");
    assert_eq!(spec["driver"]["serviceAccount"], "spark");
    assert_eq!(spec["driver"]["env"], json!([{"name": "WEIR_QUEUE", "value": "ads"}]));
    assert_eq!(spec["executor"]["instances"], 2);
    assert_eq!(spec["executor"]["memory"], "2g");
    assert_eq!(spec["batchScheduler"], "yunikorn");
    assert_eq!(spec["batchSchedulerOptions"], json!({"queue": "root.ads"}));

    state.lock().unwrap().end_app("weir-run-20-0-0-0-1", "COMPLETED", Some(0));
    let exit = next_exit(&mut exits).await;
    assert_eq!((exit.attempt.as_str(), exit.exit), ("run-20/0/0/0/1", Exit::Code(0)));
    assert_eq!(b.logs(&launched.attempt).await.unwrap(), "words counted\n", "the driver's log");
}

#[tokio::test]
async fn a_failed_sparkapplication_reports_its_drivers_exit_code_and_a_failed_submission_1() {
    let (b, state, mut exits) = spark_backend(Scheduler::Yunikorn);
    b.start(&spark_launch("run-21/0/0/0/1", "ads")).await.unwrap();
    state.lock().unwrap().end_app("weir-run-21-0-0-0-1", "FAILED", Some(3));
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Code(3));
    b.start(&spark_launch("run-21/0/0/0/2", "ads")).await.unwrap();
    state.lock().unwrap().end_app("weir-run-21-0-0-0-2", "SUBMISSION_FAILED", None);
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Code(1));
    // RUNNING is not an end.
    b.start(&spark_launch("run-21/0/0/0/3", "ads")).await.unwrap();
    state.lock().unwrap().end_app("weir-run-21-0-0-0-3", "RUNNING", None);
    assert!(tokio::time::timeout(Duration::from_millis(200), exits.recv()).await.is_err());
}

#[tokio::test]
async fn killing_a_spark_attempt_deletes_its_sparkapplication_and_a_second_start_is_a_409() {
    let (b, state, mut exits) = spark_backend(Scheduler::Default);
    let launched = b.start(&spark_launch("run-22/0/0/0/1", "ads")).await.unwrap();
    let spec = state.lock().unwrap().apps["weir-run-22-0-0-0-1"]["spec"].clone();
    assert!(spec.get("batchScheduler").is_none(), "only YuniKorn gets the batch scheduler: {spec}");
    let again = b.start(&spark_launch("run-22/0/0/0/1", "ads")).await;
    assert!(matches!(again, Err(BackendError::AlreadyStarted { .. })), "{again:?}");
    b.kill(&launched, Duration::from_secs(20)).await.unwrap();
    let del = state.lock().unwrap().seen.iter().find(|s| s.method == "DELETE").cloned().unwrap();
    assert_eq!(
        del.path,
        "/apis/sparkoperator.k8s.io/v1beta2/namespaces/batch/sparkapplications/weir-run-22-0-0-0-1"
    );
    assert_eq!(del.body["gracePeriodSeconds"], 20);
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Killed);
    assert!(state.lock().unwrap().jobs.is_empty(), "no Job was made for a Spark stage");
}

#[tokio::test]
async fn a_restarted_backend_re_adopts_its_sparkapplications() {
    let (client, state) = fake::client(&["batch"]);
    let mut c = config(Scheduler::Yunikorn);
    c.spark_image = Some("apache/spark:4.0.0".into());
    let (tx, _rx) = unbounded_channel();
    let first = KubeBackend::new(c.clone(), client.clone(), tx);
    let launched = first.start(&spark_launch("run-23/0/0/0/1", "ads")).await.unwrap();
    first.start(&spark_launch("run-23/0/0/0/2", "ads")).await.unwrap();
    drop(first);

    let (tx, mut exits) = unbounded_channel();
    let second = KubeBackend::new(c, client, tx);
    assert_eq!(second.adopt(&launched).await.unwrap(), Adopted::Running);
    let found = second.recover(&AttemptId::new("run-23/0/0/0/2").unwrap()).await.unwrap();
    let Recovered::Running(rec) = found else { panic!("{found:?}") };
    assert_eq!(rec.boot_id, "SparkApplication/uid-2");
    let mut stale = launched.clone();
    stale.boot_id = "SparkApplication/uid-of-an-older-one".into();
    assert_eq!(second.adopt(&stale).await.unwrap(), Adopted::Ended(Exit::Lost));
    assert_eq!(
        state.lock().unwrap().seen.iter().filter(|s| s.method == "POST").count(),
        2,
        "none made twice"
    );

    state.lock().unwrap().end_app("weir-run-23-0-0-0-1", "COMPLETED", Some(0));
    state.lock().unwrap().end_app("weir-run-23-0-0-0-2", "FAILED", Some(2));
    let mut ends = [next_exit(&mut exits).await, next_exit(&mut exits).await];
    ends.sort_by(|a, b| a.attempt.as_str().cmp(b.attempt.as_str()));
    assert_eq!(ends[0].exit, Exit::Code(0));
    assert_eq!(ends[1].exit, Exit::Code(2));
    // Once recorded, forget deletes the ended application.
    second.forget(&launched).await.unwrap();
    assert!(!state.lock().unwrap().apps.contains_key("weir-run-23-0-0-0-1"));
}

#[tokio::test]
async fn a_spark_stage_without_a_spark_image_or_on_kueue_is_refused_naming_why() {
    let (b, _state, _rx) = backend(Scheduler::Default);
    let err = b.start(&spark_launch("run-24/0/0/0/1", "ads")).await.unwrap_err();
    assert!(err.to_string().contains("spark_image"), "{err}");
    let (k, _state, _rx) = spark_backend(Scheduler::Kueue);
    let err = k.start(&spark_launch("run-24/0/0/0/2", "ads")).await.unwrap_err();
    assert!(err.to_string().contains("Kueue does not admit SparkApplications"), "{err}");
}

// ---- Status by watch. Checked against: Kubernetes docs, "API Concepts" (kubernetes/website
// content/en/docs/reference/using-api/api-concepts.md), "Efficient detection of changes" — list,
// watch from the list's resourceVersion, restart a dropped watch from the last resourceVersion
// returned, and on `410 Gone` clear, list and watch from the new list's version — and "Watch
// bookmarks" (a BOOKMARK carries only a resourceVersion: every change up to it was sent; never
// assume one comes); client-go tools/cache `isExpiredError` (`IsResourceExpired` — reason
// `Expired`, code 410, which the fake sends — or `IsGone`) before a re-list; kube-rs `Api::watch`
// (`WatchEvent::{Added, Modified, Deleted, Bookmark, Error}`, `WatchParams` with
// `allowWatchBookmarks=true` by default).
// Conflicts: API conventions (kubernetes/community contributors/devel/sig-architecture/
// api-conventions.md, "Concurrency Control and Consistency": a write carrying a resourceVersion
// that is not the object's fails 409 `Conflict`; the client GETs again and retries); a
// resourceVersion inside a patch is that precondition too (kubernetes/kubernetes#63104: the
// patched object keeps the patch's resourceVersion, and the store's update checks it).

#[tokio::test]
async fn status_comes_from_one_list_and_one_watch_not_from_reading_each_job() {
    let (b, state, mut exits) = backend(Scheduler::Kueue);
    for i in 1..=3 {
        b.start(&launch(&format!("run-30/0/0/0/{i}"), "ads")).await.unwrap();
    }
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    {
        let mut s = state.lock().unwrap();
        s.end_job("weir-run-30-0-0-0-1", 0);
        s.end_job("weir-run-30-0-0-0-2", 4);
        s.admit("weir-run-30-0-0-0-3"); // Kueue admits it: a MODIFIED event, not an end
    }
    let mut ends = [next_exit(&mut exits).await, next_exit(&mut exits).await];
    ends.sort_by(|a, b| a.attempt.as_str().cmp(b.attempt.as_str()));
    assert_eq!((ends[0].exit, ends[1].exit), (Exit::Code(0), Exit::Code(4)));
    assert!(tokio::time::timeout(Duration::from_millis(200), exits.recv()).await.is_err(), "run 3 runs on");
    let s = state.lock().unwrap();
    assert_eq!(s.label_lists("jobs"), 1, "one list of the labelled Jobs");
    let watches: Vec<_> = s.seen.iter().filter(|x| x.query.contains("watch=true")).cloned().collect();
    assert_eq!(watches.len(), 1, "one watch for every attempt: {watches:?}");
    assert!(watches[0].path.ends_with("/namespaces/batch/jobs"));
    assert!(watches[0].query.contains("allowWatchBookmarks=true"), "{}", watches[0].query);
    assert!(watches[0].query.contains("labelSelector=weir.io%2Fattempt"), "{}", watches[0].query);
    let gets = s.seen.iter().filter(|x| x.method == "GET" && x.path.contains("/jobs/")).count();
    assert_eq!(gets, 0, "no Job is read one by one (no polling)");
}

#[tokio::test]
async fn a_dropped_watch_resumes_from_the_last_resource_version_and_misses_nothing() {
    let (b, state, mut exits) = backend(Scheduler::Default);
    b.start(&launch("run-31/0/0/0/1", "ads")).await.unwrap();
    b.start(&launch("run-31/0/0/0/2", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    let last = state.lock().unwrap().version.to_string(); // run 2's ADDED, the last event seen
    {
        // The API server goes away: the watch closes and new ones are refused for a while;
        // meanwhile run 1 ends.
        let mut s = state.lock().unwrap();
        s.refuse_watches = true;
        s.close_watches();
        s.end_job("weir-run-31-0-0-0-1", 0);
    }
    until(&state, "a refused watch", |s| s.seen.iter().any(|x| x.code == 503)).await;
    state.lock().unwrap().refuse_watches = false;
    let exit = next_exit(&mut exits).await;
    assert_eq!((exit.attempt.as_str(), exit.exit), ("run-31/0/0/0/1", Exit::Code(0)));
    let s = state.lock().unwrap();
    let from = s.watches_from("jobs");
    assert!(from.len() >= 3, "watch, refused ones, watch again: {from:?}");
    assert!(from[1..].iter().all(|v| *v == last), "every reconnection resumes from {last}: {from:?}");
    assert_eq!(s.label_lists("jobs"), 1, "no new list: the kept history had every change");
}

#[tokio::test]
async fn a_410_gone_on_an_expired_resource_version_lists_again() {
    let (b, state, mut exits) = backend(Scheduler::Default);
    b.start(&launch("run-32/0/0/0/1", "ads")).await.unwrap();
    b.start(&launch("run-32/0/0/0/2", "ads")).await.unwrap();
    b.start(&launch("run-32/0/0/0/3", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    {
        let mut s = state.lock().unwrap();
        s.refuse_watches = true;
        s.close_watches();
        s.end_job("weir-run-32-0-0-0-1", 0);
        s.delete_job("weir-run-32-0-0-0-2"); // by someone else
        s.compact(); // the changes above are no longer in the history
    }
    until(&state, "a refused watch", |s| s.seen.iter().any(|x| x.code == 503)).await;
    state.lock().unwrap().refuse_watches = false;
    let mut ends = [next_exit(&mut exits).await, next_exit(&mut exits).await];
    ends.sort_by(|a, b| a.attempt.as_str().cmp(b.attempt.as_str()));
    assert_eq!(ends[0].exit, Exit::Code(0), "the end found by the new list");
    assert_eq!(ends[1].exit, Exit::Lost, "gone from the new list: lost, never a success");
    until(&state, "a watch from the new list", |s| s.open_watches() == 1).await;
    {
        let s = state.lock().unwrap();
        assert_eq!(s.label_lists("jobs"), 2, "the 410 made the loop list again");
        let from = s.watches_from("jobs");
        assert_eq!(
            from.last().unwrap(),
            &s.version.to_string(),
            "then watched from the list's version: {from:?}"
        );
    }
    assert!(tokio::time::timeout(Duration::from_millis(200), exits.recv()).await.is_err(), "run 3 runs on");
}

#[tokio::test]
async fn a_bookmark_moves_the_resume_point_past_changes_the_watch_does_not_select() {
    let (b, state, mut exits) = backend(Scheduler::Default);
    b.start(&launch("run-33/0/0/0/1", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    let marked = {
        let mut s = state.lock().unwrap();
        // Other Jobs of the namespace change: the version moves on, no event is ours.
        s.unrelated_write();
        s.unrelated_write();
        s.bookmark();
        // Then the watch closes and the history before the bookmark is compacted: resuming
        // from the last event seen would be 410 Gone; from the bookmark it is not.
        s.refuse_watches = true;
        s.close_watches();
        s.compact();
        s.version.to_string()
    };
    until(&state, "a refused watch", |s| s.seen.iter().any(|x| x.code == 503)).await;
    state.lock().unwrap().refuse_watches = false;
    until(&state, "a watch again", |s| s.open_watches() == 1).await;
    state.lock().unwrap().end_job("weir-run-33-0-0-0-1", 0);
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Code(0));
    let s = state.lock().unwrap();
    assert_eq!(s.watches_from("jobs").last().unwrap(), &marked, "resumed from the bookmark");
    assert_eq!(s.label_lists("jobs"), 1, "no new list");
}

#[tokio::test]
async fn a_kill_marks_the_job_under_its_resource_version_and_reads_again_on_409_conflict() {
    let (b, state, mut exits) = backend(Scheduler::Kueue);
    let launched = b.start(&launch("run-34/0/0/0/1", "ads")).await.unwrap();
    // Kueue admits the Job (unsuspends it) between the kill's read and its write.
    state.lock().unwrap().admit_after_get = Some("weir-run-34-0-0-0-1".into());
    b.kill(&launched, Duration::from_secs(30)).await.unwrap();
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Killed);
    let s = state.lock().unwrap();
    let patches: Vec<_> = s.seen.iter().filter(|x| x.method == "PATCH").cloned().collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
    // API conventions, "Concurrency Control and Consistency": a write whose resourceVersion is
    // not the object's is refused 409 Conflict; the client reads again and retries.
    assert_eq!(patches[0].code, 409, "the first write carried the stale version");
    assert_eq!(patches[1].code, 200);
    let (v0, v1) =
        (&patches[0].body["metadata"]["resourceVersion"], &patches[1].body["metadata"]["resourceVersion"]);
    assert!(v0.is_string() && v1.is_string() && v0 != v1, "{v0} then {v1}");
    assert!(patches[1].body["metadata"]["annotations"]["weir.io/killed"].is_string());
    assert!(
        patches[1].body.get("spec").is_none(),
        "a merge patch of the annotation only: Kueue's unsuspend stays"
    );
    let del = s.seen.iter().find(|x| x.method == "DELETE").unwrap();
    // DeleteOptions.preconditions.uid: a Job created again under the name is never deleted.
    assert_eq!(del.body["preconditions"]["uid"], launched.boot_id.as_str());
    assert_eq!(del.body["gracePeriodSeconds"], 30);
    assert_eq!(del.code, 200);
}

#[tokio::test]
async fn a_kill_never_deletes_another_job_of_the_same_name() {
    let (client, state) = fake::client(&["batch"]);
    let (tx, _rx) = unbounded_channel();
    let first = KubeBackend::new(config(Scheduler::Default), client.clone(), tx);
    let launched = first.start(&launch("run-35/0/0/0/1", "ads")).await.unwrap();
    drop(first);
    // Someone deleted weir's Job and made another under its name.
    state.lock().unwrap().replace_job("weir-run-35-0-0-0-1");
    let (tx, mut exits) = unbounded_channel();
    let second = KubeBackend::new(config(Scheduler::Default), client, tx);
    second.kill(&launched, Duration::from_secs(5)).await.unwrap();
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Killed);
    let s = state.lock().unwrap();
    assert!(s.seen.iter().all(|x| x.method != "PATCH" && x.method != "DELETE"), "nothing written");
    assert!(s.jobs.contains_key("weir-run-35-0-0-0-1"), "the other Job is still there");
}

#[tokio::test]
async fn a_kill_cut_short_by_a_restart_is_finished_when_the_job_is_adopted() {
    let (client, state) = fake::client(&["batch"]);
    let (tx, _rx) = unbounded_channel();
    let first = KubeBackend::new(config(Scheduler::Kueue), client.clone(), tx);
    let launched = first.start(&launch("run-36/0/0/0/1", "ads")).await.unwrap();
    drop(first);
    // The kill's mark was written, the server died before its delete.
    state.lock().unwrap().jobs.get_mut("weir-run-36-0-0-0-1").unwrap()["metadata"]["annotations"]
        ["weir.io/killed"] = json!("1");
    let (tx, mut exits) = unbounded_channel();
    let second = KubeBackend::new(config(Scheduler::Kueue), client, tx);
    assert_eq!(second.adopt(&launched).await.unwrap(), Adopted::Running);
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Killed, "not lost: weir killed it");
    let s = state.lock().unwrap();
    let del = s.seen.iter().find(|x| x.method == "DELETE").unwrap();
    assert_eq!(del.body["preconditions"]["uid"], launched.boot_id.as_str());
    assert!(!s.jobs.contains_key("weir-run-36-0-0-0-1"));
}

#[tokio::test]
async fn sparkapplications_are_watched_too_and_relisted_after_a_410() {
    let (b, state, mut exits) = spark_backend(Scheduler::Yunikorn);
    b.start(&spark_launch("run-37/0/0/0/1", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    {
        let mut s = state.lock().unwrap();
        s.refuse_watches = true;
        s.close_watches();
        s.end_app("weir-run-37-0-0-0-1", "FAILED", Some(5));
        s.compact();
    }
    until(&state, "a refused watch", |s| s.seen.iter().any(|x| x.code == 503)).await;
    state.lock().unwrap().refuse_watches = false;
    assert_eq!(next_exit(&mut exits).await.exit, Exit::Code(5), "the driver's code, found by the new list");
    let s = state.lock().unwrap();
    assert_eq!(s.label_lists("sparkapplications"), 2);
    assert_eq!(s.label_lists("jobs"), 0, "no Job watch without a Job attempt");
}

/// An attempt is watched from before its create is sent: an end that the watch delivers before
/// the create's answer is kept, and reported once the answer says the object is this start's.
#[tokio::test]
async fn an_end_seen_before_the_creates_answer_is_reported_once_the_answer_comes() {
    let (b, state, mut exits) = backend(Scheduler::Default);
    b.start(&launch("run-38/0/0/0/1", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    {
        let mut s = state.lock().unwrap();
        s.end_on_post = Some(("weir-run-38-0-0-0-2".into(), 6));
        s.hold_create_ms = 300; // its ADDED and MODIFIED (ended) reach the watch first
    }
    b.start(&launch("run-38/0/0/0/2", "ads")).await.unwrap();
    let exit = next_exit(&mut exits).await;
    assert_eq!((exit.attempt.as_str(), exit.exit), ("run-38/0/0/0/2", Exit::Code(6)));
    assert!(tokio::time::timeout(Duration::from_millis(200), exits.recv()).await.is_err(), "reported once");
}

/// A start answered 409 `AlreadyExists` is not this start's object: the end of the older object
/// of that name, seen by the watch while the create was in flight, is not reported for it.
#[tokio::test]
async fn a_start_answered_409_reports_nothing_of_the_older_object() {
    let (client, state) = fake::client(&["batch"]);
    let (tx, _rx) = unbounded_channel();
    let first = KubeBackend::new(config(Scheduler::Default), client.clone(), tx);
    first.start(&launch("run-39/0/0/0/1", "ads")).await.unwrap();
    drop(first);
    let (tx, mut exits) = unbounded_channel();
    let second = KubeBackend::new(config(Scheduler::Default), client, tx);
    second.start(&launch("run-39/0/0/0/2", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    {
        let mut s = state.lock().unwrap();
        // The older Job ends while the create is answered 409: its MODIFIED is streamed first.
        s.end_on_post = Some(("weir-run-39-0-0-0-1".into(), 0));
        s.hold_create_ms = 300;
    }
    let again = second.start(&launch("run-39/0/0/0/1", "ads")).await;
    assert!(matches!(again, Err(BackendError::AlreadyStarted { .. })), "{again:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), exits.recv()).await.is_err(),
        "no end for a start that created nothing"
    );
}

/// A watch whose connection died silently is given up once it has been quiet longer than the
/// server's own `timeoutSeconds` would allow, and opened again from the last resourceVersion
/// (the client sets no read timeout). Virtual time: the 320 s pass at once.
#[tokio::test(start_paused = true)]
async fn a_silently_dead_watch_is_given_up_and_opened_again() {
    let (b, state, mut exits) = backend(Scheduler::Default);
    b.start(&launch("run-40/0/0/0/1", "ads")).await.unwrap();
    until(&state, "a watch is open", |s| s.open_watches() == 1).await;
    let last = {
        let mut s = state.lock().unwrap();
        s.silence_watches();
        s.end_job("weir-run-40-0-0-0-1", 0); // not delivered on the dead connection
        (s.version - 1).to_string()
    };
    let exit = tokio::time::timeout(Duration::from_secs(600), exits.recv()).await.expect("an exit").unwrap();
    assert_eq!(exit.exit, Exit::Code(0));
    let s = state.lock().unwrap();
    let from = s.watches_from("jobs");
    assert_eq!(from.len(), 2, "{from:?}");
    assert_eq!(from[1], last, "resumed from the last event received");
    assert_eq!(s.label_lists("jobs"), 1, "no new list");
}
