//! The CSV files of runs and jobs a simulation writes, `runs.csv` and `jobs.csv` (`pending.csv`
//! is in `pending.rs`, `usage.csv` in `usage_csv.rs`). Writers take any `io::Write` the host opened; names are quoted as RFC 4180
//! says wherever they could hold a comma or a quote (queue names cannot: validation refuses
//! them, so `usage.csv` stays the simple format `weir plan` reads).

use std::io::{self, Write};

use weir_model::{Duration, Time};

use crate::summary::{bounded_slowdown, JobStatus, Outcome};

/// `runs.csv`: one row per run, in submission order.
pub fn write_runs_csv(mut w: impl Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(w, "workflow,tier,queue,submit,start,end,slo,met,status,wait,delay,response,bounded_slowdown")?;
    let opt = |t: Option<u64>| t.map(|v| v.to_string()).unwrap_or_default();
    for r in &outcome.runs {
        let wf = &outcome.workload.workflows[r.workflow as usize];
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
        )?;
    }
    Ok(())
}

/// A ratio with four decimals, or empty.
fn ratio(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.4}")).unwrap_or_default()
}

/// `jobs.csv`: one row per job, in job order (job numbers as in `pending.csv`).
pub fn write_jobs_csv(mut w: impl Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(
        w,
        "job,workflow,job_name,tier,queue,submit,first_container,all_granted,end,wait,delay,response,bounded_slowdown,status"
    )?;
    let opt = |t: Option<u64>| t.map(|v| v.to_string()).unwrap_or_default();
    for j in &outcome.job_records {
        let wf = &outcome.workload.workflows[j.workflow as usize];
        let since = |t: Option<Time>| t.map(|t| t.since(j.submit).as_millis());
        let completed = j.status == JobStatus::Completed;
        let response = since(j.end).filter(|_| completed);
        let slowdown = response.zip(since(j.all_started)).map(|(r, d)| bounded_slowdown(r, d));
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            j.job,
            csv_field(&wf.name),
            csv_field(&wf.jobs[j.template as usize].name),
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
        )?;
    }
    Ok(())
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
