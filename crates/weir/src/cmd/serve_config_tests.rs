use std::path::Path;

use super::*;

const CLUSTER: &str = "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 8192}}\nqueues:\n  - {name: default}\n";

/// A scratch folder with two cluster files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-serve-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("clusters")).unwrap();
    std::fs::write(dir.join("clusters/a.yaml"), CLUSTER).unwrap();
    std::fs::write(dir.join("clusters/b.yaml"), CLUSTER.replace("4000", "8000")).unwrap();
    dir
}

fn problems(text: &str, base: &Path) -> Vec<String> {
    match parse("server.yaml", text, base) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(e) => e.problems().iter().map(|p| p.to_string()).collect(),
    }
}

#[test]
fn a_full_file_resolves_paths_from_its_folder() {
    let dir = scratch("full");
    let text = "version: 1
listen: 127.0.0.1:9001
data_dir: data
db: postgres://weir@127.0.0.1:5432/weir
lease_seconds: 3
kill_grace_seconds: 7
body_limit_bytes: 4096
tls: {cert: tls/server.crt, key: /etc/weir/server.key}
secure_cookies: true
header_read_timeout_seconds: 5
body_read_timeout_seconds: 30
idle_timeout_seconds: 90
max_connections: 100
clusters:
  - name: alpha
    file: clusters/a.yaml
  - name: beta
    file: clusters/b.yaml
    backend: {kind: local, state_dir: /var/lib/weir/beta, kill_grace_seconds: 2}
";
    let c = parse("server.yaml", text, &dir).unwrap();
    assert_eq!(c.listen, Some("127.0.0.1:9001".parse().unwrap()));
    assert_eq!(c.data_dir, Some(dir.join("data")));
    assert_eq!(c.db.as_deref(), Some("postgres://weir@127.0.0.1:5432/weir"));
    assert_eq!((c.lease, c.kill_grace), (Some(Duration::from_secs(3)), Some(Duration::from_secs(7))));
    assert_eq!(c.body_limit, Some(4096));
    assert_eq!(
        c.tls,
        Some(weir_server::TlsFiles {
            cert: dir.join("tls/server.crt"),
            key: PathBuf::from("/etc/weir/server.key")
        })
    );
    assert_eq!(c.secure_cookies, Some(true));
    assert_eq!(
        (c.header_read_timeout, c.body_read_timeout, c.idle_timeout, c.max_connections),
        (
            Some(Duration::from_secs(5)),
            Some(Duration::from_secs(30)),
            Some(Duration::from_secs(90)),
            Some(100)
        )
    );
    let names: Vec<&str> = c.clusters.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert!(c.clusters[1].yaml.contains("8000"), "beta's own cluster file is read");
    assert_eq!(c.clusters[0].file, dir.join("clusters/a.yaml").display().to_string());
    assert_eq!(c.backends["alpha"], BackendSettings::Local { state_dir: None, kill_grace: None });
    assert_eq!(
        c.backends["beta"],
        BackendSettings::Local {
            state_dir: Some(PathBuf::from("/var/lib/weir/beta")),
            kill_grace: Some(Duration::from_secs(2))
        }
    );
}

#[test]
fn every_problem_is_named_by_its_field_path() {
    let dir = scratch("bad");
    let text = "version: 2
lease_seconds: 0
header_read_timeout_seconds: 0
max_connections: 0
clusters:
  - {name: alpha, file: clusters/a.yaml, backend: {state_dir: s}}
  - {name: alpha, file: clusters/b.yaml, backend: {state_dir: s}}
  - {name: 'no spaces', file: clusters/missing.yaml}
";
    let p = problems(text, &dir);
    let want = [
        "version: 2 is not a known version",
        "lease_seconds: 0",
        "header_read_timeout_seconds: 0",
        "max_connections: 0",
        "clusters[1].name: `alpha` is named twice",
        "clusters[1].backend.state_dir:",
        "clusters[2].name: `no spaces`",
        "clusters[2].file: cannot read",
    ];
    for w in want {
        assert!(p.iter().any(|p| p.starts_with(w)), "missing `{w}` in {p:#?}");
    }
    assert_eq!(p.len(), want.len(), "{p:#?}");
}

