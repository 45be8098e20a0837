//! The dashboard's authentication and authorization over plain HTTP: the login sets an
//! `HttpOnly`, `SameSite=Strict` session cookie; a viewer of one project sees only its runs and
//! queues and no admin forms; changes need a global admin and the form's token; the cookie
//! authenticates API reads but never a change.

mod common;

use std::time::Duration;

use common::{one_task, Db, TestServer};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::json;

fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

/// Log in with `token`; the session cookie.
async fn login(s: &TestServer, token: &str) -> String {
    let r = common::dashboard_login(&client(), &s.base, token).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("weir_session="))
        .expect("a session cookie")
        .to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    cookie.split(';').next().expect("name=value").to_string()
}

async fn page(s: &TestServer, cookie: &str, path: &str) -> (StatusCode, String) {
    let r = client().get(format!("{}{path}", s.base)).header(COOKIE, cookie).send().await.expect("page");
    let status = r.status();
    (status, r.text().await.unwrap_or_default())
}

/// A dashboard session of a new token that may only view project `search`.
async fn search_viewer(s: &TestServer) -> String {
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "search", "grants": [{"project": "search", "role": "viewer"}]})),
        )
        .await;
    login(s, t["token"].as_str().expect("token")).await
}

/// The form token on a page.
fn csrf(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form token") + "name=\"csrf\" value=\"".len();
    html[at..at + 64].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_see_their_projects_and_only_admins_change_anything() {
    let mut s = TestServer::start(Db::Sqlite, "dashboard").await.expect("server");
    let (_, ads_run) = s.submit(one_task("ads-job", "root.ads.tier1", "true"), "d1").await;
    let (_, search_run) = s.submit(one_task("search-job", "root.search.tier1", "true"), "d1").await;
    let (ads_id, search_id) = (ads_run["id"].as_i64().expect("id"), search_run["id"].as_i64().expect("id"));
    s.wait(ads_id, Duration::from_secs(60)).await;
    s.wait(search_id, Duration::from_secs(60)).await;

    // No cookie: every page sends the visitor to the login page; a wrong token gets 401.
    let r = client().get(format!("{}/runs", s.base)).send().await.expect("runs");
    assert_eq!(
        (r.status(), r.headers().get(LOCATION).and_then(|v| v.to_str().ok())),
        (StatusCode::SEE_OTHER, Some("/login"))
    );
    let r = common::dashboard_login(&client(), &s.base, "weir_nope").await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // A viewer of `ads`.
    let (_, t) = s
        .call(
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "ads", "grants": [{"project": "ads", "role": "viewer"}]})),
        )
        .await;
    let viewer = login(&s, t["token"].as_str().expect("token")).await;
    let (status, runs) = page(&s, &viewer, "/runs").await;
    assert_eq!(status, 200);
    assert!(
        runs.contains(&format!("data-run=\"{ads_id}\""))
            && !runs.contains(&format!("data-run=\"{search_id}\"")),
        "{runs}"
    );
    let (status, other) = page(&s, &viewer, &format!("/runs/{search_id}")).await;
    assert_eq!(status, 404, "another project's run is not there for this viewer");
    assert!(!other.contains("search"), "{other}");
    // Its own run's page; the run has no SLO, so no deadline is promised.
    let (status, run) = page(&s, &viewer, &format!("/runs/{ads_id}")).await;
    assert_eq!(status, 200);
    assert!(run.contains("<dd id=\"slo-status\">none</dd>") && run.contains("<h2>Timings</h2>"), "{run}");
    let (status, queues) = page(&s, &viewer, "/queues").await;
    assert_eq!(status, 200);
    assert!(
        queues.contains("data-queue=\"root.ads.tier1\"")
            && !queues.contains("data-queue=\"root.search.tier1\""),
        "{queues}"
    );
    let (_, routes) = page(&s, &viewer, "/routes").await;
    assert!(!routes.contains("id=\"route-form\""), "a viewer gets no route form");
    let (_, clusters) = page(&s, &viewer, "/clusters").await;
    assert!(!clusters.contains("<textarea"), "a viewer cannot edit the cluster file");
    assert!(
        !clusters.contains("root.search") && !clusters.contains("name: search"),
        "nor read other projects' queues in it: {clusters}"
    );
    // Its form token is valid, but it is no admin.
    let form = [
        ("csrf", csrf(&routes)),
        ("key", "workflow:x".into()),
        ("cluster", "default".into()),
        ("queue", "root.ads.tier1".into()),
    ];
    let r = client()
        .post(format!("{}/routes", s.base))
        .header(COOKIE, &viewer)
        .form(&form)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The cookie reads the API (the log tail does), and changes nothing through it.
    let r = client()
        .get(format!("{}/v1/runs/{ads_id}", s.base))
        .header(COOKIE, &viewer)
        .send()
        .await
        .expect("api");
    assert_eq!(r.status(), StatusCode::OK);
    let r = client()
        .post(format!("{}/v1/runs/{ads_id}/kill", s.base))
        .header(COOKIE, &viewer)
        .send()
        .await
        .expect("api");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "a cookie never authenticates a change");

    // The admin: the form needs its token; with it, the route is stored.
    let admin = login(&s, &s.token.clone()).await;
    let (_, routes) = page(&s, &admin, "/routes").await;
    assert!(routes.contains("id=\"route-form\""));
    let form = [
        ("csrf", "0".repeat(64)),
        ("key", "workflow:x".into()),
        ("cluster", "default".into()),
        ("queue", "root.ads.tier1".into()),
    ];
    let r = client()
        .post(format!("{}/routes", s.base))
        .header(COOKIE, &admin)
        .form(&form)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "a forged form");
    let form = [
        ("csrf", csrf(&routes)),
        ("key", "workflow:x".into()),
        ("cluster", "default".into()),
        ("queue", "root.ads.tier1".into()),
    ];
    let r = client()
        .post(format!("{}/routes", s.base))
        .header(COOKIE, &admin)
        .form(&form)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap_or_default().contains("workflow:x now goes to default:root.ads.tier1"));
    let (_, v) = s.call(Method::GET, "/v1/routes", None).await;
    assert_eq!(v["routes"][0]["key"], "workflow:x");
    // A bad cluster file from the clusters page changes nothing and says why.
    let (_, clusters) = page(&s, &admin, "/clusters").await;
    let form = [
        ("csrf", csrf(&clusters)),
        ("config", "version: 1\nnodes: []\nqueues: [{name: ads, weight: -1}]\n".to_string()),
    ];
    let r = client()
        .post(format!("{}/clusters/default", s.base))
        .header(COOKIE, &admin)
        .form(&form)
        .send()
        .await
        .expect("post");
    let body = r.text().await.unwrap_or_default();
    assert!(body.contains("class=\"error\" id=\"message\""), "{body}");
    let (_, v) = s.call(Method::GET, "/v1/clusters", None).await;
    assert_eq!(v["clusters"][0]["version"], 1, "nothing changed");
    // The worker has run tasks on the cluster: its backend is published as healthy, on the
    // API and on the Clusters page.
    assert_eq!(
        (&v["clusters"][0]["backend"]["kind"], &v["clusters"][0]["backend"]["state"]),
        (&json!("local"), &json!("healthy")),
        "{v}"
    );
    assert!(
        clusters.contains("data-backend-state=\"healthy\"") && clusters.contains("Backend: local · healthy"),
        "{clusters}"
    );
    // Logging out clears the cookie.
    let form = [("csrf", csrf(&clusters))];
    let r = client()
        .post(format!("{}/logout", s.base))
        .header(COOKIE, &admin)
        .form(&form)
        .send()
        .await
        .expect("logout");
    assert!(r
        .headers()
        .get(SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.contains("Max-Age=0")));
    s.stop(weir_server::Stop::Now).await;
}

