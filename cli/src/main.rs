//! `bcd`: the command-line front end. The library does the work; this is glue.

mod args;
mod commands;
mod ingest_cmd;
mod size;

use std::io;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("bcd: internal error (this is a bug, please report it): {info}");
    }));
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bcd: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `bcd ls | head` closes the pipe early: that is success, not an error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
