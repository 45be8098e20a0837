//! A Spark standalone master (REST gateway on) and one worker, from the `pyspark` package's
//! distribution, on loopback ports; shared by the backend's tests and `weir serve`'s
//! (crates/weir/tests/serve_spark_standalone.rs includes this file).

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use weir_backend_spark::Install;

/// JVM flags for every JVM of the Spark tests (drivers, executors, master, worker): the client
/// compiler only (`TieredStopAtLevel=1`: no C2 compiler threads competing for 2 cores with the
/// application; short JVMs run C2's code too little to repay it) and the serial collector (no
/// parallel GC threads). Test-only settings, for the time the tests take: weir sets no JVM
/// option for users.
pub const TEST_JVM_FLAGS: &str = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC";

/// [`TEST_JVM_FLAGS`] and, once it exists, `-XX:SharedArchiveFile=` an archive of the classes a
/// Spark application loads ([`spark_class_archive`]): each JVM then maps Spark's classes instead
/// of reading and verifying them from the jars. A JVM that finds the archive unusable (another
/// Java, another class path, a damaged file) runs without it, silently (`-Xshare:auto`, the
/// default), so the archive changes the tests' speed, never what they check.
pub fn test_jvm_options() -> String {
    static OPTIONS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OPTIONS
        .get_or_init(|| match spark_class_archive() {
            Some(a) => format!("{TEST_JVM_FLAGS} -XX:SharedArchiveFile={}", a.display()),
            None => TEST_JVM_FLAGS.to_string(),
        })
        .clone()
}

/// The Spark properties that give the tests' drivers and executors [`test_jvm_options`].
pub fn test_jvm_conf() -> [(String, String); 2] {
    [
        ("spark.driver.extraJavaOptions".to_string(), test_jvm_options()),
        ("spark.executor.extraJavaOptions".to_string(), test_jvm_options()),
    ]
}

