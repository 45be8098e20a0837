//! The decision log of `weir bench engine` (and `weir bench sim --digest`) as one stable digest, so that a change meant only
//! to make the engine faster can be shown to decide exactly as before: the same digest before
//! and after means the same decisions, in the same order, in the same passes.
//!
//! Every decision is written as one line of text in a fixed form (below), each pass opened by
//! a `pass N` line, and the digest is the SHA-256 of those lines. The form names every field
//! explicitly instead of relying on `Debug`, whose layout is not a promise; ids are the raw
//! numbers the engine and the bench use. The same lines can be written to a file
//! (`--decision-log`) to find where two runs part ways with `diff`.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use weir_engine::{Decision, PreemptReason, Starvation};

/// A running SHA-256 over the decision log's lines, and optionally the lines themselves.
pub(crate) struct DecisionDigest {
    hash: Sha256,
    decisions: u64,
    passes: u64,
    line: String,
    log: Option<(std::io::BufWriter<std::fs::File>, String)>,
}

impl DecisionDigest {
    /// A digest of nothing yet; with `log`, every line also goes to that file.
    pub(crate) fn new(log: Option<&std::path::Path>) -> Result<DecisionDigest> {
        let log = match log {
            Some(path) => {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("--decision-log: cannot create {}", path.display()))?;
                Some((std::io::BufWriter::new(file), path.display().to_string()))
            }
            None => None,
        };
        Ok(DecisionDigest { hash: Sha256::new(), decisions: 0, passes: 0, line: String::new(), log })
    }

    /// Add the decisions one `schedule` call returned, as one pass.
    pub(crate) fn pass(&mut self, decisions: &[Decision]) -> Result<()> {
        self.passes += 1;
        self.line.clear();
        writeln!(self.line, "pass {}", self.passes)?;
        self.add(decisions)
    }

    /// The same for a pass at a point of virtual time (`weir bench sim`: one pass per step of
    /// the simulation, its line `pass N at MS`, milliseconds since the simulation's start).
    pub(crate) fn pass_at(&mut self, at_ms: u64, decisions: &[Decision]) -> Result<()> {
        self.passes += 1;
        self.line.clear();
        writeln!(self.line, "pass {} at {at_ms}", self.passes)?;
        self.add(decisions)
    }

    fn add(&mut self, decisions: &[Decision]) -> Result<()> {
        for d in decisions {
            line(&mut self.line, d)?;
        }
        self.decisions += decisions.len() as u64;
        self.hash.update(self.line.as_bytes());
        if let Some((file, path)) = &mut self.log {
            file.write_all(self.line.as_bytes())
                .with_context(|| format!("--decision-log: cannot write {path}"))?;
        }
        Ok(())
    }

    /// The digest in hex, how many decisions and passes it covers; the log file is flushed.
    pub(crate) fn finish(self) -> Result<(String, u64, u64)> {
        if let Some((mut file, path)) = self.log {
            file.flush().with_context(|| format!("--decision-log: cannot write {path}"))?;
        }
        let mut hex = String::with_capacity(64);
        for b in self.hash.finalize().iter() {
            write!(hex, "{b:02x}")?;
        }
        Ok((hex, self.decisions, self.passes))
    }
}

/// One decision as a line: its kind, then its fields in a fixed order.
fn line(out: &mut String, d: &Decision) -> std::fmt::Result {
    match d {
        Decision::JobRunnable { job } => writeln!(out, "runnable {}", job.0),
        Decision::JobRejected { job, reason } => writeln!(out, "rejected {} {reason:?}", job.0),
        Decision::StartContainer { container, job, node, resources: r, tag, am } => writeln!(
            out,
            "start {} job {} node {} cpu {} memory {} gpu {} tag {tag} am {am}",
            container.0, job.0, node.0, r.cpu, r.memory, r.gpu
        ),
        Decision::PreemptContainer { container, job, kill_at, reason } => {
            write!(out, "preempt {} job {} kill_at {} ", container.0, job.0, kill_at.as_millis())?;
            because(out, reason)
        }
        Decision::KillContainer { container, job, reason } => {
            write!(out, "kill {} job {} ", container.0, job.0)?;
            because(out, reason)
        }
    }
}

fn because(out: &mut String, r: &PreemptReason) -> std::fmt::Result {
    let kind = match r.kind {
        Starvation::FairShare => "fair_share",
        Starvation::MinShare => "min_share",
        Starvation::Guarantee { .. } => "guarantee",
        Starvation::JobGuarantee => "job_guarantee",
        Starvation::LentRoom => "lent_room",
    };
    writeln!(out, "for {} {} {kind}", r.for_job.0, r.for_queue)
}
