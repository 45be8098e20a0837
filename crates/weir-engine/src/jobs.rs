//! The job and container input handlers: requests (normalized, and refused when their demand
//! could not be counted exactly), container ends, job ends. Every change to a job's usage or
//! demand goes through `touched` (`ready.rs`).

use weir_model::{Resources, Time};

use crate::engine::{checked_add, largest, ContainerEntry, Engine, Starver};
use crate::error::EngineError;
use crate::ids::{ContainerId, JobId};
use crate::input::Request;
use crate::state::{Container, JobSlot, JobState, QueueIx};

impl Engine {
    pub fn on_requests_added(
        &mut self,
        now: Time,
        job: JobId,
        requests: Vec<Request>,
    ) -> Result<(), EngineError> {
        self.advance(now)?;
        let slot = self.slot_of(job)?;
        let requests = self.normalize(job, requests)?;
        let requests =
            self.capacity_labels(self.job(slot).leaf, requests).map_err(|_| EngineError::InvalidRequest {
                job,
                problem: "a node label its queue may not use (the leaf's accessible_labels)",
            })?;
        self.add_requests(slot, requests);
        Ok(())
    }

    /// Requests as the scheduler sees them (minimum allocation, increment), refused if their
    /// demand, added to every job's, could not be counted exactly.
    pub(crate) fn normalize(&self, job: JobId, requests: Vec<Request>) -> Result<Vec<Request>, EngineError> {
        for r in &requests {
            if r.resources.is_zero() && r.gpu_milli == 0 {
                return Err(EngineError::EmptyRequest { job });
            }
            let problem = if r.gpu_milli >= crate::nodes::GPU_MILLI {
                Some("a GPU fraction is 1 to 999 thousandths; ask for whole GPUs as resources.gpu")
            } else if r.gpu_milli > 0 && r.resources.gpu > 0 {
                Some("whole GPUs and a GPU fraction in one container")
            } else if !self.nodes.knows_selector(r.selector) {
                Some("a selector the engine never registered (Engine::selector)")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(EngineError::InvalidRequest { job, problem });
            }
        }
        let scheduler = &self.config.scheduler;
        let normalized: Vec<Request> = requests
            .into_iter()
            .filter(|r| r.count > 0)
            .map(|r| Request { resources: scheduler.normalize(&r.resources), ..r })
            .collect();
        let total = normalized.iter().try_fold(self.total_pending, |t, r| {
            let mut many = Resources::ZERO;
            for k in weir_model::ResourceKind::ALL {
                many.set(k, r.resources.get(k).checked_mul(u64::from(r.count))?);
            }
            checked_add(&t, &many)
        });
        match total {
            Some(t) if largest(&t) < u64::MAX => Ok(normalized),
            _ => Err(EngineError::DemandOverflow { job }),
        }
    }

    pub(crate) fn add_requests(&mut self, slot: JobSlot, requests: Vec<Request>) {
        let mut added = Resources::ZERO;
        let mut count = 0u64;
        let j = self.job_mut(slot);
        for r in requests {
            // `normalize` checked that these sums fit.
            added += r.resources.times(r.count as u64);
            count += r.count as u64;
            if r.am && !j.am_running {
                // A job without a live AM asks for one before anything else.
                j.requests.push_front(r);
            } else {
                j.requests.push_back(r);
            }
        }
        j.pending += added;
        j.pending_containers += count;
        let (leaf, runnable) = (j.leaf, j.state == JobState::Runnable);
        self.total_pending += added;
        if runnable {
            self.change_pending(leaf, added, count, true);
            self.touched(slot);
        }
    }

    /// Put requests back at the front of the job's queue (placeholders given back), merged into
    /// an equal request where there is one.
    pub(crate) fn add_requests_front(&mut self, slot: JobSlot, requests: Vec<Request>) {
        let mut added = Resources::ZERO;
        let mut count = 0u64;
        let j = self.job_mut(slot);
        for r in requests {
            added += r.resources.times(u64::from(r.count));
            count += u64::from(r.count);
            match j.requests.iter_mut().find(|x| Request { count: r.count, ..**x } == r) {
                Some(x) => x.count += r.count,
                None => j.requests.push_front(r),
            }
        }
        j.pending += added;
        j.pending_containers += count;
        let (leaf, runnable) = (j.leaf, j.state == JobState::Runnable);
        self.total_pending += added;
        if runnable {
            self.change_pending(leaf, added, count, true);
        }
        self.touched(slot);
    }

