//! The shard cache fetching ahead of its readers: the order given first, at
//! most the set number at once, a waiting reader first and served by the
//! download in flight, the default order after a first cold read, the pace of
//! a bounded cache, a dataset replaced remotely meanwhile never mixed, and a
//! process killed mid-prefetch leaving the cache consistent.
//!
//! Requests are counted and ordered by the store (`tests/common`); a read is
//! held at the store, never raced against a timer.

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bcd::{Compression, Dataset};
use bcd_remote::cache::{open_cache, CacheOptions, RemoteCache};
use bcd_remote::{push, TransferOptions};
use common::*;
use object_store::memory::InMemory;

fn records(dataset: &Dataset) -> Vec<Vec<u8>> {
    (0..dataset.len())
        .map(|i| dataset.at(i).unwrap().into_owned())
        .collect()
}

/// A keyless dataset of 240 records in about 12 shards (opening it reads no
/// shard), pushed to `p/` of a counting store.
fn pushed(dir: &Path) -> (Dataset, Arc<FaultStore>) {
    let local = dataset(&dir.join("source"), false, Compression::None, 240, 1000);
    assert!(local.shards() >= 10, "{} shards", local.shards());
    let store = pushed_to_store(local.path());
    (local, store)
}

/// The cache of `p/` on `store` under `dir/cache`, opened.
fn open(
    store: &Arc<FaultStore>,
    dir: &Path,
    options: impl Fn(&mut CacheOptions),
) -> (Dataset, Arc<RemoteCache>) {
    let mut cache_options = CacheOptions::new(dir.join("cache"));
    options(&mut cache_options);
    let cache = RemoteCache::with_remote(remote_on(store.clone(), "p"), &cache_options).unwrap();
    open_cache(Arc::new(cache)).unwrap()
}

fn names(shards: &[u64]) -> Vec<String> {
    shards.iter().map(|s| format!("{s:06}.bin")).collect()
}

/// Waits (yielding) until `cache`'s prefetching is idle. The generous bound only
/// turns an order that never ends (one waiting for readers that are done) into
/// a failure rather than a hang.
fn until_idle(cache: &RemoteCache) {
    let start = std::time::Instant::now();
    while cache.prefetch_status().running {
        let status = cache.prefetch_status();
        assert!(
            start.elapsed().as_secs() < 300,
            "the order never ends: {status:?}"
        );
        std::thread::yield_now();
    }
}

/// An epoch's order of `n` records: a fixed shuffle.
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

#[test]
fn the_order_given_is_fetched_first_first_and_each_shard_once() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 1);
    let epoch = shuffled(local.len());
    let order = remote.shard_order(epoch.iter().copied()).unwrap();
    assert_eq!(order.len() as u64, local.shards());
    assert_ne!(order, (0..local.shards()).collect::<Vec<_>>());

    assert!(store.data_reads().is_empty(), "opening fetched no shard");
    let queued = remote.prefetch_shards(&order, true).unwrap();
    assert_eq!(queued, order.len());
    // One at a time: exactly the order.
    assert_eq!(store.data_reads(), names(&order));
    assert_eq!(cache.cached_bytes(), local.stored_bytes());
    let status = cache.prefetch_status();
    assert_eq!(
        (status.fetched, status.fetched_bytes),
        (order.len() as u64, local.stored_bytes())
    );

    // The epoch then reads from the cache alone; asking again fetches nothing.
    for &i in &epoch {
        assert_eq!(
            &*remote.at(i).unwrap(),
            &*local.at(i).unwrap(),
            "record {i}"
        );
    }
    assert_eq!(remote.prefetch_shards(&order, true).unwrap(), 0);
    assert_eq!(store.data_reads().len(), order.len());
}

