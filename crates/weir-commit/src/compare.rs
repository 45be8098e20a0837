//! Comparing a dry-run's shadow output with the production output of the same workflow and
//! logical date, before a workflow moves to another cluster.
//!
//! Both outputs must be committed (a manifest, and every file it lists there with its size).
//! Only the files the manifests list are read, one at a time and whole. Per partition (the
//! folder of a file inside the output, `region=eu`; the output itself for top-level files):
//!
//! | format | what is compared |
//! |---|---|
//! | every format | the files (names, sizes, MD5 of the content), objects per partition, bytes per partition |
//! | `csv`, `jsonl` | lines, rows (non-empty lines; a csv file's first line is its header, not a row), an ordered checksum of the rows (MD5 in file-name order), an order-free checksum (the sum of every row's MD5, so any order and any split into files give the same), and for csv the header |
//! | `parquet` | rows, from each file's footer (`num_rows`, read by the `parquet` crate without decoding any page) |
//! | `bytes` | only the above: objects and bytes |
//!
//! The verdict ([`Verdict`]):
//! - **identical**: the same files with the same bytes;
//! - **equivalent within tolerance**: every difference is tolerated — for csv and jsonl the same
//!   rows in another order or split into other files (then bytes and object counts may differ
//!   by headers and line endings); for parquet the same rows and bytes within
//!   [`CompareConfig::size_tolerance`] (another writer's encoding); for bytes, bytes per
//!   partition within that tolerance;
//! - **different**: anything else — a partition on one side only, other rows, another row
//!   count, another csv header, bytes beyond the tolerance, an unreadable parquet footer.
//!
//! Every difference found is listed ([`Difference`]), tolerated or not, so an equivalent
//! verdict says what differed.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::error::{CommitError, Result};
use crate::keys::{check_prefix, MANIFEST};
use crate::record::{hex, Manifest};
use crate::store::Store;

/// The format a stage declared for an output (`outputs: [{format: …}]`): the workload file's
/// own type, so the server hands a stage's declaration over as it is.
pub use weir_model::OutputFormat;

/// Lines and rows are compared (csv, jsonl), not only objects and bytes.
fn is_text(format: OutputFormat) -> bool {
    matches!(format, OutputFormat::Csv | OutputFormat::Jsonl)
}

/// How to compare.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareConfig {
    pub format: OutputFormat,
    /// csv only: each file's first line is a header (default true).
    #[serde(default = "yes")]
    pub csv_header: bool,
    /// The relative difference of bytes per partition, `|a − b| / max(a, b)`, still tolerated
    /// for parquet and bytes outputs (default 0: bytes must match). Between 0 and 1.
    #[serde(default)]
    pub size_tolerance: f64,
}

fn yes() -> bool {
    true
}

impl CompareConfig {
    pub fn new(format: OutputFormat) -> CompareConfig {
        CompareConfig { format, csv_header: true, size_tolerance: 0.0 }
    }
}

/// The outcome of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Identical,
    /// Equivalent within tolerance.
    Equivalent,
    Different,
}

impl Verdict {
    /// `identical`, `equivalent`, `different`: how the store and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Identical => "identical",
            Verdict::Equivalent => "equivalent",
            Verdict::Different => "different",
        }
    }

    pub fn parse(s: &str) -> Option<Verdict> {
        match s {
            "identical" => Some(Verdict::Identical),
            "equivalent" => Some(Verdict::Equivalent),
            "different" => Some(Verdict::Different),
            _ => None,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Identical => "identical",
            Verdict::Equivalent => "equivalent within tolerance",
            Verdict::Different => "different",
        })
    }
}

/// One thing that differs between the shadow and the production output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Difference {
    /// The partition (`region=eu`), or `""` for the output as a whole / its top-level files.
    pub partition: String,
    /// What differs: `partition`, `objects`, `bytes`, `lines`, `rows`, `row checksum`,
    /// `row order`, `csv header`, `files`, `partitions declared`, `parquet footer`.
    pub what: String,
    pub shadow: String,
    pub production: String,
    /// Within tolerance: does not by itself make the outputs different.
    pub tolerated: bool,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = if self.partition.is_empty() { "(output)" } else { &self.partition };
        write!(
            f,
            "{part}: {}: shadow {}, production {}{}",
            self.what,
            self.shadow,
            self.production,
            if self.tolerated { " (tolerated)" } else { "" }
        )
    }
}

/// What one side holds in one partition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSummary {
    pub partition: String,
    pub objects: u64,
    pub bytes: u64,
    /// csv and jsonl: every line, headers and empty lines included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// csv, jsonl (non-empty lines less headers) and parquet (footers' `num_rows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// csv and jsonl: MD5 of the rows in file-name order, each with its `\n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_checksum: Option<String>,
    /// csv and jsonl: the sum (mod 2^128) of every row's MD5: the same for the same rows in
    /// any order and any split into files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_set_checksum: Option<String>,
    /// csv with headers: the distinct headers of its files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// parquet: files whose footer could not be read, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
}

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSummary {
    pub output: String,
    pub run_id: String,
    pub objects: u64,
    pub bytes: u64,
    pub partitions: Vec<PartitionSummary>,
}

