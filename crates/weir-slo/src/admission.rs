//! Admission: does a new SLO job fit beside the SLO jobs already admitted?
//!
//! Each job needs, to be predicted on time, the allocation its controller would start it at
//! (the quantile and slack of its settings, from progress 0). Jobs whose windows overlap run
//! together, so the check is conservative: the sum of those allocations over the admitted
//! jobs and the new one must fit in the containers the cluster guarantees to SLO work.

/// An SLO job as the admission check sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmittedJob {
    pub name: String,
    /// Containers it needs from its start to be predicted on time.
    pub allocation: u32,
    /// Whether it can be on time at all: some allocation the model knows meets its deadline.
    pub feasible: bool,
}

/// The answer, with its reason in words.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    pub admitted: bool,
    pub reason: String,
}

/// Whether `new` fits beside `admitted` in `capacity` guaranteed containers.
pub fn admit(new: &AdmittedJob, admitted: &[AdmittedJob], capacity: u32) -> Admission {
    if !new.feasible {
        return Admission {
            admitted: false,
            reason: format!(
                "{} cannot meet its deadline even at {} containers, the most it can use",
                new.name, new.allocation
            ),
        };
    }
    let taken: u32 = admitted.iter().map(|j| j.allocation).sum();
    let free = capacity.saturating_sub(taken);
    if new.allocation <= free {
        Admission {
            admitted: true,
            reason: format!(
                "{} needs {} containers; {free} of {capacity} are free beside {} admitted job(s) holding {taken}",
                new.name,
                new.allocation,
                admitted.len()
            ),
        }
    } else {
        Admission {
            admitted: false,
            reason: format!(
                "{} needs {} containers but only {free} of {capacity} are free: {} admitted job(s) hold {taken} ({})",
                new.name,
                new.allocation,
                admitted.len(),
                admitted.iter().map(|j| format!("{} {}", j.name, j.allocation)).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}
