//! The shared, bounded local cache of a remote dataset: shards fetched once, on
//! first read, whole; least recently used ones evicted past the limit; a newer
//! remote manifest picked up by a refresh.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bcd::{Compression, Dataset};
use bcd_remote::cache::{open_cache, refresh, CacheOptions, RemoteCache};
use bcd_remote::{pull, push, TransferOptions};
use common::*;
use object_store::memory::InMemory;

fn records(dataset: &Dataset) -> Vec<Vec<u8>> {
    (0..dataset.len())
        .map(|i| dataset.at(i).unwrap().into_owned())
        .collect()
}

/// Pushes the dataset at `dir` to `p/` of `memory`.
fn push_to(memory: &Arc<InMemory>, dir: &std::path::Path) {
    push(
        dir,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
}

/// Opens `p/` of `memory` through the cache of `options`.
fn open_from(memory: &Arc<InMemory>, options: &CacheOptions) -> (Dataset, Arc<RemoteCache>) {
    let remote = memory_remote(memory.clone(), "p");
    open_cache(Arc::new(RemoteCache::with_remote(remote, options).unwrap())).unwrap()
}

#[test]
fn shards_are_fetched_once_on_first_read_and_shared() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let local = dataset(&source, true, Compression::Lz4, 300, 3000);
    let store = pushed_to_store(&source);
    let options = CacheOptions::new(dir.path().join("cache"));
    let data_bytes = local.stored_bytes();

    let before = store.bytes_read.load(Ordering::SeqCst);
    let cache =
        Arc::new(RemoteCache::with_remote(remote_on(store.clone(), "p"), &options).unwrap());
    let (remote, cache) = open_cache(cache).unwrap();
    assert_eq!(remote.len(), local.len());
    // Opening a keyed dataset read every key once, fetching the shards, and wrote
    // the persisted index into the mirror.
    assert!(remote.uses_index_file());
    assert_eq!(records(&remote), records(&local));
    for i in [0, 17, 299] {
        let key = local.key_at(i).unwrap();
        assert_eq!(remote.position(key).unwrap(), Some(i));
    }
    let first = store.bytes_read.load(Ordering::SeqCst) - before;
    assert!(
        first >= data_bytes && first < data_bytes + data_bytes / 2,
        "{first} for {data_bytes}"
    );
    assert_eq!(cache.cached_bytes(), data_bytes);

    // A second reader of the same cache (another worker) downloads no shard.
    let before = store.bytes_read.load(Ordering::SeqCst);
    let other =
        Arc::new(RemoteCache::with_remote(remote_on(store.clone(), "p"), &options).unwrap());
    let (again, _) = open_cache(other).unwrap();
    assert_eq!(records(&again), records(&local));
    let second = store.bytes_read.load(Ordering::SeqCst) - before;
    assert!(second < 2000, "only the manifest: {second}");
    // A mirror is read-only.
    let mut again = again;
    assert!(again.extend([(b"x".as_slice(), b"y".as_slice())]).is_err());
}

#[test]
fn a_cache_over_its_limit_evicts_and_still_returns_the_right_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let local = dataset(&source, false, Compression::None, 400, 2000);
    assert!(local.shards() > 5);
    let store = pushed_to_store(&source);
    let options = CacheOptions {
        limit: Some(4500),
        ..CacheOptions::new(dir.path().join("cache"))
    };
    let cache =
        Arc::new(RemoteCache::with_remote(remote_on(store.clone(), "p"), &options).unwrap());
    let (remote, cache) = open_cache(cache).unwrap();
    // Two passes in opposite orders, through fresh handles (as new workers): every
    // value right, the cache never past its limit plus the shard just fetched.
    for pass in 0..2 {
        let (reader, _) = open_cache(cache.clone()).unwrap();
        let mut order: Vec<usize> = (0..local.len()).collect();
        if pass == 1 {
            order.reverse();
        }
        for i in order {
            assert_eq!(
                &*reader.at(i).unwrap(),
                &*local.at(i).unwrap(),
                "record {i}"
            );
            assert!(cache.cached_bytes() <= 4500 + 2000);
        }
    }
    assert_eq!(remote.len(), local.len());
}

