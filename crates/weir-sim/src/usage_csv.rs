//! `usage.csv`, the planner's input: exact intervals of constant use per leaf as the simulation
//! closes them, or, with a resolution (`--usage-resolution 1m`), at most one row per leaf and
//! time bucket — a month at one-minute resolution instead of every change.

use std::io::{self, Write};

use weir_model::{ClusterConfig, Duration, QueuePath, Resources};

use crate::metrics::UsageRow;

/// The columns written: the planner's six (`weir_planner::usage::HEADER`) and `gpu`, the GPUs
/// the leaf holds as the engine counts them (whole GPUs, as in the cluster file; the shares of
/// GPU-sharing traces are in `summary.json`'s GPU figures), which the planner reads and leaves
/// aside (it plans cpu and memory).
pub const HEADER: &str = "start,end,queue,cpu,memory,running_apps,gpu";

/// Writes `usage.csv`: the header once, then rows as the simulation hands them over.
pub struct UsageCsv<W: Write> {
    out: W,
    names: Vec<QueuePath>,
    /// Bucket length in milliseconds and each leaf's open bucket, when coarsening.
    coarse: Option<(u64, Vec<Bucket>)>,
}

/// What one leaf used in one bucket so far: the span from its first to its last moment in
/// use, and the integrals of its use and running jobs over that span.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    open: bool,
    index: u64,
    first: u64,
    last: u64,
    cpu: u128,
    memory: u128,
    gpu: u128,
    apps: u128,
}

impl<W: Write> UsageCsv<W> {
    pub fn new(mut out: W, cluster: &ClusterConfig) -> io::Result<UsageCsv<W>> {
        writeln!(out, "{}", HEADER)?;
        Ok(UsageCsv { out, names: cluster.queues.iter().map(|q| q.path.clone()).collect(), coarse: None })
    }

    /// At most one row per leaf and `resolution` bucket (buckets start at the simulation's
    /// start): each spans the part of its bucket from the leaf's first to its last moment in
    /// use, with the time-weighted mean of its use and running jobs over that span, rounded to
    /// the nearest unit. Container-time is kept (up to that rounding), so usage/capacity ratios
    /// hold; peaks shorter than a bucket are averaged away. Constant use across whole buckets
    /// stays one row.
    pub fn coarse(out: W, cluster: &ClusterConfig, resolution: Duration) -> io::Result<UsageCsv<W>> {
        let mut csv = UsageCsv::new(out, cluster)?;
        csv.coarse = Some((resolution.as_millis().max(1), vec![Bucket::default(); cluster.queues.len()]));
        Ok(csv)
    }

