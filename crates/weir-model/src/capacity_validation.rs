//! Capacity mode's rules of `cluster.yaml`, applied after the tree is resolved as in fair mode:
//! every queue gets its capacity settings ([`CapacityQueue`]), and its guarantee and cap become
//! the queue's `min` and `max`. Fair-mode settings in a capacity-mode file (and the reverse)
//! are errors that name the setting to use instead, so that nothing is silently ignored.

use crate::capacity::{
    absolute, sibling_fractions, CapacityQueue, CapacitySpec, LeafOrdering, QueueState,
    DEFAULT_MAX_AM_PERCENT, DEFAULT_MAX_APPLICATIONS,
};
use crate::cluster::{CapacityPreemption, Limit, QueueConfig, QueueIndex};
use crate::cluster_file::{ClusterFile, Mode, Policy, PreemptionSpec, QueueSpec};
use crate::error::Problem;
use crate::resources::Resources;

/// YARN compares a level's capacity sum with 100% within this (ParentQueue's `PRECISION`,
/// 0.0005 of the parent), in percent.
const SUM_PRECISION: f64 = 0.05;

/// What the resolution of one level needs from the level above.
#[derive(Clone, Copy)]
struct Above {
    /// Fraction of the cluster (percent and weight mode).
    capacity: f64,
    max_capacity: f64,
    /// The parent's resources in absolute mode.
    absolute: Option<Resources>,
    state: QueueState,
}

struct Walk<'a> {
    problems: &'a mut Vec<Problem>,
    queues: &'a mut [QueueConfig],
    /// The next queue in depth-first order (the order `queues` was built in).
    next: QueueIndex,
    max_applications: u32,
    max_am_percent: f64,
    total: Resources,
}

impl Walk<'_> {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { path: path.into(), message: message.into() });
    }
}

/// Check the mode-specific fields of `raw` and, in capacity mode, resolve every queue's
/// capacity settings into `queues` (built depth-first from `raw.queues`).
pub(crate) fn apply(
    raw: &ClusterFile,
    queues: &mut [QueueConfig],
    total: Resources,
    problems: &mut Vec<Problem>,
) {
    let s = &raw.scheduler;
    if s.mode == Mode::Fair {
        for (field, set) in [
            ("max_applications", s.max_applications.is_some()),
            ("max_am_percent", s.max_am_percent.is_some()),
            ("node_labels", !s.node_labels.is_empty()),
        ] {
            if set {
                problems.push(Problem {
                    path: format!("scheduler.{field}"),
                    message: "a capacity-mode setting; set scheduler.mode: capacity to use it".into(),
                });
            }
        }
        fair_mode_fields(problems, "queues", &raw.queues);
        if let Some(p) = &s.preemption {
            for (field, set) in [
                ("monitoring_interval", p.monitoring_interval.is_some()),
                ("max_ignored_over_capacity", p.max_ignored_over_capacity.is_some()),
                ("total_preemption_per_round", p.total_preemption_per_round.is_some()),
                ("natural_termination_factor", p.natural_termination_factor.is_some()),
                ("max_wait_before_kill", p.max_wait_before_kill.is_some()),
            ] {
                if set {
                    problems.push(Problem {
                        path: format!("scheduler.preemption.{field}"),
                        message:
                            "a capacity-mode preemption setting; set scheduler.mode: capacity to use it \
                                  (fair mode's kill wait is kill_wait)"
                                .into(),
                    });
                }
            }
        }
        return;
    }
    if let Some(p) = &s.preemption {
        capacity_mode_preemption(p, problems);
    }
    let max_am_percent = s.max_am_percent.unwrap_or(DEFAULT_MAX_AM_PERCENT);
    if !(max_am_percent > 0.0 && max_am_percent <= 1.0) {
        problems.push(Problem {
            path: "scheduler.max_am_percent".into(),
            message: format!("{max_am_percent} is not a fraction in (0, 1]"),
        });
    }
    let mut walk = Walk {
        problems,
        queues,
        next: 1,
        max_applications: s.max_applications.unwrap_or(DEFAULT_MAX_APPLICATIONS),
        max_am_percent,
        total,
    };
    let root = Above { capacity: 1.0, max_capacity: 1.0, absolute: None, state: QueueState::Running };
    walk.queues[0].capacity = Some(CapacityQueue {
        configured: None,
        configured_max: None,
        absolute_capacity: Some(1.0),
        absolute_max_capacity: Some(1.0),
        user_limit_factor: 1.0,
        min_user_percent: 100.0,
        user_weights: Default::default(),
        queue_priority: 0,
        max_applications: walk.max_applications,
        max_parallel_apps: None,
        max_am_percent,
        state: QueueState::Running,
        ordering: LeafOrdering::Fifo,
        size_based_weight: false,
        labels: Default::default(),
        default_label: None,
    });
    level(&mut walk, 0, "queues", &raw.queues, root);
    crate::capacity_labels::apply(raw, queues, problems);
}

