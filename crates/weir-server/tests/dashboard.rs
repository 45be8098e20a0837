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
