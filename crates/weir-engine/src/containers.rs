//! Containers coming into being: a job's request turned into a container on a node whose room
//! is already allocated, with the job's, the queues' and the pending counts following; and a
//! gang's placeholders announced as the containers they held room for.

use weir_model::Backfill;

use crate::decision::Decision;
use crate::engine::Engine;
use crate::ids::ContainerId;
use crate::input::Request;
use crate::nodes::Hold;
use crate::state::{Container, JobSlot, NodeSlot};

impl Engine {
    /// Record a container of the job's `index`-th request on `node`, whose room the caller
    /// allocated (a GPU fraction on GPU slot `gpu`). A real container is announced to the host;
    /// a placeholder (`gang.rs`) only holds the room.
    pub(crate) fn add_container(
        &mut self,
        job: JobSlot,
        index: usize,
        node: NodeSlot,
        gpu: u16,
        am: bool,
        placeholder: bool,
    ) -> ContainerId {
        let seq = self.next_seq;
        self.next_seq += 1;
        let Some(request) = self.job(job).requests.get(index).copied() else {
            return ContainerId(u64::MAX);
        };
        let r = request.resources;
        let now = self.now;
        let expected_end = (!placeholder).then(|| request.walltime.map(|w| now.plus(w))).flatten();
        let id = self.new_container(|id| Container {
            id,
            job,
            node,
            resources: r,
            am,
            seq,
            preemption: None,
            gang: request.gang,
            gpu_milli: request.gpu_milli,
            selector: request.selector,
            gpu,
            placeholder,
            expected_end,
        });
        if self.nodes.slots[node as usize].hold == Some((job, Hold::Reserved)) && !placeholder {
            // FSAppAttempt.assignContainer: an allocation on a reserved node ends the reservation.
            self.release_hold(node, job, true);
        }
        let j = self.job_mut(job);
        if let Some(f) = j.requests.get_mut(index) {
            f.count -= 1;
            if f.count == 0 {
                j.requests.remove(index);
            }
        }
        j.pending -= r;
        j.pending_containers -= 1;
        j.usage += r;
        j.am_started = true;
        j.am_running |= am;
        if j.containers.is_empty() {
            // Room for what it asks now (this one and those pending), not grown one by one.
            j.containers.reserve(1 + j.pending_containers as usize);
        }
        j.containers.insert((seq, id));
        if placeholder {
            j.placeholders.push((id, Request { count: 1, ..request }));
        }
        let (leaf, first) = (j.leaf, j.containers.len() == 1);
        if placeholder {
            self.placeholder_room += r;
        }
        if first {
            self.queues[leaf as usize].holding.insert(job);
        }
        self.total_pending -= r;
        let mut q = Some(leaf);
        while let Some(ix) = q {
            let queue = &mut self.queues[ix as usize];
            queue.usage += r;
            queue.pending -= r;
            queue.pending_containers -= 1;
            q = queue.parent;
        }
        self.rekey_path(leaf);
        if am {
            self.queues[leaf as usize].am_usage += r;
        }
        if self.capacity_mode() {
            self.charge_label(job, node, r.memory, true);
        }
        self.touched(job);
        if !placeholder {
            self.announce(id, request.tag);
        }
        id
    }

    /// A placeholder becomes the container it held room for (`request`, from its job's
    /// `placeholders`).
    pub(crate) fn start_placeholder(&mut self, id: ContainerId, request: &Request) {
        let now = self.now;
        let Some(c) = self.containers[id.slot()].container.as_mut() else { return };
        c.placeholder = false;
        c.expected_end = request.walltime.map(|w| now.plus(w));
        let r = c.resources;
        self.placeholder_room -= r;
        self.announce(id, request.tag);
    }

    /// Tell the host a container started (its request's `tag`), and note when it is expected
    /// to end.
    fn announce(&mut self, id: ContainerId, tag: u64) {
        let Some(c) = self.containers[id.slot()].container.as_ref() else { return };
        let (job, node, resources, am, end) = (c.job, c.node, c.resources, c.am, c.expected_end);
        if let (Some(end), Backfill::Easy | Backfill::Conservative) = (end, self.config.scheduler.backfill) {
            self.ends.insert((end, id));
        }
        for b in &mut self.bookings {
            b.take(node, &resources, end);
        }
        if let Some(shadow) = self.shadow.as_mut() {
            shadow.take(node, &resources, end);
        }
        let job_id = self.job(job).id;
        let node_id = self.nodes.slots[node as usize].id;
        self.decisions.push(Decision::StartContainer {
            container: id,
            job: job_id,
            node: node_id,
            resources,
            tag,
            am,
        });
    }
}
