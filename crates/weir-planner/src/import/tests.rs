//! The importer's limits on hostile input.
use super::*;

fn import(xml: &str) -> Result<Imported, PlanError> {
    import_yarn_fair("fs.xml", xml, &ImportOptions::default())
}

#[test]
fn deep_nesting_is_refused_before_it_can_overflow_the_stack() {
    // 8,000 nested queues: the reader stops at MAX_DEPTH elements with an error instead of
    // building (and later recursing through) the whole tree.
    let n = 8000;
    let xml =
        format!("<allocations>{}{}</allocations>", "<queue name=\"q\">".repeat(n), "</queue>".repeat(n));
    let err = import(&xml).unwrap_err().to_string();
    assert!(err.contains("elements nest more than 64 deep"), "{err}");
}

/// The deepest tree weir's cluster file holds imports and validates; one level more is a
/// problem naming the limit, never a file that `weir validate` refuses.
#[test]
fn queues_nest_at_most_as_deep_as_a_cluster_file_can() {
    let nested = |n: usize| {
        format!(
            "<allocations>{}{}</allocations>",
            "<queue name=\"q\"><minResources>1024 mb, 1 vcores</minResources>".repeat(n),
            "</queue>".repeat(n)
        )
    };
    let ok = import(&nested(MAX_QUEUE_DEPTH)).unwrap();
    let yaml = serde_saphyr::to_string(&ok.file).unwrap();
    ClusterConfig::from_yaml("imported.yaml", &yaml).unwrap();
    let err = import(&nested(MAX_QUEUE_DEPTH + 1)).unwrap_err().to_string();
    assert!(err.contains("queues nest 32 deep below root; a weir cluster file holds at most 31"), "{err}");
}

#[test]
fn text_before_the_declaration_is_refused_but_a_byte_order_mark_is_not() {
    let err = import("junk\n<?xml version=\"1.0\"?><allocations/>").unwrap_err().to_string();
    assert!(err.contains("5 bytes before the XML declaration"), "{err}");
    assert!(import("\u{feff}<?xml version=\"1.0\"?><allocations><queue name=\"a\"/></allocations>").is_ok());
}
