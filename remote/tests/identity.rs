//! What makes a local file and an object the same file: their content checksums,
//! never their sizes. Push and pull between datasets whose shards have the same
//! sizes but other bytes, a corrected re-ingest pushed over its old prefix, and
//! a push killed mid-way whose leftovers the next run recognises as its own.

mod common;

use std::path::Path;
use std::sync::Arc;

use bcd::{Compression, CreateOptions, Dataset};
use bcd_remote::{pull, push, RemoteError, TransferOptions};
use common::*;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    Attribute, AttributeValue, Attributes, ObjectStore, ObjectStoreExt, PutOptions, PutPayload,
};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// Names of the objects directly under `prefix/`, and their bytes.
fn remote_files(memory: &InMemory, prefix: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
    use futures::TryStreamExt;
    block_on(async {
        let listed: Vec<_> = memory
            .list(Some(&ObjectPath::from(prefix)))
            .try_collect()
            .await
            .unwrap();
        let mut files = std::collections::BTreeMap::new();
        for meta in listed {
            let name = meta.location.as_ref()[prefix.len() + 1..].to_owned();
            let bytes = memory.get(&meta.location).await.unwrap().bytes().await;
            files.insert(name, bytes.unwrap().to_vec());
        }
        files
    })
}

/// Records of [`spelled`] that fill a shard (13 bytes each, at most 600 a shard).
const FULL: usize = 46;

/// A keyed, uncompressed dataset of `records` records in shards of 600 bytes,
/// whose values are spelled in `case` ("value" or "VALUE"): two datasets of the
/// same count and other cases have shards of the same sizes and other bytes.
fn spelled(dir: &Path, case: &str, records: usize) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        compression: Compression::None,
        max_shard_size: 600,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..records)
        .map(|i| {
            (
                format!("k{i:03}").into_bytes(),
                format!("{case} {i:03}").into_bytes(),
            )
        })
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    dataset
}

/// The bytes a pull of the remote gives.
fn pulled(
    memory: &Arc<InMemory>,
    prefix: &str,
    dir: &Path,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    pull(
        &memory_remote(memory.clone(), prefix),
        dir,
        &TransferOptions::default(),
    )
    .unwrap();
    files(dir)
}

fn replacing() -> TransferOptions {
    TransferOptions {
        replace: true,
        ..TransferOptions::default()
    }
}

