//! Dry-run comparisons: outputs written through the committer (a production run into the
//! output, a dry-run into its shadow prefix), then compared; on the local store and on moto.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{local_committer, s3_committer, write_file, Moto, TempDir};
use weir_commit::shadow::shadow_prefix;
use weir_commit::{
    compare_outputs, CommitError, Committer, CompareConfig, JobCommitPlan, OutputFormat, Verdict,
};

const OUT: &str = "revenue/dt=2026-11-27/";

/// Commits `files` (name, bytes) into `output` as run `run`, one task attempt per file.
async fn commit(c: &Committer, tmp: &Path, run: &str, output: &str, files: &[(&str, Vec<u8>)]) {
    let mut attempts = Vec::new();
    for (i, (name, bytes)) in files.iter().enumerate() {
        let staging = format!("_weir/staging/{run}/t{i}/");
        let local = write_file(tmp, &format!("{run}-{i}"), bytes);
        c.put_file(output, &staging, name, &local).await.unwrap();
        attempts.push(staging);
    }
    let plan = JobCommitPlan {
        run_id: run.into(),
        output: output.into(),
        partitions: vec!["dt=2026-11-27".into()],
        attempts,
    };
    let mut state = c.prepare_job_commit(&plan).await.unwrap();
    c.job_commit(&mut state).await.unwrap();
}

fn csv(header: &str, rows: &[&str]) -> Vec<u8> {
    let mut s = format!("{header}\n");
    for r in rows {
        s.push_str(r);
        s.push('\n');
    }
    s.into_bytes()
}

/// A parquet file of one INT64 column `v` with `values`, in row groups of `group` rows.
fn parquet_file(values: &[i64], group: usize) -> Vec<u8> {
    use parquet::data_type::Int64Type;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let schema =
        Arc::new(parquet::schema::parser::parse_message_type("message t { REQUIRED INT64 v; }").unwrap());
    let mut w =
        SerializedFileWriter::new(Vec::new(), schema, Arc::new(WriterProperties::builder().build())).unwrap();
    for chunk in values.chunks(group) {
        let mut rg = w.next_row_group().unwrap();
        let mut col = rg.next_column().unwrap().unwrap();
        col.typed::<Int64Type>().write_batch(chunk, None, None).unwrap();
        col.close().unwrap();
        rg.close().unwrap();
    }
    w.into_inner().unwrap()
}

async fn compare(c: &Committer, shadow: &str, config: &CompareConfig) -> weir_commit::Comparison {
    compare_outputs(c.store(), shadow, OUT, config).await.unwrap()
}

fn whats(cmp: &weir_commit::Comparison) -> Vec<(String, String, bool)> {
    cmp.differences.iter().map(|d| (d.partition.clone(), d.what.clone(), d.tolerated)).collect()
}

/// The same bytes in the shadow: identical, nothing listed; each side's figures are the
/// files' own.
async fn same_files_are_identical(c: &Committer, tmp: &Path) {
    let eu = csv("id,amount", &["1,10", "2,20", "3,30"]);
    let us = csv("id,amount", &["4,40"]);
    let files = [("region=eu/part-0.csv", eu.clone()), ("region=us/part-0.csv", us.clone())];
    commit(c, tmp, "7", OUT, &files).await;
    let shadow = shadow_prefix(OUT, "9").unwrap();
    commit(c, tmp, "9", &shadow, &files).await;
    let cmp = compare(c, &shadow, &CompareConfig::new(OutputFormat::Csv)).await;
    assert_eq!(cmp.verdict, Verdict::Identical, "{:?}", cmp.differences);
    assert!(cmp.differences.is_empty());
    assert_eq!((cmp.shadow.run_id.as_str(), cmp.production.run_id.as_str()), ("9", "7"));
    assert_eq!(cmp.shadow.objects, 2);
    assert_eq!(cmp.shadow.bytes, (eu.len() + us.len()) as u64);
    let eu_sum = &cmp.production.partitions[0];
    assert_eq!(
        (eu_sum.partition.as_str(), eu_sum.objects, eu_sum.lines, eu_sum.rows),
        ("region=eu", 1, Some(4), Some(3))
    );
    assert_eq!(eu_sum.headers, ["id,amount"]);
    assert_eq!(cmp.shadow.partitions, cmp.production.partitions);
}

