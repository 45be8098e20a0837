//! What every importer shares: the trace-neutral job it produces, the skipped-row ledger, and
//! the step that turns trace jobs into workflows (re-timing, load scaling, queues, tiers, SLOs).

use std::collections::BTreeMap;

use weir_model::{Arrival, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, Time, Workflow};

use super::{ImportOptions, Skipped};

/// One job as a trace describes it, before options apply.
#[derive(Clone, Debug)]
pub(crate) struct TraceJob {
    pub name: String,
    /// Submission in the trace's own clock, milliseconds.
    pub submit_ms: i64,
    /// Keys for `ImportOptions::queue_map`, most specific first (e.g. `queue:3`, `group:7`).
    pub queue_keys: Vec<String>,
    pub user: String,
    /// In topological order (`after` indices point backwards).
    pub stages: Vec<TraceStage>,
}

#[derive(Clone, Debug)]
pub(crate) struct TraceStage {
    pub name: String,
    pub after: Vec<usize>,
    pub tasks: u32,
    pub resources: Resources,
    pub duration: Distribution,
}

/// Skipped rows, and rows kept after a repair, by reason. Only the first few line numbers of
/// each reason are kept.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub rows: u64,
    pub skipped: BTreeMap<String, Skipped>,
    pub adjusted: BTreeMap<String, Skipped>,
}

const KEEP_LINES: usize = 5;

impl Ledger {
    pub fn skip(&mut self, line: u64, reason: impl Into<String>) {
        self.skip_many(line, 1, reason);
    }

    pub fn skip_many(&mut self, line: u64, count: u64, reason: impl Into<String>) {
        note(&mut self.skipped, line, count, reason.into());
    }

    /// The row was kept, but something in it had to be left out or repaired.
    pub fn adjust(&mut self, line: u64, reason: impl Into<String>) {
        note(&mut self.adjusted, line, 1, reason.into());
    }
}

fn note(map: &mut BTreeMap<String, Skipped>, line: u64, count: u64, reason: String) {
    let entry = map.entry(reason).or_default();
    entry.count += count;
    if entry.first_lines.len() < KEEP_LINES {
        entry.first_lines.push(line);
    }
}

/// SplitMix64: the importers' only randomness (tier mix, load scaling), seeded by the options,
/// so an import is a pure function of its input and options.
pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_F42D_4C95_7F2D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Put stages in topological order. `deps[i]` lists the stages stage `i` waits for. Returns the
/// order (old indices) or the stages left in a cycle.
pub(crate) fn topological(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = deps.len();
    let mut indegree: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependants[d].push(i);
        }
    }
    // A sorted frontier keeps the order deterministic and close to the trace's own.
    let mut frontier: std::collections::BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = frontier.pop_first() {
        order.push(i);
        for &j in &dependants[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                frontier.insert(j);
            }
        }
    }
    if order.len() == n {
        Ok(order)
    } else {
        Err((0..n).filter(|&i| indegree[i] > 0).collect())
    }
}

