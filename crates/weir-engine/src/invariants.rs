//! Engine invariants, checked after every step by the tests and in the simulator's debug builds.

use std::collections::BTreeMap;

use weir_model::Resources;

use crate::engine::Engine;
use crate::ids::NodeId;
use crate::state::JobState;

/// One node as the engine sees it now.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSnapshot {
    pub id: NodeId,
    pub capacity: Resources,
    pub used: Resources,
    pub label: Option<String>,
    pub containers: u32,
    /// Resources of containers on it that are marked for preemption.
    pub marked: Resources,
    pub gpu_model: Option<String>,
    /// Thousandths given out on each of its GPUs shared by fractions (GPUs not listed are
    /// wholly free or wholly given out; `used.gpu` counts the latter).
    pub gpu_shared: Vec<u16>,
}

impl Engine {
    /// Every live node, in the order they were added.
    pub fn nodes(&self) -> Vec<NodeSnapshot> {
        self.nodes
            .slots
            .iter()
            .filter(|n| n.alive)
            .map(|n| NodeSnapshot {
                id: n.id,
                capacity: n.capacity,
                used: n.used,
                label: n.label.clone(),
                containers: n.containers,
                marked: n.marked,
                gpu_model: self.nodes.name_of(n.model_id),
                gpu_shared: n.frac.iter().copied().filter(|&m| m > 0).collect(),
            })
            .collect()
    }

