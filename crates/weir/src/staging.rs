//! Output folders written all at once: a command writes its files into a fresh hidden folder
//! beside `--out` and moves them in only when it has succeeded, so a run that fails half-way
//! (a bad trace row past the horizon, a full disk) never leaves a truncated file beside the
//! previous run's complete ones.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A hidden folder beside the destination, removed unless committed.
pub struct Staging {
    dest: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

impl Staging {
    /// Create `.NAME.weir-PID` beside `dest` (on the same file system, so the final moves are
    /// renames). `flag` names the option in errors.
    pub fn new(dest: &Path, flag: &str) -> Result<Staging> {
        let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).with_context(|| format!("{flag}: cannot create {}", parent.display()))?;
        if dest.exists() && !dest.is_dir() {
            anyhow::bail!("{flag} {}: exists and is not a folder", dest.display());
        }
        let tmp = parent.join(format!(".{name}.weir-{}", std::process::id()));
        // A folder left by a process of the same id that was killed: nobody else uses it.
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir(&tmp).with_context(|| format!("{flag}: cannot create {}", tmp.display()))?;
        Ok(Staging { dest: dest.to_path_buf(), tmp, committed: false })
    }

    /// Where to write `file` until the commit.
    pub fn path(&self, file: &str) -> PathBuf {
        self.tmp.join(file)
    }

    /// Move every staged file into the destination (each move a rename, replacing the old
    /// file of that name) and remove `stale`: files of an earlier run this one did not write.
    /// Other files in the destination are left alone.
    pub fn commit(mut self, stale: &[&str]) -> Result<()> {
        fs::create_dir_all(&self.dest).with_context(|| format!("cannot create {}", self.dest.display()))?;
        let mut names: Vec<_> = fs::read_dir(&self.tmp)
            .with_context(|| format!("cannot read {}", self.tmp.display()))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()
            .with_context(|| format!("cannot read {}", self.tmp.display()))?;
        names.sort();
        for name in names {
            let to = self.dest.join(&name);
            fs::rename(self.tmp.join(&name), &to)
                .with_context(|| format!("cannot move {} into place", to.display()))?;
        }
        for name in stale {
            let _ = fs::remove_file(self.dest.join(name));
        }
        self.committed = true;
        let _ = fs::remove_dir_all(&self.tmp);
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}
