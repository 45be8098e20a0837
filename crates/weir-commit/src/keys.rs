//! Object keys: output prefixes, file names inside an output, and the names of weir's own
//! objects (manifest, claim, staging records).

/// The manifest a job commit writes last, with a create-only put: the commit point.
pub const MANIFEST: &str = "_weir_manifest.json";
/// The claim a job commit writes first, with a create-only put, before it completes any upload:
/// a second run's job commit stops here, so two runs never interleave files in one output.
pub const CLAIM: &str = "_weir_claim.json";

/// A prefix must be relative, end with `/`, and have no empty, `.` or `..` segment.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), String> {
    if !prefix.ends_with('/') {
        return Err("must end with `/` (it is a prefix, not an object)".into());
    }
    check_segments(prefix.trim_end_matches('/'))
}

/// A file name inside an output: relative, no empty, `.` or `..` segment, and not one of
/// weir's own names (`_weir…`).
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.ends_with('/') {
        return Err("names a folder; give a file name".into());
    }
    check_segments(name)?;
    if name.split('/').any(|s| s.starts_with("_weir")) {
        return Err("names starting with `_weir` are weir's own".into());
    }
    Ok(())
}

fn check_segments(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.starts_with('/') {
        return Err("must be relative (no leading `/`)".into());
    }
    for seg in s.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!("has a segment {seg:?} (empty, `.` and `..` are not allowed)"));
        }
        if seg.chars().any(|c| c.is_control() || c == '\\') {
            return Err(format!("segment {seg:?} has a control character or `\\`"));
        }
    }
    Ok(())
}

/// The staging record of one uploaded file of an attempt.
pub(crate) fn record_key(staging: &str, name: &str) -> String {
    format!("{staging}files/{name}.upload.json")
}

pub(crate) fn records_prefix(staging: &str) -> String {
    format!("{staging}files/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prefixes() {
        for ok in ["a.csv", "region=eu/part-0.csv", "x/y/z"] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "/a", "a/../b", "a//b", "./a", "dir/", "_weir_manifest.json", "p/_weirx"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(check_prefix("t/dt=2026-01-01/"), Ok(()));
        for bad in ["t/dt", "/t/", "t/../", "/"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }
}
