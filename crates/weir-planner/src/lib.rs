//! weir-planner: capacity planning from usage history — the Percentile allocation, usage/capacity
//! reports, and the exporters and importer that carry a plan to YARN, YuniKorn and Kueue.
//!
//! It is pure: no network, no clock, no files of its own (callers hand it a `BufRead` or text
//! and a name for errors), no randomness, and the same inputs give the same plan bit for bit.
//!
//! Key types and entry points:
//! - [`UsageHistory`]: per-queue intervals of constant usage, read from `usage.csv` by a fast
//!   byte parser ([`UsageHistory::read_csv`]);
//! - [`PlanSettings`]: window, instance type, per-tier percentiles, headroom, shrink floor;
//! - [`plan`] → [`Plan`]: per-leaf allocation (the smallest whole number of instances covering
//!   p% of the leaf's in-use time, raised to the SLO floor), `max_running_apps`, weights in one
//!   unit (instances; leaves without history keep their share), usage/capacity per queue, tier
//!   and cluster, the tier-order check, the tier-1 and tier-1+2 usage added up over time
//!   ([`SummedUsage`]) and the verdict on it, warnings, and the planned cluster
//!   ([`Plan::planned`]);
//! - [`export()`] in five [`Format`]s, each an [`Exported`] file with the list of what the
//!   target cannot express; [`import_yarn_fair`] for YARN allocation files; and
//!   [`report_html`] for a self-contained HTML report (with a [`Comparison`] of current and
//!   planned settings after `--validate`);
//! - [`slo_report`]: SLO success per tier and workflow over run records, with `weir
//!   simulate`'s definitions; [`comparison_rows`] and [`tier1_regression`] judge a plan by
//!   the replays of `--validate` (run by the caller);
//! - [`advise()`] → [`Advice`]: which workflows to move between clusters to even out their CPU
//!   and memory use, each move checked in the simulator (`weir advise` and the server's
//!   scheduled advisor share it).

pub mod advise;
pub mod error;
pub mod export;
pub mod html;
pub mod import;
pub mod percentile;
pub mod plan;
mod plan_checks;
pub mod settings;
pub mod slo;
pub mod slo_report;
pub mod summary;
pub mod summed;
pub mod usage;
pub mod validation;

pub use advise::{
    advise, best_fits, with_fits, Advice, AdviseError, AdviseSettings, ClusterState, Fit, Move, Site,
};
pub use error::PlanError;
pub use export::{export, ExportOptions, Exported, Format, Version};
pub use html::{report_html, Comparison};
pub use import::{
    import_yarn_capacity, import_yarn_fair, ImportOptions, Imported, ResourceCalculator, MAX_QUEUE_DEPTH,
};
pub use percentile::{LeafUsage, TimeHistogram};
pub use plan::{plan, IgnoredQueue, Plan, PlanInput, QueuePlan, QueueStatus, Used, Window};
pub use settings::PlanSettings;
pub use slo::{slo_floors, SloFloor};
pub use slo_report::{slo_report, RunEnd, RunOutcome, SloFigures, SloReport, TierSlo, WorkflowSlo};
pub use summary::{ClusterSummary, Ratios, TierOrder, TierSummary, Verdict};
pub use summed::SummedUsage;
pub use usage::{Interval, NameKey, UsageHistory};
pub use validation::{comparison_rows, tier1_regression, Tier1};
