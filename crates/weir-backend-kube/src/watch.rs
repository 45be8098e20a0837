//! Status by watch: one list-then-watch loop per kind of object (Jobs, SparkApplications),
//! started when the first attempt of that kind is watched, over every object carrying the
//! attempt label ([`crate::manifest::ATTEMPT_LABEL`]) in the namespace.
//!
//! The loop follows the API's contract for watches (Kubernetes docs, "API Concepts",
//! "Efficient detection of changes" and "Watch bookmarks"; client-go's `Reflector.ListAndWatch`
//! does the same): list, then watch from the list's `resourceVersion`; every event moves the
//! resume point to its object's `resourceVersion`, and so does a `BOOKMARK`
//! (`allowWatchBookmarks=true`); a watch the server closes (its `timeoutSeconds`, or the
//! connection) is opened again from the resume point; a `410 Gone` — the resume point is older
//! than the history the server keeps, as an `ERROR` event or as the answer to the watch
//! request — means changes may have been missed: the loop lists again and starts over from the
//! new list's version. An API that does not answer is asked again after a wait that doubles up
//! to the configured interval. There is no polling: a watched attempt's object is read once
//! when it is adopted, recovered or killed (its end may have happened before it was
//! watched), never again.
//!
//! An attempt's end is reported once: whoever removes its entry from the table (an event, a
//! list, the read at adoption) reports it.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use weir_backend::{AttemptId, Exit, ExitSender, TaskExit};

use crate::{now_ms, status_of, Apis, Kind, Read};

/// One watched attempt.
pub(crate) struct Entry {
    pub attempt: AttemptId,
    /// Its object's uid, once known: an object of the same name with another uid is not it.
    pub uid: Option<String>,
    pub killed: Arc<AtomicBool>,
    /// How many lists of its kind had begun when it was registered ([`PENDING`] while its
    /// create is in flight): only a list begun later must show its object.
    pub since: u64,
    /// While its create is in flight: an end seen meanwhile, kept until the create's answer
    /// says whose it is (a 409 means the object is an older one, not this start's).
    pub early: Option<Outcome>,
}

/// `since` of an attempt whose create has not been answered yet.
pub(crate) const PENDING: u64 = u64::MAX;

#[derive(Default)]
pub(crate) struct Table {
    pub entries: HashMap<(Kind, String), Entry>,
    /// Lists begun, per kind ([`Kind::index`]).
    pub lists: [u64; 2],
}

/// What the watch loops and the backend share.
pub(crate) struct Shared {
    pub table: Mutex<Table>,
    pub apis: Apis,
    pub exits: ExitSender,
    /// The longest wait before an API that did not answer is asked again.
    pub retry: Duration,
}

/// How a watched object was last seen.
pub(crate) enum Outcome {
    Ended(Read),
    /// Deleted (the deleted object's uid, when known).
    Gone(Option<String>),
}

impl Shared {
    pub fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object `name` of `kind` as it is now.
    pub fn seen(self: &Arc<Self>, kind: Kind, name: &str, read: Read) {
        let mut table = self.table();
        let Some(entry) = table.entries.get_mut(&(kind, name.to_string())) else { return };
        if entry.since == PENDING {
            if read.end.is_some() {
                entry.early = Some(Outcome::Ended(read));
            }
            return;
        }
        let outcome = match &entry.uid {
            // The name now holds another object: ours was deleted meanwhile.
            Some(uid) if !read.uid.is_empty() && *uid != read.uid => Outcome::Gone(None),
            _ => {
                entry.uid = Some(read.uid.clone());
                match read.end {
                    Some(_) => Outcome::Ended(read),
                    None => return,
                }
            }
        };
        let entry = table.entries.remove(&(kind, name.to_string())).expect("present");
        drop(table);
        self.report(kind, name.to_string(), entry, outcome);
    }

