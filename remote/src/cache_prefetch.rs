//! Fetching shards ahead of the readers of a cached remote dataset.
//!
//! A [`Prefetcher`] belongs to one process (a forked child makes its own) and
//! holds an order of shards: one given by [`Prefetcher::prefetch`] (a sampler's
//! epoch, in the order it first needs each shard), or the default one, all
//! shards in shard order from the first one a reader had to wait for. A task on
//! the process's runtime fetches the order's shards that are not cached, first
//! first, at most `concurrency` at once; every rule of the cache holds for them
//! as for a reader's fetch (`cache_files.rs`), and:
//!
//! - at most `concurrency` shards are in flight in the whole cache, whatever
//!   the number of processes prefetching: each download holds one of the
//!   `concurrency` slot locks `data/.bcd-prefetch-slot-K.lock`;
//! - a shard another process is fetching (its lock is taken) is left to it; a
//!   reader of this process that needs a shard in flight here waits for that
//!   download, and one that needs a shard not in flight fetches it at once,
//!   before the order's next ones (it never waits for a slot);
//! - with a cache limit, a background order keeps at most half the limit in
//!   shards fetched ahead that no reader has opened yet (see
//!   `cache_files::unread_time`), counting the ones in flight; a shard that
//!   does not fit even alone is left to its reader;
//! - while a process runs an order given to it, it holds a shared lock on
//!   `data/.bcd-prefetch-order.lock`, and the default order of every process
//!   stops: DataLoader workers do not prefetch in shard order what the main
//!   process's sampler prefetches in epoch order;
//! - an order never fetches a shard behind its readers: once a reader opened
//!   a shard of the order (in this process, or in another one, as the file
//!   times of a bounded cache tell: `ShardFiles::read_since`), the shards
//!   before it in the order that are not cached are left to their readers. An
//!   order that fell behind (its task not scheduled on a busy machine) would
//!   otherwise fetch again what the readers fetched, read and the limit evicted;
//! - the first error (the remote unreachable, a shard written again since the
//!   sync) stops the order; readers then fetch what they need themselves.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use bcd::fork::{FileLock, LockKind};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

use crate::cache_files::{try_lock, ShardFiles};
use crate::cache_records::DataStamp;
use crate::error::{RemoteError, Result};
use crate::store::spawn;
use crate::transfer::{Context, TransferOptions};

/// How often a waiting order looks again for a free slot, or for readers (of
/// other processes) that opened shards it fetched ahead.
const POLL: Duration = Duration::from_millis(20);

/// Where an order given to [`Prefetcher::prefetch`] is announced to every
/// process sharing the cache.
const ORDER_LOCK: &str = ".bcd-prefetch-order.lock";

/// What the prefetching of a process is doing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrefetchStatus {
    /// Shards of the order not started yet (some may turn out to be cached).
    pub queued: usize,
    /// Downloads in flight in this process.
    pub in_flight: usize,
    /// Shards this process fetched ahead so far, and their bytes.
    pub fetched: u64,
    /// Their bytes.
    pub fetched_bytes: u64,
    /// Readers of this process waiting for a shard in flight here.
    pub waiting: usize,
    /// Whether an order is being worked on.
    pub running: bool,
    /// What stopped the last order, if an error did.
    pub error: Option<String>,
}

/// One process's prefetching for one cache.
#[derive(Debug)]
pub(crate) struct Prefetcher {
    files: Arc<ShardFiles>,
    concurrency: usize,
    state: Mutex<State>,
    /// Signalled when a download ends or the order is done.
    changed: Condvar,
    /// Wakes the task: a new order, a stop, a read.
    wake: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Shards still to consider, first first.
    queue: VecDeque<u64>,
    /// Each shard's place in the order.
    places: HashMap<u64, usize>,
    /// The shards at places below this one are behind the readers.
    behind: usize,
    /// When the order was given: a shard file read since is a reader's.
    since: Option<SystemTime>,
    /// Keep the shards fetched ahead and unread within half the cache limit.
    paced: bool,
    /// The shared lock announcing an order given to `prefetch`.
    announced: Option<FileLock>,
    /// An order was given to `prefetch`: the default one no longer starts.
    given: bool,
    /// The shard count the default order was started (or declined) for.
    default_for: Option<u64>,
    /// Downloads in flight here: shard -> bytes.
    in_flight: BTreeMap<u64, u64>,
    /// Shards fetched ahead by this order that may not have been read yet.
    ahead: Vec<(u64, u64)>,
    running: bool,
    stopped: bool,
    error: Option<Arc<RemoteError>>,
    waiting: usize,
    fetched: u64,
    fetched_bytes: u64,
}

