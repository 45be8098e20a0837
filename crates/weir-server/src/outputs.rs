//! Where stages' outputs go (docs/commit.md, "The server's side"): the object store the server
//! file names, or the local-filesystem store beside the data directory, and the committers that
//! reach it, one per bucket. The worker (`worker/commit.rs`) decides when to commit; this module
//! opens stores, lays out a task attempt's staging area, gives the task its variables, sweeps
//! forgotten uploads and exports the store's counters to /metrics.
//!
//! Buckets: `s3://BUCKET/PREFIX/` names a bucket. With an S3 store only its configured bucket
//! is served (another bucket fails the run with the reason). The local store keeps each bucket
//! as a folder of its root, so a workflow runs unchanged on either.
//!
//! What a task can reach on the local store (the local backend runs tasks as other Unix users):
//! the root and its folders are the server's (0755: readable by every task, so readers can read
//! committed outputs); the upload area `.weir-uploads` is 1733 (a task creates its own upload
//! folders and cannot list or enter others'); each attempt's staging folder is made for the
//! attempt's user alone (0700). A task cannot write into an output: only the server's job commit
//! puts objects there, after checking every part (parts are opened without following links and
//! must be the task's own files). The data directory, the store and the server's credentials
//! stay out of reach. On S3 a task gets the credentials in the server file's
//! `task_credentials_file` (meant to be a key limited to the bucket), else the server's own.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_commit::{CommitConfig, Committer, Credentials, S3Config, StoreConfig, StoreCounts, TaskEnv};
use weir_model::ObjectUri;

use crate::metrics::{Metrics, Reason};

/// The outputs' store, as the server file gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputStore {
    /// Folders under `root` (default: the data directory's sibling `NAME-outputs`, reachable by
    /// tasks, as the data directory is not).
    Local { root: Option<PathBuf> },
    /// One S3-compatible bucket.
    S3(S3Config),
}

/// `object_store:` of the server file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputSettings {
    pub store: OutputStore,
    /// S3: the credentials tasks get (a narrower key than the server's); `None`: the server's.
    pub task_credentials: Option<Credentials>,
    pub commit: CommitConfig,
    /// The sweeper aborts uploads older than this that no live attempt owns.
    pub sweep_after: Duration,
    /// How often the sweeper runs.
    pub sweep_every: Duration,
    /// The `weir` executable tasks run `commit-helper` with, given them as
    /// `WEIR_COMMIT_HELPER` (the `weir` binary sets its own path; `None`: not set, and a task
    /// needs `weir` on its PATH).
    pub commit_helper: Option<PathBuf>,
}

impl OutputSettings {
    /// What `weir serve` warns about at start: an S3 store without `task_credentials_file`
    /// hands every writing task the server's own key.
    pub fn start_warning(&self) -> Option<String> {
        match (&self.store, &self.task_credentials) {
            (OutputStore::S3(s3), None) => Some(format!(
                "object_store.s3 has no task_credentials_file: every task of a stage with outputs gets the \
                 server's own credentials for bucket `{}` (and whatever else that key may reach); name a key \
                 limited to the bucket there",
                s3.bucket
            )),
            _ => None,
        }
    }
}

impl OutputSettings {
    /// The one bucket an S3 store serves; `None` for the local store (any bucket).
    pub fn served_bucket(&self) -> Option<String> {
        match &self.store {
            OutputStore::S3(s3) => Some(s3.bucket.clone()),
            OutputStore::Local { .. } => None,
        }
    }
}