#[test]
fn with_several_in_flight_each_download_starts_within_that_many_of_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, _cache) = open(&store, dir.path(), |o| o.prefetch = 3);
    let order = remote.shard_order(shuffled(local.len())).unwrap();
    remote.prefetch_shards(&order, true).unwrap();
    let reads = store.data_reads();
    let mut sorted = reads.clone();
    sorted.sort();
    let mut expected = names(&order);
    expected.sort();
    assert_eq!(sorted, expected, "each shard once");
    // The k-th request to reach the store is for one of the first k + 3 shards
    // of the order: a download starts only when one of 3 slots is free.
    let order = names(&order);
    for (k, name) in reads.iter().enumerate() {
        let place = order.iter().position(|n| n == name).unwrap();
        assert!(
            place < k + 3,
            "request {k} was for shard {place} of the order: {reads:?}"
        );
    }
}

#[test]
fn a_reader_waiting_for_a_shard_in_flight_gets_it_from_that_download() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 2);
    let remote = Arc::new(remote);
    // Shard 3 is the first of the order; its read waits at the store.
    store.hold("000003.bin");
    remote.prefetch_shards(&[3, 4], false).unwrap();
    store.wait_until_holding();
    let record = (0..local.len())
        .find(|&i| local.value_location(i).unwrap().shard == 3)
        .unwrap();
    let reader = {
        let remote = remote.clone();
        std::thread::spawn(move || remote.at(record).unwrap().into_owned())
    };
    // The reader waits for the download in flight (counted), not for a lock.
    while cache.prefetch_status().waiting != 1 {
        std::thread::yield_now();
    }
    store.release();
    assert_eq!(reader.join().unwrap(), &*local.at(record).unwrap());
    until_idle(&cache);
    let reads = store.data_reads();
    assert_eq!(
        reads.iter().filter(|n| *n == "000003.bin").count(),
        1,
        "{reads:?}"
    );
    assert_eq!(cache.prefetch_status().waiting, 0);
}

#[test]
fn a_reader_of_a_shard_not_in_flight_fetches_it_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 1);
    let remote = Arc::new(remote);
    let last = local.shards() - 1;
    // The order's first download hangs at the store; its last shard is needed now.
    store.hold("000000.bin");
    let order: Vec<u64> = (0..local.shards()).collect();
    remote.prefetch_shards(&order, false).unwrap();
    store.wait_until_holding();
    let record = local.len() - 1;
    let (done, finished) = std::sync::mpsc::channel();
    {
        let remote = remote.clone();
        std::thread::spawn(move || done.send(remote.at(record).unwrap().into_owned()));
    }
    // A generous bound that only turns a reader stuck behind the order (the bug
    // this test is about) into a failure rather than a hang.
    let value = finished
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("the reader waited behind the order");
    assert_eq!(value, &*local.at(record).unwrap());
    assert!(!store.released.load(Ordering::SeqCst));
    assert_eq!(store.data_reads(), names(&[0, last]));
    store.release();
    until_idle(&cache);
    assert_eq!(records(&remote), records(&local));
    assert_eq!(store.data_reads().len() as u64, local.shards(), "each once");
}

#[test]
fn the_first_cold_read_starts_fetching_the_other_shards_in_shard_order() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 1);
    let record = local.len() / 2;
    let first = remote.value_location(record).unwrap().shard;
    assert_eq!(&*remote.at(record).unwrap(), &*local.at(record).unwrap());
    until_idle(&cache);
    let reads = store.data_reads();
    assert_eq!(reads.len() as u64, local.shards(), "{reads:?}");
    // The reader's shard, then (one at a time) the others from the next one on.
    let later: Vec<String> = reads
        .iter()
        .filter(|n| **n != names(&[first])[0])
        .cloned()
        .collect();
    let expected: Vec<u64> = (first + 1..local.shards()).chain(0..first).collect();
    assert_eq!(later, names(&expected));
    assert_eq!(records(&remote), records(&local));
    assert_eq!(store.data_reads().len() as u64, local.shards());
}

#[test]
fn a_prefetch_of_zero_fetches_only_what_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 0);
    assert_eq!(remote.prefetch_shards(&[1, 2, 3], true).unwrap(), 0);
    assert_eq!(&*remote.at(5).unwrap(), &*local.at(5).unwrap());
    assert_eq!(store.data_reads(), names(&[0]));
    assert!(!cache.prefetch_status().running);
}

