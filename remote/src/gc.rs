//! `gc`: remove what interrupted pushes left under a prefix: multipart uploads
//! never completed (recorded in the upload journal) and uploaded files no
//! manifest names (shards, sidecars and commit files numbered past the committed
//! count).
//!
//! A push uploads its files before it commits, so a file past the count may be a
//! push in progress rather than a leftover: only objects older than a grace
//! period (one hour by default) are removed. Files that are not dataset files
//! (anything else under the prefix) are never touched.

use std::time::Duration;

use object_store::ObjectStoreExt;

use crate::error::{RemoteError, Result};
use crate::names::FileKind;
use crate::store::{block_on, Remote};
use crate::transfer::abort_journaled;

/// How `gc` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcOptions {
    /// Leave objects younger than this (they may belong to a push in progress).
    /// Default: one hour.
    pub grace: Duration,
    /// Only report what would be removed.
    pub dry_run: bool,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            grace: Duration::from_secs(3600),
            dry_run: false,
        }
    }
}

/// What `gc` removed (or, with `dry_run`, would remove).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcSummary {
    /// Names of the objects removed, relative to the prefix.
    pub removed: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
    /// Multipart uploads aborted.
    pub aborted_uploads: u64,
}

/// Removes the leftovers of interrupted pushes under `remote`: see the module
/// documentation.
pub fn gc(remote: &Remote, options: &GcOptions) -> Result<GcSummary> {
    block_on(async {
        let clients = remote.clients()?;
        let shards = remote.manifest().await?.map_or(0, |m| m.manifest.shards);
        let limit = chrono::Utc::now()
            - chrono::Duration::from_std(options.grace).unwrap_or(chrono::Duration::MAX);
        let mut summary = GcSummary::default();
        if !options.dry_run {
            summary.aborted_uploads = abort_journaled(remote, &clients, Some(limit)).await?;
        }
        let objects = remote.list().await?;
        // A push that committed meanwhile may name files listed as leftovers.
        if remote.manifest().await?.map_or(0, |m| m.manifest.shards) != shards {
            return Err(RemoteError::Conflict {
                uri: remote.uri().to_string(),
                reason: "a push committed while gc listed the prefix; run gc again".into(),
            });
        }
        for object in objects.into_values() {
            if !FileKind::of(&object.name).pending(shards) || object.last_modified >= limit {
                continue;
            }
            if !options.dry_run {
                match clients.store.delete(&remote.path(&object.name)).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => {
                        return Err(RemoteError::store(
                            remote.object_uri(&object.name),
                            "delete",
                            e,
                        ))
                    }
                }
            }
            summary.bytes += object.size;
            summary.removed.push(object.name);
        }
        Ok(summary)
    })
}
