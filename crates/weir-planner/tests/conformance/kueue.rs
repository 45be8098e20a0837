//! Kueue's rules for Cohort, ClusterQueue, LocalQueue and ResourceFlavor objects, transcribed
//! from the CRDs of each release (`config/components/crd/bases/kueue.x-k8s.io_*.yaml`: served
//! versions, field names, patterns, maxItems, CEL rules) and the webhooks
//! (`pkg/webhooks/clusterqueue_webhook.go`: resource names match coveredResources in order,
//! quantities not negative, borrowing/lending limits only with a cohort or parent,
//! lendingLimit ≤ nominalQuota; `common.go`: fair-sharing weight 0 or above 1e-9), plus the
//! cluster's size: the quotas must fit in it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::quantity;

/// A DNS-1123 subdomain, as the CRDs' reference patterns (`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.…)*$`).
fn dns_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// Kubernetes quantity pattern of the CRDs.
fn quantity_ok(s: &str) -> bool {
    let num_end =
        s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (n, suffix) = s.split_at(num_end);
    n.parse::<f64>().is_ok()
        && ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"]
            .contains(&suffix)
}

fn keys(v: &Value, allowed: &[&str], at: &str, out: &mut Vec<String>) {
    for k in v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
        if !allowed.contains(&k.as_str()) {
            out.push(format!("{at}: field `{k}` is not in the CRD schema of this version"));
        }
    }
}

