//! Tasks as a hostile tenant would write them (issue 17, "Isolation of tasks from the service"):
//! a task submitted with a project's submitter token tries to read the admin token, to write the
//! store, to read the server's environment through `/proc/$PPID/environ`, to signal the server
//! and another tenant's task, and to leave a `setsid` child behind its kill. Each of these
//! succeeded when tasks ran as the server's user inside its data directory.
//!
//! These tests need root (to switch users and make cgroups): CI runs them as root. They create
//! their users when missing (`weir-task`, `weir-test-ads`, `weir-test-search`), so they can be
//! run again. Run unprivileged, they fail with the reason unless `WEIR_SKIP_ROOT_TESTS=1`
//! explicitly allows skipping.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{config, one_task, temp_dir, TestServer};
use reqwest::Method;
use serde_json::json;
use weir_server::{ClusterSource, ServerConfig, Stop};

const LONG: Duration = Duration::from_secs(60);

const CLUSTER: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 8000, memory: 16g}}
queues:
  - name: ads
    children: [{name: tier1, tier: 1}]
  - name: search
    children: [{name: tier1, tier: 1}]
  - {name: default, tier: 3}
run_as: {ads: weir-test-ads, search: weir-test-search}
";

fn root_or_skip() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    if std::env::var("WEIR_SKIP_ROOT_TESTS").as_deref() == Ok("1") {
        eprintln!("\n*** SKIPPED task isolation tests (not root, WEIR_SKIP_ROOT_TESTS=1) ***\n");
        return false;
    }
    panic!(
        "the task isolation tests need root (to run tasks as other users and in cgroups); run them \
         as root, as CI does, or set WEIR_SKIP_ROOT_TESTS=1 to skip them knowingly"
    );
}

/// A local system user, created when missing (re-runnable; parallel tests may race to make it).
fn ensure_user(name: &str) -> weir_backend::TaskUser {
    if let Ok(u) = weir_backend::TaskUser::lookup(name) {
        return u;
    }
    let status = std::process::Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            name,
        ])
        .status()
        .expect("run useradd");
    weir_backend::TaskUser::lookup(name)
        .unwrap_or_else(|e| panic!("cannot create the test user {name} (useradd: {status}): {e}"))
}

fn users() -> (weir_backend::TaskUser, weir_backend::TaskUser) {
    ensure_user("weir-task");
    (ensure_user("weir-test-ads"), ensure_user("weir-test-search"))
}

/// The default, isolating configuration (not the single-tenant one the other tests use).
fn isolated(dir: &Path) -> ServerConfig {
    let mut c = config(dir);
    c.clusters =
        vec![ClusterSource { name: "default".into(), yaml: CLUSTER.into(), file: "isolation.yaml".into() }];
    c.tasks.single_tenant = false;
    c
}

async fn start() -> (TestServer, ServerConfig) {
    let dir = temp_dir("iso");
    let c = isolated(&dir);
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    (TestServer::start_with(c.clone(), &url).await, c)
}

async fn submitter(s: &TestServer, project: &str) -> String {
    let body =
        json!({"name": format!("{project}-ci"), "grants": [{"project": project, "role": "submitter"}]});
    let (st, t) = s.call(Method::POST, "/v1/tokens", Some(body)).await;
    assert_eq!(st, 201, "{t:#}");
    t["token"].as_str().expect("secret").to_string()
}

