//! `weir commit-helper` as a task runs it: the environment weir gives the task (built by
//! `TaskEnv::to_env`), the real binary, the local store and moto's S3 server; the job commit
//! afterwards shows exactly the files the helper put.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use weir_commit::{
    CommitConfig, Committer, Credentials, JobCommitPlan, RetrySettings, S3Config, StoreConfig, TaskEnv,
};

const OUT: &str = "sales/dt=2026-11-27/";
const STAGING: &str = "_weir/staging/run-1/report.0.a1/";

fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-helper-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn helper(env: &TaskEnv, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.arg("commit-helper").args(args).env_clear().env("PATH", "/usr/bin:/bin");
    for (k, v) in env.to_env() {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Puts two files through the helper, lists them, then job-commits and checks the output.
fn put_list_commit(env: &TaskEnv, files: &Path) {
    let big: Vec<u8> = (0..(11 * 1024 * 1024)).map(|i| (i % 251) as u8).collect();
    std::fs::write(files.join("part-0.csv"), &big).unwrap();
    std::fs::write(files.join("eu.csv"), b"region,total\neu,42\n").unwrap();

    let out = helper(env, &["put", files.join("part-0.csv").to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("part-0.csv\t{} bytes\t3 parts\n", big.len()));
    let eu = files.join("eu.csv");
    let out = helper(env, &["put", eu.to_str().unwrap(), "--as", "region=eu/part-1.csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = helper(env, &["list"]);
    assert_eq!(
        text(&out.stdout),
        format!("part-0.csv\t{} bytes\tuploaded\nregion=eu/part-1.csv\t19 bytes\tuploaded\n", big.len())
    );
    // A name that is weir's own is refused, naming it.
    let out = helper(env, &["put", eu.to_str().unwrap(), "--as", "_weir_manifest.json"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("\"_weir_manifest.json\""), "{}", text(&out.stderr));

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = Committer::for_task(env).unwrap();
        assert!(c.store().list(OUT).await.unwrap().is_empty(), "nothing visible before the job commit");
        let plan = JobCommitPlan {
            run_id: "run-1".into(),
            output: OUT.into(),
            partitions: vec!["dt=2026-11-27".into()],
            attempts: vec![STAGING.into()],
        };
        let mut state = c.prepare_job_commit(&plan).await.unwrap();
        let m = c.job_commit(&mut state).await.unwrap();
        assert_eq!(m.files.len(), 2);
        let got = c.store().get(&format!("{OUT}part-0.csv")).await.unwrap().unwrap();
        assert!(got.as_ref() == big.as_slice());
        let got = c.store().get(&format!("{OUT}region=eu/part-1.csv")).await.unwrap().unwrap();
        assert_eq!(got.as_ref(), b"region,total\neu,42\n");
        assert!(c.store().list_uploads("").await.unwrap().is_empty());
    });
}

fn small_parts() -> CommitConfig {
    CommitConfig { part_size: weir_commit::MIN_PART_SIZE, parallel_parts: 2, parallel_files: 2 }
}

#[test]
fn helper_puts_through_the_local_store() {
    let root = temp("root");
    let files = temp("files");
    let env = TaskEnv {
        store: StoreConfig::Local { root: root.clone() },
        output: OUT.into(),
        staging: STAGING.into(),
        config: small_parts(),
    };
    put_list_commit(&env, &files);

    // Outside a task (no variables) the helper says what is missing.
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["commit-helper", "list"])
        .env_clear()
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("WEIR_COMMIT_STORE"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(files);
}

struct Moto(Child);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn helper_puts_through_s3() {
    let dir = temp("moto");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _moto = Moto(
        Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server (pip install 'moto[server]==5.2.1'; .ci/run installs it)"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto_server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(
        b"PUT /weir-out HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.contains(" 200 "), "{answer}");

    let files = temp("s3files");
    let env = TaskEnv {
        store: StoreConfig::S3(S3Config {
            endpoint: Some(format!("http://127.0.0.1:{port}")),
            region: "us-east-1".into(),
            bucket: "weir-out".into(),
            credentials: Credentials {
                access_key_id: "task-key".into(),
                secret_access_key: "task-secret".into(),
                session_token: None,
            },
            request_timeout_ms: 30_000,
            retry: RetrySettings::default(),
        }),
        output: OUT.into(),
        staging: STAGING.into(),
        config: small_parts(),
    };
    put_list_commit(&env, &files);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(files);
}
