//! The engine actor's hook for deadline guarantees (`crate::jockey`): once per pass, before
//! `schedule`, the guarded runs' controllers step and their allocations become the jobs'
//! guarantees in the engine.

use weir_model::Time;

use super::actor::Actor;
use super::live::{engine_job, JobPhase};
use crate::jockey::RunView;

impl Actor {
    pub(super) fn step_guarantees(&mut self, now: Time) {
        let views: Vec<RunView<'_>> = self
            .runs
            .values()
            .filter(|r| r.ending.is_none())
            .filter_map(|r| {
                let workflow = r.jockey.as_deref()?;
                let job = r.jobs.first()?;
                Some(RunView {
                    id: r.id,
                    workflow,
                    submitted_ms: r.submitted_ms,
                    done: job.stages.iter().map(|s| s.done).collect(),
                    started: r.started || r.active > 0,
                    in_engine: job.phase == JobPhase::InEngine,
                })
            })
            .collect();
        if views.is_empty() && self.jockey.is_empty() {
            return;
        }
        let applies = self.jockey.step(
            now.0 as i64,
            &self.cluster,
            &self.store,
            &self.config.scheduler,
            &views,
            &mut self.changes,
        );
        drop(views);
        for a in applies {
            if let Err(e) = self.engine.set_job_guarantee(now, engine_job(a.run, 0), a.guarantee) {
                eprintln!(
                    "weir worker: cluster `{}`: run {}: cannot set its guarantee: {e}",
                    self.cluster, a.run
                );
            }
        }
    }
}
