//! Exporters: a validated cluster as weir, YARN (Fair and Capacity Scheduler), YuniKorn and
//! Kueue configuration, with field names and units as those systems document them.
//!
//! Each exporter writes the resolved settings of every queue (tier defaults and inherited
//! preemption settings already applied), so the output means the same without weir's tiers.
//! What a format cannot say is written as a comment in the output and listed in the module
//! docs of its exporter.

mod capacity;
mod capacity_mode;
mod fair;
mod guarantee;
mod kueue;
mod weir;
mod xml;
mod yunikorn;

use std::fmt;
use std::str::FromStr;

use weir_model::{ClusterConfig, Duration, Limit, Resources};

use crate::error::PlanError;

/// A configuration format weir can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// weir's own `cluster.yaml`.
    Weir,
    /// Hadoop YARN Fair Scheduler allocation file, `fair-scheduler.xml`.
    YarnFair,
    /// Hadoop YARN Capacity Scheduler `capacity-scheduler.xml`.
    YarnCapacity,
    /// Apache YuniKorn `queues.yaml`.
    Yunikorn,
    /// Kueue ResourceFlavor, Cohort, ClusterQueue and LocalQueue objects.
    Kueue,
}

impl Format {
    pub const ALL: [Format; 5] =
        [Format::Weir, Format::YarnFair, Format::YarnCapacity, Format::Yunikorn, Format::Kueue];

    pub fn name(self) -> &'static str {
        match self {
            Format::Weir => "weir",
            Format::YarnFair => "yarn-fair",
            Format::YarnCapacity => "yarn-capacity",
            Format::Yunikorn => "yunikorn",
            Format::Kueue => "kueue",
        }
    }

    /// The file name the target system expects (or conventionally uses).
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Weir => "cluster.yaml",
            Format::YarnFair => "fair-scheduler.xml",
            Format::YarnCapacity => "capacity-scheduler.xml",
            Format::Yunikorn => "queues.yaml",
            Format::Kueue => "kueue.yaml",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a format name was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a format: use one of weir, yarn-fair, yarn-capacity, yunikorn, kueue")]
pub struct FormatParseError {
    pub input: String,
}

impl FromStr for Format {
    type Err = FormatParseError;
    fn from_str(s: &str) -> Result<Format, FormatParseError> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s.trim())
            .ok_or_else(|| FormatParseError { input: s.to_string() })
    }
}

/// Settings of the exports that the cluster file does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// Kueue: the namespace of the LocalQueues.
    pub namespace: String,
    /// YuniKorn: the partition name.
    pub partition: String,
    /// Kueue: the ResourceFlavor every ClusterQueue uses.
    pub flavor: String,
    /// The name of the GPU resource. YARN: written only when given (a resource type the
    /// cluster must declare in resource-types.xml, usually `yarn.io/gpu`; an undeclared one
    /// makes YARN refuse the whole file), otherwise GPU limits become comments. YuniKorn and
    /// Kueue: `nvidia.com/gpu` when not given.
    pub gpu_resource: Option<String>,
    /// YARN Capacity Scheduler: the Hadoop release the file is for.
    pub hadoop_version: Version,
    /// Kueue: the release the objects are for (API versions and field names follow it).
    pub kueue_version: Version,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            namespace: "default".into(),
            partition: "default".into(),
            flavor: "default-flavor".into(),
            gpu_resource: None,
            hadoop_version: Version(3, 4),
            kueue_version: Version(0, 16),
        }
    }
}

/// A `major.minor` release number (`3.4`, `0.16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

impl FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Version, String> {
        let t = s.trim().trim_start_matches('v');
        let mut parts = t.split('.');
        let num = |p: Option<&str>| p.and_then(|p| p.parse::<u32>().ok());
        match (num(parts.next()), num(parts.next())) {
            (Some(a), Some(b)) => Ok(Version(a, b)),
            _ => Err(format!("`{s}` is not a release number such as 3.4 or 0.16")),
        }
    }
}

/// An exported file and what it could not say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// The file, starting with a comment block that lists `losses`.
    pub text: String,
    /// One sentence per setting of the weir cluster the target cannot express, or expresses
    /// only approximately (the same list as the file's opening comment).
    pub losses: Vec<String>,
}