#[test]
fn shape_errors_name_the_path_and_unknown_backends_are_refused() {
    let dir = scratch("shape");
    let unknown_field =
        "version: 1\nclusters:\n  - {name: a, file: clusters/a.yaml, backend: {kind: local, grace: 1}}\n";
    let p = problems(unknown_field, &dir);
    assert!(p[0].starts_with("clusters[0].backend.grace: unknown field"), "{p:?}");
    let spark = "version: 1\nclusters:\n  - {name: a, file: clusters/a.yaml, backend: {kind: spark}}\n";
    let p = problems(spark, &dir);
    assert!(p[0].starts_with("clusters[0].backend.kind:") && p[0].contains("spark"), "{p:?}");
    let listen = "version: 1\nlisten: everywhere\nclusters: []\n";
    let p = problems(listen, &dir);
    assert!(p[0].starts_with("listen:"), "{p:?}");
    let none = "version: 1\nclusters: []\n";
    assert_eq!(problems(none, &dir), ["clusters: empty: name at least one cluster (name, file)"]);
}

#[test]
fn the_example_server_file_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/serve/server.yaml");
    let c = load(&path).unwrap();
    let names: Vec<&str> = c.clusters.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["default", "shared"]);
    for source in &c.clusters {
        weir_model::ClusterConfig::from_yaml(&source.file, &source.yaml).unwrap();
    }
}

#[test]
fn a_slurm_cluster_is_read_with_its_settings() {
    let dir = scratch("slurm");
    let text = "version: 1
clusters:
  - name: hpc
    file: clusters/a.yaml
    backend:
      kind: slurm
      url: http://127.0.0.1:6820
      user: weir
      jwt_key: keys/jwt_hs256.key
      placement: backend
      partition: debug
      queues: {root.default: {partition: long, qos: high}}
      poll_interval_ms: 250
      default_time_limit_seconds: 600
      kill_grace_seconds: 5
      shared_dir: /shared/weir
      when_unhealthy: refuse
";
    let c = parse("server.yaml", text, &dir).unwrap();
    let BackendSettings::Slurm { config, kill_grace, shared_dir, refuse_when_unhealthy, .. } =
        &c.backends["hpc"]
    else {
        panic!("{:?}", c.backends["hpc"])
    };
    assert_eq!(config.url, "http://127.0.0.1:6820");
    assert_eq!(config.user, "weir");
    assert_eq!(
        config.auth,
        Auth::JwtKey { key_file: dir.join("keys/jwt_hs256.key"), lifespan: Duration::from_secs(3600) }
    );
    assert_eq!(config.partition.as_deref(), Some("debug"));
    assert_eq!(config.queues["root.default"].qos.as_deref(), Some("high"));
    assert_eq!(config.poll_interval, Duration::from_millis(250));
    assert_eq!(config.default_time_limit, Some(Duration::from_secs(600)));
    assert_eq!(*kill_grace, Some(Duration::from_secs(5)));
    assert_eq!(shared_dir.as_deref(), Some(Path::new("/shared/weir")));
    assert!(*refuse_when_unhealthy);
}

#[test]
fn slurm_problems_are_named_by_field() {
    let dir = scratch("slurm-bad");
    let text = "version: 1
clusters:
  - {name: a, file: clusters/a.yaml, backend: {kind: slurm, url: 'https://x', token_file: t, token_env: T, poll_interval_ms: 0, state_dir: s}}
  - {name: b, file: clusters/b.yaml, backend: {kind: slurm, user: u, url: 'http://h:1', tag: 'a b'}}
  - {name: c, file: clusters/b.yaml, backend: {kind: local, url: 'http://h:1'}}
";
    let p = problems(text, &dir);
    let want = [
        "clusters[0].backend.state_dir: is a local backend's field",
        "clusters[0].backend.url: `https://x`",
        "clusters[0].backend.user: missing",
        "clusters[0].backend.jwt_key: give one of",
        "clusters[0].backend.poll_interval_ms: 0",
        "clusters[1].backend.jwt_key: missing",
        "clusters[1].backend.tag: `a b`",
        "clusters[2].backend.url: is a slurm backend's field",
    ];
    for w in want {
        assert!(p.iter().any(|p| p.starts_with(w)), "missing `{w}` in {p:#?}");
    }
    assert_eq!(p.len(), want.len(), "{p:#?}");
    let shape = "version: 1
clusters:
  - {name: d, file: clusters/b.yaml, backend: {kind: slurm, user: u, url: 'http://h:1', token_env: T, placement: anywhere}}
";
    let p = problems(shape, &dir);
    assert!(p[0].starts_with("clusters[0].backend.placement: unknown variant `anywhere`"), "{p:?}");
}

