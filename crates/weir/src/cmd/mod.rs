//! One module per subcommand: its clap `Args` struct and a `run` function.

pub mod bench;
mod bench_plan;
pub mod export;
pub mod import;
pub mod plan;
pub mod shares;
pub mod validate;
