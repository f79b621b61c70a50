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
//!   reader sees a partial file (`cache_files.rs`);
//! - it is bounded: after each fetch, the least recently used data files (by
//!   modification time, which every read of a cached file refreshes) are removed
//!   until the cache holds at most `limit` bytes of them. A process that has an
//!   evicted shard mapped keeps reading it (the pages stay until it lets go); a
//!   later read in another process fetches it again;
//! - it fetches ahead (`cache_prefetch.rs`): [`RemoteCache::prefetch`] takes the
//!   order in which the readers will need the shards (a sampler's epoch, through
//!   [`bcd::Dataset::prefetch_shards`]) and fetches them in that order in the
//!   background, a bounded number at once; without one, the first read that has
//!   to wait for a shard starts fetching the others in shard order;
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
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bcd::format::{INDEX_FILE_NAME, MANIFEST_NAME};
use futures::FutureExt;

use crate::cache_files::{data_name, lock, ShardFiles};
pub use crate::cache_prefetch::PrefetchStatus;
use crate::cache_prefetch::Prefetcher;
use crate::cache_records::{
    checksum_path, read_checksum, read_stamps, read_versions, record_of, remove_if_present,
    replace_file, version_of, write_stamps, write_versions, DataStamp, Recorded,
};
use crate::download::{download, Downloaded, Expected};
use crate::error::{RemoteError, Result};
use crate::names::FileKind;
use crate::objects::{same_content, RemoteManifest, RemoteObject};
use crate::per_process::PerProcess;
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
    /// Shards fetched ahead of the readers at once, in the whole cache
    /// ([`RemoteCache::prefetch`]); 0: none, each shard is fetched by its first
    /// reader. Default: [`CacheOptions::DEFAULT_PREFETCH`].
    pub prefetch: usize,
}

impl CacheOptions {
    /// Shards in flight when fetching ahead, by default: as many as `bcd pull`
    /// moves at once in the benchmarks.
    pub const DEFAULT_PREFETCH: usize = 8;