#[test]
fn refresh_sees_a_newer_remote_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut local = dataset(&source, true, Compression::Lz4, 50, 1000);
    let memory = Arc::new(InMemory::new());
    push(
        &source,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    let options = CacheOptions::new(dir.path().join("cache"));
    let cache =
        Arc::new(RemoteCache::with_remote(memory_remote(memory.clone(), "p"), &options).unwrap());
    let (mut remote, cache) = open_cache(cache).unwrap();
    assert_eq!(remote.len(), 50);
    append(&mut local, 50..120);
    push(
        &source,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    assert_eq!(remote.len(), 50, "nothing changes until a refresh");
    refresh(&mut remote, &cache).unwrap();
    assert_eq!(remote.len(), 120);
    assert_eq!(records(&remote), records(&local));
    assert_eq!(remote.position(b"k119").unwrap(), Some(119));
}

#[test]
fn a_mirror_current_for_the_remote_manifest_opens_with_one_request() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut local = dataset(&source, true, Compression::Lz4, 200, 1500);
    let store = pushed_to_store(&source);
    let options = CacheOptions::new(dir.path().join("cache"));
    let open = || {
        let cache =
            Arc::new(RemoteCache::with_remote(remote_on(store.clone(), "p"), &options).unwrap());
        open_cache(cache).unwrap()
    };
    let requests = || {
        (
            store.gets.load(Ordering::SeqCst),
            store.lists.load(Ordering::SeqCst),
        )
    };
    let (first, _) = open();
    assert_eq!(records(&first), records(&local));

    // Every later open (each DataLoader worker, each epoch) reads the manifest and
    // finds the mirror complete for it: no listing, no other request.
    let (gets, lists) = requests();
    let (again, _) = open();
    assert_eq!(requests(), (gets + 1, lists));
    assert_eq!(records(&again), records(&local));

    // A new commit is picked up in full by the next open.
    append(&mut local, 200..260);
    push(
        &source,
        &remote_on(store.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    let (gets, lists) = requests();
    let (newer, cache) = open();
    assert!(requests().1 > lists, "the changed remote is listed");
    assert!(requests().0 > gets + 1);
    assert_eq!(records(&newer), records(&local));
    for shard in 0..local.shards() {
        let name = format!("{shard:06}.stats.json");
        assert_eq!(
            std::fs::read(cache.mirror().join(&name)).unwrap(),
            std::fs::read(source.join(&name)).unwrap()
        );
    }
}

#[test]
fn a_prefix_pushed_again_with_other_data_is_not_read_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let first = lookalike(&dir.path().join("first"), 120, false);
    let second = lookalike(&dir.path().join("second"), 120, true);
    assert!(first.shards() > 1);
    assert_eq!(
        std::fs::read(first.path().join("manifest.json")).unwrap(),
        std::fs::read(second.path().join("manifest.json")).unwrap(),
        "the two manifests are the same bytes"
    );
    let memory = Arc::new(InMemory::new());
    push_to(&memory, first.path());
    let options = CacheOptions::new(dir.path().join("cache"));
    let (cached, _) = open_from(&memory, &options);
    assert_eq!(records(&cached), records(&first));
    drop(cached);

    // The prefix is emptied and the other dataset pushed in its place.
    empty_prefix(&memory);
    push_to(&memory, second.path());

    let (reopened, cache) = open_from(&memory, &options);
    assert_eq!(records(&reopened), records(&second));
    assert_eq!(
        std::fs::read(cache.mirror().join("000000.stats.json")).unwrap(),
        b"{\"SHARD\": 0}"
    );
}

/// A keyed dataset of `n` records whose keys and values depend on `upper` but
/// whose sizes (and so every file's size) do not.
fn keyed_lookalike(dir: &std::path::Path, n: usize, upper: bool) {
    let options = bcd::CreateOptions {
        keyed: true,
        compression: Compression::None,
        max_shard_size: 700,
    };
    let text = |s: String| match upper {
        true => s.to_uppercase().into_bytes(),
        false => s.into_bytes(),
    };
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
        .map(|i| (text(format!("key {i:04}")), text(format!("value {i:04}"))))
        .collect();
    let mut dataset = Dataset::create(dir, options).unwrap();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
}

/// Opens the dataset at `dir`, writing its persisted index when `indexed`
/// (which a push then carries).
fn open_indexed(dir: &std::path::Path, indexed: bool) -> Dataset {
    let options = bcd::OpenOptions {
        index_file_min_records: Some(if indexed { 0 } else { u64::MAX }),
        ..bcd::OpenOptions::default()
    };
    let dataset = Dataset::open_with(dir, options, Arc::new(bcd::storage::FileSystem)).unwrap();
    assert_eq!(dataset.uses_index_file(), indexed);
    dataset
}

/// A persisted index is a table from keys to records: one of shards since
/// replaced (by a dataset of the same sizes, so neither sizes nor the times
/// the files' times can tell: the second dataset's are set to the first's)
/// must never answer for the new ones, whether the index came with the remote
/// or a reader built it here.
#[test]
fn a_persisted_index_of_replaced_shards_never_answers_for_the_new_ones() {
    for remote_index in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        keyed_lookalike(&first, 120, false);
        keyed_lookalike(&second, 120, true);
        for name in std::fs::read_dir(&first).unwrap() {
            let name = name.unwrap().file_name();
            let time = std::fs::metadata(first.join(&name))
                .unwrap()
                .modified()
                .unwrap();
            let file = std::fs::File::options()
                .write(true)
                .open(second.join(&name))
                .unwrap();
            file.set_modified(time).unwrap();
        }
        let first = open_indexed(&first, remote_index);
        let second = open_indexed(&second, remote_index);
        assert!(first.shards() > 1);
        let memory = Arc::new(InMemory::new());
        let options = CacheOptions::new(dir.path().join("cache"));
        let check = |cached: &Dataset, expected: &Dataset, other: &Dataset| {
            assert!(cached.uses_index_file(), "remote index: {remote_index}");
            assert_eq!(records(cached), records(expected));
            for i in 0..expected.len() {
                let key = expected.key_at(i).unwrap();
                assert_eq!(
                    cached.position(key).unwrap(),
                    Some(i),
                    "remote index: {remote_index}"
                );
                let gone = other.key_at(i).unwrap();
                assert_eq!(
                    cached.position(gone).unwrap(),
                    None,
                    "remote index: {remote_index}"
                );
            }
        };
        push_to(&memory, first.path());
        let (cached, cache) = open_from(&memory, &options);
        assert!(cache.mirror().join(".bcd-index").is_file());
        check(&cached, &first, &second);
        drop((cached, cache));

        empty_prefix(&memory);
        push_to(&memory, second.path());
        let (cached, _) = open_from(&memory, &options);
        check(&cached, &second, &first);
    }
}

