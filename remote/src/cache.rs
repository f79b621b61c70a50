//! A local cache of a dataset in object storage, for training from it: the
//! dataset opens as a [`bcd::Dataset`] whose shards are fetched on first read and
//! then memory-mapped like local ones.
//!
//! The cache of one remote dataset is a directory `CACHE/<key>/` holding a mirror
//! of its manifest and `.idx` files, the fields and statistics files beside the
//! shards and the commit files (and its `.bcd-index`, or one the first reader
//! builds), kept current by [`RemoteCache::sync`], and `data/`, the shards' data
//! files, each fetched whole on first read:
//!
//! - several processes share it: a shard is fetched under an exclusive `flock` of
//!   `data/NNNNNN.bin.lock`, into a temporary name renamed when complete, so each
//!   shard is downloaded once however many DataLoader workers read it, and no
//!   reader sees a partial file;
//! - it is bounded: after each fetch, the least recently used data files (by
//!   modification time, which every read of a cached file refreshes) are removed
//!   until the cache holds at most `limit` bytes of them. A process that has an
//!   evicted shard mapped keeps reading it (the pages stay until it lets go); a
//!   later read in another process fetches it again;
//! - a sync makes one request when the mirror is current: the marker
//!   `.bcd-remote-synced.json`, written last, names the manifest object (ETag,
//!   version, time written) the mirror was completed for. Otherwise the prefix is
//!   listed. An object whose version (size, ETag, time written, recorded in
//!   `.bcd-remote-versions.json` with the checksum of its copy) is the one
//!   recorded is the write its copy was made from. One written again (or never
//!   recorded) is the same file as its copy only by the one rule of push and
//!   pull ([`crate::same_content`]: its stored checksum equals the copy's, kept
//!   in `data/NNNNNN.bin.xxh3` for data files): a mirrored file is fetched
//!   again, a cached data file of other content is removed with the mirror's
//!   persisted index, so a prefix pushed again with other data (of the same
//!   sizes, even) never reads as the old, and one pushed again with the same
//!   files keeps its cached shards.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use bcd::format::{INDEX_FILE_NAME, MANIFEST_NAME};

use crate::cache_records::{
    checksum_path, read_checksum, read_stamps, read_versions, record_of, remove_if_present,
    replace_file, version_of, write_stamps, write_versions, Recorded,
};
use crate::download::{download, Expected};
use crate::error::{RemoteError, Result};
use crate::names::FileKind;
use crate::objects::{same_content, RemoteManifest, RemoteObject};
use crate::store::{block_on, Remote};
use crate::transfer::{Context, TransferOptions};
use crate::uri::RemoteUri;

/// Where a cache lives and how large it may grow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    /// The cache directory (shared by every dataset cached there).
    pub dir: PathBuf,
    /// At most this many bytes of shard data files are kept (`None`: no bound).
    /// A shard larger than the limit is still fetched, and evicted by the next.
    pub limit: Option<u64>,
}

impl CacheOptions {
    /// The default cache directory: `$BCD_CACHE_DIR`, else `$XDG_CACHE_HOME/bcd`,
    /// else `~/.cache/bcd`.
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("BCD_CACHE_DIR") {
            return PathBuf::from(dir);
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            return PathBuf::from(dir).join("bcd");
        }
        match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".cache").join("bcd"),
            None => std::env::temp_dir().join("bcd-cache"),
        }
    }
}

/// Sizes and times of the remote data files, as the mirror records them.
#[derive(Debug, Default)]
struct Shards {
    /// Shard -> (length, modification time in ns or 0).
    stamps: BTreeMap<u64, (u64, u64)>,
}

/// The cache of one remote dataset; the source of its data files.
#[derive(Debug)]
pub struct RemoteCache {
    remote: Remote,
    /// The mirror: manifest, `.idx` files, persisted index.
    mirror: PathBuf,
    /// The fetched data files.
    data: PathBuf,
    limit: Option<u64>,
    shards: Mutex<Shards>,
}

/// The record of the data files' stamps in the mirror.
const STAMPS_NAME: &str = ".bcd-remote-stamps.json";

