//! Helpers shared by the store's integration tests.

use std::sync::Arc;

use weir_store::JobStore;

/// A fresh SQLite store and, when `WEIR_TEST_POSTGRES_URL` is set, a fresh PostgreSQL database,
/// both named after the test file (`file`) and the test (`tag`), for a test to run on each.
pub async fn stores(file: &str, tag: &str) -> Vec<Arc<dyn JobStore>> {
    let dir = std::env::temp_dir().join(format!("weir-{file}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut out =
        vec![weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await.expect("sqlite")];
    match std::env::var("WEIR_TEST_POSTGRES_URL") {
        Ok(url) => {
            let name = format!("weir_{}_{tag}_{}", file.replace('-', "_"), std::process::id());
            let db = weir_store::create_postgres_database(&url, &name).await.expect("database");
            out.push(weir_store::open(&db).await.expect("postgres"));
        }
        Err(_) => eprintln!("\n*** SKIPPED on PostgreSQL: WEIR_TEST_POSTGRES_URL is not set ***\n"),
    }
    out
}
