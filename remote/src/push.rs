//! `push`: make a remote prefix equal to a local dataset, committing with a
//! conditional write of the manifest after everything it names is uploaded.
//!
//! 1. Read the local manifest (the state pushed) and the remote one, with its
//!    version. Settings must agree, the remote may not have more shards, and its
//!    committed files must have the local sizes.
//! 2. Abort multipart uploads a killed push left (the upload journal).
//! 3. Upload the committed files the remote lacks, in parallel: new immutable
//!    files with create-if-absent, files past the remote's count that it has
//!    already are skipped when size and checksum match (a re-run after an
//!    interruption) and refused otherwise (another push's, or other data's).
//! 4. List again: every file the new manifest names must be there.
//! 5. Put the manifest: create-if-absent for a new remote, compare-and-swap on the
//!    version read in 1 otherwise. A failed condition is a [`RemoteError::Conflict`]
//!    and the remote stays as the other writer left it.
//!
//! Until 5 the remote reads as its old state; a push interrupted anywhere leaves
//! it so, and running it again completes it.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::error::{RemoteError, Result};
use crate::names::{committed_files, required_shard_files, FileKind};
use crate::objects::{is_conflict, mtime_ns, RemoteManifest, RemoteObject};
use crate::store::{block_on, Remote};
use crate::transfer::{abort_journaled, upload, Context, TransferOptions, TransferSummary, Upload};

/// A local file of the state pushed.
struct LocalFile {
    name: String,
    size: u64,
    mtime_ns: Option<u64>,
}

