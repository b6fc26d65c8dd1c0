//! `sprig`: operate and inspect a Sprig database from the command line — create it, read and
//! write keys, import and export key-values, prove and verify, show statistics, check every
//! page, and run the demo.
//!
//! This module only parses the arguments, dispatches to a command and turns its outcome into
//! output and an exit code (see [`error::exit`]). Commands never print or exit themselves.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod cli;
mod commands;
mod error;
mod format;
mod keys;
mod output;
mod progress;
mod proofdoc;
mod records;
mod spool;
mod statefile;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    let json = args.json;
    let result = commands::run(args);
    std::process::ExitCode::from(output::finish(result, json))
}
