//! Helpers of the bcd-remote tests: datasets to push, and an in-memory store that
//! fails or is changed by "another writer" at chosen requests.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bcd::{Compression, CreateOptions, Dataset};
use bcd_remote::{Remote, RemoteUri, Scheme};
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartId, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

pub fn uri(prefix: &str) -> RemoteUri {
    RemoteUri {
        scheme: Scheme::S3,
        bucket: "bucket".into(),
        prefix: prefix.into(),
    }
}

/// A dataset of `records` records in shards of at most `shard_size` bytes, with a
/// sidecar beside each shard and a commit file, as issue 10's files look.
pub fn dataset(
    dir: &Path,
    keyed: bool,
    compression: Compression,
    records: usize,
    shard_size: u64,
) -> Dataset {
    let options = CreateOptions {
        keyed,
        compression,
        max_shard_size: shard_size,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    append(&mut dataset, 0..records);
    dataset
}

/// Appends records `range` (key `k{i}`, a value that compresses) in one commit,
/// with a sidecar per new shard and a commit file.
pub fn append(dataset: &mut Dataset, range: Range<usize>) {
    let before = dataset.shards();
    let records: Vec<(Vec<u8>, Vec<u8>)> = range
        .map(|i| {
            (
                format!("k{i}").into_bytes(),
                format!("value {i} ").repeat(1 + i % 7).into_bytes(),
            )
        })
        .collect();
    if dataset.keyed() {
        dataset
            .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
            .unwrap();
    } else {
        dataset
            .extend_values(records.iter().map(|(_, v)| &v[..]))
            .unwrap();
    }
    let dir = dataset.path().to_owned();
    for shard in before..dataset.shards() {
        std::fs::write(
            dir.join(format!("{shard:06}.stats.json")),
            format!("{{\"shard\": {shard}}}"),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join(format!("commit.{:06}.json", dataset.shards())),
        b"{}",
    )
    .unwrap();
}

/// The files of a dataset directory that a copy must reproduce (not the lock).
pub fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = bcd_test_support::snapshot(dir);
    files.remove(bcd::format::LOCK_NAME);
    files
}

/// A keyless dataset of `n` records whose bytes depend on `upper` but whose sizes
/// (and so its manifest and every file's size) do not.
pub fn lookalike(dir: &Path, n: usize, upper: bool) -> Dataset {
    let options = CreateOptions {
        keyed: false,
        compression: Compression::None,
        max_shard_size: 700,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let value = format!("value {i:04}");
            match upper {
                true => value.to_uppercase().into_bytes(),
                false => value.into_bytes(),
            }
        })
        .collect();
    dataset
        .extend_values(values.iter().map(Vec::as_slice))
        .unwrap();
    for shard in 0..dataset.shards() {
        let stats = match upper {
            true => format!("{{\"SHARD\": {shard}}}"),
            false => format!("{{\"shard\": {shard}}}"),
        };
        std::fs::write(dir.join(format!("{shard:06}.stats.json")), stats).unwrap();
    }
    dataset
}

/// Removes every object under `p/` of `memory`.
pub fn empty_prefix(memory: &InMemory) {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let names: Vec<object_store::path::Path> = runtime
        .block_on(
            memory
                .list(Some(&"p".into()))
                .map_ok(|m| m.location)
                .try_collect(),
        )
        .unwrap();
    for name in names {
        runtime
            .block_on(object_store::ObjectStoreExt::delete(memory, &name))
            .unwrap();
    }
}

/// Something another writer does to the store.
pub type Hook = Box<dyn FnOnce(&InMemory) + Send>;

/// Faults and interference to inject.
#[derive(Default)]
pub struct Plan {
    /// Writes (puts and parts) that succeed before every later one fails.
    pub writes_before_failure: Option<usize>,
    /// Run once, on the store, right before the first manifest write: another
    /// writer committing.
    pub before_manifest: Option<Hook>,
    /// Aborting multipart uploads fails (a killed process aborts nothing).
    pub fail_aborts: bool,
    /// Run once, on the store, right before the put of the object with this file
    /// name: what another request writes there first (a killed run's, landing
    /// after the next run listed the prefix).
    pub before_put: Option<(String, Hook)>,
    /// The put of `before_put`'s object waits until a multipart upload has
    /// begun, and the first part of each waits until that put has been answered:
    /// a multipart upload is in flight when it is answered, whatever order
    /// requests run in.
    pub hold_multipart: bool,
}

