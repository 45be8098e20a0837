//! The two text formats `/metrics` answers in, picked from the scraper's `Accept` header.
//!
//! Prometheus' scrape protocol content negotiation (prometheus.io, "Scrape protocol content
//! negotiation") names the formats by media type: `application/openmetrics-text` (OpenMetrics
//! 1.0.0 or 0.0.1) and `text/plain; version=0.0.4` (the classic text format, "Exposition
//! formats", which also says a missing version falls back to the latest text format).
//! Prometheus 2.x asks for OpenMetrics first (`q` 1) and the classic format second; `curl` and
//! `promtool check metrics` (which parses the classic format only) get the classic format.
//!
//! `prometheus-client` writes OpenMetrics only, and no maintained crate writes both from one
//! registry (the `prometheus` crate writes the classic format only, from its own registry;
//! `metrics-exporter-prometheus` likewise). The classic text is therefore derived from the
//! OpenMetrics text by [`to_classic`]: the two differ, for what this registry writes (counters,
//! gauges and histograms, no exemplars, no `_created` samples), in three things only:
//! - a counter family is named without `_total` in OpenMetrics (`# TYPE weir_x counter`, sample
//!   `weir_x_total`) and with it in the classic format, where the `# HELP`/`# TYPE` name must be
//!   the sample's name (otherwise `promtool check metrics` reports "no help text");
//! - `# UNIT` and `# EOF` lines exist only in OpenMetrics (the classic parser would read them
//!   as comments; they are dropped);
//! - OpenMetrics' `unknown` type is the classic `untyped`.
//!
//! HELP text is written unescaped by `prometheus-client`; weir's help texts hold no backslash
//! or newline, which a unit test checks, so no re-escaping is needed.

/// A text format `/metrics` can answer in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text.
    OpenMetrics,
    /// The Prometheus text format, version 0.0.4.
    Classic,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format for an `Accept` header value (`None`: no header). OpenMetrics when it is
    /// listed with a `q` above zero and not below the classic format's (`text/plain` or a
    /// wildcard); the classic format otherwise, including with no header at all.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Classic };
        let (mut open, mut classic) = (0.0_f64, 0.0_f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0_f64;
            let mut version = None;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else { continue };
                let v = v.trim().trim_matches('"');
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.parse().unwrap_or(0.0),
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if matches!(version.as_deref(), None | Some("1.0.0") | Some("0.0.1")) =>
                {
                    open = open.max(q)
                }
                // text/plain version 1.0.0 (Prometheus 3's UTF-8 names) reads 0.0.4 too.
                "text/plain" | "text/*" | "*/*" => classic = classic.max(q),
                _ => {}
            }
        }
        if open > 0.0 && open >= classic {
            Format::OpenMetrics
        } else {
            Format::Classic
        }
    }
}

/// The classic text format (0.0.4) of OpenMetrics text as `prometheus-client` writes it.
pub fn to_classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len() + 256);
    // The `# HELP` line waits for its `# TYPE` line: a counter's name gains `_total`.
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush_help(&mut out, help.take(), None);
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "unknown" => (name.to_string(), "untyped"),
                other => (name.to_string(), other),
            };
            flush_help(&mut out, help.take(), Some(&name));
            out.push_str("# TYPE ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
            continue;
        }
        flush_help(&mut out, help.take(), None);
        out.push_str(line);
        out.push('\n');
    }
    flush_help(&mut out, help, None);
    out
}

fn flush_help(out: &mut String, help: Option<(&str, &str)>, renamed: Option<&str>) {
    let Some((name, text)) = help else { return };
    out.push_str("# HELP ");
    out.push_str(renamed.unwrap_or(name));
    out.push(' ');
    out.push_str(text);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_pick_the_format() {
        // What Prometheus 2.x sends (scrape.go's scrapeAcceptHeader): OpenMetrics first.
        let prometheus2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, want) in [
            (None, Format::Classic),
            (Some(prometheus2), Format::OpenMetrics),
            (Some("*/*"), Format::Classic),
            (Some("text/plain; version=0.0.4"), Format::Classic),
            (Some("text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"), Format::Classic),
            (Some("application/openmetrics-text; version=1.0.0"), Format::OpenMetrics),
            (Some("Application/OpenMetrics-Text"), Format::OpenMetrics),
            (Some("application/openmetrics-text;q=0"), Format::Classic),
            // A version this server does not write.
            (Some("application/openmetrics-text;version=2.0.0"), Format::Classic),
            (Some("application/json"), Format::Classic),
        ] {
            assert_eq!(Format::negotiate(accept), want, "Accept: {accept:?}");
        }
    }

    #[test]
    fn counters_take_their_total_name_and_openmetrics_only_lines_go() {
        let open = "# HELP weir_x Things.\n# TYPE weir_x counter\nweir_x_total{a=\"b\"} 1\n\
                    # HELP weir_d_seconds Time.\n# TYPE weir_d_seconds histogram\n# UNIT weir_d_seconds seconds\n\
                    weir_d_seconds_sum 0.0\nweir_d_seconds_count 0\nweir_d_seconds_bucket{le=\"+Inf\"} 0\n\
                    # HELP weir_g Level.\n# TYPE weir_g gauge\nweir_g 2.5\n# EOF\n";
        let classic = "# HELP weir_x_total Things.\n# TYPE weir_x_total counter\nweir_x_total{a=\"b\"} 1\n\
                       # HELP weir_d_seconds Time.\n# TYPE weir_d_seconds histogram\n\
                       weir_d_seconds_sum 0.0\nweir_d_seconds_count 0\nweir_d_seconds_bucket{le=\"+Inf\"} 0\n\
                       # HELP weir_g Level.\n# TYPE weir_g gauge\nweir_g 2.5\n";
        assert_eq!(to_classic(open), classic);
    }
}
