//! A special file (a FIFO, a directory) in place of a dataset file is an error
//! naming it, never a read that blocks: opening a FIFO for reading waits for a
//! writer that never comes (issue 14, item 9).
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use bcd::storage::FileSystem;
use bcd::{Compression, CreateOptions, Dataset, OpenOptions};

/// Only a hang detector: an open that blocks never returns at all.
const HANG: Duration = Duration::from_secs(60);

/// A keyed dataset of two shards, with its persisted index written.
fn dataset(dir: &Path) -> PathBuf {
    let path = dir.join("d");
    let options = CreateOptions {
        keyed: true,
        compression: Compression::None,
        max_shard_size: 8,
    };
    let mut dataset = Dataset::create(&path, options).unwrap();
    dataset
        .extend([(b"a", b"value-a"), (b"b", b"value-b")])
        .unwrap();
    let always = OpenOptions {
        index_file_min_records: Some(1),
        ..OpenOptions::default()
    };
    let reopened = Dataset::open_with(&path, always, Arc::new(FileSystem)).unwrap();
    assert!(reopened.uses_index_file());
    path
}

fn replace_with_fifo(path: &Path) {
    std::fs::remove_file(path).unwrap();
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Opens `path` on another thread; fails the test if that blocks.
/// The error and its causes, joined by ": " as a front end shows them: the
/// message names the file, its cause says what it is.
fn chain(error: &bcd::Error) -> String {
    let mut text = error.to_string();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        text.push_str(&format!(": {cause}"));
        next = cause.source();
    }
    text
}

fn open(path: &Path) -> Result<Dataset, Box<bcd::Error>> {
    let (send, receive) = mpsc::channel();
    let path = path.to_owned();
    thread::spawn(move || {
        let _ = send.send(Dataset::open(&path).map_err(Box::new));
    });
    receive
        .recv_timeout(HANG)
        .expect("opening the dataset blocked")
}

#[test]
fn a_fifo_in_place_of_a_shard_or_the_manifest_is_an_error_naming_it() {
    for name in ["000000.bin", "000000.idx", "000001.bin", "manifest.json"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dataset(dir.path());
        let fifo = path.join(name);
        replace_with_fifo(&fifo);
        let error = chain(&open(&path).expect_err(name));
        assert!(
            error.contains(&fifo.display().to_string()) && error.contains("not a regular file"),
            "{name}: {error}"
        );
        assert!(error.contains("a FIFO"), "{name}: {error}");
    }
}

#[test]
fn a_fifo_in_place_of_the_persisted_index_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    replace_with_fifo(&path.join(".bcd-index"));
    let dataset = open(&path).unwrap();
    assert!(!dataset.uses_index_file());
    assert_eq!(dataset.get(b"b").unwrap().as_deref(), Some(&b"value-b"[..]));
}

#[test]
fn a_directory_in_place_of_a_shard_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dataset(dir.path());
    let shard = path.join("000001.idx");
    std::fs::remove_file(&shard).unwrap();
    std::fs::create_dir(&shard).unwrap();
    let error = chain(&open(&path).unwrap_err());
    assert!(
        error.contains(&shard.display().to_string()) && error.contains("a directory"),
        "{error}"
    );
}
