//! Any bytes as a usage history (`usage.csv`): read it, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_planner::UsageHistory;

fuzz_target!(|data: &[u8]| {
    let _ = UsageHistory::read_csv(data, "usage.csv");
});
