//! Shared builders: profiles written by hand, so every expected figure can be worked out.
#![allow(dead_code)]

use weir_slo::{JobProfile, StageProfile, PROFILE_VERSION, QUANTILE_LEVELS};

/// A stage of `tasks` tasks of exactly `secs` seconds, waiting for `after`.
pub fn fixed_stage(name: &str, after: Vec<usize>, tasks: u32, secs: u64) -> StageProfile {
    StageProfile {
        name: name.into(),
        after,
        tasks,
        duration_ms: vec![secs * 1000; QUANTILE_LEVELS.len()],
        mean_ms: (secs * 1000) as f64,
        failure_probability: 0.0,
    }
}

pub fn profile(stages: Vec<StageProfile>) -> JobProfile {
    JobProfile {
        version: PROFILE_VERSION,
        workflow: "wf".into(),
        job: "j".into(),
        runs: 1,
        init_ms: 0,
        stages,
    }
}
