//! The SWF importer's gangs and walltimes, and the Alibaba GPU trace importer (pods and nodes),
//! on files written by hand from the formats' definitions: the Parallel Workloads Archive's
//! SWF (18 fields, field 9 the requested time) and cluster-trace-gpu-v2023's `openb` CSVs
//! (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
//! deletion_time,scheduled_time` and `sn,cpu_milli,memory_mib,gpu,model`).

use proptest::prelude::*;
use weir_model::{Arrival, Distribution, Duration, Resources, TaskPlacement};
use weir_sim::import::{import, import_nodes, ImportOptions, Imported, TraceKind};

fn run(kind: TraceKind, text: &str) -> Imported {
    import(kind, "t", text.as_bytes(), &ImportOptions::default()).expect("imports")
}

fn count(
    map: &std::collections::BTreeMap<String, weir_sim::import::Skipped>,
    reason: &str,
) -> (u64, Vec<u64>) {
    map.get(reason).map_or((0, Vec::new()), |s| (s.count, s.first_lines.clone()))
}

fn fixed(d: &Distribution) -> Duration {
    match d {
        Distribution::Fixed(d) => *d,
        other => panic!("expected a fixed duration, got {other:?}"),
    }
}

// ---- SWF: every job a gang, walltimes from field 9 ---------------------------------------

/// job submit wait run procs cpu mem req_procs req_time req_mem status user group exe queue part prev think
const SWF: &str = "; a hand-written log
1 0 5 100 4 -1 -1 4 300 -1 1 1 1 -1 1 -1 -1 -1
2 10 0 100 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1
3 20 0 100 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1
";

#[test]
fn an_swf_job_is_a_gang_with_its_requested_time_as_walltime() {
    let got = run(TraceKind::Swf, SWF);
    let stages: Vec<_> = got.workload.workflows.iter().map(|w| &w.jobs[0].stages[0]).collect();
    assert!(stages.iter().all(|s| s.gang), "a rigid parallel job starts whole");
    assert_eq!(stages[0].tasks, 4);
    assert_eq!(stages[0].walltime, Some(Duration::from_secs(300)));
    // Job 2 asked for 60 s and ran 100 s: the plan must not be overtaken by what it plans with.
    assert_eq!(stages[1].walltime, Some(Duration::from_secs(100)));
    assert_eq!(
        count(&got.adjusted, "requested time below the run time: raised to the run time"),
        (1, vec![3])
    );
    assert_eq!(stages[2].walltime, None, "-1: unknown");
    assert!(!TraceKind::Swf.has_application_masters());
    assert!(TraceKind::Alibaba2018.has_application_masters() && TraceKind::Sls.has_application_masters());
}

// ---- Alibaba GPU trace: pods -------------------------------------------------------------

const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,100,1100,100
openb-pod-0001,6000,12288,1,460,,BE,Succeeded,200,260,201
openb-pod-0002,88000,327680,8,1000,,Burstable,Succeeded,300,900,300
openb-pod-0003,16000,32768,1,1000,V100M16|V100M32,Guaranteed,Running,400,500,405
openb-pod-0004,20000,65536,0,0,,LS,Running,500,800,500
openb-pod-0005,3152,5600,1,1000,,BE,Failed,600,700,600
openb-pod-0006,11908,47104,1,1000,,BE,Pending,700,800,
openb-pod-0007,1000,1024,2,500,,BE,Running,800,900,800
openb-pod-0008,1000,1024,1,0,,BE,Running,800,900,800
openb-pod-0009,1000,1024,1,1000,,XX,Running,800,900,800
openb-pod-0010,1000,1024,1,1000,,LS,Sleeping,800,900,800
openb-pod-0011,1000,1024,1,1000,,LS,Running,900,800,900
openb-pod-0012,1000,1024,1,1000,,LS,Running,800,900
openb-pod-0013,lots,1024,1,1000,,LS,Running,800,900,800
";

#[test]
fn pods_become_one_task_workflows_with_their_lifetime_size_gpus_and_tier() {
    let got = run(TraceKind::AlibabaGpu2023, PODS);
    assert_eq!(got.rows, 14, "the header is not a row");
    let by_name =
        |n: &str| got.workload.workflows.iter().find(|w| w.name == n).unwrap_or_else(|| panic!("{n}"));
    let whole = by_name("openb-pod-0000");
    let stage = &whole.jobs[0].stages[0];
    assert_eq!((stage.tasks, stage.resources), (1, Resources::new(12_000, 16_384, 1)));
    assert_eq!(fixed(&stage.duration), Duration::from_secs(1000), "creation → deletion");
    assert_eq!(whole.tier, 1, "LS: latency-sensitive");
    assert!(!stage.gang && stage.walltime.is_none());
    assert_eq!(whole.arrival, Arrival::At(vec![weir_model::Time::ZERO]), "the first pod arrives at 0");
    let shared = &by_name("openb-pod-0001").jobs[0].stages[0];
    assert_eq!(shared.resources, Resources::new(6000, 12_288, 0));
    assert_eq!(shared.placement, TaskPlacement { gpu_milli: 460, ..TaskPlacement::default() });
    assert_eq!(by_name("openb-pod-0001").tier, 3, "BE: best effort");
    let eight = by_name("openb-pod-0002");
    assert_eq!((eight.jobs[0].stages[0].resources.gpu, eight.tier), (8, 2), "Burstable: tier 2");
    let spec = by_name("openb-pod-0003");
    assert_eq!(
        spec.jobs[0].stages[0].placement.gpu_models,
        vec!["V100M16".to_string(), "V100M32".to_string()]
    );
    assert_eq!(spec.tier, 1, "Guaranteed");
    assert_eq!(spec.arrival, Arrival::At(vec![weir_model::Time(300_000)]));
    let cpu = &by_name("openb-pod-0004").jobs[0].stages[0];
    assert_eq!((cpu.resources.gpu, cpu.placement.gpu_milli), (0, 0));
    let failed = &by_name("openb-pod-0005").jobs[0].stages[0];
    assert!(failed.recorded_failure);
    assert!(!cpu.recorded_failure);
    assert_eq!(
        count(&got.adjusted, "Failed pod replayed for its lifetime, then failed (no retry)"),
        (1, vec![7])
    );
    let skip = |r: &str| count(&got.skipped, r);
    assert_eq!(skip("Pending pod (never scheduled): no run to replay"), (1, vec![8]));
    assert_eq!(
        skip("a GPU fraction over several GPUs (num_gpu above 1, gpu_milli below 1000)"),
        (1, vec![9])
    );
    assert_eq!(skip("GPUs asked for with gpu_milli 0 or above 1000"), (1, vec![10]));
    assert_eq!(skip("unknown QoS class (not Guaranteed, LS, Burstable or BE)"), (1, vec![11]));
    assert_eq!(skip("unknown pod phase (not Running, Succeeded, Failed or Pending)"), (1, vec![12]));
    assert_eq!(skip("deleted before it was created"), (1, vec![13]));
    assert_eq!(skip("cpu_milli, memory_mib, num_gpu or gpu_milli is not a whole number"), (1, vec![15]));
    assert_eq!(got.skipped_rows(), 8);
    assert_eq!(got.jobs, 6);
    assert!(!TraceKind::AlibabaGpu2023.has_application_masters(), "a pod has no application master");
}

