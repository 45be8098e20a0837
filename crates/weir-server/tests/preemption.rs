//! The engine's preemption carried out on real processes: a starved tier-1 job takes a
//! container from a tier-3 job; the victim's process is killed (SIGTERM, then SIGKILL), its
//! attempt is recorded as killed by preemption, and its task runs again without using up an
//! attempt.

mod common;

use std::time::Duration;

use common::{one_task, TestServer};
use reqwest::Method;
use serde_json::json;
use weir_server::{ClusterSource, Stop};

const CLUSTER: &str = "version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 1s}
nodes:
  - {count: 1, resources: {cpu: 2000, memory: 2048}}
queues:
  - {name: hi, tier: 1, fair_share_preemption_timeout: 1s, fair_share_preemption_threshold: 1.0}
  - {name: lo, tier: 3}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starved_tier_1_job_takes_a_container_from_tier_3() {
    let dir = common::temp_dir("preempt");
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut c = common::config(&dir, &url);
    c.clusters = vec![ClusterSource {
        name: "default".into(),
        yaml: CLUSTER.into(),
        file: "preemption cluster".into(),
    }];
    c.kill_grace = Duration::from_millis(500);
    let mut s = TestServer::start_with(c).await;
    // The tier-3 job fills the node with two long tasks; max_attempts 1, so only a kill that
    // does not count lets its task run again.
    let mut lo = one_task("lo", "root.lo", "sleep 60");
    lo["jobs"][0]["stages"][0]["tasks"] = json!(2);
    lo["jobs"][0]["stages"][0]["max_attempts"] = json!(1);
    // Memory decides (the fair policy, as YARN's, shares memory): each task takes half the node.
    lo["jobs"][0]["stages"][0]["resources"] = json!({"cpu": 1000, "memory": 1024});
    let (_, lo) = s.submit(lo, "d").await;
    let lo_id = lo["id"].as_i64().expect("id");
    s.wait_until(lo_id, Duration::from_secs(30), "both tier-3 tasks running", |r| {
        r["jobs"][0]["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["state"] == "running"))
    })
    .await;
    let mut hi = one_task("hi", "root.hi", "true");
    hi["jobs"][0]["stages"][0]["resources"] = json!({"cpu": 1000, "memory": 1024});
    let (_, hi) = s.submit(hi, "d").await;
    let hi_run = s.wait(hi["id"].as_i64().expect("id"), Duration::from_secs(60)).await;
    assert_eq!(hi_run["state"], "succeeded", "{hi_run:#}");
    // One tier-3 task lost its container and runs again as attempt 2.
    let lo_run = s
        .wait_until(lo_id, Duration::from_secs(30), "the preempted task running again", |r| {
            r["jobs"][0]["tasks"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["attempts"] == 2 && t["state"] == "running"))
        })
        .await;
    assert_ne!(lo_run["state"], "failed", "{lo_run:#}");
    let store = weir_store::Store::open(&url).await.expect("store");
    let tasks = store.tasks(lo_id).await.expect("tasks");
    let again = tasks.iter().find(|t| t.attempts == 2).expect("a task with two attempts");
    let attempts =
        store.attempts(lo_id, again.job_idx, again.stage_idx, again.task_idx).await.expect("attempts");
    assert_eq!(attempts[0].state, "killed");
    assert_eq!(attempts[0].reason.as_deref(), Some("preempted"));
    s.call(Method::POST, &format!("/v1/runs/{lo_id}/kill"), None).await;
    assert_eq!(s.wait(lo_id, Duration::from_secs(30)).await["state"], "killed");
    s.stop(Stop::Now).await;
}
