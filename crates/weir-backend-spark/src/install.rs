//! Finding Spark on this machine: a configured `spark_home`, or the `pyspark` package's copy
//! found through a Python interpreter; the Python that runs PySpark drivers; Java.

use std::path::{Path, PathBuf};
use std::process::Command;

use weir_backend::TaskUser;

use crate::SparkError;

/// A Spark installation the backend submits through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install {
    /// `SPARK_HOME`: holds `bin/spark-submit` and `jars/`.
    pub home: PathBuf,
    /// The interpreter PySpark drivers run with (`PYSPARK_PYTHON`), as an absolute path;
    /// `None` when no Python was found (JVM applications still run).
    pub python: Option<PathBuf>,
    /// Spark's version, read from the name of its `spark-core` jar (`4.0.1`); empty when the
    /// jar is not found.
    pub version: String,
}

impl Install {
    pub fn submit(&self) -> PathBuf {
        self.home.join("bin").join("spark-submit")
    }

    /// Finds Spark: `spark_home` when given, else the `pyspark` package of `python` (default
    /// `python3` on the server's `PATH`). Blocking: runs the interpreter once.
    pub fn find(spark_home: Option<&Path>, python: Option<&Path>) -> Result<Install, SparkError> {
        let interpreter = python.unwrap_or(Path::new("python3"));
        let probe = probe_python(interpreter);
        let (home, python) = match (spark_home, probe) {
            (Some(home), probe) => (home.to_path_buf(), probe.ok().map(|p| p.executable)),
            (None, Ok(p)) => match p.pyspark {
                Some(home) => (home, Some(p.executable)),
                None => {
                    return Err(SparkError::NoSpark {
                        reason: format!(
                            "`spark_home` is not set and {} has no `pyspark` package (pip install pyspark, \
                             or set spark_home to a Spark distribution)",
                            p.executable.display()
                        ),
                    })
                }
            },
            (None, Err(e)) => {
                return Err(SparkError::NoSpark {
                    reason: format!(
                        "`spark_home` is not set and the `pyspark` package cannot be looked up: {e}"
                    ),
                })
            }
        };
        let install = Install { version: version_of(&home), home, python };
        install.check()?;
        if java().is_none() {
            return Err(SparkError::NoJava);
        }
        Ok(install)
    }

    /// `bin/spark-submit` is there and executable.
    pub fn check(&self) -> Result<(), SparkError> {
        use std::os::unix::fs::PermissionsExt;
        let submit = self.submit();
        match std::fs::metadata(&submit) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
            Ok(_) => {
                Err(SparkError::NoSpark { reason: format!("{} is not an executable file", submit.display()) })
            }
            Err(e) => Err(SparkError::NoSpark { reason: format!("{}: {e}", submit.display()) }),
        }
    }
}

impl Install {
    /// Why `user` (its uid and primary group; tasks run with no supplementary groups) cannot
    /// run this Spark: `bin/spark-submit` (read and execute: it is a script), `jars/` (read and
    /// search), and the Python of PySpark drivers (execute), each through folders it may
    /// search. `None`: it can. From the files' mode bits (ACLs are not read). A server running
    /// as root finds Spark in root's own Python (pip's `pyspark` under a 0700 home); its tasks,
    /// run as an unprivileged user, then fail at `exec` with status 126 — this says so before.
    pub fn unreachable_for(&self, user: &TaskUser) -> Option<String> {
        let mut needs = vec![(self.submit(), READ | EXEC), (self.home.join("jars"), READ | EXEC)];
        if let Some(python) = &self.python {
            needs.push((python.clone(), EXEC));
        }
        let problem = needs.iter().find_map(|(path, want)| reach(path, user.uid, user.gid, *want).err())?;
        Some(format!(
            "the tasks' user `{}` (uid {}) cannot run Spark: {problem}; install Spark (or the \
             pyspark package) where that user can read it and set `spark_home` (and `python`) to \
             it (docs/backends.md, spark-local)",
            user.name, user.uid
        ))
    }
}

const READ: u32 = 0o4;
const EXEC: u32 = 0o1;

/// Whether `uid`/`gid` may reach `path` with the `want` bits (`READ`, `EXEC`): every folder
/// on the way searchable, the path's own mode granting `want`, by POSIX's rule (the owner's
/// bits if it owns the file, else the group's if it is the file's group, else the others').
/// A symbolic link is followed and the folders on the way to its target checked too.
fn reach(path: &Path, uid: u32, gid: u32, want: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let allows = |m: &std::fs::Metadata, want: u32| {
        let bits = if uid == 0 {
            0o7
        } else if m.uid() == uid {
            m.mode() >> 6
        } else if m.gid() == gid {
            m.mode() >> 3
        } else {
            m.mode()
        };
        bits & want == want
    };
    let describe = |p: &Path, m: &std::fs::Metadata| {
        format!(
            "{} (mode {:04o}, owner uid {}, group gid {})",
            p.display(),
            m.mode() & 0o7777,
            m.uid(),
            m.gid()
        )
    };
    // A relative path is reached through the working folder and every folder above it.
    let path: &Path = &std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut paths = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path) {
        if real != path {
            paths.push(real);
        }
    }
    for p in &paths {
        let mut ancestors: Vec<&Path> = p.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).collect();
        ancestors.reverse();
        for dir in ancestors {
            let m = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            if !allows(&m, EXEC) {
                return Err(format!("it may not search the folder {}", describe(dir, &m)));
            }
        }
    }
    let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !allows(&m, want) {
        let what = match want {
            w if w == READ | EXEC && m.is_dir() => "list",
            w if w == READ | EXEC => "read and execute",
            w if w == EXEC => "execute",
            _ => "read",
        };
        return Err(format!("it may not {what} {}", describe(path, &m)));
    }
    Ok(())
}

