//! The CSV files of runs and jobs a simulation writes, `runs.csv` and `jobs.csv` (`pending.csv`
//! is in `pending.rs`, `usage.csv` in `usage_csv.rs`), from a kept outcome or as records come
//! ([`CsvRecords`]). Writers take any `io::Write` the host opened; names are quoted as RFC 4180
//! says wherever they could hold a comma or a quote (queue names cannot: validation refuses
//! them, so `usage.csv` stays the simple format `weir plan` reads).

use std::io::{self, Write};

use weir_model::{Duration, Time, Workflow};

use crate::records::{RecordSink, TaskRecord};
use crate::summary::{bounded_slowdown, JobRecord, JobStatus, Outcome, RunRecord};

const RUNS_HEADER: &str =
    "workflow,tier,queue,submit,start,end,slo,met,status,wait,delay,response,bounded_slowdown";
const JOBS_HEADER: &str =
    "job,workflow,job_name,tier,queue,submit,first_container,all_granted,end,wait,delay,response,bounded_slowdown,status,containers,cpu,memory,gpu";

/// `runs.csv` of a kept outcome: one row per run, in submission order.
pub fn write_runs_csv(mut w: impl Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(w, "{RUNS_HEADER}")?;
    for r in &outcome.runs {
        run_row(&mut w, r, &outcome.workload.workflows[r.workflow as usize])?;
    }
    Ok(())
}

/// `jobs.csv` of a kept outcome: one row per job, in job order (numbers as in `pending.csv`).
pub fn write_jobs_csv(mut w: impl Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(w, "{JOBS_HEADER}")?;
    for j in &outcome.job_records {
        job_row(&mut w, j, &outcome.workload.workflows[j.workflow as usize])?;
    }
    Ok(())
}

/// The columns of `tasks.csv`: one row per task attempt, times in ms since the start.
pub const TASKS_HEADER: &str = "job,workflow,job_name,stage,attempt,start,end,duration,outcome";

/// `runs.csv` and `jobs.csv` written as runs and jobs end (a [`RecordSink`]): rows in the order
/// they end, unfinished ones last; `tasks.csv` too when given one (every task attempt as it
/// ends, application masters left out).
pub struct CsvRecords<W: Write> {
    runs: W,
    jobs: W,
    tasks: Option<W>,
}

impl<W: Write> CsvRecords<W> {
    pub fn new(mut runs: W, mut jobs: W) -> io::Result<CsvRecords<W>> {
        writeln!(runs, "{RUNS_HEADER}")?;
        writeln!(jobs, "{JOBS_HEADER}")?;
        Ok(CsvRecords { runs, jobs, tasks: None })
    }

    /// Write `tasks.csv` to `tasks` as well.
    pub fn with_tasks(mut self, mut tasks: W) -> io::Result<CsvRecords<W>> {
        writeln!(tasks, "{TASKS_HEADER}")?;
        self.tasks = Some(tasks);
        Ok(self)
    }
}

impl<W: Write> RecordSink for CsvRecords<W> {
    fn run(&mut self, record: &RunRecord, workflow: &Workflow) -> io::Result<()> {
        run_row(&mut self.runs, record, workflow)
    }

    fn job(&mut self, record: &JobRecord, workflow: &Workflow) -> io::Result<()> {
        job_row(&mut self.jobs, record, workflow)
    }

    fn task(&mut self, t: &TaskRecord, wf: &Workflow) -> io::Result<()> {
        let Some(w) = &mut self.tasks else { return Ok(()) };
        let job = wf.jobs.get(t.template as usize);
        let stage = job.and_then(|j| j.stages.get(t.stage as usize));
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{}",
            t.job,
            csv_field(&wf.name),
            csv_field(job.map_or("", |j| j.name.as_str())),
            csv_field(stage.map_or("", |s| s.name.as_str())),
            t.attempt,
            t.start.as_millis(),
            t.end.as_millis(),
            t.end.since(t.start).as_millis(),
            t.outcome.name(),
        )
    }

    fn finish(&mut self) -> io::Result<()> {
        self.runs.flush()?;
        if let Some(t) = &mut self.tasks {
            t.flush()?;
        }
        self.jobs.flush()
    }
}

/// A number, or nothing, written without an allocation.
struct Opt(Option<u64>);

impl std::fmt::Display for Opt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => Ok(()),
        }
    }
}

fn opt(t: Option<u64>) -> Opt {
    Opt(t)
}

fn run_row(w: &mut impl Write, r: &RunRecord, wf: &Workflow) -> io::Result<()> {
    let status = match (r.failed, r.end) {
        (true, _) => "failed",
        (false, Some(_)) => "completed",
        (false, None) => "unfinished",
    };
    let met = match r.met {
        Some(true) => "true",
        Some(false) => "false",
        None => "",
    };
    writeln!(
        w,
        "{},{},{},{},{},{},{},{met},{status},{},{},{},{}",
        csv_field(&wf.name),
        wf.tier,
        csv_field(wf.queue.as_str()),
        r.submit.as_millis(),
        opt(r.start.map(Time::as_millis)),
        opt(r.end.map(Time::as_millis)),
        opt(wf.slo.map(|d| d.as_millis())),
        opt(r.wait().map(Duration::as_millis)),
        opt(r.delay.map(Duration::as_millis)),
        opt(r.response().map(Duration::as_millis)),
        ratio(r.bounded_slowdown()),
    )
}

fn job_row(w: &mut impl Write, j: &JobRecord, wf: &Workflow) -> io::Result<()> {
    let since = |t: Option<Time>| t.map(|t| t.since(j.submit).as_millis());
    let completed = j.status == JobStatus::Completed;
    let response = since(j.end).filter(|_| completed);
    let slowdown = response.zip(since(j.all_started)).map(|(r, d)| bounded_slowdown(r, d));
    let template = wf.jobs.get(j.template as usize);
    let name = template.map_or("", |t| t.name.as_str());
    // The job's size: its tasks over every stage (application master left out) and what they
    // ask for together — for a rigid job, its processors and its whole allocation.
    let (containers, size) = template.map_or((0, weir_model::Resources::ZERO), |t| {
        t.stages.iter().fold((0u64, weir_model::Resources::ZERO), |(n, r), s| {
            (n + u64::from(s.tasks), r + s.resources.times(u64::from(s.tasks)))
        })
    });
    writeln!(
        w,
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        j.job,
        csv_field(&wf.name),
        csv_field(name),
        j.tier,
        csv_field(wf.queue.as_str()),
        j.submit.as_millis(),
        opt(j.first_start.map(Time::as_millis)),
        opt(j.all_started.map(Time::as_millis)),
        opt(j.end.map(Time::as_millis)),
        opt(since(j.first_start)),
        opt(since(j.all_started)),
        opt(response),
        ratio(slowdown),
        j.status.name(),
        containers,
        size.cpu,
        size.memory,
        size.gpu,
    )
}

/// A ratio with four decimals, or empty.
struct Ratio(Option<f64>);

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v:.4}"),
            None => Ok(()),
        }
    }
}

fn ratio(v: Option<f64>) -> Ratio {
    Ratio(v)
}

/// Quote a field that holds a comma, quote or line break (RFC 4180).
pub(crate) fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
