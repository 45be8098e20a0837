//! docs/cluster-file.md and docs/workload-file.md name every field of the file formats: each
//! `pub` field of the public serde structs is looked for as `` `field` `` in the reference, so
//! a field added to the code without a line in the docs fails here.

use std::path::Path;

/// `pub NAME:` fields of the `pub struct`s in a source file.
fn fields(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_pub_struct = false;
    for line in source.lines() {
        let t = line.trim();
        if t.starts_with("pub struct ") && t.ends_with('{') {
            in_pub_struct = true;
        } else if t == "}" {
            in_pub_struct = false;
        } else if in_pub_struct {
            if let Some(name) = t.strip_prefix("pub ").and_then(|r| r.split_once(':')).map(|(n, _)| n) {
                out.push(name.to_string());
            }
        }
    }
    out
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_field_of_both_formats_is_in_its_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (doc, sources) in [
        (
            "docs/cluster-file.md",
            &["crates/weir-model/src/cluster_file.rs", "crates/weir-model/src/access.rs"][..],
        ),
        ("docs/workload-file.md", &["crates/weir-model/src/workload_file.rs"][..]),
    ] {
        let text = read(&root, doc);
        let mut missing = Vec::new();
        let mut seen = 0;
        for source in sources {
            for field in fields(&read(&root, source)) {
                seen += 1;
                if !text.contains(&format!("`{field}`")) {
                    missing.push(format!("{source}: {field}"));
                }
            }
        }
        assert!(seen > 10, "{doc}: only {seen} fields found in the sources: is the parser still right?");
        assert!(missing.is_empty(), "{doc} does not name these fields:\n{}", missing.join("\n"));
    }
}
