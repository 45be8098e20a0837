//! Capacity mode's node labels (YARN's node partitions), resolved per queue after the tree:
//! which labels' partitions each queue may use (`accessible_labels`, inherited from the parent
//! when absent, root every label), its capacity and max capacity in each (percents of the
//! parent's share of that partition, resolved to fractions of the partition), and its
//! `default_label`.
//!
//! Rules (`CapacitySchedulerConfiguration.getAccessibleNodeLabels`, `getLabeledQueueCapacity`,
//! `getLabeledQueueMaximumCapacity`, `getDefaultNodeLabelExpression`; `ParentQueue`'s check of
//! the children's capacity sum per label):
//! - every label named (by a queue or in `scheduler.node_labels`) is on some node group;
//! - a queue may list only labels its parent may use;
//! - per label, the capacities of siblings sum to 100 (± 0.05), or are all 0 (no guarantees in
//!   that partition at that level); a queue with no guarantee in a partition gives its children
//!   none there;
//! - `max_capacity` is in (0, 100] and at least `capacity`; `capacity` in [0, 100];
//! - `default_label` is one the queue may use.

use std::collections::{BTreeMap, BTreeSet};

use crate::capacity::LabelShare;
use crate::cluster::{QueueConfig, QueueIndex};
use crate::cluster_file::{ClusterFile, QueueSpec};
use crate::error::Problem;

/// ParentQueue's tolerance on a sum of percents.
const SUM_PRECISION: f64 = 0.05;

struct Cx<'a> {
    problems: &'a mut Vec<Problem>,
    queues: &'a mut [QueueConfig],
    known: BTreeSet<String>,
    next: QueueIndex,
}

impl Cx<'_> {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { path: path.into(), message: message.into() });
    }

    fn check_known(&mut self, path: String, label: &str) -> bool {
        if self.known.contains(label) {
            return true;
        }
        let known = if self.known.is_empty() {
            "no node group has a label".to_string()
        } else {
            format!("the nodes' labels are {}", self.known.iter().cloned().collect::<Vec<_>>().join(", "))
        };
        self.problem(path, format!("no node has label `{label}`; {known}"));
        false
    }
}

/// Resolve every queue's labels into `queues` (built depth-first from `raw.queues`).
pub(crate) fn apply(raw: &ClusterFile, queues: &mut [QueueConfig], problems: &mut Vec<Problem>) {
    let known: BTreeSet<String> = raw.nodes.iter().filter_map(|g| g.label.clone()).collect();
    let mut cx = Cx { problems, queues, known, next: 1 };
    for label in raw.scheduler.node_labels.keys() {
        cx.check_known(format!("scheduler.node_labels.{label}"), label);
    }
    let root: BTreeMap<String, LabelShare> = cx
        .known
        .iter()
        .map(|l| {
            let share = LabelShare {
                capacity: 100.0,
                max_capacity: 100.0,
                absolute_capacity: 1.0,
                absolute_max_capacity: 1.0,
            };
            (l.clone(), share)
        })
        .collect();
    if let Some(c) = cx.queues[0].capacity.as_mut() {
        c.labels = root.clone();
    }
    level(&mut cx, 0, "queues", &raw.queues, &root, None);
}

fn level(
    cx: &mut Cx,
    parent_ix: QueueIndex,
    path: &str,
    specs: &[QueueSpec],
    parent: &BTreeMap<String, LabelShare>,
    parent_default: Option<&String>,
) {
    if specs.is_empty() {
        return;
    }
    // Each child's labels as written or inherited, before the level's sums are checked.
    let mut resolved: Vec<BTreeMap<String, (f64, f64)>> = Vec::new();
    for spec in specs {
        let here = format!("{path}.{}", spec.name);
        let mut mine = BTreeMap::new();
        match &spec.accessible_labels {
            None => {
                for l in parent.keys() {
                    mine.insert(l.clone(), (0.0, 100.0));
                }
            }
            Some(list) => {
                for (l, c) in list {
                    let at = format!("{here}.accessible_labels.{l}");
                    if !cx.check_known(at.clone(), l) {
                        continue;
                    }
                    if !parent.contains_key(l) {
                        cx.problem(
                            at,
                            format!("the parent cannot use label `{l}`, so this queue cannot either; list it on the parent first"),
                        );
                        continue;
                    }
                    let max = c.max_capacity.unwrap_or(100.0);
                    if !(0.0..=100.0).contains(&c.capacity) {
                        cx.problem(
                            format!("{at}.capacity"),
                            format!("{} is not a percent in [0, 100]", c.capacity),
                        );
                    }
                    if !(max > 0.0 && max <= 100.0) {
                        cx.problem(
                            format!("{at}.max_capacity"),
                            format!("{max} is not a percent in (0, 100]"),
                        );
                    } else if max < c.capacity {
                        cx.problem(
                            format!("{at}.max_capacity"),
                            format!("max_capacity {max} is below capacity {}: a queue's max is at least its capacity", c.capacity),
                        );
                    }
                    mine.insert(l.clone(), (c.capacity, max));
                }
            }
        }
        resolved.push(mine);
    }
    let labels: BTreeSet<&String> = resolved.iter().flat_map(|m| m.keys()).collect();
    let parent_path = cx.queues[parent_ix].path.to_string();
    for l in labels {
        let sum: f64 = resolved.iter().filter_map(|m| m.get(l)).map(|c| c.0).sum();
        let parent_cap = parent.get(l).map_or(0.0, |p| p.absolute_capacity);
        if sum != 0.0 && parent_cap == 0.0 {
            cx.problem(
                path,
                format!(
                    "{parent_path} has no capacity in label {l}'s partition, so its children can have none there \
                     (they add up to {sum})"
                ),
            );
        } else if sum != 0.0 && (sum - 100.0).abs() > SUM_PRECISION {
            cx.problem(
                path,
                format!(
                    "the capacities of {parent_path}'s children in label {l}'s partition add up to {}, not 100: \
                     per label, siblings sum to 100 (or all 0: no guarantees there)",
                    (sum * 1e6).round() / 1e6
                ),
            );
        }
    }
    for (spec, mine) in specs.iter().zip(resolved) {
        let here = format!("{path}.{}", spec.name);
        let ix = cx.next;
        cx.next += 1;
        let shares: BTreeMap<String, LabelShare> = mine
            .into_iter()
            .map(|(l, (c, m))| {
                let p = &parent[&l];
                let share = LabelShare {
                    capacity: c,
                    max_capacity: m,
                    absolute_capacity: p.absolute_capacity * c / 100.0,
                    absolute_max_capacity: p.absolute_max_capacity * m / 100.0,
                };
                (l, share)
            })
            .collect();
        let default = spec.default_label.as_ref().or(parent_default);
        if let Some(d) = &spec.default_label {
            if !shares.contains_key(d) {
                cx.problem(
                    format!("{here}.default_label"),
                    format!(
                        "`{d}` is not one of this queue's accessible_labels, so its jobs could not run there"
                    ),
                );
            }
        }
        if let Some(c) = cx.queues[ix].capacity.as_mut() {
            c.labels = shares.clone();
            c.default_label = default.filter(|d| shares.contains_key(*d)).cloned();
        }
        level(cx, ix, &format!("{here}.children"), &spec.children, &shares, default);
    }
}
