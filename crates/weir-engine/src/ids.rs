//! Identifier newtypes. Jobs and nodes are named by the host; containers by the engine.

use std::fmt;

/// A job (YARN: application), named by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(pub u64);

/// A node, named by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u64);

/// A container, named by the engine when it starts one. Slot and generation packed in one
/// integer, so ids are never reused while a host may still hold an old one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerId(pub u64);

impl ContainerId {
    /// A dense index, reused once the container is gone: hosts can keep per-container records
    /// in a `Vec` indexed by it, and compare the whole id to tell a stale record from a live one.
    pub fn index(self) -> usize {
        self.slot()
    }

    pub(crate) fn new(slot: u32, generation: u32) -> ContainerId {
        ContainerId(((generation as u64) << 32) | slot as u64)
    }

    pub(crate) fn slot(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    pub(crate) fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node-{}", self.0)
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "container-{}.{}", self.slot(), self.generation())
    }
}
