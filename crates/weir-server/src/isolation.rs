//! Keeping tasks away from the service: as which Unix user each task runs ([`TaskUsers`]),
//! the checks of a cluster file's `run_as` against this machine, and the data directory's
//! modes ([`protect_data_dir`]).
//!
//! The mechanism (docs/serve.md, Security, Tasks): a server started as root runs every task
//! as an unprivileged user — its project's `run_as` user, else the task user (`weir-task`) —
//! by setting uid and gid in the started child before exec (weir-backend), with supplementary
//! groups cleared. No privileged helper program: the server is the only privileged process,
//! and it drops nothing for itself. A server that is not root cannot switch users; it runs
//! tasks as itself, which is safe only for one trusted tenant, and says so at start.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Mutex;

use weir_backend::TaskUser;
use weir_model::ClusterConfig;

use crate::config::TaskSettings;
use crate::error::ServerError;

/// As whom tasks run on this server.
#[derive(Debug)]
pub(crate) struct TaskUsers {
    /// Whether this process can switch users (it is root).
    can_switch: bool,
    /// The user of projects without `run_as`; `None`: the server's own (single tenant).
    default: Option<TaskUser>,
    /// `run_as` users looked up so far, by name.
    known: Mutex<HashMap<String, TaskUser>>,
}

impl TaskUsers {
    /// Resolves the settings against this machine. A root server whose task user does not
    /// exist refuses to start (naming the user and how to make it); a server that cannot
    /// switch users runs tasks as itself and returns the warning to print.
    pub(crate) fn resolve(settings: &TaskSettings) -> Result<(TaskUsers, Option<String>), ServerError> {
        let can_switch = rustix::process::geteuid().is_root();
        let known = Mutex::new(HashMap::new());
        if !can_switch || settings.single_tenant {
            let why = if can_switch {
                "--single-tenant is set".to_string()
            } else {
                format!(
                    "the server runs as uid {} (not root) and cannot switch users",
                    rustix::process::geteuid().as_raw()
                )
            };
            let warning = format!(
                "SINGLE-TENANT MODE: tasks run as the server's own user ({why}): a task can read and \
                 change everything the server can — its data directory (admin.token, the store), \
                 its logs, its environment — and signal its processes. Use this mode for one \
                 trusted tenant only; to isolate tenants, run the server as root (tasks then run \
                 as `{}` or their project's run_as user).",
                settings.user
            );
            let users = TaskUsers { can_switch, default: None, known };
            return Ok((users, Some(warning)));
        }
        let default = TaskUser::lookup(&settings.user).map_err(|e| ServerError::TaskUser {
            message: format!(
                "the task user {:?} does not exist ({e}): create it (`useradd --system --no-create-home \
                 --shell /usr/sbin/nologin {}`), name another with --task-user, or run one trusted \
                 tenant's tasks as the server's user with --single-tenant",
                settings.user, settings.user
            ),
        })?;
        if default.uid == 0 {
            return Err(ServerError::TaskUser {
                message: format!("the task user {:?} is root: tasks must run unprivileged", settings.user),
            });
        }
        Ok((TaskUsers { can_switch, default: Some(default), known }, None))
    }

