//! A `nodes: from_backend` cluster's nodes: the engine's nodes are the backend's usable nodes,
//! read when the actor starts and again every so often. A node that is gone, or that the
//! target no longer starts work on (Slurm: down, drained), is a node failure to the engine —
//! its tasks are lost and rescheduled; a node that comes back is added again under the same id.
//!
//! A node that refuses a task pinned to it (Slurm: `Required node not available`, which a node
//! that is listed usable but does not respond yet, just resumed, answers) leaves the engine the
//! same way, until a listing asked for after the refusal shows it usable again: at most one
//! refused start per refresh, never a loop of refused submissions in between.
//!
//! The engine knows nodes by number; the map here keeps each number's name on the target, so
//! that `placement: weir` can pin a task to the node the engine chose (`WEIR_NODE` is the
//! target's name) and a node keeps its number across going and coming back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_backend::{Backend, BackendNode};
use weir_engine::{NodeId, NodeSpec};

/// What the engine counts of the target's nodes, by name.
#[derive(Debug, Default)]
pub(crate) struct NodeMap {
    ids: BTreeMap<String, NodeId>,
    names: HashMap<NodeId, String>,
    /// The nodes the engine counts now.
    up: BTreeMap<String, NodeId>,
    /// Nodes counted once and not now: name → the target's state (`gone` when it is not listed).
    gone: BTreeMap<String, String>,
    /// Nodes that refused a pinned start, with when: a listing asked for before that moment
    /// does not bring them back.
    refused: HashMap<String, Instant>,
}

/// One refresh's changes for the engine.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct NodeChanges {
    /// (engine id, name, the target's state) of nodes to take out.
    pub removed: Vec<(NodeId, String, String)>,
    /// Nodes to add (new ones, or ones that came back).
    pub added: Vec<(NodeSpec, String)>,
}

impl NodeMap {
    /// The engine's name for `id` on the target, when it has one.
    pub fn name(&self, id: NodeId) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// The names the engine counts now, and those it no longer counts (`name (state)`).
    pub fn lists(&self) -> (Vec<String>, Vec<String>) {
        (self.up.keys().cloned().collect(), self.gone.iter().map(|(n, s)| format!("{n} ({s})")).collect())
    }

    /// `name` refused a task pinned to it at `at` (`why`: the target's words): the engine is
    /// to stop counting it — its id when it counted it until now — and only a listing asked
    /// for after `at` can bring it back.
    pub fn refused(&mut self, name: &str, why: &str, at: Instant) -> Option<NodeId> {
        let latest = self.refused.entry(name.to_string()).or_insert(at);
        *latest = (*latest).max(at);
        let id = self.up.remove(name)?;
        self.gone.insert(name.to_string(), format!("refused a pinned start: {why}"));
        Some(id)
    }

    /// Compares the target's list, asked for at `asked`, with what the engine counts.
    pub fn refresh(&mut self, reported: &[BackendNode], asked: Instant) -> NodeChanges {
        let mut changes = NodeChanges::default();
        let listed: BTreeMap<&str, &BackendNode> = reported.iter().map(|n| (n.name.as_str(), n)).collect();
        for (name, &id) in &self.up {
            let state = match listed.get(name.as_str()) {
                Some(n) if n.usable => continue,
                Some(n) => n.state.clone(),
                None => "gone".to_string(),
            };
            changes.removed.push((id, name.clone(), state));
        }
        for (id, name, state) in &changes.removed {
            let _ = id;
            self.up.remove(name);
            self.gone.insert(name.clone(), state.clone());
        }
        // A node that refused a start after this listing was asked for stays out.
        self.refused.retain(|_, at| *at > asked);
        let new: Vec<_> = reported
            .iter()
            .filter(|n| n.usable && !self.up.contains_key(&n.name) && !self.refused.contains_key(&n.name))
            .collect();
        for n in new {
            let next = NodeId(self.ids.len() as u64);
            let id = *self.ids.entry(n.name.clone()).or_insert(next);
            self.names.insert(id, n.name.clone());
            self.up.insert(n.name.clone(), id);
            self.gone.remove(&n.name);
            changes.added.push((NodeSpec::new(id, n.resources), n.name.clone()));
        }
        // Nodes not counted that are listed unusable are shown with the target's state (a drained
        // node at start).
        for n in reported.iter().filter(|n| !n.usable && !self.up.contains_key(&n.name)) {
            self.gone.insert(n.name.clone(), n.state.clone());
        }
        changes
    }
}

/// One reading of the backend's nodes: when it was asked for, and the answer.
pub(crate) type NodeListing = (Instant, Result<Vec<BackendNode>, String>);