/// `kind: kubernetes`: its own fields, checked by name; the backend itself only in a weir built
/// with the `kubernetes` feature, and a weir without it says how to get it.
#[test]
fn kubernetes_entries_are_checked_by_field() {
    let dir = scratch("kube");
    let text = "version: 1
clusters:
  - name: k8s
    file: clusters/a.yaml
    backend:
      kind: kubernetes
      namespace: batch
      image: python:3.12-slim
      scheduler: kueue
      queues: {root.default: {queue: team-a}}
      poll_interval_ms: 500
      spark_image: apache/spark:4.0.0-python3
      spark_service_account: spark
";
    let parsed = parse("server.yaml", text, &dir);
    #[cfg(feature = "kubernetes")]
    {
        let c = parsed.unwrap();
        let BackendSettings::Kubernetes { config, .. } = &c.backends["k8s"] else {
            panic!("{:?}", c.backends["k8s"])
        };
        assert_eq!((config.namespace.as_str(), config.poll_ms), ("batch", 500));
        assert_eq!(config.scheduler, weir_backend_kube::Scheduler::Kueue);
        assert_eq!(config.queues["root.default"], "team-a");
        // Spark stages as SparkApplications: the image, the default sparkVersion, the account.
        assert_eq!(config.spark_image.as_deref(), Some("apache/spark:4.0.0-python3"));
        assert_eq!(config.spark_version, "4.0.0");
        assert_eq!(config.spark_service_account.as_deref(), Some("spark"));
        assert!(c.backends["k8s"].runs_spark(), "a Kubernetes cluster with a Spark image runs Spark stages");
    }
    #[cfg(not(feature = "kubernetes"))]
    {
        let err = parsed.unwrap_err().to_string();
        assert!(err.contains("clusters[0].backend.kind") && err.contains("--features kubernetes"), "{err}");
    }
    let bad = "version: 1
clusters:
  - {name: a, file: clusters/a.yaml, backend: {kind: kubernetes, scheduler: volcano, gang: true, url: 'http://x', queues: {root.default: {partition: p}}}}
  - {name: b, file: clusters/b.yaml, backend: {namespace: batch}}
  - {name: c, file: clusters/b.yaml, backend: {kind: slurm, url: 'http://h:1', user: u, jwt_key: k, queues: {root.default: {queue: q}}}}
";
    let err = parse("server.yaml", bad, &dir).unwrap_err().to_string();
    for expected in [
        "clusters[0].backend.namespace: missing",
        "clusters[0].backend.image: missing",
        "clusters[0].backend.scheduler: `volcano`: one of default, kueue, yunikorn",
        "clusters[0].backend.gang: gangs are reserved through YuniKorn's task groups",
        "clusters[0].backend.url: is not a kubernetes backend's field",
        "clusters[0].backend.queues.root.default: partition and qos are Slurm's",
        "clusters[1].backend.namespace: is a kubernetes backend's field (this backend is `kind: local`)",
        "clusters[2].backend.queues.root.default.queue: is a kubernetes backend's field",
    ] {
        assert!(err.contains(expected), "missing `{expected}` in:\n{err}");
    }
}

#[test]
fn a_slurm_entrys_queues_must_be_leaves_and_weir_placement_needs_slurms_nodes() {
    let dir = scratch("slurm-queues");
    std::fs::write(
        dir.join("clusters/tree.yaml"),
        "version: 1\nnodes:\n  - {count: 1, resources: {cpu: 4000, memory: 4096}}\nqueues:\n  - name: ads\n    children:\n      - {name: tier1}\n      - {name: tier2}\n  - {name: default}\n",
    )
    .unwrap();
    let text = "version: 1
clusters:
  - name: hpc
    file: clusters/tree.yaml
    backend:
      kind: slurm
      url: http://127.0.0.1:6820
      user: weir
      token_env: T
      placement: weir
      nodes_refresh_seconds: 5
      queues:
        root.ads.tier1: {partition: fast}
        root.ads: {partition: batch}
        root.ads.tier9: {qos: high}
";
    let p = problems(text, &dir);
    let at = |k: &str| p.iter().find(|m| m.starts_with(k)).cloned().unwrap_or_default();
    assert!(
        at("clusters[0].backend.queues.root.ads:").contains("`root.ads` is a parent queue")
            && at("clusters[0].backend.queues.root.ads:")
                .contains("its leaves: root.ads.tier1, root.ads.tier2, root.default"),
        "{p:?}"
    );
    assert!(
        at("clusters[0].backend.queues.root.ads.tier9:").contains("`root.ads.tier9` is not a queue of"),
        "{p:?}"
    );
    assert!(
        p.iter().all(|m| !m.starts_with("clusters[0].backend.queues.root.ads.tier1")),
        "a leaf is fine: {p:?}"
    );
    assert!(at("clusters[0].backend.placement:").contains("add `nodes: from_backend`"), "{p:?}");
    assert!(
        at("clusters[0].backend.nodes_refresh_seconds:").contains("only with `nodes: from_backend`"),
        "{p:?}"
    );
    assert_eq!(p.len(), 4, "{p:?}");
}