async fn submit_as(s: &TestServer, token: &str, queue: &str, command: &str) -> i64 {
    let wf = one_task(&format!("wf{}", rand_suffix()), queue, command);
    let (st, run) =
        s.call_as(token, Method::POST, "/v1/runs", Some(json!({"workflow": wf, "logical_date": "d"}))).await;
    assert_eq!(st, 201, "{run:#}");
    run["id"].as_i64().expect("id")
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

fn stdout(s: &TestServer, run: i64) -> String {
    std::fs::read_to_string(s.dir.join("logs").join(format!("run-{run}/0.0.0.1.stdout"))).unwrap_or_default()
}

fn workdir(c: &ServerConfig, run: i64) -> PathBuf {
    c.work_dir().join("default").join(format!("run-{run}"))
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < LONG, "{what} did not happen within {LONG:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s[s.rfind(')')? + 2..].chars().next())
        .is_some_and(|state| state != 'Z')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_task_reaches_neither_the_service_nor_another_tenant() {
    if !root_or_skip() {
        return;
    }
    let (ads_user, search_user) = users();
    let (mut s, c) = start().await;
    let data = s.dir.clone();
    let server = std::process::id();
    // The other tenant's task: it runs until killed and says its pid.
    let search = submitter(&s, "search").await;
    let victim_run = submit_as(&s, &search, "root.search.tier1", "echo $$; sleep 300").await;
    eventually("search's task to start", || !stdout(&s, victim_run).is_empty()).await;
    let victim: i32 = stdout(&s, victim_run).trim().parse().expect("a pid");

    let ads = submitter(&s, "ads").await;
    let d = data.display();
    let attack = format!(
        "echo \"token:$(cat ../admin.token {d}/admin.token 2>/dev/null)\"; \
         (echo x >> {d}/weir.db) 2>/dev/null && echo db-written || echo db-denied; \
         cat /proc/$PPID/environ >/dev/null 2>&1 && echo ppid-environ-read || echo ppid-environ-denied; \
         cat /proc/{server}/environ >/dev/null 2>&1 && echo server-environ-read || echo server-environ-denied; \
         kill -0 {server} 2>/dev/null && echo server-signalled || echo server-signal-denied; \
         kill -9 {victim} 2>/dev/null && echo victim-killed || echo victim-denied; \
         ls {d} >/dev/null 2>&1 && echo data-listed || echo data-denied; \
         ls .. >/dev/null 2>&1 && echo runs-listed || echo runs-denied; \
         echo \"uid:$(id -u) pwd:$(pwd)\""
    );
    let run = submit_as(&s, &ads, "root.ads.tier1", &attack).await;
    let done = s.wait(run, LONG).await;
    assert_eq!(done["state"], "succeeded", "{done:#}");
    let out = stdout(&s, run);
    assert_eq!(out.lines().next(), Some("token:"), "the task read the admin token: {out}");
    for denied in [
        "db-denied",
        "ppid-environ-denied",
        "server-environ-denied",
        "server-signal-denied",
        "victim-denied",
        "data-denied",
        "runs-denied",
    ] {
        assert!(out.lines().any(|l| l == denied), "expected {denied}: {out}");
    }
    // It ran as its project's user, in its run's folder outside the data directory.
    let wd = workdir(&c, run);
    assert!(out.contains(&format!("uid:{} pwd:{}", ads_user.uid, wd.display())), "{out}");
    assert!(!wd.starts_with(&data));
    let m = std::fs::metadata(&wd).expect("the run's working folder");
    assert_eq!((m.uid(), m.mode() & 0o777), (ads_user.uid, 0o700));
    // The other tenant's task is untouched and runs as its own user.
    assert!(alive(victim), "search's task was killed by ads's");
    assert_eq!(std::fs::metadata(format!("/proc/{victim}")).expect("victim").uid(), search_user.uid);
    // The service still answers the admin token only it holds, and its store is intact.
    assert_eq!(s.run(victim_run).await["state"], "running");
    s.call(Method::POST, &format!("/v1/runs/{victim_run}/kill"), None).await;
    assert_eq!(s.wait(victim_run, LONG).await["state"], "killed");
    s.stop(Stop::Now).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_run_ends_a_child_its_task_moved_to_a_new_session() {
    if !root_or_skip() {
        return;
    }
    users();
    let (mut s, c) = start().await;
    let ads = submitter(&s, "ads").await;
    let run = submit_as(
        &s,
        &ads,
        "root.ads.tier1",
        "setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 300' & \
         while [ ! -s escaped ]; do sleep 0.05; done; sleep 300",
    )
    .await;
    let escaped = workdir(&c, run).join("escaped");
    eventually("the setsid child to start", || std::fs::metadata(&escaped).is_ok_and(|m| m.len() > 0)).await;
    let child: i32 = std::fs::read_to_string(&escaped).expect("pid").trim().parse().expect("a pid");
    assert!(alive(child));
    s.call(Method::POST, &format!("/v1/runs/{run}/kill"), None).await;
    assert_eq!(s.wait(run, LONG).await["state"], "killed");
    assert!(!alive(child), "the setsid child {child} outlived its run's kill");
    s.stop(Stop::Now).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_is_the_servers_alone_whatever_was_there_before() {
    if !root_or_skip() {
        return;
    }
    users();
    let dir = temp_dir("iso-modes");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A first start makes the token; it is then loosened, as a careless copy would.
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut s = TestServer::start_with(isolated(&dir), &url).await;
    s.stop(Stop::Now).await;
    let token = weir_server::admin_token_path(&dir);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(dir.join("weir.db"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut s = TestServer::start_with(isolated(&dir), &url).await;
    let mode = |p: &Path| std::fs::metadata(p).expect("exists").mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&token), 0o600);
    assert_eq!(mode(&dir.join("weir.db")), 0o600);
    s.stop(Stop::Now).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_as_that_cannot_be_honoured_stops_the_start_and_says_where() {
    if !root_or_skip() {
        return;
    }
    users();
    for (value, why) in [("weir-no-such-user", "no such user"), ("root", "is root")] {
        let dir = temp_dir("iso-runas");
        let mut c = isolated(&dir);
        c.clusters[0].yaml = CLUSTER.replace("weir-test-search", value);
        let url = format!("sqlite://{}", dir.join("weir.db").display());
        let store = weir_store::Store::open(&url).await.expect("store");
        let err = match weir_server::Server::start(c, std::sync::Arc::new(store)).await {
            Ok(_) => panic!("started with run_as {value}"),
            Err(e) => e.to_string(),
        };
        for part in ["isolation.yaml", "run_as.search", value, why] {
            assert!(err.contains(part), "{part:?} missing from: {err}");
        }
    }
    // A task user that does not exist: named, with how to make it.
    let dir = temp_dir("iso-taskuser");
    let mut c = isolated(&dir);
    c.tasks.user = "weir-no-such-task-user".into();
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let store = weir_store::Store::open(&url).await.expect("store");
    let err = match weir_server::Server::start(c, std::sync::Arc::new(store)).await {
        Ok(_) => panic!("started without its task user"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("weir-no-such-task-user") && err.contains("useradd"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_without_run_as_run_as_the_task_user() {
    if !root_or_skip() {
        return;
    }
    users();
    let task_user = ensure_user("weir-task");
    let (mut s, c) = start().await;
    let run = s.submit(one_task("plain", "root.default", "id -u"), "d").await.1["id"].as_i64().expect("id");
    assert_eq!(s.wait(run, LONG).await["state"], "succeeded");
    assert_eq!(stdout(&s, run).trim(), task_user.uid.to_string());
    assert_eq!(std::fs::metadata(workdir(&c, run)).expect("workdir").uid(), task_user.uid);
    s.stop(Stop::Now).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_file_reloaded_with_an_unusable_run_as_is_refused() {
    if !root_or_skip() {
        return;
    }
    users();
    let (mut s, _) = start().await;
    for (value, why) in [("weir-no-such-user", "no such user"), ("root", "is root")] {
        let text = CLUSTER.replace("weir-test-search", value);
        let resp = s
            .http
            .put(format!("{}/v1/clusters/default/config", s.base))
            .bearer_auth(&s.token)
            .body(text)
            .send()
            .await
            .expect("request");
        let status = resp.status().as_u16();
        let e: serde_json::Value = resp.json().await.unwrap_or_default();
        assert_eq!(status, 400, "{e:#}");
        assert_eq!(e["error"]["field"], "run_as.search", "{e:#}");
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(value) && message.contains(why), "{e:#}");
    }
    s.stop(Stop::Now).await;
}