/// Write `cluster` in `format`.
pub fn export(
    cluster: &ClusterConfig,
    format: Format,
    options: &ExportOptions,
) -> Result<Exported, PlanError> {
    let mut losses = Vec::new();
    let body = match format {
        Format::Weir => weir::export(cluster)?,
        Format::YarnFair => fair::export(cluster, options, &mut losses)?,
        Format::YarnCapacity if cluster.scheduler.mode == weir_model::Mode::Capacity => {
            capacity_mode::export(cluster, &mut losses)?
        }
        Format::YarnCapacity => capacity::export(cluster, options, &mut losses)?,
        Format::Yunikorn => yunikorn::export(cluster, options, &mut losses)?,
        Format::Kueue => kueue::export(cluster, options, &mut losses)?,
    };
    if format != Format::Weir {
        job_order_losses(cluster, format, &mut losses);
    }
    let text = match format {
        Format::Weir => body,
        Format::YarnFair | Format::YarnCapacity => xml_header(format, &losses, &body),
        Format::Yunikorn | Format::Kueue => yaml_header(format, &losses, &body),
    };
    Ok(Exported { text, losses })
}

/// A fifo leaf's `job_order: shortest | largest`: none of the targets orders a queue's
/// applications by size or walltime (YARN's FifoPolicy and the Capacity Scheduler's fifo
/// ordering go by priority and submission, YuniKorn's sort policies are fifo, fair and
/// state-aware, Kueue's queueing strategies are StrictFIFO and BestEffortFIFO).
fn job_order_losses(cluster: &ClusterConfig, format: Format, losses: &mut Vec<String>) {
    for q in cluster.queues.iter().filter(|q| q.job_order != weir_model::JobOrder::Submit) {
        losses.push(format!(
            "{}: job_order {}: {} orders a queue's applications by submission, not by size or walltime",
            q.path,
            q.job_order.name(),
            target_name(format)
        ));
    }
}

fn header_lines(format: Format, losses: &[String]) -> Vec<String> {
    let mut lines = vec![format!("Written by weir ({}).", format.name())];
    if losses.is_empty() {
        lines.push("Everything in the weir cluster file is expressed here.".into());
    } else {
        lines.push(format!(
            "What {} cannot express from the weir cluster file ({}):",
            target_name(format),
            losses.len()
        ));
        lines.extend(losses.iter().map(|l| format!("  - {l}")));
    }
    lines
}

fn target_name(format: Format) -> &'static str {
    match format {
        Format::Weir => "weir",
        Format::YarnFair => "the YARN Fair Scheduler",
        Format::YarnCapacity => "the YARN Capacity Scheduler",
        Format::Yunikorn => "YuniKorn",
        Format::Kueue => "Kueue",
    }
}

/// The XML declaration must come first; the comment block follows it.
fn xml_header(format: Format, losses: &[String], body: &str) -> String {
    let (decl, rest) = body.split_once('\n').unwrap_or((body, ""));
    let lines = header_lines(format, losses).iter().map(|l| l.replace("--", "- -")).collect::<Vec<_>>();
    format!("{decl}\n<!--\n{}\n-->\n{rest}", lines.join("\n"))
}

fn yaml_header(format: Format, losses: &[String], body: &str) -> String {
    let lines = header_lines(format, losses).iter().map(|l| format!("# {l}")).collect::<Vec<_>>();
    format!("{}\n{body}", lines.join("\n"))
}

/// Split `total` units among `weights` in proportion, by largest remainder: the parts sum to
/// `total` exactly. Ties in the remainder go to the earlier entry. All-zero (or no positive)
/// weights split evenly.
pub fn largest_remainder(weights: &[f64], total: u64) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let clean: Vec<f64> = weights.iter().map(|&w| if w.is_finite() && w > 0.0 { w } else { 0.0 }).collect();
    let sum: f64 = clean.iter().sum();
    let shares: Vec<f64> = if sum > 0.0 {
        clean.iter().map(|w| w / sum * total as f64).collect()
    } else {
        vec![total as f64 / weights.len() as f64; weights.len()]
    };
    let mut parts: Vec<u64> = shares.iter().map(|s| s.floor() as u64).collect();
    let mut left = total.saturating_sub(parts.iter().sum());
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (shares[a] - shares[a].floor(), shares[b] - shares[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    parts
}

/// Whole vcores for millicores, rounded up (YARN counts whole virtual cores).
pub(crate) fn vcores(millicores: u64) -> u64 {
    millicores.div_ceil(1000)
}

/// Whole seconds, rounded up (YARN's timeouts are in seconds).
pub(crate) fn seconds(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000)
}

