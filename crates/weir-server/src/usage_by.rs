//! Usage per project and per user over time, in core-hours per time bucket: per project from
//! the queue usage the worker records (each leaf's average cores over a span, the leaf's
//! project taken from its path), per user from the task attempts of the runs each user
//! submitted (an attempt holds its stage's cores from its start to its end, or to `now` while
//! it runs). A pure function of store rows and `now`.

use std::collections::BTreeMap;

use weir_store::{AttemptSpan, UsageRow};

/// Buckets of an hour for windows up to two days, of a day beyond.
pub fn bucket_ms(window_ms: i64) -> i64 {
    if window_ms <= 2 * 86_400_000 {
        3_600_000
    } else {
        86_400_000
    }
}

/// The bucket starts covering `[since, until)`, on the epoch-aligned grid of `bucket`.
pub fn bucket_starts(since: i64, until: i64, bucket: i64) -> Vec<i64> {
    let first = since.div_euclid(bucket) * bucket;
    (0..).map(|i| first + i * bucket).take_while(|&t| t < until).collect()
}

/// One project's or user's core-hours per bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageSeries {
    pub name: String,
    pub core_hours: Vec<f64>,
    pub total: f64,
}

/// Add `cores` held over `[from, to)` (clipped to `[since, until)`) to `cells`.
fn spread(
    cells: &mut [f64],
    starts: &[i64],
    bucket: i64,
    (since, until): (i64, i64),
    from: i64,
    to: i64,
    cores: f64,
) {
    let (from, to) = (from.max(since), to.min(until));
    if to <= from {
        return;
    }
    for (cell, &start) in cells.iter_mut().zip(starts) {
        let overlap = to.min(start + bucket) - from.max(start);
        if overlap > 0 {
            *cell += cores * overlap as f64 / 3_600_000.0;
        }
    }
}

fn finish(by: BTreeMap<String, Vec<f64>>) -> Vec<UsageSeries> {
    let mut out: Vec<UsageSeries> = by
        .into_iter()
        .map(|(name, core_hours)| UsageSeries { total: core_hours.iter().sum(), name, core_hours })
        .collect();
    out.sort_by(|a, b| b.total.total_cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    out
}

/// Core-hours per project (`project_of` a leaf's path) and bucket, from queue usage rows.
pub fn by_project(
    rows: &[UsageRow],
    project_of: impl Fn(&str) -> String,
    starts: &[i64],
    bucket: i64,
    window: (i64, i64),
) -> Vec<UsageSeries> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in rows {
        let cells = by.entry(project_of(&r.queue)).or_insert_with(|| vec![0.0; starts.len()]);
        spread(cells, starts, bucket, window, r.start_ms, r.end_ms, r.cpu as f64 / 1000.0);
    }
    finish(by)
}

/// Core-hours per user and bucket, from attempts; `cores_of(run, job, stage)` is a task's
/// cores in that stage (attempts of stages it does not know are left out). Runs stored before
/// users were recorded count under `(unrecorded)`.
pub fn by_user(
    spans: &[AttemptSpan],
    cores_of: impl Fn(i64, u32, u32) -> Option<f64>,
    starts: &[i64],
    bucket: i64,
    window: (i64, i64),
    now: i64,
) -> Vec<UsageSeries> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for a in spans {
        let Some(cores) = cores_of(a.run, a.job, a.stage) else { continue };
        let user = a.user.clone().unwrap_or_else(|| "(unrecorded)".into());
        let cells = by.entry(user).or_insert_with(|| vec![0.0; starts.len()]);
        spread(cells, starts, bucket, window, a.started_ms, a.ended_ms.unwrap_or(now), cores);
    }
    finish(by)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn usage(queue: &str, start: i64, end: i64, cpu: i64) -> UsageRow {
        UsageRow {
            cluster: "default".into(),
            queue: queue.into(),
            start_ms: start,
            end_ms: end,
            cpu,
            memory: 0,
            gpu: 0,
            running_apps: 1,
        }
    }

    fn span(run: i64, user: Option<&str>, start: i64, end: Option<i64>) -> AttemptSpan {
        AttemptSpan {
            run,
            job: 0,
            stage: 0,
            started_ms: start,
            ended_ms: end,
            user: user.map(String::from),
            project: "ads".into(),
        }
    }

    #[test]
    fn core_hours_fall_into_the_buckets_they_overlap() {
        assert_eq!(bucket_ms(86_400_000), H);
        assert_eq!(bucket_ms(7 * 86_400_000), 24 * H);
        // Window [0.5 h, 3 h): buckets at 0, 1 h and 2 h.
        let starts = bucket_starts(H / 2, 3 * H, H);
        assert_eq!(starts, [0, H, 2 * H]);
        let window = (H / 2, 3 * H);
        let rows = [
            // 2 cores from 0 to 1.5 h: half an hour is before the window.
            usage("root.ads.tier1", 0, 3 * H / 2, 2000),
            usage("root.ads.tier3", 2 * H, 3 * H, 1000),
            usage("root.search.tier1", H, 2 * H, 4000),
        ];
        let got = by_project(&rows, crate::submit::project_of_queue, &starts, H, window);
        assert_eq!(
            got,
            [
                UsageSeries { name: "search".into(), core_hours: vec![0.0, 4.0, 0.0], total: 4.0 },
                UsageSeries { name: "ads".into(), core_hours: vec![1.0, 1.0, 1.0], total: 3.0 },
            ]
        );
        // Attempts: alice's ended one, bob's still running at 2.5 h (counted to now), one of a
        // stage nobody knows (left out), one of an old run without a user.
        let spans = [
            span(1, Some("alice"), H / 2, Some(H)),
            span(2, Some("bob"), 2 * H, None),
            span(3, Some("carol"), 0, Some(H)),
            span(4, None, H, Some(2 * H)),
        ];
        let cores = |run: i64, _: u32, _: u32| (run != 3).then_some(2.0);
        let got = by_user(&spans, cores, &starts, H, window, 5 * H / 2);
        assert_eq!(
            got,
            [
                UsageSeries { name: "(unrecorded)".into(), core_hours: vec![0.0, 2.0, 0.0], total: 2.0 },
                UsageSeries { name: "alice".into(), core_hours: vec![1.0, 0.0, 0.0], total: 1.0 },
                UsageSeries { name: "bob".into(), core_hours: vec![0.0, 0.0, 1.0], total: 1.0 },
            ]
        );
    }
}
