//! Which processes of this data directory are alive: each holds a lock on its own file
//! `DATA_DIR/owners/OWNER.lock` (OWNER is its lease name in the store) for as long as it lives,
//! and the system drops the lock when the process dies, however it dies. A process starting
//! after a crash finds the files whose lock it can take: their owners are certainly gone, so
//! their cluster leases are taken at once instead of after they expire. Several live processes
//! may share a data directory (two servers on one PostgreSQL, one standing by); each only ever
//! declares dead the owners whose lock it could take.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::ServerError;

/// This process's lock, held while this value lives.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    /// Owners that ran on this data directory and are gone.
    pub dead_owners: Vec<String>,
}

pub fn owners_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("owners")
}

/// Registers `owner` as alive on `data_dir` and collects the owners that are not.
pub fn claim(data_dir: &Path, owner: &str) -> Result<DataDirLock, ServerError> {
    let dir = owners_dir(data_dir);
    let io = |action: &'static str, path: &Path, source: std::io::Error| ServerError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
    let mine = dir.join(format!("{owner}.lock"));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&mine)
        .map_err(|e| io("create", &mine, e))?;
    file.try_lock().map_err(|e| io("lock", &mine, std::io::Error::other(e.to_string())))?;
    let _ = writeln!(file, "{}", std::process::id());
    let mut dead_owners = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| io("read", &dir, e))?.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".lock"))
        else {
            continue;
        };
        if name == owner {
            continue;
        }
        let Ok(other) = OpenOptions::new().write(true).open(&path) else { continue };
        if other.try_lock().is_ok() {
            // Nobody holds it: its owner is gone. Forget it (the lock is ours while we do).
            dead_owners.push(name.to_string());
            let _ = std::fs::remove_file(&path);
        }
    }
    dead_owners.sort();
    Ok(DataDirLock { _file: file, dead_owners })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_owners_are_left_alone_and_dead_ones_are_found() {
        let dir = std::env::temp_dir().join(format!("weir-owner-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = claim(&dir, "weir-1-a");
        assert!(a.as_ref().is_ok_and(|l| l.dead_owners.is_empty()), "{a:?}");
        // A second live owner on the same directory (a standby server): both alive.
        let b = claim(&dir, "weir-2-b");
        assert!(b.as_ref().is_ok_and(|l| l.dead_owners.is_empty()), "{b:?}");
        drop(a);
        let c = claim(&dir, "weir-3-c").expect("claim");
        assert_eq!(c.dead_owners, vec!["weir-1-a".to_string()]);
        // Found once (its file is gone); b and c are alive.
        let d = claim(&dir, "weir-4-d").expect("claim");
        assert_eq!(d.dead_owners, Vec::<String>::new());
        drop((b, c, d));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
