//! What a host tells the engine. Every input is stamped with `now` by the caller.

use weir_model::{QueuePath, Resources, Time};

use crate::ids::{ContainerId, JobId, NodeId};

/// A node joining the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub id: NodeId,
    pub resources: Resources,
    pub label: Option<String>,
}

/// `count` containers of one size. `tag` is the host's own marker (a stage, a task group) and
/// comes back on every container started for this request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub resources: Resources,
    pub count: u32,
    pub tag: u64,
    /// An application master: served before the job's other requests whenever the job runs no
    /// AM, and checked against the leaf's AM share. A job's very first container is its AM
    /// whether marked or not; mark the request that replaces a lost AM.
    pub am: bool,
}

impl Request {
    pub fn new(resources: Resources, count: u32) -> Request {
        Request { resources, count, tag: 0, am: false }
    }

    pub fn tagged(mut self, tag: u64) -> Request {
        self.tag = tag;
        self
    }

    /// Mark the request as the job's application master.
    pub fn as_am(mut self) -> Request {
        self.am = true;
        self
    }
}

/// A job handed to the engine. With `has_am`, its first container is its application master
/// (YARN: the AM is the first container an attempt gets).
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub id: JobId,
    /// A leaf queue.
    pub queue: QueuePath,
    pub user: String,
    /// Overrides the queue's (tier's) priority when set; higher runs first.
    pub priority: Option<i32>,
    /// When the job was submitted: YARN's app start time, the tie-break of every ordering after
    /// usage (it may predate `now`).
    pub submit_time: Time,
    /// Containers wanted now; more can be added later with [`Input::RequestsAdded`].
    pub requests: Vec<Request>,
    /// The job's first container is its application master: checked against the leaf's AM
    /// share and preempted last. Every YARN application has one; a job without (a live weir
    /// job whose tasks are independent processes, a rigid parallel job of a trace) has only the
    /// AMs its requests mark with [`Request::as_am`].
    pub has_am: bool,
}

/// Every input the engine takes, for hosts that queue events. Each has an `on_*` method too.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    NodeAdded(NodeSpec),
    NodeRemoved(NodeId),
    JobSubmitted(JobSpec),
    /// More containers wanted by a job (a new stage became ready).
    RequestsAdded {
        job: JobId,
        requests: Vec<Request>,
    },
    /// The job no longer wants the containers it has not been given yet.
    RequestsCleared {
        job: JobId,
    },
    /// A container ended by itself (task done or failed).
    ContainerFinished(ContainerId),
    /// The job ended (finished, failed or killed); its containers are released.
    JobFinished(JobId),
}
