//! The jobs still in the engine when a simulation ends, each with the engine's own explanation
//! of why it is where it is (`Engine::explain`): `pending.csv`, and `weir simulate --explain`.

use std::io::{self, Write};

use weir_engine::{Explanation, JobId, JobStatus};
use weir_model::Time;

use crate::csv::csv_field;
use crate::sim::Simulation;
use crate::summary::Outcome;

/// One job unfinished at the end of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingJob {
    /// The simulator's job number (the engine's `JobId`).
    pub job: u64,
    pub workflow: String,
    /// The job's name in its workflow.
    pub name: String,
    pub tier: u8,
    pub submit: Time,
    pub explanation: Explanation,
}

/// Every job the engine still holds, in job order.
pub(crate) fn collect(sim: &Simulation) -> Vec<PendingJob> {
    let mut out = Vec::new();
    for (id, j) in sim.jobs.iter() {
        if !(j.is_active() && j.in_engine) {
            continue;
        }
        let Ok(explanation) = sim.engine.explain(JobId(id as u64)) else { continue };
        let wf = &sim.workload.workflows[j.workflow as usize];
        out.push(PendingJob {
            job: id as u64,
            workflow: wf.name.clone(),
            name: wf.jobs[j.template as usize].name.clone(),
            tier: j.tier,
            submit: j.submit,
            explanation,
        });
    }
    out
}

/// `pending.csv`: one row per job unfinished at the end, with the engine's explanation (its
/// sentences joined by ` | `).
pub fn write_pending_csv(mut w: impl Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(
        w,
        "job,workflow,job_name,tier,queue,submit,status,running_containers,pending_containers,\
         usage_cpu,usage_memory,fair_share_cpu,fair_share_memory,pending_cpu,pending_memory,explanation"
    )?;
    for p in &outcome.pending {
        let e = &p.explanation;
        let status = match e.status {
            JobStatus::Waiting => "waiting",
            JobStatus::Runnable => "runnable",
        };
        writeln!(
            w,
            "{},{},{},{},{},{},{status},{},{},{},{},{},{},{},{},{}",
            p.job,
            csv_field(&p.workflow),
            csv_field(&p.name),
            p.tier,
            e.queue,
            p.submit.as_millis(),
            e.running_containers,
            e.pending_containers,
            e.usage.cpu,
            e.usage.memory,
            e.fair_share.cpu,
            e.fair_share.memory,
            e.pending.cpu,
            e.pending.memory,
            csv_field(&e.reasons.join(" | ")),
        )?;
    }
    Ok(())
}
