//! The store: S3 (object_store's `AmazonS3`, with ListMultipartUploads added) or a local
//! directory (object_store's `LocalFileSystem`, with multipart uploads staged beside it).
//! One small set of operations the committer needs, the same on both.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};

use crate::config::{millis, S3Config, StoreConfig};
use crate::error::{CommitError, Result};
use crate::local_uploads::LocalUploads;
use crate::metrics::{CountingConnector, StoreMetrics};
use crate::record::PartRecord;

/// An object: its key, size and ETag (quotes removed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// A multipart upload in progress, as the store lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadListing {
    pub key: String,
    pub upload_id: String,
    /// When the upload was created, epoch milliseconds.
    pub initiated_ms: i64,
}

/// A handle on the store; cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    backend: Arc<Backend>,
    metrics: Arc<StoreMetrics>,
}

#[derive(Debug)]
enum Backend {
    Local { fs: LocalFileSystem, uploads: LocalUploads },
    S3 { s3: AmazonS3, config: S3Config, http: reqwest::Client },
}

/// The local store's upload area, inside its root: listing the root shows it, listing an
/// output prefix never does.
pub const LOCAL_UPLOADS_DIR: &str = ".weir-uploads";

impl Store {
    /// Opens the store. A local root is created if missing.
    pub fn open(config: &StoreConfig) -> Result<Store> {
        let metrics = Arc::new(StoreMetrics::default());
        let backend = match config {
            StoreConfig::Local { root } => {
                std::fs::create_dir_all(root)
                    .map_err(|source| CommitError::Io { path: root.clone(), source })?;
                let fs = LocalFileSystem::new_with_prefix(root)
                    .map_err(|e| CommitError::store("open", &root.display().to_string(), e))?;
                Backend::Local { fs, uploads: LocalUploads::new(root.clone()) }
            }
            StoreConfig::S3(s3) => {
                // One provider per process (ring); a process that installed one keeps it.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let http = reqwest::Client::builder()
                    .timeout(millis(s3.request_timeout_ms))
                    .connect_timeout(millis(s3.request_timeout_ms.min(10_000)))
                    .build()
                    .map_err(|e| {
                        CommitError::config("store", "s3", &s3.bucket, format!("HTTP client: {e}"))
                    })?;
                let retry = RetryConfig {
                    backoff: BackoffConfig {
                        init_backoff: millis(s3.retry.init_backoff_ms),
                        max_backoff: millis(s3.retry.max_backoff_ms),
                        base: 2.0,
                    },
                    max_retries: s3.retry.max_retries,
                    retry_timeout: millis(s3.retry.retry_timeout_ms),
                };
                let mut builder = AmazonS3Builder::new()
                    .with_bucket_name(&s3.bucket)
                    .with_region(&s3.region)
                    .with_access_key_id(&s3.credentials.access_key_id)
                    .with_secret_access_key(&s3.credentials.secret_access_key)
                    .with_conditional_put(S3ConditionalPut::ETagMatch)
                    .with_retry(retry)
                    .with_http_connector(CountingConnector::new(http.clone(), metrics.clone()));
                if let Some(token) = &s3.credentials.session_token {
                    builder = builder.with_token(token);
                }
                if let Some(endpoint) = &s3.endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"))
                        .with_virtual_hosted_style_request(false);
                }
                let s3_store = builder
                    .build()
                    .map_err(|e| CommitError::config("store", "s3", &s3.bucket, e.to_string()))?;
                Backend::S3 { s3: s3_store, config: s3.clone(), http }
            }
        };
        Ok(Store { backend: Arc::new(backend), metrics })
    }

    /// The counters of retried failures (503 SlowDown, 5xx, 429, timeouts) and requests.
    pub fn metrics(&self) -> &Arc<StoreMetrics> {
        &self.metrics
    }

    fn path(key: &str) -> Result<Path> {
        Path::parse(key).map_err(|e| CommitError::Name { name: key.to_string(), reason: e.to_string() })
    }

    pub async fn create_upload(&self, key: &str) -> Result<String> {
        let path = Self::path(key)?;
        match &*self.backend {
            Backend::Local { uploads, .. } => uploads.create(key).await,
            Backend::S3 { s3, .. } => {
                s3.create_multipart(&path).await.map_err(|e| CommitError::store("create upload", key, e))
            }
        }
    }

    /// Uploads part `number` (1-based) and returns its ETag.
    pub async fn put_part(&self, key: &str, upload_id: &str, number: u32, data: Bytes) -> Result<String> {
        let path = Self::path(key)?;
        match &*self.backend {
            Backend::Local { uploads, .. } => uploads.put_part(upload_id, number, data).await,
            Backend::S3 { s3, .. } => {
                let id = upload_id.to_string();
                let part = s3
                    .put_part(&path, &id, number as usize - 1, PutPayload::from(data))
                    .await
                    .map_err(|e| CommitError::store("upload part", key, e))?;
                Ok(unquote(&part.content_id))
            }
        }
    }

    /// Completes the upload from its recorded parts; returns the object's ETag.
    pub async fn complete(&self, key: &str, upload_id: &str, parts: &[PartRecord]) -> Result<String> {
        let path = Self::path(key)?;
        match &*self.backend {
            Backend::Local { fs: _, uploads } => uploads.complete(key, upload_id, parts).await,
            Backend::S3 { s3, .. } => {
                let ids = parts.iter().map(|p| PartId { content_id: format!("\"{}\"", p.etag) }).collect();
                let done = s3
                    .complete_multipart(&path, &upload_id.to_string(), ids)
                    .await
                    .map_err(|e| CommitError::store("complete upload", key, e))?;
                Ok(done.e_tag.map(|t| unquote(&t)).unwrap_or_default())
            }
        }
    }

    /// Aborts the upload. An upload that is already gone is not an error.
    pub async fn abort(&self, key: &str, upload_id: &str) -> Result<()> {
        let path = Self::path(key)?;
        match &*self.backend {
            Backend::Local { uploads, .. } => uploads.abort(upload_id).await,
            Backend::S3 { s3, .. } => match s3.abort_multipart(&path, &upload_id.to_string()).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(CommitError::store("abort upload", key, e)),
            },
        }
    }

    /// The multipart uploads in progress whose key starts with `prefix` ("" for all).
    pub async fn list_uploads(&self, prefix: &str) -> Result<Vec<UploadListing>> {
        match &*self.backend {
            Backend::Local { uploads, .. } => uploads.list(prefix).await,
            Backend::S3 { config, http, .. } => {
                crate::s3_uploads::list(http, config, prefix, &self.metrics).await
            }
        }
    }

    /// A create-only put: `Ok(true)` if this call created the object, `Ok(false)` if an
    /// object was already there (nothing written).
    pub async fn put_create(&self, key: &str, body: Vec<u8>) -> Result<bool> {
        let path = Self::path(key)?;
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        let result = match &*self.backend {
            Backend::Local { fs, .. } => fs.put_opts(&path, PutPayload::from(body), opts).await,
            Backend::S3 { s3, .. } => s3.put_opts(&path, PutPayload::from(body), opts).await,
        };
        match result {
            Ok(_) => {
                // The claim and the manifest are for every reader (other users' tasks).
                if let Some(root) = self.local_root() {
                    use std::os::unix::fs::PermissionsExt;
                    let file = root.join(key);
                    let _ = std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644));
                    let mut dir = file.parent();
                    while let Some(d) = dir.filter(|d| d.starts_with(&root) && *d != root) {
                        let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
                        dir = d.parent();
                    }
                }
                Ok(true)
            }
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(CommitError::store("create-only put", key, e)),
        }
    }

    pub async fn put(&self, key: &str, body: Vec<u8>) -> Result<()> {
        let path = Self::path(key)?;
        let result = match &*self.backend {
            Backend::Local { fs, .. } => fs.put(&path, PutPayload::from(body)).await,
            Backend::S3 { s3, .. } => s3.put(&path, PutPayload::from(body)).await,
        };
        result.map(|_| ()).map_err(|e| CommitError::store("put", key, e))
    }

    /// The object's bytes, or `None` if there is none.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>> {
        let path = Self::path(key)?;
        let result = match &*self.backend {
            Backend::Local { fs, .. } => fs.get(&path).await,
            Backend::S3 { s3, .. } => s3.get(&path).await,
        };
        match result {
            Ok(r) => r.bytes().await.map(Some).map_err(|e| CommitError::store("get", key, e)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(CommitError::store("get", key, e)),
        }
    }

    pub async fn head(&self, key: &str) -> Result<Option<ObjectInfo>> {
        let path = Self::path(key)?;
        let result = match &*self.backend {
            Backend::Local { fs, .. } => fs.head(&path).await,
            Backend::S3 { s3, .. } => s3.head(&path).await,
        };
        match result {
            Ok(meta) => Ok(Some(ObjectInfo {
                key: key.to_string(),
                size: meta.size,
                etag: meta.e_tag.map(|t| unquote(&t)),
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(CommitError::store("head", key, e)),
        }
    }

    /// Every object under `prefix` (recursively), in key order. The local store's upload
    /// area is never listed.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        use futures_util::TryStreamExt;
        let trimmed = prefix.trim_end_matches('/');
        let path = if trimmed.is_empty() { None } else { Some(Self::path(trimmed)?) };
        let stream = match &*self.backend {
            Backend::Local { fs, .. } => fs.list(path.as_ref()),
            Backend::S3 { s3, .. } => s3.list(path.as_ref()),
        };
        let metas: Vec<_> = stream.try_collect().await.map_err(|e| CommitError::store("list", prefix, e))?;
        let mut out: Vec<ObjectInfo> = metas
            .into_iter()
            .map(|m| ObjectInfo {
                key: m.location.to_string(),
                size: m.size,
                etag: m.e_tag.map(|t| unquote(&t)),
            })
            .filter(|o| o.key.starts_with(prefix))
            .filter(|o| !o.key.starts_with(&format!("{LOCAL_UPLOADS_DIR}/")))
            .filter(|o| !o.key.starts_with(&format!("{}/", crate::local_uploads::LOCAL_JOINS_DIR)))
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Deletes the object; one that is already gone is not an error.
    pub async fn delete(&self, key: &str) -> Result<()> {
        let path = Self::path(key)?;
        let result = match &*self.backend {
            Backend::Local { fs, .. } => fs.delete(&path).await,
            Backend::S3 { s3, .. } => s3.delete(&path).await,
        };
        match result {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(CommitError::store("delete", key, e)),
        }
    }

    /// The size and ETag of a completed object, to check against its upload record: S3's
    /// ETag as the store keeps it; the local store's computed from the content at the
    /// recorded part sizes. `None` if there is no object at `key`.
    pub async fn completed(&self, key: &str, parts: &[PartRecord]) -> Result<Option<(u64, String)>> {
        match &*self.backend {
            Backend::Local { uploads, .. } => {
                let path = uploads.root().join(key);
                let parts = parts.to_vec();
                let size = match tokio::fs::metadata(&path).await {
                    Ok(m) => m.len(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(source) => return Err(CommitError::Io { path, source }),
                };
                let etag =
                    tokio::task::spawn_blocking(move || crate::local_uploads::content_etag(&path, &parts))
                        .await
                        .expect("the hashing task does not panic")?;
                Ok(Some((size, etag.unwrap_or_else(|| "(content differs from the parts)".into()))))
            }
            Backend::S3 { .. } => Ok(self.head(key).await?.map(|o| (o.size, o.etag.unwrap_or_default()))),
        }
    }

    /// The local store's root, for tests and the benchmark's direct writes.
    pub fn local_root(&self) -> Option<PathBuf> {
        match &*self.backend {
            Backend::Local { uploads, .. } => Some(uploads.root().to_path_buf()),
            Backend::S3 { .. } => None,
        }
    }
}

pub(crate) fn unquote(etag: &str) -> String {
    etag.trim_matches('"').to_string()
}
