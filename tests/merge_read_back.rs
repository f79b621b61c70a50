//! Nothing a merge commits fails to read back (issue 20): the commit file its
//! hook hands over (the merged schema and metadata) is read back from disk
//! before the manifest moves; a disk that tore it fails the merge naming the
//! file, and the target and the part are left as they were.

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use bcd::storage::{FileSystem, Storage, StorageFile};
use bcd::{CreateOptions, Dataset, MergeCommitInput, MergeOptions, PartSource};
use bcd_test_support::read_all;

/// A disk that silently loses the second half of every write to commit files,
/// and reports success.
#[derive(Debug)]
struct TornCommitFiles;

struct TornFile(Box<dyn StorageFile>);

impl Write for TornFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(&buf[..buf.len() / 2])?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl StorageFile for TornFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync()
    }
}

impl Storage for TornCommitFiles {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = FileSystem.create(path)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        Ok(match name.starts_with("commit.") {
            true => Box::new(TornFile(file)),
            false => file,
        })
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        FileSystem.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        FileSystem.remove(path)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.hard_link(from, to)
    }
    fn copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.copy(from, to)
    }
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        FileSystem.remove_dir(dir)
    }
}

fn keyed(dir: &Path, tag: &str) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        ..CreateOptions::default()
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..5)
        .map(|i| (format!("{tag}{i}").into_bytes(), b"value".to_vec()))
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    dataset
}

#[test]
fn a_merged_commit_file_that_does_not_read_back_is_never_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let (target, part) = (tmp.path().join("target"), tmp.path().join("part"));
    let before = read_all(&keyed(&target, "t"));
    let part_records = read_all(&keyed(&part, "p"));
    let manifest = std::fs::read(target.join("manifest.json")).unwrap();

    let mut dataset = Dataset::open_with_storage(&target, Arc::new(TornCommitFiles)).unwrap();
    let hook = |_: &MergeCommitInput<'_>| -> Result<Option<Vec<u8>>, bcd::HookError> {
        Ok(Some(br#"{"schema": "of the merged state"}"#.to_vec()))
    };
    let options = MergeOptions {
        commit_file: Some(&hook),
        ..MergeOptions::default()
    };
    let error = dataset
        .merge(&[PartSource::new(&part)], &options)
        .unwrap_err();

    let mut message = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(next) = cause {
        message += &format!(": {next}");
        cause = next.source();
    }
    assert!(message.contains("commit.000002.json"), "{message}");
    assert!(
        message.contains("other bytes than were written"),
        "{message}"
    );
    assert_eq!(
        std::fs::read(target.join("manifest.json")).unwrap(),
        manifest
    );
    assert_eq!(read_all(&Dataset::open(&target).unwrap()), before);
    assert_eq!(read_all(&Dataset::open(&part).unwrap()), part_records);
    assert!(!target.join("commit.000002.json").exists());
}