/// The verdict, the differences, and what each side holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub verdict: Verdict,
    pub format: OutputFormat,
    pub differences: Vec<Difference>,
    pub shadow: OutputSummary,
    pub production: OutputSummary,
}

/// Compares the committed output at `shadow` with the committed output at `production`, both
/// key prefixes in `store`. Fails with [`CommitError::Incomplete`] when either is not
/// committed or a file its manifest lists is missing or has another size (there is nothing
/// trustworthy to compare), and with a store error when reading fails.
pub async fn compare_outputs(
    store: &Store,
    shadow: &str,
    production: &str,
    config: &CompareConfig,
) -> Result<Comparison> {
    if !(0.0..=1.0).contains(&config.size_tolerance) {
        return Err(CommitError::config(
            "the comparison's settings",
            "size_tolerance",
            config.size_tolerance.to_string(),
            "must be between 0 and 1 (a fraction of the larger size)",
        ));
    }
    let s = read_side(store, shadow, config).await?;
    let p = read_side(store, production, config).await?;
    let identical = s.files == p.files;
    let mut differences = Vec::new();
    if !identical {
        differences = partition_differences(&s, &p, config);
        if s.manifest.partitions != p.manifest.partitions {
            differences.insert(
                0,
                Difference {
                    partition: String::new(),
                    what: "partitions declared".into(),
                    shadow: format!("{:?}", s.manifest.partitions),
                    production: format!("{:?}", p.manifest.partitions),
                    tolerated: false,
                },
            );
        }
        if differences.is_empty() {
            // Same partitions, same content per partition: the files are named or split otherwise.
            differences.push(Difference {
                partition: String::new(),
                what: "files".into(),
                shadow: names(&s.files),
                production: names(&p.files),
                tolerated: true,
            });
        }
    }
    let verdict = if identical {
        Verdict::Identical
    } else if differences.iter().all(|d| d.tolerated) {
        Verdict::Equivalent
    } else {
        Verdict::Different
    };
    Ok(Comparison {
        verdict,
        format: config.format,
        differences,
        shadow: s.summary(),
        production: p.summary(),
    })
}

fn names(files: &BTreeMap<String, (u64, String)>) -> String {
    let v: Vec<&str> = files.keys().map(String::as_str).collect();
    format!("[{}]", v.join(", "))
}

/// One output, read.
struct Side {
    manifest: Manifest,
    /// name → (size, content MD5)
    files: BTreeMap<String, (u64, String)>,
    partitions: BTreeMap<String, Acc>,
}

impl Side {
    fn summary(&self) -> OutputSummary {
        OutputSummary {
            output: self.manifest.output.clone(),
            run_id: self.manifest.run_id.clone(),
            objects: self.files.len() as u64,
            bytes: self.files.values().map(|f| f.0).sum(),
            partitions: self.partitions.iter().map(|(k, a)| a.summary(k)).collect(),
        }
    }
}

/// A partition's figures as its files are read (in name order).
#[derive(Default)]
struct Acc {
    objects: u64,
    bytes: u64,
    lines: u64,
    rows: u64,
    ordered: Md5,
    set_sum: u128,
    headers: BTreeSet<String>,
    unreadable: Vec<String>,
    text: bool,
    parquet: bool,
}

impl Acc {
    fn summary(&self, partition: &str) -> PartitionSummary {
        PartitionSummary {
            partition: partition.to_string(),
            objects: self.objects,
            bytes: self.bytes,
            lines: self.text.then_some(self.lines),
            rows: (self.text || self.parquet).then_some(self.rows),
            row_checksum: self.text.then(|| hex(&self.ordered.clone().finalize())),
            row_set_checksum: self.text.then(|| format!("{:032x}", self.set_sum)),
            headers: self.headers.iter().cloned().collect(),
            unreadable: self.unreadable.clone(),
        }
    }

    fn add_text(&mut self, body: &[u8], csv_header: bool) {
        self.text = true;
        let mut first = true;
        for raw in body.split_inclusive(|&b| b == b'\n') {
            self.lines += 1;
            let line = raw.strip_suffix(b"\n").unwrap_or(raw);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if std::mem::take(&mut first) && csv_header {
                self.headers.insert(String::from_utf8_lossy(line).into_owned());
                continue;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.rows += 1;
            self.ordered.update(line);
            self.ordered.update(b"\n");
            let digest: [u8; 16] = Md5::digest(line).into();
            self.set_sum = self.set_sum.wrapping_add(u128::from_be_bytes(digest));
        }
    }

    fn add_parquet(&mut self, name: &str, body: Bytes) {
        self.parquet = true;
        match parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&body) {
            Ok(meta) => self.rows += meta.file_metadata().num_rows().max(0) as u64,
            Err(e) => self.unreadable.push(format!("{name}: {e}")),
        }
    }
}

