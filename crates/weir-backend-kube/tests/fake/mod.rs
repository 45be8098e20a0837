//! A stateful stand-in for the Kubernetes API server: every request the backend sends is
//! recorded, and answered as the API server documents (201 on create, 409 `AlreadyExists` for
//! a name in use, 404 `NotFound` with a `Status` body, list by `labelSelector`, delete with its
//! `DeleteOptions`). No API server can run on the machine these tests run on.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
}

#[derive(Default)]
pub struct State {
    pub namespaces: Vec<String>,
    pub jobs: BTreeMap<String, Value>,
    /// SparkApplications (the spark-operator's custom resource), by name.
    pub apps: BTreeMap<String, Value>,
    pub pods: BTreeMap<String, Value>,
    pub nodes: Vec<Value>,
    pub seen: Vec<Seen>,
    next_uid: u64,
}

pub type Shared = Arc<Mutex<State>>;

fn status(code: u16, reason: &str, message: String) -> (StatusCode, Value) {
    (
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

fn matches(obj: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|kv| {
        let (k, v) = kv.split_once('=').unwrap();
        obj["metadata"]["labels"][k] == json!(v)
    })
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.replace("%3D", "=").replace("%2F", "/").replace("%2C", ","))
    })
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})
}

impl State {
    fn answer(&mut self, seen: &Seen) -> (StatusCode, Value) {
        let parts: Vec<&str> = seen.path.trim_start_matches('/').split('/').collect();
        match (seen.method.as_str(), parts.as_slice()) {
            ("GET", ["version"]) => (
                StatusCode::OK,
                json!({"major": "1", "minor": "33", "gitVersion": "v1.33.1", "gitCommit": "x",
                       "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                       "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64"}),
            ),
            ("GET", ["api", "v1", "namespaces", ns]) => {
                if self.namespaces.iter().any(|n| n == ns) {
                    (
                        StatusCode::OK,
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    )
                } else {
                    status(404, "NotFound", format!("namespaces \"{ns}\" not found"))
                }
            }
            ("GET", ["api", "v1", "nodes"]) => (StatusCode::OK, list("NodeList", self.nodes.clone())),
            ("POST", ["apis", "batch", "v1", "namespaces", _ns, "jobs"]) => {
                let name = seen.body["metadata"]["name"].as_str().unwrap().to_string();
                if self.jobs.contains_key(&name) {
                    return status(409, "AlreadyExists", format!("jobs.batch \"{name}\" already exists"));
                }
                self.next_uid += 1;
                let mut job = seen.body.clone();
                job["metadata"]["uid"] = json!(format!("uid-{}", self.next_uid));
                job["metadata"]["resourceVersion"] = json!(self.next_uid.to_string());
                job["status"] = json!({});
                self.jobs.insert(name, job.clone());
                (StatusCode::CREATED, job)
            }
            ("GET", ["apis", "batch", "v1", "namespaces", _ns, "jobs"]) => {
                let sel = query_param(&seen.query, "labelSelector").unwrap_or_default();
                let items = self.jobs.values().filter(|j| matches(j, &sel)).cloned().collect();
                (StatusCode::OK, list("JobList", items))
            }
            ("GET", ["apis", "batch", "v1", "namespaces", _ns, "jobs", name]) => match self.jobs.get(*name) {
                Some(j) => (StatusCode::OK, j.clone()),
                None => status(404, "NotFound", format!("jobs.batch \"{name}\" not found")),
            },
            ("DELETE", ["apis", "batch", "v1", "namespaces", _ns, "jobs", name]) => {
                match self.jobs.remove(*name) {
                    Some(j) => {
                        self.pods.retain(|_, p| {
                            p["metadata"]["labels"]["batch.kubernetes.io/job-name"] != json!(name)
                        });
                        (StatusCode::OK, j)
                    }
                    None => status(404, "NotFound", format!("jobs.batch \"{name}\" not found")),
                }
            }
            ("POST", ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications"]) => {
                let name = seen.body["metadata"]["name"].as_str().unwrap().to_string();
                if self.apps.contains_key(&name) {
                    let m = format!("sparkapplications.sparkoperator.k8s.io \"{name}\" already exists");
                    return status(409, "AlreadyExists", m);
                }
                self.next_uid += 1;
                let mut app = seen.body.clone();
                app["metadata"]["uid"] = json!(format!("uid-{}", self.next_uid));
                app["metadata"]["resourceVersion"] = json!(self.next_uid.to_string());
                self.apps.insert(name, app.clone());
                (StatusCode::CREATED, app)
            }
            ("GET", ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications"]) => {
                let sel = query_param(&seen.query, "labelSelector").unwrap_or_default();
                let items = self.apps.values().filter(|a| matches(a, &sel)).cloned().collect();
                let mut l = list("SparkApplicationList", items);
                l["apiVersion"] = json!("sparkoperator.k8s.io/v1beta2");
                (StatusCode::OK, l)
            }
            (
                "GET",
                ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications", name],
            ) => match self.apps.get(*name) {
                Some(a) => (StatusCode::OK, a.clone()),
                None => status(404, "NotFound", format!("sparkapplications \"{name}\" not found")),
            },
            (
                "DELETE",
                ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications", name],
            ) => {
                match self.apps.remove(*name) {
                    Some(a) => {
                        // The operator's driver and executor pods go with it (owner references).
                        self.pods.retain(|_, p| {
                            p["metadata"]["labels"]["sparkoperator.k8s.io/app-name"] != json!(name)
                        });
                        (StatusCode::OK, a)
                    }
                    None => status(404, "NotFound", format!("sparkapplications \"{name}\" not found")),
                }
            }
            ("GET", ["api", "v1", "namespaces", _ns, "pods", pod]) => match self.pods.get(*pod) {
                Some(p) => (StatusCode::OK, p.clone()),
                None => status(404, "NotFound", format!("pods \"{pod}\" not found")),
            },
            ("GET", ["api", "v1", "namespaces", _ns, "pods"]) => {
                let sel = query_param(&seen.query, "labelSelector").unwrap_or_default();
                let items = self.pods.values().filter(|p| matches(p, &sel)).cloned().collect();
                (StatusCode::OK, list("PodList", items))
            }
            ("GET", ["api", "v1", "namespaces", _ns, "pods", pod, "log"]) => match self.pods.get(*pod) {
                Some(p) => (StatusCode::OK, p["log"].clone()),
                None => status(404, "NotFound", format!("pods \"{pod}\" not found")),
            },
            _ => status(404, "NotFound", format!("the fake does not serve {} {}", seen.method, seen.path)),
        }
    }

    /// The Job controller's view of an ended Job: a condition, and its pod with the exit code.
    pub fn end_job(&mut self, name: &str, exit_code: i32) {
        let job = self.jobs.get_mut(name).expect("job exists");
        let (ty, count) = if exit_code == 0 { ("Complete", "succeeded") } else { ("Failed", "failed") };
        job["status"] = json!({ count: 1, "conditions": [{"type": ty, "status": "True"}] });
        job["metadata"]["resourceVersion"] = json!("99");
        let pod = format!("{name}-abcde");
        self.pods.insert(
            pod.clone(),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod, "labels": {"batch.kubernetes.io/job-name": name}},
                   "status": {"containerStatuses": [{"name": "task", "image": "i", "imageID": "",
                       "ready": false, "restartCount": 0,
                       "state": {"terminated": {"exitCode": exit_code}}}]},
                   "log": "hello from the pod\n"}),
        );
    }
}

