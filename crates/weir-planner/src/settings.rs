//! Planner settings (`plan.yaml`) and their defaults.
//!
//! ```yaml
//! version: 1
//! window: 30d                              # the most recent window of the history
//! instance: {cpu: 16000, memory: 64g}      # the cluster's instance type
//! percentile: {1: 95, 2: 85, 3: 70}        # per tier, percent of in-use time to cover
//! max_running_apps_headroom: 0.2
//! shrink_floor: 0.3                        # cluster usage/capacity below this: shrink
//! verdict_min_window: 1d                   # a shorter history gets no grow/shrink/keep verdict
//! ```
//!
//! Every field but `version` is optional. Defaults: a 30-day window, the cluster's most common
//! node size as the instance, the percentiles of the cluster file's `tiers:` (built-in 95/85/70),
//! 20% headroom and a shrink floor of 0.3.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_model::cluster::TIERS;
use weir_model::{parse_yaml, ClusterConfig, Duration, ModelError, PartialResources, Problem, Resources};

use crate::error::PlanError;

/// The settings file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    pub version: u32,
    #[serde(default)]
    pub window: Option<Duration>,
    #[serde(default)]
    pub instance: Option<PartialResources>,
    #[serde(default)]
    pub percentile: BTreeMap<u8, f64>,
    #[serde(default)]
    pub max_running_apps_headroom: Option<f64>,
    #[serde(default)]
    pub shrink_floor: Option<f64>,
    #[serde(default)]
    pub verdict_min_window: Option<Duration>,
}

/// Resolved settings: every value present and checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanSettings {
    /// The most recent span of the history to plan from (the whole history if it is shorter).
    pub window: Duration,
    /// The cluster's instance type; usage counts as max(cpu/instance.cpu, memory/instance.memory)
    /// instances. A zero component is not counted.
    pub instance: Resources,
    /// Per tier (1..=3), the percent of a leaf's in-use time its allocation must cover.
    pub percentile: BTreeMap<u8, f64>,
    /// `max_running_apps` = percentile of running apps × (1 + headroom), rounded up.
    pub max_running_apps_headroom: f64,
    /// The cluster verdict is "shrink" when cluster usage/capacity is below this.
    pub shrink_floor: f64,
    /// A history that covers less than this gets no verdict (a day of nightly work is the least
    /// that says anything about a cluster's size).
    pub verdict_min_window: Duration,
}

pub const DEFAULT_WINDOW: Duration = Duration(30 * 86_400_000);
pub const DEFAULT_HEADROOM: f64 = 0.2;
pub const DEFAULT_SHRINK_FLOOR: f64 = 0.3;
pub const DEFAULT_VERDICT_MIN_WINDOW: Duration = Duration(86_400_000);

impl PlanSettings {
    /// The defaults for `cluster`: see the module docs.
    pub fn defaults_for(cluster: &ClusterConfig) -> PlanSettings {
        PlanSettings {
            window: DEFAULT_WINDOW,
            instance: most_common_node(cluster),
            percentile: cluster.tiers.iter().map(|(&t, d)| (t, d.percentile)).collect(),
            max_running_apps_headroom: DEFAULT_HEADROOM,
            shrink_floor: DEFAULT_SHRINK_FLOOR,
            verdict_min_window: DEFAULT_VERDICT_MIN_WINDOW,
        }
    }

    /// Parse `plan.yaml` (named `file` in errors) over the defaults for `cluster`.
    pub fn from_yaml(file: &str, text: &str, cluster: &ClusterConfig) -> Result<PlanSettings, PlanError> {
        let raw: SettingsFile = parse_yaml(file, text)?;
        PlanSettings::from_file(file, &raw, cluster)
    }

    /// Apply a parsed settings file over the defaults, collecting every problem.
    pub fn from_file(
        file: &str,
        raw: &SettingsFile,
        cluster: &ClusterConfig,
    ) -> Result<PlanSettings, PlanError> {
        let mut s = PlanSettings::defaults_for(cluster);
        let mut problems = Vec::new();
        let mut problem = |path: String, message: String| problems.push(Problem { path, message });
        if raw.version != 1 {
            problem(
                "version".into(),
                format!("unsupported version {}; this weir reads version 1", raw.version),
            );
        }
        if let Some(w) = raw.window {
            if w.as_millis() == 0 {
                problem("window".into(), "must be longer than 0s, e.g. 30d".into());
            }
            s.window = w;
        }
        if let Some(i) = raw.instance {
            s.instance = i.or(0);
            if s.instance.cpu == 0 && s.instance.memory == 0 {
                problem(
                    "instance".into(),
                    "needs a positive cpu or memory, e.g. {cpu: 16000, memory: 64g}".into(),
                );
            }
        }
        for (&tier, &p) in &raw.percentile {
            if !TIERS.contains(&tier) {
                problem(format!("percentile.{tier}"), "tiers are numbered 1 (most critical) to 3".into());
            } else if !(p > 0.0 && p <= 100.0) {
                problem(format!("percentile.{tier}"), format!("{p} is not a percentage in (0, 100]"));
            } else {
                s.percentile.insert(tier, p);
            }
        }
        if let Some(h) = raw.max_running_apps_headroom {
            if !(h.is_finite() && h >= 0.0) {
                problem("max_running_apps_headroom".into(), format!("{h} is not a fraction ≥ 0 (0.2 = 20%)"));
            }
            s.max_running_apps_headroom = h;
        }
        if let Some(f) = raw.shrink_floor {
            if !(0.0..=1.0).contains(&f) {
                problem("shrink_floor".into(), format!("{f} is not a fraction between 0 and 1"));
            }
            s.shrink_floor = f;
        }
        if let Some(w) = raw.verdict_min_window {
            s.verdict_min_window = w;
        }
        if problems.is_empty() {
            Ok(s)
        } else {
            Err(PlanError::Settings(ModelError::Invalid { file: file.to_string(), problems }))
        }
    }