/// Kill and retry from the run page: the same authorization as the API's (submitter on the
/// run's project). A viewer gets no buttons and a forged post is refused; an operator (a
/// submitter of the project) kills a running run and retries it as a new run for the same
/// logical date; a form without the page's token changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_cannot_kill_or_retry_and_operators_can() {
    let mut s = TestServer::start(Db::Sqlite, "dashboard-actions").await.expect("server");
    let token = |name: &str, role: &str| json!({"name": name, "grants": [{"project": "ads", "role": role}]});
    let (_, t) = s.call(Method::POST, "/v1/tokens", Some(token("ads-viewer", "viewer"))).await;
    let viewer = login(&s, t["token"].as_str().expect("token")).await;
    let (_, t) = s.call(Method::POST, "/v1/tokens", Some(token("ads-operator", "submitter"))).await;
    let operator_token = t["token"].as_str().expect("token").to_string();
    let operator = login(&s, &operator_token).await;
    // The operator's own run (a retry runs as the run's scheduler user, which the retrying
    // token must be allowed to act as, as for any submission).
    let body = json!({"workflow": one_task("sleeper", "root.ads.tier1", "sleep 60"), "logical_date": "d7"});
    let (status, created) = s.call_as(&operator_token, Method::POST, "/v1/runs", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_i64().expect("id");
    s.wait_until(id, Duration::from_secs(60), "its task to run", |r| {
        r["jobs"][0]["tasks"][0]["state"] == "running"
    })
    .await;
    let post = |cookie: String, path: String, csrf: String| {
        let url = format!("{}{path}", s.base);
        async move {
            client().post(url).header(COOKIE, cookie).form(&[("csrf", csrf)]).send().await.expect("post")
        }
    };

    // The viewer reads the run but gets no Kill button, and a post with its own valid form
    // token is refused as the API refuses it; the run keeps running.
    let (status, html) = page(&s, &viewer, &format!("/runs/{id}")).await;
    assert_eq!(status, 200);
    assert!(!html.contains("id=\"kill-form\"") && !html.contains("id=\"retry-form\""), "{html}");
    let r = post(viewer.clone(), format!("/runs/{id}/kill"), csrf(&html)).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap_or_default().contains("submitter"));
    assert_eq!(s.run(id).await["state"], "running");

    // The operator sees the button; a post without the page's token changes nothing.
    let (_, html) = page(&s, &operator, &format!("/runs/{id}")).await;
    assert!(html.contains("id=\"kill-form\"") && !html.contains("id=\"retry-form\""), "{html}");
    let r = post(operator.clone(), format!("/runs/{id}/kill"), "0".repeat(64)).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(s.run(id).await["state"], "running");
    // With it, the run is killed and the browser goes back to its page.
    let r = post(operator.clone(), format!("/runs/{id}/kill"), csrf(&html)).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers().get(LOCATION).and_then(|v| v.to_str().ok()), Some(format!("/runs/{id}").as_str()));
    let killed = s.wait(id, Duration::from_secs(60)).await;
    assert_eq!(killed["state"], "killed", "{killed:#}");

    // Ended: the page offers Retry, to the operator only.
    let (_, html) = page(&s, &viewer, &format!("/runs/{id}")).await;
    assert!(!html.contains("id=\"retry-form\""), "{html}");
    let r = post(viewer.clone(), format!("/runs/{id}/retry"), csrf(&html)).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let (_, html) = page(&s, &operator, &format!("/runs/{id}")).await;
    assert!(html.contains("id=\"retry-form\"") && !html.contains("id=\"kill-form\""), "{html}");
    let r = post(operator.clone(), format!("/runs/{id}/retry"), csrf(&html)).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers().get(LOCATION).and_then(|v| v.to_str().ok()).expect("to the new run").to_string();
    let new: i64 = to.strip_prefix("/runs/").and_then(|n| n.parse().ok()).expect("a run id");
    assert_ne!(new, id);
    // The new run: the same workflow, logical date and command, submitted by the operator.
    let again = s.run(new).await;
    assert_eq!((again["workflow"].as_str(), again["logical_date"].as_str()), (Some("sleeper"), Some("d7")));
    let (_, list) = s.call(Method::GET, "/v1/runs?workflow=sleeper", None).await;
    assert_eq!(list["runs"].as_array().map(Vec::len), Some(2), "{list}");
    // Retrying while that run is active is refused (one active run per workflow and date).
    let r = post(operator.clone(), format!("/runs/{id}/retry"), csrf(&html)).await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    // The API's retry answers the same way, and the audit log has both, by the operator.
    let (status, body) =
        s.call_as(&operator_token, Method::POST, &format!("/v1/runs/{id}/retry"), None).await;
    assert_eq!(status, 409, "{body}");
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=retry", None).await;
    let entries = audit["entries"].as_array().cloned().unwrap_or_default();
    let outcomes: Vec<&str> = entries.iter().filter_map(|e| e["outcome"].as_str()).collect();
    assert!(outcomes.contains(&"ok") && outcomes.contains(&"refused"), "{audit:#}");
    s.call(Method::POST, &format!("/v1/runs/{new}/kill"), None).await;
    s.wait(new, Duration::from_secs(60)).await;
    s.stop(weir_server::Stop::Now).await;
}

