//! The live queue tree, nodes and the pending jobs' explanations, as the engine actor publishes them
//! (about once a second, in parts) for the service layer to read without touching the engine.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use weir_api::{ClusterQueues, NodeInfo, QueueInfo, Resources as WireResources};
use weir_engine::Engine;
use weir_model::Resources;

/// What a worker publishes for one cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub queues: Option<ClusterQueues>,
    /// `run/job` → the engine's explanation, for jobs in the engine without all they want.
    pub explanations: BTreeMap<String, String>,
    /// Every live node and its allocation (absent in snapshots from before nodes were
    /// published).
    #[serde(default)]
    pub nodes: Vec<NodeInfo>,
}

pub fn wire(r: Resources) -> WireResources {
    WireResources { cpu: r.cpu, memory: r.memory, gpu: r.gpu }
}

/// Every live node as the engine sees it now, in the order they were added.
/// `name_of`: the target's name for a node, for clusters whose nodes come from their backend.
pub fn nodes(engine: &Engine, name_of: impl Fn(weir_engine::NodeId) -> Option<String>) -> Vec<NodeInfo> {
    engine
        .nodes()
        .into_iter()
        .map(|n| {
            let free = n.capacity.saturating_sub(&n.used);
            let state = if n.marked != Resources::ZERO {
                "preempting"
            } else if free.cpu == 0 || free.memory == 0 {
                "full"
            } else {
                "running"
            };
            NodeInfo {
                id: n.id.to_string(),
                name: name_of(n.id),
                label: n.label,
                state: state.to_string(),
                capacity: wire(n.capacity),
                used: wire(n.used),
                free: wire(free),
                containers: n.containers,
                marked: wire(n.marked),
                gpu_model: n.gpu_model,
            }
        })
        .collect()
}

/// The queue tree as the engine sees it now.
pub fn queues(cluster: &str, engine: &Engine, now_ms: i64) -> ClusterQueues {
    let config = engine.config();
    let queues = engine
        .queues()
        .into_iter()
        .map(|q| {
            let tier = config.find(&q.queue).and_then(|i| config.queues[i].tier);
            QueueInfo {
                path: q.queue.to_string(),
                leaf: q.leaf,
                tier,
                weight: q.weight,
                min: wire(q.min),
                max: wire(q.max),
                max_running_apps: q.max_running_apps,
                usage: wire(q.usage),
                demand: wire(q.demand),
                steady_fair_share: wire(q.steady),
                instantaneous_fair_share: wire(q.instantaneous),
                running_apps: q.running_apps,
                pending_apps: q.waiting_apps,
            }
        })
        .collect();
    ClusterQueues {
        cluster: cluster.to_string(),
        as_of_ms: Some(now_ms),
        total: wire(engine.cluster_total()),
        used: wire(engine.cluster_used()),
        queues,
    }
}

/// One cluster's snapshot as this process's engine actor last published it, in parts: each
/// part is shared (`Arc`) and keeps its version while it does not change, so a publication that
/// changed only the queues shares the previous node list, and a reader takes what it needs
/// without parsing anything.
#[derive(Clone, Debug)]
pub struct Published {
    /// When it was taken (the store row's `taken_ms`).
    pub taken_ms: i64,
    /// The queue tree's `as_of_ms`: `taken_ms` for a snapshot published in this process.
    pub as_of_ms: Option<i64>,
    /// `None` only in a stored snapshot without a tree.
    pub queues: Part<Option<QueueTree>>,
    pub nodes: Part<Vec<NodeInfo>>,
    pub explanations: Part<BTreeMap<String, String>>,
}

/// A part of a [`Published`] snapshot and the publication number it last changed at.
#[derive(Debug)]
pub struct Part<T> {
    pub version: u64,
    pub value: Arc<T>,
}

impl<T> Clone for Part<T> {
    fn clone(&self) -> Part<T> {
        Part { version: self.version, value: self.value.clone() }
    }
}

/// The queue tree without its time stamp (that is the publication's), and each queue's place
/// in it by path.
#[derive(Debug)]
pub struct QueueTree {
    /// `as_of_ms` is `None` here: readers set it from [`Published::taken_ms`].
    pub tree: ClusterQueues,
    pub index: HashMap<String, usize>,
}

impl QueueTree {
    pub fn new(tree: ClusterQueues) -> QueueTree {
        let index = tree.queues.iter().enumerate().map(|(i, q)| (q.path.clone(), i)).collect();
        QueueTree { tree, index }
    }

    pub fn get(&self, path: &str) -> Option<&QueueInfo> {
        self.index.get(path).map(|&i| &self.tree.queues[i])
    }
}

impl Published {
    /// The whole tree, stamped, as `GET /v1/queues` answers it.
    pub fn cluster_queues(&self) -> Option<ClusterQueues> {
        let mut q = Option::as_ref(&*self.queues.value)?.tree.clone();
        q.as_of_ms = self.as_of_ms;
        Some(q)
    }