    /// Add (or remove) pending demand on a leaf and its ancestors.
    pub(crate) fn change_pending(&mut self, leaf: QueueIx, r: Resources, count: u64, add: bool) {
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            if add {
                queue.pending += r;
                queue.pending_containers += count;
            } else {
                queue.pending -= r;
                queue.pending_containers -= count;
            }
            q = queue.parent;
        }
        self.rekey_path(leaf);
    }

    pub fn on_requests_cleared(&mut self, now: Time, job: JobId) -> Result<(), EngineError> {
        self.advance(now)?;
        let slot = self.slot_of(job)?;
        self.clear_requests(slot);
        Ok(())
    }

    pub(crate) fn clear_requests(&mut self, slot: JobSlot) {
        // Room held for a gang it no longer wants goes back (and is not asked for again).
        for (id, _) in std::mem::take(&mut self.job_mut(slot).placeholders) {
            self.release_container(id);
        }
        let j = self.job_mut(slot);
        j.gang_since = None;
        j.gang_deadline = None;
        let (r, n) = (j.pending, j.pending_containers);
        self.total_pending -= r;
        let j = self.job_mut(slot);
        j.requests.clear();
        j.pending = Resources::ZERO;
        j.pending_containers = 0;
        let (leaf, runnable) = (j.leaf, j.state == JobState::Runnable);
        if runnable {
            self.change_pending(leaf, r, n, false);
            self.touched(slot);
        }
        self.drop_reservations(slot);
    }

    pub fn on_container_finished(&mut self, now: Time, container: ContainerId) -> Result<(), EngineError> {
        self.advance(now)?;
        if self.container(container).is_none() {
            return Err(EngineError::UnknownContainer { container });
        }
        self.release_container(container);
        Ok(())
    }

    pub(crate) fn container(&self, id: ContainerId) -> Option<&Container> {
        let e = self.containers.get(id.slot())?;
        if e.generation != id.generation() {
            return None;
        }
        e.container.as_ref()
    }

    pub(crate) fn new_container(&mut self, make: impl FnOnce(ContainerId) -> Container) -> ContainerId {
        let slot = match self.free_containers.pop() {
            Some(s) => s,
            None => {
                self.containers.push(ContainerEntry::default());
                (self.containers.len() - 1) as u32
            }
        };
        let e = &mut self.containers[slot as usize];
        let id = ContainerId::new(slot, e.generation);
        e.container = Some(make(id));
        id
    }

    /// Give a container's resources back everywhere: node, job, queues, preemption bookkeeping.
    pub(crate) fn release_container(&mut self, id: ContainerId) -> Option<Container> {
        let e = &mut self.containers[id.slot()];
        let c = e.container.take()?;
        e.generation = e.generation.wrapping_add(1);
        self.free_containers.push(id.slot() as u32);
        self.nodes.release(c.node, &c.ask(), c.gpu);
        if c.placeholder {
            self.placeholder_room -= c.resources;
        }
        if let Some(end) = c.expected_end {
            self.ends.remove(&(end, id));
        }
        if let Some(m) = &c.preemption {
            self.nodes.slots[c.node as usize].marked -= c.resources;
            if let Some(j) = self.jobs[m.for_job as usize].as_mut() {
                j.incoming -= c.resources;
            }
        }
        let (leaf, am) = {
            let j = self.job_mut(c.job);
            j.usage -= c.resources;
            j.containers.remove(&(c.seq, c.id));
            if c.preemption.is_some() {
                j.outgoing -= c.resources;
            }
            if c.am {
                // Its next AM request, if the host makes one, is served and checked as an AM.
                j.am_running = false;
            }
            if c.placeholder {
                j.placeholders.retain(|&(p, _)| p != c.id);
            }
            (j.leaf, c.am)
        };
        if self.job(c.job).containers.is_empty() {
            self.queues[leaf as usize].holding.remove(&c.job);
        }
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            queue.usage -= c.resources;
            q = queue.parent;
        }
        self.rekey_path_later(leaf);
        if am {
            self.queues[leaf as usize].am_usage -= c.resources;
        }
        if self.capacity_mode() {
            self.charge_label(c.job, c.node, c.resources.memory, false);
        }
        self.touched(c.job);
        Some(c)
    }

    pub fn on_job_finished(&mut self, now: Time, job: JobId) -> Result<(), EngineError> {
        self.advance(now)?;
        let slot = self.slot_of(job)?;
        let held: Vec<ContainerId> = self.job(slot).containers.iter().map(|&(_, c)| c).collect();
        for c in held {
            self.release_container(c);
        }
        self.clear_requests(slot);
        self.leave(slot);
        self.unready(slot);
        // Preemption on this job's behalf stops: its victims keep running.
        let preempting_for_it = !self.job(slot).incoming.is_zero();
        for e in self.containers.iter_mut().filter(|_| preempting_for_it) {
            if let Some(c) = e.container.as_mut() {
                if c.preemption.as_ref().is_some_and(|m| m.for_job == slot) {
                    let r = c.resources;
                    c.preemption = None;
                    self.nodes.slots[c.node as usize].marked -= r;
                    if let Some(j) = self.jobs[c.job as usize].as_mut() {
                        j.outgoing -= r;
                    }
                }
            }
        }
        self.job_by_id.remove(&job);
        self.starvation_dirty.remove(&slot);
        self.starved.remove(&Starver::Job(slot));
        self.guarantees.jobs.remove(&slot);
        self.jobs[slot as usize] = None;
        self.free_jobs.push(slot);
        Ok(())
    }
}
