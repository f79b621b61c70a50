//! [`Destination`]: the one place an ingest decides between a local dataset and a
//! dataset in object storage, for every front end (`bcd ingest`, `bcd.ingest`).
//!
//! A local destination is opened and written in place ([`crate::ingest()`]); a
//! remote one is staged locally and pushed ([`crate::ingest_into_remote`]). The
//! sources are opened through the destination too, so that a directory source
//! never reads the local dataset being written.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use bcd_converters::Source;
use bcd_remote::{Location, Remote, RemoteError, TransferOptions};

use crate::ingest::{ingest, IngestError, IngestOptions, IngestSummary, Progress};
use crate::ingest_remote::{ingest_into_remote, Staging};
use crate::source_errors::SourceSetupError;
use crate::source_options::SourceOptions;
use crate::sources::{open_sources, open_sources_into, OpenedSource};

/// Where an ingest writes its records.
#[derive(Debug)]
pub enum Destination {
    /// A dataset directory (created when missing or empty).
    Local(PathBuf),
    /// A prefix in object storage, staged locally and pushed with a conditional
    /// commit.
    Remote {
        /// The client of the prefix.
        remote: Remote,
        /// Where the records are staged before the push.
        staging: Staging,
    },
}

impl Destination {
    /// The destination `location` names. A URI gets its client, configured from
    /// the environment (nothing is requested yet), and is staged as `staging`
    /// says; a local dataset is written in place and stages nothing, so
    /// `staging` is not used for it (a front end that lets a user name a staging
    /// directory refuses one for a local destination).
    pub fn new(location: Location, staging: Staging) -> Result<Destination, RemoteError> {
        Ok(match location {
            Location::Local(path) => Destination::Local(path),
            Location::Remote(uri) => Destination::Remote {
                remote: Remote::new(uri)?,
                staging,
            },
        })
    }

    /// The dataset directory of a local destination.
    pub fn local_path(&self) -> Option<&Path> {
        match self {
            Destination::Local(path) => Some(path),
            Destination::Remote { .. } => None,
        }
    }

    /// Opens `sources` (see [`open_sources`]) for an ingest into this
    /// destination: a directory source passes over a local destination's
    /// dataset ([`open_sources_into`]).
    pub fn open_sources<S: AsRef<OsStr>>(
        &self,
        sources: &[S],
        options: &SourceOptions,
    ) -> Result<OpenedSource, SourceSetupError> {
        match self {
            Destination::Local(path) => open_sources_into(sources, options, path),
            Destination::Remote { .. } => open_sources(sources, options),
        }
    }

    /// Reads `source` into this destination in one all-or-nothing commit, and
    /// returns what the ingest into the dataset (for a remote destination: into
    /// its staging copy) did. On failure the destination is as it was.
    pub fn ingest(
        &self,
        source: Box<dyn Source>,
        options: &IngestOptions,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<IngestSummary, IngestError> {
        match self {
            Destination::Local(path) => ingest(source, path, options, progress),
            Destination::Remote { remote, staging } => ingest_into_remote(
                source,
                remote,
                staging,
                options,
                &TransferOptions::default(),
                progress,
            )
            .map(|summary| summary.ingest),
        }
    }
}

/// The path as given, or the URI: the name messages and summaries use.
impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Local(path) => write!(f, "{}", path.display()),
            Destination::Remote { remote, .. } => write!(f, "{}", remote.uri()),
        }
    }
}
