//! A minimal element tree read with quick-xml's event reader: allocation files are small and
//! nested, and a tree keeps their interpretation simple.
//!
//! Two limits keep hostile input harmless: elements may nest at most [`MAX_DEPTH`] deep (the
//! reader keeps an explicit stack, and the tree it returns is never deeper, so walking and
//! dropping it cannot overflow the call stack), and nothing but a byte-order mark may precede
//! the XML declaration, as for YARN's DOM parser.

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::error::PlanError;

/// The deepest element nesting read. `<allocations>` plus 31 nested queues and their settings
/// stay well inside it; weir's cluster file holds at most 31 nested queues anyway.
pub(crate) const MAX_DEPTH: usize = 64;

pub(crate) struct Elem {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub text: String,
    pub children: Vec<Elem>,
    /// Byte offset of the start tag, for messages.
    pub pos: u64,
}

impl Elem {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn is_queue(&self) -> bool {
        self.name == "queue" || self.name == "pool"
    }
}

pub(crate) fn parse(file: &str, text: &str) -> Result<Elem, PlanError> {
    let xml_err =
        |pos: u64, message: String| PlanError::Xml { file: file.to_string(), position: pos, message };
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(at) = body.find("<?xml") {
        if at > 0 && !body[..at].contains('<') {
            return Err(xml_err(
                0,
                format!(
                    "{at} byte{} before the XML declaration `<?xml …?>`, which must come first (YARN's parser refuses the file)",
                    if at == 1 { "" } else { "s" }
                ),
            ));
        }
    }
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Elem> = Vec::new();
    let mut root: Option<Elem> = None;
    loop {
        let pos = reader.buffer_position();
        let event = reader.read_event().map_err(|e| xml_err(reader.error_position(), e.to_string()))?;
        match event {
            Event::Start(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(xml_err(
                        pos,
                        format!(
                            "elements nest more than {MAX_DEPTH} deep; an allocation file needs far fewer"
                        ),
                    ));
                }
                stack.push(open(&e, pos, file)?);
            }
            Event::Empty(e) => {
                let el = open(&e, pos, file)?;
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

fn open(e: &BytesStart, pos: u64, file: &str) -> Result<Elem, PlanError> {
    let xml_err = |message: String| PlanError::Xml { file: file.to_string(), position: pos, message };
    let mut attrs = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|err| xml_err(err.to_string()))?;
        let value =
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0).map_err(|err| xml_err(err.to_string()))?;
        attrs.push((a.key.local_name().as_ref().to_string(), value.into_owned()));
    }
    let name = e.local_name().as_ref().to_string();
    Ok(Elem { name, attrs, text: String::new(), children: Vec::new(), pos })
}
