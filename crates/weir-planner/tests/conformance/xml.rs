//! A small element tree for the checkers (quick-xml events), with the XML declaration checked.

use quick_xml::events::Event;
use quick_xml::Reader;

pub struct El {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<El>,
}

impl El {
    pub fn attr(&self, k: &str) -> Option<&str> {
        self.attrs.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
    }
    pub fn child(&self, name: &str) -> Option<&El> {
        self.children.iter().find(|c| c.name == name)
    }
}

pub fn parse(text: &str) -> Result<El, String> {
    if let Some(at) = text.find("<?xml") {
        if at != 0 {
            return Err("the XML declaration is not at the start of the file".into());
        }
    }
    let mut r = Reader::from_str(text);
    let mut stack: Vec<El> = Vec::new();
    let mut root = None;
    loop {
        let ev = r.read_event().map_err(|e| e.to_string())?;
        let open = |e: &quick_xml::events::BytesStart| El {
            name: e.local_name().as_ref().to_string(),
            attrs: e
                .attributes()
                .filter_map(Result::ok)
                .map(|a| {
                    (
                        a.key.local_name().as_ref().to_string(),
                        a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                            .map(|v| v.into_owned())
                            .unwrap_or_default(),
                    )
                })
                .collect(),
            text: String::new(),
            children: Vec::new(),
        };
        match ev {
            Event::Start(e) => stack.push(open(&e)),
            Event::Empty(e) => {
                let el = open(&e);
                match stack.last_mut() {
                    Some(p) => p.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::End(_) => {
                let el = stack.pop().ok_or("unbalanced end tag")?;
                match stack.last_mut() {
                    Some(p) => p.children.push(el),
                    None => root = Some(el),
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(g) => {
                if let Some(top) = stack.last_mut() {
                    let s = match &*g {
                        "amp" => "&",
                        "lt" => "<",
                        "gt" => ">",
                        "quot" => "\"",
                        "apos" => "'",
                        _ => "?",
                    };
                    top.text.push_str(s);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    root.ok_or_else(|| "no document element".into())
}
