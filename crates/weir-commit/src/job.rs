//! The job commit and the job abort.

use std::collections::BTreeMap;

use tokio::task::JoinSet;

use crate::error::{CommitError, Result};
use crate::keys::{check_prefix, record_key, records_prefix, CLAIM, MANIFEST};
use crate::record::{
    Claim, JobCommitState, JobPhase, Manifest, ManifestFile, UploadRecord, UploadState, MANIFEST_FORMAT,
};
use crate::{now_ms, Committer};

/// What a job commit commits: the output, the run, and the attempts whose files count (the
/// successful attempt of every task of the stage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobCommitPlan {
    pub run_id: String,
    pub output: String,
    /// The partitions the stage declared (`dt=2026-11-27`), recorded in the manifest.
    pub partitions: Vec<String>,
    /// Staging prefixes of the attempts to commit.
    pub attempts: Vec<String>,
}

/// What an abort did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AbortReport {
    pub uploads_aborted: usize,
    /// Objects completed by this run's job commit before it stopped, now deleted.
    pub objects_deleted: usize,
    /// Whether this run's claim was removed (the output is free for another run).
    pub claim_released: bool,
}

impl Committer {
    /// Reads the staging records of the plan's attempts and checks them: every upload finished
    /// its task commit, every key is inside the output, no name comes from two attempts.
    /// Writes nothing. The server stores the returned state before calling
    /// [`Committer::job_commit`].
    pub async fn prepare_job_commit(&self, plan: &JobCommitPlan) -> Result<JobCommitState> {
        check_prefix(&plan.output)
            .map_err(|reason| CommitError::Name { name: plan.output.clone(), reason })?;
        // The attempts' records, read `parallel_files` attempts at once, then checked in the
        // plan's order.
        let mut read: Vec<(usize, Vec<UploadRecord>)> = Vec::with_capacity(plan.attempts.len());
        let mut running = JoinSet::new();
        for (i, staging) in plan.attempts.iter().enumerate() {
            while running.len() >= self.config.parallel_files {
                read.push(running.join_next().await.expect("non-empty").expect("no panic")?);
            }
            let (me, staging) = (self.clone(), staging.clone());
            running.spawn(async move { me.attempt_records(&staging).await.map(|r| (i, r)) });
        }
        while let Some(done) = running.join_next().await {
            read.push(done.expect("no panic")?);
        }
        read.sort_by_key(|(i, _)| *i);
        let mut by_name: BTreeMap<String, (String, UploadRecord)> = BTreeMap::new();
        for (i, records) in read {
            let staging = &plan.attempts[i];
            for record in records {
                let rkey = record_key(staging, &record.name);
                if record.state != UploadState::Uploaded {
                    return Err(CommitError::Record {
                        key: rkey,
                        reason: "the upload never finished (state `uploading`): the attempt \
                                 ended before its task commit did"
                            .into(),
                    });
                }
                if record.key != format!("{}{}", plan.output, record.name) {
                    return Err(CommitError::Record {
                        key: rkey,
                        reason: format!(
                            "its key {:?} is not inside the output {:?}",
                            record.key, plan.output
                        ),
                    });
                }
                if let Some((other, _)) = by_name.get(&record.name) {
                    return Err(CommitError::Record {
                        key: rkey,
                        reason: format!(
                            "{:?} is also written by the attempt staged at {other:?}",
                            record.name
                        ),
                    });
                }
                by_name.insert(record.name.clone(), (staging.clone(), record));
            }
        }
        Ok(JobCommitState {
            run_id: plan.run_id.clone(),
            output: plan.output.clone(),
            partitions: plan.partitions.clone(),
            attempts: plan.attempts.clone(),
            uploads: by_name.into_values().map(|(_, r)| r).collect(),
            phase: JobPhase::Prepared,
        })
    }