/// Reads the backend's nodes every `every` and sends each answer to the actor, until the actor
/// drops the receiver.
pub(super) async fn refresher(
    backend: Arc<dyn Backend>,
    every: Duration,
    out: tokio::sync::mpsc::UnboundedSender<NodeListing>,
) {
    loop {
        tokio::time::sleep(every).await;
        let asked = Instant::now();
        let Some(answer) = backend.nodes().await else { return };
        if out.send((asked, answer)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::Resources;

    fn node(name: &str, usable: bool, state: &str) -> BackendNode {
        BackendNode {
            name: name.into(),
            resources: Resources { cpu: 8000, memory: 4096, gpu: 0 },
            usable,
            state: state.into(),
        }
    }

    #[test]
    fn a_node_that_goes_is_removed_and_comes_back_under_its_number() {
        let mut m = NodeMap::default();
        let t = Instant::now();
        let first =
            m.refresh(&[node("a", true, "idle"), node("b", true, "mixed"), node("c", false, "down")], t);
        let added: Vec<(u64, &str)> = first.added.iter().map(|(s, n)| (s.id.0, n.as_str())).collect();
        assert_eq!(added, [(0, "a"), (1, "b")]);
        assert!(first.removed.is_empty());
        assert_eq!(m.lists(), (vec!["a".into(), "b".into()], vec!["c (down)".into()]));
        // b is drained, a disappears from the listing.
        let second = m.refresh(&[node("b", false, "idle+drain"), node("c", false, "down")], t);
        assert_eq!(
            second.removed,
            [
                (NodeId(0), "a".to_string(), "gone".to_string()),
                (NodeId(1), "b".to_string(), "idle+drain".to_string())
            ]
        );
        assert!(second.added.is_empty());
        assert_eq!(m.lists().1, ["a (gone)", "b (idle+drain)", "c (down)"]);
        // Nothing changed: nothing to do.
        assert_eq!(
            m.refresh(&[node("b", false, "idle+drain"), node("c", false, "down")], t),
            NodeChanges::default()
        );
        // b and c come back; b keeps its number, c gets a new one.
        let third = m.refresh(&[node("b", true, "idle"), node("c", true, "idle")], t);
        let added: Vec<(u64, &str)> = third.added.iter().map(|(s, n)| (s.id.0, n.as_str())).collect();
        assert_eq!(added, [(1, "b"), (2, "c")]);
        assert_eq!(m.name(NodeId(2)), Some("c"));
        assert_eq!(m.lists(), (vec!["b".into(), "c".into()], vec!["a (gone)".into()]));
    }

    /// A node that refused a pinned start leaves at once and comes back only with a listing
    /// asked for after the refusal: a listing already under way when it refused (which may
    /// predate the refusal's cause) does not bring it back, so the engine cannot place there in
    /// a loop between refreshes.
    #[test]
    fn a_node_that_refused_a_start_is_out_until_a_later_listing_shows_it_usable() {
        let mut m = NodeMap::default();
        let t0 = Instant::now();
        m.refresh(&[node("a", true, "idle"), node("b", true, "idle")], t0);
        let asked_before = Instant::now();
        let refused_at = asked_before + Duration::from_millis(5);
        assert_eq!(m.refused("a", "Required node not available", refused_at), Some(NodeId(0)));
        assert_eq!(
            m.lists(),
            (vec!["b".into()], vec!["a (refused a pinned start: Required node not available)".into()])
        );
        // A second refusal of the same node (another start in flight) removes nothing more.
        assert_eq!(m.refused("a", "Required node not available", refused_at), None);
        // A listing asked for before the refusal: a stays out, though listed usable.
        let stale =
            m.refresh(&[node("a", true, "idle+not_responding"), node("b", true, "idle")], asked_before);
        assert_eq!(stale, NodeChanges::default());
        // A later listing that shows it usable brings it back under its number …
        let later = m.refresh(
            &[node("a", true, "idle"), node("b", true, "idle")],
            refused_at + Duration::from_millis(1),
        );
        let added: Vec<(u64, &str)> = later.added.iter().map(|(s, n)| (s.id.0, n.as_str())).collect();
        assert_eq!(added, [(0, "a")]);
        assert_eq!(m.lists(), (vec!["a".into(), "b".into()], vec![]));
        // … and one that shows it drained keeps it out with the target's state.
        m.refused("b", "Required node not available", refused_at + Duration::from_millis(2));
        let drained = m.refresh(
            &[node("a", true, "idle"), node("b", false, "idle+drain")],
            refused_at + Duration::from_millis(3),
        );
        assert_eq!(drained, NodeChanges::default());
        assert_eq!(m.lists().1, ["b (idle+drain)"]);
    }
}