/// Usage per project and per user over time, on SQLite and PostgreSQL: a run's task shows
/// under its project (from the recorded queue usage) and under its user (from its attempt), and
/// a viewer of another project sees neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_by_project_and_user_counts_a_runs_cores() {
    for db in [Db::Sqlite, Db::Postgres] {
        let dir = common::temp_dir("usage-by");
        let Some(url) = common::db_url(db, &dir, "usage_by").await else { continue };
        let mut c = common::config(&dir);
        c.usage_resolution = Duration::from_secs(1);
        let mut s = TestServer::start_with(c, &url).await;
        let (_, created) = s.submit(one_task("busy", "root.ads.tier1", "sleep 2"), "d1").await;
        let id = created["id"].as_i64().expect("id");
        let done = s.wait(id, Duration::from_secs(60)).await;
        let user = done["user"].as_str().expect("user").to_string();
        // Let the usage window close.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let admin = login(&s, &s.token.clone()).await;
        let (status, html) = page(&s, &admin, "/usage/by?window=1h").await;
        assert_eq!(status, 200);
        let total = |kind: &str, name: &str| -> f64 {
            let row = format!("<tr data-name=\"{name}\">");
            let at = html.find(&format!("id=\"usage-by-{kind}\"")).expect("the table");
            let at = at + html[at..].find(&row).unwrap_or_else(|| panic!("no {kind} {name} in {html}"));
            let cell = &html[at..];
            let t = cell.find("class=\"num total\">").expect("total") + "class=\"num total\">".len();
            cell[t..].split('<').next().unwrap_or_default().parse().unwrap_or(0.0)
        };
        // One core for about 2 s: at least 1.5 core-seconds, whichever way it is counted.
        let least = 1.5 / 3600.0;
        assert!(total("project", "ads") >= least, "{html}");
        assert!(total("user", &user) >= least, "{html}");
        let other = search_viewer(&s).await;
        let (_, html) = page(&s, &other, "/usage/by?window=1h").await;
        assert!(
            !html.contains("data-name=\"ads\"") && !html.contains(&format!("data-name=\"{user}\"")),
            "{html}"
        );
        s.stop(weir_server::Stop::Now).await;
    }
}

