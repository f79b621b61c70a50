//! `pull`: make a local dataset equal to a remote one, with the local commit
//! protocol: under the writer lock, the files the remote manifest names are
//! downloaded (in parallel, large ones by ranges) and fsynced, each checked
//! against its size and stored checksum, the new shards' `.idx` files checked
//! against their `.bin` sizes, and the manifest written last by an atomic rename.
//!
//! Files are written under names local readers ignore until the commit: shard
//! files and sidecars numbered at or past the local count, and the persisted index
//! under a temporary name renamed just before the manifest. An interrupted pull
//! leaves the local dataset as it was; running it again skips what it already
//! downloaded (same checksum) and completes. A pull that fails otherwise into a
//! directory it created removes it again.
//!
//! Local files are the same as the remote's only when their content checksums
//! are equal ([`crate::same_content`]): a committed local file that differs, or
//! one the remote's state lacks, means the two are different datasets, and the
//! pull is refused before anything is written, or, with
//! [`TransferOptions::replace`], the local dataset is replaced whole (see
//! `pull_replacing`).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};

use crate::download::{download, Expected};
use crate::error::{RemoteError, Result};
use crate::names::{committed_files, required_shard_files, FileKind};
use crate::objects::{file_checksum, same_content, RemoteObject, Stamp};
use crate::store::{block_on, Remote};
use crate::transfer::{Context, TransferOptions, TransferSummary};

/// Makes the local dataset at `dir` (created when missing) equal to the dataset at
/// `remote`: see the module documentation.
pub fn pull(remote: &Remote, dir: &Path, options: &TransferOptions) -> Result<TransferSummary> {
    match pull_creating(remote, dir, options) {
        Err(RemoteError::Diverged { .. }) if options.replace => {
            pull_replacing(remote, dir, options)
        }
        result => result,
    }
}

/// [`TransferOptions::replace`]: the local dataset at `dir` is not an earlier
/// state of the remote one (refused before anything was written): the remote
/// dataset is pulled into a new directory beside it, which then takes its place
/// by two renames. Between them `dir` does not exist, so it is never read as a
/// mix of the two; a reader that has the old dataset open keeps reading it.
fn pull_replacing(
    remote: &Remote,
    dir: &Path,
    options: &TransferOptions,
) -> Result<TransferSummary> {
    let name = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let parent = dir.parent().unwrap_or(Path::new(""));
    let beside = |what: &str| parent.join(format!(".{name}.bcd-{what}-{}", std::process::id()));
    let fresh = beside("pull");
    if fs::symlink_metadata(&fresh).is_ok() {
        // A run of this process id that was killed.
        fs::remove_dir_all(&fresh).map_err(|e| RemoteError::io(&fresh, "remove", e))?;
    }
    let mut summary = match pull_creating(remote, &fresh, options) {
        Ok(summary) => summary,
        Err(e) => {
            let _ = fs::remove_dir_all(&fresh);
            return Err(e);
        }
    };
    // No other writer may hold the dataset replaced.
    let lock = bcd::Import::begin(dir)?;
    let old = beside("replaced");
    fs::rename(dir, &old).map_err(|e| RemoteError::io(dir, "rename", e))?;
    if let Err(e) = fs::rename(&fresh, dir) {
        let _ = fs::rename(&old, dir);
        return Err(RemoteError::io(&fresh, "rename", e));
    }
    drop(lock);
    // Best effort: the replaced dataset's files are no dataset's now.
    let _ = fs::remove_dir_all(&old);
    summary.committed = true;
    Ok(summary)
}

fn pull_creating(
    remote: &Remote,
    dir: &Path,
    options: &TransferOptions,
) -> Result<TransferSummary> {
    // What this pull creates (the directory, and parents it lacked) it removes
    // again if it fails, so that a failed pull leaves nothing behind; an
    // interrupted one keeps what it downloaded, for a rerun to complete.
    let created = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && fs::symlink_metadata(a).is_err())
        .last()
        .map(Path::to_owned);
    let result = pull_into(remote, dir, options);
    if let (Some(created), Err(e)) = (&created, &result) {
        if !matches!(e, RemoteError::Interrupted) {
            let _ = fs::remove_dir_all(created);
        }
    }
    result
}

