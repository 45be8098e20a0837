//! The YARN Capacity Scheduler's rules for `capacity-scheduler.xml` (Hadoop trunk,
//! `CapacitySchedulerConfiguration` property names; `ParentQueue`/`AbstractCSQueue` checks:
//! children's capacities sum to 100, absolute capacity ≤ absolute maximum capacity
//! (`CSQueueUtils.capacitiesSanityCheck`: "the only thing we should care about is absolute
//! capacity"); priorities matter only under
//! the parent's `priority-utilization` ordering; before Hadoop 3.3 leaf names are unique
//! (YARN-9879) and there is no `max-parallel-apps` (YARN-9930)).

use std::collections::{BTreeMap, BTreeSet};

use super::xml::parse;

const PREFIX: &str = "yarn.scheduler.capacity.";
const QUEUE_KEYS: &[&str] = &[
    "queues",
    "capacity",
    "maximum-capacity",
    "max-parallel-apps",
    "maximum-am-resource-percent",
    "ordering-policy",
    "priority",
    "disable_preemption",
    "acl_submit_applications",
    "acl_administer_queue",
    "reservable",
    "user-limit-factor",
    "minimum-user-limit-percent",
    "maximum-applications",
    "state",
];

pub fn check(text: &str, hadoop: (u32, u32)) -> Vec<String> {
    let mut v = Vec::new();
    let root = match parse(text) {
        Ok(r) => r,
        Err(e) => return vec![format!("not well-formed XML: {e}")],
    };
    if root.name != "configuration" {
        v.push(format!("the document element is <{}>, not <configuration>", root.name));
    }
    let mut props: BTreeMap<String, String> = BTreeMap::new();
    for p in root.children.iter().filter(|c| c.name == "property") {
        let name = p.child("name").map(|n| n.text.trim().to_string()).unwrap_or_default();
        let value = p.child("value").map(|n| n.text.clone()).unwrap_or_default();
        if props.insert(name.clone(), value).is_some() {
            v.push(format!("{name} is set twice"));
        }
    }
    let modern = hadoop >= (3, 3);
    // The tree, from root.queues down.
    let mut queues: Vec<String> = vec!["root".into()];
    // Absolute capacity and absolute maximum capacity, as fractions of the cluster.
    let mut abs: BTreeMap<String, (f64, f64)> = BTreeMap::from([("root".to_string(), (1.0, 1.0))]);
    let mut i = 0;
    while i < queues.len() {
        let q = queues[i].clone();
        if let Some(children) = props.get(&format!("{PREFIX}{q}.queues")) {
            let names: Vec<&str> = children.split(',').map(str::trim).collect();
            let mut sum = 0.0;
            for n in &names {
                let c = format!("{q}.{n}");
                match props.get(&format!("{PREFIX}{c}.capacity")).map(|s| s.trim().parse::<f64>()) {
                    Some(Ok(x)) if (0.0..=100.0).contains(&x) => {
                        sum += x;
                        let (pc, pm) = abs[&q];
                        let m = match props
                            .get(&format!("{PREFIX}{c}.maximum-capacity"))
                            .map(|s| s.trim().parse::<f64>())
                        {
                            Some(Ok(m)) if (0.0..=100.0).contains(&m) => m,
                            Some(_) => {
                                v.push(format!("{c}: maximum-capacity is not a percentage"));
                                100.0
                            }
                            None => 100.0,
                        };
                        let (ac, am) = (pc * x / 100.0, pm * m / 100.0);
                        if am < ac - 1e-6 {
                            v.push(format!(
                                "{c}: absolute capacity {:.4} above its absolute maximum capacity {:.4}",
                                ac, am
                            ));
                        }
                        abs.insert(c.clone(), (ac, am));
                    }
                    _ => v.push(format!("{c}: capacity missing or not a percentage")),
                }
                queues.push(c);
            }
            if (sum - 100.0).abs() > 1e-6 {
                v.push(format!("{q}: the children's capacities sum to {sum}, not 100"));
            }
            let prioritized = names.iter().any(|n| props.contains_key(&format!("{PREFIX}{q}.{n}.priority")));
            let ordering =
                props.get(&format!("{PREFIX}{q}.ordering-policy")).map(|s| s.trim()).unwrap_or("utilization");
            if prioritized && ordering != "priority-utilization" {
                v.push(format!(
                    "{q}: children have priorities but ordering-policy is {ordering}, so they are ignored"
                ));
            }
            if !["utilization", "priority-utilization"].contains(&ordering) {
                v.push(format!(
                    "{q}: parent ordering-policy `{ordering}` is not utilization or priority-utilization"
                ));
            }
        } else if let Some(o) = props.get(&format!("{PREFIX}{q}.ordering-policy")) {
            if !["fifo", "fair"].contains(&o.trim()) {
                v.push(format!("{q}: leaf ordering-policy `{o}` is not fifo or fair"));
            }
        }
        i += 1;
    }
    let known: BTreeSet<&String> = queues.iter().collect();
    for (name, value) in &props {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            if name != "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill" {
                v.push(format!("{name} is not a Capacity Scheduler property"));
            } else if value.trim().parse::<u64>().is_err() {
                v.push(format!("{name}: not milliseconds"));
            }
            continue;
        };
        if let Some(user) = rest.strip_prefix("user.") {
            if !modern {
                v.push(format!("{name}: no per-user max-parallel-apps before Hadoop 3.3"));
            }
            if !(user == "max-parallel-apps" || user.ends_with(".max-parallel-apps")) {
                v.push(format!("{name} is not a user property"));
            }
            continue;
        }
        let Some((queue, key)) = rest.rsplit_once('.') else {
            v.push(format!("{name} is not a queue property"));
            continue;
        };
        if !known.contains(&queue.to_string()) {
            v.push(format!("{name}: no queue {queue} in the tree"));
        }
        if !QUEUE_KEYS.contains(&key) {
            v.push(format!("{name}: `{key}` is not a queue property"));
        }
        if key == "max-parallel-apps" && !modern {
            v.push(format!("{name}: max-parallel-apps does not exist before Hadoop 3.3"));
        }
        if matches!(key, "max-parallel-apps" | "priority") && value.trim().parse::<i64>().is_err() {
            v.push(format!("{name}: not an integer"));
        }
        if key == "maximum-am-resource-percent"
            && !value.trim().parse::<f64>().is_ok_and(|x| (0.0..=1.0).contains(&x))
        {
            v.push(format!("{name}: not a fraction"));
        }
    }
    if !modern {
        let mut leaves = BTreeMap::new();
        for q in &queues {
            if !props.contains_key(&format!("{PREFIX}{q}.queues")) {
                let name = q.rsplit('.').next().unwrap_or(q);
                if let Some(first) = leaves.insert(name.to_string(), q.clone()) {
                    v.push(format!(
                        "leaf name `{name}` is used by {first} and {q}: refused before Hadoop 3.3"
                    ));
                }
            }
        }
    }
    v
}