impl State {
    /// The spark-operator's view of an application: `state` in `status.applicationState`, and
    /// (with `driver_exit`) the driver pod it ran, terminated with that code, named in
    /// `status.driverInfo.podName` (the operator's `SparkApplicationStatus`).
    pub fn end_app(&mut self, name: &str, state: &str, driver_exit: Option<i32>) {
        let app = self.apps.get_mut(name).expect("application exists");
        app["status"] = json!({ "applicationState": { "state": state } });
        app["metadata"]["resourceVersion"] = json!("99");
        if let Some(code) = driver_exit {
            let pod = format!("{name}-driver");
            app["status"]["driverInfo"] = json!({ "podName": pod });
            self.pods.insert(
                pod.clone(),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod, "labels": {"sparkoperator.k8s.io/app-name": name, "spark-role": "driver"}},
                       "status": {"containerStatuses": [{"name": "spark-kubernetes-driver", "image": "i", "imageID": "",
                           "ready": false, "restartCount": 0,
                           "state": {"terminated": {"exitCode": code}}}]},
                       "log": "words counted\n"}),
            );
        }
    }
}

/// A client whose every request goes to a fresh fake; the fake's state is returned to check
/// and to drive.
pub fn client(namespaces: &[&str]) -> (Client, Shared) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let state: Shared = Arc::new(Mutex::new(State {
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        ..State::default()
    }));
    let st = state.clone();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap();
            let seen = Seen {
                method: parts.method.to_string(),
                path: parts.uri.path().to_string(),
                query: parts.uri.query().unwrap_or("").to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (code, value) = {
                let mut s = st.lock().unwrap();
                s.seen.push(seen.clone());
                s.answer(&seen)
            };
            let bytes = match value {
                Value::String(text) => text.into_bytes(),
                v => serde_json::to_vec(&v).unwrap(),
            };
            let resp = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(bytes))
                .unwrap();
            send.send_response(resp);
        }
    });
    (Client::new(service, "default"), state)
}

/// A client whose API server never answers: every request fails as a connection error would.
pub fn unreachable_client() -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((_req, send)) = handle.next_request().await {
            send.send_error(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"));
        }
    });
    Client::new(service, "default")
}
