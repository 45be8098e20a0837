//! weir-report: the building blocks of weir's HTML reports — a self-contained page (inline CSS,
//! no scripts, nothing fetched), tables, and charts drawn as inline SVG.
//!
//! It knows nothing of simulations or plans: weir-sim and weir-planner describe what to show
//! and this crate draws it. Output is a pure function of the input — numbers are printed with
//! fixed precision — so reports are byte-for-byte reproducible and can be golden-tested.
//! Key types: [`Page`], [`BarChart`], [`LineChart`].

mod chart;
mod page;

pub use chart::{BarChart, Bars, LineChart, Series};
pub use page::{escape, Page};

/// The colours series take in order (colour-blind-safe, after Okabe and Ito).
pub const PALETTE: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];
