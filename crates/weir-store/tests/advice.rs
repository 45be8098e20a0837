//! The balancing advisor's results (migration 19) on SQLite and (when `WEIR_TEST_POSTGRES_URL`
//! is set) PostgreSQL: each advice is kept, the newest is the one with the highest id, and its
//! JSON comes back as written.

use std::sync::Arc;

use weir_store::{AdviceRow, JobStore};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    let dir = std::env::temp_dir().join(format!("weir-advice-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let mut out =
        vec![weir_store::open(&format!("sqlite://{}", dir.join("weir.db").display())).await.expect("sqlite")];
    match std::env::var("WEIR_TEST_POSTGRES_URL") {
        Ok(url) => {
            let name = format!("weir_advice_{tag}_{}", std::process::id());
            let db = weir_store::create_postgres_database(&url, &name).await.expect("database");
            out.push(weir_store::open(&db).await.expect("postgres"));
        }
        Err(_) => eprintln!("\n*** SKIPPED on PostgreSQL: WEIR_TEST_POSTGRES_URL is not set ***\n"),
    }
    out
}

#[tokio::test]
async fn the_newest_advice_is_read_back_as_written() {
    for store in stores("newest").await {
        assert_eq!(store.latest_advice().await.expect("read"), None, "no advice yet");
        let first = AdviceRow {
            id: 0,
            created_ms: 1_000,
            window_ms: 3_600_000,
            trigger: "schedule".into(),
            body: r#"{"window":"1h","moves":[]}"#.into(),
        };
        let a = store.put_advice(&first).await.expect("put");
        // Made earlier by the clock but stored later (another server's clock): newest by id.
        let second =
            AdviceRow {
                created_ms: 500, trigger: "admin".into(), body: "{\"é\":1}".into(), ..first.clone()
            };
        let b = store.put_advice(&second).await.expect("put");
        assert!(b > a);
        let got = store.latest_advice().await.expect("read").expect("an advice");
        assert_eq!(got, AdviceRow { id: b, ..second });
    }
}