/// A cold open takes the time the persisted index checks of each shard's
/// data file from the shard's `.idx` (which the push wrote after the data,
/// naming the data object's ETag): it asks nothing of the data objects. Once a
/// data object is written again (another ETag, even with the same bytes), the
/// `.idx` no longer speaks for it and the object's own metadata is read.
#[test]
fn a_cold_open_asks_nothing_of_the_data_objects_the_idx_speaks_for() {
    use object_store::{ObjectStore, ObjectStoreExt, PutOptions};
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    keyed_lookalike(&source, 120, false);
    let local = open_indexed(&source, true);
    let store = pushed_to_store(&source);
    let open = |name: &str| {
        let options = CacheOptions::new(dir.path().join(name));
        let cache =
            Arc::new(RemoteCache::with_remote(remote_on(store.clone(), "p"), &options).unwrap());
        let heads = store.heads.load(Ordering::SeqCst);
        let reads = store.data_reads().len();
        let (cached, _) = open_cache(cache).unwrap();
        let heads = store.heads.load(Ordering::SeqCst) - heads;
        let data_read = store.data_reads()[reads..]
            .iter()
            .any(|n| n.ends_with(".bin"));
        // The remote's index was used: building one reads every shard's keys.
        assert!(cached.uses_index_file() && !data_read, "{name}");
        assert_eq!(records(&cached), records(&local));
        for i in [0, 57, 119] {
            assert_eq!(cached.position(local.key_at(i).unwrap()).unwrap(), Some(i));
        }
        heads
    };
    assert_eq!(open("cold"), 0, "no data object asked at a cold open");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for shard in 0..local.shards() {
        let path = object_store::path::Path::from(format!("p/{shard:06}.bin"));
        let got = runtime.block_on(store.inner.get(&path)).unwrap();
        let attributes = got.attributes.clone();
        let bytes = runtime.block_on(got.bytes()).unwrap();
        let options = PutOptions {
            attributes,
            ..PutOptions::default()
        };
        runtime
            .block_on(store.inner.put_opts(&path, bytes.into(), options))
            .unwrap();
    }
    assert_eq!(
        open("rewritten") as u64,
        local.shards(),
        "one request a data object the .idx no longer speaks for"
    );
}

