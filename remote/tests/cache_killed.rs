//! A process killed (SIGKILL) while it fetches shards ahead leaves the shared
//! cache consistent: no partial or foreign file under a shard's name, its locks
//! free, and the next process reads every record right, replacing what the
//! killed one left.
//!
//! This test binary re-runs itself as the child ([`child_prefetching_process`]),
//! which prefetches from a store in a local directory (`object_store`'s
//! `LocalFileSystem`, which both processes open) that kills its own process at
//! a chosen point of a chosen download: a deterministic kill point, no timer.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bcd::fork::{FileLock, LockKind};
use bcd::{Compression, CreateOptions, Dataset};
use bcd_remote::cache::{open_cache, CacheOptions, RemoteCache};
use bcd_remote::{Remote, RemoteUri, Scheme};
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// The child's settings: the store's directory, the cache's directory, and
/// where to die (`N:middle` or `N:end`: in the middle of the N-th shard
/// download, 1-based, or after its last byte).
const STORE_ENV: &str = "BCD_KILLED_TEST_STORE";
const CACHE_ENV: &str = "BCD_KILLED_TEST_CACHE";
const KILL_ENV: &str = "BCD_KILLED_TEST_KILL";

/// A store that kills this process at the kill point.
#[derive(Debug)]
struct Killing {
    inner: LocalFileSystem,
    /// Reads of shard data files so far.
    reads: AtomicUsize,
    /// (download number, after its last byte?)
    at: Option<(usize, bool)>,
}

impl std::fmt::Display for Killing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Killing")
    }
}

fn die() -> ! {
    // SAFETY: kill(2) of this process; nothing runs after it.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    unreachable!("killed")
}

#[async_trait]
impl ObjectStore for Killing {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &ObjectPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let data = !options.head && location.as_ref().ends_with(".bin");
        let result = self.inner.get_opts(location, options).await?;
        let Some((at, end)) = self.at.filter(|_| data) else {
            return Ok(result);
        };
        if self.reads.fetch_add(1, Ordering::SeqCst) + 1 != at {
            return Ok(result);
        }
        let (meta, range) = (result.meta.clone(), result.range.clone());
        let (attributes, extensions) = (result.attributes.clone(), result.extensions.clone());
        let bytes = result.bytes().await?;
        let cut = match end {
            true => bytes.len(),
            false => bytes.len() / 2,
        };
        let first = bytes.slice(..cut);
        // The first part arrives and is written; asking for more kills.
        let stream = futures::stream::once(async move { Ok(first) })
            .chain(futures::stream::once(async { die() }))
            .boxed();
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream),
            meta,
            range,
            attributes,
            extensions,
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &ObjectPath,
        to: &ObjectPath,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

/// The cache of the dataset under `p/` of the store in `store`, in `cache`,
/// through a store killing at `at`, fetching two shards ahead at once.
fn open(store: &Path, cache: &Path, at: Option<(usize, bool)>) -> (Dataset, Arc<RemoteCache>) {
    let killing = Arc::new(Killing {
        inner: LocalFileSystem::new_with_prefix(store).unwrap(),
        reads: AtomicUsize::new(0),
        at,
    });
    let uri = RemoteUri {
        scheme: Scheme::S3,
        bucket: "bucket".into(),
        prefix: "p".into(),
    };
    let options = CacheOptions {
        prefetch: 2,
        ..CacheOptions::new(cache)
    };
    let cache = RemoteCache::with_remote(Remote::with_store(uri, killing, None), &options).unwrap();
    open_cache(Arc::new(cache)).unwrap()
}

/// Runs in the child (see [`killed`]), which selects it with `--ignored
/// --exact`: prefetches every shard, waiting, and is killed on the way.
#[test]
#[ignore = "a helper process of the SIGKILL tests, run by them"]
fn child_prefetching_process() {
    let (Some(store), Some(cache), Some(kill)) = (
        std::env::var_os(STORE_ENV),
        std::env::var_os(CACHE_ENV),
        std::env::var(KILL_ENV).ok(),
    ) else {
        return;
    };
    let (at, end) = kill.split_once(':').unwrap();
    let (dataset, _) = open(
        Path::new(&store),
        Path::new(&cache),
        Some((at.parse().unwrap(), end == "end")),
    );
    let order: Vec<u64> = (0..dataset.shards()).rev().collect();
    dataset.prefetch_shards(&order, true).unwrap();
    panic!("the store did not kill this process");
}

