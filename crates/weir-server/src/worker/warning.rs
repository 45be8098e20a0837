//! Preemption warnings: the engine's `PreemptContainer` (this container will be killed at
//! `kill_at` unless it ends first) recorded on the attempt (`preempting`, with the reason and
//! the kill time) and handed to the task as a notice file, as a batch system warns its jobs
//! before taking their nodes. The kill itself is the engine's `KillContainer` at `kill_at`.
//!
//! The notice: the task's environment names a file in `WEIR_PREEMPT_NOTICE` (in the run's
//! working folder, `.weir-preempt-notice.ATTEMPT`) that does not exist until a warning comes;
//! then it appears whole (written to a temporary name and renamed), with the lines
//! `kill_at_ms=…` (Unix ms), `kill_at=…` (UTC, RFC 3339) and `reason=…`. No signal is sent
//! with it.
//!
//! The working folder belongs to the task's user, and the server writes into it: the
//! temporary file is made with `O_CREAT | O_EXCL | O_NOFOLLOW` (a link planted there is never
//! followed, an existing name makes the write fail) and renamed over the notice's name (a
//! rename replaces a link, it does not follow it); the folder itself sits in a folder only the
//! server can write, so no component above the file can be swapped.

use std::path::{Path, PathBuf};

use weir_engine::PreemptReason;
use weir_model::Time;
use weir_store::{AttemptKey, Change, Warning};

use super::actor::Actor;
use super::live::attempt_id;
use crate::time::format_utc;

/// The variable that names the notice file in the task's environment.
pub(crate) const NOTICE_ENV: &str = "WEIR_PREEMPT_NOTICE";

/// Where attempt `aid`'s notice goes, in its run's working folder `workdir`.
pub(crate) fn notice_path(workdir: &Path, aid: &str) -> PathBuf {
    workdir.join(format!(".weir-preempt-notice.{}", aid.replace('/', "+")))
}

fn notice_text(w: &Warning) -> String {
    format!("kill_at_ms={}\nkill_at={}\nreason={}\n", w.kill_at_ms, format_utc(w.kill_at_ms), w.reason)
}

impl Actor {
    /// The engine warned that it will take `container` at `kill_at`.
    pub(crate) fn on_preempt_warning(
        &mut self,
        container: weir_engine::ContainerId,
        kill_at: Time,
        reason: &PreemptReason,
    ) {
        let Some(id) = self.containers.get(&container) else { return };
        let Some(a) = self.attempts.get_mut(id) else { return };
        let warning = Warning { reason: reason.to_string(), kill_at_ms: kill_at.0 as i64 };
        eprintln!(
            "weir worker: {id}: warned: {} (kill at {})",
            warning.reason,
            format_utc(warning.kill_at_ms)
        );
        if a.launched.is_some() {
            let key = a.key;
            self.record_warning(key, warning);
        } else {
            // Its launch record is not stored yet: warn once it is (`on_started`).
            a.warning = Some(warning);
        }
    }

    /// Stores the warning with this pass and writes the notice once it is committed.
    pub(crate) fn record_warning(&mut self, key: AttemptKey, warning: Warning) {
        let workdir = super::attempts::run_workdir(&self.settings.work_dir, &self.cluster, key.task.run);
        let path = notice_path(&workdir, &attempt_id(&key));
        self.notices.push((path, Some(notice_text(&warning))));
        self.changes.push(Change::AttemptPreempting { key, warning: Some(warning) });
    }

    /// Recovery found an attempt `preempting`: the rebuilt engine plans no kill for it, so the
    /// warning is withdrawn (state and notice).
    pub(crate) fn withdraw_warning(&mut self, key: AttemptKey) {
        let workdir = super::attempts::run_workdir(&self.settings.work_dir, &self.cluster, key.task.run);
        let path = notice_path(&workdir, &attempt_id(&key));
        self.notices.push((path, None));
        self.changes.push(Change::AttemptPreempting { key, warning: None });
    }

    /// After a commit: write (or remove) the notices of this pass, off the async runtime.
    pub(crate) fn write_notices(&mut self) {
        let notices = std::mem::take(&mut self.notices);
        if notices.is_empty() {
            return;
        }
        tokio::task::spawn_blocking(move || {
            for (path, text) in notices {
                let result = match text {
                    Some(text) => write_atomic(&path, &text),
                    None => match std::fs::remove_file(&path) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                        _ => Ok(()),
                    },
                };
                if let Err(e) = result {
                    eprintln!("weir worker: cannot update the preemption notice {}: {e}", path.display());
                }
            }
        });
    }
}

/// Writes the notice without following anything the task's user may have planted (see the
/// module's comment). Readable by the task (0644 in its own 0700 folder).
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)
    };
    let mut f = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Left by a crash, or planted: remove the name (unlink does not follow) and retry once.
            std::fs::remove_file(&tmp)?;
            open()?
        }
        other => other?,
    };
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, path)
}
