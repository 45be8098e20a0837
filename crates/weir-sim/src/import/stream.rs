//! A trace read a job at a time, in arrival order, for replays too large to hold: an SWF file
//! is parsed line by line, each job sampled (`load_scale`) and turned into its workflows as it
//! is read, so memory follows a small reordering window, not the file. Alibaba's `batch_task`
//! (whose rows of one job are scattered through the file) and SLS/Rumen JSON are read whole
//! first, then handed out the same way.
//!
//! Arrival order: SWF logs are sorted by submit time; lines up to [`REORDER`] jobs out of order
//! are put back in order exactly, and a job later still arrives with the one before it (counted
//! as adjusted). Ties go by job name, as in [`super::import`], whose workload is the same as the
//! stream's for a file within that window.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::BufRead;

use weir_model::Workflow;

use super::build::{Builder, Ledger, TraceJob};
use super::{check, ImportError, ImportOptions, Imported, TraceKind};

/// Jobs read ahead to put slightly unsorted lines back in order.
pub const REORDER: usize = 4096;

const LATE: &str =
    "submitted before a job already replayed (more than 4096 lines out of order): arrives with it";

/// A trace handed out a workflow at a time. See the module docs.
pub struct TraceStream {
    file: String,
    options: ImportOptions,
    ledger: Ledger,
    builder: Builder,
    lines: Option<Lines>,
    /// Jobs read whole (Alibaba, SLS), in arrival order.
    whole: VecDeque<TraceJob>,
    /// Jobs read ahead, by (submission, name, line).
    ahead: BinaryHeap<Reverse<Ahead>>,
    ready: VecDeque<Workflow>,
    /// The submission of the last job handed on.
    last: Option<i64>,
    jobs: u64,
    workflows: u64,
}

/// A job waiting in the reordering window, ordered by arrival then name, as the whole-file
/// import sorts them.
struct Ahead(Box<TraceJob>);

impl PartialEq for Ahead {
    fn eq(&self, o: &Ahead) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Ahead {}
impl PartialOrd for Ahead {
    fn partial_cmp(&self, o: &Ahead) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ahead {
    fn cmp(&self, o: &Ahead) -> std::cmp::Ordering {
        self.key().cmp(&o.key())
    }
}
impl Ahead {
    fn key(&self) -> (i64, &str, u64) {
        (self.0.submit_ms, &self.0.name, self.0.line)
    }
}

/// An SWF file's lines, one at a time, with one reused buffer.
struct Lines {
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
    n: u64,
}

impl TraceStream {
    /// Start reading `reader` (named `file` in messages) as a trace of `kind`. Alibaba (2018 and
    /// GPU 2023) and SLS traces are read here in full; SWF lines as workflows are asked for.
    pub fn new(
        kind: TraceKind,
        file: &str,
        reader: Box<dyn BufRead>,
        options: &ImportOptions,
    ) -> Result<TraceStream, ImportError> {
        check(options)?;
        let mut ledger = Ledger::default();
        let (lines, whole) = match kind {
            TraceKind::Swf => (Some(Lines { reader, buf: Vec::new(), n: 0 }), VecDeque::new()),
            TraceKind::Alibaba2018 | TraceKind::Sls | TraceKind::AlibabaGpu2023 | TraceKind::Swim => {
                let mut jobs = match kind {
                    TraceKind::Alibaba2018 => super::alibaba::read(file, reader, options, &mut ledger)?,
                    TraceKind::Swim => super::swim::read(file, reader, options, &mut ledger)?,
                    TraceKind::AlibabaGpu2023 => {
                        super::alibaba_gpu::read(file, reader, options, &mut ledger)?
                    }
                    _ => super::sls::read(file, reader, options, &mut ledger)?,
                };
                jobs.sort_by(|a, b| a.submit_ms.cmp(&b.submit_ms).then_with(|| a.name.cmp(&b.name)));
                (None, jobs.into())
            }
        };
        Ok(TraceStream {
            file: file.to_string(),
            options: options.clone(),
            ledger,
            builder: Builder::new(options),
            lines,
            whole,
            ahead: BinaryHeap::new(),
            ready: VecDeque::new(),
            last: None,
            jobs: 0,
            workflows: 0,
        })
    }

    /// The next workflow in arrival order, or `None` at the end of the trace.
    pub fn next_workflow(&mut self) -> Result<Option<Workflow>, ImportError> {
        while self.ready.is_empty() {
            let Some(job) = self.next_job()? else { return Ok(None) };
            self.jobs += 1;
            self.builder.build(&self.file, job, &self.options, &mut self.ledger, &mut self.ready)?;
        }
        self.workflows += 1;
        Ok(self.ready.pop_front())
    }

    /// The next trace job in arrival order.
    fn next_job(&mut self) -> Result<Option<TraceJob>, ImportError> {
        if let Some(job) = self.whole.pop_front() {
            return Ok(Some(job));
        }
        while self.ahead.len() <= REORDER {
            match self.read_job()? {
                Some(job) => self.ahead.push(Reverse(Ahead(Box::new(job)))),
                None => break,
            }
        }
        let Some(Reverse(Ahead(job))) = self.ahead.pop() else { return Ok(None) };
        let mut job = *job;
        match self.last {
            Some(last) if job.submit_ms < last => {
                self.ledger.adjust(job.line, LATE);
                job.submit_ms = last;
            }
            _ => self.last = Some(job.submit_ms),
        }
        Ok(Some(job))
    }

    /// The next usable SWF line's job, counting what is skipped.
    fn read_job(&mut self) -> Result<Option<TraceJob>, ImportError> {
        let Some(lines) = &mut self.lines else { return Ok(None) };
        loop {
            lines.buf.clear();
            let read = lines
                .reader
                .read_until(b'\n', &mut lines.buf)
                .map_err(|source| ImportError::Read { file: self.file.clone(), source })?;
            if read == 0 {
                self.lines = None;
                return Ok(None);
            }
            lines.n += 1;
            let mut bytes = &lines.buf[..];
            if let Some(rest) = bytes.strip_suffix(b"\n") {
                bytes = rest;
            }
            if let Some(rest) = bytes.strip_suffix(b"\r") {
                bytes = rest;
            }
            let text = std::str::from_utf8(bytes).ok();
            if let Some(job) = super::swf::line_job(lines.n, text, &self.options, &mut self.ledger) {
                return Ok(Some(job));
            }
        }
    }

    /// What was read so far, skipped and adjusted, and the workflows handed out: complete once
    /// the stream has ended.
    pub fn report(&self) -> super::StreamReport {
        super::StreamReport {
            imported: Imported {
                workload: weir_model::Workload { workflows: Vec::new() },
                rows: self.ledger.rows,
                jobs: self.jobs,
                skipped: self.ledger.skipped.clone(),
                dropped_jobs: self.ledger.dropped_jobs.clone(),
                adjusted: self.ledger.adjusted.clone(),
            },
            workflows: self.workflows,
        }
    }

    /// Workflows handed out so far.
    pub fn workflows(&self) -> u64 {
        self.workflows
    }
}
