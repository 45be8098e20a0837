//! The control policy on scripted progress traces, and the admission check, on a job whose
//! predictions can be worked by hand: Amdahl's S + P/a for 100 tasks of 60 s (S = 60 s while
//! tasks are left, P = 60 s per task left), a deadline of 30 min, slack 1.3 at the start
//! falling to 1.05 at the end (slack = 1.3 − 0.25 p).

mod common;

use common::{fixed_stage, profile};
use weir_slo::{admit, AdmittedJob, ControlConfig, Controller, JobState, Predictor, Utility};

const DEADLINE_MS: u64 = 1_800_000;

fn controller(config: ControlConfig) -> Controller {
    let p = profile(vec![fixed_stage("s", vec![], 100, 60)]);
    Controller::new(Predictor::Amdahl { profile: p }, Utility::deadline(DEADLINE_MS), config)
}

fn state(done: u32) -> JobState {
    JobState { done: vec![done], started: true, ran_ms: vec![] }
}

fn settings() -> ControlConfig {
    ControlConfig {
        slack_start: 1.3,
        slack_end: 1.05,
        hysteresis: 0.5,
        dead_zone_ms: 300_000,
        ..ControlConfig::default()
    }
}

#[test]
fn it_starts_at_the_smallest_allocation_predicted_on_time() {
    // 1.3 (60 + 6000/a) ≤ 1800 s ⇔ a ≥ 4.53: 5 (1638 s); 4 would take 2028 s.
    let mut c = controller(settings());
    assert_eq!(c.initial(), 5);
    let d = c.step(0, &JobState { done: vec![0], started: false, ran_ms: vec![] });
    assert_eq!((d.allocation, d.predicted_ms, d.reason), (5, 1_638_000, "first decision"));
}

#[test]
fn it_raises_the_allocation_when_the_job_falls_behind() {
    let mut c = controller(settings());
    c.step(0, &state(0));
    // 20 min in, only 10 tasks done (p = 0.1, slack 1.275): 1200 + 1.275 (60 + 5400/a) ≤ 1800
    // ⇔ a ≥ 13.15: 14 (1768 s); 13 would end at 1806 s.
    let d = c.step(1_200_000, &state(10));
    assert_eq!((d.allocation, d.target, d.reason), (14, 14, "behind: raised"));
    assert!(d.predicted_ms <= DEADLINE_MS);
}

#[test]
fn it_lowers_the_allocation_when_ahead_a_share_of_the_gap_at_a_time() {
    let mut c = controller(settings());
    c.step(0, &state(0));
    c.step(1_200_000, &state(10));
    // Then half done at 5 min on a later run of the script (p = 0.5, slack 1.175):
    // 300 + 1.175 (60 + 3000/a) ≤ 1800 ⇔ a ≥ 2.47: target 3. From 14, half the gap each period.
    let steps: Vec<u32> = (0..5).map(|_| c.step(300_000, &state(50)).allocation).collect();
    assert_eq!(steps, vec![8, 5, 4, 3, 3]);
}

/// The allocations a controller gives a job that does `a` tasks a minute at allocation `a`,
/// the count it sees wobbling by one task either way (tasks ending just before or after the
/// look), starting 10 tasks behind a fair pace.
fn scripted(mut c: Controller) -> (Vec<u32>, u64) {
    let mut done = 0u32;
    let mut allocs = Vec::new();
    let mut t = 0u64;
    // The first 20 minutes at a slow pace (a slow node): 10 tasks.
    c.step(0, &state(0));
    for minute in 1..=20u64 {
        done = (minute / 2) as u32;
        t = minute * 60_000;
    }
    while done < 100 {
        let seen = if (t / 60_000).is_multiple_of(2) { done.saturating_sub(1) } else { (done + 1).min(99) };
        let a = c.step(t, &state(seen)).allocation;
        allocs.push(a);
        done = (done + a).min(100);
        t += 60_000;
    }
    (allocs, t)
}

fn changes(allocs: &[u32]) -> usize {
    allocs.windows(2).filter(|w| w[0] != w[1]).count()
}

fn reversals(allocs: &[u32]) -> usize {
    let moves: Vec<i64> =
        allocs.windows(2).map(|w| i64::from(w[1]) - i64::from(w[0])).filter(|&d| d != 0).collect();
    moves.windows(2).filter(|m| m[0].signum() != m[1].signum()).count()
}

#[test]
fn with_a_dead_zone_and_hysteresis_it_does_not_flap_and_meets_the_deadline() {
    let (allocs, end) = scripted(controller(settings()));
    assert!(end <= DEADLINE_MS, "finished at {end} ms with {allocs:?}");
    assert_eq!(reversals(&allocs), 0, "no up-down-up: {allocs:?}");
    // Without them, the same wobbling trace moves the allocation more often.
    let bare = ControlConfig { dead_zone_ms: 0, hysteresis: 1.0, ..settings() };
    let (bare_allocs, bare_end) = scripted(controller(bare));
    assert!(bare_end <= DEADLINE_MS);
    assert!(
        changes(&bare_allocs) > changes(&allocs),
        "{} changes bare ({bare_allocs:?}) vs {} ({allocs:?})",
        changes(&bare_allocs),
        changes(&allocs)
    );
}

#[test]
fn never_below_the_minimum_allocation() {
    let mut c = controller(ControlConfig { min_allocation: 3, ..settings() });
    // 99 tasks done at 1 min: one container would do, three are the floor.
    let d = c.step(60_000, &state(99));
    assert_eq!(d.allocation, 3);
}