/// Capacity mode's proportional-preemption settings, YARN's defaults where not set.
pub(crate) fn capacity_preemption(p: &PreemptionSpec) -> CapacityPreemption {
    let d = CapacityPreemption::default();
    CapacityPreemption {
        monitoring_interval: p.monitoring_interval.unwrap_or(d.monitoring_interval),
        max_ignored_over_capacity: p.max_ignored_over_capacity.unwrap_or(d.max_ignored_over_capacity),
        total_preemption_per_round: p.total_preemption_per_round.unwrap_or(d.total_preemption_per_round),
        natural_termination_factor: p.natural_termination_factor.unwrap_or(d.natural_termination_factor),
    }
}

/// `scheduler.preemption` in capacity mode: fair mode's settings name their capacity-mode
/// equivalents; the proportional policy's are checked.
fn capacity_mode_preemption(p: &PreemptionSpec, problems: &mut Vec<Problem>) {
    let mut problem = |field: &str, message: String| {
        problems.push(Problem { path: format!("scheduler.preemption.{field}"), message });
    };
    for (field, set, instead) in [
        ("kill_wait", p.kill_wait.is_some(), "max_wait_before_kill"),
        (
            "utilization_threshold",
            p.utilization_threshold.is_some(),
            "max_ignored_over_capacity (the proportional policy looks at every queue's guarantee, not at \
             utilization)",
        ),
        ("fair_share_preemption_timeout", p.fair_share_preemption_timeout.is_some(), "monitoring_interval"),
        (
            "fair_share_preemption_threshold",
            p.fair_share_preemption_threshold.is_some(),
            "max_ignored_over_capacity",
        ),
        ("min_share_preemption_timeout", p.min_share_preemption_timeout.is_some(), "monitoring_interval"),
    ] {
        if set {
            problem(field, format!("a fair-mode preemption setting; in capacity mode use {instead}"));
        }
    }
    if p.monitoring_interval.is_some_and(|d| d.0 == 0) {
        problem("monitoring_interval", "must be longer than 0s".into());
    }
    if let Some(v) = p.max_ignored_over_capacity.filter(|v| !(v.is_finite() && *v >= 0.0)) {
        problem("max_ignored_over_capacity", format!("{v} is not a fraction ≥ 0"));
    }
    for (field, v) in [
        ("total_preemption_per_round", p.total_preemption_per_round),
        ("natural_termination_factor", p.natural_termination_factor),
    ] {
        if let Some(v) = v.filter(|v| !(*v > 0.0 && *v <= 1.0)) {
            problem(field, format!("{v} is not a fraction in (0, 1]"));
        }
    }
}

/// A capacity-mode field set in a fair-mode file.
fn fair_mode_fields(problems: &mut Vec<Problem>, path: &str, specs: &[QueueSpec]) {
    for spec in specs {
        let here = format!("{path}.{}", spec.name);
        let set = [
            ("capacity", spec.capacity.is_some()),
            ("max_capacity", spec.max_capacity.is_some()),
            ("user_limit_factor", spec.user_limit_factor.is_some()),
            ("min_user_percent", spec.min_user_percent.is_some()),
            ("user_weights", !spec.user_weights.is_empty()),
            ("max_applications", spec.max_applications.is_some()),
            ("max_parallel_apps", spec.max_parallel_apps.is_some()),
            ("max_am_percent", spec.max_am_percent.is_some()),
            ("state", spec.state.is_some()),
            ("ordering", spec.ordering.is_some()),
            ("size_based_weight", spec.size_based_weight.is_some()),
            ("accessible_labels", spec.accessible_labels.is_some()),
            ("default_label", spec.default_label.is_some()),
            ("disable_preemption", spec.disable_preemption.is_some()),
        ];
        for (field, _) in set.iter().filter(|(_, s)| *s) {
            problems.push(Problem {
                path: format!("{here}.{field}"),
                message: "a capacity-mode setting; set scheduler.mode: capacity to use it (fair mode writes \
                          allow_preemption_from)"
                    .into(),
            });
        }
        fair_mode_fields(problems, &format!("{here}.children"), &spec.children);
    }
}

