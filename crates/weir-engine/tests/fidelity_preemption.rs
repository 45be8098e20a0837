//! Starvation and preemption checked against the Hadoop YARN Fair Scheduler's source (issue 8):
//! starvation targets, netting, whole containers, the starvation clock, the delay after
//! preemption, the utilization gate, and room freed by preemption that must not sit idle. Each
//! test names the YARN class and method it follows.

mod harness;

use harness::{mem, Env};
use weir_model::{Resources, Time};

/// A 100 MiB node, `greedy` (preemptable) and `starved` with the given fair-share threshold
/// and a 10 s fair-share timeout; preemption above 80% use, kill after 15 s; no AM-share check
/// and no reservations, so that only preemption moves containers.
fn two_queues(threshold: f64, extra: &str) -> String {
    format!(
        r#"
version: 1
scheduler:
  queue_max_am_share_default: -1
  reservable_nodes: 0
  preemption: {{enabled: true, utilization_threshold: 0.8, kill_wait: 15s}}
nodes: [{{count: 1, resources: {{cpu: 100000, memory: 100}}}}]
queues:
  - {{name: greedy}}
  - {{name: starved, fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: {threshold}{extra}}}
"#
    )
}

/// The greedy job fills the node at 0 s; the starved one arrives at 1 s.
fn greedy_then(yaml: &str, requests: &[(Resources, u32)]) -> Env {
    let mut env = Env::new(yaml);
    env.submit(1, "greedy", &[(mem(1), 200)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.count_starts(1), 100);
    env.at(1);
    env.submit(2, "starved", requests);
    env.schedule();
    assert_eq!(env.take_runnable(), vec![2]);
    env.nothing_else();
    env
}

/// FSAppAttempt.fairShareStarvation: the target is componentwise min(fair share × threshold,
/// demand) — a job wanting less than its fair share gets threshold × share back, not threshold
/// × its demand (weir gave this small job 15 MiB of its 30).
#[test]
fn a_job_below_its_fair_share_is_restored_to_threshold_times_the_share() {
    let mut env = greedy_then(&two_queues(0.5, ""), &[(mem(1), 30)]);
    env.at(11);
    env.schedule();
    // min(0.5 × 50, 30) = 25.
    assert_eq!(env.take_preempts().len(), 25);
    env.nothing_else();
    assert!(
        env.explain(2).contains("fair-share target {cpu: 0, memory: 25} = min(0.5 × fair share"),
        "{}",
        env.explain(2)
    );
}

/// FSAppAttempt.getStarvedResourceRequests: floor(starvation / container) whole containers —
/// 25 MiB of starvation buys two 10 MiB containers, not three.
#[test]
fn starvation_is_met_in_whole_containers_rounded_down() {
    let mut env = greedy_then(&two_queues(0.5, ""), &[(mem(10), 10)]);
    env.at(11);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 20, "two containers' room: 20 victims of 1 MiB");
    env.nothing_else();
}

/// The same: starvation smaller than one container preempts nothing.
#[test]
fn starvation_below_one_container_preempts_nothing() {
    let mut env = greedy_then(&two_queues(0.08, ""), &[(mem(10), 10)]);
    env.at(11);
    env.schedule();
    // min(0.08 × 50, 100) = 4 MiB < one 10 MiB container.
    env.nothing_else();
}