/// Reads a local dataset's manifest bytes and the committed files beside it.
fn local_state(dir: &Path) -> Result<(Vec<u8>, bcd::Manifest, Vec<LocalFile>)> {
    // Through the store's reader: a FIFO or an oversized file is refused as locally.
    let manifest = bcd::Manifest::read(dir)?;
    let manifest_path = dir.join(bcd::format::MANIFEST_NAME);
    let bytes = fs::read(&manifest_path).map_err(|e| RemoteError::io(&manifest_path, "read", e))?;
    // The bytes uploaded are the ones parsed (a commit in between changes both).
    let manifest = match bcd::Manifest::parse(&bytes, &manifest_path) {
        Ok(reread) if reread.shards >= manifest.shards => reread,
        _ => manifest,
    };
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| RemoteError::io(dir, "list", e))? {
        let entry = entry.map_err(|e| RemoteError::io(dir, "list", e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    for required in required_shard_files(manifest.shards) {
        if !names.contains(&required) {
            return Err(bcd::Error::MissingShard {
                path: dir.join(required),
                shards: manifest.shards,
            }
            .into());
        }
    }
    let mut files = Vec::new();
    for name in committed_files(&names, manifest.shards) {
        let path = dir.join(&name);
        let metadata = fs::metadata(&path).map_err(|e| RemoteError::io(&path, "stat", e))?;
        if !metadata.is_file() {
            return Err(RemoteError::io(
                &path,
                "read",
                std::io::Error::other("not a regular file"),
            ));
        }
        files.push(LocalFile {
            name,
            size: metadata.len(),
            mtime_ns: mtime_ns(&metadata),
        });
    }
    Ok((bytes, manifest, files))
}

/// Checks that the remote's settings and committed files agree with the local
/// dataset's, so that the push only adds to it.
fn check_compatible(
    remote: &Remote,
    remote_manifest: &RemoteManifest,
    local: &bcd::Manifest,
    local_files: &[LocalFile],
    objects: &BTreeMap<String, RemoteObject>,
    dir: &Path,
) -> Result<()> {
    let theirs = &remote_manifest.manifest;
    let diverged = |reason: String| RemoteError::Diverged {
        uri: remote.uri().to_string(),
        reason,
    };
    if (theirs.keyed, theirs.compression, theirs.max_shard_size)
        != (local.keyed, local.compression, local.max_shard_size)
    {
        return Err(diverged(format!(
            "the remote dataset's settings (keyed {}, compression {}, max_shard_size {}) differ from {}'s (keyed {}, compression {}, max_shard_size {}); push to a new prefix",
            theirs.keyed,
            theirs.compression.as_manifest_str().unwrap_or("none"),
            theirs.max_shard_size,
            dir.display(),
            local.keyed,
            local.compression.as_manifest_str().unwrap_or("none"),
            local.max_shard_size,
        )));
    }
    if theirs.shards > local.shards {
        return Err(diverged(format!(
            "the remote has {} shards, {} only {}: pull the remote first, or push to a new prefix",
            theirs.shards,
            dir.display(),
            local.shards
        )));
    }
    for file in local_files {
        let kind = FileKind::of(&file.name);
        if !(kind.immutable() && kind.committed(theirs.shards)) {
            continue;
        }
        match objects.get(&file.name) {
            Some(object) if object.size == file.size => {}
            Some(object) => {
                return Err(diverged(format!(
                    "{} is {} bytes in the remote but {} bytes in {}: they are different datasets",
                    file.name,
                    object.size,
                    file.size,
                    dir.display()
                )))
            }
            None if matches!(kind, FileKind::Shard(_)) => {
                return Err(RemoteError::Corrupt {
                    uri: remote.object_uri(&file.name),
                    reason: format!(
                        "missing, though the remote manifest counts {} shards",
                        theirs.shards
                    ),
                })
            }
            // A sidecar the remote lacks (pushed by a version that did not have
            // it): uploaded below.
            None => {}
        }
    }
    Ok(())
}

/// Makes the dataset at `remote` equal to the local dataset at `dir`: see the
/// module documentation.
pub fn push(dir: &Path, remote: &Remote, options: &TransferOptions) -> Result<TransferSummary> {
    push_onto(dir, remote, options, None)
}

/// The remote state a push may build on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Base {
    /// No dataset under the prefix yet.
    Absent,
    /// The manifest of this version (an ETag and version seen earlier).
    Version(UpdateVersion),
}

/// [`push`] onto a remote state read earlier (`base`; `None`: whatever the push
/// finds): if the remote is no longer at `base`, the push fails with
/// [`RemoteError::Conflict`] before uploading anything. An ingest that pulled the
/// remote, added records and pushes the result uses this, so that shards another
/// writer committed meanwhile are never taken for its own.
pub fn push_onto(
    dir: &Path,
    remote: &Remote,
    options: &TransferOptions,
    base: Option<Base>,
) -> Result<TransferSummary> {
    let started = Instant::now();
    let (manifest_bytes, local, files) = local_state(dir)?;
    let ctx = Context::new(remote, options.clone())?;
    let mut summary = block_on(push_async(
        &ctx,
        dir,
        &manifest_bytes,
        &local,
        &files,
        base.as_ref(),
    ))?;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

async fn push_async(
    ctx: &Context<'_>,
    dir: &Path,
    manifest_bytes: &[u8],
    local: &bcd::Manifest,
    files: &[LocalFile],
    base: Option<&Base>,
) -> Result<TransferSummary> {
    let remote = ctx.remote;
    let remote_manifest = remote.manifest().await?;
    if let Some(base) = base {
        let found = match &remote_manifest {
            None => Base::Absent,
            Some(m) => Base::Version(m.version.clone()),
        };
        if &found != base {
            return Err(RemoteError::Conflict {
                uri: remote.uri().to_string(),
                reason: "another writer committed to the dataset since it was read".into(),
            });
        }
    }
    let objects = remote.list().await?;
    if let Some(theirs) = &remote_manifest {
        check_compatible(remote, theirs, local, files, &objects, dir)?;
    }
    let remote_shards = remote_manifest.as_ref().map_or(0, |m| m.manifest.shards);
    // Multipart uploads a killed push left behind: they cannot become part of any
    // commit (a push completes its uploads before committing).
    abort_journaled(remote, &ctx.clients, None).await?;

    let mut summary = TransferSummary {
        shards: local.shards,
        ..TransferSummary::default()
    };
    let mut uploads = Vec::new();
    // The checksums of pending objects already there, fetched in parallel.
    let pending_present: Vec<&LocalFile> = files
        .iter()
        .filter(|f| {
            let kind = FileKind::of(&f.name);
            !(kind.immutable() && kind.committed(remote_shards))
                && objects.get(&f.name).is_some_and(|o| o.size == f.size)
        })
        .collect();
    let stamps: BTreeMap<String, Option<u64>> = futures::stream::iter(pending_present)
        .map(|file| async move {
            let stamp = remote.stamp(&file.name).await?;
            let path = dir.join(&file.name);
            let local = tokio::task::spawn_blocking(move || crate::objects::file_checksum(&path))
                .await
                .expect("the checksum task does not panic")?;
            Ok::<_, RemoteError>((file.name.clone(), stamp.xxh3.filter(|&x| x == local.0)))
        })
        .buffer_unordered(ctx.options.concurrency.max(1))
        .try_collect()
        .await?;
    for file in files {
        let kind = FileKind::of(&file.name);
        let committed_there = kind.immutable() && kind.committed(remote_shards);
        let same = stamps.get(&file.name).is_some_and(Option::is_some);
        if committed_there && objects.contains_key(&file.name) || same {
            summary.skipped += 1;
            summary.skipped_bytes += file.size;
            continue;
        }
        if kind.immutable() && objects.contains_key(&file.name) {
            return Err(RemoteError::Conflict {
                uri: remote.object_uri(&file.name),
                reason: format!(
                    "exists, uncommitted, with other content than {}: another push to this prefix is in progress, or an interrupted push of other data left it (if no push runs, remove it with `bcd gc {} --older-than 0s`)",
                    dir.join(&file.name).display(),
                    remote.uri()
                ),
            });
        }
        uploads.push(Upload {
            name: file.name.clone(),
            path: dir.join(&file.name),
            size: file.size,
            mtime_ns: file.mtime_ns,
            mode: match kind.immutable() {
                true => PutMode::Create,
                false => PutMode::Overwrite,
            },
        });
    }
    let expected_version = remote_manifest.as_ref().map(|m| m.version.clone());
    // Before a multipart upload (which overwrites) completes: the remote must still
    // be at the state read, or another writer may have committed this name.
    let unchanged = || async {
        let now = remote.manifest().await?;
        let now_version = now.map(|m| m.version);
        match now_version == expected_version {
            true => Ok(()),
            false => Err(RemoteError::Conflict {
                uri: remote.uri().to_string(),
                reason: "the remote manifest changed during the push: another writer committed"
                    .into(),
            }),
        }
    };
    futures::stream::iter(&uploads)
        .map(|file| upload(ctx, file, unchanged))
        .buffer_unordered(ctx.options.concurrency.max(1))
        .try_collect::<Vec<u64>>()
        .await?;
    summary.files = uploads.len() as u64;
    summary.bytes = uploads.iter().map(|u| u.size).sum();
    ctx.check_interrupt()?;

    // Everything the new manifest names must be there, at its size.
    let now = remote.list().await?;
    for file in files {
        match now.get(&file.name) {
            Some(object) if object.size == file.size || !FileKind::of(&file.name).immutable() => {}
            _ => {
                return Err(RemoteError::Conflict {
                    uri: remote.object_uri(&file.name),
                    reason: "removed or replaced during the push (by another writer, or a gc)"
                        .into(),
                })
            }
        }
    }

    // Same manifest and nothing uploaded: up to date. Files uploaded beside an
    // unchanged manifest (sidecars the remote lacked, a persisted index) are
    // still committed with a new write of it, so that caches of the remote,
    // which know it by its version, pick them up.
    if uploads.is_empty()
        && remote_manifest
            .as_ref()
            .is_some_and(|m| m.bytes == manifest_bytes)
    {
        return Ok(summary);
    }
    let mode = match &remote_manifest {
        None => PutMode::Create,
        Some(theirs) => PutMode::Update(theirs.version.clone()),
    };
    let uri = remote.object_uri(bcd::format::MANIFEST_NAME);
    let put = ctx
        .clients
        .store
        .put_opts(
            &remote.path(bcd::format::MANIFEST_NAME),
            PutPayload::from(manifest_bytes.to_vec()),
            PutOptions {
                mode,
                ..PutOptions::default()
            },
        )
        .await;
    match put {
        Ok(_) => {
            summary.committed = true;
            Ok(summary)
        }
        Err(e) if is_conflict(&e) => Err(RemoteError::Conflict {
            uri: remote.uri().to_string(),
            reason: match remote_manifest {
                None => "another writer created the dataset during the push".into(),
                Some(_) => "another writer committed to the dataset during the push".into(),
            },
        }),
        Err(e) => Err(RemoteError::store(uri, "commit (write the manifest)", e)),
    }
}
