//! A small scenario harness: build a cluster from YAML, submit jobs, run scheduling passes,
//! and assert on the decision log — ending with "and nothing else happened".
//! `check_invariants` runs after every step.

#![allow(dead_code)]

use std::collections::VecDeque;

use weir_engine::{ContainerId, Decision, Engine, JobId, JobSpec, NodeId, NodeSpec, Request};
use weir_model::{ClusterConfig, Duration, QueuePath, Resources, Time};

pub struct Env {
    pub engine: Engine,
    pub now: Time,
    /// Decisions not yet asserted on.
    pub log: VecDeque<Decision>,
}

pub fn mem(mib: u64) -> Resources {
    Resources::new(0, mib, 0)
}

pub fn res(cpu: u64, memory: u64) -> Resources {
    Resources::new(cpu, memory, 0)
}

impl Env {
    /// A cluster from a cluster file without nodes; add them with `nodes`.
    pub fn new(yaml: &str) -> Env {
        let cfg = ClusterConfig::from_yaml("test.yaml", yaml).unwrap_or_else(|e| panic!("{e}"));
        Env { engine: Engine::with_config_nodes(cfg).expect("engine"), now: Time::ZERO, log: VecDeque::new() }
    }

    pub fn at(&mut self, secs: u64) -> &mut Self {
        self.now = Time(secs * 1000);
        self
    }

    pub fn advance(&mut self, d: Duration) -> &mut Self {
        self.now = self.now.plus(d);
        self
    }

    pub fn add_node(&mut self, id: u64, r: Resources) {
        self.engine.on_node_added(self.now, NodeSpec::new(NodeId(id), r)).unwrap();
    }

    pub fn add_node_spec(&mut self, spec: NodeSpec) {
        self.engine.on_node_added(self.now, spec).unwrap();
    }

    /// Submit a job with these requests as they are (gangs, walltimes, GPU fractions, selectors).
    pub fn submit_requests(&mut self, id: u64, queue: &str, requests: Vec<Request>) {
        let spec = JobSpec {
            id: JobId(id),
            queue: QueuePath::parse(queue).expect("queue path"),
            user: "alice".to_string(),
            priority: None,
            submit_time: self.now,
            requests,
            has_am: true,
        };
        self.engine.on_job_submitted(self.now, spec).unwrap();
        self.check();
    }

    /// Take every logged container start, as (job, container, node).
    pub fn take_placed(&mut self) -> Vec<(u64, ContainerId, u64)> {
        self.take_starts().into_iter().map(|(j, c, n, _)| (j, c, n.0)).collect()
    }

    pub fn submit(&mut self, id: u64, queue: &str, requests: &[(Resources, u32)]) {
        self.submit_as(id, queue, "alice", None, requests);
    }

    pub fn submit_as(
        &mut self,
        id: u64,
        queue: &str,
        user: &str,
        priority: Option<i32>,
        requests: &[(Resources, u32)],
    ) {
        let spec = JobSpec {
            id: JobId(id),
            queue: QueuePath::parse(queue).expect("queue path"),
            user: user.to_string(),
            priority,
            submit_time: self.now,
            requests: requests.iter().map(|&(r, n)| Request::new(r, n)).collect(),
            has_am: true,
        };
        self.engine.on_job_submitted(self.now, spec).unwrap();
        self.check();
    }

    /// A job without an application master (a live job, a rigid parallel job).
    pub fn submit_without_am(&mut self, id: u64, queue: &str, requests: &[(Resources, u32)]) {
        let spec = JobSpec {
            id: JobId(id),
            queue: QueuePath::parse(queue).expect("queue path"),
            user: "alice".to_string(),
            priority: None,
            submit_time: self.now,
            requests: requests.iter().map(|&(r, n)| Request::new(r, n)).collect(),
            has_am: false,
        };
        self.engine.on_job_submitted(self.now, spec).unwrap();
        self.check();
    }

    pub fn request(&mut self, id: u64, requests: &[(Resources, u32)]) {
        let reqs = requests.iter().map(|&(r, n)| Request::new(r, n)).collect();
        self.engine.on_requests_added(self.now, JobId(id), reqs).unwrap();
        self.check();
    }

