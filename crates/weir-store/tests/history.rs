//! The history the dashboard and the plan → apply loop read, on SQLite and (when
//! `WEIR_TEST_POSTGRES_URL` is set) PostgreSQL: usage rows written in fenced batches never
//! overlap and extend by compare-and-set, run records carry their SLO, a plan applies its
//! configuration and routes together or not at all, and proposals supersede each other.

mod common;

use std::sync::Arc;

use weir_store::{
    Change, ConfigChange, JobStore, NewRun, PlanApplied, PreemptionRow, ProposalRow, RouteRow, UsageRow,
};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("history", tag).await
}

fn usage(queue: &str, start: i64, end: i64, cpu: i64) -> Change {
    Change::Usage(UsageRow {
        cluster: "c".into(),
        queue: queue.into(),
        start_ms: start,
        end_ms: end,
        cpu,
        memory: 1024,
        // GPUs follow cpu here, so each row's are told apart.
        gpu: cpu / 1000,
        running_apps: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_rows_never_overlap_and_extend_by_compare_and_set() {
    for store in stores("usage").await {
        let fence = store.acquire_lease("c", "me", None, 0, 60_000).await.expect("lease").expect("free");
        let applied = store
            .apply(
                &fence,
                60_000,
                &[
                    usage("root.a", 0, 1000, 2000),
                    // Starts before the last row's end: moved up to 1000.
                    usage("root.a", 500, 2000, 3000),
                    // Entirely inside what is recorded: dropped.
                    usage("root.a", 100, 900, 1),
                    usage("root.b", 0, 500, 1000),
                    Change::UsageExtended {
                        queue: "root.b".into(),
                        start_ms: 0,
                        old_end_ms: 500,
                        end_ms: 800,
                    },
                    // A stale extension (the old end moved on) does nothing.
                    Change::UsageExtended {
                        queue: "root.b".into(),
                        start_ms: 0,
                        old_end_ms: 500,
                        end_ms: 9000,
                    },
                ],
            )
            .await
            .expect("apply");
        assert_eq!(applied, [true, true, false, true, true, false]);
        let rows = store.usage("c", 0, 10_000).await.expect("usage");
        let got: Vec<(&str, i64, i64, i64, i64)> =
            rows.iter().map(|r| (r.queue.as_str(), r.start_ms, r.end_ms, r.cpu, r.gpu)).collect();
        assert_eq!(
            got,
            [("root.a", 0, 1000, 2000, 2), ("root.a", 1000, 2000, 3000, 3), ("root.b", 0, 800, 1000, 1)]
        );
        // The window only picks overlapping rows.
        assert_eq!(store.usage("c", 1500, 1600).await.expect("usage").len(), 1);
        // A preemption is recorded with the batch.
        let p = PreemptionRow {
            cluster: "c".into(),
            at_ms: 5000,
            run_id: 1,
            task: "j.s.0".into(),
            attempt: 1,
            queue: "root.b".into(),
            for_queue: "root.a".into(),
            kind: "fair_share".into(),
            reason: "preempted to restore job 4096 of root.a to its fair share".into(),
        };
        store.apply(&fence, 60_000, &[Change::Preempted(p.clone())]).await.expect("apply");
        assert_eq!(store.preemptions(Some("c"), 4000, 10).await.expect("read"), [p]);
        assert!(store.preemptions(None, 6000, 10).await.expect("read").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_records_carry_their_slo_and_counts_group_by_state() {
    for store in stores("records").await {
        let run = |wf: &str, at: i64, slo: Option<i64>| NewRun {
            route: None,
            workflow: wf.into(),
            project: "ads".into(),
            tier: 1,
            logical_date: format!("d{at}"),
            cluster: "c".into(),
            queue: "root.ads.tier1".into(),
            spec: "{}".into(),
            params: "{}".into(),
            submitted_by: "admin".into(),
            user: "alice".into(),
            client: None,
            submitted_ms: at,
            slo_ms: slo,
            idempotency_key: None,
            request_hash: String::new(),
            idempotency_after_ms: 0,
            dry_run: false,
        };
        store
            .submit(&[run("a", 1000, Some(60_000)), run("b", 2000, None), run("a", 9000, None)])
            .await
            .expect("submit");
        let records = store.run_records(Some("c"), None, 0, 5000).await.expect("records");
        let got: Vec<(&str, i64, Option<i64>, &str)> = records
            .iter()
            .map(|r| (r.workflow.as_str(), r.submitted_ms, r.slo_ms, r.state.as_str()))
            .collect();
        assert_eq!(got, [("a", 1000, Some(60_000), "queued"), ("b", 2000, None, "queued")]);
        assert!(store.run_records(Some("other"), None, 0, 5000).await.expect("records").is_empty());
        // By project scope: the runs are `ads`'s, so `ads` has both and `search` none.
        assert_eq!(store.run_records(Some("c"), Some("ads"), 0, 5000).await.expect("records").len(), 2);
        assert!(store.run_records(None, Some("search"), 0, 5000).await.expect("records").is_empty());
        let counts = store.run_counts(5000).await.expect("counts");
        // Every run not yet ended counts, whenever it was submitted.
        // With when the oldest of each group was submitted (`/metrics`' oldest waiting age).
        let got: Vec<(&str, u8, &str, i64, i64)> = counts
            .iter()
            .map(|c| (c.project.as_str(), c.tier, c.state.as_str(), c.runs, c.oldest_submitted_ms))
            .collect();
        assert_eq!(got, [("ads", 1, "queued", 3, 1000)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_applies_configuration_and_routes_together_or_not_at_all() {
    for store in stores("plan").await {
        let change = |actor: &str, source: &str| ConfigChange {
            actor: actor.into(),
            source: source.into(),
            diff: format!("[\"{source}\"]"),
            routes: Some("[]".into()),
        };
        let v1 =
            store.put_cluster("c", "version: 1 # one", &change("weir", "loaded"), 0).await.expect("cluster");
        let route = |key: &str, cluster: &str, queue: &str| RouteRow {
            key: key.into(),
            cluster: cluster.into(),
            queue: queue.into(),
        };
        store.put_route(&route("workflow:old", "c", "root.a"), 0).await.expect("route");
        store.put_route(&route("workflow:elsewhere", "d", "root.x"), 0).await.expect("route");
        // A plan made from an older version changes nothing.
        let stale = store
            .apply_plan("c", v1 - 1, "version: 1 # two", &[], &change("t1", "stale"), 1)
            .await
            .expect("apply");
        assert_eq!(stale, PlanApplied::Stale { current: v1 });
        assert_eq!(store.cluster("c").await.expect("read").expect("c").config, "version: 1 # one");
        assert_eq!(
            store.apply_plan("nope", 1, "x", &[], &change("t1", "x"), 1).await.expect("apply"),
            PlanApplied::NoCluster
        );
        // The current version: the configuration and this cluster's routes change together.
        let done = store
            .apply_plan(
                "c",
                v1,
                "version: 1 # two",
                &[route("workflow:new", "c", "root.b")],
                &change("t1", "plan"),
                2,
            )
            .await
            .expect("apply");
        assert_eq!(done, PlanApplied::Applied { version: v1 + 1 });
        let routes: Vec<String> =
            store.routes().await.expect("routes").iter().map(|r| r.key.clone()).collect();
        assert_eq!(routes, ["workflow:elsewhere", "workflow:new"], "the other cluster's route stays");
        // The same text again keeps the version.
        let same = store
            .apply_plan(
                "c",
                v1 + 1,
                "version: 1 # two",
                &[route("workflow:new", "c", "root.b")],
                &change("t2", "same"),
                3,
            )
            .await;
        assert_eq!(same.expect("apply"), PlanApplied::Applied { version: v1 + 1 });
        // Every version is in the history once, with who made it and from what; a refused or
        // empty change records nothing.
        let history: Vec<(i64, i64, String, String, String)> = store
            .config_versions("c", 10)
            .await
            .expect("history")
            .into_iter()
            .map(|v| (v.version, v.at_ms, v.actor, v.source, v.config))
            .collect();
        assert_eq!(
            history,
            [
                (v1 + 1, 2, "t1".to_string(), "plan".to_string(), "version: 1 # two".to_string()),
                (v1, 0, "weir".to_string(), "loaded".to_string(), "version: 1 # one".to_string()),
            ]
        );
        let one = store.config_version("c", v1).await.expect("read").expect("version 1");
        assert_eq!((one.routes.as_deref(), one.diff.as_str()), (Some("[]"), "[\"loaded\"]"));
        assert_eq!(store.config_version("c", v1 + 2).await.expect("read"), None);
        // Storing the same file again is no new version.
        store.put_cluster("c", "version: 1 # two", &change("weir", "again"), 4).await.expect("put");
        assert_eq!(store.config_versions("c", 10).await.expect("history").len(), 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_supersede_each_other_and_are_decided_once() {
    for store in stores("proposals").await {
        let p = |at: i64, state: &str| ProposalRow {
            id: 0,
            cluster: "c".into(),
            created_ms: at,
            base_version: 1,
            config: "version: 1".into(),
            routes: "[]".into(),
            summary: "{}".into(),
            state: state.into(),
            decided_ms: None,
        };
        let first = store.put_proposal(&p(100, "proposed")).await.expect("put");
        let second = store.put_proposal(&p(200, "proposed")).await.expect("put");
        let refused = store.put_proposal(&p(300, "refused")).await.expect("put");
        let states: Vec<(i64, String)> = store
            .proposals(Some("c"), 10)
            .await
            .expect("list")
            .into_iter()
            .map(|p| (p.id, p.state))
            .collect();
        assert_eq!(
            states,
            [(refused, "refused".into()), (second, "superseded".into()), (first, "superseded".into())]
        );
        assert_eq!(store.last_proposal_ms("c").await.expect("last"), Some(300));
        assert_eq!(store.last_proposal_ms("none").await.expect("last"), None);
        let fourth = store.put_proposal(&p(400, "proposed")).await.expect("put");
        assert!(store.decide_proposal(fourth, "applied", 500).await.expect("decide"));
        assert!(!store.decide_proposal(fourth, "dismissed", 600).await.expect("decide"), "decided once");
        let got = store.proposal(fourth).await.expect("read").expect("there");
        assert_eq!((got.state.as_str(), got.decided_ms), ("applied", Some(500)));
    }
}