/// The partition of a file: its folder inside the output.
fn partition_of(name: &str) -> &str {
    name.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("")
}

async fn read_side(store: &Store, output: &str, config: &CompareConfig) -> Result<Side> {
    check_prefix(output).map_err(|reason| CommitError::Name { name: output.to_string(), reason })?;
    let key = format!("{output}{MANIFEST}");
    let manifest: Manifest = match store.get(&key).await? {
        None => {
            return Err(CommitError::Incomplete {
                prefix: output.to_string(),
                problems: vec![format!("no {MANIFEST} (no job commit finished here)")],
            })
        }
        Some(b) => {
            serde_json::from_slice(&b).map_err(|e| CommitError::Record { key, reason: e.to_string() })?
        }
    };
    let mut side = Side { manifest, files: BTreeMap::new(), partitions: BTreeMap::new() };
    let mut problems = Vec::new();
    let files = side.manifest.files.clone();
    for f in &files {
        let Some(body) = store.get(&format!("{output}{}", f.name)).await? else {
            problems.push(format!("{} is missing", f.name));
            continue;
        };
        if body.len() as u64 != f.size {
            problems.push(format!("{} has {} bytes, the manifest says {}", f.name, body.len(), f.size));
            continue;
        }
        let md5 = hex(&Md5::digest(&body));
        side.files.insert(f.name.clone(), (f.size, md5));
        let acc = side.partitions.entry(partition_of(&f.name).to_string()).or_default();
        acc.objects += 1;
        acc.bytes += f.size;
        match config.format {
            OutputFormat::Csv => acc.add_text(&body, config.csv_header),
            OutputFormat::Jsonl => acc.add_text(&body, false),
            OutputFormat::Parquet => acc.add_parquet(&f.name, body),
            OutputFormat::Bytes => {}
        }
    }
    if problems.is_empty() {
        Ok(side)
    } else {
        Err(CommitError::Incomplete { prefix: output.to_string(), problems })
    }
}

fn partition_differences(s: &Side, p: &Side, config: &CompareConfig) -> Vec<Difference> {
    let mut out = Vec::new();
    let all: BTreeSet<&String> = s.partitions.keys().chain(p.partitions.keys()).collect();
    for part in all {
        let diff = |what: &str, shadow: String, production: String, tolerated: bool| Difference {
            partition: part.clone(),
            what: what.to_string(),
            shadow,
            production,
            tolerated,
        };
        let (a, b) = match (s.partitions.get(part), p.partitions.get(part)) {
            (Some(a), Some(b)) => (a.summary(part), b.summary(part)),
            (a, b) => {
                let has = |x: Option<&Acc>| match x {
                    Some(acc) => format!("{} objects, {} bytes", acc.objects, acc.bytes),
                    None => "absent".to_string(),
                };
                out.push(diff("partition", has(a), has(b), false));
                continue;
            }
        };
        let same_rows = if is_text(config.format) {
            a.rows == b.rows && a.row_set_checksum == b.row_set_checksum && a.headers == b.headers
        } else {
            a.rows == b.rows && a.unreadable.is_empty() && b.unreadable.is_empty()
        };
        if a.objects != b.objects {
            out.push(diff("objects", a.objects.to_string(), b.objects.to_string(), true));
        }
        if a.bytes != b.bytes {
            let tolerated = if is_text(config.format) {
                same_rows
            } else {
                let larger = a.bytes.max(b.bytes) as f64;
                (a.bytes.abs_diff(b.bytes) as f64) / larger <= config.size_tolerance
            };
            out.push(diff("bytes", a.bytes.to_string(), b.bytes.to_string(), tolerated));
        }
        let show = |x: &Option<u64>| x.map_or("-".to_string(), |n| n.to_string());
        if a.lines != b.lines {
            out.push(diff("lines", show(&a.lines), show(&b.lines), same_rows));
        }
        if a.rows != b.rows {
            out.push(diff("rows", show(&a.rows), show(&b.rows), false));
        }
        if a.headers != b.headers {
            out.push(diff("csv header", format!("{:?}", a.headers), format!("{:?}", b.headers), false));
        }
        if a.row_set_checksum != b.row_set_checksum && a.rows == b.rows {
            out.push(diff(
                "row checksum",
                a.row_set_checksum.clone().unwrap_or_default(),
                b.row_set_checksum.clone().unwrap_or_default(),
                false,
            ));
        } else if a.row_checksum != b.row_checksum && same_rows {
            out.push(diff(
                "row order",
                a.row_checksum.clone().unwrap_or_default(),
                b.row_checksum.clone().unwrap_or_default(),
                true,
            ));
        }
        for (who, list) in [("shadow", &a.unreadable), ("production", &b.unreadable)] {
            for u in list {
                let (sh, pr) =
                    if who == "shadow" { (u.clone(), "-".into()) } else { ("-".into(), u.clone()) };
                out.push(diff("parquet footer", sh, pr, false));
            }
        }
    }
    out
}
