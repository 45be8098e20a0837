//! Placement: which leaf queue a workflow goes to when it names its project (and tier) rather
//! than a queue.
//!
//! The cluster file's `placement:` rules are tried in order and the first match wins; a rule
//! without a tier matches every tier. Without a match the default rule applies: project
//! `ads.ranking` at tier 2 goes to `root.ads.ranking.tier2`. Rules are checked when the cluster
//! is validated (their queue must be an existing leaf); the default rule's queue is checked when
//! a workload is validated, because only then is it known which projects are asked for.

use crate::cluster::{not_a_tier, ClusterConfig, QueueConfig, TIERS};
use crate::cluster_file::PlacementSpec;
use crate::error::Problem;
use crate::queue_path::QueuePath;

/// A validated placement rule.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementRule {
    /// The project without `root`: `ads.ranking`.
    pub project: String,
    /// `None` matches every tier.
    pub tier: Option<u8>,
    /// An existing leaf queue.
    pub queue: QueuePath,
}

/// Where [`ClusterConfig::place`] puts a workflow, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub queue: QueuePath,
    /// Index of the matching rule in [`ClusterConfig::placement`]; `None` when the default rule
    /// `root.<project>.tier<N>` applied, whose queue may not exist.
    pub rule: Option<usize>,
}

impl ClusterConfig {
    /// The leaf for a workflow of `project` at `tier`: the first rule for the project whose tier
    /// is `tier` or unset, else `root.<project>.tier<tier>`. `project` may be written with or
    /// without a leading `root.`. Only a rule's queue is known to exist: check the default
    /// rule's with [`ClusterConfig::find`].
    pub fn place(&self, project: &str, tier: u8) -> Placement {
        let project = project_name(project).unwrap_or_else(|| project.trim().to_string());
        let rule =
            self.placement.iter().position(|r| r.project == project && r.tier.is_none_or(|t| t == tier));
        match rule {
            Some(i) => Placement { queue: self.placement[i].queue.clone(), rule: Some(i) },
            None => Placement {
                queue: QueuePath::root().child(&project).child(&format!("tier{tier}")),
                rule: None,
            },
        }
    }
}

/// A project as written (`ads.ranking` or `root.ads.ranking`) in the form rules compare:
/// without `root.`. `None` if it is not a dotted list of non-empty names without spaces.
pub(crate) fn project_name(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_prefix("root.").unwrap_or(s);
    let ok = !s.is_empty()
        && s != "root"
        && s.split('.').all(|p| !p.is_empty() && !p.contains(char::is_whitespace));
    ok.then(|| s.to_string())
}

/// Validate the cluster file's `placement:` list against the resolved queue tree.
pub(crate) fn rules(
    specs: &[PlacementSpec],
    queues: &[QueueConfig],
    problems: &mut Vec<Problem>,
) -> Vec<PlacementRule> {
    let mut problem = |path: String, message: String| problems.push(Problem { path, message });
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let here = format!("placement[{i}]");
        let project = project_name(&spec.project);
        if project.is_none() {
            problem(
                format!("{here}.project"),
                format!(
                    "`{}` is not a project: write its queue path without `root`, e.g. ads.ranking",
                    spec.project
                ),
            );
        }
        let tier = match spec.tier {
            Some(t) if !TIERS.contains(&t) => {
                problem(format!("{here}.tier"), not_a_tier(t));
                None
            }
            t => t,
        };
        let queue = match leaf(queues, &spec.queue) {
            Ok(q) => {
                if let (Some(t), Some(qt)) = (tier, q.tier) {
                    if t != qt {
                        problem(
                            format!("{here}.queue"),
                            format!("the rule sends tier-{t} work to {}, a tier-{qt} queue", q.path),
                        );
                    }
                }
                Some(q.path.clone())
            }
            Err(message) => {
                problem(format!("{here}.queue"), message);
                None
            }
        };
        if let (Some(project), Some(queue)) = (project, queue) {
            out.push(PlacementRule { project, tier, queue });
        }
    }
    out
}

/// The leaf queue `written` names, or a sentence saying why there is none.
pub(crate) fn leaf<'q>(queues: &'q [QueueConfig], written: &str) -> Result<&'q QueueConfig, String> {
    let Some(path) = QueuePath::parse(written) else {
        return Err(format!("`{written}` is not a queue path: write it like root.ads.ranking.tier1"));
    };
    match queues.iter().find(|q| q.path == path) {
        Some(q) if q.is_leaf() => Ok(q),
        Some(q) => {
            Err(format!("{path} is not a leaf queue; work goes to leaves: {}", leaves_under(queues, q)))
        }
        None => Err(missing(queues, &path)),
    }
}

/// "no queue X in the cluster", with the leaves under the nearest ancestor that does exist.
pub(crate) fn missing(queues: &[QueueConfig], path: &QueuePath) -> String {
    let mut ancestor = path.as_str();
    let near = loop {
        match ancestor.rsplit_once('.') {
            Some((up, _)) => {
                ancestor = up;
                if let Some(q) = queues.iter().find(|q| q.path.as_str() == ancestor) {
                    break Some(q);
                }
            }
            None => break None,
        }
    };
    match near {
        Some(q) if q.parent.is_some() => {
            format!(
                "no queue {path} in the cluster; the leaves under {} are {}",
                q.path,
                leaves_under(queues, q)
            )
        }
        _ => format!("no queue {path} in the cluster"),
    }
}

/// Up to eight leaves under `q`, comma-separated, with a count of the rest.
fn leaves_under(queues: &[QueueConfig], q: &QueueConfig) -> String {
    let prefix = format!("{}.", q.path);
    let all: Vec<&str> = queues
        .iter()
        .filter(|l| l.is_leaf() && l.path.as_str().starts_with(&prefix))
        .map(|l| l.path.as_str())
        .collect();
    let mut text = all.iter().take(8).copied().collect::<Vec<_>>().join(", ");
    if all.len() > 8 {
        text += &format!(" and {} more", all.len() - 8);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_names() {
        assert_eq!(project_name("ads.ranking").as_deref(), Some("ads.ranking"));
        assert_eq!(project_name(" root.ads.ranking ").as_deref(), Some("ads.ranking"));
        assert_eq!(project_name("ml").as_deref(), Some("ml"));
        for bad in ["", "root", "ads..ranking", ".ads", "ads.", "ads ranking", "root."] {
            assert_eq!(project_name(bad), None, "{bad:?}");
        }
    }
}
