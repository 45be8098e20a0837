//! Every shape error of a YAML file, not only the first, in words a user understands.
//!
//! serde stops at the first value of the wrong type. To find the others, the item of a block
//! list (`- ...`) holding the error is blanked out (lines are kept, so line numbers stay true;
//! a list left empty becomes `[]`) and the text is read again, until it reads, nothing more
//! can be masked, or [`MAX_PROBLEMS`] are found. So one problem is reported per list item (a
//! queue, a node group, a workflow, a job, a stage); an error outside every list item (e.g. in
//! `scheduler:`) is blanked out with the lines under it, and a `missing field` that follows is
//! taken for an effect of that and ends the search.

/// Problems collected from one file before giving up (each costs a full read of the file).
pub(crate) const MAX_PROBLEMS: usize = 20;

/// What [`mask`] blanked out.
pub(crate) enum Masked {
    /// A list item, `depth` list items deep (1: an item of a top-level list).
    Item { depth: usize },
    /// A key and what is under it (no list item holds the line).
    Key,
}

/// The rewrite of `text` with the block-list item holding 1-based `line` blanked out. `None`
/// if nothing can be masked.
pub(crate) fn mask(text: &str, line: usize) -> Option<(String, Masked)> {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    let l = line.checked_sub(1).filter(|&l| l < lines.len())?;
    let content = |s: &str| {
        let t = s.trim_start();
        !t.is_empty() && !t.starts_with('#')
    };
    let indent = |s: &str| s.len() - s.trim_start_matches(' ').len();
    let is_item = |s: &str| {
        let t = s.trim_start();
        t == "-" || t.starts_with("- ")
    };
    // The innermost item holding line l: the nearest line above (or l itself) that starts
    // with `- ` and is indented less than everything between it and l.
    let mut cur = if content(&lines[l]) { indent(&lines[l]) } else { usize::MAX };
    let mut item = None;
    for k in (0..=l).rev() {
        if !content(&lines[k]) {
            continue;
        }
        let i = indent(&lines[k]);
        if is_item(&lines[k]) && (k == l || i < cur) {
            item = Some(k);
            break;
        }
        cur = cur.min(i);
    }
    let Some(k) = item else {
        // No list item: blank the line and what is indented under it.
        if !content(&lines[l]) {
            return None;
        }
        let i = indent(&lines[l]);
        lines[l].clear();
        for s in lines.iter_mut().skip(l + 1) {
            if content(s) && indent(s) <= i {
                break;
            }
            s.clear();
        }
        return Some((lines.join("\n"), Masked::Key));
    };
    let i = indent(&lines[k]);
    // How many list items hold this one (each indented less than the last).
    let mut depth = 1;
    let mut edge = i;
    for j in (0..k).rev() {
        if content(&lines[j]) && is_item(&lines[j]) && indent(&lines[j]) < edge {
            depth += 1;
            edge = indent(&lines[j]);
        } else if content(&lines[j]) && indent(&lines[j]) < edge {
            edge = indent(&lines[j]);
        }
    }
    lines[k].clear();
    for s in lines.iter_mut().skip(k + 1) {
        if content(s) && indent(s) <= i {
            break;
        }
        s.clear();
    }
    // The key the list belongs to; if no item of its list is left, it gets `[]`.
    let key = (0..k).rev().find(|&j| content(&lines[j]) && (indent(&lines[j]) < i || !is_item(&lines[j])))?;
    let mut left = false;
    for s in lines.iter().skip(key + 1) {
        if !content(s) {
            continue;
        }
        if indent(s) < i || (indent(s) == i && !is_item(s)) {
            break;
        }
        if indent(s) == i && is_item(s) {
            left = true;
            break;
        }
    }
    if !left {
        let bare = lines[key].split(" #").next().unwrap_or_default().trim_end().to_string();
        if !bare.ends_with(':') {
            return None;
        }
        lines[key] = format!("{bare} []");
    }
    Some((lines.join("\n"), Masked::Item { depth }))
}

/// The list and index of the item `depth` lists deep on serde's `path`
/// (`queues[2].children[0].weight`, depth 2: `("queues[2].children", 0)`).
pub(crate) fn item_of(path: &str, depth: usize) -> Option<(String, usize)> {
    let mut seen = 0;
    for (at, _) in path.match_indices('[') {
        seen += 1;
        if seen == depth {
            let close = at + path[at..].find(']')?;
            return Some((path[..at].to_string(), path[at + 1..close].parse().ok()?));
        }
    }
    None
}

