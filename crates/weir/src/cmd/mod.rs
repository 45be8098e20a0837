//! One module per subcommand: its clap `Args` struct and a `run` function.

pub mod bench;
pub mod bench_sim;
pub mod shares;
pub mod simulate;
pub mod validate;
