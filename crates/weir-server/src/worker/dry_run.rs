//! When a dry-run ends, its verdict: the comparison of its shadow outputs with production's
//! (`crate::dry_run`), in the background once the run's final state is in the store. Every
//! start of a cluster's worker also records the verdicts of its dry-runs that ended without one
//! (a server stopped between a dry-run's end and its verdict).

use std::sync::Arc;
use std::time::Duration;

use weir_store::{JobStore, RunRow};

use super::actor::Actor;
use super::live::RunLive;
use crate::outputs::Outputs;
use crate::DeclaredOutput;

/// How long to wait for the run's final state to reach the store (the actor commits it with
/// its next pass, a few milliseconds later).
const STATE_PATIENCE: Duration = Duration::from_secs(60);

/// A dry-run's production outputs, by bucket.
type Declared = Vec<(String, DeclaredOutput)>;

impl Actor {
    /// Records dry-run `run`'s verdict in the migration table, in the background, once its
    /// final state is stored.
    pub(super) fn record_verdict_after_end(&self, run: &RunLive) {
        let Some(outputs) = run.dry_run.clone() else { return };
        let (store, objects, id) = (self.store.clone(), self.settings.outputs.clone(), run.id);
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + STATE_PATIENCE;
            let row = loop {
                match store.run(id).await {
                    Ok(Some(row)) if matches!(row.state.as_str(), "succeeded" | "failed" | "killed") => {
                        break row
                    }
                    Ok(_) | Err(_) if tokio::time::Instant::now() < until => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    _ => {
                        eprintln!(
                            "weir worker: dry-run {id}: its final state never reached the store; no verdict \
                             (the next start of the worker records it)"
                        );
                        return;
                    }
                }
            };
            test_pause_before_verdict().await;
            verdict(&store, &objects, &row, outputs).await;
        });
    }

    /// Recovery: the cluster's dry-runs that ended without a verdict get one, in the background
    /// (their outputs read from the stored workflow, as when they ran).
    pub(super) async fn recover_verdicts(&self) -> Result<(), String> {
        let rows = self.store.dry_runs_without_verdict(&self.cluster).await.map_err(|e| e.to_string())?;
        for row in rows {
            let outputs = match super::live::dry_run_outputs(&row) {
                Ok(o) => o,
                Err(why) => {
                    eprintln!("weir worker: dry-run {}: its outputs: {why}; no verdict", row.id);
                    continue;
                }
            };
            eprintln!("weir worker: dry-run {} ended without a verdict; comparing its outputs now", row.id);
            let (store, objects) = (self.store.clone(), self.settings.outputs.clone());
            tokio::spawn(async move { verdict(&store, &objects, &row, outputs).await });
        }
        Ok(())
    }
}

/// Compares and records the verdict of the ended dry-run `row` (errors are logged: the next
/// start of the worker tries again, since the run still has no verdict).
async fn verdict(store: &Arc<dyn JobStore>, objects: &Outputs, row: &RunRow, outputs: Declared) {
    let id = row.id;
    // Each output is read from its bucket's store (the S3 store serves one bucket; the local
    // store has a folder per bucket).
    let mut opened: Vec<(String, weir_commit::Committer)> = Vec::new();
    for (bucket, _) in &outputs {
        if opened.iter().any(|(b, _)| b == bucket) {
            continue;
        }
        match objects.committer(bucket) {
            Ok(c) => opened.push((bucket.clone(), c)),
            Err(e) => {
                eprintln!(
                    "weir worker: dry-run {id}: its outputs' store for bucket `{bucket}`: {e}; no verdict"
                );
                return;
            }
        }
    }
    let each: Vec<(Option<&weir_commit::Store>, &DeclaredOutput)> = outputs
        .iter()
        .map(|(b, o)| (opened.iter().find(|(x, _)| x == b).map(|(_, c)| c.store()), o))
        .collect();
    let now = crate::time::now_ms();
    if let Err(e) = crate::record_dry_run_verdict_each(&**store, &each, row, now).await {
        eprintln!("weir worker: {e}");
    }
}

/// TEST ONLY: with `WEIR_TEST_PAUSE_BEFORE_VERDICT=FILE`, a dry-run whose final state is stored
/// writes FILE and waits forever before its verdict is computed, so that a crash test can kill
/// the server between a dry-run's end and its verdict (tests/serve_commit.rs).
async fn test_pause_before_verdict() {
    if let Some(file) = std::env::var_os("WEIR_TEST_PAUSE_BEFORE_VERDICT") {
        let _ = std::fs::write(&file, b"paused before the verdict\n");
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
}