/// The same rows in another order, split into two files (two headers): equivalent, and the
/// tolerated differences say what differed (objects, bytes, lines, order).
async fn reordered_rows_are_equivalent(c: &Committer, tmp: &Path) {
    commit(c, tmp, "7", OUT, &[("part-0.csv", csv("id,amount", &["1,10", "2,20", "3,30"]))]).await;
    let shadow = shadow_prefix(OUT, "9").unwrap();
    let split =
        [("part-0.csv", csv("id,amount", &["3,30"])), ("part-1.csv", csv("id,amount", &["2,20", "1,10"]))];
    commit(c, tmp, "9", &shadow, &split).await;
    let cmp = compare(c, &shadow, &CompareConfig::new(OutputFormat::Csv)).await;
    assert_eq!(cmp.verdict, Verdict::Equivalent, "{:?}", cmp.differences);
    let w = whats(&cmp);
    for what in ["objects", "bytes", "lines", "row order"] {
        assert!(w.contains(&(String::new(), what.to_string(), true)), "{what} in {w:?}");
    }
    assert!(w.iter().all(|d| d.2), "{w:?}");
    assert_eq!(cmp.shadow.partitions[0].rows, Some(3));
    assert_eq!(cmp.shadow.partitions[0].row_set_checksum, cmp.production.partitions[0].row_set_checksum);
    assert_ne!(cmp.shadow.partitions[0].row_checksum, cmp.production.partitions[0].row_checksum);
}

/// One amount changed: different, by the row checksum; one row missing: different, by rows;
/// another header: different.
async fn changed_rows_are_different(c: &Committer, tmp: &Path) {
    commit(c, tmp, "7", OUT, &[("part-0.csv", csv("id,amount", &["1,10", "2,20", "3,30"]))]).await;
    let cfg = CompareConfig::new(OutputFormat::Csv);
    let changed = shadow_prefix(OUT, "8").unwrap();
    commit(c, tmp, "8", &changed, &[("part-0.csv", csv("id,amount", &["1,10", "2,21", "3,30"]))]).await;
    let cmp = compare(c, &changed, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Different);
    assert_eq!(whats(&cmp), [(String::new(), "row checksum".to_string(), false)]);
    let shown = cmp.differences[0].to_string();
    assert!(shown.starts_with("(output): row checksum: shadow ") && !shown.contains("tolerated"), "{shown}");

    let short = shadow_prefix(OUT, "9").unwrap();
    commit(c, tmp, "9", &short, &[("part-0.csv", csv("id,amount", &["1,10", "3,30"]))]).await;
    let cmp = compare(c, &short, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Different);
    let w = whats(&cmp);
    assert!(w.contains(&(String::new(), "rows".into(), false)), "{w:?}");
    assert!(w.contains(&(String::new(), "bytes".into(), false)), "{w:?}");
    let rows = cmp.differences.iter().find(|d| d.what == "rows").unwrap();
    assert_eq!((rows.shadow.as_str(), rows.production.as_str()), ("2", "3"));

    let header = shadow_prefix(OUT, "10").unwrap();
    commit(c, tmp, "10", &header, &[("part-0.csv", csv("id,amt", &["1,10", "2,20", "3,30"]))]).await;
    let cmp = compare(c, &header, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Different);
    assert!(whats(&cmp).contains(&(String::new(), "csv header".into(), false)), "{:?}", cmp.differences);
}

/// jsonl: a partition only production has makes the outputs different, and is named.
async fn missing_partition_is_different(c: &Committer, tmp: &Path) {
    let eu = b"{\"id\":1}\n{\"id\":2}\n".to_vec();
    let us = b"{\"id\":3}\n".to_vec();
    commit(c, tmp, "7", OUT, &[("region=eu/a.jsonl", eu.clone()), ("region=us/a.jsonl", us)]).await;
    let shadow = shadow_prefix(OUT, "9").unwrap();
    // The same eu rows, the other way round, and no us partition.
    commit(c, tmp, "9", &shadow, &[("region=eu/a.jsonl", b"{\"id\":2}\n{\"id\":1}\n".to_vec())]).await;
    let cmp = compare(c, &shadow, &CompareConfig::new(OutputFormat::Jsonl)).await;
    assert_eq!(cmp.verdict, Verdict::Different);
    assert_eq!(
        whats(&cmp),
        [
            ("region=eu".to_string(), "row order".to_string(), true),
            ("region=us".into(), "partition".into(), false)
        ]
    );
    let gone = &cmp.differences[1];
    assert_eq!((gone.shadow.as_str(), gone.production.as_str()), ("absent", "1 objects, 9 bytes"));
}

