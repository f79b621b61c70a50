//! `bcd ingest` and `bcd export`: turn the arguments into library options (sources
//! are opened by `bcd_pipeline::open_sources_into`), run the pipeline, draw progress,
//! print the summary.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bcd_converters::dir_source::DirSource;
use bcd_converters::tar_export::{Split, Target};
use bcd_pipeline::{
    open_sources_into, IngestError, IngestOptions, IngestSummary, Naming, OnDuplicate,
    OpenedSource, Progress, SourceFormat, SourceOptions,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{DuplicateArg, ExportArgs, IngestArgs};

/// Exit status after Ctrl-C, as shells report SIGINT.
const EXIT_INTERRUPTED: u8 = 130;
/// Exit status of a usage error, as clap's own.
const EXIT_USAGE: u8 = 2;

/// The source options as the library takes them; a flag the user did not give is
/// `None` (or empty, or false), so giving one to another format is refused even
/// with its default value.
fn source_options(args: &IngestArgs) -> SourceOptions {
    SourceOptions {
        format: args.format.map(Into::into),
        include: args.include.clone(),
        exclude: args.exclude.clone(),
        follow_links: args.follow_links,
        value_column: args.value_column.clone(),
        key_column: args.key_column.clone(),
        skip_nulls: args.skip_nulls,
        path_column: args.path_column.clone(),
        root: args.root.clone(),
        delimiter: args.delimiter,
        feature: args.feature.clone(),
        key_feature: args.key_feature.clone(),
    }
}

pub fn ingest(args: IngestArgs) -> Result<ExitCode> {
    let source_options = source_options(&args);
    let OpenedSource { format, mut source } =
        open_sources_into(&args.sources, &source_options, &args.into)?;

    let show_bar = !args.quiet && std::io::stderr().is_terminal();
    let bar = show_bar.then(|| {
        let total = match format {
            SourceFormat::Dir => {
                let mut dir_options = source_options.dir_options();
                dir_options.skip_dirs.push(args.into.clone());
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

    // Set by the Ctrl-C handler; the pipeline stops at the next record.
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;
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
        interrupt: Some(interrupted),
    };
    let mut on_progress = |p: &Progress| {
        if let Some(bar) = &bar {
            bar.set_position(p.bytes_in);
            bar.set_message(format!("{} records", p.records));
        }
    };
    let result = bcd_pipeline::ingest(source.as_mut(), &args.into, &options, &mut on_progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(summary) => {
            print_summary(&summary, &args)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(IngestError::Interrupted) => {
            eprintln!(
                "bcd: interrupted; nothing was committed, {} is as it was",
                args.into.display()
            );
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Err(error) => Err(anyhow::Error::new(error).context(format!(
            "ingest into {} failed; the dataset is unchanged",
            args.into.display()
        ))),
    }
}

/// Total size of the archives when every one is an uncompressed file, whose size
/// then approximates the member bytes to come (headers make it a slight
/// overestimate); `None` for stdin or compressed archives, whose content size is
/// unknown until read.
fn uncompressed_archives_size(inputs: &[String]) -> Option<u64> {
    let mut total = 0;
    for input in inputs {
        for name in bcd_converters::brace::expand(input).ok()? {
            let mut magic = [0u8; 4];
            let mut file = std::fs::File::open(&name).ok()?;
            let n = std::io::Read::read(&mut file, &mut magic).ok()?;
            let compressed =
                magic[..n].starts_with(&[0x1f, 0x8b]) || magic[..n] == [0x28, 0xb5, 0x2f, 0xfd];
            if compressed {
                return None;
            }
            total += file.metadata().ok()?.len();
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

fn print_summary(summary: &IngestSummary, args: &IngestArgs) -> Result<()> {
    let megabytes_per_second = if summary.seconds > 0.0 {
        summary.bytes_in as f64 / 1e6 / summary.seconds
    } else {
        0.0
    };
    let ratio = if summary.bytes_stored > 0 {
        summary.bytes_in as f64 / summary.bytes_stored as f64
    } else {
        1.0
    };
    if args.json {
        let object = serde_json::json!({
            "dataset": args.into.display().to_string(),
            "created": summary.created,
            "records": summary.records,
            "skipped": summary.skipped,
            "skipped_members": summary.skipped_members,
            "bytes_in": summary.bytes_in,
            "bytes_stored": summary.bytes_stored,
            "compression_ratio": ratio,
            "shards": summary.shards,
            "seconds": summary.seconds,
            "mb_per_s": megabytes_per_second,
        });
        println!("{object}");
    } else {
        let passed_over: Vec<String> = summary
            .skipped_members
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        let passed_over = match passed_over.is_empty() {
            true => String::new(),
            false => format!(", passed over {}", passed_over.join(", ")),
        };
        eprintln!(
            "{} {} records into {} ({} duplicates skipped{passed_over}): {:.1} MB in, {:.1} MB stored (ratio {ratio:.2}), {:.2} s, {megabytes_per_second:.1} MB/s",
            if summary.created { "created, wrote" } else { "wrote" },
            summary.records,
            args.into.display(),
            summary.skipped,
            summary.bytes_in as f64 / 1e6,
            summary.bytes_stored as f64 / 1e6,
            summary.seconds,
        );
    }
    Ok(())
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    let dataset = bcd::Dataset::open(&args.dataset)?;
    let split = Split {
        max_bytes: args.split_size,
        max_members: args.split_count,
    };
    let splitting = split.max_bytes.is_some() || split.max_members.is_some();
    let target = match args.to.as_str() {
        "-" if splitting => {
            bail!("--split-size/--split-count need a numbered file target, not stdout")
        }
        "-" => Target::Stdout,
        pattern if splitting => Target::Pattern(pattern.to_owned()),
        path => Target::File(path.into()),
    };
    let options = bcd_pipeline::ExportOptions {
        split,
        rename_unsafe: args.rename_unsafe,
        naming: Naming {
            keyless_suffix: args.keyless_suffix,
        },
        ..bcd_pipeline::ExportOptions::new(target)
    };
    let summary = match bcd_pipeline::export(&dataset, &options) {
        Ok(summary) => summary,
        Err(error) if error.is_usage() => {
            eprintln!("bcd: {error}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error)
                .context(format!("export of {} failed", args.dataset.display())))
        }
    };
    let renamed = match summary.renamed {
        0 => String::new(),
        n => format!(", {n} unsafe names cleaned"),
    };
    eprintln!(
        "exported {} members ({:.1} MB) to {}{renamed}",
        summary.members,
        summary.bytes as f64 / 1e6,
        match summary.archives.len() {
            0 => "stdout".to_owned(),
            1 => summary.archives[0].display().to_string(),
            n => format!("{n} archives"),
        }
    );
    Ok(ExitCode::SUCCESS)
}
