//! Push, pull and gc against `object_store`'s in-memory store (which implements
//! conditional puts, user metadata and multipart uploads like the cloud stores),
//! with faults and a concurrent writer injected at chosen requests.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bcd::{Compression, Dataset};
use bcd_remote::{gc, pull, push, GcOptions, RemoteError, TransferOptions};
use common::*;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// Names of the objects under `prefix/`, at any depth, relative to it.
fn objects(memory: &InMemory, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let mut names: Vec<String> = block_on(
        memory
            .list(Some(&ObjectPath::from(prefix)))
            .map_ok(|m| m.location.as_ref()[prefix.len() + 1..].to_owned())
            .try_collect(),
    )
    .unwrap();
    names.sort();
    names
}

fn object(memory: &InMemory, name: &str) -> Vec<u8> {
    block_on(async {
        memory
            .get(&ObjectPath::from(name))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec()
    })
}

#[test]
fn push_then_pull_reproduces_every_committed_file() {
    let dir = tempfile::tempdir().unwrap();
    for (n, (keyed, compression, records, shard_size)) in [
        (true, Compression::Lz4, 200, 1500),
        (false, Compression::None, 150, 700),
        (true, Compression::None, 0, 1 << 30),
        (false, Compression::Lz4, 1, 1 << 30),
    ]
    .into_iter()
    .enumerate()
    {
        let source = dir.path().join(format!("source{n}"));
        let dataset = dataset(&source, keyed, compression, records, shard_size);
        // A leftover of an interrupted local write is not part of the state.
        std::fs::write(source.join(format!("{:06}.bin", dataset.shards())), b"junk").unwrap();
        let memory = Arc::new(InMemory::new());
        let remote = memory_remote(memory.clone(), &format!("data/set{n}"));
        let summary = push(&source, &remote, &TransferOptions::default()).unwrap();
        assert!(summary.committed);
        assert_eq!(summary.shards, dataset.shards());

        let copy = dir.path().join(format!("copy{n}"));
        let pulled = pull(&remote, &copy, &TransferOptions::default()).unwrap();
        assert!(pulled.committed);
        let mut expected = files(&source);
        expected.remove(&format!("{:06}.bin", dataset.shards()));
        assert_eq!(files(&copy), expected, "case {n}");
        // The remote holds the same names (the leftover was not uploaded).
        let mut names: Vec<String> = expected.keys().cloned().collect();
        names.sort();
        assert_eq!(objects(&memory, &format!("data/set{n}")), names);

        let reopened = Dataset::open(&copy).unwrap();
        assert_eq!(
            bcd_test_support::read_all(&reopened),
            bcd_test_support::read_all(&dataset)
        );
        // Nothing left to do either way.
        let again = push(&source, &remote, &TransferOptions::default()).unwrap();
        assert_eq!((again.files, again.committed), (0, false));
        let again = pull(&remote, &copy, &TransferOptions::default()).unwrap();
        assert_eq!((again.files, again.committed), (0, false));
    }
}

#[test]
fn appends_are_pushed_and_pulled_incrementally() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::Lz4, 100, 1000);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&source, &remote, &TransferOptions::default()).unwrap();
    let copy = dir.path().join("copy");
    pull(&remote, &copy, &TransferOptions::default()).unwrap();
    let shards_before = dataset.shards();

    append(&mut dataset, 100..180);
    let summary = push(&source, &remote, &TransferOptions::default()).unwrap();
    assert!(summary.committed);
    // Only the new shards, their sidecars and the new commit file travel.
    let new_files = (dataset.shards() - shards_before) * 3 + 1;
    assert_eq!(summary.files, new_files);
    let pulled = pull(&remote, &copy, &TransferOptions::default()).unwrap();
    assert_eq!(pulled.files, new_files);
    assert_eq!(files(&copy), files(&source));
}