    /// Options for a cache in `dir`, with no limit and the default prefetch.
    pub fn new(dir: impl Into<PathBuf>) -> CacheOptions {
        CacheOptions {
            dir: dir.into(),
            limit: None,
            prefetch: CacheOptions::DEFAULT_PREFETCH,
        }
    }

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

/// The cache of one remote dataset; the source of its data files. Usable in a
/// forked child too (DataLoader workers): the client, the runtime and the
/// prefetching are each process's own.
#[derive(Debug)]
pub struct RemoteCache {
    /// The fetched data files.
    files: Arc<ShardFiles>,
    /// The mirror: manifest, `.idx` files, persisted index.
    mirror: PathBuf,
    /// Shards fetched ahead at once (0: none).
    prefetch: usize,
    /// This process's prefetching.
    prefetcher: PerProcess<Arc<Prefetcher>>,
}

/// What syncing one shard found (see `RemoteCache::sync_shard`).
struct ShardSynced {
    id: u64,
    /// The record of its `.idx` when it was fetched.
    index: Option<Recorded>,
    /// The record of its data object when that was written again.
    data: Option<Recorded>,
    /// Its files are another write than the copies' (the shard was replaced).
    replaced: bool,
    stamp: DataStamp,
}

/// One transfer of a sync (see `RemoteCache::sync_async`).
enum Synced {
    /// A shard's files checked.
    Shard(ShardSynced),
    /// A file fetched into the mirror, with its record.
    File(String, Recorded),
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
        "commit": manifest.commit,
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
            files: Arc::new(ShardFiles::new(remote, data, options.limit)),
            mirror,
            prefetch: options.prefetch,
            prefetcher: PerProcess::new(),
        })
    }

    /// The mirror directory (what [`bcd::Dataset::open_with_data_files`] opens).
    pub fn mirror(&self) -> &Path {
        &self.mirror
    }

    /// The remote.
    pub fn remote(&self) -> &Remote {
        &self.files.remote
    }

    /// Fetches `shards` ahead of the readers, in this order, in the background,
    /// at most [`CacheOptions::prefetch`] at once in the whole cache (see the
    /// module documentation of the rules); replaces the order this process was
    /// working on. A reader that needs a shard meanwhile gets it at once: it
    /// waits for its download if one is in flight, and fetches it itself
    /// otherwise. With `wait`, returns once every one of them is in the cache
    /// (an error if they cannot all fit within the limit), or with the error
    /// that stopped them. Returns how many were not cached; 0 (and nothing
    /// done) with a prefetch of 0.
    pub fn prefetch(&self, shards: &[u64], wait: bool) -> Result<usize> {
        match self.prefetcher(true) {
            Some(prefetcher) => prefetcher.prefetch(shards, wait),
            None => Ok(0),
        }
    }

    /// What this process's prefetching is doing.
    pub fn prefetch_status(&self) -> PrefetchStatus {
        self.prefetcher(false)
            .map(|p| p.status())
            .unwrap_or_default()
    }

    /// This process's prefetcher (made when `make`), or none with a prefetch of
    /// 0. One inherited from the parent process is left alone: its task does not
    /// exist here, and its state may be mid-change.
    fn prefetcher(&self, make: bool) -> Option<Arc<Prefetcher>> {
        if self.prefetch == 0 {
            return None;
        }
        match make {
            true => Some(
                self.prefetcher
                    .get_or_make(|| Arc::new(Prefetcher::new(self.files.clone(), self.prefetch))),
            ),
            false => self.prefetcher.get(),
        }
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
        let remote = self.remote();
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
            recorded.retain(|&id, _| id < shards);
            self.files.set_stamps(recorded);
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
        // The files beside the shards (fields, statistics), the commit files
        // of the state (FORMAT.md section 9) and the views: small, fetched
        // whole, so that the mirror reads fields and views as a local dataset
        // does. A view the remote no longer has goes.
        for name in mirrored_views(&self.mirror)? {
            if !objects.contains_key(&name) {
                remove_if_present(&self.mirror.join(&name))?;
                versions.remove(&name);
            }
        }
        let wanted = objects.iter().filter(|(name, object)| {
            let kind = FileKind::of(name);
            matches!(
                kind,
                FileKind::Sidecar(_)
                    | FileKind::ContentHashes(_)
                    | FileKind::Commit(_)
                    | FileKind::View
            ) && kind.committed(shards)
                && (!unchanged(&versions, object) || !self.mirror.join(name).is_file())
        });
        // The persisted index: the remote's is fetched when the mirror's is not
        // the copy of it (a stale one, of replaced shards, then goes with it:
        // below, once the shards are checked).
        let index_path = self.mirror.join(INDEX_FILE_NAME);
        let remote_index = objects.get(INDEX_FILE_NAME);
        let index_fetched =
            remote_index.filter(|object| !unchanged(&versions, object) || !index_path.exists());
        // Each shard's files checked (and the new ones fetched), the files
        // beside them and the persisted index, all concurrently and within one
        // bound, as a pull does: a cold sync of a large dataset is thousands of
        // requests, and on a store far away every round of them waited for
        // apart is a round trip.
        let transfers = {
            let (objects, versions, recorded, context) = (&objects, &versions, &recorded, &ctx);
            let shard_syncs = (0..shards).map(move |id| {
                async move {
                    let synced = self
                        .sync_shard(context, id, shards, objects, versions, recorded, with_index)
                        .await?;
                    Ok(Synced::Shard(synced))
                }
                .boxed_local()
            });
            let files = wanted.chain(index_fetched.map(|object| (&object.name, object)));
            let mirrored = files.map(move |(name, object)| {
                async move {
                    let xxh3 = self.mirror_object(context, object).await?.xxh3;
                    Ok(Synced::File(name.clone(), record_of(object, xxh3)))
                }
                .boxed_local()
            });
            ctx.run_all(shard_syncs.chain(mirrored)).await?
        };
        let mut shard_replaced = false;
        for transfer in transfers {
            match transfer {
                Synced::Shard(shard) => {
                    let (data, index) = shard_names(shard.id);
                    shard_replaced |= shard.replaced;
                    if let Some(record) = shard.index {
                        versions.insert(index, record);
                    }
                    if let Some(record) = shard.data {
                        versions.insert(data, record);
                    }
                    recorded.insert(shard.id, shard.stamp);
                }
                Synced::File(name, record) => {
                    versions.insert(name, record);
                }
            }
        }
        write_stamps(&self.mirror.join(STAMPS_NAME), &recorded)?;
        // An index kept from before goes when a shard was replaced (it was
        // built from the old one), and the remote's is fetched in its place.
        if shard_replaced && index_fetched.is_none() {
            remove_if_present(&index_path)?;
            if let Some(object) = remote_index {
                let xxh3 = self.mirror_object(&ctx, object).await?.xxh3;
                versions.insert(INDEX_FILE_NAME.to_owned(), record_of(object, xxh3));
            }
        }
        write_versions(&versions_path, &versions)?;
        recorded.retain(|&id, _| id < shards);
        self.files.set_stamps(recorded);
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

    /// Brings shard `id`'s files in the mirror up to the listed `objects`: its
    /// `.idx` fetched when it is new or written again, its cached data file
    /// removed when the object was written again with other content, its stamp
    /// recorded. `versions` and `recorded` are the records before the sync.
    #[allow(clippy::too_many_arguments)]
    async fn sync_shard(
        &self,
        ctx: &Context<'_>,
        id: u64,
        shards: u64,
        objects: &BTreeMap<String, RemoteObject>,
        versions: &BTreeMap<String, Recorded>,
        recorded: &BTreeMap<u64, DataStamp>,
        with_index: bool,
    ) -> Result<ShardSynced> {
        let remote = self.remote();
        let (data, index) = shard_names(id);
        let missing = |name: &str| {
            RemoteError::Local(bcd::Error::MissingShard {
                path: PathBuf::from(remote.object_uri(name)),
                shards,
            })
        };
        let data_object = objects.get(&data).ok_or_else(|| missing(&data))?;
        let index_object = objects.get(&index).ok_or_else(|| missing(&index))?;
        let unchanged = |object: &RemoteObject| {
            versions
                .get(&object.name)
                .is_some_and(|r| r.0 == version_of(object))
        };
        // The `.idx` fetched and the data object checked at once: on a cold
        // sync each is one request, and neither waits for the other.
        let fetch_index = async {
            if unchanged(index_object) && self.mirror.join(&index).is_file() {
                return Ok((None, false, None));
            }
            let before = versions.get(&index).and_then(|r| r.1);
            let Downloaded { xxh3: after, claim } = self.mirror_object(ctx, index_object).await?;
            let replaced = before.is_none() && versions.contains_key(&index)
                || before.is_some() && before != after;
            Ok::<_, RemoteError>((Some(record_of(index_object, after)), replaced, claim))
        };
        let check_data = async {
            let mut kept = recorded.get(&id).cloned();
            let mut replaced = false;
            let mut record = None;
            // The object's stored attributes, when read (one request a shard).
            let mut stamp = None;
            if !unchanged(data_object) {
                let known = versions.contains_key(&data);
                let _lock = lock(&self.files.lock_path(id))?;
                let cached = self.files.path(id);
                let copy = read_checksum(&checksum_path(&cached))
                    .filter(|_| cached.is_file())
                    .or(versions.get(&data).and_then(|r| r.1));
                if copy.is_some() || known {
                    stamp = Some(remote.stamp(&data).await?);
                }
                let same = match (stamp, copy) {
                    (Some(stamp), Some(copy)) => same_content(stamp, copy),
                    _ => false,
                };
                if !same {
                    replaced = known;
                    kept = None;
                    remove_if_present(&cached)?;
                    remove_if_present(&checksum_path(&cached))?;
                }
                record = Some(record_of(data_object, stamp.and_then(|s| s.xxh3)));
            }
            Ok::<_, RemoteError>((record, replaced, kept, stamp))
        };
        let ((index, index_replaced, claim), (data_record, data_replaced, kept, stamp)) =
            futures::try_join!(fetch_index, check_data)?;
        let stamp = match kept {
            Some(stamp) if stamp.len == data_object.size => DataStamp {
                e_tag: data_object.e_tag.clone(),
                ..stamp
            },
            _ => DataStamp {
                len: data_object.size,
                // The time the persisted index records, when there is one to
                // use: from the `.idx` when it speaks for this very write of
                // the data object, else from the data object's own metadata.
                mtime_ns: match (with_index, stamp) {
                    (false, _) => 0,
                    (true, Some(stamp)) => stamp.mtime_ns.unwrap_or(0),
                    (true, None) => match claim.and_then(|c| c.mtime_of(data_object)) {
                        Some(mtime_ns) => mtime_ns,
                        None => remote.stamp(&data).await?.mtime_ns.unwrap_or(0),
                    },
                },
                e_tag: data_object.e_tag.clone(),
            },
        };
        Ok(ShardSynced {
            id,
            index,
            data: data_record,
            replaced: index_replaced || data_replaced,
            stamp,
        })
    }

    /// Downloads `object` into the mirror under its name (through a temporary
    /// name, checked against its size and stored checksum).
    async fn mirror_object(&self, ctx: &Context<'_>, object: &RemoteObject) -> Result<Downloaded> {
        let name = &object.name;
        let tmp = self
            .mirror
            .join(format!(".{name}.tmp-sync-{}", std::process::id()));
        let expected = Expected::FromRead {
            times: true,
            e_tag: None,
        };
        let fetched = download(ctx, name, object.size, expected, &tmp).await?;
        let local = self.mirror.join(name);
        fs::rename(&tmp, &local).map_err(|e| RemoteError::io(&tmp, "rename", e))?;
        Ok(fetched)
    }

    /// Whether the mirror is complete for `manifest`: its marker names this very
    /// manifest object (ETag, version, time written), its manifest has these
    /// bytes, and every shard's sizes are recorded and its `.idx` file is here.
    fn is_current(
        &self,
        manifest: &RemoteManifest,
        synced: &[u8],
        recorded: &BTreeMap<u64, DataStamp>,
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

    /// Bytes of data files now in the cache.
    pub fn cached_bytes(&self) -> u64 {
        self.files.cached_bytes()
    }
}

impl Drop for RemoteCache {
    fn drop(&mut self) {
        // Nothing more is fetched ahead for a cache no one reads.
        if let Some(prefetcher) = self.prefetcher(false) {
            prefetcher.stop();
        }
    }
}

impl bcd::DataFiles for RemoteCache {
    fn stat(&self, id: u64) -> io::Result<(u64, u64)> {
        let stamp = self.files.stamp(id)?;
        Ok((stamp.len, stamp.mtime_ns))
    }

    /// The shard's cached file; a reader waiting for it goes first: it waits for
    /// this process's download of it if one is in flight, else fetches it at
    /// once (the first such wait starts fetching the other shards ahead).
    fn open(&self, id: u64) -> io::Result<File> {
        let prefetcher = self.prefetcher(false);
        if let Some(prefetcher) = &prefetcher {
            prefetcher.wait_for(id);
        }
        if self.prefetch > 0 && !self.files.is_cached(id) {
            if let Some(prefetcher) = self.prefetcher(true) {
                prefetcher.start_default(id);
            }
        }
        let file = self.files.fetch(id)?;
        if let Some(prefetcher) = prefetcher {
            prefetcher.read(id);
        }
        Ok(file)
    }

    /// A range of a shard not cached yet, read from the remote (fields validate
    /// a shard's fingerprint, which reads 8 KiB of it: fetching it whole for
    /// that would download the dataset to read its labels).
    fn read_range(&self, id: u64, range: std::ops::Range<u64>) -> Option<io::Result<Vec<u8>>> {
        let expected = match self.files.stamp(id) {
            Ok(stamp) => stamp.len,
            Err(e) => return Some(Err(e)),
        };
        if fs::metadata(self.files.path(id)).is_ok_and(|m| m.len() == expected) {
            return None;
        }
        let read = block_on(self.remote().read_range(&data_name(id), range.clone()));
        Some(read.map(|bytes| bytes.to_vec()).map_err(io::Error::other))
    }

    fn prefetch(&self, shards: &[u64], wait: bool) -> io::Result<usize> {
        RemoteCache::prefetch(self, shards, wait).map_err(io::Error::other)
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

/// The names of the view files (`view.NAME`) in the mirror.
fn mirrored_views(mirror: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries = std::fs::read_dir(mirror).map_err(|e| RemoteError::io(mirror, "list", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| RemoteError::io(mirror, "list", e))?;
        if let Some(name) = entry.file_name().to_str() {
            if bcd::format::parse_view_file_name(name).is_some() {
                names.push(name.to_owned());
            }
        }
    }
    Ok(names)
}
