//! The reader's check (`require: manifest`): an output is read only when its manifest exists
//! and every file it lists is there with its size — the "file monitor" of mission-critical
//! jobs.

use crate::error::{CommitError, Result};
use crate::keys::{check_prefix, MANIFEST};
use crate::record::Manifest;
use crate::Committer;

impl Committer {
    /// Checks the output at `output` and returns its manifest, or
    /// [`CommitError::Incomplete`] with every problem found (no manifest; each missing file;
    /// each file whose size differs). Files the manifest does not list are not a problem
    /// (readers that honour the manifest read only what it lists).
    pub async fn check_output(&self, output: &str) -> Result<Manifest> {
        check_prefix(output).map_err(|reason| CommitError::Name { name: output.to_string(), reason })?;
        let Some(manifest) = self.read_manifest(output).await? else {
            return Err(CommitError::Incomplete {
                prefix: output.to_string(),
                problems: vec![format!("no {MANIFEST} (no job commit finished here)")],
            });
        };
        let mut problems = Vec::new();
        for file in &manifest.files {
            let key = format!("{output}{}", file.name);
            match self.store.head(&key).await? {
                None => problems.push(format!("{} is missing", file.name)),
                Some(found) if found.size != file.size => problems
                    .push(format!("{} has {} bytes, the manifest says {}", file.name, found.size, file.size)),
                Some(_) => {}
            }
        }
        if problems.is_empty() {
            Ok(manifest)
        } else {
            Err(CommitError::Incomplete { prefix: output.to_string(), problems })
        }
    }
}