#[test]
fn large_files_go_in_parts_and_come_back_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    dataset(&source, false, Compression::None, 300, 1 << 30);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    let options = TransferOptions {
        multipart_threshold: 1000,
        part_size: 512,
        concurrency: 3,
        ..TransferOptions::default()
    };
    push(&source, &remote, &options).unwrap();
    let copy = dir.path().join("copy");
    pull(&remote, &copy, &options).unwrap();
    assert_eq!(files(&copy), files(&source));
    // Each object carries its checksum, parts or not.
    let bin = std::fs::read(source.join("000000.bin")).unwrap();
    assert!(bin.len() > 1000);
    let stamp = bcd_remote::Remote::stamp(&remote, "000000.bin");
    let stamp = block_on(stamp).unwrap();
    assert_eq!(stamp.xxh3, Some(xxhash_rust::xxh3::xxh3_64(&bin)));
    // No journal entry remains once the uploads completed.
    assert!(!objects(&memory, "p")
        .iter()
        .any(|n| n.starts_with(".bcd-uploads")));
}

#[test]
fn a_concurrent_writer_wins_and_the_push_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::Lz4, 50, 1000);
    let memory = Arc::new(InMemory::new());
    push(
        &source,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    append(&mut dataset, 50..90);

    // Between this push's read of the manifest and its commit, another writer
    // commits its own manifest.
    let theirs = br#"{"keyed": true, "compression": "lz4", "max_shard_size": 1000, "shards": 0}"#;
    let plan = Plan {
        before_manifest: Some(Box::new(move |store: &InMemory| {
            futures::executor::block_on(store.put(
                &ObjectPath::from("p/manifest.json"),
                PutPayload::from_static(theirs),
            ))
            .unwrap();
        })),
        ..Plan::default()
    };
    let store = FaultStore::new(memory.clone(), plan);
    let error = push(&source, &remote_on(store, "p"), &TransferOptions::default()).unwrap_err();
    assert!(matches!(error, RemoteError::Conflict { .. }), "{error}");
    assert!(error.to_string().contains("another writer"), "{error}");
    assert_eq!(object(&memory, "p/manifest.json"), theirs);

    // A push that finds the remote created meanwhile fails the same way.
    let fresh = dir.path().join("fresh");
    dataset_with_two(&fresh);
    let plan = Plan {
        before_manifest: Some(Box::new(move |store: &InMemory| {
            futures::executor::block_on(store.put(
                &ObjectPath::from("q/manifest.json"),
                PutPayload::from_static(theirs),
            ))
            .unwrap();
        })),
        ..Plan::default()
    };
    let store = FaultStore::new(memory.clone(), plan);
    let error = push(&fresh, &remote_on(store, "q"), &TransferOptions::default()).unwrap_err();
    assert!(error.to_string().contains("created the dataset"), "{error}");
    assert_eq!(object(&memory, "q/manifest.json"), theirs);
}

fn dataset_with_two(dir: &std::path::Path) {
    dataset(dir, true, Compression::Lz4, 2, 1 << 30);
}

