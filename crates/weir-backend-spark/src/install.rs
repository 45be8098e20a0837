//! Finding Spark on this machine: a configured `spark_home`, or the `pyspark` package's copy
//! found through a Python interpreter; the Python that runs PySpark drivers; Java.

use std::path::{Path, PathBuf};
use std::process::Command;

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
