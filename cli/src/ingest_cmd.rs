//! `bcd ingest`: turn the arguments into library options, open the sources and
//! run the ingest through `bcd_pipeline::Destination` (which decides between a
//! local and a remote dataset), draw progress, print the summary.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use bcd_converters::compression::{file_compression, Compression};
use bcd_converters::dir_source::DirSource;
use bcd_pipeline::{
    Destination, IngestError, IngestOptions, OnDuplicate, OpenedSource, Progress, SourceFormat,
    SourceOptions, Staging,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{DuplicateArg, IngestArgs};
use crate::location::{local, location, Location};
use crate::output::{print_ingest_summary, say, UsageError, EXIT_INTERRUPTED};
use crate::signals::{Interrupts, Phase};
use crate::source_args::SourceArgs;
use std::path::PathBuf;

/// The source options as the library takes them: `--format`, `--root` (made
/// local by the caller), and the flags of each format (`crate::source_args`).
fn source_options(args: &IngestArgs, root: Option<PathBuf>) -> Result<SourceOptions, UsageError> {
    let mut options = SourceOptions {
        format: args.format.map(Into::into),
        root,
        ..SourceOptions::default()
    };
    args.source.apply(&mut options)?;
    Ok(options)
}

pub fn run(args: IngestArgs) -> Result<ExitCode> {
    // First, so that a signal while a source is being opened (which may block on
    // a pipe) ends the run too.
    let interrupts = Interrupts::install()?;
    let into = location(&args.into)?;
    let root = args
        .source
        .csv
        .root
        .as_deref()
        .map(|r| local(r, "--root"))
        .transpose()?;
    let staging = args
        .staging
        .as_deref()
        .map(|s| local(s, "--staging"))
        .transpose()?;
    if staging.is_some() && matches!(into, Location::Local(_)) {
        return Err(UsageError("--staging applies only to an --into URI".into()).into());
    }
    let into_name = into.to_string();
    let source_options = source_options(&args, root)?;
    let into = Destination::new(into, Staging { dir: staging })?;
    let OpenedSource { format, source } = into.open_sources(&args.sources, &source_options)?;

    let show_bar = !args.quiet && std::io::stderr().is_terminal();
    let bar = show_bar.then(|| {
        let total = match format {
            SourceFormat::Dir => {
                let mut dir_options = source_options.dir_options();
                if let Some(path) = into.local_path() {
                    dir_options.skip_dirs.push(path.to_owned());
                }
                args.sources
                    .iter()
                    .map(|root| DirSource::total_bytes(Path::new(root), &dir_options).unwrap_or(0))
                    .sum()
            }
            SourceFormat::Tar => uncompressed_archives_size(&args.sources).unwrap_or(0),
            _ => 0,
        };
        progress_bar(total)
    });

    let options = IngestOptions {
        keyless: args.keyless,
        compression: args.compression.map(Into::into),
        max_shard_size: args.max_shard_size,
        on_duplicate: match args.on_duplicate {
            DuplicateArg::Error => OnDuplicate::Error,
            DuplicateArg::Skip => OnDuplicate::Skip,
        },
        dedup: args.dedup.dedup(),
        dedup_report: args.dedup.dedup_report.clone(),
        list_content_duplicates: args.json,
        memory_limit: args.dedup.memory_limit,
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        lz4_mode: args.level,
        // Set by a signal while the pipeline runs; it stops and undoes its work.
        interrupt: Some(interrupts.flag()),
    };
    let mut on_progress = |p: &Progress| {
        if let Some(bar) = &bar {
            bar.set_position(p.bytes_in);
            bar.set_message(format!("{} records", p.records));
        }
    };
    interrupts.enter(Phase::Running);
    let result = into.ingest(source, &options, &mut on_progress);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the ingest was committed",
        Err(_) => "nothing was committed",
    }));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(summary) => {
            print_ingest_summary(&summary, &into_name, args.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(IngestError::Interrupted) => {
            say!("bcd: interrupted; nothing was committed, {into_name} is as it was");
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        // The store's message says the records are there and not to retry.
        Err(error @ IngestError::Store(bcd::Error::CommittedNotDurable { .. })) => {
            Err(anyhow::Error::new(error).context(format!("ingest into {into_name}")))
        }
        Err(error) => Err(anyhow::Error::new(error).context(format!(
            "ingest into {into_name} failed; the dataset is unchanged"
        ))),
    }
}

/// Total size of the archives when every one is an uncompressed file, whose size
/// then approximates the member bytes to come (headers make it a slight
/// overestimate); `None` for stdin or compressed archives, whose content size is
/// unknown until read.
fn uncompressed_archives_size(inputs: &[OsString]) -> Option<u64> {
    let mut total = 0;
    for input in inputs {
        for name in bcd_converters::brace::expand(input.to_str()?).ok()? {
            // Not a regular file (stdin, a FIFO): its size says nothing, and
            // sniffing it would block on or consume its bytes.
            let path = Path::new(&name);
            if file_compression(path).ok()?? != Compression::None {
                return None;
            }
            total += std::fs::metadata(path).ok()?.len();
        }
    }
    Some(total)
}

fn progress_bar(total: u64) -> ProgressBar {
    let bar = if total > 0 {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30} {bytes}/{total_bytes} {msg} {binary_bytes_per_sec} ETA {eta}",
            )
            .expect("valid template"),
        );
        bar
    } else {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {bytes} {msg} {binary_bytes_per_sec} {elapsed}",
            )
            .expect("valid template"),
        );
        bar
    };
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