#[test]
fn a_push_over_another_dataset_of_the_same_sizes_is_refused_and_never_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    let first = spelled(&a, "value", FULL * 2);
    // B: the same sizes for A's shards, other bytes, and more shards.
    let second = spelled(&b, "VALUE", FULL * 3);
    assert!(first.shards() >= 2 && second.shards() > first.shards());
    for shard in 0..first.shards() {
        let name = format!("{shard:06}.bin");
        let (x, y) = (
            std::fs::read(a.join(&name)).unwrap(),
            std::fs::read(b.join(&name)).unwrap(),
        );
        assert_eq!(x.len(), y.len());
        assert_ne!(x, y);
    }
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&a, &remote, &TransferOptions::default()).unwrap();
    let before = remote_files(&memory, "p");

    let error = push(&b, &remote, &TransferOptions::default()).unwrap_err();
    assert!(matches!(error, RemoteError::Diverged { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("000000.bin")
            && message.contains("different datasets")
            && message.contains("replace"),
        "{message}"
    );
    // Nothing of B reached the remote, which still reads as A.
    assert_eq!(remote_files(&memory, "p"), before);
    assert_eq!(pulled(&memory, "p", &dir.path().join("still-a")), files(&a));

    // Asked to, the push replaces A with B whole: exactly B's files.
    let summary = push(&b, &remote, &replacing()).unwrap();
    assert!(summary.committed);
    assert_eq!(remote_files(&memory, "p"), files(&b));
    assert_eq!(pulled(&memory, "p", &dir.path().join("now-b")), files(&b));
    assert_eq!(
        bcd_test_support::read_all(&Dataset::open(dir.path().join("now-b")).unwrap()),
        bcd_test_support::read_all(&second)
    );
}

#[test]
fn a_replace_cut_off_midway_leaves_no_dataset_and_its_rerun_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    spelled(&a, "value", FULL * 2);
    spelled(&b, "VALUE", FULL * 3);
    let store = pushed_to_store(&a);
    // The server goes away after the first upload of the replace (B's first
    // data file: the index files of A and B are the same bytes, and stay).
    store.replan(Plan {
        writes_before_failure: Some(1),
        ..Plan::default()
    });
    let options = TransferOptions {
        concurrency: 1,
        ..replacing()
    };
    push(&b, &remote_on(store.clone(), "p"), &options).unwrap_err();
    store.replan(Plan::default());
    // Never a mix of the two: no dataset at all.
    let error = pull(
        &remote_on(store.clone(), "p"),
        &dir.path().join("x"),
        &TransferOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(error, RemoteError::NotADataset { .. }),
        "{error:?}"
    );
    // A push that does not replace does not take A's files for its own.
    let error = push(
        &b,
        &remote_on(store.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(error, RemoteError::Conflict { .. }), "{error:?}");
    push(&b, &remote_on(store.clone(), "p"), &replacing()).unwrap();
    assert_eq!(remote_files(store.inner.as_ref(), "p"), files(&b));
}

#[test]
fn a_corrected_reingest_over_its_old_prefix_is_refused_then_replaced_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old");
    let new = dir.path().join("new");
    // The same records; the files beside the shards (labels) corrected, at the
    // same sizes.
    let dataset = dataset(&old, true, Compression::Lz4, 80, 900);
    std::fs::create_dir(&new).unwrap();
    for (name, bytes) in files(&old) {
        let bytes = match name.ends_with(".stats.json") {
            true => String::from_utf8(bytes)
                .unwrap()
                .replace("shard", "SHARD")
                .into_bytes(),
            false => bytes,
        };
        std::fs::write(new.join(name), bytes).unwrap();
    }
    assert!(dataset.shards() >= 2);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&old, &remote, &TransferOptions::default()).unwrap();
    let before = remote_files(&memory, "p");

    let error = push(&new, &remote, &TransferOptions::default()).unwrap_err();
    assert!(
        error.to_string().contains("000000.stats.json")
            && error.to_string().contains("different datasets"),
        "{error}"
    );
    assert_eq!(remote_files(&memory, "p"), before);

    push(&new, &remote, &replacing()).unwrap();
    assert_eq!(remote_files(&memory, "p"), files(&new));
    assert_eq!(pulled(&memory, "p", &dir.path().join("copy")), files(&new));
}

#[test]
fn a_pull_into_a_dataset_of_the_same_sizes_but_other_bytes_is_refused_and_never_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    spelled(&a, "value", FULL * 3);
    // The local dataset: fewer shards, of the remote's sizes, other bytes.
    spelled(&b, "VALUE", FULL * 2);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&a, &remote, &TransferOptions::default()).unwrap();
    let before = files(&b);

    let error = pull(&remote, &b, &TransferOptions::default()).unwrap_err();
    assert!(matches!(error, RemoteError::Diverged { .. }), "{error:?}");
    assert!(
        error.to_string().contains("000000.bin")
            && error.to_string().contains("different datasets"),
        "{error}"
    );
    // Left as it was: no shard of the remote's was added or committed.
    assert_eq!(files(&b), before);
    // Asked to, the pull replaces it whole, leaving nothing beside it.
    let summary = pull(&remote, &b, &replacing()).unwrap();
    assert!(summary.committed);
    assert_eq!(files(&b), files(&a));
    let mut beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["a", "b"]);
    // An earlier state of the remote's dataset is brought up to it, ending with
    // the remote's bytes.
    let earlier = dir.path().join("earlier");
    spelled(&earlier, "value", FULL * 2);
    pull(&remote, &earlier, &TransferOptions::default()).unwrap();
    assert_eq!(files(&earlier), files(&a));
}

