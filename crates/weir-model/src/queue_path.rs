//! Queue paths: `root.ads.ranking.tier1`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The full dotted name of a queue, always starting with `root`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QueuePath(String);

impl QueuePath {
    pub fn root() -> QueuePath {
        QueuePath("root".to_string())
    }

    pub fn child(&self, name: &str) -> QueuePath {
        QueuePath(format!("{}.{}", self.0, name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Accepts `root.a.b`; also `a.b`, which is read as `root.a.b`.
    pub fn parse(s: &str) -> Option<QueuePath> {
        let s = s.trim();
        if s.is_empty() || s.split('.').any(|p| p.is_empty()) {
            return None;
        }
        if s == "root" || s.starts_with("root.") {
            Some(QueuePath(s.to_string()))
        } else {
            Some(QueuePath(format!("root.{s}")))
        }
    }

    /// The last segment.
    pub fn name(&self) -> &str {
        self.0.rsplit('.').next().unwrap_or(&self.0)
    }
}

impl fmt::Display for QueuePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
