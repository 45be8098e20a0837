use super::*;

const LIVE: &str = "version: 1
nodes:
  - {count: 2, resources: {cpu: 8000, memory: 16g}}
queues:
  - name: ads
    children: [{name: tier1, tier: 1}, {name: tier3, tier: 3}]
  - {name: default, tier: 3}
";

fn live() -> ClusterConfig {
    ClusterConfig::from_yaml("live", LIVE).expect("live cluster")
}

fn route(key: &str, cluster: &str, queue: &str) -> Route {
    Route { key: key.into(), cluster: cluster.into(), queue: queue.into() }
}

fn refusals(text: &str, routes: Option<&[Route]>) -> Vec<Refusal> {
    match check("c", &live(), 3, text, routes, &[]) {
        Ok(_) => panic!("the plan should be refused:\n{text}"),
        Err(r) => r,
    }
}

#[test]
fn a_plan_that_changes_settings_shows_each_change() {
    let planned = LIVE
        .replace("{name: tier1, tier: 1}", "{name: tier1, tier: 1, weight: 13, max_running_apps: 4}")
        .replace("{name: default, tier: 3}", "{name: default, tier: 3, weight: 0}");
    let current_routes = vec![
        RouteRow { key: "workflow:old".into(), cluster: "c".into(), queue: "root.default".into() },
        RouteRow { key: "workflow:elsewhere".into(), cluster: "d".into(), queue: "root.x".into() },
    ];
    let routes = [route("workflow:report", "c", "root.ads.tier1")];
    let plan =
        check("c", &live(), 3, &planned, Some(&routes), &current_routes).unwrap_or_else(|e| panic!("{e:?}"));
    let changes: Vec<(String, String, String, String)> = plan
        .diff
        .queues
        .iter()
        .map(|c| (c.queue.clone(), c.field.clone(), c.from.clone(), c.to.clone()))
        .collect();
    assert_eq!(
        changes,
        [
            ("root.ads.tier1".into(), "weight".into(), "1".into(), "13".into()),
            ("root.ads.tier1".into(), "max_running_apps".into(), "-".into(), "4".into()),
            ("root.default".into(), "weight".into(), "1".into(), "0".into()),
        ]
    );
    let routes: Vec<(String, Option<String>, Option<String>)> =
        plan.diff.routes.iter().map(|r| (r.key.clone(), r.from.clone(), r.to.clone())).collect();
    assert_eq!(
        routes,
        [
            ("workflow:old".into(), Some("c:root.default".into()), None),
            ("workflow:report".into(), None, Some("c:root.ads.tier1".into())),
        ],
        "the other cluster's route is not touched"
    );
    assert_eq!(plan.diff.base_version, 3);
}

#[test]
fn unknown_and_missing_queues_are_refused() {
    let planned = LIVE.replace("{name: tier3, tier: 3}", "{name: tier2, tier: 2}");
    let r = refusals(&planned, None);
    let messages: Vec<&str> = r.iter().map(|p| p.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("unknown queue") && m.contains("root.ads.tier2")),
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m.contains("leaves out queue root.ads.tier3")), "{messages:?}");
}

#[test]
fn capacities_that_do_not_fit_are_refused() {
    // 20 cores of min in a 16-core cluster: each min fits its queue, together they do not.
    let planned = LIVE
        .replace("{name: tier1, tier: 1}", "{name: tier1, tier: 1, min: {cpu: 12000, memory: 1g}}")
        .replace("{name: tier3, tier: 3}", "{name: tier3, tier: 3, min: {cpu: 8000, memory: 1g}}");
    let r = refusals(&planned, None);
    assert!(
        r.iter().any(|p| p.path == "config.queues.root.ads.children" && p.message.contains("add up to")),
        "{r:?}"
    );
}

#[test]
fn a_min_above_its_own_max_is_refused_by_the_files_validation() {
    // The cluster file's own validation refuses it before the plan's capacity checks run, with
    // the path of the field in the planned file.
    let planned = LIVE.replace(
        "{name: tier3, tier: 3}",
        "{name: tier3, tier: 3, min: {cpu: 8000, memory: 1g}, max: {cpu: 4000, memory: 8g}}",
    );
    let r = refusals(&planned, None);
    assert!(
        r.iter().any(|p| p.path == "queues.ads.children.tier3.min" && p.message.contains("above max")),
        "{r:?}"
    );
}

#[test]
fn resized_clusters_and_bad_routes_are_refused() {
    let r = refusals(&LIVE.replace("count: 2", "count: 3"), None);
    assert!(r[0].message.contains("does not resize"), "{r:?}");
    let routes = [route("workflow:w", "other", "root.ads"), route("nonsense", "c", "root.ads.tier1")];
    let r = refusals(LIVE, Some(&routes));
    let paths: Vec<&str> = r.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(paths, ["routes.0.cluster", "routes.0.queue", "routes.1.key"], "{r:?}");
}

#[test]
fn a_file_that_does_not_validate_says_where() {
    let r = refusals(&LIVE.replace("{name: default, tier: 3}", "{name: default, tier: 3, weight: -1}"), None);
    assert!(r.iter().any(|p| p.path.contains("default.weight")), "{r:?}");
}

/// The operator's comments in the file in force survive a plan written without any (as `weir
/// plan` writes it: block style, its own opening line), by queue name and setting key; the
/// result reads as the planned configuration.
#[test]
fn an_applied_plan_keeps_the_comments_of_the_file_in_force() {
    let original = "# Our cluster: two nodes.
# Ask ops before changing nodes.
version: 1
nodes:
  - {count: 2, resources: {cpu: 8000, memory: 16g}}
queues:
  # Ads: the revenue reports.
  - name: ads
    children: [{name: tier1, tier: 1}, {name: tier3, tier: 3}]
  - {name: default, tier: 3}  # whatever nobody routes
";
    let planned = "# weir cluster file, written by weir. Check it with: weir validate cluster.yaml
version: 1
nodes:
- count: 2
  resources:
    cpu: 8000
    memory: 16g
queues:
- name: ads
  children:
  - name: tier1
    tier: 1
    weight: 3.0
  - name: tier3
    tier: 3
- name: default
  tier: 3
";
    let kept = keep_comments(original, planned);
    assert_eq!(
        kept,
        "# Our cluster: two nodes.
# Ask ops before changing nodes.
version: 1
nodes:
- count: 2
  resources:
    cpu: 8000
    memory: 16g
queues:
  # Ads: the revenue reports.
- name: ads
  children:
  - name: tier1
    tier: 1
    weight: 3.0
  - name: tier3
    tier: 3
- name: default  # whatever nobody routes
  tier: 3
"
    );
    let a = ClusterConfig::from_yaml("config", &kept).expect("kept");
    assert_eq!(a, ClusterConfig::from_yaml("config", planned).expect("planned"));
    assert_eq!(
        a.queues[a.find(&weir_model::QueuePath::parse("root.ads.tier1").expect("path")).expect("q")].weight,
        3.0
    );
    // A plan with comments of its own, or an original without any, is kept as it is.
    let commented = planned.replace("  - name: tier3", "  # mine\n  - name: tier3");
    assert_eq!(keep_comments(original, &commented), commented);
    assert_eq!(keep_comments(LIVE, planned), planned);
}
