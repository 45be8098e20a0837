//! Dry-runs and the migration table (schema 15), on a real SQLite file and on PostgreSQL when
//! `WEIR_TEST_POSTGRES_URL` is set: a dry-run is marked on its run and never blocks a
//! production run of its date; verdicts are recorded (and replaced by run id); an approval
//! moves the workflow's route in the same transaction as its audit row, and is refused for a
//! `different` verdict or a cluster with none.

mod common;

use std::sync::Arc;

use weir_store::{
    Approval, AuditFilter, Change, DryRunVerdictRow, JobStore, MigrationApproval, NewRun, RouteRow,
    RunFilter, Submitted,
};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("dry-runs", tag).await
}

fn run(cluster: &str, dry_run: bool) -> NewRun {
    NewRun {
        route: None,
        workflow: "revenue-report".into(),
        project: "finance".into(),
        tier: 2,
        logical_date: "2026-11-27".into(),
        cluster: cluster.into(),
        queue: "root.finance.reports".into(),
        spec: "{}".into(),
        params: "{}".into(),
        submitted_by: "t-fin".into(),
        user: "ana".into(),
        client: None,
        submitted_ms: 1_000,
        slo_ms: None,
        idempotency_key: None,
        request_hash: format!("{cluster}/{dry_run}"),
        idempotency_after_ms: 0,
        dry_run,
    }
}

