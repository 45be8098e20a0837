//! Emptied attempt folders kept for later attempts ("spares"), as the v1 cgroups are.
//!
//! Each attempt needs a folder with two files (its status and its record). Made new and removed
//! per attempt, that is three inodes allocated and freed per task — and on the reference VM's
//! ext4 without a journal, each new inode is sought past the ones freed in the last seconds
//! (`find_inode_bit` → `recently_deleted`), so the cost grows with the start rate
//! (BENCHMARKS.md, issue 17). A forgotten attempt's folder is instead emptied in place and
//! renamed to `STATE/.spare-PID-N`; a start renames a spare to the attempt's name. Its inodes
//! (the folder, `status`, `launched.json`) are kept; only their contents go.
//!
//! What keeps it safe:
//! - **Nothing of an attempt reaches the next one.** A folder becomes a spare only when its
//!   status file holds a status (the wrapper wrote it as its last act, so no process of the
//!   attempt holds the file any more), after its `killed` marker is removed and its status and
//!   record are truncated to nothing — all before the rename, so a crash at any point leaves
//!   either the attempt's own folder (removed as before, by name) or an empty spare. A start
//!   opens both files with `O_TRUNC` as well. Anything else fails over to removal.
//! - **Started once.** The rename of a spare to the attempt's name is `RENAME_NOREPLACE`: like
//!   the `mkdir` it replaces, it fails when the attempt's folder exists (started before).
//! - **Nothing the task controls.** The folders stay the backend's, in its state folder, which
//!   the task's user cannot enter; the task gets the status file as an open descriptor.
//! - **After a crash**, a new backend keeps the spares it finds only if they hold nothing but
//!   the two files, empty; any other is removed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use rustix::fs::{renameat_with, RenameFlags, CWD};

use super::attempt::{KILLED_FILE, RECORD_FILE, STATUS_FILE};

/// The start of every spare's name: a dot, which an attempt's folder name never starts with
/// (ids start with the run's name, `run-N`).
const PREFIX: &str = ".spare-";

/// At most this many spares are kept; more are removed. A little above the starts in flight.
const KEEP: usize = 64;

/// The spares of one state folder.
pub(crate) struct Spares {
    root: PathBuf,
    free: Mutex<Vec<PathBuf>>,
    next: AtomicU64,
}

/// What [`Spares::take`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A spare is now the attempt's folder (its files there, empty).
    Reused,
    /// The attempt's folder exists already: started before.
    Exists,
    /// No spare: make the folder.
    None,
}

