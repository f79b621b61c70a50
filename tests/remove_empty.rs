//! `Dataset::remove_empty`: how a run that created a dataset and then failed
//! leaves the directory as it found it, and never removes committed records.

use std::fs;

use bcd::{CreateOptions, Dataset, Error};

fn keyed() -> CreateOptions {
    CreateOptions {
        keyed: true,
        ..Default::default()
    }
}

#[test]
fn an_empty_dataset_and_the_directory_it_made_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new");
    let dataset = Dataset::create(&path, keyed()).unwrap();
    // Leftovers of a failed extend: an uncommitted shard pair and a lock file.
    fs::write(path.join("000000.bin"), b"partial").unwrap();
    fs::write(path.join("000000.idx"), b"").unwrap();
    fs::write(path.join(".bcd.lock"), b"").unwrap();
    dataset.remove_empty(true).unwrap();
    assert!(!path.exists());
}

#[test]
fn a_directory_that_existed_is_kept_empty() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = Dataset::create(dir.path(), keyed()).unwrap();
    dataset.remove_empty(false).unwrap();
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn records_another_writer_committed_meanwhile_are_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let created = Dataset::create(&path, keyed()).unwrap();
    let mut other = Dataset::open(&path).unwrap();
    other.extend([(b"k", b"v")]).unwrap();
    let before: Vec<_> = {
        let mut names: Vec<_> = fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    match created.remove_empty(true) {
        Err(Error::NotEmpty { shards: 1, .. }) => {}
        other => panic!("expected NotEmpty, got {other:?}"),
    }
    let mut after: Vec<_> = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    after.sort();
    assert_eq!(before, after);
    assert_eq!(
        &*Dataset::open(&path).unwrap().get(b"k").unwrap().unwrap(),
        b"v"
    );
}

#[test]
fn a_dataset_another_writer_is_extending_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let created = Dataset::create(&path, keyed()).unwrap();
    let mut other = Dataset::open(&path).unwrap();
    let extend = other.begin_extend().unwrap();
    match created.remove_empty(true) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(path.join("manifest.json").exists());
    drop(extend);
}