/// Reorder stages given with arbitrary dependency indices into the backward-index form.
pub(crate) fn reorder(stages: Vec<TraceStage>, order: &[usize]) -> Vec<TraceStage> {
    let mut new_index = vec![0usize; stages.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut slots: Vec<Option<TraceStage>> = stages.into_iter().map(Some).collect();
    order
        .iter()
        .map(|&old| {
            let mut s = slots[old].take().expect("each stage appears once in a topological order");
            s.after = s.after.iter().map(|&d| new_index[d]).collect();
            s.after.sort_unstable();
            s
        })
        .collect()
}

/// Turn trace jobs into one-run workflows under the options.
pub(crate) fn workflows(mut jobs: Vec<TraceJob>, options: &ImportOptions) -> Vec<Workflow> {
    jobs.sort_by(|a, b| a.submit_ms.cmp(&b.submit_ms).then_with(|| a.name.cmp(&b.name)));
    let first = jobs.first().map_or(0, |j| j.submit_ms);
    let scale = if options.time_scale > 0.0 { options.time_scale } else { 1.0 };
    let mut rng = Rng::new(options.seed);
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        let copies = copies(options.load_scale, &mut rng);
        if copies == 0 {
            continue;
        }
        let queue = job
            .queue_keys
            .iter()
            .find_map(|k| options.queue_map.get(k))
            .cloned()
            .unwrap_or_else(|| options.queue.clone());
        let tier = tier_of(&queue, options, &mut rng);
        let at = Time(((job.submit_ms - first).max(0) as f64 / scale).round() as u64);
        let template = JobTemplate {
            name: job.name.clone(),
            after: Vec::new(),
            stages: job
                .stages
                .into_iter()
                .map(|s| Stage {
                    name: s.name,
                    after: s.after,
                    tasks: s.tasks,
                    resources: s.resources,
                    duration: s.duration,
                    failure_probability: 0.0,
                })
                .collect(),
        };
        let slo = options.slo_factor.map(|f| {
            let ms = (template.critical_path_secs() * f * 1000.0).ceil().max(1000.0);
            Duration::from_millis(ms as u64)
        });
        for copy in 0..copies {
            let name = if copy == 0 { job.name.clone() } else { format!("{}#{}", job.name, copy + 1) };
            out.push(Workflow {
                name,
                queue: queue.clone(),
                tier,
                slo,
                priority: None,
                user: job.user.clone(),
                arrival: Arrival::At(vec![at]),
                jobs: vec![template.clone()],
            });
        }
    }
    out
}

/// How many copies of a job `load_scale` asks for: its integer part, plus one more with the
/// probability of its fractional part.
fn copies(load_scale: f64, rng: &mut Rng) -> u32 {
    if !(load_scale > 0.0) {
        return 0;
    }
    let whole = load_scale.floor();
    let extra = u32::from(rng.unit() < load_scale - whole);
    whole as u32 + extra
}

/// A leaf named `tier1`…`tier3` decides the tier; otherwise the seeded mix does.
fn tier_of(queue: &QueuePath, options: &ImportOptions, rng: &mut Rng) -> u8 {
    if let Some(t) = queue.name().strip_prefix("tier").and_then(|t| t.parse::<u8>().ok()) {
        if (1..=3).contains(&t) {
            return t;
        }
    }
    let total: f64 = options.tier_mix.iter().map(|w| w.max(0.0)).sum();
    if total <= 0.0 {
        return 3;
    }
    let mut x = rng.unit() * total;
    for (i, w) in options.tier_mix.iter().enumerate() {
        x -= w.max(0.0);
        if x < 0.0 {
            return i as u8 + 1;
        }
    }
    3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topological_order_and_cycles() {
        assert_eq!(topological(&[vec![2], vec![], vec![1]]), Ok(vec![1, 2, 0]));
        assert_eq!(topological(&[vec![], vec![2], vec![1]]), Err(vec![1, 2]));
    }

    #[test]
    fn the_tier_mix_follows_its_weights() {
        let options = ImportOptions { tier_mix: [10.0, 25.0, 65.0], ..ImportOptions::default() };
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 3];
        for _ in 0..10_000 {
            counts[tier_of(&options.queue, &options, &mut rng) as usize - 1] += 1;
        }
        assert!((900..1100).contains(&counts[0]), "{counts:?}");
        assert!((2300..2700).contains(&counts[1]), "{counts:?}");
        assert!((6300..6700).contains(&counts[2]), "{counts:?}");
    }

    #[test]
    fn a_queue_named_for_a_tier_sets_the_tier() {
        let options = ImportOptions::default();
        let q = QueuePath::parse("root.ads.tier2").expect("path");
        assert_eq!(tier_of(&q, &options, &mut Rng::new(1)), 2);
    }

    #[test]
    fn load_scale_keeps_replicates_or_drops() {
        let mut rng = Rng::new(3);
        assert_eq!(copies(2.0, &mut rng), 2);
        assert_eq!(copies(0.0, &mut rng), 0);
        let kept: u32 = (0..10_000).map(|_| copies(0.3, &mut rng)).sum();
        assert!((2800..3200).contains(&kept), "{kept}");
    }
}
