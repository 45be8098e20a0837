//! `report.html`: the plan as one self-contained page — inline CSS, charts as inline SVG, no
//! scripts, nothing fetched — so it can be mailed, archived or opened offline.

use std::fmt::Write as _;

use crate::plan::{Plan, QueueStatus};
use crate::summary::{fmt_num, Ratios, Verdict};

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1200px}\
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:.9em}th,td{padding:.25em .6em;border-bottom:1px solid #eee;text-align:right}\
th{background:#f6f6f6}td{white-space:nowrap}svg{display:block;margin:1em 0}td.l,th.l{text-align:left}.verdict{padding:1em;border-radius:6px;font-size:1.05em}\
.grow{background:#fdecea;border:1px solid #e57373}.shrink{background:#fff8e1;border:1px solid #ffb300}\
.keep{background:#e8f5e9;border:1px solid #66bb6a}.ok{color:#2e7d32}.bad{color:#c62828;font-weight:bold}\
.muted{color:#888}svg text{font-size:11px;font-family:inherit}";

/// Render `plan` as HTML; `title` names the cluster (e.g. its file name).
pub fn report_html(plan: &Plan, title: &str) -> String {
    let mut h = String::new();
    let t = esc(title);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>weir plan — {t}</title>\n\
         <style>{CSS}</style>\n</head>\n<body>\n<h1>weir plan — {t}</h1>\n"
    );
    let s = &plan.settings;
    let _ = writeln!(
        h,
        "<p>Window: {} hours of history ({} ms to {} ms). Instance: {} millicores, {} MiB. \
         Percentiles: {}. Headroom on max_running_apps: {}%.</p>",
        fmt_num(plan.window.hours),
        plan.window.start_ms,
        plan.window.end_ms,
        s.instance.cpu,
        s.instance.memory,
        s.percentile.iter().map(|(t, p)| format!("tier {t} {}%", fmt_num(*p))).collect::<Vec<_>>().join(", "),
        fmt_num(s.max_running_apps_headroom * 100.0)
    );

    let c = &plan.cluster;
    let class = match c.verdict {
        Verdict::Grow => "grow",
        Verdict::Shrink => "shrink",
        Verdict::Keep => "keep",
    };
    let _ = writeln!(
        h,
        "<h2>Cluster</h2>\n<div class=\"verdict {class}\"><b>Verdict: {}</b> — {}.</div>\n\
         <table><tr><th class=\"l\">cluster size</th><th>allocated</th><th>tier 1 + 2</th><th>instance-hours used</th>\
         <th>usage/capacity (cluster)</th><th>cpu</th><th>memory</th><th>usage/capacity (allocated)</th><th>shrink floor</th></tr>\n\
         <tr><td class=\"l\">{} instances</td><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td></tr></table>",
        c.verdict.name(),
        esc(&c.reason),
        fmt_num(c.instances),
        c.allocated,
        c.tier1_tier2_allocated,
        fmt_num(c.used.instance_hours),
        ratio_cells(&c.usage_capacity),
        ratio(c.allocated_usage_capacity.instances),
        c.shrink_floor
    );

    h.push_str("<h2>Tiers</h2>\n<table><tr><th class=\"l\">tier</th><th>percentile</th><th>leaves</th><th>instances</th>\
                <th>instance-hours used</th><th>usage/capacity</th><th>cpu</th><th>memory</th></tr>\n");
    for t in plan.tiers.values() {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}%</td><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
            t.tier,
            fmt_num(t.percentile),
            t.leaves,
            t.instances,
            fmt_num(t.used.instance_hours),
            ratio_cells(&t.usage_capacity)
        );
    }
    h.push_str("</table>\n");
    h.push_str(&tier_chart(plan));

    h.push_str(
        "<h2>Tier order</h2>\n<p>From tier 1 to tier 3 the percentile must fall and usage/capacity rise: \
                the most critical work keeps the most headroom.</p>\n<ul>\n",
    );
    for step in &plan.tier_order.steps {
        let rises = match step.ratio_rises {
            Some(true) => "<span class=\"ok\">rises ✓</span>",
            Some(false) => "<span class=\"bad\">does not rise ✗</span>",
            None => "<span class=\"muted\">not measured (a tier has no allocation)</span>",
        };
        let falls = if step.percentile_falls {
            "<span class=\"ok\">falls ✓</span>"
        } else {
            "<span class=\"bad\">does not fall ✗</span>"
        };
        let _ = writeln!(
            h,
            "<li>tier {} → tier {}: percentile {falls}, usage/capacity {rises}</li>",
            step.from, step.to
        );
    }
    h.push_str("</ul>\n");
    for v in &plan.tier_order.violations {
        let _ = writeln!(h, "<p class=\"bad\">Violation: {}.</p>", esc(v));
    }

    h.push_str("<h2>Queues</h2>\n<table><tr><th class=\"l\">queue</th><th class=\"l\">tier</th><th class=\"l\">status</th>\
                <th>instances</th><th>percentile</th><th>SLO floor</th><th>peak</th><th>weight</th><th>max running apps</th>\
                <th>in use (h)</th><th>usage/capacity</th><th>cpu</th><th>memory</th></tr>\n");
    for q in &plan.queues {
        let status = match q.status {
            QueueStatus::Planned => "planned",
            QueueStatus::Vacant => "vacant",
            QueueStatus::NoHistory => "kept (no history)",
            QueueStatus::Parent => "parent",
        };
        let leaf = matches!(q.status, QueueStatus::Planned | QueueStatus::Vacant);
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{status}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{} → {}</td><td>{} → {}</td><td>{}</td>{}</tr>",
            esc(&q.queue),
            q.tier.map(|t| t.to_string()).unwrap_or_default(),
            q.instances,
            q.percentile.map(|p| format!("{}% → {}", fmt_num(p), q.percentile_instances)).filter(|_| leaf).unwrap_or_default(),
            q.slo_floor.map(|f| format!("{f:.2}")).unwrap_or_default(),
            if leaf { q.peak_instances.to_string() } else { String::new() },
            fmt_num(q.previous_weight),
            fmt_num(q.weight),
            q.previous_max_running_apps.map_or("–".to_string(), |n| n.to_string()),
            q.max_running_apps.map_or("–".to_string(), |n| n.to_string()),
            if leaf { fmt_num(q.in_use_hours) } else { String::new() },
            ratio_cells(&q.usage_capacity)
        );
    }
    h.push_str("</table>\n");
    h.push_str(&leaf_chart(plan));

    if !plan.ignored_history.is_empty() {
        h.push_str("<h2>History not planned</h2>\n<ul>\n");
        for q in &plan.ignored_history {
            let _ = writeln!(h, "<li>{} ({} rows): {}</li>", esc(&q.queue), q.rows, q.reason);
        }
        h.push_str("</ul>\n");
    }
    h.push_str("<p class=\"muted\">Usage is instance-hours used (dominant resource); capacity is allocated instances × \
                window hours. Written by weir plan.</p>\n</body>\n</html>\n");
    h
}

fn ratio(r: Option<f64>) -> String {
    r.map(|v| format!("{v:.3}")).unwrap_or_else(|| "–".into())
}

fn ratio_cells(r: &Ratios) -> String {
    format!("<td>{}</td><td>{}</td><td>{}</td>", ratio(r.instances), ratio(r.cpu), ratio(r.memory))
}

/// Grouped bars: usage/capacity (instances, cpu, memory) per tier.
fn tier_chart(plan: &Plan) -> String {
    let (w, hgt, left, bottom) = (520.0, 220.0, 40.0, 30.0);
    let top = plan
        .tiers
        .values()
        .flat_map(|t| [t.usage_capacity.instances, t.usage_capacity.cpu, t.usage_capacity.memory])
        .flatten()
        .fold(1.0f64, f64::max);
    let plot_h = hgt - bottom - 24.0;
    let y = |v: f64| 24.0 + plot_h * (1.0 - v / top);
    let mut s = format!("<svg width=\"{w}\" height=\"{hgt}\" viewBox=\"0 0 {w} {hgt}\" role=\"img\" aria-label=\"usage/capacity per tier\">\n");
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0].iter().map(|f| f * top) {
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" x2=\"{w}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#eee\"/><text x=\"2\" y=\"{1:.1}\">{tick:.2}</text>",
            y(tick),
            y(tick) + 4.0
        );
    }
    let colors = [("instances", "#1976d2"), ("cpu", "#43a047"), ("memory", "#fb8c00")];
    let group = (w - left) / 3.0;
    for (i, t) in plan.tiers.values().enumerate() {
        let x0 = left + group * i as f64 + 15.0;
        let values = [t.usage_capacity.instances, t.usage_capacity.cpu, t.usage_capacity.memory];
        for (j, (v, (name, color))) in values.iter().zip(colors).enumerate() {
            let x = x0 + j as f64 * 40.0;
            if let Some(v) = v {
                let _ = writeln!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"34\" height=\"{:.1}\" fill=\"{color}\"><title>tier {} {name}: {v:.3}</title></rect>",
                    y(*v),
                    (y(0.0) - y(*v)).max(0.0),
                    t.tier
                );
            }
        }
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\">tier {}</text>", x0 + 40.0, hgt - 10.0, t.tier);
    }
    for (j, (name, color)) in colors.iter().enumerate() {
        let x = left + 10.0 + j as f64 * 90.0;
        let _ = writeln!(s, "<rect x=\"{x}\" y=\"1\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"9\">{name}</text>", x + 14.0);
    }
    s.push_str("</svg>\n");
    s
}

