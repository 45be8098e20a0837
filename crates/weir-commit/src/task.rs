//! The task commit: one file of a task attempt becomes a multipart upload, parts in parallel,
//! recorded in the attempt's staging area. Nothing appears in the output.

use std::path::Path;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::task::JoinSet;

use crate::error::{CommitError, Result};
use crate::keys::{check_name, check_prefix, record_key, records_prefix};
use crate::record::{PartRecord, UploadRecord, UploadState};
use crate::{now_ms, Committer};

impl Committer {
    /// Uploads `file` as `{output}{name}` through a multipart upload and records it under the
    /// attempt's `staging` prefix. The object stays invisible until the job commit.
    ///
    /// The record is written (state `uploading`, with the upload id) before the first part,
    /// so an abort finds the upload even if the task is killed mid-way. Putting a name again
    /// in the same attempt replaces the earlier upload (which is aborted). A failure aborts
    /// this upload and removes its record.
    pub async fn put_file(
        &self,
        output: &str,
        staging: &str,
        name: &str,
        file: &Path,
    ) -> Result<UploadRecord> {
        check_prefix(output).map_err(|reason| CommitError::Name { name: output.to_string(), reason })?;
        check_prefix(staging).map_err(|reason| CommitError::Name { name: staging.to_string(), reason })?;
        check_name(name).map_err(|reason| CommitError::Name { name: name.to_string(), reason })?;
        let io = |source| CommitError::Io { path: file.to_path_buf(), source };
        let mut f = tokio::fs::File::open(file).await.map_err(io)?;
        let total = f.metadata().await.map_err(io)?.len();

        let rkey = record_key(staging, name);
        if let Some(old) = self.read_record(&rkey).await? {
            self.store.abort(&old.key, &old.upload_id).await?;
        }
        let key = format!("{output}{name}");
        let upload_id = self.store.create_upload(&key).await?;
        let mut record = UploadRecord {
            name: name.to_string(),
            key: key.clone(),
            upload_id: upload_id.clone(),
            state: UploadState::Uploading,
            parts: Vec::new(),
            size: 0,
            created_ms: now_ms(),
        };
        self.write_record(&rkey, &record).await?;

        match self.upload_parts(&key, &upload_id, &mut f, total).await {
            Ok(parts) => {
                record.size = parts.iter().map(|p| p.size).sum();
                record.parts = parts;
                record.state = UploadState::Uploaded;
                if record.size != total {
                    let err = CommitError::Integrity {
                        key: file.display().to_string(),
                        what: "size read",
                        expected: total.to_string(),
                        found: record.size.to_string(),
                    };
                    self.discard(&rkey, &record).await;
                    return Err(err);
                }
                if let Err(e) = self.write_record(&rkey, &record).await {
                    self.discard(&rkey, &record).await;
                    return Err(e);
                }
                Ok(record)
            }
            Err(e) => {
                self.discard(&rkey, &record).await;
                Err(e)
            }
        }
    }

    /// Best effort after a failed put: abort the upload, drop the record. What fails here is
    /// left to the job abort and the sweeper.
    async fn discard(&self, rkey: &str, record: &UploadRecord) {
        if self.store.abort(&record.key, &record.upload_id).await.is_ok() {
            let _ = self.store.delete(rkey).await;
        }
    }

    /// Reads `total` bytes of `f` in parts of `part_size` and uploads them, at most
    /// `parallel_parts` at once. A zero-byte file is one empty part.
    async fn upload_parts(
        &self,
        key: &str,
        upload_id: &str,
        f: &mut tokio::fs::File,
        total: u64,
    ) -> Result<Vec<PartRecord>> {
        let part_size = self.config.part_size as u64;
        let count = total.div_ceil(part_size).max(1);
        let mut parts = Vec::with_capacity(count as usize);
        let mut running: JoinSet<Result<PartRecord>> = JoinSet::new();
        for i in 0..count {
            while running.len() >= self.config.parallel_parts {
                parts.push(running.join_next().await.expect("non-empty").expect("no panic")?);
            }
            let len = part_size.min(total - i * part_size) as usize;
            let mut buf = vec![0u8; len];
            f.read_exact(&mut buf).await.map_err(|source| CommitError::Io { path: key.into(), source })?;
            let (store, key, id) = (self.store.clone(), key.to_string(), upload_id.to_string());
            let number = i as u32 + 1;
            running.spawn(async move {
                let etag = store.put_part(&key, &id, number, Bytes::from(buf)).await?;
                Ok(PartRecord { number, etag, size: len as u64 })
            });
        }
        while let Some(done) = running.join_next().await {
            parts.push(done.expect("no panic")?);
        }
        parts.sort_by_key(|p| p.number);
        Ok(parts)
    }

    pub(crate) async fn read_record(&self, key: &str) -> Result<Option<UploadRecord>> {
        match self.store.get(key).await? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CommitError::Record { key: key.to_string(), reason: e.to_string() }),
        }
    }

    async fn write_record(&self, key: &str, record: &UploadRecord) -> Result<()> {
        self.store.put(key, serde_json::to_vec_pretty(record).expect("serializable")).await
    }

    /// Every staging record of an attempt, in name order.
    pub async fn attempt_records(&self, staging: &str) -> Result<Vec<UploadRecord>> {
        let mut out = Vec::new();
        for obj in self.store.list(&records_prefix(staging)).await? {
            if obj.key.ends_with(".upload.json") {
                if let Some(r) = self.read_record(&obj.key).await? {
                    out.push(r);
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Aborts every upload of these attempts (failed, killed or superseded by a retry) and
    /// removes their staging records. Returns how many uploads were aborted. Nothing of
    /// theirs was ever visible, and nothing is left behind.
    pub async fn abort_attempts(&self, attempts: &[String]) -> Result<usize> {
        let mut aborted = 0;
        for staging in attempts {
            for record in self.attempt_records(staging).await? {
                self.store.abort(&record.key, &record.upload_id).await?;
                self.store.delete(&record_key(staging, &record.name)).await?;
                aborted += 1;
            }
        }
        Ok(aborted)
    }
}
