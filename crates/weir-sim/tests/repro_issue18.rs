//! Issue 18's repros (`../shared/repro/sim/`, beside the repository; its README gives each
//! command, what happened and what should happen), replayed as `weir simulate` streams them,
//! with every invariant checked after every step — among them that gangs never hold
//! placeholders with nothing running for longer than one gang timeout.

use std::path::PathBuf;

use weir_model::{ClusterConfig, Workflow};
use weir_sim::import::{ImportOptions, NodeFit, TraceKind, TraceStream};
use weir_sim::{EndReason, Outcome, SimConfig, SimError, Simulation, WorkflowSource};

fn repro(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/repro/sim").join(name);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("the shared repros belong beside the repository: {}: {e}", p.display()))
}

struct Source(TraceStream);

impl WorkflowSource for Source {
    fn next_workflow(&mut self) -> Result<Option<Workflow>, SimError> {
        Ok(self.0.next_workflow()?)
    }
}

/// Stream `trace` into the cluster of `cluster` as the CLI does (the cluster's node shapes
/// checked at import, no application masters for SWF). Also the import's skip reasons.
fn replay(cluster: &str, trace: &str, time_scale: f64) -> (Outcome, Vec<String>) {
    let cluster = ClusterConfig::from_yaml(cluster, &repro(cluster)).unwrap_or_else(|e| panic!("{e}"));
    let options = ImportOptions { time_scale, fit: NodeFit::of(&cluster), ..ImportOptions::default() };
    let stream =
        TraceStream::new(TraceKind::Swf, trace, Box::new(std::io::Cursor::new(repro(trace))), &options)
            .expect("opens");
    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
    let mut sim = Simulation::streaming(cluster, Box::new(Source(stream)), config).expect("sim");
    sim.run().unwrap_or_else(|e| panic!("{trace} at {time_scale}x: {e}"));
    let out = sim.finish().expect("finish");
    (out, Vec::new())
}

#[test]
fn four_gangs_on_four_nodes_under_a_fair_leaf_all_run() {
    // Before: each gang held one node, a timeout handed the node back to the gang just
    // released, the replay ended "no progress" at 3d 19h with 4 gangs unfinished and job 9 (at
    // t=100000 s, still in the reader) never read.
    for cluster in ["c4.yaml", "c4-fifo.yaml"] {
        let (o, _) = replay(cluster, "livelock.swf", 1.0);
        let s = &o.summary;
        assert_eq!((s.runs, s.runs_completed), (9, 9), "{cluster}: {}", s.ending.note);
        assert_eq!(s.ending.reason, EndReason::Completed, "{cluster}");
        assert!(s.ending.complete);
        assert_eq!(s.gangs.as_ref().expect("gangs").started, 9, "{cluster}");
    }
}

#[test]
fn the_nasa_excerpt_completes_at_every_time_scale() {
    // Before: at 1.1x, 26 of 41 completed and the run stopped at 3d 10h with every node held
    // by placeholders of gangs of 64 and 128.
    for scale in [1.0, 1.1, 1.25, 1.5, 2.0, 3.0] {
        let (o, _) = replay("c128.yaml", "nasa-excerpt.swf", scale);
        let s = &o.summary;
        assert_eq!((s.runs, s.runs_completed), (41, 41), "{scale}x: {}", s.ending.note);
        assert_eq!(s.ending.reason, EndReason::Completed, "{scale}x");
    }
}

#[test]
fn a_gang_larger_than_the_cluster_is_skipped_at_import() {
    let cluster = ClusterConfig::from_yaml("c4.yaml", &repro("c4.yaml")).expect("cluster");
    let options = ImportOptions { fit: NodeFit::of(&cluster), ..ImportOptions::default() };
    let mut stream = TraceStream::new(
        TraceKind::Swf,
        "big.swf",
        Box::new(std::io::Cursor::new(repro("big.swf"))),
        &options,
    )
    .expect("opens");
    let mut names = Vec::new();
    while let Some(w) = stream.next_workflow().expect("reads") {
        names.push(w.name);
    }
    assert_eq!(names, ["swf-1", "swf-3", "swf-4"]);
    let report = stream.report();
    let skipped = format!("{report}");
    assert!(skipped.contains("1  gang larger than the cluster (lines 2)"), "{skipped}");
    // Replayed, the jobs behind it run at once (before: blocked, "no progress" after ~10 idle days).
    let (o, _) = replay("c4.yaml", "big.swf", 1.0);
    assert_eq!((o.summary.runs, o.summary.runs_completed), (3, 3));
    assert!(o.summary.simulated_seconds < 300.0, "{}", o.summary.simulated_seconds);
}

#[test]
fn gpu_utilization_counts_the_fraction_of_a_shared_gpu() {
    // One node of 2 GPUs: a pod on half a GPU and one on a whole GPU, for 100 s each. Before:
    // utilization.gpu 0.5 (fractions counted nothing); and a streamed trace had no GPU mix, so
    // no fragmentation figure.
    let nodes =
        weir_sim::import::import_nodes("nodes-1gpu.csv", repro("nodes-1gpu.csv").as_bytes()).expect("nodes");
    let yaml = repro("c4.yaml");
    let base = ClusterConfig::from_yaml("c4.yaml", &yaml).expect("cluster");
    let mut file = base.file.clone();
    file.nodes = nodes
        .groups
        .iter()
        .map(|g| weir_model::cluster_file::NodeGroupSpec {
            count: g.count,
            resources: weir_model::PartialResources::from_resources(g.resources),
            label: g.label.clone(),
            gpu_model: g.gpu_model.clone(),
        })
        .collect();
    let cluster = ClusterConfig::from_file("c4.yaml", file).expect("cluster with the trace's nodes");
    let options = ImportOptions { fit: NodeFit::of(&cluster), ..ImportOptions::default() };
    let stream = TraceStream::new(
        TraceKind::AlibabaGpu2023,
        "pods-frac.csv",
        Box::new(std::io::Cursor::new(repro("pods-frac.csv"))),
        &options,
    )
    .expect("opens");
    let config = SimConfig { am: None, check_invariants: true, ..SimConfig::default() };
    let sim = Simulation::streaming(cluster, Box::new(Source(stream)), config).expect("sim");
    let s = sim.finish().expect("finish").summary;
    assert_eq!(s.runs_completed, 2);
    assert_eq!(s.utilization.gpu, 0.75, "one whole GPU and half of one, of 2");
    let g = s.gpus.expect("GPU figures for a streamed trace");
    assert_eq!(g.gpus, 2.0);
    // While both run, 0.5 GPU is idle on the shared GPU: a whole-GPU pod (half the mix) cannot
    // use it, the half-GPU pod can — FGD's expected fragmentation is half the idle room.
    assert_eq!(g.fragmentation_ratio_max, Some(0.5));
}
