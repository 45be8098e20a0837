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
