//! The one error type of weir-model.

use std::fmt;

/// One thing wrong in a file: where (a dotted path inside the file) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Path inside the file, e.g. `queues.ads.children.tier1.weight`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every way a weir input file can be wrong. Retrying never helps: the file must change.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The text is not YAML, or does not have the shape of the format (unknown field, wrong type).
    #[error("{file}: {path}{sep}{message}", sep = if path.is_empty() { "" } else { ": " })]
    Syntax { file: String, path: String, message: String },
    /// The file has the right shape but breaks the format's rules; every problem found is listed.
    #[error("{file}: {} problem{}:\n{}", problems.len(), if problems.len() == 1 { "" } else { "s" }, list(file, problems))]
    Invalid { file: String, problems: Vec<Problem> },
}

fn list(file: &str, problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("  {file}: {p}")).collect::<Vec<_>>().join("\n")
}

impl ModelError {
    /// The problems, one per line, each naming the file and the path.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            ModelError::Syntax { path, message, .. } => {
                vec![Problem { path: path.clone(), message: message.clone() }]
            }
            ModelError::Invalid { problems, .. } => problems.clone(),
        }
    }

    pub fn file(&self) -> &str {
        match self {
            ModelError::Syntax { file, .. } | ModelError::Invalid { file, .. } => file,
        }
    }
}

/// Parse a YAML document into `T`, reporting the path of the first mismatch.
///
/// The message is one line: serde-saphyr's user-facing wording followed by `at line L, column C`.
/// Its default rendering adds a source snippet (labelled `<input>`, not the file) that repeats the
/// message; callers print `file: path: message` per problem, so a single line reads better.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, ModelError> {
    parse_yaml_named(file, text, |_, path| path.to_string())
}

/// [`parse_yaml`], reporting every shape error found (see `yaml_errors`), each path renamed by
/// `name(text, path)` (queues and workflows by their names).
pub(crate) fn parse_yaml_named<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
    name: fn(&str, &str) -> String,
) -> Result<T, ModelError> {
    use crate::yaml_errors::{humanize, item_of, located, mask, restore, Masked, MAX_PROBLEMS};
    let mut failure = match read_once::<T>(text) {
        Ok(v) => return Ok(v),
        Err(f) => f,
    };
    // Items blanked out so far, in order: a later path is in the indices of a text without them.
    let mut removed: Vec<(String, usize)> = Vec::new();
    let problem = |f: &Failure, current: &str, removed: &[(String, usize)]| {
        let original = removed.iter().rev().fold(f.path.clone(), |p, r| restore(&p, r));
        Problem {
            path: name(text, &original),
            message: if f.recoverable { humanize(&f.message, current) } else { f.message.clone() },
        }
    };
    let mut problems = vec![problem(&failure, text, &removed)];
    let mut current = text.to_string();
    while failure.recoverable && problems.len() < MAX_PROBLEMS {
        let Some((line, _)) = located(&failure.message).0 else { break };
        let Some((masked, what)) = mask(&current, line) else { break };
        let key_blanked = match what {
            Masked::Item { depth } => {
                let Some(item) = item_of(&failure.path, depth) else { break };
                removed.push(item);
                false
            }
            Masked::Key => true,
        };
        current = masked;
        let next = match read_once::<T>(&current) {
            Ok(_) => break,
            Err(f) => f,
        };
        // A key blanked out may have been required, or was all there was: what follows is not
        // the user's doing.
        if !next.recoverable || (key_blanked && next.message.starts_with("missing field")) {
            break;
        }
        let p = problem(&next, &current, &removed);
        if problems.contains(&p) {
            break;
        }
        problems.push(p);
        failure = next;
    }
    if problems.len() == 1 {
        let Problem { path, message } = problems.remove(0);
        return Err(ModelError::Syntax { file: file.to_string(), path, message });
    }
    Err(ModelError::Invalid { file: file.to_string(), problems })
}

/// Why one read failed: where, what, and whether reading on past it can find more.
struct Failure {
    path: String,
    message: String,
    recoverable: bool,
}