/// The record of the versions (size, ETag, time written) of the objects mirrored.
const VERSIONS_NAME: &str = ".bcd-remote-versions.json";

/// The record of the manifest object the mirror was last completed for.
const SYNCED_NAME: &str = ".bcd-remote-synced.json";

/// What [`SYNCED_NAME`] holds for `manifest`.
fn synced_marker(manifest: &RemoteManifest) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "e_tag": manifest.version.e_tag,
        "version": manifest.version.version,
        "last_modified": manifest.last_modified.to_rfc3339(),
    }))
    .expect("serializable")
}

impl RemoteCache {
    /// The cache of `uri` under `options.dir` (created when missing). Nothing is
    /// fetched until [`RemoteCache::sync`].
    pub fn new(uri: RemoteUri, options: &CacheOptions) -> Result<RemoteCache> {
        RemoteCache::with_remote(Remote::new(uri)?, options)
    }

    /// [`RemoteCache::new`] on a given client.
    pub fn with_remote(remote: Remote, options: &CacheOptions) -> Result<RemoteCache> {
        let uri = remote.uri();
        let key = format!(
            "{:016x}-{}",
            xxhash_rust::xxh3::xxh3_64(uri.to_string().as_bytes()),
            sanitize(uri.prefix.rsplit('/').next().unwrap_or_default())
        );
        let mirror = options.dir.join(key);
        let data = mirror.join("data");
        fs::create_dir_all(&data).map_err(|e| RemoteError::io(&data, "create directory", e))?;
        Ok(RemoteCache {
            remote,
            mirror,
            data,
            limit: options.limit,
            shards: Mutex::new(Shards::default()),
        })
    }

    /// The mirror directory (what [`bcd::Dataset::open_with_data_files`] opens).
    pub fn mirror(&self) -> &Path {
        &self.mirror
    }

    /// The remote.
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// Brings the mirror up to the remote's current manifest: fetches the `.idx`
    /// files of new shards (and the persisted index when the mirror has none),
    /// records the data files' sizes, then replaces the mirror's manifest. Under
    /// an exclusive lock, so processes syncing at once do it once.
    pub(crate) fn sync(&self) -> Result<()> {
        let _lock = lock(&self.mirror.join(".bcd-sync.lock"))?;
        block_on(self.sync_async())
    }

