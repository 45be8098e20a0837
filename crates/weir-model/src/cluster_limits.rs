//! The tree's guarantees and caps checked against each other, once every queue is resolved:
//! what can never hold is an error (a `min` above its own `max`, or above an ancestor's), what
//! leaves work that can never be scheduled is a warning (a cap of nothing, `max_running_apps:
//! 0`, children guaranteed more together than their parent may hold).

use crate::cluster::{ClusterConfig, QueueConfig, QueueIndex};
use crate::error::Problem;
use crate::queue_path::QueuePath;
use crate::resources::{ResourceKind, Resources};

/// `root.ads.tier1` as the file writes it: `queues.ads.children.tier1`.
pub(crate) fn file_path(path: &QueuePath) -> String {
    let mut out = String::from("queues");
    for (i, name) in path.as_str().split('.').skip(1).enumerate() {
        if i > 0 {
            out.push_str(".children");
        }
        out.push('.');
        out.push_str(name);
    }
    out
}

pub(crate) fn check(
    queues: &[QueueConfig],
    total: Resources,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) {
    let max: Vec<Resources> = queues.iter().map(|q| q.max.resolve(&total)).collect();
    let min: Vec<Resources> = queues.iter().map(|q| q.min.resolve(&total)).collect();
    let problem = |list: &mut Vec<Problem>, path: String, message: String| {
        list.push(Problem { path, message });
    };
    for (i, q) in queues.iter().enumerate().skip(1) {
        let here = file_path(&q.path);
        if !min[i].fits_in(&max[i]) {
            problem(
                problems,
                format!("{here}.min"),
                format!(
                    "min {} is above max {}: the guarantee can never be met (YARN only warns, in \
                     AllocationFileQueueParser.checkMinAndMaxResource, and never gives more than the max); \
                     lower min or raise max",
                    min[i], max[i]
                ),
            );
        } else if let Some(a) = ancestors(queues, i).find(|&a| a != 0 && !min[i].fits_in(&max[a])) {
            problem(
                problems,
                format!("{here}.min"),
                format!(
                    "min {} is above the max {} of {}, which caps everything under it: the guarantee can \
                     never be met; lower this min or raise that max",
                    min[i], max[a], queues[a].path
                ),
            );
        } else if let Some(p) = q.parent.filter(|&p| p != 0 && !min[p].is_zero() && !min[i].fits_in(&min[p]))
        {
            problem(
                warnings,
                format!("{here}.min"),
                format!(
                    "min {} is above the min {} of its parent {}: the parent is guaranteed less than this \
                     child alone, so the child's guarantee holds only while the parent gets more than its own",
                    min[i], min[p], queues[p].path
                ),
            );
        }
        if !q.children.is_empty() {
            let sum = q.children.iter().fold(Resources::ZERO, |a, &c| a + min[c]);
            if !sum.fits_in(&max[i]) {
                problem(
                    warnings,
                    format!("{here}.children"),
                    format!(
                        "the mins of {}'s children add up to {sum}, more than its max {}: they cannot all be \
                         guaranteed at once",
                        q.path, max[i]
                    ),
                );
            }
        }
        if q.max_running_apps == Some(0) {
            let under = if q.is_leaf() { "here" } else { "anywhere under it" };
            problem(
                warnings,
                format!("{here}.max_running_apps"),
                format!(
                    "0 admits no job: jobs submitted {under} wait forever (valid, as in YARN, to close a queue)"
                ),
            );
        }
        let starved: Vec<&str> = [("cpu", max[i].cpu), ("memory", max[i].memory)]
            .into_iter()
            .filter(|&(_, v)| v == 0)
            .map(|(k, _)| k)
            .collect();
        if !starved.is_empty() {
            let under = if q.is_leaf() { "here" } else { "anywhere under it" };
            problem(
                warnings,
                format!("{here}.max"),
                format!(
                    "max {} leaves no {} for a container: jobs submitted {under} can never run",
                    max[i],
                    starved.join(" and ")
                ),
            );
        }
    }
}

/// `i`'s ancestors, nearest first (root last).
fn ancestors(queues: &[QueueConfig], i: QueueIndex) -> impl Iterator<Item = QueueIndex> + '_ {
    std::iter::successors(queues[i].parent, move |&a| queues[a].parent)
}

impl ClusterConfig {
    /// The most a job in `queue` may ever hold: the smallest of its own and its ancestors'
    /// resolved `max`, per resource, with the queue whose max sets each resource's cap (`None`
    /// where nothing caps it).
    pub fn effective_max(&self, queue: QueueIndex) -> (Resources, [Option<&QueuePath>; 3]) {
        let total = self.total_resources();
        let mut cap = Resources::UNBOUNDED;
        let mut binding = [None; 3];
        for q in std::iter::once(queue).chain(ancestors(&self.queues, queue)) {
            let m = self.queues[q].max.resolve(&total);
            for (k, kind) in ResourceKind::ALL.into_iter().enumerate() {
                if m.get(kind) < cap.get(kind) {
                    cap.set(kind, m.get(kind));
                    binding[k] = Some(&self.queues[q].path);
                }
            }
        }
        (cap, binding)
    }

    /// The queue on `queue`'s path (itself or an ancestor) whose `max_running_apps` is 0, if
    /// any: no job submitted to `queue` can ever run.
    pub fn closed_by(&self, queue: QueueIndex) -> Option<&QueuePath> {
        std::iter::once(queue)
            .chain(ancestors(&self.queues, queue))
            .find(|&q| self.queues[q].max_running_apps == Some(0))
            .map(|q| &self.queues[q].path)
    }
}
