//! Usage history: per leaf queue, intervals of constant usage, read from `usage.csv`.
//!
//! The CSV has the columns `start,end,queue,cpu,memory,running_apps`: `start` and `end` are
//! whole milliseconds since the history's epoch (0 = the start of a simulation), `queue` a leaf
//! path (`root.ads.ranking.tier1`; the `root.` may be left out), `cpu` millicores, `memory` MiB
//! and `running_apps` the number of applications running in the leaf. A seventh column, `gpu`
//! (GPUs held, as `weir simulate` and `weir serve` write it), may follow; it is checked and left
//! aside, as the planner plans cpu and memory. A header line is optional. Rows may come in any order and gaps are vacant time; overlaps within one queue are
//! rejected when planning.
//!
//! Reading is a hand-rolled byte parser over a `BufRead` (one reused line buffer, no
//! allocation per row, the previous row's queue remembered), because histories of tens of
//! millions of rows are normal and the planner must read them at disk speed.
//!
//! Queue names are looked up in a hash table keyed with SipHash-1-3 under a secret
//! [`NameKey`] the caller supplies: histories come from users and, through the server, from
//! anyone, and an unkeyed hash lets crafted names pile into one bucket (40,000 crafted 16-byte
//! names took 9.6 s instead of 0.13 s with the word-at-a-time hash this replaced). The key only
//! decides where a name sits in the table, never what is read, so plans stay bit-for-bit the
//! same whatever the key; the crate itself draws no randomness.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::{self, BufRead, Write};

use siphasher::sip::SipHasher13;

use crate::error::PlanError;

/// The planner's columns; the reader also accepts them followed by [`GPU_COLUMN`].
pub const HEADER: &str = "start,end,queue,cpu,memory,running_apps";

/// The optional seventh column: GPUs held (a whole number), read and left aside.
pub const GPU_COLUMN: &str = "gpu";

/// One period of constant usage of one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Milliseconds since the history's epoch; `start <= end`.
    pub start: u64,
    pub end: u64,
    /// Millicores in use.
    pub cpu: u64,
    /// MiB in use.
    pub memory: u64,
    /// Applications running in the queue.
    pub running_apps: u32,
    /// The CSV line it came from, for error messages (0 when not read from a file).
    pub line: u32,
}

/// The usage of every queue the history mentions, in the order queues first appear.
#[derive(Clone, Debug, Default)]
pub struct UsageHistory {
    names: Vec<String>,
    series: Vec<Series>,
    index: HashMap<Box<[u8]>, u32, NameKey>,
}

/// The secret key of the queue-name table (SipHash-1-3). Give [`UsageHistory::read_csv`] an
/// unpredictable key for input you do not control (`weir plan` draws one per run); the
/// [`Default`] key (zero) is predictable and fit only for tests and trusted input. The key
/// never changes a result, only how fast names are found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameKey(pub u64, pub u64);

impl BuildHasher for NameKey {
    type Hasher = SipHasher13;

    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.0, self.1)
    }
}

#[derive(Clone, Debug, Default)]
struct Series {
    intervals: Vec<Interval>,
    /// Rows arrived in non-decreasing `start` order, so planning need not sort them.
    sorted: bool,
}

impl UsageHistory {
    pub fn new() -> UsageHistory {
        UsageHistory::default()
    }

    /// An empty history whose name table is keyed with `key`.
    pub fn with_key(key: NameKey) -> UsageHistory {
        UsageHistory { index: HashMap::with_hasher(key), ..UsageHistory::default() }
    }

    /// The id of queue `name` (as written in the history), adding it if new.
    pub fn queue_id(&mut self, name: &str) -> u32 {
        self.intern(name.as_bytes())
    }

