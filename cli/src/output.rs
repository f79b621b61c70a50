//! Writing to stdout and stderr without ever panicking, the exit status of an
//! error, and the printers of the commands' results (text and `--json`).
//!
//! `print!` and `eprintln!` panic when the write fails (a full disk, a closed
//! pipe), which after an ingest's commit turned a committed run into exit 101. Here
//! a stdout write returns its error, for the command to say what it had done
//! already; a stderr write ignores its error: there is nowhere left to report it.

use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Exit status of a failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status of a usage error: the command line cannot work as given (clap's own
/// usage errors exit with 2 too).
pub const EXIT_USAGE: u8 = 2;
/// Exit status after SIGINT, SIGTERM or SIGHUP, as shells report SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Writes one line to stderr, best effort: a message that cannot be shown must
/// neither panic nor change the exit status.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::stderr_line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// The body of [`say!`].
pub fn stderr_line(args: fmt::Arguments<'_>) {
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
        .and_then(|()| stderr.write_all(b"\n"))
        .and_then(|()| stderr.flush());
}

/// Writes `text` to stdout and flushes it, so that a failure shows here and not
/// in the exit-time flush (which ignores it).
pub fn stdout_text(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// A command line that cannot work as given, found after parsing (a flag for
/// another source format, splitting to stdout): exits with [`EXIT_USAGE`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A failed write to stdout, with what the command had done before it (for
/// ingest: the commit). A closed pipe (EPIPE) is not an error: `bcd ls | head`.
#[derive(Debug)]
pub struct StdoutError {
    /// What was done, and what could not be written.
    pub context: String,
    /// The write's error.
    pub source: io::Error,
}

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Turns a stdout write's error into a [`StdoutError`] saying `context`.
pub fn stdout_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> StdoutError {
    move |source| StdoutError {
        context: context.into(),
        source,
    }
}

/// What `main` does with an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A closed pipe on stdout: exit 0, say nothing.
    Quiet,
    /// Say the message, exit with this status.
    Exit(u8),
}

/// How an error ends the process: a closed stdout pipe quietly with 0, a usage
/// error with 2, anything else with 1.
pub fn outcome(error: &anyhow::Error) -> Outcome {
    if error.chain().any(is_broken_pipe) {
        return Outcome::Quiet;
    }
    if error.chain().any(is_usage) {
        return Outcome::Exit(EXIT_USAGE);
    }
    Outcome::Exit(EXIT_FAILURE)
}

fn is_broken_pipe(cause: &(dyn std::error::Error + 'static)) -> bool {
    cause
        .downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// Whether `cause` says the command line is wrong by itself (as opposed to a
/// problem with the data, the dataset or the system).
fn is_usage(cause: &(dyn std::error::Error + 'static)) -> bool {
    use bcd_converters::tar_export::ExportError;
    use bcd_converters::SourceError;
    use bcd_pipeline::SourceSetupError;

    if cause.is::<UsageError>() {
        return true;
    }
    if let Some(error) = cause.downcast_ref::<bcd_remote::RemoteError>() {
        return matches!(
            error,
            bcd_remote::RemoteError::UnsupportedScheme { .. }
                | bcd_remote::RemoteError::InvalidUri { .. }
                | bcd_remote::RemoteError::RemoteNotSupported { .. }
        );
    }
    if let Some(error) = cause.downcast_ref::<SourceSetupError>() {
        // Unreadable is a missing or unreadable source: a failure. Open is
        // transparent (the SourceError it wraps is not in the chain): a usage
        // error when the names cannot work (a bad glob or brace range).
        return match error {
            SourceSetupError::Unreadable { .. } => false,
            SourceSetupError::Open(error) => matches!(error, SourceError::Usage(_)),
            _ => true,
        };
    }
    if let Some(error) = cause.downcast_ref::<bcd_pipeline::views::ViewError>() {
        return error.is_usage();
    }
    if let Some(error) = cause.downcast_ref::<bcd::Error>() {
        return matches!(
            error,
            bcd::Error::InvalidViewName { .. }
                | bcd::Error::NoSuchView { .. }
                | bcd::Error::ViewExists { .. }
        );
    }
    if let Some(error) = cause.downcast_ref::<bcd_pipeline::ExportError>() {
        return error.is_usage();
    }
    if let Some(error) = cause.downcast_ref::<ExportError>() {
        return error.is_usage();
    }
    false
}

/// The flag that sets the option field `field`: `value_column` is
/// `--value-column`.
pub fn flag(field: &str) -> String {
    format!("--{}", field.replace('_', "-"))
}

/// An error and its causes (its `source()` chain), joined by ": " as anyhow's
/// `{:#}` does. Library errors print their own message only and chain their
/// cause, so this is where the two meet.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    bcd_pipeline::error_chain(error)
}

/// Writes a value to `output`, or to stdout (`bcd get`).
pub fn write_value(value: &[u8], output: Option<PathBuf>) -> Result<()> {
    match output {
        Some(path) => {
            std::fs::write(&path, value).with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(value)
                .and_then(|()| stdout.flush())
                .map_err(stdout_error("writing the value to stdout failed"))?;
        }
    }
    Ok(())
}

/// What `bcd info` shows of a dataset, local or remote.
pub struct DatasetInfo<'a> {
    /// The path or URI, as given.
    pub path: String,
    /// Its settings and shard count.
    pub manifest: &'a bcd::Manifest,
    /// Committed records.
    pub records: usize,
    /// Bytes of its data files.
    pub stored_bytes: u64,
    /// The fields' schema.
    pub schema: &'a bcd_fields::DatasetSchema,
    /// The dataset's metadata (class vocabularies and the like).
    pub metadata: &'a serde_json::Map<String, serde_json::Value>,
}

/// `bcd info`, as text or as one JSON object.
pub fn print_info(info: &DatasetInfo<'_>, json: bool) -> Result<()> {
    let manifest = info.manifest;
    let schema: Vec<_> = info.schema.fields().iter().collect();
    let metadata = info.metadata.clone();
    let compression = manifest.compression.as_manifest_str();
    let version = match manifest.version {
        bcd::ManifestVersion::V0_2 => "0.2",
        bcd::ManifestVersion::V0_3 => "0.3",
    };
    let mut out = String::new();
    if json {
        let object = serde_json::json!({
            "path": info.path,
            "keyed": manifest.keyed,
            "compression": compression,
            "max_shard_size": manifest.max_shard_size,
            "shards": manifest.shards,
            "records": info.records,
            "stored_bytes": info.stored_bytes,
            "manifest_version": version,
            "schema": schema
                .iter()
                .map(|f| serde_json::json!({"name": f.name(), "type": f.data_type().to_string()}))
                .collect::<Vec<_>>(),
            "metadata": metadata,
        });
        writeln!(out, "{object}")?;
    } else {
        writeln!(out, "path:           {}", info.path)?;
        writeln!(out, "keyed:          {}", manifest.keyed)?;
        writeln!(out, "compression:    {}", compression.unwrap_or("none"))?;
        writeln!(out, "max shard size: {} bytes", manifest.max_shard_size)?;
        writeln!(out, "shards:         {}", manifest.shards)?;
        writeln!(out, "records:        {}", info.records)?;
        writeln!(out, "stored bytes:   {}", info.stored_bytes)?;
        writeln!(out, "manifest:       bitcask-dataset {version} layout")?;
        if !schema.is_empty() {
            writeln!(out, "fields:")?;
            for field in &schema {
                writeln!(out, "  {}: {}", field.name(), field.data_type())?;
            }
        }
        if !metadata.is_empty() {
            writeln!(
                out,
                "metadata:       {}",
                serde_json::Value::Object(metadata)
            )?;
        }
    }
    stdout_text(&out).map_err(stdout_error("writing the information to stdout failed"))?;
    Ok(())
}

/// The names [`record_identity`] prints, which no field may take.
const RECORD_NAMES: [&str; 3] = ["key", "key_hex", "index"];
/// What a field's name gets before it when it would take one of
/// [`RECORD_NAMES`] (img2dataset's `key` column) or already begins with it, so
/// that no two names meet: `key` is printed `field.key`, `field.x` is
/// `field.field.x`, `x` stays `x`.
const FIELD_PREFIX: &str = "field.";

/// The start of the JSON object `get --fields` and `ls --fields` print for
/// record `index`: `"key"` (as text when UTF-8, else `"key_hex"`) or `"index"`.
pub fn record_identity(
    dataset: &bcd::Dataset,
    index: usize,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    let mut object = serde_json::Map::new();
    let key = match dataset.keyed() {
        true => Some(dataset.key_at(index)?),
        false => None,
    };
    bcd_pipeline::add_record_name(&mut object, key, index as u64);
    Ok(object)
}

/// Adds a record's fields after its [`record_identity`], renamed by
/// [`FIELD_PREFIX`] where they would take a name of [`RECORD_NAMES`]: the
/// record's own key and every field are printed, whatever the fields are called.
pub fn add_fields(
    object: &mut serde_json::Map<String, serde_json::Value>,
    fields: serde_json::Map<String, serde_json::Value>,
) {
    for (name, value) in fields {
        let name = if RECORD_NAMES.contains(&name.as_str()) || name.starts_with(FIELD_PREFIX) {
            format!("{FIELD_PREFIX}{name}")
        } else {
            name
        };
        object.insert(name, value);
    }
}

/// The summary of a push (`verb` "pushed") or pull ("pulled") to `to`: one JSON
/// object on stdout, or a line on stderr.
pub fn print_transfer(
    summary: &bcd_remote::TransferSummary,
    verb: &str,
    to: &str,
    json: bool,
) -> Result<()> {
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

/// The summary of an ingest into `into` (a path or a URI): one JSON object on
/// stdout, or a line on stderr.
pub fn print_ingest_summary(
    summary: &bcd_pipeline::IngestSummary,
    into: &str,
    json: bool,
) -> Result<()> {
    if json {
        let object = summary.to_json(Path::new(into));
        stdout_text(&format!("{object}\n")).map_err(stdout_error(format!(
            "the ingest into {into} was committed; writing its summary to stdout failed"
        )))?;
        return Ok(());
    }
    let passed_over: Vec<String> = summary
        .skipped_members
        .iter()
        .map(|(kind, n)| counted(*n, kind))
        .collect();
    let passed_over = match passed_over.is_empty() {
        true => String::new(),
        false => format!(", passed over {}", passed_over.join(", ")),
    };
    let values = match summary.skipped_values {
        0 => String::new(),
        n => format!(", {n} repeated values skipped"),
    };
    say!(
        "{} {} records into {} ({} duplicates skipped{values}{passed_over}): {:.1} MB in, {:.1} MB stored (ratio {:.2}), {:.2} s, {:.1} MB/s",
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

/// What `bcd gc DATASET` removed (or, with `dry_run`, would remove).
pub fn print_gc_report(report: &bcd::GcReport, options: &bcd::GcOptions, json: bool) -> Result<()> {
    let mut out = String::new();
    if json {
        writeln!(out, "{}", bcd_pipeline::gc_json(report, options))?;
    } else {
        let verb = if options.dry_run {
            "would remove"
        } else {
            "removed"
        };
        for file in &report.files {
            writeln!(out, "{verb} {}", file.display())?;
        }
        for job in &report.kept_jobs {
            writeln!(
                out,
                "kept {} (running, or newer than --older-than)",
                job.display()
            )?;
        }
        writeln!(
            out,
            "{verb} {} file(s), {} bytes",
            report.files.len(),
            report.bytes
        )?;
    }
    stdout_text(&out).map_err(stdout_error(
        "writing the garbage collection report to stdout failed",
    ))?;
    Ok(())
}

/// What `bcd gc URI` removed (or, with `dry_run`, would remove): the objects on
/// stdout and a count on stderr, or one JSON object.
pub fn print_remote_gc(
    uri: &bcd_remote::RemoteUri,
    summary: &bcd_remote::GcSummary,
    dry_run: bool,
    json: bool,
) -> Result<()> {
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
        return Ok(());
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_broken_pipe_anywhere_in_the_chain_is_quiet() {
        let error = anyhow::Error::new(StdoutError {
            context: "writing".into(),
            source: io::Error::from(io::ErrorKind::BrokenPipe),
        });
        assert_eq!(outcome(&error), Outcome::Quiet);
        let full = anyhow::Error::new(StdoutError {
            context: "writing".into(),
            source: io::Error::from_raw_os_error(28),
        });
        assert_eq!(outcome(&full), Outcome::Exit(EXIT_FAILURE));
    }

    #[test]
    fn usage_errors_exit_2_wherever_they_are_found() {
        let usage = anyhow::Error::new(UsageError("bad".into())).context("export failed");
        assert_eq!(outcome(&usage), Outcome::Exit(EXIT_USAGE));
        let setup = anyhow::Error::new(bcd_pipeline::SourceSetupError::MissingValueColumn {
            format: bcd_pipeline::SourceFormat::Parquet,
        });
        assert_eq!(outcome(&setup), Outcome::Exit(EXIT_USAGE));
        let brace = anyhow::Error::new(bcd_pipeline::SourceSetupError::Open(
            bcd_converters::SourceError::Usage("bad range".into()),
        ));
        assert_eq!(outcome(&brace), Outcome::Exit(EXIT_USAGE));
        let missing = anyhow::Error::new(bcd_pipeline::SourceSetupError::Open(
            bcd_converters::SourceError::Io {
                path: "x".into(),
                source: io::Error::from(io::ErrorKind::NotFound),
            },
        ));
        assert_eq!(outcome(&missing), Outcome::Exit(EXIT_FAILURE));
    }

    #[test]
    fn the_chain_says_each_cause_once_and_options_are_flags() {
        let cause = io::Error::from_raw_os_error(2);
        let shown = cause.to_string();
        let missing = anyhow::Error::new(bcd_converters::SourceError::Io {
            path: "x.tar".into(),
            source: cause,
        })
        .context("ingest into d failed");
        assert_eq!(
            chain(missing.as_ref()),
            format!("ingest into d failed: x.tar: {shown}")
        );
        let setup = bcd_pipeline::SourceSetupError::MissingValueColumn {
            format: bcd_pipeline::SourceFormat::Parquet,
        };
        assert_eq!(
            bcd_pipeline::spell_options(&chain(&setup), flag),
            "parquet sources need --value-column COL (and --key-column COL for a keyed dataset)"
        );
    }
}
