//! Helpers shared by the integration tests that run the `weir` binary.
#![allow(dead_code)] // each test file uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
        let _ = fs::remove_dir_all(&self.0);
    }
}