/// Runs the child against `store` and `cache` until the kill at `kill`.
fn killed(store: &Path, cache: &Path, kill: &str) {
    use std::os::unix::process::ExitStatusExt;
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_prefetching_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(STORE_ENV, store)
        .env(CACHE_ENV, cache)
        .env(KILL_ENV, kill)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{kill}: {status:?}");
}

fn records(dataset: &Dataset) -> Vec<Vec<u8>> {
    (0..dataset.len())
        .map(|i| dataset.at(i).unwrap().into_owned())
        .collect()
}

#[test]
fn a_prefetch_killed_at_any_point_leaves_the_cache_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let options = CreateOptions {
        keyed: true,
        compression: Compression::Lz4,
        max_shard_size: 1500,
    };
    let mut local = Dataset::create(&source, options).unwrap();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                format!("value {i} ").repeat(1 + i % 9).into_bytes(),
            )
        })
        .collect();
    local
        .extend(entries.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    assert!(local.shards() >= 6, "{}", local.shards());
    // The objects, as another tool uploads them (no stored checksums).
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("p")).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name != bcd::format::LOCK_NAME {
            std::fs::copy(entry.path(), store.join("p").join(name)).unwrap();
        }
    }
    for (n, kill) in ["1:middle", "3:middle", "4:end", "2:end"]
        .iter()
        .enumerate()
    {
        let cache = dir.path().join(format!("cache-{n}"));
        // A first open reads the keys once (fetching every shard) and writes the
        // mirror's persisted index; the child opens through that index, with
        // the data files removed, so that all it does is the prefetch.
        {
            let (dataset, cache) = open(&store, &cache, None);
            assert_eq!(records(&dataset), records(&local));
            while cache.prefetch_status().running {
                std::thread::yield_now();
            }
        }
        let data = cache_data_dir(&cache);
        for entry in std::fs::read_dir(&data).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "bin") {
                std::fs::remove_file(path).unwrap();
            }
        }
        killed(&store, &cache, kill);
        // What the killed process left under shard names is whole and right;
        // what it was writing is under a temporary name.
        let mut whole = 0;
        let mut partial = 0;
        for entry in std::fs::read_dir(&data).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if let Some(shard) = name.strip_suffix(".bin") {
                let shard: u64 = shard.parse().unwrap();
                let expected = std::fs::read(local.shard_data_path(shard)).unwrap();
                assert_eq!(
                    std::fs::read(entry.path()).unwrap(),
                    expected,
                    "{kill}: {name}"
                );
                whole += 1;
            } else if name.ends_with(".bin.tmp") {
                partial += 1;
            } else if name.ends_with(".lock") {
                // Free: the kernel released the killed process's locks.
                let lock = FileLock::try_acquire(&entry.path(), LockKind::Exclusive).unwrap();
                assert!(lock.is_some(), "{kill}: {name} still locked");
            }
        }
        assert!(partial >= 1, "{kill}: the download it was killed in");
        assert!(whole < local.shards(), "{kill}");
        // The next process reads every record right and replaces the leftover.
        let (dataset, cache) = open(&store, &cache, None);
        let order: Vec<u64> = (0..dataset.shards()).collect();
        dataset.prefetch_shards(&order, true).unwrap();
        assert_eq!(records(&dataset), records(&local), "{kill}");
        assert_eq!(cache.cached_bytes(), local.stored_bytes());
        let leftovers: Vec<String> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{kill}: {leftovers:?}");
    }
}

/// The data directory of the (single) dataset cached in `cache`.
fn cache_data_dir(cache: &Path) -> std::path::PathBuf {
    let mut mirrors = std::fs::read_dir(cache).unwrap();
    let mirror = mirrors.next().unwrap().unwrap().path();
    assert!(mirrors.next().is_none());
    mirror.join("data")
}