/// FSLeafQueue.updateStarvedApps: the leaf's min-share starvation less its jobs' fair-share
/// starvation is what min share adds; weir added both (37 + 30).
#[test]
fn min_share_starvation_is_netted_against_fair_share_starvation() {
    let mut env = Env::new(
        r#"
version: 1
scheduler:
  queue_max_am_share_default: -1
  reservable_nodes: 0
  preemption: {enabled: true, utilization_threshold: 0.5, kill_wait: 15s}
nodes: [{count: 1, resources: {cpu: 100000, memory: 100}}]
queues:
  - {name: greedy}
  - name: guaranteed
    weight: 3
    min: {memory: 30}
    min_share_preemption_timeout: 5s
    fair_share_preemption_timeout: 5s
    fair_share_preemption_threshold: 0.5
"#,
    );
    env.submit(1, "greedy", &[(mem(1), 200)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.submit(2, "guaranteed", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    env.at(6);
    env.schedule();
    // Fair share 75, so fair-share starvation min(0.5 × 75, 100) = 37; min share 30 − 37 < 0.
    assert_eq!(env.take_preempts().len(), 37);
    env.nothing_else();
}

/// FairScheduler.update → FSLeafQueue.fetchAppsWithDemand: lastTimeAtFairShare moves only
/// while the job has pending demand, so a job that asks again after a quiet stage longer than
/// its timeout is starved at once (weir restarted the 10 s timeout).
#[test]
fn a_job_that_asks_again_after_a_quiet_stage_is_starved_at_once() {
    let mut env = Env::new(&two_queues(1.0, ""));
    env.submit(2, "starved", &[(mem(1), 50)]);
    env.submit(1, "greedy", &[(mem(1), 200)]);
    env.schedule();
    env.take_runnable();
    let starts = env.take_starts();
    let mine: Vec<_> = starts.iter().filter(|s| s.0 == 2).map(|s| s.1).collect();
    assert_eq!(mine.len(), 50);
    // Its stage ends; the greedy job takes the room. The job stays, wanting nothing.
    env.at(5);
    for c in mine {
        env.finish_container(c);
    }
    env.schedule();
    assert_eq!(env.count_starts(1), 50);
    env.nothing_else();
    // 95 s later it asks again: below min(fair share 50, demand 30) and last at its fair share
    // at 5 s, longer ago than the timeout.
    env.at(100);
    env.request(2, &[(mem(1), 30)]);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 30);
    env.nothing_else();
}

/// FSPreemptionThread.run → FSAppAttempt.preemptionTriggered: a job preemption was tried for is
/// not looked at again for kill_wait + 4 heartbeats + 10 s; next_wakeup covers that time.
#[test]
fn after_preemption_a_job_waits_before_its_starvation_is_checked_again() {
    let mut env = greedy_then(&two_queues(1.0, ""), &[(mem(1), 10)]);
    env.at(11);
    env.schedule();
    assert_eq!(env.take_preempts().len(), 10);
    // It wants more now, but is not looked at again before 11 + 15 + 4 + 10 = 40 s (weir
    // preempted the rest at once).
    env.at(12);
    env.request(2, &[(mem(1), 90)]);
    env.schedule();
    env.nothing_else();
    assert_eq!(env.engine.next_wakeup(), Some(Time(26_000)), "the kills");
    env.at(26);
    env.schedule();
    assert_eq!(env.take_kills().len(), 10);
    assert_eq!(env.count_starts(2), 10);
    env.nothing_else();
    assert_eq!(env.engine.next_wakeup(), Some(Time(40_000)), "the next starvation check");
    env.at(40);
    env.schedule();
    // min(50, 100) − 10 = 40.
    assert_eq!(env.take_preempts().len(), 40);
    env.nothing_else();
}

/// FairScheduler.shouldAttemptPreemption: utilization strictly above the threshold (weir used
/// ≥), measured on memory and vcores only (weir counted gpus).
#[test]
fn preemption_needs_utilization_strictly_above_the_threshold_on_memory_or_cpu() {
    // 80 of 100 MiB used: not above 0.8.
    let mut env = Env::new(&two_queues(1.0, ""));
    env.submit(1, "greedy", &[(mem(1), 80)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.submit(2, "starved", &[(mem(40), 1)]);
    env.schedule();
    env.take_runnable();
    env.at(60);
    env.schedule();
    env.nothing_else();

    // Every gpu in use but little memory or cpu: no preemption either.
    let yaml =
        two_queues(1.0, "").replace("{cpu: 100000, memory: 100}", "{cpu: 100000, memory: 100, gpu: 2}");
    let mut env = Env::new(&yaml);
    env.submit(1, "greedy", &[(Resources::new(0, 10, 1), 2)]);
    env.schedule();
    env.take_runnable();
    env.take_starts();
    env.at(1);
    env.submit(2, "starved", &[(Resources::new(0, 10, 1), 1)]);
    env.schedule();
    env.take_runnable();
    env.at(60);
    env.schedule();
    env.nothing_else();
}

/// FairScheduler.attemptScheduling serves preempted containers to their app first
/// (assignPreemptedContainers) and schedules the rest of the node in the same heartbeat: room
/// preemption freed that its job no longer needs goes to the next job in the same pass (weir
/// let the hold go after placing and left the room idle with no wakeup).
#[test]
fn room_freed_by_preemption_is_used_in_the_pass_that_frees_it() {
    let mut env = Env::new(
        r#"
version: 1
scheduler:
  queue_max_am_share_default: -1
  reservable_nodes: 0
  preemption: {enabled: true, utilization_threshold: 0.8, kill_wait: 15s}
nodes: [{count: 2, resources: {cpu: 100000, memory: 50}}]
queues:
  - {name: greedy}
  - {name: s, fair_share_preemption_timeout: 10s, fair_share_preemption_threshold: 1.0}
  - {name: u}
"#,
    );
    env.submit(1, "greedy", &[(mem(1), 100)]);
    env.schedule();
    env.take_runnable();
    let greedy = env.take_starts();
    env.at(1);
    env.submit(2, "s", &[(mem(10), 1)]);
    env.submit(3, "u", &[(mem(1), 50)]);
    env.schedule();
    env.take_runnable();
    env.nothing_else();
    env.at(11);
    env.schedule();
    let marked = env.take_preempts();
    assert_eq!(marked.len(), 10);
    env.nothing_else();
    // Ten of greedy's containers on the other node end by themselves: s takes that room.
    env.at(16);
    let marked_ids: Vec<_> = marked.iter().map(|m| m.1).collect();
    let elsewhere: Vec<_> =
        greedy.iter().filter(|g| g.2 .0 == 1 && !marked_ids.contains(&g.1)).take(10).map(|g| g.1).collect();
    for c in elsewhere {
        env.finish_container(c);
    }
    env.schedule();
    assert_eq!(env.count_starts(2), 1);
    env.nothing_else();
    assert_eq!(env.engine.next_wakeup(), Some(Time(26_000)));
    // The victims die; s needs nothing more; u gets the room at once.
    env.at(26);
    env.schedule();
    assert_eq!(env.take_kills().len(), 10);
    assert_eq!(env.count_starts(3), 10);
    env.nothing_else();
}
