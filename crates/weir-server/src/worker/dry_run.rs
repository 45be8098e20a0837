//! When a dry-run ends, its verdict: the comparison of its shadow outputs with production's
//! (`crate::dry_run`), in the background once the run's final state is in the store.

use std::time::Duration;

use super::actor::Actor;
use super::live::RunLive;

/// How long to wait for the run's final state to reach the store (the actor commits it with
/// its next pass, a few milliseconds later).
const STATE_PATIENCE: Duration = Duration::from_secs(60);

impl Actor {
    /// Records dry-run `run`'s verdict in the migration table, in the background.
    pub(super) fn record_verdict_after_end(&self, run: &RunLive) {
        let Some(outputs) = run.dry_run.clone() else { return };
        let store = self.store.clone();
        let id = run.id;
        // One object store per verdict: the first output's bucket (the S3 store serves one
        // bucket; on the local store a workflow's outputs in several buckets are compared in the
        // first only, and the others named as not compared).
        let bucket = outputs.first().map(|(b, _)| b.clone());
        let committer = bucket.as_deref().map(|b| self.settings.outputs.committer(b));
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
                            "weir worker: dry-run {id}: its final state never reached the store; no verdict"
                        );
                        return;
                    }
                }
            };
            let (here, elsewhere): (Vec<_>, Vec<_>) =
                outputs.into_iter().partition(|(b, _)| Some(b) == bucket.as_ref());
            for (b, o) in &elsewhere {
                eprintln!(
                    "weir worker: dry-run {id}: output {} in bucket {b} not compared (only one bucket per verdict)",
                    o.prefix
                );
            }
            let declared: Vec<crate::DeclaredOutput> = here.into_iter().map(|(_, o)| o).collect();
            let objects = match committer {
                Some(Ok(c)) => c.store().clone(),
                Some(Err(e)) => {
                    eprintln!("weir worker: dry-run {id}: its outputs' store: {e}; no verdict");
                    return;
                }
                // No outputs declared: the verdict says so; the store is not read (an existing
                // folder, opened for the call's sake: nothing is created in it).
                None => match weir_commit::Store::open(&weir_commit::StoreConfig::Local {
                    root: std::env::temp_dir(),
                }) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("weir worker: dry-run {id}: {e}; no verdict");
                        return;
                    }
                },
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            if let Err(e) = crate::record_dry_run_verdict(&*store, &objects, &row, &declared, now).await {
                eprintln!("weir worker: {e}");
            }
        });
    }
}