/// A fair-mode field set in a capacity-mode file, with what to write instead.
fn capacity_mode_fields(walk: &mut Walk, here: &str, spec: &QueueSpec) {
    let set = [
        ("weight", spec.weight.is_some(), "capacity (a weight is written `capacity: 3w`)"),
        ("min", spec.min.is_some(), "capacity"),
        ("max", spec.max.is_some(), "max_capacity"),
        ("max_running_apps", spec.max_running_apps.is_some(), "max_parallel_apps"),
        ("max_am_share", spec.max_am_share.is_some(), "max_am_percent"),
        ("policy", spec.policy.is_some(), "ordering (fifo or fair) on leaves"),
        ("job_order", spec.job_order.is_some(), "ordering: fifo (job priority, then submit time)"),
        (
            "fair_share_preemption_timeout",
            spec.fair_share_preemption_timeout.is_some(),
            "the queue's capacity (the proportional policy has no per-queue timeout; it looks every scheduler.preemption.monitoring_interval)",
        ),
        (
            "fair_share_preemption_threshold",
            spec.fair_share_preemption_threshold.is_some(),
            "the queue's capacity (the proportional policy has no per-queue timeout; it looks every scheduler.preemption.monitoring_interval)",
        ),
        (
            "min_share_preemption_timeout",
            spec.min_share_preemption_timeout.is_some(),
            "the queue's capacity (the proportional policy has no per-queue timeout; it looks every scheduler.preemption.monitoring_interval)",
        ),
    ];
    for (field, _, instead) in set.iter().filter(|(_, s, _)| *s) {
        walk.problem(
            format!("{here}.{field}"),
            format!("a fair-mode setting; in capacity mode use {instead}"),
        );
    }
}

