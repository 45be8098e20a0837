//! Dry-runs end to end on a real server with two clusters (`default`, where production runs,
//! and `staging`), on SQLite and PostgreSQL: `dry_run: true` with `cluster` runs there and is
//! marked; `record_dry_run_verdict` (what the worker calls when a dry-run ends) compares outputs
//! written through weir-commit and fills the migration table; `GET /v1/migrations` shows it to
//! viewers of its project only; approving needs an admin, is refused for a `different` verdict
//! or a cluster without one, and moves the workflow's route so the next run goes to staging.

mod common;

use std::time::Duration;

use common::{config, dashboard_login, db_url, one_task, session_cookie, temp_dir, Db, TestServer, CLUSTER};
use reqwest::Method;
use serde_json::{json, Value};
use weir_commit::shadow::shadow_prefix;
use weir_commit::{Committer, CompareConfig, JobCommitPlan, OutputFormat, StoreConfig};
use weir_server::{record_dry_run_verdict, ClusterSource, DeclaredOutput};
use weir_store::JobStore;

const OUT: &str = "revenue/dt=2026-11-27/";

/// Commits `csv` as `part-0.csv` of `output` as run `run`, through the committer's two phases.
async fn commit(c: &Committer, dir: &std::path::Path, run: &str, output: &str, csv: &str) {
    let file = dir.join(format!("{run}.csv"));
    std::fs::write(&file, csv).unwrap();
    let staging = format!("_weir/staging/{run}/t0/");
    c.put_file(output, &staging, "part-0.csv", &file).await.unwrap();
    let plan = JobCommitPlan {
        run_id: run.into(),
        output: output.into(),
        partitions: vec!["dt=2026-11-27".into()],
        attempts: vec![staging],
    };
    let mut state = c.prepare_job_commit(&plan).await.unwrap();
    c.job_commit(&mut state).await.unwrap();
}

async fn submit(s: &TestServer, extra: Value, date: &str) -> (u16, Value) {
    let mut body =
        json!({"workflow": one_task("revenue-report", "root.ads.tier1", "true"), "logical_date": date});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    s.call(Method::POST, "/v1/runs", Some(body)).await
}

async fn token(s: &TestServer, name: &str, project: &str, role: &str) -> String {
    let body = json!({"name": name, "grants": [{"project": project, "role": role}]});
    let (st, t) = s.call(Method::POST, "/v1/tokens", Some(body)).await;
    assert_eq!(st, 201, "{t:#}");
    t["token"].as_str().expect("secret").to_string()
}