/// A dynamic class-data-sharing archive (JDK 13+, `-XX:ArchiveClassesAtExit`) of the classes a
/// PySpark word count loads, in the temporary folder, named after the Java and the Spark it was
/// made with; made once per machine by the first test process that needs it (one word count,
/// about three times the CPU of a plain one), under a lock file; the others wait for it. `None` when
/// it cannot be made (then the tests run without it).
pub fn spark_class_archive() -> Option<std::path::PathBuf> {
    let install = Install::find(None, None).ok()?;
    let java = java_version()?;
    let dir = std::env::temp_dir();
    let archive = dir.join(format!("weir-test-spark-{}-java-{java}.jsa", install.version));
    if archive.is_file() {
        return Some(archive);
    }
    let lock = dir.join(format!("weir-test-spark-{}-java-{java}.lock", install.version));
    let take = || std::fs::OpenOptions::new().write(true).create_new(true).open(&lock).is_ok();
    if !take() {
        // Another test process makes it: wait for it, up to 15 minutes (a loaded 2-core machine
        // took 4.5). A lock older than 20 minutes was left by a process that died making it:
        // take it over.
        let mut mine = false;
        for _ in 0..1800 {
            if archive.is_file() {
                return Some(archive);
            }
            let age = std::fs::metadata(&lock).ok().and_then(|m| m.modified().ok()?.elapsed().ok());
            if age.is_some_and(|a| a > Duration::from_secs(1200)) {
                let _ = std::fs::remove_file(&lock);
                mine = take();
                break;
            }
            if age.is_none() && !archive.is_file() {
                // The maker gave up (no archive, lock gone): try once ourselves.
                mine = take();
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if !mine {
            return archive.is_file().then_some(archive);
        }
    }
    let examples = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/spark"));
    let partial =
        dir.join(format!("weir-test-spark-{}-java-{java}.{}.jsa", install.version, std::process::id()));
    let made = Command::new(install.submit())
        .args(["--master", "local[1]", "--conf", "spark.ui.enabled=false", "--conf"])
        .arg(format!(
            "spark.driver.extraJavaOptions={TEST_JVM_FLAGS} -XX:ArchiveClassesAtExit={}",
            partial.display()
        ))
        .arg(examples.join("wordcount.py"))
        .arg(examples.join("words.txt"))
        .env("SPARK_HOME", &install.home)
        .env("PYSPARK_PYTHON", install.python.clone().unwrap_or_else(|| "python3".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && partial.is_file()
        && std::fs::rename(&partial, &archive).is_ok();
    let _ = std::fs::remove_file(&partial);
    let _ = std::fs::remove_file(&lock);
    made.then_some(archive)
}

/// `java -version`'s version string (`17.0.15`), from the `java` spark-submit runs.
pub fn java_version() -> Option<String> {
    let java = weir_backend_spark::java()?;
    let out = Command::new(java).arg("-version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let quoted = text.split('"').nth(1)?;
    Some(quoted.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '.').collect())
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `n` distinct free ports: each is held until all are chosen (two `free_port()` calls in a row
/// may hand out the same port; the master would then move its REST gateway to the next port).
fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> =
        (0..N).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

/// A master and a worker, each in its own process group, stopped (SIGTERM, then SIGKILL) when
/// dropped.
pub struct Cluster {
    pub rest_url: String,
    pub ui_url: String,
    children: Vec<Child>,
    /// The master's RPC port and the folder of logs and work, for another worker.
    master: u16,
    dir: std::path::PathBuf,
}

impl Cluster {
    pub fn start(dir: &Path) -> Cluster {
        let [master, rest, ui] = free_ports::<3>();
        let s = |v: &str| v.to_string();
        let children = vec![spawn(
            dir,
            &[
                s("org.apache.spark.deploy.master.Master"),
                s("--host"),
                s("127.0.0.1"),
                s("--port"),
                master.to_string(),
                s("--webui-port"),
                ui.to_string(),
            ],
            &format!("-Dspark.master.rest.enabled=true -Dspark.master.rest.port={rest}"),
            "master.log",
        )];
        let mut cluster = Cluster {
            rest_url: format!("http://127.0.0.1:{rest}"),
            ui_url: format!("http://127.0.0.1:{ui}"),
            children,
            master,
            dir: dir.to_path_buf(),
        };
        cluster.start_worker();
        cluster
    }

    /// Starts a worker (2 cores, 4g) that registers with the master; it is the last child.
    pub fn start_worker(&mut self) {
        let work = self.dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let s = |v: &str| v.to_string();
        let n = self.children.len();
        self.children.push(spawn(
            &self.dir,
            &[
                s("org.apache.spark.deploy.worker.Worker"),
                s("--host"),
                s("127.0.0.1"),
                s("--webui-port"),
                free_port().to_string(),
                s("--cores"),
                s("2"),
                s("--memory"),
                s("4g"),
                s("--work-dir"),
                work.display().to_string(),
                format!("spark://127.0.0.1:{}", self.master),
            ],
            "",
            &format!("worker-{n}.log"),
        ));
    }

    /// Stops the last worker started (SIGKILL to its process group: a worker that dies).
    pub fn kill_worker(&mut self) {
        if self.children.len() < 2 {
            return;
        }
        let mut c = self.children.pop().unwrap();
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", c.id())]).status();
        let _ = c.wait();
    }

    /// Waits until the master lists an alive worker and its REST gateway takes connections (CI
    /// once found the worker registered and the gateway not answering).
    pub fn ready(&self) {
        let rest = self.rest_url.trim_start_matches("http://").to_string();
        for _ in 0..240 {
            if self.master_json().contains("\"aliveworkers\" : 1")
                && std::net::TcpStream::connect(&rest).is_ok()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let log = std::fs::read_to_string(self.dir.join("master.log")).unwrap_or_default();
        panic!("the standalone master (REST gateway at {rest}) and worker did not come up in 120 s; the master's log:\n{log}");
    }

    /// The master's `/json/` (empty when it does not answer), read with a bare HTTP/1.0 GET.
    pub fn master_json(&self) -> String {
        use std::io::{Read, Write};
        let authority = self.ui_url.trim_start_matches("http://");
        let Ok(mut s) = std::net::TcpStream::connect(authority) else { return String::new() };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = write!(s, "GET /json/ HTTP/1.0\r\nHost: {authority}\r\n\r\n");
        let mut body = String::new();
        let _ = s.read_to_string(&mut body);
        body.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let group = |c: &Child, signal: &str| {
            let _ = Command::new("kill").args([signal, "--", &format!("-{}", c.id())]).status();
        };
        for c in &self.children {
            group(c, "-TERM");
        }
        // Up to 2 s for them to stop (polled: JVMs on SIGTERM usually take a fraction of it).
        for _ in 0..20 {
            if self.children.iter_mut().all(|c| c.try_wait().is_ok_and(|s| s.is_some())) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for c in &mut self.children {
            group(c, "-KILL");
            let _ = c.wait();
        }
    }
}

/// Runs `spark-class ARGS` from the pyspark package's Spark in its own process group, its output
/// in `dir/LOG`.
fn spawn(dir: &Path, args: &[String], opts: &str, log: &str) -> Child {
    let install = Install::find(None, None).expect("Spark (pip install pyspark) and Java 17 are installed");
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Command::new(install.home.join("bin").join("spark-class"))
        .args(args)
        .env("SPARK_HOME", &install.home)
        .env("SPARK_MASTER_OPTS", opts)
        // The master's and worker's own JVMs: small heaps (they track one worker and a few
        // drivers) and the tests' JVM options.
        .env("SPARK_DAEMON_MEMORY", "256m")
        .env("SPARK_DAEMON_JAVA_OPTS", test_jvm_options())
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .env("SPARK_LOG_DIR", dir)
        .env("SPARK_PID_DIR", dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("spark-class starts")
}

/// The Python interpreter whose `pyspark` the workers use (PYSPARK_PYTHON).
pub fn python() -> String {
    let out = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A PYSPARK_DRIVER_PYTHON for the workers, written in `dir`: Spark's kill stops the driver's
/// JVM alone (`DriverRunner.kill`: `Utils.terminateProcess` of the JVM), and this wrapper has the kernel end the
/// Python driver with its JVM (`setpriv --pdeathsig`, PR_SET_PDEATHSIG).
pub fn driver_python(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("driver-python");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec setpriv --pdeathsig TERM -- {} \"$@\"\n", python()))
        .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}
