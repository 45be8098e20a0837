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
    let mut path = String::new();
    let result = serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    });
    result.map_err(|e| {
        let path = if path == "." { String::new() } else { path };
        let message = match e.without_snippet() {
            serde_saphyr::Error::Eof { .. } if path.is_empty() && !has_content(text) => {
                "the file is empty: expected a YAML document starting with `version: 1`".to_string()
            }
            _ => e.render_with_options(serde_saphyr::render_options! {
                formatter: &serde_saphyr::UserMessageFormatter,
                snippets: serde_saphyr::SnippetMode::Off,
            }),
        };
        ModelError::Syntax { file: file.to_string(), path, message }
    })
}

/// Whether `text` holds anything but blank lines and comments.
fn has_content(text: &str) -> bool {
    text.lines().map(str::trim).any(|l| !l.is_empty() && !l.starts_with('#') && l != "---")
}