struct Probe {
    executable: PathBuf,
    pyspark: Option<PathBuf>,
}

/// Asks `python` for its own path and the `pyspark` package's folder (the package ships
/// `bin/spark-submit` and the jars: it is a Spark home).
fn probe_python(python: &Path) -> Result<Probe, String> {
    let script = "import sys\nprint(sys.executable)\ntry:\n    import os, pyspark\n    \
                  print(os.path.dirname(pyspark.__file__))\nexcept ImportError:\n    print('')\n";
    let out = Command::new(python)
        .args(["-c", script])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} -c … failed ({}): {}",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let executable = PathBuf::from(lines.next().unwrap_or_default());
    let pyspark = lines.next().filter(|l| !l.is_empty()).map(PathBuf::from);
    Ok(Probe { executable, pyspark })
}

/// The version in `jars/spark-core_SCALA-VERSION.jar`.
fn version_of(home: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(home.join("jars")) else { return String::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find_map(|name| {
            let rest = name.strip_prefix("spark-core_")?.strip_suffix(".jar")?;
            Some(rest.split_once('-')?.1.to_string())
        })
        .unwrap_or_default()
}

/// The `java` spark-submit will run: `$JAVA_HOME/bin/java`, else the first on `PATH`.
pub fn java() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let java = PathBuf::from(home).join("bin").join("java");
        return java.is_file().then_some(java);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("java")).find(|j| j.is_file())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{symlink, PermissionsExt};

    use super::*;

    /// A Spark home laid out as pip's `pyspark` package is (bin/spark-submit, jars/), under a
    /// folder `top` of this test's own.
    fn layout(name: &str) -> (PathBuf, Install) {
        let top = std::env::temp_dir().join(format!("weir-spark-reach-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let home = top.join("site-packages").join("pyspark");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::fs::create_dir_all(home.join("jars")).unwrap();
        std::fs::write(home.join("bin/spark-submit"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir_all(top.join("bin")).unwrap();
        std::fs::write(top.join("bin/python3.11"), "").unwrap();
        symlink("python3.11", top.join("bin/python3")).unwrap();
        for (p, mode) in [
            (top.clone(), 0o755),
            (top.join("site-packages"), 0o755),
            (home.clone(), 0o755),
            (home.join("bin"), 0o755),
            (home.join("bin/spark-submit"), 0o755),
            (home.join("jars"), 0o755),
            (top.join("bin"), 0o755),
            (top.join("bin/python3.11"), 0o755),
        ] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let install = Install { home, python: Some(top.join("bin/python3")), version: String::new() };
        (top, install)
    }

    fn user() -> TaskUser {
        // Not the owner (the test's user) nor in its group: the "others" bits decide.
        TaskUser { name: "weir-task".into(), uid: 4242, gid: 4242, home: "/nonexistent".into() }
    }

    #[test]
    fn spark_readable_by_all_is_reachable() {
        let (top, install) = layout("ok");
        assert_eq!(install.unreachable_for(&user()), None);
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn a_private_home_on_the_way_is_named_with_its_mode() {
        // pip's pyspark in root's Python under a 0700 /root: the task user gets 126 at exec.
        let (top, install) = layout("home");
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = install.unreachable_for(&user()).expect("a 0700 folder on the way is found");
        assert!(why.contains("`weir-task` (uid 4242) cannot run Spark"), "{why}");
        assert!(why.contains(&format!("may not search the folder {} (mode 0700", top.display())), "{why}");
        assert!(why.contains("spark_home"), "{why}");
        // Its owner may: the owner's bits decide for the owner.
        let own = TaskUser { uid: owner_uid(&top), ..user() };
        assert_eq!(install.unreachable_for(&own), None);
        std::fs::remove_dir_all(top).unwrap();
    }

    #[test]
    fn a_script_without_read_or_jars_without_listing_or_python_without_execute_is_refused() {
        let (top, install) = layout("bits");
        let submit = install.submit();
        // Execute alone is not enough for a script: the shell must read it.
        std::fs::set_permissions(&submit, std::fs::Permissions::from_mode(0o711)).unwrap();
        let why = install.unreachable_for(&user()).unwrap();
        assert!(why.contains(&format!("may not read and execute {}", submit.display())), "{why}");
        std::fs::set_permissions(&submit, std::fs::Permissions::from_mode(0o755)).unwrap();

        std::fs::set_permissions(install.home.join("jars"), std::fs::Permissions::from_mode(0o711)).unwrap();
        let why = install.unreachable_for(&user()).unwrap();
        assert!(why.contains("may not list"), "{why}");
        std::fs::set_permissions(install.home.join("jars"), std::fs::Permissions::from_mode(0o755)).unwrap();

        // The interpreter is reached through its link: the link's target's bits decide.
        std::fs::set_permissions(top.join("bin/python3.11"), std::fs::Permissions::from_mode(0o750)).unwrap();
        let why = install.unreachable_for(&user()).unwrap();
        assert!(why.contains("may not execute"), "{why}");
        // A member of the file's group may (group bits 5).
        let group = TaskUser { gid: group_gid(&top.join("bin/python3.11")), ..user() };
        assert_eq!(install.unreachable_for(&group), None);
        std::fs::remove_dir_all(top).unwrap();
    }

    fn owner_uid(p: &Path) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).unwrap().uid()
    }

    fn group_gid(p: &Path) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).unwrap().gid()
    }
}
