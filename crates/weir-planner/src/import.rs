//! Import a Hadoop YARN Fair Scheduler allocation file (`fair-scheduler.xml`) as a weir cluster
//! file, so a YARN user can bring their queue layout.
//!
//! Read per queue (`<queue>` or the legacy `<pool>`): `weight`, `minResources`, `maxResources`
//! (`"X mb, Y vcores"`, `"X%"`, `"X% cpu, Y% memory"` with equal percentages, or
//! `"memory-mb=X, vcores=Y[, yarn.io/gpu=Z]"`), `maxRunningApps`, `maxAMShare`,
//! `schedulingPolicy`, `allowPreemptionFrom`, `fairSharePreemptionTimeout`,
//! `fairSharePreemptionThreshold`, `minSharePreemptionTimeout`. Top level: `userMaxAppsDefault`,
//! `defaultFairSharePreemptionTimeout`, `defaultMinSharePreemptionTimeout`,
//! `defaultFairSharePreemptionThreshold`, `defaultQueueSchedulingPolicy`, `queueMaxAppsDefault`,
//! `queueMaxAMShareDefault`, `queueMaxResourcesDefault` (applied to each queue that does not set
//! its own, as YARN does). Everything else (ACLs, users, placement policy, reservations) has no
//! weir equivalent and is listed in the notes. The allocation file has no nodes: the caller
//! supplies them.

use quick_xml::events::Event;
use quick_xml::Reader;
use weir_model::cluster_file::{LimitSpec, NodeGroupSpec, PreemptionSpec};
use weir_model::{ClusterConfig, ClusterFile, Duration, PartialResources, Policy, Problem, QueueSpec};

use crate::error::PlanError;

/// What the allocation file cannot say.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    /// The cluster's nodes (an allocation file has none).
    pub nodes: Vec<NodeGroupSpec>,
    /// Give leaves named `tier1`, `tier2`, `tier3` that tier, writing their preemption settings
    /// explicitly so the tier defaults change nothing but priority and planning percentile.
    pub tiers_from_names: bool,
    /// Whether preemption is on (`yarn.scheduler.fair.preemption` in yarn-site.xml).
    pub preemption: bool,
}

/// The imported cluster file and what was left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub file: ClusterFile,
    /// One sentence per element that has no weir equivalent and was ignored.
    pub notes: Vec<String>,
}

/// Parse `text` (named `file` in errors) as an allocation file.
pub fn import_yarn_fair(file: &str, text: &str, options: &ImportOptions) -> Result<Imported, PlanError> {
    let root = parse_dom(file, text)?;
    let mut cx = Cx { problems: Vec::new(), notes: Vec::new(), defaults: Defaults::default() };
    if root.name != "allocations" {
        cx.problem(
            "",
            format!("the document element is <{}>; an allocation file has <allocations>", root.name),
        );
    }
    let mut out = ClusterFile { version: 1, nodes: options.nodes.clone(), ..Default::default() };
    let mut pre = PreemptionSpec { enabled: Some(options.preemption), ..Default::default() };
    let mut top_queues = Vec::new();
    for e in &root.children {
        let at = "allocations";
        match e.name.as_str() {
            "queue" | "pool" => top_queues.push(e),
            "userMaxAppsDefault" => out.scheduler.user_max_running_apps = cx.count(at, e),
            "defaultFairSharePreemptionTimeout" => pre.fair_share_preemption_timeout = cx.secs(at, e),
            "defaultMinSharePreemptionTimeout" => pre.min_share_preemption_timeout = cx.secs(at, e),
            "defaultFairSharePreemptionThreshold" => pre.fair_share_preemption_threshold = cx.float(at, e),
            "defaultQueueSchedulingPolicy" => cx.defaults.policy = cx.policy(at, e),
            "queueMaxAppsDefault" => cx.defaults.max_running_apps = cx.count(at, e),
            "queueMaxAMShareDefault" => cx.defaults.max_am_share = cx.am_share(at, e),
            "queueMaxResourcesDefault" => cx.defaults.max = cx.limit(at, e),
            other => cx.notes.push(format!("<{other}> is ignored: weir has no equivalent")),
        }
    }
    // A single top-level <queue name="root"> is the root itself.
    let mut root_allows = true;
    let children: Vec<&Elem> = match top_queues.as_slice() {
        [only] if only.attr("name") == Some("root") => {
            let root_q = cx.queue("root", only, true);
            root_allows = root_q.allow_preemption_from.unwrap_or(true);
            if let Some(p) = root_q.policy {
                out.scheduler.root_policy = p;
            }
            pre.fair_share_preemption_timeout =
                root_q.fair_share_preemption_timeout.or(pre.fair_share_preemption_timeout);
            pre.min_share_preemption_timeout =
                root_q.min_share_preemption_timeout.or(pre.min_share_preemption_timeout);
            pre.fair_share_preemption_threshold =
                root_q.fair_share_preemption_threshold.or(pre.fair_share_preemption_threshold);
            only.children.iter().filter(|c| c.is_queue()).collect()
        }
        _ => top_queues,
    };
    out.queues = children
        .iter()
        .map(|c| {
            let mut q = cx.tree("root", c, root_allows);
            // weir's root always allows preemption; a root that forbids it forbids it below.
            if !root_allows {
                q.allow_preemption_from = Some(false);
            }
            q
        })
        .collect();
    if cx.defaults.policy.is_some_and(|p| p != Policy::Fifo) && out.scheduler.root_policy == Policy::Fair {
        out.scheduler.root_policy = cx.defaults.policy.unwrap_or_default();
    }
    out.scheduler.preemption = Some(pre);
    if options.nodes.is_empty() {
        out.nodes = vec![NodeGroupSpec {
            count: 1,
            resources: PartialResources { cpu: Some(16_000), memory: Some(65_536), gpu: None },
            label: None,
        }];
        cx.notes.push(
            "an allocation file has no nodes: one 16-core, 64 GiB node was written; edit `nodes`".into(),
        );
    }
    if !cx.problems.is_empty() {
        return Err(PlanError::Import { file: file.to_string(), problems: cx.problems });
    }
    if options.tiers_from_names {
        tiers_from_names(file, &mut out)?;
    }
    ClusterConfig::from_file(file, out.clone())
        .map_err(|e| PlanError::Import { file: file.to_string(), problems: e.problems() })?;
    Ok(Imported { file: out, notes: cx.notes })
}

