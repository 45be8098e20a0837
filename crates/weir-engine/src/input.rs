//! What a host tells the engine. Every input is stamped with `now` by the caller.

use weir_model::{Duration, QueuePath, Resources, Time};

use crate::ids::{ContainerId, JobId, NodeId};

/// A node joining the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    pub id: NodeId,
    pub resources: Resources,
    pub label: Option<String>,
    /// The model of its GPUs, which requests may ask for ([`Selector`]).
    pub gpu_model: Option<String>,
}

impl NodeSpec {
    /// A node without a label or GPU model.
    pub fn new(id: NodeId, resources: Resources) -> NodeSpec {
        NodeSpec { id, resources, label: None, gpu_model: None }
    }
}

/// Where a container may run: nodes whose label is one of `labels` and whose GPU model is one
/// of `gpu_models` (an empty list allows any). Register it with [`crate::Engine::selector`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    pub labels: Vec<String>,
    pub gpu_models: Vec<String>,
}

/// A registered [`Selector`]; the default, 0, allows every node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SelectorId(pub u32);

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
    /// Non-zero: a gang. Every pending request of the job with this number starts together,
    /// in one pass, or none of them does (see `gang.rs`). A gang is never an AM.
    pub gang: u32,
    /// The run time each container asks for (an HPC job's walltime), which EASY backfilling
    /// plans with; `None` when unknown. The engine does not end containers at it.
    pub walltime: Option<Duration>,
    /// A fraction of one GPU, in thousandths (1 to 999), taken on one physical GPU with that
    /// much free; `resources.gpu` must then be 0.
    pub gpu_milli: u32,
    /// The nodes it may run on.
    pub selector: SelectorId,
}

impl Request {
    pub fn new(resources: Resources, count: u32) -> Request {
        Request {
            resources,
            count,
            tag: 0,
            am: false,
            gang: 0,
            walltime: None,
            gpu_milli: 0,
            selector: SelectorId::default(),
        }
    }

    /// Make the request (part of) gang `gang`, a non-zero number chosen by the host.
    pub fn in_gang(mut self, gang: u32) -> Request {
        self.gang = gang;
        self
    }

    pub fn with_walltime(mut self, walltime: Duration) -> Request {
        self.walltime = Some(walltime);
        self
    }

    /// A fraction of one GPU per container, in thousandths.
    pub fn with_gpu_milli(mut self, milli: u32) -> Request {
        self.gpu_milli = milli;
        self
    }

    pub fn on(mut self, selector: SelectorId) -> Request {
        self.selector = selector;
        self
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
