//! What the committer writes down: the staging record of each uploaded file (task commit), the
//! claim and the manifest of an output (job commit), and the job commit's resumable state.
//! All are JSON; docs/commit.md describes them for programs in other languages.

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

/// One uploaded part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    /// 1-based part number.
    pub number: u32,
    /// The ETag the store returned for the part (quotes removed).
    pub etag: String,
    pub size: u64,
}

/// Where a task attempt's upload of one file stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadState {
    /// The upload exists and parts may be going up: written before the first part, so an
    /// abort can always find the upload (the sweeper covers the moment before).
    Uploading,
    /// Every part is up and recorded: the file's task commit is done. Nothing is visible.
    Uploaded,
}

/// The staging record of one file of one task attempt, at
/// `{staging}files/{name}.upload.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    /// The file's name inside the output (`region=eu/part-0.csv`).
    pub name: String,
    /// The full key the file will have (`{output}{name}`).
    pub key: String,
    pub upload_id: String,
    pub state: UploadState,
    #[serde(default)]
    pub parts: Vec<PartRecord>,
    /// Bytes in all parts.
    #[serde(default)]
    pub size: u64,
    /// Epoch milliseconds when the upload was created.
    pub created_ms: i64,
}

impl UploadRecord {
    /// The ETag the completed object should have: S3's multipart ETag (MD5 of the parts' MD5s,
    /// `-N`) when every part ETag is an MD5, as S3 (without KMS), moto and weir's local store
    /// give. `None` when the parts' ETags are not MD5s (then only sizes are checked).
    pub fn expected_etag(&self) -> Option<String> {
        multipart_etag(&self.parts)
    }
}

/// S3's multipart ETag for these parts, when every part ETag is 32 hex digits.
pub fn multipart_etag(parts: &[PartRecord]) -> Option<String> {
    let mut md5 = Md5::new();
    for p in parts {
        let raw = hex_decode(&p.etag)?;
        if raw.len() != 16 {
            return None;
        }
        md5.update(&raw);
    }
    Some(format!("{}-{}", hex(&md5.finalize()), parts.len()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// One committed file in a manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// The name inside the output.
    pub name: String,
    pub size: u64,
    pub etag: String,
}

/// `_weir_manifest.json`: what one job commit put in an output. Written last, create-only:
/// its presence means every file it lists is there, whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// `weir-manifest/1`.
    pub format: String,
    pub run_id: String,
    /// The output prefix the names are relative to.
    pub output: String,
    /// The partitions this commit added (`dt=2026-11-27`, …), as the stage declared them.
    pub partitions: Vec<String>,
    /// In name order.
    pub files: Vec<ManifestFile>,
    pub total_size: u64,
    pub committed_ms: i64,
}

pub const MANIFEST_FORMAT: &str = "weir-manifest/1";

/// `_weir_claim.json`: the run whose job commit owns an output. Written create-only before
/// any upload completes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub run_id: String,
    pub claimed_ms: i64,
}

/// How far a job commit got. The server stores this (JSON) before calling
/// [`crate::Committer::job_commit`] and after it returns; after a crash it calls `job_commit`
/// (or `abort_job`) again with the stored state, and the call finishes what is left. Every step
/// is idempotent: the claim and the manifest are recognised by run id, an upload already
/// completed is recognised by its key's size and ETag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCommitState {
    pub run_id: String,
    pub output: String,
    pub partitions: Vec<String>,
    /// The staging prefixes of the attempts whose files are committed.
    pub attempts: Vec<String>,
    /// The uploads to complete, in name order.
    pub uploads: Vec<UploadRecord>,
    pub phase: JobPhase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    /// Uploads read and checked; nothing written to the output yet.
    Prepared,
    /// The claim is ours; uploads may be partly completed.
    Claimed,
    /// The manifest is written: committed.
    Committed,
    /// Aborted: uploads aborted, completed objects and our claim deleted.
    Aborted,
}