/// The attributes an upload of `bytes` carries (its checksum).
fn stamped(bytes: &[u8]) -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(
        Attribute::Metadata(bcd_remote::CHECKSUM_KEY.into()),
        AttributeValue::from(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes))),
    );
    attributes
}

/// A hook that writes `bytes` (with their checksum) as object `key`.
fn lands(key: String, bytes: Vec<u8>) -> Hook {
    Box::new(move |store: &InMemory| {
        let options = PutOptions {
            attributes: stamped(&bytes),
            ..PutOptions::default()
        };
        futures::executor::block_on(store.put_opts(
            &ObjectPath::from(key),
            PutPayload::from(bytes),
            options,
        ))
        .unwrap();
    })
}

/// Options with large files in parts, two requests at a time.
fn in_parts(concurrency: usize) -> TransferOptions {
    TransferOptions {
        concurrency,
        multipart_threshold: 600,
        part_size: 256,
        ..TransferOptions::default()
    }
}

#[test]
fn a_push_that_fails_aborts_its_multipart_uploads_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::None, 40, 1000);
    let store = pushed_to_store(&source);
    let shards = dataset.shards();
    append(&mut dataset, 40..55);
    assert_eq!(dataset.shards(), shards + 1);
    // While the new shard's data file goes in parts, another writer's object
    // takes the name of a file beside it (the shard's `.idx` goes after its
    // data, so the sidecar uploaded with it).
    let index = format!("{shards:06}.stats.json");
    store.replan(Plan {
        before_put: Some((
            index.clone(),
            lands(format!("p/{index}"), b"other".to_vec()),
        )),
        hold_multipart: true,
        ..Plan::default()
    });
    let error = push(&source, &remote_on(store.clone(), "p"), &in_parts(2)).unwrap_err();
    assert!(matches!(error, RemoteError::Conflict { .. }), "{error:?}");
    assert!(error.to_string().contains(&index), "{error}");
    // The upload in flight was stopped and aborted, not left open.
    assert!(store.open_uploads.lock().unwrap().is_empty());
}

#[test]
fn a_push_killed_mid_way_is_completed_by_its_rerun_leaving_no_upload_open() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::None, 40, 1000);
    let store = pushed_to_store(&source);
    let shards = dataset.shards();
    append(&mut dataset, 40..100);
    assert!(dataset.shards() >= shards + 2);

    // The files the push uploads, in its order (by name, each shard's `.idx`
    // after every other file), and the writes each takes: a journal entry, the
    // parts and the completion for a file in parts, else one.
    let mut new_files: Vec<(String, u64)> = files(&source)
        .into_iter()
        .filter(|(name, _)| {
            name != "manifest.json"
                && block_on(store.inner.head(&ObjectPath::from(format!("p/{name}")))).is_err()
        })
        .map(|(name, bytes)| (name, bytes.len() as u64))
        .collect();
    new_files.sort_by_key(|(name, _)| name.ends_with(".idx"));
    let options = in_parts(1);
    let in_parts_ = |size: u64| size > options.multipart_threshold;
    let writes = |size: u64| match in_parts_(size) {
        true => 2 + size.div_ceil(options.part_size) as usize,
        false => 1,
    };
    // Killed in the last file that goes in parts, after its journal entry and
    // first part: every later request fails, and so does every abort.
    let cut = new_files
        .iter()
        .rposition(|(_, size)| in_parts_(*size))
        .unwrap();
    assert!(cut > 0, "{new_files:?}");
    let before: usize = new_files[..cut].iter().map(|(_, size)| writes(*size)).sum();
    store.replan(Plan {
        writes_before_failure: Some(before + 2),
        fail_aborts: true,
        ..Plan::default()
    });
    let error = push(&source, &remote_on(store.clone(), "p"), &options).unwrap_err();
    let uploaded = remote_files(store.inner.as_ref(), "p");
    assert_eq!(
        store.open_uploads.lock().unwrap().len(),
        1,
        "one upload was cut off ({error}): {:?}",
        uploaded.keys()
    );
    for (name, _) in &new_files[..cut] {
        assert!(uploaded.contains_key(name), "{name}");
    }

    // The rerun: a request of the killed run lands after the rerun listed the
    // prefix, writing the next file (the same bytes) first.
    let (next, _) = new_files[cut + 1..]
        .iter()
        .find(|(_, size)| !in_parts_(*size))
        .unwrap();
    let bytes = std::fs::read(source.join(next)).unwrap();
    store.replan(Plan {
        before_put: Some((next.clone(), lands(format!("p/{next}"), bytes))),
        hold_multipart: true,
        ..Plan::default()
    });
    let summary = push(&source, &remote_on(store.clone(), "p"), &in_parts(2)).unwrap();
    assert!(summary.committed);
    assert!(
        summary.skipped > 0,
        "the killed run's uploads are kept: {summary:?}"
    );
    assert!(store.open_uploads.lock().unwrap().is_empty());
    let names: Vec<String> = remote_files(store.inner.as_ref(), "p")
        .into_keys()
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".bcd-uploads")),
        "{names:?}"
    );
    let copy = dir.path().join("copy");
    pull(&remote_on(store, "p"), &copy, &TransferOptions::default()).unwrap();
    assert_eq!(files(&copy), files(&source));
}

