//! Validation of a workload file against a cluster: every problem collected, each at its dotted
//! path (`workflows.rollup.jobs.extract.stages.reduce.after`), and the job and stage lists put
//! in a topological order.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::{not_a_tier, ClusterConfig, QueueConfig, TIERS};
use crate::dag::topological_order;
use crate::error::Problem;
use crate::placement::{leaf, missing, project_name};
use crate::queue_path::QueuePath;
use crate::resources::{ResourceKind, Resources};
use crate::time::{Duration, Time};
use crate::workload::{Arrival, Distribution, JobTemplate, Stage, Workflow, Workload, MIN_PERIOD};
use crate::workload_file::{
    ArrivalsSpec, DistributionSpec, JobSpec, LogNormalSpec, SparkSpec, StageSpec, WorkflowSpec, WorkloadFile,
};

/// The standard normal's 99th percentile: a log-normal's p99 is `exp(mu + Z99 · sigma)`.
const Z99: f64 = 2.326348;

/// The tier of a workflow that neither says nor gets one from its queue: the least critical.
const DEFAULT_TIER: u8 = 3;

/// Where a workflow placed by project goes when no placement rule matches.
const DEFAULT_RULE: &str = "root.<project>.tier<N>";

const NO_PLACEMENT: &str = "the workflow has no `queue` (a leaf such as root.ads.ranking.tier1) \
                            or `project` (such as ads.ranking, placed by the cluster's rules)";

pub(crate) struct Validator<'c> {
    pub(crate) cluster: &'c ClusterConfig,
    /// A live run (`weir serve`): stages need a `command`, `duration` is optional.
    pub(crate) live: bool,
    pub(crate) problems: Vec<Problem>,
}

impl<'c> Validator<'c> {
    pub(crate) fn new(cluster: &'c ClusterConfig) -> Self {
        Validator { cluster, live: false, problems: Vec::new() }
    }

