//! A synthetic load inside a live engine actor, for measurement only (`weir bench engine
//! --live`): how long a pass at a large cluster's size holds the actor, and what the API
//! answers meanwhile.
//!
//! A bench installs an [`EngineLoad`] for a cluster before it starts the server; that cluster's
//! actor takes it when it starts and, on every pass, lets it act on the engine first (submit
//! jobs, end containers), hands it the decisions about its own jobs instead of turning them
//! into attempts, and tells it how long the pass took. Nothing else installs one: a server
//! without it runs exactly as before, and none of the load's jobs or containers reaches the
//! store or a backend.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use weir_engine::{Decision, Engine};
use weir_model::Time;

/// Jobs and containers a bench drives inside an actor's engine.
pub trait EngineLoad: Send + Sync {
    /// At the start of each pass, before the actor's own inputs reach `schedule`.
    fn before_pass(&mut self, engine: &mut Engine, now: Time);
    /// A decision of this pass: true if it is about the load's own jobs (the actor then leaves
    /// it alone).
    fn take(&mut self, decision: &Decision) -> bool;
    /// The pass is over: it took `took` from the claim of queued runs to the starts and kills
    /// (what `/metrics` reports as the pass time; the queue snapshot is published after it).
    fn after_pass(&mut self, took: Duration);
    /// The actor published its queue snapshot (about once a second, after a pass): building
    /// its parts from the engine and putting them on the process's board held the actor for
    /// `took`.
    fn published(&mut self, took: Duration);
    /// The actor's store writer wrote a snapshot (off the actor): serializing the parts that
    /// changed and the store write took `took`; `changed`: some part had changed (else it was
    /// the periodic rewrite of an unchanged one).
    fn written(&mut self, took: Duration, changed: bool) {
        let _ = (took, changed);
    }
}

static LOADS: Mutex<Option<HashMap<String, Box<dyn EngineLoad>>>> = Mutex::new(None);

/// Give `load` to the next actor of `cluster` in this process.
pub fn install(cluster: &str, load: Box<dyn EngineLoad>) {
    let mut loads = LOADS.lock().unwrap_or_else(|p| p.into_inner());
    loads.get_or_insert_with(HashMap::new).insert(cluster.to_string(), load);
}

/// The load installed for `cluster`, if any (taken: a later actor of it runs without).
pub(crate) fn take(cluster: &str) -> Option<Box<dyn EngineLoad>> {
    let mut loads = LOADS.lock().unwrap_or_else(|p| p.into_inner());
    loads.as_mut()?.remove(cluster)
}
