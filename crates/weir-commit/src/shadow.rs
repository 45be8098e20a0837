//! Shadow outputs of dry-run runs: where a dry-run writes instead of the production output.
//!
//! A dry-run (`weir submit --dry-run`) runs the same workflow, usually on another cluster, and
//! must never touch production data: every output it declares is rewritten to a shadow
//! prefix in the same store (and bucket), under weir's own folder:
//!
//! ```text
//! s3://BUCKET/KEY…/        →  s3://BUCKET/_weir_dryrun/RUN/KEY…/
//! KEY…/ (a store key)       →  _weir_dryrun/RUN/KEY…/
//! ```
//!
//! The rewriting is a pure function of the output and the run id, so the server can compute
//! the shadow prefix again after a restart, and [`production_of`] gives back the production
//! output a shadow prefix stands for (what the comparison reads beside it). Nothing else
//! is rewritten: inputs are read from production, as a dry-run must read the real data.

use crate::error::{CommitError, Result};
use crate::keys::check_prefix;

/// The folder, at the root of the store (or bucket), under which dry-runs write.
pub const SHADOW_ROOT: &str = "_weir_dryrun";

/// The shadow prefix of the output key prefix `output` for dry-run `run_id`:
/// `_weir_dryrun/{run_id}/{output}`.
///
/// `output` must be a store key prefix (relative, ending with `/`) and not itself a shadow
/// prefix; `run_id` one non-empty path segment without `/`, `.`-only or control characters.
pub fn shadow_prefix(output: &str, run_id: &str) -> Result<String> {
    check_prefix(output).map_err(|reason| CommitError::Name { name: output.to_string(), reason })?;
    check_run_id(run_id)?;
    if output.starts_with(&format!("{SHADOW_ROOT}/")) {
        return Err(CommitError::Name {
            name: output.to_string(),
            reason: format!("is already a dry-run's shadow output (under `{SHADOW_ROOT}/`)"),
        });
    }
    Ok(format!("{SHADOW_ROOT}/{run_id}/{output}"))
}

/// The shadow of an output URI: `SCHEME://BUCKET/KEY/` becomes
/// `SCHEME://BUCKET/_weir_dryrun/RUN/KEY/` (the same bucket, so the same credentials and
/// store); a URI without a scheme is a store key prefix and is rewritten by
/// [`shadow_prefix`]. The output must end with `/` (outputs are prefixes).
pub fn shadow_uri(uri: &str, run_id: &str) -> Result<String> {
    match split_uri(uri)? {
        Some((scheme, bucket, key)) => Ok(format!("{scheme}://{bucket}/{}", shadow_prefix(key, run_id)?)),
        None => shadow_prefix(uri, run_id),
    }
}

/// The production output a shadow prefix (or URI) stands for, and the dry-run's id; `None`
/// if `shadow` is not a shadow prefix.
pub fn production_of(shadow: &str) -> Option<(String, String)> {
    let (head, key) = match split_uri(shadow).ok()? {
        Some((scheme, bucket, key)) => (format!("{scheme}://{bucket}/"), key),
        None => (String::new(), shadow),
    };
    let rest = key.strip_prefix(SHADOW_ROOT)?.strip_prefix('/')?;
    let (run, output) = rest.split_once('/')?;
    if run.is_empty() || output.is_empty() {
        return None;
    }
    Some((format!("{head}{output}"), run.to_string()))
}

/// `SCHEME://BUCKET/KEY` split in three; `Ok(None)` for a URI without a scheme.
fn split_uri(uri: &str) -> Result<Option<(&str, &str, &str)>> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Ok(None);
    };
    let bad = |reason: &str| CommitError::Name { name: uri.to_string(), reason: reason.to_string() };
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-') {
        return Err(bad("has no valid scheme before `://`"));
    }
    let (bucket, key) =
        rest.split_once('/').ok_or_else(|| bad("names a bucket but no key prefix inside it"))?;
    if bucket.is_empty() {
        return Err(bad("has an empty bucket (`SCHEME://BUCKET/KEY/`)"));
    }
    Ok(Some((scheme, bucket, key)))
}

fn check_run_id(run_id: &str) -> Result<()> {
    let ok = !run_id.is_empty()
        && run_id != "."
        && run_id != ".."
        && !run_id.chars().any(|c| c == '/' || c == '\\' || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(CommitError::Name {
            name: run_id.to_string(),
            reason: "a dry-run's id must be one path segment (not empty, no `/`, not `.` or `..`)".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_and_keys_are_rewritten_under_the_run() {
        let cases = [
            ("s3://lake/sales/dt=2026-11-27/", "s3://lake/_weir_dryrun/41/sales/dt=2026-11-27/"),
            ("sales/dt=2026-11-27/region=eu/", "_weir_dryrun/41/sales/dt=2026-11-27/region=eu/"),
            ("gs://b/t/", "gs://b/_weir_dryrun/41/t/"),
        ];
        for (output, shadow) in cases {
            assert_eq!(shadow_uri(output, "41").unwrap(), shadow, "{output}");
            assert_eq!(production_of(shadow), Some((output.to_string(), "41".to_string())), "{shadow}");
            // The same input gives the same shadow (the server recomputes it after a restart).
            assert_eq!(shadow_uri(output, "41").unwrap(), shadow_uri(output, "41").unwrap());
        }
        assert_ne!(shadow_uri("t/", "41").unwrap(), shadow_uri("t/", "42").unwrap(), "one prefix per run");
    }

    #[test]
    fn bad_outputs_and_run_ids_are_refused_by_name() {
        for (output, run, why) in [
            ("s3://lake/sales/dt=1", "41", "must end with `/`"),
            ("s3://lake", "41", "no key prefix"),
            ("s3:///t/", "41", "empty bucket"),
            ("/abs/t/", "41", "relative"),
            ("t/../u/", "41", "segment"),
            ("_weir_dryrun/40/t/", "41", "already a dry-run"),
            ("s3://lake/_weir_dryrun/40/t/", "41", "already a dry-run"),
            ("t/", "", "one path segment"),
            ("t/", "a/b", "one path segment"),
            ("t/", "..", "one path segment"),
        ] {
            let err = shadow_uri(output, run).unwrap_err().to_string();
            assert!(err.contains(why), "{output} {run}: {err}");
        }
    }

    #[test]
    fn only_shadow_prefixes_have_a_production_output() {
        for not_shadow in
            ["sales/dt=1/", "s3://lake/sales/", "_weir_dryrun/", "_weir_dryrun/41/", "x/_weir_dryrun/1/t/"]
        {
            assert_eq!(production_of(not_shadow), None, "{not_shadow}");
        }
    }
}
