//! YuniKorn's rules for `queues.yaml` (yunikorn-core `pkg/common/configs`: `config.go` decoded
//! with KnownFields(true), `configvalidator.go`: QueueNameRegExp, checkQueueResource,
//! checkQueueMaxApplications, checkLimit, checkPlacementRule, checkQueuesStructure), plus the
//! cluster's own size: the top-level guarantees must fit in it.

use serde_json::Value;

use super::quantity;

fn keys_ok(v: &Value, allowed: &[&str], at: &str, out: &mut Vec<String>) {
    if let Some(m) = v.as_object() {
        for k in m.keys() {
            if !allowed.contains(&k.as_str()) {
                out.push(format!("{at}: unknown field `{k}` (YuniKorn decodes strictly)"));
            }
        }
    } else {
        out.push(format!("{at}: not a map"));
    }
}

fn name_ok(n: &str) -> bool {
    !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || "_:#/@-".contains(c))
}

fn user_ok(n: &str) -> bool {
    let body = n.strip_suffix('$').unwrap_or(n);
    body.chars().next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && body.chars().all(|c| c.is_ascii_alphanumeric() || ":#/_.@-".contains(c))
}

/// (cpu millicores, memory MiB, other) of a resource map; `None` for components not given.
type Res = [Option<u64>; 2];

fn res(v: &Value, at: &str, out: &mut Vec<String>) -> Res {
    let mut r = [None, None];
    if let Some(m) = v.as_object() {
        for (k, val) in m {
            let s = val.as_str().map(str::to_string).unwrap_or_else(|| val.to_string());
            match k.as_str() {
                "vcore" => {
                    r[0] = quantity(&s, false).or_else(|| {
                        out.push(format!("{at}.vcore: `{s}` is not a quantity"));
                        None
                    })
                }
                "memory" => {
                    if s.chars().all(|c| c.is_ascii_digit()) {
                        out.push(format!("{at}.memory: `{s}` has no unit, so YuniKorn reads bytes"));
                    }
                    r[1] = quantity(&s, true).or_else(|| {
                        out.push(format!("{at}.memory: `{s}` is not a quantity"));
                        None
                    });
                }
                _ if s.parse::<u64>().is_err() => out.push(format!("{at}.{k}: `{s}` is not a count")),
                _ => {}
            }
        }
    }
    r
}

fn fits(small: &Res, big: &Res) -> bool {
    small.iter().zip(big).all(|(s, b)| match (s, b) {
        (Some(s), Some(b)) => s <= b,
        _ => true,
    })
}

pub fn check(text: &str, cluster: (u64, u64)) -> Vec<String> {
    let mut out = Vec::new();
    let doc: Value = match serde_saphyr::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![format!("not YAML: {e}")],
    };
    keys_ok(&doc, &["partitions", "checksum"], "top", &mut out);
    for p in doc["partitions"].as_array().cloned().unwrap_or_default() {
        keys_ok(
            &p,
            &[
                "name",
                "queues",
                "placementrules",
                "limits",
                "preemption",
                "nodesortpolicy",
                "usergroupresolver",
            ],
            "partition",
            &mut out,
        );
        let queues = p["queues"].as_array().cloned().unwrap_or_default();
        if queues.len() != 1 || queues[0]["name"] != "root" {
            out.push("the partition must hold exactly the root queue".into());
            continue;
        }
        let root = &queues[0];
        if root.get("resources").is_some() {
            out.push("root queue must not have resource limits set".into());
        }
        let g = queue(root, "root", &[None, None], None, &mut out);
        if !fits(&g, &[Some(cluster.0), Some(cluster.1)]) {
            out.push(format!("the top-level guarantees {g:?} exceed the cluster {cluster:?}"));
        }
        for r in p["placementrules"].as_array().cloned().unwrap_or_default() {
            rule(&r, root, &mut out);
        }
    }
    out
}

