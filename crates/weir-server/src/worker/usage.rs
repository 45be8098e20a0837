//! The usage recorder: what each leaf queue holds, turned into `usage.csv` rows for the
//! planner, coarsened to at most one row per queue per resolution window.
//!
//! The actor shows it every leaf's usage after each pass (`observe`); the recorder keeps the
//! exact integral of usage over the current window and, when a window closes, emits one row
//! for it: from the first to the last moment the queue was in use within the window, with the
//! time-average of cpu and memory over that span (so instance-hours — what usage/capacity
//! ratios count — are kept) and the most applications that ran at once (what
//! `max_running_apps` planning needs). A row equal to the previous one and contiguous with it
//! extends it instead, so a queue whose usage does not change writes one row for the whole
//! stretch. Windows are aligned to the epoch, so restarts write rows on the same grid.

use weir_store::{Change, UsageRow};

/// What one leaf holds at a moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub cpu: u64,
    pub memory: u64,
    pub gpu: u64,
    pub running_apps: u32,
}

impl Held {
    fn in_use(&self) -> bool {
        self.cpu > 0 || self.memory > 0 || self.gpu > 0 || self.running_apps > 0
    }
}

/// A row's figures: average cpu, memory and gpus over its span, the most apps at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Figures {
    cpu: i64,
    memory: i64,
    gpu: i64,
    apps: i64,
}

#[derive(Default)]
struct Window {
    index: u64,
    cpu_ms: u128,
    memory_ms: u128,
    gpu_ms: u128,
    first: Option<u64>,
    last: u64,
    apps: u32,
}

struct Leaf {
    queue: String,
    held: Held,
    since: u64,
    window: Window,
    /// The last row written: (start, end, figures), to extend it.
    last_row: Option<(i64, i64, Figures)>,
}

pub struct UsageRecorder {
    resolution: u64,
    leaves: Vec<Leaf>,
}

impl UsageRecorder {
    /// A recorder for `leaves` (their paths, in the order `observe` gets them), starting at
    /// `now` with nothing held; `resolution_ms` ≥ 1.
    pub fn new(leaves: Vec<String>, resolution_ms: u64, now: u64) -> UsageRecorder {
        let resolution = resolution_ms.max(1);
        let leaves = leaves
            .into_iter()
            .map(|queue| Leaf {
                queue,
                held: Held::default(),
                since: now,
                window: Window { index: now / resolution, ..Window::default() },
                last_row: None,
            })
            .collect();
        UsageRecorder { resolution, leaves }
    }

    /// Leaf `i` holds `held` from `now` on; rows for windows that closed go to `out`.
    pub fn observe(&mut self, i: usize, now: u64, held: Held, out: &mut Vec<Change>) {
        let resolution = self.resolution;
        let Some(leaf) = self.leaves.get_mut(i) else { return };
        if now < leaf.since {
            return;
        }
        if held == leaf.held && now / resolution == leaf.window.index {
            return;
        }
        leaf.advance(now, resolution, out);
        leaf.held = held;
    }

    /// Account every leaf up to `now`, emitting the rows of windows that closed.
    pub fn flush(&mut self, now: u64, out: &mut Vec<Change>) {
        let resolution = self.resolution;
        for leaf in &mut self.leaves {
            if now >= leaf.since {
                leaf.advance(now, resolution, out);
            }
        }
    }
}

impl Leaf {
    /// Add `held` over `[since, now)`, closing windows on the way.
    fn advance(&mut self, now: u64, resolution: u64, out: &mut Vec<Change>) {
        let mut t = self.since;
        while t < now {
            let index = t / resolution;
            if index != self.window.index {
                self.close(resolution, out);
                self.window = Window { index, ..Window::default() };
            }
            let end = ((index + 1) * resolution).min(now);
            if self.held.in_use() {
                let span = u128::from(end - t);
                let w = &mut self.window;
                w.cpu_ms += u128::from(self.held.cpu) * span;
                w.memory_ms += u128::from(self.held.memory) * span;
                w.gpu_ms += u128::from(self.held.gpu) * span;
                w.first.get_or_insert(t);
                w.last = end;
                w.apps = w.apps.max(self.held.running_apps);
            }
            t = end;
        }
        if now / resolution != self.window.index {
            self.close(resolution, out);
            self.window = Window { index: now / resolution, ..Window::default() };
        }
        self.since = now;
    }

