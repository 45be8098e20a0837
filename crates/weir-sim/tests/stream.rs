//! Streamed replays: a trace read a job at a time gives the workload the whole-file import
//! gives, and a simulation fed from it holds only the work in flight — what is done is
//! forgotten — while reporting the same figures.

use weir_model::{ClusterConfig, Workflow};
use weir_sim::import::{import, ImportOptions, TraceKind, TraceStream, REORDER};
use weir_sim::{SimConfig, SimError, Simulation, WorkflowSource};

/// SWF line: job `id` at `submit` s, `runtime` s on `procs` processors.
fn line(id: u64, submit: u64, runtime: u64, procs: u64) -> String {
    format!("{id} {submit} -1 {runtime} {procs} -1 -1 {procs} -1 -1 1 {} 1 -1 -1 -1 -1 -1\n", id % 7)
}

fn stream(text: &str, options: &ImportOptions) -> (Vec<Workflow>, TraceStream) {
    let mut s =
        TraceStream::new(TraceKind::Swf, "t.swf", Box::new(std::io::Cursor::new(text.to_string())), options)
            .expect("opens");
    let mut out = Vec::new();
    while let Some(w) = s.next_workflow().expect("reads") {
        out.push(w);
    }
    (out, s)
}

#[test]
fn a_streamed_trace_is_the_whole_import_in_the_same_order() {
    // 300 jobs, each group of ten lines in reverse submit order, two sharing a time.
    let text: String = (0..300u64)
        .map(|i| line(i + 1, (i / 10) * 100 + (9 - i % 10) * 3 + u64::from(i == 7), 50 + i % 13, 1 + i % 4))
        .collect();
    let options = ImportOptions { load_scale: 0.5, slo_factor: Some(2.0), ..ImportOptions::default() };
    let whole = import(TraceKind::Swf, "t.swf", text.as_bytes(), &options).expect("imports");
    let (streamed, s) = stream(&text, &options);
    assert!(streamed.len() > 100 && streamed.len() < 200, "about half kept: {}", streamed.len());
    assert_eq!(streamed, whole.workload.workflows);
    let report = s.report();
    assert_eq!(
        (report.imported.rows, report.imported.jobs, report.workflows),
        (whole.rows, whole.jobs, streamed.len() as u64)
    );
    assert_eq!(report.imported.adjusted, whole.adjusted);
}

#[test]
fn a_line_far_out_of_order_arrives_with_the_job_before_it() {
    let mut text: String = (0..(REORDER as u64 + 100)).map(|i| line(i + 1, 1000 + i, 60, 1)).collect();
    text.push_str(&line(99_999, 5, 60, 1));
    let (streamed, s) = stream(&text, &ImportOptions::default());
    let at = streamed.iter().position(|w| w.name == "swf-99999").expect("kept");
    assert_eq!(streamed[at].arrival, streamed[at - 1].arrival, "it arrives with the job handed on before it");
    let r = s.report().imported;
    let reason = r.adjusted.keys().find(|k| k.contains("out of order")).expect("counted");
    assert_eq!(r.adjusted[reason].first_lines, vec![REORDER as u64 + 101]);
}

/// A trace's workflows from a stream, watching how much the simulation holds as it goes.
struct Watch(TraceStream);

impl WorkflowSource for Watch {
    fn next_workflow(&mut self) -> Result<Option<Workflow>, SimError> {
        Ok(self.0.next_workflow()?)
    }
}

/// No AM share: with `am: None` a job's first container would otherwise count as its AM.
const CLUSTER: &str = "
version: 1
scheduler: {queue_max_am_share_default: -1}
nodes:
  - {count: 8, resources: {cpu: 4000, memory: 16g}}
queues:
  - {name: default}
";

#[test]
fn a_streamed_simulation_holds_only_the_work_in_flight() {
    // 3,000 one-to-four-task jobs, one every 10 s, each running a minute or two: a few dozen in
    // flight at any time.
    let text: String = (0..3000u64).map(|i| line(i + 1, i * 10, 60 + i % 60, 1 + i % 4)).collect();
    let cluster = ClusterConfig::from_yaml("c.yaml", CLUSTER).expect("cluster");
    let config = SimConfig { am: None, ..SimConfig::default() };
    let options = ImportOptions::default();
    let source =
        TraceStream::new(TraceKind::Swf, "t.swf", Box::new(std::io::Cursor::new(text.clone())), &options)
            .expect("opens");
    let mut sim =
        Simulation::streaming(cluster.clone(), Box::new(Watch(source)), config.clone()).expect("sim");
    // How many runs a stream holds is not known before it is read (progress said "of 0").
    assert_eq!(sim.progress().runs_expected, None);
    let mut most = (0, 0, 0);
    while sim.step().expect("step") {
        let h = sim.held();
        most = (most.0.max(h.0), most.1.max(h.1), most.2.max(h.2));
    }
    let streamed = sim.finish().expect("finish");
    assert!(most.0 < 100 && most.1 < 100 && most.2 < 100, "held at most {most:?} of 3000");
    assert_eq!((streamed.summary.runs, streamed.summary.runs_completed), (3000, 3000));
    assert!(streamed.workload.workflows.is_empty(), "every workflow forgotten once done");
    assert_eq!(streamed.runs.len(), 3000, "records kept without a sink");

    // The same trace imported whole: the same figures.
    let whole = import(TraceKind::Swf, "t.swf", text.as_bytes(), &options).expect("imports");
    let out = Simulation::new(cluster, whole.workload, config).expect("sim").finish().expect("finish");
    let (mut a, mut b) = (streamed.summary.clone(), out.summary.clone());
    a.wall_seconds = 0.0;
    b.wall_seconds = 0.0;
    assert_eq!(a.to_json(), b.to_json());
}