/// The dataset `spelled(dir, "value", FULL * 2)` pushed to `p`, then grown by
/// a third shard: the next push finds shards 0 and 1 the same and uploads 2.
fn pushed_then_grown(dir: &Path, store: &Arc<FaultStore>) {
    let mut dataset = spelled(dir, "value", FULL * 2);
    let options = TransferOptions::default();
    assert!(
        push(dir, &remote_on(store.clone(), "p"), &options)
            .unwrap()
            .committed
    );
    let records: Vec<(Vec<u8>, Vec<u8>)> = (FULL * 2..FULL * 3)
        .map(|i| {
            (
                format!("k{i:03}").into_bytes(),
                format!("value {i:03}").into_bytes(),
            )
        })
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    assert_eq!(dataset.shards(), 3);
}

#[test]
fn a_shard_replaced_by_one_of_its_size_during_a_push_stops_the_commit() {
    // Another writer (or a gc and a push) puts other bytes of the same size
    // under a shard the push found the same, after it compared them: the last
    // check before the commit knows the object by its ETag and content, not
    // its size, and nothing is committed.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("a");
    let store = FaultStore::new(Arc::new(InMemory::new()), Plan::default());
    pushed_then_grown(&source, &store);
    spelled(&dir.path().join("b"), "VALUE", FULL * 2);
    let other = std::fs::read(dir.path().join("b/000000.bin")).unwrap();
    let before = remote_files(store.inner.as_ref(), "p");
    assert_eq!(other.len(), before["000000.bin"].len());
    assert_ne!(other, before["000000.bin"]);
    store.replan(Plan {
        before_put: Some(("000002.bin".into(), lands("p/000000.bin".into(), other))),
        ..Plan::default()
    });
    let error = push(
        &source,
        &remote_on(store.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(error, RemoteError::Conflict { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("p/000000.bin") && message.contains("replaced during the push"),
        "{message}"
    );
    let after = remote_files(store.inner.as_ref(), "p");
    assert_eq!(after["manifest.json"], before["manifest.json"]);
}

#[test]
fn a_shard_put_again_with_its_own_bytes_during_a_push_is_still_the_same() {
    // The same bytes written again (a killed run's request landing late) give
    // the object another ETag: the content decides, and the push commits.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("a");
    let store = FaultStore::new(Arc::new(InMemory::new()), Plan::default());
    pushed_then_grown(&source, &store);
    let same = std::fs::read(source.join("000000.bin")).unwrap();
    store.replan(Plan {
        before_put: Some(("000002.bin".into(), lands("p/000000.bin".into(), same))),
        ..Plan::default()
    });
    let summary = push(
        &source,
        &remote_on(store.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    assert!(summary.committed);
    let copy = dir.path().join("copy");
    pull(&remote_on(store, "p"), &copy, &TransferOptions::default()).unwrap();
    assert_eq!(files(&copy), files(&source));
}