    /// Ask again for a job's application master (after its AM container was lost).
    pub fn request_am(&mut self, id: u64, r: Resources) {
        self.engine.on_requests_added(self.now, JobId(id), vec![Request::new(r, 1).as_am()]).unwrap();
        self.check();
    }

    /// Nodes reserved now, as (node, job).
    pub fn reserved(&self) -> Vec<(u64, u64)> {
        self.engine.reserved_nodes().into_iter().map(|(n, j)| (n.0, j.0)).collect()
    }

    /// Take every logged container start, as (job, resources, am).
    pub fn take_starts_am(&mut self) -> Vec<(u64, Resources, bool)> {
        let mut out = Vec::new();
        self.log.retain(|d| match d {
            Decision::StartContainer { job, resources, am, .. } => {
                out.push((job.0, *resources, *am));
                false
            }
            _ => true,
        });
        out
    }

    pub fn finish_container(&mut self, c: ContainerId) {
        self.engine.on_container_finished(self.now, c).unwrap();
        self.check();
    }

    pub fn finish_job(&mut self, id: u64) {
        self.engine.on_job_finished(self.now, JobId(id)).unwrap();
        self.check();
    }

    /// One scheduling pass; its decisions join the log.
    pub fn schedule(&mut self) -> &mut Self {
        let d = self.engine.schedule(self.now);
        self.log.extend(d);
        self.check();
        self
    }

    fn check(&self) {
        if let Err(e) = self.engine.check_invariants() {
            panic!("invariant broken at {}: {e}", self.now);
        }
    }

    /// Take every logged `JobRunnable`, returning the job ids in order.
    pub fn take_runnable(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        self.log.retain(|d| match d {
            Decision::JobRunnable { job } => {
                out.push(job.0);
                false
            }
            _ => true,
        });
        out
    }

    /// Take every logged container start, as (job, container, node, resources).
    pub fn take_starts(&mut self) -> Vec<(u64, ContainerId, NodeId, Resources)> {
        let mut out = Vec::new();
        self.log.retain(|d| match d {
            Decision::StartContainer { container, job, node, resources, .. } => {
                out.push((job.0, *container, *node, *resources));
                false
            }
            _ => true,
        });
        out
    }

    /// Take starts and count them per job.
    pub fn count_starts(&mut self, job: u64) -> usize {
        let starts = self.take_starts();
        let n = starts.iter().filter(|s| s.0 == job).count();
        let rest: Vec<_> = starts.into_iter().filter(|s| s.0 != job).collect();
        for (j, c, node, r) in rest.into_iter().rev() {
            self.log.push_front(Decision::StartContainer {
                container: c,
                job: JobId(j),
                node,
                resources: r,
                tag: 0,
                am: false,
            });
        }
        n
    }

    /// Take every logged preemption mark, as (victim job, container).
    pub fn take_preempts(&mut self) -> Vec<(u64, ContainerId)> {
        let mut out = Vec::new();
        self.log.retain(|d| match d {
            Decision::PreemptContainer { container, job, .. } => {
                out.push((job.0, *container));
                false
            }
            _ => true,
        });
        out
    }

    pub fn take_kills(&mut self) -> Vec<(u64, ContainerId)> {
        let mut out = Vec::new();
        self.log.retain(|d| match d {
            Decision::KillContainer { container, job, .. } => {
                out.push((job.0, *container));
                false
            }
            _ => true,
        });
        out
    }

    /// "And nothing else happened."
    pub fn nothing_else(&mut self) {
        assert!(self.log.is_empty(), "unexpected decisions: {:#?}", self.log);
    }

    pub fn usage(&self, queue: &str) -> Resources {
        self.snapshot(queue).usage
    }

    pub fn snapshot(&self, queue: &str) -> weir_engine::QueueSnapshot {
        let path = QueuePath::parse(queue).expect("path");
        self.engine
            .queues()
            .into_iter()
            .find(|q| q.queue == path)
            .unwrap_or_else(|| panic!("no queue {queue}"))
    }

    pub fn explain(&self, job: u64) -> String {
        self.engine.explain(JobId(job)).expect("job").to_string()
    }
}
