//! The engine's preemption carried out on real processes: a starved tier-1 job takes a
//! container from a tier-3 job. First the warning: the victim's task shows `preempting` with the
//! reason and the kill time, and finds the same in the file `WEIR_PREEMPT_NOTICE` names — as
//! YARN's Fair Scheduler first marks the containers (`FSPreemptionThread.preemptContainers` →
//! `FSAppAttempt.trackContainerForPreemption`, which the AM learns through the allocate
//! response's `PreemptionMessage`) and kills them `waitTimeBeforeKill` later
//! (`PreemptContainersTask`). Then the kill, no earlier than the kill time: SIGTERM, then
//! SIGKILL; the attempt is recorded as killed by preemption, and its task runs again without
//! using up an attempt.

mod common;

use std::time::Duration;

use common::{one_task, TestServer};
use reqwest::header::COOKIE;
use reqwest::Method;
use serde_json::json;
use weir_server::{ClusterSource, Stop};

const CLUSTER: &str = "version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 3s}
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
    let mut c = common::config(&dir);
    c.clusters = vec![ClusterSource {
        name: "default".into(),
        yaml: CLUSTER.into(),
        file: "preemption cluster".into(),
    }];
    c.kill_grace = Duration::from_millis(500);
    let mut s = TestServer::start_with(c, &url).await;
    // The tier-3 job fills the node with two long tasks; max_attempts 1, so only a kill that
    // does not count lets its task run again.
    // Each waits for its preemption notice and keeps a copy, as a task that checkpoints would.
    let wait_for_notice = format!(
        "while [ ! -e \"$WEIR_PREEMPT_NOTICE\" ]; do sleep 0.05; done; \
         cp \"$WEIR_PREEMPT_NOTICE\" {}/notice.$WEIR_TASK_INDEX; sleep 60",
        dir.display()
    );
    let mut lo = one_task("lo", "root.lo", &wait_for_notice);
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
    // A dashboard session, to see the warning and the preemption as an operator would.
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let login = common::dashboard_login(&http, &s.base, &s.token).await;
    let cookie = common::session_cookie(&login);
    let page = |path: String| {
        let req = http.get(format!("{}{path}", s.base)).header(COOKIE, &cookie);
        async move { req.send().await.expect("page").text().await.expect("html") }
    };
    let mut hi = one_task("hi", "root.hi", "true");
    hi["jobs"][0]["stages"][0]["resources"] = json!({"cpu": 1000, "memory": 1024});
    let (_, hi) = s.submit(hi, "d").await;
    // First the warning (the engine's PreemptContainer): the victim is `preempting`, with the
    // reason and the kill time, and the task finds the same in its notice file.
    let warned = s
        .wait_until(lo_id, Duration::from_secs(30), "a tier-3 task warned", |r| {
            r["jobs"][0]["tasks"].as_array().is_some_and(|t| t.iter().any(|t| t["state"] == "preempting"))
        })
        .await;
    let victim = warned["jobs"][0]["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["state"] == "preempting"))
        .expect("the warned task")
        .clone();
    let reason = victim["preemption"]["reason"].as_str().expect("a reason").to_string();
    let kill_at_ms = victim["preemption"]["kill_at_ms"].as_i64().expect("a kill time");
    assert!(reason.contains("root.hi") && reason.contains("fair share"), "{reason}");
    assert_eq!(victim["attempts"], 1);
    // The run's page shows the warned task's kill time and reason under its state, within the
    // kill wait (3 s). The reason is HTML-escaped on the page; compare its words.
    let html = page(format!("/runs/{lo_id}")).await;
    let row = format!("<tr data-task=\"j.s.{}\" data-state=\"preempting\">", victim["index"]);
    let at = html.find(&row).unwrap_or_else(|| panic!("no row `{row}`:\n{html}"));
    let cell = &html[at..at + html[at..].find("</tr>").expect("the row's end")];
    let warning = format!("preempted at {}", &weir_server::format_utc(kill_at_ms).replace('T', " ")[..19]);
    assert!(cell.contains(&warning) && cell.contains("root.hi"), "no `{warning}` in:\n{cell}");
    let copy = dir.join(format!("notice.{}", victim["index"]));
    for _ in 0..200 {
        if copy.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let notice = std::fs::read_to_string(&copy).expect("notice");
    assert_eq!(
        notice,
        format!(
            "kill_at_ms={kill_at_ms}\nkill_at={}\nreason={reason}\n",
            weir_server::format_utc(kill_at_ms)
        )
    );
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
    let store = weir_store::open(&url).await.expect("store");
    let tasks = store.tasks(lo_id).await.expect("tasks");
    let again = tasks.iter().find(|t| t.attempts == 2).expect("a task with two attempts");
    let attempts =
        store.attempts(lo_id, again.job_idx, again.stage_idx, again.task_idx).await.expect("attempts");
    assert_eq!(attempts[0].state, "killed");
    assert_eq!(attempts[0].reason.as_deref(), Some("preempted"));
    // The warned attempt, killed no earlier than the kill time it was given.
    assert_eq!(again.task_idx as i64, victim["index"].as_i64().expect("index"));
    assert_eq!(attempts[0].kill_at_ms, Some(kill_at_ms));
    assert!(attempts[0].ended_ms.is_some_and(|e| e >= kill_at_ms), "{:?}", attempts[0]);
    let task = format!("j.s.{}", again.task_idx);

    // The queues page shows it under "Preemptions in the last hour": the task and attempt that
    // lost the container, its queue, the queue it was taken for and the engine's reason.
    let html = page("/queues".to_string()).await;
    let at =
        html.find("<table id=\"preemptions\">").unwrap_or_else(|| panic!("no preemptions table:\n{html}"));
    let table = &html[at..at + html[at..].find("</table>").expect("the table's end")];
    let row = format!("run {lo_id}</a> {task} (attempt 1)</td><td>root.lo</td><td>root.hi</td><td>");
    assert!(table.contains(&row), "no row `{row}` in:\n{table}");
    assert_eq!(table.matches("<tr>").count(), 2, "a header and one preemption:\n{table}");
    // /metrics counts it by the starvation that caused it (only a fair-share timeout is set).
    let (status, metrics) = s.call(Method::GET, "/metrics", None).await;
    assert_eq!(status, 200);
    let metrics = metrics.as_str().expect("OpenMetrics text");
    let line = "weir_preemptions_total{cluster=\"default\",reason=\"fair_share\"} 1";
    assert!(metrics.lines().any(|l| l == line), "no `{line}` in:\n{metrics}");

    s.call(Method::POST, &format!("/v1/runs/{lo_id}/kill"), None).await;
    assert_eq!(s.wait(lo_id, Duration::from_secs(30)).await["state"], "killed");
    s.stop(Stop::Now).await;
}

/// The warned task of run `id` (state `preempting`), once there is one.
async fn warned_task(s: &TestServer, id: i64) -> serde_json::Value {
    let run = s
        .wait_until(id, Duration::from_secs(30), "a task warned", |r| {
            r["jobs"][0]["tasks"].as_array().is_some_and(|t| t.iter().any(|t| t["state"] == "preempting"))
        })
        .await;
    run["jobs"][0]["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["state"] == "preempting"))
        .expect("the warned task")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_withdraws_a_warning_its_rebuilt_engine_does_not_plan() {
    let dir = common::temp_dir("preempt-restart");
    let url = format!("sqlite://{}", dir.join("weir.db").display());
    let mut c = common::config(&dir);
    // A kill far enough away that the restart comes first.
    c.clusters = vec![ClusterSource {
        name: "default".into(),
        yaml: CLUSTER.replace("kill_wait: 3s", "kill_wait: 10m"),
        file: "preemption cluster".into(),
    }];
    let mut s = TestServer::start_with(c.clone(), &url).await;
    let mut lo = one_task("lo", "root.lo", "sleep 600");
    lo["jobs"][0]["stages"][0]["tasks"] = json!(2);
    lo["jobs"][0]["stages"][0]["resources"] = json!({"cpu": 1000, "memory": 1024});
    let lo_id = s.submit(lo, "d").await.1["id"].as_i64().expect("id");
    s.wait_until(lo_id, Duration::from_secs(30), "both tier-3 tasks running", |r| {
        r["jobs"][0]["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["state"] == "running"))
    })
    .await;
    let mut hi = one_task("hi", "root.hi", "true");
    hi["jobs"][0]["stages"][0]["resources"] = json!({"cpu": 1000, "memory": 1024});
    let hi_id = s.submit(hi, "d").await.1["id"].as_i64().expect("id");
    let victim = warned_task(&s, lo_id).await;
    // In the run's working folder (the task's own), named by the attempt.
    let notice = c
        .work_dir()
        .join("default")
        .join(format!("run-{lo_id}"))
        .join(format!(".weir-preempt-notice.run-{lo_id}+0+0+{}+1", victim["index"]));
    assert!(notice.exists(), "no notice at {}", notice.display());
    // The starved job goes away; the warning stands (the engine, as YARN's, does not take back
    // a marked container) until the server restarts: its new engine plans no kill.
    s.call(Method::POST, &format!("/v1/runs/{hi_id}/kill"), None).await;
    assert_eq!(s.wait(hi_id, Duration::from_secs(30)).await["state"], "killed");
    s.stop(Stop::Now).await;
    let mut s2 = TestServer::start_with(c, &url).await;
    let run = s2
        .wait_until(lo_id, Duration::from_secs(30), "the warning withdrawn", |r| {
            r["jobs"][0]["tasks"].as_array().is_some_and(|t| t.iter().all(|t| t["state"] == "running"))
        })
        .await;
    for t in run["jobs"][0]["tasks"].as_array().expect("tasks") {
        assert_eq!((t["attempts"].as_i64(), t.get("preemption")), (Some(1), None), "{t:#}");
    }
    for _ in 0..100 {
        if !notice.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!notice.exists(), "the notice of a withdrawn warning is removed");
    s2.call(Method::POST, &format!("/v1/runs/{lo_id}/kill"), None).await;
    assert_eq!(s2.wait(lo_id, Duration::from_secs(30)).await["state"], "killed");
    s2.stop(Stop::Now).await;
}
