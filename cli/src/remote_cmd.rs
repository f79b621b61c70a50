//! Location arguments, and the commands on datasets in object storage: `push`,
//! `pull`, `gc`, and `info`/`get`/`ls`/`verify` of a URI (ranged reads through
//! `bcd_remote::RemoteDataset`).

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use bcd_remote::{
    GcOptions, Location, Remote, RemoteDataset, RemoteUri, TransferOptions, TransferSummary,
};

use crate::args::TransferArgs;
use crate::output::{say, stdout_error, stdout_text, UsageError, EXIT_INTERRUPTED};
use crate::signals::{Interrupts, Phase};

/// A dataset or source argument: a local path or a supported URI (an unsupported
/// `scheme://` is a usage error, never a local path).
pub fn location(arg: &OsStr) -> Result<Location> {
    Ok(Location::parse(arg)?)
}

/// An argument that must be a local path: any URI is a usage error naming `what`.
pub fn local(arg: &OsStr, what: &str) -> Result<PathBuf> {
    Ok(Location::parse_local(arg, what)?)
}

/// An argument that must be a URI of a store.
fn remote_uri(arg: &OsStr, command: &str) -> Result<RemoteUri> {
    match location(arg)? {
        Location::Remote(uri) => Ok(uri),
        Location::Local(path) => Err(UsageError(format!(
            "{}: `bcd {command}` needs an s3://, gs:// or az:// URI here, not a local path",
            path.display()
        ))
        .into()),
    }
}

/// The client of a URI.
pub fn remote(uri: RemoteUri) -> Result<Remote> {
    Ok(Remote::new(uri)?)
}

fn transfer_options(args: &TransferArgs, interrupts: &Interrupts) -> TransferOptions {
    TransferOptions {
        concurrency: args.concurrency as usize,
        multipart_threshold: args.multipart_threshold,
        part_size: args.part_size,
        interrupt: Some(interrupts.flag()),
        progress: None,
        replace: false,
    }
}

fn print_transfer(summary: &TransferSummary, verb: &str, to: &str, json: bool) -> Result<()> {
    if json {
        let object = serde_json::json!({
            "destination": to,
            "files": summary.files,
            "bytes": summary.bytes,
            "skipped": summary.skipped,
            "skipped_bytes": summary.skipped_bytes,
            "shards": summary.shards,
            "committed": summary.committed,
            "seconds": summary.seconds,
        });
        stdout_text(&format!("{object}\n")).map_err(stdout_error(format!(
            "the {verb} to {to} is done; writing its summary to stdout failed"
        )))?;
        return Ok(());
    }
    let state = match summary.committed {
        true => format!("committed {} shards", summary.shards),
        false => format!("already up to date ({} shards)", summary.shards),
    };
    say!(
        "{verb} {} files ({:.1} MB) to {to}, {} already there ({:.1} MB): {state}, {:.2} s, {:.1} MB/s",
        summary.files,
        summary.bytes as f64 / 1e6,
        summary.skipped,
        summary.skipped_bytes as f64 / 1e6,
        summary.seconds,
        summary.bytes as f64 / 1e6 / summary.seconds.max(1e-9),
    );
    Ok(())
}

