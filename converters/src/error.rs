use std::io;
use std::path::PathBuf;

/// Why a source could not produce its next record. Every variant names the file,
/// and the member or offset where one applies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// Reading a file or directory failed.
    #[error("{}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// An input file (a tar archive, a TFRecord or Parquet file) is truncated or
    /// corrupt.
    #[error("{file}: {location}: {reason}; the file is truncated or corrupt")]
    Corrupt {
        /// The file.
        file: String,
        /// Member name, record, row group, page and/or byte offset.
        location: String,
        /// What went wrong.
        reason: String,
    },
    /// A well-formed input holds a record that cannot be used (a null value, a
    /// missing feature, a listed file that cannot be read).
    #[error("{file}: {location}: {reason}")]
    Invalid {
        /// The input file.
        file: String,
        /// Row, line or record.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// A path read from the input (a CSV row) names something other than a regular
    /// file: a FIFO, device, socket or directory. It is refused without reading,
    /// since reading it could block forever or never end.
    #[error("{file}: {location}: {} is {kind}, not a regular file; only regular files are read", path.display())]
    NotRegularFile {
        /// The input file that named it.
        file: String,
        /// Row or line.
        location: String,
        /// The path, resolved.
        path: PathBuf,
        /// What it is ("a FIFO", "a directory", ...).
        kind: &'static str,
    },
    /// A size the input declares or holds is beyond a limit of this reader (the
    /// store's 4 GiB value limit, a Parquet page budget, a CSV row limit). Nothing
    /// of that size was allocated.
    #[error("{file}: {location}: {what} of {size} bytes is over the limit of {limit} bytes")]
    TooLarge {
        /// The input file.
        file: String,
        /// Row, line, record, page or byte offset.
        location: String,
        /// What is too large ("the value", "a page", ...).
        what: String,
        /// The size declared or found (at least this much).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The user's arguments cannot work (a bad glob, a bad brace range, ...).
    #[error("{0}")]
    Usage(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tar_export::ExportError;

    /// Errors that chain an operating-system error name the file and leave the
    /// cause to `source()`, so a front end joining the chain says it once.
    #[test]
    fn messages_leave_their_cause_to_source() {
        let cause = || io::Error::from_raw_os_error(2);
        let shown = cause().to_string();
        let read = SourceError::Io {
            path: "/in/x.tar".into(),
            source: cause(),
        };
        let write = ExportError::Write {
            path: "/out/x.tar".into(),
            source: cause(),
        };
        let errors: [&dyn std::error::Error; 2] = [&read, &write];
        for error in errors {
            let message = error.to_string();
            assert!(!message.contains(&shown), "{message}");
            assert!(message.contains("x.tar"), "{message}");
            assert_eq!(error.source().map(|s| s.to_string()), Some(shown.clone()));
        }
    }
}
