//! The store's guarantees on a real SQLite file (and on PostgreSQL when
//! `WEIR_TEST_POSTGRES_URL` is set): group-committed submissions with uniqueness and
//! idempotency, leases whose fencing number stops a stale owner from writing anything, and
//! compare-and-set state changes. Every call goes through the `JobStore` trait object, as the
//! server's do.

mod common;

use std::sync::Arc;

use weir_store::{
    AttemptKey, Change, JobStore, NewJob, NewRun, NewTask, StoreError, Submitted, TaskKey, Warning,
};

async fn stores(tag: &str) -> Vec<Arc<dyn JobStore>> {
    common::stores("store", tag).await
}

fn run(workflow: &str, date: &str, key: Option<&str>) -> NewRun {
    NewRun {
        route: None,
        workflow: workflow.into(),
        project: "ads".into(),
        tier: 1,
        logical_date: date.into(),
        cluster: "c".into(),
        queue: "root.ads.tier1".into(),
        spec: "{}".into(),
        params: "{}".into(),
        submitted_by: "admin".into(),
        user: "alice".into(),
        client: None,
        submitted_ms: 1_000,
        slo_ms: None,
        idempotency_key: key.map(str::to_string),
        request_hash: format!("{workflow}/{date}"),
        idempotency_after_ms: 0,
        dry_run: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_checks_uniqueness_and_idempotency_in_order() {
    for store in stores("submit").await {
        let mut other_project = run("w", "d1", None);
        other_project.project = "search".into();
        let out = store
            .submit(&[
                run("w", "d1", Some("k")),
                run("w", "d1", None),
                run("w", "d2", Some("k")),
                run("v", "d1", None),
                run("w", "d1", Some("k")),
                other_project,
            ])
            .await
            .expect("submit");
        let Submitted::Created { id } = out[0] else { panic!("{out:?}") };
        assert_eq!(out[1], Submitted::Conflict { existing: id });
        // The same key with another request is refused, not replayed as the first answer.
        assert_eq!(out[2], Submitted::KeyReused);
        assert!(matches!(out[3], Submitted::Created { .. }));
        // The same key with the same request replays the first answer.
        assert_eq!(out[4], Submitted::Replay { status: 201, run: id });
        // Another project's run of the same (workflow, date) is its own: no conflict.
        assert!(matches!(out[5], Submitted::Created { .. }), "{out:?}");
        // Once the run has ended, its (workflow, date) is free again.
        let fence = store.acquire_lease("c", "me", None, 0, 10_000).await.expect("lease").expect("free");
        let applied = store
            .apply(&fence, 10_000, &[Change::RunState { run: id, to: "killed", at: 5, reason: None }])
            .await
            .expect("apply");
        assert_eq!(applied, vec![true]);
        let again = store.submit(&[run("w", "d1", None)]).await.expect("submit");
        assert!(matches!(again[0], Submitted::Created { id: new } if new != id), "{again:?}");
    }
}

/// A batch larger than one multi-row statement (100 runs: chunks of 64, 32 and 4) answers
/// each run as if they had been stored one after the other: a duplicate (workflow, date) deep in
/// the batch conflicts with the earlier run, a key used again with the same request replays
/// that run's answer and with another request is refused, runs holding a stored run's date
/// conflict with it (and a key recorded for such a conflict replays the 409), an expired key is
/// used afresh. Every created run is listed under its dotted project and each ancestor, and
/// every created or conflicting submission has its audit row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_answers_each_run_as_if_stored_in_order() {
    for store in stores("batch").await {
        let mut first = run("w", "held", None);
        first.project = "ads.ranking".into();
        let mut stale = run("w", "old-key", Some("stale"));
        stale.project = "ads.ranking".into();
        let before = store.submit(&[first, stale]).await.expect("first batch");
        let Submitted::Created { id: held } = before[0] else { panic!("{before:?}") };
        let mut batch: Vec<NewRun> = (0..100)
            .map(|i| {
                let mut r = run("w", &format!("d{i}"), None);
                r.project = "ads.ranking".into();
                r.idempotency_after_ms = 500;
                r
            })
            .collect();
        batch[5].idempotency_key = Some("k5".into());
        batch[70].logical_date = "d3".into();
        batch[70].request_hash = "w/d70".into();
        batch[80] = NewRun { idempotency_key: Some("k5".into()), ..batch[5].clone() };
        batch[90] =
            NewRun { idempotency_key: Some("k5".into()), request_hash: "other".into(), ..batch[90].clone() };
        batch[95].logical_date = "held".into();
        batch[96].logical_date = "held".into();
        batch[96].idempotency_key = Some("k96".into());
        // Recorded at 1,000, before this batch's horizon of 2,000: expired, used afresh.
        batch[97].idempotency_key = Some("stale".into());
        for r in &mut batch[97..] {
            r.idempotency_after_ms = 2_000;
        }
        let out = store.submit(&batch).await.expect("submit");
        assert_eq!(out.len(), 100);
        let id = |i: usize| match out[i] {
            Submitted::Created { id } => id,
            ref o => panic!("run {i}: {o:?}"),
        };
        assert_eq!(out[70], Submitted::Conflict { existing: id(3) });
        assert_eq!(out[80], Submitted::Replay { status: 201, run: id(5) });
        assert_eq!(out[90], Submitted::KeyReused);
        assert_eq!(out[95], Submitted::Conflict { existing: held });
        assert_eq!(out[96], Submitted::Conflict { existing: held });
        let fresh = id(97);
        let ids: Vec<i64> = (0..100).filter(|i| ![70, 80, 90, 95, 96].contains(i)).map(id).collect();
        assert_eq!(ids.len(), 95);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids grow in batch order: {ids:?}");
        // Keys recorded in the batch replay in a later one, conflicts with their 409.
        let again = store
            .submit(&[
                batch[96].clone(),
                batch[5].clone(),
                NewRun { idempotency_after_ms: 0, ..batch[97].clone() },
            ])
            .await
            .expect("again");
        assert_eq!(
            again,
            [
                Submitted::Replay { status: 409, run: held },
                Submitted::Replay { status: 201, run: id(5) },
                Submitted::Replay { status: 201, run: fresh },
            ]
        );
        // A run submitted alone (one statement, no transaction around it) conflicts the same way.
        let mut alone = run("w", "d3", None);
        alone.project = "ads.ranking".into();
        let plain = run("w", "alone", None);
        assert_eq!(
            store.submit(&[alone.clone()]).await.expect("alone"),
            [Submitted::Conflict { existing: id(3) }]
        );
        alone.project = "ads".into();
        let created = store.submit(&[alone]).await.expect("alone");
        assert!(matches!(created[..], [Submitted::Created { .. }]), "{created:?}");
        assert!(matches!(store.submit(&[plain]).await.expect("alone")[..], [Submitted::Created { .. }]));
        // Listed under each scope of `ads.ranking`: the 95 created here and the 2 before (and
        // under `ads`, the two created alone).
        for scope in ["ads", "ads.ranking"] {
            let filter = weir_store::RunFilter {
                projects_in: Some(vec![scope.to_string()]),
                limit: 500,
                ..Default::default()
            };
            let want = if scope == "ads" { 99 } else { 97 };
            assert_eq!(store.list_runs(&filter).await.expect("list").len(), want, "scope {scope}");
        }
        let audit = store
            .audit(&weir_store::AuditFilter {
                action: Some("submit".into()),
                limit: 500,
                ..Default::default()
            })
            .await
            .expect("audit");
        let count = |outcome: &str| audit.iter().filter(|a| a.entry.outcome == outcome).count();
        assert_eq!((count("created"), count("conflict")), (99, 4));
        assert!(audit
            .iter()
            .any(|a| a.entry.outcome == "conflict" && a.entry.target == format!("run {held}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_lease_holder_writes_nothing() {
    for store in stores("lease").await {
        let a = store.acquire_lease("c", "a", None, 1_000, 5_000).await.expect("lease").expect("free");
        // Held and unexpired: b cannot take it; a can renew it.
        assert_eq!(store.acquire_lease("c", "b", None, 2_000, 5_000).await.expect("lease"), None);
        // Expired: b takes it and the fence moves on.
        let b = store.acquire_lease("c", "b", None, 7_000, 5_000).await.expect("lease").expect("expired");
        assert!(b.fence > a.fence);
        let id = match store.submit(&[run("w", "d", None)]).await.expect("submit")[0] {
            Submitted::Created { id } => id,
            ref other => panic!("{other:?}"),
        };
        let routed = Change::Route {
            run: id,
            jobs: vec![NewJob {
                idx: 0,
                name: "j".into(),
                tasks: vec![NewTask { stage_idx: 0, task_idx: 0, stage: "s".into() }],
            }],
            at: 7_000,
        };
        match store.apply(&a, 20_000, std::slice::from_ref(&routed)).await {
            Err(StoreError::LeaseLost { fence, .. }) => assert_eq!(fence, a.fence),
            other => panic!("a stale owner wrote: {other:?}"),
        }
        assert_eq!(store.run(id).await.expect("read").expect("run").state, "queued", "nothing was written");
        assert_eq!(store.apply(&b, 20_000, std::slice::from_ref(&routed)).await.expect("apply"), vec![true]);
        // Compare-and-set: routing twice does nothing the second time.
        assert_eq!(store.apply(&b, 20_000, &[routed]).await.expect("apply"), vec![false]);
        let key = AttemptKey { task: TaskKey { run: id, job: 0, stage: 0, task: 0 }, attempt: 1 };
        let start = Change::AttemptStarting {
            key,
            node: "node-0".into(),
            stdout: "o".into(),
            stderr: "e".into(),
            at: 8_000,
        };
        let launched = Change::AttemptLaunched { key, launched: "{}".into(), at: 8_001 };
        let ended =
            Change::AttemptEnded { key, to: "succeeded", exit_code: Some(0), at: 8_002, reason: None };
        // The same attempt cannot be started twice; an end applies once; a late launch record
        // after the end does not resurrect it.
        assert_eq!(store.apply(&b, 20_000, &[start.clone(), start]).await.expect("apply"), vec![true, false]);
        assert_eq!(
            store.apply(&b, 20_000, &[ended.clone(), ended, launched]).await.expect("apply"),
            vec![true, false, false]
        );
        let attempts = store.attempts(id, 0, 0, 0).await.expect("attempts");
        assert_eq!(attempts.len(), 1);
        assert_eq!((attempts[0].state.as_str(), attempts[0].exit_code), ("succeeded", Some(0)));
        // Recovery sees no open attempt.
        let active = store.active_runs("c").await.expect("active");
        assert!(active.iter().all(|r| r.open_attempts.is_empty()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_warning_moves_a_running_attempt_and_its_task_and_can_be_cleared() {
    for store in stores("warning").await {
        let fence = store.acquire_lease("c", "me", None, 1_000, 60_000).await.expect("lease").expect("free");
        let id = match store.submit(&[run("w", "d", None)]).await.expect("submit")[0] {
            Submitted::Created { id } => id,
            ref other => panic!("{other:?}"),
        };
        let task = TaskKey { run: id, job: 0, stage: 0, task: 0 };
        let key = AttemptKey { task, attempt: 1 };
        let setup = [
            Change::Route {
                run: id,
                jobs: vec![NewJob {
                    idx: 0,
                    name: "j".into(),
                    tasks: vec![NewTask { stage_idx: 0, task_idx: 0, stage: "s".into() }],
                }],
                at: 2_000,
            },
            Change::AttemptStarting {
                key,
                node: "n".into(),
                stdout: "o".into(),
                stderr: "e".into(),
                at: 2_000,
            },
        ];
        assert_eq!(store.apply(&fence, 60_000, &setup).await.expect("apply"), vec![true, true]);
        let warn = Change::AttemptPreempting {
            key,
            warning: Some(Warning { reason: "preempted for root.hi".into(), kill_at_ms: 9_000 }),
        };
        let clear = Change::AttemptPreempting { key, warning: None };
        // Only a running attempt is warned: not one still starting.
        assert_eq!(
            store.apply(&fence, 60_000, std::slice::from_ref(&warn)).await.expect("apply"),
            vec![false]
        );
        let launched = Change::AttemptLaunched { key, launched: "{}".into(), at: 2_001 };
        assert_eq!(
            store.apply(&fence, 60_000, &[launched, warn.clone(), warn.clone()]).await.expect("apply"),
            vec![true, true, false]
        );
        let a = &store.attempts(id, 0, 0, 0).await.expect("attempts")[0];
        assert_eq!(
            (a.state.as_str(), a.reason.as_deref(), a.kill_at_ms),
            ("preempting", Some("preempted for root.hi"), Some(9_000))
        );
        assert_eq!(store.tasks(id).await.expect("tasks")[0].state, "preempting");
        // Still open: recovery sees it.
        let active = store.active_runs("c").await.expect("active");
        assert_eq!(active[0].open_attempts[0].state, "preempting");
        // Cleared (a new owner), then warned again and ended by the kill.
        assert_eq!(
            store.apply(&fence, 60_000, &[clear.clone(), clear]).await.expect("apply"),
            vec![true, false]
        );
        let a = &store.attempts(id, 0, 0, 0).await.expect("attempts")[0];
        assert_eq!((a.state.as_str(), a.reason.as_deref(), a.kill_at_ms), ("running", None, None));
        assert_eq!(store.tasks(id).await.expect("tasks")[0].state, "running");
        let killed = Change::AttemptEnded {
            key,
            to: "killed",
            exit_code: None,
            at: 9_001,
            reason: Some("preempted".into()),
        };
        assert_eq!(store.apply(&fence, 60_000, &[warn, killed]).await.expect("apply"), vec![true, true]);
        let a = &store.attempts(id, 0, 0, 0).await.expect("attempts")[0];
        assert_eq!(
            (a.state.as_str(), a.kill_at_ms),
            ("killed", Some(9_000)),
            "the kill time stays on record"
        );
        assert!(store.active_runs("c").await.expect("active").iter().all(|r| r.open_attempts.is_empty()));
    }
}

/// Dashboard sessions: found until they expire, gone after logout, gone with their token's
/// revocation; a new session sweeps the expired ones.
#[tokio::test]
async fn sessions_expire_end_at_logout_and_with_their_token() {
    use weir_store::{SessionRow, TokenRow};
    for store in stores("sessions").await {
        let kind = store.kind();
        let token = TokenRow {
            id: "t1".into(),
            name: "t1".into(),
            hash: "tokenhash".into(),
            grants: "[]".into(),
            created_ms: 0,
            revoked_ms: None,
            user: None,
            act_as: "[]".into(),
        };
        store.create_token(&token).await.expect("token");
        let session = |id: &str, created_ms: i64, expires_ms: i64| SessionRow {
            id_hash: id.into(),
            token_hash: "tokenhash".into(),
            created_ms,
            expires_ms,
        };
        store.create_session(&session("a", 1_000, 5_000)).await.expect("a");
        store.create_session(&session("b", 1_000, 9_000)).await.expect("b");
        assert_eq!(
            store.session("a", 4_999).await.expect("read"),
            Some(session("a", 1_000, 5_000)),
            "{kind}"
        );
        assert_eq!(store.session("a", 5_000).await.expect("read"), None, "{kind}: expired");
        assert_eq!(store.session("zz", 0).await.expect("read"), None, "{kind}");
        assert!(store.create_session(&session("b", 1_000, 9_000)).await.is_err(), "{kind}: duplicate id");
        // Logout.
        assert!(store.delete_session("b").await.expect("logout"), "{kind}");
        assert!(!store.delete_session("b").await.expect("logout twice"), "{kind}");
        assert_eq!(store.session("b", 2_000).await.expect("read"), None, "{kind}");
        // A new session sweeps the expired `a`; revoking the token ends `c`.
        store.create_session(&session("c", 6_000, 60_000)).await.expect("c");
        assert!(!store.delete_session("a").await.expect("swept"), "{kind}: expired session swept");
        assert!(store.revoke_token("t1", 7_000).await.expect("revoke"), "{kind}");
        assert_eq!(store.session("c", 7_001).await.expect("read"), None, "{kind}: revoked with its token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_routing_decision_is_stored_with_it_and_read_back() {
    for store in stores("route").await {
        let mut routed = run("etl", "d1", None);
        routed.route = Some(weir_store::RunRoute {
            key: "workflow:etl".into(),
            policy: "spill".into(),
            reason: "spilled".into(),
            detail: "a/root.q load 1.50, predicted start 900s; b/root.q load 0.00, predicted start 0s".into(),
        });
        let out = store.submit(&[routed.clone(), run("plain", "d1", None)]).await.expect("submit");
        let (Submitted::Created { id: a }, Submitted::Created { id: b }) = (&out[0], &out[1]) else {
            panic!("{out:?}")
        };
        let row = store.run(*a).await.expect("read").expect("run");
        assert_eq!(row.route, routed.route);
        assert_eq!(store.run(*b).await.expect("read").expect("run").route, None);
        // Listing reads it too.
        let listed =
            store.list_runs(&weir_store::RunFilter { limit: 10, ..Default::default() }).await.expect("list");
        assert_eq!(listed.iter().find(|r| r.id == *a).and_then(|r| r.route.clone()), routed.route);
    }
}