fn pull_into(remote: &Remote, dir: &Path, options: &TransferOptions) -> Result<TransferSummary> {
    let started = Instant::now();
    let import = bcd::Import::begin(dir)?;
    let local = import.manifest()?;
    if local.is_none() {
        check_resumable(dir)?;
    }
    let ctx = Context::new(remote, options.clone())?;
    let (manifest_bytes, shards, mut summary) = block_on(pull_async(&ctx, dir, local.as_ref()))?;
    ctx.check_interrupt()?;
    if local.is_some_and(|l| {
        fs::read(dir.join(bcd::format::MANIFEST_NAME)).is_ok_and(|b| b == manifest_bytes)
            && l.shards == shards
    }) {
        summary.seconds = started.elapsed().as_secs_f64();
        return Ok(summary);
    }
    import.commit(&manifest_bytes)?;
    summary.committed = true;
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// A directory without a manifest may be pulled into when it is empty or holds
/// only what an interrupted pull leaves: dataset files and the lock.
fn check_resumable(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| RemoteError::io(dir, "list", e))? {
        let entry = entry.map_err(|e| RemoteError::io(dir, "list", e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = !matches!(
            FileKind::of(&name),
            FileKind::Other | FileKind::MergeRecord(_)
        ) || name == bcd::format::LOCK_NAME
            || name.starts_with(bcd::format::INDEX_FILE_TMP_PREFIX)
            || name.starts_with(bcd::format::VIEW_FILE_TMP_PREFIX);
        if !ours {
            return Err(RemoteError::Local(bcd::Error::DirectoryNotEmpty {
                path: dir.to_owned(),
            }));
        }
    }
    Ok(())
}

async fn pull_async(
    ctx: &Context<'_>,
    dir: &Path,
    local: Option<&bcd::Manifest>,
) -> Result<(Vec<u8>, u64, TransferSummary)> {
    let remote = ctx.remote;
    let Some(theirs) = remote.manifest().await? else {
        return Err(RemoteError::NotADataset {
            uri: remote.uri().to_string(),
        });
    };
    let objects = remote.list().await?;
    let shards = theirs.manifest.shards;
    for required in required_shard_files(shards) {
        if !objects.contains_key(&required) {
            return Err(RemoteError::Corrupt {
                uri: remote.object_uri(&required),
                reason: format!("missing, though the remote manifest counts {shards} shards"),
            });
        }
    }
    let local_shards = local.map_or(0, |l| l.shards);
    if let Some(local) = local {
        let diverged = |reason: String| RemoteError::Diverged {
            uri: dir.display().to_string(),
            reason,
        };
        let mine = (local.keyed, local.compression, local.max_shard_size);
        let m = &theirs.manifest;
        if mine != (m.keyed, m.compression, m.max_shard_size) {
            return Err(diverged(format!(
                "its settings differ from those of {}; pull into a new directory",
                remote.uri()
            )));
        }
        if local.shards > shards {
            return Err(diverged(format!(
                "it has {} shards, {} only {}: push it instead, or pull into a new directory",
                local.shards,
                remote.uri(),
                shards
            )));
        }
    }
    let names: Vec<&String> = objects.keys().collect();
    let wanted = committed_files(&names, shards);
    let mut summary = TransferSummary {
        shards,
        ..TransferSummary::default()
    };
    let local_names = local_names(dir)?;
    for name in &local_names {
        let kind = FileKind::of(name);
        if !(kind.immutable() && kind.committed(shards)) || wanted.contains(name) {
            continue;
        }
        match kind.committed(local_shards) {
            // Committed here, absent from the remote's state: not an earlier
            // state of the remote dataset.
            true => {
                return Err(RemoteError::Diverged {
                    uri: dir.display().to_string(),
                    reason: format!(
                        "{name} is committed here but {} has no such file: they are different datasets; pull into a new directory",
                        remote.uri()
                    ),
                })
            }
            // A leftover of an interrupted local write that the remote's state
            // would commit by its name: removed (this pull holds the writer lock).
            false => {
                let path = dir.join(name);
                fs::remove_file(&path).map_err(|e| RemoteError::io(&path, "remove", e))?;
            }
        }
    }
    // Which local files are the same files as the remote's: equal content
    // checksums, never equal sizes.
    let stamps = compare(ctx, dir, &wanted, &objects).await?;
    let mut to_fetch: Vec<&RemoteObject> = Vec::new();
    for name in &wanted {
        let object = &objects[name];
        let kind = FileKind::of(name);
        let path = dir.join(name);
        let existing = fs::metadata(&path).ok().filter(fs::Metadata::is_file);
        let same = stamps.get(name).is_some_and(|(_, same)| *same);
        if kind.immutable() && kind.committed(local_shards) {
            // Committed locally: never rewritten.
            match existing {
                Some(_) if same => {}
                Some(meta) => {
                    return Err(RemoteError::Diverged {
                        uri: dir.display().to_string(),
                        reason: format!(
                            "{name} differs here and in {} ({} and {} bytes, {}): they are different datasets; pull into a new directory",
                            remote.uri(),
                            meta.len(),
                            object.size,
                            match meta.len() == object.size {
                                true => "other content",
                                false => "other sizes",
                            },
                        ),
                    })
                }
                None if matches!(kind, FileKind::Shard(_)) => {
                    return Err(bcd::Error::MissingShard {
                        path,
                        shards: local_shards,
                    }
                    .into())
                }
                None => {
                    to_fetch.push(object);
                    continue;
                }
            }
        }
        // The persisted index is replaced through a temporary name, so only
        // immutable files are taken as they are (a previous pull's downloads),
        // and views, which are read only once checked against the dataset.
        if same && (kind.immutable() || kind == FileKind::View) {
            summary.skipped += 1;
            summary.skipped_bytes += object.size;
            continue;
        }
        to_fetch.push(object);
    }
    let stamps = &stamps;
    let fetched = ctx
        .run_all(to_fetch.iter().map(|object| async move {
            let stamp = match stamps.get(&object.name) {
                Some((stamp, _)) => Expected::Stamp(*stamp),
                None => Expected::FromRead {
                    times: true,
                    e_tag: None,
                },
            };
            let kind = FileKind::of(&object.name);
            let target = dir.join(&object.name);
            if kind.immutable() {
                download(ctx, &object.name, object.size, stamp, &target).await?;
            } else {
                // A temporary of each file's own: views are fetched at once.
                let tmp = match kind {
                    FileKind::View => dir.join(format!(
                        "{}{}.tmp-pull-{}",
                        bcd::format::VIEW_FILE_TMP_PREFIX,
                        &object.name[bcd::format::VIEW_FILE_PREFIX.len()..],
                        std::process::id()
                    )),
                    _ => dir.join(format!(
                        "{}pull-{}",
                        bcd::format::INDEX_FILE_TMP_PREFIX,
                        std::process::id()
                    )),
                };
                let result = download(ctx, &object.name, object.size, stamp, &tmp).await;
                if let Err(e) = result {
                    let _ = fs::remove_file(&tmp);
                    return Err(e);
                }
                // Not used until the manifest is: an index covering more shards
                // than the committed count is ignored by readers.
                fs::rename(&tmp, &target).map_err(|e| RemoteError::io(&tmp, "rename", e))?;
            }
            Ok::<_, RemoteError>(object.size)
        }))
        .await?;
    summary.files = fetched.len() as u64;
    summary.bytes = fetched.iter().sum();
    check_new_shards(dir, &theirs.manifest, local_shards)?;
    Ok((theirs.bytes, shards, summary))
}

/// Checks each new shard's `.idx` against its `.bin` as opening the dataset
/// would ([`bcd::format::read_idx`]), before the commit makes them visible.
fn check_new_shards(dir: &Path, manifest: &bcd::Manifest, from: u64) -> Result<()> {
    for shard in from..manifest.shards {
        let (data, index) = bcd::format::shard_paths(dir, shard);
        let sizes = fs::read(&index).map_err(|e| RemoteError::io(&index, "read", e))?;
        let data_len = fs::metadata(&data)
            .map_err(|e| RemoteError::io(&data, "stat", e))?
            .len();
        bcd::format::read_idx(&sizes, manifest.keyed, data_len, &data, &index, |_| {})?;
    }
    Ok(())
}

/// The names in `dir`.
fn local_names(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| RemoteError::io(dir, "list", e))? {
        let entry = entry.map_err(|e| RemoteError::io(dir, "list", e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// For each of `wanted` that `dir` has a regular file of at the object's size:
/// the object's stamp (a HEAD; [`Remote::content_stamp`]) and whether the file
/// is the same file ([`same_content`]: equal content checksums). Files of
/// another size differ without a request.
async fn compare(
    ctx: &Context<'_>,
    dir: &Path,
    wanted: &[String],
    objects: &BTreeMap<String, RemoteObject>,
) -> Result<BTreeMap<String, (Stamp, bool)>> {
    let remote = ctx.remote;
    let present = wanted.iter().filter_map(|name| {
        let object = &objects[name];
        fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.len() == object.size)
            .then_some(object)
    });
    futures::stream::iter(present)
        .map(|object| async move {
            let stamp = remote.content_stamp(&object.name).await?;
            let path = dir.join(&object.name);
            let (local, _) = tokio::task::spawn_blocking(move || file_checksum(&path))
                .await
                .expect("the checksum task does not panic")?;
            Ok::<_, RemoteError>((object.name.clone(), (stamp, same_content(stamp, local))))
        })
        .buffer_unordered(ctx.options.concurrency.max(1))
        .try_collect()
        .await
}
