//! Why a run waited, after the fact, on SQLite and on PostgreSQL: a tier-1 run waits while a
//! tier-3 run holds root.ads's only running-app slot (`max_running_apps: 1`); while it waits
//! its explanation is in words (names, cores and GiB, its place in the start order, the tier-1
//! flag) and its open waiting spell is in the API; once it has run, the closed spell — reason,
//! queue, limit, who held the slot — is still there, and the SLO report ranks it as the reason
//! the run missed its deadline, and `/v1/waits.csv` (what `weir plan --server` reads) totals it
//! on the run's leaf.

mod common;

use std::time::Duration;

use common::{config, db_url, temp_dir, Db, TestServer};
use serde_json::{json, Value};

const LONG: Duration = Duration::from_secs(60);

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(super::Db::Sqlite).await }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() { super::$name(super::Db::Postgres).await }
            )*
        }
    };
}

on_both!(a_run_held_by_max_running_apps_keeps_its_waiting_spell);

fn workflow(name: &str, queue: &str, command: &str, slo: &str) -> Value {
    json!({
        "name": name, "queue": queue, "slo": slo,
        "jobs": [{"name": "main", "stages": [{"name": "s", "tasks": 1,
                   "resources": {"cpu": 2000, "memory": 2048}, "command": command}]}]
    })
}

