//! What a task's processes cannot do (issue 17): outlive their kill by leaving the process
//! group (`setsid`), run as the backend's own user or with its groups, read the backend's
//! files, use more cpu or memory than granted. Run as root (CI does): the tests make their own
//! users, and fail rather than pass silently when they cannot.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use common::*;
use weir_backend::Backend;

/// A command that starts a child in a new session (out of the task's process group), records
/// its pid in `escaped`, and then does `then`.
fn escaping(then: &str) -> String {
    format!(
        "setsid sh -c 'echo $$ > escaped.tmp; mv escaped.tmp escaped; exec sleep 300' & \
         while [ ! -s escaped ]; do sleep 0.02; done; echo started; {then}"
    )
}

fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _, _)| state != 'Z')
}

async fn escaped_pid(f: &Fixture, attempt: &str) -> i32 {
    let stdout = f.launch(attempt, "").stdout;
    eventually("the task's setsid child to start", || read(&stdout).contains("started")).await;
    read(&f.work().join("escaped")).trim().parse().expect("a pid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_ends_a_child_that_called_setsid() {
    if !root_or_skip("cgroups") {
        return;
    }
    let mut f = Fixture::new("setsid-kill");
    let launched = f.start("setsid/a", &escaping("sleep 300")).await;
    let Some(_) = cgroups_or_skip(&launched, f.backend().isolation()) else { return };
    let child = escaped_pid(&f, "setsid/a").await;
    assert_ne!(stat(child).map(|s| s.2), Some(launched.pid), "the child left the task's process group");
    f.backend().kill(&launched, Duration::from_secs(30)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Killed);
    assert!(!alive(child), "the setsid child {child} outlived its task's kill");
    assert!(
        launched.cgroups.iter().all(|d| read(&d.join("cgroup.procs")).trim().is_empty()),
        "nothing is left in the attempt's cgroups"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_ends_leaves_no_setsid_child_behind() {
    if !root_or_skip("cgroups") {
        return;
    }
    let mut f = Fixture::new("setsid-end");
    let launched = f.start("setsid/b", &escaping("exit 0")).await;
    let Some(_) = cgroups_or_skip(&launched, f.backend().isolation()) else { return };
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Code(0));
    let child: i32 = read(&f.work().join("escaped")).trim().parse().expect("a pid");
    assert!(!alive(child), "the setsid child {child} outlived its task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_adopted_task_is_still_killed_whole() {
    if !root_or_skip("cgroups") {
        return;
    }
    let mut f = Fixture::new("setsid-adopt");
    let launched = f.start("setsid/c", &escaping("sleep 300")).await;
    let Some(_) = cgroups_or_skip(&launched, f.backend().isolation()) else { return };
    let child = escaped_pid(&f, "setsid/c").await;
    // The record, as the server stores it, carries the cgroups across the restart.
    let stored = weir_backend::Launched::from_json(&launched.to_json()).unwrap();
    assert_eq!(stored.cgroups, launched.cgroups);
    f.restart();
    f.backend().kill(&stored, Duration::from_secs(30)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Killed);
    assert!(!alive(child), "the setsid child {child} outlived the adopted task's kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_and_memory_limits_follow_the_granted_resources() {
    if !root_or_skip("cgroups") {
        return;
    }
    let mut f = Fixture::new("limits");
    // 1500 millicores, 2048 MiB (the fixture's launch).
    let launched = f.start("limits/a", "sleep 300").await;
    let Some(dirs) = cgroups_or_skip(&launched, f.backend().isolation()) else { return };
    let file = |name: &str| dirs.iter().find_map(|d| std::fs::read_to_string(d.join(name)).ok());
    let memory = file("memory.max").or_else(|| file("memory.limit_in_bytes"));
    let cpu = file("cpu.max").or_else(|| file("cpu.cfs_quota_us"));
    assert_eq!(memory.as_deref().map(str::trim), Some((2048u64 << 20).to_string().as_str()), "{dirs:?}");
    let cpu = cpu.expect("a cpu limit");
    assert!(cpu.trim() == "150000 100000" || cpu.trim() == "150000", "cpu limit {cpu:?} in {dirs:?}");
    // And the task is in them (it joins them between fork and exec; `start` may return first).
    let pid = launched.pid.to_string();
    eventually("the task to be in its cgroups", || {
        dirs.iter().all(|d| read(&d.join("cgroup.procs")).lines().any(|l| l == pid))
    })
    .await;
    f.backend().kill(&launched, Duration::from_secs(5)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Killed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_runs_as_its_user_without_the_backends_groups_or_files() {
    if !root_or_skip("switching users") {
        return;
    }
    let user = ensure_user("weir-test-alice");
    let mut f = Fixture::new("user");
    let secret = f.root.join("secret");
    std::fs::write(&secret, "s3cret").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut launch = f.launch(
        "user/a",
        &format!(
            "id -u; id -g; id -G; echo \"home=$HOME user=$USER\"; pwd; touch mine; \
             cat {} 2>/dev/null || echo cannot-read; cat /proc/$PPID/environ >/dev/null 2>&1 || echo no-environ",
            secret.display()
        ),
    );
    launch.workdir = f.work().join("run-1");
    launch.user = Some(user.clone());
    let launched = f.start_launch(&launch).await;
    assert_eq!(launched.uid, Some(user.uid));
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Code(0));
    let out = read(&launch.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], user.uid.to_string(), "{out}");
    assert_eq!(lines[1], user.gid.to_string(), "{out}");
    assert_eq!(lines[2], user.gid.to_string(), "no supplementary groups: {out}");
    assert_eq!(lines[3], format!("home={} user={}", user.home.display(), user.name), "{out}");
    assert!(out.contains("cannot-read"), "the task read a file only the backend may: {out}");
    // The wrapper (its parent) runs as the task's user too; the backend's environ is out of
    // reach either way, checked from the server in weir-server's isolation tests.
    let work = std::fs::metadata(&launch.workdir).unwrap();
    assert_eq!((work.uid(), work.mode() & 0o777), (user.uid, 0o700));
    assert_eq!(std::fs::metadata(launch.workdir.join("mine")).unwrap().uid(), user.uid);
    // The logs stay the backend's.
    let log = std::fs::metadata(&launch.stdout).unwrap();
    assert_eq!((log.uid(), log.mode() & 0o777), (0, 0o600));
}

/// A server killed between making a run's working folder and handing it to the task's user
/// leaves the folder the backend's own; the next attempt must finish the handover rather than
/// fail to enter it (found by `weir serve`'s kill -9 test: the run failed with "enter the
/// working folder: Permission denied").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_folder_left_by_a_crash_before_its_chown_is_handed_over() {
    if !root_or_skip("switching users") {
        return;
    }
    let user = ensure_user("weir-test-alice");
    let mut f = Fixture::new("user-crash");
    let mut launch = f.launch("user/crashed", "touch mine; pwd");
    launch.workdir = f.work().join("run-2");
    // What the crashed server left: mode 0700, still owned by root.
    std::fs::create_dir(&launch.workdir).unwrap();
    std::fs::set_permissions(&launch.workdir, std::fs::Permissions::from_mode(0o700)).unwrap();
    launch.user = Some(user.clone());
    f.start_launch(&launch).await;
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Code(0), "{}", read(&launch.stderr));
    let work = std::fs::metadata(&launch.workdir).unwrap();
    assert_eq!((work.uid(), work.gid(), work.mode() & 0o777), (user.uid, user.gid, 0o700));
    assert_eq!(std::fs::metadata(launch.workdir.join("mine")).unwrap().uid(), user.uid);
}

/// Cgroups are kept and re-used (`cgroup.rs`, `Pool`: making and removing them per attempt
/// was the largest cost of an isolated start). What must hold: a slot goes to the next attempt
/// only once the one before is forgotten (its end stored), the next attempt gets its own
/// limits, and cleaning up after the earlier attempt's record (adopt of the ended attempt,
/// kill, forget) never reaches the attempt now using the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_cgroup_gets_the_new_limits_and_a_stale_record_cannot_reach_it() {
    if !root_or_skip("cgroups") {
        return;
    }
    let mut f = Fixture::new("spares");
    let first = f.start("spares/a", "true").await;
    let Some(old_dirs) = cgroups_or_skip(&first, f.backend().isolation()) else { return };
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Code(0));
    assert!(
        old_dirs.iter().all(|d| d.is_dir() && read(&d.join("cgroup.procs")).trim().is_empty()),
        "an ended attempt's cgroups are kept, empty: {old_dirs:?}"
    );
    // Not forgotten yet (its end is not stored): the next attempt gets a slot of its own.
    let between = f.start("spares/between", "true").await;
    assert_ne!(between.cgroups, old_dirs, "a slot went to another attempt before its forget");
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Code(0));
    f.backend().forget(&between).await.unwrap();
    f.backend().forget(&first).await.unwrap();
    assert!(old_dirs.iter().all(|d| d.is_dir()), "a forgotten attempt's slot is kept: {old_dirs:?}");

    let mut launch = f.launch("spares/b", "sleep 300");
    launch.resources.cpu = 500;
    launch.resources.memory = 1024;
    let second = f.start_launch(&launch).await;
    let dirs = second.cgroups.clone();
    assert!(dirs == old_dirs || dirs == between.cgroups, "a freed slot is re-used: {dirs:?}");
    let stale = if dirs == old_dirs { &first } else { &between };
    let file = |name: &str| dirs.iter().find_map(|d| std::fs::read_to_string(d.join(name)).ok());
    let memory = file("memory.max").or_else(|| file("memory.limit_in_bytes"));
    assert_eq!(memory.as_deref().map(str::trim), Some((1024u64 << 20).to_string().as_str()), "{dirs:?}");
    let cpu = file("cpu.max").or_else(|| file("cpu.cfs_quota_us")).expect("a cpu limit");
    assert!(cpu.trim() == "50000 100000" || cpu.trim() == "50000", "cpu limit {cpu:?} in {dirs:?}");
    let pid = second.pid.to_string();
    eventually("the task to be in its cgroups", || {
        dirs.iter().all(|d| read(&d.join("cgroup.procs")).lines().any(|l| l == pid))
    })
    .await;

    // The earlier attempt's record, handled again: adopt, kill, forget.
    let adopted = f.backend().adopt(stale).await.unwrap();
    assert!(matches!(adopted, weir_backend::Adopted::Ended(_)), "{adopted:?}");
    f.backend().kill(stale, Duration::from_millis(1)).await.unwrap();
    f.backend().forget(stale).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(alive(second.pid), "cleaning up after the first attempt reached the second");
    assert!(dirs.iter().all(|d| d.is_dir()), "the second attempt's cgroups are still there: {dirs:?}");
    assert!(dirs.iter().all(|d| read(&d.join("cgroup.procs")).lines().any(|l| l == pid)));

    // After a restart, the record of an attempt from before it never names a slot in use; a
    // slot the ended attempt left empty went with the backend (none is left behind).
    f.backend().kill(&second, Duration::from_secs(5)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Killed);
    let running = f.start("spares/running", "sleep 300").await;
    f.restart();
    assert!(dirs.iter().all(|d| !d.exists()), "an emptied slot outlived its backend: {dirs:?}");
    assert!(running.cgroups.iter().all(|d| d.is_dir()), "a running attempt's slot is kept");
    let third = f.start("spares/c", "sleep 300").await;
    assert!(third.cgroups.iter().all(|d| !running.cgroups.contains(d)), "{:?}", third.cgroups);
    f.backend().forget(&second).await.unwrap();
    // The running attempt's slot, from before the restart, is its own: killed and removed.
    f.backend().kill(&running, Duration::from_secs(5)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Killed);
    f.backend().forget(&running).await.unwrap();
    assert!(running.cgroups.iter().all(|d| !d.exists()), "a slot of an earlier backend is removed on forget");
    f.backend().kill(&third, Duration::from_secs(5)).await.unwrap();
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Killed);
}

