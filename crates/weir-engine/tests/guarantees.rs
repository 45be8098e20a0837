//! Per-job guarantees (`Engine::set_job_guarantee`): the allocation weir-slo's SLO controller
//! sets for a job, honoured like a min share for that job alone — placed ahead of fair share,
//! restored by preemption after the leaf's min-share timeout, never preempted away.

mod harness;

use harness::{mem, Env};
use weir_engine::{Decision, JobId, Starvation};
use weir_model::Resources;

fn guarantee(env: &mut Env, job: u64, r: Resources) {
    let now = env.now;
    env.engine.set_job_guarantee(now, JobId(job), r).expect("known job");
}

const TWO_QUEUES: &str = r#"
version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 5s}
nodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]
queues:
  - {name: a}
  - {name: b, min_share_preemption_timeout: 5s}
"#;

#[test]
fn a_guaranteed_job_is_placed_ahead_of_fair_share_up_to_its_guarantee() {
    // Without a guarantee the two equal queues split the node 50/50.
    let mut plain = Env::new(TWO_QUEUES);
    plain.submit(1, "a", &[(mem(1), 100)]);
    plain.submit(2, "b", &[(mem(1), 100)]);
    plain.schedule();
    plain.take_runnable();
    assert_eq!((plain.count_starts(1), plain.count_starts(2)), (50, 50));
    plain.nothing_else();

    // Job 2 guaranteed 70: it takes 70 first, the walk from root gives job 1 the rest.
    let mut env = Env::new(TWO_QUEUES);
    env.submit(1, "a", &[(mem(1), 100)]);
    env.submit(2, "b", &[(mem(1), 100)]);
    guarantee(&mut env, 2, mem(70));
    // A new guarantee asks for a pass now (a host that schedules only on events still applies it).
    assert_eq!(env.engine.next_wakeup(), Some(env.now));
    env.schedule();
    assert_eq!(env.engine.next_wakeup(), None);
    env.take_runnable();
    assert_eq!((env.count_starts(1), env.count_starts(2)), (30, 70));
    env.nothing_else();
    let why = env.explain(2);
    assert!(
        why.contains(
            "guaranteed {cpu: 0, memory: 70} (70 containers of {cpu: 0, memory: 1}) by the SLO controller, \
             has {cpu: 0, memory: 70} (70 containers): at its guarantee; beyond it the job competes at fair share"
        ),
        "{why}"
    );
}

#[test]
fn a_job_below_its_guarantee_past_the_min_share_timeout_gets_containers_preempted_for_it() {
    let mut env = Env::new(TWO_QUEUES);
    env.submit(1, "a", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 100);
    env.at(1);
    env.submit(2, "b", &[(mem(1), 100)]);
    guarantee(&mut env, 2, mem(30));
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    env.nothing_else();
    let why = env.explain(2);
    assert!(
        why.contains(
            "guaranteed {cpu: 0, memory: 30} (30 containers of {cpu: 0, memory: 1}) by the SLO controller, \
             has {cpu: 0, memory: 0} (0 containers): its containers are placed ahead of fair share, and if it \
             stays below its guarantee for 5s (min_share_preemption_timeout of root.b) containers above their \
             own share are preempted for it; below it since t=1s"
        ),
        "{why}"
    );

    // The clock started at 1 s: nothing before 6 s.
    env.at(5);
    env.schedule();
    env.nothing_else();
    env.at(6);
    env.schedule();
    let marks: Vec<Decision> = env.log.drain(..).collect();
    assert_eq!(marks.len(), 30, "the guarantee of 30, not the fair share of 50 nor the demand of 100");
    for d in &marks {
        let Decision::PreemptContainer { job, reason, .. } = d else { panic!("not a mark: {d:?}") };
        assert_eq!(job.0, 1);
        assert_eq!(reason.kind, Starvation::JobGuarantee);
        assert_eq!(reason.for_job, JobId(2));
        assert_eq!(reason.to_string(), "preempted to restore job-2 of root.b to its guaranteed allocation");
    }
    // After kill_wait the victims go and the room they leave is job 2's.
    env.at(11);
    env.schedule();
    assert_eq!(env.take_kills().len(), 30);
    assert_eq!(env.count_starts(2), 30);
    env.nothing_else();
    let why = env.explain(2);
    assert!(why.contains("(30 containers)"), "{why}");
    assert!(why.contains("at its guarantee"), "{why}");
    // At its guarantee: nothing more is taken, however long it waits for the rest.
    env.at(100);
    env.schedule();
    env.nothing_else();
}

