//! The one error type of weir-planner.

use weir_model::ModelError;

/// Everything that can stop a plan, an export or an import. None of them is transient:
/// retrying with the same input never helps; the input (or the settings) must change.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A row of the usage history is malformed. Fix that row.
    #[error("{file}: line {line}: {field}: {message}")]
    Csv { file: String, line: u64, field: &'static str, message: String },

    /// The usage history could not be read from its reader (an I/O error, or bytes that are
    /// not UTF-8 where text is expected). Retrying helps only if the source was transient.
    #[error("{file}: cannot read the usage history: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },

    /// The history has no interval to plan from.
    #[error(
        "{file}: the usage history has no rows; expected `start,end,queue,cpu,memory,running_apps` lines"
    )]
    EmptyHistory { file: String },

    /// No queue of the history is a leaf of the cluster: the history is of another cluster, or
    /// its queue names are spelled differently.
    #[error(
        "{file}: none of its {count} queue{} is a leaf of the cluster ({}); a plan from it would mean nothing. \
         Name leaves by their paths, e.g. root.ads.ranking.tier1",
        if *count == 1 { "" } else { "s" },
        examples.join(", ")
    )]
    NoMatchingQueues { file: String, count: usize, examples: Vec<String> },

    /// The cluster's leaves used nothing in the window: there is nothing to plan from.
    #[error("{file}: the leaves of the cluster show no usage in the {hours:.1} h window; a plan from it would mean nothing")]
    NoUsage { file: String, hours: f64 },

    /// Two intervals of one queue overlap: a leaf has one usage at any moment, so the history
    /// must give one row per period of constant usage.
    #[error(
        "{file}: queue {queue}: the interval {first_start}..{first_end} ms{} overlaps \
         {second_start}..{second_end} ms{}; give one row per period of constant usage",
        at_line(*first_line),
        at_line(*second_line)
    )]
    Overlap {
        file: String,
        queue: String,
        first_start: u64,
        first_end: u64,
        first_line: u32,
        second_start: u64,
        second_end: u64,
        second_line: u32,
    },

    /// A settings file (`plan.yaml`) is not valid YAML of the right shape, or breaks its rules.
    #[error(transparent)]
    Settings(#[from] ModelError),

    /// The cluster file the plan produced does not validate. This is a bug in the planner.
    #[error("the planned cluster file does not validate (a planner bug): {source}")]
    PlannedCluster {
        #[source]
        source: ModelError,
    },

    /// Two queues map to the same object name in a format that flattens queue paths.
    #[error("{format}: queues {first} and {second} would both be named `{name}`; rename one of them")]
    NameClash { format: &'static str, name: String, first: String, second: String },

    /// The target (at the version asked for) cannot hold this cluster at all; the message says
    /// what to change.
    #[error("{format}: {message}")]
    Unsupported { format: &'static str, message: String },

    /// A value cannot be written in the target format (e.g. a YAML serializer failure).
    #[error("{format}: cannot write {what}: {message}")]
    Write { format: &'static str, what: String, message: String },

    /// An allocation file to import is not well-formed XML.
    #[error("{file}: byte {position}: not well-formed XML: {message}")]
    Xml { file: String, position: u64, message: String },

    /// An allocation file to import is XML but breaks the allocation-file format; every problem
    /// found is listed, each with the queue path inside the file.
    #[error("{file}: {} problem{}:\n{}", problems.len(), if problems.len() == 1 { "" } else { "s" }, list(file, problems))]
    Import { file: String, problems: Vec<weir_model::Problem> },
}

fn at_line(line: u32) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" (line {line})")
    }
}

fn list(file: &str, problems: &[weir_model::Problem]) -> String {
    problems.iter().map(|p| format!("  {file}: {p}")).collect::<Vec<_>>().join("\n")
}
