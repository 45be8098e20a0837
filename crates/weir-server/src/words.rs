//! Wording shared by the worker (the "why pending" text it publishes, the spells it records)
//! and the pages and API that show them: resources in cores and GiB, spans, ordinals, and a
//! waiting spell's reason as a phrase. A bottom module: it imports nothing of the server.

use weir_model::Resources;

/// `1.5` from millicores.
pub fn cores(millicores: u64) -> String {
    if millicores == u64::MAX {
        return "unbounded".into();
    }
    let c = millicores as f64 / 1000.0;
    if c.fract() == 0.0 {
        format!("{c:.0}")
    } else {
        let s = format!("{c:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// `2 GiB`, `1.5 GiB` or `512 MiB` from MiB.
pub fn memory(mib: u64) -> String {
    if mib == u64::MAX {
        return "unbounded memory".into();
    }
    if mib >= 1024 {
        let g = mib as f64 / 1024.0;
        if (g * 10.0).fract() == 0.0 && g.fract() == 0.0 {
            format!("{g:.0} GiB")
        } else {
            format!("{g:.1} GiB")
        }
    } else {
        format!("{mib} MiB")
    }
}

/// `2 cores, 8 GiB` (`, 1 GPU` when any); `nothing` when zero.
pub fn resources(r: &Resources) -> String {
    if *r == Resources::ZERO {
        return "nothing".into();
    }
    let c = cores(r.cpu);
    let unit = if r.cpu == 1000 { "core" } else { "cores" };
    let mut s = if r.cpu == u64::MAX { "unbounded cores".to_string() } else { format!("{c} {unit}") };
    s.push_str(", ");
    s.push_str(&memory(r.memory));
    if r.gpu > 0 {
        if r.gpu == u64::MAX {
            s.push_str(", unbounded GPUs");
        } else {
            s.push_str(&format!(", {} GPU{}", r.gpu, if r.gpu == 1 { "" } else { "s" }));
        }
    }
    s
}

/// `12s`, `3m 04s`, `1h 02m`, `2d 03h`.
pub fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h {:02}m", s / 3600, s % 3600 / 60)
    } else {
        format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600)
    }
}

/// `1st`, `2nd`, `3rd`, `11th`, `22nd`.
pub fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A waiting spell's reason as a phrase: `root.analytics at max_running_apps 3`.
pub fn reason(code: &str, queue: &str, limit: &str) -> String {
    match code {
        "queue_max_running_apps" => format!("{queue} at max_running_apps {limit}"),
        "user_max_running_apps" => format!("{queue} at user_max_running_apps {limit}"),
        "queue_max_resources" => format!("{queue} at its max ({limit})"),
        "am_share" => format!("{queue}'s application-master share ({limit})"),
        "container_limit" => format!("the engine's limit of {limit} containers"),
        "gang_waiting_for_room" => format!("room for its whole gang ({limit}) in {queue}"),
        "no_room" => format!("room in the cluster for {queue}'s next task (capacity or fair share)"),
        "backend_unhealthy" => "the cluster's backend, unhealthy".to_string(),
        "not_taken_up" => "a server to drive the cluster".to_string(),
        "inputs" => format!("its inputs ({limit}) to be complete"),
        other if queue.is_empty() => other.to_string(),
        other => format!("{other} on {queue}"),
    }
}

/// Rewrite what the engine's sentences say in its own terms: resource maps
/// (`{cpu: 2000, memory: 8192}`) in cores and GiB, and engine job ids (`job-172032`) by the
/// name `name` gives them (left as they are when it gives none).
pub fn humanize(text: &str, name: impl Fn(u64) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix("{cpu: ") {
            if let Some((r, used)) = resource_map(tail) {
                out.push_str(&resources(&r));
                rest = &tail[used..];
                continue;
            }
        }
        if let Some(tail) = rest.strip_prefix("job-") {
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            if let Some(n) = tail[..digits].parse::<u64>().ok().filter(|_| digits > 0).and_then(&name) {
                out.push_str(&n);
                rest = &tail[digits..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `2000, memory: 8192}` or `2000, memory: 8192, gpu: 1}` (after `{cpu: `): the resources and
/// the bytes read.
fn resource_map(s: &str) -> Option<(Resources, usize)> {
    let end = s.find('}')?;
    let body = &s[..end];
    let value = |v: &str| if v == "unbounded" { Some(u64::MAX) } else { v.trim().parse::<u64>().ok() };
    let mut parts = body.split(", ");
    let cpu = value(parts.next()?)?;
    let memory = value(parts.next()?.strip_prefix("memory: ")?)?;
    let gpu = match parts.next() {
        Some(g) => value(g.strip_prefix("gpu: ")?)?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((Resources { cpu, memory, gpu }, end + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_read_in_cores_and_gib() {
        assert_eq!(resources(&Resources { cpu: 2000, memory: 8192, gpu: 0 }), "2 cores, 8 GiB");
        assert_eq!(resources(&Resources { cpu: 1000, memory: 512, gpu: 1 }), "1 core, 512 MiB, 1 GPU");
        assert_eq!(resources(&Resources { cpu: 1500, memory: 1536, gpu: 0 }), "1.5 cores, 1.5 GiB");
        assert_eq!(resources(&Resources { cpu: 250, memory: 100, gpu: 0 }), "0.25 cores, 100 MiB");
        assert_eq!(resources(&Resources::ZERO), "nothing");
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(12), "12th");
        assert_eq!(ordinal(23), "23rd");
        assert_eq!(span(184_000), "3m 04s");
    }

    #[test]
    fn engine_sentences_lose_their_ids_and_raw_maps() {
        let text = "pending because no node has room for its next container {cpu: 2000, memory: 4096} \
                    (largest free room {cpu: 0, memory: 0}); job-8193 holds the reservation; job-77 too";
        let named = humanize(text, |id| (id == 8193).then(|| "nightly/extract (run 2)".to_string()));
        assert_eq!(
            named,
            "pending because no node has room for its next container 2 cores, 4 GiB \
             (largest free room nothing); nightly/extract (run 2) holds the reservation; job-77 too"
        );
        assert_eq!(
            humanize("max {cpu: unbounded, memory: 10240, gpu: 2}", |_| None),
            "max unbounded cores, 10 GiB, 2 GPUs"
        );
        assert_eq!(humanize("a {cpu: x} b", |_| None), "a {cpu: x} b", "not a resource map: left alone");
    }
}
