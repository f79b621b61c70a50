//! Writing to stdout and stderr without ever panicking, and the exit status of an
//! error.
//!
//! `print!` and `eprintln!` panic when the write fails (a full disk, a closed
//! pipe), which after an ingest's commit turned a committed run into exit 101. Here
//! a stdout write returns its error, for the command to say what it had done
//! already; a stderr write ignores its error: there is nowhere left to report it.

use std::fmt;
use std::io::{self, Write};

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

#[cfg(test)]
mod tests {
    use super::*;

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
        let setup = anyhow::Error::new(bcd_pipeline::SourceSetupError::MissingValueColumn);
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
        let setup = bcd_pipeline::SourceSetupError::MissingValueColumn;
        assert_eq!(
            bcd_pipeline::spell_options(&chain(&setup), flag),
            "parquet sources need --value-column COL (and --key-column COL for a keyed dataset)"
        );
    }
}