#[test]
fn qos_classes_place_pods_through_the_queue_map() {
    let mut options = ImportOptions::default();
    options
        .queue_map
        .insert("qos:BE".into(), weir_model::QueuePath::parse("root.batch.tier3").expect("path"));
    let got = import(TraceKind::AlibabaGpu2023, "p", PODS.as_bytes(), &options).expect("imports");
    let queues: Vec<(&str, &str)> =
        got.workload.workflows.iter().map(|w| (w.name.as_str(), w.queue.as_str())).collect();
    assert!(queues.contains(&("openb-pod-0001", "root.batch.tier3")));
    assert!(queues.contains(&("openb-pod-0000", "root.default")));
}

// ---- Alibaba GPU trace: nodes ------------------------------------------------------------

const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model
openb-node-0227,32000,262144,0,
openb-node-0228,128000,786432,8,G3
openb-node-0229,96000,786432,8,V100M32
openb-node-0230,96000,786432,8,V100M32
openb-node-0231,32000,262144,0,nan
openb-node-0232,96000,786432,0,V100M32
openb-node-0233,96000,786432,8
";

#[test]
fn the_node_list_becomes_groups_of_identical_nodes() {
    let got = import_nodes("n", NODES.as_bytes()).expect("reads");
    let groups: Vec<(u32, Resources, Option<&str>)> =
        got.groups.iter().map(|g| (g.count, g.resources, g.gpu_model.as_deref())).collect();
    assert_eq!(
        groups,
        vec![
            (2, Resources::new(32_000, 262_144, 0), None),
            (1, Resources::new(128_000, 786_432, 8), Some("G3")),
            (2, Resources::new(96_000, 786_432, 8), Some("V100M32")),
        ]
    );
    assert_eq!(got.nodes(), 5);
    assert_eq!(got.rows, 7);
    assert_eq!(count(&got.skipped, "a GPU model on a node without GPUs"), (1, vec![7]));
    assert_eq!(count(&got.skipped, "not 5 fields (sn, cpu_milli, memory_mib, gpu, model)"), (1, vec![8]));
}

/// A line of the pod list with each field drawn from a small alphabet of valid and broken values.
fn pod_line() -> impl Strategy<Value = String> {
    let num = prop_oneof![
        Just("0".to_string()),
        Just("1000".to_string()),
        Just("-1".to_string()),
        Just("x".to_string()),
        (0u64..200_000).prop_map(|n| n.to_string())
    ];
    let gpus = prop_oneof![Just("0"), Just("1"), Just("2"), Just("8"), Just("")];
    let milli = prop_oneof![Just("0"), Just("460"), Just("1000"), Just("1200")];
    let qos = prop_oneof![Just("LS"), Just("BE"), Just("Burstable"), Just("Guaranteed"), Just("?")];
    let phase = prop_oneof![Just("Running"), Just("Succeeded"), Just("Failed"), Just("Pending"), Just("")];
    (num.clone(), num.clone(), gpus, milli, qos, phase, num.clone(), num)
        .prop_map(|(c, m, g, gm, q, p, t0, t1)| format!("pod,{c},{m},{g},{gm},,{q},{p},{t0},{t1},{t0}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Whatever the pod list: no panic, every row a pod or a skip, and every pod's GPU ask is a
    /// whole count or one fraction below a GPU, never both.
    #[test]
    fn every_pod_row_is_kept_or_counted(lines in proptest::collection::vec(pod_line(), 0..40)) {
        let text = lines.join("\n");
        let got = run(TraceKind::AlibabaGpu2023, &text);
        prop_assert_eq!(got.jobs + got.skipped_rows(), got.rows);
        for w in &got.workload.workflows {
            let s = &w.jobs[0].stages[0];
            prop_assert!(s.placement.gpu_milli < 1000);
            prop_assert!(s.placement.gpu_milli == 0 || s.resources.gpu == 0);
            prop_assert!((1..=3).contains(&w.tier));
        }
    }
}