    /// Check the bookkeeping: no node over-committed, usage and demand sums agree up the tree,
    /// running-app limits hold. Returns the first broken invariant.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut per_node: BTreeMap<u32, Resources> = BTreeMap::new();
        let mut per_job: BTreeMap<u32, Resources> = BTreeMap::new();
        for e in &self.containers {
            if let Some(c) = &e.container {
                *per_node.entry(c.node).or_default() += c.resources;
                *per_job.entry(c.job).or_default() += c.resources;
            }
        }
        for (slot, n) in self.nodes.slots.iter().enumerate() {
            if !n.alive {
                continue;
            }
            if !n.used.fits_in(&n.capacity) {
                return Err(format!("{} over-committed: {} used of {}", n.id, n.used, n.capacity));
            }
            let sum = per_node.get(&(slot as u32)).copied().unwrap_or_default();
            if sum != n.used {
                return Err(format!("{}: containers hold {sum} but the node counts {}", n.id, n.used));
            }
        }
        self.check_gpus_and_gangs()?;
        self.check_child_sets()?;
        self.check_ready_sets()?;
        self.check_user_tables()?;
        let mut all_pending = Resources::ZERO;
        for (slot, j) in self.jobs.iter().enumerate() {
            let Some(j) = j else { continue };
            all_pending += j.pending;
            for &n in &j.reservations {
                if self.nodes.slots[n as usize].held_for() != Some(slot as u32) {
                    return Err(format!("{} lists node slot {n} as held for it, but the node is not", j.id));
                }
            }
        }
        let mut holders = vec![0u32; self.queues.len()];
        for j in self.jobs.iter().flatten() {
            holders[j.leaf as usize] += u32::from(!j.reservations.is_empty());
        }
        if let Some((q, _)) = self.queues.iter().zip(&holders).find(|(q, &h)| q.holders != h) {
            return Err(format!("{}: {} jobs counted as holding nodes", q.path, q.holders));
        }
        if all_pending != self.total_pending {
            return Err(format!(
                "jobs want {all_pending} in all but the engine counts {}",
                self.total_pending
            ));
        }
        let reserved = self
            .nodes
            .reserved
            .iter()
            .filter(|&&n| self.hold_kind(n) == Some(crate::nodes::Hold::Reserved))
            .count();
        if reserved as u64 != self.reservation_counts.active {
            return Err(format!("{reserved} nodes reserved but {} counted", self.reservation_counts.active));
        }
        for &n in &self.nodes.reserved {
            let node = &self.nodes.slots[n as usize];
            let Some(job) = node.held_for() else {
                return Err(format!("{} is listed as held but is not", node.id));
            };
            if !self
                .jobs
                .get(job as usize)
                .and_then(|j| j.as_ref())
                .is_some_and(|j| j.reservations.contains(&n))
            {
                return Err(format!("{} is held for job slot {job}, which does not list it", node.id));
            }
        }
        let mut usage = vec![Resources::ZERO; self.queues.len()];
        let mut pending = vec![Resources::ZERO; self.queues.len()];
        let mut running = vec![0u32; self.queues.len()];
        for (slot, j) in self.jobs.iter().enumerate() {
            let Some(j) = j else { continue };
            let held = per_job.get(&(slot as u32)).copied().unwrap_or_default();
            if held != j.usage {
                return Err(format!("{}: containers hold {held} but the job counts {}", j.id, j.usage));
            }
            for q in self.path_up(j.leaf) {
                usage[q as usize] += j.usage;
                if j.state == JobState::Runnable {
                    pending[q as usize] += j.pending;
                    running[q as usize] += 1;
                }
            }
        }
        for (i, q) in self.queues.iter().enumerate() {
            if q.usage != usage[i] {
                return Err(format!("{}: usage {} but its jobs hold {}", q.path, q.usage, usage[i]));
            }
            if q.pending != pending[i] {
                return Err(format!(
                    "{}: pending {} but its runnable jobs want {}",
                    q.path, q.pending, pending[i]
                ));
            }
            if q.running_apps != running[i] {
                return Err(format!(
                    "{}: {} running apps counted, {} found",
                    q.path, q.running_apps, running[i]
                ));
            }
            if let Some(m) = q.max_running_apps {
                if q.running_apps > m {
                    return Err(format!(
                        "{}: {} running apps over max_running_apps {m}",
                        q.path, q.running_apps
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Engine {
    /// No GPU over-committed (fractions on one GPU sum to at most a whole one, and whole GPUs
    /// plus GPUs shared by fractions fit the node), every container on a node its selector
    /// allows, and no gang partly running: a gang with a running container has no pending
    /// container and no placeholder left.
    fn check_gpus_and_gangs(&self) -> Result<(), String> {
        let mut frac: BTreeMap<(u32, u16), u64> = BTreeMap::new();
        let mut gangs: BTreeMap<(u32, u32), (u32, u32)> = BTreeMap::new();
        for c in self.containers.iter().filter_map(|e| e.container.as_ref()) {
            if c.gpu_milli > 0 {
                *frac.entry((c.node, c.gpu)).or_default() += u64::from(c.gpu_milli);
            }
            if !self.nodes.may_hold(c.node, c.selector) {
                return Err(format!(
                    "{} runs on {}, which its selector does not allow",
                    c.id, self.nodes.slots[c.node as usize].id
                ));
            }
            if c.gang != 0 {
                let e = gangs.entry((c.job, c.gang)).or_default();
                if c.placeholder {
                    e.1 += 1;
                } else {
                    e.0 += 1;
                }
            }
        }
        for (slot, n) in self.nodes.slots.iter().enumerate() {
            if !n.alive {
                continue;
            }
            for (g, &used) in n.frac.iter().enumerate() {
                let sum = frac.get(&(slot as u32, g as u16)).copied().unwrap_or(0);
                if sum != u64::from(used) || used > 1000 {
                    return Err(format!(
                        "{}: GPU {g} holds {sum} thousandths of fractions but counts {used}",
                        n.id
                    ));
                }
            }
            let shared = n.frac.iter().filter(|&&u| u > 0).count() as u64;
            if shared != n.frac_gpus || n.used.gpu + n.frac_gpus > n.capacity.gpu {
                return Err(format!(
                    "{}: {} whole GPUs and {} shared ones on {} GPUs",
                    n.id, n.used.gpu, n.frac_gpus, n.capacity.gpu
                ));
            }
        }
        for ((job, gang), (running, held)) in gangs {
            let Some(j) = self.jobs.get(job as usize).and_then(|j| j.as_ref()) else { continue };
            let pending = j.requests.iter().any(|r| r.gang == gang && r.count > 0);
            if running > 0 && (held > 0 || pending) {
                return Err(format!(
                    "{}: gang {gang} is partly running ({running} running, {held} placeholders, pending: {pending})",
                    j.id
                ));
            }
            if held as usize
                != j.placeholders
                    .iter()
                    .filter(|&&(p, _)| self.container(p).is_some_and(|c| c.gang == gang))
                    .count()
            {
                return Err(format!("{}: gang {gang} placeholders are not all listed", j.id));
            }
        }
        Ok(())
    }
}
