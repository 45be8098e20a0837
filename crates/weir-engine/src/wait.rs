//! Cheap pure queries for hosts that record why jobs wait: a reason code per waiting job
//! (`wait_reason`), and where a job stands in the order in which jobs will start
//! (`start_position`).
//!
//! `explain` writes sentences and walks the nodes; a host that samples every waiting job
//! often (the server records each job's waiting spells) needs only the rule that holds the job
//! back, the queue it applies to and the limit. `wait_reason` checks the running-app limits on
//! the job's path, its user, the queue maxima and the AM share in the order `explain` does, and
//! never searches the nodes for room: a runnable job that none of those limits hold back waits
//! for room (`NoRoom`), which is what a pass that just ran found.

use weir_model::{QueuePath, Resources};

use crate::engine::Engine;
use crate::error::EngineError;
use crate::ids::JobId;
use crate::placement::Blocker;
use crate::state::{JobSlot, JobState, QueueIx};

/// Why a job waits, reduced to the rule, the queue it applies to and the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// A queue on its path is at its `max_running_apps`.
    QueueMaxRunningApps { queue: QueuePath, limit: u32 },
    /// Its user is at the scheduler's `user_max_running_apps`.
    UserMaxRunningApps { user: String, limit: u32 },
    /// A queue on its path would go over its max resources with its next container.
    QueueMax { queue: QueuePath, max: Resources },
    /// Its application master would put the leaf's AM usage over the AM share.
    AmShare { queue: QueuePath, limit: Resources },
    /// The engine holds its bound on containers at once.
    ContainerLimit { limit: usize },
    /// Its gang cannot start whole yet.
    Gang { queue: QueuePath, size: u64 },
    /// Capacity mode: its user holds more than the user limit in its leaf.
    UserLimit { queue: QueuePath, user: String, limit: Resources },
    /// No limit holds it back: the cluster has no room for its next container where its fair
    /// share lets it go (other jobs come first or hold the room).
    NoRoom { queue: QueuePath },
}

impl WaitReason {
    /// A short stable code: what hosts store and group by.
    pub fn code(&self) -> &'static str {
        match self {
            WaitReason::QueueMaxRunningApps { .. } => "queue_max_running_apps",
            WaitReason::UserMaxRunningApps { .. } => "user_max_running_apps",
            WaitReason::QueueMax { .. } => "queue_max_resources",
            WaitReason::AmShare { .. } => "am_share",
            WaitReason::ContainerLimit { .. } => "container_limit",
            WaitReason::Gang { .. } => "gang_waiting_for_room",
            WaitReason::UserLimit { .. } => "user_limit",
            WaitReason::NoRoom { .. } => "no_room",
        }
    }

    /// The queue (or user) the rule applies to, as text; empty for the container limit.
    pub fn subject(&self) -> String {
        match self {
            WaitReason::QueueMaxRunningApps { queue, .. }
            | WaitReason::QueueMax { queue, .. }
            | WaitReason::AmShare { queue, .. }
            | WaitReason::Gang { queue, .. }
            | WaitReason::NoRoom { queue } => queue.to_string(),
            WaitReason::UserMaxRunningApps { user, .. } => format!("user {user}"),
            WaitReason::UserLimit { queue, user, .. } => format!("user {user} in {queue}"),
            WaitReason::ContainerLimit { .. } => String::new(),
        }
    }
}

/// Where a job stands in the order in which waiting jobs will start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartPosition {
    /// 1 = the next to start.
    pub position: u64,
    /// How many jobs are in that order.
    pub of: u64,
    /// The jobs ahead of it, the nearest first (at most `AHEAD_LISTED`).
    pub ahead: Vec<JobId>,
    /// What the order is: the queue whose slots it waits for, or its leaf.
    pub scope: QueuePath,
    /// Whether the order is promotion into running-app slots (else the leaf's policy order).
    pub promotion: bool,
}

/// Most jobs `start_position` names among those ahead.
pub const AHEAD_LISTED: usize = 10;

impl Engine {
    /// Why `job` waits, if it does: `None` for a runnable job with nothing pending, or whose
    /// next container would be placed by the next pass. Costs a walk up the job's path and a
    /// few comparisons (no node search), so a host can ask it for every waiting job often.
    pub fn wait_reason(&self, job: JobId) -> Result<Option<WaitReason>, EngineError> {
        let slot = self.slot_of(job)?;
        let j = self.job(slot);
        let leaf = self.queues[j.leaf as usize].path.clone();
        if j.state == JobState::Waiting {
            if let Some(q) = self.full_queue_on_path(j.leaf) {
                let q = &self.queues[q as usize];
                return Ok(Some(WaitReason::QueueMaxRunningApps {
                    queue: q.path.clone(),
                    limit: q.max_running_apps.unwrap_or_default(),
                }));
            }
            let limit = self.config.scheduler.user_max_running_apps.unwrap_or_default();
            return Ok(Some(WaitReason::UserMaxRunningApps {
                user: self.users[j.user as usize].name.clone(),
                limit,
            }));
        }
        let Some(front) = j.requests.front() else { return Ok(None) };
        if front.gang != 0 {
            return Ok(match self.gang_blocker_cheap(slot) {
                Some(r) => Some(r),
                None => Some(WaitReason::Gang {
                    queue: leaf,
                    size: j
                        .requests
                        .iter()
                        .filter(|r| r.gang == front.gang)
                        .map(|r| u64::from(r.count))
                        .sum::<u64>()
                        + j.placeholders.len() as u64,
                }),
            });
        }
        if let Err(b) = self.limits_allow(slot) {
            let mut reason = self.reason_of(b, j.leaf);
            if let WaitReason::UserLimit { user, .. } = &mut reason {
                user.clone_from(&self.users[j.user as usize].name);
            }
            return Ok(Some(reason));
        }
        if self.at_container_limit(1) {
            return Ok(Some(WaitReason::ContainerLimit { limit: self.container_limit }));
        }
        Ok(Some(WaitReason::NoRoom { queue: leaf }))
    }

