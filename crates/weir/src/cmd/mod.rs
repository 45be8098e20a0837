//! One module per subcommand: its clap `Args` struct and a `run` function.

pub mod bench;
mod bench_plan;
pub mod bench_serve;
pub mod bench_sim;
pub mod client;
pub mod export;
pub mod import;
pub mod plan;
pub mod runs;
pub mod serve;
pub mod shares;
pub mod simulate;
pub mod token;
pub mod validate;