    async fn sync_async(&self) -> Result<()> {
        let remote = &self.remote;
        let Some(manifest) = remote.manifest().await? else {
            return Err(RemoteError::NotADataset {
                uri: remote.uri().to_string(),
            });
        };
        let shards = manifest.manifest.shards;
        let synced = synced_marker(&manifest);
        let mut recorded = read_stamps(&self.mirror.join(STAMPS_NAME));
        if self.is_current(&manifest, &synced, &recorded) {
            // The mirror was completed for this very manifest (the marker is
            // written last): nothing to list or fetch.
            self.shards
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .stamps = recorded;
            return Ok(());
        }
        let objects = remote.list().await?;
        let ctx = Context::new(remote, TransferOptions::default())?;
        let with_index = objects.contains_key(INDEX_FILE_NAME);
        // The versions of the objects mirrored, as last synced, with the checksums
        // of the copies here. An object whose version is the one recorded is the
        // write the copy was made from. One whose version changed (or was never
        // recorded) was written again, maybe with other data (the prefix removed
        // and another dataset pushed there): its copy is kept only if it is the
        // same file by the one rule (`same_content`), never for its size.
        let versions_path = self.mirror.join(VERSIONS_NAME);
        let mut versions = read_versions(&versions_path);
        let unchanged = |versions: &BTreeMap<String, Recorded>, object: &RemoteObject| {
            versions
                .get(&object.name)
                .is_some_and(|r| r.0 == version_of(object))
        };
        let mut shard_replaced = false;
        for id in 0..shards {
            let (data, index) = shard_names(id);
            let missing = |name: &str| {
                RemoteError::Local(bcd::Error::MissingShard {
                    path: PathBuf::from(remote.object_uri(name)),
                    shards,
                })
            };
            let data_object = objects.get(&data).ok_or_else(|| missing(&data))?;
            let index_object = objects.get(&index).ok_or_else(|| missing(&index))?;
            if !unchanged(&versions, index_object) || !self.mirror.join(&index).is_file() {
                let before = versions.get(&index).and_then(|r| r.1);
                let after = self.mirror_object(&ctx, index_object).await?;
                shard_replaced |= before.is_none() && versions.contains_key(&index)
                    || before.is_some() && before != after;
                versions.insert(index.clone(), record_of(index_object, after));
            }
            if !unchanged(&versions, data_object) {
                let known = versions.contains_key(&data);
                let _lock = lock(&self.data.join(format!("{data}.lock")))?;
                let cached = self.data.join(&data);
                let copy = read_checksum(&checksum_path(&cached))
                    .filter(|_| cached.is_file())
                    .or(versions.get(&data).and_then(|r| r.1));
                let stamp = match copy.is_some() || known {
                    true => Some(remote.stamp(&data).await?),
                    false => None,
                };
                let same = match (stamp, copy) {
                    (Some(stamp), Some(copy)) => same_content(stamp, copy),
                    _ => false,
                };
                if !same {
                    shard_replaced |= known;
                    recorded.remove(&id);
                    remove_if_present(&cached)?;
                    remove_if_present(&checksum_path(&cached))?;
                }
                let xxh3 = stamp.and_then(|s| s.xxh3);
                versions.insert(data.clone(), record_of(data_object, xxh3));
            }
            match recorded.get(&id) {
                Some(&(len, _)) if len == data_object.size => {}
                _ => {
                    // The time the persisted index records, when there is one to use.
                    let mtime = match with_index {
                        true => remote.stamp(&data).await?.mtime_ns.unwrap_or(0),
                        false => 0,
                    };
                    recorded.insert(id, (data_object.size, mtime));
                }
            }
        }
        write_stamps(&self.mirror.join(STAMPS_NAME), &recorded)?;
        // The files beside the shards (fields, statistics) and the commit files
        // of the state (FORMAT.md section 9): small, fetched whole, so that the
        // mirror reads fields as a local dataset does.
        for (name, object) in &objects {
            let kind = FileKind::of(name);
            let wanted = matches!(
                kind,
                FileKind::Sidecar(_) | FileKind::ContentHashes(_) | FileKind::Commit(_)
            );
            if !wanted || !kind.committed(shards) {
                continue;
            }
            if !unchanged(&versions, object) || !self.mirror.join(name).is_file() {
                let xxh3 = self.mirror_object(&ctx, object).await?;
                versions.insert(name.clone(), record_of(object, xxh3));
            }
        }
        // The persisted index: a stale one (of replaced shards) goes, whether the
        // remote's or one a reader here built; the remote's is fetched when the
        // mirror has none.
        let index_path = self.mirror.join(INDEX_FILE_NAME);
        let remote_index = objects.get(INDEX_FILE_NAME);
        if shard_replaced || remote_index.is_some_and(|o| !unchanged(&versions, o)) {
            remove_if_present(&index_path)?;
        }
        if let Some(object) = remote_index {
            if !index_path.exists() {
                let xxh3 = self.mirror_object(&ctx, object).await?;
                versions.insert(INDEX_FILE_NAME.to_owned(), record_of(object, xxh3));
            }
        }
        write_versions(&versions_path, &versions)?;
        self.shards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stamps = recorded;
        // Last: the mirror's manifest names only shards whose files are here.
        replace_file(
            &self.mirror.join(MANIFEST_NAME),
            &self.mirror.join(".manifest.json.tmp-sync"),
            &manifest.bytes,
        )?;
        replace_file(
            &self.mirror.join(SYNCED_NAME),
            &self.mirror.join(".bcd-remote-synced.tmp-sync"),
            &synced,
        )
    }

