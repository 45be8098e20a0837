//! What a valid workload asks that its cluster can never give: tasks larger than their queue's
//! cap, workflows in a queue closed by `max_running_apps: 0`, stages asking for a node label
//! their capacity-mode queue may not use. Such work is valid — the cluster
//! file may be the thing to change — so these are warnings, each at its path in the workload
//! file, computed on demand from the validated workload and its cluster.

use crate::cluster::ClusterConfig;
use crate::error::Problem;
use crate::resources::ResourceKind;
use crate::workload::Workload;

impl Workload {
    /// Work that can never be scheduled on `cluster`, each at its path in the workload file.
    pub fn warnings(&self, cluster: &ClusterConfig) -> Vec<Problem> {
        let mut out = Vec::new();
        for wf in &self.workflows {
            let Some(leaf) = cluster.find(&wf.queue) else { continue };
            let here = format!("workflows.{}", wf.name);
            if let Some(closed) = cluster.closed_by(leaf) {
                out.push(Problem {
                    path: here.clone(),
                    message: format!(
                        "its queue {} admits no job ({closed} has max_running_apps 0): its runs can never start",
                        wf.queue
                    ),
                });
                continue;
            }
            let (cap, binding) = cluster.effective_max(leaf);
            let labels = cluster.queues[leaf].capacity.as_ref().map(|c| &c.labels);
            for job in &wf.jobs {
                for stage in &job.stages {
                    // Capacity mode: a label the queue may not use gets the job rejected.
                    let refused = stage
                        .placement
                        .node_labels
                        .iter()
                        .find(|l| labels.is_some_and(|m| !m.contains_key(*l)));
                    if let Some(l) = refused {
                        out.push(Problem {
                            path: format!("{here}.jobs.{}.stages.{}.node_labels", job.name, stage.name),
                            message: format!(
                                "{} may not use node label `{l}` (not in its accessible_labels): its jobs will be \
                                 rejected and its runs fail",
                                wf.queue
                            ),
                        });
                    }
                    let needs = cluster.scheduler.normalize(&stage.resources);
                    let over = ResourceKind::ALL
                        .into_iter()
                        .enumerate()
                        .find_map(|(k, kind)| (needs.get(kind) > cap.get(kind)).then(|| (kind, binding[k])));
                    if let Some((kind, Some(by))) = over {
                        out.push(Problem {
                            path: format!("{here}.jobs.{}.stages.{}.resources", job.name, stage.name),
                            message: format!(
                                "a task of {needs} is larger than {} may ever hold: its {} {} is above {}, \
                                 the max of {by}; it can never run",
                                wf.queue,
                                kind.name(),
                                needs.get(kind),
                                cap.get(kind)
                            ),
                        });
                    }
                }
            }
        }
        out
    }
}
