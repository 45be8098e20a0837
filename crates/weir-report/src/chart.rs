//! Charts drawn as inline SVG: grouped horizontal bars and line charts. Sizes are fixed so
//! every report lays out the same way; coordinates are printed with one decimal.

use std::fmt::Write as _;

use crate::page::escape;
use crate::PALETTE;

/// Grouped horizontal bars: one group per label, one bar per series. Long queue names read
/// well down the left side.
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    /// Printed after each value, e.g. `%` or ` MiB`.
    pub unit: String,
    /// Series names, in the legend and in each group's bar order.
    pub series: Vec<String>,
    pub groups: Vec<Bars>,
    /// The axis maximum (e.g. 100 for percentages); default the largest value.
    pub max: Option<f64>,
}

/// One group of bars: its label and a value per series (`None`: no bar, shown as "–").
#[derive(Debug, Clone, Default)]
pub struct Bars {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// Lines over a numeric x axis (time, usually).
#[derive(Debug, Clone, Default)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// The y axis maximum; default the largest value.
    pub y_max: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    /// (x, y), x increasing.
    pub points: Vec<(f64, f64)>,
}

const WIDTH: f64 = 1000.0;
const BAR: f64 = 14.0;
const GAP: f64 = 8.0;

impl BarChart {
    pub fn render(&self) -> String {
        let longest = self.groups.iter().map(|g| g.label.chars().count()).max().unwrap_or(0);
        let left = (longest as f64 * 7.0 + 16.0).clamp(80.0, 360.0);
        let right = 90.0;
        let top = 46.0;
        let per_group = self.series.len().max(1) as f64 * BAR + GAP;
        let height = top + per_group * self.groups.len() as f64 + 10.0;
        let largest =
            self.groups.iter().flat_map(|g| g.values.iter().flatten()).fold(0.0f64, |a, &v| a.max(v));
        let max = self.max.unwrap_or(largest).max(f64::MIN_POSITIVE);
        let span = WIDTH - left - right;
        let mut s = open(height, &self.title);
        legend(&mut s, &self.series, left, 38.0);
        for (i, g) in self.groups.iter().enumerate() {
            let y0 = top + i as f64 * per_group;
            let label_y = y0 + per_group / 2.0;
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{label_y:.1}\" font-size=\"12\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>",
                left - 8.0,
                escape(&g.label)
            );
            for (k, v) in g.values.iter().enumerate() {
                let y = y0 + k as f64 * BAR;
                let colour = PALETTE[k % PALETTE.len()];
                match v {
                    Some(v) => {
                        let w = (v.max(0.0) / max).min(1.0) * span;
                        let _ = writeln!(
                            s,
                            "<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {}{}</title></rect>",
                            BAR - 2.0,
                            escape(self.series.get(k).map_or("", String::as_str)),
                            number(*v),
                            escape(&self.unit)
                        );
                        let _ = writeln!(
                            s,
                            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" dominant-baseline=\"middle\">{}{}</text>",
                            left + w + 4.0,
                            y + (BAR - 2.0) / 2.0,
                            number(*v),
                            escape(&self.unit)
                        );
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#888\" dominant-baseline=\"middle\">–</text>",
                            left + 4.0,
                            y + (BAR - 2.0) / 2.0
                        );
                    }
                }
            }
        }
        let _ = writeln!(
            s,
            "<line x1=\"{left:.1}\" y1=\"{top:.1}\" x2=\"{left:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>",
            height - 10.0
        );
        s.push_str("</svg>");
        s
    }
}

impl LineChart {
    pub fn render(&self) -> String {
        let (left, right, top, bottom) = (64.0, 20.0, 46.0, 44.0);
        let height = 320.0;
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut ymax) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in points {
            x0 = x0.min(x);
            x1 = x1.max(x);
            ymax = ymax.max(y);
        }
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let ymax = self.y_max.unwrap_or(ymax).max(f64::MIN_POSITIVE);
        let (w, h) = (WIDTH - left - right, height - top - bottom);
        let px = |x: f64| left + (x - x0) / (x1 - x0) * w;
        let py = |y: f64| top + h - (y / ymax).clamp(0.0, 1.0) * h;
        let mut s = open(height, &self.title);
        let names: Vec<String> = self.series.iter().map(|s| s.name.clone()).collect();
        legend(&mut s, &names, left, 38.0);
        let ys = ticks(0.0, ymax);
        let step = tick_step(&ys);
        for v in ys {
            let y = py(v);
            let _ = writeln!(
                s,
                "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/>\
<text x=\"{:.1}\" y=\"{y:.1}\" font-size=\"11\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>",
                left + w,
                left - 6.0,
                tick_label(v, step)
            );
        }
        let xs = ticks(x0, x1);
        let step = tick_step(&xs);
        for v in xs {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                px(v),
                top + h + 16.0,
                tick_label(v, step)
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\
<text x=\"14\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.1})\">{}</text>",
            left + w / 2.0,
            height - 6.0,
            escape(&self.x_label),
            top + h / 2.0,
            top + h / 2.0,
            escape(&self.y_label)
        );
        for (k, series) in self.series.iter().enumerate() {
            if series.points.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (i, &(x, y)) in series.points.iter().enumerate() {
                let _ = write!(d, "{}{:.1} {:.1}", if i == 0 { "M" } else { " L" }, px(x), py(y));
            }
            let _ = writeln!(
                s,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}</title></path>",
                PALETTE[k % PALETTE.len()],
                escape(&series.name)
            );
        }
        s.push_str("</svg>");
        s
    }
}

