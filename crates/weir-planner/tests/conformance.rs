//! Conformance: every export of every example cluster and of `weir plan`'s output, checked
//! against the rules of the scheduler it is for (see each checker under `conformance/` for the
//! source it transcribes). Each checker also has cases it must reject, so a checker that passes
//! everything would fail here.

mod conformance {
    pub mod capacity;
    pub mod fair;
    pub mod kueue;
    pub mod xml;
    pub mod yunikorn;

    /// A Kubernetes quantity in millicores (cpu) or MiB (memory).
    pub fn quantity(s: &str, memory: bool) -> Option<u64> {
        let s = s.trim().trim_matches('"');
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (n, unit) = s.split_at(split);
        let n: f64 = n.parse().ok()?;
        let v = if memory {
            match unit {
                "Ki" => n / 1024.0,
                "Mi" => n,
                "Gi" => n * 1024.0,
                "Ti" => n * 1024.0 * 1024.0,
                "" => n / 1024.0 / 1024.0,
                _ => return None,
            }
        } else {
            match unit {
                "m" => n,
                "" => n * 1000.0,
                _ => return None,
            }
        };
        Some(v.round() as u64)
    }
}

use conformance::{capacity, fair, kueue, yunikorn};
use weir_model::ClusterConfig;
use weir_planner::{
    export, plan, ExportOptions, Format, NameKey, PlanInput, PlanSettings, UsageHistory, Version,
};