impl State {
    /// A new order, first first.
    fn set_order(&mut self, order: VecDeque<u64>) {
        self.places = order
            .iter()
            .enumerate()
            .map(|(place, &id)| (id, place))
            .collect();
        self.queue = order;
        self.behind = 0;
        self.since = Some(SystemTime::now());
    }

    /// A reader opened shard `id`.
    fn reached(&mut self, id: u64) {
        if let Some(&place) = self.places.get(&id) {
            self.behind = self.behind.max(place + 1);
        }
    }
}

/// What the task does next.
enum Next {
    /// Download this shard, holding its lock and a slot.
    Start(u64, DataStamp, FileLock, FileLock),
    /// Nothing can start now; look again later.
    Later,
    /// The order is done.
    Done,
}

impl Prefetcher {
    pub(crate) fn new(files: Arc<ShardFiles>, concurrency: usize) -> Prefetcher {
        Prefetcher {
            files,
            concurrency: concurrency.max(1),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            wake: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fetches `shards` ahead of the readers, in this order, in the background;
    /// replaces the order being worked on. `wait`: return once every one is in
    /// the cache (refused when they cannot all fit within the limit), with the
    /// error that stopped them if one did. Returns how many were not cached.
    pub(crate) fn prefetch(self: &Arc<Self>, shards: &[u64], wait: bool) -> Result<usize> {
        let mut seen = HashSet::new();
        let mut order = VecDeque::new();
        let mut queued = 0;
        let mut total = 0u64;
        for &id in shards {
            if !seen.insert(id) {
                continue;
            }
            let stamp = self
                .files
                .stamp(id)
                .map_err(|e| RemoteError::io(self.files.path(id), "prefetch", e))?;
            total += stamp.len;
            // The cached ones too: a reader opening one tells how far the
            // readers got (`next` passes them by).
            order.push_back(id);
            queued += usize::from(!self.files.is_cached(id));
        }
        if let (true, Some(limit)) = (wait, self.files.limit) {
            if total > limit {
                return Err(RemoteError::Local(bcd::Error::InvalidOption(format!(
                    "the {} shards to prefetch hold {total} bytes, more than the cache limit of {limit}: prefetch them without waiting, and they are fetched as the readers go",
                    seen.len()
                ))));
            }
        }
        let path = self.files.dir.join(ORDER_LOCK);
        let announcement = FileLock::acquire(&path, LockKind::Shared)
            .map_err(|e| RemoteError::io(&path, "lock", e))?;
        {
            let mut state = self.state();
            state.set_order(order);
            state.paced = !wait && self.files.limit.is_some();
            state.given = true;
            state.stopped = false;
            state.error = None;
            state.ahead.clear();
            state.announced.get_or_insert(announcement);
            self.run(state);
        }
        if !wait {
            return Ok(queued);
        }
        let state = self.state();
        let state = self
            .changed
            .wait_while(state, |s| s.running)
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(error) = &state.error {
            return Err(RemoteError::Prefetch(error.clone()));
        }
        drop(state);
        // Shards another process was fetching when their turn came: once it is
        // done (or has failed, then fetched here).
        for &id in &seen {
            if !self.files.is_cached(id) {
                self.files
                    .fetch(id)
                    .map_err(|e| RemoteError::io(self.files.path(id), "fetch", e))?;
            }
        }
        Ok(queued)
    }

    /// The default order, on a reader's first wait for shard `first` (not
    /// cached): every shard in shard order from the next one, once per shard
    /// count, unless an order was given here or elsewhere, or the dataset does
    /// not fit in half the cache limit.
    pub(crate) fn start_default(self: &Arc<Self>, first: u64) {
        let (shards, bytes) = self.files.extent();
        let mut state = self.state();
        if state.given || state.running || state.default_for == Some(shards) {
            return;
        }
        if self.files.limit.is_some_and(|limit| bytes > limit / 2) {
            state.default_for = Some(shards);
            return;
        }
        if self.order_given_elsewhere() {
            return;
        }
        state.default_for = Some(shards);
        state.set_order((first + 1..shards).chain(0..first).collect());
        state.paced = false;
        state.stopped = false;
        state.error = None;
        self.run(state);
    }

    /// Starts the task, or wakes it for a new order.
    fn run(self: &Arc<Self>, mut state: MutexGuard<'_, State>) {
        if state.running {
            drop(state);
            self.wake.notify_one();
            return;
        }
        state.running = true;
        drop(state);
        let this = self.clone();
        spawn(async move {
            let driven = AssertUnwindSafe(this.clone().drive()).catch_unwind().await;
            if driven.is_err() {
                // A bug: never leave readers waiting for downloads that ended.
                let error = RemoteError::io(
                    &this.files.dir,
                    "prefetch into",
                    std::io::Error::other("the prefetching task panicked"),
                );
                this.state().in_flight.clear();
                this.finish_with(Some(error));
            }
        });
    }

    /// Stops the order (the cache is dropped); downloads in flight finish.
    pub(crate) fn stop(&self) {
        let mut state = self.state();
        state.stopped = true;
        state.queue.clear();
        drop(state);
        self.wake.notify_one();
    }

    /// A reader opened shard `id`: the order's shards before it are behind the
    /// readers, and a paced order may go on.
    pub(crate) fn read(&self, id: u64) {
        let mut state = self.state();
        state.reached(id);
        if state.paced {
            self.wake.notify_one();
        }
    }

    /// Waits while shard `id` is being downloaded by this process.
    pub(crate) fn wait_for(&self, id: u64) {
        let mut state = self.state();
        if !state.in_flight.contains_key(&id) {
            return;
        }
        state.waiting += 1;
        let mut state = self
            .changed
            .wait_while(state, |s| s.in_flight.contains_key(&id))
            .unwrap_or_else(PoisonError::into_inner);
        state.waiting -= 1;
    }

    pub(crate) fn status(&self) -> PrefetchStatus {
        let state = self.state();
        PrefetchStatus {
            queued: state.queue.len(),
            in_flight: state.in_flight.len(),
            fetched: state.fetched,
            fetched_bytes: state.fetched_bytes,
            waiting: state.waiting,
            running: state.running,
            error: state.error.as_ref().map(|e| bcd::error_chain(e.as_ref())),
        }
    }

    /// Whether some process holds an order given to it (the announcement).
    fn order_given_elsewhere(&self) -> bool {
        let path = self.files.dir.join(ORDER_LOCK);
        matches!(try_lock(&path, LockKind::Exclusive), Ok(None))
    }

    /// The task: starts downloads as the order, the slots and the pace allow,
    /// until the order is done.
    async fn drive(self: Arc<Self>) {
        let options = TransferOptions {
            // Requests in flight: whole shards, or ranges of large ones.
            concurrency: self.concurrency,
            ..TransferOptions::default()
        };
        let ctx = match Context::new(&self.files.remote, options) {
            Ok(ctx) => ctx,
            Err(e) => return self.finish_with(Some(e)),
        };
        let mut downloads = FuturesUnordered::new();
        loop {
            let mut later = false;
            while downloads.len() < self.concurrency {
                match self.next() {
                    Next::Start(id, stamp, lock, slot) => {
                        let ctx = &ctx;
                        let this = &self;
                        downloads.push(async move {
                            let result = this.files.download(ctx, id, &stamp, true).await;
                            // The shard's lock and the slot are let go once the
                            // download no longer counts as in flight (`done`).
                            (id, stamp.len, result, (lock, slot))
                        });
                    }
                    Next::Later => {
                        later = true;
                        break;
                    }
                    Next::Done => break,
                }
            }
            if downloads.is_empty() && !later {
                if self.try_finish() {
                    return;
                }
                continue;
            }
            tokio::select! {
                Some((id, len, result, held)) = downloads.next() => {
                    self.done(id, len, result);
                    drop(held);
                }
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(POLL), if later => {}
            }
        }
    }

    /// The next shard to start, if one can start now.
    fn next(&self) -> Next {
        let mut state = self.state();
        let mut looked = false;
        loop {
            if state.stopped || state.error.is_some() {
                state.queue.clear();
                return Next::Done;
            }
            let Some(&id) = state.queue.front() else {
                return Next::Done;
            };
            if state
                .places
                .get(&id)
                .is_some_and(|&place| place < state.behind)
            {
                state.queue.pop_front();
                continue;
            }
            let stamp = match self.files.stamp(id) {
                Ok(stamp) if !state.in_flight.contains_key(&id) && !self.files.is_cached(id) => {
                    stamp
                }
                _ => {
                    state.queue.pop_front();
                    continue;
                }
            };
            if !looked && self.files.limit.is_some() {
                // About to fetch a shard a bounded cache may have held and
                // evicted: first see how far readers of other processes got.
                looked = true;
                if let Some(since) = state.since {
                    for read in self.files.read_since(since) {
                        state.reached(read);
                    }
                    continue;
                }
            }
            if state.announced.is_none() && self.order_given_elsewhere() {
                // The default order gives way to a sampler's.
                state.queue.clear();
                return Next::Done;
            }
            if state.paced {
                let budget = self.files.limit.unwrap_or(u64::MAX) / 2;
                let files = &self.files;
                state.ahead.retain(|&(id, _)| files.is_unread(id));
                let used: u64 = state.ahead.iter().map(|a| a.1).sum::<u64>()
                    + state.in_flight.values().sum::<u64>();
                if used + stamp.len > budget {
                    if used == 0 {
                        // Too large to fetch ahead at all: its reader fetches it.
                        state.queue.pop_front();
                        continue;
                    }
                    return Next::Later;
                }
            }
            let Some(slot) = self.free_slot() else {
                return Next::Later;
            };
            let lock = match try_lock(&self.files.lock_path(id), LockKind::Exclusive) {
                Ok(Some(lock)) => lock,
                // Another process is fetching it: left to it.
                Ok(None) => {
                    state.queue.pop_front();
                    continue;
                }
                Err(e) => {
                    state.error = Some(Arc::new(e));
                    continue;
                }
            };
            state.queue.pop_front();
            if self.files.is_cached(id) {
                // Fetched by another process since it was checked.
                continue;
            }
            state.in_flight.insert(id, stamp.len);
            return Next::Start(id, stamp, lock, slot);
        }
    }

    /// One of the cache's slots for a download in flight, if one is free.
    fn free_slot(&self) -> Option<FileLock> {
        (0..self.concurrency).find_map(|k| {
            let path = self.files.dir.join(format!(".bcd-prefetch-slot-{k}.lock"));
            try_lock(&path, LockKind::Exclusive).ok().flatten()
        })
    }

    /// A download ended.
    fn done(&self, id: u64, len: u64, result: Result<()>) {
        let mut state = self.state();
        state.in_flight.remove(&id);
        match result {
            Ok(()) => {
                state.fetched += 1;
                state.fetched_bytes += len;
                if state.paced {
                    state.ahead.push((id, len));
                }
            }
            Err(e) => {
                state.queue.clear();
                state.error.get_or_insert(Arc::new(e));
            }
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Ends the task if the order is done (and no new one came meanwhile).
    fn try_finish(&self) -> bool {
        let mut state = self.state();
        if !state.queue.is_empty() && !state.stopped && state.error.is_none() {
            return false;
        }
        state.queue.clear();
        state.running = false;
        state.announced = None;
        drop(state);
        self.changed.notify_all();
        true
    }

    fn finish_with(&self, error: Option<RemoteError>) {
        let mut state = self.state();
        if let Some(error) = error {
            state.error.get_or_insert(Arc::new(error));
        }
        state.queue.clear();
        state.running = false;
        state.announced = None;
        drop(state);
        self.changed.notify_all();
    }
}
