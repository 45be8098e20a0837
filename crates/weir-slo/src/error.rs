//! The one error type of weir-slo.

/// What went wrong building or reading a profile or table, or simulating a job.
#[derive(Debug, thiserror::Error)]
pub enum SloError {
    /// A profile or table file is not what it should be; fixing the file is the remedy.
    #[error("{file}: {field}: {problem}")]
    File { file: String, field: String, problem: String },
    /// The records hold nothing to learn from for this job (retrying cannot help: run it first).
    #[error("no completed task of job `{job}` in the records: nothing to build a profile from")]
    NoRecords { job: String },
    /// The simulator refused the job or failed while simulating it (a bug or an impossible job).
    #[error("simulating job `{job}` at allocation {allocation}: {source}")]
    Sim { job: String, allocation: u32, source: Box<weir_sim::SimError> },
    /// A setting out of range, named.
    #[error("{setting} = {value}: {problem}")]
    Setting { setting: &'static str, value: String, problem: &'static str },
}