/// Checks `q` and its subtree; returns its guarantee (the children's sum where it gives none).
fn queue(q: &Value, path: &str, parent_max: &Res, parent_apps: Option<u64>, out: &mut Vec<String>) -> Res {
    keys_ok(
        q,
        &[
            "name",
            "parent",
            "resources",
            "maxapplications",
            "properties",
            "adminacl",
            "submitacl",
            "childtemplate",
            "queues",
            "limits",
        ],
        path,
        out,
    );
    for acl in ["submitacl", "adminacl"] {
        if let Some(a) = q[acl].as_str() {
            if a.split_whitespace().count() > 2 {
                out.push(format!("{path}.{acl}: more than users and groups"));
            }
        }
    }
    let g = res(&q["resources"]["guaranteed"], &format!("{path}.guaranteed"), out);
    let mut m = res(&q["resources"]["max"], &format!("{path}.max"), out);
    if !fits(&g, &m) {
        out.push(format!("{path}: guaranteed {g:?} is larger than max {m:?}"));
    }
    if !fits(&m, parent_max) {
        out.push(format!("{path}: max {m:?} above the parent's {parent_max:?}"));
    }
    for i in 0..2 {
        if m[i].is_none() {
            m[i] = parent_max[i];
        }
    }
    let apps = q["maxapplications"].as_u64();
    if let Some(p) = parent_apps {
        match apps {
            None | Some(0) => {
                out.push(format!("{path}: maxapplications missing under a parent that sets it"))
            }
            Some(a) if a > p => out.push(format!("{path}: maxapplications {a} above the parent's {p}")),
            _ => {}
        }
    }
    if let Some(props) = q["properties"].as_object() {
        for (k, v) in props {
            let s = v.as_str().unwrap_or("");
            let ok = match k.as_str() {
                "application.sort.policy" => ["fifo", "fair"].contains(&s),
                "preemption.policy" => ["default", "fence", "disabled"].contains(&s),
                "priority.policy" => ["default", "fence"].contains(&s),
                "priority.offset" => s.parse::<i32>().is_ok(),
                "preemption.delay" => go_duration(s),
                _ => false,
            };
            if !ok {
                out.push(format!("{path}: property {k}: `{s}` is not valid"));
            }
        }
    }
    let mut seen_user_wildcard = false;
    for l in q["limits"].as_array().cloned().unwrap_or_default() {
        keys_ok(
            &l,
            &["limit", "users", "groups", "maxresources", "maxapplications"],
            &format!("{path}.limits"),
            out,
        );
        for u in l["users"].as_array().cloned().unwrap_or_default() {
            let u = u.as_str().unwrap_or("");
            if u == "*" {
                seen_user_wildcard = true;
            } else if seen_user_wildcard {
                out.push(format!("{path}: user limit {u} after the wildcard"));
            } else if !user_ok(u) {
                out.push(format!("{path}: `{u}` is not a user name"));
            }
        }
        if l["maxapplications"].as_u64().unwrap_or(0) == 0 && l.get("maxresources").is_none() {
            out.push(format!("{path}: a limit with neither maxapplications nor maxresources"));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    let mut sum: Res = [None, None];
    for c in q["queues"].as_array().cloned().unwrap_or_default() {
        let n = c["name"].as_str().unwrap_or("").to_string();
        if !name_ok(&n) {
            out.push(format!("{path}: child name `{n}` does not match ^[a-zA-Z0-9_:#/@-]{{1,64}}$"));
        }
        if !names.insert(n.to_ascii_lowercase()) {
            out.push(format!("{path}: duplicate child name `{n}`"));
        }
        let cg = queue(&c, &format!("{path}.{n}"), &m, apps.or(parent_apps), out);
        for i in 0..2 {
            if let Some(x) = cg[i] {
                sum[i] = Some(sum[i].unwrap_or(0) + x);
            }
        }
    }
    if !fits(&sum, &g) {
        out.push(format!("{path}: guaranteed {g:?} is smaller than the children's sum {sum:?}"));
    }
    if !fits(&sum, &m) {
        out.push(format!("{path}: max {m:?} is smaller than the children's guaranteed sum {sum:?}"));
    }
    if g.iter().all(Option::is_none) {
        sum
    } else {
        g
    }
}

fn go_duration(s: &str) -> bool {
    let n = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &s[n.len()..];
    n.parse::<u64>().is_ok_and(|x| x > 0) && ["ns", "us", "ms", "s", "m", "h"].contains(&unit)
}

fn rule(r: &Value, root: &Value, out: &mut Vec<String>) {
    keys_ok(r, &["name", "create", "filter", "parent", "value"], "placement rule", out);
    let name = r["name"].as_str().unwrap_or("");
    if !["provided", "user", "fixed", "tag", "recovery"].contains(&name) {
        out.push(format!("placement rule `{name}` does not exist"));
    }
    if let Some(p) = r.get("parent") {
        rule(p, root, out);
        if p["name"] == "fixed" {
            if let Some(q) = find(root, p["value"].as_str().unwrap_or("")) {
                if q["parent"] != true && q.get("queues").is_none() {
                    out.push(format!("placement rule: fixed parent {} is a leaf", p["value"]));
                }
            }
        }
    } else if name == "fixed" {
        let path = r["value"].as_str().unwrap_or("");
        match find(root, path) {
            Some(q) if q.get("queues").is_some() || q["parent"] == true => {
                out.push(format!("placement rule: fixed {path} is not a leaf"))
            }
            None if r["create"] != true => {
                out.push(format!("placement rule: fixed {path} does not exist and create is false"))
            }
            _ => {}
        }
    }
}

fn find<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    if parts.next() != Some("root") {
        return None;
    }
    let mut q = root;
    for p in parts {
        q = q["queues"]
            .as_array()?
            .iter()
            .find(|c| c["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case(p)))?;
    }
    Some(q)
}