/// Turns a wait of the test store that never ends (a plan whose request never
/// comes, say after the order of a push's requests changed) into a failure
/// naming what it waited for, instead of a test spinning forever. Not a race:
/// what the tests wait for arrives within milliseconds, and the bound is
/// minutes.
struct HangGuard {
    what: &'static str,
    started: std::time::Instant,
}

impl HangGuard {
    const BOUND: std::time::Duration = std::time::Duration::from_secs(300);

    fn new(what: &'static str) -> HangGuard {
        HangGuard {
            what,
            started: std::time::Instant::now(),
        }
    }

    fn check(&self) {
        assert!(
            self.started.elapsed() < Self::BOUND,
            "the test store waited {:?} for {}: it never came",
            Self::BOUND,
            self.what
        );
    }
}

/// An in-memory store that follows a [`Plan`].
pub struct FaultStore {
    pub inner: Arc<InMemory>,
    pub plan: Mutex<Plan>,
    pub writes: AtomicUsize,
    /// Bytes of object data served by reads.
    pub bytes_read: std::sync::atomic::AtomicU64,
    /// Requests for an object's bytes or metadata (GET and HEAD).
    pub gets: AtomicUsize,
    /// Listings.
    pub lists: AtomicUsize,
    /// Requests for an object's metadata alone (HEAD).
    pub heads: AtomicUsize,
    /// Multipart uploads begun and neither completed nor aborted, by id.
    pub open_uploads: Mutex<BTreeSet<String>>,
    /// For [`Plan::hold_multipart`]: a multipart upload began, the held put was
    /// answered.
    pub multipart_begun: AtomicBool,
    pub held_put_answered: AtomicBool,
    /// The file names of the reads of object bytes (not HEADs), in the order
    /// they arrived.
    pub reads: Mutex<Vec<String>>,
    /// The read of this file name waits (see [`FaultStore::hold`]).
    pub held: Mutex<Option<String>>,
    /// The held read arrived and waits.
    pub holding: AtomicBool,
    /// The held read may go on.
    pub released: AtomicBool,
    /// Reads of data files wait at the store for a permit (see [`FaultStore::gate`]).
    pub gated: AtomicBool,
    /// Data reads that may go past the gate.
    pub permits: AtomicUsize,
    /// Data reads that came to the gate so far.
    pub arrived: AtomicUsize,
    /// Data reads at the gate or being answered now, and the most there at once.
    pub at_gate: AtomicUsize,
    pub most_at_gate: AtomicUsize,
    /// Reads of this file name's bytes fail, as from a server that is gone.
    pub failing: Mutex<Option<String>>,
}

impl fmt::Debug for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultStore")
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultStore")
    }
}

impl FaultStore {
    pub fn new(inner: Arc<InMemory>, plan: Plan) -> Arc<FaultStore> {
        Arc::new(FaultStore {
            inner,
            plan: Mutex::new(plan),
            writes: AtomicUsize::new(0),
            bytes_read: Default::default(),
            gets: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
            heads: AtomicUsize::new(0),
            open_uploads: Mutex::new(BTreeSet::new()),
            multipart_begun: AtomicBool::new(false),
            held_put_answered: AtomicBool::new(false),
            reads: Mutex::new(Vec::new()),
            held: Mutex::new(None),
            holding: AtomicBool::new(false),
            released: AtomicBool::new(false),
            gated: AtomicBool::new(false),
            permits: AtomicUsize::new(0),
            arrived: AtomicUsize::new(0),
            at_gate: AtomicUsize::new(0),
            most_at_gate: AtomicUsize::new(0),
            failing: Mutex::new(None),
        })
    }

    /// Makes the next read of file `name`'s bytes wait until [`FaultStore::release`].
    pub fn hold(&self, name: &str) {
        self.holding.store(false, Ordering::SeqCst);
        self.released.store(false, Ordering::SeqCst);
        *self.held.lock().unwrap() = Some(name.to_owned());
    }