    fn close(&mut self, _resolution: u64, out: &mut Vec<Change>) {
        let w = &self.window;
        let Some(first) = w.first else { return };
        let span = u128::from(w.last - first).max(1);
        let avg = |v: u128| ((v + span / 2) / span).min(i64::MAX as u128) as i64;
        let (start_ms, end_ms) = (first as i64, w.last as i64);
        let f = Figures {
            cpu: avg(w.cpu_ms),
            memory: avg(w.memory_ms),
            gpu: avg(w.gpu_ms),
            apps: i64::from(w.apps),
        };
        match self.last_row {
            Some((start, end, last)) if end == start_ms && last == f => {
                out.push(Change::UsageExtended {
                    queue: self.queue.clone(),
                    start_ms: start,
                    old_end_ms: end,
                    end_ms,
                });
                self.last_row = Some((start, end_ms, f));
            }
            _ => {
                out.push(Change::Usage(UsageRow {
                    cluster: String::new(),
                    queue: self.queue.clone(),
                    start_ms,
                    end_ms,
                    cpu: f.cpu,
                    memory: f.memory,
                    gpu: f.gpu,
                    running_apps: f.apps,
                }));
                self.last_row = Some((start_ms, end_ms, f));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(out: &[Change]) -> Vec<String> {
        out.iter()
            .map(|c| match c {
                Change::Usage(r) => format!(
                    "{} {}..{} {} {} {}",
                    r.queue, r.start_ms, r.end_ms, r.cpu, r.memory, r.running_apps
                ),
                Change::UsageExtended { queue, start_ms, end_ms, .. } => {
                    format!("{queue} {start_ms}..{end_ms} extended")
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn held(cpu: u64, memory: u64, apps: u32) -> Held {
        Held { cpu, memory, gpu: 0, running_apps: apps }
    }

    #[test]
    fn a_window_gets_one_row_with_the_average_over_its_use() {
        let mut r = UsageRecorder::new(vec!["root.a".into()], 1000, 0);
        let mut out = Vec::new();
        r.observe(0, 100, held(2000, 1024, 1), &mut out);
        r.observe(0, 300, held(4000, 1024, 2), &mut out);
        r.observe(0, 500, held(0, 0, 0), &mut out);
        assert!(out.is_empty(), "the window is still open");
        r.flush(1000, &mut out);
        // 2000 × 200 + 4000 × 200 over the 400 ms in use: 3000 millicores; at most 2 apps.
        assert_eq!(rows(&out), ["root.a 100..500 3000 1024 2"]);
    }

    #[test]
    fn gpus_are_averaged_and_a_gpu_change_starts_a_new_row() {
        let mut r = UsageRecorder::new(vec!["root.g".into()], 1000, 0);
        let mut out = Vec::new();
        let gpus = |gpu| Held { cpu: 1000, memory: 512, gpu, running_apps: 1 };
        r.observe(0, 0, gpus(2), &mut out);
        r.observe(0, 500, gpus(4), &mut out);
        r.observe(0, 1000, gpus(4), &mut out);
        r.flush(2000, &mut out);
        let got: Vec<(i64, i64, i64)> = out
            .iter()
            .filter_map(|c| match c {
                Change::Usage(u) => Some((u.start_ms, u.end_ms, u.gpu)),
                _ => None,
            })
            .collect();
        // 2 gpus for 500 ms and 4 for 500 ms: 3 on average; then 4, a new row although cpu,
        // memory and apps did not change.
        assert_eq!(got, [(0, 1000, 3), (1000, 2000, 4)]);
    }

    #[test]
    fn unchanged_usage_extends_its_row_and_vacant_windows_write_nothing() {
        let mut r = UsageRecorder::new(vec!["root.a".into(), "root.b".into()], 1000, 0);
        let mut out = Vec::new();
        r.observe(0, 0, held(1000, 512, 1), &mut out);
        r.flush(3500, &mut out);
        assert_eq!(
            rows(&out),
            ["root.a 0..1000 1000 512 1", "root.a 0..2000 extended", "root.a 0..3000 extended"]
        );
        out.clear();
        r.observe(0, 3500, held(0, 0, 0), &mut out);
        r.flush(6000, &mut out);
        assert_eq!(rows(&out), ["root.a 0..3500 extended"]);
    }

    #[test]
    fn integrals_are_kept_across_windows() {
        // A change every 250 ms for 10 s at 1 s resolution: the rows' instance-ms add up to
        // the exact integral.
        let mut r = UsageRecorder::new(vec!["root.a".into()], 1000, 0);
        let mut out = Vec::new();
        let mut exact: i64 = 0;
        for k in 0..40u64 {
            let cpu = 1000 * (k % 4 + 1);
            r.observe(0, k * 250, held(cpu, 0, 1), &mut out);
            exact += cpu as i64 * 250;
        }
        r.observe(0, 10_000, held(0, 0, 0), &mut out);
        r.flush(11_000, &mut out);
        // Replay the inserts and extensions, as the store applies them.
        let mut stored: Vec<(i64, i64, i64)> = Vec::new();
        for c in &out {
            match c {
                Change::Usage(row) => stored.push((row.start_ms, row.end_ms, row.cpu)),
                Change::UsageExtended { start_ms, old_end_ms, end_ms, .. } => {
                    let row =
                        stored.iter_mut().find(|r| r.0 == *start_ms && r.1 == *old_end_ms).expect("row");
                    row.1 = *end_ms;
                }
                _ => {}
            }
        }
        let total: i64 = stored.iter().map(|(s, e, cpu)| cpu * (e - s)).sum();
        assert_eq!(total, exact);
        assert_eq!(stored, [(0, 10_000, 2500)], "equal windows make one row: {:?}", rows(&out));
    }

    #[test]
    fn uneven_windows_make_one_row_each() {
        let mut r = UsageRecorder::new(vec!["root.a".into()], 1000, 0);
        let mut out = Vec::new();
        for k in 0..5u64 {
            r.observe(0, k * 1000, held(1000 * (k + 1), 0, 1), &mut out);
        }
        r.observe(0, 5000, held(0, 0, 0), &mut out);
        r.flush(6000, &mut out);
        assert_eq!(out.len(), 5, "{:?}", rows(&out));
        assert!(out.iter().all(|c| matches!(c, Change::Usage(_))));
    }
}