    /// The percentile for a leaf of `tier`; a leaf without a tier is planned as tier 3.
    pub fn percentile_for(&self, tier: Option<u8>) -> f64 {
        let t = tier.unwrap_or(3);
        self.percentile.get(&t).copied().unwrap_or(100.0)
    }
}

/// The node size with the most nodes (ties: the first listed). With no nodes, 16 cores / 64 GiB.
pub fn most_common_node(cluster: &ClusterConfig) -> Resources {
    let mut counts: Vec<(Resources, u64)> = Vec::new();
    for g in &cluster.nodes {
        let r = Resources::new(g.resources.cpu, g.resources.memory, 0);
        match counts.iter_mut().find(|(size, _)| *size == r) {
            Some((_, n)) => *n += u64::from(g.count),
            None => counts.push((r, u64::from(g.count))),
        }
    }
    let mut best: Option<(Resources, u64)> = None;
    for (r, n) in counts {
        if best.is_none_or(|(_, b)| n > b) {
            best = Some((r, n));
        }
    }
    best.map(|(r, _)| r).unwrap_or(Resources::new(16_000, 65_536, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(nodes: &str) -> ClusterConfig {
        let yaml = format!("version: 1\nnodes: {nodes}\nqueues: [{{name: a, tier: 1}}]\n");
        ClusterConfig::from_yaml("c.yaml", &yaml).unwrap()
    }

    #[test]
    fn defaults_take_the_most_common_node_and_the_cluster_tiers() {
        let c = cluster(
            "[{count: 2, resources: {cpu: 8000, memory: 32g}}, {count: 5, resources: {cpu: 16000, memory: 64g}}, \
             {count: 4, resources: {cpu: 8000, memory: 32g}}]",
        );
        let s = PlanSettings::defaults_for(&c);
        assert_eq!(s.instance, Resources::new(8000, 32768, 0), "6 small nodes beat 5 large ones");
        assert_eq!(s.percentile, BTreeMap::from([(1, 95.0), (2, 85.0), (3, 70.0)]));
        assert_eq!(s.window, Duration(30 * 86_400_000));
    }

    #[test]
    fn a_settings_file_overrides_the_defaults() {
        let c = cluster("[{count: 1, resources: {cpu: 8000, memory: 32g}}]");
        let text = "version: 1\nwindow: 7d\ninstance: {cpu: 4000, memory: 16g}\npercentile: {2: 80}\n\
                    max_running_apps_headroom: 0.5\nshrink_floor: 0.25\n";
        let s = PlanSettings::from_yaml("plan.yaml", text, &c).unwrap();
        assert_eq!(s.window, Duration(7 * 86_400_000));
        assert_eq!(s.instance, Resources::new(4000, 16384, 0));
        assert_eq!(s.percentile, BTreeMap::from([(1, 95.0), (2, 80.0), (3, 70.0)]));
        assert_eq!((s.max_running_apps_headroom, s.shrink_floor), (0.5, 0.25));
    }

    #[test]
    fn every_problem_is_reported_with_its_path() {
        let c = cluster("[{count: 1, resources: {cpu: 8000, memory: 32g}}]");
        let text = "version: 1\nwindow: 0s\npercentile: {1: 0, 4: 50}\nmax_running_apps_headroom: -1\nshrink_floor: 2\n";
        let err = PlanSettings::from_yaml("plan.yaml", text, &c).unwrap_err().to_string();
        for want in [
            "plan.yaml: window: must be longer than 0s",
            "plan.yaml: percentile.1: 0 is not a percentage",
            "plan.yaml: percentile.4: tiers are numbered",
            "plan.yaml: max_running_apps_headroom: -1 is not a fraction",
            "plan.yaml: shrink_floor: 2 is not a fraction",
        ] {
            assert!(err.contains(want), "{err}\nmissing: {want}");
        }
        let err =
            PlanSettings::from_yaml("plan.yaml", "version: 1\nwindw: 3d\n", &c).unwrap_err().to_string();
        assert!(err.starts_with("plan.yaml: ") && err.contains("windw"), "{err}");
    }
}