    /// The object `name` of `kind` is gone (`uid`: the deleted object's, when known).
    pub fn gone(self: &Arc<Self>, kind: Kind, name: &str, uid: Option<&str>) {
        let mut table = self.table();
        let key = (kind, name.to_string());
        if let Some(entry) = table.entries.get_mut(&key).filter(|e| e.since == PENDING) {
            entry.early = Some(Outcome::Gone(uid.map(str::to_string)));
            return;
        }
        match (table.entries.get(&key), uid) {
            (None, _) => return,
            // The delete of an older object of the same name.
            (Some(Entry { uid: Some(ours), .. }), Some(theirs)) if ours != theirs => return,
            _ => {}
        }
        let entry = table.entries.remove(&key).expect("present");
        drop(table);
        self.report(kind, name.to_string(), entry, Outcome::Gone(None));
    }

    fn report(self: &Arc<Self>, kind: Kind, name: String, entry: Entry, outcome: Outcome) {
        let shared = self.clone();
        tokio::spawn(async move {
            let killed = entry.killed.load(Ordering::SeqCst);
            let exit = match outcome {
                Outcome::Ended(read) if read.end == Some(true) => Exit::Code(0),
                Outcome::Ended(_) if killed => Exit::Killed,
                Outcome::Ended(read) => shared.apis.failed_exit(kind, &name, &read).await,
                // Deleted by our kill, or by someone else (outcome unknown, never a success).
                Outcome::Gone(_) if killed => Exit::Killed,
                Outcome::Gone(_) => Exit::Lost,
            };
            let _ = shared.exits.send(TaskExit { attempt: entry.attempt, exit, ended_at_ms: now_ms() });
        });
    }

    /// Reads the object once, for an attempt registered after its object was last read (adopt,
    /// recover, kill): an end before it was watched shows no event. Retried until the API
    /// answers or the attempt is no longer watched.
    pub fn confirm(self: &Arc<Self>, kind: Kind, name: String) {
        let shared = self.clone();
        tokio::spawn(async move {
            let mut wait = Duration::from_millis(50).min(shared.retry);
            loop {
                match shared.apis.read(kind, &name).await {
                    Ok(Some(read)) => return shared.seen(kind, &name, read),
                    Ok(None) => return shared.gone(kind, &name, None),
                    Err(_) => {}
                }
                if !shared.table().entries.contains_key(&(kind, name.clone())) {
                    return;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(shared.retry);
            }
        });
    }
}

/// The watch's `timeoutSeconds`: the server ends it then, and it is opened again.
const WATCH_SECONDS: u32 = 290;
/// How long a watch may stay silent before it is taken for a dead connection.
const WATCH_IDLE: Duration = Duration::from_secs(WATCH_SECONDS as u64 + 30);

/// The resume point an object's event leaves.
fn version_of<K: Resource>(obj: &K) -> Option<String> {
    obj.meta().resource_version.clone()
}

/// The list-then-watch loop of one kind; runs until the backend is dropped (aborted).
pub(crate) async fn run<K>(shared: Arc<Shared>, api: Api<K>, kind: Kind, read: fn(&K) -> Read)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let selector = crate::manifest::ATTEMPT_LABEL; // every object that carries the label
    let first = Duration::from_millis(50).min(shared.retry);
    let mut wait = first;
    'list: loop {
        let began = {
            let mut t = shared.table();
            t.lists[kind.index()] += 1;
            t.lists[kind.index()]
        };
        let list = match api.list(&ListParams::default().labels(selector)).await {
            Ok(l) => l,
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(shared.retry);
                continue 'list;
            }
        };
        let mut present = HashSet::new();
        for obj in &list.items {
            let name = obj.name_any();
            shared.seen(kind, &name, read(obj));
            present.insert(name);
        }
        // Watched before this list began and not in it: gone while nobody watched.
        let missing: Vec<String> = shared
            .table()
            .entries
            .iter()
            .filter(|((k, n), e)| *k == kind && e.since < began && !present.contains(n))
            .map(|((_, n), _)| n.clone())
            .collect();
        for name in missing {
            shared.gone(kind, &name, None);
        }
        let mut version = list.metadata.resource_version.clone().unwrap_or_default();
        loop {
            let params = WatchParams::default().labels(selector).timeout(WATCH_SECONDS);
            let stream = match api.watch(&params, &version).await {
                Ok(s) => s,
                Err(e) if status_of(&e) == Some(410) => continue 'list,
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(shared.retry);
                    continue;
                }
            };
            let mut stream = std::pin::pin!(stream);
            let mut failed = false;
            loop {
                // A connection that died without a word (no FIN, no RST) would hold the watch
                // forever: the client sets no read timeout, so a watch silent past the server's
                // own timeout is given up and opened again.
                let event = match tokio::time::timeout(WATCH_IDLE, stream.next()).await {
                    Ok(Some(event)) => event,
                    Ok(None) => break,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                };
                match event {
                    Ok(WatchEvent::Added(obj)) | Ok(WatchEvent::Modified(obj)) => {
                        wait = first;
                        version = version_of(&obj).unwrap_or(version);
                        shared.seen(kind, &obj.name_any(), read(&obj));
                    }
                    Ok(WatchEvent::Deleted(obj)) => {
                        wait = first;
                        version = version_of(&obj).unwrap_or(version);
                        shared.gone(kind, &obj.name_any(), obj.meta().uid.as_deref());
                    }
                    Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                    // "too old resource version": history was compacted past the resume point.
                    Ok(WatchEvent::Error(s)) if s.code == 410 => continue 'list,
                    Err(e) if status_of(&e) == Some(410) => continue 'list,
                    Ok(WatchEvent::Error(_)) | Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(shared.retry);
            }
            // Closed by the server (timeoutSeconds) or the connection: watch again from
            // `version`.
        }
    }
}