fn verdict(run_id: i64, cluster: &str, verdict: &str, at_ms: i64) -> DryRunVerdictRow {
    DryRunVerdictRow {
        id: 0,
        run_id,
        workflow: "revenue-report".into(),
        project: "finance".into(),
        logical_date: "2026-11-27".into(),
        cluster: cluster.into(),
        queue: "root.finance.reports".into(),
        production_run: Some("1".into()),
        verdict: verdict.into(),
        differences: "[]".into(),
        at_ms,
        approved_by: None,
        approved_ms: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_is_marked_and_runs_beside_production() {
    for store in stores("dryrun_runs").await {
        let out = store
            .submit(&[run("prod", false), run("staging", true), run("staging", true), run("prod", false)])
            .await
            .expect("submit");
        let (Submitted::Created { id: prod }, Submitted::Created { id: dry }) = (&out[0], &out[1]) else {
            panic!("{out:?}")
        };
        // A second dry-run of the same date conflicts with the first, a second production run
        // with the production run: the two kinds never block each other.
        assert_eq!(out[2], Submitted::Conflict { existing: *dry });
        assert_eq!(out[3], Submitted::Conflict { existing: *prod });
        let p = store.run(*prod).await.expect("read").expect("prod");
        let d = store.run(*dry).await.expect("read").expect("dry");
        assert_eq!((p.dry_run, p.cluster.as_str()), (false, "prod"));
        assert_eq!((d.dry_run, d.cluster.as_str()), (true, "staging"));
        let listed = store.list_runs(&RunFilter { limit: 10, ..Default::default() }).await.expect("list");
        let flags: Vec<(i64, bool)> = listed.iter().map(|r| (r.id, r.dry_run)).collect();
        assert_eq!(flags, [(*dry, true), (*prod, false)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verdicts_are_recorded_and_approval_moves_the_route() {
    for store in stores("dryrun_verdicts").await {
        let route = |cluster: &str| RouteRow {
            key: "workflow:revenue-report".into(),
            cluster: cluster.into(),
            queue: "root.finance.reports".into(),
        };
        store.put_route(&route("prod"), 1).await.expect("route");
        let approve = |cluster: &str, at_ms: i64| MigrationApproval {
            workflow: "revenue-report".into(),
            cluster: cluster.into(),
            actor: "t-admin".into(),
            client: Some("127.0.0.1".into()),
            at_ms,
        };
        // Nothing recorded yet: nothing to approve, the route stays.
        assert_eq!(
            store.approve_migration(&approve("staging", 5)).await.expect("approve"),
            Approval::NoVerdict
        );

        let first =
            store.record_dry_run_verdict(&verdict(11, "staging", "different", 10)).await.expect("record");
        match store.approve_migration(&approve("staging", 20)).await.expect("approve") {
            Approval::Different { verdict } => assert_eq!((verdict.id, verdict.run_id), (first, 11)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            store.routes().await.expect("routes"),
            [route("prod")],
            "a different verdict moves nothing"
        );

        // Run 11 recorded again (after a crash) replaces its own row; run 12 is newer.
        let again =
            store.record_dry_run_verdict(&verdict(11, "staging", "different", 11)).await.expect("again");
        assert_eq!(again, first);
        let mut eq = verdict(12, "staging", "equivalent", 30);
        eq.differences = r#"[{"partition":"","what":"row order"}]"#.into();
        let second = store.record_dry_run_verdict(&eq).await.expect("record");
        store.record_dry_run_verdict(&verdict(13, "other", "identical", 40)).await.expect("record");

        let all = store.dry_run_verdicts(None, 10).await.expect("list");
        assert_eq!(all.iter().map(|v| v.run_id).collect::<Vec<_>>(), [13, 12, 11], "newest first");
        assert_eq!(all[2].at_ms, 11);
        assert_eq!(store.dry_run_verdicts(Some("revenue-report"), 1).await.expect("one")[0].run_id, 13);
        assert!(store.dry_run_verdicts(Some("nope"), 10).await.expect("none").is_empty());

        let Approval::Approved { verdict: v, route: moved } =
            store.approve_migration(&approve("staging", 50)).await.expect("approve")
        else {
            panic!("the newest staging verdict is equivalent")
        };
        assert_eq!((v.id, v.approved_by.as_deref(), v.approved_ms), (second, Some("t-admin"), Some(50)));
        assert_eq!(moved, route("staging"));
        assert_eq!(store.routes().await.expect("routes"), [route("staging")]);
        let audit = store
            .audit(&AuditFilter { action: Some("migrate.approve".into()), limit: 10, ..Default::default() })
            .await
            .expect("audit");
        assert_eq!(audit.len(), 1);
        let e = &audit[0].entry;
        assert_eq!(
            (e.token_id.as_str(), e.target.as_str(), e.project.as_deref()),
            ("t-admin", "route workflow:revenue-report", Some("finance"))
        );
        assert!(e.detail.as_deref().unwrap_or("").contains("dry-run run 12 (equivalent)"), "{e:?}");

        // Approving again keeps the first approval; recording run 12 again keeps it too.
        let Approval::Approved { verdict: v, .. } =
            store.approve_migration(&approve("staging", 60)).await.unwrap()
        else {
            panic!()
        };
        assert_eq!(v.approved_ms, Some(50));
        store.record_dry_run_verdict(&eq).await.expect("again");
        let row = store.dry_run_verdicts(Some("revenue-report"), 10).await.unwrap();
        let r12 = row.iter().find(|v| v.run_id == 12).unwrap();
        assert_eq!((r12.approved_by.as_deref(), r12.approved_ms), (Some("t-admin"), Some(50)));
        assert_eq!(r12.differences, eq.differences);
    }
}

/// Recovery's question: which of a cluster's dry-runs are over and have no verdict (a server
/// stopped between a dry-run's end and its verdict). Not production runs, not active dry-runs,
/// not another cluster's, not those with a verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_over_without_a_verdict_are_found() {
    for store in stores("dryrun_unjudged").await {
        let mut runs = vec![run("staging", true), run("prod", false)];
        runs.push(NewRun {
            logical_date: "2026-11-30".into(),
            request_hash: "a".into(),
            ..run("other", true)
        });
        runs.push(NewRun {
            logical_date: "2026-11-28".into(),
            request_hash: "b".into(),
            ..run("staging", true)
        });
        runs.push(NewRun {
            logical_date: "2026-11-29".into(),
            request_hash: "c".into(),
            ..run("staging", true)
        });
        let ids: Vec<i64> = store
            .submit(&runs)
            .await
            .expect("submit")
            .iter()
            .map(|s| match s {
                Submitted::Created { id } => *id,
                other => panic!("{other:?}"),
            })
            .collect();
        let (judged, prod, other, unjudged, active) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
        assert_eq!(store.dry_runs_without_verdict("staging").await.expect("read"), vec![]);
        let mut ended = Vec::new();
        for (cluster, list) in
            [("staging", vec![judged, unjudged]), ("prod", vec![prod]), ("other", vec![other])]
        {
            let fence =
                store.acquire_lease(cluster, "me", None, 0, 60_000).await.expect("lease").expect("free");
            let changes: Vec<Change> = list
                .iter()
                .map(|&run| Change::RunState { run, to: "succeeded", at: 5, reason: None })
                .collect();
            ended.extend(store.apply(&fence, 10_000, &changes).await.expect("apply"));
        }
        assert!(ended.iter().all(|&b| b), "{ended:?}");
        store.record_dry_run_verdict(&verdict(judged, "staging", "identical", 6)).await.expect("verdict");
        let found: Vec<i64> =
            store.dry_runs_without_verdict("staging").await.expect("read").iter().map(|r| r.id).collect();
        assert_eq!(found, vec![unjudged], "active {active} and judged {judged} are not listed");
        let found: Vec<i64> =
            store.dry_runs_without_verdict("other").await.expect("read").iter().map(|r| r.id).collect();
        assert_eq!(found, vec![other]);
        assert_eq!(store.dry_runs_without_verdict("prod").await.expect("read"), vec![]);
    }
}