pub fn check(text: &str, version: (u32, u32), cluster: (u64, u64)) -> Vec<String> {
    let mut out = Vec::new();
    let docs: Vec<Value> = match serde_saphyr::from_str_multiple::<Value, Vec<Value>>(text) {
        Ok(d) => d,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    let (cohort_api, queue_api, parent_field, cohort_field, max_items) = if version < (0, 13) {
        ("kueue.x-k8s.io/v1alpha1", "kueue.x-k8s.io/v1beta1", "parent", "cohort", 16)
    } else if version < (0, 15) {
        ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta1", "parentName", "cohort", 16)
    } else {
        ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta2", "parentName", "cohortName", 64)
    };
    let name_of = |d: &Value| d["metadata"]["name"].as_str().unwrap_or("").to_string();
    let of_kind = |k: &str| docs.iter().filter(|d| d["kind"] == k).collect::<Vec<_>>();
    let cohorts: BTreeSet<String> = of_kind("Cohort").iter().map(|d| name_of(d)).collect();
    let cqs: BTreeSet<String> = of_kind("ClusterQueue").iter().map(|d| name_of(d)).collect();
    let flavors: BTreeSet<String> = of_kind("ResourceFlavor").iter().map(|d| name_of(d)).collect();
    let mut total = [0u64, 0u64];
    for d in &docs {
        let kind = d["kind"].as_str().unwrap_or("");
        let name = name_of(d);
        let at = format!("{kind} {name}");
        if !dns_ok(&name) {
            out.push(format!("{at}: metadata.name is not a DNS subdomain"));
        }
        let want = if kind == "Cohort" { cohort_api } else { queue_api };
        if d["apiVersion"] != want {
            out.push(format!("{at}: apiVersion {} is not served as {want} by this release", d["apiVersion"]));
        }
        let spec = &d["spec"];
        match kind {
            "ResourceFlavor" => {
                keys(spec, &["nodeLabels", "nodeTaints", "tolerations", "topologyName"], &at, &mut out)
            }
            "LocalQueue" => {
                keys(spec, &["clusterQueue", "stopPolicy", "fairSharing"], &at, &mut out);
                if d["metadata"]["namespace"].as_str().is_none() {
                    out.push(format!("{at}: a LocalQueue needs a namespace"));
                }
                if !cqs.contains(spec["clusterQueue"].as_str().unwrap_or("")) {
                    out.push(format!("{at}: clusterQueue {} does not exist", spec["clusterQueue"]));
                }
            }
            "Cohort" => {
                keys(spec, &[parent_field, "resourceGroups", "fairSharing"], &at, &mut out);
                let parent = spec[parent_field].as_str();
                if let Some(p) = parent {
                    if !dns_ok(p) || !cohorts.contains(p) {
                        out.push(format!("{at}: {parent_field} {p} is not an existing cohort"));
                    }
                }
                groups(
                    &spec["resourceGroups"],
                    parent.is_some(),
                    false,
                    max_items,
                    &flavors,
                    &at,
                    &mut out,
                    &mut [0, 0],
                );
                weight(&spec["fairSharing"], &at, &mut out);
            }
            "ClusterQueue" => {
                keys(
                    spec,
                    &[
                        cohort_field,
                        "namespaceSelector",
                        "queueingStrategy",
                        "fairSharing",
                        "preemption",
                        "resourceGroups",
                        "flavorFungibility",
                        "stopPolicy",
                        "admissionChecksStrategy",
                        "admissionScope",
                    ],
                    &at,
                    &mut out,
                );
                let cohort = spec[cohort_field].as_str();
                if let Some(c) = cohort {
                    if !dns_ok(c) {
                        out.push(format!("{at}: {cohort_field} {c} is not a DNS subdomain"));
                    }
                }
                if !["StrictFIFO", "BestEffortFIFO"]
                    .contains(&spec["queueingStrategy"].as_str().unwrap_or("BestEffortFIFO"))
                {
                    out.push(format!("{at}: queueingStrategy {}", spec["queueingStrategy"]));
                }
                if let Some(r) = spec["preemption"]["reclaimWithinCohort"].as_str() {
                    if !["Never", "LowerPriority", "Any"].contains(&r) {
                        out.push(format!("{at}: reclaimWithinCohort {r}"));
                    }
                }
                groups(
                    &spec["resourceGroups"],
                    cohort.is_some(),
                    true,
                    max_items,
                    &flavors,
                    &at,
                    &mut out,
                    &mut total,
                );
                weight(&spec["fairSharing"], &at, &mut out);
            }
            other => out.push(format!("unexpected kind {other}")),
        }
    }
    if total[0] > cluster.0 || total[1] > cluster.1 {
        out.push(format!("the ClusterQueues' nominal quotas {total:?} exceed the cluster {cluster:?}"));
    }
    out
}

fn weight(fs: &Value, at: &str, out: &mut Vec<String>) {
    if let Some(w) = fs.get("weight") {
        let s = w.as_str().map(str::to_string).unwrap_or_else(|| w.to_string());
        match s.parse::<f64>() {
            Ok(x) if x == 0.0 || x > 1e-9 => {}
            _ if quantity_ok(&s) => {}
            _ => out.push(format!("{at}: fairSharing.weight `{s}` is negative or collapses to 0")),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn groups(
    rgs: &Value,
    has_parent: bool,
    is_cq: bool,
    max_items: usize,
    flavors: &BTreeSet<String>,
    at: &str,
    out: &mut Vec<String>,
    total: &mut [u64; 2],
) {
    let rgs = rgs.as_array().cloned().unwrap_or_default();
    if rgs.len() > 16 {
        out.push(format!("{at}: more than 16 resourceGroups"));
    }
    for rg in rgs {
        keys(&rg, &["coveredResources", "flavors"], at, out);
        let covered: Vec<String> = rg["coveredResources"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|c| c.as_str().unwrap_or("").to_string())
            .collect();
        if covered.is_empty() || covered.len() > max_items {
            out.push(format!("{at}: coveredResources must have 1 to {max_items} items"));
        }
        for f in rg["flavors"].as_array().cloned().unwrap_or_default() {
            keys(&f, &["name", "resources"], at, out);
            if !flavors.contains(f["name"].as_str().unwrap_or("")) {
                out.push(format!("{at}: flavor {} has no ResourceFlavor", f["name"]));
            }
            let res = f["resources"].as_array().cloned().unwrap_or_default();
            if res.len() != covered.len() {
                out.push(format!("{at}: a flavor must list as many resources as coveredResources"));
            }
            for (i, r) in res.iter().enumerate() {
                keys(r, &["name", "nominalQuota", "borrowingLimit", "lendingLimit"], at, out);
                if covered.get(i).map(String::as_str) != r["name"].as_str() {
                    out.push(format!("{at}: resource {} does not match coveredResources[{i}]", r["name"]));
                }
                for field in ["nominalQuota", "borrowingLimit", "lendingLimit"] {
                    if let Some(q) = r.get(field) {
                        let s = q.as_str().map(str::to_string).unwrap_or_else(|| q.to_string());
                        if !quantity_ok(&s) || s.starts_with('-') {
                            out.push(format!("{at}: {field} `{s}` is not a non-negative quantity"));
                        }
                        if field != "nominalQuota" && !has_parent {
                            out.push(format!(
                                "{at}: {field} needs a {}",
                                if is_cq { "cohort" } else { "parent" }
                            ));
                        }
                    }
                }
                if r.get("nominalQuota").is_none() {
                    out.push(format!("{at}: nominalQuota is required"));
                }
                let nominal = r["nominalQuota"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| r["nominalQuota"].to_string());
                if is_cq {
                    if let (Some(l), Some(n)) = (
                        r.get("lendingLimit").and_then(|l| quantity(l.as_str().unwrap_or(""), false)),
                        quantity(&nominal, false),
                    ) {
                        if l > n {
                            out.push(format!("{at}: lendingLimit above nominalQuota"));
                        }
                    }
                    match r["name"].as_str() {
                        Some("cpu") => total[0] += quantity(&nominal, false).unwrap_or(0),
                        Some("memory") => total[1] += quantity(&nominal, true).unwrap_or(0),
                        _ => {}
                    }
                }
            }
        }
    }
}
