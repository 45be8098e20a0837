//! The OpenAPI document generated from the wire types matches the checked-in
//! `docs/openapi.json`. After changing the API, regenerate it with
//! `WEIR_WRITE_OPENAPI=1 cargo test -p weir-api --test openapi` and review the diff.

use std::path::PathBuf;

#[test]
fn the_checked_in_document_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let generated = weir_api::openapi_json() + "\n";
    if std::env::var_os("WEIR_WRITE_OPENAPI").is_some() && std::env::var_os("CI").is_none() {
        std::fs::write(&path, &generated).expect("write docs/openapi.json");
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json is not the document the code generates; regenerate it with \
         WEIR_WRITE_OPENAPI=1 cargo test -p weir-api --test openapi and review the diff"
    );
    let doc: serde_json::Value = serde_json::from_str(&generated).expect("JSON");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")));
    for path in [
        "/v1/runs",
        "/v1/runs/{id}",
        "/v1/runs/{id}/kill",
        "/v1/runs/{id}/tasks/{task}/logs",
        "/v1/queues",
        "/v1/routes/{key}",
        "/v1/clusters/{name}/config",
        "/healthz",
        "/readyz",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is missing");
    }
    assert!(doc["components"]["schemas"].get("SubmitRun").is_some());
}
