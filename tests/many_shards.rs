//! Datasets of tens of thousands of tiny shards (`max_shard_size` of 1: a shard
//! per record) extend, open and read: a shard costs no memory mapping until it is
//! read, and a small one none at all (the kernel allows about 65,000 mappings
//! per process, and each shard used to take two). And an extend whose shards
//! cannot be loaded after its commit says it was committed. Issue 15, item 7.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bcd::storage::{FileSystem, Storage, StorageFile};
use bcd::{Compression, CreateOptions, Dataset};

/// The file system without fsync: durability is not what this test is about, and
/// 68,000 fsyncs would make it slow.
#[derive(Debug)]
struct NoSync;

struct Unsynced(Box<dyn StorageFile>);

impl io::Write for Unsynced {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl StorageFile for Unsynced {
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Storage for NoSync {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(Unsynced(FileSystem.create(path)?)))
    }
    fn sync_dir(&self, _: &Path) -> io::Result<()> {
        Ok(())
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

/// Memory mappings of this process.
#[cfg(target_os = "linux")]
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

#[test]
fn an_extend_of_34000_one_record_shards_commits_and_reopens() {
    const RECORDS: usize = 34_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    // Keyed, so the commit also indexes the keys of 34,000 shards.
    let options = CreateOptions {
        keyed: true,
        compression: Compression::None,
        max_shard_size: 1,
    };
    let mut dataset = Dataset::create_with_storage(&path, options, Arc::new(NoSync)).unwrap();
    let keys: Vec<Vec<u8>> = (0..RECORDS).map(|i| format!("k{i}").into_bytes()).collect();
    let values: Vec<Vec<u8>> = (0..RECORDS).map(|i| format!("v{i}").into_bytes()).collect();
    let summary = dataset.extend(keys.iter().zip(&values)).unwrap();
    assert_eq!(summary.shards, RECORDS as u64);
    assert_eq!(dataset.len(), RECORDS);
    assert_eq!(
        dataset.get(b"k33999").unwrap().as_deref(),
        Some(&b"v33999"[..])
    );
    drop(dataset);

    #[cfg(target_os = "linux")]
    let before = mappings();
    let dataset = Dataset::open(&path).unwrap();
    for (i, value) in values.iter().enumerate() {
        assert_eq!(&*dataset.at(i).unwrap(), &value[..], "record {i}");
    }
    assert_eq!(
        dataset.get(b"k17000").unwrap().as_deref(),
        Some(&b"v17000"[..])
    );
    // Every shard was read, and none of them is mapped.
    #[cfg(target_os = "linux")]
    assert!(
        mappings() < before + 100,
        "{} mappings",
        mappings() - before
    );
}

#[test]
fn shard_data_is_the_bytes_read_and_outlives_the_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let options = CreateOptions {
        keyed: false,
        compression: Compression::None,
        max_shard_size: 1 << 20,
    };
    let mut dataset = Dataset::create(&path, options).unwrap();
    let values: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 100 << 10]).collect();
    dataset.extend_values(&values).unwrap();
    drop(dataset);
    let dataset = Dataset::open(&path).unwrap();
    assert!(dataset.shards() >= 4);
    // Shard data outlives the handle, and is the same bytes as a borrowed read.
    let location = dataset.value_location(39).unwrap();
    let data = dataset.shard_data(location.shard).unwrap();
    let at = dataset.at(39).unwrap().as_ptr();
    drop(dataset);
    let start = location.offset as usize;
    assert_eq!(&data[start..start + location.len as usize], &values[39][..]);
    assert_eq!(data[start..].as_ptr(), at);
}

#[test]
fn verify_reports_a_shard_that_changed_after_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let options = CreateOptions {
        keyed: false,
        compression: Compression::None,
        max_shard_size: 4,
    };
    let mut dataset = Dataset::create(&path, options).unwrap();
    dataset.extend_values([b"abcd", b"efgh"]).unwrap();
    let dataset = Dataset::open(&path).unwrap();
    assert!(dataset.verify().is_empty());
    let dataset = Dataset::open(&path).unwrap();
    // Not loaded yet: opening checked the size only.
    let shard = path.join("000001.bin");
    std::fs::write(&shard, b"efghij").unwrap();
    let problems: Vec<String> = dataset.verify().iter().map(|e| e.to_string()).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains(&shard.display().to_string()) && problems[0].contains("changed"),
        "{problems:?}"
    );
    assert_eq!(&*dataset.at(0).unwrap(), b"abcd");
    assert!(dataset.at(1).is_err());
}

/// The file system, except that once the manifest is renamed into place (the
/// commit), the next directory fsync also removes `lost`: the committed shard
/// then cannot be loaded by the handle that wrote it.
#[derive(Debug)]
struct LoseAfterCommit {
    lost: PathBuf,
    committed: AtomicBool,
}

impl Storage for LoseAfterCommit {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        FileSystem.create(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if self.committed.load(Ordering::SeqCst) {
            std::fs::remove_file(&self.lost)?;
        }
        FileSystem.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.rename(from, to)?;
        self.committed
            .store(to.ends_with("manifest.json"), Ordering::SeqCst);
        Ok(())
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

#[test]
fn a_commit_whose_shards_cannot_be_loaded_reports_it_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let options = CreateOptions {
        keyed: false,
        compression: Compression::None,
        max_shard_size: 1,
    };
    Dataset::create(&path, options).unwrap();
    let storage = LoseAfterCommit {
        lost: path.join("000001.idx"),
        committed: AtomicBool::new(false),
    };
    let mut dataset = Dataset::open_with_storage(&path, Arc::new(storage)).unwrap();
    let error = dataset.extend_values([b"a", b"b"]).unwrap_err();
    assert!(
        matches!(error, bcd::Error::CommittedNotLoaded { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("was committed") && message.contains("do not retry"),
        "{message}"
    );
    // The manifest counts both shards: the extend was done, not rolled back.
    assert_eq!(Dataset::open(&path).unwrap_err().to_string(), {
        let missing = path.join("000001.idx");
        format!(
            "{}: missing shard file (the manifest counts 2 shards)",
            missing.display()
        )
    });
    assert!(path.join("000000.bin").exists() && path.join("000001.bin").exists());
}
