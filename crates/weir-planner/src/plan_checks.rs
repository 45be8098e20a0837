//! What makes a history a weak basis for a plan: rows larger than the whole cluster.

use std::borrow::Cow;

use weir_model::ClusterConfig;

use crate::plan::Window;
use crate::usage::Interval;

/// Rows using more than this many times the cluster get the verdict withheld.
pub(crate) const ABSURD_FACTOR: f64 = 10.0;

/// The largest factor by which a row exceeds the cluster, with a warning naming it.
pub(crate) fn oversized(
    cfg: &ClusterConfig,
    series: &[Cow<[Interval]>],
    file: &str,
    window: &Window,
) -> Option<(f64, String)> {
    let total = cfg.total_resources();
    let mut count = 0usize;
    let mut worst: Option<(f64, &Interval, usize)> = None;
    for (leaf, ivs) in series.iter().enumerate() {
        for iv in ivs.iter().filter(|iv| iv.end > window.start_ms && iv.start < window.end_ms) {
            let factor = [(iv.cpu, total.cpu), (iv.memory, total.memory)]
                .iter()
                .filter(|(_, t)| *t > 0)
                .map(|&(v, t)| v as f64 / t as f64)
                .fold(0.0, f64::max);
            if factor > 1.0 {
                count += 1;
                if worst.is_none_or(|(f, _, _)| factor > f) {
                    worst = Some((factor, iv, leaf));
                }
            }
        }
    }
    let (factor, iv, leaf) = worst?;
    Some((factor, format!(
        "{count} row{} of {file} use more than the whole cluster, up to {} times it ({} line {}): the history is not \
         of this cluster, or its units are wrong (cpu in millicores, memory in MiB)",
        if count == 1 { "" } else { "s" },
        crate::summary::fmt_num(factor),
        cfg.queues[leaf].path,
        iv.line
    )))
}
