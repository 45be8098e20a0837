//! The dashboard end to end in headless Chromium (Debian's `chromium` + `chromium-driver`,
//! driven over WebDriver): log in with a token, submit runs through the API, watch one reach
//! `succeeded` on the runs page, open its DAG and a task's log, follow a running task's log as
//! it grows, see a queue's usage bar move on the queues page, and visit every page. A
//! screenshot of each page goes to `target/screenshots/`; no page may log a console error.
//!
//! `.ci/run` installs the browser and sets `WEIR_REQUIRE_BROWSER=1`, which turns a missing
//! browser into a failure; elsewhere the test says loudly that it skipped.

mod common;
#[path = "common/webdriver.rs"]
mod webdriver;

use std::time::Duration;

use common::{temp_dir, Db, TestServer};
use serde_json::{json, Value};
use webdriver::{screenshot_dir, Driver, Session};

/// Console entries at `SEVERE` (errors: failed loads, exceptions) are failures.
async fn no_console_errors(s: &Session, page: &str) {
    let errors: Vec<Value> = s.console().await.into_iter().filter(|e| e["level"] == "SEVERE").collect();
    assert!(errors.is_empty(), "the {page} page logged console errors: {errors:#?}");
}

async fn shot(s: &Session, name: &str) {
    s.screenshot(&screenshot_dir().join(format!("{name}.png"))).await;
    no_console_errors(s, name).await;
}

/// The test cluster with the tier-1 leaf's weight raised from 1 to 5.
const PLANNED: &str = "version: 1
nodes:
  - {count: 1, resources: {cpu: 8000, memory: 16g}}
queues:
  - name: ads
    children: [{name: tier1, tier: 1, weight: 5}, {name: tier3, tier: 3}]
  - name: search
    children: [{name: tier1, tier: 1}]
  - {name: default, tier: 3}
";