fn read_once<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Failure> {
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options(text.len()), |de| {
        serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    result.map_err(|e| {
        let path = if path == "." { String::new() } else { path };
        let recoverable = !matches!(
            root(&e),
            serde_saphyr::Error::Eof { .. }
                | serde_saphyr::Error::Budget { .. }
                | serde_saphyr::Error::AliasReplayLimitExceeded { .. }
                | serde_saphyr::Error::AliasExpansionLimitExceeded { .. }
        );
        let message = match root(&e) {
            serde_saphyr::Error::Eof { .. } if path.is_empty() && !has_content(text) => {
                "the file is empty: expected a YAML document starting with `version: 1`".to_string()
            }
            serde_saphyr::Error::Budget { breach, location } => budget_message(breach, location),
            serde_saphyr::Error::AliasReplayLimitExceeded { max_total_replayed_events, location, .. } => {
                format!(
                    "the YAML aliases (`*name`) expand into more than {max_total_replayed_events} parser \
                     events, weir's limit, so that a small file cannot expand into a huge one; write the \
                     repeated parts out (at line {}, column {})",
                    location.line(),
                    location.column()
                )
            }
            serde_saphyr::Error::AliasExpansionLimitExceeded {
                max_expansions_per_anchor, location, ..
            } => {
                format!(
                    "one YAML anchor is used more than {max_expansions_per_anchor} times, weir's limit, so \
                     that a small file cannot expand into a huge one; write the repeated parts out (at \
                     line {}, column {})",
                    location.line(),
                    location.column()
                )
            }
            _ => e.render_with_options(serde_saphyr::render_options! {
                formatter: &serde_saphyr::UserMessageFormatter,
                snippets: serde_saphyr::SnippetMode::Off,
            }),
        };
        Failure { path, message, recoverable }
    })
}

/// The parser's limits for a document of `len` bytes. serde-saphyr's defaults (250,000 nodes,
/// a million events) stop a workload at about 8,300 single-task workflows; here the node,
/// event and scalar budgets grow with the file (a node takes at least a byte or two of text,
/// so plain YAML can never reach them), while the limits that bound what a small file can
/// expand into — aliases, anchors, nesting depth, documents — keep their defaults.
fn options(len: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(len.saturating_add(16));
    budget.max_events = budget.max_events.max(len.saturating_mul(2).saturating_add(16));
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len.saturating_add(16));
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// A limit of the YAML reader, in words: which limit, and what to do about it.
fn budget_message(breach: &serde_saphyr::budget::BudgetBreach, at: &serde_saphyr::Location) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    let what = match breach {
        B::Aliases { aliases } => format!(
            "more than 50000 YAML aliases (`*name`; {aliases} read): weir reads at most 50,000 per file, \
             so that a small file cannot expand into a huge one; write the repeated parts out"
        ),
        B::Anchors { anchors } => format!(
            "more than 50000 YAML anchors (`&name`; {anchors} read): weir reads at most 50,000 per file; \
             write the repeated parts out"
        ),
        B::AliasAnchorRatio { aliases, anchors } => format!(
            "{aliases} YAML aliases for {anchors} anchors: more than 10 per anchor looks like an expansion \
             bomb, which weir refuses; write the repeated parts out"
        ),
        B::Depth { depth } => format!(
            "nested {depth} levels deep: weir reads YAML nested at most 64 levels (cluster and workload \
             files need about 10); check the indentation"
        ),
        B::Documents { documents } => {
            format!("{documents} YAML documents (`---`): a weir file is one document")
        }
        other => format!(
            "the YAML reader's limit {other:?} was reached; it grows with the file's size, so this file \
             expands (through aliases or merge keys) far beyond its own length: write the repeated parts out"
        ),
    };
    format!("{what} (at line {}, column {})", at.line(), at.column())
}

/// The error beneath serde-saphyr's wrappers (a source snippet, the alias it came through).
fn root(e: &serde_saphyr::Error) -> &serde_saphyr::Error {
    let mut e = e;
    while let serde_saphyr::Error::WithSnippet { error, .. } | serde_saphyr::Error::AliasError { error, .. } =
        e
    {
        e = error;
    }
    e
}

/// Whether `text` holds anything but blank lines and comments.
fn has_content(text: &str) -> bool {
    text.lines().map(str::trim).any(|l| !l.is_empty() && !l.starts_with('#') && l != "---")
}
