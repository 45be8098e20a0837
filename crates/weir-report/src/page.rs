//! A report page: headings, paragraphs, key figures, tables and charts, in one HTML file.

use std::fmt::Write as _;

/// An HTML page under construction. Text passed in is escaped; SVG from the chart builders is
/// inserted as it is.
#[derive(Debug, Clone)]
pub struct Page {
    title: String,
    body: String,
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;\
max-width:1100px;padding:0 1rem;color:#1b1b1b;line-height:1.45}\
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}\
p.note{color:#555;font-size:.9rem}\
.figures{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}\
.figure{border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem;min-width:9rem}\
.figure b{display:block;font-size:1.3rem}.figure span{color:#555;font-size:.85rem}\
table{border-collapse:collapse;font-size:.9rem;margin:.5rem 0}\
th,td{border-bottom:1px solid #e4e4e4;padding:.25rem .6rem;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f6f6f6}td{white-space:nowrap}\
.scroll{overflow-x:auto}\
td.bad{color:#b00020;font-weight:600}td.good{color:#00703c}\
svg{display:block;margin:.5rem 0}svg text{font-family:inherit}";

impl Page {
    pub fn new(title: &str) -> Page {
        let mut body = String::new();
        let _ = writeln!(body, "<h1>{}</h1>", escape(title));
        Page { title: title.to_string(), body }
    }

    pub fn heading(&mut self, text: &str) -> &mut Page {
        let _ = writeln!(self.body, "<h2>{}</h2>", escape(text));
        self
    }

    pub fn paragraph(&mut self, text: &str) -> &mut Page {
        let _ = writeln!(self.body, "<p>{}</p>", escape(text));
        self
    }

    /// A smaller, grey paragraph: how to read what follows.
    pub fn note(&mut self, text: &str) -> &mut Page {
        let _ = writeln!(self.body, "<p class=\"note\">{}</p>", escape(text));
        self
    }

    /// A row of headline numbers: (value, what it is).
    pub fn figures(&mut self, figures: &[(String, &str)]) -> &mut Page {
        self.body.push_str("<div class=\"figures\">");
        for (value, label) in figures {
            let _ = write!(
                self.body,
                "<div class=\"figure\"><b>{}</b><span>{}</span></div>",
                escape(value),
                escape(label)
            );
        }
        self.body.push_str("</div>\n");
        self
    }

    /// A table. A cell starting with `!` is flagged as bad, with `+` as good (the mark is not
    /// shown).
    pub fn table(&mut self, header: &[&str], rows: &[Vec<String>]) -> &mut Page {
        self.body.push_str("<div class=\"scroll\"><table><thead><tr>");
        for h in header {
            let _ = write!(self.body, "<th>{}</th>", escape(h));
        }
        self.body.push_str("</tr></thead><tbody>\n");
        for row in rows {
            self.body.push_str("<tr>");
            for cell in row {
                match (cell.strip_prefix('!'), cell.strip_prefix('+')) {
                    (Some(c), _) => {
                        let _ = write!(self.body, "<td class=\"bad\">{}</td>", escape(c));
                    }
                    (_, Some(c)) => {
                        let _ = write!(self.body, "<td class=\"good\">{}</td>", escape(c));
                    }
                    _ => {
                        let _ = write!(self.body, "<td>{}</td>", escape(cell));
                    }
                }
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</tbody></table></div>\n");
        self
    }

    /// An SVG drawn by one of the chart builders.
    pub fn svg(&mut self, svg: &str) -> &mut Page {
        self.body.push_str(svg);
        self.body.push('\n');
        self
    }

    pub fn render(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n\
<style>{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            escape(&self.title),
            self.body
        )
    }
}

/// Escape text for HTML and SVG.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_flags_become_classes() {
        let mut p = Page::new("a <b> & c");
        p.table(&["q", "v"], &[vec!["root.x".into(), "!12%".into()], vec!["<y>".into(), "+99%".into()]]);
        let html = p.render();
        assert!(html.contains("<title>a &lt;b&gt; &amp; c</title>"));
        assert!(html.contains("<td class=\"bad\">12%</td>"));
        assert!(html.contains("<td class=\"good\">99%</td>"));
        assert!(html.contains("<td>&lt;y&gt;</td>"));
        assert!(!html.contains("<script"));
    }
}