    pub fn write(&mut self, rows: &[UsageRow]) -> io::Result<()> {
        for r in rows {
            match self.coarse.as_ref().map(|c| c.0) {
                None => {
                    self.row(r.queue, r.start.as_millis(), r.end.as_millis(), r.usage, r.running_apps.into())?
                }
                Some(width) => self.coarsen(r, width)?,
            }
        }
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<W> {
        let leaves = self.coarse.as_ref().map_or(0, |(_, b)| b.len());
        for q in 0..leaves {
            self.close(q)?;
        }
        self.out.flush()?;
        Ok(self.out)
    }

    fn row(&mut self, queue: usize, start: u64, end: u64, usage: Resources, apps: u64) -> io::Result<()> {
        let Resources { cpu, memory, gpu } = usage;
        writeln!(self.out, "{start},{end},{},{cpu},{memory},{apps},{gpu}", self.names[queue])
    }

    /// Split a row at bucket edges: a piece inside a bucket joins the leaf's open bucket;
    /// whole buckets are one row as they are.
    fn coarsen(&mut self, r: &UsageRow, width: u64) -> io::Result<()> {
        let (mut s, e) = (r.start.as_millis(), r.end.as_millis());
        let apps = u64::from(r.running_apps);
        while s < e {
            let index = s / width;
            let bucket_end = index.saturating_add(1).saturating_mul(width);
            if s == index * width && bucket_end <= e {
                let whole_end = e - e % width;
                self.close(r.queue)?;
                self.row(r.queue, s, whole_end, r.usage, apps)?;
                s = whole_end;
            } else {
                let piece_end = bucket_end.min(e);
                self.add(r.queue, index, s, piece_end, r.usage, apps)?;
                s = piece_end;
            }
        }
        Ok(())
    }

    fn add(
        &mut self,
        queue: usize,
        index: u64,
        s: u64,
        e: u64,
        usage: Resources,
        apps: u64,
    ) -> io::Result<()> {
        if self.coarse.as_ref().is_some_and(|(_, b)| b[queue].open && b[queue].index != index) {
            self.close(queue)?;
        }
        let Some((_, buckets)) = &mut self.coarse else { return Ok(()) };
        let b = &mut buckets[queue];
        if !b.open {
            *b = Bucket { open: true, index, first: s, ..Bucket::default() };
        }
        let dt = u128::from(e - s);
        b.last = e;
        b.cpu += u128::from(usage.cpu) * dt;
        b.memory += u128::from(usage.memory) * dt;
        b.gpu += u128::from(usage.gpu) * dt;
        b.apps += u128::from(apps) * dt;
        Ok(())
    }

    /// Write a leaf's open bucket, if it has one.
    fn close(&mut self, queue: usize) -> io::Result<()> {
        let Some((_, buckets)) = &mut self.coarse else { return Ok(()) };
        let b = std::mem::take(&mut buckets[queue]);
        if !b.open || b.last <= b.first {
            return Ok(());
        }
        let span = u128::from(b.last - b.first);
        let mean = |v: u128| u64::try_from((v + span / 2) / span).unwrap_or(u64::MAX);
        self.row(
            queue,
            b.first,
            b.last,
            Resources::new(mean(b.cpu), mean(b.memory), mean(b.gpu)),
            mean(b.apps),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::Time;

    fn row(queue: usize, start: u64, end: u64, cpu: u64, apps: u32) -> UsageRow {
        UsageRow {
            start: Time(start),
            end: Time(end),
            queue,
            usage: Resources::new(cpu, cpu * 4, cpu / 1000),
            running_apps: apps,
        }
    }

    fn coarse(rows: &[UsageRow], width: u64) -> String {
        let cluster = ClusterConfig::from_yaml(
            "c.yaml",
            "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 8000, memory: 32g}}\nqueues:\n  - {name: a}\n  - {name: b}\n",
        )
        .expect("cluster");
        let mut csv = UsageCsv::coarse(Vec::new(), &cluster, Duration(width)).expect("header");
        csv.write(rows).expect("rows");
        String::from_utf8(csv.finish().expect("flush")).expect("utf-8")
    }

    #[test]
    fn coarse_rows_keep_container_time_and_whole_buckets_stay_one_row() {
        // Leaf a: 0–30 at 1000 and 30–60 at 3000 (one 60 ms bucket, mean 2000), 60–300 at 500
        // (four whole buckets: one row), 300–330 at 100 with 2 apps. Leaf b: only 70–80.
        let rows = [
            row(1, 0, 30, 1000, 1),
            row(1, 30, 60, 3000, 1),
            row(2, 70, 80, 6000, 3),
            row(1, 60, 300, 500, 1),
            row(1, 300, 330, 100, 2),
        ];
        assert_eq!(
            coarse(&rows, 60),
            "start,end,queue,cpu,memory,running_apps,gpu\n\
             0,60,root.a,2000,8000,1,2\n\
             60,300,root.a,500,2000,1,0\n\
             300,330,root.a,100,400,2,0\n\
             70,80,root.b,6000,24000,3,6\n"
        );
    }

    #[test]
    fn a_row_across_a_bucket_edge_is_split_and_gaps_stay_gaps() {
        // 50–70 at 1000 crosses the edge at 60; 90–100 at 3000 shares the second bucket with
        // its 60–70 part: that bucket's row spans 60–100 (the gap inside it counts as in use)
        // at the mean over that span, (10 × 1000 + 10 × 3000) / 40 = 1000.
        let rows = [row(1, 50, 70, 1000, 1), row(1, 90, 100, 3000, 1)];
        assert_eq!(
            coarse(&rows, 60),
            "start,end,queue,cpu,memory,running_apps,gpu\n50,60,root.a,1000,4000,1,1\n60,100,root.a,1000,4000,1,1\n"
        );
        let exact: u64 = rows.iter().map(|r| r.usage.cpu * (r.end.as_millis() - r.start.as_millis())).sum();
        assert_eq!(exact, 10 * 1000 + 10 * 1000 + 10 * 3000);
        assert_eq!(10 * 1000 + 40 * 1000, exact, "container-time kept");
    }
}