    fn intern(&mut self, name: &[u8]) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(String::from_utf8_lossy(name).into_owned());
        self.series.push(Series { intervals: Vec::new(), sorted: true });
        self.index.insert(name.into(), id);
        id
    }

    /// Append an interval to queue `id` (from [`UsageHistory::queue_id`]).
    pub fn push(&mut self, id: u32, interval: Interval) {
        let s = &mut self.series[id as usize];
        if let Some(last) = s.intervals.last() {
            s.sorted &= last.start <= interval.start;
        }
        s.intervals.push(interval);
    }

    /// Reserve room for `n` more intervals of queue `id`.
    pub fn reserve(&mut self, id: u32, n: usize) {
        self.series[id as usize].intervals.reserve(n);
    }

    /// Queue names as written in the history, each with its intervals (in input order).
    pub fn queues(&self) -> impl Iterator<Item = (&str, &[Interval])> {
        self.names.iter().map(String::as_str).zip(self.series.iter().map(|s| s.intervals.as_slice()))
    }

    pub(crate) fn series(&self, id: usize) -> (&[Interval], bool) {
        (&self.series[id].intervals, self.series[id].sorted)
    }

    pub fn rows(&self) -> usize {
        self.series.iter().map(|s| s.intervals.len()).sum()
    }

    /// The earliest start and the latest end of any interval with a positive length.
    pub fn span(&self) -> Option<(u64, u64)> {
        let mut span: Option<(u64, u64)> = None;
        for iv in self.series.iter().flat_map(|s| &s.intervals).filter(|iv| iv.end > iv.start) {
            span = Some(match span {
                None => (iv.start, iv.end),
                Some((a, b)) => (a.min(iv.start), b.max(iv.end)),
            });
        }
        span
    }

    /// Read `usage.csv` from `reader`; `file` names it in errors, `key` keys the name table.
    pub fn read_csv<R: BufRead>(mut reader: R, file: &str, key: NameKey) -> Result<UsageHistory, PlanError> {
        let mut history = UsageHistory::with_key(key);
        let mut buf: Vec<u8> = Vec::with_capacity(256);
        let mut line_no: u64 = 0;
        let mut seen_content = false;
        let mut last: Option<(Vec<u8>, u32)> = None;
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|source| PlanError::Read { file: file.to_string(), source })?;
            if n == 0 {
                break;
            }
            line_no += 1;
            let mut line = buf.as_slice();
            while let [rest @ .., b'\n' | b'\r'] = line {
                line = rest;
            }
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let first_line = !seen_content;
            seen_content = true;
            if first_line && !line.first().is_some_and(|b| b.is_ascii_digit() || *b == b' ') {
                if is_header(line) {
                    continue;
                }
                return Err(csv_error(
                    file,
                    line_no,
                    "start",
                    format!(
                        "`{}` is neither a number nor the header `{HEADER}`",
                        String::from_utf8_lossy(field_at(line, 0))
                    ),
                ));
            }
            let row = parse_row(line).map_err(|(field, message)| csv_error(file, line_no, field, message))?;
            let id = match &last {
                Some((name, id)) if name.as_slice() == row.queue => *id,
                _ => {
                    if std::str::from_utf8(row.queue).is_err() {
                        return Err(csv_error(file, line_no, "queue", "is not UTF-8 text".to_string()));
                    }
                    let id = history.intern(row.queue);
                    match &mut last {
                        Some((name, last_id)) => {
                            name.clear();
                            name.extend_from_slice(row.queue);
                            *last_id = id;
                        }
                        None => last = Some((row.queue.to_vec(), id)),
                    }
                    id
                }
            };
            history.push(
                id,
                Interval {
                    start: row.start,
                    end: row.end,
                    cpu: row.cpu,
                    memory: row.memory,
                    running_apps: row.running_apps,
                    line: u32::try_from(line_no).unwrap_or(u32::MAX),
                },
            );
        }
        Ok(history)
    }

    /// Write the history as `usage.csv` (with the header), queue by queue in input order.
    pub fn write_csv<W: Write>(&self, mut out: W) -> io::Result<()> {
        writeln!(out, "{HEADER}")?;
        for (name, intervals) in self.queues() {
            for iv in intervals {
                writeln!(
                    out,
                    "{},{},{},{},{},{}",
                    iv.start, iv.end, name, iv.cpu, iv.memory, iv.running_apps
                )?;
            }
        }
        out.flush()
    }
}

