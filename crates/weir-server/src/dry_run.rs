//! When a dry-run ends: compare each of its shadow outputs with the production output of the
//! same workflow and logical date, and record the verdict in the migration table.
//!
//! The worker calls [`record_dry_run_verdict`] once a dry-run run has ended, with the outputs
//! its stages declared (production prefixes, after the logical date and parameters were
//! substituted) and the object store they live in; the shadow prefixes are
//! [`weir_commit::shadow::shadow_prefix`] of those and the run's id, as at the task's start.
//! Calling it again (after a crash) replaces the run's verdict, keeping an approval.

use serde_json::json;
use weir_commit::{compare_outputs, CommitError, CompareConfig, Verdict};
use weir_store::{DryRunVerdictRow, JobStore, RunRow, StoreError};

/// One output a dry-run's stage declared: its production key prefix and how to compare it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeclaredOutput {
    /// The production output's key prefix in the store (`revenue/dt=2026-11-27/`).
    pub prefix: String,
    pub compare: CompareConfig,
}

/// Why no verdict was recorded. Both are worth retrying later.
#[derive(Debug, thiserror::Error)]
pub enum DryRunError {
    /// The object store failed (after its client's retries) while reading an output.
    #[error("dry-run run {run}: reading output {output:?}: {source}")]
    ObjectStore {
        run: i64,
        output: String,
        #[source]
        source: CommitError,
    },
    /// The verdict could not be stored.
    #[error("dry-run run {run}: storing its verdict: {source}")]
    Store {
        run: i64,
        #[source]
        source: StoreError,
    },
    /// The run is not a dry-run.
    #[error("run {run} is not a dry-run")]
    NotDryRun { run: i64 },
}

/// Keeps the worse of `verdict` and `v` in `verdict`.
fn worse(v: Verdict, verdict: &mut Verdict) {
    let rank = |v: Verdict| match v {
        Verdict::Identical => 0,
        Verdict::Equivalent => 1,
        Verdict::Different => 2,
    };
    if rank(v) > rank(*verdict) {
        *verdict = v;
    }
}

/// Compares every shadow output of the ended dry-run `run` with its production output (in
/// `objects`, the store of the outputs' bucket; `None` when the run declares no output) and
/// records one verdict for the run: the worst of its outputs' (`different` over `equivalent`
/// over `identical`), with every output's differences listed (each tagged with its output).
///
/// A run that did not succeed, an output that is not committed on either side (production has
/// no manifest for the date, a listed file is missing), or an output name that is not a key
/// prefix is recorded as `different`, with the reason as its difference: approval is refused
/// until a dry-run compares cleanly. Object-store and store failures record nothing and
/// return the error (retry later).
pub async fn record_dry_run_verdict(
    store: &dyn JobStore,
    objects: Option<&weir_commit::Store>,
    run: &RunRow,
    outputs: &[DeclaredOutput],
    now_ms: i64,
) -> Result<DryRunVerdictRow, DryRunError> {
    let each: Vec<(Option<&weir_commit::Store>, &DeclaredOutput)> =
        outputs.iter().map(|o| (objects, o)).collect();
    record_dry_run_verdict_each(store, &each, run, now_ms).await
}

/// [`record_dry_run_verdict`] for outputs in several stores (a workflow whose outputs are in
/// several buckets of the local store): each output with the store it lives in (`None`: none
/// could be opened; that output is `different`, "not compared").
pub async fn record_dry_run_verdict_each(
    store: &dyn JobStore,
    outputs: &[(Option<&weir_commit::Store>, &DeclaredOutput)],
    run: &RunRow,
    now_ms: i64,
) -> Result<DryRunVerdictRow, DryRunError> {
    if !run.dry_run {
        return Err(DryRunError::NotDryRun { run: run.id });
    }
    let mut verdict = Verdict::Identical;
    let mut differences = Vec::new();
    let mut production_runs: Vec<String> = Vec::new();
    if run.state != "succeeded" {
        worse(Verdict::Different, &mut verdict);
        differences.push(json!({
            "output": "", "partition": "", "what": "dry-run",
            "shadow": format!("{}{}", run.state, run.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()),
            "production": "-", "tolerated": false,
        }));
    } else if outputs.is_empty() {
        // Nothing declared: nothing to compare; as good as identical, and said so.
        differences.push(json!({
            "output": "", "partition": "", "what": "outputs",
            "shadow": "none declared", "production": "none declared", "tolerated": true,
        }));
    }
    for &(objects, out) in outputs.iter().filter(|_| run.state == "succeeded") {
        let not_compared = |reason: String| {
            json!({
                "output": out.prefix, "partition": "", "what": "not compared",
                "shadow": reason, "production": "-", "tolerated": false,
            })
        };
        let shadow = match weir_commit::shadow::shadow_prefix(&out.prefix, &run.id.to_string()) {
            Ok(s) => s,
            Err(e) => {
                worse(Verdict::Different, &mut verdict);
                differences.push(not_compared(e.to_string()));
                continue;
            }
        };
        let Some(objects) = objects else {
            worse(Verdict::Different, &mut verdict);
            differences.push(not_compared("no object store to read it from".into()));
            continue;
        };
        match compare_outputs(objects, &shadow, &out.prefix, &out.compare).await {
            Ok(cmp) => {
                worse(cmp.verdict, &mut verdict);
                if !production_runs.contains(&cmp.production.run_id) {
                    production_runs.push(cmp.production.run_id.clone());
                }
                for d in cmp.differences {
                    let mut v = serde_json::to_value(&d).unwrap_or_default();
                    v["output"] = json!(out.prefix);
                    differences.push(v);
                }
            }
            Err(
                e @ (CommitError::Store { .. } | CommitError::ListUploads { .. } | CommitError::Io { .. }),
            ) => {
                return Err(DryRunError::ObjectStore { run: run.id, output: out.prefix.clone(), source: e });
            }
            Err(e) => {
                worse(Verdict::Different, &mut verdict);
                differences.push(not_compared(e.to_string()));
            }
        }
    }
    let mut row = DryRunVerdictRow {
        id: 0,
        run_id: run.id,
        workflow: run.workflow.clone(),
        project: run.project.clone(),
        logical_date: run.logical_date.clone(),
        cluster: run.cluster.clone(),
        queue: run.queue.clone(),
        production_run: (!production_runs.is_empty()).then(|| production_runs.join(",")),
        verdict: verdict.as_str().to_string(),
        differences: serde_json::Value::Array(differences).to_string(),
        at_ms: now_ms,
        approved_by: None,
        approved_ms: None,
    };
    row.id = store
        .record_dry_run_verdict(&row)
        .await
        .map_err(|source| DryRunError::Store { run: run.id, source })?;
    Ok(row)
}
