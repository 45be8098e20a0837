//! Formatting for the dashboard: resources, times and spans as people read them, and the
//! small inline SVGs (queue bars) drawn on the server so pages need no chart library.

use std::fmt::Write as _;

use weir_api::Resources;
use weir_report::escape;

use crate::time::format_utc;

/// `1.5` cores from millicores; `∞` for unbounded.
pub fn cores(millicores: u64) -> String {
    if millicores == u64::MAX {
        return "∞".into();
    }
    let c = millicores as f64 / 1000.0;
    if c.fract() == 0.0 {
        format!("{c:.0}")
    } else {
        format!("{c:.1}")
    }
}

/// `2.0 GiB` or `512 MiB` from MiB; `∞` for unbounded.
pub fn memory(mib: u64) -> String {
    if mib == u64::MAX {
        "∞".into()
    } else if mib >= 1024 {
        format!("{:.1} GiB", mib as f64 / 1024.0)
    } else {
        format!("{mib} MiB")
    }
}

/// `1.5 cores · 2.0 GiB` (and GPUs when any).
/// A byte count for people: `512 B`, `64 KiB`, `1.5 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

pub fn resources(r: &Resources) -> String {
    let mut s = format!("{} cores · {}", cores(r.cpu), memory(r.memory));
    if r.gpu > 0 && r.gpu != u64::MAX {
        let _ = write!(s, " · {} gpu", r.gpu);
    }
    s
}

/// `2026-11-22 13:45:01` UTC.
pub fn time(ms: i64) -> String {
    let t = format_utc(ms);
    format!("{} {}", &t[..10], &t[11..19])
}

pub fn time_opt(ms: Option<i64>) -> String {
    ms.map(time).unwrap_or_default()
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

/// `37.5%`, or `–`.
pub fn percent(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "–".to_string(), |r| format!("{:.1}%", r * 100.0))
}

/// The share of `total` that `r` takes by its dominant resource (0 when the total is empty).
pub fn dominant(r: &Resources, total: &Resources) -> f64 {
    let part =
        |v: u64, t: u64| if t == 0 || t == u64::MAX || v == u64::MAX { 0.0 } else { v as f64 / t as f64 };
    part(r.cpu, total.cpu).max(part(r.memory, total.memory)).max(part(r.gpu, total.gpu))
}

/// Whether every component is unbounded (no `max` set).
pub fn unbounded(r: &Resources) -> bool {
    r.cpu == u64::MAX && r.memory == u64::MAX
}

/// A queue's bar: usage (filled) and demand (pale) against the cluster, with ticks at the
/// steady (dashed) and instantaneous (solid) fair shares and the max (red), all by dominant
/// resource. `data-usage` carries the usage share for scripts and tests.
pub fn queue_bar(
    queue: &str,
    usage: &Resources,
    demand: &Resources,
    steady: &Resources,
    instantaneous: &Resources,
    max: &Resources,
    total: &Resources,
) -> String {
    const W: f64 = 240.0;
    let x = |r: &Resources| (dominant(r, total).clamp(0.0, 1.0) * W * 10.0).round() / 10.0;
    let (u, d, st, inst) = (x(usage), x(demand), x(steady), x(instantaneous));
    let mut s = format!(
        "<svg class=\"bar\" width=\"{W}\" height=\"16\" viewBox=\"0 0 {W} 16\" data-queue=\"{}\" data-usage=\"{:.4}\" role=\"img\" aria-label=\"usage {:.1}% of the cluster\">",
        escape(queue),
        dominant(usage, total),
        dominant(usage, total) * 100.0
    );
    let _ = write!(s, "<rect x=\"0\" y=\"2\" width=\"{W}\" height=\"12\" fill=\"#f0f0f0\"/>");
    let _ = write!(
        s,
        "<rect x=\"0\" y=\"2\" width=\"{d}\" height=\"12\" fill=\"#cfe3f3\"><title>demand</title></rect>"
    );
    let _ = write!(s, "<rect class=\"usage\" x=\"0\" y=\"2\" width=\"{u}\" height=\"12\" fill=\"#0072B2\"><title>usage</title></rect>");
    let _ = write!(
        s,
        "<line x1=\"{st}\" y1=\"0\" x2=\"{st}\" y2=\"16\" stroke=\"#E69F00\" stroke-width=\"2\" stroke-dasharray=\"3 2\"><title>steady fair share</title></line>"
    );
    let _ = write!(
        s,
        "<line x1=\"{inst}\" y1=\"0\" x2=\"{inst}\" y2=\"16\" stroke=\"#009E73\" stroke-width=\"2\"><title>instantaneous fair share</title></line>"
    );
    if !unbounded(max) {
        let m = x(max);
        let _ = write!(
            s,
            "<line x1=\"{m}\" y1=\"0\" x2=\"{m}\" y2=\"16\" stroke=\"#D55E00\" stroke-width=\"2\"><title>max</title></line>"
        );
    }
    s.push_str("</svg>");
    s
}

/// The colour of a run, job, task or attempt state.
pub fn state_colour(state: &str) -> &'static str {
    match state {
        "succeeded" => "#009E73",
        "running" => "#0072B2",
        "starting" | "routed" => "#56B4E9",
        "failed" | "lost" => "#D55E00",
        "killed" => "#CC79A7",
        "waiting" | "ready" | "preempting" => "#E69F00",
        _ => "#bbbbbb",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_read_these() {
        assert_eq!(cores(1500), "1.5");
        assert_eq!(cores(2000), "2");
        assert_eq!(memory(512), "512 MiB");
        assert_eq!(memory(3072), "3.0 GiB");
        assert_eq!(memory(u64::MAX), "∞");
        assert_eq!(span(61_000), "1m 01s");
        assert_eq!(span(90_061_000), "1d 01h");
        assert_eq!(percent(Some(0.375)), "37.5%");
        assert_eq!(time(0), "1970-01-01 00:00:00");
    }

    #[test]
    fn bars_scale_by_the_dominant_resource() {
        let r = |cpu, memory| Resources { cpu, memory, gpu: 0 };
        let total = r(8000, 16384);
        assert_eq!(dominant(&r(2000, 8192), &total), 0.5);
        let svg = queue_bar(
            "root.a",
            &r(2000, 1024),
            &r(4000, 1024),
            &r(4000, 0),
            &r(8000, 0),
            &r(u64::MAX, u64::MAX),
            &total,
        );
        assert!(svg.contains("data-usage=\"0.2500\""), "{svg}");
        assert!(svg.contains("class=\"usage\" x=\"0\" y=\"2\" width=\"60\""), "{svg}");
        assert!(!svg.contains("<title>max</title>"), "no max line when unbounded");
    }
}