/// The queues page says why a job waits (the engine's explanation, as published by this
/// process's actor) and links its run; a viewer of another project does not see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_page_says_why_a_job_waits() {
    let mut s = TestServer::start(Db::Sqlite, "dash-pending").await.expect("server");
    let whole = |name: &str| {
        let mut w = one_task(name, "root.ads.tier1", "sleep 30");
        w["jobs"][0]["stages"][0]["resources"]["cpu"] = json!(8000);
        w
    };
    let (_, first) = s.submit(whole("first"), "d1").await;
    let first = first["id"].as_i64().expect("id");
    s.wait_until(first, Duration::from_secs(60), "running", |r| r["state"] == "running").await;
    let (_, second) = s.submit(whole("second"), "d1").await;
    let second = second["id"].as_i64().expect("id");
    let admin = login(&s, &s.token.clone()).await;
    let link = format!("<a href=\"/runs/{second}\">run {second}</a>");
    let start = std::time::Instant::now();
    let html = loop {
        let (status, html) = page(&s, &admin, "/queues").await;
        assert_eq!(status, 200);
        if html.contains(&link) {
            break html;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "run {second} never shown waiting: {html}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let at = html.find(&link).expect("the line");
    let line = &html[at..at + html[at..].find("</li>").expect("end of the line")];
    assert!(line.contains("second") && line.contains("root.ads.tier1"), "{line}");
    assert!(line.contains("<pre class=\"explanation\">") && line.len() > link.len() + 60, "{line}");
    let other = search_viewer(&s).await;
    let (_, html) = page(&s, &other, "/queues").await;
    assert!(!html.contains(&link), "{html}");
    s.stop(weir_server::Stop::Now).await;
}
