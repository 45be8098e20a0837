//! The balancing advisor's results (migration 19) on SQLite and (when `WEIR_TEST_POSTGRES_URL`
//! is set) PostgreSQL: each advice is kept, the newest is the one with the highest id, and its
//! JSON comes back as written.

mod common;

use std::sync::Arc;

use weir_store::{AdviceRow, JobStore};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("advice", tag).await
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
