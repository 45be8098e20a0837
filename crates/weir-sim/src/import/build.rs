//! What every importer shares: the trace-neutral job it produces, the ledger of skipped and
//! adjusted rows, line reading, DAG ordering, and the step that turns trace jobs into workflows
//! (re-timing, load scaling, queues, tiers, SLOs).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::BufRead;

use weir_model::{
    Arrival, Distribution, Duration, JobTemplate, QueuePath, Resources, Stage, TaskPlacement, Time, Workflow,
};

use super::{ImportError, ImportOptions, Skipped, Tally};

/// Timestamps past this many milliseconds after the trace's zero are not times but garbage
/// (200 years: epoch-based traces such as Rumen's still fit).
pub(crate) const MAX_TIME_MS: i64 = 200 * 365 * 86_400_000;
/// No batch task runs for a year; a longer span is a broken record.
pub(crate) const MAX_TASK_MS: i64 = 365 * 86_400_000;
/// Every task takes at least this long: traces record whole seconds (or containers that could
/// not have started and stopped in less), and a zero-length task would be an instant no-op.
pub(crate) const MIN_TASK_MS: u64 = 1000;

/// One job as a trace describes it, before options apply.
#[derive(Clone, Debug)]
pub(crate) struct TraceJob {
    pub name: String,
    /// The line (for SLS, the line where the record starts) that introduced the job.
    pub line: u64,
    /// Submission in the trace's own clock, milliseconds.
    pub submit_ms: i64,
    /// Keys for `ImportOptions::queue_map`, highest precedence first (e.g. `queue:3`, `group:7`).
    pub queue_keys: Vec<String>,
    pub user: String,
    /// In topological order (`after` indices point backwards).
    pub stages: Vec<TraceStage>,
    /// The tier the trace itself gives (a QoS class), used unless the leaf is named for one.
    pub tier: Option<u8>,
}

#[derive(Clone, Debug)]
pub(crate) struct TraceStage {
    pub name: String,
    pub after: Vec<usize>,
    pub tasks: u32,
    pub resources: Resources,
    pub duration: Distribution,
    /// All-or-nothing start (an SWF job is a rigid parallel job).
    pub gang: bool,
    /// The run time each task asked for (SWF's requested time), for backfilling.
    pub walltime: Option<Duration>,
    /// A GPU fraction and the nodes the tasks may use.
    pub placement: TaskPlacement,
    /// A recorded failure, replayed as one (`Stage::recorded_failure`).
    pub recorded_failure: bool,
}

impl TraceStage {
    /// A stage of `tasks` identical tasks, placed anywhere, not a gang, with no walltime.
    pub fn new(
        name: String,
        after: Vec<usize>,
        tasks: u32,
        resources: Resources,
        duration: Distribution,
    ) -> TraceStage {
        TraceStage {
            name,
            after,
            tasks,
            resources,
            duration,
            gang: false,
            walltime: None,
            placement: TaskPlacement::default(),
            recorded_failure: false,
        }
    }
}

/// Skipped rows, dropped jobs and rows kept after a repair, by reason. Only the first few line
/// numbers of each reason are kept.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub rows: u64,
    pub skipped: BTreeMap<String, Skipped>,
    pub dropped_jobs: BTreeMap<String, Skipped>,
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

    /// A job the trace names produced nothing (its rows are counted under their own reasons).
    pub fn drop_job(&mut self, line: u64, reason: impl Into<String>) {
        note(&mut self.dropped_jobs, line, 1, reason.into());
    }

    /// The row was kept, but something in it had to be left out or repaired.
    pub fn adjust(&mut self, line: u64, reason: impl Into<String>) {
        self.adjust_many(line, 1, reason);
    }

    pub fn adjust_many(&mut self, line: u64, count: u64, reason: impl Into<String>) {
        note(&mut self.adjusted, line, count, reason.into());
    }
}

/// Count under `reason` and keep the smallest few line numbers, whatever order they come in.
fn note(map: &mut BTreeMap<String, Skipped>, line: u64, count: u64, reason: String) {
    let entry = map.entry(reason).or_default();
    entry.count += count;
    if let Err(at) = entry.first_lines.binary_search(&line) {
        if at < KEEP_LINES {
            entry.first_lines.insert(at, line);
            entry.first_lines.truncate(KEEP_LINES);
        }
    }
}

