//! A stateful stand-in for the Kubernetes API server: every request the backend sends is
//! recorded, and answered as the API server documents (201 on create, 409 `AlreadyExists` for
//! a name in use, 404 `NotFound` with a `Status` body, list by `labelSelector`, delete with its
//! `DeleteOptions`). No API server can run on the machine these tests run on.
//!
//! Like etcd behind the API server, it keeps one `resourceVersion` counter: every write (create,
//! patch, delete, a controller's status change) takes the next version and is kept in a
//! history. A list answers with the current version; a watch (`?watch=true&resourceVersion=V`)
//! streams, one JSON event per line, the kept changes after V (`ADDED`, `MODIFIED`, `DELETED`)
//! and then each new one, for the objects its `labelSelector` matches; `BOOKMARK`s when asked
//! (`allowWatchBookmarks=true`) and the test says so; and an `ERROR` event with a `410`
//! `Expired` `Status` when V is older than the history kept (Kubernetes docs, "API Concepts",
//! "Efficient detection of changes"). A merge patch whose `metadata.resourceVersion` is not the
//! object's, or a delete whose `preconditions.uid` is not, is a `409 Conflict` (API
//! conventions, "Concurrency Control and Consistency"; `DeleteOptions.preconditions`).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::client::Body;
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

type Out = UnsyncBoxBody<Bytes, Infallible>;

/// One open watch.
struct Watch {
    resource: &'static str,
    selector: String,
    bookmarks: bool,
    /// Its connection died without a word: nothing reaches the client, nothing tells it.
    dead: bool,
    tx: UnboundedSender<Bytes>,
}

/// One kept change.
struct Change {
    version: u64,
    resource: &'static str,
    kind: &'static str,
    object: Value,
}

#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
    /// The status it was answered with.
    pub code: u16,
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
    /// The last resourceVersion given.
    pub version: u64,
    history: Vec<Change>,
    /// A watch from a version older than this is answered 410 Gone.
    pub oldest: u64,
    watches: Vec<Watch>,
    /// Kueue admits (unsuspends) this Job right after the next GET of it has been answered:
    /// the reader's resourceVersion is then stale.
    pub admit_after_get: Option<String>,
    /// Watch requests are answered 503 (the API server restarting) while this is set.
    pub refuse_watches: bool,
    /// The answer to a create is held this long after the write (its events go out at once):
    /// the client sees them before it knows how its create went.
    pub hold_create_ms: u64,
    /// The Job of this name ends with this code while the next create is being answered (after
    /// that create's write, if it made one).
    pub end_on_post: Option<(String, i32)>,
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
    selector.split(',').filter(|s| !s.is_empty()).all(|kv| match kv.split_once('=') {
        Some((k, v)) => obj["metadata"]["labels"][k] == json!(v),
        None => obj["metadata"]["labels"].get(kv).is_some(), // `key`: the label exists
    })
}

fn conflict(message: String) -> (StatusCode, Value) {
    status(409, "Conflict", message)
}

/// RFC 7386 JSON merge patch.
fn merge(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.replace("%3D", "=").replace("%2F", "/").replace("%2C", ","))
    })
}

fn list(kind: &str, items: Vec<Value>, version: u64) -> Value {
    json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": version.to_string()}, "items": items})
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut b = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    b.push(b'\n');
    Bytes::from(b)
}

impl State {
    /// The watch requests seen, in order: their resourceVersion.
    pub fn watches_from(&self, resource: &str) -> Vec<String> {
        self.seen
            .iter()
            .filter(|s| s.path.ends_with(&format!("/{resource}")) && s.query.contains("watch=true"))
            .map(|s| query_param(&s.query, "resourceVersion").unwrap_or_default())
            .collect()
    }

    /// The lists (not watches) of `resource` by the bare attempt label (the watch loop's).
    pub fn label_lists(&self, resource: &str) -> usize {
        self.seen
            .iter()
            .filter(|s| {
                s.method == "GET"
                    && s.path.ends_with(&format!("/{resource}"))
                    && !s.query.contains("watch=true")
                    && query_param(&s.query, "labelSelector").as_deref() == Some("weir.io/attempt")
            })
            .count()
    }