#[test]
fn a_bounded_cache_keeps_the_shards_fetched_ahead_and_unread_within_half_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let sizes = shard_sizes(&local);
    let largest = *sizes.iter().max().unwrap();
    // Room for two of the largest shards ahead of the readers.
    let limit = 4 * largest + 1;
    let (remote, cache) = open(&store, dir.path(), |o| {
        o.prefetch = 1;
        o.limit = Some(limit);
    });
    let order: Vec<u64> = (0..local.shards()).collect();
    // Waiting would need all of them in the cache at once.
    let error = bcd::error_chain(&remote.prefetch_shards(&order, true).unwrap_err());
    assert!(error.contains("more than the cache limit"), "{error}");

    remote.prefetch_shards(&order, false).unwrap();
    let ahead = |n: u64| {
        // The order stops once `n` are fetched and unread (nothing in flight).
        loop {
            let status = cache.prefetch_status();
            if status.fetched == n && status.in_flight == 0 {
                return;
            }
            assert!(status.fetched <= n, "{status:?}");
            std::thread::yield_now();
        }
    };
    let fits = |from: usize| {
        let mut sum = 0;
        order[from..]
            .iter()
            .take_while(|&&s| {
                sum += sizes[s as usize];
                sum <= limit / 2
            })
            .count() as u64
    };
    let first = fits(0);
    assert!(first >= 2, "{first}");
    ahead(first);
    assert_eq!(store.data_reads(), names(&order[..first as usize]));
    // Reading the first shard makes room for the next ones.
    let in_first = (0..local.len()).filter(|&i| local.value_location(i).unwrap().shard == 0);
    for i in in_first {
        assert_eq!(&*remote.at(i).unwrap(), &*local.at(i).unwrap());
    }
    let second = 1 + fits(1);
    ahead(second);
    assert_eq!(store.data_reads(), names(&order[..second as usize]));
    // The rest of the epoch reads right, within the limit (plus the shards just
    // fetched by the reader and ahead of it), each shard fetched once.
    for i in 0..local.len() {
        assert_eq!(
            &*remote.at(i).unwrap(),
            &*local.at(i).unwrap(),
            "record {i}"
        );
        assert!(cache.cached_bytes() <= limit + 2 * largest);
    }
    until_idle(&cache);
    let mut reads = store.data_reads();
    reads.sort();
    assert_eq!(reads, names(&order));
}

/// The sizes of `dataset`'s shard data files.
fn shard_sizes(dataset: &Dataset) -> Vec<u64> {
    (0..dataset.shards())
        .map(|s| std::fs::metadata(dataset.shard_data_path(s)).unwrap().len())
        .collect()
}

/// Every shard of `local` was read from `store` exactly once.
fn assert_each_shard_read_once(store: &FaultStore, local: &Dataset) {
    let mut reads = store.data_reads();
    reads.sort();
    let all: Vec<u64> = (0..local.shards()).collect();
    assert_eq!(reads, names(&all), "each shard once");
}

/// The records of `dataset` in shard `shard`.
fn of_shard(dataset: &Dataset, shard: u64) -> Vec<usize> {
    (0..dataset.len())
        .filter(|&i| dataset.value_location(i).unwrap().shard == shard)
        .collect()
}

/// Reads every record of `shards` through `remote`, checked against `local`.
fn read_shards(remote: &Dataset, local: &Dataset, shards: impl IntoIterator<Item = u64>) {
    for shard in shards {
        for i in of_shard(local, shard) {
            assert_eq!(
                &*remote.at(i).unwrap(),
                &*local.at(i).unwrap(),
                "record {i}"
            );
        }
    }
}

/// A bounded cache of `p/` on `store` prefetching one at a time, its order held
/// at the store on its first shard; returns the cache's dataset and cache.
fn held_order(
    store: &Arc<FaultStore>,
    dir: &Path,
    local: &Dataset,
    limit: u64,
) -> (Dataset, Arc<RemoteCache>) {
    let (remote, cache) = open(store, dir, |o| {
        o.prefetch = 1;
        o.limit = Some(limit);
    });
    store.hold("000000.bin");
    let order: Vec<u64> = (0..local.shards()).collect();
    remote.prefetch_shards(&order, false).unwrap();
    store.wait_until_holding();
    (remote, cache)
}

