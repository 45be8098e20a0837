//! What a live stage writes and reads in an object store: `outputs` (written through weir's
//! committer, see docs/commit.md) and `inputs` (held until their manifest says they are whole).
//!
//! ```yaml
//! outputs: [{uri: "s3://lake/sales/dt={{logical_date}}/", format: csv}]
//! inputs:  [{uri: "s3://lake/orders/dt={{logical_date}}/", require: manifest}]
//! ```
//!
//! A URI is `s3://BUCKET/PREFIX/`: the prefix ends with `/` and has no empty, `.` or `..`
//! segment. `{{logical_date}}` and `{{params.NAME}}` are replaced by the run's logical date and
//! parameters when the run is submitted ([`substitute`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One output of a stage: a prefix its tasks write through the committer.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// `s3://BUCKET/PREFIX/`, with `{{logical_date}}` and `{{params.NAME}}`.
    pub uri: String,
    pub format: OutputFormat,
    /// csv only: whether each file's first line is a header (a dry-run's comparison compares
    /// headers and counts rows after them). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv_header: Option<bool>,
    /// A dry-run's comparison tolerates bytes per partition differing by at most this
    /// relative amount, `|a − b| / max(a, b)`, from 0 to 1 (parquet and bytes outputs; csv and
    /// jsonl compare rows). Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_tolerance: Option<f64>,
}

/// What the files of an output hold (recorded for readers and comparisons).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Csv,
    Jsonl,
    Parquet,
    Bytes,
}

impl OutputFormat {
    /// The name the workload file uses.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Csv => "csv",
            OutputFormat::Jsonl => "jsonl",
            OutputFormat::Parquet => "parquet",
            OutputFormat::Bytes => "bytes",
        }
    }
}

/// One input of a stage: a prefix another stage (or workflow) wrote through the committer.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    pub uri: String,
    pub require: InputRequire,
}

/// What must hold before the stage starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputRequire {
    /// The input's `_weir_manifest.json` exists and every file it lists is there with its size.
    Manifest,
}

/// A parsed `s3://BUCKET/PREFIX/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectUri {
    pub bucket: String,
    /// Ends with `/`.
    pub prefix: String,
}

impl std::fmt::Display for ObjectUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

/// Parses `s3://BUCKET/PREFIX/` (after substitution). The error says what is wrong.
pub fn parse_object_uri(uri: &str) -> Result<ObjectUri, String> {
    let Some(rest) = uri.strip_prefix("s3://") else {
        return Err(format!("`{uri}` is not an s3://BUCKET/PREFIX/ URI"));
    };
    let Some((bucket, prefix)) = rest.split_once('/') else {
        return Err(format!("`{uri}` names a bucket but no prefix (s3://BUCKET/PREFIX/)"));
    };
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !bucket.starts_with(['-', '.'])
        && !bucket.ends_with(['-', '.']);
    if !bucket_ok {
        return Err(format!(
            "bucket `{bucket}` is not a bucket name (3 to 63 lowercase letters, digits, `-` and `.`)"
        ));
    }
    if !prefix.ends_with('/') {
        return Err(format!("`{uri}` must end with `/`: an output or input is a prefix, not one object"));
    }
    for seg in prefix.trim_end_matches('/').split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!("`{uri}` has a segment `{seg}` (empty, `.` and `..` are not allowed)"));
        }
        if seg.chars().any(|c| c.is_control() || c == '\\') {
            return Err(format!("`{uri}`: segment `{seg}` has a control character or `\\`"));
        }
        if seg.starts_with("_weir") {
            return Err(format!("`{uri}`: segment `{seg}`: names starting with `_weir` are weir's own"));
        }
    }
    Ok(ObjectUri { bucket: bucket.to_string(), prefix: prefix.to_string() })
}

/// The most outputs one stage may declare.
pub const MAX_OUTPUTS_PER_STAGE: usize = 16;

