//! `push`: make a remote prefix equal to a local dataset, committing with a
//! conditional write of the manifest after everything it names is uploaded.
//!
//! 1. Read the local manifest (the state pushed) and the remote one, with its
//!    version, and list the prefix. A local file and an object of its name are
//!    the same file only if their content checksums are equal
//!    ([`crate::same_content`]; sizes never make them so).
//! 2. The remote must hold an earlier state of the local dataset: the same
//!    settings, no more shards, every file its state commits the same as the
//!    local one, and no object the new state would commit by its name that the
//!    local state lacks. Otherwise it holds another dataset: refused, or, with
//!    [`TransferOptions::replace`], its manifest is removed first (the prefix
//!    then holds no dataset, so that no reader takes its files and the new ones
//!    for one dataset) and its files are overwritten or deleted below.
//! 3. Abort multipart uploads a killed push left (the upload journal).
//! 4. Upload the committed files the remote lacks, in parallel: new immutable
//!    files with create-if-absent, files past the remote's count that it has
//!    already are skipped when the same (a re-run after an interruption) and
//!    refused otherwise (another push's, or other data's). A create that finds
//!    its object there with the same checksum is this push's own (a killed
//!    run's request that landed late).
//! 5. List again: every file the new manifest names must be there.
//! 6. Put the manifest: create-if-absent for a new remote (or a replaced one),
//!    compare-and-swap on the version read in 1 otherwise. A failed condition is
//!    a [`RemoteError::Conflict`] and the remote stays as the other writer left
//!    it.
//!
//! Until 6 the remote reads as its old state (as no dataset, for a replace); a
//! push interrupted anywhere leaves it so, and running it again completes it.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{RemoteError, Result};
use crate::names::{committed_files, data_of_index, required_shard_files, FileKind};
use crate::objects::{
    file_checksum, is_conflict, mtime_ns, same_content, Base, DataClaim, RemoteManifest,
    RemoteObject,
};
use crate::store::{block_on, Remote};
use crate::transfer::{
    abort_journaled, upload, Context, TransferOptions, TransferSummary, Upload, Uploaded,
};

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

/// For each local file the remote has an object of, whether the two are the same
/// file ([`same_content`]: equal content checksums, from the object's stamp and
/// the local bytes). Objects of another size differ without a request.
async fn compare(
    ctx: &Context<'_>,
    dir: &Path,
    files: &[LocalFile],
    objects: &BTreeMap<String, RemoteObject>,
) -> Result<BTreeMap<String, bool>> {
    let remote = ctx.remote;
    futures::stream::iter(
        files
            .iter()
            .filter_map(|f| Some((f, objects.get(&f.name)?))),
    )
    .map(|(file, object)| async move {
        if object.size != file.size {
            return Ok::<_, RemoteError>((file.name.clone(), false));
        }
        let stamp = remote.content_stamp(&file.name).await?;
        let path = dir.join(&file.name);
        let (local, _) = tokio::task::spawn_blocking(move || file_checksum(&path))
            .await
            .expect("the checksum task does not panic")?;
        Ok((file.name.clone(), same_content(stamp, local)))
    })
    .buffer_unordered(ctx.options.concurrency.max(1))
    .try_collect()
    .await
}

