//! A loopback port for a server a test stops and starts again (shared by the tests of
//! `weir-server` and `weir`).

use std::fs;

/// A free loopback port below the kernel's ephemeral range, for a server (`weir serve`,
/// PostgreSQL) a test stops and starts again on the same port. A port from binding port 0 is an
/// ephemeral one: in the moment between a stopped server and its restart, any outgoing
/// connection on the machine (a Spark JVM's, a client's) may be handed it, and the restart
/// fails with "Address already in use" (a CI run did). Ports below the range are never handed
/// out that way; the pick is random so that tests running side by side do not collide, and
/// checked free with a bind.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const FROM: u16 = 10_000;
    if low > FROM + 1_000 {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mut x =
            (nanos as u64) ^ (u64::from(std::process::id()) << 32) ^ DRAWS.fetch_add(1, Ordering::Relaxed);
        for _ in 0..1_000 {
            // xorshift64*: enough to spread the picks of concurrent tests.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let port = FROM + (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as u16 % (low - FROM);
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}