#[test]
fn fingerprints_read_the_edges_of_uncached_shards_without_fetching_them() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    // Keyless: opening it reads no keys, so no shard is fetched before the
    // fingerprints are asked for.
    let local = dataset(&source, false, Compression::None, 3000, 20_000);
    assert!(local.shards() > 2);
    let store = pushed_to_store(&source);
    let options = CacheOptions::new(dir.path().join("cache"));
    let cache =
        Arc::new(RemoteCache::with_remote(remote_on(store.clone(), "p"), &options).unwrap());
    let (remote, cache) = open_cache(cache).unwrap();
    let before = store.bytes_read.load(Ordering::SeqCst);
    let cached = cache.cached_bytes();
    for shard in 0..local.shards() {
        assert_eq!(
            remote.shard_fingerprint(shard).unwrap(),
            local.shard_fingerprint(shard).unwrap(),
            "shard {shard}"
        );
    }
    let read = store.bytes_read.load(Ordering::SeqCst) - before;
    assert!(
        read <= local.shards() * 2 * bcd::format::FINGERPRINT_EDGE_BYTES as u64,
        "{read} bytes read for the fingerprints of {} shards",
        local.shards()
    );
    assert_eq!(cache.cached_bytes(), cached, "no shard fetched");
    // Once a shard is cached its fingerprint comes from the copy.
    assert_eq!(records(&remote), records(&local));
    let before = store.bytes_read.load(Ordering::SeqCst);
    assert_eq!(
        remote.shard_fingerprint(0).unwrap(),
        local.shard_fingerprint(0).unwrap()
    );
    assert_eq!(store.bytes_read.load(Ordering::SeqCst), before);
}

#[test]
fn files_pushed_beside_an_unchanged_manifest_reach_a_current_cache() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    dataset(&source, true, Compression::Lz4, 50, 1000);
    // The remote first gets the dataset without one of its sidecars (pushed by a
    // version that did not write them, say).
    let sidecar = source.join("000000.stats.json");
    let kept = std::fs::read(&sidecar).unwrap();
    std::fs::remove_file(&sidecar).unwrap();
    let memory = Arc::new(InMemory::new());
    let remote = || memory_remote(memory.clone(), "p");
    push(&source, &remote(), &TransferOptions::default()).unwrap();
    let options = CacheOptions::new(dir.path().join("cache"));
    let open = || {
        open_cache(Arc::new(
            RemoteCache::with_remote(remote(), &options).unwrap(),
        ))
        .unwrap()
    };
    let (_, cache) = open();
    assert!(!cache.mirror().join("000000.stats.json").exists());

    std::fs::write(&sidecar, &kept).unwrap();
    let summary = push(&source, &remote(), &TransferOptions::default()).unwrap();
    assert_eq!(summary.files, 1);
    assert!(summary.committed, "the unchanged manifest is written again");
    let (_, cache) = open();
    assert_eq!(
        std::fs::read(cache.mirror().join("000000.stats.json")).unwrap(),
        kept
    );
    // And a push with nothing to upload writes nothing.
    let again = push(&source, &remote(), &TransferOptions::default()).unwrap();
    assert_eq!((again.files, again.committed), (0, false));
}

#[test]
fn a_dataset_under_a_prefix_of_any_legal_characters_opens_through_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let local = dataset(&source, true, Compression::Lz4, 120, 1500);
    let memory = Arc::new(InMemory::new());
    let prefix = "données/数据 #1/100%";
    // Uploaded by another tool: the keys as written, no checksums.
    for (name, bytes) in files(&source) {
        let key = object_store::path::Path::parse(format!("{prefix}/{name}")).unwrap();
        futures::executor::block_on(object_store::ObjectStoreExt::put(
            memory.as_ref(),
            &key,
            bytes.into(),
        ))
        .unwrap();
    }
    let options = CacheOptions::new(dir.path().join("cache"));
    let cache = Arc::new(
        RemoteCache::with_remote(memory_remote(memory.clone(), prefix), &options).unwrap(),
    );
    let (remote, _) = open_cache(cache).unwrap();
    assert_eq!(records(&remote), records(&local));
}

