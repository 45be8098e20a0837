//! Any bytes as a workload file for the small example cluster; a valid one is simulated briefly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_model::Workload;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let cluster = weir_fuzz::cluster();
    if let Ok(workload) = Workload::from_yaml("w.yaml", text, &cluster) {
        weir_fuzz::simulate_briefly(cluster, workload);
    }
});
