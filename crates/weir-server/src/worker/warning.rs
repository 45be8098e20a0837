//! Preemption warnings: the engine's `PreemptContainer` (this container will be killed at
//! `kill_at` unless it ends first) recorded on the attempt (`preempting`, with the reason and
//! the kill time) and handed to the task as a notice file, as a batch system warns its jobs
//! before taking their nodes. The kill itself is the engine's `KillContainer` at `kill_at`.
//!
//! The notice: the task's environment names a file in `WEIR_PREEMPT_NOTICE` (in the attempt's
//! log folder) that does not exist until a warning comes; then it appears whole (written to a
//! temporary name and renamed), with the lines `kill_at_ms=…` (Unix ms), `kill_at=…` (UTC,
//! RFC 3339) and `reason=…`. No signal is sent with it.

use std::path::{Path, PathBuf};

use weir_engine::PreemptReason;
use weir_model::Time;
use weir_store::{AttemptKey, Change, Warning};

use super::actor::Actor;
use super::live::attempt_id;
use crate::time::format_utc;

/// The variable that names the notice file in the task's environment.
pub(crate) const NOTICE_ENV: &str = "WEIR_PREEMPT_NOTICE";

/// Where attempt `aid`'s notice goes.
pub(crate) fn notice_path(data_dir: &Path, aid: &str) -> PathBuf {
    data_dir.join("logs").join(aid).join("preempt-notice")
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
        let path = notice_path(&self.settings.data_dir, &attempt_id(&key));
        self.notices.push((path, Some(notice_text(&warning))));
        self.changes.push(Change::AttemptPreempting { key, warning: Some(warning) });
    }

    /// Recovery found an attempt `preempting`: the rebuilt engine plans no kill for it, so the
    /// warning is withdrawn (state and notice).
    pub(crate) fn withdraw_warning(&mut self, key: AttemptKey) {
        let path = notice_path(&self.settings.data_dir, &attempt_id(&key));
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

fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
