//! The data files of a cached remote dataset, `CACHE/<key>/data/`: each shard's
//! `NNNNNN.bin`, fetched whole, and the rules that keep the directory sound
//! while processes share it, fetch into it and are killed.
//!
//! - A shard is written only under the exclusive lock of `NNNNNN.bin.lock` (a
//!   [`FileLock`]: a process forked meanwhile, a DataLoader worker, does not
//!   keep it), into `.NNNNNN.bin.tmp`, fsynced, then renamed into place: no
//!   reader sees a partial file, and a temporary file found by the next holder
//!   of the lock is what a killed process left (the download replaces it).
//! - Every download of a shard is conditional on the ETag the sync recorded
//!   for it: an object written again since (the dataset replaced remotely) is
//!   refused ([`RemoteError::Changed`]), never cached under the mirror of the
//!   old one.
//! - Past the limit, the least recently used files are evicted. Every open by
//!   a reader gives a file the current time; a file fetched ahead of the
//!   readers has the time [`unread_time`] until one opens it, and is evicted after
//!   every file that was read.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bcd::fork::{FileLock, LockKind};

use crate::cache_records::{checksum_path, remove_if_present, DataStamp};
use crate::download::{download, Expected};
use crate::error::{RemoteError, Result};
use crate::names::FileKind;
use crate::store::{block_on, Remote};
use crate::transfer::{Context, TransferOptions};

/// The time of a data file fetched ahead of the readers until one opens it:
/// far older than any file a reader touched, so it is told apart from them.
pub(crate) fn unread_time() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1)
}

/// The data files of one cached remote dataset.
#[derive(Debug)]
pub(crate) struct ShardFiles {
    pub(crate) remote: Remote,
    /// `CACHE/<key>/data`.
    pub(crate) dir: PathBuf,
    /// At most this many bytes of data files are kept.
    pub(crate) limit: Option<u64>,
    /// The stamps of the synced manifest's shards.
    stamps: Mutex<BTreeMap<u64, DataStamp>>,
}

impl ShardFiles {
    pub(crate) fn new(remote: Remote, dir: PathBuf, limit: Option<u64>) -> ShardFiles {
        ShardFiles {
            remote,
            dir,
            limit,
            stamps: Mutex::new(BTreeMap::new()),
        }
    }

    /// The stamps, read or replaced by `f` where no fork lands: a forked reader
    /// (a DataLoader worker) reads them while the parent's prefetch task may be
    /// in here.
    fn with_stamps<R>(&self, f: impl FnOnce(&mut BTreeMap<u64, DataStamp>) -> R) -> R {
        bcd::fork::excluding_forks(|| {
            let mut stamps = self.stamps.lock().unwrap_or_else(PoisonError::into_inner);
            #[cfg(test)]
            crate::fork_tests::inside_section();
            f(&mut stamps)
        })
    }

    /// Takes the stamps of a sync's manifest (its shards only).
    pub(crate) fn set_stamps(&self, stamps: BTreeMap<u64, DataStamp>) {
        // The old ones are dropped after the section.
        drop(self.with_stamps(|held| std::mem::replace(held, stamps)));
    }