#[test]
fn a_guarantee_raised_while_the_job_runs_is_restored_and_one_lowered_is_not() {
    let mut env = Env::new(TWO_QUEUES);
    env.submit(1, "a", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.submit(2, "b", &[(mem(1), 100)]);
    guarantee(&mut env, 2, mem(10));
    env.schedule();
    env.take_runnable();
    env.at(6);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 10);
    env.at(11);
    env.schedule();
    env.take_kills();
    assert_eq!(env.count_starts(2), 10);
    // The controller raises it to 25: the clock restarts when the job is seen short again, and
    // once the recheck delay of the last attempt is over (kill_wait 5 s + 14 s after 6 s: at 25 s),
    // the 15 more are taken.
    env.at(12);
    guarantee(&mut env, 2, mem(25));
    env.schedule();
    env.nothing_else();
    env.at(24);
    env.schedule();
    env.nothing_else();
    env.at(25);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 15);
    env.at(30);
    env.schedule();
    assert_eq!(env.take_kills().len(), 15);
    assert_eq!(env.count_starts(2), 15);
    env.nothing_else();
    // Lowered to nothing: job 2 keeps its containers (no preemption of its own) and the
    // explanation no longer speaks of a guarantee.
    env.at(36);
    guarantee(&mut env, 2, Resources::ZERO);
    env.schedule();
    env.nothing_else();
    assert_eq!(env.engine.job_guarantee(JobId(2)), None);
    assert!(!env.explain(2).contains("guaranteed"), "{}", env.explain(2));
}

#[test]
fn preemption_never_takes_a_guaranteed_job_below_its_guarantee() {
    let yaml = r#"
version: 1
scheduler:
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 5s}
nodes: [{count: 1, resources: {cpu: 100000, memory: 90}}]
queues:
  - {name: a}
  - {name: b}
  - {name: c, fair_share_preemption_timeout: 1s, fair_share_preemption_threshold: 1.0}
"#;
    // Job 2 holds 60 under a guarantee of 60 (its fair share, once c is active, is 30).
    let run = |keep: bool| {
        let mut env = Env::new(yaml);
        env.submit(1, "a", &[(mem(1), 30)]);
        env.submit(2, "b", &[(mem(1), 60)]);
        guarantee(&mut env, 2, mem(60));
        env.schedule();
        env.take_runnable();
        assert_eq!((env.count_starts(1), env.count_starts(2)), (30, 60));
        if !keep {
            guarantee(&mut env, 2, Resources::ZERO);
        }
        env.at(1);
        env.submit(3, "c", &[(mem(1), 30)]);
        env.schedule();
        env.take_runnable();
        env.at(3);
        env.schedule();
        env.take_preempts()
    };
    // Without the guarantee job 3's fair-share starvation takes 30 from job 2 (above its share)…
    let taken = run(false);
    assert_eq!(taken.len(), 30);
    assert!(taken.iter().all(|t| t.0 == 2), "{taken:?}");
    // …with it, nothing: job 1 is at its share and job 2 at its guarantee.
    assert_eq!(run(true), vec![]);
}

#[test]
fn a_guarantee_ends_with_its_job_and_an_unknown_job_is_refused() {
    let mut env = Env::new(TWO_QUEUES);
    env.submit(1, "a", &[(mem(1), 5)]);
    guarantee(&mut env, 1, mem(5));
    assert_eq!(env.engine.job_guarantee(JobId(1)), Some(mem(5)));
    env.schedule();
    env.finish_job(1);
    assert_eq!(env.engine.job_guarantee(JobId(1)), None);
    let now = env.now;
    let err = env.engine.set_job_guarantee(now, JobId(7), mem(1)).unwrap_err();
    assert_eq!(err.to_string(), "job-7 is not known to the engine");
    // A new job in the freed slot does not inherit it.
    env.submit(2, "b", &[(mem(1), 5)]);
    assert_eq!(env.engine.job_guarantee(JobId(2)), None);
}
