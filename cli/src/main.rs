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
        // The Parquet source reports these as a corrupt file, naming it and the rows.
        if bcd_converters::parquet_source::decoding_parquet() {
            return;
        }
        eprintln!("bcd: internal error (this is a bug, please report it): {info}");
    }));
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bcd: {}", message(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, joined by ": " as `{:#}` does, leaving out a cause
/// whose text already ends the message before it: errors such as
/// `SourceError::Io` ("PATH: CAUSE") both show and chain their cause, which `{:#}`
/// prints twice ("x.tar: No such file or directory (os error 2): No such file or
/// directory (os error 2)").
fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut previous = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if !previous.is_empty() && previous.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
        previous = part;
    }
    text
}

/// `bcd ls | head` closes the pipe early: that is success, not an error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}
