//! The file-system operations a writer performs, behind a small trait so tests can
//! inject failures at any write or fsync and simulate a crash by keeping only what
//! was durable. Reading does not go through it: readers open and map files directly.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// A file being written.
pub trait StorageFile: Write + Send {
    /// Makes everything written so far durable (`fsync`).
    fn sync(&mut self) -> io::Result<()>;
}

/// Where a writer's files go. [`FileSystem`] is the real one.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Creates `path`, truncating any file already there.
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Makes the directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file; a missing file is not an error.
    fn remove(&self, path: &Path) -> io::Result<()>;
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileSystem;

struct OsFile(File);

impl Write for OsFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl StorageFile for OsFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }
}

impl Storage for FileSystem {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(OsFile(file)))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}