impl Spares {
    /// The spares of `root`, taking over those a previous backend left there (checked: only the
    /// two files, both empty; any other spare is removed).
    pub(crate) fn new(root: &Path) -> Spares {
        let mut free = Vec::new();
        if let Ok(entries) = fs::read_dir(root) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !name.to_string_lossy().starts_with(PREFIX) {
                    continue;
                }
                let path = entry.path();
                if free.len() < KEEP && holds_nothing(&path) {
                    free.push(path);
                } else {
                    let _ = fs::remove_dir_all(&path);
                }
            }
        }
        Spares { root: root.to_path_buf(), free: Mutex::new(free), next: AtomicU64::new(0) }
    }

    fn free(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.free.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many spares are kept now.
    pub(crate) fn len(&self) -> usize {
        self.free().len()
    }

    /// Renames a spare to `dir` (which must be in this state folder), unless `dir` exists.
    pub(crate) fn take(&self, dir: &Path) -> Taken {
        loop {
            let Some(spare) = self.free().pop() else { return Taken::None };
            match renameat_with(CWD, &spare, CWD, dir, RenameFlags::NOREPLACE) {
                Ok(()) => return Taken::Reused,
                Err(e) if e == rustix::io::Errno::EXIST => {
                    self.free().push(spare);
                    return Taken::Exists;
                }
                // Gone (the state folder removed under the backend) or unusable: drop it.
                Err(_) => {
                    let _ = fs::remove_dir_all(&spare);
                }
            }
        }
    }

    /// Empties the ended attempt's folder `dir` and keeps it as a spare. `false`: not kept
    /// (not directly in the state folder, no status written, more spares than [`KEEP`], or a
    /// step failed) — the caller removes it as before. A `false` after the truncation leaves
    /// the folder with empty files, which the removal handles alike.
    pub(crate) fn give(&self, dir: &Path) -> bool {
        if dir.parent() != Some(self.root.as_path()) || self.len() >= KEEP {
            return false;
        }
        // A status means the wrapper is done with the file (its last act writes it); an
        // attempt without one (killed, lost) may have left a process holding it.
        if !fs::metadata(dir.join(STATUS_FILE)).is_ok_and(|m| m.len() > 0) {
            return false;
        }
        for name in [KILLED_FILE, "killed.tmp"] {
            match fs::remove_file(dir.join(name)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => return false,
            }
        }
        for name in [STATUS_FILE, RECORD_FILE] {
            if truncate(&dir.join(name)).is_err() {
                return false;
            }
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let spare = self.root.join(format!("{PREFIX}{}-{n}", std::process::id()));
        if renameat_with(CWD, dir, CWD, &spare, RenameFlags::NOREPLACE).is_err() {
            return false;
        }
        self.free().push(spare);
        true
    }

    /// Removes every spare (the backend goes).
    pub(crate) fn remove_all(&self) {
        for spare in self.free().drain(..) {
            let _ = fs::remove_dir_all(&spare);
        }
    }
}

/// Truncates the file at `path` to nothing; a missing file is fine (a start creates it).
fn truncate(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: a NUL-terminated path, valid for the call.
    if unsafe { libc::truncate(c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// Whether the folder at `path` (not a link) holds only the status and record files, empty.
fn holds_nothing(path: &Path) -> bool {
    if !fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let Ok(entries) = fs::read_dir(path) else { return false };
    entries.into_iter().all(|e| {
        e.is_ok_and(|e| {
            let name = e.file_name();
            (name == STATUS_FILE || name == RECORD_FILE)
                && e.metadata().is_ok_and(|m| m.is_file() && m.len() == 0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("weir-spare-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        p
    }

    fn ended_attempt(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join(STATUS_FILE), "3\n").unwrap();
        fs::write(dir.join(RECORD_FILE), "{\"attempt\":\"x\"}").unwrap();
        fs::write(dir.join(KILLED_FILE), "").unwrap();
        dir
    }

    #[test]
    fn a_reused_folder_holds_nothing_of_the_previous_attempt() {
        let root = temp("reuse");
        let spares = Spares::new(&root);
        let first = ended_attempt(&root, "run-1+0+0+0+1");
        assert!(spares.give(&first));
        assert!(!first.exists());
        assert_eq!(spares.len(), 1);
        let second = root.join("run-2+0+0+0+1");
        assert_eq!(spares.take(&second), Taken::Reused);
        let mut names: Vec<_> =
            fs::read_dir(&second).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, [RECORD_FILE, STATUS_FILE]);
        for name in &names {
            assert_eq!(fs::metadata(second.join(name)).unwrap().len(), 0, "{name} was not emptied");
        }
        assert_eq!(spares.len(), 0);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_start_over_an_existing_folder_is_refused_and_keeps_the_spare() {
        let root = temp("exists");
        let spares = Spares::new(&root);
        let done = ended_attempt(&root, "run-1+0+0+0+1");
        assert!(spares.give(&done));
        let running = root.join("run-3+0+0+0+1");
        fs::create_dir(&running).unwrap();
        fs::write(running.join(STATUS_FILE), "").unwrap();
        assert_eq!(spares.take(&running), Taken::Exists);
        assert_eq!(fs::read_dir(&running).unwrap().count(), 1, "the existing folder was touched");
        assert_eq!(spares.len(), 1);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_attempt_without_a_status_or_outside_the_state_folder_is_not_kept() {
        let root = temp("nostatus");
        let spares = Spares::new(&root);
        let killed = root.join("run-4+0+0+0+1");
        fs::create_dir(&killed).unwrap();
        fs::write(killed.join(STATUS_FILE), "").unwrap();
        fs::write(killed.join(RECORD_FILE), "{}").unwrap();
        assert!(!spares.give(&killed));
        assert_eq!(fs::read_to_string(killed.join(RECORD_FILE)).unwrap(), "{}");
        let nested = root.join("run-5").join("0");
        fs::create_dir_all(&nested).unwrap();
        fs::write(nested.join(STATUS_FILE), "0\n").unwrap();
        assert!(!spares.give(&nested));
        assert_eq!(spares.len(), 0);
        assert_eq!(spares.take(&root.join("run-6+0+0+0+1")), Taken::None);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_new_backend_keeps_only_empty_spares() {
        let root = temp("restart");
        {
            let spares = Spares::new(&root);
            assert!(spares.give(&ended_attempt(&root, "run-1+0+0+0+1")));
            assert!(spares.give(&ended_attempt(&root, "run-2+0+0+0+1")));
            // Dropped without remove_all: a crash.
        }
        // A spare that somehow holds something else (not made by this code) is not trusted.
        let odd = root.join(format!("{PREFIX}odd"));
        fs::create_dir(&odd).unwrap();
        fs::write(odd.join(STATUS_FILE), "0\n").unwrap();
        let spares = Spares::new(&root);
        assert_eq!(spares.len(), 2);
        assert!(!odd.exists());
        assert_eq!(spares.take(&root.join("run-7+0+0+0+1")), Taken::Reused);
        spares.remove_all();
        let left: Vec<_> = fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("run-7+0+0+0+1")]);
        fs::remove_dir_all(&root).unwrap();
    }
}