/// Set `tier: N` on leaves named `tierN` (N = 1..3), keeping every resolved setting but priority.
fn tiers_from_names(file: &str, out: &mut ClusterFile) -> Result<(), PlanError> {
    let before = ClusterConfig::from_file(file, out.clone())
        .map_err(|e| PlanError::Import { file: file.to_string(), problems: e.problems() })?;
    fn walk(specs: &mut [QueueSpec], parent: &weir_model::QueuePath, before: &ClusterConfig) {
        for s in specs {
            let path = parent.child(&s.name);
            if s.children.is_empty() {
                let tier =
                    s.name.to_ascii_lowercase().strip_prefix("tier").and_then(|n| n.parse::<u8>().ok());
                if let (Some(t @ 1..=3), Some(ix)) = (tier, before.find(&path)) {
                    let q = &before.queues[ix];
                    s.tier = Some(t);
                    if q.allow_preemption_from != weir_model::cluster::builtin_tier(t).allow_preemption_from {
                        s.allow_preemption_from = Some(q.allow_preemption_from);
                    }
                }
            } else {
                walk(&mut s.children, &path, before);
            }
        }
    }
    walk(&mut out.queues, &weir_model::QueuePath::root(), &before);
    Ok(())
}

#[derive(Default)]
struct Defaults {
    policy: Option<Policy>,
    max_running_apps: Option<u32>,
    max_am_share: Option<f64>,
    max: Option<LimitSpec>,
}

struct Cx {
    problems: Vec<Problem>,
    notes: Vec<String>,
    defaults: Defaults,
}

impl Cx {
    fn problem(&mut self, path: &str, message: String) {
        self.problems.push(Problem { path: path.to_string(), message });
    }

    /// The queue `e` under `parent` (a dotted path) and its subtree.
    fn tree(&mut self, parent: &str, e: &Elem, parent_allows: bool) -> QueueSpec {
        let Some(name) = e.attr("name").map(str::to_string) else {
            self.problem(parent, format!("a <{}> at byte {} has no name attribute", e.name, e.pos));
            return QueueSpec::default();
        };
        let path = format!("{parent}.{name}");
        let mut q = self.queue(&path, e, parent_allows);
        q.name = name;
        let allows = q.allow_preemption_from.unwrap_or(parent_allows);
        q.children =
            e.children.iter().filter(|c| c.is_queue()).map(|c| self.tree(&path, c, allows)).collect();
        let leaf = q.children.is_empty();
        if leaf && e.attr("type") == Some("parent") {
            self.notes
                .push(format!("{path} is declared type=\"parent\" but has no queues: it is a leaf in weir"));
        }
        if q.policy.is_none() {
            q.policy = self.defaults.policy.filter(|&p| leaf || p != Policy::Fifo);
        }
        if q.max_running_apps.is_none() {
            q.max_running_apps = self.defaults.max_running_apps;
        }
        if q.max.is_none() {
            q.max = self.defaults.max.clone();
        }
        if leaf && q.max_am_share.is_none() {
            q.max_am_share = self.defaults.max_am_share;
        }
        q
    }