    /// The stamp of shard `id`; `NotFound` for a shard the synced manifest lacks.
    pub(crate) fn stamp(&self, id: u64) -> io::Result<DataStamp> {
        self.with_stamps(|stamps| stamps.get(&id).cloned())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("shard {id} is not in the synced manifest"),
                )
            })
    }

    /// The shards of the synced manifest and their data files' total size.
    pub(crate) fn extent(&self) -> (u64, u64) {
        self.with_stamps(|stamps| (stamps.len() as u64, stamps.values().map(|s| s.len).sum()))
    }

    /// Where shard `id`'s data file is cached.
    pub(crate) fn path(&self, id: u64) -> PathBuf {
        self.dir.join(data_name(id))
    }

    /// The lock under which shard `id` is fetched.
    pub(crate) fn lock_path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{}.lock", data_name(id)))
    }

    /// Whether shard `id`'s data file is cached (without touching its time).
    pub(crate) fn is_cached(&self, id: u64) -> bool {
        match self.stamp(id) {
            Ok(stamp) => fs::metadata(self.path(id)).is_ok_and(|m| m.len() == stamp.len),
            Err(_) => false,
        }
    }

    /// Whether shard `id`'s data file is cached and no reader has opened it since
    /// it was fetched ahead.
    pub(crate) fn is_unread(&self, id: u64) -> bool {
        fs::metadata(self.path(id)).is_ok_and(|m| m.modified().is_ok_and(|t| t == unread_time()))
    }

    /// The cached data file of shard `id` for a reader, fetched first when
    /// missing (or, when another process is fetching it, once that one is done).
    pub(crate) fn fetch(&self, id: u64) -> io::Result<File> {
        let stamp = self.stamp(id)?;
        let path = self.path(id);
        for _ in 0..3 {
            if let Some(file) = open_cached(&path, stamp.len)? {
                return Ok(file);
            }
            let _lock = lock(&self.lock_path(id)).map_err(io::Error::other)?;
            if let Some(file) = open_cached(&path, stamp.len)? {
                return Ok(file);
            }
            block_on(async {
                let ctx = Context::new(&self.remote, TransferOptions::default())?;
                self.download(&ctx, id, &stamp, false).await
            })
            .map_err(io::Error::other)?;
        }
        Err(io::Error::other(format!(
            "{}: evicted again as soon as it was fetched; is the cache limit far too small for the readers sharing it?",
            path.display()
        )))
    }

    /// Downloads shard `id` (`stamp`, as synced) into the cache, through its
    /// temporary name, then evicts past the limit. The caller holds the shard's
    /// lock. `ahead`: fetched ahead of the readers (its time is [`unread_time`]).
    pub(crate) async fn download(
        &self,
        ctx: &Context<'_>,
        id: u64,
        stamp: &DataStamp,
        ahead: bool,
    ) -> Result<()> {
        let name = data_name(id);
        let path = self.dir.join(&name);
        // One name, not one per process: only the lock's holder writes it, and
        // the download replaces what a killed holder left there.
        let tmp = self.dir.join(format!(".{name}.tmp"));
        // Checked against its size and stored checksum, and read only if it is
        // still the write the sync recorded; its time is the cache's own.
        let expected = Expected::FromRead {
            times: false,
            e_tag: stamp.e_tag.as_deref(),
        };
        let xxh3 = download(ctx, &name, stamp.len, expected, &tmp).await?.xxh3;
        let finish = || -> Result<()> {
            // What a later sync compares the object with (`same_content`) when it
            // has been written again.
            let checksum = checksum_path(&path);
            match xxh3 {
                Some(xxh3) => fs::write(&checksum, format!("{xxh3:016x}"))
                    .map_err(|e| RemoteError::io(&checksum, "write", e))?,
                None => remove_if_present(&checksum)?,
            }
            // Its place in the eviction order, on the clock the readers' opens
            // use: the time a write gives a file comes from a coarser clock
            // (the kernel's tick), which would make a shard fetched for a reader
            // an instant ago look older than one opened before it, and evicted
            // first. Best effort: without it a file fetched ahead only counts as
            // read.
            let time = if ahead {
                unread_time()
            } else {
                SystemTime::now()
            };
            let _ = OpenOptions::new()
                .write(true)
                .open(&tmp)
                .and_then(|f| f.set_modified(time));
            fs::rename(&tmp, &path).map_err(|e| RemoteError::io(&tmp, "rename", e))
        };
        if let Err(e) = finish() {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.evict(&name);
        Ok(())
    }

    /// Removes data files, other than `keep`, until the cache holds at most its
    /// limit: the least recently read first, the ones no reader has opened yet
    /// last.
    pub(crate) fn evict(&self, keep: &str) {
        let Some(limit) = self.limit else { return };
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let unread = unread_time();
        let mut files: Vec<(bool, SystemTime, u64, PathBuf)> = entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let name = entry.file_name();
                let name = name.to_str()?;
                if !matches!(FileKind::of(name), FileKind::Shard(_)) {
                    return None;
                }
                let meta = entry.metadata().ok()?;
                let time = meta.modified().ok()?;
                Some((time == unread, time, meta.len(), entry.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.2).sum();
        files.sort();
        for (_, _, len, path) in files {
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

    /// The shards whose data files a reader opened (or fetched) at or after
    /// `since`, as far as the cache still holds them: the most recently read
    /// files are the last evicted.
    pub(crate) fn read_since(&self, since: SystemTime) -> Vec<u64> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let unread = unread_time();
        entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let FileKind::Shard(id) = FileKind::of(entry.file_name().to_str()?) else {
                    return None;
                };
                let time = entry.metadata().ok()?.modified().ok()?;
                (time != unread && time >= since).then_some(id)
            })
            .collect()
    }

    /// Bytes of data files now in the cache.
    pub(crate) fn cached_bytes(&self) -> u64 {
        fs::read_dir(&self.dir)
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

/// The name of shard `id`'s data file.
pub(crate) fn data_name(id: u64) -> String {
    format!("{id:06}.bin")
}

/// Opens `path` if it is a cached file of `len` bytes, giving it the current
/// time (its place in the eviction order; this also marks a file fetched ahead
/// as read).
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

/// Waits for the exclusive lock on `path` (created when missing).
pub(crate) fn lock(path: &Path) -> Result<FileLock> {
    FileLock::acquire(path, LockKind::Exclusive).map_err(|e| RemoteError::io(path, "lock", e))
}

/// The exclusive lock on `path` if it is free, else `None`.
pub(crate) fn try_lock(path: &Path, kind: LockKind) -> Result<Option<FileLock>> {
    FileLock::try_acquire(path, kind).map_err(|e| RemoteError::io(path, "lock", e))
}