/// Call `f(line number, line)` for every line; `None` for a line that is not UTF-8. A final
/// line without a newline counts; `\r\n` endings are accepted.
pub(crate) fn each_line(
    file: &str,
    mut reader: impl BufRead,
    mut f: impl FnMut(u64, Option<&str>),
) -> Result<(), ImportError> {
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| ImportError::Read { file: file.to_string(), source })?;
        if read == 0 {
            return Ok(());
        }
        n += 1;
        let mut bytes = &buf[..];
        if let Some(rest) = bytes.strip_suffix(b"\n") {
            bytes = rest;
        }
        if let Some(rest) = bytes.strip_suffix(b"\r") {
            bytes = rest;
        }
        f(n, std::str::from_utf8(bytes).ok());
    }
}

/// A task's duration from a span in milliseconds: at least [`MIN_TASK_MS`]. Says whether it had
/// to be lengthened.
pub(crate) fn task_duration(span_ms: i64) -> (Duration, bool) {
    let ms = u64::try_from(span_ms).unwrap_or(0);
    (Duration::from_millis(ms.max(MIN_TASK_MS)), ms < MIN_TASK_MS)
}

/// SplitMix64: the importers' only randomness (tier mix, load scaling), seeded by the options,
/// so an import is a pure function of its input and options.
#[derive(Debug)]
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

/// A topological order of stages, with the edges that had to go to get one.
#[derive(Debug, PartialEq)]
pub(crate) struct DagOrder {
    /// Old indices in their new order.
    pub order: Vec<usize>,
    /// `(stage, dependency)` edges removed to break cycles.
    pub broken: Vec<(usize, usize)>,
}

/// Order stages so that dependencies come first. `deps[i]` lists the stages stage `i` waits for
/// (self-edges and repeats are removed); `key[i]` orders stages that are ready together (smaller first).
///
/// A cycle cannot be run, so it is broken rather than the job thrown away: when no stage is
/// ready, walk dependencies from the smallest-keyed waiting stage until a stage repeats (that
/// walk closes a cycle), then remove the cycle edge leaving the cycle's smallest-keyed stage.
/// With start times as keys, that is the task that started first: it cannot really have waited
/// for the others. Removed edges are taken out of `deps` and returned.
pub(crate) fn order_dag<K: Ord + Copy>(deps: &mut [Vec<usize>], key: &[K]) -> DagOrder {
    let n = deps.len();
    for (i, ds) in deps.iter_mut().enumerate() {
        ds.retain(|&d| d != i && d < n);
        ds.sort_unstable();
        ds.dedup();
    }
    let mut waiting_on: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependants: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependants[d].push(i);
        }
    }
    let mut placed = vec![false; n];
    let mut ready: BTreeSet<(K, usize)> =
        (0..n).filter(|&i| waiting_on[i] == 0).map(|i| (key[i], i)).collect();
    let mut unplaced: BTreeSet<(K, usize)> = (0..n).map(|i| (key[i], i)).collect();
    let mut order = Vec::with_capacity(n);
    let mut broken = Vec::new();
    while order.len() < n {
        let Some((k, i)) = ready.pop_first() else {
            let Some(&(_, start)) = unplaced.first() else { break };
            let (from, to) = cycle_edge(deps, &placed, key, start);
            deps[from].retain(|&d| d != to);
            dependants[to].retain(|&j| j != from);
            broken.push((from, to));
            waiting_on[from] -= 1;
            if waiting_on[from] == 0 {
                ready.insert((key[from], from));
            }
            continue;
        };
        placed[i] = true;
        unplaced.remove(&(k, i));
        order.push(i);
        for &j in &dependants[i] {
            waiting_on[j] -= 1;
            if waiting_on[j] == 0 {
                ready.insert((key[j], j));
            }
        }
    }
    DagOrder { order, broken }
}

/// From a waiting stage, follow unplaced dependencies until one repeats; return the edge of
/// that cycle that leaves its smallest-keyed stage. Every unplaced stage waits on another
/// unplaced stage when nothing is ready, so the walk always finds one.
fn cycle_edge<K: Ord + Copy>(
    deps: &[Vec<usize>],
    placed: &[bool],
    key: &[K],
    start: usize,
) -> (usize, usize) {
    let next = |i: usize| deps[i].iter().copied().find(|&d| !placed[d]);
    let mut seen_at: BTreeMap<usize, usize> = BTreeMap::new();
    let mut path = Vec::new();
    let mut at = start;
    loop {
        if let Some(&pos) = seen_at.get(&at) {
            let cycle = &path[pos..];
            let from = cycle.iter().copied().min_by_key(|&i| (key[i], i)).unwrap_or(at);
            return (from, next(from).unwrap_or(at));
        }
        seen_at.insert(at, path.len());
        path.push(at);
        match next(at) {
            Some(d) => at = d,
            // Cannot happen when nothing is ready; removing nothing real keeps the loop finite.
            None => return (at, at),
        }
    }
}