/// Refuses at submission (400, naming the field) an output or input in a bucket the server's
/// object store does not serve (`bucket`: the S3 store's one bucket), instead of failing the
/// run's first attempt. URIs that do not parse are `submit::check_reachable`'s to refuse.
pub(crate) fn check_buckets(
    spec: &weir_model::WorkflowSpec,
    logical_date: &str,
    params: &BTreeMap<String, String>,
    bucket: Option<&str>,
) -> Result<(), crate::error::ApiError> {
    let Some(served) = bucket else { return Ok(()) };
    for job in &spec.jobs {
        for stage in &job.stages {
            let here = format!("workflow.jobs.{}.stages.{}", job.name, stage.name);
            let uris = stage.outputs.iter().map(|o| ("outputs", &o.uri));
            let uris = uris.enumerate().chain(stage.inputs.iter().map(|i| ("inputs", &i.uri)).enumerate());
            for (i, (kind, uri)) in uris {
                let Ok(parsed) = weir_model::substitute(uri, logical_date, params)
                    .and_then(|u| weir_model::parse_object_uri(&u))
                else {
                    continue;
                };
                if parsed.bucket != served {
                    return Err(crate::error::ApiError::invalid(format!(
                        "`{parsed}` is in bucket `{}`; the server's object store serves bucket `{served}` only \
                         (object_store.s3.bucket)",
                        parsed.bucket
                    ))
                    .field(format!("{here}.{kind}[{i}].uri")));
                }
            }
        }
    }
    Ok(())
}

impl Default for OutputSettings {
    fn default() -> Self {
        OutputSettings {
            store: OutputStore::Local { root: None },
            task_credentials: None,
            commit: CommitConfig::default(),
            sweep_after: Duration::from_secs(3600),
            sweep_every: Duration::from_secs(300),
            commit_helper: None,
        }
    }
}

/// The staging prefix of one task attempt for its stage's output number `output`, inside that
/// output's bucket: `_weir/staging/run-R/J.S.T.A/` for output 0 (the only one of most stages),
/// `_weir/staging/run-R/J.S.T.A.oK/` for output K.
pub(crate) fn staging_prefix(
    run: i64,
    job: u32,
    stage: u32,
    task: u32,
    attempt: u32,
    output: usize,
) -> String {
    match output {
        0 => format!("{STAGING_ROOT}run-{run}/{job}.{stage}.{task}.{attempt}/"),
        k => format!("{STAGING_ROOT}run-{run}/{job}.{stage}.{task}.{attempt}.o{k}/"),
    }
}

/// The variable naming the `weir` executable a task runs `commit-helper` with
/// (`"$WEIR_COMMIT_HELPER" commit-helper put FILE`), so that a task needs no `weir` on its PATH.
pub const COMMIT_HELPER_VAR: &str = "WEIR_COMMIT_HELPER";

/// Where every attempt's staging area lives, in each bucket.
pub(crate) const STAGING_ROOT: &str = "_weir/staging/";

/// The opened store: committers by bucket, and the counters already exported.
pub(crate) struct Outputs {
    settings: OutputSettings,
    /// Local store: the root holding one folder per bucket.
    local_root: Option<PathBuf>,
    committers: Mutex<BTreeMap<String, Committer>>,
    exported: Mutex<StoreCounts>,
    /// Per bucket, the uploads sweeps found named by no staging record, with when this process
    /// first saw each one so: only those unnamed for a while are aborted (see `sweep_bucket`).
    unnamed: Mutex<BTreeMap<String, BTreeMap<String, i64>>>,
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outputs").field("store", &self.settings.store).finish()
    }
}