#[test]
fn an_interrupted_push_leaves_the_old_state_and_a_rerun_completes() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::Lz4, 60, 800);
    let memory = Arc::new(InMemory::new());
    push(
        &source,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    let old_manifest = object(&memory, "p/manifest.json");
    append(&mut dataset, 60..200);

    for writes in [0, 1, 3, 7] {
        let plan = Plan {
            writes_before_failure: Some(writes),
            fail_aborts: true,
            ..Plan::default()
        };
        let store = FaultStore::new(memory.clone(), plan);
        let options = TransferOptions {
            concurrency: 1,
            multipart_threshold: 600,
            part_size: 256,
            ..TransferOptions::default()
        };
        let error = push(&source, &remote_on(store, "p"), &options).unwrap_err();
        assert!(error.to_string().contains("failed"), "{error}");
        // The remote reads as before: the old manifest, its files intact.
        assert_eq!(object(&memory, "p/manifest.json"), old_manifest);
        let copy = dir.path().join(format!("copy{writes}"));
        pull(
            &memory_remote(memory.clone(), "p"),
            &copy,
            &TransferOptions::default(),
        )
        .unwrap();
        assert_eq!(Dataset::open(&copy).unwrap().len(), 60);
    }
    // Killed multipart uploads are journaled (the kill aborted nothing).
    assert!(objects(&memory, "p")
        .iter()
        .any(|n| n.starts_with(".bcd-uploads/")));

    let summary = push(
        &source,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    assert!(summary.committed);
    assert!(
        summary.skipped > 0,
        "what the interrupted runs uploaded is kept"
    );
    assert!(!objects(&memory, "p")
        .iter()
        .any(|n| n.starts_with(".bcd-uploads/")));
    let copy = dir.path().join("final");
    pull(
        &memory_remote(memory.clone(), "p"),
        &copy,
        &TransferOptions::default(),
    )
    .unwrap();
    assert_eq!(files(&copy), files(&source));
}

#[test]
fn an_interrupted_pull_leaves_the_local_state_and_a_rerun_completes() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    dataset(&source, false, Compression::Lz4, 120, 600);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&source, &remote, &TransferOptions::default()).unwrap();

    // An interrupt after a few files: nothing committed locally.
    let copy = dir.path().join("copy");
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = flag.clone();
    let options = TransferOptions {
        concurrency: 1,
        interrupt: Some(flag.clone()),
        progress: Some(Arc::new(move |bytes| {
            if bytes > 2000 {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        })),
        ..TransferOptions::default()
    };
    let error = pull(&remote, &copy, &options).unwrap_err();
    assert!(matches!(error, RemoteError::Interrupted), "{error}");
    assert!(Dataset::open(&copy).is_err(), "no manifest was written");
    let partial = files(&copy).len();
    assert!(partial > 0);

    let summary = pull(&remote, &copy, &TransferOptions::default()).unwrap();
    assert!(summary.skipped as usize >= partial - 1, "{summary:?}");
    assert_eq!(files(&copy), files(&source));
}

#[test]
fn a_remote_that_differs_is_refused_naming_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    dataset(&a, true, Compression::Lz4, 30, 1 << 30);
    dataset(&b, false, Compression::Lz4, 30, 1 << 30);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&a, &remote, &TransferOptions::default()).unwrap();
    let error = push(&b, &remote, &TransferOptions::default()).unwrap_err();
    assert!(error.to_string().contains("settings"), "{error}");
    let error = pull(&remote, &b, &TransferOptions::default()).unwrap_err();
    assert!(error.to_string().contains("settings differ"), "{error}");

    // The same settings but other records: the committed shard differs in size.
    let c = dir.path().join("c");
    let mut other = dataset(&c, true, Compression::Lz4, 0, 1 << 30);
    other
        .extend([(b"zz".as_slice(), b"other".as_slice())])
        .unwrap();
    let error = push(&c, &remote, &TransferOptions::default()).unwrap_err();
    assert!(error.to_string().contains("different datasets"), "{error}");

    // Not a dataset at all.
    let error = pull(
        &memory_remote(memory, "nothing"),
        &dir.path().join("n"),
        &TransferOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(error, RemoteError::NotADataset { .. }), "{error}");
}