/// Checks, just before the commit, that every file the new manifest names is
/// in `now` (a listing taken after the uploads), and that each immutable one
/// is the object this push found the same (`before`) or wrote (`uploaded`):
/// the same ETag, or, where the store gave none or another, the same content
/// checksum as the local file. Size is never identity: another writer or a gc
/// may have replaced an object by one of the same size since.
async fn check_still_there(
    ctx: &Context<'_>,
    dir: &Path,
    files: &[LocalFile],
    before: &BTreeMap<String, RemoteObject>,
    uploaded: &BTreeMap<String, Uploaded>,
    now: &BTreeMap<String, RemoteObject>,
) -> Result<()> {
    let remote = ctx.remote;
    let replaced = |name: &str| RemoteError::Conflict {
        uri: remote.object_uri(name),
        reason: "removed or replaced during the push (by another writer, or a gc)".into(),
    };
    let mut by_content = Vec::new();
    for file in files {
        let Some(object) = now.get(&file.name) else {
            return Err(replaced(&file.name));
        };
        if !FileKind::of(&file.name).immutable() {
            continue;
        }
        if object.size != file.size {
            return Err(replaced(&file.name));
        }
        let (expected, xxh3) = match uploaded.get(&file.name) {
            Some(done) => (done.e_tag.as_ref(), Some(done.xxh3)),
            None => (before.get(&file.name).and_then(|o| o.e_tag.as_ref()), None),
        };
        if expected.is_none() || object.e_tag.as_ref() != expected {
            by_content.push((file, xxh3));
        }
    }
    futures::stream::iter(by_content)
        .map(|(file, xxh3)| async move {
            let stamp = remote.content_stamp(&file.name).await?;
            let local = match xxh3 {
                Some(xxh3) => xxh3,
                None => {
                    let path = dir.join(&file.name);
                    tokio::task::spawn_blocking(move || file_checksum(&path))
                        .await
                        .expect("the checksum task does not panic")?
                        .0
                }
            };
            match same_content(stamp, local) {
                true => Ok(()),
                false => Err(replaced(&file.name)),
            }
        })
        .buffer_unordered(ctx.options.concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The advice of a refusal to push over another dataset.
fn replace_advice(remote: &Remote) -> String {
    format!(
        "push to a new prefix, or push with the `replace` option to replace the dataset at {}",
        remote.uri()
    )
}

/// Checks that the remote holds an earlier state of the local dataset, so that the
/// push only adds to it: the same settings, no more shards, and every file its
/// state commits the same file (by content checksum) as the local one.
fn check_compatible(
    remote: &Remote,
    remote_manifest: &RemoteManifest,
    local: &bcd::Manifest,
    local_files: &[LocalFile],
    objects: &BTreeMap<String, RemoteObject>,
    same: &BTreeMap<String, bool>,
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
            "the remote dataset's settings (keyed {}, compression {}, max_shard_size {}) differ from {}'s (keyed {}, compression {}, max_shard_size {}); {}",
            theirs.keyed,
            theirs.compression.as_manifest_str().unwrap_or("none"),
            theirs.max_shard_size,
            dir.display(),
            local.keyed,
            local.compression.as_manifest_str().unwrap_or("none"),
            local.max_shard_size,
            replace_advice(remote),
        )));
    }
    if theirs.shards > local.shards {
        return Err(diverged(format!(
            "the remote has {} shards, {} only {}: pull the remote first, or {}",
            theirs.shards,
            dir.display(),
            local.shards,
            replace_advice(remote),
        )));
    }
    for file in local_files {
        let kind = FileKind::of(&file.name);
        if !(kind.immutable() && kind.committed(theirs.shards)) {
            continue;
        }
        match objects.get(&file.name) {
            Some(_) if same.get(&file.name) == Some(&true) => {}
            Some(object) => {
                return Err(diverged(format!(
                    "{} differs from {} ({} and {} bytes, {}): they are different datasets (the remote's is not an earlier state of the local one); {}",
                    remote.object_uri(&file.name),
                    dir.join(&file.name).display(),
                    object.size,
                    file.size,
                    match object.size == file.size {
                        true => "other content",
                        false => "other sizes",
                    },
                    replace_advice(remote),
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

/// Objects under the prefix that the new state would commit by their names
/// (FORMAT.md section 10) but that are not files of the local state: files of
/// another dataset, which would be read with this one's.
fn strays<'a>(
    objects: &'a BTreeMap<String, RemoteObject>,
    files: &[LocalFile],
    shards: u64,
) -> Vec<&'a RemoteObject> {
    objects
        .values()
        .filter(|o| {
            let kind = FileKind::of(&o.name);
            kind.immutable() && kind.committed(shards) && !files.iter().any(|f| f.name == o.name)
        })
        .collect()
}

/// Makes the dataset at `remote` equal to the local dataset at `dir`: see the
/// module documentation.
pub fn push(dir: &Path, remote: &Remote, options: &TransferOptions) -> Result<TransferSummary> {
    push_onto(dir, remote, options, None)
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

/// The error for an uncommitted object under a name of the new state, of other
/// content than the local file (or not one of its files).
fn leftover(remote: &Remote, name: &str, dir: &Path) -> RemoteError {
    RemoteError::Conflict {
        uri: remote.object_uri(name),
        reason: format!(
            "exists, uncommitted, and is not {}: another push to this prefix is in progress, or an interrupted push of other data left it (if no push runs, remove it with `bcd gc {} --older-than 0s`)",
            dir.join(name).display(),
            remote.uri()
        ),
    }
}

/// The refusal of `name`, an object the new state would commit by its name that
/// is not one of its files: committed there (another dataset's), or a leftover.
fn stray_error(
    remote: &Remote,
    remote_manifest: Option<&RemoteManifest>,
    name: &str,
    dir: &Path,
) -> RemoteError {
    match remote_manifest.is_some_and(|m| FileKind::of(name).committed(m.manifest.shards)) {
        true => RemoteError::Diverged {
            uri: remote.uri().to_string(),
            reason: format!(
                "{} is committed there, but {} has no such file: they are different datasets (the remote's is not an earlier state of the local one); {}",
                remote.object_uri(name),
                dir.display(),
                replace_advice(remote)
            ),
        },
        false => leftover(remote, name, dir),
    }
}

/// Removes the manifest of the dataset being replaced, if it is still the one
/// read (`theirs`): from then on the prefix holds no dataset.
async fn withdraw(ctx: &Context<'_>, theirs: &RemoteManifest) -> Result<()> {
    let remote = ctx.remote;
    let now = remote.manifest().await?;
    if now.map(|m| m.version) != Some(theirs.version.clone()) {
        return Err(RemoteError::Conflict {
            uri: remote.uri().to_string(),
            reason: "another writer committed to the dataset during the push".into(),
        });
    }
    remove(ctx, bcd::format::MANIFEST_NAME).await
}

/// Deletes object `name`; one already gone is no error.
async fn remove(ctx: &Context<'_>, name: &str) -> Result<()> {
    match ctx.clients.store.delete(&ctx.remote.path(name)).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(RemoteError::store(ctx.remote.object_uri(name), "delete", e)),
    }
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
        if &Base::of(remote_manifest.as_ref()) != base {
            return Err(RemoteError::Conflict {
                uri: remote.uri().to_string(),
                reason: "another writer committed to the dataset since it was read".into(),
            });
        }
    }
    let objects = remote.list().await?;
    let same = compare(ctx, dir, files, &objects).await?;
    let replace = ctx.options.replace;
    let strays = strays(&objects, files, local.shards);
    let earlier = match &remote_manifest {
        Some(theirs) => check_compatible(remote, theirs, local, files, &objects, &same, dir),
        None => Ok(()),
    }
    .and_then(|()| match strays.first() {
        Some(stray) => Err(stray_error(
            remote,
            remote_manifest.as_ref(),
            &stray.name,
            dir,
        )),
        None => Ok(()),
    });
    let earlier = match (earlier, replace) {
        (Err(e), false) => return Err(e),
        (earlier, _) => earlier.is_ok(),
    };
    // Multipart uploads a killed push left behind: they cannot become part of any
    // commit (a push completes its uploads before committing).
    abort_journaled(remote, &ctx.clients, None).await?;
    let mut remote_manifest = remote_manifest;
    if let (Some(theirs), false) = (&remote_manifest, earlier) {
        // Another dataset is replaced: first it stops being one, so that no
        // reader ever takes its files and these for one dataset, and a push
        // interrupted from here on leaves no dataset (a rerun completes it).
        withdraw(ctx, theirs).await?;
        remote_manifest = None;
    }

    let mut summary = TransferSummary {
        shards: local.shards,
        ..TransferSummary::default()
    };
    let mut uploads = Vec::new();
    for file in files {
        let kind = FileKind::of(&file.name);
        let present = objects.contains_key(&file.name);
        if same.get(&file.name) == Some(&true) {
            summary.skipped += 1;
            summary.skipped_bytes += file.size;
            continue;
        }
        if kind.immutable() && present && !replace {
            // Committed there, it was the same (checked above): a leftover.
            return Err(leftover(remote, &file.name, dir));
        }
        uploads.push(Upload {
            name: file.name.clone(),
            path: dir.join(&file.name),
            size: file.size,
            mtime_ns: file.mtime_ns,
            mode: match kind.immutable() && !present {
                true => PutMode::Create,
                false => PutMode::Overwrite,
            },
            data: None,
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
    // Each shard's `.idx` goes after the rest, saying which write of its data
    // object it goes with (the ETag the data upload got, or the one listed for
    // a data object kept) and the data file's time: what a cache needs of the
    // data object to check the persisted index, without asking it.
    let (indexes, others): (Vec<&Upload>, Vec<&Upload>) = uploads
        .iter()
        .partition(|file| data_of_index(&file.name).is_some());
    let run = |files: Vec<Upload>| async move {
        ctx.run_all(files.into_iter().map(|file| async move {
            let done = upload(ctx, &file, unchanged).await?;
            Ok((file.name.clone(), done))
        }))
        .await
    };
    let others = others.into_iter().cloned().collect();
    let mut uploaded: BTreeMap<String, Uploaded> = run(others).await?.into_iter().collect();
    let local_times: BTreeMap<&str, Option<u64>> = files
        .iter()
        .map(|f| (f.name.as_str(), f.mtime_ns))
        .collect();
    let indexes: Vec<Upload> = (indexes.into_iter())
        .map(|file| {
            let data = data_of_index(&file.name).expect("partitioned by it");
            let e_tag = match uploaded.get(&data) {
                Some(done) => done.e_tag.clone(),
                None => objects.get(&data).and_then(|o| o.e_tag.clone()),
            };
            let mtime_ns = local_times.get(data.as_str()).copied().flatten();
            Upload {
                data: e_tag
                    .zip(mtime_ns)
                    .map(|(e_tag, mtime_ns)| DataClaim { e_tag, mtime_ns }),
                ..file.clone()
            }
        })
        .collect();
    uploaded.extend(run(indexes).await?);
    if replace {
        // The other dataset's files the new state would name.
        ctx.run_all(strays.iter().map(|stray| remove(ctx, &stray.name)))
            .await?;
    }
    summary.files = uploads.len() as u64;
    summary.bytes = uploads.iter().map(|u| u.size).sum();
    ctx.check_interrupt()?;

    // Everything the new manifest names must be there, as this push saw or
    // wrote it.
    let now = remote.list().await?;
    check_still_there(ctx, dir, files, &objects, &uploaded, &now).await?;

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
                attributes: commit_attributes(),
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

/// The metadata of a write of the manifest: a new `bcd-commit` id.
fn commit_attributes() -> object_store::Attributes {
    let mut attributes = object_store::Attributes::new();
    attributes.insert(
        object_store::Attribute::Metadata(crate::objects::COMMIT_KEY.into()),
        object_store::AttributeValue::from(crate::objects::new_commit_id()),
    );
    attributes
}