    /// The settings of one queue element (not its children).
    fn queue(&mut self, path: &str, e: &Elem, parent_allows: bool) -> QueueSpec {
        let mut q = QueueSpec::default();
        for c in &e.children {
            match c.name.as_str() {
                "queue" | "pool" => {}
                "weight" => q.weight = self.float(path, c),
                "minResources" => q.min = self.limit(path, c),
                "maxResources" => q.max = self.limit(path, c),
                "maxRunningApps" => q.max_running_apps = self.count(path, c),
                "maxAMShare" => q.max_am_share = self.am_share(path, c),
                "schedulingPolicy" => q.policy = self.policy(path, c),
                "allowPreemptionFrom" => match c.text.trim() {
                    "true" if !parent_allows => self.notes.push(format!(
                        "{path}: allowPreemptionFrom true is overridden by an ancestor's false (as in YARN)"
                    )),
                    "true" => q.allow_preemption_from = Some(true),
                    "false" => q.allow_preemption_from = Some(false),
                    other => self
                        .problem(path, format!("allowPreemptionFrom: `{other}` is neither true nor false")),
                },
                "fairSharePreemptionTimeout" => q.fair_share_preemption_timeout = self.secs(path, c),
                "fairSharePreemptionThreshold" => q.fair_share_preemption_threshold = self.float(path, c),
                "minSharePreemptionTimeout" => q.min_share_preemption_timeout = self.secs(path, c),
                other => self.notes.push(format!("{path}: <{other}> is ignored: weir has no equivalent")),
            }
        }
        q
    }

    fn float(&mut self, path: &str, e: &Elem) -> Option<f64> {
        match e.text.trim().trim_end_matches(['f', 'F']).parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            _ => {
                self.problem(path, format!("{}: `{}` is not a number", e.name, e.text.trim()));
                None
            }
        }
    }

    fn count(&mut self, path: &str, e: &Elem) -> Option<u32> {
        match e.text.trim().parse::<u32>() {
            Ok(v) => Some(v),
            Err(_) => {
                self.problem(path, format!("{}: `{}` is not a whole number", e.name, e.text.trim()));
                None
            }
        }
    }

    fn secs(&mut self, path: &str, e: &Elem) -> Option<Duration> {
        match e.text.trim().parse::<u64>() {
            // YARN's "never" default is Long.MAX_VALUE seconds: no timeout.
            Ok(v) if v >= i64::MAX as u64 / 1000 => None,
            Ok(v) => Some(Duration::from_secs(v)),
            Err(_) => {
                self.problem(
                    path,
                    format!("{}: `{}` is not a whole number of seconds", e.name, e.text.trim()),
                );
                None
            }
        }
    }

    fn am_share(&mut self, path: &str, e: &Elem) -> Option<f64> {
        // -1 disables the AM-share check, which in weir is no limit.
        self.float(path, e).filter(|&v| v >= 0.0)
    }

    fn policy(&mut self, path: &str, e: &Elem) -> Option<Policy> {
        match e.text.trim().to_ascii_lowercase().as_str() {
            "fair" => Some(Policy::Fair),
            "drf" => Some(Policy::Drf),
            "fifo" => Some(Policy::Fifo),
            other => {
                self.problem(
                    path,
                    format!("{}: `{other}` is not fair, drf or fifo; weir has no custom policies", e.name),
                );
                None
            }
        }
    }

    fn limit(&mut self, path: &str, e: &Elem) -> Option<LimitSpec> {
        match parse_resources(&e.text) {
            Ok(l) => Some(l),
            Err(m) => {
                self.problem(path, format!("{}: {m}", e.name));
                None
            }
        }
    }
}