impl Outputs {
    pub fn open(settings: &OutputSettings, data_dir: &Path) -> Arc<Outputs> {
        let local_root = match &settings.store {
            OutputStore::Local { root: Some(r) } => Some(r.clone()),
            OutputStore::Local { root: None } => {
                let dir = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
                Some(match dir.file_name() {
                    Some(name) => dir.with_file_name(format!("{}-outputs", name.to_string_lossy())),
                    None => dir.join("..").join("weir-outputs"),
                })
            }
            OutputStore::S3(_) => None,
        };
        Arc::new(Outputs {
            settings: settings.clone(),
            local_root,
            committers: Mutex::new(BTreeMap::new()),
            exported: Mutex::new(StoreCounts::default()),
            unnamed: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn settings(&self) -> &OutputSettings {
        &self.settings
    }

    fn store_config(&self, bucket: &str) -> Result<StoreConfig, String> {
        match (&self.settings.store, &self.local_root) {
            (OutputStore::S3(s3), _) => {
                if s3.bucket != bucket {
                    return Err(format!(
                        "bucket `{bucket}` is not the server's object store bucket `{}` (object_store.s3.bucket)",
                        s3.bucket
                    ));
                }
                Ok(StoreConfig::S3(s3.clone()))
            }
            (OutputStore::Local { .. }, Some(root)) => Ok(StoreConfig::Local { root: root.join(bucket) }),
            (OutputStore::Local { .. }, None) => Err("the local store has no root".into()),
        }
    }

    /// The committer of a bucket (opened once).
    pub fn committer(&self, bucket: &str) -> Result<Committer, String> {
        let mut map = self.committers.lock().expect("not poisoned");
        if let Some(c) = map.get(bucket) {
            return Ok(c.clone());
        }
        let config = self.store_config(bucket)?;
        if let StoreConfig::Local { root } = &config {
            make_local_bucket(root)
                .map_err(|e| format!("cannot create the local store {}: {e}", root.display()))?;
        }
        let c = Committer::new(&config, self.settings.commit.clone())
            .map_err(|e| format!("cannot open the object store for bucket `{bucket}`: {e}"))?;
        map.insert(bucket.to_string(), c.clone());
        Ok(c)
    }

    /// The variables of a task attempt writing `output`, its stage's output number `index`, with
    /// staging prefix `staging` (named as `weir_commit::vars::indexed` says), and (on the local
    /// store) its staging folder made for `owner` (uid, gid; `None`: the server's own user).
    pub fn task_env(
        &self,
        output: &ObjectUri,
        index: usize,
        staging: &str,
        owner: Option<(u32, u32)>,
    ) -> Result<Vec<(String, String)>, String> {
        self.committer(&output.bucket)?;
        let mut store = self.store_config(&output.bucket)?;
        match &mut store {
            StoreConfig::S3(s3) => {
                if let Some(c) = &self.settings.task_credentials {
                    s3.credentials = c.clone();
                }
            }
            StoreConfig::Local { root } => {
                let dir = root.join(staging);
                make_staging(root, &dir, owner)
                    .map_err(|e| format!("cannot make the staging folder {}: {e}", dir.display()))?;
            }
        }
        let env = TaskEnv {
            store,
            output: output.prefix.clone(),
            staging: staging.to_string(),
            config: self.settings.commit.clone(),
        };
        let mut vars = env.to_env_output(index);
        if let Some(helper) = self.settings.commit_helper.as_ref().filter(|_| index == 0) {
            vars.push((COMMIT_HELPER_VAR.to_string(), helper.to_string_lossy().into_owned()));
        }
        Ok(vars)
    }

    /// Every bucket opened so far.
    fn opened(&self) -> Vec<(String, Committer)> {
        self.committers.lock().expect("not poisoned").iter().map(|(b, c)| (b.clone(), c.clone())).collect()
    }

    /// One sweep of every bucket: uploads older than the limit that no staging record names
    /// (staging records exist while their attempt lives or waits for its job commit; a job
    /// commit or abort removes them) are aborted. Returns how many were aborted.
    pub async fn sweep(&self, metrics: &Metrics) -> usize {
        let mut buckets: BTreeSet<String> = self.opened().into_iter().map(|(b, _)| b).collect();
        match (&self.settings.store, &self.local_root) {
            (OutputStore::S3(s3), _) => {
                buckets.insert(s3.bucket.clone());
            }
            (_, Some(root)) => {
                if let Ok(dir) = std::fs::read_dir(root) {
                    for e in dir.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            buckets.insert(e.file_name().to_string_lossy().into_owned());
                        }
                    }
                }
            }
            _ => {}
        }
        let mut aborted = 0;
        for bucket in buckets {
            let Ok(c) = self.committer(&bucket) else { continue };
            let seen = self.unnamed.lock().expect("not poisoned").get(&bucket).cloned().unwrap_or_default();
            match sweep_bucket(&c, self.settings.sweep_after, &seen).await {
                Ok((n, unnamed)) => {
                    aborted += n;
                    self.unnamed.lock().expect("not poisoned").insert(bucket.clone(), unnamed);
                }
                Err(e) => eprintln!("weir outputs: sweeping bucket `{bucket}`: {e}"),
            }
        }
        metrics.uploads_swept.inc_by(aborted as u64);
        aborted
    }

    /// Adds what the stores counted since the last call to /metrics' counters.
    pub fn export_counts(&self, metrics: &Metrics) {
        let mut total = StoreCounts::default();
        for (_, c) in self.opened() {
            let s = c.store().metrics().snapshot();
            total.requests += s.requests;
            total.slowdown += s.slowdown;
            total.server_errors += s.server_errors;
            total.throttled += s.throttled;
            total.timeouts += s.timeouts;
            total.connect_errors += s.connect_errors;
        }
        let mut seen = self.exported.lock().expect("not poisoned");
        metrics.object_store_requests.inc_by(total.requests.saturating_sub(seen.requests));
        for (reason, now, before) in [
            ("slowdown", total.slowdown, seen.slowdown),
            ("server_error", total.server_errors, seen.server_errors),
            ("throttled", total.throttled, seen.throttled),
            ("timeout", total.timeouts, seen.timeouts),
            ("connect_error", total.connect_errors, seen.connect_errors),
        ] {
            metrics
                .object_store_failures
                .get_or_create(&Reason { reason: reason.into() })
                .inc_by(now.saturating_sub(before));
        }
        *seen = total;
    }
}

/// Least time an upload must have been seen unnamed, by this process's clock, before it is
/// aborted (more if `sweep_after_seconds` is longer).
const UNNAMED_GRACE: Duration = Duration::from_secs(10);

/// Which unnamed uploads a sweep keeps: those first seen unnamed less than `grace` ago (by
/// `seen`, when earlier sweeps saw them so, else now). Returns them and the first-seen times to
/// remember for the next sweep (only of uploads still unnamed).
fn young_unnamed(
    unnamed: &BTreeSet<String>,
    seen: &BTreeMap<String, i64>,
    now_ms: i64,
    grace: Duration,
) -> (BTreeSet<String>, BTreeMap<String, i64>) {
    let first: BTreeMap<String, i64> =
        unnamed.iter().map(|id| (id.clone(), seen.get(id).copied().unwrap_or(now_ms))).collect();
    let young = first
        .iter()
        .filter(|(_, &at)| now_ms - at < grace.as_millis() as i64)
        .map(|(id, _)| id.clone())
        .collect();
    (young, first)
}

/// One bucket's sweep: aborts the uploads older than `older_than` that no staging record names
/// — and that this process has seen unnamed for `older_than` (at least [`UNNAMED_GRACE`]). A
/// task creates its upload a moment before it records it in its staging record, so an upload
/// caught in between must not be taken for an orphan; the store's upload dates cannot tell (moto
/// dates every upload 2010), and on a loaded machine that moment can outlast a sweep period or
/// two (CI: a task's upload aborted under 1 s sweeps), so the grace is a time, not a count.
/// Returns the uploads aborted and the unnamed ones with when they were first seen so.
async fn sweep_bucket(
    c: &Committer,
    older_than: Duration,
    seen: &BTreeMap<String, i64>,
) -> Result<(usize, BTreeMap<String, i64>), weir_commit::CommitError> {
    let mut stagings = BTreeSet::new();
    for o in c.store().list(STAGING_ROOT).await? {
        // _weir/staging/run-R/J.S.T.A[.oK]/files/NAME.upload.json
        let parts: Vec<&str> = o.key.splitn(5, '/').collect();
        if parts.len() == 5 && parts[4].starts_with("files/") {
            stagings.insert(format!("{}/{}/{}/{}/", parts[0], parts[1], parts[2], parts[3]));
        }
    }
    let stagings: Vec<String> = stagings.into_iter().collect();
    let named = c.live_uploads(&stagings).await?;
    // One listing decides and is swept: an upload created after it is left to the next sweep
    // (sweeping a fresh listing aborted a task's upload created between the two, before its
    // record; moto dates it 2010, so it looked old).
    let listed = c.store().list_uploads("").await?;
    let unnamed: BTreeSet<String> =
        listed.iter().map(|u| u.upload_id.clone()).filter(|id| !named.contains(id)).collect();
    let now = crate::time::now_ms();
    let (young, first_seen) = young_unnamed(&unnamed, seen, now, older_than.max(UNNAMED_GRACE));
    // Kept this time: the named ones, and the unnamed ones not unnamed for long enough.
    let keep: BTreeSet<String> = named.into_iter().chain(young).collect();
    let report = c.sweep_listed(listed, older_than.as_millis() as i64, now, &keep).await?;
    Ok((report.aborted.len(), first_seen))
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// A bucket folder of the local store: its root and the bucket 0755, the upload area 1733
/// (tasks make their own upload folders there, and cannot list others').
fn make_local_bucket(bucket: &Path) -> std::io::Result<()> {
    for dir in [bucket.parent().unwrap_or(bucket), bucket] {
        std::fs::create_dir_all(dir)?;
        set_mode(dir, 0o755)?;
    }
    let uploads = bucket.join(weir_commit::LOCAL_UPLOADS_DIR);
    std::fs::create_dir_all(&uploads)?;
    set_mode(&uploads, 0o1733)
}

/// An attempt's staging folder: its parents the server's (0755), the folder the attempt's user's
/// alone (0700).
fn make_staging(bucket: &Path, dir: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    let mut parents = Vec::new();
    let mut p = dir.parent();
    while let Some(d) = p.filter(|d| d.starts_with(bucket) && *d != bucket) {
        parents.push(d.to_path_buf());
        p = d.parent();
    }
    for d in parents.iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => set_mode(d, 0o755)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    set_mode(dir, 0o700)?;
    if let Some((uid, gid)) = owner {
        rustix::fs::chown(dir, Some(rustix::fs::Uid::from_raw(uid)), Some(rustix::fs::Gid::from_raw(gid)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unnamed_upload_is_kept_until_it_has_been_unnamed_for_the_grace() {
        let grace = Duration::from_secs(10);
        let unnamed: BTreeSet<String> = ["a".to_string()].into();
        // First seen now: kept, remembered from now.
        let (young, seen) = young_unnamed(&unnamed, &BTreeMap::new(), 1_000, grace);
        assert_eq!(young, unnamed);
        assert_eq!(seen.get("a"), Some(&1_000));
        // Later sweeps within the grace keep it (however many: a count of sweeps is no grace on a
        // loaded machine), and keep its first-seen time.
        let (young, seen) = young_unnamed(&unnamed, &seen, 10_999, grace);
        assert_eq!((young.len(), seen.get("a")), (1, Some(&1_000)));
        // Past the grace it is no longer kept (the sweep may abort it).
        let (young, seen) = young_unnamed(&unnamed, &seen, 11_000, grace);
        assert!(young.is_empty());
        // An upload named again (or gone) is forgotten; a new unnamed one starts its own clock.
        let other: BTreeSet<String> = ["b".to_string()].into();
        let (young, seen) = young_unnamed(&other, &seen, 12_000, grace);
        assert_eq!(young, other);
        assert_eq!(seen.keys().collect::<Vec<_>>(), ["b"]);
    }
}