fn report(queue: &str, command: &str, slo: &str) -> Value {
    json!({
        "name": "revenue-report", "queue": queue, "slo": slo,
        "jobs": [
            {"name": "extract", "stages": [
                {"name": "query", "tasks": 2, "resources": {"cpu": 2000, "memory": 1024}, "command": command}]},
            {"name": "publish", "after": ["extract"], "stages": [
                {"name": "upload", "tasks": 1, "resources": {"cpu": 1000, "memory": 512},
                 "command": "echo report for $WEIR_LOGICAL_DATE is ready"}]}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_dashboard_in_a_real_browser() {
    if !webdriver::available() {
        assert!(
            std::env::var_os("WEIR_REQUIRE_BROWSER").is_none(),
            "WEIR_REQUIRE_BROWSER is set but {} or {} is missing",
            webdriver::CHROMIUM,
            webdriver::CHROMEDRIVER
        );
        eprintln!("\n*** SKIPPED the browser test: install Debian's chromium and chromium-driver (.ci/run does) ***\n");
        return;
    }
    let dir = temp_dir("browser");
    let url = common::db_url(Db::Sqlite, &dir, "browser").await.expect("sqlite");
    let mut c = common::config(&dir);
    c.usage_resolution = Duration::from_secs(1);
    // One running-app slot in root.ads: the last part has a tier-1 run wait for it.
    c.clusters[0].yaml =
        common::CLUSTER.replace("  - name: ads\n", "  - name: ads\n    max_running_apps: 1\n");
    let mut server = TestServer::start_with(c, &url).await;
    let base = server.base.clone();
    let driver = Driver::start(&dir.join("chromedriver.log")).await;
    let s = driver.session(&dir.join("chromium-profile")).await;
    let long = Duration::from_secs(60);

    // Log in: the dashboard sends a visitor without a token to the login page.
    s.goto(&format!("{base}/queues")).await;
    let field = s.wait_for("#token", long).await;
    assert!(s.current_url().await.ends_with("/login"), "{}", s.current_url().await);
    shot(&s, "login").await;
    s.type_into(&field, &server.token).await;
    s.click(&s.wait_for("#login", long).await).await;
    s.wait_for("#runs-by-state", long).await;

    // The queues page before anything runs: the tier-1 queue's bar is empty.
    s.goto(&format!("{base}/queues")).await;
    let bar = "return (document.querySelector('svg.bar[data-queue=\"root.ads.tier1\"]') || {dataset: {}}).dataset.usage";
    let before = s.wait_until("the tier-1 bar", bar, long, |v| v.is_string()).await;
    assert_eq!(before, json!("0.0000"), "nothing runs yet");

    // A run whose tasks take a few seconds, submitted through the API.
    let (status, created) = server
        .submit(report("root.ads.tier1", "echo querying shard $WEIR_TASK_INDEX; sleep 4", "1m"), "d1")
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    // The page refreshes itself: the bar grows while the run's containers are held.
    let during = s
        .wait_until("the tier-1 bar to grow", bar, long, |v| v.as_str().is_some_and(|u| u != "0.0000"))
        .await;
    let share: f64 = during.as_str().and_then(|u| u.parse().ok()).expect("a share");
    assert!(share > 0.0 && share <= 1.0, "{share}");
    shot(&s, "queues").await;

    // The runs page shows the run reach `succeeded` on its own.
    s.goto(&format!("{base}/runs")).await;
    let row = format!(
        "return (document.querySelector('tr[data-run=\"{id}\"]') || {{dataset: {{}}}}).dataset.state"
    );
    s.wait_until("the run to succeed on the runs page", &row, long, |v| v == "succeeded").await;
    shot(&s, "runs").await;

    // Its page: the DAG with both jobs done, and the timeline against the deadline.
    s.click(&s.wait_for(&format!("tr[data-run=\"{id}\"] a"), long).await).await;
    s.wait_for("svg.dag g.job[data-job=\"publish\"][data-state=\"succeeded\"]", long).await;
    s.wait_for("svg.dag g.job[data-job=\"extract\"][data-state=\"succeeded\"]", long).await;
    let slo = s.text(&s.wait_for("#slo-status", long).await).await;
    assert!(slo.contains("met"), "{slo}");
    shot(&s, "run").await;

    // A task square links to that task's log, which the page streams.
    s.click(&s.wait_for("svg.dag a[href$=\"/logs/extract.query.1\"]", long).await).await;
    let log = "return (document.getElementById('log') || {}).textContent";
    s.wait_until("the task's log", log, long, |v| v == "querying shard 1\n").await;
    s.wait_until("the stream to end", "return document.getElementById('log').dataset.state", long, |v| {
        v == "ended"
    })
    .await;
    shot(&s, "logs").await;

    // A running task's log grows on the page without a reload.
    let ticker = "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done";
    let (status, created) = server.submit(report("root.ads.tier1", ticker, "5m"), "d2").await;
    assert_eq!(status, 201, "{created}");
    let live = created["id"].as_i64().expect("id");
    server.wait_until(live, long, "a task to run", |r| r["jobs"][0]["tasks"][0]["state"] == "running").await;
    s.goto(&format!("{base}/runs/{live}/logs/extract.query.0")).await;
    s.wait_until("the first ticks", log, long, |v| v.as_str().is_some_and(|t| t.contains("tick 1"))).await;
    let early = s.script(log).await;
    assert!(
        !early.as_str().unwrap_or("").contains("tick 6"),
        "the page should open while the task runs: {early}"
    );
    s.wait_until("the last tick, streamed", log, long, |v| v.as_str().is_some_and(|t| t.contains("tick 6")))
        .await;
    no_console_errors(&s, "live log").await;
    server.wait(live, long).await;

    // The reports and the admin pages.
    s.goto(&format!("{base}/slo?window=1d")).await;
    let ratio = s.text(&s.wait_for("#slo-tiers tr[data-tier=\"1\"] td:nth-child(5)", long).await).await;
    assert_eq!(ratio, "100.0%", "both tier-1 runs met their SLO");
    shot(&s, "slo").await;
    s.goto(&format!("{base}/usage?window=1h")).await;
    s.wait_for("table.usage-queues tr[data-queue=\"root.ads.tier1\"]", long).await;
    // The server has recorded less than the hour: the figures count what it recorded, so the
    // tier-1 leaf, busy for seconds of a minute or so, reads well above 0.0%.
    let recorded = s.text(&s.wait_for("#recorded-default", long).await).await;
    assert!(recorded.starts_with("The server has recorded this cluster for the last"), "{recorded}");
    let ratio = s
        .text(&s.wait_for("table.usage-queues tr[data-queue=\"root.ads.tier1\"] td:nth-child(5)", long).await)
        .await;
    let pct: f64 = ratio.trim_end_matches('%').parse().unwrap_or(0.0);
    // Over the whole hour the same use would read under 1%.
    assert!(pct >= 5.0, "tier 1 used {ratio} of its share over the recorded span");
    shot(&s, "usage").await;
    // Usage over time, per project and per user: the ads project's and the submitting user's
    // core-hours in the hour's buckets.
    s.click(&s.wait_for("#usage-by-link", long).await).await;
    let ads = s.text(&s.wait_for("#usage-by-project tr[data-name=\"ads\"] td.total", long).await).await;
    assert!(ads.parse::<f64>().is_ok_and(|h| h > 0.0), "ads used {ads} core-hours");
    let (_, first) = server.call(reqwest::Method::GET, &format!("/v1/runs/{id}"), None).await;
    let user = first["user"].as_str().map(String::from).unwrap_or_default();
    let mine =
        s.text(&s.wait_for(&format!("#usage-by-user tr[data-name=\"{user}\"] td.total"), long).await).await;
    // 2 tasks of 2 cores for about 4 s, and a 1-core upload: at least 4 core-seconds.
    assert!(mine.parse::<f64>().is_ok_and(|h| h >= 4.0 * 2.0 * 2.0 / 3600.0 * 0.9), "{user} used {mine}");
    shot(&s, "usage-by").await;
    s.goto(&format!("{base}/routes")).await;
    s.wait_for("#route-form", long).await;
    shot(&s, "routes").await;
    s.goto(&format!("{base}/clusters")).await;
    s.wait_for("textarea#config-default", long).await;
    shot(&s, "clusters").await;

    // Plan now: the server plans from what it recorded and shows the proposal, flagged as made
    // from too little history; dismissing it takes one click.
    s.click(&s.wait_for("#plan-now-default", long).await).await;
    let message = s.text(&s.wait_for("#message", long).await).await;
    assert!(message.starts_with("planned cluster `default`: proposal"), "{message}");
    let proposal = "return (document.querySelector('div.proposal') || {dataset: {}}).dataset.proposal";
    let id: i64 = s.script(proposal).await.as_str().and_then(|p| p.parse().ok()).expect("a proposal");
    let warning =
        s.text(&s.wait_for(&format!("div.proposal[data-proposal=\"{id}\"] p.warning"), long).await).await;
    assert!(warning.contains("of recorded history"), "{warning}");
    shot(&s, "clusters-plan-now").await;
    if let Some(dismiss) = s.find(&format!("#dismiss-{id}")).await {
        s.click(&dismiss).await;
        // Read by script until the new page says so: the plan-now page's own `#message` may
        // still be there a moment after the click (an element read then goes stale).
        let said = "return ((document.getElementById('message') || {}).textContent || '').trim()";
        let want = format!("dismissed proposal {id}");
        s.wait_until("the dismissal's message", said, long, |v| v == want.as_str()).await;
        let (_, listed) = server.call(reqwest::Method::GET, "/v1/proposals", None).await;
        assert_eq!(listed["proposals"][0]["state"], "dismissed", "{listed}");
    } else {
        // Its own replay found it worse for tier 1: stored refused, nothing to dismiss.
        assert!(message.ends_with("(refused)"), "{message}");
    }

    // A plan applied through the API, then rolled back from the history page with one click.
    let (_, clusters) = server.call(reqwest::Method::GET, "/v1/clusters", None).await;
    let version = clusters["clusters"][0]["version"].as_i64().expect("version");
    let (status, applied) = server
        .call(
            reqwest::Method::POST,
            "/v1/clusters/default/plan",
            Some(json!({"config": PLANNED, "base_version": version, "unvalidated": true})),
        )
        .await;
    assert_eq!(status, 200, "{applied}");
    s.goto(&format!("{base}/clusters")).await;
    s.click(&s.wait_for("#history-default", long).await).await;
    let current = s.text(&s.wait_for("#current-version", long).await).await;
    assert_eq!(current, (version + 1).to_string());
    let row = s.text(&s.wait_for(&format!("tr[data-version=\"{}\"]", version + 1), long).await).await;
    assert!(row.contains("plan") && row.contains("root.ads.tier1 weight: 1 → 5"), "{row}");
    shot(&s, "history").await;
    s.click(&s.wait_for(&format!("#rollback-{version}"), long).await).await;
    let message = s.text(&s.wait_for("#message", long).await).await;
    assert!(message.starts_with(&format!("rolled back to version {version}")), "{message}");
    assert_eq!(s.text(&s.wait_for("#current-version", long).await).await, (version + 2).to_string());
    let row = s.text(&s.wait_for(&format!("tr[data-version=\"{}\"]", version + 2), long).await).await;
    assert!(
        row.contains(&format!("rollback to version {version}")) && row.contains("weight: 5 → 1"),
        "{row}"
    );
    shot(&s, "history-rolled-back").await;
    let start = std::time::Instant::now();
    loop {
        let (_, q) = server.call(reqwest::Method::GET, "/v1/queues/root.ads.tier1", None).await;
        if q["weight"] == 1.0 {
            break;
        }
        assert!(start.elapsed() < long, "the live queue never went back: {q}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.goto(&format!("{base}/")).await;
    let tier1 = s.text(&s.wait_for("#slo-by-tier tr[data-tier=\"1\"] td.ratio", long).await).await;
    assert_eq!(tier1, "100.0%");
    shot(&s, "overview").await;

    // A tier-1 run that waited: a tier-3 backfill holds root.ads's only slot until the tier-1
    // run's 2 s SLO has passed, so it misses its deadline waiting. Its page draws the waiting
    // spell before its running span, against the deadline, and the SLO page ranks the reason.
    let release = dir.join("release");
    let hold = format!("while [ ! -e '{}' ]; do sleep 0.1; done", release.display());
    let backfill = json!({"name": "nightly-backfill", "queue": "root.ads.tier3", "jobs": [{"name": "copy",
        "stages": [{"name": "s", "tasks": 1, "resources": {"cpu": 1000, "memory": 512}, "command": hold}]}]});
    let (status, created) = server.submit(backfill, "d3").await;
    assert_eq!(status, 201, "{created}");
    let blocker = created["id"].as_i64().expect("id");
    server.wait_until(blocker, long, "the backfill to run", |r| r["jobs"][0]["state"] == "running").await;
    let (status, created) = server.submit(report("root.ads.tier1", "true", "2s"), "d3").await;
    assert_eq!(status, 201, "{created}");
    let waited = created["id"].as_i64().expect("id");
    let run = server
        .wait_until(waited, long, "a waiting spell", |r| {
            r["jobs"][0]["waits"].as_array().is_some_and(|w| !w.is_empty())
        })
        .await;
    // While it waits, its page says why in words.
    s.goto(&format!("{base}/runs/{waited}")).await;
    let why = s.text(&s.wait_for("#run-explanations pre.explanation", long).await).await;
    assert!(why.contains("waits on root.ads at max_running_apps 1"), "{why}");
    assert!(why.contains("tier-1 work waiting behind lower tiers"), "{why}");
    shot(&s, "run-waiting").await;
    // Released once the deadline has passed (the run then certainly missed it).
    let deadline = run["submitted_ms"].as_i64().expect("submitted") + 2000;
    while weir_server::now_ms() <= deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Meanwhile the SLO page lists it at risk now, with why: past its deadline, still waiting.
    s.goto(&format!("{base}/slo?window=1d")).await;
    let risk = format!("#slo-at-risk tr[data-run=\"{waited}\"][data-tier=\"1\"] td.reason");
    let why = s.text(&s.wait_for(&risk, long).await).await;
    assert!(
        why.starts_with("already past its deadline by ")
            && why.contains("; waiting on root.ads at max_running_apps 1 for "),
        "{why}"
    );
    shot(&s, "slo-at-risk").await;
    std::fs::write(&release, "").expect("release");
    server.wait(waited, long).await;
    s.goto(&format!("{base}/runs/{waited}")).await;
    let spell = s
        .wait_for(
            "#wait-timeline g.wait[data-reason=\"queue_max_running_apps\"][data-queue=\"root.ads\"]",
            long,
        )
        .await;
    let _ = spell;
    let title = s.script("return document.querySelector('#wait-timeline g.wait title').textContent").await;
    assert!(
        title.as_str().is_some_and(
            |t| t.starts_with("extract: waited") && t.contains("on root.ads at max_running_apps 1")
        ),
        "{title}"
    );
    // The spell is drawn before the job's running span, and the deadline line is on the chart.
    let order = s
        .script(
            "const w = document.querySelector('#wait-timeline g.wait rect'); \
             const r = document.querySelector('#wait-timeline rect.ran'); \
             return [parseFloat(w.getAttribute('x')), parseFloat(w.getAttribute('width')), parseFloat(r.getAttribute('x'))];",
        )
        .await;
    let (x, w, ran) = (
        order[0].as_f64().unwrap_or(-1.0),
        order[1].as_f64().unwrap_or(-1.0),
        order[2].as_f64().unwrap_or(-1.0),
    );
    assert!(w > 0.0 && (x + w - ran).abs() < 1.0, "the spell ends where the run begins: {order}");
    let legend = s.text(&s.wait_for("#wait-timeline g.wait-legend text", long).await).await;
    assert!(
        legend.starts_with("waited ") && legend.ends_with("on root.ads at max_running_apps 1"),
        "{legend}"
    );
    let waited_line = s.text(&s.wait_for("#waited", long).await).await;
    assert!(waited_line.contains("most on root.ads at max_running_apps 1"), "{waited_line}");
    let row = s.text(&s.wait_for("#waits tr[data-reason=\"queue_max_running_apps\"]", long).await).await;
    assert!(row.contains(&format!("nightly-backfill (run {blocker}, tier 3)")), "{row}");
    let slo = s.text(&s.wait_for("#slo-status", long).await).await;
    assert!(slo.contains("missed"), "{slo}");
    shot(&s, "run-waited").await;
    // The SLO page ranks what the missed run waited for.
    s.goto(&format!("{base}/slo?window=1d")).await;
    let cause = s
        .text(
            &s.wait_for("#slo-causes tr[data-tier=\"1\"][data-reason=\"queue_max_running_apps\"] td", long)
                .await,
        )
        .await;
    assert!(
        cause.starts_with("tier 1 waited ") && cause.ends_with("on root.ads at max_running_apps 1"),
        "{cause}"
    );
    shot(&s, "slo-causes").await;
    // The trend per tier: tier 1's two runs that met their SLO and the one that missed it.
    let sums = s
        .script(
            "const cells = Array.from(document.querySelectorAll('#slo-trend tr[data-tier=\"1\"] td[data-met]')); \
             return [cells.reduce((a, c) => a + Number(c.dataset.met), 0), cells.reduce((a, c) => a + Number(c.dataset.missed), 0)];",
        )
        .await;
    assert_eq!(sums, json!([2, 1]));
    // Nothing is at risk once every run has ended.
    s.wait_for("#slo-at-risk-none", long).await;

    // The grid: workflows down, logical dates across; the report's d1 cell met its SLO, its d3
    // cell (the run that waited) missed it; a cell links to its run.
    s.goto(&format!("{base}/grid")).await;
    let cell = |run: i64| format!("#grid tr[data-workflow=\"revenue-report\"] a[data-run=\"{run}\"]");
    let slo_of =
        |run: i64| format!("return document.querySelector('{}').dataset.slo", cell(run).replace('\'', "\\'"));
    s.wait_for(&cell(waited), long).await;
    assert_eq!(s.script(&slo_of(id)).await, json!("met"));
    assert_eq!(s.script(&slo_of(waited)).await, json!("missed"));
    let dates = s
        .script("return Array.from(document.querySelectorAll('#grid th.date')).map(e => e.textContent)")
        .await;
    assert_eq!(dates, json!(["d1", "d2", "d3"]));
    let backfill_cell = "#grid tr[data-workflow=\"nightly-backfill\"] td.cell";
    let cells = s.script(&format!("return document.querySelectorAll('{backfill_cell}').length")).await;
    assert_eq!(cells, json!(3), "one cell per date, empty where the workflow has no run");
    shot(&s, "grid").await;
    s.click(&s.wait_for(&cell(waited), long).await).await;
    s.wait_for("#slo-status", long).await;
    assert!(s.current_url().await.ends_with(&format!("/runs/{waited}")), "{}", s.current_url().await);

    // Retry from the run page: the ended d1 run is submitted again and the browser lands on
    // the new run, which runs to its end; Kill on a running one ends it killed.
    s.goto(&format!("{base}/runs/{id}")).await;
    s.click(&s.wait_for("#retry", long).await).await;
    let url = s
        .wait_until("the new run's page", "return location.pathname", long, |v| {
            v.as_str().is_some_and(|p| p != format!("/runs/{id}") && p.starts_with("/runs/"))
        })
        .await;
    let again: i64 =
        url.as_str().and_then(|p| p.strip_prefix("/runs/")).and_then(|n| n.parse().ok()).expect("id");
    let done = server.wait(again, long).await;
    assert_eq!((done["logical_date"].as_str(), done["state"].as_str()), (Some("d1"), Some("succeeded")));
    let (status, created) = server.submit(report("root.ads.tier1", "sleep 30", "5m"), "d4").await;
    assert_eq!(status, 201, "{created}");
    let long_run = created["id"].as_i64().expect("id");
    server
        .wait_until(long_run, long, "a task to run", |r| r["jobs"][0]["tasks"][0]["state"] == "running")
        .await;
    s.goto(&format!("{base}/runs/{long_run}")).await;
    shot(&s, "run-kill").await;
    s.click(&s.wait_for("#kill", long).await).await;
    s.wait_until(
        "the run page to show it killed",
        "return (document.getElementById('run-state') || {}).textContent",
        long,
        |v| v == "killed",
    )
    .await;
    // The Migrations page, reached from the navigation bar (no dry-runs here: an empty table).
    s.click(&s.wait_for("a[href=\"/migrations\"]", long).await).await;
    s.wait_for("table#migrations", long).await;
    no_console_errors(&s, "migrations").await;
    shot(&s, "migrations").await;

    s.close().await;
    drop(driver);
    server.stop(weir_server::Stop::Now).await;
}

/// Screenshots of every page of a server that is already running (the acceptance check on
/// `weir serve --demo`): `WEIR_DASHBOARD_URL=http://127.0.0.1:8470 WEIR_TOKEN=… cargo test -p
/// weir-server --test browser -- --ignored`. Writes `target/screenshots/demo-*.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a running server: WEIR_DASHBOARD_URL and WEIR_TOKEN"]
async fn screenshots_of_a_running_server() {
    let (Ok(base), Ok(token)) = (std::env::var("WEIR_DASHBOARD_URL"), std::env::var("WEIR_TOKEN")) else {
        panic!("set WEIR_DASHBOARD_URL and WEIR_TOKEN");
    };
    let dir = temp_dir("screenshots");
    let driver = Driver::start(&dir.join("chromedriver.log")).await;
    let s = driver.session(&dir.join("chromium-profile")).await;
    let long = Duration::from_secs(30);
    s.goto(&format!("{base}/login")).await;
    s.type_into(&s.wait_for("#token", long).await, token.trim()).await;
    s.click(&s.wait_for("#login", long).await).await;
    s.wait_for("#runs-by-state", long).await;
    for (name, path) in [
        ("overview", "/"),
        ("queues", "/queues"),
        ("runs", "/runs"),
        ("grid", "/grid"),
        ("slo", "/slo?window=1d"),
        ("usage", "/usage?window=1h"),
        ("usage-by", "/usage/by?window=1d"),
        ("routes", "/routes"),
        ("clusters", "/clusters"),
        ("migrations", "/migrations"),
        ("advice", "/advice"),
    ] {
        s.goto(&format!("{base}{path}")).await;
        s.wait_for("main", long).await;
        shot(&s, &format!("demo-{name}")).await;
    }
    s.goto(&format!("{base}/runs")).await;
    s.click(&s.wait_for("#runs tbody tr:last-child a", long).await).await;
    s.wait_for("svg.dag", long).await;
    shot(&s, "demo-run").await;
    s.click(&s.wait_for("a.log-link", long).await).await;
    s.wait_for("#log", long).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    shot(&s, "demo-logs").await;
    s.close().await;
}
