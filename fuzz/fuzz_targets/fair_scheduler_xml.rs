//! Any bytes as a YARN fair-scheduler.xml: import it, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_planner::ImportOptions;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let options = ImportOptions { nodes: Vec::new(), tiers_from_names: true, preemption: true };
    let _ = weir_planner::import_yarn_fair("fair-scheduler.xml", text, &options);
});