    /// A write: the object takes the next resourceVersion, the change is kept and streamed to
    /// the watches that select it.
    fn commit(&mut self, resource: &'static str, kind: &'static str, object: &mut Value) {
        self.version += 1;
        object["metadata"]["resourceVersion"] = json!(self.version.to_string());
        let change = Change { version: self.version, resource, kind, object: object.clone() };
        self.watches.retain(|w| {
            if w.dead || w.resource != change.resource || !matches(&change.object, &w.selector) {
                return true;
            }
            w.tx.send(line(change.kind, &change.object)).is_ok()
        });
        self.history.push(change);
    }

    fn store(&mut self, resource: &str) -> &mut BTreeMap<String, Value> {
        match resource {
            "jobs" => &mut self.jobs,
            _ => &mut self.apps,
        }
    }

    /// Opens a watch of `resource` from `query`'s resourceVersion.
    fn watch(&mut self, resource: &'static str, query: &str) -> Out {
        let (tx, rx) = unbounded_channel::<Bytes>();
        let from: u64 = query_param(query, "resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
        let selector = query_param(query, "labelSelector").unwrap_or_default();
        if from < self.oldest {
            // Kept history starts later: the client must list again.
            let gone = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("too old resource version: {from} ({})", self.oldest),
                "reason": "Expired", "code": 410});
            let _ = tx.send(line("ERROR", &gone));
            drop(tx);
        } else {
            for c in self.history.iter().filter(|c| c.version > from && c.resource == resource) {
                if matches(&c.object, &selector) {
                    let _ = tx.send(line(c.kind, &c.object));
                }
            }
            let bookmarks = query_param(query, "allowWatchBookmarks").as_deref() == Some("true");
            self.watches.push(Watch { resource, selector, bookmarks, dead: false, tx });
        }
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
        });
        StreamBody::new(stream).boxed_unsync()
    }

    /// The server closes every open watch (its timeout, a restart, a dropped connection).
    pub fn close_watches(&mut self) {
        self.watches.clear();
    }

    /// Every open watch's connection dies silently (a peer gone without FIN or RST): the
    /// stream stays open and delivers nothing more.
    pub fn silence_watches(&mut self) {
        for w in &mut self.watches {
            w.dead = true;
        }
    }

    /// How many watches are open.
    pub fn open_watches(&self) -> usize {
        self.watches.iter().filter(|w| !w.dead && !w.tx.is_closed()).count()
    }

    /// The history is compacted: only a watch from the current version or later may resume.
    pub fn compact(&mut self) {
        self.oldest = self.version;
        self.history.clear();
    }

    /// A `BOOKMARK` at the current version to every watch that allowed them.
    pub fn bookmark(&mut self) {
        let version = self.version.to_string();
        for w in &self.watches {
            if w.bookmarks {
                let kind = if w.resource == "jobs" { "Job" } else { "SparkApplication" };
                let _ = w.tx.send(line(
                    "BOOKMARK",
                    &json!({"kind": kind, "apiVersion": "batch/v1",
                    "metadata": {"resourceVersion": version}}),
                ));
            }
        }
    }

    /// Someone else's write the watches do not select (an unlabelled Job): the version moves on.
    pub fn unrelated_write(&mut self) {
        self.next_uid += 1;
        let name = format!("other-{}", self.next_uid);
        let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "uid": format!("uid-{}", self.next_uid)}});
        self.commit("jobs", "ADDED", &mut job);
        self.jobs.insert(name, job);
    }

    /// Kueue admits the Job: `spec.suspend` false (a write, so a new resourceVersion).
    pub fn admit(&mut self, name: &str) {
        let mut job = self.jobs.remove(name).expect("job exists");
        job["spec"]["suspend"] = json!(false);
        self.commit("jobs", "MODIFIED", &mut job);
        self.jobs.insert(name.to_string(), job);
    }

    /// Someone else deletes the Job.
    pub fn delete_job(&mut self, name: &str) {
        let mut job = self.jobs.remove(name).expect("job exists");
        self.commit("jobs", "DELETED", &mut job);
    }

    /// Someone else deletes the Job and creates another under its name.
    pub fn replace_job(&mut self, name: &str) {
        let mut job = self.jobs.remove(name).expect("job exists");
        self.commit("jobs", "DELETED", &mut job);
        self.next_uid += 1;
        job["metadata"]["uid"] = json!(format!("uid-{}", self.next_uid));
        job["status"] = json!({});
        self.commit("jobs", "ADDED", &mut job);
        self.jobs.insert(name.to_string(), job);
    }

    fn create(&mut self, resource: &'static str, what: &str, body: &Value) -> (StatusCode, Value) {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        if self.store(resource).contains_key(&name) {
            return status(409, "AlreadyExists", format!("{what} \"{name}\" already exists"));
        }
        self.next_uid += 1;
        let mut obj = body.clone();
        obj["metadata"]["uid"] = json!(format!("uid-{}", self.next_uid));
        if resource == "jobs" {
            obj["status"] = json!({});
        }
        self.commit(resource, "ADDED", &mut obj);
        self.store(resource).insert(name, obj.clone());
        (StatusCode::CREATED, obj)
    }

    fn patch(&mut self, resource: &'static str, what: &str, name: &str, body: &Value) -> (StatusCode, Value) {
        let Some(mut obj) = self.store(resource).get(name).cloned() else {
            return status(404, "NotFound", format!("{what} \"{name}\" not found"));
        };
        // A resourceVersion in the patch is a precondition on the object's.
        if let Some(v) = body["metadata"]["resourceVersion"].as_str() {
            if obj["metadata"]["resourceVersion"] != json!(v) {
                return conflict(format!("Operation cannot be fulfilled on {what} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"));
            }
        }
        let mut patch = body.clone();
        if let Some(m) = patch["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        merge(&mut obj, &patch);
        self.commit(resource, "MODIFIED", &mut obj);
        self.store(resource).insert(name.to_string(), obj.clone());
        (StatusCode::OK, obj)
    }

    fn delete(
        &mut self,
        resource: &'static str,
        what: &str,
        name: &str,
        body: &Value,
    ) -> (StatusCode, Value) {
        let Some(mut obj) = self.store(resource).get(name).cloned() else {
            return status(404, "NotFound", format!("{what} \"{name}\" not found"));
        };
        if let Some(uid) = body["preconditions"]["uid"].as_str() {
            if obj["metadata"]["uid"] != json!(uid) {
                return conflict(format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    obj["metadata"]["uid"].as_str().unwrap_or("")
                ));
            }
        }
        self.store(resource).remove(name);
        self.commit(resource, "DELETED", &mut obj);
        let label =
            if resource == "jobs" { "batch.kubernetes.io/job-name" } else { "sparkoperator.k8s.io/app-name" };
        // The garbage collector takes its pods (owner references, Background propagation).
        self.pods.retain(|_, p| p["metadata"]["labels"][label] != json!(name));
        (StatusCode::OK, obj)
    }

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
            ("GET", ["api", "v1", "nodes"]) => {
                (StatusCode::OK, list("NodeList", self.nodes.clone(), self.version))
            }
            ("POST", ["apis", "batch", "v1", "namespaces", _ns, "jobs"]) => {
                self.create("jobs", "jobs.batch", &seen.body)
            }
            ("GET", ["apis", "batch", "v1", "namespaces", _ns, "jobs"]) => {
                let sel = query_param(&seen.query, "labelSelector").unwrap_or_default();
                let items = self.jobs.values().filter(|j| matches(j, &sel)).cloned().collect();
                (StatusCode::OK, list("JobList", items, self.version))
            }
            ("GET", ["apis", "batch", "v1", "namespaces", _ns, "jobs", name]) => match self.jobs.get(*name) {
                Some(j) => (StatusCode::OK, j.clone()),
                None => status(404, "NotFound", format!("jobs.batch \"{name}\" not found")),
            },
            ("PATCH", ["apis", "batch", "v1", "namespaces", _ns, "jobs", name]) => {
                self.patch("jobs", "jobs.batch", name, &seen.body)
            }
            ("DELETE", ["apis", "batch", "v1", "namespaces", _ns, "jobs", name]) => {
                self.delete("jobs", "jobs.batch", name, &seen.body)
            }
            ("POST", ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications"]) => {
                self.create("sparkapplications", "sparkapplications.sparkoperator.k8s.io", &seen.body)
            }
            ("GET", ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications"]) => {
                let sel = query_param(&seen.query, "labelSelector").unwrap_or_default();
                let items = self.apps.values().filter(|a| matches(a, &sel)).cloned().collect();
                let mut l = list("SparkApplicationList", items, self.version);
                l["apiVersion"] = json!("sparkoperator.k8s.io/v1beta2");
                (StatusCode::OK, l)
            }
            (
                "PATCH",
                ["apis", "sparkoperator.k8s.io", "v1beta2", "namespaces", _ns, "sparkapplications", name],
            ) => self.patch("sparkapplications", "sparkapplications.sparkoperator.k8s.io", name, &seen.body),
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
            ) => self.delete("sparkapplications", "sparkapplications.sparkoperator.k8s.io", name, &seen.body),
            ("GET", ["api", "v1", "namespaces", _ns, "pods", pod]) => match self.pods.get(*pod) {
                Some(p) => (StatusCode::OK, p.clone()),
                None => status(404, "NotFound", format!("pods \"{pod}\" not found")),
            },
            ("GET", ["api", "v1", "namespaces", _ns, "pods"]) => {
                let sel = query_param(&seen.query, "labelSelector").unwrap_or_default();
                let items = self.pods.values().filter(|p| matches(p, &sel)).cloned().collect();
                (StatusCode::OK, list("PodList", items, self.version))
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
        let mut job = self.jobs.remove(name).expect("job exists");
        let (ty, count) = if exit_code == 0 { ("Complete", "succeeded") } else { ("Failed", "failed") };
        job["status"] = json!({ count: 1, "conditions": [{"type": ty, "status": "True"}] });
        self.commit("jobs", "MODIFIED", &mut job);
        self.jobs.insert(name.to_string(), job);
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
        let mut app = self.apps.remove(name).expect("application exists");
        app["status"] = json!({ "applicationState": { "state": state } });
        if driver_exit.is_some() {
            app["status"]["driverInfo"] = json!({ "podName": format!("{name}-driver") });
        }
        self.commit("sparkapplications", "MODIFIED", &mut app);
        self.apps.insert(name.to_string(), app);
        if let Some(code) = driver_exit {
            let pod = format!("{name}-driver");
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
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Out>>();
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
                code: 0,
            };
            let resource = match seen.path.rsplit('/').next() {
                Some("jobs") => Some("jobs"),
                Some("sparkapplications") => Some("sparkapplications"),
                _ => None,
            };
            let refused = st.lock().unwrap().refuse_watches;
            if let (Some(resource), true, false) = (resource, seen.query.contains("watch=true"), refused) {
                let body = {
                    let mut s = st.lock().unwrap();
                    s.seen.push(Seen { code: 200, ..seen.clone() });
                    s.watch(resource, &seen.query)
                };
                let resp = Response::builder()
                    .status(StatusCode::OK)
                    .header("content-type", "application/json")
                    .body(body)
                    .unwrap();
                send.send_response(resp);
                continue;
            }
            let (code, value) = {
                let mut s = st.lock().unwrap();
                let answer = if seen.query.contains("watch=true") {
                    status(503, "ServiceUnavailable", "the API server is restarting".into())
                } else {
                    s.answer(&seen)
                };
                if seen.method == "POST" {
                    if let Some((name, code)) = s.end_on_post.take() {
                        s.end_job(&name, code);
                    }
                }
                s.seen.push(Seen { code: answer.0.as_u16(), ..seen.clone() });
                if seen.method == "GET" {
                    if let Some(name) = s.admit_after_get.take() {
                        if seen.path.ends_with(&format!("/jobs/{name}")) {
                            s.admit(&name);
                        } else {
                            s.admit_after_get = Some(name);
                        }
                    }
                }
                answer
            };
            let hold = st.lock().unwrap().hold_create_ms;
            if seen.method == "POST" && hold > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(hold)).await;
            }
            let bytes = match value {
                Value::String(text) => text.into_bytes(),
                v => serde_json::to_vec(&v).unwrap(),
            };
            let resp = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(bytes)).boxed_unsync())
                .unwrap();
            send.send_response(resp);
        }
    });
    (Client::new(service, "default"), state)
}

/// A client whose API server never answers: every request fails as a connection error would.
pub fn unreachable_client() -> Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Out>>();
    tokio::spawn(async move {
        while let Some((_req, send)) = handle.next_request().await {
            send.send_error(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"));
        }
    });
    Client::new(service, "default")
}