fn open(height: f64, title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\" role=\"img\" aria-label=\"{0}\">\
<text x=\"0\" y=\"18\" font-size=\"14\" font-weight=\"600\">{0}</text>",
        escape(title)
    );
    s
}

fn legend(s: &mut String, names: &[String], mut x: f64, y: f64) {
    if names.len() < 2 {
        return;
    }
    for (k, name) in names.iter().enumerate() {
        let _ = writeln!(
            s,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{y:.1}\" font-size=\"12\">{}</text>",
            y - 9.0,
            PALETTE[k % PALETTE.len()],
            x + 14.0,
            escape(name)
        );
        x += 14.0 + name.chars().count() as f64 * 7.0 + 18.0;
    }
}

/// Round tick values between `lo` and `hi`: steps of 1, 2 or 5 times a power of ten, about five.
pub(crate) fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return vec![lo];
    }
    let raw = span / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step =
        [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// The step between [`ticks`] (0 for fewer than two).
fn tick_step(ticks: &[f64]) -> f64 {
    match ticks {
        [a, b, ..] => b - a,
        _ => 0.0,
    }
}

/// A tick's label: as [`number`], but with as many decimals as the step needs, so that ticks
/// 0.005 apart do not both read `0.01`.
pub(crate) fn tick_label(v: f64, step: f64) -> String {
    if !(step.is_finite() && step > 0.0 && step < 0.01) {
        return number(v);
    }
    let decimals = ((-step.log10()).ceil() as usize).clamp(2, 9);
    let s = format!("{v:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A number for a label: no decimals from 100 up, else up to two, trailing zeros trimmed.
pub(crate) fn number(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    if v.abs() >= 100.0 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 100.0), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0, 203.4), vec![0.0, 50.0, 100.0, 150.0, 200.0]);
        assert_eq!(ticks(0.0, 7.0), vec![0.0, 2.0, 4.0, 6.0]);
        assert_eq!(ticks(5.0, 5.0), vec![5.0]);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(number(1234.5678), "1235");
        assert_eq!(number(12.5), "12.5");
        assert_eq!(number(0.333333), "0.33");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(f64::NAN), "–");
        // Ticks finer than a hundredth keep the decimals that tell them apart.
        // (The usage page's y axis up to 0.0112 core-hours read 0, 0.01, 0.01.)
        let small = ticks(0.0, 0.0112);
        let labels: Vec<String> = small.iter().map(|&v| tick_label(v, tick_step(&small))).collect();
        assert_eq!(labels, ["0", "0.005", "0.01"]);
        let fine = ticks(0.0, 0.008);
        let labels: Vec<String> = fine.iter().map(|&v| tick_label(v, tick_step(&fine))).collect();
        assert_eq!(labels, ["0", "0.002", "0.004", "0.006", "0.008"]);
        // Coarser steps read as before.
        assert_eq!(tick_label(0.2, 0.2), "0.2");
        assert_eq!(tick_label(150.0, 50.0), "150");
    }

    #[test]
    fn bars_scale_to_the_axis_maximum() {
        let chart = BarChart {
            title: "SLO success".into(),
            unit: "%".into(),
            series: vec!["ad hoc".into(), "tiered".into()],
            groups: vec![Bars { label: "tier 1".into(), values: vec![Some(50.0), Some(100.0)] }],
            max: Some(100.0),
        };
        let svg = chart.render();
        // The plot area is 1000 − 80 (left) − 90 (right) = 830 wide: 50% is 415.
        assert!(svg.contains("width=\"415.0\""), "{svg}");
        assert!(svg.contains("width=\"830.0\""), "{svg}");
        assert!(svg.contains(">50%</text>"));
        assert_eq!(svg, chart.render(), "rendering is deterministic");
    }

    #[test]
    fn lines_map_the_data_range_onto_the_plot() {
        let chart = LineChart {
            title: "use".into(),
            x_label: "hours".into(),
            y_label: "%".into(),
            series: vec![Series { name: "cpu".into(), points: vec![(0.0, 0.0), (10.0, 100.0)] }],
            y_max: Some(100.0),
        };
        let svg = chart.render();
        // x 0 → left edge 64, x 10 → 980; y 0 → bottom (320 − 44), y 100 → top 46.
        assert!(svg.contains("d=\"M64.0 276.0 L980.0 46.0\""), "{svg}");
    }
}