/// The children of one queue: their capacities checked together, then each resolved.
fn level(walk: &mut Walk, parent: QueueIndex, path: &str, specs: &[QueueSpec], above: Above) {
    if specs.is_empty() {
        return;
    }
    let parent_path = walk.queues[parent].path.clone();
    let configured: Vec<Option<&CapacitySpec>> = specs.iter().map(|s| s.capacity.as_ref()).collect();
    // Missing capacities first: YARN has no default ("Illegal capacity of -1.0").
    let mut complete = true;
    for spec in specs.iter().filter(|s| s.capacity.is_none()) {
        complete = false;
        walk.problem(
            format!("{path}.{}.capacity", spec.name),
            "capacity mode needs a capacity on every queue: a percent of the parent such as 40 (siblings \
             sum to 100), a weight such as 1w, or resources such as {cpu: 40000, memory: 160g}",
        );
    }
    let absolute_mode = configured.iter().any(|c| matches!(c, Some(CapacitySpec::Absolute(_))));
    let fractions = if !complete {
        vec![0.0; specs.len()]
    } else if absolute_mode {
        if !configured.iter().all(|c| matches!(c, Some(CapacitySpec::Absolute(_))))
            || (parent != 0 && above.absolute.is_none())
        {
            walk.problem(
                path,
                format!(
                    "{parent_path}'s children mix absolute resources with percents or weights (or sit under a \
                     queue with a percent): in capacity mode the tree is written in absolute resources \
                     throughout, or in percents and weights"
                ),
            );
            vec![0.0; specs.len()]
        } else {
            let pool = above.absolute.unwrap_or(walk.total);
            let sum = configured.iter().fold(Resources::ZERO, |a, c| match c {
                Some(CapacitySpec::Absolute(r)) => a + absolute(r),
                _ => a,
            });
            if !sum.fits_in(&pool) {
                walk.problem(
                    path,
                    format!(
                        "the capacities of {parent_path}'s children add up to {sum}, more than its {pool}"
                    ),
                );
            }
            configured
                .iter()
                .map(|c| match c {
                    Some(CapacitySpec::Absolute(r)) if pool.memory > 0 => {
                        absolute(r).memory as f64 / pool.memory as f64
                    }
                    _ => 0.0,
                })
                .collect()
        }
    } else if above.absolute.is_some() {
        walk.problem(
            path,
            format!("{parent_path} has an absolute capacity, so its children need absolute resources too"),
        );
        vec![0.0; specs.len()]
    } else {
        match sibling_fractions(&configured) {
            None => {
                let kinds: Vec<String> = specs
                    .iter()
                    .filter_map(|s| Some(format!("{} ({})", s.name, s.capacity.as_ref()?.kind())))
                    .collect();
                walk.problem(
                    path,
                    format!(
                        "{parent_path}'s children mix capacity modes: {}; siblings use one mode, percents or weights",
                        kinds.join(", ")
                    ),
                );
                vec![0.0; specs.len()]
            }
            Some(f) => {
                let mut bad = false;
                for (spec, c) in specs.iter().zip(&configured) {
                    match c {
                        Some(CapacitySpec::Percent(p)) if !(0.0..=100.0).contains(p) => {
                            bad = true;
                            walk.problem(
                                format!("{path}.{}.capacity", spec.name),
                                format!("{p} is not a percent in [0, 100]"),
                            );
                        }
                        Some(CapacitySpec::Weight(w)) if !(w.is_finite() && *w >= 0.0) => {
                            bad = true;
                            walk.problem(
                                format!("{path}.{}.capacity", spec.name),
                                format!("{w}w is not a weight ≥ 0"),
                            );
                        }
                        _ => {}
                    }
                }
                if !bad && matches!(configured[0], Some(CapacitySpec::Percent(_))) {
                    let sum: f64 = configured
                        .iter()
                        .map(|c| if let Some(CapacitySpec::Percent(p)) = c { *p } else { 0.0 })
                        .sum();
                    // YARN lets the children of a queue with no capacity all have none.
                    let zero_ok = sum == 0.0 && above.capacity == 0.0;
                    if (sum - 100.0).abs() > SUM_PRECISION && !zero_ok {
                        walk.problem(
                            path,
                            format!(
                                "the capacities of {parent_path}'s children add up to {}, not 100: in capacity mode \
                                 the percents of siblings sum to 100 at every level",
                                round6(sum)
                            ),
                        );
                    }
                }
                f
            }
        }
    };
    for (i, spec) in specs.iter().enumerate() {
        let here = format!("{path}.{}", spec.name);
        let ix = walk.next;
        walk.next += 1;
        let below = queue(walk, ix, &here, spec, above, fractions[i]);
        level(walk, ix, &format!("{here}.children"), &spec.children, below);
    }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// One queue's capacity settings, resolved into `walk.queues[ix]`; what its children need.
fn queue(
    walk: &mut Walk,
    ix: QueueIndex,
    here: &str,
    spec: &QueueSpec,
    above: Above,
    fraction: f64,
) -> Above {
    capacity_mode_fields(walk, here, spec);
    let leaf = spec.children.is_empty();
    let capacity = above.capacity * fraction;
    let own_absolute = match &spec.capacity {
        Some(CapacitySpec::Absolute(r)) => Some(absolute(r)),
        _ => None,
    };
    // max_capacity: a percent of the parent's max (YARN's absolute max = parent's × percent),
    // or resources; never below the capacity.
    let (max_capacity, max_absolute) = match (&spec.max_capacity, own_absolute) {
        (None, _) => (above.max_capacity, None),
        (Some(CapacitySpec::Percent(p)), None) => {
            if !(*p > 0.0 && *p <= 100.0) {
                walk.problem(format!("{here}.max_capacity"), format!("{p} is not a percent in (0, 100]"));
            } else if let Some(CapacitySpec::Percent(c)) = &spec.capacity {
                if p < c {
                    walk.problem(
                        format!("{here}.max_capacity"),
                        format!(
                            "max_capacity {p} is below capacity {c}: a queue's max is at least its capacity"
                        ),
                    );
                }
            }
            (above.max_capacity * p / 100.0, None)
        }
        (Some(CapacitySpec::Absolute(m)), Some(c)) => {
            let m = absolute(m);
            if !c.fits_in(&m) {
                walk.problem(
                    format!("{here}.max_capacity"),
                    format!("max_capacity {m} is below capacity {c}: a queue's max is at least its capacity"),
                );
            }
            (above.max_capacity, Some(m))
        }
        (Some(other), _) => {
            walk.problem(
                format!("{here}.max_capacity"),
                format!(
                    "{} does not go with this queue's capacity: a percent or weight capacity takes a percent \
                     max_capacity, an absolute one takes resources",
                    other.kind()
                ),
            );
            (above.max_capacity, None)
        }
    };
    let user_limit_factor = spec.user_limit_factor.unwrap_or(1.0);
    if !((user_limit_factor > 0.0 && user_limit_factor.is_finite()) || user_limit_factor == -1.0) {
        walk.problem(
            format!("{here}.user_limit_factor"),
            format!("{user_limit_factor} is not a factor > 0 (or -1 for no user limit but the queue's max)"),
        );
    }
    let min_user_percent = spec.min_user_percent.unwrap_or(100.0);
    if !(min_user_percent > 0.0 && min_user_percent <= 100.0) {
        walk.problem(
            format!("{here}.min_user_percent"),
            format!("{min_user_percent} is not a percent in (0, 100]"),
        );
    }
    for (user, w) in &spec.user_weights {
        if !(w.is_finite() && *w > 0.0) {
            walk.problem(format!("{here}.user_weights.{user}"), format!("{w} is not a weight > 0"));
        }
    }
    let max_am_percent = spec.max_am_percent.unwrap_or(walk.max_am_percent);
    if let Some(p) = spec.max_am_percent.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
        walk.problem(format!("{here}.max_am_percent"), format!("{p} is not a fraction in (0, 1]"));
    }
    let ordering = spec.ordering.unwrap_or_default();
    if spec.size_based_weight.is_some() && ordering != LeafOrdering::Fair {
        walk.problem(
            format!("{here}.size_based_weight"),
            "applies to ordering: fair only (YARN's ordering-policy.fair.enable-size-based-weight); set \
             ordering: fair on this leaf or remove it",
        );
    }
    if !leaf {
        let leaf_only = [
            ("user_limit_factor", spec.user_limit_factor.is_some()),
            ("min_user_percent", spec.min_user_percent.is_some()),
            ("user_weights", !spec.user_weights.is_empty()),
            ("max_applications", spec.max_applications.is_some()),
            ("max_am_percent", spec.max_am_percent.is_some()),
            ("ordering", spec.ordering.is_some()),
            ("size_based_weight", spec.size_based_weight.is_some()),
        ];
        for (field, _) in leaf_only.iter().filter(|(_, s)| *s) {
            walk.problem(
                format!("{here}.{field}"),
                "applies to leaf queues, where jobs run; move it to this queue's leaves",
            );
        }
    }
    let state = match (spec.state, above.state) {
        (Some(QueueState::Running), QueueState::Stopped) => {
            walk.problem(
                format!("{here}.state"),
                "the parent is stopped, so this queue cannot run (YARN refuses a running child of a stopped queue)",
            );
            QueueState::Stopped
        }
        (Some(s), _) => s,
        (None, s) => s,
    };
    let absolute_share = match own_absolute {
        Some(r) if walk.total.memory > 0 => r.memory as f64 / walk.total.memory as f64,
        Some(_) => 0.0,
        None => capacity,
    };
    let max_applications =
        spec.max_applications.unwrap_or((f64::from(walk.max_applications) * absolute_share) as u32);
    let q = &mut walk.queues[ix];
    q.weight = fraction;
    (q.min, q.max) = match own_absolute {
        Some(r) => (Limit::Absolute(r), Limit::Absolute(max_absolute.unwrap_or(Resources::UNBOUNDED))),
        None => (Limit::Percent(capacity * 100.0), Limit::Percent(max_capacity * 100.0)),
    };
    q.max_running_apps = spec.max_parallel_apps;
    q.am_share = leaf.then_some(max_am_percent);
    // A leaf's job order: fifo is weir's `priority` policy (priority, submit time, id), fair
    // its `fair` one (memory used, submit time, id), as FairOrderingPolicy orders apps.
    q.policy = match (leaf, ordering) {
        (true, LeafOrdering::Fifo) => Policy::Priority,
        (true, LeafOrdering::Fair) | (false, _) => Policy::Fair,
    };
    q.capacity = Some(CapacityQueue {
        configured: spec.capacity.clone(),
        configured_max: spec.max_capacity.clone(),
        absolute_capacity: own_absolute.is_none().then_some(capacity),
        absolute_max_capacity: max_absolute.is_none().then_some(max_capacity),
        user_limit_factor,
        min_user_percent,
        user_weights: spec.user_weights.clone(),
        queue_priority: spec.priority.unwrap_or(0),
        max_applications,
        max_parallel_apps: spec.max_parallel_apps,
        max_am_percent,
        state,
        ordering,
        size_based_weight: spec.size_based_weight.unwrap_or(false),
        labels: Default::default(),
        default_label: None,
    });
    Above { capacity, max_capacity, absolute: own_absolute, state }
}