/// `path`, read in a text from which the item `removed` (its list and index) was blanked out,
/// in the indices of the text before.
pub(crate) fn restore(path: &str, removed: &(String, usize)) -> String {
    let (list, index) = removed;
    let Some(rest) = path.strip_prefix(list.as_str()).and_then(|r| r.strip_prefix('[')) else {
        return path.to_string();
    };
    let Some((n, tail)) = rest.split_once(']') else { return path.to_string() };
    match n.parse::<usize>() {
        Ok(n) if n >= *index => format!("{list}[{}]{tail}", n + 1),
        _ => path.to_string(),
    }
}

/// The line of a message ending `at line L, column C`, and the message without it.
pub(crate) fn located(message: &str) -> (Option<(usize, usize)>, &str) {
    let Some(at) = message.rfind(" at line ") else { return (None, message) };
    let place = &message[at + " at line ".len()..];
    let parsed = place.split_once(", column ").and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)));
    match parsed {
        Some(lc) => (Some(lc), &message[..at]),
        None => (None, message),
    }
}

/// serde's and the YAML reader's wording, as a user reads it: `expected WHAT, found VALUE`.
pub(crate) fn humanize(message: &str, text: &str) -> String {
    let (at, bare) = located(message);
    let found = || at.map(|(l, c)| scalar_at(text, l, c)).filter(|s| !s.is_empty());
    let suffix = at.map(|(l, c)| format!(" at line {l}, column {c}")).unwrap_or_default();
    let expected = |what: &str| match found() {
        Some(v) => format!("expected {what}, found {v}"),
        None => format!("expected {what}"),
    };
    let reworded = match bare {
        "invalid u8" | "invalid u16" | "invalid u32" | "invalid u64" | "invalid usize" => {
            let max = match bare {
                "invalid u8" => "255",
                "invalid u16" => "65,535",
                "invalid u32" => "4,294,967,295",
                _ => "18,446,744,073,709,551,615",
            };
            expected(&format!("a whole number from 0 to {max}"))
        }
        "invalid i8" | "invalid i16" | "invalid i32" | "invalid i64" | "invalid isize" => {
            expected("a whole number")
        }
        "invalid floating point" => expected("a number (e.g. 2 or 0.5)"),
        "invalid boolean" => expected("true or false"),
        "expected string scalar" => "expected a single value here, found a list or a mapping".to_string(),
        _ => match serde_wording(bare) {
            Some(s) => s,
            None => bare.to_string(),
        },
    };
    format!("{reworded}{suffix}")
}

/// `invalid value: integer `-3`, expected X` (and `invalid type: ...`) as `expected X, found -3`.
fn serde_wording(bare: &str) -> Option<String> {
    let rest = bare.strip_prefix("invalid value: ").or_else(|| bare.strip_prefix("invalid type: "))?;
    let (what, expected) = rest.split_once(", expected ")?;
    let value = match what.split_once(' ') {
        // integer `-3`, floating point `1.5`, string "x": the value; a sequence, a map: the kind.
        Some((_, v)) if v.starts_with('`') || v.starts_with('"') => v.trim_matches('`').to_string(),
        _ => what.to_string(),
    };
    let expected = match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "a boolean" | "bool" => "true or false",
        other => other,
    };
    Some(format!("expected {expected}, found {value}"))
}

/// The plain scalar starting at 1-based line `l`, column `c` of `text` (up to `,`, `]`, `}`
/// or a comment), or the quoted string there.
fn scalar_at(text: &str, l: usize, c: usize) -> String {
    let Some(line) = text.split('\n').nth(l.saturating_sub(1)) else { return String::new() };
    let rest: String = line.chars().skip(c.saturating_sub(1)).collect();
    let rest = rest.trim();
    if let Some(q) = rest.chars().next().filter(|q| *q == '"' || *q == '\'') {
        if let Some(end) = rest[1..].find(q) {
            return rest[..end + 2].to_string();
        }
    }
    let end = rest.find([',', ']', '}']).unwrap_or(rest.len());
    let v = rest[..end].split(" #").next().unwrap_or_default().trim();
    if v.is_empty() {
        String::new()
    } else {
        format!("`{v}`")
    }
}
