//! What the engine asks its host to do.

use std::fmt;

use weir_model::{QueuePath, Resources, Time};

use crate::ids::{ContainerId, JobId, NodeId};

#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The job may start: its queues and user are below their running-app limits.
    JobRunnable { job: JobId },
    /// The engine will not run this job.
    JobRejected { job: JobId, reason: String },
    /// Start a container for `job` on `node`. `am` marks the job's first container.
    StartContainer {
        container: ContainerId,
        job: JobId,
        node: NodeId,
        resources: Resources,
        tag: u64,
        am: bool,
    },
    /// Warn the owner: this container will be killed at `kill_at` unless it ends first.
    PreemptContainer { container: ContainerId, job: JobId, kill_at: Time, reason: PreemptReason },
    /// Kill the container now; its resources are already given back.
    KillContainer { container: ContainerId, job: JobId, reason: PreemptReason },
}

/// Why a container was taken: which job and queue it helps, and which rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreemptReason {
    pub for_job: JobId,
    pub for_queue: QueuePath,
    pub kind: Starvation,
}

/// What triggers preemption: the two kinds of starvation (fair mode), or a queue below its
/// guarantee (capacity mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Starvation {
    /// A job below `threshold × min(fair share, demand)` past its queue's fair-share timeout.
    FairShare,
    /// A queue below `min(min share, demand)` past its min-share timeout.
    MinShare,
    /// Capacity mode's proportional policy: `for_queue` is below its ideal allocation, and the
    /// victim's leaf held `used` MiB, above its `ideal` allocation and past the dead zone over
    /// its `guaranteed` MiB.
    Guarantee { used: u64, ideal: u64, guaranteed: u64 },
    /// A job below `min(guarantee, demand)` past its leaf's min-share timeout: the guarantee
    /// a host (the SLO controller) set with `Engine::set_job_guarantee`.
    JobGuarantee,
    /// Capacity mode: the victim, asking for no node label, ran on room a non-exclusive label
    /// lent; `for_job` asks for that label and finds no room.
    LentRoom,
}

impl fmt::Display for PreemptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Starvation::FairShare => {
                write!(f, "preempted to restore {} of {} to its fair share", self.for_job, self.for_queue)
            }
            Starvation::MinShare => write!(f, "preempted to restore {} to its min share", self.for_queue),
            Starvation::LentRoom => write!(
                f,
                "preempted to give back room a non-exclusive node label lent: {} of {} asks for that label",
                self.for_job, self.for_queue
            ),
            Starvation::Guarantee { used, ideal, guaranteed } => write!(
                f,
                "preempted by the proportional capacity policy for {} of {}, below its guarantee: this job's \
                 queue held {used} MiB, above its ideal allocation of {ideal} MiB (guarantee {guaranteed} MiB)",
                self.for_job, self.for_queue
            ),
            Starvation::JobGuarantee => {
                write!(
                    f,
                    "preempted to restore {} of {} to its guaranteed allocation",
                    self.for_job, self.for_queue
                )
            }
        }
    }
}
