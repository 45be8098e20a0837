//! Where a stage's tasks may run: GPU fractions, GPU models and node labels checked against the
//! cluster, whether a task fits on any node it may use, and whether a gang can ever start.

use std::collections::BTreeSet;

use crate::cluster::NodeGroup;
use crate::resources::{ResourceKind, Resources};
use crate::workload::TaskPlacement;
use crate::workload_file::StageSpec;
use crate::workload_validation::Validator;

impl Validator<'_> {
    /// The stage's GPU fraction and node constraints, checked against the cluster.
    pub(crate) fn task_placement(
        &mut self,
        here: &str,
        spec: &StageSpec,
        resources: &Resources,
    ) -> TaskPlacement {
        let gpu_milli = spec.gpu_milli.unwrap_or(0);
        match spec.gpu_milli {
            Some(0) | Some(1000..) => self.problem(
                format!("{here}.gpu_milli"),
                format!(
                    "{gpu_milli} is not a fraction of one GPU: use 1 to 999 thousandths, or whole GPUs \
                     as resources.gpu"
                ),
            ),
            Some(_) if resources.gpu > 0 => self.problem(
                format!("{here}.gpu_milli"),
                "a task asks for whole GPUs (resources.gpu) or a fraction of one (gpu_milli), not both",
            ),
            _ => {}
        }
        let models: BTreeSet<&str> =
            self.cluster.nodes.iter().filter_map(|g| g.gpu_model.as_deref()).collect();
        for m in &spec.gpu_models {
            if !models.contains(m.as_str()) {
                let known = if models.is_empty() {
                    "no node of the cluster names a gpu_model".to_string()
                } else {
                    format!(
                        "the cluster's models are {}",
                        models.iter().copied().collect::<Vec<_>>().join(", ")
                    )
                };
                self.problem(format!("{here}.gpu_models"), format!("no node has GPU model `{m}`; {known}"));
            }
        }
        let labels: BTreeSet<&str> = self.cluster.nodes.iter().filter_map(|g| g.label.as_deref()).collect();
        for l in &spec.node_labels {
            if !labels.contains(l.as_str()) {
                let known = if labels.is_empty() {
                    "no node of the cluster has a label".to_string()
                } else {
                    format!(
                        "the cluster's labels are {}",
                        labels.iter().copied().collect::<Vec<_>>().join(", ")
                    )
                };
                self.problem(format!("{here}.node_labels"), format!("no node has label `{l}`; {known}"));
            }
        }
        TaskPlacement {
            gpu_milli,
            gpu_models: spec.gpu_models.clone(),
            node_labels: spec.node_labels.clone(),
        }
    }

    /// How many tasks of `r` the nodes the placement allows hold at once, when empty (counted
    /// up to `u64::MAX`): a gang larger than that can never start.
    pub(crate) fn gang_room(&self, r: &Resources, placement: &TaskPlacement) -> u64 {
        let rounded = self.cluster.scheduler.normalize(r);
        let mut room = 0u64;
        for g in &self.cluster.nodes {
            if !placement.allows(g.label.as_deref(), g.gpu_model.as_deref()) {
                continue;
            }
            let mut per_node = u64::MAX;
            for k in ResourceKind::ALL {
                if let Some(n) = g.resources.get(k).checked_div(rounded.get(k)) {
                    per_node = per_node.min(n);
                }
            }
            if let Some(per_gpu) = 1000u32.checked_div(placement.gpu_milli) {
                // Each GPU holds as many fractions as fit in it.
                per_node = per_node.min(g.resources.gpu.saturating_mul(u64::from(per_gpu)));
            }
            room = room.saturating_add(per_node.saturating_mul(u64::from(g.count)));
        }
        room
    }

    /// Why a task of `r` could never be placed, if it could not: it fits no node it may use
    /// once rounded up to the scheduler's minimum allocation and increment, as the engine
    /// rounds it (a GPU fraction needs a node with a GPU).
    pub(crate) fn unplaceable(&self, r: &Resources, placement: &TaskPlacement) -> Option<String> {
        let rounded = self.cluster.scheduler.normalize(r);
        let fits = |g: &NodeGroup| {
            rounded.fits_in(&g.resources)
                && (placement.gpu_milli == 0 || g.resources.gpu > 0)
                && placement.allows(g.label.as_deref(), g.gpu_model.as_deref())
        };
        if self.cluster.nodes.iter().any(fits) {
            return None;
        }
        let sizes: Vec<String> = self.cluster.nodes.iter().map(describe_group).collect();
        let rounding = if rounded == *r {
            String::new()
        } else {
            let by = if self.cluster.scheduler.minimum_allocation.is_zero() {
                "increment"
            } else {
                "minimum allocation and increment"
            };
            format!(" (rounded up to {rounded} by the scheduler's {by})")
        };
        let constrained = if placement.is_default() {
            String::new()
        } else {
            let mut parts = Vec::new();
            if placement.gpu_milli > 0 {
                parts.push(format!("{} thousandths of a GPU", placement.gpu_milli));
            }
            if !placement.gpu_models.is_empty() {
                parts.push(format!("GPU model in [{}]", placement.gpu_models.join(", ")));
            }
            if !placement.node_labels.is_empty() {
                parts.push(format!("label in [{}]", placement.node_labels.join(", ")));
            }
            format!(" with {}", parts.join(", "))
        };
        Some(format!(
            "a task of {r}{rounding}{constrained} fits on no node of the cluster, so it could never run; the nodes are {}",
            sizes.join(", ")
        ))
    }
}

/// A node group as errors describe it: count × resources, with its label and GPU model.
fn describe_group(g: &NodeGroup) -> String {
    let mut s = format!("{} × {}", g.count, g.resources);
    if let Some(l) = &g.label {
        s.push_str(&format!(" label {l}"));
    }
    if let Some(m) = &g.gpu_model {
        s.push_str(&format!(" {m}"));
    }
    s
}