/// A slot whose attempt left memory charged to it (a file in `/dev/shm` stays charged to the
/// cgroup that wrote it after its processes end) is not handed to the next attempt, maybe
/// another tenant's: that one gets all the memory it was granted (re-used, the slot would
/// count the file against its limit, or the kernel would refuse a limit below it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_left_holding_memory_is_not_reused() {
    if !root_or_skip("cgroups") {
        return;
    }
    let mut f = Fixture::new("charged");
    let shm = format!("/dev/shm/weir-test-charged-{}", std::process::id());
    let first = f.start("charged/a", &format!("head -c 33554432 /dev/zero > {shm}")).await;
    let Some(old_dirs) = cgroups_or_skip(&first, f.backend().isolation()) else { return };
    let memory = |dirs: &[std::path::PathBuf]| {
        dirs.iter().find_map(|d| {
            ["memory.current", "memory.usage_in_bytes"]
                .iter()
                .find_map(|file| std::fs::read_to_string(d.join(file)).ok())
                .and_then(|s| s.trim().parse::<u64>().ok())
        })
    };
    assert_eq!(f.next_exit().await.exit, weir_backend::Exit::Code(0));
    let Some(charged) = memory(&old_dirs) else {
        let _ = std::fs::remove_file(&shm);
        eprintln!("skipped: no memory controller for the tasks' cgroups here ({old_dirs:?})");
        return;
    };
    assert!(charged >= 32 << 20, "the file is charged to the ended attempt's cgroup: {charged}");
    f.backend().forget(&first).await.unwrap();
    let mut launch = f.launch("charged/b", "head -c 8388608 /dev/zero | wc -c");
    // A limit above the 32 MiB left behind: the kernel would take it, and a re-used slot
    // would leave this attempt 16 of its 48 MiB.
    launch.resources.memory = 48;
    let second = f.start_launch(&launch).await;
    let exit = f.next_exit().await.exit;
    let _ = std::fs::remove_file(&shm);
    assert_ne!(second.cgroups, old_dirs, "a slot holding 32 MiB of /dev/shm went to the next attempt");
    assert!(old_dirs.iter().all(|d| !d.exists()), "the charged slot is removed: {old_dirs:?}");
    assert_eq!(exit, weir_backend::Exit::Code(0));
    assert_eq!(read(&launch.stdout).trim(), "8388608");
}