/// Runs a push or pull with the signal handler: an interrupt stops it with
/// nothing committed. `after_failure` says, once it failed, what state the
/// destination is in (whether it was interrupted).
fn transfer(
    verb: &'static str,
    destination: String,
    args: &TransferArgs,
    replace: bool,
    after_failure: impl FnOnce(bool) -> String,
    run: impl FnOnce(&TransferOptions) -> bcd_remote::Result<TransferSummary>,
) -> Result<ExitCode> {
    let interrupts = Interrupts::install()?;
    let mut options = transfer_options(args, &interrupts);
    options.replace = replace;
    interrupts.enter(Phase::Running);
    let result = run(&options);
    interrupts.enter(Phase::Finished(match result {
        Ok(_) => "the copy was committed",
        Err(_) => "nothing was committed",
    }));
    match result {
        Ok(summary) => {
            print_transfer(&summary, verb, &destination, args.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(bcd_remote::RemoteError::Interrupted) => {
            say!("bcd: interrupted; {}", after_failure(true));
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Err(error) => Err(anyhow::Error::new(error).context(format!(
            "{verb} to {destination} failed; {}",
            after_failure(false)
        ))),
    }
}

pub fn push(dataset: &OsStr, uri: &OsStr, args: &TransferArgs, replace: bool) -> Result<ExitCode> {
    let dir = local(dataset, "the dataset pushed")?;
    let uri = remote_uri(uri, "push")?;
    let remote = remote(uri.clone())?;
    let after_failure = |_| {
        match replace {
        // The replaced dataset's manifest may be gone already.
        true => format!(
            "nothing was committed; {uri} holds the dataset it held, or none if the replace had begun: run the push again to complete it"
        ),
        false => format!("nothing was committed, {uri} is as it was"),
    }
    };
    transfer(
        "pushed",
        uri.to_string(),
        args,
        replace,
        after_failure,
        |options| bcd_remote::push(&dir, &remote, options),
    )
}

pub fn pull(uri: &OsStr, dataset: &OsStr, args: &TransferArgs, replace: bool) -> Result<ExitCode> {
    let uri = remote_uri(uri, "pull")?;
    let dir = local(dataset, "the dataset pulled into")?;
    let remote = remote(uri)?;
    let existed = std::fs::symlink_metadata(&dir).is_ok();
    let was_dataset = dir.join(bcd::format::MANIFEST_NAME).exists();
    // A failed pull removes a directory it created; an interrupted one keeps
    // what it downloaded, for a rerun.
    let after_failure = |_interrupted: bool| {
        let shown = dir.display();
        match (was_dataset, existed, std::fs::symlink_metadata(&dir).is_ok()) {
            (true, _, _) => format!("nothing was committed, {shown} is as it was"),
            (false, false, false) => format!("nothing was committed, {shown} was not created"),
            (false, _, true) => format!(
                "nothing was committed: {shown} is not a dataset yet, and keeps the files downloaded so far for a rerun of the pull to complete"
            ),
            (false, true, false) => format!("nothing was committed, {shown} is gone"),
        }
    };
    transfer(
        "pulled",
        dir.display().to_string(),
        args,
        replace,
        after_failure,
        |options| bcd_remote::pull(&remote, &dir, options),
    )
}

/// `bcd gc URI` leaves objects younger than this unless `--older-than` says
/// otherwise: they may belong to a push in progress.
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

pub fn gc(
    uri: RemoteUri,
    grace: std::time::Duration,
    dry_run: bool,
    json: bool,
) -> Result<ExitCode> {
    let remote = remote(uri.clone())?;
    let summary = bcd_remote::gc(&remote, &GcOptions { grace, dry_run })
        .with_context(|| format!("gc of {uri} failed"))?;
    let mut out = String::new();
    if json {
        let object = serde_json::json!({
            "files": summary.removed.iter().map(|name| uri.object(name).to_string()).collect::<Vec<_>>(),
            "bytes": summary.bytes,
            "aborted_uploads": summary.aborted_uploads,
            "dry_run": dry_run,
        });
        writeln!(out, "{object}")?;
        stdout_text(&out).map_err(stdout_error("writing the gc report to stdout failed"))?;
        return Ok(ExitCode::SUCCESS);
    }
    for name in &summary.removed {
        writeln!(out, "{}", uri.object(name))?;
    }
    stdout_text(&out).map_err(stdout_error("writing the removed objects to stdout failed"))?;
    say!(
        "{} {} objects ({:.1} MB) no manifest names{}",
        if dry_run { "would remove" } else { "removed" },
        summary.removed.len(),
        summary.bytes as f64 / 1e6,
        match summary.aborted_uploads {
            0 => String::new(),
            n => format!(", aborted {n} unfinished multipart uploads"),
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn info(uri: RemoteUri, json: bool) -> Result<ExitCode> {
    let dataset = RemoteDataset::open(remote(uri.clone())?)?;
    let manifest = dataset.manifest();
    let (schema, metadata) = bcd_pipeline::fields::remote_fields(&dataset)?;
    let fields = crate::commands::InfoFields {
        path: uri.to_string(),
        manifest,
        records: dataset.len(),
        stored_bytes: dataset.stored_bytes(),
        fields: (&schema, &metadata),
    };
    crate::commands::print_info(&fields, json)
}

pub fn get(
    uri: RemoteUri,
    key: Option<Vec<u8>>,
    index: Option<i64>,
    output: Option<PathBuf>,
) -> Result<ExitCode> {
    let dataset = RemoteDataset::open(remote(uri.clone())?)?;
    let position = match (key, index) {
        (_, Some(index)) => dataset.resolve_index(index)?,
        (Some(key), None) => {
            if !dataset.keyed() {
                return Err(bcd::Error::WrongKeying(
                    "key lookup on a keyless dataset: read records by index instead",
                )
                .into());
            }
            match dataset.position(&key)? {
                Some(position) => position,
                None => bail!(
                    "key {} not found in {uri} (list keys with `bcd ls`)",
                    bcd::DisplayKey(key)
                ),
            }
        }
        (None, None) => unreachable!("clap requires KEY or --index"),
    };
    let value = dataset.value(position)?;
    crate::commands::write_value(&value, output)
}

pub fn ls(uri: RemoteUri, null: bool) -> Result<ExitCode> {
    let dataset = RemoteDataset::open(remote(uri)?)?;
    let end = if null { b'\0' } else { b'\n' };
    let mut out = io::BufWriter::new(io::stdout().lock());
    let failed = || stdout_error("writing the keys to stdout failed");
    if dataset.keyed() {
        let mut write_error = None;
        dataset.for_each_key(|_, key| {
            match out.write_all(key).and_then(|()| out.write_all(&[end])) {
                Ok(()) => Ok(true),
                Err(e) => {
                    write_error = Some(e);
                    Ok(false)
                }
            }
        })?;
        if let Some(e) = write_error {
            return Err(failed()(e).into());
        }
    } else {
        for index in 0..dataset.len() {
            write!(out, "{index}").map_err(failed())?;
            out.write_all(&[end]).map_err(failed())?;
        }
    }
    out.flush().map_err(failed())?;
    Ok(ExitCode::SUCCESS)
}

pub fn verify(uri: RemoteUri) -> Result<ExitCode> {
    let dataset = match RemoteDataset::open(remote(uri.clone())?) {
        Ok(dataset) => dataset,
        Err(error) => {
            say!("bcd: verify failed: {}", crate::output::chain(&error));
            return Ok(ExitCode::FAILURE);
        }
    };
    let problems = dataset.verify()?;
    for problem in problems.iter().take(crate::commands::VERIFY_SHOWN) {
        say!("bcd: {}", crate::output::chain(problem));
    }
    if problems.len() > crate::commands::VERIFY_SHOWN {
        say!(
            "bcd: ... and {} more",
            problems.len() - crate::commands::VERIFY_SHOWN
        );
    }
    let shards = dataset.manifest().shards;
    let leftovers: Vec<String> = dataset
        .remote()
        .list_blocking()?
        .into_keys()
        .filter(|name| bcd_remote::FileKind::of(name).pending(shards))
        .map(|name| uri.object(&name))
        .collect();
    if !leftovers.is_empty() {
        say!(
            "bcd: note: {} uncommitted object(s) from interrupted pushes are ignored (`bcd gc` removes them): {}",
            leftovers.len(),
            leftovers.join(", ")
        );
    }
    if !problems.is_empty() {
        say!(
            "bcd: verify failed: {} problem(s) in {} records",
            problems.len(),
            dataset.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    let what = match dataset.manifest().compression {
        bcd::Compression::Lz4 => "all decoded",
        bcd::Compression::None => "stored uncompressed",
    };
    stdout_text(&format!(
        "ok: {} records in {shards} shards, {what}\n",
        dataset.len()
    ))
    .map_err(stdout_error(
        "the dataset verified ok; writing the result to stdout failed",
    ))?;
    Ok(ExitCode::SUCCESS)
}