/// The first pair `(i, j)`, `i < j`, of a stage's outputs that overlap: in one bucket, with
/// equal prefixes or one inside the other. Each output has its own claim and manifest, so an
/// output inside another would put its files (and its manifest) among the other's.
pub fn overlapping_outputs(outputs: &[ObjectUri]) -> Option<(usize, usize)> {
    for (j, b) in outputs.iter().enumerate() {
        for (i, a) in outputs[..j].iter().enumerate() {
            if a.bucket == b.bucket && (a.prefix.starts_with(&b.prefix) || b.prefix.starts_with(&a.prefix)) {
                return Some((i, j));
            }
        }
    }
    None
}

/// Replaces `{{logical_date}}` and `{{params.NAME}}` in `template`. An unknown placeholder or
/// a parameter the run does not give is an error naming it.
pub fn substitute(
    template: &str,
    logical_date: &str,
    params: &BTreeMap<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err(format!("`{template}`: `{{{{` without a closing `}}}}`"));
        };
        let name = after[..end].trim();
        if name == "logical_date" {
            out.push_str(logical_date);
        } else if let Some(param) = name.strip_prefix("params.") {
            match params.get(param) {
                Some(v) => out.push_str(v),
                None => {
                    return Err(format!("`{template}` uses parameter `{param}`, which the run does not give"))
                }
            }
        } else {
            return Err(format!(
                "`{template}`: unknown placeholder `{{{{{name}}}}}` (known: {{{{logical_date}}}}, \
                 {{{{params.NAME}}}})"
            ));
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Checks a URI template as written in a workload: placeholders known, and the URI valid with
/// sample values in their place (a date and `x` for every parameter).
pub fn check_uri_template(template: &str) -> Result<ObjectUri, String> {
    let mut params = BTreeMap::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{params.") {
        let after = &rest[start + 9..];
        let end = after.find("}}").unwrap_or(after.len());
        params.insert(after[..end].trim().to_string(), "x".to_string());
        rest = &after[end.min(after.len())..];
    }
    parse_object_uri(&substitute(template, "2026-01-01", &params)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_the_date_and_parameters() {
        let params = BTreeMap::from([("region".to_string(), "eu".to_string())]);
        let uri = substitute("s3://lake/t/dt={{logical_date}}/r={{ params.region }}/", "2026-11-27", &params);
        assert_eq!(uri.as_deref(), Ok("s3://lake/t/dt=2026-11-27/r=eu/"));
        let err = substitute("s3://lake/{{params.zone}}/", "d", &params).unwrap_err();
        assert!(err.contains("parameter `zone`"), "{err}");
        let err = substitute("s3://lake/{{date}}/", "d", &params).unwrap_err();
        assert!(err.contains("unknown placeholder `{{date}}`"), "{err}");
    }

    #[test]
    fn parses_and_refuses_uris() {
        let u = parse_object_uri("s3://lake/sales/dt=2026-11-27/").unwrap();
        assert_eq!((u.bucket.as_str(), u.prefix.as_str()), ("lake", "sales/dt=2026-11-27/"));
        for (bad, why) in [
            ("file:///tmp/x/", "not an s3://"),
            ("s3://lake", "no prefix"),
            ("s3://lake/sales", "must end with `/`"),
            ("s3://lake/a/../b/", "`..`"),
            ("s3://Lake/a/", "not a bucket name"),
            ("s3://lake/_weir/x/", "weir's own"),
        ] {
            let err = parse_object_uri(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert!(check_uri_template("s3://lake/t/dt={{logical_date}}/p={{params.p}}/").is_ok());
        assert!(check_uri_template("s3://lake/t/dt={{logical_date}}").is_err());
    }

    #[test]
    fn outputs_overlap_when_one_prefix_holds_the_other_in_one_bucket() {
        let u = |s: &str| parse_object_uri(s).unwrap();
        let apart = [u("s3://lake/a/dt=1/"), u("s3://lake/ab/dt=1/"), u("s3://other/a/dt=1/")];
        assert_eq!(overlapping_outputs(&apart), None);
        let nested = [u("s3://lake/b/"), u("s3://lake/a/"), u("s3://lake/a/dt=1/")];
        assert_eq!(overlapping_outputs(&nested), Some((1, 2)));
        assert_eq!(overlapping_outputs(&[u("s3://lake/a/"), u("s3://lake/a/")]), Some((0, 1)));
    }
}
