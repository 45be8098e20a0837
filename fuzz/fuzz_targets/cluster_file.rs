//! Any bytes as a cluster file; a valid one runs the example workload briefly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_model::{ClusterConfig, Workload};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(cluster) = ClusterConfig::from_yaml("c.yaml", text) else { return };
    if let Ok(workload) = Workload::from_yaml("w.yaml", weir_fuzz::WORKLOAD, &cluster) {
        weir_fuzz::simulate_briefly(cluster, workload);
    }
});