fn csv_error(file: &str, line: u64, field: &'static str, message: String) -> PlanError {
    PlanError::Csv { file: file.to_string(), line, field, message }
}

fn is_header(line: &[u8]) -> bool {
    let mut fields = line.split(|&b| b == b',').map(|f| f.trim_ascii());
    HEADER.split(',').all(|h| fields.next().is_some_and(|f| f.eq_ignore_ascii_case(h.as_bytes())))
        && match fields.next() {
            None => true,
            Some(f) => f.eq_ignore_ascii_case(GPU_COLUMN.as_bytes()) && fields.next().is_none(),
        }
}

fn field_at(line: &[u8], i: usize) -> &[u8] {
    line.split(|&b| b == b',').nth(i).unwrap_or(b"").trim_ascii()
}

struct Row<'a> {
    start: u64,
    end: u64,
    queue: &'a [u8],
    cpu: u64,
    memory: u64,
    running_apps: u32,
}

const FIELDS: [&str; 6] = ["start", "end", "queue", "cpu", "memory", "running_apps"];

fn parse_row(line: &[u8]) -> Result<Row<'_>, (&'static str, String)> {
    let mut fields: [&[u8]; 7] = [b""; 7];
    let mut n = 0;
    for f in line.split(|&b| b == b',') {
        if n == 7 {
            return Err((
                GPU_COLUMN,
                format!("the row has more than 7 fields; expected `{HEADER}` and optionally `,{GPU_COLUMN}`"),
            ));
        }
        fields[n] = f;
        n += 1;
    }
    if n < 6 {
        return Err((FIELDS[n], format!("missing: the row has {n} fields; expected `{HEADER}`")));
    }
    let start = number(fields[0], "start", "milliseconds")?;
    let end = number(fields[1], "end", "milliseconds")?;
    if end < start {
        return Err(("end", format!("{end} is before start {start}")));
    }
    let mut queue = fields[2].trim_ascii();
    if let [b'"', inner @ .., b'"'] = queue {
        queue = inner;
    }
    if queue.is_empty() {
        return Err(("queue", "is empty; expected a leaf path such as root.ads.ranking.tier1".to_string()));
    }
    let cpu = number(fields[3], "cpu", "millicores")?;
    let memory = number(fields[4], "memory", "MiB")?;
    let apps = number(fields[5], "running_apps", "applications")?;
    let running_apps = u32::try_from(apps)
        .map_err(|_| ("running_apps", format!("{apps} is too large for a count of applications")))?;
    if n == 7 {
        // Checked like the others, then left aside: the planner plans cpu and memory.
        number(fields[6], GPU_COLUMN, "GPUs")?;
    }
    Ok(Row { start, end, queue, cpu, memory, running_apps })
}

