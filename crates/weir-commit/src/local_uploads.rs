//! Multipart uploads for the local store (object_store's `LocalFileSystem` has none).
//!
//! An upload is a folder `ROOT/.weir-uploads/ID/` holding `upload.json` (key, creation time)
//! and one file per part; a part's ETag is its MD5, as on S3. Completing checks every part
//! against its recorded ETag, joins the parts into one file inside the upload folder, fsyncs it
//! and renames it to its key: the object appears whole or not at all. Aborting removes the
//! folder.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::error::{CommitError, Result};
use crate::record::{hex, multipart_etag, PartRecord};
use crate::store::{UploadListing, LOCAL_UPLOADS_DIR};

#[derive(Debug)]
pub(crate) struct LocalUploads {
    root: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct UploadMeta {
    key: String,
    initiated_ms: i64,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CommitError + '_ {
    move |source| CommitError::Io { path: path.to_path_buf(), source }
}

impl LocalUploads {
    pub(crate) fn new(root: PathBuf) -> Self {
        LocalUploads { root }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, upload_id: &str) -> Result<PathBuf> {
        if upload_id.is_empty() || !upload_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(CommitError::Record {
                key: upload_id.to_string(),
                reason: "a local upload id is hex digits".into(),
            });
        }
        Ok(self.root.join(LOCAL_UPLOADS_DIR).join(upload_id))
    }

    fn missing(key: &str, upload_id: &str) -> CommitError {
        CommitError::store(
            "local upload",
            key,
            object_store::Error::NotFound {
                path: key.to_string(),
                source: format!("no upload {upload_id} (completed or aborted)").into(),
            },
        )
    }

    pub(crate) async fn create(&self, key: &str) -> Result<String> {
        let id = hex(&random_bytes());
        let dir = self.dir(&id)?;
        tokio::fs::create_dir_all(&dir).await.map_err(io(&dir))?;
        let meta = UploadMeta { key: key.to_string(), initiated_ms: now_ms() };
        let path = dir.join("upload.json");
        tokio::fs::write(&path, serde_json::to_vec(&meta).expect("serializable")).await.map_err(io(&path))?;
        Ok(id)
    }

    pub(crate) async fn put_part(&self, upload_id: &str, number: u32, data: Bytes) -> Result<String> {
        let dir = self.dir(upload_id)?;
        if !tokio::fs::try_exists(dir.join("upload.json")).await.unwrap_or(false) {
            return Err(Self::missing(upload_id, upload_id));
        }
        let etag = hex(&Md5::digest(&data));
        let tmp = dir.join(format!("part-{number:06}.tmp"));
        tokio::fs::write(&tmp, &data).await.map_err(io(&tmp))?;
        let path = dir.join(format!("part-{number:06}"));
        tokio::fs::rename(&tmp, &path).await.map_err(io(&path))?;
        Ok(etag)
    }

    pub(crate) async fn complete(&self, key: &str, upload_id: &str, parts: &[PartRecord]) -> Result<String> {
        let dir = self.dir(upload_id)?;
        if !tokio::fs::try_exists(dir.join("upload.json")).await.unwrap_or(false) {
            return Err(Self::missing(key, upload_id));
        }
        let target = self.root.join(key);
        let parts_for_etag = parts.to_vec();
        let parts = parts.to_vec();
        let key_owned = key.to_string();
        let dir2 = dir.clone();
        tokio::task::spawn_blocking(move || join_parts(&dir2, &key_owned, &parts, &target))
            .await
            .expect("the join task does not panic")?;
        tokio::fs::remove_dir_all(&dir).await.map_err(io(&dir))?;
        Ok(multipart_etag(&parts_for_etag).unwrap_or_default())
    }

    pub(crate) async fn abort(&self, upload_id: &str) -> Result<()> {
        let dir = self.dir(upload_id)?;
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(CommitError::Io { path: dir, source }),
        }
    }

    pub(crate) async fn list(&self, prefix: &str) -> Result<Vec<UploadListing>> {
        let base = self.root.join(LOCAL_UPLOADS_DIR);
        let mut out = Vec::new();
        let mut entries = match tokio::fs::read_dir(&base).await {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(source) => return Err(CommitError::Io { path: base, source }),
        };
        while let Some(entry) = entries.next_entry().await.map_err(io(&base))? {
            let meta_path = entry.path().join("upload.json");
            let text = match tokio::fs::read(&meta_path).await {
                Ok(t) => t,
                // Created a moment ago (no meta yet) or removed meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(CommitError::Io { path: meta_path, source }),
            };
            let meta: UploadMeta = serde_json::from_slice(&text).map_err(|e| CommitError::Record {
                key: meta_path.display().to_string(),
                reason: e.to_string(),
            })?;
            if meta.key.starts_with(prefix) {
                out.push(UploadListing {
                    key: meta.key,
                    upload_id: entry.file_name().to_string_lossy().into_owned(),
                    initiated_ms: meta.initiated_ms,
                });
            }
        }
        out.sort_by(|a, b| (&a.key, &a.upload_id).cmp(&(&b.key, &b.upload_id)));
        Ok(out)
    }
}