async fn scenario(db: Db) {
    let dir = temp_dir("dryrun");
    let Some(url) = db_url(db, &dir, "dryrun").await else { return };
    let mut c = config(&dir);
    c.clusters.push(ClusterSource {
        name: "staging".into(),
        yaml: CLUSTER.into(),
        file: "staging cluster".into(),
    });
    let s = TestServer::start_with(c, &url).await;
    let objects_dir = dir.join("objects");
    let committer =
        Committer::new(&StoreConfig::Local { root: objects_dir.clone() }, Default::default()).unwrap();

    // Production runs where the workflow routes (the default cluster).
    let (st, prod) = submit(&s, json!({}), "2026-11-27").await;
    assert_eq!(st, 201, "{prod:#}");
    assert_eq!((prod["cluster"].as_str(), prod.get("dry_run")), (Some("default"), None));
    let prod_id = prod["id"].as_i64().unwrap();
    assert_eq!(s.wait(prod_id, Duration::from_secs(60)).await["state"], "succeeded");
    commit(&committer, &dir, &prod_id.to_string(), OUT, "id,amount\n1,10\n2,20\n3,30\n").await;

    // `cluster` is for dry-runs only, and must name a loaded cluster.
    let (st, e) = submit(&s, json!({"cluster": "staging"}), "2026-11-27").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("cluster")), "{e:#}");
    let (st, e) = submit(&s, json!({"dry_run": true, "cluster": "nope"}), "2026-11-27").await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("cluster")), "{e:#}");

    // A first dry-run on staging whose output differs (one amount).
    let (st, dry) = submit(&s, json!({"dry_run": true, "cluster": "staging"}), "2026-11-27").await;
    assert_eq!(st, 201, "{dry:#}");
    assert_eq!((dry["cluster"].as_str(), dry["dry_run"].as_bool()), (Some("staging"), Some(true)));
    let bad_id = dry["id"].as_i64().unwrap();
    let run = s.wait(bad_id, Duration::from_secs(60)).await;
    assert_eq!((run["state"].as_str(), run["dry_run"].as_bool()), (Some("succeeded"), Some(true)), "{run:#}");
    let shadow = shadow_prefix(OUT, &bad_id.to_string()).unwrap();
    assert!(shadow.starts_with("_weir_dryrun/"), "{shadow}");
    commit(&committer, &dir, &bad_id.to_string(), &shadow, "id,amount\n1,10\n2,21\n3,30\n").await;
    let outputs = [DeclaredOutput { prefix: OUT.into(), compare: CompareConfig::new(OutputFormat::Csv) }];
    worker_verdict(&s, bad_id).await;
    let row = s.store.run(bad_id).await.unwrap().expect("run");
    let v = record_dry_run_verdict(&s.store, Some(committer.store()), &row, &outputs, 1_000)
        .await
        .expect("verdict");
    assert_eq!(
        (v.verdict.as_str(), v.cluster.as_str(), v.production_run),
        ("different", "staging", Some(prod_id.to_string()))
    );
    let (st, e) = s
        .call(Method::POST, "/v1/migrations/revenue-report/approve", Some(json!({"cluster": "staging"})))
        .await;
    assert_eq!((st, e["error"]["existing_run"].as_i64()), (409, Some(bad_id)), "{e:#}");

    // A dry-run that fails is `different`, with the reason; recording a production run is refused.
    let mut failing = json!({"dry_run": true, "cluster": "staging"});
    failing["workflow"] = one_task("revenue-report", "root.ads.tier1", "exit 3");
    let (st, f) = submit(&s, failing, "2026-11-27").await;
    assert_eq!(st, 201, "{f:#}");
    let failed_id = f["id"].as_i64().unwrap();
    assert_eq!(s.wait(failed_id, Duration::from_secs(60)).await["state"], "failed");
    worker_verdict(&s, failed_id).await;
    let row = s.store.run(failed_id).await.unwrap().expect("run");
    let v = record_dry_run_verdict(&s.store, Some(committer.store()), &row, &outputs, 1_500)
        .await
        .expect("verdict");
    let diffs: Value = serde_json::from_str(&v.differences).unwrap();
    assert_eq!((v.verdict.as_str(), diffs[0]["what"].as_str()), ("different", Some("dry-run")), "{diffs}");
    assert!(diffs[0]["shadow"].as_str().unwrap().starts_with("failed"), "{diffs}");
    let prod_row = s.store.run(prod_id).await.unwrap().expect("run");
    let err = record_dry_run_verdict(&s.store, Some(committer.store()), &prod_row, &outputs, 1_600)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is not a dry-run"), "{err}");

    // A second dry-run: the same rows in another order: equivalent.
    let (st, dry) = submit(&s, json!({"dry_run": true, "cluster": "staging"}), "2026-11-27").await;
    assert_eq!(st, 201, "{dry:#}");
    let dry_id = dry["id"].as_i64().unwrap();
    assert_eq!(s.wait(dry_id, Duration::from_secs(60)).await["state"], "succeeded");
    let shadow = shadow_prefix(OUT, &dry_id.to_string()).unwrap();
    commit(&committer, &dir, &dry_id.to_string(), &shadow, "id,amount\n3,30\n1,10\n2,20\n").await;
    worker_verdict(&s, dry_id).await;
    let row = s.store.run(dry_id).await.unwrap().expect("run");
    let v = record_dry_run_verdict(&s.store, Some(committer.store()), &row, &outputs, 2_000)
        .await
        .expect("verdict");
    assert_eq!(v.verdict, "equivalent");
    // Production data was never touched by either dry-run.
    let prod_file = committer.store().get(&format!("{OUT}part-0.csv")).await.unwrap().unwrap();
    assert_eq!(prod_file.as_ref(), b"id,amount\n1,10\n2,20\n3,30\n");

    // The runs list marks dry-runs.
    let (_, list) = s.call(Method::GET, "/v1/runs?workflow=revenue-report", None).await;
    let flags: Vec<(i64, bool)> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_i64().unwrap(), r["dry_run"].as_bool().unwrap_or(false)))
        .collect();
    assert_eq!(flags, [(dry_id, true), (failed_id, true), (bad_id, true), (prod_id, false)]);

    // The migration table: newest first, with the differences.
    let (st, m) = s.call(Method::GET, "/v1/migrations?workflow=revenue-report", None).await;
    assert_eq!(st, 200, "{m:#}");
    let verdicts = m["verdicts"].as_array().unwrap();
    let summary: Vec<(i64, &str)> =
        verdicts.iter().map(|v| (v["run_id"].as_i64().unwrap(), v["verdict"].as_str().unwrap())).collect();
    assert_eq!(summary, [(dry_id, "equivalent"), (failed_id, "different"), (bad_id, "different")]);
    let whats: Vec<&str> =
        verdicts[2]["differences"].as_array().unwrap().iter().map(|d| d["what"].as_str().unwrap()).collect();
    assert_eq!(whats, ["row checksum"]);
    assert_eq!(verdicts[2]["differences"][0]["output"], OUT);

    // Another project's viewer sees nothing; a project submitter may not approve.
    let search = token(&s, "search-viewer", "search", "viewer").await;
    let (_, m) = s.call_as(&search, Method::GET, "/v1/migrations", None).await;
    assert_eq!(m["verdicts"], json!([]));
    let ads = token(&s, "ads-submitter", "ads", "submitter").await;
    let (_, m) = s.call_as(&ads, Method::GET, "/v1/migrations", None).await;
    assert_eq!(m["verdicts"].as_array().map(Vec::len), Some(3));
    let (st, _) = s
        .call_as(
            &ads,
            Method::POST,
            "/v1/migrations/revenue-report/approve",
            Some(json!({"cluster": "staging"})),
        )
        .await;
    assert_eq!(st, 403);

    // The dashboard's Migrations page: both verdicts, an approve button on the equivalent one
    // only; a form without the session's token changes nothing.
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cookie = session_cookie(&dashboard_login(&browser, &s.base, &s.token).await);
    let page = |cookie: String| {
        let (http, base) = (s.http.clone(), s.base.clone());
        async move {
            let r = http.get(format!("{base}/migrations")).header("cookie", cookie).send().await.unwrap();
            assert_eq!(r.status(), 200);
            assert!(r.headers()["content-security-policy"].to_str().unwrap().contains("form-action 'self'"));
            r.text().await.unwrap()
        }
    };
    let html = page(cookie.clone()).await;
    assert!(
        html.contains(&format!("data-run=\"{dry_id}\" data-verdict=\"equivalent within tolerance\"")),
        "{html}"
    );
    assert!(html.contains(&format!("data-run=\"{bad_id}\" data-verdict=\"different\"")), "{html}");
    assert_eq!(html.matches("Approve move to staging").count(), 1, "{html}");
    assert!(html.contains("row checksum: shadow "), "{html}");
    let stale = s
        .http
        .post(format!("{}/migrations", s.base))
        .header("cookie", cookie.clone())
        .form(&[("csrf", "0".repeat(64).as_str()), ("workflow", "revenue-report"), ("cluster", "staging")])
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 403);
    let (_, routes) = s.call(Method::GET, "/v1/routes", None).await;
    assert_eq!(routes["routes"], json!([]), "a stale form moved nothing");

    // No verdict on the default cluster.
    let (st, e) = s
        .call(Method::POST, "/v1/migrations/revenue-report/approve", Some(json!({"cluster": "default"})))
        .await;
    assert_eq!(st, 404, "{e:#}");

    // Approved: the route moves, and the next production run goes to staging.
    let (st, a) = s
        .call(Method::POST, "/v1/migrations/revenue-report/approve", Some(json!({"cluster": "staging"})))
        .await;
    assert_eq!(st, 200, "{a:#}");
    assert_eq!(
        a["route"],
        json!({"key": "workflow:revenue-report", "cluster": "staging", "queue": "root.ads.tier1"})
    );
    assert_eq!(a["verdict"]["run_id"].as_i64(), Some(dry_id));
    assert!(a["verdict"]["approved_by"].is_string(), "{a:#}");
    let (_, routes) = s.call(Method::GET, "/v1/routes", None).await;
    assert!(routes["routes"].as_array().unwrap().contains(&a["route"]), "{routes:#}");
    let (st, next) = submit(&s, json!({}), "2026-11-28").await;
    assert_eq!((st, next["cluster"].as_str()), (201, Some("staging")), "{next:#}");
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=migrate.approve", None).await;
    let outcomes: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["outcome"].as_str().unwrap_or("?")).collect();
    assert_eq!(outcomes, ["ok", "not_found", "denied", "refused"], "{audit:#}");

    // The page now shows who approved, and no button.
    let html = page(cookie).await;
    assert_eq!(html.matches("Approve move to").count(), 0, "{html}");
    let approver = a["verdict"]["approved_by"].as_str().unwrap();
    assert!(html.contains(&format!("<td>{approver}, ")), "{html}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_verdict_and_approval_on_sqlite() {
    scenario(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_verdict_and_approval_on_postgres() {
    scenario(Db::Postgres).await;
}

/// Waits for the verdict the worker records when dry-run `id` ends. This test's workflow
/// declares no outputs (it commits its objects itself), so the worker's verdict says "none
/// declared"; the test's own `record_dry_run_verdict` call afterwards replaces it.
async fn worker_verdict(s: &TestServer, id: i64) {
    let start = std::time::Instant::now();
    loop {
        let (_, m) = s.call(Method::GET, "/v1/migrations?workflow=revenue-report", None).await;
        if m["verdicts"].as_array().into_iter().flatten().any(|v| v["run_id"] == id) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker recorded no verdict for dry-run {id}: {m}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