#[test]
fn gc_removes_leftovers_past_the_grace_period_only() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::Lz4, 40, 700);
    let memory = Arc::new(InMemory::new());
    push(
        &source,
        &memory_remote(memory.clone(), "p"),
        &TransferOptions::default(),
    )
    .unwrap();
    let committed = objects(&memory, "p");
    append(&mut dataset, 40..120);
    let plan_killed = Plan {
        writes_before_failure: Some(4),
        fail_aborts: true,
        ..Plan::default()
    };
    let options = TransferOptions {
        concurrency: 1,
        multipart_threshold: 500,
        part_size: 200,
        ..TransferOptions::default()
    };
    // A push that stops after two uploads, then one whose multipart upload is
    // killed (its abort fails too): a journaled upload is left.
    let plan = Plan {
        writes_before_failure: Some(2),
        ..Plan::default()
    };
    let small = TransferOptions {
        concurrency: 1,
        ..TransferOptions::default()
    };
    push(
        &source,
        &remote_on(FaultStore::new(memory.clone(), plan), "p"),
        &small,
    )
    .unwrap_err();
    let store = FaultStore::new(memory.clone(), plan_killed);
    push(&source, &remote_on(store, "p"), &options).unwrap_err();
    assert!(objects(&memory, "p")
        .iter()
        .any(|n| n.starts_with(".bcd-uploads/")));
    let with_leftovers = objects(&memory, "p");
    assert!(with_leftovers.len() > committed.len());

    // Young leftovers are kept (they may be a push in progress).
    let remote = memory_remote(memory.clone(), "p");
    let kept = gc(&remote, &GcOptions::default()).unwrap();
    assert!(kept.removed.is_empty());
    assert_eq!(objects(&memory, "p"), with_leftovers);
    let dry = gc(
        &remote,
        &GcOptions {
            grace: std::time::Duration::ZERO,
            dry_run: true,
        },
    )
    .unwrap();
    assert!(!dry.removed.is_empty());
    assert_eq!(objects(&memory, "p"), with_leftovers);
    let done = gc(
        &remote,
        &GcOptions {
            grace: std::time::Duration::ZERO,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(done.removed, dry.removed);
    assert_eq!(done.aborted_uploads, 1);
    assert_eq!(objects(&memory, "p"), committed);
}

#[test]
fn an_uncommitted_object_of_other_content_stops_the_push_until_gc_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::Lz4, 40, 700);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&source, &remote, &TransferOptions::default()).unwrap();
    let shards = dataset.shards();
    let old_manifest = object(&memory, "p/manifest.json");
    append(&mut dataset, 40..120);
    // What an interrupted push of other data left: the next shard's name, taken.
    let next = format!("{shards:06}.bin");
    let foreign = vec![7u8; std::fs::metadata(source.join(&next)).unwrap().len() as usize];
    block_on(memory.put(
        &ObjectPath::from(format!("p/{next}")),
        PutPayload::from(foreign.clone()),
    ))
    .unwrap();

    let error = push(&source, &remote, &TransferOptions::default()).unwrap_err();
    assert!(matches!(error, RemoteError::Conflict { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&next), "{message}");
    // The advice names the command and flag that exist.
    assert!(
        message.contains("`bcd gc s3://bucket/p --older-than 0s`"),
        "{message}"
    );
    assert_eq!(object(&memory, "p/manifest.json"), old_manifest);
    assert_eq!(object(&memory, &format!("p/{next}")), foreign);

    let removed = gc(
        &remote,
        &GcOptions {
            grace: std::time::Duration::ZERO,
            dry_run: false,
        },
    )
    .unwrap();
    assert_eq!(removed.removed, vec![next]);
    assert!(
        push(&source, &remote, &TransferOptions::default())
            .unwrap()
            .committed
    );
    let copy = dir.path().join("copy");
    pull(&remote, &copy, &TransferOptions::default()).unwrap();
    assert_eq!(files(&copy), files(&source));
}