/// A whole, non-negative decimal number; `unit` goes into the message when it is not one.
fn number(field: &[u8], name: &'static str, unit: &str) -> Result<u64, (&'static str, String)> {
    let digits = field.trim_ascii();
    let bad = || (name, format!("`{}` is not a whole number of {unit}", String::from_utf8_lossy(digits)));
    if digits.is_empty() {
        return Err((name, format!("is empty; expected a whole number of {unit}")));
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(bad());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| (name, format!("`{}` is too large", String::from_utf8_lossy(digits))))?;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<UsageHistory, PlanError> {
        UsageHistory::read_csv(text.as_bytes(), "usage.csv", NameKey::default())
    }

    #[test]
    fn reads_rows_with_and_without_a_header() {
        let with =
            read("start,end,queue,cpu,memory,running_apps\n0,1000,root.a,2000,4096,1\r\n1000,3000,b,0,0,0\n")
                .unwrap();
        let without = read("0,1000,root.a,2000,4096,1\n\n1000,3000,b,0,0,0").unwrap();
        // What `weir simulate` and `weir serve` write: a `gpu` column after the planner's six.
        let gpu = read(
            "start,end,queue,cpu,memory,running_apps,gpu\n0,1000,root.a,2000,4096,1,2\r\n1000,3000,b,0,0,0,0\n",
        )
        .unwrap();
        for h in [&with, &without, &gpu] {
            let queues: Vec<(&str, usize)> = h.queues().map(|(n, ivs)| (n, ivs.len())).collect();
            assert_eq!(queues, [("root.a", 1), ("b", 1)]);
            let (_, a) = h.queues().next().unwrap();
            assert_eq!(
                a[0],
                Interval { start: 0, end: 1000, cpu: 2000, memory: 4096, running_apps: 1, line: a[0].line }
            );
            assert_eq!(h.span(), Some((0, 3000)));
        }
        assert_eq!(with.queues().next().unwrap().1[0].line, 2);
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let cases = [
            (
                "0,10,a,1,1,1\n5,x,a,1,1,1\n",
                "usage.csv: line 2: end: `x` is not a whole number of milliseconds",
            ),
            ("0,10,a,1.5,1,1\n", "usage.csv: line 1: cpu: `1.5` is not a whole number of millicores"),
            ("0,10,a,1,1\n", "usage.csv: line 1: running_apps: missing: the row has 5 fields"),
            ("10,5,a,1,1,1\n", "usage.csv: line 1: end: 5 is before start 10"),
            ("0,10,,1,1,1\n", "usage.csv: line 1: queue: is empty"),
            ("time,end,queue\n", "usage.csv: line 1: start: `time` is neither a number nor the header"),
            ("0,10,a,1,1,1,1,1\n", "usage.csv: line 1: gpu: the row has more than 7 fields"),
            ("0,10,a,1,1,1,x\n", "usage.csv: line 1: gpu: `x` is not a whole number of GPUs"),
            (
                "0,10,a,1,99999999999999999999,1\n",
                "usage.csv: line 1: memory: `99999999999999999999` is too large",
            ),
            (
                "0,10,a,1,1,-1\n",
                "usage.csv: line 1: running_apps: `-1` is not a whole number of applications",
            ),
        ];
        for (text, want) in cases {
            let err = read(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.starts_with(want), "{text:?}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn unsorted_rows_are_noticed_and_written_back_as_read() {
        let h = read("100,200,a,1,1,1\n0,100,a,2,2,2\n").unwrap();
        assert!(!h.series(0).1);
        let mut out = Vec::new();
        h.write_csv(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{HEADER}\n100,200,a,1,1,1\n0,100,a,2,2,2\n"));
    }

    /// 4,096 16-byte names that differ only in their last two bytes: under the unkeyed
    /// word-at-a-time hash this module used before, every one of them had the same low 48 bits
    /// (a multiply only carries upward), so all landed in one bucket of the table. Under the
    /// keyed hash they spread over the buckets as random values would.
    #[test]
    fn crafted_names_do_not_share_a_bucket() {
        fn old_word_hash(bytes: &[u8]) -> u64 {
            let mut h: u64 = 0;
            for c in bytes.chunks_exact(8) {
                let w = u64::from_le_bytes(c.try_into().unwrap());
                h = (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
            }
            h
        }
        let names: Vec<Vec<u8>> = (0..4096u32)
            .map(|i| {
                let mut n = b"root.crafted.q..".to_vec();
                n[14] = b'0' + (i % 64) as u8;
                n[15] = b'0' + (i / 64) as u8;
                n
            })
            .collect();
        let buckets = |f: &dyn Fn(&[u8]) -> u64| {
            names.iter().map(|n| f(n) & 0xfff).collect::<std::collections::BTreeSet<u64>>().len()
        };
        assert_eq!(buckets(&old_word_hash), 1, "the attack this guards against");
        for key in [NameKey::default(), NameKey(0x0123_4567, 0x89ab_cdef)] {
            let spread = buckets(&|n: &[u8]| key.hash_one(n));
            assert!(spread > 2000, "{key:?}: {spread} buckets of 4096");
        }
        let mut csv = String::new();
        for n in &names {
            csv.push_str(&format!("0,10,{},1000,1,1\n", String::from_utf8_lossy(n)));
        }
        let h = UsageHistory::read_csv(csv.as_bytes(), "usage.csv", NameKey(3, 4)).unwrap();
        assert_eq!(h.queues().count(), 4096);
    }
}