/// Whether the attempt's entry is in the table.
pub(crate) fn watched(shared: &Shared, kind: Kind, name: &str) -> bool {
    shared.table().entries.contains_key(&(kind, name.to_string()))
}

/// Registers an attempt; `None` when it was watched already (its kill flag is returned then
/// too, in the `Err`).
pub(crate) fn register(
    shared: &Shared,
    kind: Kind,
    name: &str,
    attempt: &AttemptId,
    uid: Option<String>,
    pending: bool,
) -> Result<Arc<AtomicBool>, Arc<AtomicBool>> {
    let mut t = shared.table();
    let since = if pending { PENDING } else { t.lists[kind.index()] };
    let key = (kind, name.to_string());
    if let Some(e) = t.entries.get(&key) {
        return Err(e.killed.clone());
    }
    let killed = Arc::new(AtomicBool::new(false));
    t.entries
        .insert(key, Entry { attempt: attempt.clone(), uid, killed: killed.clone(), since, early: None });
    Ok(killed)
}

/// The create of a pending attempt was answered: its uid, and lists from now on must show it.
/// An end of that object seen while the create was in flight is reported now.
pub(crate) fn created(shared: &Arc<Shared>, kind: Kind, name: &str, uid: String) {
    let mut t = shared.table();
    let lists = t.lists[kind.index()];
    let key = (kind, name.to_string());
    let Some(e) = t.entries.get_mut(&key) else { return };
    e.since = lists;
    if e.uid.is_none() {
        e.uid = Some(uid.clone());
    }
    let ours = match &e.early {
        Some(Outcome::Ended(read)) => read.uid == uid,
        Some(Outcome::Gone(gone)) => gone.as_deref().is_none_or(|g| g == uid),
        None => false,
    };
    if !ours {
        e.early = None;
        return;
    }
    let mut entry = t.entries.remove(&key).expect("present");
    drop(t);
    let outcome = entry.early.take().expect("ours");
    shared.report(kind, name.to_string(), entry, outcome);
}

/// The create failed: the attempt is not watched.
pub(crate) fn unregister(shared: &Shared, kind: Kind, name: &str) {
    shared.table().entries.remove(&(kind, name.to_string()));
}