#[test]
fn an_order_fallen_behind_its_reader_never_fetches_again_what_the_reader_read() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let sizes = shard_sizes(&local);
    let limit = 3 * sizes.iter().max().unwrap() + 1;
    // The order's task is stuck on its first shard (as on a busy machine) while
    // the reader goes on past it, fetching shards 1 to 5 itself.
    let (remote, cache) = held_order(&store, dir.path(), &local, limit);
    read_shards(&remote, &local, 1..=5);
    let read: u64 = sizes[1..=5].iter().sum();
    assert!(
        cache.cached_bytes() < read,
        "some of what was read is evicted"
    );
    store.release();
    // The order passes by the shards behind its reader, evicted or not, and
    // fetches the ones after them; the reader goes on to the end.
    read_shards(&remote, &local, (6..local.shards()).chain([0]));
    until_idle(&cache);
    assert_each_shard_read_once(&store, &local);
}

#[test]
fn an_order_fallen_behind_the_readers_of_another_process_never_fetches_again_what_they_read() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let sizes = shard_sizes(&local);
    let limit = 3 * sizes.iter().max().unwrap() + 1;
    // The order runs in one process (a sampler's), the readers in another (a
    // DataLoader worker): another cache object on the same directory, whose
    // locks and reads it knows only through the cache's files.
    let (_, cache) = held_order(&store, dir.path(), &local, limit);
    let (worker, _worker_cache) = open(&store, dir.path(), |o| {
        o.prefetch = 0;
        o.limit = Some(limit);
    });
    read_shards(&worker, &local, 1..=5);
    // Only the file times tell the order what was read and evicted.
    let read: u64 = sizes[1..=5].iter().sum();
    assert!(
        cache.cached_bytes() < read,
        "some of what was read is evicted"
    );
    store.release();
    read_shards(&worker, &local, (6..local.shards()).chain([0]));
    until_idle(&cache);
    assert_each_shard_read_once(&store, &local);
}

#[test]
fn a_dataset_replaced_remotely_during_a_prefetch_is_never_read_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let first = lookalike(&dir.path().join("first"), 300, false);
    let second = lookalike(&dir.path().join("second"), 300, true);
    assert!(first.shards() > 3);
    let store = FaultStore::new(Arc::new(InMemory::new()), Plan::default());
    let remote_p = || remote_on(store.clone(), "p");
    push(first.path(), &remote_p(), &TransferOptions::default()).unwrap();
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 1);

    // Shard 1's download waits at the store while the prefix is emptied and the
    // other dataset (same names and sizes, other bytes) pushed in its place.
    store.hold("000001.bin");
    let order: Vec<u64> = (0..first.shards()).collect();
    remote.prefetch_shards(&order, false).unwrap();
    store.wait_until_holding();
    empty_prefix(&store.inner);
    push(second.path(), &remote_p(), &TransferOptions::default()).unwrap();
    store.release();
    until_idle(&cache);
    let status = cache.prefetch_status();
    assert!(
        status
            .error
            .as_deref()
            .is_some_and(|e| e.contains("written again")),
        "{status:?}"
    );
    // The open dataset reads the first dataset's records or fails; never the
    // other's.
    let mut read = 0;
    for i in 0..first.len() {
        match remote.at(i) {
            Ok(value) => {
                assert_eq!(&*value, &*first.at(i).unwrap(), "record {i}");
                read += 1;
            }
            Err(e) => assert!(e.to_string().contains("000"), "{e}"),
        }
    }
    assert!(read > 0 && read < first.len(), "{read}");
    drop(remote);
    // Opened again, it is the other dataset throughout.
    let (reopened, _) = open(&store, dir.path(), |o| o.prefetch = 1);
    assert_eq!(records(&reopened), records(&second));
}