/// Joins the parts after checking each one's MD5 against its recorded ETag, then renames the
/// result to the key's path.
/// Where the local store joins parts, a folder of the committer's own beside the upload area:
/// never inside an upload's folder, which belongs to the task that made it.
pub(crate) const LOCAL_JOINS_DIR: &str = ".weir-joins";

/// Opens one part for reading without trusting the upload's folder: no symlink is followed, a
/// FIFO does not block, and the part must be a regular file with one link, owned by the owner
/// of the upload's folder. (A server running as root joins parts that tasks of other users
/// wrote; a part that is a link to a file of someone else must not be read into an output.)
fn open_part(dir: &Path, path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: &str| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why.to_string());
    let owner = std::fs::symlink_metadata(dir)?;
    if !owner.is_dir() {
        return Err(refuse("the upload's folder is not a folder"));
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let f = std::fs::File::from(fd);
    let meta = f.metadata()?;
    if !meta.is_file() || meta.nlink() != 1 || meta.uid() != owner.uid() {
        return Err(refuse("a part must be a regular file with one link, owned by the upload's owner"));
    }
    Ok(f)
}

fn join_parts(dir: &Path, key: &str, parts: &[PartRecord], target: &Path) -> Result<()> {
    let joins = dir.parent().and_then(Path::parent).map(|root| root.join(LOCAL_JOINS_DIR));
    let joins = joins.unwrap_or_else(|| dir.to_path_buf());
    std::fs::create_dir_all(&joins).map_err(io(&joins))?;
    let joined = joins.join(format!("{}.tmp", dir.file_name().unwrap_or_default().to_string_lossy()));
    let mut out = std::fs::File::create(&joined).map_err(io(&joined))?;
    let mut buf = Vec::new();
    for part in parts {
        let path = dir.join(format!("part-{:06}", part.number));
        buf.clear();
        open_part(dir, &path).and_then(|mut f| f.read_to_end(&mut buf)).map_err(io(&path))?;
        let found = hex(&Md5::digest(&buf));
        if found != part.etag {
            return Err(CommitError::Integrity {
                key: format!("{key} part {}", part.number),
                what: "ETag",
                expected: part.etag.clone(),
                found,
            });
        }
        out.write_all(&buf).map_err(io(&joined))?;
    }
    out.sync_all().map_err(io(&joined))?;
    drop(out);
    // Readers of the output may be other users (tasks of a reading stage): the object is
    // readable by all, its folders searchable, whatever the committer's umask.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&joined, std::fs::Permissions::from_mode(0o644)).map_err(io(&joined))?;
    }
    if let Some(parent) = target.parent() {
        make_public_dirs(parent)?;
    }
    std::fs::rename(&joined, target).map_err(io(target))?;
    if let Some(parent) = target.parent() {
        // The rename is durable once the folder is synced.
        if let Ok(d) = std::fs::File::open(parent) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

pub(crate) fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    b
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The multipart ETag of a local object, computed from its content cut at the recorded part
/// sizes (a local file's own ETag is its inode and mtime, which says nothing of the content).
/// `None` if the file's size is not the parts' total.
pub(crate) fn content_etag(path: &Path, parts: &[PartRecord]) -> Result<Option<String>> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CommitError::Io { path: path.to_path_buf(), source }),
    };
    let mut computed = Vec::with_capacity(parts.len());
    let mut buf = Vec::new();
    for part in parts {
        buf.resize(part.size as usize, 0);
        if file.read_exact(&mut buf).is_err() {
            return Ok(None);
        }
        computed.push(PartRecord { number: part.number, etag: hex(&Md5::digest(&buf)), size: part.size });
    }
    if file.read(&mut [0u8; 1]).map_err(io(path))? != 0 {
        return Ok(None);
    }
    Ok(multipart_etag(&computed))
}

/// Creates `dir` and its missing parents, each readable and searchable by all (0755).
pub(crate) fn make_public_dirs(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        make_public_dirs(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(CommitError::Io { path: dir.to_path_buf(), source: e }),
    }
}
