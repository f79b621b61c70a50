//! Directories and datasets as values a test can compare.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use bcd::Dataset;

/// A record as `(key, value)`; the key is empty in keyless datasets.
pub type Record = (Vec<u8>, Vec<u8>);

/// Every file of a dataset directory, by name. A dataset directory holds only
/// files: anything else (a subdirectory, a socket) fails the test.
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| {
            let entry = entry.unwrap();
            assert!(
                entry.file_type().unwrap().is_file(),
                "unexpected {:?}: a snapshot holds only files",
                entry.path()
            );
            let name = entry.file_name().into_string().unwrap();
            (name, fs::read(entry.path()).unwrap())
        })
        .collect()
}

/// Every file under `dir`, at any depth, by path relative to `dir`; `None` if
/// `dir` does not exist (so "nothing was created" compares as a value).
pub fn tree_snapshot(dir: &Path) -> Option<BTreeMap<PathBuf, Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let bytes = fs::read(&path).unwrap();
                out.insert(path.strip_prefix(root).unwrap().to_owned(), bytes);
            }
        }
    }
    if !dir.exists() {
        return None;
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    Some(out)
}

/// The paths of a [`tree_snapshot`], as text for messages and comparisons.
pub fn snapshot_names(snapshot: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    snapshot
        .keys()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// Every record of `dataset`, in order, read by position (keys empty when keyless).
pub fn read_all(dataset: &Dataset) -> Vec<Record> {
    (0..dataset.len())
        .map(|i| {
            let key = if dataset.keyed() {
                dataset.key_at(i).unwrap().to_vec()
            } else {
                Vec::new()
            };
            (key, dataset.at(i).unwrap().into_owned())
        })
        .collect()
}
