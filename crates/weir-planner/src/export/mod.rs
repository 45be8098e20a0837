//! Exporters: a validated cluster as weir, YARN (Fair and Capacity Scheduler), YuniKorn and
//! Kueue configuration, with field names and units as those systems document them.
//!
//! Each exporter writes the resolved settings of every queue (tier defaults and inherited
//! preemption settings already applied), so the output means the same without weir's tiers.
//! What a format cannot say is written as a comment in the output and listed in the module
//! docs of its exporter.

mod capacity;
mod fair;
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
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions {
            namespace: "default".into(),
            partition: "default".into(),
            flavor: "default-flavor".into(),
        }
    }
}

/// Write `cluster` in `format`.
pub fn export(cluster: &ClusterConfig, format: Format, options: &ExportOptions) -> Result<String, PlanError> {
    match format {
        Format::Weir => weir::export(cluster),
        Format::YarnFair => Ok(fair::export(cluster)),
        Format::YarnCapacity => Ok(capacity::export(cluster)),
        Format::Yunikorn => yunikorn::export(cluster, options),
        Format::Kueue => kueue::export(cluster, options),
    }
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

/// `root.ads.tier1` → `ads-tier1`; `root` → `root`. Lower case, `.` and `_` become `-`.
pub(crate) fn k8s_name(path: &str) -> String {
    let rest = path.strip_prefix("root.").unwrap_or(path);
    rest.chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect()
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
    }
}