    /// Waits (yielding) until the held read has arrived.
    pub fn wait_until_holding(&self) {
        let hang = HangGuard::new("the held read");
        while !self.holding.load(Ordering::SeqCst) {
            hang.check();
            std::thread::yield_now();
        }
    }

    /// Lets the held read go on.
    pub fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    /// From now on every read of a data file's bytes waits at the store until
    /// it gets one of the permits that [`FaultStore::admit`] hands out; the
    /// store counts the reads that arrive and the most that are there at once
    /// (waiting or being answered).
    pub fn gate(&self) {
        self.permits.store(0, Ordering::SeqCst);
        self.gated.store(true, Ordering::SeqCst);
    }

    /// Lets `n` more reads through the gate.
    pub fn admit(&self, n: usize) {
        self.permits.fetch_add(n, Ordering::SeqCst);
    }

    /// Waits (yielding) until `n` data reads have come to the gate.
    pub fn wait_for_arrivals(&self, n: usize) {
        let hang = HangGuard::new("the reads at the gate");
        while self.arrived.load(Ordering::SeqCst) < n {
            hang.check();
            std::thread::yield_now();
        }
    }

    /// Makes reads of file `name`'s bytes fail (`None`: none fail).
    pub fn fail(&self, name: Option<&str>) {
        *self.failing.lock().unwrap() = name.map(str::to_owned);
    }

    /// Passes the gate, if reads are gated: waits for a permit.
    async fn pass_gate(&self) {
        let at = self.at_gate.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_gate.fetch_max(at, Ordering::SeqCst);
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let hang = HangGuard::new("a permit at the gate");
        loop {
            hang.check();
            let permits = self.permits.load(Ordering::SeqCst);
            if permits > 0
                && self
                    .permits
                    .compare_exchange(permits, permits - 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                return;
            }
            tokio::task::yield_now().await;
        }
    }

    /// The names of the reads of shard data files so far, in order.
    pub fn data_reads(&self) -> Vec<String> {
        let reads = self.reads.lock().unwrap();
        reads
            .iter()
            .filter(|n| n.ends_with(".bin"))
            .cloned()
            .collect()
    }

    /// Follows `plan` from now on, with its write count restarted.
    pub fn replan(&self, plan: Plan) {
        *self.plan.lock().unwrap() = plan;
        self.writes.store(0, Ordering::SeqCst);
        self.multipart_begun.store(false, Ordering::SeqCst);
        self.held_put_answered.store(false, Ordering::SeqCst);
    }

    fn holding(&self) -> bool {
        self.plan.lock().unwrap().hold_multipart
    }

    /// Waits (yielding) until `flag` is set.
    async fn wait_for(flag: &AtomicBool) {
        let hang = HangGuard::new("a request the plan holds another for");
        while !flag.load(Ordering::SeqCst) {
            hang.check();
            tokio::task::yield_now().await;
        }
    }

    fn write(&self) -> object_store::Result<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        match self.plan.lock().unwrap().writes_before_failure {
            Some(limit) if n >= limit => Err(object_store::Error::Generic {
                store: "FaultStore",
                source: "the server is gone".into(),
            }),
            _ => Ok(()),
        }
    }
}

/// A remote on `store`, with its multipart API.
/// A store that fails nothing (until told to) holding the dataset at `source`
/// pushed to `p/`.
pub fn pushed_to_store(source: &Path) -> Arc<FaultStore> {
    let store = FaultStore::new(Arc::new(InMemory::new()), Plan::default());
    bcd_remote::push(
        source,
        &remote_on(store.clone(), "p"),
        &bcd_remote::TransferOptions::default(),
    )
    .unwrap();
    store
}

pub fn remote_on(store: Arc<FaultStore>, prefix: &str) -> Remote {
    Remote::with_store(uri(prefix), store.clone(), Some(store))
}