/// Reorder stages into the backward-index form, given a topological order of old indices.
pub(crate) fn reorder(stages: Vec<TraceStage>, order: &[usize]) -> Vec<TraceStage> {
    let mut new_index = vec![0usize; stages.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let mut slots: Vec<Option<TraceStage>> = stages.into_iter().map(Some).collect();
    order
        .iter()
        .filter_map(|&old| slots.get_mut(old).and_then(Option::take))
        .map(|mut s| {
            s.after = s.after.iter().map(|&d| new_index[d]).collect();
            s.after.sort_unstable();
            s
        })
        .collect()
}

/// Turn trace jobs into one-run workflows under the options; an error as soon as they would
/// pass `options.max_jobs` or `max_stages`.
pub(crate) fn workflows(
    file: &str,
    mut jobs: Vec<TraceJob>,
    options: &ImportOptions,
    ledger: &mut Ledger,
) -> Result<Vec<Workflow>, ImportError> {
    jobs.sort_by(|a, b| a.submit_ms.cmp(&b.submit_ms).then_with(|| a.name.cmp(&b.name)));
    let mut builder = Builder::new(options);
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        builder.build(file, job, options, ledger, &mut out)?;
    }
    Ok(out)
}

/// What turning trace jobs into workflows carries from one job to the next, in arrival order:
/// the trace's zero (the first job's submission), the seeded draws of copies and tiers, the
/// names given, and the count against the import's limits.
#[derive(Debug)]
pub(crate) struct Builder {
    first: Option<i64>,
    rng: Rng,
    names: Names,
    tally: Tally,
}

impl Builder {
    pub fn new(options: &ImportOptions) -> Builder {
        Builder { first: None, rng: Rng::new(options.seed), names: Names::default(), tally: Tally::default() }
    }

    /// The workflows of one job (none when `load_scale` drops it, several for copies), taken
    /// in arrival order.
    pub fn build(
        &mut self,
        file: &str,
        job: TraceJob,
        options: &ImportOptions,
        ledger: &mut Ledger,
        out: &mut impl Extend<Workflow>,
    ) -> Result<(), ImportError> {
        let first = *self.first.get_or_insert(job.submit_ms);
        let copies = copies(options.load_scale, &mut self.rng);
        if copies == 0 {
            return Ok(());
        }
        self.tally.add(u64::from(copies), job.stages.len() as u64, job.line, file, options)?;
        let queue = job
            .queue_keys
            .iter()
            .find_map(|k| options.queue_map.get(k))
            .cloned()
            .unwrap_or_else(|| options.queue.clone());
        let tier = match (leaf_tier(&queue), job.tier) {
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => tier_of(&queue, options, &mut self.rng),
        };
        let at = Time(((job.submit_ms - first).max(0) as f64 / options.time_scale).round() as u64);
        let template = JobTemplate {
            name: job.name.clone(),
            after: Vec::new(),
            gang: false,
            stages: job
                .stages
                .into_iter()
                .map(|s| Stage {
                    walltime: walltime(options.walltime, s.walltime, &s.duration),
                    name: s.name,
                    after: s.after,
                    tasks: s.tasks,
                    resources: s.resources,
                    duration: s.duration,
                    failure_probability: 0.0,
                    gang: s.gang,
                    placement: s.placement,
                    recorded_failure: s.recorded_failure,
                })
                .collect(),
        };
        let slo = options.slo_factor.map(|f| {
            let ms = (template.critical_path_secs() * f * 1000.0).ceil().max(1000.0);
            Duration::from_millis(ms as u64)
        });
        for copy in 0..copies {
            let wanted = if copy == 0 { job.name.clone() } else { format!("{}#{}", job.name, copy + 1) };
            let name = self.names.unique(wanted);
            if copy == 0 && name != job.name {
                ledger.adjust(job.line, "job name used before: renamed");
            }
            out.extend([Workflow {
                name,
                queue: queue.clone(),
                tier,
                slo,
                priority: None,
                user: job.user.clone(),
                arrival: Arrival::At(vec![at]),
                jobs: vec![template.clone()],
            }]);
        }
        Ok(())
    }
}

/// The workflow names given so far (as 64-bit hashes, so that a trace of millions of jobs
/// does not keep every name), and for each name asked for twice, the next suffix to try. Two
/// names sharing a hash (about one chance in 10^7 over ten million names) cost a needless
/// rename, counted like any other.
#[derive(Debug, Default)]
struct Names {
    taken: HashSet<u64>,
    next_suffix: HashMap<String, u64>,
}

