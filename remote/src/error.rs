//! The errors of this crate: each names the URI (or local path) and what failed,
//! and leaves its cause to `source()`.

use std::io;
use std::path::PathBuf;

/// Why a remote operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// A `scheme://` this crate does not reach.
    #[error("{uri}: unsupported URI scheme `{scheme}://`; supported: s3://, gs://, az://, file:// and plain paths")]
    UnsupportedScheme {
        /// The URI as given.
        uri: String,
        /// The scheme.
        scheme: String,
    },
    /// A URI of a supported scheme that cannot be used as written.
    #[error("{uri}: invalid URI: {reason}")]
    InvalidUri {
        /// The URI as given.
        uri: String,
        /// What is wrong.
        reason: String,
    },
    /// An object-store URI where only a local path works.
    #[error("{uri}: {what} must be a local path, not an object-store URI")]
    RemoteNotSupported {
        /// The URI.
        uri: String,
        /// What the argument is.
        what: String,
    },
    /// The store could not be set up from the environment (credentials, region,
    /// endpoint).
    #[error("{uri}: cannot set up the object store client")]
    Config {
        /// The dataset or source URI.
        uri: String,
        /// The client's error.
        #[source]
        source: object_store::Error,
    },
    /// A request to the store failed (after its retries).
    #[error("{uri}: {operation} failed")]
    Store {
        /// The object or prefix.
        uri: String,
        /// What was being done: `"read"`, `"upload"`, `"list"`, ...
        operation: &'static str,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// No `manifest.json` under the prefix.
    #[error("{uri}: not a dataset (no manifest.json under this prefix)")]
    NotADataset {
        /// The prefix.
        uri: String,
    },
    /// Another writer changed the remote between this run's read of its manifest and
    /// its commit; the remote is as the other writer left it.
    #[error("{uri}: {reason}; the remote is as the other writer left it: pull or re-run the push to retry against its new state")]
    Conflict {
        /// The prefix.
        uri: String,
        /// What changed.
        reason: String,
    },
    /// The two sides hold different datasets (different settings, or the
    /// destination has shards the source lacks or that differ).
    #[error("{uri}: {reason}")]
    Diverged {
        /// The side that differs.
        uri: String,
        /// How.
        reason: String,
    },
    /// Bytes read from the store are not what the dataset declares.
    #[error("{uri}: {reason}")]
    Corrupt {
        /// The object.
        uri: String,
        /// What is wrong.
        reason: String,
    },
    /// An object was written again since the cache recorded it: the remote
    /// dataset was replaced (or a file of it rewritten) since it was opened.
    #[error("{uri}: written again since the dataset was opened (the remote dataset was replaced); open it again")]
    Changed {
        /// The object.
        uri: String,
    },
    /// What stopped the shards being fetched ahead (shared by every caller
    /// that waited for them).
    #[error(transparent)]
    Prefetch(std::sync::Arc<RemoteError>),
    /// An operation on the local side failed.
    #[error("{}: {operation} failed", path.display())]
    Io {
        /// The local file or directory.
        path: PathBuf,
        /// What was being done.
        operation: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The local dataset refused or failed.
    #[error(transparent)]
    Local(#[from] bcd::Error),
    /// Stopped through the caller's interrupt flag; nothing was committed.
    #[error("interrupted; nothing was committed")]
    Interrupted,
}

impl RemoteError {
    pub(crate) fn io(path: impl Into<PathBuf>, operation: &'static str, source: io::Error) -> Self {
        RemoteError::Io {
            path: path.into(),
            operation,
            source,
        }
    }

    pub(crate) fn store(
        uri: impl Into<String>,
        operation: &'static str,
        source: object_store::Error,
    ) -> Self {
        RemoteError::Store {
            uri: uri.into(),
            operation,
            source,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = RemoteError> = std::result::Result<T, E>;
