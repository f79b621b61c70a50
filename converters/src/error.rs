use std::io;
use std::path::PathBuf;

/// Why a source could not produce its next record. Every variant names the file,
/// and the member or offset where one applies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// Reading a file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// An archive is truncated or corrupt.
    #[error("{archive}: {location}: {reason}; the archive is truncated or corrupt")]
    Corrupt {
        /// The archive.
        archive: String,
        /// Member name and/or byte offset.
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
    /// The user's arguments cannot work (a bad glob, a bad brace range, ...).
    #[error("{0}")]
    Usage(String),
}
