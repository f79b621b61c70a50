//! `bcd`: the command-line front end. The library does the work; this is glue.
//!
//! Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted. No write to
//! stdout or stderr can panic (see [`output`]).

mod args;
mod commands;
mod export_cmd;
mod ingest_cmd;
mod output;
mod remote_cmd;
mod signals;
mod source_args;
mod stats_cmd;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::output::{say, Outcome};

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        // The Parquet source reports these as a corrupt file, naming it and the rows.
        if bcd_converters::parquet_source::decoding_parquet() {
            return;
        }
        // Not eprintln!: a panic while printing a panic (stderr on a full disk)
        // would abort.
        let _ = writeln!(
            std::io::stderr(),
            "bcd: internal error (this is a bug, please report it): {info}"
        );
    }));
    // clap prints help and usage errors itself, ignoring write errors, and exits
    // with 0 or 2.
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => match output::outcome(&error) {
            Outcome::Quiet => ExitCode::SUCCESS,
            Outcome::Exit(code) => {
                say!("bcd: {}", message(&error));
                ExitCode::from(code)
            }
        },
    }
}

/// The error and its causes, joined by ": " as `{:#}` does: each library
/// error says what went wrong where, and leaves its cause to the chain. The
/// options the libraries name by field are spelled as this CLI's flags.
fn message(error: &anyhow::Error) -> String {
    bcd_pipeline::spell_options(&output::chain(error.as_ref()), output::flag)
}