fn repo(path: &str) -> String {
    let p = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn examples() -> Vec<(String, ClusterConfig)> {
    let mut out = Vec::new();
    for name in [
        "examples/cluster.yaml",
        "examples/cluster-small.yaml",
        "examples/story/cluster-adhoc.yaml",
        "examples/story/cluster-tiered.yaml",
    ] {
        out.push((name.to_string(), ClusterConfig::from_yaml(name, &repo(name)).expect("examples validate")));
    }
    let cfg = out[0].1.clone();
    let history =
        UsageHistory::read_csv(repo("examples/usage.csv").as_bytes(), "usage.csv", NameKey::default())
            .unwrap();
    let settings = PlanSettings::defaults_for(&cfg);
    let p = plan(&PlanInput {
        cluster: &cfg,
        history: &history,
        history_name: "usage.csv",
        settings: &settings,
        workload: None,
        threads: 1,
    })
    .expect("the example plans");
    out.push(("weir plan of examples/cluster.yaml".into(), p.planned));
    out
}

fn size(cfg: &ClusterConfig) -> (u64, u64) {
    let t = cfg.total_resources();
    (t.cpu, t.memory)
}

fn text(cfg: &ClusterConfig, f: Format, o: &ExportOptions) -> String {
    export(cfg, f, o).unwrap_or_else(|e| panic!("{f}: {e}")).text
}

#[test]
fn every_export_of_every_example_and_of_the_plan_conforms() {
    let mut failures = Vec::new();
    for (name, cfg) in examples() {
        let o = ExportOptions::default();
        let mut report = |format: &str, v: Vec<String>| {
            failures.extend(v.into_iter().map(|x| format!("{name} as {format}: {x}")));
        };
        report("yarn-fair", fair::check(&text(&cfg, Format::YarnFair, &o), &[]));
        report("yarn-capacity", capacity::check(&text(&cfg, Format::YarnCapacity, &o), (3, 4)));
        report("yunikorn", yunikorn::check(&text(&cfg, Format::Yunikorn, &o), size(&cfg)));
        for v in [(0, 11), (0, 13), (0, 16)] {
            let o = ExportOptions { kueue_version: Version(v.0, v.1), ..ExportOptions::default() };
            report("kueue", kueue::check(&text(&cfg, Format::Kueue, &o), v, size(&cfg)));
        }
        // Hadoop 3.2 takes a tree whose leaf names are unique; the examples repeat tier1…
        let o32 = ExportOptions { hadoop_version: Version(3, 2), ..ExportOptions::default() };
        match export(&cfg, Format::YarnCapacity, &o32) {
            Ok(e) => report("yarn-capacity 3.2", capacity::check(&e.text, (3, 2))),
            Err(e) => assert!(e.to_string().contains("requires leaf queue names unique"), "{name}: {e}"),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_checkers_reject_what_the_schedulers_reject() {
    let fair_bad = [
        ("<allocations><queue name=\"a\"><queue name=\"b\"><schedulingPolicy>drf</schedulingPolicy></queue></queue></allocations>", "drf under a fair parent"),
        ("<allocations><queue name=\"a\"><minResources>10%</minResources></queue></allocations>", "reads as no minimum"),
        ("<allocations><queue name=\"a\"><maxResources>memory-mb=1, yarn.io/gpu=2</maxResources></queue></allocations>", "is not declared"),
        ("<allocations><queue name=\"a\"><maxResources>1024 mb</maxResources></queue></allocations>", "needs both"),
        ("<allocations><queue name=\"a\"><maxAMShare>0.1</maxAMShare><queue name=\"b\"/></queue></allocations>", "on a parent queue"),
        ("  <?xml version=\"1.0\"?><allocations/>", "declaration"),
    ];
    for (xml, want) in fair_bad {
        let v = fair::check(xml, &[]);
        assert!(v.iter().any(|x| x.contains(want)), "{xml}: {v:?}");
    }
    assert!(fair::check("<allocations><queue name=\"a\"><maxResources>memory-mb=1, yarn.io/gpu=2</maxResources></queue></allocations>", &["yarn.io/gpu"]).is_empty());

    let prop = |n: &str, v: &str| {
        format!("<property><name>yarn.scheduler.capacity.{n}</name><value>{v}</value></property>")
    };
    let cs = |props: &[String]| format!("<configuration>{}</configuration>", props.join(""));
    let v = capacity::check(
        &cs(&[prop("root.queues", "a,b"), prop("root.a.capacity", "60"), prop("root.b.capacity", "30")]),
        (3, 4),
    );
    assert!(v.iter().any(|x| x.contains("sum to 90")), "{v:?}");
    let v = capacity::check(
        &cs(&[prop("root.queues", "a"), prop("root.a.capacity", "100"), prop("root.a.priority", "3")]),
        (3, 4),
    );
    assert!(v.iter().any(|x| x.contains("ignored")), "{v:?}");
    let v = capacity::check(
        &cs(&[
            prop("root.queues", "a,b"),
            prop("root.a.queues", "x"),
            prop("root.b.queues", "x"),
            prop("root.a.capacity", "50"),
            prop("root.b.capacity", "50"),
            prop("root.a.x.capacity", "100"),
            prop("root.b.x.capacity", "100"),
            prop("root.a.x.max-parallel-apps", "3"),
        ]),
        (3, 2),
    );
    assert!(
        v.iter().any(|x| x.contains("refused before Hadoop 3.3"))
            && v.iter().any(|x| x.contains("does not exist before")),
        "{v:?}"
    );

    let yk = "partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n    - name: a.b\n      resources: {guaranteed: {vcore: '4'}}\n      queues:\n      - {name: c, resources: {guaranteed: {vcore: '5'}}}\n      - {name: C}\n";
    let v = yunikorn::check(yk, (100_000, 100_000));
    for want in ["does not match", "smaller than the children's sum", "duplicate child name"] {
        assert!(v.iter().any(|x| x.contains(want)), "{want}: {v:?}");
    }
    let v = yunikorn::check("partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n    - {name: a, resources: {guaranteed: {vcore: '50'}}}\n", (10_000, 100));
    assert!(v.iter().any(|x| x.contains("exceed the cluster")), "{v:?}");

    let k = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n\
             apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: root}\nspec: {parent: x}\n---\n\
             apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: ops-}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: f\n      resources:\n      - {name: cpu, nominalQuota: '200', borrowingLimit: '1'}\n";
    let v = kueue::check(k, (0, 16), (100_000, 100));
    for want in [
        "not served as",
        "not in the CRD schema",
        "not a DNS subdomain",
        "borrowingLimit needs a cohort",
        "exceed the cluster",
    ] {
        assert!(v.iter().any(|x| x.contains(want)), "{want}: {v:?}");
    }
}
