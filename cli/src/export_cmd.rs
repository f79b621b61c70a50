//! `bcd export`: the records (all, those of a `--view` or `--where`, or a
//! `--sample` of either) to tar, Parquet or Megatron (`--to`) or into a new
//! dataset (`--into`), with progress, interruption and the summary line.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bcd_converters::tar_export::{Split, Target};
use bcd_pipeline::{
    CopyOptions, ExportError, ExportProgress, ExportProgressFn, Naming, SampleOptions,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{ExportArgs, ExportFormat};
use crate::location::{local, location, remote, Location};
use crate::output::{say, UsageError, EXIT_INTERRUPTED};
use crate::selection;
use crate::signals::{Interrupts, Phase};

pub fn run(args: ExportArgs) -> Result<ExitCode> {
    let interrupts = Interrupts::install()?;
    // The arguments first: a usage error is reported as such, whatever the dataset.
    let split = Split {
        max_bytes: args.split_size,
        max_members: args.split_count,
    };
    if let (Some(to), Some(ExportFormat::Megatron)) = (&args.to, args.format) {
        return to_megatron(&args, to, &interrupts);
    }
    if args.dtype.is_some() {
        return Err(UsageError("--dtype applies to --format megatron".into()).into());
    }
    let parquet = args.to.as_deref().filter(|to| match args.format {
        Some(format) => format == ExportFormat::Parquet,
        None => is_parquet(to),
    });
    if let Some(to) = parquet {
        for (given, flag) in [
            (
                args.split_size.is_some() || args.split_count.is_some(),
                "--split-size/--split-count",
            ),
            (args.samples, "--samples"),
            (args.rename_unsafe, "--rename-unsafe"),
            (!args.keyless_suffix.is_empty(), "--keyless-suffix"),
        ] {
            if given {
                return Err(UsageError(format!(
                    "{flag} applies to tar exports, not to {}",
                    Path::new(to).display()
                ))
                .into());
            }
        }
    } else if args.hf_image {
        return Err(UsageError("--hf-image applies to --to OUT.parquet".into()).into());
    }
    let target = match (&args.to, parquet) {
        (Some(to), None) => Some(tar_target(to, split)?),
        (Some(to), Some(_)) => Some(Target::File(local(to, "the export target")?)),
        (None, _) => None,
    };
    let into = match &args.into {
        Some(into) => Some(local(into.as_os_str(), "the dataset exported into")?),
        None => None,
    };
    let dataset = match location(&args.dataset)? {
        Location::Local(path) => bcd::Dataset::open(&path)?,
        Location::Remote(uri) => {
            if args.sample.is_some()
                || into.is_some()
                || args.samples
                || parquet.is_some()
                || args.where_.is_some()
            {
                return Err(UsageError(format!(
                    "--sample, --samples, --where, --into and Parquet exports read a local dataset; `bcd pull {uri} DIR` first"
                ))
                .into());
            }
            let dataset = bcd_remote::RemoteDataset::open(remote(uri)?)?;
            let target = target.expect("clap requires --to or --into");
            let records =
                selection::records(selection::remote(&dataset, args.view.as_deref(), None)?);
            return to_tar(&args, &dataset, target, split, records, &interrupts);
        }
    };
    let selected = selection::records(selection::local(
        &dataset,
        args.view.as_deref(),
        args.where_.as_deref(),
    )?);
    // The subset, in record order.
    let records = match args.sample {
        None => selected,
        Some(count) => {
            let categories = match &args.balance_by {
                Some(field) => Some(bcd_pipeline::field_categories(&dataset, field)?),
                None => None,
            };
            let options = SampleOptions {
                count,
                seed: args.seed,
            };
            Some(bcd_pipeline::sample_records_of(
                &dataset,
                selected.as_deref(),
                &options,
                categories.as_deref(),
            )?)
        }
    };
    match (target, &into) {
        (Some(Target::File(path)), _) if parquet.is_some() => {
            to_parquet(&args, &dataset, &path, records, &interrupts)
        }
        (Some(target), _) => to_tar(&args, &dataset, target, split, records, &interrupts),
        (None, Some(into)) => into_dataset(&args, &dataset, into, records, &interrupts),
        (None, None) => unreachable!("clap requires --to or --into"),
    }
}

/// `--to`: a file, stdout, or with `--split-*` a numbered pattern.
fn tar_target(to: &std::ffi::OsStr, split: Split) -> Result<Target> {
    let splitting = split.max_bytes.is_some() || split.max_members.is_some();
    Ok(match (to == "-", splitting) {
        (true, true) => {
            return Err(UsageError(
                "--split-size/--split-count need a numbered file target, not stdout".into(),
            )
            .into())
        }
        (true, false) => Target::Stdout,
        (false, true) => match to.to_str() {
            Some(pattern) => Target::Pattern(pattern.to_owned()),
            None => {
                return Err(UsageError(format!(
                    "{}: a numbered --to pattern must be valid UTF-8",
                    Path::new(to).display()
                ))
                .into())
            }
        },
        (false, false) => Target::File(local(to, "the export target")?),
    })
}

fn to_tar(
    args: &ExportArgs,
    dataset: &dyn bcd_pipeline::ExportRecords,
    target: Target,
    split: Split,
    records: Option<Vec<u64>>,
    interrupts: &Interrupts,
) -> Result<ExitCode> {
    let total = records
        .as_ref()
        .map_or(dataset.len() as u64, |r| r.len() as u64);
    let bar = (std::io::stderr().is_terminal() && !matches!(target, Target::Stdout))
        .then(|| export_progress_bar(total));
    let progress = bar.clone().map(|bar| {
        Arc::new(move |p: &ExportProgress| bar.set_position(p.members)) as ExportProgressFn
    });
    let options = bcd_pipeline::ExportOptions {
        split,
        rename_unsafe: args.rename_unsafe,
        naming: Naming {
            keyless_suffix: args.keyless_suffix.clone(),
        },
        // Set by a signal while the export runs: it stops and removes the archive
        // being written.
        interrupt: Some(interrupts.flag()),
        progress,
        records,
        samples: args.samples,
        ..bcd_pipeline::ExportOptions::new(target)
    };
    interrupts.enter(Phase::Running);
    let result = bcd_pipeline::export(dataset, &options);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the export was written",
        Err(_) => "the archive being written was removed",
    }));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    // The error keeps its chain: a closed stdout pipe (`bcd export --to - | head`)
    // is found in it and ends the run quietly, and a bad target or pattern is a
    // usage error (see output::outcome).
    let summary = match result {
        Ok(summary) => summary,
        Err(ExportError::Interrupted) => {
            say!("bcd: interrupted; the archive being written was removed (complete archives of a split export stay)");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "export of {} failed",
                Path::new(&args.dataset).display()
            )))
        }
    };
    let renamed = match summary.renamed {
        0 => String::new(),
        n => format!(", {n} unsafe names cleaned"),
    };
    say!(
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

/// Whether `--to` names a Parquet file.
fn is_parquet(to: &std::ffi::OsStr) -> bool {
    to.as_encoded_bytes()
        .to_ascii_lowercase()
        .ends_with(b".parquet")
}

fn to_parquet(
    args: &ExportArgs,
    dataset: &bcd::Dataset,
    path: &Path,
    records: Option<Vec<u64>>,
    interrupts: &Interrupts,
) -> Result<ExitCode> {
    let options = bcd_pipeline::ParquetExportOptions {
        hf_image: args.hf_image,
        records,
        interrupt: Some(interrupts.flag()),
    };
    interrupts.enter(Phase::Running);
    let result = bcd_pipeline::export_parquet(dataset, path, &options);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the export was written",
        Err(_) => "the file being written was removed",
    }));
    let summary = match result {
        Ok(summary) => summary,
        Err(ExportError::Interrupted) => {
            say!("bcd: interrupted; the file being written was removed");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "export of {} failed",
                Path::new(&args.dataset).display()
            )))
        }
    };
    say!(
        "exported {} rows ({:.1} MB of values) to {}",
        summary.rows,
        summary.bytes as f64 / 1e6,
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--format megatron`: PREFIX.bin and PREFIX.idx from a local dataset.
fn to_megatron(
    args: &ExportArgs,
    to: &std::ffi::OsStr,
    interrupts: &Interrupts,
) -> Result<ExitCode> {
    for (given, flag) in [
        (
            args.split_size.is_some() || args.split_count.is_some(),
            "--split-size/--split-count",
        ),
        (args.samples, "--samples"),
        (args.rename_unsafe, "--rename-unsafe"),
        (!args.keyless_suffix.is_empty(), "--keyless-suffix"),
        (args.hf_image, "--hf-image"),
        (args.sample.is_some(), "--sample"),
        (args.into.is_some(), "--into"),
    ] {
        if given {
            return Err(UsageError(format!("{flag} does not apply to --format megatron")).into());
        }
    }
    let prefix = local(to, "the export target")?;
    let dataset = match location(&args.dataset)? {
        Location::Local(path) => bcd::Dataset::open(&path)?,
        Location::Remote(uri) => {
            return Err(UsageError(format!(
                "Megatron exports read a local dataset; `bcd pull {uri} DIR` first"
            ))
            .into())
        }
    };
    let records = selection::records(selection::local(
        &dataset,
        args.view.as_deref(),
        args.where_.as_deref(),
    )?);
    let options = bcd_pipeline::MegatronExportOptions {
        dtype: args.dtype.clone(),
        interrupt: Some(interrupts.flag()),
        records,
    };
    interrupts.enter(Phase::Running);
    let result = bcd_pipeline::export_megatron(&dataset, &prefix, &options);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the export was written",
        Err(_) => "the files being written were removed",
    }));
    let summary = match result {
        Ok(summary) => summary,
        Err(ExportError::Interrupted) => {
            say!("bcd: interrupted; the files being written were removed");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(error) if error.is_usage() => return Err(UsageError(error.to_string()).into()),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "export of {} failed",
                Path::new(&args.dataset).display()
            )))
        }
    };
    say!(
        "exported {} sequences of {} ({} documents, {:.1} MB) to {}.bin and {}.idx",
        summary.sequences,
        summary.dtype,
        summary.document_indices.saturating_sub(1),
        summary.bytes as f64 / 1e6,
        prefix.display(),
        prefix.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn into_dataset(
    args: &ExportArgs,
    dataset: &bcd::Dataset,
    into: &Path,
    records: Option<Vec<u64>>,
    interrupts: &Interrupts,
) -> Result<ExitCode> {
    let options = CopyOptions {
        records,
        interrupt: Some(interrupts.flag()),
    };
    interrupts.enter(Phase::Running);
    let result = bcd_pipeline::copy_into(dataset, into, &options);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the new dataset was committed",
        Err(_) => "nothing was committed",
    }));
    let summary = match result {
        Ok(summary) => summary,
        Err(ExportError::Interrupted) => {
            say!("bcd: interrupted; nothing was committed and the new dataset was removed");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!(
                "export of {} into {} failed",
                Path::new(&args.dataset).display(),
                into.display()
            )))
        }
    };
    let views = match summary.views.len() {
        0 => String::new(),
        _ => format!(", views {}", summary.views.join(", ")),
    };
    say!(
        "exported {} records ({:.1} MB stored) into {}{views}",
        summary.records,
        summary.bytes_stored as f64 / 1e6,
        summary.dataset.display()
    );
    if !summary.unreadable_views.is_empty() {
        say!(
            "bcd: views not carried (they cannot be read: see `bcd view list`): {}",
            summary.unreadable_views.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A bar counting members, for exports to a file on a terminal.
fn export_progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} members {per_sec} ETA {eta}")
            .expect("valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
