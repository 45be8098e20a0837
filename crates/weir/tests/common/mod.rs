//! Helpers shared by the integration tests that run the `weir` binary.
#![allow(dead_code)] // each test file uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../../weir-server/tests/common/ports.rs"]
mod ports;
#[allow(unused_imports)] // each test file uses its own subset
pub use ports::free_port;

/// The workspace root, so that paths in the output read `examples/cluster.yaml`.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).current_dir(workspace()).output().expect("run weir")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

/// For tests whose `weir serve` runs tasks that write into `dir`: a server started as root runs
/// its tasks as the unprivileged `weir-task` user (made here when missing, as CI does), so the
/// folder is opened to it (1777, as /tmp). Unprivileged, the server runs tasks as itself and
/// nothing is needed.
pub fn open_to_tasks(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if !std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    {
        return;
    }
    let exists = |name: &str| {
        std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split(':').next() == Some(name))
    };
    if !exists("weir-task") {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "weir-task",
            ])
            .status();
        assert!(exists("weir-task"), "cannot create the weir-task user for the server's tasks");
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o1777)).expect("open the scratch folder to tasks");
}

/// A directory of its own under the system temp dir, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("weir-test-{}-{test}", std::process::id()));
        fs::create_dir_all(&dir).expect("create scratch dir");
        open_to_tasks(&dir);
        Scratch(dir)
    }

    pub fn file(&self, name: &str, contents: &str) -> String {
        let path = self.0.join(name);
        fs::write(&path, contents).expect("write scratch file");
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        stop_processes_of(&self.0);
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Kills (SIGKILL) what a test's servers left running: a task outlives a killed `weir serve` by
/// design (the next server adopts it), so without this a test's sleeping tasks, and the load they
/// put on whatever runs after the tests, outlive the test. A process is the test's when its
/// cgroup is an attempt's cgroup of a backend whose state folder is in `dir`
/// (`weir/TAG/…`, [`weir_backend::local::cgroup_tag`]), or when its command line names a file in
/// `dir` or its working folder is in it (tasks without cgroups, a browser's profile). The test
/// process itself is spared.
pub fn stop_processes_of(dir: &Path) {
    let Ok(dir) = dir.canonicalize() else { return };
    let mut tags = Vec::new();
    let mut folders = vec![(dir.clone(), 0)];
    while let Some((folder, depth)) = folders.pop() {
        tags.push(format!("/weir/{}/", weir_backend::local::cgroup_tag(&folder)));
        if depth < 4 {
            let entries = fs::read_dir(&folder).into_iter().flatten().flatten();
            folders.extend(
                entries.filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| (e.path(), depth + 1)),
            );
        }
    }
    let inside = format!("{}/", dir.display());
    let own = std::process::id().to_string();
    // A task may fork while its siblings are killed: look again until nothing is found.
    for _ in 0..5 {
        let mut found = Vec::new();
        for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == own {
                continue;
            }
            let cgroup = fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
            let cmdline =
                String::from_utf8_lossy(&fs::read(entry.path().join("cmdline")).unwrap_or_default())
                    .replace('\0', " ");
            let cwd = fs::read_link(entry.path().join("cwd")).unwrap_or_default();
            if tags.iter().any(|t| cgroup.contains(t.as_str()))
                || cmdline.contains(&inside)
                || cwd.starts_with(&dir)
            {
                found.push(pid);
            }
        }
        if found.is_empty() {
            return;
        }
        let _ = Command::new("kill").arg("-KILL").args(&found).stderr(std::process::Stdio::null()).status();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A `weir serve` child process, killed and reaped when dropped (also when a test panics).
pub struct Serve(pub std::process::Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `weir` client run in `dir` against the server on loopback `port`, with no token from
/// the environment (it reads the admin token of the data directory).
pub fn client_of(dir: &Path, port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(dir)
        .env("WEIR_SERVER", format!("http://127.0.0.1:{port}"))
        .env_remove("WEIR_TOKEN")
        .output()
        .expect("run weir")
}

/// As [`client_of`], for a server whose data directory is `dir/data`.
pub fn client_in_data(dir: &Path, port: u16, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(["--data-dir", "data"]);
    client_of(dir, port, &all)
}

/// The standard output of a command that must have succeeded (both outputs shown if not).
pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// `method path` on the server on loopback `port` with `token`: the status and the JSON body
/// (`null` when the body is not JSON).
pub fn api(port: u16, token: &str, method: &str, path: &str) -> (u16, serde_json::Value) {
    // reqwest's rustls needs a process-wide crypto provider (installing it again is a no-op).
    weir_server::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let r = reqwest::Client::new()
            .request(method.parse().expect("method"), format!("http://127.0.0.1:{port}{path}"))
            .bearer_auth(token)
            .send()
            .await
            .expect("request");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    })
}