    /// Commits the output: claim (create-only), complete and check every upload, write the
    /// manifest (create-only). Resumable: call again with the same state after a crash or a
    /// store error. Another run's claim or manifest refuses the commit
    /// ([`CommitError::Conflict`]) and aborts this run's uploads; an ETag or size that differs
    /// from the task commit's record aborts the job ([`CommitError::Integrity`]). A store
    /// error leaves the state resumable; the caller retries later or calls `abort_job`.
    pub async fn job_commit(&self, state: &mut JobCommitState) -> Result<Manifest> {
        let manifest_key = format!("{}{MANIFEST}", state.output);
        match state.phase {
            JobPhase::Aborted => {
                return Err(CommitError::Record {
                    key: manifest_key,
                    reason: format!("run {}'s job commit was aborted", state.run_id),
                })
            }
            JobPhase::Committed => {
                return self.read_manifest(&state.output).await?.ok_or_else(|| CommitError::Record {
                    key: manifest_key,
                    reason: "committed, but the manifest is gone".into(),
                })
            }
            JobPhase::Prepared | JobPhase::Claimed => {}
        }
        // A manifest already there: ours (a crash after writing it) or another run's.
        if let Some(m) = self.read_manifest(&state.output).await? {
            if m.run_id == state.run_id {
                state.phase = JobPhase::Committed;
                self.drop_records(state).await;
                return Ok(m);
            }
            return Err(self.refuse(state, m.run_id, MANIFEST).await);
        }
        if state.phase == JobPhase::Prepared {
            self.put_claim(state).await?;
        }

        // Complete every upload, `parallel_files` at once.
        let mut results: Vec<(usize, Result<(u64, String)>)> = Vec::new();
        let mut running = JoinSet::new();
        for (i, upload) in state.uploads.iter().enumerate() {
            while running.len() >= self.config.parallel_files {
                results.push(running.join_next().await.expect("non-empty").expect("no panic"));
            }
            let (me, upload) = (self.clone(), upload.clone());
            running.spawn(async move { (i, me.complete_one(&upload).await) });
        }
        while let Some(done) = running.join_next().await {
            results.push(done.expect("no panic"));
        }
        results.sort_by_key(|(i, _)| *i);
        let mut files = Vec::with_capacity(results.len());
        let mut first_err = None;
        for (i, result) in results {
            match result {
                Ok((size, etag)) => {
                    files.push(ManifestFile { name: state.uploads[i].name.clone(), size, etag })
                }
                Err(e) => {
                    // An integrity failure outranks a store error: it aborts the job.
                    let integrity = matches!(e, CommitError::Integrity { .. });
                    if first_err.is_none() || integrity {
                        first_err = Some(e);
                    }
                }
            }
        }
        if let Some(e) = first_err {
            if matches!(e, CommitError::Integrity { .. }) {
                self.abort_job(state).await?;
            }
            return Err(e);
        }

        test_pause_before_manifest().await;
        let manifest = Manifest {
            format: MANIFEST_FORMAT.to_string(),
            run_id: state.run_id.clone(),
            output: state.output.clone(),
            partitions: state.partitions.clone(),
            total_size: files.iter().map(|f| f.size).sum(),
            files,
            committed_ms: now_ms(),
        };
        let body = serde_json::to_vec_pretty(&manifest).expect("serializable");
        if !self.store.put_create(&manifest_key, body).await? {
            match self.read_manifest(&state.output).await? {
                Some(m) if m.run_id == state.run_id => {
                    state.phase = JobPhase::Committed;
                    self.drop_records(state).await;
                    return Ok(m);
                }
                other => {
                    let run = other.map(|m| m.run_id).unwrap_or_else(|| "(unknown)".into());
                    return Err(self.refuse(state, run, MANIFEST).await);
                }
            }
        }
        state.phase = JobPhase::Committed;
        self.drop_records(state).await;
        Ok(manifest)
    }

    /// Claims the output for this run without completing anything: the first step of
    /// [`Committer::job_commit`], on its own so that a stage writing several outputs claims
    /// every one before it completes any — a refusal ([`CommitError::Conflict`], this output's
    /// uploads aborted) then comes before any of its outputs is visible. Resumable and
    /// idempotent: a claimed or committed state is left as it is; an output this run already
    /// committed (a crash after its manifest) becomes `Committed`.
    pub async fn claim(&self, state: &mut JobCommitState) -> Result<()> {
        match state.phase {
            JobPhase::Claimed | JobPhase::Committed => return Ok(()),
            JobPhase::Aborted => {
                return Err(CommitError::Record {
                    key: format!("{}{CLAIM}", state.output),
                    reason: format!("run {}'s job commit was aborted", state.run_id),
                })
            }
            JobPhase::Prepared => {}
        }
        if let Some(m) = self.read_manifest(&state.output).await? {
            if m.run_id == state.run_id {
                state.phase = JobPhase::Committed;
                self.drop_records(state).await;
                return Ok(());
            }
            return Err(self.refuse(state, m.run_id, MANIFEST).await);
        }
        self.put_claim(state).await
    }

    /// The create-only put of the claim; `Claimed` once it (or this run's earlier one) is there.
    async fn put_claim(&self, state: &mut JobCommitState) -> Result<()> {
        let claim = Claim { run_id: state.run_id.clone(), claimed_ms: now_ms() };
        let claim_key = format!("{}{CLAIM}", state.output);
        let body = serde_json::to_vec_pretty(&claim).expect("serializable");
        if !self.store.put_create(&claim_key, body).await? {
            let holder = self.read_claim(&state.output).await?.map(|c| c.run_id);
            match holder {
                Some(run) if run == state.run_id => {}
                Some(run) => return Err(self.refuse(state, run, CLAIM).await),
                // Released between our put and our read: the other run aborted; try once
                // more next call.
                None => {
                    return Err(CommitError::Record {
                        key: claim_key,
                        reason: "the claim changed hands during the commit; retry".into(),
                    })
                }
            }
        }
        state.phase = JobPhase::Claimed;
        Ok(())
    }