    /// A snapshot read from the store (every part at version 0).
    pub fn from_snapshot(sn: Snapshot, taken_ms: i64) -> Published {
        let as_of_ms = sn.queues.as_ref().and_then(|q| q.as_of_ms);
        Published {
            taken_ms,
            as_of_ms,
            queues: Part { version: 0, value: Arc::new(sn.queues.map(QueueTree::new)) },
            nodes: Part { version: 0, value: Arc::new(sn.nodes) },
            explanations: Part { version: 0, value: Arc::new(sn.explanations) },
        }
    }
}

/// The snapshots this process's engine actors published, by cluster: the API and the dashboard
/// read them here (no store read, no parse) when this process runs the cluster's actor, and
/// from the store otherwise. An actor removes its cluster's entry when it stops.
#[derive(Debug, Default)]
pub struct SnapshotBoard {
    by_cluster: Mutex<HashMap<String, Arc<Published>>>,
}

impl SnapshotBoard {
    pub fn get(&self, cluster: &str) -> Option<Arc<Published>> {
        self.by_cluster.lock().unwrap_or_else(|e| e.into_inner()).get(cluster).cloned()
    }

    pub fn set(&self, cluster: &str, published: Arc<Published>) {
        self.by_cluster.lock().unwrap_or_else(|e| e.into_inner()).insert(cluster.to_string(), published);
    }

    pub fn remove(&self, cluster: &str) {
        self.by_cluster.lock().unwrap_or_else(|e| e.into_inner()).remove(cluster);
    }
}

/// Which parts a publication changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    pub queues: bool,
    pub nodes: bool,
    pub explanations: bool,
}

/// The actor's side of publication: compares each new part with the last published one, keeps
/// the unchanged ones (and their versions), and puts the result on the board. Building the parts
/// from the engine is the actor's; serializing them and writing the store is [`StoreWriter`]'s,
/// off the actor.
#[derive(Debug, Default)]
pub struct Publisher {
    last: Option<Arc<Published>>,
    /// Publications so far (the version a changed part takes).
    count: u64,
}

impl Publisher {
    /// `queues`' `as_of_ms` is ignored (the stamp is `taken_ms`).
    pub fn publish(
        &mut self,
        taken_ms: i64,
        mut queues: ClusterQueues,
        nodes: Vec<NodeInfo>,
        explanations: BTreeMap<String, String>,
    ) -> (Arc<Published>, Changed) {
        queues.as_of_ms = None;
        self.count += 1;
        let v = self.count;
        let mut changed = Changed::default();
        let next = match &self.last {
            None => {
                changed = Changed { queues: true, nodes: true, explanations: true };
                Published {
                    taken_ms,
                    as_of_ms: Some(taken_ms),
                    queues: Part { version: v, value: Arc::new(Some(QueueTree::new(queues))) },
                    nodes: Part { version: v, value: Arc::new(nodes) },
                    explanations: Part { version: v, value: Arc::new(explanations) },
                }
            }
            Some(last) => Published {
                taken_ms,
                as_of_ms: Some(taken_ms),
                queues: if Option::as_ref(&*last.queues.value).is_some_and(|t| t.tree == queues) {
                    last.queues.clone()
                } else {
                    changed.queues = true;
                    Part { version: v, value: Arc::new(Some(QueueTree::new(queues))) }
                },
                nodes: if *last.nodes.value == nodes {
                    last.nodes.clone()
                } else {
                    changed.nodes = true;
                    Part { version: v, value: Arc::new(nodes) }
                },
                explanations: if *last.explanations.value == explanations {
                    last.explanations.clone()
                } else {
                    changed.explanations = true;
                    Part { version: v, value: Arc::new(explanations) }
                },
            },
        };
        let next = Arc::new(next);
        self.last = Some(next.clone());
        (next, changed)
    }
}

/// The store row's body from the parts, each serialized once per version and kept: a
/// publication that changed only the queues serializes only the queues.
#[derive(Default)]
pub struct BodyCache {
    queues: Option<(u64, String)>,
    nodes: Option<(u64, String)>,
    explanations: Option<(u64, String)>,
}

impl BodyCache {
    pub fn body(&mut self, p: &Published) -> String {
        fn refresh<T: Serialize>(slot: &mut Option<(u64, String)>, version: u64, value: &T) {
            if slot.as_ref().is_none_or(|(v, _)| *v != version) {
                *slot = Some((version, serde_json::to_string(value).unwrap_or_default()));
            }
        }
        fn text(slot: &Option<(u64, String)>) -> &str {
            slot.as_ref().map_or("", |(_, s)| s.as_str())
        }
        // The tree is serialized without `as_of_ms` (skipped when absent) and stamped here: an
        // object's first key is as good as any other to a reader.
        refresh(&mut self.queues, p.queues.version, &Option::as_ref(&*p.queues.value).map(|t| &t.tree));
        refresh(&mut self.nodes, p.nodes.version, &*p.nodes.value);
        refresh(&mut self.explanations, p.explanations.version, &*p.explanations.value);
        let tree = text(&self.queues);
        format!(
            "{{\"queues\":{{\"as_of_ms\":{},{},\"explanations\":{},\"nodes\":{}}}",
            p.taken_ms,
            tree.strip_prefix('{').unwrap_or(tree),
            text(&self.explanations),
            text(&self.nodes),
        )
    }
}