#[test]
fn a_spark_local_backend_resolves_its_paths_and_refuses_the_master_and_other_kinds_fields() {
    let dir = scratch("spark");
    let text = "version: 1
clusters:
  - name: a
    file: clusters/a.yaml
    backend:
      kind: spark-local
      spark_home: spark/home
      python: python3
      state_dir: state
      kill_grace_seconds: 4
      conf: {spark.ui.enabled: 'false'}
  - name: b
    file: clusters/b.yaml
    backend: {kind: spark-local, python: venv/bin/python}
";
    let c = parse("server.yaml", text, &dir).unwrap_or_else(|e| panic!("{e}"));
    let BackendSettings::SparkLocal { config, kill_grace } = &c.backends["a"] else {
        panic!("{:?}", c.backends["a"])
    };
    assert_eq!(config.spark_home.as_deref(), Some(dir.join("spark/home").as_path()));
    // A bare name is looked up on PATH when the backend starts; a path is the file's folder's.
    assert_eq!(config.python.as_deref(), Some(Path::new("python3")));
    assert_eq!(config.state_dir, dir.join("state"));
    assert_eq!(config.conf["spark.ui.enabled"], "false");
    assert_eq!(*kill_grace, Some(Duration::from_secs(4)));
    let BackendSettings::SparkLocal { config, .. } = &c.backends["b"] else { panic!() };
    assert_eq!(config.python.as_deref(), Some(dir.join("venv/bin/python").as_path()));
    // No state folder given: the worker fills in DATA_DIR/backend/NAME.
    assert_eq!(config.state_dir, PathBuf::new());

    let bad = "version: 1
clusters:
  - name: a
    file: clusters/a.yaml
    backend: {kind: spark-local, url: 'http://x', conf: {spark.master: 'local[8]', ui: 'x'}}
  - name: b
    file: clusters/b.yaml
    backend: {kind: local, spark_home: /opt/spark}
";
    let p = problems(bad, &dir);
    assert_eq!(
        p.iter().map(|p| p.split(": ").next().unwrap_or_default()).collect::<Vec<_>>(),
        [
            "clusters[0].backend.url",
            "clusters[0].backend.conf.spark.master",
            "clusters[0].backend.conf",
            "clusters[1].backend.spark_home"
        ],
        "{p:#?}"
    );
    assert!(p[0].contains("(this backend is `kind: spark-local`)"), "{p:?}");
    assert!(p[3].contains("is a spark-local backend's field (this backend is `kind: local`)"), "{p:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_spark_standalone_backend_needs_its_gateway_and_refuses_other_kinds_fields() {
    let dir = scratch("standalone");
    let text = "version: 1
clusters:
  - name: a
    file: clusters/a.yaml
    backend:
      kind: spark-standalone
      master_rest_url: http://spark-master:6066
      python: /usr/bin/python3
      driver_python: /opt/weir/driver-python
      state_dir: state
      poll_interval_ms: 250
      conf: {spark.executor.memory: 2g}
";
    let c = parse("server.yaml", text, &dir).unwrap_or_else(|e| panic!("{e}"));
    let BackendSettings::SparkStandalone { config, .. } = &c.backends["a"] else {
        panic!("{:?}", c.backends["a"])
    };
    assert_eq!(config.master_rest_url, "http://spark-master:6066");
    assert_eq!(config.ui_url(), "http://spark-master:8080");
    // Paths on the workers: as written, not from the server file's folder.
    assert_eq!(config.python.as_deref(), Some("/usr/bin/python3"));
    assert_eq!(config.driver_python.as_deref(), Some("/opt/weir/driver-python"));
    assert_eq!(config.state_dir, dir.join("state"));
    assert_eq!(config.poll_interval, Duration::from_millis(250));
    assert_eq!(config.conf["spark.executor.memory"], "2g");
    assert!(c.backends["a"].runs_spark());

    let bad = "version: 1
clusters:
  - name: a
    file: clusters/a.yaml
    backend: {kind: spark-standalone, spark_home: /opt/spark, url: 'http://x', conf: {spark.submit.deployMode: client}}
  - name: b
    file: clusters/b.yaml
    backend: {kind: spark-standalone, master_rest_url: 'spark://m:7077'}
  - name: c
    file: clusters/a.yaml
    backend: {kind: spark-local, master_rest_url: 'http://m:6066'}
";
    let p = problems(bad, &dir);
    assert_eq!(
        p.iter().map(|p| p.split(": ").next().unwrap_or_default()).collect::<Vec<_>>(),
        [
            "clusters[0].backend.url",
            "clusters[0].backend.spark_home",
            "clusters[0].backend.master_rest_url",
            "clusters[1].backend.master_rest_url",
            "clusters[2].backend.master_rest_url",
        ],
        "{p:#?}"
    );
    assert!(p[1].contains("the workers run their own Spark"), "{p:?}");
    assert!(p[2].contains("missing") && p[2].contains("spark.master.rest.enabled=true"), "{p:?}");
    assert!(p[3].contains("`spark://m:7077`") && p[3].contains("6066"), "{p:?}");
    assert!(
        p[4].contains("is a spark-standalone backend's field (this backend is `kind: spark-local`)"),
        "{p:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nodes: from_backend` reads a standalone master's workers (refreshed as Slurm's nodes are);
/// `placement: weir` is refused naming the field: the master places drivers itself.
#[test]
fn a_spark_standalone_backend_takes_its_nodes_from_the_master_but_never_placement_weir() {
    let dir = scratch("standalone-nodes");
    let text = "version: 1
clusters:
  - name: a
    file: clusters/a.yaml
    backend: {kind: spark-standalone, master_rest_url: 'http://m:6066', nodes: from_backend, nodes_refresh_seconds: 7, placement: backend}
  - name: b
    file: clusters/b.yaml
    backend: {kind: spark-standalone, master_rest_url: 'http://m:6066'}
";
    let c = parse("server.yaml", text, &dir).unwrap_or_else(|e| panic!("{e}"));
    let BackendSettings::SparkStandalone { nodes_refresh, .. } = &c.backends["a"] else {
        panic!("{:?}", c.backends["a"])
    };
    assert_eq!(*nodes_refresh, Some(Duration::from_secs(7)));
    assert_eq!(c.nodes_from_backend.get("a").map(String::as_str), Some("clusters[0].backend.nodes"));
    let BackendSettings::SparkStandalone { nodes_refresh, .. } = &c.backends["b"] else {
        panic!("{:?}", c.backends["b"])
    };
    assert_eq!(*nodes_refresh, None);
    assert!(!c.nodes_from_backend.contains_key("b"));

    let bad = "version: 1
clusters:
  - name: a
    file: clusters/a.yaml
    backend: {kind: spark-standalone, master_rest_url: 'http://m:6066', nodes: from_backend, placement: weir}
  - name: b
    file: clusters/b.yaml
    backend: {kind: spark-standalone, master_rest_url: 'http://m:6066', nodes_refresh_seconds: 5}
";
    let p = problems(bad, &dir);
    assert_eq!(
        p.iter().map(|p| p.split(": ").next().unwrap_or_default()).collect::<Vec<_>>(),
        ["clusters[0].backend.placement", "clusters[1].backend.nodes_refresh_seconds"],
        "{p:#?}"
    );
    assert!(p[0].contains("`weir` is not supported by a Spark standalone master"), "{p:?}");
    assert!(p[1].contains("only with `nodes: from_backend`"), "{p:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn object_store_reads_s3_with_a_credentials_file_and_names_bad_fields() {
    let dir = scratch("object-store");
    std::fs::write(dir.join("creds"), "[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n")
        .unwrap();
    let text = "version: 1
clusters:
  - {name: alpha, file: clusters/a.yaml}
object_store:
  s3: {endpoint: 'http://127.0.0.1:9000', region: eu-west-1, bucket: lake, credentials_file: creds}
  sweep_after_seconds: 600
  parallel_parts: 2
";
    let c = parse("server.yaml", text, &dir).expect("valid");
    let o = c.outputs.expect("object_store");
    match &o.store {
        weir_server::OutputStore::S3(s3) => {
            assert_eq!((s3.bucket.as_str(), s3.region.as_str()), ("lake", "eu-west-1"));
            assert_eq!(s3.credentials.access_key_id, "AK");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((o.sweep_after.as_secs(), o.commit.parallel_parts), (600, 2));

    let bad = "version: 1
clusters:
  - {name: alpha, file: clusters/a.yaml}
object_store:
  s3: {endpoint: '127.0.0.1:9000', bucket: Lake, credentials_file: creds}
  task_credentials_file: missing-creds
  sweep_every_seconds: 0
  part_size_bytes: 1024
";
    let p = problems(bad, &dir);
    let want = [
        "object_store.s3.bucket: bucket `Lake` is not a bucket name",
        "object_store.s3.endpoint: `127.0.0.1:9000`: expected http(s)://HOST[:PORT]",
        "object_store.task_credentials_file:",
        "object_store.sweep_every_seconds: 0",
        "object_store: object_store: part_size = \"1024\"",
    ];
    for w in want {
        assert!(p.iter().any(|p| p.starts_with(w)), "missing `{w}` in {p:#?}");
    }
    assert_eq!(p.len(), want.len(), "{p:#?}");
    let both = "version: 1\nclusters:\n  - {name: alpha, file: clusters/a.yaml}\nobject_store:\n  local: {root: out}\n  s3: {bucket: lake, credentials_file: creds}\n";
    assert_eq!(problems(both, &dir), vec!["object_store: give `local` or `s3`, not both".to_string()]);
    let unknown =
        "version: 1\nclusters:\n  - {name: alpha, file: clusters/a.yaml}\nobject_store:\n  gcs: {}\n";
    assert!(parse("server.yaml", unknown, &dir).unwrap_err().to_string().contains("gcs"));
}

#[test]
fn routes_with_a_policy_are_read_and_a_file_without_them_routes_as_before() {
    let dir = scratch("routes");
    let text = "version: 1
clusters:
  - {name: alpha, file: clusters/a.yaml}
  - {name: beta, file: clusters/b.yaml, drained: true}
routes:
  - key: workflow:etl
    policy: spill
    spill_after_seconds: 300
    candidates:
      - {cluster: alpha, queue: root.default}
      - {cluster: beta, queue: root.default}
  - key: project:ads.ranking:1
    policy: least_loaded
    candidates: [{cluster: beta, queue: root.default}, {cluster: alpha, queue: root.default}]
  - key: workflow:one
    candidates: [{cluster: alpha, queue: root.default}]
";
    let c = parse("server.yaml", text, &dir).unwrap();
    let r = &c.routing.routes;
    assert_eq!(r.len(), 3);
    assert_eq!(r[0].policy, weir_server::Policy::Spill { after: Duration::from_secs(300) });
    assert_eq!(r[0].candidates.iter().map(|c| c.cluster.as_str()).collect::<Vec<_>>(), ["alpha", "beta"]);
    assert_eq!(
        (r[1].key.as_str(), &r[1].policy),
        ("project:ads.ranking:1", &weir_server::Policy::LeastLoaded)
    );
    assert_eq!(r[2].policy, weir_server::Policy::First);
    assert_eq!(c.routing.drained.iter().collect::<Vec<_>>(), ["beta"]);
    // Without `routes:` nor `drained`: nothing of either.
    let plain = "version: 1\nclusters:\n  - {name: alpha, file: clusters/a.yaml}\n";
    assert_eq!(parse("server.yaml", plain, &dir).unwrap().routing, weir_server::RoutingSettings::default());
}

#[test]
fn route_problems_name_the_field_path_and_value() {
    let dir = scratch("bad-routes");
    let text = "version: 1
clusters:
  - {name: alpha, file: clusters/a.yaml}
  - {name: beta, file: clusters/b.yaml}
routes:
  - key: queue:etl
    policy: spill
    candidates: [{cluster: alpha, queue: root.default}, {cluster: gamma, queue: root.default}]
  - key: workflow:etl
    policy: least_loaded
    spill_after_seconds: 60
    candidates: [{cluster: alpha, queue: root.nope}]
  - key: workflow:etl
    candidates: [{cluster: beta, queue: root}, {cluster: beta, queue: root}]
  - key: project:ads:7
    candidates: []
";
    let p = problems(text, &dir);
    let want = [
        "routes[0].key: `queue:etl`: expected `workflow:NAME` or `project:PROJECT:TIER`",
        "routes[0].spill_after_seconds: missing",
        "routes[0].candidates[1].cluster: `gamma` is not a cluster of this file",
        "routes[1].candidates: one candidate: `policy: least_loaded` chooses among at least two",
        "routes[1].spill_after_seconds: 60: only with `policy: spill` (this route is `least_loaded`)",
        "routes[1].candidates[0].queue: `root.nope` is not a queue of",
        "routes[2].key: `workflow:etl` is routed twice",
        "routes[2].candidates[0].queue: `root` is a parent queue",
        "routes[2].candidates[1].queue: `root` is a parent queue",
        "routes[2].candidates[1]: beta root is a candidate twice",
        "routes[3].key: `project:ads:7`",
        "routes[3].candidates: empty",
    ];
    for w in want {
        assert!(p.iter().any(|p| p.starts_with(w)), "missing `{w}` in {p:#?}");
    }
    assert_eq!(p.len(), want.len(), "{p:#?}");
    // Unknown fields and policies are refused by path.
    let unknown = "version: 1\nclusters:\n  - {name: alpha, file: clusters/a.yaml}\nroutes:\n  - {key: workflow:x, policy: first, threshold: 3, candidates: []}\n";
    let p = problems(unknown, &dir);
    assert!(p[0].starts_with("routes[0].threshold: unknown field"), "{p:?}");
    let policy = "version: 1\nclusters:\n  - {name: alpha, file: clusters/a.yaml}\nroutes:\n  - {key: workflow:x, policy: random, candidates: []}\n";
    let p = problems(policy, &dir);
    assert!(p[0].starts_with("routes[0].policy:") && p[0].contains("random"), "{p:?}");
}

#[test]
fn the_advisor_is_off_by_default_and_its_schedule_and_problems_are_read() {
    let dir = scratch("advise");
    let head = "version: 1\nclusters:\n  - {name: alpha, file: clusters/a.yaml}\n  - {name: beta, file: clusters/b.yaml}\n";
    assert_eq!(parse("server.yaml", head, &dir).unwrap().advisor, weir_server::AdvisorSettings::default());
    let daily =
        format!("{head}advise: {{at: \"03:30\", window: 3d, candidates: 4, prices: {{alpha: 2.5}}}}\n");
    let a = parse("server.yaml", &daily, &dir).unwrap().advisor;
    assert_eq!(a.schedule, Some(weir_server::AdviceSchedule::DailyAt { minute: 210 }));
    assert_eq!((a.window, a.candidates), (Duration::from_secs(3 * 86_400), 4));
    assert_eq!(a.prices.get("alpha"), Some(&2.5));
    let every = format!("{head}advise: {{every: 6h}}\n");
    assert_eq!(
        parse("server.yaml", &every, &dir).unwrap().advisor.schedule,
        Some(weir_server::AdviceSchedule::Every(Duration::from_secs(6 * 3600)))
    );
    let bad = format!(
        "{head}advise: {{every: 30s, at: \"25:00\", window: 0s, candidates: 0, prices: {{gamma: 1, beta: -1}}}}\n"
    );
    let p = problems(&bad, &dir);
    for w in [
        "advise.at: give `every` or `at`, not both",
        "advise.window: 0",
        "advise.candidates: 0",
        "advise.prices.gamma: no cluster of this file is named `gamma`",
        "advise.prices.beta: -1",
    ] {
        assert!(p.iter().any(|p| p.starts_with(w)), "missing `{w}` in {p:#?}");
    }
    let p = problems(&format!("{head}advise: {{every: 30s}}\n"), &dir);
    assert_eq!(p, vec!["advise.every: `30s`: advise at most once a minute".to_string()]);
    let p = problems(&format!("{head}advise: {{at: \"7:00\"}}\n"), &dir);
    assert!(p[0].starts_with("advise.at: `7:00`: a time of day is HH:MM"), "{p:?}");
}