    /// Downloads `object` into the mirror under its name (through a temporary
    /// name, checked against its size and stored checksum); returns the checksum
    /// of its bytes.
    async fn mirror_object(&self, ctx: &Context<'_>, object: &RemoteObject) -> Result<Option<u64>> {
        let name = &object.name;
        let tmp = self
            .mirror
            .join(format!(".{name}.tmp-sync-{}", std::process::id()));
        let expected = Expected::FromRead { times: true };
        let xxh3 = download(ctx, name, object.size, expected, &tmp).await?;
        let local = self.mirror.join(name);
        fs::rename(&tmp, &local).map_err(|e| RemoteError::io(&tmp, "rename", e))?;
        Ok(xxh3)
    }

    /// Whether the mirror is complete for `manifest`: its marker names this very
    /// manifest object (ETag, version, time written), its manifest has these
    /// bytes, and every shard's sizes are recorded and its `.idx` file is here.
    fn is_current(
        &self,
        manifest: &RemoteManifest,
        synced: &[u8],
        recorded: &BTreeMap<u64, (u64, u64)>,
    ) -> bool {
        let same = |name: &str, expected: &[u8]| {
            fs::read(self.mirror.join(name)).is_ok_and(|bytes| bytes == expected)
        };
        same(SYNCED_NAME, synced)
            && same(MANIFEST_NAME, &manifest.bytes)
            && (0..manifest.manifest.shards).all(|id| {
                recorded.contains_key(&id) && self.mirror.join(shard_names(id).1).is_file()
            })
    }

    /// The cached data file of shard `id`, fetched first when missing.
    fn fetch(&self, id: u64) -> io::Result<File> {
        let (name, _) = shard_names(id);
        let path = self.data.join(&name);
        let expected = self.stamp(id)?.0;
        for _ in 0..3 {
            if let Some(file) = open_cached(&path, expected)? {
                return Ok(file);
            }
            let _lock = lock(&self.data.join(format!("{name}.lock"))).map_err(io::Error::other)?;
            if let Some(file) = open_cached(&path, expected)? {
                return Ok(file);
            }
            let tmp = self
                .data
                .join(format!(".{name}.tmp-{}", std::process::id()));
            let fetched = block_on(async {
                let ctx = Context::new(&self.remote, TransferOptions::default())?;
                // Checked against its size and stored checksum; the time is the
                // cache's own (least recently used), not the recorded one.
                let stamp = Expected::FromRead { times: false };
                download(&ctx, &name, expected, stamp, &tmp).await
            });
            let xxh3 = match fetched {
                Ok(xxh3) => xxh3,
                Err(e) => {
                    let _ = fs::remove_file(&tmp);
                    return Err(io::Error::other(e));
                }
            };
            // What a later sync compares the object with (`same_content`) when it
            // has been written again.
            let checksum = checksum_path(&path);
            match xxh3 {
                Some(xxh3) => fs::write(&checksum, format!("{xxh3:016x}"))?,
                None => remove_if_present(&checksum).map_err(io::Error::other)?,
            }
            fs::rename(&tmp, &path)?;
            self.evict(&name);
        }
        Err(io::Error::other(format!(
            "{}: evicted again as soon as it was fetched; is the cache limit far too small for the readers sharing it?",
            path.display()
        )))
    }

    fn stamp(&self, id: u64) -> io::Result<(u64, u64)> {
        let shards = self.shards.lock().unwrap_or_else(PoisonError::into_inner);
        shards.stamps.get(&id).copied().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("shard {id} is not in the synced manifest"),
            )
        })
    }

    /// Removes the least recently used data files, other than `keep`, until the
    /// cache holds at most its limit.
    fn evict(&self, keep: &str) {
        let Some(limit) = self.limit else { return };
        let Ok(entries) = fs::read_dir(&self.data) else {
            return;
        };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let name = entry.file_name();
                let name = name.to_str()?;
                if !matches!(FileKind::of(name), FileKind::Shard(_)) {
                    return None;
                }
                let meta = entry.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), entry.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= limit {
                break;
            }
            if path.file_name().is_some_and(|n| n == keep) {
                continue;
            }
            // Another process may have removed it already.
            let _ = fs::remove_file(&path);
            total -= len;
        }
    }

    /// Bytes of data files now in the cache.
    pub fn cached_bytes(&self) -> u64 {
        fs::read_dir(&self.data)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| {
                        e.file_name()
                            .to_str()
                            .is_some_and(|n| matches!(FileKind::of(n), FileKind::Shard(_)))
                    })
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }
}