/// A number as short as it reads: `25`, `12.5`, `0.333`.
pub(crate) fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// A limit as a fraction of the cluster (the binding resource for absolute limits);
/// unbounded is 1.
pub(crate) fn fraction_of(limit: &Limit, total: &Resources) -> f64 {
    match limit {
        Limit::Percent(p) => (p / 100.0).clamp(0.0, 1.0),
        Limit::Absolute(r) => {
            let parts = [(r.cpu, total.cpu), (r.memory, total.memory), (r.gpu, total.gpu)];
            parts
                .iter()
                .filter(|(v, t)| *t > 0 && *v != u64::MAX)
                .map(|&(v, t)| (v as f64 / t as f64).min(1.0))
                .fold(1.0, f64::min)
        }
    }
}

/// Kubernetes quantities: cpu in cores or millicores, memory in Gi or Mi.
pub(crate) fn k8s_cpu(millicores: u64) -> String {
    if millicores.is_multiple_of(1000) {
        (millicores / 1000).to_string()
    } else {
        format!("{millicores}m")
    }
}

pub(crate) fn k8s_memory(mib: u64) -> String {
    if mib.is_multiple_of(1024) {
        format!("{}Gi", mib / 1024)
    } else {
        format!("{mib}Mi")
    }
}

/// `root.ads.tier1` → `ads-tier1`; `root` → `root`: a valid DNS label (RFC 1123: lower-case
/// letters, digits and `-`, starting and ending with a letter or digit, at most 63 characters).
/// Other characters become `-`, runs of `-` collapse, and a name cut to fit keeps a hash of the
/// full path so two long paths stay apart.
pub(crate) fn k8s_name(path: &str) -> String {
    let rest = path.strip_prefix("root.").unwrap_or(path);
    let mut out = String::with_capacity(rest.len());
    for c in rest.chars() {
        let c = match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out = format!("q-{:08x}", fnv32(rest));
    }
    if out.len() > 63 {
        out.truncate(54);
        while out.ends_with('-') {
            out.pop();
        }
        out = format!("{out}-{:08x}", fnv32(rest));
    }
    out
}

/// FNV-1a, 32 bits: a short, stable tag for names that had to be cut (not a security
/// boundary: a clash is still detected and reported).
pub(crate) fn fnv32(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_remainder_sums_exactly_and_follows_the_weights() {
        assert_eq!(largest_remainder(&[1.0, 1.0, 1.0], 1000), [334, 333, 333]);
        assert_eq!(largest_remainder(&[6.0, 3.0, 1.0], 1000), [600, 300, 100]);
        assert_eq!(largest_remainder(&[40.0, 30.0, 20.0, 10.0, 1.0], 1000), [396, 297, 198, 99, 10]);
        assert_eq!(largest_remainder(&[0.0, 0.0], 1000), [500, 500]);
        assert_eq!(largest_remainder(&[5.0, 0.0], 1000), [1000, 0]);
        assert_eq!(largest_remainder(&[2.0, 1.0], 1), [1, 0]);
        assert!(largest_remainder(&[], 1000).is_empty());
        for weights in [[3.0, 7.0, 11.0, 13.0, 0.5], [1e-9, 1.0, 1.0, 1.0, 9e9]] {
            assert_eq!(largest_remainder(&weights, 1000).iter().sum::<u64>(), 1000, "{weights:?}");
        }
    }

    #[test]
    fn formats_parse_by_name_and_units_round_up() {
        assert_eq!("yarn-capacity".parse::<Format>(), Ok(Format::YarnCapacity));
        assert!("yarn".parse::<Format>().is_err());
        assert_eq!(
            (vcores(1500), vcores(2000), seconds(Duration(1)), seconds(Duration(30_000))),
            (2, 2, 1, 30)
        );
        assert_eq!((num(25.0), num(12.5)), ("25".to_string(), "12.5".to_string()));
        assert_eq!(
            (k8s_cpu(96_000), k8s_cpu(1500), k8s_memory(65_536), k8s_memory(1500)),
            ("96".into(), "1500m".into(), "64Gi".into(), "1500Mi".into())
        );
        assert_eq!(k8s_name("root.data_platform.Query.tier1"), "data-platform-query-tier1");
        assert_eq!(k8s_name("root.ops_"), "ops");
        assert_eq!(k8s_name("root._x__y_"), "x-y");
        let long = k8s_name(&format!("root.{}", "a".repeat(80)));
        assert!(long.len() <= 63 && long.starts_with("aaaa"), "{long}");
        assert_ne!(long, k8s_name(&format!("root.{}", "a".repeat(81))));
    }
}