async fn a_run_held_by_max_running_apps_keeps_its_waiting_spell(db: Db) {
    let dir = temp_dir("waits");
    let Some(url) = db_url(db, &dir, "waits").await else { return };
    let mut c = config(&dir);
    c.clusters[0].yaml =
        common::CLUSTER.replace("  - name: ads\n", "  - name: ads\n    max_running_apps: 1\n");
    assert_ne!(c.clusters[0].yaml, common::CLUSTER);
    let mut s = TestServer::start_with(c, &url).await;

    // A tier-3 backfill takes root.ads's only slot and keeps it until the test releases it.
    let release = dir.join("release");
    let hold = format!("while [ ! -e '{}' ]; do sleep 0.1; done", release.display());
    let (status, created) = s.submit(workflow("backfill", "root.ads.tier3", &hold, "1h"), "d1").await;
    assert_eq!(status, 201, "{created}");
    let backfill = created["id"].as_i64().expect("id");
    s.wait_until(backfill, LONG, "the backfill to run", |r| r["jobs"][0]["state"] == "running").await;

    // A tier-1 report arrives and waits for the slot.
    let (status, created) = s.submit(workflow("report", "root.ads.tier1", "true", "2s"), "d1").await;
    assert_eq!(status, 201, "{created}");
    let report = created["id"].as_i64().expect("id");
    let waiting = s
        .wait_until(report, LONG, "an open waiting spell and an explanation", |r| {
            r["jobs"][0]["waits"].as_array().is_some_and(|w| w.len() == 1)
                && r["jobs"][0]["explanation"].as_str().is_some_and(|e| e.contains("waits on"))
        })
        .await;
    let spell = &waiting["jobs"][0]["waits"][0];
    assert_eq!(spell["reason"], "queue_max_running_apps", "{spell:#}");
    assert_eq!(spell["queue"], "root.ads");
    assert_eq!(spell["limit"], "1");
    assert_eq!(spell["summary"], "root.ads at max_running_apps 1");
    assert!(spell.get("to_ms").is_none(), "still open: {spell:#}");
    let detail = spell["detail"].as_str().expect("detail");
    assert!(detail.starts_with("tier-1 work waiting behind lower tiers"), "{detail}");
    assert!(detail.contains(&format!("backfill (run {backfill}, tier 3)")), "{detail}");

    // The explanation in words: names, not engine ids; cores and GiB, not resource maps.
    let text = waiting["jobs"][0]["explanation"].as_str().expect("explanation");
    assert!(
        text.starts_with(&format!("report/main (run {report}, tier 1) in root.ads.tier1, waiting for ")),
        "{text}"
    );
    assert!(
        text.contains("waits on root.ads at max_running_apps 1: tier-1 work waiting behind lower tiers"),
        "{text}"
    );
    assert!(text.contains("1st of 1 to start under root.ads"), "{text}");
    assert!(text.contains("holding nothing"), "{text}");
    assert!(!text.contains("{cpu:") && !text.contains("job-"), "{text}");

    // The backfill ends once the report's 2 s SLO has passed (so the report certainly missed
    // it waiting); the report runs. Its spell is closed when its task got the slot.
    let deadline = waiting["submitted_ms"].as_i64().expect("submitted") + 2000;
    while weir_server::now_ms() <= deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Past its deadline and still waiting: the SLO report lists it at risk now, with why.
    let (status, slo) = s.call(reqwest::Method::GET, "/v1/reports/slo?window=1d", None).await;
    assert_eq!(status, 200, "{slo}");
    let risk = slo["at_risk"].as_array().expect("at risk");
    assert_eq!(risk.len(), 1, "{slo:#}");
    assert_eq!((risk[0]["id"].as_i64(), risk[0]["tier"].as_u64()), (Some(report), Some(1)));
    let why = risk[0]["reason"].as_str().expect("reason");
    assert!(
        why.starts_with("already past its deadline by ")
            && why.contains("; waiting on root.ads at max_running_apps 1 for "),
        "{why}"
    );
    std::fs::write(&release, "").expect("release");
    let done = s.wait(report, LONG).await;
    assert_eq!(done["state"], "succeeded", "{done:#}");
    let job = &done["jobs"][0];
    let waits = job["waits"].as_array().expect("waits");
    assert_eq!(waits.len(), 1, "one reason all along: {waits:#?}");
    let (from, to) = (waits[0]["from_ms"].as_i64().expect("from"), waits[0]["to_ms"].as_i64().expect("to"));
    assert!(done["submitted_ms"].as_i64().expect("submitted") <= from && from <= to, "{done:#}");
    assert_eq!(Some(to), job["started_ms"].as_i64(), "the spell ends when the job starts");
    assert_eq!(waits[0]["reason"], "queue_max_running_apps");
    assert!(job.get("explanation").is_none(), "no explanation once it ran: {job:#}");

    // The SLO report ranks what the missed run waited for.
    let (status, slo) = s.call(reqwest::Method::GET, "/v1/reports/slo?window=1d", None).await;
    assert_eq!(status, 200, "{slo}");
    let causes = slo["wait_causes"].as_array().expect("wait causes");
    assert_eq!(causes.len(), 1, "{slo:#}");
    let c = &causes[0];
    assert_eq!(
        (c["tier"].as_u64(), c["reason"].as_str(), c["queue"].as_str()),
        (Some(1), Some("queue_max_running_apps"), Some("root.ads"))
    );
    assert_eq!((c["missed_runs"].as_u64(), c["at_risk_runs"].as_u64()), (Some(1), Some(0)));
    assert_eq!(c["waited_ms"].as_i64(), Some(to - from));
    assert_eq!(c["workflows"], json!(["report"]));
    // The trend: tier 1 missed one run (the report), met none; nothing is at risk now.
    let t1: Vec<&Value> = slo["trend"].as_array().expect("trend").iter().filter(|d| d["tier"] == 1).collect();
    let sum = |k: &str| t1.iter().filter_map(|d| d[k].as_u64()).sum::<u64>();
    assert_eq!((sum("met"), sum("missed")), (0, 1), "{slo:#}");
    assert!(slo.get("at_risk").is_none(), "{slo:#}");
    assert!(
        c["summary"].as_str().is_some_and(
            |t| t.starts_with("tier 1 waited ") && t.ends_with(" on root.ads at max_running_apps 1")
        ),
        "{c}"
    );

    // The history `weir plan --server` reads: the report's leaf waited this long on root.ads's
    // limit; the backfill's leaf does not appear (it never waited).
    let (status, csv) = s.call(reqwest::Method::GET, "/v1/waits.csv?window=1d", None).await;
    assert_eq!(status, 200, "{csv}");
    let csv = csv.as_str().expect("text");
    assert_eq!(
        csv,
        format!(
            "leaf,tier,reason,queue,limit,spells,runs,waited_ms\n\
             root.ads.tier1,1,queue_max_running_apps,root.ads,1,1,1,{}\n",
            to - from
        )
    );

    // The backfill got its slot in the pass it arrived: it never waited.
    let first = s.wait(backfill, LONG).await;
    assert!(first["jobs"][0].get("waits").is_none(), "{first:#}");
    s.stop(weir_server::Stop::Now).await;
}
