//! `bcd_pipeline::Destination`, the one entry point of an ingest for the CLI and
//! Python: a local directory is written in place (and never read by a directory
//! source), a URI is staged, pushed, and appended to by the next ingest.

use std::path::Path;
use std::sync::Arc;

use bcd_pipeline::{Destination, IngestOptions, OnDuplicate, SourceOptions, Staging};
use bcd_remote::{Location, Remote, RemoteDataset, RemoteUri, Scheme};
use object_store::memory::InMemory;

/// A folder of files `name` holding `name` as their bytes.
fn files(dir: &Path, names: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for name in names {
        std::fs::write(dir.join(name), name).unwrap();
    }
}

fn ingest(
    destination: &Destination,
    source: &Path,
    options: &IngestOptions,
) -> bcd_pipeline::IngestSummary {
    let opened = destination
        .open_sources(&[source], &SourceOptions::default())
        .unwrap();
    destination
        .ingest(opened.source, options, &mut |_| {})
        .unwrap()
}

/// `s3://bucket/ds` on `store`, as a client of its own.
fn remote_on(store: &Arc<InMemory>) -> Remote {
    let uri = RemoteUri {
        scheme: Scheme::S3,
        bucket: "bucket".into(),
        prefix: "ds".into(),
    };
    Remote::with_store(uri, store.clone(), Some(store.clone()))
}

#[test]
fn a_local_destination_inside_its_directory_source_never_reads_its_own_files() {
    let dir = tempfile::tempdir().unwrap();
    let photos = dir.path().join("photos");
    files(&photos, &["a.jpg", "b.jpg"]);
    let into = photos.join("ds");
    let destination = Destination::new(Location::Local(into.clone()), Staging::default()).unwrap();
    assert_eq!(destination.local_path(), Some(into.as_path()));
    assert_eq!(destination.to_string(), into.display().to_string());

    let first = ingest(&destination, &photos, &IngestOptions::default());
    assert!(first.created);
    assert_eq!(first.records, 2);
    // Again over the same folder, which now holds the dataset's files: only the
    // two photos are seen, both as duplicates.
    let skip = IngestOptions {
        on_duplicate: OnDuplicate::Skip,
        ..IngestOptions::default()
    };
    let second = ingest(&destination, &photos, &skip);
    assert_eq!(
        (second.created, second.records, second.skipped),
        (false, 0, 2)
    );
    let dataset = bcd::Dataset::open(&into).unwrap();
    assert_eq!(dataset.len(), 2);
    assert_eq!(
        dataset.get(b"a.jpg").unwrap().as_deref(),
        Some(&b"a.jpg"[..])
    );
}

#[test]
fn a_remote_destination_commits_in_object_storage_and_the_next_ingest_appends() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(InMemory::new());
    files(&dir.path().join("day1"), &["a.jpg", "b.jpg"]);
    files(&dir.path().join("day2"), &["b.jpg", "c.jpg"]);
    let destination = |staging: Staging| Destination::Remote {
        remote: remote_on(&store),
        staging,
    };

    let first = destination(Staging::default());
    assert_eq!(first.local_path(), None);
    assert_eq!(first.to_string(), "s3://bucket/ds");
    let summary = ingest(&first, &dir.path().join("day1"), &IngestOptions::default());
    assert!(summary.created);
    assert_eq!(summary.records, 2);

    // Staged in a kept directory this time: pulled first, so b.jpg is known.
    let staging = dir.path().join("staging");
    let second = destination(Staging {
        dir: Some(staging.clone()),
    });
    let skip = IngestOptions {
        on_duplicate: OnDuplicate::Skip,
        ..IngestOptions::default()
    };
    let summary = ingest(&second, &dir.path().join("day2"), &skip);
    assert_eq!(
        (summary.created, summary.records, summary.skipped),
        (false, 1, 1)
    );
    assert!(staging.join(bcd::format::MANIFEST_NAME).exists());

    let remote = RemoteDataset::open(remote_on(&store)).unwrap();
    assert_eq!(remote.len(), 3);
    let mut keys = Vec::new();
    remote
        .for_each_key(|_, key| {
            keys.push(key.to_vec());
            Ok(true)
        })
        .unwrap();
    assert_eq!(
        keys,
        [b"a.jpg".to_vec(), b"b.jpg".to_vec(), b"c.jpg".to_vec()]
    );
    assert_eq!(remote.value(2).unwrap(), b"c.jpg");
}