#[cfg(test)]
mod tests {
    use weir_engine::{JobId, JobSpec, Request};
    use weir_model::{ClusterConfig, QueuePath, Time};

    use super::*;

    /// One node of 4 cores and 4 GiB; two leaves.
    fn engine() -> Engine {
        let config = ClusterConfig::from_yaml(
            "test.yaml",
            "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 4096}}\nqueues:\n  - name: a\n  - name: b\n",
        )
        .expect("config");
        Engine::with_config_nodes(config).expect("engine")
    }

    /// A job of `n` containers of one core and 1 GiB in `queue`.
    fn submit(engine: &mut Engine, id: u64, queue: &str, n: u32, at: u64) {
        let spec = JobSpec {
            id: JobId(id),
            queue: QueuePath::parse(queue).expect("queue"),
            user: "u".into(),
            priority: None,
            submit_time: Time(at),
            requests: vec![Request::new(Resources { cpu: 1000, memory: 1024, gpu: 0 }, n)],
            has_am: false,
        };
        engine.on_job_submitted(Time(at), spec).expect("submit");
    }

    fn publish(p: &mut Publisher, engine: &Engine, at: i64) -> (Arc<Published>, Changed) {
        p.publish(at, queues("default", engine, at), nodes(engine, |_| None), BTreeMap::new())
    }

    /// What a store reader parses equals what this process's readers are given.
    fn check_body(cache: &mut BodyCache, p: &Published) {
        let body = cache.body(p);
        let parsed: Snapshot = serde_json::from_str(&body).expect("the body parses");
        assert_eq!(parsed.queues, p.cluster_queues());
        assert_eq!(parsed.queues.as_ref().and_then(|q| q.as_of_ms), Some(p.taken_ms));
        assert_eq!(parsed.nodes, *p.nodes.value);
        assert_eq!(parsed.explanations, *p.explanations.value);
    }

    #[test]
    fn a_changed_part_is_published_again_and_an_unchanged_one_is_shared() {
        let mut engine = engine();
        let mut publisher = Publisher::default();
        let board = SnapshotBoard::default();
        let mut cache = BodyCache::default();

        let (first, changed) = publish(&mut publisher, &engine, 1_000);
        board.set("default", first.clone());
        assert_eq!(changed, Changed { queues: true, nodes: true, explanations: true });
        let a = |p: &Published| Option::as_ref(&*p.queues.value).and_then(|t| t.get("root.a")).cloned();
        assert_eq!(a(&first).expect("root.a").usage.cpu, 0);
        check_body(&mut cache, &first);

        // Nothing happened: nothing is published again, only the stamp moves.
        let (second, changed) = publish(&mut publisher, &engine, 2_000);
        assert_eq!(changed, Changed::default());
        assert_eq!(second.queues.version, first.queues.version);
        assert!(Arc::ptr_eq(&second.nodes.value, &first.nodes.value));
        assert_eq!(second.cluster_queues().and_then(|q| q.as_of_ms), Some(2_000));
        check_body(&mut cache, &second);

        // Two containers start in root.a: its queue and the node change.
        submit(&mut engine, 1, "root.a", 2, 2_500);
        engine.schedule(Time(2_500));
        let (third, changed) = publish(&mut publisher, &engine, 3_000);
        board.set("default", third.clone());
        assert_eq!(changed, Changed { queues: true, nodes: true, explanations: false });
        let seen = board.get("default").expect("on the board");
        assert_eq!(a(&seen).expect("root.a").usage.cpu, 2000);
        assert!(seen.queues.version > first.queues.version);
        assert_eq!(seen.nodes.value[0].used.cpu, 2000);
        check_body(&mut cache, &third);

        // A job submitted and not yet scheduled changes root.b's demand, not the node: the
        // node list keeps its version and is not copied.
        let b = |p: &Published| Option::as_ref(&*p.queues.value).and_then(|t| t.get("root.b")).cloned();
        submit(&mut engine, 2, "root.b", 1, 3_500);
        let (fourth, changed) = publish(&mut publisher, &engine, 4_000);
        assert_eq!(changed, Changed { queues: true, nodes: false, explanations: false });
        assert_eq!(fourth.nodes.version, third.nodes.version);
        assert!(Arc::ptr_eq(&fourth.nodes.value, &third.nodes.value));
        assert_ne!(b(&fourth), b(&third));
        assert_eq!(b(&fourth).expect("root.b").demand.cpu, 1000);
        check_body(&mut cache, &fourth);

        // Only an explanation changes: only that part is new.
        let why = BTreeMap::from([("7/0".to_string(), "waits for root.b's share".to_string())]);
        let (fifth, changed) =
            publisher.publish(5_000, queues("default", &engine, 5_000), nodes(&engine, |_| None), why);
        assert_eq!(changed, Changed { queues: false, nodes: false, explanations: true });
        assert!(Arc::ptr_eq(&fifth.queues.value, &fourth.queues.value));
        check_body(&mut cache, &fifth);
    }
}