/// A resource value in any of the allocation file's syntaxes.
pub fn parse_resources(text: &str) -> Result<LimitSpec, String> {
    let t = text.trim();
    let bad = |why: &str| {
        format!("`{t}` {why}; write e.g. \"8192 mb, 4 vcores\", \"25%\" or \"memory-mb=8192, vcores=4\"")
    };
    let percent = |s: &str| s.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok());
    if let Some(p) = percent(t).filter(|_| !t.contains(',')) {
        return Ok(LimitSpec::Percent(format!("{p}%")));
    }
    let mut r = PartialResources::default();
    let mut percents = Vec::new();
    for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim().to_string()),
            None => {
                // Old format: "1024 mb", "4 vcores", "50% cpu".
                let split =
                    part.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '%')).unwrap_or(part.len());
                let (n, unit) = part.split_at(split);
                let key = match unit.trim().to_ascii_lowercase().as_str() {
                    "mb" | "memory" => "memory-mb",
                    "vcores" | "vcore" | "cpu" => "vcores",
                    _ => return Err(bad("has a part that is neither mb, vcores, cpu nor memory")),
                };
                (key.to_string(), n.trim().to_string())
            }
        };
        if let Some(p) = percent(&value) {
            percents.push(p);
            continue;
        }
        let n: u64 = value.parse().map_err(|_| bad("has a value that is not a whole number"))?;
        match key.as_str() {
            "memory-mb" | "memory" => r.memory = Some(n),
            "vcores" => r.cpu = Some(n.saturating_mul(1000)),
            "yarn.io/gpu" => r.gpu = Some(n),
            _ => return Err(bad(&format!("names `{key}`, which weir does not schedule"))),
        }
    }
    match percents.as_slice() {
        [] if r == PartialResources::default() => Err(bad("is empty")),
        [] => Ok(LimitSpec::Absolute(r)),
        [p, rest @ ..] if rest.iter().all(|q| q == p) && r == PartialResources::default() => {
            Ok(LimitSpec::Percent(format!("{p}%")))
        }
        _ => Err(bad("mixes different percentages (or percentages and amounts), which weir cannot express")),
    }
}

/// A minimal element tree: allocation files are small and nested, and reading them into a
/// tree keeps the interpretation above simple.
struct Elem {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
    children: Vec<Elem>,
    pos: u64,
}

impl Elem {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn is_queue(&self) -> bool {
        self.name == "queue" || self.name == "pool"
    }
}

fn parse_dom(file: &str, text: &str) -> Result<Elem, PlanError> {
    let mut reader = Reader::from_str(text);
    let xml_err =
        |pos: u64, message: String| PlanError::Xml { file: file.to_string(), position: pos, message };
    let mut stack: Vec<Elem> = Vec::new();
    let mut root: Option<Elem> = None;
    loop {
        let pos = reader.buffer_position();
        let event = reader.read_event().map_err(|e| xml_err(reader.error_position(), e.to_string()))?;
        let open = |e: &quick_xml::events::BytesStart| -> Result<Elem, PlanError> {
            let mut attrs = Vec::new();
            for a in e.attributes() {
                let a = a.map_err(|err| xml_err(pos, err.to_string()))?;
                let value = a
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map_err(|err| xml_err(pos, err.to_string()))?;
                attrs.push((a.key.local_name().as_ref().to_string(), value.into_owned()));
            }
            let name = e.local_name().as_ref().to_string();
            Ok(Elem { name, attrs, text: String::new(), children: Vec::new(), pos })
        };
        match event {
            Event::Start(e) => stack.push(open(&e)?),
            Event::Empty(e) => {
                let el = open(&e)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::End(_) => {
                let Some(el) = stack.pop() else {
                    return Err(xml_err(pos, "an end tag without a start tag".into()));
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(c) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&c);
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(ch)) => ch.to_string(),
                    _ => match &*r {
                        "amp" => "&".into(),
                        "lt" => "<".into(),
                        "gt" => ">".into(),
                        "quot" => "\"".into(),
                        "apos" => "'".into(),
                        other => return Err(xml_err(pos, format!("unknown entity &{other};"))),
                    },
                };
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&resolved);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(xml_err(text.len() as u64, "the document ends inside an element".into()));
    }
    root.ok_or_else(|| xml_err(0, "no document element".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_values_in_every_syntax() {
        let abs = |cpu, memory, gpu| Ok(LimitSpec::Absolute(PartialResources { cpu, memory, gpu }));
        assert_eq!(parse_resources("10000 mb,0vcores"), abs(Some(0), Some(10000), None));
        assert_eq!(parse_resources(" 2048 mb, 2 vcores "), abs(Some(2000), Some(2048), None));
        assert_eq!(parse_resources("vcores=4, memory-mb=8192"), abs(Some(4000), Some(8192), None));
        assert_eq!(parse_resources("memory-mb=8192, yarn.io/gpu=2"), abs(None, Some(8192), Some(2)));
        assert_eq!(parse_resources("25%"), Ok(LimitSpec::Percent("25%".into())));
        assert_eq!(parse_resources("12.5% cpu, 12.5% memory"), Ok(LimitSpec::Percent("12.5%".into())));
        assert_eq!(parse_resources("vcores=50%, memory-mb=50%"), Ok(LimitSpec::Percent("50%".into())));
        for bad in ["", "10% cpu, 20% memory", "5 gb", "vcores=x", "fpga=1, vcores=2"] {
            assert!(parse_resources(bad).is_err(), "{bad:?} should fail");
        }
    }
}