    /// The limits that hold a gang back (its queues' maxima, the container bound), without
    /// counting the room the nodes have.
    fn gang_blocker_cheap(&self, slot: JobSlot) -> Option<WaitReason> {
        let (_, indices, left) = self.front_gang(slot)?;
        let demand = self.gang_demand(slot, &indices);
        let leaf = self.job(slot).leaf;
        if let Some(q) = self.path_up(leaf).find(|&q| {
            let q = &self.queues[q as usize];
            !(q.usage + demand).fits_in(&q.max)
        }) {
            return Some(self.reason_of(Blocker::QueueMax(q), leaf));
        }
        self.at_container_limit(left as usize).then(|| self.reason_of(Blocker::ContainerLimit, leaf))
    }

    fn reason_of(&self, b: Blocker, leaf: QueueIx) -> WaitReason {
        match b {
            Blocker::QueueMax(q) => {
                let q = &self.queues[q as usize];
                WaitReason::QueueMax { queue: q.path.clone(), max: q.max }
            }
            Blocker::AmShare { limit } => {
                WaitReason::AmShare { queue: self.queues[leaf as usize].path.clone(), limit }
            }
            Blocker::ContainerLimit => WaitReason::ContainerLimit { limit: self.container_limit },
            Blocker::UserLimit { limit } => WaitReason::UserLimit {
                queue: self.queues[leaf as usize].path.clone(),
                user: String::new(),
                limit,
            },
            Blocker::NoRoom => WaitReason::NoRoom { queue: self.queues[leaf as usize].path.clone() },
            Blocker::LabelMax { queue, max, .. } => WaitReason::QueueMax {
                queue: self.queues[queue as usize].path.clone(),
                max: Resources { memory: max, ..Resources::ZERO },
            },
        }
    }

    /// Where `job` stands in the order in which it will start, if it waits. A job waiting for a
    /// running-app slot stands among the jobs waiting under the queue whose slots it waits
    /// for (its user's limit: under the root), in promotion order (`promotion: priority` puts
    /// higher tiers first, then submit time); a runnable job with pending containers stands in
    /// its leaf's order (the leaf's policy: fair, drf, fifo or priority), among the jobs that
    /// want a container. Costs the number of jobs counted.
    pub fn start_position(&self, job: JobId) -> Result<Option<StartPosition>, EngineError> {
        let slot = self.slot_of(job)?;
        let j = self.job(slot);
        if j.state == JobState::Waiting {
            let top = self.full_queue_on_path(j.leaf).unwrap_or(0);
            let mine = (self.promotion_key(slot), slot);
            let t = &self.queues[top as usize];
            // Count those ahead in each user's set; keep only the nearest few of each to name.
            let mut nearest: Vec<(crate::state::PromotionKey, JobSlot)> = Vec::new();
            let (mut of, mut before) = (0u64, 0u64);
            for q in top..t.subtree_end {
                for set in self.queues[q as usize].waiting.values() {
                    of += set.len() as u64;
                    before += set.range(..mine).count() as u64;
                    nearest.extend(set.range(..mine).rev().take(AHEAD_LISTED).copied());
                }
            }
            nearest.sort();
            let ahead = nearest;
            let position = before + 1;
            return Ok(Some(StartPosition {
                position,
                of,
                ahead: ahead.iter().rev().take(AHEAD_LISTED).map(|&(_, s)| self.job(s).id).collect(),
                scope: t.path.clone(),
                promotion: true,
            }));
        }
        let Some((key, _, lane)) = j.ready else { return Ok(None) };
        let l = &self.queues[j.leaf as usize];
        let set = if lane { &l.ready_am } else { &l.ready };
        let mut ahead: Vec<JobSlot> =
            set.iter().take_while(|e| (e.0, e.1) < (key, slot)).map(|e| e.1).collect();
        let of = (l.ready.len() + l.ready_am.len()) as u64;
        ahead.reverse();
        Ok(Some(StartPosition {
            position: ahead.len() as u64 + 1,
            of,
            ahead: ahead.iter().take(AHEAD_LISTED).map(|&s| self.job(s).id).collect(),
            scope: l.path.clone(),
            promotion: false,
        }))
    }
}