impl bcd::DataFiles for RemoteCache {
    fn stat(&self, id: u64) -> io::Result<(u64, u64)> {
        self.stamp(id)
    }

    fn open(&self, id: u64) -> io::Result<File> {
        self.fetch(id)
    }

    /// A range of a shard not cached yet, read from the remote (fields validate
    /// a shard's fingerprint, which reads 8 KiB of it: fetching it whole for
    /// that would download the dataset to read its labels).
    fn read_range(&self, id: u64, range: std::ops::Range<u64>) -> Option<io::Result<Vec<u8>>> {
        let (name, _) = shard_names(id);
        let expected = match self.stamp(id) {
            Ok((len, _)) => len,
            Err(e) => return Some(Err(e)),
        };
        if fs::metadata(self.data.join(&name)).is_ok_and(|m| m.len() == expected) {
            return None;
        }
        let read = block_on(self.remote.read_range(&name, range.clone()));
        Some(read.map(|bytes| bytes.to_vec()).map_err(io::Error::other))
    }
}

/// Opens the dataset of `cache`: syncs the mirror, then opens it with shards
/// fetched on first read. Returns the cache too, for [`refresh`].
pub fn open_cache(cache: Arc<RemoteCache>) -> Result<(bcd::Dataset, Arc<RemoteCache>)> {
    cache.sync()?;
    // The first reader writes the persisted index into the mirror, so later opens
    // (every DataLoader worker) read no keys from the shards.
    let options = bcd::OpenOptions {
        index_file_min_records: Some(0),
        ..bcd::OpenOptions::default()
    };
    let dataset = bcd::Dataset::open_with_data_files(cache.mirror(), options, cache.clone())?;
    Ok((dataset, cache))
}

/// Picks up a newer remote manifest: syncs the mirror, then refreshes `dataset`.
pub fn refresh(dataset: &mut bcd::Dataset, cache: &RemoteCache) -> Result<()> {
    cache.sync()?;
    dataset.refresh()?;
    Ok(())
}

/// Opens `path` if it is a cached file of `len` bytes, refreshing its time (its
/// place in the eviction order).
fn open_cached(path: &Path, len: u64) -> io::Result<Option<File>> {
    let opened = match OpenOptions::new().read(true).write(true).open(path) {
        // A cache another user filled: read it, without refreshing its time.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(path),
        other => other,
    };
    match opened {
        Ok(file) if file.metadata()?.len() == len => {
            // Best effort: an old time only makes it an earlier candidate.
            let _ = file.set_modified(SystemTime::now());
            Ok(Some(file))
        }
        // A file of another length is not one this cache wrote: fetch it again.
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// An exclusive `flock`, unlocked before its descriptor is closed: a process
/// forked or spawned meanwhile by another thread holds a copy of the descriptor
/// (until its exec, or for its life), and with it the lock, which every other
/// reader of the cache would then wait for.
struct Lock(File);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// An exclusive `flock` on `path` (created when missing), released when dropped.
fn lock(path: &Path) -> Result<Lock> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| RemoteError::io(path, "open lock file", e))?;
    file.lock().map_err(|e| RemoteError::io(path, "lock", e))?;
    Ok(Lock(file))
}

fn shard_names(id: u64) -> (String, String) {
    (format!("{id:06}.bin"), format!("{id:06}.idx"))
}

fn sanitize(text: &str) -> String {
    text.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                true => c,
                false => '_',
            },
        )
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of a lock's descriptor (a worker forked while a shard was being
    /// fetched) does not keep the lock from the next reader.
    #[test]
    fn a_released_lock_is_free_although_a_copy_of_its_descriptor_lives_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000000.bin.lock");
        let held = lock(&path).unwrap();
        let copy = held.0.try_clone().unwrap();
        drop(held);
        let other = File::open(&path).unwrap();
        other.try_lock().expect("the lock is free");
        drop(copy);
    }
}
