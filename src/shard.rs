//! One committed shard: its files, loaded on first use (mapped, or read when
//! small: `mapping.rs`), and the checks that a shard file is what the dataset
//! was opened with.

use std::fs::{self, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::index_file::ShardStamp;
use crate::mapping::{open_regular, Mapping};

/// Where the data files (`NNNNNN.bin`) of a dataset come from when they are not
/// (all) in its directory: a cache that fetches each from object storage on
/// first use, say. The directory still holds the manifest and the `.idx` files.
pub trait DataFiles: Send + Sync + std::fmt::Debug {
    /// The length of shard `id`'s data file, and its modification time in
    /// nanoseconds since the epoch (0 when unknown), without fetching it. These
    /// are what a persisted index records; a `NotFound` error is a missing shard.
    fn stat(&self, id: u64) -> io::Result<(u64, u64)>;
    /// Opens shard `id`'s data file: a local regular file holding exactly its
    /// committed bytes (fetched first if needed).
    fn open(&self, id: u64) -> io::Result<std::fs::File>;
    /// Reads `range` of shard `id`'s data file without opening it whole, when
    /// that is cheaper (a cache whose copy is not local yet reads the range from
    /// the remote); `None`: open the file instead. Used for the few bytes a
    /// fingerprint hashes, so reading fields fetches no shard.
    fn read_range(&self, id: u64, range: std::ops::Range<u64>) -> Option<io::Result<Vec<u8>>> {
        let _ = (id, range);
        None
    }
    /// Shards `shards` will be read next, in this order (an epoch's, see
    /// [`crate::Dataset::shard_order`]): a source that fetches data files may
    /// fetch them ahead, in the background, a bounded number at once, the first
    /// first. With `wait`, returns once every one of them has been fetched, or
    /// with the error that stopped it. Returns how many were not at hand when
    /// asked. Default: nothing to fetch (0).
    fn prefetch(&self, shards: &[u64], wait: bool) -> io::Result<usize> {
        let _ = (shards, wait);
        Ok(0)
    }
}

/// One committed shard; its files are loaded on first use.
#[derive(Debug)]
pub(crate) struct Shard {
    /// The data file.
    pub(crate) path: PathBuf,
    /// The shard's number and, when it is not read from `path`, where its data
    /// file comes from.
    pub(crate) source: Option<(u64, std::sync::Arc<dyn DataFiles>)>,
    data: OnceLock<Arc<Mapping>>,
    /// The device and inode of the file `data` was loaded from (see
    /// `unmapped.rs`), once it is loaded.
    data_identity: OnceLock<Option<(u64, u64)>>,
    /// The `.idx` file: `u32` sizes per record.
    sizes: OnceLock<Mapping>,
    /// Dataset index of the shard's first record.
    pub(crate) first: u64,
    /// The files' sizes (checked again when they are loaded) and times.
    pub(crate) stamp: ShardStamp,
    /// For a shard the index file covers: whether the file's record starts agree
    /// with this shard's sizes, checked on the first read of the shard (see
    /// [`IndexFile::check_starts`]).
    pub(crate) starts_checked: OnceLock<Result<(), String>>,
    /// Its content hashes (`NNNNNN.xxh128`), loaded on the first read that
    /// checks a value against them.
    pub(crate) content_hashes: OnceLock<crate::ShardData>,
    /// Whether `mincore` tells this process which of the data file's pages
    /// are cached ([`Shard::page_cache_visible`]).
    pub(crate) page_cache_visible: OnceLock<bool>,
}

impl Shard {
    /// A shard whose files are checked to have `stamp`'s sizes; `sizes` is its
    /// `.idx` when already loaded.
    pub(crate) fn new(
        path: PathBuf,
        first: u64,
        stamp: ShardStamp,
        sizes: Option<Mapping>,
    ) -> Shard {
        Shard {
            path,
            source: None,
            data: OnceLock::new(),
            data_identity: OnceLock::new(),
            sizes: sizes.map_or_else(OnceLock::new, OnceLock::from),
            first,
            stamp,
            starts_checked: OnceLock::new(),
            content_hashes: OnceLock::new(),
            page_cache_visible: OnceLock::new(),
        }
    }

    /// Whether `mincore` on the data file's mapping tells this process which
    /// pages are in the page cache. Linux answers truly only to a process that
    /// owns the file or may write it (or is privileged); to any other it says
    /// every page is cached, so that page-cache contents do not leak between
    /// users (a shared, read-only dataset). Decided once, from the data file's
    /// owner and permission bits; a file it cannot stat (one fetched from
    /// object storage into a cache) is taken to be visible.
    pub(crate) fn page_cache_visible(&self) -> bool {
        *self.page_cache_visible.get_or_init(|| {
            std::fs::metadata(&self.path).map_or(true, |metadata| visible_to(&metadata))
        })
    }

    /// The data file, loaded on first use.
    pub(crate) fn data(&self) -> Result<&Arc<Mapping>> {
        if let Some(data) = self.data.get() {
            return Ok(data);
        }
        let file = match &self.source {
            None => {
                open_regular(&self.path)
                    .map_err(|e| Error::io("open", &self.path, e))?
                    .0
            }
            Some((id, files)) => files
                .open(*id)
                .map_err(|e| Error::io("fetch", &self.path, e))?,
        };
        let identity = crate::unmapped::file_identity(&file);
        let loaded = Arc::new(load_file(&self.path, file, self.stamp.data_len)?);
        // Two threads may load it at once: the first to finish is kept, with the
        // identity of the file it was loaded from.
        let mut kept = false;
        let data = self.data.get_or_init(|| {
            kept = true;
            loaded
        });
        if kept {
            let _ = self.data_identity.set(identity);
        }
        Ok(data)
    }

    /// The device and inode of the file the data was loaded from: `None` until
    /// it is loaded (or where the platform has none).
    pub(crate) fn data_identity(&self) -> Option<(u64, u64)> {
        self.data_identity.get().copied().flatten()
    }

    /// The `.idx` file, loaded on first use.
    pub(crate) fn sizes(&self) -> Result<&Mapping> {
        if let Some(sizes) = self.sizes.get() {
            return Ok(sizes);
        }
        let loaded = load(&self.path.with_extension("idx"), self.stamp.index_len)?;
        Ok(self.sizes.get_or_init(|| loaded))
    }

    /// The data file's bytes at `ranges`, without loading it when its source
    /// reads ranges more cheaply (`None`: load it).
    pub(crate) fn data_ranges(
        &self,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let Some((id, files)) = self.source.as_ref().filter(|_| self.data.get().is_none()) else {
            return Ok(None);
        };
        let mut read = Vec::with_capacity(ranges.len());
        for range in ranges {
            if range.is_empty() {
                read.push(Vec::new());
                continue;
            }
            let Some(bytes) = files.read_range(*id, range.clone()) else {
                return Ok(None);
            };
            let bytes = bytes.map_err(|e| Error::io("fetch", &self.path, e))?;
            if bytes.len() as u64 != range.end - range.start {
                return Err(Error::io(
                    "fetch",
                    &self.path,
                    io::Error::other(format!(
                        "bytes {}..{} read as {} bytes",
                        range.start,
                        range.end,
                        bytes.len()
                    )),
                ));
            }
            read.push(bytes);
        }
        Ok(Some(read))
    }

    /// The data file's length.
    pub(crate) fn data_len(&self) -> u64 {
        self.stamp.data_len
    }
}

/// Loads the shard file at `path`, which was `len` bytes long when the dataset
/// was opened.
fn load(path: &Path, len: u64) -> Result<Mapping> {
    let (file, _) = open_regular(path).map_err(|e| Error::io("open", path, e))?;
    load_file(path, file, len)
}

/// Loads the open shard file `file` (called `path`), checking its length.
fn load_file(path: &Path, file: std::fs::File, len: u64) -> Result<Mapping> {
    let metadata = file.metadata().map_err(|e| Error::io("open", path, e))?;
    if !metadata.is_file() {
        return Err(Error::io(
            "open",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    if metadata.len() != len {
        return Err(Error::CorruptShard {
            path: path.to_owned(),
            reason: format!(
                "{} bytes, but {len} when the dataset was opened: a committed shard changed on disk; reopen the dataset",
                metadata.len()
            ),
        });
    }
    Mapping::load(file, len).map_err(|e| Error::io("read", path, e))
}

/// The stamp of shard `id` whose data file comes from `files` and whose `.idx`
/// has `index` metadata.
pub(crate) fn stamp_from(
    files: &dyn DataFiles,
    id: u64,
    data_path: &Path,
    index: &Metadata,
    shards: u64,
) -> Result<ShardStamp> {
    let (data_len, data_mtime_ns) = files
        .stat(id)
        .map_err(|e| open_error(data_path, shards, e))?;
    let mut stamp = ShardStamp::of(index, index);
    stamp.data_len = data_len;
    stamp.data_mtime_ns = data_mtime_ns;
    Ok(stamp)
}

/// The metadata of a committed shard file, which must be a regular file.
pub(crate) fn stat_shard(path: &Path, shards: u64) -> Result<Metadata> {
    let metadata = fs::metadata(path).map_err(|e| open_error(path, shards, e))?;
    if !metadata.is_file() {
        // open_regular says what it is.
        open_regular(path).map_err(|e| Error::io("open", path, e))?;
    }
    Ok(metadata)
}

pub(crate) fn open_error(path: &Path, shards: u64, error: io::Error) -> Error {
    match error.kind() {
        io::ErrorKind::NotFound => Error::MissingShard {
            path: path.to_owned(),
            shards,
        },
        _ => Error::io("open", path, error),
    }
}

/// Whether this process may write a file of `metadata` or owns it (or is
/// root): what Linux's `mincore` asks before telling it the truth about the
/// file's cached pages. Access control lists are not read: a file writable
/// only through one is taken not to be visible, which costs a probe by read
/// instead of by `mincore`, never a wrong answer.
#[cfg(unix)]
fn visible_to(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: plain calls that read the process's credentials.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let in_group = |gid: u32| {
        if gid == egid {
            return true;
        }
        let mut groups = vec![0 as libc::gid_t; 256];
        // SAFETY: getgroups writes at most `groups.len()` ids into `groups`.
        let count = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
        usize::try_from(count).is_ok_and(|count| groups[..count.min(groups.len())].contains(&gid))
    };
    may_see_page_cache(euid, metadata.uid(), metadata.mode(), || {
        in_group(metadata.gid())
    })
}

#[cfg(not(unix))]
fn visible_to(_: &std::fs::Metadata) -> bool {
    true
}

/// [`visible_to`]'s rule: root, the owner, or a process the permission bits
/// let write (others' bit, or the group's for a member of the file's group).
fn may_see_page_cache(euid: u32, owner: u32, mode: u32, in_group: impl FnOnce() -> bool) -> bool {
    euid == 0 || euid == owner || mode & 0o002 != 0 || (mode & 0o020 != 0 && in_group())
}

#[cfg(test)]
mod visibility_tests {
    use super::may_see_page_cache;

    #[test]
    fn only_root_the_owner_and_writers_see_the_page_cache() {
        let never = || panic!("group membership asked needlessly");
        assert!(may_see_page_cache(0, 1000, 0o444, never));
        assert!(may_see_page_cache(1000, 1000, 0o444, never));
        assert!(may_see_page_cache(1001, 1000, 0o646, never));
        assert!(may_see_page_cache(1001, 1000, 0o664, || true));
        assert!(!may_see_page_cache(1001, 1000, 0o664, || false));
        assert!(!may_see_page_cache(1001, 1000, 0o644, never));
        assert!(!may_see_page_cache(1001, 1000, 0o444, never));
    }
}