    /// What in `cluster`'s `run_as` cannot be honoured on this machine, as (path, message).
    pub(crate) fn check(&self, cluster: &ClusterConfig) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        for (project, name) in &cluster.file.run_as {
            let path = format!("run_as.{project}");
            if !self.can_switch {
                problems.push((
                    path,
                    format!(
                        "cannot run tasks as `{name}`: the server is not root, so it runs every task \
                         as itself (single-tenant mode); remove run_as or start the server as root"
                    ),
                ));
                continue;
            }
            match self.user(name) {
                Ok(u) if u.uid == 0 => {
                    problems.push((path, format!("`{name}` is root: tasks must run unprivileged")))
                }
                Ok(_) => {}
                Err(e) => problems.push((path, format!("`{name}`: {e}"))),
            }
        }
        problems
    }

    /// The user a task of `project` runs as under `run_as`: the entry of the project or of its
    /// nearest dotted parent, else the default. `Err` when the named user is gone.
    pub(crate) fn for_project(
        &self,
        run_as: &BTreeMap<String, String>,
        project: &str,
    ) -> Result<Option<TaskUser>, weir_backend::BackendError> {
        let mut p = project;
        loop {
            if let Some(name) = run_as.get(p) {
                return self.user(name).map(Some);
            }
            match p.rsplit_once('.') {
                Some((parent, _)) => p = parent,
                None => return Ok(self.default.clone()),
            }
        }
    }

    /// The user of projects without `run_as` (`None`: the server's own).
    pub(crate) fn default_user(&self) -> Option<&TaskUser> {
        self.default.as_ref()
    }

    fn user(&self, name: &str) -> Result<TaskUser, weir_backend::BackendError> {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(u) = known.get(name) {
            return Ok(u.clone());
        }
        let u = TaskUser::lookup(name)?;
        known.insert(name.to_string(), u.clone());
        Ok(u)
    }
}

/// Makes the data directory 0700 and the secrets in it 0600, whatever the umask was when they
/// were made: a pre-existing `admin.token` or store file with a looser mode is fixed, and
/// said so. Everything else in the directory is out of other users' reach through the
/// directory's own mode.
pub(crate) fn protect_data_dir(data_dir: &Path) -> Result<Vec<String>, ServerError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| ServerError::Io { action, path, source }
    };
    let mut fixed = Vec::new();
    let set = |path: &Path, mode: u32, fixed: &mut Vec<String>| -> Result<(), ServerError> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io("read the mode of", path)(e)),
        };
        let old = meta.permissions().mode() & 0o777;
        if old & !mode != 0 && !meta.file_type().is_symlink() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(io("restrict the mode of", path))?;
            fixed.push(format!("{} was mode {old:o}, now {mode:o}", path.display()));
        }
        Ok(())
    };
    set(data_dir, 0o700, &mut fixed)?;
    for name in ["admin.token", "weir.db", "weir.db-wal", "weir.db-shm", "weir.db-journal"] {
        set(&data_dir.join(name), 0o600, &mut fixed)?;
    }
    Ok(fixed)
}

/// Sets this process's umask to 077: whatever the server creates from now on (store files,
/// logs, state) is its own alone, whatever umask it was started with. Tasks inherit it (their
/// files are private to their user unless they choose otherwise). For the binary to call once
/// at start: a library should not change a process-wide setting behind its caller's back.
pub fn private_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Makes a folder for working folders: owned by the server, 0711 (its users can pass through
/// to their own run's folder but not list the others').
pub(crate) fn make_work_root(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(default: Option<&str>, known: &[(&str, u32)]) -> TaskUsers {
        let user = |n: &str, uid| TaskUser { name: n.into(), uid, gid: uid, home: "/".into() };
        TaskUsers {
            can_switch: true,
            default: default.map(|d| user(d, 900)),
            known: Mutex::new(known.iter().map(|(n, u)| (n.to_string(), user(n, *u))).collect()),
        }
    }

    #[test]
    fn a_project_runs_as_its_own_or_its_nearest_parents_user_else_the_default() {
        let u = users(Some("weir-task"), &[("ads-batch", 901), ("ranking", 902)]);
        let run_as: BTreeMap<String, String> =
            [("ads", "ads-batch"), ("ads.ranking", "ranking")].map(|(a, b)| (a.into(), b.into())).into();
        let name = |p: &str| u.for_project(&run_as, p).unwrap().map(|u| u.name);
        assert_eq!(name("ads.ranking").as_deref(), Some("ranking"));
        assert_eq!(name("ads.ranking.deep").as_deref(), Some("ranking"));
        assert_eq!(name("ads.other").as_deref(), Some("ads-batch"));
        assert_eq!(name("ads").as_deref(), Some("ads-batch"));
        assert_eq!(name("adsx").as_deref(), Some("weir-task"));
        assert_eq!(name("search").as_deref(), Some("weir-task"));
        let single = users(None, &[]);
        assert_eq!(single.for_project(&BTreeMap::new(), "search").unwrap(), None);
    }
}
