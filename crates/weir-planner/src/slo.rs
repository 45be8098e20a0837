//! SLO sizing: the instances a queue needs so its SLO-bound workflows can finish in time.
//!
//! One run of a workflow needs Σ over its jobs' stages of tasks × mean task duration × the
//! instances one task's container counts for (dominant resource, fractional) instance-hours.
//! Finishing within an SLO of S hours takes at least that / S instances on average. A queue's
//! floor is the sum over its SLO-bound workflows, as if they all ran at once: their runs are
//! usually scheduled together (the same logical date), and the sum is the conservative choice.

use std::collections::BTreeMap;

use weir_model::{QueuePath, Resources, Workflow, Workload};

/// The SLO floor of one queue.
#[derive(Clone, Debug, PartialEq)]
pub struct SloFloor {
    /// Σ (instance-hours of one run / SLO hours), not rounded.
    pub instances: f64,
    /// How many SLO-bound workflows contributed.
    pub workflows: usize,
}

/// Instance-hours of one run of `workflow`, with usage counted in `instance`s.
pub fn run_instance_hours(workflow: &Workflow, instance: &Resources) -> f64 {
    workflow
        .jobs
        .iter()
        .flat_map(|j| &j.stages)
        .map(|s| f64::from(s.tasks) * s.duration.mean_secs() / 3600.0 * instances_of(&s.resources, instance))
        .sum()
}

/// `max(cpu / instance.cpu, memory / instance.memory)`, fractional; zero components not counted.
pub fn instances_of(r: &Resources, instance: &Resources) -> f64 {
    let part = |v: u64, unit: u64| if unit == 0 { 0.0 } else { v as f64 / unit as f64 };
    part(r.cpu, instance.cpu).max(part(r.memory, instance.memory))
}

/// The floor of every queue that has at least one workflow with an SLO.
pub fn slo_floors(workload: &Workload, instance: &Resources) -> BTreeMap<QueuePath, SloFloor> {
    let mut floors: BTreeMap<QueuePath, SloFloor> = BTreeMap::new();
    for wf in &workload.workflows {
        let Some(slo) = wf.slo.filter(|d| d.as_millis() > 0) else { continue };
        let need = run_instance_hours(wf, instance) / (slo.as_millis() as f64 / 3_600_000.0);
        let f = floors.entry(wf.queue.clone()).or_insert(SloFloor { instances: 0.0, workflows: 0 });
        f.instances += need;
        f.workflows += 1;
    }
    floors
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::{Arrival, Distribution, Duration, JobTemplate, Stage, Time};

    pub(crate) fn workflow(
        queue: &str,
        slo_hours: Option<u64>,
        stages: Vec<(u32, u64, Resources)>,
    ) -> Workflow {
        Workflow {
            name: format!("wf-{queue}"),
            queue: QueuePath::parse(queue).unwrap(),
            tier: 1,
            slo: slo_hours.map(|h| Duration(h * 3_600_000)),
            priority: None,
            user: "u".into(),
            arrival: Arrival::At(vec![Time::ZERO]),
            jobs: vec![JobTemplate {
                name: "j".into(),
                after: vec![],
                stages: stages
                    .into_iter()
                    .map(|(tasks, secs, resources)| Stage {
                        name: "s".into(),
                        after: vec![],
                        tasks,
                        resources,
                        duration: Distribution::Fixed(Duration::from_secs(secs)),
                        failure_probability: 0.0,
                        gang: false,
                        walltime: None,
                        placement: Default::default(),
                        recorded_failure: false,
                    })
                    .collect(),
                gang: false,
            }],
        }
    }

    const INSTANCE: Resources = Resources::new(16_000, 65_536, 0);

    #[test]
    fn a_run_needs_its_instance_hours_over_the_slo() {
        // 32 tasks of 1 hour, each a quarter instance by memory (16 GiB of 64): 8 instance-hours.
        // A second stage: 16 tasks of 30 min at 2 cores (1/8 instance by cpu): 1 instance-hour.
        let wf = workflow(
            "root.a",
            Some(3),
            vec![(32, 3600, Resources::new(1000, 16_384, 0)), (16, 1800, Resources::new(2000, 1024, 0))],
        );
        assert!((run_instance_hours(&wf, &INSTANCE) - 9.0).abs() < 1e-12);
        let w = Workload {
            workflows: vec![
                wf,
                workflow("root.a", Some(2), vec![(4, 3600, INSTANCE)]),
                workflow("root.a", None, vec![(400, 3600, INSTANCE)]),
                workflow("root.b", Some(1), vec![(1, 1800, INSTANCE)]),
            ],
        };
        let floors = slo_floors(&w, &INSTANCE);
        let a = &floors[&QueuePath::parse("root.a").unwrap()];
        // 9 ih / 3 h + 4 ih / 2 h = 5 instances; the workflow without an SLO adds nothing.
        assert!((a.instances - 5.0).abs() < 1e-12);
        assert_eq!(a.workflows, 2);
        assert!((floors[&QueuePath::parse("root.b").unwrap()].instances - 0.5).abs() < 1e-12);
        assert_eq!(floors.len(), 2);
    }
}