    pub(crate) fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { path: path.into(), message: message.into() });
    }

    pub(crate) fn workload(&mut self, raw: &WorkloadFile) -> Workload {
        if raw.version != 1 {
            self.problem(
                "version",
                format!("unsupported version {}; this weir reads version 1", raw.version),
            );
        }
        if raw.workflows.is_empty() {
            self.problem("workflows", "the workload has no workflows; add at least one");
        }
        let mut seen = BTreeSet::new();
        let mut workflows = Vec::new();
        for spec in &raw.workflows {
            let here = format!("workflows.{}", display_name(&spec.name));
            self.name(&here, "workflow", &spec.name, &mut seen);
            workflows.push(self.workflow(&here, spec));
        }
        Workload { workflows }
    }

    /// A name must be usable in a dotted path and unique in its list.
    fn name(&mut self, here: &str, kind: &str, name: &str, seen: &mut BTreeSet<String>) {
        if name.is_empty()
            || name.contains(['.', '[', ']'])
            || name.contains(char::is_whitespace)
            || name.contains(char::is_control)
            || name.starts_with(crate::FORMULA_STARTS)
        {
            self.problem(
                format!("{here}.name"),
                format!(
                    "`{}` is not a {kind} name: use a non-empty name without dots, brackets, spaces or \
                     control characters, not starting with =, +, - or @ (names go into CSV files that \
                     spreadsheets open, and into tasks' environment)",
                    name.escape_debug()
                ),
            );
        } else if !seen.insert(name.to_string()) {
            self.problem(
                format!("{here}.name"),
                format!("another {kind} in this list is also named `{name}`"),
            );
        }
    }

    fn workflow(&mut self, here: &str, spec: &WorkflowSpec) -> Workflow {
        let (queue, tier) = self.placement(here, spec);
        if spec.slo == Some(Duration::ZERO) {
            self.problem(format!("{here}.slo"), "must be positive (leave it out for no SLO)");
        }
        if spec.guarantee.is_some() && spec.slo.is_none() {
            self.problem(
                format!("{here}.guarantee"),
                "jockey keeps a deadline: give the workflow an `slo` (the deadline of each run)",
            );
        }
        let user = match &spec.user {
            Some(u) if u.trim().is_empty() => {
                self.problem(
                    format!("{here}.user"),
                    "must not be empty (leave it out to run as the workflow's name)",
                );
                u.clone()
            }
            Some(u) => u.clone(),
            None => spec.name.clone(),
        };
        let arrival = self.arrival(here, spec);
        if spec.jobs.is_empty() {
            self.problem(format!("{here}.jobs"), "a workflow needs at least one job");
        }
        let jobs = self.jobs(&format!("{here}.jobs"), &spec.name, &spec.jobs);
        Workflow {
            name: spec.name.clone(),
            queue,
            tier,
            slo: spec.slo,
            priority: spec.priority,
            user,
            arrival,
            jobs,
        }
    }

    /// The workflow's leaf queue and tier.
    fn placement(&mut self, here: &str, spec: &WorkflowSpec) -> (QueuePath, u8) {
        let tier = match spec.tier {
            Some(t) if !TIERS.contains(&t) => {
                self.problem(format!("{here}.tier"), not_a_tier(t));
                None
            }
            t => t,
        };
        // `via` says how the leaf was chosen, for a tier mismatch's message.
        let (leaf, via) = match (&spec.queue, &spec.project) {
            (Some(_), Some(_)) => {
                self.problem(format!("{here}.project"), "give either `queue` or `project`, not both");
                (None, String::new())
            }
            (None, None) => {
                self.problem(here, NO_PLACEMENT);
                (None, String::new())
            }
            (Some(q), None) => match leaf(&self.cluster.queues, q) {
                Ok(l) => (Some(l), String::new()),
                Err(message) => {
                    self.problem(format!("{here}.queue"), message);
                    (None, String::new())
                }
            },
            (None, Some(p)) => match self.by_project(here, p, tier.unwrap_or(DEFAULT_TIER)) {
                Some((l, via)) => (Some(l), via),
                None => (None, String::new()),
            },
        };
        let queue = leaf.map(|l| l.path.clone()).unwrap_or_else(QueuePath::root);
        let queue_tier = leaf.and_then(|l| l.tier);
        if let (Some(t), Some(qt)) = (tier, queue_tier) {
            if t != qt {
                self.problem(
                    format!("{here}.tier"),
                    format!("tier {t} does not match the workflow's queue {queue}, a tier-{qt} queue{via}"),
                );
            }
        }
        (queue, tier.or(queue_tier).unwrap_or(DEFAULT_TIER))
    }

    /// The leaf the cluster places `project` at `tier` in, and how it chose it.
    fn by_project(&mut self, here: &str, project: &str, tier: u8) -> Option<(&'c QueueConfig, String)> {
        let cluster = self.cluster;
        let Some(project) = project_name(project) else {
            self.problem(
                format!("{here}.project"),
                format!(
                    "`{project}` is not a project: write its queue path without `root`, e.g. ads.ranking"
                ),
            );
            return None;
        };
        let placed = cluster.place(&project, tier);
        let found = cluster.find(&placed.queue).map(|q| &cluster.queues[q]);
        match (placed.rule, found) {
            (Some(i), Some(q)) => Some((q, format!(" (placed there by the cluster's placement[{i}])"))),
            (None, Some(q)) if q.is_leaf() => {
                Some((q, format!(" (placed there by the default rule {DEFAULT_RULE})")))
            }
            (Some(i), None) => {
                // Only a hand-built ClusterConfig gets here: validation checks rule queues.
                let why = missing(&cluster.queues, &placed.queue);
                self.problem(
                    format!("{here}.project"),
                    format!("the cluster's placement[{i}] matches, but {why}"),
                );
                None
            }
            (None, found) => {
                let why = match found {
                    Some(_) => format!("{} is not a leaf queue", placed.queue),
                    None => missing(&cluster.queues, &placed.queue),
                };
                self.problem(
                    format!("{here}.project"),
                    format!(
                        "no placement rule of the cluster matches project `{project}` at tier {tier}, \
                         and the default rule {DEFAULT_RULE} gives {}, but {why}",
                        placed.queue
                    ),
                );
                None
            }
        }
    }

    fn arrival(&mut self, here: &str, spec: &WorkflowSpec) -> Arrival {
        let start = Time(spec.start.unwrap_or(Duration::ZERO).as_millis());
        let given: Vec<&str> = [
            ("every", spec.every.is_some()),
            ("arrivals", spec.arrivals.is_some()),
            ("at", spec.at.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, set)| set.then_some(field))
        .collect();
        if given.len() > 1 {
            self.problem(
                format!("{here}.{}", given[1]),
                format!("`{}` and `{}` both say when runs start; keep one", given[0], given[1]),
            );
        }
        if let Some(every) = spec.every {
            self.period(format!("{here}.every"), every);
            return Arrival::Every { start, every };
        }
        if let Some(ArrivalsSpec::Poisson(p)) = &spec.arrivals {
            self.period(format!("{here}.arrivals.poisson.mean_interval"), p.mean_interval);
            return Arrival::Poisson { start, mean_interval: p.mean_interval };
        }
        if let Some(at) = &spec.at {
            if at.is_empty() {
                self.problem(
                    format!("{here}.at"),
                    "needs at least one time (leave `at` out for one run at `start`)",
                );
            }
            if spec.start.is_some() {
                self.problem(
                    format!("{here}.start"),
                    "`at` gives the run times themselves; `start` applies to `every` and `arrivals` only",
                );
            }
            let mut times: Vec<Time> = at.iter().map(|d| Time(d.as_millis())).collect();
            times.sort();
            return Arrival::At(times);
        }
        Arrival::At(vec![start])
    }

    /// A recurrence period: at least [`MIN_PERIOD`], so that `1ms` written for `1m` is an error
    /// rather than 600 million runs in a week.
    fn period(&mut self, path: String, d: Duration) {
        if d == Duration::ZERO {
            self.problem(path, "must be positive");
        } else if d < MIN_PERIOD {
            self.problem(
                path,
                format!(
                    "{d} is shorter than the shortest period weir accepts, {MIN_PERIOD} \
                     (`ms` is milliseconds: a minute is `1m`)"
                ),
            );
        }
    }

    fn jobs(&mut self, here: &str, workflow: &str, specs: &[JobSpec]) -> Vec<JobTemplate> {
        let list =
            Siblings::new("job", format!("workflow `{workflow}`"), specs.iter().map(|j| j.name.as_str()));
        let mut seen = BTreeSet::new();
        let mut deps = Vec::with_capacity(specs.len());
        let mut jobs = Vec::with_capacity(specs.len());
        for spec in specs {
            let job_here = format!("{here}.{}", display_name(&spec.name));
            self.name(&job_here, "job", &spec.name, &mut seen);
            deps.push(self.after(&job_here, &list, &spec.name, &spec.after));
            if spec.stages.is_empty() {
                self.problem(format!("{job_here}.stages"), "a job needs at least one stage");
            }
            let stages = self.stages(&format!("{job_here}.stages"), spec);
            let gang = spec.gang.unwrap_or(false);
            if gang {
                self.job_gang_fits(&job_here, &stages);
            }
            jobs.push(JobTemplate { name: spec.name.clone(), after: Vec::new(), stages, gang });
        }
        self.arrange(here, &list, &deps, jobs, |j, after| j.after = after)
    }

    /// A job-level gang starts its first stages (those that wait for none) as one gang: they
    /// must fit in the empty cluster together, or the job could never start (issue 18; Slurm
    /// refuses such a job at submission). One task shape: counted against the nodes it may
    /// use; several: their summed demand against the cluster's total (a necessary condition).
    fn job_gang_fits(&mut self, here: &str, stages: &[Stage]) {
        let roots: Vec<&Stage> = stages.iter().filter(|s| s.after.is_empty()).collect();
        let Some(first) = roots.first() else { return };
        let tasks: u64 = roots.iter().map(|s| u64::from(s.tasks)).sum();
        let alike = roots.iter().all(|s| s.resources == first.resources && s.placement == first.placement);
        let problem = if alike {
            let room = self.gang_room(&first.resources, &first.placement);
            (room < tasks).then(|| {
                format!(
                    "its first stages start as one gang of {tasks} tasks of {}, and the nodes they may \
                     use hold at most {room} of them at once: the job could never start",
                    first.resources
                )
            })
        } else {
            let demand = roots.iter().fold(Resources::ZERO, |a, s| {
                a + self.cluster.scheduler.normalize(&s.resources).times(u64::from(s.tasks))
            });
            let total = self.cluster.total_resources();
            (!demand.fits_in(&total)).then(|| {
                format!(
                    "its first stages start as one gang asking for {demand} together, more than the \
                     whole cluster ({total}): the job could never start"
                )
            })
        };
        if let Some(message) = problem {
            self.problem(format!("{here}.gang"), message);
        }
    }

    fn stages(&mut self, here: &str, job: &JobSpec) -> Vec<Stage> {
        let list =
            Siblings::new("stage", format!("job `{}`", job.name), job.stages.iter().map(|s| s.name.as_str()));
        let mut seen = BTreeSet::new();
        let mut deps = Vec::with_capacity(job.stages.len());
        let mut stages = Vec::with_capacity(job.stages.len());
        for spec in &job.stages {
            let stage_here = format!("{here}.{}", display_name(&spec.name));
            self.name(&stage_here, "stage", &spec.name, &mut seen);
            deps.push(self.after(&stage_here, &list, &spec.name, &spec.after));
            stages.push(self.stage(&stage_here, spec));
        }
        self.arrange(here, &list, &deps, stages, |s, after| s.after = after)
    }

    /// Resolve one item's `after` names to indices in its list.
    fn after(&mut self, here: &str, list: &Siblings, own: &str, after: &[String]) -> Vec<usize> {
        let mut deps = Vec::new();
        for dep in after {
            if dep == own {
                self.problem(format!("{here}.after"), format!("`{dep}` cannot come after itself"));
            } else if let Some(&d) = list.index.get(dep.as_str()) {
                if !deps.contains(&d) {
                    deps.push(d);
                }
            } else {
                let (kind, owner) = (list.kind, &list.owner);
                self.problem(
                    format!("{here}.after"),
                    format!(
                        "no {kind} named `{dep}` in {owner}; its {kind}s are {}",
                        list_names(&list.names)
                    ),
                );
            }
        }
        deps
    }

    /// Put `items` in a topological order of `deps` and set each one's `after` to the new
    /// indices, ascending. On a cycle, report it and keep the file's order with only the
    /// dependencies that point backwards (the result is discarded anyway).
    fn arrange<T>(
        &mut self,
        here: &str,
        list: &Siblings,
        deps: &[Vec<usize>],
        items: Vec<T>,
        set_after: impl Fn(&mut T, Vec<usize>),
    ) -> Vec<T> {
        let (kind, names) = (list.kind, &list.names);
        let order = match topological_order(deps) {
            Ok(order) => order,
            Err(cycles) => {
                for cycle in cycles {
                    let first = names[cycle[0]];
                    let rest: Vec<String> = cycle[1..]
                        .iter()
                        .map(|&i| names[i])
                        .chain([first])
                        .map(|n| format!("`{n}`"))
                        .collect();
                    self.problem(
                        format!("{here}.{}.after", display_name(first)),
                        format!(
                            "the {kind}s wait for each other in a cycle: `{first}` waits for {}",
                            rest.join(", which waits for ")
                        ),
                    );
                }
                (0..items.len()).collect()
            }
        };
        let mut new_index = vec![0; items.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(slots.len());
        for &old in &order {
            let mut after: Vec<usize> =
                deps[old].iter().map(|&d| new_index[d]).filter(|&d| d < new_index[old]).collect();
            after.sort_unstable();
            if let Some(mut item) = slots[old].take() {
                set_after(&mut item, after);
                out.push(item);
            }
        }
        out
    }

    fn stage(&mut self, here: &str, spec: &StageSpec) -> Stage {
        if spec.tasks == 0 {
            self.problem(format!("{here}.tasks"), "must be at least 1");
        }
        let resources = spec.resources.or(0);
        let before = self.problems.len();
        let placement = self.task_placement(here, spec, &resources);
        let gang = spec.gang.unwrap_or(false);
        if self.problems.len() > before {
            // An unknown model or label, or a bad fraction: "fits on no node" would only repeat it.
        } else if resources.is_zero() && placement.gpu_milli == 0 {
            self.problem(format!("{here}.resources"), "a task needs some cpu, memory or gpu");
        } else if let Some(message) = self.unplaceable(&resources, &placement) {
            self.problem(format!("{here}.resources"), message);
        } else if let Some(kind) = self.unrepresentable(&resources, spec.tasks) {
            self.problem(
                format!("{here}.tasks"),
                format!(
                    "{} tasks of {resources} ask for more {kind} than 64 bits can count; the scheduler \
                     sums demand exactly, so split the stage or use fewer tasks",
                    spec.tasks
                ),
            );
        } else if gang {
            let room = self.gang_room(&resources, &placement);
            if room < u64::from(spec.tasks) {
                self.problem(
                    format!("{here}.gang"),
                    format!(
                        "a gang of {} tasks of {resources} can never start: all of its tasks start \
                         together, and the nodes it may use hold at most {room} of them at once",
                        spec.tasks
                    ),
                );
            }
        }
        let failure_probability = spec.failure_probability.unwrap_or(0.0);
        if !(0.0..1.0).contains(&failure_probability) {
            self.problem(
                format!("{here}.failure_probability"),
                format!("{failure_probability} is not a probability in [0, 1): a task that always fails never finishes"),
            );
        }
        if spec.walltime == Some(Duration::ZERO) {
            self.problem(format!("{here}.walltime"), "must be positive (leave it out when unknown)");
        }
        let duration = match &spec.duration {
            Some(d) => self.distribution(&format!("{here}.duration"), d),
            None if self.live => Distribution::Fixed(Duration::ZERO),
            None => {
                self.problem(
                    format!("{here}.duration"),
                    "a stage needs a `duration` to be simulated (live runs give a `command` instead)",
                );
                Distribution::Fixed(Duration::ZERO)
            }
        };
        if self.live {
            self.live_task(here, spec);
        }
        Stage {
            name: spec.name.clone(),
            after: Vec::new(),
            tasks: spec.tasks,
            resources,
            duration,
            failure_probability,
            gang,
            walltime: spec.walltime,
            placement,
            recorded_failure: false,
        }
    }

    /// The resource of which a stage's tasks, together, ask for more than can be counted.
    fn unrepresentable(&self, r: &Resources, tasks: u32) -> Option<&'static str> {
        let rounded = self.cluster.scheduler.normalize(r);
        ResourceKind::ALL
            .into_iter()
            .find(|&k| rounded.get(k).checked_mul(u64::from(tasks)).is_none_or(|v| v == u64::MAX))
            .map(ResourceKind::name)
    }

    /// What a live run needs of a stage: a command to run, usable environment names, and a
    /// positive attempt limit.
    fn live_task(&mut self, here: &str, spec: &StageSpec) {
        match (&spec.command, &spec.spark) {
            (None, None) => self.problem(
                format!("{here}.command"),
                "a stage of a live run needs a `command` to run (or `spark:`, a Spark application)",
            ),
            (Some(_), Some(_)) => self.problem(
                format!("{here}.spark"),
                "a stage runs either a `command` or a Spark application (`spark:`), not both",
            ),
            (Some(c), None) if c.trim().is_empty() => {
                self.problem(format!("{here}.command"), "must not be empty")
            }
            (Some(c), None) if c.contains('\0') => {
                self.problem(format!("{here}.command"), "must not contain a NUL byte")
            }
            (Some(_), None) => {}
            (None, Some(app)) => self.spark(&format!("{here}.spark"), app),
        }
        for (name, value) in &spec.env {
            if name.is_empty() || name.contains(['=', '\0']) {
                self.problem(
                    format!("{here}.env"),
                    format!("`{name}` is not an environment variable name (non-empty, no `=`)"),
                );
            } else if value.contains('\0') {
                self.problem(format!("{here}.env.{name}"), "must not contain a NUL byte");
            }
        }
        if spec.max_attempts == Some(0) {
            self.problem(format!("{here}.max_attempts"), "must be at least 1");
        }
        if spec.outputs.len() > crate::stage_io::MAX_OUTPUTS_PER_STAGE {
            self.problem(
                format!("{here}.outputs"),
                format!(
                    "{} outputs: a stage declares at most {} (partitions go in folders under an output)",
                    spec.outputs.len(),
                    crate::stage_io::MAX_OUTPUTS_PER_STAGE
                ),
            );
        }
        let mut parsed = Vec::new();
        for (i, out) in spec.outputs.iter().enumerate() {
            match crate::stage_io::check_uri_template(&out.uri) {
                Ok(_) => parsed.push(i),
                Err(why) => self.problem(format!("{here}.outputs[{i}].uri"), why),
            }
            if let Some(t) = out.size_tolerance.filter(|t| !(0.0..=1.0).contains(t)) {
                self.problem(
                    format!("{here}.outputs[{i}].size_tolerance"),
                    format!("{t} is not between 0 and 1 (a relative difference: 0.01 tolerates 1%)"),
                );
            }
            if out.csv_header.is_some() && out.format != crate::stage_io::OutputFormat::Csv {
                self.problem(
                    format!("{here}.outputs[{i}].csv_header"),
                    format!(
                        "only a csv output has a header line (this one's format is {})",
                        out.format.name()
                    ),
                );
            }
        }
        // Templates one inside the other overlap whatever the run's date and parameters (the
        // submission checks the URIs again once they are filled in).
        let overlap = parsed.iter().enumerate().find_map(|(n, &b)| {
            let tb = spec.outputs[b].uri.as_str();
            parsed[..n]
                .iter()
                .find(|&&a| {
                    spec.outputs[a].uri.starts_with(tb) || tb.starts_with(spec.outputs[a].uri.as_str())
                })
                .map(|&a| (a, b))
        });
        if let Some((a, b)) = overlap {
            self.problem(
                format!("{here}.outputs[{b}].uri"),
                format!(
                    "`{}` overlaps outputs[{a}] `{}`: each output is a prefix of its own (one inside \
                     another would mix their files and manifests)",
                    spec.outputs[b].uri, spec.outputs[a].uri
                ),
            );
        }
        for (i, input) in spec.inputs.iter().enumerate() {
            if let Err(why) = crate::stage_io::check_uri_template(&input.uri) {
                self.problem(format!("{here}.inputs[{i}].uri"), why);
            }
        }
    }

    /// A Spark application: a Python file, or a JVM class with its jar; arguments and
    /// properties `spark-submit` can pass on.
    fn spark(&mut self, here: &str, app: &SparkSpec) {
        let main = app.main.trim();
        let python = main.ends_with(".py");
        if main.is_empty() {
            self.problem(
                format!("{here}.main"),
                "must not be empty: a Python file (`*.py`) or a JVM main class",
            );
        } else if app.main.contains('\0') {
            self.problem(format!("{here}.main"), "must not contain a NUL byte");
        } else if !python && !is_class_name(main) {
            self.problem(
                format!("{here}.main"),
                format!(
                    "`{}` is neither a Python file (ending in `.py`) nor a JVM class name such as \
                     org.example.WordCount",
                    main.escape_debug()
                ),
            );
        }
        match (&app.jar, python) {
            (None, false) if is_class_name(main) => self.problem(
                format!("{here}.jar"),
                format!(
                    "the JVM main class `{main}` needs the application jar that holds it (`jar: app.jar`)"
                ),
            ),
            (Some(_), true) => self.problem(
                format!("{here}.jar"),
                "is for a JVM main class; a Python driver (`main: *.py`) takes no jar",
            ),
            (Some(j), false) if j.trim().is_empty() || j.contains('\0') => {
                self.problem(format!("{here}.jar"), "must be a file path (not empty, no NUL byte)")
            }
            _ => {}
        }
        for (i, a) in app.args.iter().enumerate() {
            if a.contains('\0') {
                self.problem(format!("{here}.args[{i}]"), "must not contain a NUL byte");
            }
        }
        for (key, value) in &app.conf {
            // spark-submit drops a property outside `spark.` with only a warning
            // (SparkSubmitArguments.ignoreNonSparkProperties): refuse it here instead.
            if !key.starts_with("spark.") || key.contains(['=', '\0']) || key.contains(char::is_whitespace) {
                self.problem(
                    format!("{here}.conf"),
                    format!(
                        "`{}` is not a Spark property name (`spark.…`, no `=` or spaces)",
                        key.escape_debug()
                    ),
                );
            } else if key == "spark.master" || key == "spark.submit.deployMode" {
                self.problem(
                    format!("{here}.conf.{key}"),
                    "is set by the cluster's backend (where and how the application runs), not by the stage",
                );
            } else if value.contains('\0') {
                self.problem(format!("{here}.conf.{key}"), "must not contain a NUL byte");
            }
        }
        if app.executors == Some(0) {
            self.problem(
                format!("{here}.executors"),
                "must be at least 1 (leave it out for the backend's default)",
            );
        }
    }

    fn distribution(&mut self, here: &str, spec: &DistributionSpec) -> Distribution {
        let positive = |v: &mut Self, path: String, d: Duration| {
            if d == Duration::ZERO {
                v.problem(path, "must be positive");
            }
        };
        match spec {
            DistributionSpec::Fixed(d) => {
                positive(self, format!("{here}.fixed"), *d);
                Distribution::Fixed(*d)
            }
            DistributionSpec::Uniform(u) => {
                positive(self, format!("{here}.uniform.min"), u.min);
                if u.max < u.min {
                    self.problem(format!("{here}.uniform.max"), format!("{} is below min {}", u.max, u.min));
                }
                Distribution::Uniform { min: u.min, max: u.max }
            }
            DistributionSpec::Exponential(e) => {
                positive(self, format!("{here}.exponential.mean"), e.mean);
                Distribution::Exponential { mean: e.mean }
            }
            DistributionSpec::LogNormal(l) => self.lognormal(&format!("{here}.lognormal"), l),
            DistributionSpec::Empirical(samples) => {
                if samples.is_empty() {
                    self.problem(format!("{here}.empirical"), "needs at least one sample");
                }
                for (i, s) in samples.iter().enumerate() {
                    positive(self, format!("{here}.empirical[{i}]"), *s);
                }
                Distribution::Empirical(samples.as_slice().into())
            }
        }
    }

    fn lognormal(&mut self, here: &str, l: &LogNormalSpec) -> Distribution {
        let unset = Distribution::LogNormal { mu: 0.0, sigma: 0.0 };
        match (l.median, l.p99, l.mu, l.sigma) {
            (Some(median), Some(p99), None, None) => {
                if median == Duration::ZERO {
                    self.problem(format!("{here}.median"), "must be positive");
                    return unset;
                }
                if p99 < median {
                    self.problem(format!("{here}.p99"), format!("{p99} is below the median {median}"));
                    return unset;
                }
                let (ln_median, ln_p99) = (median.as_secs_f64().ln(), p99.as_secs_f64().ln());
                Distribution::LogNormal { mu: ln_median, sigma: (ln_p99 - ln_median) / Z99 }
            }
            (None, None, Some(mu), Some(sigma)) => {
                if !mu.is_finite() {
                    self.problem(format!("{here}.mu"), format!("{mu} is not a finite number"));
                }
                if !(sigma.is_finite() && sigma >= 0.0) {
                    self.problem(format!("{here}.sigma"), format!("{sigma} is not a number ≥ 0"));
                }
                Distribution::LogNormal { mu, sigma }
            }
            _ => {
                let given: Vec<&str> = [
                    ("median", l.median.is_some()),
                    ("p99", l.p99.is_some()),
                    ("mu", l.mu.is_some()),
                    ("sigma", l.sigma.is_some()),
                ]
                .into_iter()
                .filter_map(|(f, set)| set.then_some(f))
                .collect();
                let got = if given.is_empty() {
                    "nothing".to_string()
                } else {
                    format!("`{}`", given.join("`, `"))
                };
                self.problem(
                    here,
                    format!("give either `median` and `p99`, or `mu` and `sigma` (of the log of the duration in seconds); got {got}"),
                );
                unset
            }
        }
    }
}

/// The jobs of a workflow, or the stages of a job: what `after` names refer to.
struct Siblings<'a> {
    kind: &'static str,
    /// "workflow `w`", "job `j`"
    owner: String,
    names: Vec<&'a str>,
    /// Each name's first item.
    index: BTreeMap<&'a str, usize>,
}

impl<'a> Siblings<'a> {
    fn new(kind: &'static str, owner: String, names: impl Iterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.collect();
        let mut index = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            index.entry(*n).or_insert(i);
        }
        Siblings { kind, owner, names, index }
    }
}

fn display_name(name: &str) -> &str {
    if name.is_empty() {
        "<unnamed>"
    } else {
        name
    }
}

/// `` `a`, `b`, `c` `` (at most eight, then a count).
fn list_names(names: &[&str]) -> String {
    let mut text = names.iter().take(8).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if names.len() > 8 {
        text += &format!(" and {} more", names.len() - 8);
    }
    text
}

/// A JVM class name as `--class` takes it: dot-separated Java identifiers (`org.example.Main`,
/// `Main$Inner`).
fn is_class_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
}
