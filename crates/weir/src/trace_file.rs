//! Opening a trace file: plain, or gzip-compressed (recognised by its first two bytes, whatever
//! its name), read as a stream either way — a trace is never unpacked to disk or into memory.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result};
use flate2::bufread::MultiGzDecoder;

/// gzip's magic number (RFC 1952).
const GZIP: [u8; 2] = [0x1f, 0x8b];

/// A buffered reader of the trace's text. `what` names the flag in errors.
pub fn open(path: &Path, what: &str) -> Result<Box<dyn BufRead>> {
    let file = File::open(path).with_context(|| format!("{what}: cannot open {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let head = reader.fill_buf().with_context(|| format!("{what}: cannot read {}", path.display()))?;
    if head.starts_with(&GZIP) {
        // Concatenated gzip members (as `cat a.gz b.gz` makes) read as one stream.
        Ok(Box::new(BufReader::with_capacity(1 << 20, MultiGzDecoder::new(reader))))
    } else {
        Ok(Box::new(reader))
    }
}
