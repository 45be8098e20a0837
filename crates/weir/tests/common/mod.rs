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

/// A directory of its own under the system temp dir, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("weir-test-{}-{test}", std::process::id()));
        fs::create_dir_all(&dir).expect("create scratch dir");
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