#[test]
fn a_pull_checks_each_file_against_the_checksum_its_read_answers_with() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    dataset(&source, true, Compression::Lz4, 200, 1500);
    let store = FaultStore::new(Arc::new(InMemory::new()), Plan::default());
    let remote = remote_on(store.clone(), "p");
    push(&source, &remote, &TransferOptions::default()).unwrap();

    // A clean pull reads each file once, its checksum with it: no HEAD.
    let heads = store.heads.load(Ordering::SeqCst);
    let copy = dir.path().join("copy");
    pull(&remote, &copy, &TransferOptions::default()).unwrap();
    assert_eq!(store.heads.load(Ordering::SeqCst), heads);
    assert_eq!(files(&copy), files(&source));

    // An object whose bytes no longer match the checksum stored with it (same
    // size, its metadata kept): the pull stops, naming it, and commits nothing.
    let name = ObjectPath::from("p/000001.bin");
    let (mut bytes, attributes) = block_on(async {
        let read = store.inner.get(&name).await.unwrap();
        let attributes = read.attributes.clone();
        (read.bytes().await.unwrap().to_vec(), attributes)
    });
    bytes[10] ^= 0xff;
    block_on(store.inner.put_opts(
        &name,
        PutPayload::from(bytes),
        object_store::PutOptions {
            attributes,
            ..Default::default()
        },
    ))
    .unwrap();
    let other = dir.path().join("other");
    let error = pull(&remote, &other, &TransferOptions::default()).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("000001.bin") && message.contains("checksum"),
        "{message}"
    );
    assert!(!other.join("manifest.json").exists());
    // The directory the pull created is gone again, the bad shard with it.
    assert!(!other.exists(), "{:?}", files(&other));
    // Into a directory that was there: the bad file is not left behind either.
    std::fs::create_dir(&other).unwrap();
    pull(&remote, &other, &TransferOptions::default()).unwrap_err();
    assert!(!other.join("000001.bin").exists(), "{:?}", files(&other));
}

#[test]
fn a_pull_replaces_a_leftover_link_to_another_datasets_shard_instead_of_writing_through_it() {
    // A killed merge leaves hard links to its parts' shards past the target's
    // shard count; a pull that then fetches those shard numbers must not write
    // the remote's bytes into the part's committed files (issue 20, item 15).
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mut dataset = dataset(&source, true, Compression::Lz4, 100, 1000);
    let memory = Arc::new(InMemory::new());
    let remote = memory_remote(memory.clone(), "p");
    push(&source, &remote, &TransferOptions::default()).unwrap();
    let copy = dir.path().join("copy");
    pull(&remote, &copy, &TransferOptions::default()).unwrap();
    let next = dataset.shards();
    append(&mut dataset, 100..180);
    push(&source, &remote, &TransferOptions::default()).unwrap();

    let other = dir.path().join("other");
    let other_dataset = common::dataset(&other, true, Compression::Lz4, 30, 1000);
    let other_files = files(&other);
    for ext in ["bin", "idx"] {
        std::fs::hard_link(
            other.join(format!("000000.{ext}")),
            copy.join(format!("{next:06}.{ext}")),
        )
        .unwrap();
    }
    pull(&remote, &copy, &TransferOptions::default()).unwrap();
    assert_eq!(files(&copy), files(&source));
    assert_eq!(
        files(&other),
        other_files,
        "the other dataset's shard was written through"
    );
    drop(other_dataset);
}

/// A shard larger than the writeback step (8 MiB: downloads start writing to
/// disk as the bytes arrive) pulls byte for byte, read in one stream and read
/// in ranges written at their offsets.
#[test]
fn a_shard_past_the_writeback_step_pulls_byte_for_byte_streamed_and_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let options = bcd::CreateOptions {
        keyed: false,
        compression: Compression::None,
        max_shard_size: 1 << 30,
    };
    let mut dataset = Dataset::create(&source, options).unwrap();
    let mut rng = bcd_test_support::Rng::new(7);
    let values: Vec<Vec<u8>> = (0..20).map(|_| rng.bytes(1 << 20)).collect();
    dataset
        .extend_values(values.iter().map(|v| &v[..]))
        .unwrap();
    assert!(std::fs::metadata(dataset.shard_data_path(0)).unwrap().len() > 16 << 20);
    let remote = memory_remote(Arc::new(InMemory::new()), "p");
    push(&source, &remote, &TransferOptions::default()).unwrap();
    let ranges = TransferOptions {
        multipart_threshold: 5 << 20,
        part_size: 5 << 20,
        ..TransferOptions::default()
    };
    for (name, options) in [("streamed", TransferOptions::default()), ("ranges", ranges)] {
        let copy = dir.path().join(name);
        pull(&remote, &copy, &options).unwrap();
        assert!(files(&copy) == files(&source), "{name}");
    }
}