/// Per leaf planned from history: allocated instances (bar) and peak use (tick).
fn leaf_chart(plan: &Plan) -> String {
    let leaves: Vec<_> = plan
        .queues
        .iter()
        .filter(|q| matches!(q.status, QueueStatus::Planned | QueueStatus::Vacant))
        .collect();
    if leaves.is_empty() {
        return String::new();
    }
    let (label, w, row) = (260.0, 760.0, 18.0);
    let top = leaves.iter().map(|q| q.instances.max(q.peak_instances)).max().unwrap_or(1).max(1) as f64;
    let hgt = row * leaves.len() as f64 + 30.0;
    let x = |v: f64| label + (w - label - 20.0) * v / top;
    let mut s = format!(
        "<h2>Allocation and peak per leaf</h2>\n<svg width=\"{w}\" height=\"{hgt}\" viewBox=\"0 0 {w} {hgt}\" role=\"img\" \
         aria-label=\"allocated and peak instances per leaf\">\n"
    );
    for (i, q) in leaves.iter().enumerate() {
        let yy = 20.0 + i as f64 * row;
        let (text_y, bar_w, bar_h, tick_x, tick_y2) =
            (yy + 11.0, x(q.instances as f64) - label, row - 4.0, x(q.peak_instances as f64), yy + row - 4.0);
        let name = esc(&q.queue);
        let _ = writeln!(
            s,
            "<text x=\"0\" y=\"{text_y:.1}\">{name}</text><rect x=\"{label}\" y=\"{yy:.1}\" width=\"{bar_w:.1}\" \
             height=\"{bar_h:.1}\" fill=\"#1976d2\"><title>{name}: {} allocated, peak {}</title></rect>\
             <line x1=\"{tick_x:.1}\" x2=\"{tick_x:.1}\" y1=\"{yy:.1}\" y2=\"{tick_y2:.1}\" stroke=\"#c62828\" stroke-width=\"2\"/>",
            q.instances, q.peak_instances
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{label}\" y=\"12\">bar: allocated instances · red tick: peak use (top {})</text>\n</svg>",
        fmt_num(top)
    );
    s
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