/// bytes outputs: 1,000 against 1,010 bytes is within a 2% tolerance, not within 0.5%.
async fn bytes_within_tolerance(c: &Committer, tmp: &Path) {
    commit(c, tmp, "7", OUT, &[("blob.bin", common::data(1, 1010))]).await;
    let shadow = shadow_prefix(OUT, "9").unwrap();
    commit(c, tmp, "9", &shadow, &[("blob.bin", common::data(2, 1000))]).await;
    let mut cfg = CompareConfig::new(OutputFormat::Bytes);
    cfg.size_tolerance = 0.02;
    let cmp = compare(c, &shadow, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Equivalent, "{:?}", cmp.differences);
    assert_eq!(whats(&cmp), [(String::new(), "bytes".to_string(), true)]);
    cfg.size_tolerance = 0.005;
    assert_eq!(compare(c, &shadow, &cfg).await.verdict, Verdict::Different);
    cfg.size_tolerance = 1.5;
    let err = compare_outputs(c.store(), &shadow, OUT, &cfg).await.unwrap_err().to_string();
    assert!(err.contains("size_tolerance") && err.contains("1.5"), "{err}");
}

/// parquet: row counts come from the footers. The same 100 rows in other row groups (other
/// bytes) are equivalent within a 50% size tolerance; 99 rows are different.
async fn parquet_row_counts(c: &Committer, tmp: &Path) {
    let values: Vec<i64> = (0..100).collect();
    commit(c, tmp, "7", OUT, &[("part-0.parquet", parquet_file(&values, 100))]).await;
    let mut cfg = CompareConfig::new(OutputFormat::Parquet);
    cfg.size_tolerance = 0.5;
    let regrouped = shadow_prefix(OUT, "8").unwrap();
    let mut rev = values.clone();
    rev.reverse();
    commit(c, tmp, "8", &regrouped, &[("part-0.parquet", parquet_file(&rev, 30))]).await;
    let cmp = compare(c, &regrouped, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Equivalent, "{:?}", cmp.differences);
    assert_eq!(cmp.shadow.partitions[0].rows, Some(100));
    assert_eq!(cmp.production.partitions[0].rows, Some(100));
    assert_ne!(cmp.shadow.bytes, cmp.production.bytes, "other row groups, other bytes");

    let fewer = shadow_prefix(OUT, "9").unwrap();
    commit(c, tmp, "9", &fewer, &[("part-0.parquet", parquet_file(&values[1..], 100))]).await;
    let cmp = compare(c, &fewer, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Different);
    assert!(whats(&cmp).contains(&(String::new(), "rows".into(), false)), "{:?}", cmp.differences);

    let broken = shadow_prefix(OUT, "10").unwrap();
    commit(c, tmp, "10", &broken, &[("part-0.parquet", b"not parquet at all".to_vec())]).await;
    let cmp = compare(c, &broken, &cfg).await;
    assert_eq!(cmp.verdict, Verdict::Different);
    let d = cmp.differences.iter().find(|d| d.what == "parquet footer").expect("named");
    assert!(d.shadow.starts_with("part-0.parquet: "), "{d}");
}

/// Nothing to compare against: no production manifest, or a shadow file gone.
async fn uncommitted_sides_are_refused(c: &Committer, tmp: &Path) {
    let shadow = shadow_prefix(OUT, "9").unwrap();
    commit(c, tmp, "9", &shadow, &[("part-0.csv", csv("h", &["1"]))]).await;
    let err =
        compare_outputs(c.store(), &shadow, OUT, &CompareConfig::new(OutputFormat::Csv)).await.unwrap_err();
    assert!(matches!(&err, CommitError::Incomplete { prefix, .. } if prefix == OUT), "{err}");
    commit(c, tmp, "7", OUT, &[("part-0.csv", csv("h", &["1"]))]).await;
    c.store().delete(&format!("{shadow}part-0.csv")).await.unwrap();
    let err =
        compare_outputs(c.store(), &shadow, OUT, &CompareConfig::new(OutputFormat::Csv)).await.unwrap_err();
    assert!(err.to_string().contains("part-0.csv is missing"), "{err}");
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod local {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let root = TempDir::new("cmp-root");
                    let tmp = TempDir::new("cmp-files");
                    super::$name(&local_committer(&root.0), &tmp.0).await;
                }
            )*
        }
        mod moto {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let m = Moto::start();
                    m.bucket("lake").await;
                    let tmp = TempDir::new("cmp-files");
                    super::$name(&s3_committer(&m.endpoint(), "lake"), &tmp.0).await;
                }
            )*
        }
    };
}

both!(
    same_files_are_identical,
    reordered_rows_are_equivalent,
    changed_rows_are_different,
    missing_partition_is_different,
    bytes_within_tolerance,
    parquet_row_counts,
    uncommitted_sides_are_refused,
);
