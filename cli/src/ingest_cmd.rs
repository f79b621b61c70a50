//! `bcd ingest`: turn the arguments into library options (sources are opened by
//! `bcd_pipeline::open_sources_into`), run the pipeline, draw progress, print the
//! summary.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use bcd_converters::detect::{file_compression, Compression};
use bcd_converters::dir_source::DirSource;
use bcd_pipeline::{
    open_sources, open_sources_into, IngestError, IngestOptions, IngestSummary, OnDuplicate,
    OpenedSource, Progress, SourceFormat, SourceOptions, Staging,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{DuplicateArg, IngestArgs};
use crate::output::{say, stdout_error, stdout_text, UsageError, EXIT_INTERRUPTED};
use crate::remote_cmd::{local, location};
use crate::signals::{Interrupts, Phase};
use crate::source_args::SourceArgs;
use bcd_remote::Location;
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

pub fn ingest(args: IngestArgs) -> Result<ExitCode> {
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
    let OpenedSource { format, source } = match &into {
        Location::Local(path) => open_sources_into(&args.sources, &source_options, path)?,
        Location::Remote(_) => open_sources(&args.sources, &source_options)?,
    };

    let show_bar = !args.quiet && std::io::stderr().is_terminal();
    let bar = show_bar.then(|| {
        let total = match format {
            SourceFormat::Dir => {
                let mut dir_options = source_options.dir_options();
                if let Location::Local(path) = &into {
                    dir_options.skip_dirs.push(path.clone());
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
    let result = match &into {
        Location::Local(path) => bcd_pipeline::ingest(source, path, &options, &mut on_progress),
        Location::Remote(uri) => {
            let remote = crate::remote_cmd::remote(uri.clone())?;
            bcd_pipeline::ingest_into_remote(
                source,
                &remote,
                &Staging { dir: staging },
                &options,
                &bcd_remote::TransferOptions::default(),
                &mut on_progress,
            )
            .map(|summary| summary.ingest)
        }
    };
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the ingest was committed",
        Err(_) => "nothing was committed",
    }));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(summary) => {
            print_summary(&summary, &args, &into_name)?;
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

fn print_summary(summary: &IngestSummary, args: &IngestArgs, into: &str) -> Result<()> {
    if args.json {
        let object = summary.to_json(Path::new(into));
        stdout_text(&format!("{object}\n")).map_err(stdout_error(format!(
            "the ingest into {into} was committed; writing its summary to stdout failed"
        )))?;
    } else {
        let passed_over: Vec<String> = summary
            .skipped_members
            .iter()
            .map(|(kind, n)| counted(*n, kind))
            .collect();
        let passed_over = match passed_over.is_empty() {
            true => String::new(),
            false => format!(", passed over {}", passed_over.join(", ")),
        };
        say!(
            "{} {} records into {} ({} duplicates skipped{passed_over}): {:.1} MB in, {:.1} MB stored (ratio {:.2}), {:.2} s, {:.1} MB/s",
            if summary.created { "created, wrote" } else { "wrote" },
            summary.records,
            into,
            summary.skipped,
            summary.bytes_in as f64 / 1e6,
            summary.bytes_stored as f64 / 1e6,
            summary.compression_ratio(),
            summary.seconds,
            summary.mb_per_s(),
        );
    }
    Ok(())
}

/// `n` things of a kind the summary counts, in English: "1 symlink",
/// "4 hard links", "22 members without an extension", "3 not in a class folder".
fn counted(n: u64, kind: &str) -> String {
    if n == 1 || kind.starts_with("not ") {
        return format!("{n} {kind}");
    }
    match kind.find(" with") {
        Some(at) => format!("{n} {}s{}", &kind[..at], &kind[at..]),
        None => format!("{n} {kind}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn counts_of_skipped_kinds_read_as_english() {
        assert_eq!(counted(1, "hard link"), "1 hard link");
        assert_eq!(counted(4, "hard link"), "4 hard links");
        assert_eq!(counted(2, "device"), "2 devices");
        assert_eq!(
            counted(22, "member without an extension"),
            "22 members without an extension"
        );
        assert_eq!(counted(10, "row with a null"), "10 rows with a null");
        assert_eq!(
            counted(3, "not in a class folder"),
            "3 not in a class folder"
        );
    }
}