#[test]
fn admission_accepts_what_fits_and_refuses_what_does_not() {
    let job = |name: &str, allocation: u32| AdmittedJob { name: name.into(), allocation, feasible: true };
    let admitted = [job("a", 5), job("b", 8)];
    // 20 guaranteed containers, 13 held: 7 free.
    let yes = admit(&job("c", 7), &admitted, 20);
    assert!(yes.admitted, "{}", yes.reason);
    assert_eq!(yes.reason, "c needs 7 containers; 7 of 20 are free beside 2 admitted job(s) holding 13");
    let no = admit(&job("d", 8), &admitted, 20);
    assert!(!no.admitted);
    assert_eq!(
        no.reason,
        "d needs 8 containers but only 7 of 20 are free: 2 admitted job(s) hold 13 (a 5, b 8)"
    );
    // The hand-worked job: 5 containers for a 30 min deadline.
    let c = controller(settings());
    assert_eq!(c.admission("etl"), job("etl", 5));
    assert!(admit(&c.admission("etl"), &admitted, 18).admitted);
    assert!(!admit(&c.admission("etl"), &admitted, 17).admitted);
    // A 1-minute deadline cannot be met: one task alone takes 60 s, 78 s with the slack.
    let tight = Controller::new(
        Predictor::Amdahl { profile: profile(vec![fixed_stage("s", vec![], 100, 60)]) },
        Utility::deadline(60_000),
        settings(),
    );
    let r = admit(&tight.admission("tight"), &[], 1000);
    assert!(!r.admitted);
    assert!(r.reason.starts_with("tight cannot meet its deadline even at 100 containers"), "{}", r.reason);
}

#[test]
fn utility_is_piecewise_linear_with_an_optional_cut_off() {
    let mut u = Utility::deadline(3_600_000);
    assert_eq!(u.at(3_600_000), 1.0);
    assert_eq!(u.at(3_600_000 + 1_800_000), 0.5);
    u.cutoff_ms = Some(3_600_000 + 3_600_000);
    u.after_cutoff = -5.0;
    assert_eq!(u.at(3_600_000 + 3_600_000), 0.0);
    assert_eq!(u.at(3_600_000 + 3_600_001), -5.0);
}

#[test]
fn a_run_slower_than_its_profile_is_replanned_from_its_own_speed() {
    // 20 min in, 10 tasks done, but each took 90 s, not 60: speed = (900 + 600) / (600 + 600)
    // = 1.25 (ten tasks of the profile's expectation on both sides). 1200 + 1.275 × 1.25 ×
    // (60 + 5400/a) ≤ 1800 ⇔ a ≥ 17.06: 18 (1773.75 s), where the profile alone asks for 14.
    let slow = JobState { done: vec![10], started: true, ran_ms: vec![10 * 90_000] };
    let mut c = controller(settings());
    c.step(0, &state(0));
    let d = c.step(1_200_000, &slow);
    assert_eq!((d.allocation, d.speed, d.predicted_ms, d.reason), (18, 1.25, 1_773_750, "behind: raised"));
    // Without re-estimation the same run is planned at the profile's speed.
    let mut blind = controller(ControlConfig { reestimate: false, ..settings() });
    blind.step(0, &state(0));
    let d = blind.step(1_200_000, &slow);
    assert_eq!((d.allocation, d.speed), (14, 1.0));
    // A run faster than its profile is never planned faster than the profile.
    let fast = JobState { done: vec![10], started: true, ran_ms: vec![10 * 30_000] };
    let d = controller(settings()).step(1_200_000, &fast);
    assert_eq!((d.allocation, d.speed), (14, 1.0));
}

/// A C(p, a) table by hand: one stage of 10 tasks, two progress buckets, three allocations,
/// every quantile the same; remaining times in seconds per bucket, per allocation.
fn hand_table(rows: [[u64; 2]; 3]) -> Predictor {
    let p = profile(vec![fixed_stage("s", vec![], 10, 60)]);
    let remaining_ms = rows
        .iter()
        .map(|r| r.iter().map(|&s| vec![s * 1000; weir_slo::TABLE_QUANTILES.len()]).collect())
        .collect();
    let table = weir_slo::RemainingTable {
        version: weir_slo::TABLE_VERSION,
        workflow: "wf".into(),
        job: "j".into(),
        indicator: weir_slo::Indicator::Work,
        buckets: 2,
        runs: 1,
        seed: 1,
        remaining_ms,
    };
    Predictor::Table { profile: p, table }
}

#[test]
fn predictions_never_favour_fewer_containers_and_a_late_job_keeps_what_it_has() {
    // Before half-way 3 containers are needed (2000, 1500, 900 s); after it the table's noise
    // has 3 containers slower than 2 (700 s against 800 s).
    let predictor = hand_table([[2000, 1000], [1500, 700], [900, 800]]);
    let flat =
        ControlConfig { slack_start: 1.0, slack_end: 1.0, dead_zone_ms: 0, hysteresis: 1.0, ..settings() };
    let mut c = Controller::new(predictor, Utility::deadline(1_000_000), flat);
    let start = JobState { done: vec![0], started: true, ran_ms: vec![0] };
    assert_eq!(c.step(0, &start).allocation, 3);
    // 400 s in, half done: the violating pair (700, 800) is pooled to its mean, 750 s for
    // both; never sooner on 2 than on 3, and not the worse of the two either.
    let half = JobState { done: vec![5], started: true, ran_ms: vec![5 * 60_000] };
    assert_eq!(c.predicted(400_000, &half, 2), 1_150_000);
    assert_eq!(c.predicted(400_000, &half, 3), 1_150_000);
    assert_eq!(c.predicted(400_000, &half, 1), 1_400_000);
    // Every allocation is late; 2 is the cheapest of the least late, but the job keeps 3.
    let d = c.step(400_000, &half);
    assert_eq!((d.target, d.allocation, d.reason), (2, 3, "late: kept"));
}
