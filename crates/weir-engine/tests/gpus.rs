//! GPU placement: a fraction of a GPU goes on one physical GPU with that much free, never split
//! across two (two halves share a GPU, 0.6 and 0.5 do not); GPUs given out in fractions are not
//! whole-GPU room; a selector keeps a task on the GPU models and labels it names.

mod harness;

use harness::{res, Env};
use weir_engine::{JobId, NodeId, NodeSpec, Request, Selector};
use weir_model::Resources;

const EMPTY: &str = "version: 1
scheduler: {queue_max_am_share_default: -1}
nodes: []
queues: [{name: a}]
";

fn gpu_node(id: u64, gpus: u64, model: &str, label: Option<&str>) -> NodeSpec {
    NodeSpec {
        id: NodeId(id),
        resources: Resources::new(16_000, 65_536, gpus),
        label: label.map(str::to_string),
        gpu_model: Some(model.to_string()),
    }
}

fn env_with(nodes: Vec<NodeSpec>) -> Env {
    // A cluster file needs a node; the test's nodes are added by hand to a file with one tiny
    // node, which no test's request fits.
    let mut env = Env::new(&EMPTY.replace("nodes: []", "nodes: [{resources: {cpu: 1, memory: 1}}]"));
    for n in nodes {
        env.add_node_spec(n);
    }
    env
}

fn frac(milli: u32) -> Request {
    Request::new(res(1000, 1024), 1).with_gpu_milli(milli)
}

fn shared(env: &Env, node: u64) -> Vec<u16> {
    env.engine.nodes().into_iter().find(|n| n.id == NodeId(node)).expect("node").gpu_shared
}

#[test]
fn two_half_gpu_pods_share_one_gpu() {
    let mut env = env_with(vec![gpu_node(10, 1, "T4", None)]);
    env.submit_requests(1, "a", vec![frac(500)]);
    env.submit_requests(2, "a", vec![frac(500)]);
    env.schedule();
    env.take_runnable();
    let placed = env.take_placed();
    assert_eq!(placed.iter().map(|p| (p.0, p.2)).collect::<Vec<_>>(), vec![(1, 10), (2, 10)]);
    assert_eq!(shared(&env, 10), vec![1000]);
    env.nothing_else();
}

#[test]
fn a_point_six_and_a_point_five_do_not_share_a_gpu() {
    let mut env = env_with(vec![gpu_node(10, 1, "T4", None)]);
    env.submit_requests(1, "a", vec![frac(600)]);
    env.submit_requests(2, "a", vec![frac(500)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().iter().map(|p| p.0).collect::<Vec<_>>(), vec![1]);
    assert_eq!(shared(&env, 10), vec![600]);
    assert!(env.explain(2).contains("no node has room for its next application master {cpu: 1000, memory: 1024} with 500/1000 of one GPU"), "{}", env.explain(2));
    env.nothing_else();
}

#[test]
fn a_fraction_goes_on_the_tightest_gpu_it_fits_and_frees_it_again() {
    let mut env = env_with(vec![gpu_node(10, 2, "T4", None)]);
    env.submit_requests(1, "a", vec![frac(600)]);
    env.submit_requests(2, "a", vec![frac(500)]);
    env.schedule();
    let first = env.take_placed();
    assert_eq!(shared(&env, 10), vec![600, 500], "0.5 does not fit beside 0.6: a second GPU");
    env.submit_requests(3, "a", vec![frac(400)]);
    env.schedule();
    assert_eq!(shared(&env, 10), vec![1000, 500], "0.4 fills the fuller GPU exactly");
    env.take_placed();
    // Neither GPU is free for a whole-GPU request while fractions hold it.
    env.submit_requests(4, "a", vec![Request::new(res(1000, 1024), 1)]);
    let whole = Request { resources: Resources::new(1000, 1024, 1), ..Request::new(res(1000, 1024), 1) };
    env.submit_requests(5, "a", vec![whole]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().iter().map(|p| p.0).collect::<Vec<_>>(), vec![4]);
    // The 0.5 ends: its GPU is whole again.
    env.finish_container(first[1].1);
    env.schedule();
    assert_eq!(env.take_placed().iter().map(|p| p.0).collect::<Vec<_>>(), vec![5]);
    assert_eq!(shared(&env, 10), vec![1000]);
}

#[test]
fn a_pod_asking_for_a_model_never_lands_on_another_model() {
    let mut env = env_with(vec![gpu_node(10, 8, "A100", None), gpu_node(11, 1, "V100", None)]);
    let v100 = env.engine.selector(&Selector { labels: vec![], gpu_models: vec!["V100".into()] });
    let whole = |n| Request { resources: Resources::new(1000, 1024, n), ..Request::new(res(1000, 1024), 1) };
    // The A100 node is the better fit by memory; the selector still sends both to the V100 node,
    // and the second waits there although the A100 node has eight free GPUs.
    env.submit_requests(1, "a", vec![whole(1).on(v100)]);
    env.submit_requests(2, "a", vec![whole(1).on(v100)]);
    env.submit_requests(3, "a", vec![frac(300).on(v100)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().iter().map(|p| (p.0, p.2)).collect::<Vec<_>>(), vec![(1, 11)]);
    let why = env.explain(2);
    assert!(why.contains("on nodes with GPU model in [V100]"), "{why}");
    // Unconstrained, the same request goes to the A100 node.
    env.submit_requests(4, "a", vec![whole(1)]);
    env.schedule();
    env.take_runnable();
    assert_eq!(env.take_placed().iter().map(|p| (p.0, p.2)).collect::<Vec<_>>(), vec![(4, 10)]);
    env.nothing_else();
}

#[test]
fn a_label_selector_keeps_tasks_on_labelled_nodes() {
    let mut env = env_with(vec![gpu_node(10, 0, "none", Some("cpu")), gpu_node(11, 0, "none", Some("fast"))]);
    let fast =
        env.engine.selector(&Selector { labels: vec!["fast".into(), "other".into()], gpu_models: vec![] });
    assert_eq!(
        env.engine.selector(&Selector { labels: vec!["fast".into(), "other".into()], gpu_models: vec![] }),
        fast
    );
    env.submit_requests(1, "a", vec![Request::new(res(1000, 1024), 3).on(fast)]);
    env.schedule();
    env.take_runnable();
    assert!(env.take_placed().iter().all(|p| p.2 == 11));
}

#[test]
fn malformed_gpu_requests_are_refused() {
    let mut env = env_with(vec![gpu_node(10, 1, "T4", None)]);
    let spec = |r: Request| weir_engine::JobSpec {
        id: JobId(1),
        queue: weir_model::QueuePath::parse("a").unwrap(),
        user: "u".into(),
        priority: None,
        submit_time: env_time(),
        requests: vec![r],
        has_am: true,
    };
    fn env_time() -> weir_model::Time {
        weir_model::Time::ZERO
    }
    for bad in [
        frac(1000),
        Request { resources: Resources::new(0, 0, 1), ..frac(500) },
        frac(500).on(weir_engine::SelectorId(9)),
    ] {
        let err = env.engine.on_job_submitted(env.now, spec(bad)).expect_err("refused");
        assert!(matches!(err, weir_engine::EngineError::InvalidRequest { .. }), "{err}");
    }
    // A fraction alone (no cpu or memory) is a valid request.
    env.engine
        .on_job_submitted(env.now, spec(Request::new(Resources::ZERO, 1).with_gpu_milli(250)))
        .expect("accepted");
}