/// A remote on a plain in-memory store.
pub fn memory_remote(memory: Arc<InMemory>, prefix: &str) -> Remote {
    Remote::with_store(uri(prefix), memory.clone(), Some(memory))
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if location.filename() == Some("manifest.json") {
            let hook = self.plan.lock().unwrap().before_manifest.take();
            if let Some(hook) = hook {
                hook(&self.inner);
            }
        }
        let hook = {
            let mut plan = self.plan.lock().unwrap();
            match &plan.before_put {
                Some((name, _)) if location.filename() == Some(name.as_str()) => {
                    plan.before_put.take()
                }
                _ => None,
            }
        };
        let held = hook.is_some() && self.holding();
        if held {
            Self::wait_for(&self.multipart_begun).await;
        }
        if let Some((_, hook)) = hook {
            hook(&self.inner);
        }
        let result = match self.write() {
            Ok(()) => self.inner.put_opts(location, payload, opts).await,
            Err(e) => Err(e),
        };
        if held {
            self.held_put_answered.store(true, Ordering::SeqCst);
        }
        result
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
        self.gets.fetch_add(1, Ordering::SeqCst);
        let head = options.head;
        if head {
            self.heads.fetch_add(1, Ordering::SeqCst);
        } else {
            let name = location.filename().unwrap_or_default().to_owned();
            let held = {
                let mut held = self.held.lock().unwrap();
                match held.as_deref() == Some(name.as_str()) {
                    true => held.take().is_some(),
                    false => false,
                }
            };
            self.reads.lock().unwrap().push(name.clone());
            if held {
                self.holding.store(true, Ordering::SeqCst);
                Self::wait_for(&self.released).await;
            }
            let gated = name.ends_with(".bin") && self.gated.load(Ordering::SeqCst);
            if gated {
                self.pass_gate().await;
            }
            let failing = self.failing.lock().unwrap().as_deref() == Some(name.as_str());
            let result = match failing {
                true => Err(object_store::Error::Generic {
                    store: "FaultStore",
                    source: "the server is gone".into(),
                }),
                false => self.inner.get_opts(location, options).await,
            };
            if gated {
                self.at_gate.fetch_sub(1, Ordering::SeqCst);
            }
            let result = result?;
            self.bytes_read
                .fetch_add(result.range.end - result.range.start, Ordering::SeqCst);
            return Ok(result);
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &ObjectPath,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.gets.fetch_add(ranges.len(), Ordering::SeqCst);
        let read = self.inner.get_ranges(location, ranges).await?;
        let bytes: usize = read.iter().map(Bytes::len).sum();
        self.bytes_read.fetch_add(bytes as u64, Ordering::SeqCst);
        Ok(read)
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
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&ObjectPath>,
        offset: &ObjectPath,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&ObjectPath>,
    ) -> object_store::Result<ListResult> {
        self.lists.fetch_add(1, Ordering::SeqCst);
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

#[async_trait]
impl MultipartStore for FaultStore {
    async fn create_multipart(&self, path: &ObjectPath) -> object_store::Result<MultipartId> {
        self.inner.create_multipart(path).await
    }

    async fn create_multipart_opts(
        &self,
        path: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<MultipartId> {
        let id = self.inner.create_multipart_opts(path, opts).await?;
        self.open_uploads.lock().unwrap().insert(id.clone());
        self.multipart_begun.store(true, Ordering::SeqCst);
        Ok(id)
    }

    async fn put_part(
        &self,
        path: &ObjectPath,
        id: &MultipartId,
        part_idx: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        // One part held is enough to keep the upload from completing; the
        // others go on and release their turns for the held put.
        if part_idx == 0 && self.holding() {
            Self::wait_for(&self.held_put_answered).await;
        }
        self.write()?;
        self.inner.put_part(path, id, part_idx, data).await
    }

    async fn complete_multipart(
        &self,
        path: &ObjectPath,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> object_store::Result<PutResult> {
        self.write()?;
        let result = self.inner.complete_multipart(path, id, parts).await?;
        self.open_uploads.lock().unwrap().remove(id);
        Ok(result)
    }

    async fn abort_multipart(
        &self,
        path: &ObjectPath,
        id: &MultipartId,
    ) -> object_store::Result<()> {
        if self.plan.lock().unwrap().fail_aborts {
            return Err(object_store::Error::Generic {
                store: "FaultStore",
                source: "killed".into(),
            });
        }
        self.inner.abort_multipart(path, id).await?;
        self.open_uploads.lock().unwrap().remove(id);
        Ok(())
    }
}