#[test]
fn at_most_the_set_number_of_downloads_are_in_flight_in_the_whole_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let n = local.shards() as usize;
    // Two handles on one cache directory, as two processes (the slots are file
    // locks): each prefetches an order of its own, 3 at once in all.
    let (first, first_cache) = open(&store, dir.path(), |o| o.prefetch = 3);
    let (second, second_cache) = open(&store, dir.path(), |o| o.prefetch = 3);
    store.gate();
    let order: Vec<u64> = (0..n as u64).collect();
    let reversed: Vec<u64> = order.iter().rev().copied().collect();
    assert_eq!(first.prefetch_shards(&order, false).unwrap(), n);
    assert_eq!(second.prefetch_shards(&reversed, false).unwrap(), n);
    // The reads that reach the store wait there; each one let through frees a
    // slot for the next shard of either order.
    store.wait_for_arrivals(3);
    let in_flight =
        || first_cache.prefetch_status().in_flight + second_cache.prefetch_status().in_flight;
    assert!(in_flight() <= 3, "{}", in_flight());
    for admitted in 1..=n - 3 {
        store.admit(1);
        store.wait_for_arrivals(3 + admitted);
        assert!(in_flight() <= 3, "{}", in_flight());
    }
    store.admit(3);
    until_idle(&first_cache);
    until_idle(&second_cache);
    assert_eq!(store.arrived.load(Ordering::SeqCst), n, "each shard once");
    assert_eq!(store.most_at_gate.load(Ordering::SeqCst), 3);
    let mut reads = store.data_reads();
    reads.sort();
    assert_eq!(reads, names(&order));
    assert_eq!(first_cache.cached_bytes(), local.stored_bytes());
    assert_eq!(records(&first), records(&local));
    assert_eq!(records(&second), records(&local));
}

#[test]
fn a_failed_download_stops_the_order_with_its_error_and_the_readers_fetch_their_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (local, store) = pushed(dir.path());
    let (remote, cache) = open(&store, dir.path(), |o| o.prefetch = 2);
    let remote = Arc::new(remote);
    let order: Vec<u64> = (0..local.shards()).collect();
    store.fail(Some("000004.bin"));
    let error = bcd::error_chain(&remote.prefetch_shards(&order, true).unwrap_err());
    assert!(
        error.contains("000004.bin") && error.contains("the server is gone"),
        "{error}"
    );
    let status = cache.prefetch_status();
    assert!(!status.running && status.in_flight == 0, "{status:?}");
    assert!(
        status
            .error
            .as_deref()
            .is_some_and(|e| e.contains("000004.bin")),
        "{status:?}"
    );
    // What is under shard names is whole; nothing partial is left.
    let data = cache.mirror().join("data");
    for entry in std::fs::read_dir(&data).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(!name.contains(".tmp"), "{name}");
        if let Some(shard) = name.strip_suffix(".bin") {
            let expected = std::fs::read(local.shard_data_path(shard.parse().unwrap())).unwrap();
            assert_eq!(std::fs::read(data.join(&name)).unwrap(), expected, "{name}");
        }
    }
    assert!(cache.cached_bytes() < local.stored_bytes());

    // A reader waiting for a download in flight that fails is not left waiting:
    // it fetches the shard itself, and gets that error while the store fails.
    let record = (0..local.len())
        .find(|&i| local.value_location(i).unwrap().shard == 4)
        .unwrap();
    store.hold("000004.bin");
    remote.prefetch_shards(&[4], false).unwrap();
    store.wait_until_holding();
    let reader = {
        let remote = remote.clone();
        std::thread::spawn(move || remote.at(record).map(|v| v.into_owned()))
    };
    while cache.prefetch_status().waiting != 1 {
        std::thread::yield_now();
    }
    store.release();
    let error = reader.join().unwrap().unwrap_err().to_string();
    assert!(error.contains("000004"), "{error}");
    until_idle(&cache);

    // Once the store answers again, every record reads right and an order
    // fetches what is missing.
    store.fail(None);
    assert_eq!(&*remote.at(record).unwrap(), &*local.at(record).unwrap());
    assert!(remote.prefetch_shards(&order, true).unwrap() > 0);
    assert_eq!(cache.cached_bytes(), local.stored_bytes());
    assert_eq!(records(&remote), records(&local));
    let reads = store.data_reads();
    assert_eq!(
        reads.iter().filter(|n| *n == "000004.bin").count(),
        4,
        "{reads:?}"
    );
}