#[test]
fn cached_shards_are_kept_or_dropped_by_their_checksums_never_their_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let first = lookalike(&dir.path().join("first"), 120, false);
    let second = lookalike(&dir.path().join("second"), 120, true);
    let store = FaultStore::new(Arc::new(InMemory::new()), Plan::default());
    let remote = || remote_on(store.clone(), "p");
    push(first.path(), &remote(), &TransferOptions::default()).unwrap();
    let options = CacheOptions::new(dir.path().join("cache"));
    let open = || {
        let cache = Arc::new(RemoteCache::with_remote(remote(), &options).unwrap());
        open_cache(cache).unwrap()
    };
    let (cached, cache) = open();
    assert_eq!(records(&cached), records(&first));
    assert_eq!(cache.cached_bytes(), first.stored_bytes());
    drop(cached);

    // The same files pushed again (new writes, same bytes): the cached shards
    // are the same files, and none is downloaded again.
    empty_prefix(&store.inner);
    push(first.path(), &remote(), &TransferOptions::default()).unwrap();
    let before = store.bytes_read.load(Ordering::SeqCst);
    let (cached, _) = open();
    assert_eq!(records(&cached), records(&first));
    let read = store.bytes_read.load(Ordering::SeqCst) - before;
    assert!(read < first.stored_bytes() / 2, "{read} bytes read again");
    drop(cached);

    // The record of the writes lost (a cache of an older version), and other
    // data of the same sizes pushed: nothing of the old is read.
    std::fs::remove_file(cache.mirror().join(".bcd-remote-versions.json")).unwrap();
    empty_prefix(&store.inner);
    push(second.path(), &remote(), &TransferOptions::default()).unwrap();
    let (reopened, _) = open();
    assert_eq!(records(&reopened), records(&second));
}

#[test]
fn content_hashes_built_after_a_push_travel_by_push_pull_and_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut local = dataset(&source, true, Compression::Lz4, 200, 1500);
    let hashes = |dir: &std::path::Path, shards: u64| -> Vec<Option<Vec<u8>>> {
        (0..shards)
            .map(|shard| std::fs::read(dir.join(format!("{shard:06}.xxh128"))).ok())
            .collect()
    };
    // Pushed, and cached, before the dataset has content hashes.
    let memory = Arc::new(InMemory::new());
    let remote = || memory_remote(memory.clone(), "p");
    push(&source, &remote(), &TransferOptions::default()).unwrap();
    let options = CacheOptions::new(dir.path().join("cache"));
    let open = || {
        open_cache(Arc::new(
            RemoteCache::with_remote(remote(), &options).unwrap(),
        ))
        .unwrap()
    };
    let (mut cached, _) = open();
    assert!(cached.set_verify_content(true).is_err(), "no hashes yet");

    // `bcd dedup-index`: one file per shard beside an unchanged manifest.
    local.build_content_hashes().unwrap();
    let shards = local.shards();
    assert!(shards > 1);
    let built = hashes(&source, shards);
    assert!(built.iter().all(Option::is_some));
    let summary = push(&source, &remote(), &TransferOptions::default()).unwrap();
    assert_eq!(summary.files, shards);
    assert!(summary.committed, "the manifest is written again");

    // A current cache mirrors them, and reads checking values work through it.
    let (mut cached, cache) = open();
    assert_eq!(hashes(cache.mirror(), shards), built);
    cached.set_verify_content(true).unwrap();
    assert_eq!(records(&cached), records(&local));
    assert!(cached.verify_content().is_empty());

    // A pull brings them too, and the copy's values check against them.
    let copy = dir.path().join("copy");
    pull(&remote(), &copy, &TransferOptions::default()).unwrap();
    assert_eq!(hashes(&copy, shards), built);
    let pulled = Dataset::open(&copy).unwrap();
    assert!(pulled.verify_content().is_empty());

    // An append to the hashed dataset writes the new shards' hashes, which
    // travel with their shards.
    append(&mut local, 200..260);
    let more = local.shards();
    assert!(hashes(&source, more).iter().all(Option::is_some));
    push(&source, &remote(), &TransferOptions::default()).unwrap();
    pull(&remote(), &copy, &TransferOptions::default()).unwrap();
    assert_eq!(hashes(&copy, more), hashes(&source, more));
    let (_, cache) = open();
    assert_eq!(hashes(cache.mirror(), more), hashes(&source, more));
    assert_eq!(files(&copy), files(&source));
}
