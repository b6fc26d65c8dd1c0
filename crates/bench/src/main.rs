//! `sprig-bench`: the benchmark Sprig is judged by. `create` bulk-loads a database for a
//! workload, `run` executes the workload on one engine, `compare` runs the engines alternately
//! on the same batches and prints the ratios. See BENCHMARKS.md at the repository root.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod cli;
mod compare;
mod engine;
mod report;
mod runner;
mod state_tools;
mod sys;
mod upsert;
mod warm;
mod workload;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command};

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Create(a) => {
            runner::create(
                a.engine,
                &a.dir,
                a.workload,
                a.entries,
                a.seed,
                &a.engine_args,
            )?;
        }
        Command::Run(a) => {
            let r = runner::run(
                a.engine,
                &a.dir,
                &a.common.shape,
                &a.common.engine_args,
                a.quiet,
            )?;
            println!("{}", report::describe(&r));
            print!("{}", report::table(std::slice::from_ref(&r), None, None));
            if let Some(d) = report::engine_detail(&r) {
                println!("{d}");
            }
            if let Some(c) = &r.checked {
                println!("check: {c}");
            }
            if let Some(p) = &a.common.output.json {
                report::write_json(p, &r)?;
            }
            if let Some(p) = &a.common.output.markdown {
                report::write_text(p, &report::run_markdown(&r))?;
            }
        }
        Command::Compare(a) => {
            let c = compare::compare(&a)?;
            compare::output(&c, &a.common.output)?;
        }
        Command::Upsert(a) => upsert::run(&a)?,
        Command::StateTools(a) => state_tools::run(&a)?,
    }
    Ok(())
}
