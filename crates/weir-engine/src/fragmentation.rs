//! GPU fragmentation as the FGD paper measures it (Weng et al., "Beware of Fragmentation:
//! Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023; its
//! simulator's `NodeGpuShareFragAmount` in `pkg/utils/frag.go`): for a mix of task kinds with
//! their shares of the workload, the idle GPU room a task of each kind could not use — all of a
//! node's idle GPU room when the task cannot run there at all (too little cpu or memory, too few
//! GPUs, another model or label), else the idle room on the GPUs that each hold less than the
//! task asks for — weighted by the kind's share and summed over the nodes.

use crate::engine::Engine;
use crate::input::Request;
use crate::nodes::GPU_MILLI;

/// The cluster's GPUs at one moment, in thousandths of a GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuFragmentation {
    /// GPUs in the cluster, in thousandths.
    pub total: u64,
    /// GPU room given out (whole GPUs and fractions).
    pub allocated: u64,
    /// GPU room idle.
    pub idle: u64,
    /// Idle room a task drawn from the mix could not use, on average (≤ `idle`).
    pub fragmented: f64,
}

impl Engine {
    /// The FGD fragmentation of the cluster now for `mix`: task kinds (a request's resources,
    /// GPU fraction and selector; the count is ignored) and their shares, which should sum to 1.
    pub fn gpu_fragmentation(&self, mix: &[(Request, f64)]) -> GpuFragmentation {
        let mut out = GpuFragmentation::default();
        for (slot, n) in self.nodes.slots.iter().enumerate() {
            if !n.alive || n.capacity.gpu == 0 {
                continue;
            }
            let free = n.free();
            let partial: Vec<u32> =
                n.frac.iter().filter(|&&u| u > 0).map(|&u| GPU_MILLI - u32::from(u)).collect();
            let idle = free.gpu * u64::from(GPU_MILLI) + partial.iter().map(|&m| u64::from(m)).sum::<u64>();
            out.total += n.capacity.gpu * u64::from(GPU_MILLI);
            out.idle += idle;
            if idle == 0 {
                continue;
            }
            for (r, share) in mix {
                let ask = r.ask();
                let runs = ask.r.cpu <= free.cpu
                    && ask.r.memory <= free.memory
                    && ask.r.gpu <= free.gpu
                    && n.frac_fits(ask.milli)
                    && self.nodes.allows(slot as u32, ask.selector);
                let lost = if !runs {
                    idle
                } else {
                    // Whole GPUs ask for all of a GPU; a fraction for its thousandths. A GPU with
                    // less room than that is lost to this task.
                    let need = if ask.milli > 0 {
                        ask.milli
                    } else if ask.r.gpu > 0 {
                        GPU_MILLI
                    } else {
                        0
                    };
                    partial.iter().filter(|&&m| m < need).map(|&m| u64::from(m)).sum()
                };
                out.fragmented += share * lost as f64;
            }
        }
        out.allocated = out.total - out.idle;
        out
    }
}
