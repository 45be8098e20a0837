//! The sweeper: aborts multipart uploads that nobody will complete (the lifecycle rule S3
//! users set up by hand, done by weir).

use std::collections::BTreeSet;

use crate::error::Result;
use crate::store::UploadListing;
use crate::Committer;

/// What a sweep found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Uploads aborted: older than the limit and owned by no live attempt.
    pub aborted: Vec<UploadListing>,
    /// Uploads kept because a live attempt owns them (whatever their age).
    pub kept_live: usize,
    /// Uploads kept because they are younger than the limit (their attempt may not have
    /// recorded them yet).
    pub kept_young: usize,
}

impl Committer {
    /// The upload ids recorded by these attempts' staging records: the uploads the sweeper
    /// must leave alone while the attempts live (or while their job commit runs).
    pub async fn live_uploads(&self, attempts: &[String]) -> Result<BTreeSet<String>> {
        let mut ids = BTreeSet::new();
        for staging in attempts {
            for record in self.attempt_records(staging).await? {
                ids.insert(record.upload_id);
            }
        }
        Ok(ids)
    }

    /// Lists the uploads under `prefix` and aborts those created more than `older_than_ms`
    /// before `now_ms` whose id is not in `live`. The age limit covers an upload created a
    /// moment before its attempt recorded it.
    pub async fn sweep(
        &self,
        prefix: &str,
        older_than_ms: i64,
        now_ms: i64,
        live: &BTreeSet<String>,
    ) -> Result<SweepReport> {
        let listed = self.store.list_uploads(prefix).await?;
        self.sweep_listed(listed, older_than_ms, now_ms, live).await
    }

    /// [`Committer::sweep`] over a listing the caller already has: only uploads of `listed`
    /// are aborted. A caller that decided what to keep from a listing must sweep that same
    /// listing: an upload created after it is in no `live` set yet (its attempt may not have
    /// recorded it), and a store that misdates uploads (moto dates every one 2010) would show
    /// it as old at once.
    pub async fn sweep_listed(
        &self,
        listed: Vec<UploadListing>,
        older_than_ms: i64,
        now_ms: i64,
        live: &BTreeSet<String>,
    ) -> Result<SweepReport> {
        let mut report = SweepReport::default();
        for upload in listed {
            if live.contains(&upload.upload_id) {
                report.kept_live += 1;
            } else if now_ms - upload.initiated_ms < older_than_ms {
                report.kept_young += 1;
            } else {
                self.store.abort(&upload.key, &upload.upload_id).await?;
                report.aborted.push(upload);
            }
        }
        Ok(report)
    }
}