fn name_hash(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    // `DefaultHasher::new` has fixed keys: the same names, the same hashes, every run.
    let mut h = std::hash::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

impl Names {
    /// `name`, or `name~2`, `name~3`, … if it is taken.
    ///
    /// The suffix counter of each name carries on from where the last rename of that name
    /// stopped, so n jobs with one name cost n lookups, not n²/2 (a trace with 20,000 lines of
    /// one SWF job number took 37 s with a counter starting at 2 each time). The loop only
    /// passes suffixes that a job's own name already took (a trace job literally named `a~2`).
    fn unique(&mut self, name: String) -> String {
        if self.taken.insert(name_hash(&name)) {
            return name;
        }
        let k = self.next_suffix.entry(name.clone()).or_insert(2);
        loop {
            let candidate = format!("{name}~{k}");
            *k += 1;
            if self.taken.insert(name_hash(&candidate)) {
                return candidate;
            }
        }
    }
}

/// How many copies of a job `load_scale` asks for: its integer part, plus one more with the
/// probability of its fractional part.
fn copies(load_scale: f64, rng: &mut Rng) -> u32 {
    if load_scale.is_nan() || load_scale <= 0.0 {
        return 0;
    }
    let whole = load_scale.floor();
    let extra = u32::from(rng.unit() < load_scale - whole);
    whole as u32 + extra
}

/// The tier a leaf named `tier1`…`tier3` stands for.
fn leaf_tier(queue: &QueuePath) -> Option<u8> {
    queue.name().strip_prefix("tier").and_then(|t| t.parse::<u8>().ok()).filter(|t| (1..=3).contains(t))
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

/// A task's walltime under `from`: the trace's, or derived from its run time (see
/// [`super::WalltimeFrom`]). Unbounded distributions (exponential, log-normal) get none.
fn walltime(
    from: super::WalltimeFrom,
    trace: Option<Duration>,
    duration: &weir_model::Distribution,
) -> Option<Duration> {
    use weir_model::Distribution as D;
    let longest = match duration {
        D::Fixed(d) => Some(*d),
        D::Uniform { max, .. } => Some(*max),
        D::Empirical(samples) => samples.iter().max().copied(),
        D::Exponential { .. } | D::LogNormal { .. } => None,
    };
    match from {
        super::WalltimeFrom::Trace => trace,
        super::WalltimeFrom::Runtime => longest,
        super::WalltimeFrom::Factor(f) => {
            longest.map(|d| Duration::from_millis((d.as_millis() as f64 * f.max(1.0)).ceil() as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(deps: &[Vec<usize>]) -> DagOrder {
        let mut deps = deps.to_vec();
        let key: Vec<usize> = (0..deps.len()).collect();
        order_dag(&mut deps, &key)
    }

    #[test]
    fn a_dag_comes_out_in_dependency_order() {
        assert_eq!(order(&[vec![2], vec![], vec![1]]), DagOrder { order: vec![1, 2, 0], broken: vec![] });
    }

    #[test]
    fn a_cycle_loses_the_edge_leaving_its_earliest_stage() {
        // 1 → 2 → 1 is a cycle; 0 waits on 1 but is not in it, so its edge stays.
        let got = order(&[vec![1], vec![2], vec![1]]);
        assert_eq!(got.broken, vec![(1, 2)]);
        assert_eq!(got.order, vec![1, 0, 2]);
        // Two separate cycles: one edge each.
        let got = order(&[vec![1], vec![0], vec![3], vec![2]]);
        assert_eq!(got.broken, vec![(0, 1), (2, 3)]);
        assert_eq!(got.order.len(), 4);
    }

    #[test]
    fn a_zero_length_task_takes_a_second() {
        assert_eq!(task_duration(0), (Duration::from_secs(1), true));
        assert_eq!(task_duration(-5), (Duration::from_secs(1), true));
        assert_eq!(task_duration(2500), (Duration::from_millis(2500), false));
    }

    #[test]
    fn lines_are_numbered_and_bad_utf8_is_reported() {
        let mut seen = Vec::new();
        each_line("t", &b"a\r\n\xff\nlast"[..], |n, l| seen.push((n, l.map(str::to_string)))).expect("reads");
        assert_eq!(seen, vec![(1, Some("a".into())), (2, None), (3, Some("last".into()))]);
    }

    #[test]
    fn taken_names_get_a_suffix() {
        let mut names = Names::default();
        assert_eq!(names.unique("a".into()), "a");
        assert_eq!(names.unique("a".into()), "a~2");
        assert_eq!(names.unique("a".into()), "a~3");
        // A job named like a rename keeps its name; the renames step past it.
        assert_eq!(names.unique("b~2".into()), "b~2");
        assert_eq!(names.unique("b".into()), "b");
        assert_eq!(names.unique("b".into()), "b~3");
        assert_eq!(names.unique("a~3".into()), "a~3~2");
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
