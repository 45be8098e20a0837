//! Facts about processes read from `/proc`, and the wall clock.

use std::fs;
use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

/// A process's start time in clock ticks after boot (`/proc/PID/stat` field 22), or `None`
/// when no process has that pid. The start time never changes for a process (not even on
/// `exec`), so pid + start time names one process for the whole boot.
pub(crate) fn start_ticks(pid: i32) -> Option<u64> {
    let stat = fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_start_ticks(&stat)
}

/// Field 22 of a `/proc/PID/stat` line. Field 2 is the command name in parentheses and may
/// itself contain spaces and parentheses, so counting starts after the *last* `)`.
pub(crate) fn parse_start_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    // After the `)`: field 3 (state) is the first word, so field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// This boot's id: no process survives a change of it.
pub(crate) fn boot_id() -> io::Result<String> {
    Ok(fs::read_to_string("/proc/sys/kernel/random/boot_id")?.trim().to_string())
}

/// The arguments a process was started with (`/proc/PID/cmdline`), or `None` if it is gone.
pub(crate) fn cmdline(pid: i32) -> Option<Vec<Vec<u8>>> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args: Vec<Vec<u8>> = raw.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
    if args.last().is_some_and(Vec::is_empty) {
        args.pop();
    }
    Some(args)
}

/// Whether process `pid` has the file `(dev, ino)` open (`/proc/PID/fd`); false when it is
/// gone or its descriptors cannot be read.
pub(crate) fn holds_open(pid: i32, file: (u64, u64)) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.flatten().any(|fd| fs::metadata(fd.path()).is_ok_and(|m| (m.dev(), m.ino()) == file))
}

/// Every pid in `/proc` right now.
pub(crate) fn all_pids() -> io::Result<Vec<i32>> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc")? {
        if let Some(pid) = entry?.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_is_field_22_even_with_parentheses_in_the_name() {
        // Fields 3..=21 are filler here; 22 is 777.
        let fill: Vec<String> = (3..=21).map(|i| i.to_string()).collect();
        let line = format!("123 (we (ird) name) {} 777 23 24", fill.join(" "));
        assert_eq!(parse_start_ticks(line.as_bytes()), Some(777));
        assert_eq!(parse_start_ticks(b"123 (short) S 1 2"), None);
    }

    #[test]
    fn start_ticks_of_this_process_is_stable() {
        let me = std::process::id() as i32;
        let a = start_ticks(me);
        assert!(a.is_some());
        assert_eq!(a, start_ticks(me));
    }
}
