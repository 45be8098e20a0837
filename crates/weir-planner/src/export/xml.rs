//! A small indenting XML writer over a `String`: writing to memory cannot fail, and YARN files
//! want comments and descriptions placed exactly, which an event writer makes no easier.

use quick_xml::escape::escape;

pub(crate) struct XmlOut {
    buf: String,
    depth: usize,
}

impl XmlOut {
    pub fn new() -> XmlOut {
        XmlOut { buf: String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"), depth: 0 }
    }

    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.buf.push_str("  ");
        }
    }

    /// `<!-- text -->`, with `--` (not allowed inside a comment) softened to `- -`.
    pub fn comment(&mut self, text: &str) {
        self.indent();
        self.buf.push_str("<!-- ");
        self.buf.push_str(&text.replace("--", "- -"));
        self.buf.push_str(" -->\n");
    }

    pub fn open(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.indent();
        self.buf.push('<');
        self.buf.push_str(name);
        for (k, v) in attrs {
            self.buf.push_str(&format!(" {k}=\"{}\"", escape(*v)));
        }
        self.buf.push_str(">\n");
        self.depth += 1;
    }

    pub fn close(&mut self, name: &str) {
        self.depth = self.depth.saturating_sub(1);
        self.indent();
        self.buf.push_str(&format!("</{name}>\n"));
    }

    /// `<name/>`.
    pub fn empty(&mut self, name: &str) {
        self.empty_with(name, &[]);
    }

    /// `<name a="v"/>`.
    pub fn empty_with(&mut self, name: &str, attrs: &[(&str, &str)]) {
        self.indent();
        self.buf.push('<');
        self.buf.push_str(name);
        for (k, v) in attrs {
            self.buf.push_str(&format!(" {k}=\"{}\"", escape(*v)));
        }
        self.buf.push_str("/>\n");
    }

    /// `<name>text</name>` on one line (the text as is: no trimming).
    pub fn text(&mut self, name: &str, text: &str) {
        self.indent();
        self.buf.push_str(&format!("<{name}>{}</{name}>\n", escape(text)));
    }

    pub fn finish(self) -> String {
        self.buf
    }
}
