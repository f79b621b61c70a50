//! `ingest_into_remote`: an ingest whose destination is a prefix in object
//! storage. The records are committed to a local staging copy (pulled from the
//! remote first when it exists, so keys are checked against the committed ones
//! and shards are numbered after them), and then pushed, with the push's
//! conditional commit: the remote changes all at once or not at all.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use bcd_converters::Source;
use bcd_remote::{Base, Remote, RemoteError, TransferOptions, TransferSummary};

use crate::ingest::{ingest, IngestError, IngestOptions, IngestSummary, Progress};

/// Where an ingest into object storage stages its shards.
#[derive(Clone, Debug, Default)]
pub struct Staging {
    /// A directory kept between runs as a local mirror of the remote dataset, so a
    /// later run pulls only what changed. Default: a temporary directory, removed
    /// afterwards (each run then pulls the whole remote dataset first).
    pub dir: Option<PathBuf>,
}

/// What an ingest into object storage did.
#[derive(Clone, Debug)]
pub struct RemoteIngestSummary {
    /// The ingest into the staging copy.
    pub ingest: IngestSummary,
    /// The pull that brought the staging copy up to date first.
    pub pulled: TransferSummary,
    /// The push that committed the result.
    pub pushed: TransferSummary,
}

/// Reads `source` into the dataset at `remote` (created when missing): see the
/// module documentation. On failure the remote is unchanged.
pub fn ingest_into_remote(
    source: Box<dyn Source>,
    remote: &Remote,
    staging: &Staging,
    options: &IngestOptions,
    transfer: &TransferOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RemoteIngestSummary, IngestError> {
    let (dir, temporary) = match &staging.dir {
        Some(dir) => (dir.clone(), false),
        None => (temporary_dir(), true),
    };
    let result = run(source, remote, &dir, options, transfer, progress);
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn temporary_dir() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "bcd-staging-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

fn run(
    source: Box<dyn Source>,
    remote: &Remote,
    dir: &Path,
    options: &IngestOptions,
    transfer: &TransferOptions,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RemoteIngestSummary, IngestError> {
    let mut transfer = transfer.clone();
    transfer.interrupt = options.interrupt.clone();
    let remote_error = |e| match e {
        RemoteError::Interrupted => IngestError::Interrupted,
        e => IngestError::Remote(e),
    };
    // The state built on: the push below commits only if the remote is still at it.
    let base = remote.base().map_err(remote_error)?;
    let pulled = match base {
        Base::Absent => TransferSummary::default(),
        Base::Version(_) => bcd_remote::pull(remote, dir, &transfer).map_err(remote_error)?,
    };
    let ingest = ingest(source, dir, options, progress)?;
    let pushed = match bcd_remote::push_onto(dir, remote, &transfer, Some(base)) {
        Ok(summary) => summary,
        Err(RemoteError::Interrupted) => return Err(IngestError::Interrupted),
        Err(e) => return Err(IngestError::Remote(e)),
    };
    Ok(RemoteIngestSummary {
        ingest,
        pulled,
        pushed,
    })
}