    /// Completes one upload (or recognises it as completed by an earlier, interrupted call)
    /// and checks the object's size and ETag against the task commit's record.
    async fn complete_one(&self, upload: &UploadRecord) -> Result<(u64, String)> {
        let expected = upload.expected_etag();
        let returned = match self.store.complete(&upload.key, &upload.upload_id, &upload.parts).await {
            Ok(etag) => Some(etag),
            // The upload is gone: completed by an earlier call (checked below) or aborted
            // (then there is no object, or not this one).
            Err(CommitError::Store { source: object_store::Error::NotFound { .. }, .. }) => None,
            // moto answers 500 to a completed or aborted upload's id (STACK.md); the object's
            // check below tells which.
            Err(e) => match self.store.completed(&upload.key, &upload.parts).await? {
                Some((_, etag)) if Some(&etag) == expected.as_ref() => None,
                _ => return Err(e),
            },
        };
        let Some((size, etag)) = self.store.completed(&upload.key, &upload.parts).await? else {
            return Err(CommitError::Integrity {
                key: upload.key.clone(),
                what: "object",
                expected: format!("{} bytes from upload {}", upload.size, upload.upload_id),
                found: "nothing (the upload was aborted)".into(),
            });
        };
        if size != upload.size {
            return Err(CommitError::Integrity {
                key: upload.key.clone(),
                what: "size",
                expected: upload.size.to_string(),
                found: size.to_string(),
            });
        }
        if let Some(expected) = &expected {
            for found in returned.iter().filter(|e| !e.is_empty()).chain([&etag]) {
                if found != expected {
                    return Err(CommitError::Integrity {
                        key: upload.key.clone(),
                        what: "ETag",
                        expected: expected.clone(),
                        found: found.clone(),
                    });
                }
            }
        }
        Ok((size, etag))
    }

    /// Refuses the commit: aborts this run's uploads (nothing of ours was completed: another
    /// run holds the output) and drops our staging records.
    async fn refuse(&self, state: &mut JobCommitState, other_run: String, file: &str) -> CommitError {
        for upload in &state.uploads {
            let _ = self.store.abort(&upload.key, &upload.upload_id).await;
        }
        self.drop_records(state).await;
        state.phase = JobPhase::Aborted;
        CommitError::Conflict {
            prefix: state.output.clone(),
            run: state.run_id.clone(),
            other_run,
            file: file.to_string(),
        }
    }

    /// Aborts the job commit: every upload aborted; if this run holds the claim, the objects
    /// it completed are deleted and the claim released; staging records dropped. Refused once
    /// the manifest is written. Idempotent.
    pub async fn abort_job(&self, state: &mut JobCommitState) -> Result<AbortReport> {
        if let Some(m) = self.read_manifest(&state.output).await? {
            if m.run_id == state.run_id {
                state.phase = JobPhase::Committed;
                return Err(CommitError::AlreadyCommitted {
                    prefix: state.output.clone(),
                    run: state.run_id.clone(),
                });
            }
        }
        let mut report = AbortReport::default();
        for upload in &state.uploads {
            self.store.abort(&upload.key, &upload.upload_id).await?;
            report.uploads_aborted += 1;
        }
        // The state may say `prepared` while the claim is ours (a crash right after the
        // claim's put): the store's claim decides.
        let ours = self.read_claim(&state.output).await?.is_some_and(|c| c.run_id == state.run_id);
        if ours {
            for upload in &state.uploads {
                if self.store.head(&upload.key).await?.is_some() {
                    self.store.delete(&upload.key).await?;
                    report.objects_deleted += 1;
                }
            }
            self.store.delete(&format!("{}{CLAIM}", state.output)).await?;
            report.claim_released = true;
        }
        self.drop_records(state).await;
        state.phase = JobPhase::Aborted;
        Ok(report)
    }

    /// Best effort: the staging records of a finished (committed or aborted) job.
    async fn drop_records(&self, state: &JobCommitState) {
        let mut running = JoinSet::new();
        for staging in &state.attempts {
            while running.len() >= self.config.parallel_files {
                running.join_next().await;
            }
            let (me, prefix) = (self.clone(), records_prefix(staging));
            running.spawn(async move {
                if let Ok(objects) = me.store.list(&prefix).await {
                    for o in objects {
                        let _ = me.store.delete(&o.key).await;
                    }
                }
            });
        }
        while running.join_next().await.is_some() {}
    }

    /// The output's manifest, if it has one.
    pub async fn read_manifest(&self, output: &str) -> Result<Option<Manifest>> {
        let key = format!("{output}{MANIFEST}");
        match self.store.get(&key).await? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CommitError::Record { key, reason: e.to_string() }),
        }
    }

    async fn read_claim(&self, output: &str) -> Result<Option<Claim>> {
        let key = format!("{output}{CLAIM}");
        match self.store.get(&key).await? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| CommitError::Record { key, reason: e.to_string() }),
        }
    }
}

/// TEST ONLY: with `WEIR_TEST_PAUSE_BEFORE_MANIFEST=FILE` set, a job commit that has completed
/// every upload writes FILE and waits forever before its manifest, so that a crash test can
/// kill the server in the middle of a job commit (weir's tests/serve_commit.rs). Never set it
/// in production: the commit would never finish.
async fn test_pause_before_manifest() {
    if let Some(file) = std::env::var_os("WEIR_TEST_PAUSE_BEFORE_MANIFEST") {
        let _ = std::fs::write(&file, b"paused before the manifest\n");
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
}
