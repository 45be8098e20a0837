//! Any bytes as a alibaba trace; what imports is replayed briefly on the small example cluster.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_model::QueuePath;
use weir_sim::import::{import, ImportOptions, TraceKind};

fuzz_target!(|data: &[u8]| {
    let options = ImportOptions {
        queue: QueuePath::parse("root.default").expect("a path"),
        max_jobs: 2_000,
        max_stages: 20_000,
        ..ImportOptions::default()
    };
    // An in-memory reader cannot fail; limits may refuse the trace.
    let Ok(imported) = import(TraceKind::Alibaba2018, "t", data, &options) else { return };
    weir_fuzz::simulate_briefly(weir_fuzz::cluster(), imported.workload);
});
