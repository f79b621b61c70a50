//! `bcd`: the command-line front end. The library does the work; this is glue.
//!
//! Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted. No write to
//! stdout or stderr can panic (see [`output`]).
//!
//! [`args`] is what the user typed; each command has a file of its own
//! (`*_cmd.rs`) that takes a local path and a URI alike, through [`location`],
//! and prints through [`output`]; [`run`] hands each command its arguments.

mod args;
mod create_cmd;
mod dedup_index_cmd;
mod export_cmd;
mod gc_cmd;
mod get_cmd;
mod info_cmd;
mod ingest_cmd;
mod location;
mod ls_cmd;
mod merge_cmd;
mod output;
mod selection;
mod signals;
mod source_args;
mod stats_cmd;
mod transfer_cmd;
mod verify_cmd;
mod view_cmd;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::output::{say, Outcome};

/// mimalloc, not the system allocator: an ingest allocates each record on its
/// reader thread and frees it on the writer thread, and glibc malloc's arena locks
/// made that hand-over a measurable share of the time (issue 27, BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (mimalloc.h's `mi_option_t`; libmimalloc-sys
/// has no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    // Freed memory goes back to the system after 10 ms instead of mimalloc v3's
    // 1 s: with 1 s an ingest with fields peaked about 20 MB higher (issue 27).
    // SAFETY: mi_option_set is not thread safe; no other thread exists yet.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10) };
    std::panic::set_hook(Box::new(|info| {
        // A decoder's guard reports these as a corrupt file, naming it and
        // where in it (bcd_fields::contain_panics).
        if bcd_fields::containing_panics() {
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
    let cli = Cli::parse();
    match run(cli.command) {
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

/// Runs one command: each arm hands the parsed arguments to the command's file.
fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Create {
            dataset,
            keyed,
            compression,
            max_shard_size,
        } => create_cmd::run(&dataset, keyed, compression, max_shard_size),
        Command::Info { dataset, json } => info_cmd::run(&dataset, json),
        Command::Get {
            dataset,
            key,
            index,
            hex,
            output,
            fields,
            view,
        } => get_cmd::run(
            &dataset,
            key.as_deref(),
            index,
            hex,
            output.as_deref(),
            fields,
            view.as_deref(),
        ),
        Command::Ls {
            dataset,
            null,
            fields,
            view,
            where_,
        } => ls_cmd::run(&dataset, null, fields, view.as_deref(), where_.as_deref()),
        Command::Stats {
            dataset,
            json,
            shards,
            view,
            where_,
        } => stats_cmd::run(&dataset, json, shards, view.as_deref(), where_.as_deref()),
        Command::View(command) => view_cmd::run(command),
        Command::Ingest(args) => ingest_cmd::run(*args),
        Command::Export(args) => export_cmd::run(args),
        Command::Merge(args) => merge_cmd::run(args),
        Command::Gc {
            dataset,
            dry_run,
            older_than,
            json,
        } => gc_cmd::run(&dataset, dry_run, older_than, json),
        Command::Verify { dataset, content } => verify_cmd::run(&dataset, content),
        Command::DedupIndex {
            dataset,
            jobs,
            json,
        } => dedup_index_cmd::run(&dataset, jobs, json),
        Command::Push {
            dataset,
            uri,
            transfer,
            replace,
        } => transfer_cmd::push(&dataset, &uri, &transfer, replace),
        Command::Pull {
            uri,
            dataset,
            transfer,
            replace,
        } => transfer_cmd::pull(&uri, &dataset, &transfer, replace),
    }
}

/// The error and its causes, joined by ": " as `{:#}` does: each library
/// error says what went wrong where, and leaves its cause to the chain. The
/// options the libraries name by field are spelled as this CLI's flags.
fn message(error: &anyhow::Error) -> String {
    bcd_pipeline::spell_options(&output::chain(error.as_ref()), output::flag)
}
